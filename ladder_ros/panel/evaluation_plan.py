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
started for it is over; progress is read from the operator's episode records
(:mod:`ladder_ros.panel.records`), so a restarted panel resumes where the lab stopped and there is
no second file to get out of step. Pure: no Qt, no rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from ladder_ros.core.errors import ConfigError, read_text
from ladder_ros.core.orchestrator import Variant

PLAN_SCHEMA_VERSION = 1
_PLAN_KEYS = {"schema_version", "name", "description", "variants", "episodes", "seed", "tasks"}
_TASK_KEYS = {"task", "episodes", "layouts", "variants", "seed"}


@dataclass(frozen=True)
class PlanEntry:
    """One episode to run: what the operator sees before pressing start."""

    index: int
    task_id: str
    variant: str
    layout: int
    seed: int
    episode: int  # k: the task's k-th episode

    @property
    def key(self) -> str:
        """Stable name of the entry (the same after the plan file gains tasks at its end)."""
        return f"{self.task_id}/{self.variant}/e{self.episode}/l{self.layout}/s{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "key": self.key, "task_id": self.task_id, "variant": self.variant,
                "layout": self.layout, "seed": self.seed, "episode": self.episode}


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


class EvaluationPlan:
    """The expanded entries of a plan file, with its name."""

    def __init__(self, name: str, entries: list[PlanEntry], source: str = ""):
        self.name = name
        self.entries = entries
        self.source = source

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
            task_variants = _variants(spec.get("variants", list(variants)), f"{where}.variants", source)
            layouts = spec.get("layouts")
            if layouts is not None:
                _positive_int(layouts, f"{where}.layouts", source)
            for k in range(n):
                layout = k % layouts if layouts else k
                for variant in task_variants:
                    entries.append(PlanEntry(index=len(entries), task_id=task_id, variant=variant, layout=layout,
                                             seed=task_seed + k, episode=k))
        return cls(name, entries, source)

    def done_keys(self, plan_entries: Iterable[tuple[Mapping | None, bool]]) -> set[str]:
        """Keys of this plan's entries with an episode that is over.

        ``plan_entries``: per episode record, its ``plan_entry`` and whether the episode is over.
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
