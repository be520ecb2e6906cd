"""``ladder-ros sim-eval``: orchestrator variants × tasks × episodes on a simulated suite.

Every episode runs the in-process reference loop (:func:`~ladder_ros.evaluation.reference_loop.run_episode`).
Episode ``k`` of a task uses layout ``k mod layouts`` and the same seed for every variant, so the
variants meet the same scenes (paired). Results go to ``OUT/episodes.jsonl`` (one line per
episode, appended as they finish) and ``OUT/summary.json``; a table like the paper's Table 3 is
printed and a success-versus-horizon plot is saved. A rerun with the same OUT skips the episodes
already there, and only when everything that changes an episode is the same (``OUT/run_key.json``;
otherwise it is refused, naming what differs). Every table, summary and plot says where the plans
came from (the task's reference subgoals, or a VLM planner asked with the first frame, as the
paper's variants do), which success rule scored each task, and whether the proprioceptive
verifier's counts came from the oracle (simulator state, not a VLM). The table also counts the
attempts the trigger ended per variant and reason (``release``, ``timeout``: the Franka trigger's
300 steps without a release, ``periodic``), which ``summary.json`` keeps as ``attempt_ends``.

Episodes run in local processes (``--jobs``) or, with ``--executor ray``, one Ray task per episode
on a Ray cluster (:mod:`ladder_ros.evaluation.executors`); the records are the same either way,
apart from their timing fields (``ladder_ros.core.record.TIMING_FIELDS``: ``wall_s``, the policy's
latencies and warm-up, and ``execution``, where and after how many attempts an episode ran). An
episode that raises, or whose worker died more often than ``--max-retries`` allows, is written as an
error record (``error``, every subgoal ``episode_error``) that counts as a failure in every rate.

With ``--auto-reset`` the episodes of a task and variant run as one sequence in one worker: episode 0 from
layout 0, each followed by a reset episode that puts the scene back with the same policy, triggers and verifier
(:mod:`ladder_ros.evaluation.auto_reset`), and episode ``k`` starting from the scene the reset ``k - 1`` left.
Reset episodes go to the same ``episodes.jsonl`` with ``kind: reset``; they count in no task's rates, and the
table reports them apart (resets run, confirmed, sequences stopped and why). A suite whose scenes declare no
start regions (the SimplerEnv suites) is refused in one line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ladder_ros import __version__
from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.metrics import (
    EPISODE_ERROR,
    SubgoalOutcome,
    paired_task_bootstrap,
    per_task_counts,
    summarize_episodes,
)
from ladder_ros.core.orchestrator import Variant
from ladder_ros.core.presets import PRESET_OPTIONS, EmbodimentPreset, get_preset, parse_preset_options
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.core.task import LADDER_RULE
from ladder_ros.evaluation import summary_tables
from ladder_ros.evaluation.components import (
    NOISE_DEFAULT,
    PLANNERS,
    POLICIES,
    VERIFIERS,
    check_policy,
    check_policy_for_suite,
    default_policy,
    make_planner,
    make_policy,
    make_verifier,
    planner_label,
    planner_settings,
    policy_action_convention,
    verifier_label,
)
from ladder_ros.evaluation.executors import (
    DEFAULT_MAX_RETRIES,
    EXECUTORS,
    EpisodeExecutor,
    ExecutorSettings,
    Finished,
    Lost,
    WorkSpec,
    drive,
    make_executor,
    parse_env_vars,
)
from ladder_ros.evaluation.policy_summary import format_policy_note, summarize_policy
from ladder_ros.evaluation.reference_loop import run_episode, uses_plan
from ladder_ros.core.record import PLAN_SOURCES, PLANNER, REFERENCE, EpisodeRecord, episode_kind
from ladder_ros.core.reset import RESET_EPISODE, TASK_EPISODE, reset_task_id
from ladder_ros.evaluation.auto_reset import check_auto_reset, run_sequence
from ladder_ros.evaluation.run_key import claim_output, episode_key, key_differences, key_digest, run_key
from ladder_ros.paths import share_path
from ladder_ros.policies.factory import load_policy, provider_for
from ladder_ros.sim.registry import BACKENDS, make_simulator

ERROR_FINISH = "error"  # finish_reason of an episode that produced no result (error record)

# Differences the paper draws between the learned-policy variants (Appendix F).
PAIRED_COMPARISONS = (("privileged_verifier", "proprio_verifier"), ("proprio_verifier", "proprio_trigger"),
                      ("proprio_verifier", "low_level_policy"), ("proprio_trigger", "periodic_trigger"))


@dataclass(frozen=True)
class EvalJob:
    """One episode, or with ``sequence`` > 0 that many episodes in a row, each after the last one's reset
    (episode ``k`` with seed ``seed + k``, all on the scene of ``layout``)."""

    task_id: str
    variant: str
    layout: int
    seed: int
    sequence: int = 0

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.task_id, self.variant, self.layout, self.seed)

    def episode_keys(self) -> list[tuple[str, str, int, int]]:
        """The keys of the task episodes this job writes (one, or one per episode of its sequence)."""
        return [(self.task_id, self.variant, self.layout, self.seed + k) for k in range(max(self.sequence, 1))]

    def reset_keys(self) -> list[tuple[str, str, int, int]]:
        """The keys of the reset episodes a sequence may write."""
        reset_id = reset_task_id(self.task_id)
        return [(reset_id, self.variant, self.layout, self.seed + k) for k in range(self.sequence)]


@dataclass(frozen=True)
class EvalConfig:
    """One sim-eval run; validated on construction."""

    suite_path: str
    simulator: str
    variants: tuple[str, ...]
    task_ids: tuple[str, ...]
    episodes: int
    base_seed: int
    policy: str
    noise: str
    verifier: str
    render: bool
    jobs: int
    max_horizon: int | None = None
    plan_source: str = REFERENCE
    planner: str = "gemini"  # the planner's VLM backend when plan_source is planner
    planner_model: str | None = None
    planner_replay: str | None = None
    preset_options: tuple[tuple[str, str], ...] = ()
    rotation_convention: str | None = None  # None: the policy's own
    auto_reset: bool = False  # each task's episodes in one sequence, each after the last one's automatic reset

    def __post_init__(self) -> None:
        for v in self.variants:
            Variant.parse(v)
        if self.simulator not in BACKENDS:
            raise unknown_name("simulator", self.simulator, list(BACKENDS))
        check_policy(self.policy, self.noise, self.rotation_convention)
        check_policy_for_suite(self.policy, load_suite(self.suite_path), self.simulator, self.rotation_convention)
        if self.plan_source not in PLAN_SOURCES:
            raise unknown_name("plan source", self.plan_source, list(PLAN_SOURCES))
        if self.plan_source == PLANNER:
            planner_settings(self.planner, self.planner_model, self.planner_replay)
        get_preset("widowx", dict(self.preset_options))  # names and values of the options
        if self.verifier not in VERIFIERS:
            raise unknown_name("verifier", self.verifier, list(VERIFIERS))
        if self.episodes < 1:
            raise ConfigError(f"episodes must be >= 1, got {self.episodes}")
        if self.jobs < 1:
            raise ConfigError(f"jobs must be >= 1, got {self.jobs}")
        if self.max_horizon is not None and self.max_horizon < 1:
            raise ConfigError(f"max-horizon must be >= 1, got {self.max_horizon}")
        if self.auto_reset:
            suite = load_suite(self.suite_path)
            check_auto_reset(suite, self.simulator, suite.select(list(self.task_ids) or None, self.max_horizon))

    @property
    def planner_config(self) -> dict | None:
        if self.plan_source != PLANNER:
            return None
        return planner_settings(self.planner, self.planner_model, self.planner_replay)

    def preset_for(self, suite: TaskSuite) -> EmbodimentPreset:
        return get_preset(suite.embodiment, dict(self.preset_options))

    def simulator_options(self) -> dict:
        return {"render": self.render}

    def action_convention(self) -> dict:
        """The convention the policy acts in, as results record it."""
        return policy_action_convention(self.policy, self.rotation_convention)

    def key(self, suite: TaskSuite) -> dict:
        """Everything that changes an episode of this run (:mod:`ladder_ros.evaluation.run_key`)."""
        key = run_key(suite_path=self.suite_path, suite_name=suite.name, simulator=self.simulator,
                      simulator_options=self.simulator_options(), policy=self.policy, noise=self.noise,
                      action_convention=self.action_convention(), verifier={"name": self.verifier},
                      plan_source=self.plan_source, planner=self.planner_config, preset=self.preset_for(suite))
        if self.auto_reset:  # episodes after the first start from a reset scene, not from their layouts
            key["auto_reset"] = True
        return key


def plan_jobs(suite: TaskSuite, config: EvalConfig) -> list[EvalJob]:
    tasks = suite.select(list(config.task_ids) or None, config.max_horizon)
    if not tasks:
        raise ConfigError("no task matches the selection")
    jobs = []
    if config.auto_reset:
        return [EvalJob(task.task_id, variant, layout=0, seed=config.base_seed, sequence=config.episodes)
                for task in tasks for variant in config.variants]
    for task in tasks:
        for k in range(config.episodes):
            for variant in config.variants:
                jobs.append(EvalJob(task.task_id, variant, layout=k % task.layouts, seed=config.base_seed + k))
    return jobs


# ---------------------------------------------------------------- worker side
_WORKER: dict = {}


def _init_worker(config: EvalConfig) -> dict:
    """Set this process up for ``config``; returns the run key as computed here (the driver compares
    it with its own: a worker with other code or simulator versions is named and refused)."""
    previous = _WORKER.get("simulator")
    _WORKER.clear()
    if previous is not None:
        previous.close()
    suite = load_suite(config.suite_path)
    preset = config.preset_for(suite)
    key = config.key(suite)
    _WORKER.update(config=config, suite=suite, preset=preset, key_digest=key_digest(key),
                   simulator=make_simulator(config.simulator, suite, **config.simulator_options()),
                   planner=make_planner(config.planner_config, preset.name) if config.planner_config else None)
    return {"run_key": key}


def _run_sequence(job: EvalJob) -> dict:
    """A sequence's records (``sequence``) and why it stopped early (``stopped``); an episode that raises ends
    it with an error record."""
    config: EvalConfig = _WORKER["config"]
    suite: TaskSuite = _WORKER["suite"]
    task = suite.task(job.task_id)
    written: list[dict] = []

    def keep(record: EpisodeRecord) -> None:
        data = record.to_dict()
        data["noise"] = config.noise
        data["run_key"] = _WORKER["key_digest"]
        written.append(data)

    def policy_for(episode_task, seed: int):
        return make_policy(config.policy, episode_task, seed, config.noise, config.rotation_convention)

    try:
        result = run_sequence(_WORKER["simulator"], policy_for, task, job.variant, _WORKER["preset"],
                              episodes=job.sequence, layout=job.layout, base_seed=job.seed,
                              verifier=make_verifier(config.verifier),
                              sequence_id=f"{job.task_id}-{job.variant}-s{job.seed}", on_record=keep)
    except Exception as exc:  # noqa: BLE001 - recorded, never dropped
        done = sum(1 for r in written if episode_kind(r) == TASK_EPISODE)
        failed = EvalJob(job.task_id, job.variant, job.layout, job.seed + min(done, job.sequence - 1))
        error = {"kind": "exception", "type": type(exc).__name__, "message": str(exc)}
        if done < job.sequence:
            written.append(error_record(config, suite, failed, error, _WORKER["key_digest"]))
        return {"sequence": written, "stopped": f"{type(exc).__name__}: {exc}"}
    return {"sequence": written, "stopped": result.stopped}


def _run_job(job: EvalJob) -> dict:
    """One episode's record; an episode that raises gets an error record (it stays in the denominator)."""
    if job.sequence:
        return _run_sequence(job)
    config: EvalConfig = _WORKER["config"]
    suite: TaskSuite = _WORKER["suite"]
    task = suite.task(job.task_id)
    try:
        policy = make_policy(config.policy, task, job.seed, config.noise, config.rotation_convention)
        variant = Variant.parse(job.variant)
        verifier = make_verifier(config.verifier) if variant.needs_verifier else None
        record = run_episode(_WORKER["simulator"], policy, task, variant, _WORKER["preset"], layout=job.layout,
                             seed=job.seed, verifier=verifier, planner=_WORKER["planner"])
    except Exception as exc:  # noqa: BLE001 - recorded, never dropped (errors stay in the denominator)
        return error_record(config, suite, job, {"kind": "exception", "type": type(exc).__name__,
                                                 "message": str(exc)}, _WORKER["key_digest"])
    data = record.to_dict()
    data["noise"] = config.noise
    data["run_key"] = _WORKER["key_digest"]
    return data


