"""The policy's state vector has one definition: the same end-effector pose gives the same numbers whether the
observation came from a simulator or was rebuilt from a robot's joint_states and ee_pose, and the Bridge layout
gives what the public Bridge clients send (``mat2euler(R_ee @ DEFAULT_ROT.T)``, a zero pad, the gripper)."""

from __future__ import annotations

import numpy as np
import pytest

from ladder_ros.core.rotations import (
    euler_xyz_to_matrix,
    matrix_to_euler_xyz,
    matrix_to_quaternion,
    quaternion_to_matrix,
)
from ladder_ros.policies.config import parse_policy_config
from ladder_ros.policies.factory import load_policy
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder
from ladder_ros.policies.state import FRANKA_TOP_DOWN, WIDOWX_TOP_DOWN, top_down_pose
from ladder_ros.robots import wx250s
from tests.policy_fixtures import config_data

pytest.importorskip("rclpy", reason="the robot path reads ROS messages (requirements/ros.txt)")

from ladder_ros.core.observation import Observation  # noqa: E402
from ladder_ros.messages import PrivilegedStateDoc  # noqa: E402
from ladder_ros.ros_conversions import joint_state_to_msg, observation_from_msgs, pose_to_msg  # noqa: E402

APERTURE = "gripper_aperture"


def robot_path(position, rotation, aperture, embodiment, joints=("j",)):
    """The observation the policy node rebuilds from a robot driver's joint_states and ee_pose."""
    names = tuple(joints)
    joint_state = joint_state_to_msg(names, np.zeros(len(names)), aperture, 7, APERTURE)
    pose = pose_to_msg(np.asarray(position), matrix_to_quaternion(rotation), 7, "base_link")
    return observation_from_msgs(3, joint_state, pose, APERTURE, embodiment=embodiment)


def lockstep_path(observation: Observation, embodiment: str, frame_rotation) -> Observation:
    """The observation the policy node rebuilds in simulation: the simulator's ee_pose (its own frame) with its
    exact ee_euler riding along in the privileged document."""
    joint_state = joint_state_to_msg(observation.joint_names, observation.joint_positions, observation.aperture, 7,
                                     APERTURE)
    pose = pose_to_msg(observation.ee_position, matrix_to_quaternion(frame_rotation), 7, "base_link")
    doc = PrivilegedStateDoc.of("e", 3, 7, observation.privileged, (), observation.ee_euler,
                                observation.target_position)
    return observation_from_msgs(3, joint_state, pose, APERTURE, privileged=doc, embodiment=embodiment)


def state_config(embodiment: str, reference: str, angles: str, joints: int = 0):
    data = config_data(embodiment=embodiment, control_rate_hz=5 if embodiment == "widowx" else 15, state=[
        {"key": "observation/state", "source": "ee_position"},
        {"key": "observation/state", "source": "ee_euler", "reference": reference, "angles": angles},
        {"key": "observation/state", "source": "zeros", "size": 1},
        {"key": "observation/state", "source": "gripper_open"}])
    return parse_policy_config(data, source="state.yaml")


def random_rotations(n: int, seed: int) -> list[np.ndarray]:
    """``n`` rotations uniform on SO(3) (normalised Gaussian quaternions)."""
    from transforms3d.quaternions import quat2mat

    quaternions = np.random.default_rng(seed).normal(size=(n, 4))
    return [quat2mat(q / np.linalg.norm(q)) for q in quaternions]


@pytest.mark.parametrize("reference, angles", [("top_down", "sxyz"), ("top_down", "euler_xyz"), ("base", "sxyz"),
                                               ("base", "euler_xyz")])
def test_the_tabletop_and_the_widowx_give_the_same_state_for_the_same_gripper_pose(reference, angles):
    """The built-in tabletop's tool frame is not the WidowX's ee_gripper_link (its identity points the fingers
    down); the state is the robot's all the same, for poses the tabletop really reached."""
    pytest.importorskip("mujoco", reason="the simulator path runs the built-in MuJoCo tabletop")
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    backend = MujocoTabletop(suite, render=False)
    encoder = ObservationEncoder(state_config("widowx", reference, angles))
    try:
        observation = backend.reset(suite.task("kitchen_single_1"), 0, 0)
        compared, turned = 0, 0.0
        for turn in ([0.3, 0.0, 0.0], [0.0, -0.25, 0.0], [0.0, 0.0, 0.4], [-0.2, 0.2, -0.3]):
            for _ in range(3):
                observation = backend.step(np.array([0.0, 0.0, 0.01, *turn, 1.0]) / np.array([1, 1, 1, 3, 3, 3, 1]))
            tool = quaternion_to_matrix(observation.ee_quaternion)  # the tabletop tool frame's base orientation
            gripper_link = tool @ WIDOWX_TOP_DOWN  # what the real arm's ee_pose carries for the same gripper pose
            robot = robot_path(observation.ee_position, gripper_link, observation.aperture, "widowx")
            np.testing.assert_allclose(encoder.state(robot), encoder.state(observation), atol=1e-9)
            # and through the lockstep graph (the simulator's own frame in ee_pose, exact ee_euler alongside)
            rebuilt = lockstep_path(observation, "widowx", tool)
            np.testing.assert_allclose(encoder.state(rebuilt), encoder.state(observation), atol=1e-9)
            compared += 1
            turned = max(turned, float(np.abs(observation.ee_euler).max()))
        assert compared == 4 and turned > 0.2  # the gripper really turned
    finally:
        backend.close()


