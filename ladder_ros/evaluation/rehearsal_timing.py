"""The timing of a wall-clock episode, from what the graph published: the ``timing`` object of a rehearsal record.

Inputs are the stamps the graph's own messages carry (the ROS clock, system time on one machine):
every ``robot/joint_command`` the driver published for an action it applied (stamped when it
applied it) and every ``policy/action_tag`` (the action's stamp, the stamp of the observation its
chunk was computed from, the chunk's inference latency). From them, per episode:

* ``control_period_ms`` {p50, p99}: the time between two applied actions;
* ``period_error_p99_pct``: the 99th percentile of ``|period - nominal| / nominal``, in percent, over the
  times between consecutive applied actions (an idle gap of more than 1.5 periods is no period of the
  control loop but periods without an action: counted in ``idle_periods`` and ``gaps``, not here);
* ``idle_periods``: control periods between the first and the last applied action in which no
  action was applied (a gap of ``g`` periods, rounded, holds ``g - 1`` idle periods);
* ``max_action_gap_ms``: the longest time between two applied actions;
* ``gaps``: the idle periods by cause, each gap of more than 1.5 periods judged by the tags around it:
  ``subgoal_start`` (the action that ends it is the first of a new subgoal: its first chunk was
  being computed), ``driver_hold`` (the policy handed out actions the driver did not apply: a
  verification hold, a refused action) and ``policy_idle`` (the policy had nothing to give: inference
  slower than the queue); ``max_gap_outside_starts_ms`` is the longest gap that is no subgoal start;
* ``obs_to_action_age_ms`` {p50, p95, p99}: from the observation an applied action was computed from
  (the camera frame's render stamp) to the moment the driver applied it; the action applied is the
  newest tagged action stamped at or before the command;
* ``inference_ms`` {p50, p95}: the server's inference latency of each chunk (as the client measured it).

No rclpy here.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class TaggedAction:
    stamp_ns: int
    observation_stamp_ns: int
    chunk_id: int
    index: int
    inference_ms: float
    held: str = ""
    subgoal: str = ""


SUBGOAL_START, DRIVER_HOLD, POLICY_IDLE = "subgoal_start", "driver_hold", "policy_idle"
GAP_PERIODS = 1.5  # a time between applied actions longer than this many periods holds at least one idle period


def _gap_cause(start_ns: int, end_ns: int, ordered: Sequence[TaggedAction], stamps: Sequence[int]) -> str:
    """Why no action was applied between two applied actions (see the module docstring)."""
    last = bisect.bisect_right(stamps, end_ns) - 1  # the tag applied at ``end_ns``
    before = bisect.bisect_right(stamps, start_ns) - 1  # the tag applied at ``start_ns``
    if last >= 0 and (before < 0 or ordered[last].subgoal != ordered[before].subgoal):
        return SUBGOAL_START
    if last - before > 1:  # actions handed out in between that the driver never applied
        return DRIVER_HOLD
    return POLICY_IDLE


def _percentiles(values: Sequence[float], qs: Sequence[int]) -> dict[str, float | None]:
    if not len(values):
        return {f"p{q}": None for q in qs}
    arr = np.asarray(values, dtype=np.float64)
    return {f"p{q}": round(float(np.percentile(arr, q)), 2) for q in qs}


def observation_ages(commands_ns: Sequence[int], ordered: Sequence[TaggedAction]) -> list[tuple[int, float]]:
    """(command stamp, ms since the observation behind it) of each applied command that has a tag at or before
    it; ``commands_ns`` and ``ordered`` sorted by stamp."""
    stamps = [t.stamp_ns for t in ordered]
    matched = []
    for command in commands_ns:
        i = bisect.bisect_right(stamps, command) - 1
        if i >= 0:
            matched.append((command, (command - ordered[i].observation_stamp_ns) / 1e6))
    return matched


def episode_timing(command_stamps_ns: Sequence[int], tags: Sequence[TaggedAction], period_s: float) -> dict:
    """The ``timing`` object of one episode (see the module docstring); None where there is nothing to measure."""
    commands = sorted(int(s) for s in command_stamps_ns)
    periods_ms = np.diff(commands) / 1e6 if len(commands) > 1 else np.zeros(0)
    nominal_ms = period_s * 1000.0
    idle = int(sum(max(0, round(p / nominal_ms) - 1) for p in periods_ms))
    consecutive = periods_ms[periods_ms <= GAP_PERIODS * nominal_ms]
    errors_pct = np.abs(consecutive - nominal_ms) / nominal_ms * 100.0
    ordered = sorted(tags, key=lambda t: t.stamp_ns)
    stamps = [t.stamp_ns for t in ordered]
    ages_ms = [age for _, age in observation_ages(commands, ordered)]
    inference = [t.inference_ms for t in ordered if t.index == 0 and not t.held and t.inference_ms > 0]
    gaps = {SUBGOAL_START: 0, DRIVER_HOLD: 0, POLICY_IDLE: 0}
    outside_starts = []
    for start, end, period in zip(commands, commands[1:], periods_ms):
        cause = _gap_cause(start, end, ordered, stamps) if period > GAP_PERIODS * nominal_ms else None
        if cause is not None:
            gaps[cause] += max(0, round(period / nominal_ms) - 1)
        if cause != SUBGOAL_START:
            outside_starts.append(period)
    return {
        "applied_actions": len(commands),
        "control_period_ms": _percentiles(periods_ms, (50, 99)),
        "period_error_p99_pct": round(float(np.percentile(errors_pct, 99)), 2) if len(errors_pct) else None,
        "idle_periods": idle,
        "max_action_gap_ms": round(float(periods_ms.max()), 1) if len(periods_ms) else None,
        "gaps": gaps,
        "max_gap_outside_starts_ms": round(float(max(outside_starts)), 1) if outside_starts else None,
        "obs_to_action_age_ms": _percentiles(ages_ms, (50, 95, 99)),
        "inference_ms": _percentiles(inference, (50, 95)),
        "chunks": len({t.chunk_id for t in ordered}),
    }


def pooled_timing(episodes: Sequence[dict]) -> dict:
    """Over several episodes' ``timing`` objects: the medians of their percentiles and the worst extremes."""
    present = [t for t in episodes if t and t.get("applied_actions")]
    if not present:
        return {}

    def median(path: tuple[str, ...]) -> float | None:
        values = []
        for t in present:
            value = t
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None:
                values.append(value)
        return round(float(np.median(values)), 2) if values else None

    gaps = [t["max_action_gap_ms"] for t in present if t.get("max_action_gap_ms") is not None]
    outside = [t["max_gap_outside_starts_ms"] for t in present if t.get("max_gap_outside_starts_ms") is not None]
    causes = {cause: int(sum((t.get("gaps") or {}).get(cause, 0) for t in present))
              for cause in (SUBGOAL_START, DRIVER_HOLD, POLICY_IDLE)}
    return {"episodes": len(present), "applied_actions": int(sum(t["applied_actions"] for t in present)),
            "control_period_ms": {"p50": median(("control_period_ms", "p50")),
                                  "p99": median(("control_period_ms", "p99"))},
            "period_error_p99_pct": median(("period_error_p99_pct",)),
            "idle_periods": int(sum(t["idle_periods"] for t in present)),
            "idle_periods_per_episode": round(float(np.mean([t["idle_periods"] for t in present])), 2),
            "max_action_gap_ms": max(gaps) if gaps else None,
            "gaps": causes, "max_gap_outside_starts_ms": max(outside) if outside else None,
            "obs_to_action_age_ms": {q: median(("obs_to_action_age_ms", q)) for q in ("p50", "p95", "p99")},
            "inference_ms": {q: median(("inference_ms", q)) for q in ("p50", "p95")}}
