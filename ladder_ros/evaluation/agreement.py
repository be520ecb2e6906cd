"""Operator versus VLM: how far the verifier's verdicts agree with the operator's subgoal labels.

Every subgoal the operator labelled done / not done is set against the VLM's last verdict on it, per
session (the evaluation plan an episode ran for): precision and recall of the verifier's "complete"
(95 % Wilson intervals) and Cohen's kappa (Cohen 1960) with a 95 % percentile bootstrap interval
(Efron & Tibshirani 1993, ch. 13) that resamples *episodes*, not subgoals, because the subgoals of one
episode share a scene and a VLM and are not independent (10,000 draws, seed 0); then every
disagreement with the step of the frame the VLM was asked about, so a lab can decide whether the VLM
may pre-label. Numbers only, from the episode records and labels; ``ladder-ros report``
(:mod:`ladder_ros.evaluation.report_render`) renders them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from ladder_ros.core.metrics import wilson_interval
from ladder_ros.evaluation.recorded_episodes import RecordedEpisode
from ladder_ros.messages import DONE

NO_SESSION = "(no plan)"
KAPPA_DRAWS = 10_000  # bootstrap draws of the kappa interval (as many as Appendix F's task bootstrap)


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
