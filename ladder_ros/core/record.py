"""The episode record: everything one episode produced, the same fields whoever ran it.

The in-process reference loop, the orchestrator node, and the nodes that write down an episode
cut short (the orchestrator after a restart, the episode recorder after losing the orchestrator)
all build it here, so ``episodes.jsonl``, the final episode status and the recordings hold one
schema. No rclpy here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.events import VERIFICATION_REQUESTED
from ladder_ros.core.reset import EPISODE_KINDS, EPISODE_STARTS, START_LAYOUT, TASK_EPISODE

RECORD_SCHEMA_VERSION = 1
REFERENCE, PLANNER = "reference", "planner"  # where an episode's plan comes from
PLAN_SOURCES = (REFERENCE, PLANNER)
# How long and where an episode ran, as paths into a record: they differ between two runs of the same episode
# (another machine, another executor, another load); every other field is a function of the episode's inputs.
TIMING_FIELDS = (("wall_s",), ("execution",), ("policy_report", "inference_ms"), ("policy_report", "warm_up_s"))


@dataclass
class EpisodeRecord:
    """Everything one episode produced; one line of ``episodes.jsonl``."""

    task_id: str
    suite: str
    category: str
    horizon: int
    variant: str
    layout: int
    seed: int
    success: bool
    subgoals_done: int
    steps_used: int
    budget_steps: int
    finish_reason: str | None
    subgoals: list[dict]
    violations: list[str]
    events: list[dict]
    verification_queries: int
    verifier: str | None
    policy: str  # the name the policy ran under (a config's own name unless the run named it)
    simulator: str
    final_goal: dict
    orchestration: dict
    wall_s: float = 0.0
    success_rule: str = "ladder"
    preset: str = ""
    preset_options: dict = field(default_factory=dict)
    plan: dict = field(default_factory=lambda: {"source": REFERENCE})
    action_convention: dict = field(default_factory=dict)
    # What the policy did (ladder_ros/policies/audit.py PolicyReport): its config hash, chunks refused by
    # reason, held steps by reason, inference latency p50/p95, the largest jump at a chunk seam, states and
    # actions out of the training data's distribution; {} when no policy reported.
    policy_report: dict = field(default_factory=dict)
    # What the episode was for and where its scene came from (ladder_ros/core/reset.py): a "task" episode or the
    # "reset" that put its scene back; built from its "layout", or continued "after_reset" / "after_task" from
    # the scene the episode ``start_after`` (an episode id) left. Records written before these fields read as a
    # task episode started from its layout (:func:`episode_kind`, :func:`episode_start`).
    kind: str = TASK_EPISODE
    start: str = START_LAYOUT
    start_after: str | None = None
    # The digest of the policy config that ran (PolicyConfig.digest()): with ``policy`` the policy's identity, the
    # same from sim-eval and from a graph. Empty: not known (no policy reported); records written before the field
    # have it in ``policy_report.config_hash`` only.
    policy_config_hash: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.policy_config_hash:
            self.policy_config_hash = str(self.policy_report.get("config_hash") or "")
        if self.kind not in EPISODE_KINDS:
            raise InvalidInputError(f"an episode's kind is one of {', '.join(EPISODE_KINDS)}, got {self.kind!r}")
        if self.start not in EPISODE_STARTS:
            raise InvalidInputError(f"an episode's start is one of {', '.join(EPISODE_STARTS)}, got {self.start!r}")
        if (self.start == START_LAYOUT) != (self.start_after is None):
            raise InvalidInputError(f"an episode started {self.start!r} names the episode it continues from only "
                                    f"when it continues from one, got start_after={self.start_after!r}")

    def to_dict(self) -> dict:
        data = {"schema_version": RECORD_SCHEMA_VERSION}
        data.update({k: v for k, v in self.__dict__.items() if k != "extra"})
        data.update(self.extra)
        return data


def episode_kind(record: Mapping[str, Any]) -> str:
    """A record's ``kind`` ("task" or "reset"); a record older than the field is a task episode."""
    return str(record.get("kind", TASK_EPISODE))


