"""Round trips between ROS messages and numpy/core types (ladder_ros/ros_conversions.py)."""

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402

from ladder_ros.camera.model import CameraIntrinsics, RigidTransform  # noqa: E402
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
    camera_info_to_msg,
    depth_from_msg,
    depth_to_msg,
    diagnostic_status,
    diagnostic_values,
    diagnostics_to_msg,
    image_from_msg,
    image_to_msg,
    intrinsics_from_camera_info,
    joint_state_from_msg,
    joint_state_to_msg,
    ns_to_stamp,
    observation_from_msgs,
    pose_from_msg,
    pose_matrix_from_msg,
    pose_matrix_to_msg,
    pose_to_msg,
    stamp_to_ns,
    transform_from_msg,
    transform_to_msg,
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
    for missing in ([0.1, None], [None], ["0.1"]):
        with pytest.raises(InvalidInputError, match=r"^joint positions are numbers, got \["):
            joint_state_to_msg(("a",) * len(missing), missing, 1.0, 0, "gripper_aperture")
    measured_nan = joint_state_to_msg(("a", "b"), [np.nan, 1], 0.5, 0, "gripper_aperture")  # ints become floats
    assert np.isnan(measured_nan.position[0]) and list(measured_nan.position[1:]) == [1.0, 0.5]
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


# ------------------------------------------------------------------------------ depth
def _nan_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def test_depth_message_fields_and_round_trip():
    rng = np.random.default_rng(5)
    for height, width in ((1, 1), (3, 5), (48, 64)):
        depth = rng.uniform(0.05, 4.0, size=(height, width)).astype(np.float32)
        depth[rng.random(depth.shape) < 0.2] = np.nan  # REP 118: NaN is "no depth"
        msg = depth_to_msg(depth, 6_000_000_007, "depth_optical")
        fields = (msg.height, msg.width, msg.step, msg.encoding, msg.is_bigendian)
        assert fields == (height, width, 4 * width, "32FC1", 0)
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (6, 7, "depth_optical")
        assert bytes(msg.data) == depth.astype("<f4").tobytes()
        assert _nan_equal(depth_from_msg(msg), depth)


def test_depth_of_a_strided_view_is_sent_as_its_pixels():
    # a column slice is not contiguous: the message must carry the pixels, row after row, step = 4 * width
    full = np.arange(4 * 6, dtype=np.float32).reshape(4, 6) + 1.0
    view = full[:, ::2]
    msg = depth_to_msg(view, 0, "cam")
    assert (msg.width, msg.step, len(msg.data)) == (3, 12, 48)
    assert np.array_equal(depth_from_msg(msg), view)
    transposed = full.T  # Fortran order: rows in memory are the columns
    assert np.array_equal(depth_from_msg(depth_to_msg(transposed, 0, "cam")), transposed)


def test_depth_refusals_name_the_bad_value():
    with pytest.raises(InvalidInputError,
                       match=r"^a depth image is an \(H, W\) float32 array of metres, got float64 \(2, 3\)$"):
        depth_to_msg(np.zeros((2, 3)), 0, "cam")
    with pytest.raises(InvalidInputError,
                       match=r"^a depth image is an \(H, W\) float32 array of metres, got float32 \(2, 3, 1\)$"):
        depth_to_msg(np.zeros((2, 3, 1), dtype=np.float32), 0, "cam")
    msg = depth_to_msg(np.ones((2, 3), dtype=np.float32), 0, "cam")
    msg.encoding = "mono16"
    with pytest.raises(InvalidInputError, match=r"^only 32FC1 \(m\) and 16UC1 \(mm\) depth images are read, "
                                                r"got 'mono16'$"):
        depth_from_msg(msg)
    msg.encoding = "32FC1"
    msg.data = bytes(23)
    with pytest.raises(InvalidInputError, match="^depth data too short: 23 bytes for 2 rows of 12$"):
        depth_from_msg(msg)
    msg.data = bytes(24)
    msg.step = 11  # shorter than a row of 3 float32 pixels
    with pytest.raises(InvalidInputError, match="^depth data too short: 24 bytes for 2 rows of 11$"):
        depth_from_msg(msg)
    mm = Image(height=2, width=3, encoding="16UC1", step=5, data=bytes(12))  # a 16UC1 row is 6 bytes
    with pytest.raises(InvalidInputError, match="^depth data too short: 12 bytes for 2 rows of 5$"):
        depth_from_msg(mm)
    mm.step = 6
    mm.data = bytes(11)
    with pytest.raises(InvalidInputError, match="^depth data too short: 11 bytes for 2 rows of 6$"):
        depth_from_msg(mm)


