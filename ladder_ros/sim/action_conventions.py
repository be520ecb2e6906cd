"""Action conventions: the one place where a policy's 7-D action is read as the simulators read it.

Both simulator backends use these rotations (Euler XYZ, as ManiSkill3 and this project's action
contract in ``ladder_ros.sim.base``); the ManiSkill3 backend also converts other conventions.

Two conventions differ between the old SimplerEnv (ManiSkill2_real2sim) and its ManiSkill3 line
(DESIGN.md §4), and mixing them up silently rotates the gripper the wrong way on large turns:

* **Rotation delta.** ManiSkill3's ``PDEEPoseController.compute_target_pose``
  (mani_skill/agents/controllers/pd_ee_pose.py) reads ``action[3:6]`` as intrinsic Euler XYZ angles,
  ``R = Rx(a) @ Ry(b) @ Rz(c)``, and left-multiplies the previous target orientation by it
  (``root_aligned_body_rotation``). The old SimplerEnv read the same three numbers as an axis-angle
  vector. Both give the same rotation for a turn about a single axis and agree to first order for
  small angles; they differ at second order when two or more axes turn together.
* **Gripper.** The controller takes +1 open and -1 closed. Bridge policies predict an "open"
  value in [0, 1] that SimplerEnv binarises with ``2 * (open > 0.5) - 1``; there is no sticky
  gripper on the WidowX.

Everything here is plain numpy, so the conventions are tested without a simulator.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError, unknown_name
from ladder_ros.sim.base import validate_action

# SimplerEnv's Bridge binarisation threshold: 2 * (open > 0.5) - 1 (DESIGN.md §4).
GRIPPER_OPEN_THRESHOLD = 0.5


class RotationConvention(str, enum.Enum):
    """How a policy's three rotation numbers are meant."""

    EULER_XYZ = "euler_xyz"  # ManiSkill3 (and this project's action contract, ladder_ros.sim.base)
    AXIS_ANGLE = "axis_angle"  # the old SimplerEnv / ManiSkill2_real2sim

    @classmethod
    def parse(cls, name: "str | RotationConvention") -> "RotationConvention":
        try:
            return cls(name)
        except ValueError:
            raise unknown_name("rotation convention", str(name), [c.value for c in cls]) from None


class GripperConvention(str, enum.Enum):
    """How a policy's gripper number is meant."""

    SIGNED = "signed"  # already +1 open / -1 closed; passed through, clipped to [-1, 1]
    OPEN_FRACTION = "open_fraction"  # Bridge policies: 'open' in [0, 1], binarised at 0.5

    @classmethod
    def parse(cls, name: "str | GripperConvention") -> "GripperConvention":
        try:
            return cls(name)
        except ValueError:
            raise unknown_name("gripper convention", str(name), [c.value for c in cls]) from None


@dataclass(frozen=True)
class ActionConvention:
    """What the incoming 7-D action means; the backend converts it to ManiSkill3's reading."""

    rotation: RotationConvention = RotationConvention.EULER_XYZ
    gripper: GripperConvention = GripperConvention.SIGNED

    @classmethod
    def parse(cls, rotation: str = "euler_xyz", gripper: str = "signed") -> "ActionConvention":
        return cls(RotationConvention.parse(rotation), GripperConvention.parse(gripper))


