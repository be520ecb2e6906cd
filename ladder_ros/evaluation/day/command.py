"""``ladder-ros day PLAN --out DIR --sim|--rehearsal``: an evaluation plan's episodes run unattended, resumable.

The plan's tasks × variants × episodes (the operator panel's plan file) in randomised blocks drawn from
``--seed`` (written to ``DIR/day_plan.json`` first), on one graph brought up once (again after a node dies),
each episode written down in ``DIR/day_records.jsonl`` before and after it runs. Started again on the same
folder after a crash, Ctrl-C or a kill, the day reruns the episode that was under way and finishes the plan.
A time budget and a disk guard stop it cleanly between episodes. At the end: ``DIR/day_summary.json`` and a
table (successes with Wilson intervals per variant, interventions, faults, disk, each node's memory, threads
and files over the day, sampled into ``DIR/resources.jsonl``). With ``--rehearsal --faults RATE`` the lab day's
faults are injected at seeded random times (:mod:`ladder_ros.evaluation.chaos`, seeded by ``--seed``), each one
recorded in ``DIR/chaos.jsonl`` and counted by kind and outcome in the summary. With ``--auto-reset`` every task
episode is followed by the reset of its scene and the next one starts from the scene the reset left; a reset
that fails pauses the day (:mod:`ladder_ros.evaluation.day.resets`, docs/auto_reset.md).
docs/evaluation_day.md.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from ladder_ros.bringup.run import check_out_folder
from ladder_ros.core.errors import ConfigError
from ladder_ros.evaluation.day.disk import DEFAULT_FLOOR_MB, MB, NOT_ENOUGH_DISK, DiskGuard, free_bytes
from ladder_ros.evaluation.day.graph import SIM, TWIN, DayGraph, GraphChoice
from ladder_ros.evaluation.day.order import check_same_day, day_order, day_plan_document, stored_order
from ladder_ros.evaluation.day.progress import TimeBudget, clock
from ladder_ros.evaluation.day.records import RECORDS_FILE, DayRecords
from ladder_ros.evaluation.day.runner import Day, DaySettings
from ladder_ros.panel.evaluation_plan import EvaluationPlan
from ladder_ros.panel.records import write_atomic

DAY_PLAN_FILE = "day_plan.json"
STARTUP_TIMEOUT_S = {SIM: 120.0, TWIN: 240.0}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("day", help="run an evaluation plan unattended, in randomised blocks, resumable",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("plan", help="evaluation plan YAML (the operator panel's: tasks x variants x episodes)")
    p.add_argument("--out", required=True, help="the day's folder; start the day again on it to resume")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--sim", action="store_true", help="on the simulator graph (lockstep, the sim bridge)")
    where.add_argument("--rehearsal", action="store_true",
                       help="on the dress rehearsal: the robot graph on the wall clock against the WidowX twin")
    p.add_argument("--budget-min", type=float, default=None,
                   help="stop between episodes once the next would end past this many minutes (from this start)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the order (default 0; a resumed day keeps the seed it was started with)")
    p.add_argument("--graph", default="widowx", help="graph name or description (default: widowx)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override one node parameter (repeatable)")
    p.add_argument("--params-file", default=None, help="ROS params YAML replacing the graph's own")
    p.add_argument("--namespace", default=None, help="replace the graph's namespace")
    p.add_argument("--episode-timeout", type=float, default=900.0,
                   help="seconds one episode may take before the graph is brought up again and it reruns")
    p.add_argument("--startup-timeout", type=float, default=None,
                   help="seconds the graph may take to come up (default: 120 in simulation, 240 on the twin)")
    p.add_argument("--sample-s", type=float, default=10.0,
                   help="seconds between two samples of each node's memory, threads and open files")
    p.add_argument("--min-free-mb", type=int, default=DEFAULT_FLOOR_MB,
                   help="free space an episode needs at least (MB); it needs twice the largest episode so far when "
                        "that is more")
    p.add_argument("--max-restarts", type=int, default=3,
                   help="graph failures in a row (a node that died, an episode that never ended) before the day stops")
    p.add_argument("--reset-tries", type=int, default=3,
                   help="with --auto-reset: resets of one scene that end unconfirmed before the day pauses for the "
                        "operator (each from the scene the last one left)")
    p.add_argument("--auto-reset", action="store_true",
                   help="after each task episode, the reset of its scene (the same policy, triggers and verifier), "
                        "and the next episode from the scene it left; a reset that fails pauses the day")
    from ladder_ros.evaluation.rehearsal import add_fault_arguments

    add_fault_arguments(p)
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> str:
    """The arguments that need no file; returns the graph mode."""
    if not (args.sim or args.rehearsal):
        raise ConfigError("say where the day runs: --sim (the simulator graph) or --rehearsal (the robot graph "
                          "against the WidowX twin); on the robot itself the operator panel runs the plan")
    if args.budget_min is not None and not args.budget_min > 0:
        raise ConfigError(f"--budget-min must be > 0 minutes, got {args.budget_min:g}")
    if args.seed is not None and args.seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {args.seed}")
    for name in ("episode_timeout", "sample_s"):
        if not getattr(args, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be > 0 seconds, got {getattr(args, name):g}")
    if args.startup_timeout is not None and not args.startup_timeout > 0:
        raise ConfigError(f"--startup-timeout must be > 0 seconds, got {args.startup_timeout:g}")
    if args.min_free_mb < 0:
        raise ConfigError(f"--min-free-mb must be >= 0, got {args.min_free_mb}")
    if args.max_restarts < 0:
        raise ConfigError(f"--max-restarts must be >= 0, got {args.max_restarts}")
    if args.reset_tries < 1:
        raise ConfigError(f"--reset-tries must be >= 1, got {args.reset_tries}")
    if args.faults and not args.rehearsal:
        raise ConfigError("--faults plays the lab day's faults on the rehearsal's instruments: it needs --rehearsal")
    if args.faults:
        from ladder_ros.evaluation.chaos import ChaosSchedule, parse_kinds

        ChaosSchedule(args.faults, 0, parse_kinds(args.fault_kinds))  # a bad rate or kind named before anything
    return SIM if args.sim else TWIN


def _stored_day(out: Path) -> dict | None:
    path = out / DAY_PLAN_FILE
    if not path.is_file():
        if (out / RECORDS_FILE).exists():
            raise ConfigError(f"--out {out} holds day records but no {DAY_PLAN_FILE}: it cannot be resumed; use "
                              "another --out")
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--out {out}: {DAY_PLAN_FILE} cannot be read ({exc}); use another --out") from None
    if not isinstance(stored, dict):
        raise ConfigError(f"--out {out}: {DAY_PLAN_FILE} is not a day plan; use another --out")
    return stored


def run(args: argparse.Namespace) -> int:
    mode = _check(args)
    plan = EvaluationPlan.load(args.plan)
    out = Path(args.out)
    check_out_folder(out)
    choice = GraphChoice.check(mode, args.graph, args.overrides, args.params_file, args.namespace)
    choice.check_plan(plan)
    if args.auto_reset:
        choice.check_resets(plan)
    stored = _stored_day(out)
    seed = args.seed if args.seed is not None else int(stored.get("seed", 0)) if stored else 0
    if stored is not None:
        check_same_day(stored, plan, seed, mode=mode, graph=choice.graph.name, folder=str(out),
                       auto_reset=args.auto_reset)
        order = stored_order(stored, plan)
    else:
        order = day_order(plan, seed)
    guard = DiskGuard(floor_bytes=args.min_free_mb * MB)
    short = guard.shortfall(free_bytes(out))
    if short is not None:
        raise ConfigError(f"--out {out}: its disk is full for a day: {short} (see {NOT_ENOUGH_DISK})")
    budget = TimeBudget(args.budget_min * 60.0 if args.budget_min is not None else None)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if stored is None:
            document = day_plan_document(plan, seed, order, mode=mode, graph=choice.graph.name,
                                         created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), auto_reset=args.auto_reset)
            write_atomic(out / DAY_PLAN_FILE, json.dumps(document, indent=2) + "\n")
        records = DayRecords(out).open()
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write the day there: {exc.strerror}") from None
    where = "the simulator graph" if mode == SIM else "the robot graph against the WidowX twin"
    say(f"ladder-ros day: plan {plan.name} ({len(order)} episodes in {len({d.block for d in order})} blocks, "
        f"order seed {seed}) on {where} ({choice.graph.name}, {mode}); folder {out}"
        + (f"; budget {clock(budget.budget_s)}" if budget.budget_s else "")
        + ("; every scene reset automatically" if args.auto_reset else ""))
    with _stop_on_sigterm():
        try:
            marked = records.begin_run(mode=mode, graph=choice.graph.name, seed=seed, overrides=list(args.overrides))
            done = len(records.state.finished)
            if records.run > 1:
                say(f"resuming (start {records.run} on this folder): {done}/{len(order)} finished"
                    + (f"; {len(marked)} under way when the day stopped, marked interrupted, run again: "
                       + ", ".join(e["key"] for e in marked) if marked else ""))
            chaos = None
            if args.faults:
                from ladder_ros.evaluation.chaos import chaos_plan

                chaos = chaos_plan(args.faults, seed, args.fault_kinds, choice.params, out)
                say(f"chaos: {chaos.schedule.describe()}; each fault in {chaos.log.path}")
            graph = DayGraph(choice, out, args.startup_timeout or STARTUP_TIMEOUT_S[mode], chaos=chaos)
            settings = DaySettings(episode_timeout_s=args.episode_timeout, max_restarts=args.max_restarts,
                                   sample_period_s=args.sample_s, reset_tries=args.reset_tries)
            meta = {"plan": {"name": plan.name, "source": plan.source}, "seed": seed, "mode": mode,
                    "graph": choice.graph.name}
            day = Day(out, order, records, graph, budget=budget, guard=guard, settings=settings, meta=meta, say=say,
                      chaos_file=chaos.log.path if chaos is not None else None, auto_reset=args.auto_reset,
                      scene_of=choice.scene_of)
            return day.run()
        finally:
            records.close()


def say(line: str) -> None:
    print(line, flush=True)


class _stop_on_sigterm:
    """SIGTERM and SIGHUP (a supervisor's stop, a closed terminal) stop the day as Ctrl-C does."""

    def __enter__(self) -> None:
        def interrupt(signum, frame):
            raise KeyboardInterrupt

        self.previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}

    def __exit__(self, *exc: object) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)
