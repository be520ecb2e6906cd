"""Round trips between ROS messages and numpy/core types (ladder_ros/ros_conversions.py)."""

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from sensor_msgs.msg import Image, JointState  # noqa: E402

from ladder_ros.core.errors import InvalidInputError  # noqa: E402
from ladder_ros.core.goals import GoalState  # noqa: E402
from ladder_ros.core.observation import ObjectPose, PrivilegedState  # noqa: E402
from ladder_ros.core.rotations import (  # noqa: E402
    euler_xyz_to_matrix,
    matrix_to_euler_xyz,
    matrix_to_quaternion,
    quaternion_to_matrix,
    rotation_angle_between,
    sxyz_to_matrix,
)
from ladder_ros.messages import PrivilegedStateDoc  # noqa: E402
from ladder_ros.policies.state import top_down_pose  # noqa: E402
from ladder_ros.ros_conversions import (  # noqa: E402
    ACTION_AXES,
    action_from_msg,
    action_to_msg,
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

pytestmark = pytest.mark.ros

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])  # (w, x, y, z)


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


def test_observation_rebuilt_exactly_with_the_privileged_document():
    rng = np.random.default_rng(3)
    euler, target = rng.uniform([-3, -1.5, -3], [3, 1.5, 3]), rng.normal(size=3)
    privileged = PrivilegedState(goal=GoalState(resting={("carrot", "plate"): 1}),
                                 objects={"carrot_0": ObjectPose("carrot", rng.normal(size=3), rng.normal(size=4))})
    doc = PrivilegedStateDoc.of("e", 4, 9, privileged, (True,), euler, target)
    joints = joint_state_to_msg(("j",), np.array([0.5]), 0.25, 9, "gripper_aperture")
    pose = pose_to_msg(np.array([0.1, 0.2, 0.3]), matrix_to_quaternion(euler_xyz_to_matrix(euler)), 9, "base")
    obs = observation_from_msgs(4, joints, pose, "gripper_aperture", privileged=doc, embodiment="widowx")
    assert np.array_equal(obs.ee_euler, euler) and np.array_equal(obs.target_position, target)
    assert obs.aperture == 0.25 and obs.step == 4 and obs.privileged.goal == privileged.goal
    robot = observation_from_msgs(4, joints, pose, "gripper_aperture", embodiment="franka")
    assert robot.privileged is None
    # on a robot, ee_euler is the orientation the pose carries, relative to the embodiment's top-down pose
    relative = euler_xyz_to_matrix(euler) @ top_down_pose("franka").T
    assert rotation_angle_between(euler_xyz_to_matrix(robot.ee_euler), relative) < 1e-9
    assert rotation_angle_between(quaternion_to_matrix(robot.ee_quaternion), euler_xyz_to_matrix(euler)) < 1e-9


def test_image_rows_padded_past_the_pixels_are_read_by_their_step():
    # Cameras may pad each row (e.g. to a multiple of 64 bytes): step is the row length in bytes.
    # A 3 x 5 rgb8 image has 15 bytes of pixels per row; with step 20 each row has 5 bytes of padding.
    pixels = np.arange(3 * 5 * 3, dtype=np.uint8).reshape(3, 5, 3)
    padded = np.full((3, 20), 255, dtype=np.uint8)
    padded[:, :15] = pixels.reshape(3, 15)
    msg = Image(height=3, width=5, encoding="rgb8", step=20, data=padded.tobytes())
    assert np.array_equal(image_from_msg(msg), pixels)
    msg.encoding = "bgr8"
    assert np.array_equal(image_from_msg(msg), pixels[:, :, ::-1])
    msg.step = 14  # shorter than a row of pixels
    with pytest.raises(InvalidInputError, match="too short"):
        image_from_msg(msg)


def test_the_aperture_is_read_from_its_named_entry_wherever_it_is():
    # A driver may list the gripper first (or anywhere): the aperture is the named entry, not the last
    msg = JointState(name=["gripper_aperture", "waist", "shoulder"], position=[0.8, 0.1, -0.4])
    names, positions, aperture = joint_state_from_msg(msg, "gripper_aperture")
    assert names == ("waist", "shoulder") and positions.tolist() == [0.1, -0.4] and aperture == 0.8
    msg = JointState(name=["waist", "gripper_aperture", "shoulder"], position=[0.1, 0.25, -0.4])
    names, positions, aperture = joint_state_from_msg(msg, "gripper_aperture")
    assert names == ("waist", "shoulder") and positions.tolist() == [0.1, -0.4] and aperture == 0.25


def test_stamp_fields():
    stamp = ns_to_stamp(1_500_000_007)
    assert (stamp.sec, stamp.nanosec) == (1, 500_000_007)
    with pytest.raises(InvalidInputError, match="^a time stamp must be >= 0 ns, got -1$"):
        ns_to_stamp(-1)


def test_image_message_fields_and_refusals():
    image = np.zeros((2, 3, 3), dtype=np.uint8)
    msg = image_to_msg(image, 2_000_000_001, "camera_link")
    assert (msg.height, msg.width, msg.step, msg.encoding, msg.is_bigendian) == (2, 3, 9, "rgb8", 0)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (2, 1, "camera_link")
    assert len(msg.data) == 18
    with pytest.raises(InvalidInputError, match=r"^an image is a \(H, W, 3\) uint8 array, got uint8 \(2, 3\)$"):
        image_to_msg(np.zeros((2, 3), dtype=np.uint8), 0, "cam")
    with pytest.raises(InvalidInputError, match=r"^an image is a \(H, W, 3\) uint8 array, got uint8 \(2, 3, 4\)$"):
        image_to_msg(np.zeros((2, 3, 4), dtype=np.uint8), 0, "cam")
    msg.encoding = "mono8"
    with pytest.raises(InvalidInputError, match="^only rgb8 and bgr8 images are read, got 'mono8'$"):
        image_from_msg(msg)
    msg.encoding = "rgb8"
    msg.data = bytes(17)
    with pytest.raises(InvalidInputError, match="^image data too short: 17 bytes for 2 rows of 9$"):
        image_from_msg(msg)


