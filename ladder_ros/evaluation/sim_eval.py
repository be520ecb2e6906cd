"""``ladder-ros sim-eval``: orchestrator variants × tasks × episodes on a simulated suite.

Every episode runs the in-process reference loop (:func:`~ladder_ros.evaluation.episode.run_episode`).
Episode ``k`` of a task uses layout ``k mod layouts`` and the same seed for every variant, so the
variants meet the same scenes (paired). Results go to ``OUT/episodes.jsonl`` (one line per
episode, appended as they finish; a rerun with the same OUT skips episodes already there) and
``OUT/summary.json``; a table like the paper's Table 3 is printed and a success-versus-horizon plot
is saved. Where the proprioceptive verifier's counts come from the oracle (simulator state, not a
VLM), every table and summary says so.
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
from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.evaluation import report
from ladder_ros.evaluation.components import (
    NOISE_DEFAULT,
    POLICIES,
    VERIFIERS,
    check_policy,
    make_policy,
    make_verifier,
    verifier_label,
)
from ladder_ros.evaluation.episode import run_episode
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

    def __post_init__(self) -> None:
        for v in self.variants:
            Variant.parse(v)
        if self.simulator not in BACKENDS:
            raise unknown_name("simulator", self.simulator, list(BACKENDS))
        check_policy(self.policy, self.noise)
        if self.verifier not in VERIFIERS:
            raise unknown_name("verifier", self.verifier, list(VERIFIERS))
        if self.episodes < 1:
            raise ConfigError(f"episodes must be >= 1, got {self.episodes}")
        if self.jobs < 1:
            raise ConfigError(f"jobs must be >= 1, got {self.jobs}")
        if self.max_horizon is not None and self.max_horizon < 1:
            raise ConfigError(f"max-horizon must be >= 1, got {self.max_horizon}")


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
    _WORKER.update(config=config, suite=suite, preset=get_preset(suite.embodiment),
                   simulator=make_simulator(config.simulator, suite, render=config.render))


def _run_job(job: EvalJob) -> dict:
    config: EvalConfig = _WORKER["config"]
    suite: TaskSuite = _WORKER["suite"]
    task = suite.task(job.task_id)
    policy = make_policy(config.policy, task, job.seed, config.noise)
    verifier = make_verifier(config.verifier) if Variant.parse(job.variant).needs_verifier else None
    record = run_episode(_WORKER["simulator"], policy, task, job.variant, _WORKER["preset"], layout=job.layout,
                         seed=job.seed, verifier=verifier)
    data = record.to_dict()
    data["noise"] = config.noise
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


def _record_key(r: dict) -> tuple[str, str, int, int]:
    return (r["task_id"], r["variant"], int(r["layout"]), int(r["seed"]))


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


def write_outputs(config: EvalConfig, suite: TaskSuite, records: list[dict], out: Path) -> dict:
    summary = summarize_episodes(records)
    labels = {}
    for variant in summary:
        if Variant.parse(variant).needs_verifier:
            labels[variant] = "*"
            summary[variant]["verifier"] = verifier_label(config.verifier)
    pairs = paired_differences(records, suite)
    document = {
        "schema_version": 1,
        "ladder_ros_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "suite": suite.name, "suite_path": config.suite_path, "simulator": config.simulator,
        "policy": config.policy, "noise": config.noise, "verifier": verifier_label(config.verifier),
        "episodes_per_task": config.episodes, "base_seed": config.base_seed,
        "variants": summary, "paired": pairs,
    }
    (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    table = report.format_table(summary, labels)
    if labels:
        table += f"\n* counts from the {verifier_label(config.verifier)}"
    causes = report.format_failure_causes(summary)
    text = "\n\n".join(x for x in (table, "failure causes of unfinished subgoals:\n" + causes,
                                   report.format_paired(pairs) if pairs else "") if x)
    (out / "table.txt").write_text(text + "\n", encoding="utf-8")
    report.plot_success_vs_horizon(summary, out / "success_vs_horizon.png",
                                   title=f"suite {suite.name} on {config.simulator}, {config.policy} "
                                         f"(noise {config.noise})\nverifier: {verifier_label(config.verifier)}; "
                                         f"bands: 95% Wilson intervals")
    return {"summary": summary, "text": text}


def evaluate(config: EvalConfig, out: Path, progress: bool = True) -> dict:
    suite = load_suite(config.suite_path)
    jobs = plan_jobs(suite, config)
    out.mkdir(parents=True, exist_ok=True)
    out_file = out / "episodes.jsonl"
    wanted = {j.key for j in jobs}
    done = {_record_key(r) for r in read_records(out_file)}
    todo = [j for j in jobs if j.key not in done]
    if done & wanted:
        print(f"sim-eval: {len(done & wanted)} of {len(jobs)} episodes already in {out_file}; running {len(todo)}",
              file=sys.stderr)
    if todo:
        run_jobs(config, todo, out_file, progress=progress)
    records = [r for r in read_records(out_file) if _record_key(r) in wanted]
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
    p.add_argument("--render", action="store_true", help="render camera images (slower; not needed by the oracle)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument("--out", default="runs/sim-eval", help="output folder (default runs/sim-eval)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    suite_path = args.suite or str(share_path("config", "suites", "tabletop.yaml"))
    config = EvalConfig(suite_path=suite_path, simulator=args.simulator, variants=_csv(args.variants),
                        task_ids=_csv(args.tasks), episodes=args.episodes, base_seed=args.seed, policy=args.policy,
                        noise=args.noise, verifier=args.verifier, render=args.render, jobs=args.jobs,
                        max_horizon=args.max_horizon)
    out = Path(args.out)
    result = evaluate(config, out, progress=not args.no_progress)
    print(result["text"])
    print(f"\nwrote {out / 'episodes.jsonl'}, {out / 'summary.json'}, {out / 'table.txt'}, "
          f"{out / 'success_vs_horizon.png'}")
    return 0
