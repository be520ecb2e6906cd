"""What the loop observes at one control step, on a robot or in a simulator.

``Observation`` is the loop's own type: simulators return it, the robot graph builds it from the
drivers' and cameras' messages, and policies, verifiers and the orchestrator read it. The privileged
part (object poses, per-destination counts) exists only in simulation; only the privileged verifier,
the oracle verifier, scoring and test instruments read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ladder_ros.core.goals import GoalState
from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_quaternion


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
    # The scene's start regions (flat areas of the table, ladder_ros/core/reset.py) as flat destinations with
    # no body: ``goal`` counts the objects resting in each like on a container; apart from ``containers`` so
    # that what reads the containers sees the same scene whether a suite declares start regions or not.
    regions: Mapping[str, ContainerInfo] = field(default_factory=dict)

    def destination(self, name: str) -> ContainerInfo | None:
        """The container or start region ``name`` (None: neither)."""
        found = self.containers.get(name)
        return found if found is not None else self.regions.get(name)


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