def test_joint_state_message_fields_and_refusals():
    msg = joint_state_to_msg(("waist", "shoulder"), np.array([0.5, -0.25]), 0.75, 3_000_000_000, "gripper_aperture")
    assert list(msg.name) == ["waist", "shoulder", "gripper_aperture"] and list(msg.position) == [0.5, -0.25, 0.75]
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 0)
    with pytest.raises(InvalidInputError, match="^2 joint names for 1 positions$"):
        joint_state_to_msg(("a", "b"), np.array([0.1]), 1.0, 0, "gripper_aperture")
    with pytest.raises(InvalidInputError, match="^joint name 'gripper_aperture' is reserved for the gripper aperture$"):
        joint_state_to_msg(("gripper_aperture",), np.array([0.1]), 1.0, 0, "gripper_aperture")
    bad = JointState(name=["a", "gripper_aperture"], position=[0.1])
    with pytest.raises(InvalidInputError, match="^joint state has 2 names but 1 positions$"):
        joint_state_from_msg(bad, "gripper_aperture")


def test_pose_message_fields():
    msg = pose_to_msg(np.array([0.3, -0.1, 0.12]), IDENTITY, 4_000_000_005, "base_link")
    assert (msg.header.frame_id, msg.header.stamp.sec, msg.header.stamp.nanosec) == ("base_link", 4, 5)
    p, o = msg.pose.position, msg.pose.orientation
    assert (p.x, p.y, p.z) == (0.3, -0.1, 0.12) and (o.w, o.x, o.y, o.z) == (1.0, 0.0, 0.0, 0.0)
    with pytest.raises(InvalidInputError, match="^a zero quaternion has no orientation$"):
        pose_to_msg(np.zeros(3), np.zeros(4), 0, "base_link")
    # an unnormalised quaternion is sent as the same rotation, normalised
    q = matrix_to_quaternion(euler_xyz_to_matrix([0.1, 0.2, 0.3]))
    _, back = pose_from_msg(pose_to_msg(np.zeros(3), 2.0 * q, 0, "base_link"))
    assert np.allclose(back, q, atol=1e-15)


def test_action_message_is_one_point_at_time_zero():
    msg = action_to_msg(np.array([0.01, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]), 5_000_000_006)
    assert len(msg.points) == 1 and list(msg.points[0].positions) == [0.01, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert (msg.points[0].time_from_start.sec, msg.points[0].time_from_start.nanosec) == (0, 0)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (5, 6)
    msg.points = [msg.points[0], msg.points[0]]
    with pytest.raises(InvalidInputError, match="^an action is one trajectory point, got 2$"):
        action_from_msg(msg)


def test_observation_with_an_image_and_without_privileged_extras():
    image = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    joints = joint_state_to_msg(("j",), np.array([0.5]), 0.25, 9, "gripper_aperture")
    pose = pose_to_msg(np.array([0.1, 0.2, 0.3]), matrix_to_quaternion(euler_xyz_to_matrix([0.0, 0.0, 0.5])), 9, "base")
    privileged = PrivilegedStateDoc.of("e", 4, 9, PrivilegedState(goal=GoalState()), (False,), None, None)
    obs = observation_from_msgs(4, joints, pose, "gripper_aperture", image=image_to_msg(image, 9, "cam"),
                                privileged=privileged, embodiment="widowx")
    assert np.array_equal(obs.image, image) and obs.joint_names == ("j",) and obs.joint_positions.tolist() == [0.5]
    # no exact ee_euler in the document: read from the pose, relative to the WidowX's top-down gripper
    relative = euler_xyz_to_matrix([0.0, 0.0, 0.5]) @ top_down_pose("widowx").T
    assert np.array_equal(obs.ee_position, [0.1, 0.2, 0.3])
    assert np.allclose(euler_xyz_to_matrix(obs.ee_euler), relative)
    assert obs.target_position is None and obs.privileged.goal == GoalState()
    assert observation_from_msgs(4, joints, pose, "gripper_aperture", embodiment="widowx").image is None


def test_stamps_near_the_top_of_the_range_stay_exact():
    # integer division: a float division would round 999999999.999999999 s up to a whole second
    stamp = ns_to_stamp(999_999_999_999_999_999)
    assert (stamp.sec, stamp.nanosec) == (999_999_999, 999_999_999)


def test_a_pitch_of_ninety_degrees_reads_back():
    # 2(wy - zx) rounds to just beyond +-1 for these: the reading is clamped into asin's domain
    for euler in ([0.1, np.pi / 2, 0.2], [0.05, -np.pi / 2, 0.2]):
        back = matrix_to_euler_xyz(quaternion_to_matrix(matrix_to_quaternion(euler_xyz_to_matrix(euler))))
        assert back[1] == pytest.approx(euler[1])


def test_a_robot_observation_has_no_controller_target():
    joints = joint_state_to_msg(("j",), np.array([0.5]), 0.25, 9, "gripper_aperture")
    pose = pose_to_msg(np.array([0.1, 0.2, 0.3]), IDENTITY, 9, "base")
    robot = observation_from_msgs(4, joints, pose, "gripper_aperture", embodiment="widowx")
    assert robot.target_position is None and robot.privileged is None
