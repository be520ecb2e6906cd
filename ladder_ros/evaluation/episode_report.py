"""``ladder-ros report DIR``: the paper's tables over recorded episodes, simulated or real.

Success by horizon and by category with 95 % Wilson intervals, subgoal progress and failure causes
(Section 3, Appendix F) come from :func:`ladder_ros.core.metrics.summarize_episodes`, the function
``sim-eval`` uses, so the same episodes give the same numbers. Per episode (Appendix G): VLM calls,
tokens and cost (from the verifier's and planner's answers in the recording, or the panel's record),
robot time (steps / control rate, and its share of the step budget) and wall time.

Operator versus VLM, per session (the evaluation plan an episode ran for): every subgoal the operator
labelled done / not done against the VLM's last verdict on it, as precision and recall of the
verifier's "complete" (95 % Wilson intervals) and Cohen's kappa (Cohen 1960) with a 95 % percentile
bootstrap interval (Efron & Tibshirani 1993, ch. 13) that resamples *episodes*, not subgoals, because
the subgoals of one episode share a scene and a VLM and are not independent (10,000 draws, seed 0);
then every disagreement with the frame the VLM was asked about, so a lab can decide whether the VLM
may pre-label.

Blind A/B sessions (:mod:`ladder_ros.panel.ab_session`): once a session is closed (its key written),
both systems' success rates with Wilson intervals over the complete pairs, their difference paired
over tasks with the bootstrap of Appendix F (:func:`~ladder_ros.core.metrics.paired_task_bootstrap`,
the function sim-eval uses), the operator's preferences per system, and which system was A and B in
every pair. Until it closes, its episodes are left out of every table (they would name the systems).
Episodes the operator aborted (F7) or that were interrupted are void: their plan entry ran again, so
they are listed and left out of the rates.

Which outcome counts: a simulated episode is scored by the simulator's predicates (as in
``sim-eval``); an episode without a simulator score (a robot) by the operator's labels — the
episode label for task success, the subgoal labels for progress and, for each subgoal not done,
the failure cause the orchestrator's queue tells (left it, worked on it, never reached it). An
episode with neither is listed as unlabelled and left out of the rates.

Output: ``report.md``, ``report.html`` (one self-contained page: plots and episode thumbnails
inline), ``summary.json`` and the plots as PNG files, in ``--out`` (default ``DIR/report``).
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.metrics import (
    ADVANCED_BEFORE_COMPLETION,
    ATTEMPTED_NEVER_COMPLETED,
    FAILURE_CAUSES,
    NEVER_REACHED,
    paired_task_bootstrap,
    per_task_counts,
    summarize_episodes,
    wilson_interval,
)
from ladder_ros.core.presets import PRESETS
from ladder_ros.evaluation import summary_tables as tables
from ladder_ros.evaluation.recorded_episodes import (
    IMAGE_SUFFIX,
    RecordedEpisode,
    ab_keys,
    ab_pairs,
    load_episodes,
    with_records,
)
from ladder_ros.interface_conversions import recorded_document
from ladder_ros.messages import DONE, SUCCESS, EpisodeStatus, SchemaError

UNLABELLED = "unlabelled"
NO_SESSION = "(no plan)"
THUMB_WIDTH = 160  # px of an episode thumbnail in the HTML page
KAPPA_DRAWS = 10_000  # bootstrap draws of the kappa interval (as many as Appendix F's task bootstrap)


# ------------------------------------------------------------------------------ outcomes
def simulator_scored(record: dict) -> bool:
    """The record carries the simulator's privileged score (sim-eval, or a graph run in simulation)."""
    if "scored" in record:
        return bool(record["scored"])
    return bool(record.get("simulator"))


def operator_outcome(record: dict, labels) -> dict | None:
    """The record with success, progress and failure causes from the operator's labels (None: no episode
    label yet)."""
    if labels is None or labels.episode is None:
        return None
    orchestration = record.get("orchestration") or {}
    plan = orchestration.get("plan") or [s for s in (record.get("task") or {}).get("subgoals", [])]
    left = (set(orchestration.get("advanced", [])) | set(orchestration.get("completed", []))) - set(
        orchestration.get("pending", []))
    ever = set(orchestration.get("ever_current", []))
    outcomes = []
    for i, subgoal in enumerate(plan or [{}] * int(record.get("horizon", 0))):
        label = labels.subgoal_label(i)
        cause = None
        if label != DONE:
            if label is None:
                cause = UNLABELLED
            elif i in left:
                cause = ADVANCED_BEFORE_COMPLETION
            elif i in ever:
                cause = ATTEMPTED_NEVER_COMPLETED
            else:
                cause = NEVER_REACHED
        outcomes.append({"index": i, "text": subgoal.get("text", ""), "done": label == DONE, "cause": cause,
                         "first_done_step": None})
    scored = dict(record)
    scored.update(success=labels.episode == SUCCESS, subgoals_done=sum(1 for o in outcomes if o["done"]),
                  subgoals=outcomes, outcome_source="operator")
    return scored


