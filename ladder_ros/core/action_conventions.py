"""The 7-D action contract, and the conventions a policy may have been trained in.

Everything downstream of a policy — the ``policy/action`` topic, the simulators, the robot drivers,
the recordings — reads one contract: ``[dx, dy, dz, droll, dpitch, dyaw, gripper]`` with the
translation in metres in the robot base frame, the rotation delta in radians as **intrinsic Euler
XYZ** (``R = Rx Ry Rz``, left-multiplied onto the previous target orientation, as ManiSkill3's
``pd_ee_target_delta_pose`` controller does) and the gripper +1 open, -1 closed.

A policy's own numbers may mean something else, and only the policy knows how it was trained, so
the convention is a property of the policy (:func:`policy_convention`); the reference loop and the
policy node convert each action to the contract with :meth:`ActionConvention.to_canonical` before
anything else sees it. Rotation conventions (docs/conventions.md compares them):

``euler_xyz``        the contract itself (ManiSkill3; this project's scripted expert).
``sxyz_axis_angle``  roll, pitch, yaw about the *fixed* x, y, z axes, ``R = Rz Ry Rx``: what
                     SimplerEnv's Bridge policy wrappers assume when they turn a policy's three
                     angles into an axis-angle with ``transforms3d.euler.euler2axangle`` (static
                     ``sxyz``), which the old SimplerEnv controller then applied exactly.
``axis_angle``       a rotation vector (the old SimplerEnv / ManiSkill2 controller's reading).

Gripper conventions: ``signed`` (already +1 open / -1 closed; clipped to [-1, 1]) and
``open_fraction`` (Bridge policies: "open" in [0, 1], binarised as SimplerEnv does,
``2 * (open > 0.5) - 1``; the WidowX has no sticky gripper).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError, unknown_name
from ladder_ros.core.rotations import (
    axis_angle_to_matrix,
    euler_xyz_to_matrix,
    matrix_to_axis_angle,
    matrix_to_euler_xyz,
    matrix_to_sxyz,
    sxyz_to_matrix,
)

ACTION_DIM = 7  # [dx, dy, dz (m), droll, dpitch, dyaw (rad, Euler XYZ), gripper (+1 open, -1 closed)]

# SimplerEnv's Bridge binarisation threshold: 2 * (open > 0.5) - 1 (its Octo and RT-1 wrappers).
GRIPPER_OPEN_THRESHOLD = 0.5


def validate_action(action: np.ndarray) -> np.ndarray:
    """Return ``action`` as a float64 (7,) array, or raise naming what is wrong with it."""
    arr = np.asarray(action, dtype=np.float64)
    if arr.shape != (ACTION_DIM,):
        raise InvalidInputError(f"action must have shape ({ACTION_DIM},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"action has non-finite entries: {arr.tolist()}")
    return arr


def _parse(cls, kind: str, name):
    """The member of the string enum ``cls`` called ``name``; an unknown name lists the valid ones."""
    try:
        return cls(name)
    except ValueError:
        raise unknown_name(kind, str(name), [c.value for c in cls]) from None


class RotationConvention(str, enum.Enum):
    """How a policy's three rotation numbers are meant."""

    EULER_XYZ = "euler_xyz"
    SXYZ_AXIS_ANGLE = "sxyz_axis_angle"
    AXIS_ANGLE = "axis_angle"

    @classmethod
    def parse(cls, name: "str | RotationConvention") -> "RotationConvention":
        return _parse(cls, "rotation convention", name)

    def to_matrix(self, angles: np.ndarray) -> np.ndarray:
        """The rotation a policy in this convention means by ``angles``."""
        return _READINGS[self][0](angles)

    def from_matrix(self, matrix: np.ndarray) -> np.ndarray:
        """The three numbers a policy in this convention gives for the rotation ``matrix``."""
        return _READINGS[self][1](matrix)


# Each rotation convention's reading of three numbers, and its inverse.
_READINGS = {
    RotationConvention.EULER_XYZ: (euler_xyz_to_matrix, matrix_to_euler_xyz),
    RotationConvention.SXYZ_AXIS_ANGLE: (sxyz_to_matrix, matrix_to_sxyz),
    RotationConvention.AXIS_ANGLE: (axis_angle_to_matrix, matrix_to_axis_angle),
}


