"""Where standard ROS messages meet numpy arrays and core types: the only module that does both.

The graph's own messages (``ladder_ros_interfaces``) meet the documents in :mod:`ladder_ros.interface_conversions`.
Every conversion here has an inverse and a round-trip test (tests/test_ros_conversions.py). Values
that the lockstep parity depends on travel bit-exactly: float64 fields of standard messages and of the
graph's own messages read back identically; orientation is the one exception (``ee_pose`` carries
the base-frame quaternion, and the Euler angles relative to the top-down pose read back from it differ
in the last bits), which is why the simulator's exact ``ee_euler`` rides along in the privileged state
in simulation.

Images: ``msg.data = array.tobytes()`` (assigning an ndarray to ``data`` costs ~54 ms per 640x480
frame with the PyPI ROS wheels; docs/dependencies.md).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, TransformStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ladder_ros.camera.model import CameraIntrinsics, RigidTransform
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.observation import Observation
from ladder_ros.core.safety import ACTION_AXES
from ladder_ros.messages import PrivilegedStateDoc
from ladder_ros.core.rotations import matrix_to_quaternion, quaternion_to_matrix
from ladder_ros.policies.state import ee_euler_from_base
from ladder_ros.core.action_conventions import ACTION_DIM, validate_action

# The action axes (ladder_ros.core.safety.ACTION_AXES), in the order of the 7-D action of
# ladder_ros/sim/base.py (SimplerEnv/Bridge convention: metres and radians per control step,
# gripper +1 open / -1 closed).
assert len(ACTION_AXES) == ACTION_DIM


# ------------------------------------------------------------------------------ time
def stamp_to_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    if ns < 0:
        raise InvalidInputError(f"a time stamp must be >= 0 ns, got {ns}")
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


# ------------------------------------------------------------------------------ images
def _image_msg(arr: np.ndarray, encoding: str, stamp_ns: int, frame_id: str) -> Image:
    """A little-endian ``sensor_msgs/Image`` of a C-contiguous array whose rows are the image's rows."""
    msg = Image()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(arr.strides[0])
    msg.data = arr.tobytes()
    return msg


def image_to_msg(image: np.ndarray, stamp_ns: int, frame_id: str) -> Image:
    """An RGB uint8 (H, W, 3) array as ``sensor_msgs/Image`` (rgb8)."""
    arr = np.ascontiguousarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise InvalidInputError(f"an image is a (H, W, 3) uint8 array, got {arr.dtype} {arr.shape}")
    return _image_msg(arr, "rgb8", stamp_ns, frame_id)


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


def depth_to_msg(depth: np.ndarray, stamp_ns: int, frame_id: str) -> Image:
    """Depth in metres, (H, W) float32, as ``sensor_msgs/Image`` ``32FC1`` (REP 118: NaN = no depth)."""
    arr = np.ascontiguousarray(depth)
    if arr.dtype != np.float32 or arr.ndim != 2:
        raise InvalidInputError(f"a depth image is an (H, W) float32 array of metres, got {arr.dtype} {arr.shape}")
    return _image_msg(np.ascontiguousarray(arr.astype("<f4", copy=False)), "32FC1", stamp_ns, frame_id)


def depth_from_msg(msg: Image) -> np.ndarray:
    """(H, W) float32 metres from a ``32FC1`` (metres) or ``16UC1`` (millimetres, 0 = no return,
    as RealSense and most depth drivers publish) image; missing depth is NaN."""
    if msg.encoding not in ("32FC1", "16UC1"):
        raise InvalidInputError(f"only 32FC1 (m) and 16UC1 (mm) depth images are read, got {msg.encoding!r}")
    size = 4 if msg.encoding == "32FC1" else 2
    row = msg.width * size
    if msg.step < row or len(msg.data) < msg.step * msg.height:
        raise InvalidInputError(f"depth data too short: {len(msg.data)} bytes for {msg.height} rows of {msg.step}")
    order = ">" if msg.is_bigendian else "<"
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :row]
    if msg.encoding == "32FC1":
        depth = rows.copy().view(order + "f4").reshape(msg.height, msg.width).astype(np.float32)
    else:
        mm = rows.copy().view(order + "u2").reshape(msg.height, msg.width)
        depth = mm.astype(np.float32) / np.float32(1000.0)
        depth[mm == 0] = np.nan
    depth[~np.isfinite(depth) | (depth <= 0)] = np.nan
    return depth


