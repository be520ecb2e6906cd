"""``ladder-ros vlm-bench``: score a VLM backend on the offline orchestrator benchmark.

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

The count threshold. ``--count-rule deployed`` (default) is the rule the robot runs (Appendix B):
the occurrences of the subtask in the plan so far, one on relay and revisit tasks, where one
object travels. ``--count-rule card`` is the card's example, ``subtasks[:query_idx + 1].count``,
which differs only on relay and revisit tasks.

Answers are reused where the prompt is the same: the verification prompt depends only on the
subtask text and the views, so one count per (frame, distinct subtask) serves both verification
and state tracking, at temperature 0.

Failed calls. A call that gave no answer is a failed call, of one kind
(:class:`~ladder_ros.vlm.backends.base.FailureKind`): ``transport``, ``http`` (an HTTP error
status, e.g. 401 for a bad key), ``timeout`` (an attempt's timeout or the call deadline),
``blocked`` (prompt blocked, or a filter finish reason), ``truncated`` (cut at the output-token cap:
the card says a truncated reply is indistinguishable from a wrong one), ``finish`` (any other
finish reason than STOP, or none), ``no_text``, ``backend``, ``unparseable`` (a complete reply
without a readable answer in the deployed format). A failed call is never read as an answer: it is
not "not complete", not a true negative, not a done claim. It stays in the denominator and is
counted wrong (errors stay in the denominator; the card: "a truncated reply is indistinguishable
from a wrong one"), and every task reports how many of its items failed and of which kinds. The
run reports the failed share over all the questions it scored, with an example reason per kind;
when it exceeds ``--max-failed-share`` (default 5 %) the rates are
withheld (null in ``summary.json``, "withheld" in the table) and the command exits with status 3,
saying so: a run where, say, every call got HTTP 401 publishes no accuracy.

Runs are resumable: every answer is appended to ``calls.jsonl`` as it arrives; ``--resume``
continues a run whose backend, model, prompts and dataset match ``run.json``, and refuses
otherwise. A resumed run asks again exactly the questions whose stored answer is a failed call
(and those never asked), and reuses every real answer. Scores are always computed from the latest
stored answer of each question, so a resumed run scores exactly like an uninterrupted one; the
accounting covers every call made, the failed ones that were asked again included. One question
costs at most one failed sample: nothing a reply or a backend does stops the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import VerificationRequest, is_complete, required_count
from ladder_ros.vlm.accounting import CallRecord, format_cost, summarize
from ladder_ros.vlm.backends.base import FailureKind
from ladder_ros.vlm.bench_data import Benchmark, BenchSample, BenchTask, decode_image, load_benchmark
from ladder_ros.vlm.goal_matching import goal_key, is_valid_next, match_goals
from ladder_ros.vlm.prompts import prompts_digest

TASKS = ("decomposition", "verification", "state_tracking", "next_subtask")
COUNT_RULES = ("deployed", "card")
RUN_FORMAT = "ladder_ros.vlm.bench"
RUN_VERSION = 2  # 2: answers carry their failure; version-1 runs cannot tell a failed call from an answer
DEFAULT_MAX_FAILED_SHARE = 0.05  # project choice: more failed calls than this and the scores are withheld
DEFAULT_CALL_DEADLINE_S = 400.0  # offline nothing waits: about four 90 s attempts plus back-off
EXIT_TOO_MANY_FAILED = 3
EXAMPLES_PER_KIND = 3


class BenchRunError(LadderError):
    """A run directory cannot be used as asked (exists without --resume, or belongs to another run)."""


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


# --------------------------------------------------------------------------- items and the run store

def plan_key(task: BenchTask) -> str:
    return f"plan|{task.benchmark}|{task.scene}"


def count_key(sample: BenchSample, subtask: str) -> str:
    return f"count|{sample.frame_id}|{subtask}"


def next_key(sample: BenchSample) -> str:
    return f"next|{sample.frame_id}|{sample.benchmark}|{sample.scene}"


@dataclass
class RunStore:
    """``run.json`` (what produced the answers) and ``calls.jsonl`` (one answer a line, appended).

    ``answers`` holds the latest answer of each question (what is scored); ``history`` every line,
    so a failed call that was asked again still counts in the accounting.
    """

    out_dir: Path
    identity: dict
    answers: dict[str, dict] = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)

    @property
    def calls_path(self) -> Path:
        return self.out_dir / "calls.jsonl"

    @classmethod
    def open(cls, out_dir: Path, identity: dict, resume: bool) -> "RunStore":
        run_path = out_dir / "run.json"
        store = cls(out_dir, identity)
        if run_path.exists():
            if not resume:
                raise BenchRunError(f"{out_dir} already holds a run; pass --resume to continue it "
                                    "or choose another --out")
            recorded = json.loads(run_path.read_text("utf-8"))
            different = sorted(k for k in set(identity) | set(recorded) if identity.get(k) != recorded.get(k))
            if different:
                raise BenchRunError(f"{out_dir} holds a run of something else (differs in: "
                                    f"{', '.join(different)}); refusing to mix answers")
            store._load()
        else:
            out_dir.mkdir(parents=True, exist_ok=True)
            run_path.write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")
        return store

    def _load(self) -> None:
        if not self.calls_path.exists():
            return
        lines = self.calls_path.read_text("utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                self.answers[entry["key"]] = entry
                self.history.append(entry)
            except (json.JSONDecodeError, KeyError, TypeError):
                if number == len(lines):
                    print(f"vlm-bench: ignoring a truncated last line in {self.calls_path}", file=sys.stderr)
                    continue
                raise BenchRunError(f"{self.calls_path}: line {number} is not a stored answer") from None

    def put(self, key: str, answer: dict) -> None:
        entry = {"key": key, **answer}
        with self.calls_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")
            out.flush()
            os.fsync(out.fileno())
        self.answers[key] = entry
        self.history.append(entry)

    def needs_asking(self, key: str) -> bool:
        """Never answered, or the stored answer is a failed call (asked again on resume)."""
        answer = self.answers.get(key)
        return answer is None or failure_of(answer) is not None

    def of_kind(self, kind: str) -> dict[str, dict]:
        return {k: v for k, v in self.answers.items() if k.startswith(kind + "|")}


# --------------------------------------------------------------------------- running

def _select(sequence: Sequence, limit: int | None) -> list:
    return list(sequence) if limit is None else list(sequence)[:limit]


def run_bench(benchmark: Benchmark, components: Any, out_dir: str | Path, *, tasks: Sequence[str] = TASKS,
              limit: int | None = None, resume: bool = False, count_rule: str = "deployed",
              max_failed_share: float = DEFAULT_MAX_FAILED_SHARE,
              progress: Callable[[str], None] | None = None) -> dict:
    """Ask every pending question through the components, store each answer, and score.

    ``components`` is a :class:`ladder_ros.vlm.factory.VLMComponents`. Returns the summary that is
    also written to ``summary.json`` (and as a table to ``summary.md``); its ``failures`` say how
    many calls failed, and when their share exceeds ``max_failed_share`` the rates are withheld.
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ConfigError(f"unknown benchmark task(s) {unknown}; valid: {', '.join(TASKS)}")
    if count_rule not in COUNT_RULES:
        raise ConfigError(f"count rule must be one of {', '.join(COUNT_RULES)}, got {count_rule!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ConfigError(f"limit must be a positive integer, got {limit!r}")
    if isinstance(max_failed_share, bool) or not isinstance(max_failed_share, (int, float)) \
            or not 0.0 <= max_failed_share <= 1.0:
        raise ConfigError(f"max failed share must be a number in [0, 1], got {max_failed_share!r}")
    say = progress or (lambda message: None)
    config = components.config
    identity = {
        "format": RUN_FORMAT, "version": RUN_VERSION, "backend": config.backend, "model": components.backend.model,
        "prompts_sha256": prompts_digest(), "dataset_sha256": benchmark.fingerprint(), "robot": config.robot,
        "max_output_tokens": {"verify": config.max_output_tokens_verify, "plan": config.max_output_tokens_plan,
                              "next_subtask": config.max_output_tokens_next_subtask},
        "thinking": {"budget": config.gemini.thinking_budget, "level": config.gemini.thinking_level}
        if config.backend == "gemini" else None,
    }
    store = RunStore.open(Path(out_dir), identity, resume)
    task_rows = _select(benchmark.tasks.values(), limit)
    samples = _select(benchmark.samples, limit)

    pending: list[tuple[str, Callable[[], dict]]] = []
    queued: set[str] = set()

    def queue(key: str, ask: Callable[[], dict]) -> None:
        if key not in queued:
            queued.add(key)
            if store.needs_asking(key):
                pending.append((key, ask))

    if "decomposition" in tasks:
        for task in task_rows:
            queue(plan_key(task), lambda task=task: _ask_plan(components, task))
    for sample in samples:
        task = benchmark.tasks[sample.task_key]
        texts: list[str] = []
        if "verification" in tasks:
            texts.append(task.subtasks[sample.query_idx])
        if "state_tracking" in tasks:
            texts += [text for text, _, _ in state_questions(task, count_rule)]
        for text in dict.fromkeys(texts):
            index = task.subtasks.index(text)
            queue(count_key(sample, text), lambda s=sample, t=task, i=index: _ask_count(components, s, t, i))
        if "next_subtask" in tasks and not all(sample.achieved):
            queue(next_key(sample), lambda s=sample, t=task: _ask_next(components, s, t))

    reasked = sum(1 for key, _ in pending if key in store.answers)
    reused = len(queued) - len(pending)
    say(f"vlm-bench: {len(pending)} question(s) to ask ({reasked} failed before, asked again), "
        f"{reused} answer(s) reused from {out_dir}")
    failed_now = 0
    for number, (key, ask) in enumerate(pending, start=1):
        answer = _asked_safely(key, ask)
        failed_now += failure_of(answer) is not None
        store.put(key, answer)
        if number % 10 == 0 or number == len(pending):
            say(f"vlm-bench: {number}/{len(pending)} asked, {failed_now} failed")

    summary = score_run(benchmark, store, task_rows, samples, tasks, count_rule, max_failed_share)
    summary["run"] = {**identity, "dataset": benchmark.path, "limit": limit, "count_rule": count_rule,
                      "tasks": list(tasks), "answers_reused": reused, "answers_asked": len(pending),
                      "answers_asked_again": reasked, "max_failed_share": max_failed_share}
    out = Path(out_dir)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(format_table(summary) + "\n", encoding="utf-8")
    return summary


def _asked_safely(key: str, ask: Callable[[], dict]) -> dict:
    """One question's stored answer; anything the asking raises is one failed sample, not the end of the run."""
    try:
        return ask()
    except Exception as exc:  # the components never raise; this guards the run against a bug anyway
        print(f"vlm-bench: asking {key} raised {type(exc).__name__}: {exc}; recorded as a failed call",
              file=sys.stderr)
        return {"failure": {"kind": FailureKind.BACKEND.value, "reason": f"asking raised {type(exc).__name__}: "
                                                                         f"{exc}"[:500]}, "call": None}


def _answer(result_dict: dict, failure: FailureKind | str | None, error: str | None,
            record: CallRecord | None) -> dict:
    """A stored answer: the result's fields, its failure (kind and reason) and the call's record."""
    kind = getattr(failure, "value", failure)
    reason = (error or str(kind)).removeprefix(f"{kind}: ")
    stored_failure = None if kind is None else {"kind": str(kind), "reason": reason}
    return {**result_dict, "failure": stored_failure, "call": None if record is None else record.to_dict()}


def _last_record(components: Any, before: int) -> CallRecord | None:
    records = components.ledger.records
    return records[-1] if len(records) > before else None


def _ask_plan(components: Any, task: BenchTask) -> dict:
    before = len(components.ledger.records)
    result = components.planner.plan(task.instruction, decode_image(task.image_main), robot=task.robot)
    goals = None if result.goals is None else [g.to_dict() for g in result.goals]
    return _answer({"goals": goals, "error": result.error, "raw_reply": result.raw_reply},
                   result.failure, result.error, _last_record(components, before))


def _ask_count(components: Any, sample: BenchSample, task: BenchTask, index: int) -> dict:
    before = len(components.ledger.records)
    subgoal = Subgoal(task.objects[index], task.destinations[index], task.subtasks[index])
    # ``required`` does not reach the prompt; the count is thresholded at scoring time.
    request = VerificationRequest(request_id=sample.index, step=sample.step, plan_index=index, subgoal=subgoal,
                                  required=1, reason="offline_benchmark")
    result = components.verifier.verify(request, sample.views())
    return _answer({"count": result.count, "error": result.error, "raw_reply": result.raw_reply},
                   result.usage.get("failure") if result.count is None else None, result.error,
                   _last_record(components, before))


def _ask_next(components: Any, sample: BenchSample, task: BenchTask) -> dict:
    before = len(components.ledger.records)
    # The main view only: the next-subtask prompt speaks of one camera, like the planning prompt.
    result = components.next_subtask.propose(task.instruction, sample.views()[:1], robot=task.robot)
    goal = None if result.goal is None else result.goal.to_dict()
    return _answer({"goal": goal, "task_done": result.task_done, "error": result.error,
                    "raw_reply": result.raw_reply}, result.failure, result.error, _last_record(components, before))


def score_run(benchmark: Benchmark, store: RunStore, task_rows: Sequence[BenchTask], samples: Sequence[BenchSample],
              tasks: Sequence[str], count_rule: str, max_failed_share: float = DEFAULT_MAX_FAILED_SHARE) -> dict:
    """Scores from the stored answers of the selected rows, their failed calls, and the accounting of every call."""
    summary: dict[str, Any] = {}
    counts = store.of_kind("count")
    used_keys: set[str] = set()
    if "decomposition" in tasks:
        plans = store.of_kind("plan")
        summary["decomposition"] = score_decomposition(task_rows, plans)
        used_keys |= {plan_key(t) for t in task_rows}
    if "verification" in tasks:
        summary["verification"] = score_verification(samples, benchmark.tasks, counts, count_rule)
        used_keys |= {count_key(s, benchmark.tasks[s.task_key].subtasks[s.query_idx]) for s in samples}
    if "state_tracking" in tasks:
        summary["state_tracking"] = score_state_tracking(samples, benchmark.tasks, counts, count_rule)
        used_keys |= {count_key(s, text) for s in samples
                      for text, _, _ in state_questions(benchmark.tasks[s.task_key], count_rule)}
    if "next_subtask" in tasks:
        summary["next_subtask"] = score_next_subtask(samples, benchmark.tasks, store.of_kind("next"))
        used_keys |= {next_key(s) for s in samples if not all(s.achieved)}
    report = failure_report(store.answers, used_keys, max_failed_share)
    summary["failures"] = report
    summary["scores_withheld"] = None
    if report["exceeded"]:
        summary["scores_withheld"] = (f"{failure_line(report)}: more than --max-failed-share "
                                      f"{100 * max_failed_share:g} %, so no rate is published")
        for task in TASKS:
            if task in summary:
                summary[task] = withhold_rates(summary[task])
    calls = [CallRecord.from_dict(entry["call"]) for entry in store.history
             if entry.get("key") in used_keys and entry.get("call")]
    summary["accounting"] = summarize(calls)
    return summary


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


# --------------------------------------------------------------------------- CLI

def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "vlm-bench", help="score a VLM backend on the offline benchmark",
        description="Score a VLM backend on the offline orchestrator benchmark (decomposition, "
                    "verification, state tracking, next subtask) through the deployed components.")
    parser.add_argument("--dataset", required=True, help="local directory of the benchmark dataset")
    parser.add_argument("--out", required=True, help="run directory: run.json, calls.jsonl, summary.json/.md")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated subset of {','.join(TASKS)}")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N tasks and N samples")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--count-rule", choices=COUNT_RULES, default="deployed",
                        help="count threshold: the deployed rule (Appendix B) or the card's example")
    parser.add_argument("--cache-dir", default=None, help="datasets cache directory")
    parser.add_argument("--backend", default="gemini", help="gemini, local, oracle or replay")
    parser.add_argument("--model", default=None, help="Gemini model id, or the local model directory")
    parser.add_argument("--robot", default="robot arm", help="fills <robot> where the dataset has no robot column")
    parser.add_argument("--base-url", default=None, help="Gemini endpoint (default: Google's)")
    parser.add_argument("--api-key-env", default="GEMINI_API_KEY", help="environment variable holding the key")
    parser.add_argument("--timeout-s", type=float, default=None, help="Gemini timeout of one attempt, seconds")
    parser.add_argument("--max-attempts", type=int, default=None, help="Gemini attempts per call, retries included")
    parser.add_argument("--call-deadline-s", type=float, default=DEFAULT_CALL_DEADLINE_S,
                        help="longest one call may take, all attempts and back-off included (default "
                             f"{DEFAULT_CALL_DEADLINE_S:g} s: offline nothing waits; the robot's default is 50 s)")
    parser.add_argument("--max-failed-share", type=float, default=DEFAULT_MAX_FAILED_SHARE,
                        help="withhold the rates and exit with status 3 when more than this share of the scored "
                             f"calls failed (transport, HTTP, timeout, blocked, truncated, unparseable; default "
                             f"{DEFAULT_MAX_FAILED_SHARE:g})")
    parser.add_argument("--thinking-budget", type=int, default=None, help="Gemini thinking budget (-1: dynamic)")
    parser.add_argument("--thinking-level", default=None, help="Gemini thinking level: minimal, low, medium, high")
    parser.add_argument("--include-thoughts", action="store_true", help="record Gemini thought summaries")
    parser.add_argument("--device", default="auto", help="local model device: auto, cpu, cuda")
    parser.add_argument("--dtype", default="auto", help="local model dtype: auto, float32, bfloat16, float16")
    parser.add_argument("--replay-path", default=None, help="recording to play back (backend replay)")
    parser.add_argument("--record-path", default=None, help="also record every call to this JSONL file")
    parser.add_argument("--prices-path", default=None, help="price table replacing the packaged one")
    parser.add_argument("--max-output-tokens-plan", type=int, default=None)
    parser.add_argument("--max-output-tokens-verify", type=int, default=None)
    parser.add_argument("--max-output-tokens-next-subtask", type=int, default=None)
    parser.set_defaults(func=main)


