"""Round trips between ROS messages and numpy/core types (ladder_ros/ros_conversions.py)."""

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from ladder_ros.core.errors import InvalidInputError  # noqa: E402
from ladder_ros.core.goals import GoalState  # noqa: E402
from ladder_ros.core.rotations import (  # noqa: E402
    euler_xyz_to_matrix,
    matrix_to_quaternion,
    quaternion_to_matrix,
    rotation_angle_between,
    sxyz_to_matrix,
)
from ladder_ros.messages import EpisodeCommand, PrivilegedStateDoc  # noqa: E402
from ladder_ros.ros_conversions import (  # noqa: E402
    ACTION_AXES,
    action_from_msg,
    action_to_msg,
    document_from_msg,
    document_to_msg,
    image_from_msg,
    image_to_msg,
    joint_state_from_msg,
    joint_state_to_msg,
    ns_to_stamp,
    observation_from_msgs,
    pose_from_msg,
    pose_to_msg,
    stamp_to_ns,
)
from ladder_ros.sim.base import ObjectPose, PrivilegedState  # noqa: E402

pytestmark = pytest.mark.ros


def test_stamps():
    for ns in (0, 1, 999_999_999, 1_000_000_000, 1_795_968_317_990_646_888):
        assert stamp_to_ns(ns_to_stamp(ns)) == ns
    with pytest.raises(InvalidInputError):
        ns_to_stamp(-1)


def test_image_round_trip_and_bgr():
    image = np.random.default_rng(1).integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
    msg = image_to_msg(image, 5, "cam")
    assert msg.encoding == "rgb8" and msg.step == 64 * 3 and msg.header.frame_id == "cam"
    assert np.array_equal(image_from_msg(msg), image)
    msg.encoding = "bgr8"
    assert np.array_equal(image_from_msg(msg), image[:, :, ::-1])
    with pytest.raises(InvalidInputError):
        image_to_msg(image.astype(np.float32), 0, "cam")


def test_joint_state_carries_the_aperture_entry():
    positions = np.array([0.1, -0.2, 0.30000000000000004])
    msg = joint_state_to_msg(("a", "b", "c"), positions, 0.625, 7, "gripper_aperture")
    names, back, aperture = joint_state_from_msg(msg, "gripper_aperture")
    assert names == ("a", "b", "c") and np.array_equal(back, positions) and aperture == 0.625
    with pytest.raises(InvalidInputError, match="no 'finger' entry"):
        joint_state_from_msg(msg, "finger")


def test_pose_carries_a_multi_axis_orientation_as_the_simulators_compose_it():
    # A rotation about all three axes at once, where Rx Ry Rz (the simulators, ManiSkill's "XYZ") and
    # Rz Ry Rx differ by 6.1 degrees: the message must carry the first.
    euler = np.array([0.3, 0.2, 0.25])
    rotation = euler_xyz_to_matrix(euler)
    assert rotation_angle_between(rotation, sxyz_to_matrix(euler)) > np.radians(6.0)
    position = np.array([0.3, -0.1, 0.12])
    msg = pose_to_msg(position, matrix_to_quaternion(rotation), 0, "base")
    o = msg.pose.orientation
    scipy_rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    expected = scipy_rotation.from_euler("XYZ", euler).as_quat()  # (x, y, z, w)
    assert np.allclose([o.x, o.y, o.z, o.w], expected, atol=1e-12) or \
        np.allclose([o.x, o.y, o.z, o.w], -expected, atol=1e-12)
    back_position, back_q = pose_from_msg(msg)
    assert np.array_equal(back_position, position)
    assert rotation_angle_between(quaternion_to_matrix(back_q), rotation) < 1e-9
    with pytest.raises(InvalidInputError, match="zero quaternion"):
        pose_to_msg(position, np.zeros(4), 0, "base")


def test_action_round_trip_and_validation():
    action = np.array([0.01, -0.02, 0.03, 0.0, 0.1, -0.1, -1.0])
    msg = action_to_msg(action, 11)
    assert tuple(msg.joint_names) == ACTION_AXES and stamp_to_ns(msg.header.stamp) == 11
    assert np.array_equal(action_from_msg(msg), action)
    msg.joint_names = list(reversed(ACTION_AXES))
    with pytest.raises(InvalidInputError, match="action axes"):
        action_from_msg(msg)
    with pytest.raises(InvalidInputError, match="non-finite"):
        action_to_msg(np.array([np.nan] * 7), 0)


def test_documents_travel_in_strings():
    command = EpisodeCommand(command="start", task_id="kitchen_single_1", seed=3)
    assert document_from_msg(document_to_msg(command), EpisodeCommand) == command


def test_observation_rebuilt_exactly_with_the_privileged_document():
    rng = np.random.default_rng(3)
    euler, target = rng.uniform([-3, -1.5, -3], [3, 1.5, 3]), rng.normal(size=3)
    privileged = PrivilegedState(goal=GoalState(resting={("carrot", "plate"): 1}),
                                 objects={"carrot_0": ObjectPose("carrot", rng.normal(size=3), rng.normal(size=4))})
    doc = PrivilegedStateDoc.of("e", 4, 9, privileged, (True,), euler, target)
    joints = joint_state_to_msg(("j",), np.array([0.5]), 0.25, 9, "gripper_aperture")
    pose = pose_to_msg(np.array([0.1, 0.2, 0.3]), matrix_to_quaternion(euler_xyz_to_matrix(euler)), 9, "base")
    obs = observation_from_msgs(4, joints, pose, "gripper_aperture", privileged=doc)
    assert np.array_equal(obs.ee_euler, euler) and np.array_equal(obs.target_position, target)
    assert obs.aperture == 0.25 and obs.step == 4 and obs.privileged.goal == privileged.goal
    robot = observation_from_msgs(4, joints, pose, "gripper_aperture")
    assert robot.privileged is None
    # on a robot, ee_euler is the Euler XYZ reading of the base-frame orientation the pose carries
    assert rotation_angle_between(euler_xyz_to_matrix(robot.ee_euler), euler_xyz_to_matrix(euler)) < 1e-9
    assert rotation_angle_between(quaternion_to_matrix(robot.ee_quaternion), euler_xyz_to_matrix(euler)) < 1e-9