# ------------------------------------------------------------------------------ camera info
def camera_info_to_msg(intrinsics: CameraIntrinsics, stamp_ns: int, frame_id: str,
                       rectification: np.ndarray | None = None, projection: np.ndarray | None = None) -> CameraInfo:
    """``sensor_msgs/CameraInfo`` of a calibrated camera (monocular: R = I and P = [K | 0] unless given)."""
    msg = CameraInfo()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.width, msg.height = intrinsics.width, intrinsics.height
    msg.distortion_model = intrinsics.distortion_model
    msg.d = [float(v) for v in intrinsics.distortion]
    msg.k = [float(v) for v in intrinsics.K.ravel()]
    msg.r = [float(v) for v in np.ravel(np.eye(3) if rectification is None else rectification)]
    P = np.hstack([intrinsics.K, np.zeros((3, 1))]) if projection is None else np.asarray(projection)
    msg.p = [float(v) for v in P.ravel()]
    return msg


def intrinsics_from_camera_info(msg: CameraInfo) -> CameraIntrinsics:
    """The :class:`CameraIntrinsics` in a ``CameraInfo``; an uncalibrated one (K all zero) is an error."""
    K = np.asarray(msg.k, dtype=np.float64).reshape(3, 3)
    if K[0, 0] <= 0 or K[1, 1] <= 0:
        raise InvalidInputError("camera_info has no calibration (K is zero)")
    try:
        return CameraIntrinsics.from_matrix(K, int(msg.width), int(msg.height), list(msg.d),
                                            msg.distortion_model or "plumb_bob")
    except ConfigError as exc:
        raise InvalidInputError(f"camera_info: {exc}") from None


# ------------------------------------------------------------------------------ diagnostics
DIAGNOSTIC_LEVELS = {"ok": DiagnosticStatus.OK, "warn": DiagnosticStatus.WARN, "error": DiagnosticStatus.ERROR,
                     "stale": DiagnosticStatus.STALE}


def diagnostic_status(name: str, hardware_id: str, level: str, message: str,
                      values: Mapping[str, Any]) -> DiagnosticStatus:
    """One ``diagnostic_msgs/DiagnosticStatus``; ``level`` is ok, warn, error or stale.

    Values become text: numbers with 6 significant digits (milliseconds stay readable), None as an
    empty string, nested mappings flattened as ``outer.inner``; each key names its unit (``_ms``,
    ``_hz``, ``_m``).
    """
    if level not in DIAGNOSTIC_LEVELS:
        raise InvalidInputError(f"diagnostic level must be one of {', '.join(DIAGNOSTIC_LEVELS)}, got {level!r}")
    status = DiagnosticStatus(name=name, hardware_id=hardware_id, level=DIAGNOSTIC_LEVELS[level], message=message)
    flat: list[tuple[str, Any]] = []
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat.extend((f"{key}.{k}", v) for k, v in value.items())
        else:
            flat.append((key, value))
    for key, value in flat:
        text = "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)
        status.values.append(KeyValue(key=str(key), value=text))
    return status


def diagnostics_to_msg(name: str, hardware_id: str, level: str, message: str, values: Mapping[str, Any],
                       stamp_ns: int) -> DiagnosticArray:
    """One :func:`diagnostic_status` in a ``diagnostic_msgs/DiagnosticArray`` stamped ``stamp_ns``."""
    array = DiagnosticArray()
    array.header.stamp = ns_to_stamp(stamp_ns)
    array.status = [diagnostic_status(name, hardware_id, level, message, values)]
    return array


def diagnostic_values(status: DiagnosticStatus) -> dict[str, str]:
    """The key/values of a status as a dict."""
    return {kv.key: kv.value for kv in status.values}


# ------------------------------------------------------------------------------ joint states
def joint_state_to_msg(names: Sequence[str], positions: np.ndarray, aperture: float, stamp_ns: int,
                       aperture_joint: str) -> JointState:
    """Arm joints plus one entry ``aperture_joint`` holding the normalised aperture (0 closed, 1 open).

    Positions must be numbers: a missing one (None) is refused rather than published as NaN, which
    would read downstream as a measured but failed reading. A NaN the caller measured is passed on
    (the policy node's state guard refuses it)."""
    given = np.asarray(positions)
    if given.dtype.kind not in "biuf":
        raise InvalidInputError(f"joint positions are numbers, got {given.ravel().tolist()}")
    values = given.astype(np.float64).ravel()
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