def outcome_record(episode: RecordedEpisode) -> dict | None:
    """The record the tables count for ``episode`` (None: unlabelled robot episode)."""
    record = episode.record
    if record is None:
        return None
    if simulator_scored(record):
        return {**record, "outcome_source": "simulator"}
    return operator_outcome(record, episode.labels)


# ------------------------------------------------------------------------------ per episode (Appendix G)
def control_rate(record: dict) -> float | None:
    started = next((e for e in record.get("events", []) if e.get("kind") == "episode_started"), None)
    preset = PRESETS.get(str((started or {}).get("preset", "")))
    return preset.control_rate_hz if preset is not None else None


def episode_row(episode: RecordedEpisode) -> dict[str, Any]:
    record = episode.record or {}
    rate = control_rate(record)
    steps = int(record.get("steps_used", 0))
    calls = episode.vlm_calls
    usage = [c.get("usage") or {} for c in calls]
    costs = [u.get("cost_usd") for u in usage]
    queries = int(record.get("verification_queries", 0))
    plan = record.get("plan") or {}
    return {
        "episode_id": episode.episode_id, "task_id": record.get("task_id"), "variant": record.get("variant"),
        "horizon": record.get("horizon"), "category": record.get("category"),
        "success": record.get("success"), "subgoals_done": record.get("subgoals_done"),
        "finish_reason": record.get("finish_reason"),
        # a query is one VLM call; a plan from the planner one more
        "vlm_calls": max(len(calls), queries + (1 if plan.get("source") == "planner" else 0)),
        "input_tokens": sum(u.get("input_tokens") or 0 for u in usage),
        "output_tokens": sum((u.get("output_tokens") or 0) + (u.get("thinking_tokens") or 0) for u in usage),
        "cost_usd": None if any(c is None for c in costs) and calls else round(sum(c or 0 for c in costs), 6),
        "steps_used": steps, "budget_steps": record.get("budget_steps"),
        "robot_time_s": steps / rate if rate else None,
        "budget_share": steps / record["budget_steps"] if record.get("budget_steps") else None,
        "wall_s": record.get("wall_s"),
        "labels": episode.labels.to_dict() if episode.labels is not None else None,
    }


# ------------------------------------------------------------------------------ operator vs VLM
def cohen_kappa(tp: float, fp: float, fn: float, tn: float) -> float | None:
    """Cohen's kappa of two raters on a yes/no question: (p_o - p_e) / (1 - p_e); None when chance
    agreement is total (one rater said the same for every item), where kappa is undefined."""
    n = tp + fp + fn + tn
    if n <= 0:
        return None
    observed = (tp + tn) / n
    chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    return None if chance >= 1.0 else (observed - chance) / (1.0 - chance)


def kappa_interval(per_episode: list[tuple[int, int, int, int]], draws: int = KAPPA_DRAWS,
                   seed: int = 0) -> tuple[float, float] | None:
    """95 % percentile bootstrap interval of Cohen's kappa, resampling episodes (each a (tp, fp, fn, tn)
    block of its subgoals); draws where kappa is undefined are dropped; None with fewer than two
    episodes or no defined draw."""
    import numpy as np

    if len(per_episode) < 2:
        return None
    blocks = np.asarray(per_episode, dtype=float)  # episodes x (tp, fp, fn, tn)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(blocks), size=(draws, len(blocks)))
    tp, fp, fn, tn = (blocks[picks, k].sum(axis=1) for k in range(4))
    n = tp + fp + fn + tn
    chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    defined = chance < 1.0
    if not defined.any():
        return None
    kappa = ((tp + tn) / n - chance)[defined] / (1.0 - chance[defined])
    lo, hi = np.percentile(kappa, [2.5, 97.5])
    return (float(lo), float(hi))


def last_verdicts(record: dict) -> dict[int, dict]:
    """Per plan index, the VLM's last answer on it and the step of the question it answered."""
    asked = {e.get("request_id"): e.get("step") for e in record.get("events", [])
             if e.get("kind") == "verification_requested"}
    last: dict[int, dict] = {}
    for event in record.get("events", []):
        if event.get("kind") == "verification_answered":
            last[int(event["plan_index"])] = {
                "complete": bool(event.get("complete")), "count": event.get("count"),
                "required": event.get("required"), "source": event.get("source"), "error": event.get("error"),
                "request_id": event.get("request_id"),
                "asked_step": asked.get(event.get("request_id"), event.get("step"))}
    return last


