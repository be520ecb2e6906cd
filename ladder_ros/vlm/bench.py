"""``ladder-ros vlm-bench``: score a VLM backend on the offline orchestrator benchmark.

The four tasks of the benchmark card (seed ``000_e75bb1a009522329.txt``) and Appendix F of the
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

Runs are resumable: every answer is appended to ``calls.jsonl`` as it arrives; ``--resume``
continues a run whose backend, model, prompts and dataset match ``run.json``, and refuses
otherwise. Scores are always computed from the stored answers, so a resumed run scores exactly
like an uninterrupted one.
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
from ladder_ros.vlm.accounting import CallRecord, summarize
from ladder_ros.vlm.bench_data import Benchmark, BenchSample, BenchTask, decode_image, load_benchmark
from ladder_ros.vlm.goal_matching import goal_key, is_valid_next, match_goals
from ladder_ros.vlm.prompts import prompts_digest

TASKS = ("decomposition", "verification", "state_tracking", "next_subtask")
COUNT_RULES = ("deployed", "card")
RUN_FORMAT = "ladder_ros.vlm.bench"
RUN_VERSION = 1


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


def score_decomposition(tasks: Sequence[BenchTask], plans: dict[str, dict]) -> dict:
    """Exact plans, goals missed and invented, degenerate and unreadable plans (card; Appendix F)."""
    scored = exact = exact_in_order = ordered_tasks = ordered_exact = 0
    missed = invented = degenerate = unreadable = 0
    for task in tasks:
        answer = plans.get(plan_key(task))
        if answer is None:
            continue
        scored += 1
        ordered = task.category.is_order_constrained
        ordered_tasks += ordered
        reference = [goal_key(o, d) for o, d in zip(task.objects, task.destinations)]
        if answer.get("goals") is None:
            unreadable += 1
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
            "goals_invented": invented, "degenerate": degenerate, "unreadable": unreadable}


def score_verification(samples: Sequence[BenchSample], tasks: dict, counts: dict[str, dict], rule: str) -> dict:
    """TP/TN rates, precision, recall and accuracy of the count verdict against ``label``."""
    tp = fn = tn = fp = unreadable = 0
    by_tag: dict[str, Counter] = defaultdict(Counter)
    for sample in samples:
        task = tasks[sample.task_key]
        answer = counts.get(count_key(sample, task.subtasks[sample.query_idx]))
        if answer is None:
            continue
        unreadable += answer.get("count") is None
        verdict = is_complete(answer.get("count"), required_for(task, sample.query_idx, rule))
        if sample.label:
            tp += verdict
            fn += not verdict
        else:
            tn += not verdict
            fp += verdict
        by_tag[sample.tag]["samples"] += 1
        by_tag[sample.tag]["correct"] += verdict == sample.label
    n = tp + fn + tn + fp
    return {"samples": n, "positives": tp + fn, "negatives": tn + fp, "tp": tp, "fn": fn, "tn": tn, "fp": fp,
            "tp_rate": _rate(tp, tp + fn), "tn_rate": _rate(tn, tn + fp), "precision": _rate(tp, tp + fp),
            "recall": _rate(tp, tp + fn), "accuracy": _rate(tp + tn, n), "unreadable": unreadable,
            "by_tag": {tag: {"samples": c["samples"], "correct": c["correct"],
                             "accuracy": _rate(c["correct"], c["samples"])} for tag, c in sorted(by_tag.items())}}


def score_state_tracking(samples: Sequence[BenchSample], tasks: dict, counts: dict[str, dict], rule: str) -> dict:
    """A frame is correct only when the answer to every distinct subtask is (card; Appendix F)."""
    frames = correct = questions = questions_correct = 0
    for sample in samples:
        task = tasks[sample.task_key]
        asked = state_questions(task, rule)
        answers = [counts.get(count_key(sample, text)) for text, _, _ in asked]
        if any(a is None for a in answers):
            continue
        frames += 1
        all_right = True
        for (text, idx, needed), answer in zip(asked, answers):
            truth = all(sample.achieved[i] for i in idx)
            right = is_complete(answer.get("count"), needed) == truth
            questions += 1
            questions_correct += right
            all_right &= right
        correct += all_right
    return {"frames": frames, "correct": correct, "rate": _rate(correct, frames), "questions": questions,
            "questions_correct": questions_correct, "question_accuracy": _rate(questions_correct, questions)}


def score_next_subtask(samples: Sequence[BenchSample], tasks: dict, answers: dict[str, dict]) -> dict:
    """Valid next subtasks over frames with work left; the first unfinished one where order binds."""
    eligible = valid = ordered_eligible = ordered_valid = done_claims = unreadable = 0
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
        goal = answer.get("goal")
        if goal is None:
            done_claims += bool(answer.get("task_done"))
            unreadable += not answer.get("task_done")
            continue
        reference = [goal_key(o, d) for o, d in zip(task.objects, task.destinations)]
        ok = is_valid_next(goal_key(goal["object"], goal["destination"]), reference, sample.achieved,
                           order_constrained=ordered)
        valid += ok
        ordered_valid += ok and ordered
    return {"eligible": eligible, "valid": valid, "rate": _rate(valid, eligible),
            "order_constrained_eligible": ordered_eligible, "order_constrained_valid": ordered_valid,
            "task_done_claims": done_claims, "unreadable": unreadable}


# --------------------------------------------------------------------------- items and the run store

def plan_key(task: BenchTask) -> str:
    return f"plan|{task.benchmark}|{task.scene}"


def count_key(sample: BenchSample, subtask: str) -> str:
    return f"count|{sample.frame_id}|{subtask}"


def next_key(sample: BenchSample) -> str:
    return f"next|{sample.frame_id}|{sample.benchmark}|{sample.scene}"


@dataclass
class RunStore:
    """``run.json`` (what produced the answers) and ``calls.jsonl`` (one answer a line, appended)."""

    out_dir: Path
    identity: dict
    answers: dict[str, dict] = field(default_factory=dict)

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

    def of_kind(self, kind: str) -> dict[str, dict]:
        return {k: v for k, v in self.answers.items() if k.startswith(kind + "|")}


# --------------------------------------------------------------------------- running

def _select(sequence: Sequence, limit: int | None) -> list:
    return list(sequence) if limit is None else list(sequence)[:limit]


def run_bench(benchmark: Benchmark, components: Any, out_dir: str | Path, *, tasks: Sequence[str] = TASKS,
              limit: int | None = None, resume: bool = False, count_rule: str = "deployed",
              progress: Callable[[str], None] | None = None) -> dict:
    """Ask every pending question through the components, store each answer, and score.

    ``components`` is a :class:`ladder_ros.vlm.factory.VLMComponents`. Returns the summary that is
    also written to ``summary.json`` (and as a table to ``summary.md``).
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ConfigError(f"unknown benchmark task(s) {unknown}; valid: {', '.join(TASKS)}")
    if count_rule not in COUNT_RULES:
        raise ConfigError(f"count rule must be one of {', '.join(COUNT_RULES)}, got {count_rule!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ConfigError(f"limit must be a positive integer, got {limit!r}")
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
    reused = len(store.answers)
    task_rows = _select(benchmark.tasks.values(), limit)
    samples = _select(benchmark.samples, limit)

    pending: list[tuple[str, Callable[[], dict]]] = []
    queued: set[str] = set()

    def queue(key: str, ask: Callable[[], dict]) -> None:
        if key not in store.answers and key not in queued:
            queued.add(key)
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

    say(f"vlm-bench: {len(pending)} question(s) to ask, {reused} answer(s) reused from {out_dir}")
    for number, (key, ask) in enumerate(pending, start=1):
        store.put(key, ask())
        if number % 10 == 0 or number == len(pending):
            say(f"vlm-bench: {number}/{len(pending)} answered")

    summary = score_run(benchmark, store, task_rows, samples, tasks, count_rule)
    summary["run"] = {**identity, "dataset": benchmark.path, "limit": limit, "count_rule": count_rule,
                      "tasks": list(tasks), "answers_reused": reused, "answers_asked": len(pending)}
    out = Path(out_dir)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(format_table(summary) + "\n", encoding="utf-8")
    return summary


def _answer(result_dict: dict, record: CallRecord | None) -> dict:
    return {**result_dict, "call": None if record is None else record.to_dict()}


def _last_record(components: Any, before: int) -> CallRecord | None:
    records = components.ledger.records
    return records[-1] if len(records) > before else None


def _ask_plan(components: Any, task: BenchTask) -> dict:
    before = len(components.ledger.records)
    result = components.planner.plan(task.instruction, decode_image(task.image_main), robot=task.robot)
    goals = None if result.goals is None else [g.to_dict() for g in result.goals]
    return _answer({"goals": goals, "error": result.error, "raw_reply": result.raw_reply},
                   _last_record(components, before))


def _ask_count(components: Any, sample: BenchSample, task: BenchTask, index: int) -> dict:
    before = len(components.ledger.records)
    subgoal = Subgoal(task.objects[index], task.destinations[index], task.subtasks[index])
    # ``required`` does not reach the prompt; the count is thresholded at scoring time.
    request = VerificationRequest(request_id=sample.index, step=sample.step, plan_index=index, subgoal=subgoal,
                                  required=1, reason="offline_benchmark")
    result = components.verifier.verify(request, sample.views())
    return _answer({"count": result.count, "error": result.error, "raw_reply": result.raw_reply},
                   _last_record(components, before))


def _ask_next(components: Any, sample: BenchSample, task: BenchTask) -> dict:
    before = len(components.ledger.records)
    # The main view only: the next-subtask prompt speaks of one camera, like the planning prompt.
    result = components.next_subtask.propose(task.instruction, sample.views()[:1], robot=task.robot)
    goal = None if result.goal is None else result.goal.to_dict()
    return _answer({"goal": goal, "task_done": result.task_done, "error": result.error,
                    "raw_reply": result.raw_reply}, _last_record(components, before))


def score_run(benchmark: Benchmark, store: RunStore, task_rows: Sequence[BenchTask], samples: Sequence[BenchSample],
              tasks: Sequence[str], count_rule: str) -> dict:
    """Scores from the stored answers of the selected rows, plus the accounting of their calls."""
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
    calls = [CallRecord.from_dict(store.answers[k]["call"]) for k in sorted(used_keys)
             if k in store.answers and store.answers[k].get("call")]
    summary["accounting"] = summarize(calls)
    return summary


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def format_table(summary: dict) -> str:
    """A Markdown table of the headline numbers."""
    rows = [("task", "n", "score", "details")]
    if "decomposition" in summary:
        d = summary["decomposition"]
        rows.append(("decomposition", _fmt(d["tasks"]), f"{d['exact']} exact ({_fmt(d['exact_rate'])})",
                     f"missed {d['goals_missed']}, invented {d['goals_invented']}, degenerate {d['degenerate']}, "
                     f"unreadable {d['unreadable']}"))
    if "verification" in summary:
        v = summary["verification"]
        rows.append(("verification", _fmt(v["samples"]), f"accuracy {_fmt(v['accuracy'])}",
                     f"TP rate {_fmt(v['tp_rate'])}, TN rate {_fmt(v['tn_rate'])}, precision "
                     f"{_fmt(v['precision'])}, recall {_fmt(v['recall'])}, unreadable {v['unreadable']}"))
    if "state_tracking" in summary:
        s = summary["state_tracking"]
        rows.append(("state_tracking", _fmt(s["frames"]), f"{s['correct']} frames ({_fmt(s['rate'])})",
                     f"questions {s['questions_correct']}/{s['questions']}"))
    if "next_subtask" in summary:
        n = summary["next_subtask"]
        rows.append(("next_subtask", _fmt(n["eligible"]), f"{n['valid']} valid ({_fmt(n['rate'])})",
                     f"ordered {n['order_constrained_valid']}/{n['order_constrained_eligible']}, "
                     f"done claims {n['task_done_claims']}, unreadable {n['unreadable']}"))
    a = summary.get("accounting", {})
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + "---|" * len(rows[0]))
    lines.append("")
    lines.append(f"calls {a.get('calls')}, failed {a.get('failed_calls')}, input tokens {a.get('input_tokens')}, "
                 f"output tokens {a.get('output_tokens')}, thinking tokens {a.get('thinking_tokens')}, "
                 f"latency p50 {_fmt(a.get('latency_ms_p50'))} ms, cost "
                 f"{'unknown' if a.get('cost_usd') is None else '$' + _fmt(a.get('cost_usd'))}")
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
    parser.add_argument("--timeout-s", type=float, default=None, help="Gemini request timeout, seconds")
    parser.add_argument("--max-attempts", type=int, default=None, help="Gemini attempts per call, retries included")
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
                               "prices_path": args.prices_path,
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
                            count_rule=args.count_rule, progress=lambda m: print(m, file=sys.stderr))
    finally:
        components.close()
    print(format_table(summary))
    print(f"summary: {Path(args.out) / 'summary.json'}")
    return 0