def pose_matrix_to_msg(pose: np.ndarray, stamp_ns: int, frame_id: str) -> PoseStamped:
    """A 4x4 pose (a robot's measured end effector, base frame) with its true orientation."""
    t = np.asarray(pose, dtype=np.float64)
    if t.shape != (4, 4) or not np.all(np.isfinite(t)):
        raise InvalidInputError(f"a pose is a finite 4x4 matrix, got shape {t.shape}")
    return pose_to_msg(t[:3, 3], matrix_to_quaternion(t[:3, :3]), stamp_ns, frame_id)


def pose_matrix_from_msg(msg: PoseStamped) -> np.ndarray:
    """The 4x4 pose of a PoseStamped (inverse of :func:`pose_matrix_to_msg`)."""
    position, quaternion = pose_from_msg(msg)
    t = np.eye(4)
    t[:3, :3] = quaternion_to_matrix(quaternion)
    t[:3, 3] = position
    return t


def pose_from_msg(msg: PoseStamped) -> tuple[np.ndarray, np.ndarray]:
    """(position (m), unit quaternion (w, x, y, z)) of a pose."""
    p, o = msg.pose.position, msg.pose.orientation
    q = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if not np.isfinite(norm) or norm < 1e-9:
        raise InvalidInputError(f"pose orientation is not a rotation: {q.tolist()}")
    return np.array([p.x, p.y, p.z], dtype=np.float64), q / norm


# ------------------------------------------------------------------------------ actions
def action_to_msg(action: np.ndarray, stamp_ns: int, axes: Sequence[str] = ACTION_AXES) -> JointTrajectory:
    """An action as a one-point trajectory over ``axes`` (default: the 7-D :data:`ACTION_AXES`), stamped with
    the step it answers. Other axes carry a joint-position policy's targets, named by its config."""
    axes = tuple(axes)
    if axes == ACTION_AXES:
        values = validate_action(action)
    else:
        values = np.asarray(action, dtype=np.float64)
        if values.shape != (len(axes),) or not np.all(np.isfinite(values)):
            raise InvalidInputError(f"an action over {len(axes)} axes needs {len(axes)} finite numbers, "
                                    f"got {values.tolist()}")
    msg = JointTrajectory()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.joint_names = list(axes)
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
                          image: Image | None = None, privileged: PrivilegedStateDoc | None = None, *,
                          embodiment: str) -> Observation:
    """The :class:`Observation` of one step, rebuilt from that step's messages.

    ``ee_euler`` is the orientation relative to ``embodiment``'s top-down gripper pose, computed from
    ``ee_pose``'s base-frame quaternion (:func:`ladder_ros.policies.state.ee_euler_from_base`), so a
    robot's observation means what a simulator's does. In simulation the privileged document
    supplies the simulator's exact orientation and controller target, so the rebuilt observation
    equals the simulator's field for field.
    """
    names, positions, aperture = joint_state_from_msg(joint_state, aperture_joint)
    position, quaternion = pose_from_msg(ee_pose)
    euler = ee_euler_from_base(quaternion, embodiment)
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


# ------------------------------------------------------------------------------ transforms
def transform_to_msg(transform: RigidTransform, parent_frame: str, child_frame: str, stamp_ns: int
                     ) -> TransformStamped:
    """``T_parent_child`` as tf2 carries it (geometry_msgs/TransformStamped: translation in metres,
    rotation as a quaternion x, y, z, w)."""
    msg = TransformStamped()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = parent_frame
    msg.child_frame_id = child_frame
    t, q = transform.t, transform.quaternion_xyzw
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (float(v) for v in t)
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = (float(v) for v in q)
    return msg


def transform_from_msg(msg: TransformStamped) -> tuple[RigidTransform, str, str]:
    """(``T_parent_child``, parent frame, child frame) of a TransformStamped."""
    t, r = msg.transform.translation, msg.transform.rotation
    return (RigidTransform.from_quaternion([t.x, t.y, t.z], [r.x, r.y, r.z, r.w]), msg.header.frame_id,
            msg.child_frame_id)
