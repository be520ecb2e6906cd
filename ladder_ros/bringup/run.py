"""``ladder-ros run GRAPH``: bring a graph up in simulation, run a few episodes, print the results.

The README's main command. The nodes run as processes (as ``ladder-ros up`` starts them), the
episodes are started through ``episode/command`` like the operator panel does (``--policy`` names the policy of
each, among those the policy node serves: ``--set policy.policies=[a=CONFIG,b=CONFIG]``), and each episode's
recording (rosbag2 MCAP) lands in ``OUT/recordings/<episode id>/``; ``OUT/episodes.jsonl`` holds the
episode records and ``OUT/logs/`` each node's output.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ladder_ros.bringup.graph import check_referenced_files, load_graph, parse_overrides
from ladder_ros.bringup.session import add_launch_argument
from ladder_ros.bringup.up import add_graph_arguments
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.metrics import summarize_episodes
from ladder_ros.core.orchestrator import Variant

# Tasks of two subgoals in three scenes, per shipped suite; another suite's first three tasks.
DEFAULT_TASKS = {"tabletop": "kitchen_single_2,sorting_split_2,relay_2",
                 "robolab_tabletop": "counter_single_2,sorting_split_2,counter_relay_2"}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run episodes on a graph in simulation and print the results",
                              description=__doc__.split("\n\n")[0])
    add_graph_arguments(p)
    p.add_argument("--episodes", type=int, default=3, help="number of episodes (tasks are taken in turn)")
    p.add_argument("--tasks", default="", help="comma-separated task ids of the graph's suite (default: "
                   + "; ".join(f"{suite}: {tasks}" for suite, tasks in DEFAULT_TASKS.items())
                   + "; another suite: its first three tasks)")
    p.add_argument("--variant", default="", help="orchestrator variant (default: the orchestrator's parameter)")
    p.add_argument("--policy", default="", help="comma-separated names of the policy node's policies (its policies "
                   "parameter, NAME=CONFIG); episodes take them in turn (default: the node's default_policy)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode; episode k uses seed + k")
    p.add_argument("--out", default="runs/graph", help="folder for recordings, records and node logs")
    p.add_argument("--episode-timeout", type=float, default=900.0, help="seconds one episode may take")
    add_launch_argument(p)
    p.set_defaults(func=run)


def check_out_folder(path: Path) -> None:
    """``--out`` must be a folder this user can write to (or one that can be created); one line if not.

    Nothing is created here: the folder is made only once every argument has been checked.
    """
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file, not a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"--out {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {path}: {existing} is not writable")


def run(args: argparse.Namespace) -> int:
    from ladder_ros.bringup.session import GraphSession, launch_options
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import resolve_share_file

    if args.mode != "sim":
        raise ConfigError("ladder-ros run drives a simulated graph (--mode sim); on a robot use ladder-ros up "
                          "or ros2 launch and start episodes from the operator panel")
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    if not args.episode_timeout > 0:
        raise ConfigError(f"--episode-timeout must be > 0 seconds, got {args.episode_timeout}")
    if args.seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {args.seed}")
    if args.variant:
        Variant.parse(args.variant)
    policies = [name.strip() for name in args.policy.split(",") if name.strip()] or [""]
    out = Path(args.out)
    check_out_folder(out)
    graph = load_graph(args.graph)
    params_file = Path(args.params_file) if args.params_file else None
    if params_file is not None and not params_file.is_file():
        raise ConfigError("params file not found", source=str(params_file))
    overrides = parse_overrides(args.overrides)
    recorder = overrides.setdefault("episode_recorder", {})
    recorder.setdefault("output_dir", str((out / "recordings").resolve()))
    recorder.setdefault("config_files", graph.config_files(params_file, "sim"))
    params = graph.node_parameters("sim", params_file, overrides, args.namespace)
    check_referenced_files(params)
    suite = load_suite(resolve_share_file(params["orchestrator"]["suite"]))
    names = args.tasks or DEFAULT_TASKS.get(suite.name) or ",".join(t.task_id for t in suite.tasks[:3])
    tasks = [suite.task(t.strip()) for t in names.split(",") if t.strip()]
    if not tasks:
        raise ConfigError("--tasks names no task")
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create it: {exc.strerror}") from None
    launches = graph.launches("sim", params_file, overrides, args.namespace, work_dir=out / "logs")
    print(f"ladder-ros run: graph {graph.name} in simulation ({params['sim_bridge']['simulator']}), "
          f"{args.episodes} episodes, loopback only; node logs in {out / 'logs'}", flush=True)
    backend = params["vlm_verifier"]["backend"]
    served = ", ".join(params["policy"].get("policies") or []) or params["policy"]["policy"]
    print(f"policy: {served} (noise {params['policy'].get('noise', '-')})"
          + (f", episodes under {', '.join(policies)} in turn" if policies != [""] else "")
          + f"; verifier backend: {backend}" + (" (counts from simulator state, not a VLM)" if backend == "oracle"
                                                else ""), flush=True)
    records: list[dict] = []
    session = GraphSession(graph, launches, out / "logs",
                           **launch_options(args, graph, params_file, overrides, out / "logs"))
    with session, open(out / "episodes.jsonl", "a") as jsonl:
        print(f"graph up: {len(launches)} nodes listening", flush=True)
        try:
            for k in range(args.episodes):
                task = tasks[k % len(tasks)]
                seed = args.seed + k
                # The session's client, as GraphSession.run_episode drives it, with the policy named.
                outcome = session.client.run_episode(
                    session.executor, task.task_id, variant=args.variant, layout=seed % task.layouts, seed=seed,
                    timeout_s=args.episode_timeout, check=session.processes.check_alive,
                    policy=policies[k % len(policies)])
                _keep(outcome, records, jsonl)
        except KeyboardInterrupt:
            # Ctrl-C: the orchestrator is stopped first and ends the running episode as interrupted;
            # its record is kept like any other, then the rest of the graph stops.
            outcome = session.stop()
            if outcome is not None and outcome.episode_id not in {r.get("episode_id") for r in records}:
                _keep(outcome, records, jsonl)
            print(f"records: {out / 'episodes.jsonl'}", flush=True)
            raise
    for variant, s in summarize_episodes(records).items():
        print(f"{variant}: task success {s['task_success_rate']:.0%} (95% CI {s['ci95'][0]:.0%}-{s['ci95'][1]:.0%}), "
              f"subgoal progress {s['subgoal_progress']:.0%} over {s['episodes']} episodes")
    print(f"recordings: {Path(params['episode_recorder']['output_dir'])}/<episode id>/ "
          f"(rosbag2 MCAP; inspect with 'ladder-ros recording info DIR', Foxglove or ros2 bag)")
    print(f"records: {out / 'episodes.jsonl'}")
    return 0


def _keep(outcome, records: list[dict], jsonl) -> None:
    """One episode's record: into the list, a line of episodes.jsonl, and a line on the terminal."""
    record = outcome.result
    records.append(record)
    jsonl.write(json.dumps(record) + "\n")
    jsonl.flush()
    print(f"  {outcome.episode_id}: {record['task_id']} ({record['variant']}, {record.get('policy') or 'policy'}): "
          f"{'success' if record['success'] else 'failure'}, {record['subgoals_done']}/{record['horizon']} "
          f"subgoals, {record['steps_used']}/{record['budget_steps']} steps, "
          f"{record['verification_queries']} queries, {record['finish_reason']}, {outcome.wall_s:.1f} s",
          flush=True)