def error_record(config: EvalConfig, suite: TaskSuite, job: EvalJob, error: dict, run_key_digest: str) -> dict:
    """The record of an episode that produced no result: a failure with every subgoal undone
    (cause ``episode_error``), counted in every rate like any other episode, with ``error`` saying why."""
    task = suite.task(job.task_id)
    preset = config.preset_for(suite)
    variant = Variant.parse(job.variant)
    policy = provider_for(config.policy, config.noise, config.rotation_convention)  # its name and config hash
    record = EpisodeRecord(
        task_id=task.task_id, suite=task.suite, category=task.category.value, horizon=task.horizon,
        variant=variant.value, layout=job.layout, seed=job.seed, success=False, subgoals_done=0, steps_used=0,
        budget_steps=preset.budget_for(task), finish_reason=ERROR_FINISH,
        subgoals=[SubgoalOutcome(i, sg.text, False, EPISODE_ERROR, None).to_dict()
                  for i, sg in enumerate(task.subgoals)],
        violations=[], events=[], verification_queries=0,
        verifier=config.verifier if variant.needs_verifier else None, policy=policy.name,
        policy_config_hash=policy.config_hash, simulator=config.simulator, final_goal={}, orchestration={},
        success_rule=task.success_rule,
        preset=preset.name, preset_options=preset.options,
        plan={"source": config.plan_source if uses_plan(variant) else REFERENCE},
        action_convention=config.action_convention(), extra={"error": error})
    data = record.to_dict()
    data["noise"] = config.noise
    data["run_key"] = run_key_digest
    return data