class GripperConvention(str, enum.Enum):
    """How a policy's gripper number is meant."""

    SIGNED = "signed"
    OPEN_FRACTION = "open_fraction"

    @classmethod
    def parse(cls, name: "str | GripperConvention") -> "GripperConvention":
        return _parse(cls, "gripper convention", name)


def binarize_gripper(open_fraction: float) -> float:
    """SimplerEnv's Bridge rule ``2 * (open > 0.5) - 1``: +1 open, -1 closed."""
    value = float(open_fraction)
    if not np.isfinite(value):
        raise InvalidInputError(f"gripper value must be finite, got {value!r}")
    return 1.0 if value > GRIPPER_OPEN_THRESHOLD else -1.0


@dataclass(frozen=True)
class ActionConvention:
    """What a policy's 7-D action means; converts it to the project's contract and back."""

    rotation: RotationConvention = RotationConvention.EULER_XYZ
    gripper: GripperConvention = GripperConvention.SIGNED

    def __post_init__(self) -> None:
        if not isinstance(self.rotation, RotationConvention) or not isinstance(self.gripper, GripperConvention):
            raise ConfigError(f"an action convention is a RotationConvention and a GripperConvention, got "
                              f"{self.rotation!r} and {self.gripper!r}")

    @classmethod
    def parse(cls, rotation: str = "euler_xyz", gripper: str = "signed") -> "ActionConvention":
        return cls(RotationConvention.parse(rotation), GripperConvention.parse(gripper))

    @property
    def is_canonical(self) -> bool:
        return self.rotation is RotationConvention.EULER_XYZ and self.gripper is GripperConvention.SIGNED

    def to_dict(self) -> dict:
        return {"rotation": self.rotation.value, "gripper": self.gripper.value}

    def to_canonical(self, action: np.ndarray) -> np.ndarray:
        """The policy's ``action`` in the project's contract (Euler XYZ radians, +1/-1 gripper).

        The translation passes through unchanged. With the canonical convention the validated
        action is returned as it is, so an Euler XYZ policy's numbers reach the simulator bit-exactly.
        """
        arr = validate_action(action)
        if self.is_canonical:
            return arr
        arr = arr.copy()
        if self.rotation is not RotationConvention.EULER_XYZ:
            arr[3:6] = matrix_to_euler_xyz(self.rotation.to_matrix(arr[3:6]))
        if self.gripper is GripperConvention.OPEN_FRACTION:
            arr[6] = binarize_gripper(arr[6])
        else:
            arr[6] = float(np.clip(arr[6], -1.0, 1.0))
        return arr

    def from_canonical(self, action: np.ndarray) -> np.ndarray:
        """The action a policy in this convention would give for the canonical ``action``.

        The inverse of :meth:`to_canonical` up to rounding (an open fraction comes back as 1 or 0);
        the scripted expert uses it to act in any convention, which is how each conversion is
        tested end to end.
        """
        arr = validate_action(action)
        if self.is_canonical:
            return arr
        arr = arr.copy()
        if self.rotation is not RotationConvention.EULER_XYZ:
            arr[3:6] = self.rotation.from_matrix(euler_xyz_to_matrix(arr[3:6]))
        if self.gripper is GripperConvention.OPEN_FRACTION:
            arr[6] = 1.0 if arr[6] > 0 else 0.0
        return arr


CANONICAL = ActionConvention()


def policy_convention(policy: object) -> ActionConvention:
    """The action convention a policy declares (attribute ``action_convention``); canonical when none."""
    convention = getattr(policy, "action_convention", None)
    if convention is None:
        return CANONICAL
    if not isinstance(convention, ActionConvention):
        raise ConfigError(f"policy {getattr(policy, 'name', policy)!r}: action_convention must be an "
                          f"ActionConvention, got {type(convention).__name__}")
    return convention


def canonical_action(policy: object, action: np.ndarray) -> np.ndarray:
    """``policy``'s raw ``action`` in the project's contract (what the reference loop and the policy node send)."""
    return policy_convention(policy).to_canonical(action)
