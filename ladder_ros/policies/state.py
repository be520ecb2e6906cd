"""The end-effector orientation a policy reads: one definition, the same in simulation and on the robot.

A policy's state vector must mean what its training data meant. For the orientation that is two
choices, both declared per state entry in the policy's config (``policies/*.yaml``):

* ``reference``: ``top_down``, the rotation from the embodiment's top-down gripper pose to the
  gripper's pose, in the base frame (``R @ T.T``: the gripper's base-frame orientation ``R`` with the
  top-down pose ``T`` taken out on the right), or ``base``, the base-frame orientation ``R`` itself;
* ``angles``: how the three numbers read that rotation: ``sxyz``, roll, pitch, yaw about the fixed
  axes (``R = Rz Ry Rx``, transforms3d's default ``mat2euler`` axes) or ``euler_xyz`` (intrinsic,
  ``R = Rx Ry Rz``, the project's action contract).

The Bridge clients compute ``rpy = mat2euler(R_ee @ DEFAULT_ROT.T)`` with transforms3d's default
``sxyz`` axes (``reference: top_down, angles: sxyz``): for example SimplerEnv's openpi client
(simpler-env/SimplerEnv ``simpler_env/policies/openpi/pi0_or_fast.py``, commit 5f12328b) and
open-pi-zero's Bridge adapter (allenzren/open-pi-zero ``src/agent/env_adapter/simpler.py``, commit
d7909934), both citing bridge_data_robot's ``DEFAULT_ROTATION``.

How both paths reach the same numbers: every observation carries ``ee_euler``, the rotation
relative to the embodiment's top-down pose as Euler XYZ angles (docs/conventions.md). A simulator
computes it from its own end-effector frame (ManiSkill's ``ee_gripper_link`` against the same
top-down pose as below; the built-in tabletop's tool frame, whose identity is that pose); on a robot
:func:`ee_euler_from_base` computes it from ``ee_pose``'s base-frame quaternion and the robot's
top-down pose. The state is then read from ``ee_euler`` alone (:func:`orientation_state`), so a
simulator whose end-effector frame is not the robot's still gives the robot's numbers, and
``reference: base`` means the base-frame orientation of the *robot's* end-effector frame.
"""

from __future__ import annotations

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.rotations import (
    euler_xyz_to_matrix,
    matrix_to_euler_xyz,
    matrix_to_sxyz,
    quaternion_to_matrix,
)

TOP_DOWN, BASE = "top_down", "base"
REFERENCES = (TOP_DOWN, BASE)
SXYZ, EULER_XYZ = "sxyz", "euler_xyz"
ANGLE_CONVENTIONS = (SXYZ, EULER_XYZ)

# The WidowX's ee_gripper_link pointing straight down (its x axis, the approach direction, along the base's
# -z) with its y axis (the finger travel) along the base's +y: bridge_data_robot
# widowx_envs/widowx_controller/src/widowx_controller/widowx_controller.py DEFAULT_ROTATION (commit 07d656fa),
# the pose the Bridge clients measure from. ManiSkill's Bridge WidowX uses the same link and pose
# (ladder_ros/sim/maniskill_bridge.py TOP_DOWN_REFERENCE).
WIDOWX_TOP_DOWN = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
# The Franka's end-effector frame (libfranka's O_T_EE, whose z axis is the approach direction) pointing
# straight down with its x axis along the base's +x: a half turn about x (project choice; no shipped Franka
# policy reads its orientation: pi0.5-DROID reads joint positions).
FRANKA_TOP_DOWN = np.diag([1.0, -1.0, -1.0])
_TOP_DOWN_POSES = {"widowx": WIDOWX_TOP_DOWN, "widowx_robotarena": WIDOWX_TOP_DOWN, "franka": FRANKA_TOP_DOWN}


def top_down_pose(embodiment: str) -> np.ndarray:
    """The base-frame orientation of ``embodiment``'s end-effector frame when its gripper points straight down."""
    try:
        return _TOP_DOWN_POSES[embodiment].copy()
    except KeyError:
        raise ConfigError(f"no top-down gripper pose is known for embodiment {embodiment!r} (known: "
                          f"{', '.join(sorted(_TOP_DOWN_POSES))})") from None


def ee_euler_from_base(quaternion: np.ndarray, embodiment: str) -> np.ndarray:
    """``Observation.ee_euler`` of a robot: its base-frame orientation (w, x, y, z) relative to the top-down pose."""
    return matrix_to_euler_xyz(quaternion_to_matrix(quaternion) @ top_down_pose(embodiment).T)


def orientation_state(ee_euler: np.ndarray, reference: str, angles: str, embodiment: str) -> np.ndarray:
    """The three orientation numbers of a state entry (see the module docstring), from ``Observation.ee_euler``."""
    relative = euler_xyz_to_matrix(ee_euler)
    if reference == TOP_DOWN:
        rotation = relative
    elif reference == BASE:
        rotation = relative @ top_down_pose(embodiment)
    else:
        raise ConfigError(f"orientation reference must be one of {', '.join(REFERENCES)}, got {reference!r}")
    if angles == SXYZ:
        return matrix_to_sxyz(rotation)
    if angles == EULER_XYZ:
        return matrix_to_euler_xyz(rotation)
    raise ConfigError(f"orientation angles must be one of {', '.join(ANGLE_CONVENTIONS)}, got {angles!r}")
