"""The scores of a ``ladder-ros vlm-bench`` run, from its stored answers (pure), and their table.

The four tasks of the offline benchmark's card (its dataset README) and Appendix F of the
paper, each driven through the shipped component (card: "drive the shipped component, not a
restatement"):

* decomposition (:class:`Planner`): a plan is exact when its (object, destination) head nouns
  equal the reference's with multiplicity, in any order; goals missed and goals invented are
  multiset differences, and ``invented > 1`` is counted as degenerate (card).
* verification (:class:`Verifier`): the count for ``subtasks[query_idx]`` against ``label``; TP and
  TN rates (the shares of finished and unfinished subgoals judged correctly), precision, recall.
* state tracking (:class:`Verifier`): one question per distinct subtask string; a duplicated
  subtask is done only when all its instances are (card); a frame is correct only when every
  answer is.
* next subtask (:class:`NextSubtask`): valid when it names an unfinished subgoal, and on ordered,
  relay and revisit tasks the first unfinished one; frames with every goal achieved are excluded.

The count threshold. ``deployed`` is the rule the robot runs (Appendix B): the occurrences of the
subtask in the plan so far, one on relay and revisit tasks, where one object travels. ``card`` is
the card's example, ``subtasks[:query_idx + 1].count``, which differs only on relay and revisit tasks.

Failed calls (:class:`~ladder_ros.vlm.backends.base.FailureKind`) are never read as an answer: not
"not complete", not a true negative, not a done claim. A failed call stays in the denominator and is
counted wrong (the card: "a truncated reply is indistinguishable from a wrong one"), and every task
reports how many of its items failed and of which kinds; :func:`failure_report` gives the failed
share over all the questions scored, with an example reason per kind, and :func:`withhold_rates`
takes the rates out of a run with too many.

Each question is stored under a key (:func:`plan_key`, :func:`count_key`, :func:`next_key`); the
run that asks them and stores the answers is :mod:`ladder_ros.evaluation.vlm_bench`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Sequence

from ladder_ros.core.verification import is_complete, required_count
from ladder_ros.evaluation.vlm_bench_data import BenchSample, BenchTask
from ladder_ros.vlm.accounting import format_cost
from ladder_ros.vlm.backends.base import FailureKind
from ladder_ros.vlm.goal_matching import goal_key, is_valid_next, match_goals

EXAMPLES_PER_KIND = 3


def _rate(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else round(numerator / denominator, 6)


# --------------------------------------------------------------------------- scoring (pure)

def required_for(task: BenchTask, query_idx: int, rule: str) -> int:
    """How many objects must rest at the destination for ``subtasks[query_idx]`` to count as done."""
    if rule == "card":
        return task.subtasks[: query_idx + 1].count(task.subtasks[query_idx])
    subgoals = task.subgoals
    return required_count(subgoals[query_idx], subgoals[:query_idx],
                          revisit=task.category.chains_legs_per_object)


def state_questions(task: BenchTask, rule: str) -> list[tuple[str, list[int], int]]:
    """Per distinct subtask string: its indices in the plan and the count that means "all done"."""
    indices: dict[str, list[int]] = defaultdict(list)
    for i, text in enumerate(task.subtasks):
        indices[text].append(i)
    questions = []
    for text, idx in indices.items():
        if rule == "card" or not task.category.chains_legs_per_object:
            needed = len(idx)
        else:
            needed = 1  # one object travels on relay and revisit tasks (Appendix B)
        questions.append((text, idx, needed))
    return questions


def failure_of(answer: dict) -> dict | None:
    """The stored failure of an answer ({"kind", "reason"}), or None when it is a real answer."""
    failure = answer.get("failure")
    return failure if isinstance(failure, dict) else None


def _kinds(counter: Counter) -> dict[str, int]:
    return dict(sorted(counter.items()))


def score_decomposition(tasks: Sequence[BenchTask], plans: dict[str, dict]) -> dict:
    """Exact plans, goals missed and invented, degenerate and failed plans (card; Appendix F).

    A failed call has no plan: it is not exact and misses every reference goal.
    """
    scored = exact = exact_in_order = ordered_tasks = ordered_exact = 0
    missed = invented = degenerate = 0
    failed: Counter = Counter()
    for task in tasks:
        answer = plans.get(plan_key(task))
        if answer is None:
            continue
        scored += 1
        ordered = task.category.is_order_constrained
        ordered_tasks += ordered
        reference = [goal_key(o, d) for o, d in zip(task.objects, task.destinations)]
        failure = failure_of(answer)
        if failure is not None or answer.get("goals") is None:
            failed[failure["kind"] if failure else FailureKind.UNPARSEABLE.value] += 1
            missed += len(reference)
            continue
        predicted = [goal_key(g["object"], g["destination"]) for g in answer["goals"]]
        match = match_goals(predicted, reference)
        exact += match.exact
        exact_in_order += match.in_order
        missed += match.missed
        invented += match.invented
        degenerate += match.invented > 1
        ordered_exact += ordered and match.in_order
    return {"tasks": scored, "exact": exact, "exact_rate": _rate(exact, scored),
            "exact_in_order": exact_in_order, "order_constrained_tasks": ordered_tasks,
            "order_constrained_exact_in_order": ordered_exact, "goals_missed": missed,
            "goals_invented": invented, "degenerate": degenerate, "failed": sum(failed.values()),
            "failed_by_kind": _kinds(failed)}


def score_verification(samples: Sequence[BenchSample], tasks: dict, counts: dict[str, dict], rule: str) -> dict:
    """TP/TN rates, precision, recall and accuracy of the count verdict against ``label``.

    A failed call is wrong on either label: it is in the sample's class (positives or negatives)
    and in ``failed``, never a TN or an FN, so it lowers both rates and never raises precision.
    """
    tp = fn = tn = fp = failed_positives = failed_negatives = 0
    failed: Counter = Counter()
    by_tag: dict[str, Counter] = defaultdict(Counter)
    for sample in samples:
        task = tasks[sample.task_key]
        answer = counts.get(count_key(sample, task.subtasks[sample.query_idx]))
        if answer is None:
            continue
        by_tag[sample.tag]["samples"] += 1
        failure = failure_of(answer)
        if failure is not None or answer.get("count") is None:
            failed[failure["kind"] if failure else FailureKind.UNPARSEABLE.value] += 1
            failed_positives += sample.label
            failed_negatives += not sample.label
            continue
        verdict = is_complete(answer["count"], required_for(task, sample.query_idx, rule))
        if sample.label:
            tp += verdict
            fn += not verdict
        else:
            tn += not verdict
            fp += verdict
        by_tag[sample.tag]["correct"] += verdict == sample.label
    positives, negatives = tp + fn + failed_positives, tn + fp + failed_negatives
    n = positives + negatives
    return {"samples": n, "positives": positives, "negatives": negatives, "tp": tp, "fn": fn, "tn": tn, "fp": fp,
            "failed": failed_positives + failed_negatives, "failed_positives": failed_positives,
            "failed_negatives": failed_negatives, "failed_by_kind": _kinds(failed),
            "tp_rate": _rate(tp, positives), "tn_rate": _rate(tn, negatives), "precision": _rate(tp, tp + fp),
            "recall": _rate(tp, positives), "accuracy": _rate(tp + tn, n),
            "by_tag": {tag: {"samples": c["samples"], "correct": c["correct"],
                             "accuracy": _rate(c["correct"], c["samples"])} for tag, c in sorted(by_tag.items())}}


def score_state_tracking(samples: Sequence[BenchSample], tasks: dict, counts: dict[str, dict], rule: str) -> dict:
    """A frame is correct only when the answer to every distinct subtask is (card; Appendix F).

    A failed question is wrong, and so is its frame.
    """
    frames = correct = questions = questions_correct = failed_frames = 0
    failed: Counter = Counter()
    for sample in samples:
        task = tasks[sample.task_key]
        asked = state_questions(task, rule)
        answers = [counts.get(count_key(sample, text)) for text, _, _ in asked]
        if any(a is None for a in answers):
            continue
        frames += 1
        all_right, any_failed = True, False
        for (text, idx, needed), answer in zip(asked, answers):
            questions += 1
            failure = failure_of(answer)
            if failure is not None or answer.get("count") is None:
                failed[failure["kind"] if failure else FailureKind.UNPARSEABLE.value] += 1
                all_right, any_failed = False, True
                continue
            truth = all(sample.achieved[i] for i in idx)
            right = is_complete(answer["count"], needed) == truth
            questions_correct += right
            all_right &= right
        correct += all_right
        failed_frames += any_failed
    return {"frames": frames, "correct": correct, "rate": _rate(correct, frames), "questions": questions,
            "questions_correct": questions_correct, "question_accuracy": _rate(questions_correct, questions),
            "failed_questions": sum(failed.values()), "failed_frames": failed_frames, "failed_by_kind": _kinds(failed)}


def score_next_subtask(samples: Sequence[BenchSample], tasks: dict, answers: dict[str, dict]) -> dict:
    """Valid next subtasks over frames with work left; the first unfinished one where order binds.

    A failed call is an invalid answer (in ``eligible``, not ``valid``), never a done claim.
    """
    eligible = valid = ordered_eligible = ordered_valid = done_claims = 0
    failed: Counter = Counter()
    for sample in samples:
        if all(sample.achieved):
            continue  # card: exclude samples where all(achieved)
        task = tasks[sample.task_key]
        answer = answers.get(next_key(sample))
        if answer is None:
            continue
        eligible += 1
        ordered = task.category.is_order_constrained
        ordered_eligible += ordered
        failure = failure_of(answer)
        goal = answer.get("goal")
        if failure is not None or (goal is None and not answer.get("task_done")):
            failed[failure["kind"] if failure else FailureKind.UNPARSEABLE.value] += 1
            continue
        if goal is None:
            done_claims += 1
            continue
        reference = [goal_key(o, d) for o, d in zip(task.objects, task.destinations)]
        ok = is_valid_next(goal_key(goal["object"], goal["destination"]), reference, sample.achieved,
                           order_constrained=ordered)
        valid += ok
        ordered_valid += ok and ordered
    return {"eligible": eligible, "valid": valid, "rate": _rate(valid, eligible),
            "order_constrained_eligible": ordered_eligible, "order_constrained_valid": ordered_valid,
            "task_done_claims": done_claims, "failed": sum(failed.values()), "failed_by_kind": _kinds(failed)}


# Rates a run publishes; withheld (null) when too many calls failed.
RATE_KEYS = frozenset({"exact_rate", "rate", "tp_rate", "tn_rate", "precision", "recall", "accuracy",
                       "question_accuracy"})


def withhold_rates(scores: dict) -> dict:
    """``scores`` with every rate (nested ones included) set to None; counts are kept."""
    out = {}
    for key, value in scores.items():
        if key in RATE_KEYS:
            out[key] = None
        elif isinstance(value, dict):
            out[key] = withhold_rates(value)
        else:
            out[key] = value
    return out


def failure_report(answers: dict[str, dict], keys: set[str], max_failed_share: float) -> dict:
    """The failed calls among the answers scored: count, share, kinds, example reasons, and the verdict."""
    scored = [answers[k] for k in sorted(keys) if k in answers]
    kinds: Counter = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    for answer in scored:
        failure = failure_of(answer)
        if failure is None:
            continue
        kinds[failure["kind"]] += 1
        reason = str(failure.get("reason", ""))[:300]
        if len(examples[failure["kind"]]) < EXAMPLES_PER_KIND and reason not in examples[failure["kind"]]:
            examples[failure["kind"]].append(reason)
    failed = sum(kinds.values())
    share = failed / len(scored) if scored else 0.0
    return {"questions": len(scored), "failed": failed, "share": round(share, 6), "by_kind": _kinds(kinds),
            "examples": dict(sorted(examples.items())), "max_failed_share": max_failed_share,
            "exceeded": share > max_failed_share}


def failure_line(report: dict) -> str:
    """One line on the failed calls of a run, for the terminal and the table."""
    kinds = ", ".join(f"{kind} {n}" for kind, n in report["by_kind"].items())
    first = next((f"{kind}: {reasons[0]}" for kind, reasons in report["examples"].items() if reasons), "")
    line = (f"{report['failed']} of {report['questions']} calls failed ({100 * report['share']:.1f} %"
            + (f": {kinds}" if kinds else "") + ")")
    return line + (f"; e.g. {first}" if first else "")


# --------------------------------------------------------------------------- items

def plan_key(task: BenchTask) -> str:
    return f"plan|{task.benchmark}|{task.scene}"


def count_key(sample: BenchSample, subtask: str) -> str:
    return f"count|{sample.frame_id}|{subtask}"


def next_key(sample: BenchSample) -> str:
    return f"next|{sample.frame_id}|{sample.benchmark}|{sample.scene}"


# --------------------------------------------------------------------------- table

def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def format_table(summary: dict) -> str:
    """A Markdown table of the headline numbers, the failed calls and the accounting."""
    rows = [("task", "n", "score", "details")]
    withheld = bool(summary.get("scores_withheld"))

    def rate(value: Any) -> str:
        return "withheld" if withheld else _fmt(value)

    if "decomposition" in summary:
        d = summary["decomposition"]
        rows.append(("decomposition", _fmt(d["tasks"]), f"{d['exact']} exact ({rate(d['exact_rate'])})",
                     f"missed {d['goals_missed']}, invented {d['goals_invented']}, degenerate {d['degenerate']}, "
                     f"failed {d['failed']}"))
    if "verification" in summary:
        v = summary["verification"]
        rows.append(("verification", _fmt(v["samples"]), f"accuracy {rate(v['accuracy'])}",
                     f"TP rate {rate(v['tp_rate'])}, TN rate {rate(v['tn_rate'])}, precision "
                     f"{rate(v['precision'])}, recall {rate(v['recall'])}, failed {v['failed']}"))
    if "state_tracking" in summary:
        s = summary["state_tracking"]
        rows.append(("state_tracking", _fmt(s["frames"]), f"{s['correct']} frames ({rate(s['rate'])})",
                     f"questions {s['questions_correct']}/{s['questions']}, failed {s['failed_questions']}"))
    if "next_subtask" in summary:
        n = summary["next_subtask"]
        rows.append(("next_subtask", _fmt(n["eligible"]), f"{n['valid']} valid ({rate(n['rate'])})",
                     f"ordered {n['order_constrained_valid']}/{n['order_constrained_eligible']}, "
                     f"done claims {n['task_done_claims']}, failed {n['failed']}"))
    a = summary.get("accounting", {})
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + "---|" * len(rows[0]))
    lines.append("")
    if summary.get("scores_withheld"):
        lines.insert(0, f"**Scores withheld**: {summary['scores_withheld']}.\n")
    report = summary.get("failures")
    if report is not None:
        lines.append(f"failed calls: {failure_line(report)} (counted wrong; asked again on --resume)")
    lines.append(f"calls {a.get('calls')}, failed {a.get('failed_calls')}, input tokens {a.get('input_tokens')}, "
                 f"output tokens {a.get('output_tokens')}, thinking tokens {a.get('thinking_tokens')}, "
                 f"latency p50 {_fmt(a.get('latency_ms_p50'))} ms, cost {format_cost(a)}")
    return "\n".join(lines)
