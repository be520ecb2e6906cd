#!/usr/bin/env python
"""Control steps per second of the in-process reference loop, with and without camera rendering.

Runs the same episodes (tasks x seeds, ``proprio_verifier`` with the oracle verifier and the noisy
scripted expert) once without rendering and once rendering the camera, and prints steps per
second and where the time goes (simulator step, policy, orchestration and verification).

    python benchmarks/bench_reference_loop.py [--tasks a,b] [--seeds N]
"""

from __future__ import annotations

import argparse
import time

from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import load_suite
from ladder_ros.evaluation.components import make_policy, make_verifier
from ladder_ros.evaluation.reference_loop import run_episode
from ladder_ros.paths import share_path
from ladder_ros.sim.registry import make_simulator


class Timed:
    """Wraps an object's method and accumulates its wall time."""

    def __init__(self, target, method: str):
        self.target, self.method, self.seconds, self.calls = target, method, 0.0, 0
        original = getattr(target, method)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        setattr(target, method, timed)


def run(render: bool, suite, tasks, seeds: int, variant: str) -> dict:
    preset = get_preset(suite.embodiment)
    sim = make_simulator("mujoco_tabletop", suite, render=render)
    sim_step = Timed(sim, "step")
    sim_reset = Timed(sim, "reset")
    steps = 0
    policy_s = 0.0
    verify_s = 0.0
    started = time.perf_counter()
    for task in tasks:
        for seed in range(seeds):
            policy = make_policy("scripted_expert", task, seed, "bridge_like")
            verifier = make_verifier("oracle")
            t_policy = Timed(policy, "act")
            t_verify = Timed(verifier, "verify")
            record = run_episode(sim, policy, task, variant, preset, layout=seed % task.layouts, seed=seed,
                                 verifier=verifier)
            steps += record.steps_used
            policy_s += t_policy.seconds
            verify_s += t_verify.seconds
    wall = time.perf_counter() - started
    sim.close()
    rest = wall - sim_step.seconds - sim_reset.seconds - policy_s - verify_s
    return {"render": render, "steps": steps, "wall_s": wall, "steps_per_s": steps / wall,
            "sim_step_ms": 1000 * sim_step.seconds / max(1, sim_step.calls),
            "reset_ms": 1000 * sim_reset.seconds / max(1, sim_reset.calls),
            "policy_ms": 1000 * policy_s / max(1, steps), "verify_s": verify_s,
            "loop_ms": 1000 * rest / max(1, steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="kitchen_single_2,kitchen_single_4,relay_2")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variant", default="proprio_verifier")
    args = parser.parse_args()
    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    tasks = [suite.task(t) for t in args.tasks.split(",")]
    print(f"reference loop, {args.variant}, tasks {args.tasks}, {args.seeds} seeds each")
    print(f"{'render':>7} {'steps':>6} {'wall s':>7} {'steps/s':>8} {'sim ms/step':>12} {'policy ms':>10} "
          f"{'verify s':>9} {'loop ms':>8} {'reset ms':>9}")
    for render in (False, True):
        r = run(render, suite, tasks, args.seeds, args.variant)
        print(f"{str(r['render']):>7} {r['steps']:>6} {r['wall_s']:>7.2f} {r['steps_per_s']:>8.1f} "
              f"{r['sim_step_ms']:>12.2f} {r['policy_ms']:>10.3f} {r['verify_s']:>9.3f} {r['loop_ms']:>8.3f} "
              f"{r['reset_ms']:>9.1f}")


if __name__ == "__main__":
    main()
