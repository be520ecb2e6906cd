"""Measure the SimplerEnv (ManiSkill3) Bridge backend on this machine and print the numbers.

    .venv/bin/python benchmarks/bench_maniskill_step.py [--episodes N] [--graph-episodes N] [--skip-graph]

* setup: importing ManiSkill, making each scene's env (once per process), a reset (which rebuilds
  the physics scene by default) and a reset without rebuilding;
* per control step, over scripted pick-and-place episodes (real contacts, a grasp, a release):
  the backend's whole ``step`` with the 640x480 camera and without it, and inside it ManiSkill's
  own step and the backend's observation assembly (poses, contacts, predicates);
* the ROS graph's overhead on this backend: ``ladder-ros parity`` runs the same episodes through
  the in-process reference loop and through the graph (nodes as processes, lockstep); the ratio of
  their wall times per step is printed, with and without the camera image travelling over ROS.
  The first episode of each side also makes the env, so the ratio is taken over the later ones.

Numbers depend on the machine and on what else runs on it: they are printed, never asserted.
Needs scripts/install_maniskill.sh and the Bridge assets (``$MS_ASSET_DIR`` or
``../shared/assets/maniskill_bridge``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.sim.maniskill_env import missing_prerequisites  # noqa: E402

SUITE_FILE = REPO / "config" / "suites" / "bridge.yaml"
SCENARIOS = (("carrot_on_plate_1", "carrot", "plate"), ("spoon_on_cloth_1", "spoon", "cloth"),
             ("kitchen_split_2", "spoon", "cloth"))


def _stats(values_ms: list[float]) -> str:
    values = sorted(values_ms)
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return (f"mean {statistics.fmean(values):7.1f}  median {statistics.median(values):7.1f}  p90 {p90:7.1f} ms"
            f"  (n={len(values)})")


def bench_backend(episodes: int) -> None:
    from ladder_ros.sim.maniskill_scripted import ScriptedPlacement
    from ladder_ros.sim.registry import make_simulator

    suite = load_suite(SUITE_FILE)
    sims = {render: make_simulator("maniskill_bridge", suite, render=render) for render in (True, False)}
    started = time.perf_counter()
    import mani_skill.envs  # noqa: F401  (after make_simulator: it points ManiSkill at the assets first)
    print(f"import mani_skill.envs: {time.perf_counter() - started:.1f} s "
          f"(pid {os.getpid()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    for render in (True, False):
        sim = sims[render]
        label = "with 640x480 image" if render else "without image     "
        for task_id, obj, container in SCENARIOS:
            task = suite.task(task_id)
            started = time.perf_counter()
            sim.reset(task, 0, 0)
            make_s = time.perf_counter() - started
            whole, inner, observe, resets = [], [], [], []
            for episode in range(episodes):
                started = time.perf_counter()
                obs = sim.reset(task, episode % task.layouts, episode)
                resets.append((time.perf_counter() - started) * 1e3)
                plan = ScriptedPlacement(obj, container).actions(obs)
                try:
                    action = next(plan)
                    while True:
                        started = time.perf_counter()
                        obs = sim.step(action)
                        whole.append((time.perf_counter() - started) * 1e3)
                        inner.append(sim.last_timings_ms["step"])
                        observe.append(sim.last_timings_ms["observe"])
                        action = plan.send(obs)
                except StopIteration:
                    pass
            print(f"\n[{task.scene}, {label}] first reset incl. env make {make_s:.1f} s; "
                  f"reset {_stats(resets)}")
            print(f"  backend step      {_stats(whole)}")
            print(f"  ManiSkill step    {_stats(inner)}")
            print(f"  observation/preds {_stats(observe)}")
        sim.close()


def bench_graph(graph_episodes: int, render: bool) -> None:
    params = yaml.safe_load((REPO / "config" / "widowx_params.yaml").read_text())
    bridge = next(v["ros__parameters"] for k, v in params.items() if k.endswith("sim_bridge"))
    orchestrator = next(v["ros__parameters"] for k, v in params.items() if k.endswith("orchestrator"))
    bridge.update(simulator="maniskill_bridge", suite="config/suites/bridge.yaml", render=render)
    orchestrator["suite"] = "config/suites/bridge.yaml"
    with tempfile.TemporaryDirectory(prefix="bench_maniskill_") as folder:
        params_file = Path(folder) / "params.yaml"
        params_file.write_text(yaml.safe_dump(params))
        out = Path(folder) / "parity"
        seeds = ",".join(str(s) for s in range(graph_episodes))
        command = [sys.executable, "-m", "ladder_ros.cli", "parity", "widowx", "--params-file", str(params_file),
                   "--tasks", "kitchen_split_2", "--variants", "proprio_verifier", "--seeds", seeds,
                   "--out", str(out)]
        run = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        if run.returncode != 0 or not (out / "parity.json").is_file():
            print(f"parity failed (exit {run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
            return
        results = json.loads((out / "parity.json").read_text())
    print(f"\n[ROS graph vs reference loop, kitchen_split_2, proprio_verifier, image {'on' if render else 'off'}]")
    for r in results:
        steps = max(r["steps"], 1)
        print(f"  seed {r['episode']['seed']}: {r['steps']} steps, identical={r['identical']}, reference "
              f"{1e3 * r['reference_wall_s'] / steps:6.1f} ms/step, graph {1e3 * r['graph_wall_s'] / steps:6.1f} "
              f"ms/step{'  (includes making the env)' if r is results[0] else ''}")
    later = results[1:]
    if later:
        reference = sum(r["reference_wall_s"] for r in later) / sum(r["steps"] for r in later)
        graph = sum(r["graph_wall_s"] for r in later) / sum(r["steps"] for r in later)
        print(f"  overhead ratio (graph / reference, per step, seeds 1..): {graph / reference:.2f} "
              f"({1e3 * reference:.1f} vs {1e3 * graph:.1f} ms/step)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2, help="scripted episodes per scene and camera setting")
    parser.add_argument("--graph-episodes", type=int, default=3, help="parity episodes per camera setting "
                                                                      "(the first one also makes the env)")
    parser.add_argument("--skip-graph", action="store_true", help="only the backend numbers")
    args = parser.parse_args()
    reason = missing_prerequisites()
    if reason is not None:
        print(f"cannot run: {reason}")
        return 2
    bench_backend(args.episodes)
    if not args.skip_graph:
        for render in (False, True):
            bench_graph(args.graph_episodes, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