def test_depth_in_millimetres_reads_as_metres_with_zero_as_no_return():
    # 16UC1 (RealSense, most drivers): millimetres, 0 = no return
    rng = np.random.default_rng(6)
    mm = rng.integers(0, 65536, size=(7, 9), dtype=np.uint16)
    mm[0, 0], mm[1, 1], mm[2, 2] = 0, 1, 65535
    msg = Image(height=7, width=9, encoding="16UC1", step=18, data=mm.astype("<u2").tobytes())
    depth = depth_from_msg(msg)
    assert depth.dtype == np.float32 and depth.shape == (7, 9)
    expected = mm.astype(np.float32) / np.float32(1000.0)
    expected[mm == 0] = np.nan
    assert _nan_equal(depth, expected)
    assert np.isnan(depth[0, 0]) and depth[1, 1] == np.float32(0.001) and depth[2, 2] == np.float32(65.535)


def test_big_endian_and_padded_depth_rows():
    rng = np.random.default_rng(7)
    metres = rng.uniform(0.1, 3.0, size=(4, 5)).astype(np.float32)
    mm = rng.integers(1, 5000, size=(4, 5), dtype=np.uint16)
    for encoding, values, size, expected in (("32FC1", metres, 4, metres),
                                             ("16UC1", mm, 2, mm.astype(np.float32) / np.float32(1000.0))):
        for bigendian in (0, 1):
            raw = values.astype((">" if bigendian else "<") + values.dtype.str[1:])
            step = 5 * size + 6  # 6 bytes of padding after each row
            padded = np.full((4, step), 0xAB, dtype=np.uint8)
            padded[:, :5 * size] = raw.view(np.uint8).reshape(4, 5 * size)
            msg = Image(height=4, width=5, encoding=encoding, is_bigendian=bigendian, step=step,
                        data=padded.tobytes())
            depth = depth_from_msg(msg)
            assert depth.dtype == np.float32 and np.array_equal(depth, expected), (encoding, bigendian)


def test_depth_that_is_not_a_distance_reads_as_nan():
    values = np.array([[0.0, -0.5, np.inf, -np.inf], [np.nan, 1e-6, 2.5, 0.25]], dtype=np.float32)
    depth = depth_from_msg(depth_to_msg(values, 0, "cam"))
    assert np.isnan(depth[0]).all() and np.isnan(depth[1, 0])
    assert depth[1, 1:].tolist() == values[1, 1:].tolist()


# ------------------------------------------------------------------------------ camera info
def test_camera_info_carries_k_d_r_p():
    intrinsics = CameraIntrinsics(640, 480, 615.5, 612.25, 321.5, 239.75, "plumb_bob", (0.1, -0.2, 0.001, 0.002, 0.03))
    msg = camera_info_to_msg(intrinsics, 8_000_000_009, "camera_color_optical_frame")
    assert (msg.width, msg.height, msg.distortion_model) == (640, 480, "plumb_bob")
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (8, 9)
    assert msg.header.frame_id == "camera_color_optical_frame"
    assert list(msg.d) == [0.1, -0.2, 0.001, 0.002, 0.03]
    assert list(msg.k) == [615.5, 0.0, 321.5, 0.0, 612.25, 239.75, 0.0, 0.0, 1.0]
    assert list(msg.r) == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]  # monocular: R = I
    assert list(msg.p) == [615.5, 0.0, 321.5, 0.0, 0.0, 612.25, 239.75, 0.0, 0.0, 0.0, 1.0, 0.0]  # [K | 0]
    back = intrinsics_from_camera_info(msg)
    assert back == intrinsics and isinstance(back.width, int) and isinstance(back.height, int)