def work_spec(config: EvalConfig, run_key_digest: str) -> WorkSpec:
    """What every worker runs for ``config``; a worker that served another configuration, or this one
    with another suite file or versions (another run key), sets up again."""
    key = hashlib.sha256(f"{config!r} {run_key_digest}".encode()).hexdigest()[:16]
    return WorkSpec(setup=_init_worker, run=_run_job, config=config, key=key)


def same_run_key(key: dict):
    """The driver's check of a worker's setup report: it computed the same run ``key`` there."""
    def check(report: dict) -> str | None:
        theirs = report.get("run_key")
        if theirs == key:
            return None
        diffs = key_differences(theirs, key) if isinstance(theirs, dict) else ["no run key"]
        return (f"computes another run key there ({'; '.join(diffs)}; 'there' is the worker, 'now' this driver); "
                "install the same code and packages on every machine")
    return check


# ---------------------------------------------------------------- driver side
def read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            # a line cut short by an interrupted run: it is rerun, the rest is kept
            print(f"sim-eval: ignoring unreadable line {n} of {path}", file=sys.stderr)
    return records


def _open_for_append(path: Path):
    """``path`` opened for appending whole lines: a last line cut short by a killed run is ended first,
    so the next record starts on a line of its own."""
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            f.seek(-1, 2)
            cut = f.read(1) != b"\n"
        if cut:
            with path.open("a", encoding="utf-8") as f:
                f.write("\n")
    return path.open("a", encoding="utf-8")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def run_jobs(config: EvalConfig, jobs: list[EvalJob], out_file: Path, progress: bool = True,
             settings: ExecutorSettings | None = None, executor: EpisodeExecutor | None = None) -> dict:
    """Run ``jobs`` on the executor ``settings`` ask for (default: ``config.jobs`` local processes) and
    append each record to ``out_file`` as it finishes, in whatever order. An episode whose worker died is
    rerun up to ``settings.max_retries`` times, then recorded as an error; every record says where it
    ran and after how many attempts (``execution``). Returns where the episodes ran."""
    from tqdm import tqdm

    settings = settings or ExecutorSettings(jobs=config.jobs)
    executor = executor or make_executor(settings)
    suite = load_suite(config.suite_path)
    key = config.key(suite)
    digest = key_digest(key)
    bar = tqdm(total=sum(max(j.sequence, 1) for j in jobs), desc="sim-eval", unit="ep", disable=not progress,
               file=sys.stderr, mininterval=1.0)
    with _open_for_append(out_file) as sink, executor:
        def write(record: dict) -> None:
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            bar.set_postfix_str(f"{record['variant']} {record['task_id']}", refresh=False)
            if episode_kind(record) == TASK_EPISODE:
                bar.update(1)

        def finished(outcome: Finished, lost: list[str]) -> None:
            execution = {"executor": executor.name, **outcome.worker, "attempts": len(lost) + 1,
                         "lost": lost, "finished_at": _now()}
            if lost:
                tqdm.write(f"sim-eval: {outcome.job.task_id} {outcome.job.variant} seed {outcome.job.seed} "
                           f"finished on attempt {len(lost) + 1}", file=sys.stderr)
            if "sequence" not in outcome.payload:
                write({**outcome.payload, "execution": execution})
                return
            records = outcome.payload["sequence"]
            for n, record in enumerate(records, start=1):
                # the last record of a sequence says whether it stopped early, and why
                write({**record, "execution": execution,
                       **({"sequence_stopped": outcome.payload["stopped"]} if n == len(records) else {})})
            if outcome.payload["stopped"]:
                tqdm.write(f"sim-eval: {outcome.job.task_id} {outcome.job.variant}: sequence stopped "
                           f"{outcome.payload['stopped']}", file=sys.stderr)

        def announce_loss(outcome: Lost, attempts: int) -> None:
            job = outcome.job
            again = "rerunning it" if attempts < settings.max_attempts else "giving it up"
            tqdm.write(f"sim-eval: {job.task_id} {job.variant} seed {job.seed}: attempt {attempts} lost "
                       f"({outcome.reason}); {again}", file=sys.stderr)

        def given_up(job: EvalJob, lost: list[str]) -> None:
            tqdm.write(f"sim-eval: {job.task_id} {job.variant} seed {job.seed}: recorded as an error after "
                       f"{len(lost)} lost attempt(s)", file=sys.stderr)
            record = error_record(config, suite, job, {"kind": "worker_lost", "message": lost[-1]}, digest)
            record["execution"] = {"executor": executor.name, "attempts": len(lost), "lost": lost,
                                   "finished_at": _now()}
            write(record)

        where = executor.start(work_spec(config, digest), check=same_run_key(key))
        report = drive(executor, jobs, max_attempts=settings.max_attempts, on_finished=finished,
                       on_given_up=given_up, on_lost=announce_loss)
    bar.close()
    return {**where, "retries": report.retries, "given_up": report.given_up}


