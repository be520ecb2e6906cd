"""Scoring an episode and summarising many (Section 3, Section 5.2, Appendix F of the paper).

* Task Success Rate: the share of episodes in which every subgoal and constraint holds at the end
  (the LADDER rule); a stock SimplerEnv task (``success_rule: simplerenv``) takes its env's own
  ``evaluate()["success"]`` at the end instead, so its numbers compare with SimplerEnv's.
* Subgoal Progress: the share of required subgoals completed, pooled over episodes.
* Failure cause for every subgoal not done at the end (Section 5.2, Figure 6):
  ``completed_then_undone`` (it held at some step, not at the end);
  ``advanced_before_completion`` (the orchestrator left it, by a trigger or a wrong verdict, and
  never came back); ``attempted_never_completed`` (it was worked on and never held; for the
  low-level policy, which has no subgoals, its object was grasped); ``never_reached`` (the episode
  never got to it); ``not_in_plan`` (the plan had no subgoal for it); ``episode_error`` (the
  episode produced no result: the simulator or a component raised, or its worker died past its
  retries; such episodes stay in every denominator as failures and are counted as ``errors``).
* 95 % Wilson intervals over episodes; a paired bootstrap over tasks, resampled within each suite
  (10,000 draws), for differences between systems (Appendix F).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.task import LADDER_RULE, SIMPLERENV_RULE, Subgoal, Task

COMPLETED_THEN_UNDONE = "completed_then_undone"
ADVANCED_BEFORE_COMPLETION = "advanced_before_completion"
ATTEMPTED_NEVER_COMPLETED = "attempted_never_completed"
NEVER_REACHED = "never_reached"
NOT_IN_PLAN = "not_in_plan"
EPISODE_ERROR = "episode_error"
FAILURE_CAUSES = (COMPLETED_THEN_UNDONE, ADVANCED_BEFORE_COMPLETION, ATTEMPTED_NEVER_COMPLETED,
                  NEVER_REACHED, NOT_IN_PLAN, EPISODE_ERROR)

ORDER_VIOLATED = "order_violated"
DISTRACTOR_MOVED = "distractor_moved"

Z_95 = 1.959963984540054  # two-sided 95 % normal quantile


@dataclass(frozen=True)
class SubgoalOutcome:
    index: int
    text: str
    done: bool
    cause: str | None
    first_done_step: int | None

    def to_dict(self) -> dict:
        return {"index": self.index, "text": self.text, "done": self.done, "cause": self.cause,
                "first_done_step": self.first_done_step}


@dataclass(frozen=True)
class EpisodeScore:
    success: bool
    outcomes: tuple[SubgoalOutcome, ...]
    violations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def subgoals_done(self) -> int:
        return sum(1 for o in self.outcomes if o.done)


def map_plan_to_task(plan: Sequence[Subgoal], task: Task) -> dict[int, int | None]:
    """Plan index -> task subgoal index, matching (object, destination) with multiplicity, in order."""
    used: set[int] = set()
    mapping: dict[int, int | None] = {}
    for p, sg in enumerate(plan):
        match = next((i for i, t in enumerate(task.subgoals) if i not in used and t.key == sg.key), None)
        if match is not None:
            used.add(match)
        mapping[p] = match
    return mapping


def score_episode(task: Task, tracker: GoalTracker, orchestration: Mapping,
                  env_success: bool | None = None) -> EpisodeScore:
    """Score the end of an episode from the privileged tracker and the orchestrator's summary.

    ``orchestration`` is :meth:`Orchestrator.summary` (plan, completed, advanced, pending,
    ever_current, variant). ``env_success`` is the stock env's own success check at the last
    step; a ``success_rule: simplerenv`` task is scored by it (and needs it), while subgoal
    progress and failure causes still come from the tracker.
    """
    plan = [Subgoal.from_dict(s) for s in orchestration.get("plan", [])] or list(task.subgoals)
    mapping = map_plan_to_task(plan, task)
    plan_of: dict[int, list[int]] = defaultdict(list)
    for p, t in mapping.items():
        if t is not None:
            plan_of[t].append(p)
    pending = set(orchestration.get("pending", []))
    left = (set(orchestration.get("advanced", [])) | set(orchestration.get("completed", []))) - pending
    ever_current = set(orchestration.get("ever_current", []))
    no_subgoals = orchestration.get("variant") == "low_level_policy"
    outcomes = []
    for i, sg in enumerate(task.subgoals):
        rec = tracker.records[i]
        cause = None
        if not rec.achieved:
            if rec.ever_achieved:
                cause = COMPLETED_THEN_UNDONE
            elif no_subgoals:
                cause = ATTEMPTED_NEVER_COMPLETED if rec.object_ever_held else NEVER_REACHED
            elif not plan_of[i]:
                cause = NOT_IN_PLAN
            elif any(p in left for p in plan_of[i]):
                cause = ADVANCED_BEFORE_COMPLETION
            elif any(p in ever_current for p in plan_of[i]):
                cause = ATTEMPTED_NEVER_COMPLETED
            else:
                cause = NEVER_REACHED
        outcomes.append(SubgoalOutcome(index=i, text=sg.text, done=rec.achieved, cause=cause,
                                       first_done_step=rec.first_achieved_step))
    violations = []
    if tracker.order_violations:
        violations.append(ORDER_VIOLATED)
    if tracker.distractors_placed():
        violations.append(DISTRACTOR_MOVED)
    success = all(o.done for o in outcomes) and not violations
    if task.success_rule == SIMPLERENV_RULE:
        if not isinstance(env_success, bool):
            raise InvalidInputError(f"task {task.task_id} is scored by its env's own success check "
                                    "(success_rule simplerenv), but the simulator reported none")
        # the env's check decides the task and its one subgoal alike, so progress agrees with success
        only = outcomes[0]
        cause = None if env_success else (only.cause or ATTEMPTED_NEVER_COMPLETED)
        outcomes = [SubgoalOutcome(index=only.index, text=only.text, done=env_success, cause=cause,
                                   first_done_step=only.first_done_step)]
        success = env_success
    return EpisodeScore(success=success, outcomes=tuple(outcomes), violations=tuple(violations))


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_task_bootstrap(a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]],
                          suite_of: Mapping[str, str] | None = None, draws: int = 10_000,
                          seed: int = 0) -> tuple[float, float, float]:
    """Difference in task success (points, a - b) with a 95 % interval over tasks (Appendix F).

    ``a`` and ``b`` map task id -> (successes, episodes) for two systems run on the same tasks.
    Tasks are resampled with replacement within each suite; both systems are scored on the same
    resampled tasks, so a task's difficulty counts for both.
    """
    tasks = sorted(set(a) & set(b))
    if not tasks:
        raise ValueError("the two systems share no task")
    suite_of = suite_of or {}
    by_suite: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(tasks):
        by_suite[suite_of.get(t, "")].append(i)
    sa = np.array([a[t][0] for t in tasks], dtype=float)
    na = np.array([a[t][1] for t in tasks], dtype=float)
    sb = np.array([b[t][0] for t in tasks], dtype=float)
    nb = np.array([b[t][1] for t in tasks], dtype=float)
    point = 100.0 * (sa.sum() / na.sum() - sb.sum() / nb.sum())
    rng = np.random.default_rng(seed)
    counts = np.zeros((draws, len(tasks)))
    for members in by_suite.values():
        idx = np.asarray(members)
        picks = rng.integers(0, len(idx), size=(draws, len(idx)))
        np.add.at(counts, (np.arange(draws)[:, None], idx[picks]), 1.0)
    diffs = 100.0 * (counts @ sa / (counts @ na) - counts @ sb / (counts @ nb))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return (float(point), float(lo), float(hi))


def _rate_block(successes: int, n: int) -> dict:
    lo, hi = wilson_interval(successes, n)
    return {"success_rate": successes / n if n else 0.0, "ci95": [lo, hi], "n": n}


def summarize_episodes(records: Iterable[Mapping]) -> dict:
    """Per-variant summary of episode records (the lines of ``episodes.jsonl``)."""
    groups: dict[str, list[Mapping]] = defaultdict(list)
    for r in records:
        groups[r["variant"]].append(r)
    summary = {}
    for variant, recs in groups.items():
        n = len(recs)
        wins = sum(1 for r in recs if r["success"])
        done = sum(r["subgoals_done"] for r in recs)
        total = sum(r["horizon"] for r in recs)
        lo, hi = wilson_interval(wins, n)
        by_h: dict[int, list[Mapping]] = defaultdict(list)
        by_cat: dict[str, list[Mapping]] = defaultdict(list)
        for r in recs:
            by_h[int(r["horizon"])].append(r)
            by_cat[r["category"]].append(r)
        causes = Counter(o["cause"] for r in recs for o in r["subgoals"] if o["cause"])
        violations = Counter(v for r in recs for v in r.get("violations", []))
        summary[variant] = {
            "episodes": n,
            "errors": sum(1 for r in recs if r.get("error")),
            "task_success_rate": wins / n if n else 0.0,
            "ci95": [lo, hi],
            "subgoal_progress": done / total if total else 0.0,
            "by_horizon": {h: _rate_block(sum(1 for r in rs if r["success"]), len(rs))
                           for h, rs in sorted(by_h.items())},
            "by_category": {c: _rate_block(sum(1 for r in rs if r["success"]), len(rs))
                            for c, rs in sorted(by_cat.items())},
            "failure_causes": {c: causes.get(c, 0) for c in FAILURE_CAUSES},
            "violations": dict(sorted(violations.items())),
            "mean_steps_used": float(np.mean([r["steps_used"] for r in recs])) if recs else 0.0,
            "verification_queries": sum(r.get("verification_queries", 0) for r in recs),
            "success_rules": dict(sorted(Counter(r.get("success_rule", LADDER_RULE) for r in recs).items())),
        }
    return summary


def per_task_counts(records: Iterable[Mapping], variant: str) -> dict[str, tuple[int, int]]:
    """task id -> (successes, episodes) of one variant."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        if r["variant"] == variant:
            counts[r["task_id"]][0] += int(bool(r["success"]))
            counts[r["task_id"]][1] += 1
    return {t: (s, n) for t, (s, n) in counts.items()}
