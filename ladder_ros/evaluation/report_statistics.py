"""The numbers of ``ladder-ros report``: the outcome each recorded episode counts with, the cost and
time of each episode, the blind A/B sessions, and the whole report as one document (:func:`build_report`).

Success by horizon and by category with 95 % Wilson intervals, subgoal progress and failure causes
(Section 3, Appendix F) come from :func:`ladder_ros.core.metrics.summarize_episodes`, the function
``sim-eval`` uses, so the same episodes give the same numbers. Per episode (Appendix G): VLM calls,
tokens and cost (from the verifier's and planner's answers in the recording, or the panel's record),
robot time (steps / control rate, and its share of the step budget) and wall time. Operator versus
VLM, per session: :mod:`ladder_ros.evaluation.agreement`.

Blind A/B sessions (:mod:`ladder_ros.panel.ab_session`): once a session is closed (its key written),
both systems' success rates with Wilson intervals over the complete pairs, their difference paired
over tasks with the bootstrap of Appendix F (:func:`~ladder_ros.core.metrics.paired_task_bootstrap`,
the function sim-eval uses), the operator's preferences per system, and which system was A and B in
every pair; across all closed sessions, a Bradley–Terry ranking of every system (policy config and
variant) with bootstrap intervals (:mod:`ladder_ros.evaluation.ranking`). Until a session closes, its
episodes are left out of every table (they would name the systems).
Episodes the operator aborted (F7) or that were interrupted are void: their plan entry ran again, so
they are listed and left out of the rates.

Which outcome counts: a simulated episode is scored by the simulator's predicates (as in
``sim-eval``); an episode without a simulator score (a robot) by the operator's labels — the
episode label for task success, the subgoal labels for progress and, for each subgoal not done,
the failure cause the orchestrator's queue tells (left it, worked on it, never reached it). An
episode with neither is listed as unlabelled and left out of the rates.

Numbers only: :mod:`ladder_ros.evaluation.report_render` writes them as Markdown, HTML and plots.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ladder_ros.core.metrics import (
    ADVANCED_BEFORE_COMPLETION,
    ATTEMPTED_NEVER_COMPLETED,
    NEVER_REACHED,
    paired_task_bootstrap,
    per_task_counts,
    summarize_episodes,
    wilson_interval,
)
from ladder_ros.core.presets import PRESETS
from ladder_ros.evaluation.agreement import agreement, agreement_by_session
from ladder_ros.evaluation.ranking import RESAMPLES, rank_sessions
from ladder_ros.evaluation.recorded_episodes import RecordedEpisode, with_records
from ladder_ros.messages import DONE, SUCCESS
from ladder_ros.panel.ab_session import system_label

UNLABELLED = "unlabelled"


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
    systems = list(dict.fromkeys(system_label(s) for s in key["systems"]))  # policy/variant when it names a policy
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
                records.append({**outcome[arm], "variant": system_label(p[arm]), "task_id": p["task_id"]})
            preferences["tie" if preference == "tie" else system_label(p[preference])] += 1
        revealed.append({"pair": int(number), "task_id": p["task_id"], "layout": p["layout"], "seed": p["seed"],
                         "A": system_label(p["A"]), "B": system_label(p["B"]), "complete": complete,
                         "A_success": outcome["A"]["success"] if outcome["A"] else None,
                         "B_success": outcome["B"]["success"] if outcome["B"] else None,
                         "preference": preference, "preferred": (
                             None if not preference else "tie" if preference == "tie" else system_label(p[preference])),
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


def ab_ranking(episodes: list[RecordedEpisode], keys: dict[str, dict], pairs: dict[str, dict[int, dict]],
               resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any] | None:
    """The Bradley–Terry ranking of every system over the pairs of every closed session
    (:mod:`ladder_ros.evaluation.ranking`); None without a closed session."""
    if not keys:
        return None
    by_id = {e.episode_id: e for e in episodes if not e.void}
    wanted = {str(episode_id) for key in keys.values() for p in (key.get("pairs") or {}).values()
              for episode_id in (p.get("episodes") or {}).values()}
    records = {episode_id: outcome_record(by_id[episode_id]) for episode_id in sorted(wanted & set(by_id))}
    return rank_sessions(keys, pairs, records, resamples=resamples, seed=seed).to_dict()


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
    report = {
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
    if keys:  # only a lab with a closed blind session has systems to rank
        report["ab_ranking"] = ab_ranking(episodes, keys, pairs)
    return report