def paired_differences(records: list[dict], suite: TaskSuite) -> list[dict]:
    present = {r["variant"] for r in records}
    suite_of = {t.task_id: t.suite for t in suite.tasks}
    pairs = []
    for a, b in PAIRED_COMPARISONS:
        if a in present and b in present:
            ca, cb = per_task_counts(records, a), per_task_counts(records, b)
            diff, lo, hi = paired_task_bootstrap(ca, cb, suite_of=suite_of)
            pairs.append({"a": a, "b": b, "diff": diff, "lo": lo, "hi": hi, "tasks": len(set(ca) & set(cb))})
    return pairs


def success_rule_note(suite: TaskSuite, records: list[dict]) -> str:
    """Which rule scored which tasks of these records."""
    by_rule: dict[str, list[str]] = {}
    for task_id in sorted({r["task_id"] for r in records}):
        by_rule.setdefault(suite.task(task_id).success_rule, []).append(task_id)
    parts = []
    if LADDER_RULE in by_rule:
        parts.append(f"LADDER rule (every subgoal's object released and resting, constraints kept) on "
                     f"{len(by_rule.pop(LADDER_RULE))} tasks")
    for rule, tasks in sorted(by_rule.items()):
        parts.append(f"SimplerEnv's own env.evaluate()['success'] at the end on {', '.join(tasks)}")
    return "success: " + "; ".join(parts)