def session_of(episode: RecordedEpisode) -> str:
    return str((episode.plan_entry or {}).get("plan") or NO_SESSION)


def agreement(episodes: Iterable[RecordedEpisode], raw_replies: dict | None = None) -> dict[str, Any]:
    """The VLM's last verdict on each operator-labelled subgoal against the label: precision and recall
    of "complete" (positive: the operator says done), Cohen's kappa with its interval, and the
    disagreements (``raw_replies``: episode id -> request id -> the VLM's raw reply, where known)."""
    counts = Counter()
    per_episode: list[tuple[int, int, int, int]] = []
    disagreements = []
    for e in episodes:
        if e.labels is None or e.record is None:
            continue
        last = last_verdicts(e.record)
        plan = (e.record.get("orchestration") or {}).get("plan") or (e.record.get("task") or {}).get("subgoals") or []
        block = Counter()
        for key, label in e.labels.subgoals.items():
            index = int(key)
            if index not in last:
                counts["labelled_without_verdict"] += 1
                continue
            verdict, truth = last[index], label == DONE
            cell = ("tp" if truth else "fp") if verdict["complete"] else ("fn" if truth else "tn")
            block[cell] += 1
            if cell in ("fp", "fn"):
                text = plan[index].get("text", "") if index < len(plan) and isinstance(plan[index], dict) else ""
                reply = ((raw_replies or {}).get(e.episode_id) or {}).get(verdict["request_id"])
                disagreements.append({"episode_id": e.episode_id, "plan_index": index, "subgoal": text,
                                      "operator": label, "vlm_complete": verdict["complete"],
                                      "vlm_count": verdict["count"], "required": verdict["required"],
                                      "source": verdict["source"], "step": verdict["asked_step"],
                                      "raw_reply": reply, "kind": "false positive" if cell == "fp"
                                      else "false negative"})
        if sum(block.values()):
            per_episode.append(tuple(block[k] for k in ("tp", "fp", "fn", "tn")))
            counts.update(block)
    tp, fp, fn, tn = (counts[k] for k in ("tp", "fp", "fn", "tn"))
    interval = kappa_interval(per_episode)
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "compared": tp + fp + fn + tn,
            "labelled_without_verdict": counts["labelled_without_verdict"], "episodes": len(per_episode),
            "precision": tp / (tp + fp) if tp + fp else None, "precision_ci95": list(wilson_interval(tp, tp + fp)),
            "recall": tp / (tp + fn) if tp + fn else None, "recall_ci95": list(wilson_interval(tp, tp + fn)),
            "kappa": cohen_kappa(tp, fp, fn, tn), "kappa_ci95": list(interval) if interval else None,
            "kappa_interval": f"95 % percentile bootstrap over episodes, {KAPPA_DRAWS} draws, seed 0",
            "disagreements": disagreements}


def agreement_by_session(episodes: list[RecordedEpisode], raw_replies: dict | None = None) -> dict[str, dict]:
    sessions: dict[str, list[RecordedEpisode]] = {}
    for e in episodes:
        sessions.setdefault(session_of(e), []).append(e)
    return {name: agreement(eps, raw_replies) for name, eps in sorted(sessions.items())}


# ------------------------------------------------------------------------------ blind A/B sessions
def unblind(episodes: list[RecordedEpisode], keys: dict[str, dict]) -> None:
    """Episodes of closed blind sessions get their system back (from the session's key)."""
    for e in episodes:
        blind = e.blind
        if blind is None or blind["session"] not in keys or e.record is None:
            continue
        pair = keys[blind["session"]]["pairs"].get(str(blind["pair"]))
        if pair is not None:
            e.record = {**e.record, "variant": pair[blind["arm"]]["variant"]}


