"""The day's order: an evaluation plan's episodes in randomised blocks, fixed by a seed and written down first.

A *block* is one episode index of one task with every variant (or, in a blind A/B plan, both systems of the
pair): the episodes that must meet the same conditions (layout, seed, and the time of day: the light, the
table, a motor warming up). Blocks run one after the other in an order drawn from the day's seed, and inside
each block the variants run in an order drawn from it too, so neither a variant nor a task is favoured by when
it runs. A blind pair keeps its own order (its A runs first, as the operator panel runs it; which system is A
was drawn from the plan's ``order_seed``). The same plan and seed always give the same order (numpy's PCG64).

The order is written to ``DIR/day_plan.json`` before the first episode, with a fingerprint of the plan, so a
day started again on the same folder checks that it resumes the same plan with the same seed. Pure: no rclpy.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.panel.evaluation_plan import EvaluationPlan, PlanEntry

DAY_PLAN_FORMAT = "ladder_ros.day_plan"
DAY_PLAN_VERSION = 1


@dataclass(frozen=True)
class DayEpisode:
    """One planned episode at its place in the day."""

    position: int  # 0-based place in the day's order
    block: int  # the block it belongs to (blocks are numbered in the day's order)
    entry: PlanEntry

    @property
    def key(self) -> str:
        return self.entry.key

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        data = {"position": self.position, "block": self.block, "key": e.key, "task_id": e.task_id,
                "variant": e.variant, "layout": e.layout, "seed": e.seed, "episode": e.episode}
        if e.blind:
            data["ab"] = {"pair": e.pair, "arm": e.arm}
        return data


def blocks_of(plan: EvaluationPlan) -> list[list[PlanEntry]]:
    """The plan's entries grouped by task and episode index, in the plan's order."""
    blocks: dict[tuple[str, int], list[PlanEntry]] = {}
    for entry in plan.entries:
        blocks.setdefault((entry.task_id, entry.episode), []).append(entry)
    return list(blocks.values())


def day_order(plan: EvaluationPlan, seed: int) -> list[DayEpisode]:
    """The plan's episodes in blocks, the blocks and the variants inside each drawn from ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"--seed must be an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    blocks = blocks_of(plan)
    order: list[DayEpisode] = []
    for number, b in enumerate(rng.permutation(len(blocks))):
        block = blocks[int(b)]
        inside = range(len(block)) if plan.blind else rng.permutation(len(block))
        for i in inside:
            order.append(DayEpisode(position=len(order), block=number, entry=block[int(i)]))
    return order


def plan_fingerprint(plan: EvaluationPlan) -> str:
    """What identifies a plan's episodes: its name and every entry's task, variant, layout and seed (not the
    file's comments or layout)."""
    data = {"name": plan.name, "entries": [[e.key, e.task_id, e.variant, e.layout, e.seed, e.episode]
                                           for e in plan.entries]}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def day_plan_document(plan: EvaluationPlan, seed: int, order: list[DayEpisode], *, mode: str, graph: str,
                      created: str, auto_reset: bool = False) -> dict[str, Any]:
    """``DIR/day_plan.json``: the plan, the seed, where the day runs, whether it resets its scenes, and the order."""
    return {"format": DAY_PLAN_FORMAT, "version": DAY_PLAN_VERSION, "created": created,
            "plan": {"name": plan.name, "source": plan.source, "fingerprint": plan_fingerprint(plan),
                     "episodes": len(plan.entries), "blind": plan.blind},
            "seed": seed, "mode": mode, "graph": graph, "auto_reset": bool(auto_reset),
            "blocks": len({d.block for d in order}), "order": [d.to_dict() for d in order]}


def check_same_day(stored: Mapping[str, Any], plan: EvaluationPlan, seed: int, *, mode: str, graph: str,
                   folder: str, auto_reset: bool = False) -> None:
    """Refuse, in one line, to resume a day of another plan, seed, mode or graph in ``folder``."""
    if stored.get("format") != DAY_PLAN_FORMAT or stored.get("version") != DAY_PLAN_VERSION:
        raise ConfigError(f"--out {folder}: day_plan.json is not a day plan this version reads "
                          f"(format {stored.get('format')!r} version {stored.get('version')!r})")
    held = stored.get("plan") or {}
    if held.get("fingerprint") != plan_fingerprint(plan):
        raise ConfigError(f"--out {folder} holds the day of another plan ({held.get('name')!r} from "
                          f"{held.get('source')!r}, fingerprint {held.get('fingerprint')}; this plan "
                          f"{plan.name!r} has {plan_fingerprint(plan)}): give the same plan to resume, "
                          "or another --out")
    if stored.get("seed") != seed:
        raise ConfigError(f"--out {folder} holds a day ordered with --seed {stored.get('seed')}, not {seed}: "
                          "give the same seed to resume, or another --out")
    for name, value in (("mode", mode), ("graph", graph), ("auto_reset", bool(auto_reset))):
        if stored.get(name, False if name == "auto_reset" else None) != value:
            raise ConfigError(f"--out {folder} holds a day run with {name} {stored.get(name)!r}, not {value!r}: "
                              "resume it the same way, or use another --out")


def stored_order(stored: Mapping[str, Any], plan: EvaluationPlan) -> list[DayEpisode]:
    """The order written in ``day_plan.json``, as the plan's entries (the plan was checked to be the same)."""
    by_key = {e.key: e for e in plan.entries}
    try:
        return [DayEpisode(position=int(d["position"]), block=int(d["block"]), entry=by_key[d["key"]])
                for d in stored["order"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"day_plan.json: its order cannot be read ({exc!r})") from None
