"""What a camera gives and what is known about it: frames, pinhole intrinsics, rigid transforms.

Conventions (ROS REP 103 / REP 105 and ``sensor_msgs/CameraInfo``): the optical frame has x right,
y down, z forward; lengths are metres; a :class:`RigidTransform` ``T_a_b`` maps points given in
frame ``b`` into frame ``a`` (``p_a = R p_b + t``), so ``T_base_camera`` holds the camera's pose in
the robot base frame. Depth images are float32 metres along the optical axis, aligned pixel for
pixel with the colour image, NaN where nothing was measured (REP 118).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.rotations import matrix_to_quaternion, quaternion_to_matrix

# Distortion models of sensor_msgs/CameraInfo (sensor_msgs/distortion_models.hpp) and the number of
# coefficients each takes.
PLUMB_BOB = "plumb_bob"  # k1, k2, p1, p2, k3 (OpenCV's default model)
RATIONAL_POLYNOMIAL = "rational_polynomial"  # k1, k2, p1, p2, k3, k4, k5, k6
EQUIDISTANT = "equidistant"  # k1, k2, k3, k4 (OpenCV fisheye)
DISTORTION_COEFFICIENTS = {PLUMB_BOB: 5, RATIONAL_POLYNOMIAL: 8, EQUIDISTANT: 4}


def _finite(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class CameraIntrinsics:
    """A pinhole camera with lens distortion, for images of ``width`` x ``height`` pixels."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion_model: str = PLUMB_BOB
    distortion: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise ConfigError(f"intrinsics {name} must be a positive number of pixels, got {value!r}")
            object.__setattr__(self, name, int(value))
        for name in ("fx", "fy", "cx", "cy"):
            object.__setattr__(self, name, _finite(getattr(self, name), f"intrinsics {name}"))
        if self.fx <= 0 or self.fy <= 0:
            raise ConfigError(f"focal lengths must be positive pixels, got fx={self.fx}, fy={self.fy}")
        if self.distortion_model not in DISTORTION_COEFFICIENTS:
            raise ConfigError(f"unknown distortion model {self.distortion_model!r}; valid: "
                              f"{', '.join(DISTORTION_COEFFICIENTS)}")
        coefficients = tuple(_finite(v, "distortion coefficient") for v in self.distortion)
        expected = DISTORTION_COEFFICIENTS[self.distortion_model]
        if self.distortion_model == PLUMB_BOB and len(coefficients) in (4, 8):
            pass  # OpenCV also writes 4 (no k3) or 8 (rational) coefficients under plumb_bob
        elif len(coefficients) != expected:
            raise ConfigError(f"distortion model {self.distortion_model} takes {expected} coefficients, "
                              f"got {len(coefficients)}")
        object.__setattr__(self, "distortion", coefficients)

    @property
    def K(self) -> np.ndarray:  # noqa: N802 - the name every camera text uses
        """The 3x3 camera matrix."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def D(self) -> np.ndarray:  # noqa: N802
        return np.array(self.distortion, dtype=np.float64)

    @property
    def horizontal_fov_deg(self) -> float:
        """The horizontal field of view of an ideal pinhole with this focal length (degrees)."""
        return math.degrees(2.0 * math.atan(self.width / (2.0 * self.fx)))

    @property
    def vertical_fov_deg(self) -> float:
        return math.degrees(2.0 * math.atan(self.height / (2.0 * self.fy)))

    @property
    def has_distortion(self) -> bool:
        return any(v != 0.0 for v in self.distortion)

    def project(self, point: Sequence[float]) -> np.ndarray:
        """Pixel (u, v) of a point in the optical frame (z > 0) through the ideal pinhole; a camera with
        lens distortion goes through ``cv2.projectPoints`` instead (ladder_ros.camera.charuco.project)."""
        if self.has_distortion:
            raise InvalidInputError("project() is the ideal pinhole; this camera has lens distortion")
        x, y, z = (float(v) for v in point)
        if not z > 0.0:
            raise InvalidInputError(f"a point behind or on the camera plane has no pixel (z = {z})")
        return np.array([self.fx * x / z + self.cx, self.fy * y / z + self.cy])

    def scaled(self, width: int, height: int) -> "CameraIntrinsics":
        """The same camera at another resolution (a resize of the whole image; pixel centres kept)."""
        sx, sy = width / self.width, height / self.height
        return CameraIntrinsics(width, height, self.fx * sx, self.fy * sy, (self.cx + 0.5) * sx - 0.5,
                                (self.cy + 0.5) * sy - 0.5, self.distortion_model, self.distortion)

    @classmethod
    def from_matrix(cls, K: np.ndarray, width: int, height: int, distortion: Sequence[float] = (0, 0, 0, 0, 0),
                    distortion_model: str = PLUMB_BOB) -> "CameraIntrinsics":
        K = np.asarray(K, dtype=np.float64)
        if K.shape != (3, 3):
            raise ConfigError(f"a camera matrix is 3x3, got shape {K.shape}")
        return cls(width, height, float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2]),
                   distortion_model, tuple(float(v) for v in np.ravel(distortion)))

    @classmethod
    def from_vertical_fov(cls, fovy_deg: float, width: int, height: int) -> "CameraIntrinsics":
        """An ideal pinhole (square pixels, centred principal point) with a vertical field of view,
        as MuJoCo and OpenGL cameras are specified."""
        if not 0.0 < fovy_deg < 180.0:
            raise ConfigError(f"a vertical field of view is in (0, 180) degrees, got {fovy_deg!r}")
        f = height / (2.0 * math.tan(math.radians(fovy_deg) / 2.0))
        return cls(width, height, f, f, (width - 1) / 2.0, (height - 1) / 2.0)


# ------------------------------------------------------------------------------ rigid transforms
def quaternion_xyzw_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w), the order of geometry_msgs/Quaternion."""
    x, y, z, w = (float(v) for v in q)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not math.isfinite(n) or n < 1e-9:
        raise InvalidInputError(f"a rotation quaternion must be finite and non-zero, got {list(q)}")
    return quaternion_to_matrix((w, x, y, z))


