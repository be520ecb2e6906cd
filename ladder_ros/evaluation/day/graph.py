"""The graph a day runs on: brought up once, driven episode by episode, brought up again when a node dies.

Two places, the same episodes: ``sim``, the simulator graph in lockstep (the sim bridge in place of the robot,
as ``ladder-ros run`` starts it), and ``twin``, the dress rehearsal (the robot graph on the wall clock
against the WidowX twin, as ``ladder-ros rehearse`` starts it, with its operator: arm, home, recover). The
nodes run one process each (:class:`~ladder_ros.bringup.up.GraphProcesses`), so the day knows every node's
pid for its resource samples. rclpy is imported only when the graph starts.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ladder_ros.bringup.graph import GraphDescription, check_referenced_files, load_graph, parse_overrides
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.panel.evaluation_plan import EvaluationPlan
from ladder_ros.paths import resolve_share_file

SIM, TWIN = "sim", "twin"


@dataclass
class GraphChoice:
    """Which graph and mode a day runs on, checked without writing anything: its nodes' parameters and suite."""

    mode: str
    graph: GraphDescription
    params_file: Path | None
    overrides: dict
    override_args: list[str]
    namespace: str | None
    params: dict
    suite: TaskSuite

    @classmethod
    def check(cls, mode: str, graph_name: str, overrides: list[str], params_file: str | None,
              namespace: str | None) -> "GraphChoice":
        graph = load_graph(graph_name)
        path = Path(params_file) if params_file else None
        parsed = parse_overrides(list(overrides))
        params = graph.node_parameters(mode, path, parsed, namespace)  # a missing mode or params file: one line
        check_referenced_files(params)
        if mode == TWIN and "widowx_twin" not in params:
            raise ConfigError(f"--rehearsal runs the WidowX twin; the twin mode of graph {graph.name} has no "
                              "widowx_twin node (the Franka's twin has no scene to score an episode)")
        suite_file = (params.get("widowx_twin") or {}).get("suite") or params["orchestrator"]["suite"]
        suite = load_suite(resolve_share_file(suite_file))
        return cls(mode, graph, path, parsed, list(overrides), namespace, params, suite)

    def check_plan(self, plan: EvaluationPlan) -> None:
        """Every task of the plan in the graph's suite, every layout one the task has; one line naming the first
        that is not."""
        for entry in plan.entries:
            try:
                task = self.suite.task(entry.task_id)
            except Exception as exc:  # unknown_name: names the suite's tasks, or the closest
                raise ConfigError(f"plan {plan.name}: {exc} (suite {self.suite.name})", source=plan.source) from None
            if entry.layout >= task.layouts:
                raise ConfigError(f"plan {plan.name}: task {task.task_id} has {task.layouts} layouts, the plan asks "
                                  f"for layout {entry.layout} (give the task 'layouts: {task.layouts}' in the plan)",
                                  source=plan.source)

    def scene_of(self, task_id: str) -> tuple:
        """What a task's scene holds: its name and the objects its layouts place (a task continues the scene another
        one's reset left only when they hold the same)."""
        from ladder_ros.nodes.orchestrator.resets import reset_scene_of

        task = self.suite.task(task_id)
        scene = reset_scene_of(self.suite, task)
        return task.scene, tuple(sorted((scene.object_counts if scene is not None else {}).items()))

    def check_resets(self, plan: EvaluationPlan) -> None:
        """Every task of the plan one whose scene can be reset automatically (its start regions); one line naming
        the first that cannot."""
        from ladder_ros.core.reset import auto_reset_refusal
        from ladder_ros.nodes.orchestrator.resets import reset_scene_of

        for task_id in dict.fromkeys(e.task_id for e in plan.entries):
            task = self.suite.task(task_id)
            refusal = auto_reset_refusal(task, reset_scene_of(self.suite, task))
            if refusal:
                raise ConfigError(f"plan {plan.name}: --auto-reset: {refusal}", source=plan.source)


@dataclass(frozen=True)
class EpisodeResult:
    episode_id: str
    record: dict
    wall_s: float  # from the day's request to the result in hand (arming, homing, scoring included)