def reset_summary(records: list[dict], resets: list[dict]) -> dict:
    """What the automatic resets of a run did: resets run and confirmed, task episodes by where they started,
    and every sequence that stopped early with its reason."""
    by_start: dict[str, dict] = {}
    for r in records:
        block = by_start.setdefault(r.get("start", "layout"), {"episodes": 0, "successes": 0})
        block["episodes"] += 1
        block["successes"] += int(bool(r["success"]))
    confirmed = sum(1 for r in resets if (r.get("reset") or {}).get("confirmed"))
    stopped = [{"task_id": (r.get("reset") or {}).get("reset_of") or r["task_id"], "variant": r["variant"],
                "reason": r["sequence_stopped"]} for r in records + resets if r.get("sequence_stopped")]
    return {"resets": len(resets), "confirmed": confirmed,
            "reset_steps_mean": sum(r["steps_used"] for r in resets) / len(resets) if resets else 0.0,
            "task_episodes_by_start": by_start, "sequences_stopped": stopped}


def format_reset_summary(block: dict) -> str:
    lines = [f"automatic resets: {block['confirmed']} of {block['resets']} confirmed by the verifier "
             f"({block['reset_steps_mean']:.0f} steps each on average)"]
    for start, b in sorted(block["task_episodes_by_start"].items()):
        lines.append(f"  task episodes started from {start}: {b['successes']}/{b['episodes']} successful")
    for s in block["sequences_stopped"]:
        lines.append(f"  sequence {s['task_id']} {s['variant']} stopped {s['reason']}")
    return "\n".join(lines)


