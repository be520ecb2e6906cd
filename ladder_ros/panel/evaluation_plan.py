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
written down only when the session closes (:mod:`ladder_ros.panel.ab_session`).

A system may name a policy (``{policy: ckpt_b, variant: proprio_verifier}``): one of the names the graph's
policy node serves (its ``policies`` parameter), which each episode's start command names. Two policies are
compared by a mapping, which may also list *cells*::

    compare:
      policy: [ckpt_a, ckpt_b]     # the two systems of every pair
      variant: [proprio_verifier, periodic_trigger]   # cells (default: proprio_verifier alone)

Each cell runs its own pairs (both policies under that variant), so this plan runs a pair per task episode
and variant: a 2 x 2 comparison whose pairs never mix variants. ``{variant: [x, y], policy: ckpt_a}`` compares
two variants under one policy (``policy: [a, b, c]`` with two variants: the variants, in three policy cells).
Each cell's orders are counterbalanced on their own. The names of compared policies must not stand in the
plan's name or a task id (the operator sees both), nor be "A", "B" or "tie", and have at least 3 characters;
:meth:`EvaluationPlan.check_policies` refuses a name the graph does not serve, with the list of those it does.
Pure: no Qt, no rclpy.
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
_COMPARE_KEYS = ("policy", "variant")
DEFAULT_VARIANT = "proprio_verifier"  # the variant of a comparison of policies that lists none
ARMS = ("A", "B")  # what the operator sees of a pair: its first and its second episode
RESERVED_POLICY_NAMES = ("A", "B", "tie")  # what the operator sees and says of a pair
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
    policy: str = ""  # the policy its start command names (empty: the graph's default)

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
            if self.policy:
                data["policy"] = self.policy
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


def _policy(value: Any, where: str, source: str) -> str:
    """A policy name as the graph's policy node serves it (its ``policies`` parameter: NAME=CONFIG)."""
    from ladder_ros.policies.factory import policy_name_problem

    problem = policy_name_problem(value) if isinstance(value, str) else f"a policy name is text, got {value!r}"
    if problem:
        raise ConfigError(problem, source=source, key=where)
    if value in RESERVED_POLICY_NAMES:
        raise ConfigError(f"a compared policy cannot be named {value!r}: the operator sees and says "
                          f"{', '.join(RESERVED_POLICY_NAMES)} of a pair", source=source, key=where)
    return value


