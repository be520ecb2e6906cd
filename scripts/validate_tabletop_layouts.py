#!/usr/bin/env python3
"""Validate the tabletop suite's layouts with the noise-free scripted expert, and measure it.

The paper validates every layout with scripted policies that complete all subgoals (Section 3,
'Scene construction'). By default this runs the noise-free expert over every task x layout, one
subgoal instruction at a time (advancing on the simulator's predicate, as the privileged verifier
does), prints the failures and a per-task table, and exits 1 if any layout fails.

Every run first checks the scenes' start regions (where automatic resets put objects back) against every
selected layout: each region inside the reachable workspace and clear of every container as that layout placed
it, by the gripper's placement gap. With ``--resets`` it also runs, per task and layout, the noise-free expert's
episode (privileged verifier) followed by its automatic reset, and fails a layout whose reset the oracle
verifier cannot confirm: a start region the expert cannot reach or fill is a broken region.

With ``--noise bridge_like`` and/or ``--instruction full`` it measures the expert as a stand-in
policy instead (success per horizon, single-subgoal instructions vs the full compound instruction);
those runs are measurements, not validation, and always exit 0.

    python scripts/validate_tabletop_layouts.py                       # validate every layout
    python scripts/validate_tabletop_layouts.py --noise bridge_like --instruction full --layouts 8
    python scripts/validate_tabletop_layouts.py --benchmark 300       # ms per step, image off and on
    python scripts/validate_tabletop_layouts.py --suite config/suites/robolab_tabletop.yaml   # the Franka suite
    python scripts/validate_tabletop_layouts.py --resets --layouts 4        # each episode, then its automatic reset

The suite's embodiment decides the gripper, the rate, the expert's steering and the preset (the
settle window of the subgoal driver, the step budgets): 5 Hz and 3 settle steps on the WidowX
suites, 15 Hz and 120 settle steps on a Franka suite (Appendix B).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ladder_ros.core.errors import LadderError  # noqa: E402
from ladder_ros.core.presets import get_preset  # noqa: E402
from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.instruments.expert.noise import expert_noise  # noqa: E402
from ladder_ros.instruments.expert.scripted import ScriptedExpert  # noqa: E402
from ladder_ros.sim.mujoco_tabletop import MujocoTabletop  # noqa: E402
from ladder_ros.sim.tabletop_embodiment import embodiment_for  # noqa: E402
from ladder_ros.sim.tabletop_scene import parse_scenes, sample_layout  # noqa: E402
from ladder_ros.evaluation.rollouts import RolloutResult, run_full_instruction, run_subgoal_sequence  # noqa: E402

DEFAULT_SUITE = REPO / "config" / "suites" / "tabletop.yaml"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default=str(DEFAULT_SUITE), help="suite YAML (default: the built-in tabletop)")
    p.add_argument("--tasks", default="", help="comma-separated task ids (default: all)")
    p.add_argument("--layouts", type=int, default=None, help="first N layouts of each task (default: all)")
    p.add_argument("--noise", default="off", help="expert noise model: off or bridge_like")
    p.add_argument("--instruction", choices=("subgoals", "full"), default="subgoals",
                   help="subgoal texts in order (privileged-verifier style) or the full instruction")
    p.add_argument("--seed", type=int, default=0, help="expert seed offset (the seed of layout k is seed + k)")
    p.add_argument("--json", default="", help="also write every episode as JSON lines to this file")
    p.add_argument("--benchmark", type=int, default=0, metavar="STEPS",
                   help="instead: time STEPS control steps of the first selected task without and with the image")
    p.add_argument("--image-size", type=int, default=256, help="image side in pixels for --benchmark")
    p.add_argument("--resets", action="store_true",
                   help="instead of the rollouts: each layout's noise-free episode followed by its automatic reset, "
                        "which the oracle verifier must confirm")
    return p.parse_args(argv)


def check_start_regions(suite, tasks, layouts: int | None) -> list[str]:
    """Every start region inside the workspace and clear of the containers of every selected layout."""
    embodiment = embodiment_for(suite.embodiment)
    scenes = parse_scenes(suite.scenes, embodiment)
    low, high = embodiment.workspace_low, embodiment.workspace_high
    gap = embodiment.placement_gap_m
    problems = []
    for task in tasks:
        scene = scenes[task.scene]
        for region in scene.start_regions.values():
            for i, axis in enumerate("xy"):
                lo, hi = region.centre[i] - region.size[i], region.centre[i] + region.size[i]
                if not (low[i] <= lo and hi <= high[i]):
                    problems.append(f"{task.scene}: start region {region.name} reaches {axis} = [{lo:.3f}, {hi:.3f}], "
                                    f"outside the workspace [{low[i]}, {high[i]}]")
        if not scene.start_regions:
            continue
        n = task.layouts if layouts is None else min(layouts, task.layouts)
        for k in range(n):
            for c in sample_layout(scene, task, k).containers:
                for region in scene.start_regions.values():
                    clearance = region.clearance_to_container(c)
                    if clearance < gap:
                        problems.append(f"{task.task_id} layout {k}: start region {region.name} is {clearance:.3f} m "
                                        f"from the {c.spec.name} (needs {gap} m)")
    return sorted(set(problems))


def _validate_resets(suite, tasks, layouts: int | None, seed: int) -> int:
    """Each layout's noise-free episode (privileged verifier), then its reset, which the oracle must confirm."""
    from ladder_ros.evaluation.auto_reset import run_sequence
    from ladder_ros.evaluation.components import make_verifier

    preset = get_preset(suite.embodiment)
    failures = []
    runs = 0
    with MujocoTabletop(suite, render=False) as backend:
        for task in tasks:
            n = task.layouts if layouts is None else min(layouts, task.layouts)
            ok = 0
            for layout in range(n):
                result = run_sequence(
                    backend, lambda t, s: ScriptedExpert(t, seed=s, noise=expert_noise("off"),
                                                         embodiment=suite.embodiment),
                    task, "privileged_verifier", preset, episodes=1, layout=layout, base_seed=seed + layout,
                    verifier=make_verifier("oracle"), sequence_id=f"{task.task_id}-{layout}")
                runs += 1
                if result.stopped:
                    failures.append(f"{task.task_id} layout {layout}: {result.stopped}")
                else:
                    ok += 1
            print(f"{task.task_id}: {ok}/{n} resets confirmed", flush=True)
    print(f"\n{runs} episodes with their resets; " + (f"{len(failures)} failed:" if failures else "no failures"))
    for line in failures:
        print("  " + line)
    return 1 if failures else 0


