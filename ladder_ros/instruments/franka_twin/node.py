"""The Franka twin node: franky-sim on a loopback address, in place of the lab's Franka and its control box.

The Franka's dress rehearsal (docs/rehearsal_franka.md): the Franka driver, unchanged, connects
its franky to ``host`` as it connects to the arm's FCI address, and streams to franky-sim's
simulated FR3 and Franka Hand (:mod:`ladder_ros.instruments.franka_twin.franky_sim_server`). There is no scene: no
object, no privileged state, no score.
"""

from __future__ import annotations

from typing import Sequence

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState

from ladder_ros.core.errors import ConfigError
from ladder_ros.messages import WALL_CLOCK
from ladder_ros.specs import topics
from ladder_ros.instruments.specs import FRANKA_TWIN
from ladder_ros.runtime.endpoints import publisher, qos
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.ros_conversions import diagnostics_to_msg, ns_to_stamp
from ladder_ros.instruments.franka_twin.franky_sim_server import FrankySimServer

SIMULATOR = "franky_sim"
# The simulated arm's own joint states (franky-sim's, not the driver's reading of them): for benchmarks that time
# how long the arm takes to stand still. Not part of the robot graph's interface (the driver publishes joint_states).
TWIN_JOINT_STATES = "twin/joint_states"
JOINT_NAMES = tuple(f"panda_joint{i}" for i in range(1, 8))


class FrankaTwinNode(Node):
    """Serves franky-sim at ``host`` while the node runs; reports its lag behind the wall clock.

    Topics: publishes ``/diagnostics`` once a second (simulated against wall-clock time, the real-time
    factor, whether the loop runs; warn when it has fallen ``behind_warn_s`` behind, error when it stopped)
    and ``twin/joint_states`` (the simulated arm's joints and velocities as franky-sim stepped them, stamped
    when sampled, at ``state_rate_hz``).
    Parameters: ``FRANKA_TWIN`` in :mod:`ladder_ros.instruments.specs` (host, start_joints (rad),
    behind_warn_s (s), state_rate_hz (Hz), loop_nice, preset, clock_mode).
    """

    def __init__(self, *, node_name: str = "franka_twin", **node_options):
        super().__init__(node_name, **node_options)
        p = self.params = declare_parameters(self, FRANKA_TWIN)
        if p["clock_mode"] != WALL_CLOCK:
            raise ConfigError(f"parameter {self.get_name()}.clock_mode: the twin runs on the wall clock, got "
                              f"{p['clock_mode']!r}")
        self.sim = FrankySimServer(p["host"], p["start_joints"], loop_nice=p["loop_nice"] or None).start()
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)
        self._joints_pub = self.create_publisher(JointState, TWIN_JOINT_STATES, qos(topics.STREAM))
        self._published_ns = 0
        self.create_timer(1.0, self._publish_diagnostics)
        self.create_timer(1.0 / p["state_rate_hz"], self._publish_joints)
        self.get_logger().info(f"Franka twin: franky-sim (MuJoCo FR3 and Franka Hand) listening at {self.sim.host}")
        self._said_priority = False

    def _publish_joints(self) -> None:
        joints = self.sim.joints
        if joints is None or joints.stamp_ns == self._published_ns:
            return
        self._published_ns = joints.stamp_ns
        msg = JointState(name=list(JOINT_NAMES), position=list(joints.positions), velocity=list(joints.velocities))
        msg.header.stamp = ns_to_stamp(joints.stamp_ns)
        self._joints_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        stats = self.sim.stats()
        if not self._said_priority and stats["loop_priority"] != "not started":
            self._said_priority = True
            self.get_logger().info(f"franky-sim's loop runs at {stats['loop_priority']}")
        if not stats["running"]:
            level, message = "error", "franky-sim's loop stopped"
        elif stats["behind_s"] > self.params["behind_warn_s"]:
            level, message = "warn", f"franky-sim {stats['behind_s']:.1f} s behind the wall clock"
        else:
            level, message = "ok", "running"
        self._diagnostics_pub.publish(diagnostics_to_msg(f"{self.get_fully_qualified_name()}: twin", SIMULATOR,
                                                         level, message, stats, self.get_clock().now().nanoseconds))

    def close(self) -> None:
        self.sim.stop()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("franka_twin", FrankaTwinNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
