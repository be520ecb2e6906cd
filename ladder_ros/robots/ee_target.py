"""The WidowX's end-effector target, moved by each 7-D action as Bridge's controller moves it.

BridgeData v2 was collected, and Bridge policies act, with deltas applied to the previous *target*
pose, not to the measured one (bridge_data_robot ``robot_base_env.py`` ``_next_qpos``: the target
is kept between steps; ManiSkill3's ``pd_ee_target_delta_pose`` controller does the same): a
measured pose lags the arm's motion, and adding deltas to it would make the arm crawl. So the
target is seeded once from the measured pose (at the start of an episode, after arming, after a
hold) and from then on moves only by the actions: the translation in metres in the base frame,
the rotation (the project's action contract: intrinsic Euler XYZ, left-multiplied, so it turns
about the base axes at the end effector). The new target's position is then clipped into the
workspace box (Bridge clips the target, ``action_clipping``), and the clip is counted.

``speed_scale`` below 1 scales every delta (a first armed run at reduced speed); the policy then
sees a slower arm, which is the point of that run, not a way to evaluate it.
"""

from __future__ import annotations

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.safety import ROTATION, TRANSLATION, WorkspaceBox
from ladder_ros.core.rotations import euler_xyz_to_matrix


class BridgeTarget:
    """The target pose (4x4, base frame) and the last gripper command (+1 open, -1 closed)."""

    def __init__(self, workspace: WorkspaceBox, speed_scale: float = 1.0):
        if not isinstance(workspace, WorkspaceBox):
            raise ConfigError(f"workspace must be a WorkspaceBox, got {type(workspace).__name__}")
        if not 0.0 < speed_scale <= 1.0:
            raise ConfigError(f"speed_scale must be in (0, 1], got {speed_scale!r}")
        self.workspace = workspace
        self.speed_scale = float(speed_scale)
        self.pose: np.ndarray | None = None
        self.gripper = 1.0

    @property
    def seeded(self) -> bool:
        return self.pose is not None

    def seed(self, measured_pose: np.ndarray, gripper_open: bool | None = None) -> None:
        """Start again from the measured pose (its position clipped into the workspace)."""
        pose = np.asarray(measured_pose, dtype=np.float64)
        if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
            raise InvalidInputError(f"a measured pose is a finite 4x4 matrix, got {pose.shape}")
        self.pose = pose.copy()
        self.pose[:3, 3], _ = self.workspace.clip(pose[:3, 3])
        if gripper_open is not None:
            self.gripper = 1.0 if gripper_open else -1.0

    def propose(self, action: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """The target after ``action`` (checked by the action filter already) and the axes clipped; not committed."""
        if self.pose is None:
            raise InvalidInputError("the target has not been seeded from a measured pose")
        a = np.asarray(action, dtype=np.float64)
        target = self.pose.copy()
        target[:3, :3] = euler_xyz_to_matrix(a[ROTATION] * self.speed_scale) @ self.pose[:3, :3]
        target[:3, 3], clipped = self.workspace.clip(self.pose[:3, 3] + a[TRANSLATION] * self.speed_scale)
        return target, clipped

    def commit(self, pose: np.ndarray, gripper: float) -> None:
        self.pose = np.asarray(pose, dtype=np.float64).copy()
        self.gripper = float(gripper)
