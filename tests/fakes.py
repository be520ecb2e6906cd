"""Small deterministic stand-ins for a simulator, a policy and a verifier (core-tier tests).

The toy world has no physics: the policy's action names the object and destination it works on
(``action[0]`` and ``action[1]``: the object and destination index in units of ``TOY_UNIT`` metres,
so every action stays within the safety filter's per-step bounds), closing the gripper grasps that
object, opening it drops the object on the destination. A seeded miss rate makes grasps fail.
"""

from __future__ import annotations

import numpy as np

from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import Observation, PrivilegedState
from ladder_ros.core.task import Task
from ladder_ros.core.verification import VerificationRequest, VerificationResult
from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.policies.base import LowLevelPolicy

TOY_UNIT = 0.001  # metres per index: a toy action is a tiny, valid end-effector delta


class ToyWorld:
    """``image_px``: the side of a square camera image whose pixels all hold the step number (0: no camera)."""

    name = "toy_world"
    control_rate_hz = 5.0

    def __init__(self, image_px: int = 0):
        self.image_px = image_px

    def reset(self, task: Task, layout: int, seed: int) -> Observation:
        self.task = task
        kinds = sorted({s.object for s in task.subgoals} | set(task.distractors))
        self.kinds = kinds
        self.dests = sorted({s.destination for s in task.subgoals})
        counts = {k: max(sum(1 for s in task.subgoals if s.object == k and s.key == t.key)
                         for t in task.subgoals if t.object == k) if any(s.object == k for s in task.subgoals) else 1
                  for k in kinds}
        self.where = [[k, "table"] for k in kinds for _ in range(counts[k])]
        self.held: int | None = None
        self.aperture = 1.0
        self.step_count = 0
        return self._obs()

    def camera_intrinsics(self) -> CameraIntrinsics | None:
        """An ideal pinhole with a 60 degree vertical field of view (None without a camera)."""
        return CameraIntrinsics.from_vertical_fov(60.0, self.image_px, self.image_px) if self.image_px else None

    def _goal(self) -> GoalState:
        resting: dict = {}
        for i, (kind, loc) in enumerate(self.where):
            if loc not in ("table", "held"):
                resting[(kind, loc)] = resting.get((kind, loc), 0) + 1
        held = frozenset(self.where[self.held][0] for _ in [0] if self.held is not None)
        return GoalState(resting=resting, held=held)

    def _obs(self) -> Observation:
        z = 0.1 if self.held is not None else 0.0
        image = None
        if self.image_px:
            image = np.full((self.image_px, self.image_px, 3), self.step_count % 256, dtype=np.uint8)
        return Observation(step=self.step_count, image=image, aperture=self.aperture,
                           ee_position=np.array([0.0, 0.0, z]), ee_euler=np.zeros(3), joint_names=(),
                           joint_positions=np.zeros(0), privileged=PrivilegedState(goal=self._goal()))

    def step(self, action) -> Observation:
        kind = self.kinds[int(round(action[0] / TOY_UNIT))] if action[0] >= 0 else None
        dest = self.dests[int(round(action[1] / TOY_UNIT))] if action[1] >= 0 else None
        closing = action[6] < 0
        if closing and self.aperture > 0.5 and kind is not None and action[2] >= 0:
            # grasp the first instance of the kind not already at the destination
            for i, (k, loc) in enumerate(self.where):
                if k == kind and loc != dest:
                    self.held = i
                    self.where[i][1] = "held"
                    break
        if not closing and self.held is not None:
            self.where[self.held][1] = dest if dest is not None else "table"
            self.held = None
        self.aperture = 0.0 if closing else 1.0
        self.step_count += 1
        return self._obs()

    def close(self) -> None:
        pass


class ToyPolicy(LowLevelPolicy):
    """Close 3 steps, then open: one pick-and-place per 6 steps; misses a grasp with ``miss_rate``."""

    name = "toy_policy"

    def __init__(self, task: Task, seed: int, miss_rate: float = 0.0):
        self.task = task
        self.rng = np.random.default_rng(seed)
        self.miss_rate = miss_rate

    def reset(self, instruction: str) -> None:
        self.phase = 0
        self.miss = False

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        sub = next((s for s in self.task.subgoals if s.text == instruction), self.task.subgoals[0])
        kinds = sorted({s.object for s in self.task.subgoals} | set(self.task.distractors))
        dests = sorted({s.destination for s in self.task.subgoals})
        if self.phase == 0:
            self.miss = bool(self.rng.random() < self.miss_rate)
        closing = 1 <= self.phase <= 3
        self.phase = (self.phase + 1) % 6
        return np.array([kinds.index(sub.object) * TOY_UNIT, dests.index(sub.destination) * TOY_UNIT,
                         -TOY_UNIT if self.miss else TOY_UNIT, 0, 0, 0, -1.0 if closing else 1.0])


class OracleCounter:
    """Counts from the toy world's privileged goal state."""

    name = "oracle"

    def verify(self, request: VerificationRequest, observation: Observation) -> VerificationResult:
        count = observation.privileged.goal.count(request.subgoal.object, request.subgoal.destination)
        return VerificationResult(request_id=request.request_id, count=count, source=self.name)
