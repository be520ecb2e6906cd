"""``ladder-ros sim-eval``: orchestrator variants × tasks × episodes on a simulated suite.

Every episode runs the in-process reference loop (:func:`~ladder_ros.evaluation.episode.run_episode`).
Episode ``k`` of a task uses layout ``k mod layouts`` and the same seed for every variant, so the
variants meet the same scenes (paired). Results go to ``OUT/episodes.jsonl`` (one line per
episode, appended as they finish) and ``OUT/summary.json``; a table like the paper's Table 3 is
printed and a success-versus-horizon plot is saved. A rerun with the same OUT skips the episodes
already there, and only when everything that changes an episode is the same (``OUT/run_key.json``;
otherwise it is refused, naming what differs). Every table, summary and plot says where the plans
came from (the task's reference subgoals, or a VLM planner asked with the first frame, as the
paper's variants do), which success rule scored each task, and whether the proprioceptive
verifier's counts came from the oracle (simulator state, not a VLM).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ladder_ros import __version__
from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.metrics import paired_task_bootstrap, per_task_counts, summarize_episodes
from ladder_ros.core.orchestrator import Variant
from ladder_ros.core.presets import PRESET_OPTIONS, EmbodimentPreset, get_preset, parse_preset_options
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.core.task import LADDER_RULE
from ladder_ros.evaluation import report
from ladder_ros.evaluation.components import (
    NOISE_DEFAULT,
    PLANNERS,
    POLICIES,
    VERIFIERS,
    check_policy,
    make_planner,
    make_policy,
    make_verifier,
    planner_label,
    planner_settings,
    policy_action_convention,
    verifier_label,
)
from ladder_ros.evaluation.episode import PLAN_SOURCES, PLANNER, REFERENCE, run_episode, uses_plan
from ladder_ros.evaluation.run_key import claim_output, episode_key, key_digest, run_key
from ladder_ros.paths import share_path
from ladder_ros.sim.registry import BACKENDS, make_simulator

# Differences the paper draws between the learned-policy variants (Appendix F).
PAIRED_COMPARISONS = (("privileged_verifier", "proprio_verifier"), ("proprio_verifier", "proprio_trigger"),
                      ("proprio_verifier", "low_level_policy"), ("proprio_trigger", "periodic_trigger"))


@dataclass(frozen=True)
class EvalJob:
    task_id: str
    variant: str
    layout: int
    seed: int

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.task_id, self.variant, self.layout, self.seed)


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

    def __post_init__(self) -> None:
        for v in self.variants:
            Variant.parse(v)
        if self.simulator not in BACKENDS:
            raise unknown_name("simulator", self.simulator, list(BACKENDS))
        check_policy(self.policy, self.noise, self.rotation_convention)
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
        return run_key(suite_path=self.suite_path, suite_name=suite.name, simulator=self.simulator,
                       simulator_options=self.simulator_options(), policy=self.policy, noise=self.noise,
                       action_convention=self.action_convention(), verifier={"name": self.verifier},
                       plan_source=self.plan_source, planner=self.planner_config, preset=self.preset_for(suite))


def plan_jobs(suite: TaskSuite, config: EvalConfig) -> list[EvalJob]:
    tasks = suite.select(list(config.task_ids) or None, config.max_horizon)
    if not tasks:
        raise ConfigError("no task matches the selection")
    jobs = []
    for task in tasks:
        for k in range(config.episodes):
            for variant in config.variants:
                jobs.append(EvalJob(task.task_id, variant, layout=k % task.layouts, seed=config.base_seed + k))
    return jobs


# ---------------------------------------------------------------- worker side
_WORKER: dict = {}


def _init_worker(config: EvalConfig) -> None:
    suite = load_suite(config.suite_path)
    _WORKER.clear()
    preset = config.preset_for(suite)
    _WORKER.update(config=config, suite=suite, preset=preset, key_digest=key_digest(config.key(suite)),
                   simulator=make_simulator(config.simulator, suite, **config.simulator_options()),
                   planner=make_planner(config.planner_config, preset.name) if config.planner_config else None)


def _run_job(job: EvalJob) -> dict:
    config: EvalConfig = _WORKER["config"]
    suite: TaskSuite = _WORKER["suite"]
    task = suite.task(job.task_id)
    policy = make_policy(config.policy, task, job.seed, config.noise, config.rotation_convention)
    variant = Variant.parse(job.variant)
    verifier = make_verifier(config.verifier) if variant.needs_verifier else None
    record = run_episode(_WORKER["simulator"], policy, task, variant, _WORKER["preset"], layout=job.layout,
                         seed=job.seed, verifier=verifier, planner=_WORKER["planner"])
    data = record.to_dict()
    data["noise"] = config.noise
    data["run_key"] = _WORKER["key_digest"]
    return data


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


def run_jobs(config: EvalConfig, jobs: list[EvalJob], out_file: Path, progress: bool = True) -> None:
    """Run ``jobs`` (in ``config.jobs`` processes) and append each record to ``out_file`` as it finishes."""
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc="sim-eval", unit="ep", disable=not progress, file=sys.stderr, mininterval=1.0)
    with out_file.open("a", encoding="utf-8") as sink:
        def write(record: dict) -> None:
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            bar.set_postfix_str(f"{record['variant']} {record['task_id']}", refresh=False)
            bar.update(1)

        if config.jobs == 1:
            _init_worker(config)
            for job in jobs:
                write(_run_job(job))
        else:
            ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
            with ProcessPoolExecutor(max_workers=config.jobs, mp_context=ctx, initializer=_init_worker,
                                     initargs=(config,)) as pool:
                futures = [pool.submit(_run_job, job) for job in jobs]
                for future in as_completed(futures):
                    write(future.result())
    bar.close()


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


def write_outputs(config: EvalConfig, suite: TaskSuite, records: list[dict], out: Path) -> dict:
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
        "variants": summary, "paired": pairs,
    }
    (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    table = report.format_table(summary, labels)
    if labels:
        table += f"\n* counts from the {verifier_label(config.verifier)}"
    options = ", ".join(f"{k} {v}" for k, v in preset.options.items())
    table += (f"\nplans: {plans} (the privileged verifier always takes the reference; the low-level policy "
              f"follows none)\n{rules}\npreset: {preset.name} ({options})")
    causes = report.format_failure_causes(summary)
    text = "\n\n".join(x for x in (table, "failure causes of unfinished subgoals:\n" + causes,
                                   report.format_paired(pairs) if pairs else "") if x)
    (out / "table.txt").write_text(text + "\n", encoding="utf-8")
    report.plot_success_vs_horizon(summary, out / "success_vs_horizon.png",
                                   title=f"suite {suite.name} on {config.simulator}, {config.policy} "
                                         f"(noise {config.noise}), preset {preset.name} ({options})\n"
                                         f"plans: {plans}; verifier: {verifier_label(config.verifier)}\n"
                                         f"{rules}; bands: 95% Wilson intervals")
    return {"summary": summary, "text": text}


def evaluate(config: EvalConfig, out: Path, progress: bool = True) -> dict:
    suite = load_suite(config.suite_path)
    jobs = plan_jobs(suite, config)
    claim_output(out, config.key(suite))  # refuses, in one line, a folder of another configuration
    out_file = out / "episodes.jsonl"
    wanted = {j.key for j in jobs}
    done = {episode_key(r) for r in read_records(out_file)}
    todo = [j for j in jobs if j.key not in done]
    if done & wanted:
        print(f"sim-eval: {len(done & wanted)} of {len(jobs)} episodes already in {out_file}; running {len(todo)}",
              file=sys.stderr)
    if todo:
        run_jobs(config, todo, out_file, progress=progress)
    records = [r for r in read_records(out_file) if episode_key(r) in wanted]
    return write_outputs(config, suite, records, out)


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
    p.add_argument("--episodes", type=int, default=24,
                   help="episodes per task and variant (default 24, the layouts of SimplerEnv-Long, Appendix D)")
    p.add_argument("--seed", type=int, default=0, help="base seed; episode k uses seed+k")
    p.add_argument("--policy", default="scripted_expert",
                   help=f"a policy config under policies/ ({', '.join(sorted(POLICIES))}) or a path to one")
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
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument("--out", default="runs/sim-eval", help="output folder (default runs/sim-eval)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    suite_path = args.suite or str(share_path("config", "suites", "tabletop.yaml"))
    render = args.render
    if args.plan_source == PLANNER and not render:
        print("sim-eval: rendering camera images: the planner plans from the first frame", file=sys.stderr)
        render = True
    config = EvalConfig(suite_path=suite_path, simulator=args.simulator, variants=_csv(args.variants),
                        task_ids=_csv(args.tasks), episodes=args.episodes, base_seed=args.seed, policy=args.policy,
                        noise=args.noise, verifier=args.verifier, render=render, jobs=args.jobs,
                        max_horizon=args.max_horizon, plan_source=args.plan_source, planner=args.planner,
                        planner_model=args.planner_model, planner_replay=args.planner_replay,
                        preset_options=tuple(parse_preset_options(args.preset_option).items()),
                        rotation_convention=args.rotation_convention)
    out = Path(args.out)
    result = evaluate(config, out, progress=not args.no_progress)
    print(result["text"])
    print(f"\nwrote {out / 'episodes.jsonl'}, {out / 'summary.json'}, {out / 'table.txt'}, "
          f"{out / 'success_vs_horizon.png'}")
    return 0
