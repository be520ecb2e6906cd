"""A tiny random policy: a test-side stand-in for the learned policy node, in the robots' action layouts.

Run as a node named ``policy`` in a robot graph (``python -m tests.random_policy --ros-args ...``).
While an episode runs it publishes one action per control period on ``policy/action``, stamped
now: small random motions plus a gripper cycle (open, close, open) so an attempt ends the way the
paper's trigger reads it; on the Franka the arm also lifts during the close (the trigger's 3 cm
rule). WidowX: the 7-D end-effector delta (``ee_dx .. gripper``). Franka: seven joint targets
around the measured joints plus DROID's ``gripper_position`` (0 open, 1 closed). It holds still
(publishes nothing) when it has no fresh joint state, like a real policy node.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ladder_ros.core.presets import get_preset
from ladder_ros.core.safety import ACTION_AXES
from ladder_ros.messages import RUNNING, EpisodeStatus, SchemaError
from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, qos
from ladder_ros.interface_conversions import document_from_msg
from ladder_ros.ros_conversions import joint_state_from_msg, ns_to_stamp

FRANKA_AXES = (*(f"panda_joint{i}" for i in range(1, 8)), "gripper_position")
OPEN_STEPS, CLOSED_STEPS_WIDOWX, CLOSED_STEPS_FRANKA = 5, 8, 26


class RandomPolicy(Node):
    def __init__(self) -> None:
        super().__init__("policy")
        self.preset = get_preset(self.declare_parameter("preset", "widowx").value)
        self.franka = self.preset.name == "franka"
        self.rng = np.random.default_rng(int(self.declare_parameter("seed", 0).value))
        self.pub = self.create_publisher(JointTrajectory, topics.ACTION.name, qos(topics.STREAM))
        self.create_subscription(JointState, topics.JOINT_STATES.name, self._on_joints, qos(topics.STREAM))
        self.create_subscription(message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS.name, self._on_status,
                                 qos(topics.LATCHED))
        self.joints: tuple[float, np.ndarray] | None = None
        self.target: np.ndarray | None = None
        self.running = False
        self.step = 0
        self.create_timer(1.0 / self.preset.control_rate_hz, self._act)

    def _on_joints(self, msg: JointState) -> None:
        _, positions, _ = joint_state_from_msg(msg, "gripper_aperture")
        self.joints = (time.monotonic(), positions)

    def _on_status(self, msg) -> None:
        try:
            status = document_from_msg(msg, EpisodeStatus)
        except SchemaError:
            return
        running = status.state == RUNNING
        if running and not self.running:
            self.step, self.target = 0, None
        self.running = running

    def _act(self) -> None:
        if not self.running or self.joints is None or time.monotonic() - self.joints[0] > 0.5:
            return
        closed_steps = CLOSED_STEPS_FRANKA if self.franka else CLOSED_STEPS_WIDOWX
        phase = self.step % (OPEN_STEPS + closed_steps + OPEN_STEPS)
        closed = OPEN_STEPS <= phase < OPEN_STEPS + closed_steps
        self.step += 1
        msg = JointTrajectory()
        msg.header.stamp = ns_to_stamp(self.get_clock().now().nanoseconds)
        point = JointTrajectoryPoint()
        if self.franka:
            if self.target is None:
                self.target = self.joints[1].copy()
            self.target = self.target + self.rng.uniform(-0.002, 0.002, size=7)
            if closed:
                self.target[1] -= 0.004  # tilt the shoulder back: the hand rises about 2 mm a step
            msg.joint_names = list(FRANKA_AXES)
            point.positions = [*map(float, self.target), 1.0 if closed else 0.0]
        else:
            delta = self.rng.uniform(-0.005, 0.005, size=3)
            msg.joint_names = list(ACTION_AXES)
            point.positions = [*map(float, delta), 0.0, 0.0, 0.0, -1.0 if closed else 1.0]
        msg.points = [point]
        self.pub.publish(msg)


def main(args=None) -> int:
    rclpy.init(args=args)
    node = RandomPolicy()
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