def matrix_to_quaternion_xyzw(R: np.ndarray) -> np.ndarray:
    """Quaternion (x, y, z, w) with w >= 0 of a rotation matrix (Shepperd's method)."""
    w, x, y, z = matrix_to_quaternion(R)
    return np.array([x, y, z, w])


def rotation_angle_deg(R: np.ndarray) -> float:
    """The angle of a rotation matrix (degrees, in [0, 180])."""
    cos = (float(np.trace(R)) - 1.0) / 2.0
    return math.degrees(math.acos(max(-1.0, min(1.0, cos))))


def rotation_vector(R: np.ndarray) -> np.ndarray:
    """The axis-angle vector (axis times angle, rad) of a rotation matrix: the inverse of
    :meth:`RigidTransform.from_rvec` (and of OpenCV's ``Rodrigues``)."""
    R = np.asarray(R, dtype=np.float64)
    angle = math.radians(rotation_angle_deg(R))
    if angle < 1e-12:
        return np.zeros(3)
    if angle > math.pi - 1e-6:
        # Near 180 degrees the antisymmetric part vanishes: the axis is R's eigenvector for 1.
        w, v = np.linalg.eigh((R + R.T) / 2.0)
        axis = v[:, int(np.argmax(w))]
        return axis * angle
    axis = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / (2.0 * math.sin(angle))
    return axis * angle


