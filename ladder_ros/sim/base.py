"""The interface every simulator backend implements, and the observation it returns.

The contract follows the SimplerEnv / ManiSkill3 WidowX Bridge environments: control at 5 Hz, a
7-D end-effector delta added to the previous *target* pose in the base frame, the gripper command
+1 open and -1 closed, a camera image, and the finger positions reported as a normalised aperture
in [0, 1] (1 open). Simulators also report privileged facts (object poses, per-destination counts)
that only the privileged verifier, the oracle verifier, scoring and test instruments may read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, runtime_checkable

import numpy as np

# The action contract lives in the core (policies and drivers read it without a simulator).
from ladder_ros.camera.model import CameraIntrinsics  # noqa: F401  (re-exported)
from ladder_ros.core.action_conventions import ACTION_DIM, validate_action  # noqa: F401  (re-exported)
from ladder_ros.core.goals import GoalState
from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_quaternion
from ladder_ros.core.task import Task


@dataclass(frozen=True)
class ObjectPose:
    """Where one object instance is (world frame, metres; quaternion w, x, y, z)."""

    kind: str
    position: np.ndarray
    quaternion: np.ndarray


@dataclass(frozen=True)
class ContainerInfo:
    """A destination: its centre, half extents of its footprint and the height of its surface."""

    name: str
    position: np.ndarray
    half_extents: np.ndarray
    surface_z: float


@dataclass(frozen=True)
class PrivilegedState:
    """What only a simulator knows. Never sent to a deployable policy or VLM."""

    goal: GoalState
    objects: Mapping[str, ObjectPose] = field(default_factory=dict)
    containers: Mapping[str, ContainerInfo] = field(default_factory=dict)
    grasped: tuple[str, ...] = ()  # instance names held between the fingers
    # The stock env's own success check at this step (ManiSkill's env.evaluate()["success"]) on an
    # episode scored by it (success_rule simplerenv); None otherwise.
    env_success: bool | None = None


@dataclass(frozen=True)
class Observation:
    """One control step's observation.

    ``step`` counts control steps since reset (0 = the reset observation). ``aperture`` is the
    gripper opening in [0, 1]. ``ee_position`` is the end-effector position in the robot base frame
    (metres). ``ee_quaternion`` is the end effector's true orientation in the robot base frame
    (w, x, y, z), what ``ee_pose`` publishes. ``ee_euler`` is its orientation relative to the
    embodiment's top-down gripper pose as Euler XYZ angles (rad): (0, 0, yaw) for a gripper pointing
    down, which is how the scripted expert steers (docs/conventions.md). ``target_position`` is the
    controller's target (deltas add to it). ``privileged`` is None on real robots. ``depth`` is
    the camera's exact depth (float32 metres, aligned to ``image``, NaN where nothing was hit)
    when the simulator was asked to render it.
    """

    step: int
    image: np.ndarray | None
    aperture: float
    ee_position: np.ndarray
    ee_euler: np.ndarray
    joint_names: tuple[str, ...]
    joint_positions: np.ndarray
    target_position: np.ndarray | None = None
    privileged: PrivilegedState | None = None
    depth: np.ndarray | None = None
    ee_quaternion: np.ndarray | None = None

    def base_orientation(self) -> np.ndarray:
        """The base-frame orientation (w, x, y, z): ``ee_quaternion``, or, for a backend whose top-down
        reference is the base frame itself and that gives no quaternion, the one of ``ee_euler``."""
        if self.ee_quaternion is not None:
            return np.asarray(self.ee_quaternion, dtype=np.float64)
        return matrix_to_quaternion(euler_xyz_to_matrix(self.ee_euler))


@runtime_checkable
class SimulatorBackend(Protocol):
    """A simulator the reference loop and the sim bridge node drive step by step."""

    name: str
    control_rate_hz: float

    def reset(self, task: Task, layout: int, seed: int) -> Observation:
        """Build ``task``'s scene in layout ``layout`` (0-based) with ``seed`` for any randomness."""

    def step(self, action: np.ndarray) -> Observation:
        """Apply one 7-D action for one control period and return the next observation."""

    def camera_intrinsics(self) -> CameraIntrinsics | None:
        """The intrinsics of the camera whose images the observations carry (None: no camera)."""

    def close(self) -> None:
        """Free the simulator's resources."""
