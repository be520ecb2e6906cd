"""Evaluation plans: which episodes an operator runs, in which order, and how far the lab has got.

A plan is a YAML file listing tasks × episodes (× variants)::

    schema_version: 1
    name: widowx_kitchen            # names the plan's episodes
    variants: [proprio_verifier]    # default for every task
    episodes: 3                     # default episodes per task and variant
    seed: 0                         # episode k of a task uses seed + k
    tasks:
      - task: kitchen_single_2
      - task: kitchen_single_4
        episodes: 5
        layouts: 24                 # episode k uses layout k mod 24 (default: layout k)
        variants: [proprio_verifier, periodic_trigger]

It expands into entries in the order sim-eval runs them (task, then episode, then variant), so the
variants of one episode meet the same layout one after the other. An entry is done once an episode
started for it is over, unless the operator aborted it (F7: the trial is void, the entry runs again)
or the graph lost a node under it (``interrupted``); progress is read from the operator's episode
records (:mod:`ladder_ros.panel.records`), so a restarted panel resumes where the lab stopped and there
is no second file to get out of step.

**Blind A/B sessions.** A plan may compare two systems instead of listing variants::

    compare:                       # two orchestrator variants, run blind
      - variant: proprio_verifier
      - variant: periodic_trigger
    order_seed: 7                  # seeds which system runs first in each pair

Episode k of a task is then a *pair*: both systems on the same task, layout and seed, one after the
other, in an order drawn per pair from ``order_seed``. The operator sees only "A" (the pair's first
episode) and "B" (its second) and states a preference per pair; which system was A in which pair is
written down only when the session closes (:mod:`ladder_ros.panel.ab_session`). Pure: no Qt, no rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import yaml

from ladder_ros.core.errors import ConfigError, read_text
from ladder_ros.core.orchestrator import Variant

PLAN_SCHEMA_VERSION = 1
_PLAN_KEYS = {"schema_version", "name", "description", "variants", "episodes", "seed", "tasks", "compare",
              "order_seed"}
_TASK_KEYS = {"task", "episodes", "layouts", "variants", "seed"}
_SYSTEM_KEYS = {"variant", "policy"}
ARMS = ("A", "B")  # what the operator sees of a pair: its first and its second episode
# Finish reasons of an episode that does not count for its plan entry (it is run again): the operator
# declared the trial void (F7), or the graph lost a node under it. The orchestrator writes them as
# "aborted: operator abort" and "aborted: interrupted: ..." (ladder_ros/core/record.py).
VOID_REASONS = ("aborted: operator abort", "aborted: interrupted")


def is_void(finish_reason: str | None) -> bool:
    """An episode that ended void: aborted by the operator or interrupted; its plan entry runs again."""
    return bool(finish_reason) and str(finish_reason).startswith(VOID_REASONS)


@dataclass(frozen=True)
class PlanEntry:
    """One episode to run: what the operator sees before pressing start."""

    index: int
    task_id: str
    variant: str
    layout: int
    seed: int
    episode: int  # k: the task's k-th episode
    pair: int | None = None  # blind A/B: the pair this episode belongs to
    arm: str = ""  # blind A/B: "A" (the pair's first episode) or "B"

    @property
    def blind(self) -> bool:
        return self.pair is not None

    @property
    def shown_variant(self) -> str:
        """What the operator may see of the system: the arm of a blind pair, else the variant."""
        return self.arm if self.blind else self.variant

    @property
    def key(self) -> str:
        """Stable name of the entry (the same after the plan file gains tasks at its end); a blind entry's
        key names its pair and arm, never its system."""
        if self.blind:
            return f"{self.task_id}/pair{self.pair}/{self.arm}/e{self.episode}/l{self.layout}/s{self.seed}"
        return f"{self.task_id}/{self.variant}/e{self.episode}/l{self.layout}/s{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        """What a record keeps of the entry: for a blind entry, everything but the system."""
        data = {"index": self.index, "key": self.key, "task_id": self.task_id, "layout": self.layout,
                "seed": self.seed, "episode": self.episode}
        if self.blind:
            data["ab"] = {"pair": self.pair, "arm": self.arm}
        else:
            data["variant"] = self.variant
        return data


def _positive_int(value: Any, where: str, source: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"must be an integer >= {minimum}, got {value!r}", source=source, key=where)
    return value


def _variants(value: Any, where: str, source: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ConfigError(f"must be a non-empty list of variants, got {value!r}", source=source, key=where)
    out = []
    for v in value:
        try:
            out.append(Variant.parse(v).value)
        except Exception as exc:  # Variant.parse names the valid variants
            raise ConfigError(str(exc), source=source, key=where) from None
    return tuple(out)


def _systems(value: Any, source: str) -> tuple[dict[str, str], ...]:
    """The two systems of a blind comparison, each ``{"variant": ...}``."""
    if not isinstance(value, list) or len(value) != 2:
        raise ConfigError(f"must list exactly two systems to compare, got {value!r}", source=source, key="compare")
    systems = []
    for i, spec in enumerate(value):
        where = f"compare[{i}]"
        if isinstance(spec, str):
            spec = {"variant": spec}
        if not isinstance(spec, Mapping) or not spec:
            raise ConfigError(f"a system is a mapping like {{variant: proprio_verifier}}, got {spec!r}",
                              source=source, key=where)
        unknown = sorted(set(spec) - _SYSTEM_KEYS)
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r}; valid: {', '.join(sorted(_SYSTEM_KEYS))}",
                              source=source, key=where)
        if "policy" in spec:
            # The graph's policy node loads one policy when it starts; an episode command cannot switch it,
            # so the panel could not run the two systems of a pair on the same graph.
            raise ConfigError(f"comparing policies ({spec['policy']!r}) needs a policy node that switches policy "
                              "per episode, which the graph does not have yet: compare orchestrator variants, or "
                              "run one session per policy", source=source, key=where)
        if "variant" not in spec:
            raise ConfigError("a system names its 'variant'", source=source, key=where)
        systems.append({"variant": _variants(spec["variant"], f"{where}.variant", source)[0]})
    if systems[0] == systems[1]:
        raise ConfigError(f"the two systems are the same ({systems[0]['variant']})", source=source, key="compare")
    return tuple(systems)


def pair_orders(order_seed: int, pairs: int) -> list[tuple[int, int]]:
    """For each pair, which system runs as A (first) and which as B: ``(0, 1)`` or ``(1, 0)``.

    Counterbalanced: half of the pairs (the first system one more when the count is odd) run the first
    system first, and which pairs do is a permutation drawn from ``order_seed`` (numpy's PCG64), so an
    order effect (a tired operator, a warming motor) cannot favour one system and the same plan always
    gives the same orders."""
    swaps = np.random.default_rng(order_seed).permutation([i % 2 for i in range(pairs)])
    return [(1, 0) if s else (0, 1) for s in swaps]


class EvaluationPlan:
    """The expanded entries of a plan file, with its name (and, for a blind A/B session, its systems)."""

    def __init__(self, name: str, entries: list[PlanEntry], source: str = "",
                 systems: tuple[dict[str, str], ...] = (), order_seed: int | None = None):
        self.name = name
        self.entries = entries
        self.source = source
        self.systems = systems
        self.order_seed = order_seed

    @property
    def blind(self) -> bool:
        return bool(self.systems)

    @property
    def pairs(self) -> dict[int, dict[str, PlanEntry]]:
        """Blind sessions: pair -> {"A": entry, "B": entry}."""
        out: dict[int, dict[str, PlanEntry]] = {}
        for e in self.entries:
            if e.pair is not None:
                out.setdefault(e.pair, {})[e.arm] = e
        return out

    @classmethod
    def load(cls, path: str | Path) -> "EvaluationPlan":
        source = str(path)
        try:
            data = yaml.safe_load(read_text(path, "evaluation plan"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"not valid YAML: {exc}", source=source) from None
        return cls.parse(data, source)

    @classmethod
    def parse(cls, data: Any, source: str = "<plan>") -> "EvaluationPlan":
        if not isinstance(data, Mapping):
            raise ConfigError("an evaluation plan is a mapping", source=source)
        if data.get("schema_version") != PLAN_SCHEMA_VERSION:
            raise ConfigError(f"unsupported schema_version {data.get('schema_version')!r}; this version reads "
                              f"{PLAN_SCHEMA_VERSION}", source=source)
        unknown = sorted(set(data) - _PLAN_KEYS)
        if unknown:
            raise ConfigError(f"unknown key; valid: {', '.join(sorted(_PLAN_KEYS))}", source=source, key=unknown[0])
        name = data.get("name")
        if not isinstance(name, str) or not name.strip() or not all(c.isalnum() or c in "._-" for c in name):
            raise ConfigError(f"must be a non-empty name of letters, digits, '.', '_', '-', got {name!r}",
                              source=source, key="name")
        systems: tuple[dict[str, str], ...] = ()
        order_seed = None
        if "compare" in data:
            systems = _systems(data["compare"], source)
            order_seed = _positive_int(data.get("order_seed", 0), "order_seed", source, minimum=0)
            if "variants" in data:
                raise ConfigError("a blind comparison runs the systems of 'compare'; drop 'variants'", source=source,
                                  key="variants")
        elif "order_seed" in data:
            raise ConfigError("order_seed orders the pairs of a blind comparison: add 'compare'", source=source,
                              key="order_seed")
        variants = _variants(data.get("variants", ["proprio_verifier"]), "variants", source)
        episodes = _positive_int(data.get("episodes", 1), "episodes", source)
        seed = _positive_int(data.get("seed", 0), "seed", source, minimum=0)
        tasks = data.get("tasks")
        if not isinstance(tasks, list) or not tasks:
            raise ConfigError("must be a non-empty list", source=source, key="tasks")
        entries: list[PlanEntry] = []
        seen: set[str] = set()
        for i, spec in enumerate(tasks):
            where = f"tasks[{i}]"
            if not isinstance(spec, Mapping) or not isinstance(spec.get("task"), str) or not spec["task"]:
                raise ConfigError("each task is a mapping with a 'task' id", source=source, key=where)
            unknown = sorted(set(spec) - _TASK_KEYS)
            if unknown:
                raise ConfigError(f"unknown key {unknown[0]!r}; valid: {', '.join(sorted(_TASK_KEYS))}",
                                  source=source, key=where)
            task_id = spec["task"]
            if task_id in seen:
                raise ConfigError(f"task {task_id!r} is listed twice", source=source, key=where)
            seen.add(task_id)
            n = _positive_int(spec.get("episodes", episodes), f"{where}.episodes", source)
            task_seed = _positive_int(spec.get("seed", seed), f"{where}.seed", source, minimum=0)
            if systems and "variants" in spec:
                raise ConfigError("a blind comparison runs the systems of 'compare'; drop 'variants'",
                                  source=source, key=f"{where}.variants")
            task_variants = _variants(spec.get("variants", list(variants)), f"{where}.variants", source)
            layouts = spec.get("layouts")
            if layouts is not None:
                _positive_int(layouts, f"{where}.layouts", source)
            for k in range(n):
                layout = k % layouts if layouts else k
                if systems:
                    pair = sum(1 for e in entries if e.arm == "A")
                    for arm in ARMS:  # the system of each arm is filled in below, once the pairs are counted
                        entries.append(PlanEntry(index=len(entries), task_id=task_id, variant="", layout=layout,
                                                 seed=task_seed + k, episode=k, pair=pair, arm=arm))
                    continue
                for variant in task_variants:
                    entries.append(PlanEntry(index=len(entries), task_id=task_id, variant=variant, layout=layout,
                                             seed=task_seed + k, episode=k))
        if systems:
            orders = pair_orders(order_seed, sum(1 for e in entries if e.arm == "A"))
            entries = [replace(e, variant=systems[orders[e.pair][ARMS.index(e.arm)]]["variant"]) for e in entries]
        return cls(name, entries, source, systems, order_seed)

    def done_keys(self, plan_entries: Iterable[tuple[Mapping | None, bool]]) -> set[str]:
        """Keys of this plan's entries with an episode that counts (over, and not void).

        ``plan_entries``: per episode record, its ``plan_entry`` and whether the episode counts.
        """
        keys = {e.key for e in self.entries}
        return {entry["key"] for entry, over in plan_entries
                if over and entry and entry.get("plan") == self.name and entry.get("key") in keys}

    def next_entry(self, done: set[str], skipped: Iterable[str] = ()) -> PlanEntry | None:
        """The first entry not done (and not skipped in this session); None when the plan is complete."""
        skip = set(skipped)
        return next((e for e in self.entries if e.key not in done and e.key not in skip), None)

    def entry_record(self, entry: PlanEntry) -> dict[str, Any]:
        """What an episode record keeps of the entry it ran for."""
        return {"plan": self.name, "source": self.source, **entry.to_dict()}
