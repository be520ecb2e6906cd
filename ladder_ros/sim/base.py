"""The interface every simulator backend implements.

A backend returns the loop's own :class:`~ladder_ros.core.observation.Observation` each step.

The contract follows the SimplerEnv / ManiSkill3 WidowX Bridge environments: control at 5 Hz, a
7-D end-effector delta added to the previous *target* pose in the base frame, the gripper command
+1 open and -1 closed, a camera image, and the finger positions reported as a normalised aperture
in [0, 1] (1 open). Simulators also report privileged facts (object poses, per-destination counts)
that only the privileged verifier, the oracle verifier, scoring and test instruments may read.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

# The action contract lives in the core (policies and drivers read it without a simulator).
from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.core.observation import Observation
from ladder_ros.core.task import Task


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