def _rot_x(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _rot_y(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def euler_xyz_to_matrix(euler: np.ndarray) -> np.ndarray:
    """``Rx(a) @ Ry(b) @ Rz(c)``: ManiSkill3's ``euler_angles_to_matrix(angles, "XYZ")``."""
    a, b, c = np.asarray(euler, dtype=np.float64)
    return _rot_x(a) @ _rot_y(b) @ _rot_z(c)


def matrix_to_euler_xyz(matrix: np.ndarray) -> np.ndarray:
    """Inverse of :func:`euler_xyz_to_matrix`, with the middle angle in [-pi/2, pi/2]."""
    m = np.asarray(matrix, dtype=np.float64)
    b = np.arcsin(np.clip(m[0, 2], -1.0, 1.0))
    if abs(m[0, 2]) < 1.0 - 1e-9:
        a = np.arctan2(-m[1, 2], m[2, 2])
        c = np.arctan2(-m[0, 1], m[0, 0])
    else:  # gimbal lock: only a +/- c is defined; put it all in a
        a = np.arctan2(m[2, 1], m[1, 1])
        c = 0.0
    return np.array([a, b, c])


def axis_angle_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: the rotation by ``|v|`` radians about ``v / |v|``."""
    v = np.asarray(rotvec, dtype=np.float64)
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.eye(3)
    k = v / angle
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + np.sin(angle) * kx + (1.0 - np.cos(angle)) * (kx @ kx)


def matrix_to_axis_angle(matrix: np.ndarray) -> np.ndarray:
    """Inverse of :func:`axis_angle_to_matrix`, with the angle in [0, pi]."""
    m = np.asarray(matrix, dtype=np.float64)
    antisymmetric = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]]) / 2.0  # sin * axis
    sin_angle = float(np.linalg.norm(antisymmetric))
    cos_angle = (np.trace(m) - 1.0) / 2.0
    angle = float(np.arctan2(sin_angle, cos_angle))  # well conditioned over [0, pi], unlike arccos
    if angle < 1e-12:
        return np.zeros(3)
    if cos_angle > -0.5:
        return antisymmetric / sin_angle * angle
    # Near a half turn the antisymmetric part vanishes: R + R^T = 2 cos I + 2 (1 - cos) k k^T.
    outer = (m + m.T - 2.0 * cos_angle * np.eye(3)) / (2.0 * (1.0 - cos_angle))
    column = outer[:, int(np.argmax(np.diag(outer)))]
    axis = column / np.linalg.norm(column)
    if axis @ antisymmetric < 0:
        axis = -axis
    return axis * angle


def axis_angle_to_euler_xyz(rotvec: np.ndarray) -> np.ndarray:
    """The Euler XYZ angles ManiSkill3 must read to turn as the axis-angle ``rotvec`` means."""
    return matrix_to_euler_xyz(axis_angle_to_matrix(rotvec))


def euler_xyz_to_axis_angle(euler: np.ndarray) -> np.ndarray:
    """The axis-angle vector the old SimplerEnv must read to turn as ManiSkill3's ``euler`` means."""
    return matrix_to_axis_angle(euler_xyz_to_matrix(euler))


def binarize_gripper(open_fraction: float) -> float:
    """SimplerEnv's Bridge rule ``2 * (open > 0.5) - 1``: +1 open, -1 closed."""
    value = float(open_fraction)
    if not np.isfinite(value):
        raise InvalidInputError(f"gripper value must be finite, got {value!r}")
    return 1.0 if value > GRIPPER_OPEN_THRESHOLD else -1.0


def to_maniskill_action(action: np.ndarray, convention: ActionConvention = ActionConvention()) -> np.ndarray:
    """Convert one 7-D policy action to ManiSkill3's reading: metres, Euler XYZ radians, +1/-1 gripper.

    The translation (metres in the robot base frame, added to the previous *target* pose) is the
    same in both simulators and passes through unchanged.
    """
    if not isinstance(convention, ActionConvention):
        raise ConfigError(f"convention must be an ActionConvention, got {type(convention).__name__}")
    arr = validate_action(action).copy()
    if convention.rotation is RotationConvention.AXIS_ANGLE:
        arr[3:6] = axis_angle_to_euler_xyz(arr[3:6])
    if convention.gripper is GripperConvention.OPEN_FRACTION:
        arr[6] = binarize_gripper(arr[6])
    else:
        arr[6] = float(np.clip(arr[6], -1.0, 1.0))
    return arr
