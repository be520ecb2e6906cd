"""The policy node's health on ``/diagnostics``, once a second.

An operator (rqt_robot_monitor, the panel) sees from it whether the policy acts or holds still and why, how
its warm-up goes, and its inference latency and chunk counts; a level of warn while it holds or is not
ready. :class:`PolicyDiagnostics` publishes it from values the acting executor gives.
"""

from __future__ import annotations

from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node

from ladder_ros.policies.warmup import WarmUp
from ladder_ros.ros_conversions import diagnostics_to_msg
from ladder_ros.runtime.endpoints import publisher
from ladder_ros.specs import topics


class PolicyDiagnostics:
    """Publishes the policy node's diagnostics status.

    ``stats()`` gives the acting executor's values and why it holds ("" while it acts): the chunk
    executor's on the wall clock, the lockstep actor's in simulation; ``policy_name()`` names the policy in use.
    """

    def __init__(self, node: Node, policy_name: Callable[[], str], warmup: WarmUp,
                 stats: Callable[[], tuple[dict, str]]):
        self._node = node
        self._policy_name = policy_name
        self._warmup = warmup
        self._stats = stats
        self._pub = publisher(node, DiagnosticArray, topics.DIAGNOSTICS)

    def publish(self) -> None:
        stats, holding = self._stats()
        state, detail, _ = self._warmup.snapshot()
        stats["readiness"] = f"{state}: {detail}" if detail else state
        level = "warn" if holding or not self._warmup.ready else "ok"
        message = holding or ("acting" if self._warmup.ready else stats["readiness"])
        name = self._policy_name()
        self._pub.publish(diagnostics_to_msg(
            f"{self._node.get_fully_qualified_name()}: {name}", name, level, message,
            stats, self._node.get_clock().now().nanoseconds))
