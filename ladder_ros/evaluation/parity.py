"""``ladder-ros parity GRAPH``: the ROS graph must reproduce the in-process reference loop exactly.

The same tasks, variants, layouts and seeds run twice: through the reference loop
(:func:`~ladder_ros.evaluation.reference_loop.run_episode`, one process) and through the graph (each node
its own process, in lockstep, driven by the episode client). Both sides build the simulator, the
policy and the verifier from the graph's own params file, so they run the same components. Per
episode the step-by-step event logs (trigger firings, verification queries and answers, queue
changes, subgoal switches, finish) and the final scene and score must be identical; the first
difference of any episode that differs is printed, and each episode's attempt ends by reason
(``release``, ``timeout``, ``periodic``: which paths of the trigger it went through; ``parity.json``
keeps them with their close lengths and lifts). The command prints ``parity: K/N episodes
identical`` and exits non-zero unless all are.
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ladder_ros.bringup.graph import GraphDescription
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.orchestrator import Variant
from ladder_ros.core.presets import get_preset, parse_preset_options
from ladder_ros.core.suite import TaskSuite, load_suite

# What must be identical; the rest (wall time, names of components) may differ.
COMPARED_FIELDS = ("events", "final_goal", "finish_reason", "steps_used", "success", "subgoals_done", "subgoals",
                   "violations", "verification_queries", "orchestration")
DEFAULT_VARIANTS = ("proprio_verifier", "periodic_trigger")
DEFAULT_SEEDS = (0, 1)


@dataclass(frozen=True)
class ParityEpisode:
    task_id: str
    variant: str
    layout: int
    seed: int

    @property
    def label(self) -> str:
        return f"{self.task_id} {self.variant} layout {self.layout} seed {self.seed}"


def first_difference(reference: Any, graph: Any, path: str = "") -> str | None:
    """Where two JSON-like values first differ (``events[17].kind: ...``), or None when equal."""
    if isinstance(reference, dict) and isinstance(graph, dict):
        for key in list(reference) + [k for k in graph if k not in reference]:
            if key not in graph:
                return f"{path}.{key}: only in the reference: {reference[key]!r}"
            if key not in reference:
                return f"{path}.{key}: only in the graph: {graph[key]!r}"
            found = first_difference(reference[key], graph[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(reference, list) and isinstance(graph, list):
        for i, (a, b) in enumerate(zip(reference, graph)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(reference) != len(graph):
            n = min(len(reference), len(graph))
            extra = (reference if len(reference) > n else graph)[n]
            side = "reference" if len(reference) > n else "graph"
            return f"{path}: {len(reference)} items in the reference, {len(graph)} in the graph; first extra " \
                   f"({side}): {extra!r}"
        return None
    if reference != graph:
        return f"{path}: reference {reference!r}, graph {graph!r}"
    return None


def compare_records(reference: dict, graph: dict) -> str | None:
    """The first difference between two episode records over :data:`COMPARED_FIELDS`."""
    for name in COMPARED_FIELDS:
        found = first_difference(reference.get(name), graph.get(name), name)
        if found:
            return found
    return None


def attempt_ends(record: dict) -> list[dict]:
    """The trigger's attempt ends of an episode record (step, reason, and for a release the close and the lift):
    which of the trigger's paths the episode went through."""
    return [{k: e[k] for k in ("step", "reason", "close_steps", "lift_m") if k in e}
            for e in record.get("events", []) if e.get("kind") == "attempt_ended"]


