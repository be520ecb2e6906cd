"""The day's summary: ``DIR/day_summary.json`` and the table printed at the end, from the records alone.

Per variant (the system, in a blind A/B plan): episodes finished, successes with the Wilson 95 % interval
(:func:`ladder_ros.core.metrics.wilson_interval`; over scored episodes only: an unscored episode has no
success to count); the operator's interventions (episodes stopped or aborted from the panel) and the safety
filter's, by kind; faults by kind, from the finish reasons of the episodes that ended aborted (``aborted:
robot fault: ...`` is a ``robot fault``) and the reasons of the interrupted attempts; the disk the folder
uses; and per process the resources sampled over the day (:mod:`ladder_ros.evaluation.day.resources`).
Pure: no rclpy.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from ladder_ros.core.metrics import wilson_interval
from ladder_ros.evaluation.day.disk import human
from ladder_ros.evaluation.day.progress import clock
from ladder_ros.evaluation.day.resources import SETTLED_EPISODES

SUMMARY_FILE = "day_summary.json"
ABORTED = "aborted: "


def fault_kind(reason: str | None) -> str | None:
    """The kind of an abnormal end (``aborted: robot fault: joint 3`` -> ``robot fault``); None for a normal end
    (the plan complete, the budget spent)."""
    if not reason:
        return None
    text = str(reason)
    if not text.startswith(ABORTED) and text.startswith(("budget_", "plan_")):
        return None
    text = text.removeprefix(ABORTED)
    return text.split(":", 1)[0].strip() or None


def _safety_counts(record: Mapping[str, Any]) -> Counter:
    counts = (record.get("safety") or {}).get("counts") or {}
    return Counter({str(k): int(v) for k, v in counts.items() if isinstance(v, (int, float)) and v})


def build_summary(*, meta: Mapping[str, Any], planned: int, finished: Iterable[Mapping], interrupted: Iterable[Mapping],
                  resources: Mapping[str, dict], disk_bytes: int) -> dict[str, Any]:
    """The summary of a day from its ``finished`` and ``interrupted`` events (``meta``: plan, seed, mode, graph,
    runs, how this run stopped, its elapsed time)."""
    finished = list(finished)
    interrupted = list(interrupted)
    variants: dict[str, dict] = {}
    safety: Counter = Counter()
    operator: Counter = Counter()
    faults: Counter = Counter()
    for event in finished:
        record = event.get("record") or {}
        v = variants.setdefault(str(record.get("variant") or event.get("variant") or "default"),
                                {"episodes": 0, "scored": 0, "successes": 0, "wall_s": 0.0})
        v["episodes"] += 1
        v["wall_s"] += float(event.get("wall_s") or 0.0)
        if event.get("scored"):
            v["scored"] += 1
            v["successes"] += int(bool(event.get("success")))
        safety.update(_safety_counts(record))
        kind = fault_kind(event.get("finish_reason"))
        if kind in ("operator stop", "operator abort"):
            operator[kind.removeprefix("operator ")] += 1
        elif kind is not None:
            faults[kind] += 1
    interruptions: Counter = Counter()
    for event in interrupted:
        if fault_kind(event.get("reason")) == "operator abort":
            operator["abort"] += 1
        else:
            interruptions[str(event.get("kind") or fault_kind(event.get("reason")) or "unknown")] += 1
    for v in variants.values():
        low, high = wilson_interval(v["successes"], v["scored"])
        v["success_rate"] = v["successes"] / v["scored"] if v["scored"] else None
        v["ci95"] = [round(low, 4), round(high, 4)]
        v["mean_episode_s"] = round(v.pop("wall_s") / v["episodes"], 2)
    walls = [float(e.get("wall_s") or 0.0) for e in finished]
    return {**dict(meta), "planned": planned, "finished": len(finished), "remaining": planned - len(finished),
            "interrupted_attempts": len(interrupted),
            "mean_episode_s": round(sum(walls) / len(walls), 2) if walls else None,
            "variants": dict(sorted(variants.items())),
            "interventions": {"operator": {"stop": operator["stop"], "abort": operator["abort"]},
                              "safety": dict(sorted(safety.items())), "safety_total": sum(safety.values())},
            "faults": dict(sorted(faults.items())), "interruptions": dict(sorted(interruptions.items())),
            "disk_bytes": int(disk_bytes), "resources": dict(resources),
            "resources_growth_after_episodes": SETTLED_EPISODES}


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in counts.items() if n) or "none"


def _value(x: int, scale: int) -> str:
    return f"{x / scale:.0f}" if scale > 1 else str(x)


def _growth(x: int | None, scale: int, settled: int | None = None) -> str:
    if x is None:
        return "-"
    if scale == 1:
        return f"{x:+d}"
    percent = f", {100 * x / settled:+.1f} %" if settled else ""
    return f"{x / scale:+.1f}{percent}"


def render_summary(summary: Mapping[str, Any]) -> str:
    """The summary as the table printed at the end of a day."""
    lines = [f"day {summary.get('plan', {}).get('name', '')}: {summary['finished']}/{summary['planned']} episodes "
             f"finished, {summary['interrupted_attempts']} interrupted attempts (run again), mean episode "
             f"{summary['mean_episode_s'] if summary['mean_episode_s'] is not None else '-'} s; "
             f"stopped: {summary.get('stopped', '-')}"]
    width = max([len("variant"), *map(len, summary["variants"])])
    lines.append(f"  {'variant':<{width}}  episodes  successes   rate  95% CI")
    for name, v in summary["variants"].items():
        rate = f"{v['success_rate']:.0%}" if v["success_rate"] is not None else "-"
        ci = f"{v['ci95'][0]:.0%}-{v['ci95'][1]:.0%}" if v["scored"] else "unscored"
        lines.append(f"  {name:<{width}}  {v['episodes']:>8}  {str(v['successes']) + '/' + str(v['scored']):>9}"
                     f"  {rate:>5}  {ci}")
    i = summary["interventions"]
    lines.append(f"  operator interventions: {i['operator']['stop']} stopped, {i['operator']['abort']} aborted; "
                 f"safety interventions: {i['safety_total']} ({_counts(i['safety'])})")
    lines.append(f"  faults: {_counts(summary['faults'])}; interrupted: {_counts(summary['interruptions'])}")
    lines.append(f"  disk: {human(summary['disk_bytes'])} in the day's folder")
    if summary["resources"]:
        settled = summary["resources_growth_after_episodes"]
        lines.append(f"  resources per process (first / last / max; growth of its longest-running process after "
                     f"{settled} episodes of its own):")
        width = max(len(n) for n in summary["resources"])
        for name, node in summary["resources"].items():
            parts = []
            for metric, unit, scale in (("rss_kb", "MB", 1024), ("threads", "threads", 1), ("fds", "fds", 1)):
                m = node.get(metric)
                if not m:
                    continue
                parts.append(f"{unit} {_value(m['first'], scale)}/{_value(m['last'], scale)}/"
                             f"{_value(m['max'], scale)} ({_growth(m['growth'], scale, m.get('settled'))})")
            restarts = f", restarted {node['restarts']}x" if node.get("restarts") else ""
            if node.get("growth_episodes") is not None and node.get("restarts"):
                restarts += f" (growth: pid {node['growth_pid']}, {node['growth_episodes']} episodes)"
            lines.append(f"    {name:<{width}}  {'; '.join(parts)}{restarts}")
    if summary.get("elapsed_s") is not None:
        lines.append(f"  this run: {clock(summary['elapsed_s'])}")
    return "\n".join(lines)
