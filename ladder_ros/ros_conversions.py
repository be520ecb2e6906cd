"""Where ROS messages meet numpy arrays and core types: the only module that does both.

Every conversion here has an inverse and a round-trip test (tests/test_ros_conversions.py). Values
that the lockstep parity depends on travel bit-exactly: float64 fields of standard messages and
JSON floats (written with ``repr``) both read back identically; orientation is the one exception
(``ee_pose`` carries the base-frame quaternion, and Euler angles read back from it differ in the
last bits), which is why the simulator's exact ``ee_euler`` rides along in the privileged state
document in simulation.

Images: ``msg.data = array.tobytes()`` (assigning an ndarray to ``data`` costs ~54 ms per 640x480
frame with the PyPI ROS wheels; docs/dependencies.md).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.messages import Document, PrivilegedStateDoc, decode, encode
from ladder_ros.core.rotations import matrix_to_euler_xyz, quaternion_to_matrix
from ladder_ros.sim.base import ACTION_DIM, CameraIntrinsics, Observation, validate_action

# The action axes, in the order of the 7-D action of ladder_ros/sim/base.py (SimplerEnv/Bridge
# convention: metres and radians per control step, gripper +1 open / -1 closed).
ACTION_AXES = ("ee_dx", "ee_dy", "ee_dz", "ee_droll", "ee_dpitch", "ee_dyaw", "gripper")
assert len(ACTION_AXES) == ACTION_DIM

D = TypeVar("D", bound=Document)


# ------------------------------------------------------------------------------ time
def stamp_to_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    if ns < 0:
        raise InvalidInputError(f"a time stamp must be >= 0 ns, got {ns}")
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


# ------------------------------------------------------------------------------ JSON documents
def document_to_msg(document: Document) -> String:
    return String(data=encode(document))


def document_from_msg(msg: String, cls: type[D]) -> D:
    """The document in ``msg``; :class:`~ladder_ros.messages.SchemaError` when it does not match ``cls``."""
    return decode(msg.data, cls)


# ------------------------------------------------------------------------------ images
def image_to_msg(image: np.ndarray, stamp_ns: int, frame_id: str) -> Image:
    """An RGB uint8 (H, W, 3) array as ``sensor_msgs/Image`` (rgb8)."""
    arr = np.ascontiguousarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise InvalidInputError(f"an image is a (H, W, 3) uint8 array, got {arr.dtype} {arr.shape}")
    msg = Image()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = "rgb8"
    msg.is_bigendian = 0
    msg.step = int(arr.shape[1] * 3)
    msg.data = arr.tobytes()
    return msg


def image_from_msg(msg: Image) -> np.ndarray:
    """The (H, W, 3) uint8 RGB array of an rgb8 or bgr8 image (a copy the caller owns)."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise InvalidInputError(f"only rgb8 and bgr8 images are read, got {msg.encoding!r}")
    row = msg.width * 3
    if msg.step < row or len(msg.data) < msg.step * msg.height:
        raise InvalidInputError(f"image data too short: {len(msg.data)} bytes for {msg.height} rows of {msg.step}")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :row]
    arr = rows.reshape(msg.height, msg.width, 3).copy()
    return arr[:, :, ::-1].copy() if msg.encoding == "bgr8" else arr


# ------------------------------------------------------------------------------ joint states
def joint_state_to_msg(names: Sequence[str], positions: np.ndarray, aperture: float, stamp_ns: int,
                       aperture_joint: str) -> JointState:
    """Arm joints plus one entry ``aperture_joint`` holding the normalised aperture (0 closed, 1 open)."""
    values = np.asarray(positions, dtype=np.float64).ravel()
    if len(names) != len(values):
        raise InvalidInputError(f"{len(names)} joint names for {len(values)} positions")
    if aperture_joint in names:
        raise InvalidInputError(f"joint name {aperture_joint!r} is reserved for the gripper aperture")
    msg = JointState()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.name = [*map(str, names), aperture_joint]
    msg.position = [*map(float, values), float(aperture)]
    return msg


def joint_state_from_msg(msg: JointState, aperture_joint: str) -> tuple[tuple[str, ...], np.ndarray, float]:
    """(arm joint names, their positions, the aperture) from a joint state with the aperture entry."""
    names = list(msg.name)
    positions = np.asarray(msg.position, dtype=np.float64)
    if len(names) != len(positions):
        raise InvalidInputError(f"joint state has {len(names)} names but {len(positions)} positions")
    if aperture_joint not in names:
        raise InvalidInputError(f"joint state has no {aperture_joint!r} entry (the gripper aperture); "
                                f"names: {names}")
    i = names.index(aperture_joint)
    aperture = float(positions[i])
    keep = [j for j in range(len(names)) if j != i]
    return tuple(names[j] for j in keep), positions[keep].copy(), aperture