def _names(value: Any, where: str, source: str, parse) -> tuple[str, ...]:
    """One name or a non-empty list of distinct names, each checked by ``parse``."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise ConfigError(f"must be a name or a non-empty list of names, got {value!r}", source=source, key=where)
    out = tuple(parse(v, f"{where}[{i}]", source) for i, v in enumerate(values))
    if len(set(out)) != len(out):
        raise ConfigError(f"lists a name twice: {list(out)}", source=source, key=where)
    return out


def _system(spec: Any, where: str, source: str) -> dict[str, str]:
    """One system of a listed comparison: ``{"variant": ...}`` and, when it names one, its ``policy``."""
    if isinstance(spec, str):
        spec = {"variant": spec}
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(f"a system is a mapping like {{variant: proprio_verifier}}, got {spec!r}",
                          source=source, key=where)
    unknown = sorted(set(spec) - _SYSTEM_KEYS)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r}; valid: {', '.join(sorted(_SYSTEM_KEYS))}",
                          source=source, key=where)
    if "variant" not in spec and "policy" not in spec:
        raise ConfigError("a system names its 'variant' (and may name its 'policy')", source=source, key=where)
    system = {"variant": _variants(spec.get("variant", DEFAULT_VARIANT), f"{where}.variant", source)[0]}
    if "policy" in spec:
        system["policy"] = _policy(spec["policy"], f"{where}.policy", source)
    return system


def _comparison(value: Any, source: str) -> tuple[tuple[dict[str, str], dict[str, str]], ...]:
    """The cells of a blind comparison, each the two systems its pairs compare (see the module docstring)."""
    if isinstance(value, list):
        if len(value) != 2:
            raise ConfigError(f"must list exactly two systems to compare, got {value!r}", source=source,
                              key="compare")
        systems = tuple(_system(spec, f"compare[{i}]", source) for i, spec in enumerate(value))
        if ("policy" in systems[0]) != ("policy" in systems[1]):
            raise ConfigError("a comparison of policies names the policy of both systems (the other would run "
                              "under whatever policy the graph defaults to)", source=source, key="compare")
        if systems[0] == systems[1]:
            raise ConfigError(f"the two systems are the same ({systems[0]})", source=source, key="compare")
        return (systems,)
    if not isinstance(value, Mapping):
        raise ConfigError(f"is a list of two systems or a mapping like {{policy: [a, b]}}, got {value!r}",
                          source=source, key="compare")
    unknown = sorted(set(value) - set(_COMPARE_KEYS))
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r}; valid: {', '.join(_COMPARE_KEYS)}", source=source,
                          key="compare")
    policies = _names(value["policy"], "compare.policy", source, _policy) if "policy" in value else ()
    variants = (_names(value["variant"], "compare.variant", source,
                       lambda v, where, src: _variants(v, where, src)[0]) if "variant" in value else ())
    if len(policies) == 2:  # two policies, in a cell per variant
        return tuple(({"variant": v, "policy": policies[0]}, {"variant": v, "policy": policies[1]})
                     for v in variants or (DEFAULT_VARIANT,))
    if len(variants) == 2:  # two variants, in a cell per policy (none named: the graph's default policy)
        return tuple(tuple({"variant": v, **({"policy": p} if p else {})} for v in variants)
                     for p in policies or ("",))
    raise ConfigError(f"compares two policies ({{policy: [a, b]}}) or two variants ({{variant: [x, y]}}), got "
                      f"{dict(value)!r}", source=source, key="compare")


def pair_orders(order_seed: int, pairs: int) -> list[tuple[int, int]]:
    """For each pair, which system runs as A (first) and which as B: ``(0, 1)`` or ``(1, 0)``.

    Counterbalanced: half of the pairs (the first system one more when the count is odd) run the first
    system first, and which pairs do is a permutation drawn from ``order_seed`` (numpy's PCG64), so an
    order effect (a tired operator, a warming motor) cannot favour one system and the same plan always
    gives the same orders."""
    return cell_pair_orders(order_seed, [0] * pairs)


def cell_pair_orders(order_seed: int, cells: list[int]) -> list[tuple[int, int]]:
    """:func:`pair_orders` counterbalanced within each cell: ``cells[k]`` is the cell of pair ``k``; the cells'
    permutations are drawn one after the other, in the order the cells first appear (one cell: the same orders
    as :func:`pair_orders`)."""
    rng = np.random.default_rng(order_seed)
    orders: list[tuple[int, int]] = [(0, 1)] * len(cells)
    for cell in dict.fromkeys(cells):
        mine = [k for k, c in enumerate(cells) if c == cell]
        swaps = rng.permutation([i % 2 for i in range(len(mine))])
        for k, swap in zip(mine, swaps):
            orders[k] = (1, 0) if swap else (0, 1)
    return orders


class EvaluationPlan:
    """The expanded entries of a plan file, with its name (and, for a blind A/B session, its systems: every
    system of every cell, cell by cell; ``cells``: the two systems each cell's pairs compare)."""

    def __init__(self, name: str, entries: list[PlanEntry], source: str = "",
                 systems: tuple[dict[str, str], ...] = (), order_seed: int | None = None,
                 cells: tuple[tuple[dict[str, str], dict[str, str]], ...] = ()):
        self.name = name
        self.entries = entries
        self.source = source
        self.systems = systems
        self.order_seed = order_seed
        self.cells = cells or ((tuple(systems),) if len(systems) == 2 else ())

    @property
    def blind(self) -> bool:
        return bool(self.systems)

    @property
    def policies(self) -> tuple[str, ...]:
        """Every policy name the plan's start commands name, in the order first named."""
        named = [e.policy for e in self.entries if e.policy] + [s["policy"] for s in self.systems if s.get("policy")]
        return tuple(dict.fromkeys(named))

    @property
    def compared_policies(self) -> tuple[str, ...]:
        """The policies the two systems of a pair differ in (the session's secrets while it is open)."""
        names = [s.get("policy", "") for a, b in self.cells if a.get("policy") != b.get("policy") for s in (a, b)]
        return tuple(dict.fromkeys(n for n in names if n))

    @property
    def compares_policies(self) -> bool:
        return bool(self.compared_policies)

    def check_policies(self, served: Iterable[str]) -> None:
        """Refuse a plan that names a policy the graph does not serve (``served``: the names on
        ``policy/status``), with the list of those it does."""
        served = list(served)
        missing = [p for p in self.policies if p not in served]
        if missing:
            raise ConfigError(f"names the policy {missing[0]!r}, which the graph does not serve; it serves: "
                              f"{', '.join(served) or '(no policy)'}", source=self.source, key="compare")

    @property
    def pairs(self) -> dict[int, dict[str, PlanEntry]]:
        """Blind sessions: pair -> {"A": entry, "B": entry}."""
        out: dict[int, dict[str, PlanEntry]] = {}
        for e in self.entries:
            if e.pair is not None:
                out.setdefault(e.pair, {})[e.arm] = e
        return out

    @classmethod
    def load(cls, path: str | Path, served_policies: Iterable[str] | None = None) -> "EvaluationPlan":
        source = str(path)
        try:
            data = yaml.safe_load(read_text(path, "evaluation plan"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"not valid YAML: {exc}", source=source) from None
        return cls.parse(data, source, served_policies)

    @classmethod
    def parse(cls, data: Any, source: str = "<plan>",
              served_policies: Iterable[str] | None = None) -> "EvaluationPlan":
        """The plan in ``data``; with ``served_policies`` (the names the graph serves) a policy it names that is
        not among them is refused with the list."""
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
        cells: tuple[tuple[dict[str, str], dict[str, str]], ...] = ()
        order_seed = None
        if "compare" in data:
            cells = _comparison(data["compare"], source)
            systems = tuple(system for cell in cells for system in cell)
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
        pair_cells: list[int] = []  # blind sessions: the cell of each pair
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
                for cell in range(len(cells)):  # a pair per cell; the system of each arm is filled in below
                    pair = len(pair_cells)
                    pair_cells.append(cell)
                    for arm in ARMS:
                        entries.append(PlanEntry(index=len(entries), task_id=task_id, variant="", layout=layout,
                                                 seed=task_seed + k, episode=k, pair=pair, arm=arm))
                if cells:
                    continue
                for variant in task_variants:
                    entries.append(PlanEntry(index=len(entries), task_id=task_id, variant=variant, layout=layout,
                                             seed=task_seed + k, episode=k))
        if cells:
            orders = cell_pair_orders(order_seed, pair_cells)
            entries = [replace(e, **cells[pair_cells[e.pair]][orders[e.pair][ARMS.index(e.arm)]]) for e in entries]
        plan = cls(name, entries, source, systems, order_seed, cells)
        plan._check_shown_names(seen)
        if served_policies is not None:
            plan.check_policies(served_policies)
        return plan

    def _check_shown_names(self, task_ids: Iterable[str]) -> None:
        """A compared policy's name must not stand in what the operator sees of every episode: the plan's name
        (in each episode's id) and its task ids; nor be so short that ordinary words hold it."""
        from ladder_ros.panel.blind import MIN_SECRET_CHARS

        for policy in self.compared_policies:
            if len(policy) < MIN_SECRET_CHARS:
                raise ConfigError(f"a compared policy's name has at least {MIN_SECRET_CHARS} characters (the panel "
                                  f"hides it wherever it stands, inside other words too), got {policy!r}",
                                  source=self.source, key="compare")
            for what, text in (("name", self.name), *(("tasks", t) for t in task_ids)):
                if policy in text:
                    raise ConfigError(f"{text!r} names the compared policy {policy!r}, and the operator sees it in "
                                      "every episode of the blind session: rename one of them", source=self.source,
                                      key=what)

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