def ab_session_report(session: str, key: dict, episodes: list[RecordedEpisode],
                      pairs: dict[int, dict]) -> dict[str, Any]:
    """Both systems of a closed blind session: success with Wilson intervals over its complete pairs, the
    difference paired over tasks (Appendix F), the preferences per system and every pair revealed."""
    systems = [s["variant"] for s in key["systems"]]
    by_id = {e.episode_id: e for e in episodes}
    records: list[dict] = []
    revealed = []
    preferences = Counter()
    for number, p in sorted(key["pairs"].items(), key=lambda kv: int(kv[0])):
        judged = pairs.get(int(number), {})
        outcome = {}
        for arm in ("A", "B"):
            e = by_id.get(p.get("episodes", {}).get(arm, ""))
            outcome[arm] = outcome_record(e) if e is not None else None
        complete = bool(p.get("complete")) and all(outcome[arm] is not None for arm in ("A", "B"))
        preference = p.get("preference")
        if complete:
            for arm in ("A", "B"):
                records.append({**outcome[arm], "variant": p[arm]["variant"], "task_id": p["task_id"]})
            preferences["tie" if preference == "tie" else p[preference]["variant"]] += 1
        revealed.append({"pair": int(number), "task_id": p["task_id"], "layout": p["layout"], "seed": p["seed"],
                         "A": p["A"]["variant"], "B": p["B"]["variant"], "complete": complete,
                         "A_success": outcome["A"]["success"] if outcome["A"] else None,
                         "B_success": outcome["B"]["success"] if outcome["B"] else None,
                         "preference": preference, "preferred": (
                             None if not preference else "tie" if preference == "tie" else p[preference]["variant"]),
                         "reason": judged.get("reason", ""), "episodes": p.get("episodes", {})})
    rates = {}
    for system in systems:
        mine = [r for r in records if r["variant"] == system]
        wins = sum(1 for r in mine if r["success"])
        lo, hi = wilson_interval(wins, len(mine))
        rates[system] = {"episodes": len(mine), "successes": wins,
                         "success_rate": wins / len(mine) if mine else None, "ci95": [lo, hi]}
    paired = None
    if records:
        counts = [per_task_counts(records, system) for system in systems]
        diff, lo, hi = paired_task_bootstrap(counts[0], counts[1])
        paired = {"a": systems[0], "b": systems[1], "diff": diff, "lo": lo, "hi": hi,
                  "tasks": len(set(counts[0]) & set(counts[1])), "draws": 10_000, "seed": 0}
    return {"session": session, "systems": systems, "order_seed": key.get("order_seed"),
            "pairs": len(key["pairs"]), "complete_pairs": sum(1 for r in revealed if r["complete"]),
            "success": rates, "paired_difference": paired,
            "preferences": {**{s: preferences.get(s, 0) for s in systems}, "tie": preferences.get("tie", 0)},
            "revealed": revealed, "key": key.get("path")}


# ------------------------------------------------------------------------------ the report
def build_report(episodes: list[RecordedEpisode], keys: dict[str, dict] | None = None,
                 pairs: dict[str, dict[int, dict]] | None = None, raw_replies: dict | None = None) -> dict[str, Any]:
    keys, pairs = keys or {}, pairs or {}
    if raw_replies is None:
        raw_replies = {e.episode_id: {c.get("request_id"): c.get("raw_reply") for c in e.vlm_calls
                                      if c.get("purpose") == "verify"} for e in episodes}
    unblind(episodes, keys)
    void = [e for e in episodes if e.void]
    sealed = [e for e in episodes if e.blind is not None and e.blind["session"] not in keys and not e.void]
    open_sessions = Counter(e.blind["session"] for e in sealed)
    left_out = {id(e) for e in void + sealed}
    over = with_records(e for e in episodes if id(e) not in left_out)
    counted, unlabelled = [], []
    for e in over:
        record = outcome_record(e)
        (counted if record is not None else unlabelled).append((e, record))
    summary = summarize_episodes([r for _, r in counted])
    rows = [episode_row(e) for e in over]
    by_variant: dict[str, dict] = {}
    for row in rows:
        empty = {"episodes": 0, "vlm_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
                 "robot_time_s": 0.0}
        v = by_variant.setdefault(row["variant"], empty)
        v["episodes"] += 1
        for k in ("vlm_calls", "input_tokens", "output_tokens"):
            v[k] += row[k]
        v["cost_usd"] = None if v["cost_usd"] is None or row["cost_usd"] is None else v["cost_usd"] + row["cost_usd"]
        if v["robot_time_s"] is None or row["robot_time_s"] is None:
            v["robot_time_s"] = None
        else:
            v["robot_time_s"] += row["robot_time_s"]
    labels = Counter(e.labels.episode for e in over if e.labels is not None and e.labels.episode)
    judged = with_records(e for e in episodes if not e.void)
    ab = {}
    for session, key in sorted(keys.items()):
        mine = [e for e in episodes if e.blind is not None and e.blind["session"] == session and not e.void]
        ab[session] = ab_session_report(session, key, mine, pairs.get(session, {}))
    return {
        "schema_version": 1, "episodes": len(episodes), "over": len(over),
        "running_or_cut_short": [e.episode_id for e in episodes if e.record is None and id(e) not in left_out],
        "void": [{"episode_id": e.episode_id, "finish_reason": (e.record or {}).get("finish_reason")} for e in void],
        "sealed_sessions": dict(open_sessions),
        "unlabelled": [e.episode_id for e, _ in unlabelled],
        "outcome_sources": dict(Counter(r["outcome_source"] for _, r in counted)),
        "variants": summary, "efficiency": by_variant, "per_episode": rows,
        "operator_vs_vlm": agreement(judged, raw_replies),
        "operator_vs_vlm_by_session": agreement_by_session(judged, raw_replies),
        "ab_sessions": ab,
        "operator_episode_labels": dict(labels),
        "unlabelled_subgoals": sum(1 for _, r in counted for o in r["subgoals"] if o["cause"] == UNLABELLED),
    }