def plan_episodes(suite: TaskSuite, task_ids: list[str] | None, variants: list[str], seeds: list[int],
                  limit: int | None) -> list[ParityEpisode]:
    """tasks x variants x seeds (layout = seed mod the task's layouts), at most ``limit``."""
    if task_ids:
        tasks = [suite.task(t) for t in task_ids]
    else:  # the first task of each of three horizons: short, middle, long
        by_horizon: dict[int, str] = {}
        for t in suite.tasks:
            by_horizon.setdefault(t.horizon, t.task_id)
        horizons = sorted(by_horizon)
        picks = sorted({horizons[0], horizons[len(horizons) // 2], horizons[-1]}) if len(horizons) > 3 else horizons
        tasks = [suite.task(by_horizon[h]) for h in picks[:3]]
    for v in variants:
        Variant.parse(v)
    episodes = [ParityEpisode(t.task_id, v, s % t.layouts, s) for t, v, s in itertools.product(tasks, variants, seeds)]
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"--episodes must be >= 1, got {limit}")
        episodes = episodes[:limit]
    return episodes


class ReferenceRunner:
    """The in-process side, built from the graph's sim-mode parameters."""

    def __init__(self, params: dict[str, dict[str, Any]], suite: TaskSuite):
        from ladder_ros.nodes.sim_bridge.node import simulator_options
        from ladder_ros.sim.registry import make_simulator

        bridge = params["sim_bridge"]
        self.params = params
        self.suite = suite
        orchestrator = params["orchestrator"]
        self.preset = get_preset(orchestrator["preset"], parse_preset_options(orchestrator.get("preset_options", [])))
        self.simulator = make_simulator(bridge["simulator"], suite, **simulator_options(bridge))
        self._verifier = None

    def verifier(self):
        if self._verifier is None:
            from ladder_ros.vlm.config import VLMConfig
            from ladder_ros.vlm.factory import make_components

            p = self.params["vlm_verifier"]
            self._verifier = make_components(VLMConfig.from_mapping({
                "backend": p["backend"], "model": p["model"], "robot": p["robot"],
                "replay_path": p["replay_path"], "record_path": p["record_path"]})).verifier
        return self._verifier

    def run(self, episode: ParityEpisode) -> dict:
        from ladder_ros.evaluation.reference_loop import run_episode
        from ladder_ros.evaluation.components import make_policy

        task = self.suite.task(episode.task_id)
        policy_params = self.params["policy"]
        policy = make_policy(policy_params["policy"], task, episode.seed, policy_params["noise"],
                             policy_params.get("rotation_convention") or None)
        verifier = self.verifier() if Variant.parse(episode.variant).needs_verifier else None
        return run_episode(self.simulator, policy, task, episode.variant, self.preset, layout=episode.layout,
                           seed=episode.seed, verifier=verifier).to_dict()

    def close(self) -> None:
        self.simulator.close()


def register(subparsers: argparse._SubParsersAction) -> None:
    from ladder_ros.bringup.session import add_launch_argument
    from ladder_ros.bringup.up import add_graph_arguments

    p = subparsers.add_parser("parity", help="check that the ROS graph reproduces the in-process loop exactly",
                              description=__doc__.split("\n\n")[0])
    add_graph_arguments(p)
    p.add_argument("--episodes", type=int, default=None, help="run at most N of tasks x variants x seeds")
    p.add_argument("--tasks", default="", help="comma-separated task ids (default: one short, middle and "
                                               "long task of the suite)")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help="comma-separated variants")
    p.add_argument("--seeds", default=",".join(map(str, DEFAULT_SEEDS)), help="comma-separated seeds")
    p.add_argument("--out", default=None, help="folder for the node logs, recordings and parity.json "
                                               "(default: a temporary folder)")
    p.add_argument("--episode-timeout", type=float, default=900.0, help="seconds one graph episode may take")
    add_launch_argument(p)
    p.set_defaults(func=run, mode="sim")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def run(args: argparse.Namespace) -> int:
    from ladder_ros.bringup.graph import check_referenced_files, load_graph, parse_overrides
    from ladder_ros.bringup.session import GraphSession, launch_options
    from ladder_ros.paths import resolve_share_file

    if args.mode != "sim":
        raise ConfigError("parity runs the graph in simulation (--mode sim)")
    try:
        seeds = [int(s) for s in _csv(args.seeds)]
    except ValueError:
        raise ConfigError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ladder_parity_"))
    out.mkdir(parents=True, exist_ok=True)
    graph: GraphDescription = load_graph(args.graph)
    overrides = parse_overrides(args.overrides)
    overrides.setdefault("episode_recorder", {}).setdefault("output_dir", str(out / "recordings"))
    params_file = Path(args.params_file) if args.params_file else None
    if params_file is not None and not params_file.is_file():
        raise ConfigError("params file not found", source=str(params_file))
    params = graph.node_parameters("sim", params_file, overrides, args.namespace)
    check_referenced_files(params)
    launches = graph.launches("sim", params_file, overrides, args.namespace, work_dir=out / "logs")
    suite = load_suite(resolve_share_file(params["orchestrator"]["suite"]))
    episodes = plan_episodes(suite, _csv(args.tasks) or None, _csv(args.variants), seeds, args.episodes)
    how = f"ros2 launch ladder_ros {args.launch}" if args.launch else "processes"
    print(f"parity: {len(episodes)} episodes on graph {graph.name} ({', '.join(l.name for l in launches)} as "
          f"{how}); output in {out}", flush=True)
    reference_runner = ReferenceRunner(params, suite)
    results = []
    try:
        with GraphSession(graph, launches, out / "logs",
                          **launch_options(args, graph, params_file, overrides, out / "logs")) as session:
            for episode in episodes:
                reference = reference_runner.run(episode)
                outcome = session.run_episode(episode.task_id, variant=episode.variant, layout=episode.layout,
                                              seed=episode.seed, timeout_s=args.episode_timeout)
                difference = compare_records(reference, outcome.result)
                results.append({"episode": episode.__dict__, "episode_id": outcome.episode_id,
                                "identical": difference is None, "first_difference": difference,
                                "steps": reference["steps_used"], "reference_wall_s": reference["wall_s"],
                                "graph_wall_s": outcome.wall_s, "attempt_ends": attempt_ends(reference)})
                # on disk after every episode: a run that ends early (a hung middleware teardown) keeps them
                (out / "parity.json").write_text(json.dumps(results, indent=2))
                verdict = "identical" if difference is None else f"DIFFERS at {difference}"
                ends = Counter(e["reason"] for e in results[-1]["attempt_ends"])
                if ends:
                    verdict += f" (attempt ends: {', '.join(f'{n} {reason}' for reason, n in sorted(ends.items()))})"
                print(f"  {episode.label}: {reference['steps_used']} steps, {len(reference['events'])} events, "
                      f"reference {reference['wall_s']:.1f} s, graph {outcome.wall_s:.1f} s: {verdict}", flush=True)
    finally:
        reference_runner.close()
    identical = sum(1 for r in results if r["identical"])
    (out / "parity.json").write_text(json.dumps(results, indent=2))
    print(f"parity: {identical}/{len(episodes)} episodes identical")
    for r in results:
        if not r["identical"]:
            print(f"first difference ({r['episode_id']}): {r['first_difference']}", file=sys.stderr)
            break
    return 0 if identical == len(episodes) and len(results) == len(episodes) else 1
