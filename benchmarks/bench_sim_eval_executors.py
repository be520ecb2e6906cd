#!/usr/bin/env python
"""Episodes per minute of ``sim-eval`` in local processes and on Ray, side by side, and what the
measured per-episode times mean for a paper-size sweep.

    python benchmarks/bench_sim_eval_executors.py [--episodes N] [--bridge-episodes N] [--skip-bridge]

1. **Executors** (MuJoCo tabletop, no rendering): the same sweep with local processes and with a
   private Ray instance on this machine (``--executor ray`` without an address), each with 1 and 2
   workers. Printed per run: wall time, the time to the first finished episode (start-up: worker
   processes, Ray's own processes, each worker's simulator), and episodes per minute over the whole
   run and after the first episode (the steady state, where Ray's per-task cost shows).
2. **Per-episode times** for the estimate: episodes of the SimplerEnv (ManiSkill3) Bridge suite with
   the camera rendered, as a policy that reads images needs, run in this process; printed per
   episode: steps, wall time, time per step.
3. **Estimate** of a 2,024-episode sweep (LADDER Appendix D: 2,024 simulated episodes per system)
   on N workers, from the measured time per step and an assumed number of steps per episode (see
   ``--steps-per-episode``), plus each worker's one-off start-up.

Numbers depend on the machine and on what else runs on it: they are printed, never asserted. Ray
runs only in a network namespace that has nothing but loopback (it probes an outside address to
find its own): as root the script re-runs itself under ``unshare -n``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAPER_EPISODES = 2024  # LADDER Appendix D: simulated episodes per system
# The WidowX suites' budget is 100 steps per subgoal (Appendix D); horizons run from 1 to 10 and 36 %
# of the tasks have 6 or more subgoals (Section 3), and an episode that does not finish keeps trying
# until its budget ends. 500 steps (the budget of a 5-subgoal task) is the default assumption.
DEFAULT_STEPS_PER_EPISODE = 500
TABLETOP_TASKS = "kitchen_single_1,sorting_split_2,kitchen_single_2,sorting_split_3"
BRIDGE_TASKS = "kitchen_single_1,kitchen_split_2"


def loopback_only() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def reexec_in_loopback_namespace() -> None:
    if loopback_only():
        return
    if os.geteuid() == 0 and shutil.which("unshare"):
        os.execvp("unshare", ["unshare", "-n", "bash", "-c", 'ip link set lo up && exec "$@"', "bash",
                              sys.executable, *sys.argv])
    sys.exit("bench_sim_eval_executors: Ray must run in a loopback-only network namespace "
             "(run as root, or inside `unshare -n`)")


def run_sweep(args_list: list[str], out: Path) -> dict:
    from ladder_ros.cli import main
    from ladder_ros.evaluation.sim_eval import read_records

    started = time.time()
    code = main(["sim-eval", *args_list, "--no-progress", "--out", str(out)])
    wall = time.time() - started
    if code != 0:
        raise SystemExit(f"sim-eval failed ({code}) with {args_list}")
    records = read_records(out / "episodes.jsonl")
    finished = sorted(datetime.fromisoformat(r["execution"]["finished_at"]).timestamp() for r in records)
    first = finished[0] - started
    steady = (len(finished) - 1) / (finished[-1] - finished[0]) * 60 if len(finished) > 1 else float("nan")
    return {"episodes": len(records), "wall_s": wall, "first_s": first, "per_min": len(records) / wall * 60,
            "steady_per_min": steady, "episode_wall_s": statistics.fmean(r["wall_s"] for r in records)}


def bench_executors(episodes: int, work: Path) -> None:
    import contextlib
    import io

    sweep = ["--tasks", TABLETOP_TASKS, "--episodes", str(episodes), "--variants",
             "proprio_verifier,privileged_verifier"]
    runs = [("local processes", 1, ["--jobs", "1"]), ("local processes", 2, ["--jobs", "2"]),
            ("Ray (private instance)", 1, ["--executor", "ray", "--jobs", "1"]),
            ("Ray (private instance)", 2, ["--executor", "ray", "--jobs", "2"])]
    n = 8 * episodes
    print(f"\n1. executors: MuJoCo tabletop, {n} episodes ({TABLETOP_TASKS}; proprio and privileged "
          f"verifier), no rendering")
    print(f"{'executor':<24} {'workers':>7} {'wall s':>8} {'first ep s':>10} {'ep/min':>8} "
          f"{'steady ep/min':>14} {'mean ep s':>10}")
    for name, workers, extra in runs:
        out = work / f"exec_{len(list(work.iterdir()))}"
        with contextlib.redirect_stdout(io.StringIO()):
            r = run_sweep(sweep + extra, out)
        print(f"{name:<24} {workers:>7} {r['wall_s']:8.1f} {r['first_s']:10.1f} {r['per_min']:8.1f} "
              f"{r['steady_per_min']:14.1f} {r['episode_wall_s']:10.2f}")
    print("(jobs 1 runs in this process: its start-up is the simulator only)")


def bench_bridge(episodes: int, work: Path) -> dict | None:
    import contextlib
    import io

    from ladder_ros.evaluation.sim_eval import read_records
    from ladder_ros.sim.maniskill_env import missing_prerequisites

    reason = missing_prerequisites()
    if reason is not None:
        print(f"\n2. per-episode times on the Bridge scene: skipped ({reason})")
        return None
    out = work / "bridge"
    sweep = ["--simulator", "maniskill_bridge", "--suite", str(REPO / "config" / "suites" / "bridge.yaml"),
             "--tasks", BRIDGE_TASKS, "--episodes", str(episodes), "--variants", "proprio_verifier",
             "--render", "--jobs", "1"]
    started = time.time()
    with contextlib.redirect_stdout(io.StringIO()):
        run_sweep(sweep, out)
    wall = time.time() - started
    records = read_records(out / "episodes.jsonl")
    print(f"\n2. per-episode times: SimplerEnv Bridge scene (ManiSkill3, CPU, lavapipe), camera rendered "
          f"640x480, proprio_verifier, in one process ({wall:.0f} s in all)")
    print(f"{'task':<20} {'seed':>4} {'steps':>6} {'wall s':>8} {'ms/step':>8}")
    for r in records:
        print(f"{r['task_id']:<20} {r['seed']:>4} {r['steps_used']:>6} {r['wall_s']:8.2f} "
              f"{1000 * r['wall_s'] / max(1, r['steps_used']):8.1f}")
    later = records[1:] or records  # the first episode also imports ManiSkill and makes the env
    per_step = sum(r["wall_s"] for r in later) / sum(max(1, r["steps_used"]) for r in later)
    startup = records[0]["wall_s"] - per_step * records[0]["steps_used"]
    return {"per_step_s": per_step, "startup_s": startup}


def estimate(per_step_s: float, startup_s: float, steps: int, source: str) -> None:
    per_episode = per_step_s * steps
    print(f"\n3. estimate of a {PAPER_EPISODES}-episode sweep: {1000 * per_step_s:.0f} ms per step ({source}) x "
          f"{steps} steps per episode = {per_episode:.0f} s per episode, plus {startup_s:.0f} s start-up per "
          "worker; simulator and orchestrator only (a learned policy adds its inference per step, a VLM "
          "verifier its calls)")
    print(f"{'workers':>8} {'wall time':>12}")
    for n in (1, 2, 8, 16, 32, 64, 128, 256):
        seconds = startup_s + PAPER_EPISODES * per_episode / n
        print(f"{n:>8} {seconds / 3600:10.1f} h")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2, help="tabletop episodes per task and variant (default 2)")
    parser.add_argument("--bridge-episodes", type=int, default=2, help="Bridge episodes per task (default 2)")
    parser.add_argument("--skip-bridge", action="store_true", help="skip the Bridge per-episode times")
    parser.add_argument("--steps-per-episode", type=int, default=DEFAULT_STEPS_PER_EPISODE,
                        help="steps of an average paper episode for the estimate "
                             f"(default {DEFAULT_STEPS_PER_EPISODE})")
    args = parser.parse_args()
    reexec_in_loopback_namespace()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    work = Path(tempfile.mkdtemp(prefix="bench_sim_eval_"))
    try:
        bench_executors(args.episodes, work)
        bridge = None if args.skip_bridge else bench_bridge(args.bridge_episodes, work)
        if bridge is not None:
            estimate(bridge["per_step_s"], bridge["startup_s"], args.steps_per_episode,
                     "Bridge scene, camera rendered, measured above")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
