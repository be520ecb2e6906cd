"""Wall time per episode: the ROS graph (nodes as processes, lockstep) versus the in-process loop.

Runs the same episodes (tasks x seeds, one variant) through the reference loop and through the
graph brought up as processes, in one run on one machine, checks they are identical, and prints
per-step times, the ratio, and where the graph's time goes: the sim bridge's own accounting
(simulating, converting and publishing; from publishing an observation until the orchestrator's
decision arrives: gripper trigger + orchestrator + verifier + transport; until the policy's
action arrives: + policy) reported in each episode record.

    python benchmarks/bench_graph_vs_loop.py [--tasks a,b] [--seeds 0,1] [--variant proprio_verifier]
        [--set NODE.PARAM=VALUE ...] [--without episode_recorder] [--launch sim_orchestrator.launch.py]

Prints numbers; asserts nothing about speed (speed is measured here, never in tests). Loopback only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

apply_network_safe_environment(os.environ)

from ladder_ros.bringup.graph import load_graph, parse_overrides  # noqa: E402
from ladder_ros.bringup.launch_description import session_launch_arguments  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.evaluation.parity import ParityEpisode, ReferenceRunner, compare_records  # noqa: E402
from ladder_ros.paths import resolve_share_file  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="widowx")
    parser.add_argument("--tasks", default="kitchen_single_2,sorting_split_3,relay_4")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--variant", default="proprio_verifier")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--without", default="",
                        help="comma-separated nodes to leave out (e.g. episode_recorder, to see what recording costs)")
    parser.add_argument("--launch", metavar="FILE", default=None,
                        help="bring the graph up with `ros2 launch ladder_ros FILE` instead of one process per node")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="ladder_bench_"))
    graph = load_graph(args.graph)
    overrides = parse_overrides(args.overrides)
    overrides.setdefault("episode_recorder", {}).setdefault("output_dir", str(out / "recordings"))
    params = graph.node_parameters("sim", overrides=overrides)
    left_out = {n for n in args.without.split(",") if n}
    launches = [launch for launch in graph.launches("sim", overrides=overrides, work_dir=out)
                if launch.name not in left_out]
    suite = load_suite(resolve_share_file(params["orchestrator"]["suite"]))
    episodes = [ParityEpisode(t, args.variant, int(s) % suite.task(t).layouts, int(s))
                for t in args.tasks.split(",") for s in args.seeds.split(",")]
    if args.launch and left_out:
        parser.error("--without needs the graph as processes (a launch file starts all its nodes)")
    launched = {"launch_file": args.launch,
                "launch_arguments": session_launch_arguments(graph, None, overrides, None, out)} if args.launch else {}
    print(f"{len(episodes)} episodes ({args.variant}), render={params['sim_bridge']['render']}, "
          f"image {params['sim_bridge']['image_size']} px, {os.cpu_count()} CPUs; graph as "
          f"{len(launches)} processes" + (f" started by ros2 launch ladder_ros {args.launch}" if args.launch else ""))
    runner = ReferenceRunner(params, suite)
    rows = []
    try:
        with GraphSession(graph, launches, out / "logs", **launched) as session:
            # warm-up: first episodes pay imports, model compilation and discovery on both sides
            runner.run(episodes[0])
            session.run_episode(episodes[0].task_id, variant=args.variant, layout=episodes[0].layout,
                                seed=episodes[0].seed)
            for episode in episodes:
                started = time.perf_counter()
                reference = runner.run(episode)
                reference_s = time.perf_counter() - started
                outcome = session.run_episode(episode.task_id, variant=args.variant, layout=episode.layout,
                                              seed=episode.seed)
                timing = outcome.result.get("bridge", {}).get("bridge_timing_s", {})
                rows.append({"episode": episode, "steps": reference["steps_used"], "reference_s": reference_s,
                             "graph_s": outcome.wall_s, "identical": compare_records(reference, outcome.result) is None,
                             **timing})
    finally:
        runner.close()
    print(f"{'episode':44s} {'steps':>5s} {'loop ms/step':>12s} {'graph ms/step':>13s} {'ratio':>6s} same")
    for r in rows:
        n = max(r["steps"], 1)
        print(f"{r['episode'].label:44s} {r['steps']:5d} {1000 * r['reference_s'] / n:12.1f} "
              f"{1000 * r['graph_s'] / n:13.1f} {r['graph_s'] / r['reference_s']:6.2f} {r['identical']}")
    steps = sum(r["steps"] for r in rows)
    loop_s = sum(r["reference_s"] for r in rows)
    graph_s = sum(r["graph_s"] for r in rows)
    print(f"total: {steps} steps; loop {loop_s:.1f} s, graph {graph_s:.1f} s; ratio {graph_s / loop_s:.2f} "
          f"(median per episode {statistics.median(r['graph_s'] / r['reference_s'] for r in rows):.2f})")
    if all("sim_s" in r for r in rows):
        keys = ("sim_s", "publish_s", "until_decision_s", "until_action_s")
        per = {k: 1000 * sum(r[k] for r in rows) / steps for k in keys}
        other = 1000 * graph_s / steps - per["sim_s"] - per["until_action_s"]
        print(f"graph, per step: simulate {per['sim_s']:.1f} ms; then from publishing the observation "
              f"(convert+publish {per['publish_s']:.1f} ms) to the orchestrator's decision "
              f"{per['until_decision_s']:.1f} ms (gripper trigger, orchestrator, verifier: two hops) and to the "
              f"policy's action {per['until_action_s']:.1f} ms (one more hop); other {other:.1f} ms (episode "
              f"start and end, the client)")
        print(f"loop, per step: {1000 * loop_s / steps:.1f} ms (simulate + policy + orchestrator in one process)")
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
