"""The robot mode: the same nodes on the wall clock, fed by a stand-in driver (in one executor).

A probe plays the robot driver: it publishes joint states (with the gripper aperture) and the
end-effector pose at the control rate, closing the gripper for a few steps and opening it again.
The gripper trigger samples them at 5 Hz, the orchestrator advances on its attempt ends, the policy
acts on the newest observation and holds still once the joint states stop.
"""

import math

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

import rclpy  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from ladder_ros.bringup.client import EpisodeClient  # noqa: E402
from ladder_ros.core.presets import WIDOWX  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.runtime.endpoints import qos  # noqa: E402
from ladder_ros.ros_conversions import joint_state_to_msg, pose_to_msg  # noqa: E402
from tests.fakes import ToyPolicy  # noqa: E402

pytestmark = pytest.mark.ros
NS = "robot"


class StandInDriver(Node):
    """Publishes at 10 Hz a gripper that closes for 1 s and opens for 1 s (5 trigger steps each); counts actions."""

    def __init__(self):
        super().__init__("driver", namespace=NS)
        self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
        self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
        self.create_subscription(JointTrajectory, topics.ACTION.name, lambda m: self.actions.append(m),
                                 qos(topics.STREAM))
        self.actions = []
        self.tick = 0
        self.running = True
        self.create_timer(0.1, self._publish)
        # The graph's control clock as this executor runs it: a timer at the nodes' control rate.
        self.control_ticks = 0
        self.create_timer(1.0 / WIDOWX.control_rate_hz, self._count_control_tick)

    def _count_control_tick(self):
        self.control_ticks += 1

    def _publish(self):
        if not self.running:
            return
        stamp = self.get_clock().now().nanoseconds
        aperture = 0.1 if (self.tick // 10) % 2 == 1 else 1.0
        self.tick += 1
        self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), aperture, stamp, "gripper_aperture"))
        self.pose.publish(pose_to_msg(np.array([0.3, 0.0, 0.1]), np.array([1.0, 0.0, 0.0, 0.0]), stamp, "base_link"))


def test_wall_clock_graph_advances_on_gripper_releases_and_holds_still_without_input():
    rclpy.init()
    wall = [Parameter("clock_mode", value="wall_clock")]
    try:
        driver = StandInDriver()
        nodes = [GripperTriggerNode(namespace=NS, parameter_overrides=wall),
                 # ends the episode after the last subgoal's release, so it ends well before the budget
                 OrchestratorNode(namespace=NS, parameter_overrides=wall + [
                     Parameter("preset_options", value=["after_last_subgoal=end"])]),
                 PolicyNode(namespace=NS, parameter_overrides=wall, reads=frozenset(),
                            policy_factory=lambda task, seed: ToyPolicy(task, seed))]
        client = EpisodeClient(namespace=NS)
        executor = SingleThreadedExecutor()
        for node in [driver, *nodes, client]:
            executor.add_node(node)
        client.wait_for_graph(executor, timeout_s=20)
        # the episode ends by the plan or, at the latest, by its step budget at the control rate
        budget_s = WIDOWX.budget.steps_for(2) / WIDOWX.control_rate_hz
        outcome = client.run_episode(executor, "kitchen_single_2", variant="proprio_trigger", timeout_s=budget_s + 30)
        kinds = [(e["kind"], e.get("reason")) for e in outcome.result["events"]]
        assert ("attempt_ended", "release") in kinds
        assert outcome.result["finish_reason"] == "plan_exhausted"
        assert outcome.result["scored"] is False  # no simulator: no privileged score on a robot
        assert len(driver.actions) > 3  # the policy acted on the wall clock
        # A second episode, then the driver goes silent: the policy must stop commanding motion.
        acted = len(driver.actions)
        episode = client.start_episode("kitchen_single_2", variant="proprio_verifier")
        client.spin_until(executor, lambda: client.status.episode_id == episode, 30, "the episode")
        client.spin_until(executor, lambda: len(driver.actions) > acted, 30, "the policy acting in it")
        driver.running = False
        # Counted in control ticks of this executor, which runs the policy's timer at the same rate:
        # past max_observation_age_s the newest observation is stale; from then on, over five more
        # ticks at which the policy would have acted, it must not act.
        policy_params = nodes[2].params
        stale_after = math.ceil(policy_params["max_observation_age_s"] * WIDOWX.control_rate_hz) + 1
        silent_from = driver.control_ticks
        client.spin_until(executor, lambda: driver.control_ticks >= silent_from + stale_after, 60, "stale observations")
        count = len(driver.actions)
        held_from = driver.control_ticks
        client.spin_until(executor, lambda: driver.control_ticks >= held_from + 5, 60, "five control ticks")
        assert len(driver.actions) == count
        for node in [driver, *nodes, client]:
            node.destroy_node()
        assert not nodes[2].control.thread.is_alive()  # destroying the policy node stops its control thread
    finally:
        rclpy.shutdown()