@dataclass(frozen=True)
class RigidTransform:
    """``T_a_b``: rotation ``R`` (3x3) and translation ``t`` (m) with ``p_a = R p_b + t``."""

    R: np.ndarray = field(default_factory=lambda: np.eye(3))
    t: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self) -> None:
        R = np.asarray(self.R, dtype=np.float64)
        t = np.asarray(self.t, dtype=np.float64).reshape(-1)
        if R.shape != (3, 3) or t.shape != (3,):
            raise InvalidInputError(f"a rigid transform is a 3x3 rotation and a 3-vector, got {R.shape} and {t.shape}")
        if not (np.all(np.isfinite(R)) and np.all(np.isfinite(t))):
            raise InvalidInputError("a rigid transform must be finite")
        if not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
            raise InvalidInputError("the rotation of a rigid transform must be orthonormal with determinant +1")
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "t", t)

    @classmethod
    def from_quaternion(cls, translation: Sequence[float], quaternion_xyzw: Sequence[float]) -> "RigidTransform":
        if len(translation) != 3 or len(quaternion_xyzw) != 4:
            raise InvalidInputError(f"a pose is a translation [x, y, z] and a quaternion [x, y, z, w], got "
                                    f"{list(translation)} and {list(quaternion_xyzw)}")
        return cls(quaternion_xyzw_to_matrix(quaternion_xyzw), np.asarray(translation, dtype=np.float64))

    @classmethod
    def from_rvec(cls, rvec: np.ndarray, tvec: np.ndarray) -> "RigidTransform":
        """From an OpenCV rotation vector (axis times angle, rad) and translation."""
        r = np.asarray(rvec, dtype=np.float64).reshape(3)
        angle = float(np.linalg.norm(r))
        if angle < 1e-12:
            return cls(np.eye(3), np.asarray(tvec, dtype=np.float64).reshape(3))
        k = r / angle
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        R = np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K
        return cls(R, np.asarray(tvec, dtype=np.float64).reshape(3))

    @property
    def quaternion_xyzw(self) -> np.ndarray:
        return matrix_to_quaternion_xyzw(self.R)

    @property
    def matrix(self) -> np.ndarray:
        M = np.eye(4)
        M[:3, :3], M[:3, 3] = self.R, self.t
        return M

    def inverse(self) -> "RigidTransform":
        return RigidTransform(self.R.T, -self.R.T @ self.t)

    def __matmul__(self, other: "RigidTransform") -> "RigidTransform":
        return RigidTransform(self.R @ other.R, self.R @ other.t + self.t)

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Points (N, 3) in frame b, expressed in frame a."""
        return np.asarray(points, dtype=np.float64) @ self.R.T + self.t

    def distance_to(self, other: "RigidTransform") -> tuple[float, float]:
        """(translation difference (m), rotation difference (degrees)) between two transforms."""
        return (float(np.linalg.norm(self.t - other.t)), rotation_angle_deg(self.R.T @ other.R))


# ------------------------------------------------------------------------------ frames
@dataclass(frozen=True)
class Frame:
    """One capture: a colour image and, when the camera measures it, depth aligned to it.

    ``stamp_ns`` is the capture time in the ROS clock's epoch as the device reports it (see each
    backend); ``sequence`` is the device's frame counter, whose gaps are frames the device dropped;
    ``received_monotonic`` is the host's ``time.monotonic()`` when the frame reached this process,
    for latency.
    """

    color: np.ndarray
    stamp_ns: int
    sequence: int
    received_monotonic: float
    depth: np.ndarray | None = None

    def __post_init__(self) -> None:
        color = self.color
        if not isinstance(color, np.ndarray) or color.dtype != np.uint8 or color.ndim != 3 or color.shape[2] != 3:
            raise InvalidInputError(f"a colour frame is an (H, W, 3) uint8 RGB array, got "
                                    f"{getattr(color, 'dtype', type(color))} {getattr(color, 'shape', '')}")
        if self.depth is not None:
            depth = self.depth
            if not isinstance(depth, np.ndarray) or depth.dtype != np.float32 or depth.shape != color.shape[:2]:
                raise InvalidInputError(f"depth must be float32 metres of the colour image's size {color.shape[:2]}, "
                                        f"got {getattr(depth, 'dtype', type(depth))} {getattr(depth, 'shape', '')}")
        if self.stamp_ns < 0:
            raise InvalidInputError(f"a frame's stamp must be >= 0 ns, got {self.stamp_ns}")

    @property
    def height(self) -> int:
        return int(self.color.shape[0])

    @property
    def width(self) -> int:
        return int(self.color.shape[1])