def _fmt(x, digits=1, pct=False) -> str:
    if x is None:
        return "—"
    return f"{100 * x:.{digits}f}" if pct else f"{x:.{digits}f}"


def markdown(report: dict[str, Any], plots: dict[str, str]) -> str:
    summary = report["variants"]
    lines = ["# Episode report", "",
             f"{report['over']} episodes over ({report['episodes']} found); outcomes from "
             + (", ".join(f"{k} ({n})" for k, n in report["outcome_sources"].items()) or "nothing")
             + (f"; {len(report['unlabelled'])} unlabelled, left out" if report["unlabelled"] else "") + ".", ""]
    if report["void"]:
        lines += [f"{len(report['void'])} void episodes (aborted by the operator or interrupted; their plan entries "
                  "ran again) are left out: " + ", ".join(v["episode_id"] for v in report["void"]) + ".", ""]
    for session, n in report["sealed_sessions"].items():
        lines += [f"Blind A/B session {session} is still open: its {n} episodes are left out until it closes "
                  "(the panel then writes its key).", ""]
    if summary:
        lines += ["## Task success and subgoal progress (95 % Wilson intervals)", "", "```",
                  tables.format_table(summary), "```", ""]
        lines += ["## Success by category", "", "| variant | category | n | success % | 95 % CI |",
                  "|---|---|---|---|---|"]
        for v in tables.ordered_variants(summary):
            for cat, b in summary[v]["by_category"].items():
                lines.append(f"| {v} | {cat} | {b['n']} | {_fmt(b['success_rate'], pct=True)} | "
                             f"{_fmt(b['ci95'][0], pct=True)}–{_fmt(b['ci95'][1], pct=True)} |")
        lines += ["", "## Failure causes of unfinished subgoals", "", "```", tables.format_failure_causes(summary),
                  "```", ""]
        if report["unlabelled_subgoals"]:
            lines += [f"{report['unlabelled_subgoals']} subgoals of operator-scored episodes have no label.", ""]
    lines += ["## VLM calls, tokens, cost and robot time (Appendix G)", "",
              "| variant | episodes | VLM calls / ep | tokens in / ep | tokens out / ep | cost / ep (USD) | "
              "robot time / ep (s) |", "|---|---|---|---|---|---|---|"]
    for v, e in report["efficiency"].items():
        n = max(e["episodes"], 1)
        cost = "unknown" if e["cost_usd"] is None else f"{e['cost_usd'] / n:.4f}"
        robot_s = None if e["robot_time_s"] is None else e["robot_time_s"] / n
        lines.append(f"| {v} | {e['episodes']} | {e['vlm_calls'] / n:.1f} | {e['input_tokens'] / n:.0f} | "
                     f"{e['output_tokens'] / n:.0f} | {cost} | {_fmt(robot_s)} |")
    lines += ["", *ab_markdown(report["ab_sessions"])]
    lines += ["## Operator versus VLM", "",
              "Per session: the operator's subgoal labels against the VLM's last verdict on each subgoal (positive: "
              "done / complete); precision and recall with 95 % Wilson intervals, Cohen's kappa with a 95 % "
              "percentile bootstrap interval over episodes.", "",
              "| session | subgoals | episodes | precision % | recall % | kappa | TP | FP | FN | TN |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for session, a in report["operator_vs_vlm_by_session"].items():
        if not a["compared"]:
            continue
        ci = a["kappa_ci95"]
        kappa = _fmt(a["kappa"], 2) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
        lines.append(f"| {session} | {a['compared']} | {a['episodes']} | {_fmt(a['precision'], pct=True)} "
                     f"[{_fmt(a['precision_ci95'][0], pct=True)}, {_fmt(a['precision_ci95'][1], pct=True)}] | "
                     f"{_fmt(a['recall'], pct=True)} [{_fmt(a['recall_ci95'][0], pct=True)}, "
                     f"{_fmt(a['recall_ci95'][1], pct=True)}] | {kappa} | {a['tp']} | {a['fp']} | {a['fn']} | "
                     f"{a['tn']} |")
    a = report["operator_vs_vlm"]
    if not a["compared"]:
        lines += ["", "No subgoal has both an operator label and a VLM verdict."]
    lines += [""]
    if a["disagreements"]:
        lines += ["## Disagreements", "", "| episode | subgoal | operator | VLM | asked at step |",
                  "|---|---|---|---|---|"]
        for d in a["disagreements"]:
            lines.append(f"| {d['episode_id']} | {d['plan_index']}: {d['subgoal']} | {d['operator']} | "
                         f"{d['vlm_count']}/{d['required']} {'complete' if d['vlm_complete'] else 'not complete'} "
                         f"({d['kind']}) | {d['step']} |")
        lines += [""]
    if report["operator_episode_labels"]:
        lines += ["Operator episode labels: " + ", ".join(f"{k} {n}" for k, n in
                                                          sorted(report["operator_episode_labels"].items())), ""]
    lines += ["## Episodes", "", "| episode | task | variant | outcome | subgoals | steps | robot s | VLM calls | "
              "operator |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["per_episode"]:
        label = (r["labels"] or {}).get("episode") or ""
        lines.append(f"| {r['episode_id']} | {r['task_id']} | {r['variant']} | "
                     f"{'success' if r['success'] else 'failure'} ({r['finish_reason']}) | {r['subgoals_done']}/"
                     f"{r['horizon']} | {r['steps_used']}/{r['budget_steps']} | {_fmt(r['robot_time_s'])} | "
                     f"{r['vlm_calls']} | {label} |")
    lines += ["", *[f"![{name}]({file})" for name, file in plots.items()], ""]
    return "\n".join(lines)


def ab_markdown(sessions: dict[str, dict]) -> list[str]:
    """The closed blind A/B sessions: both systems, the paired difference, the preferences, the key."""
    lines: list[str] = []
    for name, r in sessions.items():
        a, b = r["systems"]
        lines += [f"## Blind A/B session {name}", "",
                  f"{r['complete_pairs']} of {r['pairs']} pairs complete (both episodes counted and judged); "
                  f"order seed {r['order_seed']}.", "",
                  "| system | episodes | successes | success % | 95 % Wilson CI | preferred |",
                  "|---|---|---|---|---|---|"]
        for system in (a, b):
            x = r["success"][system]
            lines.append(f"| {system} | {x['episodes']} | {x['successes']} | {_fmt(x['success_rate'], pct=True)} | "
                         f"{_fmt(x['ci95'][0], pct=True)}–{_fmt(x['ci95'][1], pct=True)} | "
                         f"{r['preferences'][system]} |")
        lines += [f"| tie | | | | | {r['preferences']['tie']} |", ""]
        p = r["paired_difference"]
        if p:
            lines += [f"{p['a']} − {p['b']}: {p['diff']:+.1f} points [{p['lo']:+.1f}, {p['hi']:+.1f}], paired over "
                      f"{p['tasks']} tasks (Appendix F bootstrap, {p['draws']} draws).", ""]
        lines += ["| pair | task | layout | seed | A | B | A success | B success | preferred | reason |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for x in r["revealed"]:
            def won(v):
                return "—" if v is None else ("yes" if v else "no")
            lines.append(f"| {x['pair']} | {x['task_id']} | {x['layout']} | {x['seed']} | {x['A']} | {x['B']} | "
                         f"{won(x['A_success'])} | {won(x['B_success'])} | {x['preferred'] or '—'} | "
                         f"{x['reason'] or ''} |")
        lines += [""]
    return lines


def plot_by_category(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = tables.ordered_variants(summary)
    categories = sorted({c for v in variants for c in summary[v]["by_category"]})
    fig, ax = plt.subplots(figsize=(7.0, 3.8), dpi=110)
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        blocks = [summary[v]["by_category"].get(c) for c in categories]
        xs = [k + i * width for k in range(len(categories))]
        ys = [100 * b["success_rate"] if b else 0 for b in blocks]
        # clipped at 0: a Wilson bound may sit a rounding error past the rate (5.6e-17 above a rate of 0)
        err = [[max(0.0, 100 * (b["success_rate"] - b["ci95"][0])) if b else 0 for b in blocks],
               [max(0.0, 100 * (b["ci95"][1] - b["success_rate"])) if b else 0 for b in blocks]]
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=v.replace("_", " "))
    ax.set_xticks([k + width * (len(variants) - 1) / 2 for k in range(len(categories))])
    ax.set_xticklabels([c.replace("_", " ") for c in categories], rotation=20, fontsize=8)
    ax.set_ylabel("task success (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
    ax.set_title("success by category, 95% Wilson intervals", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_failure_causes(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = tables.ordered_variants(summary)
    fig, ax = plt.subplots(figsize=(7.0, 3.2), dpi=110)
    left = [0.0] * len(variants)
    for cause in FAILURE_CAUSES:
        shares = []
        for v in variants:
            causes = summary[v]["failure_causes"]
            total = sum(causes.values()) or 1
            shares.append(100 * causes.get(cause, 0) / total)
        ax.barh([v.replace("_", " ") for v in variants], shares, left=left, label=cause.replace("_", " "))
        left = [a + b for a, b in zip(left, shares)]
    ax.set_xlabel("share of unfinished subgoals (%)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def thumbnails(episode: RecordedEpisode) -> list[str]:
    """The first and last camera frames of an episode's recording as base64 JPEGs (none without a bag)."""
    if episode.bag is None:
        return []
    from rosbags.highlevel import AnyReader

    from ladder_ros.recording.bag import typestore

    frames = []
    try:
        with AnyReader([episode.bag], default_typestore=typestore()) as reader:
            conns = [c for c in reader.connections if c.topic.endswith(IMAGE_SUFFIX)]
            first = last = None
            for connection, _, raw in reader.messages(connections=conns) if conns else ():
                last = (connection, raw)
                if first is None:
                    first = last
            for item in [x for x in (first, last) if x is not None]:
                thumb = _jpeg(reader.deserialize(item[1], item[0].msgtype))
                if thumb:
                    frames.append(thumb)
    except Exception as exc:  # a damaged bag: the report goes on without its pictures
        print(f"ladder-ros report: no thumbnails from {episode.bag}: {exc}", flush=True)
    return frames


def _jpeg(msg) -> str | None:
    """A camera message as a base64 JPEG thumbnail (None for an encoding that is not RGB)."""
    import numpy as np
    from PIL import Image

    if msg.encoding not in ("rgb8", "bgr8"):
        return None
    arr = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :msg.width * 3]
    arr = arr.reshape(msg.height, msg.width, 3)
    if msg.encoding == "bgr8":
        arr = arr[:, :, ::-1]
    image = Image.fromarray(np.ascontiguousarray(arr))
    image.thumbnail((THUMB_WIDTH, THUMB_WIDTH))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=80)
    return base64.b64encode(buf.getvalue()).decode()


def frames_at_steps(episode: RecordedEpisode, steps: Iterable[int]) -> dict[int, str]:
    """The camera frames of the given control steps (the observations the VLM was asked about) as base64
    JPEG thumbnails; a step whose frame the recording lacks takes the last frame before it."""
    if episode.bag is None:
        return {}
    from rosbags.highlevel import AnyReader

    from ladder_ros.recording.bag import typestore

    wanted = sorted(set(int(s) for s in steps))
    out: dict[int, str] = {}
    try:
        with AnyReader([episode.bag], default_typestore=typestore()) as reader:
            status = None
            conns = [c for c in reader.connections if c.topic.endswith("/episode/status")]
            for connection, _, raw in reader.messages(connections=conns) if conns else ():
                try:
                    doc = recorded_document(reader.deserialize(raw, connection.msgtype), EpisodeStatus)
                except SchemaError:
                    continue
                if doc.episode_id == episode.episode_id and doc.rate_hz > 0:
                    status = doc
            if status is None:
                return {}
            stamps = {step: status.step_stamp_ns(step) for step in wanted}
            conns = [c for c in reader.connections if c.topic.endswith(IMAGE_SUFFIX)]
            best: dict[int, tuple[int, Any, bytes]] = {}
            for connection, _, raw in reader.messages(connections=conns) if conns else ():
                header = reader.deserialize(raw, connection.msgtype).header.stamp
                msg_stamp = int(header.sec) * 1_000_000_000 + int(header.nanosec)
                for step, target in stamps.items():
                    if msg_stamp <= target and (step not in best or best[step][0] < msg_stamp):
                        best[step] = (msg_stamp, connection, raw)
            for step, (_, connection, raw) in best.items():
                thumb = _jpeg(reader.deserialize(raw, connection.msgtype))
                if thumb:
                    out[step] = thumb
    except Exception as exc:  # a damaged bag: the report goes on without its pictures
        print(f"ladder-ros report: no frames from {episode.bag}: {exc}", flush=True)
    return out


def html_page(report: dict[str, Any], md_text: str, plot_files: dict[str, Path],
              episodes: list[RecordedEpisode]) -> str:
    """One self-contained page: tables, plots and thumbnails inline (base64), no outside reference."""
    def img(path: Path) -> str:
        return f'<img alt="{path.stem}" src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}">'

    body = ["<h1>Episode report</h1>"]
    sections = md_text.split("\n## ")
    for section in sections[1:]:
        title, _, text = section.partition("\n")
        body.append(f"<h2>{html.escape(title)}</h2>")
        if title in ("Episodes", "Disagreements"):
            continue
        body.append(f"<pre>{html.escape(text.strip())}</pre>")
    by_id = {e.episode_id: e for e in episodes}
    disagreements = report["operator_vs_vlm"]["disagreements"]
    if disagreements:
        frames: dict[str, dict[int, str]] = {}
        for d in disagreements:
            frames.setdefault(d["episode_id"], {})
        for episode_id in frames:
            frames[episode_id] = frames_at_steps(by_id[episode_id], [d["step"] for d in disagreements
                                                                     if d["episode_id"] == episode_id])
        rows = []
        for d in disagreements:
            thumb = frames[d["episode_id"]].get(d["step"])
            picture = f'<img class="t" alt="step {d["step"]}" src="data:image/jpeg;base64,{thumb}">' if thumb else ""
            vlm = (f"{d['vlm_count']}/{d['required']} {'complete' if d['vlm_complete'] else 'not complete'}"
                   f" [{d['source']}]")
            reply = f"<br><small>{html.escape(str(d['raw_reply'])[:400])}</small>" if d.get("raw_reply") else ""
            rows.append(f"<tr><td>{picture}</td><td>{html.escape(d['episode_id'])}<br><small>step {d['step']}"
                        f"</small></td><td>{d['plan_index']}: {html.escape(d['subgoal'])}</td><td>"
                        f"{html.escape(d['operator'])}</td><td>{html.escape(vlm)} ({d['kind']}){reply}</td></tr>")
        body.append("<h2>Disagreements: what the VLM was shown</h2><table><tr><th>frame asked about</th>"
                    "<th>episode</th><th>subgoal</th><th>operator</th><th>VLM</th></tr>" + "".join(rows) + "</table>")
    body.append("<h2>Plots</h2>" + "".join(img(p) for p in plot_files.values()))
    rows = []
    for r in report["per_episode"]:
        thumbs = "".join(f'<img class="t" alt="frame" src="data:image/jpeg;base64,{t}">'
                         for t in thumbnails(by_id[r["episode_id"]]))
        label = html.escape((r["labels"] or {}).get("episode") or "")
        note = html.escape((r["labels"] or {}).get("note") or "")
        ident = f"{html.escape(str(r['episode_id']))}<br><small>{html.escape(str(r['task_id']))} · " \
                f"{html.escape(str(r['variant']))}</small>"
        outcome = f"{'success' if r['success'] else 'failure'}<br><small>{html.escape(str(r['finish_reason']))}</small>"
        rows.append(f"<tr><td>{thumbs}</td><td>{ident}</td><td>{outcome}</td><td>{r['subgoals_done']}/"
                    f"{r['horizon']}</td><td>{_fmt(r['robot_time_s'])}</td><td>{r['vlm_calls']}</td>"
                    f"<td>{label}<br><small>{note}</small></td></tr>")
    body.append("<h2>Episodes</h2><table><tr><th>first / last frame</th><th>episode</th><th>outcome</th>"
                "<th>subgoals</th><th>robot s</th><th>VLM calls</th><th>operator</th></tr>" + "".join(rows)
                + "</table>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}pre{background:#f6f6f6;padding:.6em;"
             "overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px;"
             "vertical-align:top}img{max-width:100%}img.t{width:" + str(THUMB_WIDTH) + "px;margin-right:2px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Episode report</title><style>{style}</style>"
            f"</head><body>{''.join(body)}</body></html>\n")


def write_report(root: Path, out: Path) -> dict[str, Any]:
    episodes = load_episodes(root)
    if not episodes:
        raise ConfigError("no episode records, panel records or recordings found", source=str(root))
    report = build_report(episodes, ab_keys(root), ab_pairs(root))
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    if report["variants"]:
        plots["success by horizon"] = tables.plot_success_vs_horizon(
            report["variants"], out / "success_by_horizon.png", title="task success by horizon, 95% Wilson bands")
        plots["success by category"] = plot_by_category(report["variants"], out / "success_by_category.png")
        plots["failure causes"] = plot_failure_causes(report["variants"], out / "failure_causes.png")
    md_text = markdown(report, {k: p.name for k, p in plots.items()})
    (out / "report.md").write_text(md_text, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    (out / "report.html").write_text(html_page(report, md_text, plots, episodes), encoding="utf-8")
    return report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="the paper's tables over recorded episodes (Markdown, PNG, HTML)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="folder with episodes.jsonl files, panel records and/or recordings (searched deeply)")
    p.add_argument("--out", default=None, help="output folder (default DIR/report)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    out = Path(args.out) if args.out else root / "report"
    report = write_report(root, out)
    md = (out / "report.md").read_text(encoding="utf-8")
    print(md.split("## VLM calls")[0].strip())
    print(f"\nwrote {out / 'report.md'}, {out / 'report.html'}, {out / 'summary.json'} and the plots "
          f"({report['over']} episodes)")
    return 0