def write_outputs(config: EvalConfig, suite: TaskSuite, records: list[dict], out: Path,
                  execution: dict | None = None, resets: list[dict] | None = None) -> dict:
    summary = summarize_episodes(records)
    labels = {}
    plans = planner_label(config.plan_source, config.planner_config)
    for variant in summary:
        parsed = Variant.parse(variant)
        if parsed.needs_verifier:
            labels[variant] = "*"
            summary[variant]["verifier"] = verifier_label(config.verifier)
        summary[variant]["plan_source"] = config.plan_source if uses_plan(parsed) else (
            "none" if parsed is Variant.LOW_LEVEL_POLICY else REFERENCE)
    ends = summary_tables.attempt_ends_by_reason(records)
    for variant, per_reason in ends.items():
        summary[variant]["attempt_ends"] = per_reason
    pairs = paired_differences(records, suite)
    rules = success_rule_note(suite, records)
    preset = config.preset_for(suite)
    document = {
        "schema_version": 2,
        "ladder_ros_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "suite": suite.name, "suite_path": config.suite_path, "simulator": config.simulator,
        "policy": config.policy, "noise": config.noise, "action_convention": config.action_convention(),
        "verifier": verifier_label(config.verifier), "plan_source": config.plan_source, "plans": plans,
        "planner": config.planner_config, "success_rules": rules, "preset": preset.name,
        "preset_options": preset.options, "run_key": key_digest(config.key(suite)),
        "episodes_per_task": config.episodes, "base_seed": config.base_seed,
        "variants": summary, "paired": pairs, "policy_steps": summarize_policy(records),
        "errors": sum(1 for r in records if r.get("error")),
        "execution": execution,  # where this invocation ran its episodes (None: it ran none)
    }
    if config.auto_reset:
        document["auto_reset"] = reset_summary(records, resets or [])
    (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    table = summary_tables.format_table(summary, labels)
    if labels:
        table += f"\n* counts from the {verifier_label(config.verifier)}"
    options = ", ".join(f"{k} {v}" for k, v in preset.options.items())
    table += (f"\nplans: {plans} (the privileged verifier always takes the reference; the low-level policy "
              f"follows none)\n{rules}\npreset: {preset.name} ({options})")
    policy_note = format_policy_note(config.policy, document["policy_steps"])
    if policy_note:
        table += "\n" + policy_note
    if document["errors"]:
        table += (f"\nerrors: {document['errors']} episode(s) produced no result (the 'error' of their records); "
                  "each counts as a failure")
    causes = summary_tables.format_failure_causes(summary)
    text = "\n\n".join(x for x in (table, "failure causes of unfinished subgoals:\n" + causes,
                                   summary_tables.format_attempt_ends(ends) if ends else "",
                                   summary_tables.format_paired(pairs) if pairs else "",
                                   format_reset_summary(document["auto_reset"]) if config.auto_reset else "") if x)
    (out / "table.txt").write_text(text + "\n", encoding="utf-8")
    summary_tables.plot_success_vs_horizon(summary, out / "success_vs_horizon.png",
                                           title=f"suite {suite.name} on {config.simulator}, {config.policy} "
                                                 f"(noise {config.noise}), preset {preset.name} ({options})\n"
                                                 f"plans: {plans}; verifier: {verifier_label(config.verifier)}\n"
                                                 f"{rules}; bands: 95% Wilson intervals")
    return {"summary": summary, "text": text}


def evaluate(config: EvalConfig, out: Path, progress: bool = True, settings: ExecutorSettings | None = None,
             executor: EpisodeExecutor | None = None) -> dict:
    """Run the episodes of ``config`` that ``out`` lacks (on ``settings``' executor) and write the outputs."""
    suite = load_suite(config.suite_path)
    jobs = plan_jobs(suite, config)
    claim_output(out, config.key(suite))  # refuses, in one line, a folder of another configuration
    out_file = out / "episodes.jsonl"
    done = {episode_key(r) for r in read_records(out_file)}
    todo = [j for j in jobs if j.key not in done]
    if len(todo) < len(jobs):
        print(f"sim-eval: {len(jobs) - len(todo)} of {len(jobs)} {'sequences' if config.auto_reset else 'episodes'} "
              f"already in {out_file}; running {len(todo)}", file=sys.stderr)
    execution = None
    if todo:
        execution = run_jobs(config, todo, out_file, progress=progress, settings=settings, executor=executor)
    wanted = {k for j in jobs for k in j.episode_keys()}
    wanted_resets = {k for j in jobs for k in j.reset_keys()}
    everything = read_records(out_file)
    records = [r for r in everything if episode_kind(r) == TASK_EPISODE and episode_key(r) in wanted]
    resets = [r for r in everything if episode_kind(r) == RESET_EPISODE and episode_key(r) in wanted_resets]
    return write_outputs(config, suite, records, out, execution, resets=resets)


def _policy_reads_images(policy: str) -> bool:
    try:
        return load_policy(policy).reads_images
    except ConfigError:
        return False  # a bad policy name is reported, naming it, when the configuration is checked


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sim-eval", help="evaluate orchestrator variants on a simulated task suite",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("--suite", default=None, help="suite YAML (default: the built-in config/suites/tabletop.yaml)")
    p.add_argument("--simulator", default="mujoco_tabletop", help=f"one of: {', '.join(sorted(BACKENDS))}")
    p.add_argument("--variants", default=",".join(v.value for v in Variant),
                   help="comma-separated variants (default: all)")
    p.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    p.add_argument("--max-horizon", type=int, default=None, help="only tasks with at most this many subgoals")
    p.add_argument("--episodes", type=int, default=None,
                   help="episodes per task and variant (default: the suite's layouts per task, Appendix D: 24 on "
                        "the WidowX suite as SimplerEnv-Long, 8 on the Franka suite as RoboLab-Long)")
    p.add_argument("--seed", type=int, default=0, help="base seed; episode k uses seed+k")
    p.add_argument("--policy", default=None,
                   help=f"a policy config under policies/ ({', '.join(sorted(POLICIES))}) or a path to one, or "
                        "NAME=CONFIG to run it under NAME (records carry the name and the config's hash, as a "
                        "graph's named policies do) (default: the scripted expert of the suite's embodiment: "
                        "scripted_expert for the WidowX, scripted_expert_franka for the Franka)")
    p.add_argument("--noise", default=NOISE_DEFAULT,
                   help=f"execution noise of the scripted expert: bridge_like | off (default {NOISE_DEFAULT})")
    p.add_argument("--verifier", default="oracle", help=f"count verifier: {', '.join(sorted(VERIFIERS))}")
    p.add_argument("--plan-source", default=REFERENCE, choices=PLAN_SOURCES,
                   help="reference: the task's ground-truth subgoals (default); planner: a VLM plans each episode "
                        "from its first frame, as the paper's variants do (Section 4; the privileged verifier "
                        "always takes the reference)")
    p.add_argument("--planner", default="gemini", help=f"the planner's VLM backend: {', '.join(PLANNERS)} "
                                                       "(default gemini, the paper's)")
    p.add_argument("--planner-model", default=None, help="the planner's model id (gemini) or path (local)")
    p.add_argument("--planner-replay", default=None, help="recorded replies for the replay planner (JSONL)")
    p.add_argument("--preset-option", action="append", default=[], metavar="NAME=VALUE",
                   help="change a reading of the paper in the suite's preset: "
                        + "; ".join(f"{k}={'|'.join(v)}" for k, v in PRESET_OPTIONS.items()))
    p.add_argument("--rotation-convention", default=None,
                   help="the rotation convention the policy acts in (default: the policy's own): "
                        "euler_xyz | sxyz_axis_angle | axis_angle")
    p.add_argument("--render", action="store_true", help="render camera images (slower; not needed by the oracle)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="local worker processes (default: all cores); with --executor ray and no --ray-address, "
                        "the CPUs of the Ray instance started here")
    p.add_argument("--executor", default="local", choices=EXECUTORS,
                   help="where episodes run: local processes (default) or ray (one Ray task per episode)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="the Ray cluster to run on (HOST:PORT of its head, or 'auto'); default: start a private "
                        "Ray instance on this machine, bound to 127.0.0.1")
    p.add_argument("--cpus-per-episode", type=float, default=1.0, help="CPUs each episode's Ray task asks for")
    p.add_argument("--gpus-per-episode", type=float, default=0.0,
                   help="GPUs each episode's Ray task asks for (a fraction shares one, e.g. 0.25 for a local "
                        "VLM planner; Ray sets CUDA_VISIBLE_DEVICES); default 0")
    p.add_argument("--ray-env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for every Ray worker (runtime_env env_vars), e.g. "
                        "MS_ASSET_DIR=/data/maniskill or LADDER_LVP_DIR=/opt/lvp")
    p.add_argument("--max-retries", type=int, default=DEFAULT_MAX_RETRIES,
                   help=f"reruns of an episode whose worker died before it is recorded as an error "
                        f"(default {DEFAULT_MAX_RETRIES}; an episode that raises is recorded at once)")
    p.add_argument("--auto-reset", action="store_true",
                   help="run each task's episodes in one sequence: the first from layout 0, each followed by an "
                        "automatic reset (same policy, triggers and verifier; records with kind reset) and the next "
                        "started from the scene the reset left; a reset the verifier cannot confirm stops the "
                        "sequence. Needs start regions in the suite's scenes (docs/auto_reset.md)")
    p.add_argument("--out", default="runs/sim-eval", help="output folder (default runs/sim-eval)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    suite_path = args.suite or str(share_path("config", "suites", "tabletop.yaml"))
    render = args.render
    if args.plan_source == PLANNER and not render:
        print("sim-eval: rendering camera images: the planner plans from the first frame", file=sys.stderr)
        render = True
    suite = load_suite(suite_path)
    policy = args.policy or default_policy(suite)
    episodes = args.episodes if args.episodes is not None else max(t.layouts for t in suite.tasks)
    if not render and _policy_reads_images(policy):
        print(f"sim-eval: rendering camera images: policy {policy} reads them", file=sys.stderr)
        render = True
    config = EvalConfig(suite_path=suite_path, simulator=args.simulator, variants=_csv(args.variants),
                        task_ids=_csv(args.tasks), episodes=episodes, base_seed=args.seed, policy=policy,
                        noise=args.noise, verifier=args.verifier, render=render, jobs=args.jobs,
                        max_horizon=args.max_horizon, plan_source=args.plan_source, planner=args.planner,
                        planner_model=args.planner_model, planner_replay=args.planner_replay,
                        preset_options=tuple(parse_preset_options(args.preset_option).items()),
                        rotation_convention=args.rotation_convention, auto_reset=args.auto_reset)
    settings = ExecutorSettings(kind=args.executor, jobs=args.jobs, ray_address=args.ray_address,
                                cpus_per_episode=args.cpus_per_episode, gpus_per_episode=args.gpus_per_episode,
                                env_vars=parse_env_vars(args.ray_env), max_retries=args.max_retries)
    out = Path(args.out)
    result = evaluate(config, out, progress=not args.no_progress, settings=settings)
    print(result["text"])
    print(f"\nwrote {out / 'episodes.jsonl'}, {out / 'summary.json'}, {out / 'table.txt'}, "
          f"{out / 'success_vs_horizon.png'}")
    return 0