@pytest.mark.parametrize("embodiment, top_down", [("widowx", WIDOWX_TOP_DOWN), ("franka", FRANKA_TOP_DOWN)])
def test_the_same_pose_gives_the_same_state_in_simulation_and_on_the_robot(embodiment, top_down):
    """Poses of both arms: a simulator reports ``ee_euler`` against the top-down pose of the arm it simulates
    (ManiSkill's ``R @ TOP_DOWN_REFERENCE.T``); the robot's driver publishes the base-frame orientation."""
    rate_joints = {"widowx": 6, "franka": 7}[embodiment]
    encoder = ObservationEncoder(state_config(embodiment, "top_down", "sxyz"))
    base_encoder = ObservationEncoder(state_config(embodiment, "base", "euler_xyz"))
    rng = np.random.default_rng(5)
    for rotation in random_rotations(20, seed=11):
        position, aperture = rng.uniform(-0.5, 0.5, 3), float(rng.uniform())
        simulated = Observation(step=3, image=None, aperture=aperture, ee_position=position,
                                ee_euler=matrix_to_euler_xyz(rotation @ top_down.T),
                                joint_names=tuple(f"j{i}" for i in range(rate_joints)),
                                joint_positions=np.zeros(rate_joints), ee_quaternion=matrix_to_quaternion(rotation))
        robot = robot_path(position, rotation, aperture, embodiment, simulated.joint_names)
        np.testing.assert_allclose(encoder.state(robot), encoder.state(simulated), atol=1e-9)
        np.testing.assert_allclose(base_encoder.state(robot), base_encoder.state(simulated), atol=1e-9)
        # reference base reads the robot's own base-frame orientation
        np.testing.assert_allclose(euler_xyz_to_matrix(base_encoder.state(robot)[3:6]), rotation, atol=1e-9)


def test_the_bridge_config_sends_what_the_bridge_clients_compute_for_100_random_orientations():
    """``policies/bridge_pi0_server.yaml`` against the formula of SimplerEnv's openpi Bridge client
    (simpler_env/policies/openpi/pi0_or_fast.py): xyz, ``mat2euler(quat2mat(q) @ default_rot.T)`` with
    transforms3d's default static xyz axes, a zero, the gripper opening; 8 numbers."""
    from transforms3d.euler import mat2euler
    from transforms3d.quaternions import quat2mat

    default_rot = np.array([[0, 0, 1.0], [0, 1.0, 0], [-1.0, 0, 0]])  # the clients' constant, as they write it
    config = load_policy("bridge_pi0_server")
    encoder = ObservationEncoder(config)
    image = np.zeros((480, 640, 3), dtype=np.uint8)
    rng = np.random.default_rng(2)
    for rotation in random_rotations(100, seed=3):
        position, aperture = rng.uniform([0.1, -0.3, 0.0], [0.5, 0.3, 0.4]), float(rng.uniform())
        quaternion = matrix_to_quaternion(rotation)
        robot = robot_path(position, rotation, aperture, "widowx", wx250s.JOINT_NAMES)
        request = encoder.openpi_request(ObservationBundle(robot, 7, {"primary": image}), "put the carrot on the plate")
        expected = np.concatenate([position, mat2euler(quat2mat(quaternion) @ default_rot.T), [0.0], [aperture]])
        assert sorted(request) == ["observation/primary_image", "observation/state", "prompt"]
        assert request["observation/state"].shape == (8,)
        np.testing.assert_allclose(request["observation/state"], expected, atol=1e-9)


def test_at_the_widowx_neutral_pose_the_bridge_state_is_small_not_near_gimbal_lock():
    """The Bridge collection's reset pose: about (-0.04, -0.13, 0.03) relative to the top-down gripper, where the
    base-frame Euler XYZ reading (what the robot path used to send) is (-0.19, 1.44, 0.16)."""
    pose = wx250s.chain().forward(np.array(wx250s.NEUTRAL_JOINTS))
    robot = robot_path(pose[:3, 3], pose[:3, :3], 1.0, "widowx", wx250s.JOINT_NAMES)
    bridge = ObservationEncoder(load_policy("bridge_pi0_server")).state(robot)
    np.testing.assert_allclose(bridge[3:6], [-0.0399, -0.1272, 0.0252], atol=1e-4)
    base = ObservationEncoder(state_config("widowx", "base", "euler_xyz")).state(robot)
    np.testing.assert_allclose(base[3:6], [-0.1943, 1.4411, 0.1560], atol=1e-4)


def test_the_top_down_poses_match_the_simulators_and_unknown_embodiments_are_refused():
    np.testing.assert_array_equal(top_down_pose("widowx"), WIDOWX_TOP_DOWN)
    np.testing.assert_allclose(WIDOWX_TOP_DOWN @ WIDOWX_TOP_DOWN.T, np.eye(3))
    np.testing.assert_allclose(FRANKA_TOP_DOWN @ FRANKA_TOP_DOWN.T, np.eye(3))
    assert np.linalg.det(WIDOWX_TOP_DOWN) == pytest.approx(1.0)
    assert np.linalg.det(FRANKA_TOP_DOWN) == pytest.approx(1.0)
    from ladder_ros.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"no top-down gripper pose is known for embodiment 'ur5' \(known: franka, "
                                          r"widowx, widowx_robotarena\)$"):
        top_down_pose("ur5")
    try:
        from ladder_ros.sim.maniskill_bridge import TOP_DOWN_REFERENCE
    except ImportError as exc:  # pragma: no cover - the ManiSkill module imports without ManiSkill itself
        pytest.skip(f"ladder_ros.sim.maniskill_bridge does not import here: {exc}")
    np.testing.assert_array_equal(TOP_DOWN_REFERENCE, WIDOWX_TOP_DOWN)
