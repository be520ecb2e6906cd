"""``ladder-ros vlm-bench``: score a VLM backend on the offline orchestrator benchmark.

Every question of the selected tasks (decomposition, verification, state tracking, next subtask) is
asked through the shipped components (:class:`Planner`, :class:`Verifier`, :class:`NextSubtask`), its
answer stored, and the run scored from the stored answers by
:mod:`ladder_ros.evaluation.vlm_bench_scoring` (the tasks' rules, the count threshold, ``--count-rule``,
and how a failed call counts are described there). The dataset is read and checked by
:mod:`ladder_ros.evaluation.vlm_bench_data`.

Answers are reused where the prompt is the same: the verification prompt depends only on the
subtask text and the views, so one count per (frame, distinct subtask) serves both verification
and state tracking, at temperature 0.

Failed calls. A call that gave no answer is a failed call, of one kind
(:class:`~ladder_ros.vlm.backends.base.FailureKind`): ``transport``, ``http`` (an HTTP error
status, e.g. 401 for a bad key), ``timeout`` (an attempt's timeout or the call deadline),
``blocked`` (prompt blocked, or a filter finish reason), ``truncated`` (cut at the output-token cap:
the card says a truncated reply is indistinguishable from a wrong one), ``finish`` (any other
finish reason than STOP, or none), ``no_text``, ``backend``, ``unparseable`` (a complete reply
without a readable answer in the deployed format). It is counted wrong, never read as an answer.
The run reports the failed share over all the questions it scored, with an example reason per kind;
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import VerificationRequest
from ladder_ros.evaluation.vlm_bench_data import Benchmark, BenchSample, BenchTask, decode_image, load_benchmark
from ladder_ros.evaluation.vlm_bench_scoring import (
    count_key,
    failure_line,
    failure_of,
    failure_report,
    format_table,
    next_key,
    plan_key,
    score_decomposition,
    score_next_subtask,
    score_state_tracking,
    score_verification,
    state_questions,
    withhold_rates,
)
from ladder_ros.vlm.accounting import CallRecord, summarize
from ladder_ros.vlm.backends.base import FailureKind
from ladder_ros.vlm.prompts import prompts_digest

TASKS = ("decomposition", "verification", "state_tracking", "next_subtask")
COUNT_RULES = ("deployed", "card")
# The format name written into run.json and compared on --resume. It kept the value it had when the
# module lived at ladder_ros.vlm.bench, so the runs written then still resume.
RUN_FORMAT = "ladder_ros.vlm.bench"
RUN_VERSION = 2  # 2: answers carry their failure; version-1 runs cannot tell a failed call from an answer
DEFAULT_MAX_FAILED_SHARE = 0.05  # project choice: more failed calls than this and the scores are withheld
DEFAULT_CALL_DEADLINE_S = 400.0  # offline nothing waits: about four 90 s attempts plus back-off
EXIT_TOO_MANY_FAILED = 3


class BenchRunError(LadderError):
    """A run directory cannot be used as asked (exists without --resume, or belongs to another run)."""


# --------------------------------------------------------------------------- the run store

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