def test_camera_info_with_a_given_rectification_and_projection():
    intrinsics = CameraIntrinsics(64, 48, 50.0, 51.0, 32.0, 24.0)
    rectification = euler_xyz_to_matrix([0.01, -0.02, 0.03])
    projection = np.array([[50.0, 0.0, 30.0, -3.5], [0.0, 51.0, 25.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    msg = camera_info_to_msg(intrinsics, 0, "right", rectification, projection)
    assert list(msg.r) == rectification.ravel().tolist() and list(msg.p) == projection.ravel().tolist()
    # a projection given as nested lists reads the same
    listed = camera_info_to_msg(intrinsics, 0, "right", rectification.tolist(), projection.tolist())
    assert list(listed.r) == list(msg.r) and list(listed.p) == list(msg.p)


def test_camera_info_round_trips_every_distortion_model():
    rng = np.random.default_rng(8)
    for model, count in (("plumb_bob", 5), ("plumb_bob", 4), ("plumb_bob", 8), ("rational_polynomial", 8),
                         ("equidistant", 4)):
        for _ in range(5):
            fx, fy = rng.uniform(100, 1500, size=2)
            intrinsics = CameraIntrinsics(int(rng.integers(16, 2000)), int(rng.integers(16, 2000)), float(fx),
                                          float(fy), float(rng.uniform(0, 1000)), float(rng.uniform(0, 800)),
                                          model, tuple(rng.normal(scale=0.1, size=count).tolist()))
            back = intrinsics_from_camera_info(camera_info_to_msg(intrinsics, 0, "cam"))
            assert back == intrinsics, model


def test_camera_info_refusals():
    msg = CameraInfo(width=64, height=48)  # an uncalibrated camera publishes K all zero
    with pytest.raises(InvalidInputError, match=r"^camera_info has no calibration \(K is zero\)$"):
        intrinsics_from_camera_info(msg)
    for fx, fy in ((500.0, 0.0), (0.0, 500.0), (-500.0, 500.0), (500.0, -500.0)):
        msg.k = [fx, 0.0, 32.0, 0.0, fy, 24.0, 0.0, 0.0, 1.0]
        with pytest.raises(InvalidInputError, match="no calibration"):
            intrinsics_from_camera_info(msg)
    msg.k = [500.0, 0.0, 32.0, 0.0, 500.0, 24.0, 0.0, 0.0, 1.0]
    msg.d = [0.1, 0.2, 0.3]
    msg.distortion_model = "plumb_bob"
    with pytest.raises(InvalidInputError, match="^camera_info: distortion model plumb_bob takes 5 coefficients") as err:
        intrinsics_from_camera_info(msg)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    msg.width = 0
    msg.d = []
    with pytest.raises(InvalidInputError, match="^camera_info: intrinsics width must be a positive number of pixels, "
                                                "got 0$"):
        intrinsics_from_camera_info(msg)


def test_camera_info_without_a_distortion_model_is_plumb_bob():
    msg = CameraInfo(width=64, height=48, k=[500.0, 0.0, 32.0, 0.0, 501.0, 24.0, 0.0, 0.0, 1.0])
    msg.d = [0.01, 0.02, 0.0, 0.0, 0.0]
    intrinsics = intrinsics_from_camera_info(msg)
    assert intrinsics == CameraIntrinsics(64, 48, 500.0, 501.0, 32.0, 24.0, "plumb_bob", (0.01, 0.02, 0.0, 0.0, 0.0))
    msg.distortion_model = "equidistant"
    msg.d = [0.01, 0.02, 0.03, 0.04]
    assert intrinsics_from_camera_info(msg).distortion_model == "equidistant"


# ------------------------------------------------------------------------------ poses
def _random_poses(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q = rng.normal(size=4)
        yield rng.uniform(-1.0, 1.0, size=3), q / np.linalg.norm(q)


def test_pose_matrix_round_trip():
    for position, q in _random_poses(9, 50):
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = quaternion_to_matrix(q), position
        msg = pose_matrix_to_msg(pose, 10_000_000_011, "base_link")
        assert (msg.header.frame_id, msg.header.stamp.sec, msg.header.stamp.nanosec) == ("base_link", 10, 11)
        p, o = msg.pose.position, msg.pose.orientation
        assert [p.x, p.y, p.z] == position.tolist()
        sent = np.array([o.w, o.x, o.y, o.z])
        assert np.linalg.norm(sent) == pytest.approx(1.0, abs=1e-15)
        assert np.allclose(sent, q, atol=1e-12) or np.allclose(sent, -q, atol=1e-12)  # q and -q: one rotation
        back = pose_matrix_from_msg(msg)
        assert back.shape == (4, 4) and back[3].tolist() == [0.0, 0.0, 0.0, 1.0]
        assert back[:3, 3].tolist() == position.tolist()
        assert np.allclose(back[:3, :3], pose[:3, :3], atol=1e-12)


def test_pose_matrix_refusals_name_the_shape():
    with pytest.raises(InvalidInputError, match=r"^a pose is a finite 4x4 matrix, got shape \(3, 4\)$"):
        pose_matrix_to_msg(np.eye(4)[:3], 0, "base")
    bad = np.eye(4)
    bad[0, 3] = np.nan
    with pytest.raises(InvalidInputError, match=r"^a pose is a finite 4x4 matrix, got shape \(4, 4\)$"):
        pose_matrix_to_msg(bad, 0, "base")
    bad[0, 3], bad[1, 1] = 0.0, np.inf
    with pytest.raises(InvalidInputError, match="finite 4x4"):
        pose_matrix_to_msg(bad, 0, "base")
    # nested lists are a pose too
    msg = pose_matrix_to_msg(np.eye(4).tolist(), 0, "base")
    assert np.array_equal(pose_matrix_from_msg(msg), np.eye(4))


def test_pose_refusals_name_the_bad_values():
    ok_q = np.array([1.0, 0.0, 0.0, 0.0])
    cases = [
        (np.array([0.1, np.nan, 0.3]), ok_q, r"\[0\.1, nan, 0\.3\] and \[1\.0, 0\.0, 0\.0, 0\.0\]"),
        (np.array([0.1, 0.2, 0.3]), np.array([np.inf, 0.0, 0.0, 0.0]), r"\[0\.1, 0\.2, 0\.3\] and \[inf, 0\.0"),
        (np.array([0.1, 0.2]), ok_q, r"\[0\.1, 0\.2\] and \[1\.0"),
        (np.array([0.1, 0.2, 0.3]), np.array([1.0, 0.0, 0.0]), r"\[0\.1, 0\.2, 0\.3\] and \[1\.0, 0\.0, 0\.0\]$"),
        # a coordinate nobody filled in (None) is refused as not finite
        ([0.1, None, 0.3], ok_q, r"\[0\.1, nan, 0\.3\]"),
        ([0.1, 0.2, 0.3], [1.0, None, 0.0, 0.0], r"\[0\.1, 0\.2, 0\.3\] and \[1\.0, nan, 0\.0, 0\.0\]$"),
    ]
    for position, quaternion, shown in cases:
        with pytest.raises(InvalidInputError, match=r"^a pose is a finite position \(3\) and quaternion \(4\), got "
                                                    + shown):
            pose_to_msg(position, quaternion, 0, "base")


def test_a_pose_is_sent_with_a_unit_quaternion():
    for position, q in _random_poses(10, 30):
        for scale in (1e-6, 0.5, 3.0, 1e6):
            o = pose_to_msg(position, scale * q, 0, "base").pose.orientation
            sent = np.array([o.w, o.x, o.y, o.z])
            assert np.allclose(sent, q, atol=1e-15) and abs(np.linalg.norm(sent) - 1.0) < 1e-15
    # the smallest quaternion still taken as a direction: norm 1e-9
    o = pose_to_msg(np.zeros(3), [1e-9, 0.0, 0.0, 0.0], 0, "base").pose.orientation
    assert (o.w, o.x, o.y, o.z) == (1.0, 0.0, 0.0, 0.0)
    with pytest.raises(InvalidInputError, match="^a zero quaternion has no orientation$"):
        pose_to_msg(np.zeros(3), [0.9e-9, 0.0, 0.0, 0.0], 0, "base")


def test_a_single_precision_quaternion_is_normalised_in_double_precision():
    # a float32 quaternion (a vision pipeline's output) is normalised as the float64 it converts to exactly
    for position, q in _random_poses(11, 30):
        single = (2.0 * q).astype(np.float32)
        sent, expected = (pose_to_msg(position.astype(np.float32), v, 0, "base").pose for v in
                          (single, single.astype(np.float64)))
        assert sent == expected


def test_a_received_pose_reads_back_as_a_unit_quaternion():
    for position, q in _random_poses(12, 30):
        msg = pose_to_msg(position, q, 0, "base")
        o = msg.pose.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in 2.5 * q)  # a sender that did not normalise
        back_position, back_q = pose_from_msg(msg)
        assert back_position.tolist() == position.tolist()
        assert np.allclose(back_q, q, atol=1e-15)
    o.w, o.x, o.y, o.z = 1e-9, 0.0, 0.0, 0.0
    assert pose_from_msg(msg)[1].tolist() == [1.0, 0.0, 0.0, 0.0]
    for bad, shown in (((0.0, 0.0, 0.0, 0.0), r"\[0\.0, 0\.0, 0\.0, 0\.0\]"), ((0.9e-9, 0.0, 0.0, 0.0), r"\[9e-10"),
                       ((np.nan, 0.0, 0.0, 1.0), r"\[nan, 0\.0, 0\.0, 1\.0\]"), ((np.inf, 0.0, 0.0, 0.0), r"\[inf")):
        o.w, o.x, o.y, o.z = bad
        with pytest.raises(InvalidInputError, match="^pose orientation is not a rotation: " + shown):
            pose_from_msg(msg)


# ------------------------------------------------------------------------------ transforms
def test_transform_round_trip_carries_tf2_quaternion_order():
    for translation, q in _random_poses(13, 30):
        transform = RigidTransform(quaternion_to_matrix(q), translation)
        msg = transform_to_msg(transform, "world", "camera_link", 12_000_000_013)
        assert (msg.header.frame_id, msg.child_frame_id) == ("world", "camera_link")
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 13)
        tr, r = msg.transform.translation, msg.transform.rotation
        assert [tr.x, tr.y, tr.z] == translation.tolist()
        assert [r.x, r.y, r.z, r.w] == transform.quaternion_xyzw.tolist()  # tf2: x, y, z, w
        xyzw = np.array([q[1], q[2], q[3], q[0]])
        sent = np.array([r.x, r.y, r.z, r.w])
        assert np.allclose(sent, xyzw, atol=1e-12) or np.allclose(sent, -xyzw, atol=1e-12)  # one rotation
        back, parent, child = transform_from_msg(msg)
        assert (parent, child) == ("world", "camera_link")
        assert back.t.tolist() == translation.tolist() and np.allclose(back.R, transform.R, atol=1e-12)


# ------------------------------------------------------------------------------ diagnostics
def test_diagnostic_levels_and_fields():
    for level, value in (("ok", b"\x00"), ("warn", b"\x01"), ("error", b"\x02"), ("stale", b"\x03")):
        status = diagnostic_status("/widowx/driver: arm", "wx250s", level, "why", {})
        assert (status.name, status.hardware_id, status.level, status.message) == ("/widowx/driver: arm", "wx250s",
                                                                                   value, "why")
    with pytest.raises(InvalidInputError,
                       match="^diagnostic level must be one of ok, warn, error, stale, got 'fatal'$"):
        diagnostic_status("n", "h", "fatal", "", {})
    with pytest.raises(InvalidInputError, match="got 'OK'$"):  # levels are lower case
        diagnostic_status("n", "h", "OK", "", {})


def test_diagnostic_values_as_text():
    values = {"latency_ms": 12.3456789, "tiny_m": 0.000123456789, "big_hz": 1234567.0, "count": 1234567,
              "flag": True, "label": "bridge", "missing": None, "nested": {"inner_ms": 2.0, "n": 7, "none": None},
              3: "a key that is not text"}
    status = diagnostic_status("n", "h", "ok", "m", values)
    # numbers: 6 significant digits for floats, integers in full; nested keys flattened with a dot, in order
    assert [(kv.key, kv.value) for kv in status.values] == [
        ("latency_ms", "12.3457"), ("tiny_m", "0.000123457"), ("big_hz", "1.23457e+06"), ("count", "1234567"),
        ("flag", "True"), ("label", "bridge"), ("missing", ""), ("nested.inner_ms", "2"), ("nested.n", "7"),
        ("nested.none", ""), ("3", "a key that is not text")]
    assert diagnostic_values(status)["count"] == "1234567"


def test_diagnostic_values_formatting_holds_for_many_numbers():
    rng = np.random.default_rng(14)
    for value in rng.lognormal(0.0, 6.0, size=200):
        number = float(value) * (1 if rng.random() < 0.5 else -1)
        text = diagnostic_values(diagnostic_status("n", "h", "ok", "", {"x": number}))["x"]
        assert float(text) == pytest.approx(number, rel=5e-6) and text == f"{number:.6g}"
        whole = int(value * 1e6)
        assert diagnostic_values(diagnostic_status("n", "h", "ok", "", {"x": whole}))["x"] == str(whole)


def test_diagnostics_array_is_stamped_and_carries_one_status():
    array = diagnostics_to_msg("/franka/driver: arm", "fr3", "error", "reflex", {"a": {"b": 1.5}}, 13_000_000_014)
    assert (array.header.stamp.sec, array.header.stamp.nanosec) == (13, 14) and len(array.status) == 1
    status = array.status[0]
    assert (status.name, status.hardware_id, status.level, status.message) == ("/franka/driver: arm", "fr3", b"\x02",
                                                                               "reflex")
    assert diagnostic_values(status) == {"a.b": "1.5"}


# ------------------------------------------------------------------------------ actions over other axes
def test_an_action_over_named_axes_refuses_a_missing_target():
    axes = ("j1", "j2", "j3")
    msg = action_to_msg([0.5, -0.25, 1], 0, axes)
    assert tuple(msg.joint_names) == axes and list(msg.points[0].positions) == [0.5, -0.25, 1.0]
    with pytest.raises(InvalidInputError,
                       match=r"^an action over 3 axes needs 3 finite numbers, got \[0\.5, nan, 1\.0\]$"):
        action_to_msg([0.5, None, 1.0], 0, axes)


def test_a_pose_message_filled_with_single_precision_numbers_reads_back_in_double_precision():
    # rclpy lets a float64 field hold a numpy float32 or an int until the message is sent: read it the same
    for position, q in _random_poses(15, 30):
        msg = pose_to_msg(position, q, 0, "base")
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z = (np.float32(v) for v in position)
        o.w, o.x, o.y, o.z = (np.float32(2.0 * v) for v in q)
        back_position, back_q = pose_from_msg(msg)
        assert back_position.dtype == np.float64 and back_q.dtype == np.float64
        single = np.array([float(np.float32(2.0 * v)) for v in q])
        assert back_q.tolist() == (single / np.linalg.norm(single)).tolist()
        assert back_position.tolist() == [float(np.float32(v)) for v in position]
    p.x, p.y, p.z = 1, 2, 3
    assert pose_from_msg(msg)[0].dtype == np.float64


def test_a_camera_in_normalised_image_coordinates_is_calibrated():
    # K = I (focal length 1, principal point at 0: normalised image coordinates) is a calibration, not "K zero"
    msg = CameraInfo(width=2, height=2, k=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], d=[0.0] * 5)
    assert intrinsics_from_camera_info(msg) == CameraIntrinsics(2, 2, 1.0, 1.0, 0.0, 0.0)
    msg.k = [0.5, 0.0, 1.0, 0.0, 0.25, 1.0, 0.0, 0.0, 1.0]
    intrinsics = intrinsics_from_camera_info(msg)
    assert (intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy) == (0.5, 0.25, 1.0, 1.0)


def test_a_pose_matrix_with_an_entry_nobody_filled_in_is_refused():
    for row, column in ((0, 3), (1, 1), (3, 3)):
        pose = np.eye(4).tolist()
        pose[row][column] = None
        with pytest.raises(InvalidInputError, match=r"^a pose is a finite 4x4 matrix, got shape \(4, 4\)$"):
            pose_matrix_to_msg(pose, 0, "base")