class DayGraph:
    """The running graph of a day: ``start``, ``episode`` after ``episode``, ``restart`` after a fault, ``stop``."""

    def __init__(self, choice: GraphChoice, out: Path, startup_timeout_s: float, chaos: Any = None):
        self.choice = choice
        self.out = Path(out)
        self.startup_timeout_s = startup_timeout_s
        self.chaos = chaos  # the rehearsal's faults (a ChaosPlan; twin mode only), kept across restarts
        self.session: Any = None
        self.operator: Any = None  # the rehearsal's operator (twin mode)
        self.launches = self._launches()

    def _launches(self) -> list:
        c, out = self.choice, self.out
        # The orchestrator's journal lives with the day, not in ~/.ros: a day's graph killed mid-episode is
        # ended properly by the next one started on the same folder.
        state_dir = str((out / "state").resolve())
        if c.mode == TWIN:
            from ladder_ros.evaluation.rehearsal import plan_rehearsal

            given = "state_dir" in c.overrides.get("orchestrator", {})
            extra = [] if given else [f"orchestrator.state_dir={state_dir}"]
            rehearsal = plan_rehearsal(c.graph.name, out, overrides=[*c.override_args, *extra],
                                       params_file=str(c.params_file) if c.params_file else None,
                                       namespace=c.namespace)
            self.params, self.namespace = rehearsal.params, rehearsal.namespace
            return rehearsal.launches
        overrides = {node: dict(values) for node, values in c.overrides.items()}
        recorder = overrides.setdefault("episode_recorder", {})
        recorder.setdefault("output_dir", str((out / "recordings").resolve()))
        recorder.setdefault("config_files", c.graph.config_files(c.params_file, SIM))
        overrides.setdefault("orchestrator", {}).setdefault("state_dir", state_dir)
        self.params = c.graph.node_parameters(SIM, c.params_file, overrides, c.namespace)
        self.namespace = c.graph.namespace if c.namespace is None else c.namespace.strip("/")
        check_referenced_files(self.params)
        return c.graph.launches(SIM, c.params_file, overrides, c.namespace, work_dir=out / "logs")

    @property
    def recordings(self) -> Path:
        return Path(self.params["episode_recorder"]["output_dir"])

    def start(self) -> str:
        """Bring the graph up (and, on the twin, arm the driver and send the arm home); returns what it did."""
        from ladder_ros.bringup.session import GraphSession

        session = GraphSession(self.choice.graph, self.launches, self.out / "logs",
                               startup_timeout_s=self.startup_timeout_s)
        session.__enter__()
        self.session = session
        if self.choice.mode != TWIN:
            return f"{len(self.launches)} nodes listening"
        from ladder_ros.evaluation.rehearsal import Rehearsal

        try:
            self.operator = Rehearsal(session, self.params, self.namespace, chaos=self.chaos)
            return f"{len(self.launches)} nodes; {self.operator.prepare()}"
        except BaseException:
            self.stop()
            raise

    def pids(self) -> dict[str, int]:
        """Node name -> pid of the graph's processes now (with the day's own as ``day``)."""
        pids = {"day": os.getpid()}
        session = self.session
        processes = getattr(getattr(session, "processes", None), "processes", None) or {}
        for name, process in list(processes.items()):
            if process.poll() is None:
                pids[name] = process.pid
        return pids

    def episode(self, task_id: str, *, variant: str, layout: int, seed: int, timeout_s: float,
                **start: str) -> EpisodeResult:
        """One episode (``start``: its kind, start and start_after: a reset, or an episode that continues an
        earlier one's scene); a node that dies meanwhile raises NodeDied, one that never ends EpisodeTimeout."""
        begun = time.monotonic()
        if self.operator is not None:
            record = self.operator.episode(task_id, variant=variant, layout=layout, seed=seed, timeout_s=timeout_s,
                                           **start)
            return EpisodeResult(str(record.get("episode_id", "")), record, time.monotonic() - begun)
        outcome = self.session.run_episode(task_id, variant=variant, layout=layout, seed=seed, timeout_s=timeout_s,
                                           **start)
        return EpisodeResult(outcome.episode_id, dict(outcome.result), time.monotonic() - begun)

    def stop(self) -> None:
        """Stop every node (the orchestrator first: it ends a running episode as interrupted) and leave ROS."""
        session, self.session, self.operator = self.session, None, None
        if session is not None:
            session.__exit__(None, None, None)

    def restart(self) -> str:
        self.stop()
        return self.start()
