"""The rehearsal server node: the openpi server of the dress rehearsal, fed by the WidowX twin's privileged state."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from ladder_ros_interfaces import msg as interfaces
from rclpy.node import Node
from sensor_msgs.msg import JointState

from ladder_ros.core.errors import LadderError
from ladder_ros.core.rotations import matrix_to_euler_xyz
from ladder_ros.core.task import Task
from ladder_ros.messages import ActionTagDoc, EpisodeStatus, PrivilegedStateDoc, SchemaError
from ladder_ros.specs import topics
from ladder_ros.instruments.specs import REHEARSAL_SERVER
from ladder_ros.runtime.endpoints import message_class, publisher, received_document, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.policies.factory import load_policy
from ladder_ros.instruments.fault_inbox import FaultInbox
from ladder_ros.instruments.faults import SERVER_ERROR, SERVER_STALL, InstrumentFault
from ladder_ros.instruments.rehearsal.server import InferenceLatency, RehearsalPolicy, serve
from ladder_ros.instruments.expert.noise import expert_noise
from ladder_ros.policies.state import top_down_pose
from ladder_ros.robots import wx250s
from ladder_ros.ros_conversions import diagnostics_to_msg
from ladder_ros.instruments.widowx_twin.motors import finger_stroke_s


class RehearsalServerNode(Node):
    """Serves :class:`~ladder_ros.instruments.rehearsal.server.RehearsalPolicy` at the policy config's address.

    The expert of each episode is built from the episode's task and seed (``episode/status``), as the
    scripted expert is in simulation, and reads the twin's ``sim/privileged_state`` of that episode; the
    policy node sees only an openpi server (docs/rehearsal.md).

    Topics: subscribes ``episode/status``, ``sim/privileged_state``, ``robot/joint_command`` (the WidowX
    driver's applied commands: the arm's target as soon as it is commanded, stamped when applied),
    ``policy/action_tag`` (when the policy node handed out each command), ``instruments/fault`` (the
    rehearsal's chaos: ``server_error`` and ``server_stall``, :mod:`ladder_ros.instruments.faults`); publishes
    ``/diagnostics`` (requests, warm-ups, holds by reason, inference time, injected faults) and
    ``instruments/fault_applied``.
    Parameters: ``REHEARSAL_SERVER`` in :mod:`ladder_ros.instruments.specs` (policy, inference_delay_ms (ms),
    latency_model, jitter_ms (ms), noise, privileged_wait_s (s), gripper_pressure, preset, clock_mode).
    """

    def __init__(self, *, node_name: str = "rehearsal_server", **node_options):
        super().__init__(node_name, **node_options)
        p = self.params = declare_parameters(self, REHEARSAL_SERVER)
        self.config = load_policy(p["policy"])
        latency = InferenceLatency(p["latency_model"], p["inference_delay_ms"], p["jitter_ms"])
        self.policy = RehearsalPolicy(self.config, expert_noise(p["noise"]), delay_ms=p["inference_delay_ms"],
                                      jitter_ms=p["jitter_ms"], latency=latency, wait_s=p["privileged_wait_s"],
                                      finger_stroke_s=finger_stroke_s(p["gripper_pressure"]),
                                      now_ns=lambda: self.get_clock().now().nanoseconds)
        self.server = serve(self.policy, metadata={"inference_delay_ms": p["inference_delay_ms"],
                                                   "jitter_ms": p["jitter_ms"], "latency": latency.describe()})
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)
        subscription(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED, self._on_privileged)
        self._chain = None
        if not self.policy.sweeps and self.config.embodiment.startswith("widowx"):
            # The driver's applied commands, for the expert's target (RehearsalPolicy.set_commanded_target).
            self._chain = wx250s.chain()
            subscription(self, JointState, topics.JOINT_COMMAND, self._on_joint_command)
            subscription(self, message_class(topics.ACTION_TAG), topics.ACTION_TAG, self._on_action_tag)
        self._episode_id: str | None = None
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end)
        self.create_timer(1.0, self._publish_diagnostics)
        self.fault_inbox = FaultInbox(self, {SERVER_ERROR: self._fail, SERVER_STALL: self._stall})
        self.get_logger().info(f"rehearsal server for policy {self.config.name} on {self.config.server.uri}: the "
                               f"scripted expert ({p['noise']} noise), inference {latency.describe()}")

    def _fail(self, fault: InstrumentFault) -> str:
        self.policy.fail_for(fault.duration_s)
        return f"every request answered with an error for {fault.duration_s:g} s"

    def _stall(self, fault: InstrumentFault) -> str:
        self.policy.stall_for(fault.duration_s)
        return f"the server blocked for {fault.duration_s:g} s from its next request"

    def _on_episode_start(self, status: EpisodeStatus) -> None:
        self._episode_id = status.episode_id
        try:
            self.policy.set_episode(status.episode_id, Task.from_dict(status.task or {}), status.seed)
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            self.get_logger().error(f"episode {status.episode_id}: no expert for it: {exc}")

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        self._episode_id = None
        self.policy.set_episode(None)

    def _on_action_tag(self, msg: interfaces.ActionTag) -> None:
        """A command the policy node handed out: when (the expert's target and its steps follow the handouts)."""
        doc = received_document(self, msg, ActionTagDoc, "action tag")
        if doc is not None and doc.episode_id == self._episode_id and not doc.held:
            self.policy.note_handout(doc.stamp_ns)

    def _on_privileged(self, msg: interfaces.PrivilegedState) -> None:
        doc = received_document(self, msg, PrivilegedStateDoc, "privileged state")
        if doc is None:
            return
        try:
            self.policy.set_privileged(doc.episode_id, doc.privileged_state(), doc.target_position_array())
        except SchemaError as exc:
            self.get_logger().error(f"ignoring privileged state: {exc}")

    def _on_joint_command(self, msg: JointState) -> None:
        """The arm's commanded joints (every joint, by name) through the WX250s' kinematics: its target."""
        goals = dict(zip(msg.name, msg.position))
        if self._chain is None or not all(name in goals for name in wx250s.JOINT_NAMES):
            return
        joints = np.array([goals[name] for name in wx250s.JOINT_NAMES], dtype=np.float64)
        if np.all(np.isfinite(joints)):
            applied_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            pose = self._chain.forward(joints)
            euler = matrix_to_euler_xyz(pose[:3, :3] @ top_down_pose(self.config.embodiment).T)
            self.policy.set_commanded_target(pose[:3, 3], applied_ns or None, euler)

    def _publish_diagnostics(self) -> None:
        stats = self.policy.stats()
        self._diagnostics_pub.publish(diagnostics_to_msg(
            f"{self.get_fully_qualified_name()}: rehearsal server", self.config.name, "ok", "serving",
            {**stats, "connections": self.server.connections}, self.get_clock().now().nanoseconds))

    def close(self) -> None:
        self.server.stop()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("rehearsal_server", RehearsalServerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