def episode_start(record: Mapping[str, Any]) -> tuple[str, str | None]:
    """A record's ``start`` and the episode it continued from; a record older than the field started from its
    layout."""
    return str(record.get("start", START_LAYOUT)), record.get("start_after")


def score_fields(score: Mapping[str, Any] | None, last_step: int) -> dict[str, Any]:
    """The record's fields a simulator's privileged score decides; without one, not successful, nothing done."""
    return {"success": bool(score["success"]) if score else False,
            "subgoals_done": int(score["subgoals_done"]) if score else 0,
            "steps_used": int(score["steps_used"]) if score else max(last_step, 0),
            "subgoals": list(score["subgoals"]) if score else [],
            "violations": list(score["violations"]) if score else [],
            "simulator": str(score.get("simulator", "")) if score else "",
            "final_goal": dict(score["final_goal"]) if score else {}}


def graph_record(status: Mapping[str, Any], *, events: list[dict], orchestration: Mapping[str, Any],
                 finish_reason: str | None, last_step: int, score: Mapping[str, Any] | None, wall_s: float,
                 preset: str = "", preset_options: Mapping[str, str] | None = None,
                 plan: Mapping[str, Any] | None = None, policy: Mapping[str, Any] | None = None,
                 extra: Mapping[str, Any] | None = None) -> dict:
    """The record of an episode run by the graph, from its status (``EpisodeStatus.to_dict``) and events.

    ``score`` is the sim bridge's privileged score (None on a robot, or when none came); without it
    the episode counts as not successful, with no subgoal done. ``policy`` is the policy node's
    report of the episode (None: no policy reported). The policy's name and config hash are the ones
    the status names (the episode ran under that policy), else the report's. The episode's kind and start
    are the status's (a status without them: a task episode built from its layout).
    """
    task = dict(status.get("task") or {})
    report = dict(policy or {})
    return EpisodeRecord(
        task_id=str(task.get("task_id", "")), suite=str(task.get("suite", "")),
        category=str(task.get("category", "")), horizon=len(task.get("subgoals") or []),
        variant=str(status.get("variant", "")), layout=int(status.get("layout", 0)), seed=int(status.get("seed", 0)),
        budget_steps=int(status.get("budget_steps", 0)), finish_reason=finish_reason,
        events=list(events), verification_queries=sum(1 for e in events if e.get("kind") == VERIFICATION_REQUESTED),
        verifier=None, policy=str(status.get("policy") or report.get("policy", "")), **score_fields(score, last_step),
        orchestration=dict(orchestration), wall_s=wall_s,
        success_rule=str(task.get("success_rule", "ladder")), preset=preset, preset_options=dict(preset_options or {}),
        plan=dict(plan) if plan is not None else {"source": REFERENCE}, policy_report=report,
        policy_config_hash=str(status.get("policy_config_hash") or report.get("config_hash", "")),
        kind=str(status.get("kind") or TASK_EPISODE), start=str(status.get("start") or START_LAYOUT),
        start_after=status.get("start_after") or None,
        extra={"episode_id": str(status.get("episode_id", "")), "scored": score is not None,
               "safety": dict(score["safety"]) if score and "safety" in score else {},
               "bridge": {k: score[k] for k in ("bridge_timing_s", "steps_taken") if k in score} if score else {},
               "interrupted": False, **dict(extra or {})},
    ).to_dict()


def without_timing(record: Mapping[str, Any]) -> dict:
    """``record`` without its :data:`TIMING_FIELDS`: what two runs of the same episode must agree on."""
    kept = dict(record)
    for path in TIMING_FIELDS:
        parent = kept
        for key in path[:-1]:
            if not isinstance(parent.get(key), Mapping):
                break
            child = dict(parent[key])  # a copy: the caller's record keeps its timing
            parent[key] = child
            parent = child
        else:
            parent.pop(path[-1], None)
    return kept


def interrupted_reason(reason: str) -> str:
    """The finish reason of an episode that could not end by its own rules (the graph lost a node or stopped)."""
    return f"aborted: interrupted: {reason}"