def _benchmark(suite, task, steps: int, image_size: int) -> None:
    """Milliseconds per control step while the noise-free expert works through the task's subgoals.

    Wall clock counts ``backend.step`` only; CPU time (this process, all threads, so llvmpipe's
    render threads too) counts the whole loop, expert included.
    """
    for render in (False, True):
        with MujocoTabletop(suite, render=render, image_size=image_size) as backend:
            wall = 0.0
            done = 0
            layout = 0
            cpu_start = time.process_time()
            while done < steps:
                expert = ScriptedExpert(task, seed=layout, embodiment=suite.embodiment)
                r = run_subgoal_sequence(backend, task, layout % task.layouts, expert, seed=layout,
                                         preset=get_preset(suite.embodiment))
                wall += r.sim_seconds
                done += r.steps
                layout += 1
            cpu = time.process_time() - cpu_start
            label = f"image {image_size}x{image_size}" if render else "no image"
            print(f"{task.task_id} ({len(backend.layout.objects)} objects), {label}: {1000 * wall / done:.2f} ms/step "
                  f"wall (step only), {1000 * cpu / done:.2f} ms/step CPU (whole loop) over {done} steps, "
                  f"{layout} episodes")


def _print_table(results: list[RolloutResult], horizons: dict[str, int], categories: dict[str, str]) -> None:
    by_task: dict[str, list[RolloutResult]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r)
    print(f"\n{'task':<22} {'category':<19} {'h':>2} {'ok':>7} {'progress':>9} {'regress':>8} {'steps':>7}")
    for task_id, rs in by_task.items():
        ok = sum(r.success for r in rs)
        progress = sum(r.progress for r in rs) / len(rs)
        regress = sum(r.regressions for r in rs)
        steps = sum(r.steps for r in rs) / len(rs)
        print(f"{task_id:<22} {categories[task_id]:<19} {horizons[task_id]:>2} {ok:>3}/{len(rs):<3} "
              f"{100 * progress:>8.1f}% {regress:>8} {steps:>7.1f}")
    by_h: dict[int, list[RolloutResult]] = defaultdict(list)
    for r in results:
        by_h[horizons[r.task_id]].append(r)
    print(f"\n{'horizon':>7} {'episodes':>9} {'success':>8} {'progress':>9}")
    for h in sorted(by_h):
        rs = by_h[h]
        print(f"{h:>7} {len(rs):>9} {100 * sum(r.success for r in rs) / len(rs):>7.1f}% "
              f"{100 * sum(r.progress for r in rs) / len(rs):>8.1f}%")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        suite = load_suite(args.suite)
        noise = expert_noise(args.noise)
        tasks = suite.select([t for t in args.tasks.split(",") if t] or None)
    except LadderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        problems = check_start_regions(suite, tasks, args.layouts)
    except LadderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in problems:
        print(f"start region: {line}")
    if problems:
        return 1
    if args.resets:
        return _validate_resets(suite, tasks, args.layouts, args.seed)
    if args.benchmark > 0:
        _benchmark(suite, tasks[0] if args.tasks else max(suite.tasks, key=lambda t: t.horizon), args.benchmark,
                   args.image_size)
        return 0
    validating = args.noise == "off" and args.instruction == "subgoals"
    run = run_subgoal_sequence if args.instruction == "subgoals" else run_full_instruction
    results: list[RolloutResult] = []
    failures: list[RolloutResult] = []
    sim_s = policy_s = 0.0
    steps = 0
    started = time.perf_counter()
    out = open(args.json, "w", encoding="utf-8") if args.json else None
    with MujocoTabletop(suite, render=False) as backend:
        for task in tasks:
            n = task.layouts if args.layouts is None else min(args.layouts, task.layouts)
            for layout in range(n):
                expert = ScriptedExpert(task, seed=args.seed + layout, noise=noise, embodiment=suite.embodiment)
                r = run(backend, task, layout, expert, seed=args.seed + layout, preset=get_preset(suite.embodiment))
                results.append(r)
                sim_s += r.sim_seconds
                policy_s += r.policy_seconds
                steps += r.steps
                if not r.success:
                    failures.append(r)
                if out is not None:
                    out.write(json.dumps({"task": r.task_id, "layout": r.layout, "mode": r.mode,
                                          "noise": args.noise, "success": r.success,
                                          "achieved": list(r.achieved), "ever_achieved": list(r.ever_achieved),
                                          "steps": r.steps, "budget": r.budget,
                                          "order_violations": r.order_violations,
                                          "distractors_placed": list(r.distractors_placed)}) + "\n")
            print(f"{task.task_id}: {sum(r.success for r in results if r.task_id == task.task_id)}/{n}",
                  flush=True)
    if out is not None:
        out.close()
    elapsed = time.perf_counter() - started
    horizons = {t.task_id: t.horizon for t in tasks}
    categories = {t.task_id: t.category.value for t in tasks}
    _print_table(results, horizons, categories)
    print(f"\nmode={args.instruction} noise={args.noise}: {len(results)} episodes, {steps} steps, "
          f"{elapsed:.1f} s; simulator {1000 * sim_s / max(steps, 1):.2f} ms/step, "
          f"expert {1000 * policy_s / max(steps, 1):.2f} ms/step (render off)")
    if failures:
        print(f"\n{len(failures)} episode(s) failed:")
        print(f"{'task':<22} {'layout':>6} {'achieved':<28} {'steps':>6} {'order':>5} distractors")
        for r in failures:
            achieved = "".join("1" if a else "0" for a in r.achieved)
            print(f"{r.task_id:<22} {r.layout:>6} {achieved:<28} {r.steps:>6} {r.order_violations:>5} "
                  f"{','.join(r.distractors_placed)}")
    else:
        print("\nno failures")
    return 1 if validating and failures else 0


if __name__ == "__main__":
    sys.exit(main())