def config_from_args(args: argparse.Namespace) -> Any:
    from ladder_ros.vlm.config import VLMConfig

    mapping: dict[str, Any] = {"backend": args.backend, "model": args.model, "robot": args.robot,
                               "replay_path": args.replay_path, "record_path": args.record_path,
                               "prices_path": args.prices_path, "call_deadline_s": args.call_deadline_s,
                               "local": {"device": args.device, "dtype": args.dtype}}
    gemini: dict[str, Any] = {"api_key_env": args.api_key_env, "base_url": args.base_url,
                              "thinking_budget": args.thinking_budget, "thinking_level": args.thinking_level,
                              "include_thoughts": args.include_thoughts}
    if args.timeout_s is not None:
        gemini["timeout_s"] = args.timeout_s
    if args.max_attempts is not None:
        gemini["max_attempts"] = args.max_attempts
    mapping["gemini"] = gemini
    for purpose in ("plan", "verify", "next_subtask"):
        value = getattr(args, f"max_output_tokens_{purpose}")
        if value is not None:
            mapping[f"max_output_tokens_{purpose}"] = value
    return VLMConfig.from_mapping(mapping)


def main(args: argparse.Namespace) -> int:
    from ladder_ros.vlm.factory import make_components

    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    config = config_from_args(args)
    benchmark = load_benchmark(args.dataset, cache_dir=args.cache_dir)
    components = make_components(config)
    try:
        summary = run_bench(benchmark, components, args.out, tasks=tasks, limit=args.limit, resume=args.resume,
                            count_rule=args.count_rule, max_failed_share=args.max_failed_share,
                            progress=lambda m: print(m, file=sys.stderr))
    finally:
        components.close()
    print(format_table(summary))
    print(f"summary: {Path(args.out) / 'summary.json'}")
    if summary["scores_withheld"]:
        print(f"vlm-bench: scores withheld: {summary['scores_withheld']}. Fix the cause and rerun with --resume: "
              "only the failed calls are asked again.", file=sys.stderr)
        return EXIT_TOO_MANY_FAILED
    return 0