# ------------------------------------------------------------------------------ poses
def pose_to_msg(position: np.ndarray, quaternion: np.ndarray, stamp_ns: int, frame_id: str) -> PoseStamped:
    """A pose in ``frame_id``: position (m) and orientation as a unit quaternion (w, x, y, z)."""
    p = np.asarray(position, dtype=np.float64).ravel()
    q = np.asarray(quaternion, dtype=np.float64).ravel()
    if p.shape != (3,) or q.shape != (4,) or not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
        raise InvalidInputError(f"a pose is a finite position (3) and quaternion (4), got {p.tolist()} and "
                                f"{q.tolist()}")
    norm = float(np.linalg.norm(q))
    if norm < 1e-9:
        raise InvalidInputError("a zero quaternion has no orientation")
    q = q / norm
    msg = PoseStamped()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = float(p[0]), float(p[1]), float(p[2])
    o = msg.pose.orientation
    o.w, o.x, o.y, o.z = (float(v) for v in q)
    return msg


def pose_from_msg(msg: PoseStamped) -> tuple[np.ndarray, np.ndarray]:
    """(position (m), unit quaternion (w, x, y, z)) of a pose."""
    p, o = msg.pose.position, msg.pose.orientation
    q = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if not np.isfinite(norm) or norm < 1e-9:
        raise InvalidInputError(f"pose orientation is not a rotation: {q.tolist()}")
    return np.array([p.x, p.y, p.z], dtype=np.float64), q / norm


# ------------------------------------------------------------------------------ camera info
def camera_info_to_msg(intrinsics: CameraIntrinsics, stamp_ns: int, frame_id: str) -> CameraInfo:
    """``sensor_msgs/CameraInfo`` of an undistorted pinhole camera (plumb_bob, zero distortion)."""
    msg = CameraInfo()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.width, msg.height = int(intrinsics.width), int(intrinsics.height)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    fx, fy, cx, cy = (float(v) for v in (intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy))
    msg.k = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return msg


def camera_info_from_msg(msg: CameraInfo) -> CameraIntrinsics:
    """The pinhole intrinsics of a ``CameraInfo`` (K; distortion is not modelled)."""
    k = [float(v) for v in msg.k]
    return CameraIntrinsics(width=int(msg.width), height=int(msg.height), fx=k[0], fy=k[4], cx=k[2], cy=k[5])


# ------------------------------------------------------------------------------ actions
def action_to_msg(action: np.ndarray, stamp_ns: int) -> JointTrajectory:
    """A 7-D action as a one-point trajectory over :data:`ACTION_AXES`, stamped with the step it answers."""
    values = validate_action(action)
    msg = JointTrajectory()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.joint_names = list(ACTION_AXES)
    point = JointTrajectoryPoint()
    point.positions = [float(v) for v in values]
    point.time_from_start = Duration(sec=0, nanosec=0)
    msg.points = [point]
    return msg


def action_from_msg(msg: JointTrajectory) -> np.ndarray:
    """The 7-D action of a one-point trajectory; the axes must be :data:`ACTION_AXES` in order."""
    if tuple(msg.joint_names) != ACTION_AXES:
        raise InvalidInputError(f"action axes must be {list(ACTION_AXES)}, got {list(msg.joint_names)}")
    if len(msg.points) != 1:
        raise InvalidInputError(f"an action is one trajectory point, got {len(msg.points)}")
    return validate_action(np.asarray(msg.points[0].positions, dtype=np.float64))


# ------------------------------------------------------------------------------ observations
def observation_from_msgs(step: int, joint_state: JointState, ee_pose: PoseStamped, aperture_joint: str,
                          image: Image | None = None,
                          privileged: PrivilegedStateDoc | None = None) -> Observation:
    """The :class:`Observation` of one step, rebuilt from that step's messages.

    In simulation the privileged document supplies the simulator's exact orientation and
    controller target, so the rebuilt observation equals the simulator's field for field.
    """
    names, positions, aperture = joint_state_from_msg(joint_state, aperture_joint)
    position, quaternion = pose_from_msg(ee_pose)
    # On a robot, ee_euler reads the base-frame orientation itself as Euler XYZ angles
    # (docs/conventions.md); in simulation the simulator's own ee_euler replaces it.
    euler = matrix_to_euler_xyz(quaternion_to_matrix(quaternion))
    target = None
    state = None
    if privileged is not None:
        exact = privileged.ee_euler_array()
        if exact is not None:
            euler = exact
        target = privileged.target_position_array()
        state = privileged.privileged_state()
    return Observation(step=step, image=None if image is None else image_from_msg(image), aperture=aperture,
                       ee_position=position, ee_euler=euler, joint_names=names, joint_positions=positions,
                       target_position=target, privileged=state, ee_quaternion=quaternion)
