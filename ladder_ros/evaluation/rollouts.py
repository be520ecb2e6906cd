"""Minimal episode drivers for validating scenes and measuring a policy in simulation.

These are instruments, not the orchestrator: they feed a policy either the task's subgoal texts in
order, advancing on the simulator's predicate (as the privileged verifier does, Appendix B: the
predicate holds for the settle window with the gripper open; retried until the budget ends on the
WidowX suites), or the full instruction for the whole budget (the 'low-level policy' baseline,
Section 4). The paper validates every layout with scripted policies that complete all subgoals
(Section 3); ``scripts/validate_tabletop_layouts.py`` runs these drivers over a suite.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.observation import Observation
from ladder_ros.core.presets import WIDOWX, EmbodimentPreset
from ladder_ros.core.task import Task
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.sim.base import SimulatorBackend


@dataclass(frozen=True)
class RolloutResult:
    """How one episode ended."""

    task_id: str
    layout: int
    mode: str  # "subgoals" or "full_instruction"
    success: bool
    achieved: tuple[bool, ...]
    ever_achieved: tuple[bool, ...]
    steps: int
    budget: int
    order_violations: int
    distractors_placed: tuple[str, ...]
    sim_seconds: float  # wall time spent inside backend.step
    policy_seconds: float  # wall time spent inside policy.act

    @property
    def progress(self) -> float:
        """Subgoal progress: the fraction of subgoals that hold at the end (Section 3)."""
        return sum(self.achieved) / len(self.achieved)

    @property
    def regressions(self) -> int:
        """Subgoals completed at some step and undone by the end."""
        return sum(1 for e, a in zip(self.ever_achieved, self.achieved) if e and not a)


def _privileged_goal(obs: Observation):
    if obs.privileged is None:
        raise InvalidInputError("the rollout drivers read privileged goal states; this backend reports none")
    return obs.privileged.goal


def _result(task: Task, layout: int, mode: str, tracker: GoalTracker, steps: int, budget: int,
            sim_s: float, policy_s: float) -> RolloutResult:
    return RolloutResult(
        task_id=task.task_id, layout=layout, mode=mode, success=tracker.success,
        achieved=tracker.achieved, ever_achieved=tuple(r.ever_achieved for r in tracker.records),
        steps=steps, budget=budget, order_violations=len(tracker.order_violations),
        distractors_placed=tuple(tracker.distractors_placed()), sim_seconds=sim_s, policy_seconds=policy_s)


def run_subgoal_sequence(backend: SimulatorBackend, task: Task, layout: int, policy: LowLevelPolicy, *,
                         seed: int = 0, preset: EmbodimentPreset = WIDOWX,
                         budget: int | None = None) -> RolloutResult:
    """Feed the subgoal texts in order; advance when the predicate held ``settle`` steps, gripper open."""
    budget = preset.budget_for(task) if budget is None else budget
    settle = preset.privileged_settle_steps
    open_threshold = preset.trigger.open_threshold
    tracker = GoalTracker(task)
    obs = backend.reset(task, layout, seed)
    tracker.update(_privileged_goal(obs), obs.step)
    current, held_for = 0, 0
    policy.reset(task.subgoals[0].text)
    sim_s = policy_s = 0.0
    steps = 0
    while steps < budget and current < task.horizon:
        text = task.subgoals[current].text
        t0 = time.perf_counter()
        action = policy.act(obs, text)
        t1 = time.perf_counter()
        obs = backend.step(action)
        t2 = time.perf_counter()
        policy_s += t1 - t0
        sim_s += t2 - t1
        steps += 1
        achieved = tracker.update(_privileged_goal(obs), obs.step)
        held_for = held_for + 1 if achieved[current] and obs.aperture > open_threshold else 0
        if held_for >= settle:
            current += 1
            held_for = 0
            if current < task.horizon:
                policy.reset(task.subgoals[current].text)
    return _result(task, layout, "subgoals", tracker, steps, budget, sim_s, policy_s)


def run_full_instruction(backend: SimulatorBackend, task: Task, layout: int, policy: LowLevelPolicy, *,
                         seed: int = 0, preset: EmbodimentPreset = WIDOWX,
                         budget: int | None = None) -> RolloutResult:
    """The no-orchestrator baseline: the full instruction for the whole budget, scored at the end."""
    budget = preset.budget_for(task) if budget is None else budget
    tracker = GoalTracker(task)
    obs = backend.reset(task, layout, seed)
    tracker.update(_privileged_goal(obs), obs.step)
    policy.reset(task.instruction)
    sim_s = policy_s = 0.0
    for _ in range(budget):
        t0 = time.perf_counter()
        action = policy.act(obs, task.instruction)
        t1 = time.perf_counter()
        obs = backend.step(action)
        t2 = time.perf_counter()
        policy_s += t1 - t0
        sim_s += t2 - t1
        tracker.update(_privileged_goal(obs), obs.step)
    return _result(task, layout, "full_instruction", tracker, budget, budget, sim_s, policy_s)
