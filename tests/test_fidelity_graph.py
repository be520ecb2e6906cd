"""What the graph publishes about the robot and the camera, and the policy's convention in the graph.

One episode of the built-in tabletop through the real nodes in one executor: every image comes
with a ``camera/camera_info`` holding the simulator camera's intrinsics (same stamp, same frame),
``ee_pose`` carries the simulator's own base-frame orientation, and a policy node told to act in
another rotation convention still reproduces the reference loop step for step.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the built-in tabletop needs MuJoCo (requirements/core.txt)")

import rclpy  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from ladder_ros.bringup.client import EpisodeClient  # noqa: E402
from ladder_ros.core.presets import WIDOWX  # noqa: E402
from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.evaluation.components import make_policy  # noqa: E402
from ladder_ros.evaluation.reference_loop import run_episode  # noqa: E402
from ladder_ros.evaluation.parity import compare_records  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.runtime.endpoints import subscription  # noqa: E402
from ladder_ros.nodes.sim_bridge.node import SimBridgeNode  # noqa: E402
from ladder_ros.nodes.vlm_verifier import VerifierNode  # noqa: E402
from ladder_ros.paths import share_path  # noqa: E402
from ladder_ros.ros_conversions import intrinsics_from_camera_info, pose_from_msg, stamp_to_ns  # noqa: E402
from ladder_ros.sim.mujoco_tabletop import MujocoTabletop  # noqa: E402

pytestmark = pytest.mark.ros

NS = "fidelity"
SUITE = load_suite(share_path("config", "suites", "tabletop.yaml"))


class KeepingObservations:
    """The tabletop, keeping every observation it hands out (what the bridge had to publish)."""

    def __init__(self, sim: MujocoTabletop):
        self.sim = sim
        self.name, self.control_rate_hz = sim.name, sim.control_rate_hz
        self.observations = []

    def reset(self, task, layout, seed):
        self.observations = [self.sim.reset(task, layout, seed)]
        return self.observations[-1]

    def step(self, action):
        self.observations.append(self.sim.step(action))
        return self.observations[-1]

    def camera_intrinsics(self):
        return self.sim.camera_intrinsics()

    def close(self):
        self.sim.close()


class Listener(Node):
    def __init__(self):
        super().__init__("fidelity_listener", namespace=NS)
        self.images, self.infos, self.poses = {}, {}, {}
        subscription(self, Image, topics.IMAGE, lambda m: self.images.setdefault(stamp_to_ns(m.header.stamp), m))
        subscription(self, CameraInfo, topics.CAMERA_INFO,
                     lambda m: self.infos.setdefault(stamp_to_ns(m.header.stamp), m))
        subscription(self, PoseStamped, topics.EE_POSE, lambda m: self.poses.setdefault(stamp_to_ns(m.header.stamp), m))


def test_camera_info_ee_pose_and_the_policys_convention_in_the_graph():
    rclpy.init()
    simulator = KeepingObservations(MujocoTabletop(SUITE, render=True, image_size=64))
    try:
        nodes = [SimBridgeNode(simulator=simulator, suite=SUITE, namespace=NS), GripperTriggerNode(namespace=NS),
                 OrchestratorNode(suite=SUITE, namespace=NS),
                 PolicyNode(namespace=NS, parameter_overrides=[Parameter("rotation_convention",
                                                                         value="sxyz_axis_angle")]),
                 VerifierNode(namespace=NS), Listener()]
        client = EpisodeClient(namespace=NS)
        executor = SingleThreadedExecutor()
        for node in [*nodes, client]:
            executor.add_node(node)
        client.wait_for_graph(executor, timeout_s=20)
        outcome = client.run_episode(executor, "kitchen_single_1", variant="privileged_verifier", layout=2, seed=2,
                                     timeout_s=120)
        listener = nodes[-1]
        for _ in range(40):  # the last step's messages may still be in flight
            executor.spin_once(timeout_sec=0.05)
        task = SUITE.task("kitchen_single_1")
        reference_sim = MujocoTabletop(SUITE, render=False)
        policy = make_policy("scripted_expert", task, 2, "bridge_like", "sxyz_axis_angle")
        reference = run_episode(reference_sim, policy, task, "privileged_verifier", WIDOWX, layout=2,
                                seed=2).to_dict()
        reference_sim.close()
        assert compare_records(reference, outcome.result) is None
        assert reference["action_convention"]["rotation"] == "sxyz_axis_angle"

        steps = outcome.result["steps_used"] + 1
        # images and camera info are best effort (sensor data): allow a lost message on a loaded machine
        assert min(len(listener.images), len(listener.infos)) >= steps - 2
        assert len(set(listener.infos) & set(listener.images)) >= steps - 4
        intrinsics = simulator.camera_intrinsics()
        for stamp, info in listener.infos.items():
            image = listener.images.get(stamp)
            assert info.header.frame_id == "camera_color_optical_frame"
            assert image is None or image.header.frame_id == info.header.frame_id
            assert (info.width, info.height) == (64, 64) and intrinsics_from_camera_info(info) == intrinsics
            assert list(info.d) == [0.0] * 5 and info.distortion_model == "plumb_bob"
        assert len(listener.poses) == steps
        for observation, stamp in zip(simulator.observations, sorted(listener.poses)):
            position, quaternion = pose_from_msg(listener.poses[stamp])
            np.testing.assert_array_equal(position, observation.ee_position)
            np.testing.assert_allclose(quaternion, observation.ee_quaternion, atol=1e-15)
        for node in [*nodes, client]:
            node.destroy_node()
    finally:
        simulator.close()
        rclpy.shutdown()
