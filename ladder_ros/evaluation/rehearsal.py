"""``ladder-ros rehearse GRAPH``: the robot graph on the wall clock against a simulated robot, a few episodes, timed.

The dress rehearsal before the hardware checklist (docs/rehearsal.md): the graph's ``twin`` mode,
which is the robot graph the lab starts (driver, camera, depth, policy, trigger, verifier,
orchestrator, recorder) with the WidowX twin in place of the arm and its camera, and the rehearsal's
openpi server (the scripted expert at a GPU server's latency) in place of the GPU machine. The
Franka's (docs/rehearsal_franka.md) has franky-sim in place of the arm, synthetic frames and a
scripted sweep instead of the expert: no scene, so its records are unscored. Like an
operator it arms the driver (it starts disarmed), sends the arm home, starts each episode through
``episode/command``, ends an episode whose arm faults with the driver's reason and recovers the arm
before the next. ``OUT/episodes.jsonl`` holds one record per episode as ``sim-eval`` writes them,
with the twin's score (the simulator's, beside the verifier's verdicts in the events) and a
``timing`` object measured from what the graph published
(:mod:`ladder_ros.evaluation.rehearsal_timing`); ``OUT/summary.json`` the success rate with its
Wilson interval and the timing over all episodes; ``OUT/logs`` every node's output, ``OUT/recordings``
the episodes' MCAP bags. With ``--faults RATE`` the lab day's faults are injected at seeded random times
(:mod:`ladder_ros.evaluation.chaos`): each one's record in its episode's and in ``OUT/chaos.jsonl``, their
counts by kind and outcome in the summary.
"""

from __future__ import annotations

import argparse
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import yaml

from ladder_ros.bringup.graph import GraphDescription, check_referenced_files, load_graph, parse_overrides
from ladder_ros.bringup.run import check_out_folder
from ladder_ros.bringup.session import add_launch_argument
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.metrics import summarize_episodes
from ladder_ros.core.orchestrator import Variant
from ladder_ros.core.record import score_fields
from ladder_ros.core.reset import RESET_EPISODE, reset_task_id
from ladder_ros.evaluation.rehearsal_ab import RehearsalArm, add_ab_arguments, serve_arms, with_rehearsal_servers
from ladder_ros.evaluation.rehearsal_timing import episode_timing, pooled_timing
from ladder_ros.messages import RUNNING
from ladder_ros.policies.config import EXECUTION_MODES
from ladder_ros.instruments.rehearsal.server import LATENCY_MODELS

MODE = "twin"
DEFAULT_DELAY_MS = 80.0
DEFAULT_TASKS = "kitchen_single_2,sorting_split_2,relay_2"  # two subgoals in each of three scenes, as ladder-ros run
UNSCORED_TASKS = "kitchen_single_1"  # no scene: the task gives the episode its instruction and budget only
UNSCORED = "unscored: the simulated robot has no object scene"


@dataclass(frozen=True)
class RehearsedRobot:
    """What the operator needs to know about a twin mode's robot: its driver, home, and whether it is scored."""

    twin: str  # the node that simulates the robot
    driver: str  # the driver node the operator arms, homes and recovers
    home_parameter: str  # the driver's parameter holding the home joints
    scored: bool  # the twin has a scene and publishes sim/episode_score
    what: str  # in the rehearsal's first line

    def home_joints(self, params: dict) -> np.ndarray:
        return np.array(params[self.driver][self.home_parameter])


ROBOTS = (RehearsedRobot("widowx_twin", "widowx_driver", "home_joints", True, "the WidowX twin"),
          RehearsedRobot("franka_twin", "franka_driver", "ready_joints", False,
                         "franky-sim (arm and hand only, no scene: unscored)"))


def rehearsed_robot(params: dict) -> RehearsedRobot:
    """The robot of a twin mode, from its nodes' parameters (the twin node it runs)."""
    for robot in ROBOTS:
        if robot.twin in params and robot.driver in params:
            return robot
    raise ConfigError(f"the twin mode runs none of the simulated robots the rehearsal knows "
                      f"({', '.join(r.twin for r in ROBOTS)}) with its driver")


SCORE_WAIT_S = 15.0  # the twin scores an episode within this long of its last decision unless it is gone


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rehearse", help="run episodes of the robot graph against a simulated robot, timed",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("graph", help="graph name (config/graphs/NAME.yaml) with a twin mode: widowx or franka")
    p.add_argument("--episodes", type=int, default=3, help="number of episodes (tasks are taken in turn)")
    p.add_argument("--tasks", default=None,
                   help=f"comma-separated task ids of the twin's suite (default: {DEFAULT_TASKS}; a twin without a "
                        f"scene: {UNSCORED_TASKS})")
    p.add_argument("--variant", default="", help="orchestrator variant (default: the orchestrator's parameter; with "
                                                 "--ab-pairs a comma-separated list: the cells of the session)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first episode; episode k uses seed + k, "
                                                       "layout seed mod the task's layouts (as ladder-ros run)")
    p.add_argument("--inference-delay-ms", type=float, default=None,
                   help=f"the rehearsal server's inference time (default: its parameter, {DEFAULT_DELAY_MS:g} ms; the "
                        "median of a heavy-tailed latency)")
    p.add_argument("--latency-model", choices=LATENCY_MODELS, default=None,
                   help="how the server's inference time varies: fixed, normal (sd --jitter-ms) or heavy_tail "
                        "(lognormal with occasional 2-3x spikes, as a server over a network); default: its parameter")
    p.add_argument("--jitter-ms", type=float, default=None,
                   help="standard deviation of a normal latency (ms; default: the server's parameter)")
    p.add_argument("--execution", choices=EXECUTION_MODES, default=None,
                   help="how the policy node runs chunks on the wall clock: realtime (overlapping requests, each "
                        "chunk anchored at its observation) or synchronous (the paper's rule); default: the policy "
                        "config's")
    add_fault_arguments(p)
    add_ab_arguments(p)
    p.add_argument("--out", default="runs/rehearsal", help="folder for records, summary, recordings and node logs")
    p.add_argument("--episode-timeout", type=float, default=600.0, help="seconds one episode may take")
    p.add_argument("--startup-timeout", type=float, default=240.0, help="seconds the graph may take to come up")
    p.add_argument("--params-file", default=None, help="ROS params YAML replacing the graph's own")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override one node parameter (repeatable)")
    p.add_argument("--namespace", default=None, help="replace the graph's namespace")
    add_launch_argument(p)
    p.set_defaults(func=run)


def add_fault_arguments(p: argparse.ArgumentParser) -> None:
    """``--faults`` and ``--fault-kinds`` (the rehearsal's chaos; ``--seed`` seeds it)."""
    from ladder_ros.evaluation.chaos import KINDS

    p.add_argument("--faults", type=float, default=0.0, metavar="RATE",
                   help="inject the lab day's faults at seeded random times, RATE expected per episode (0.25: one "
                        "every four episodes on average; default 0: none); docs/rehearsal.md, 'Chaos'")
    p.add_argument("--fault-kinds", default=None, metavar="KINDS",
                   help=f"comma-separated kinds of fault to draw from (default: all of {', '.join(KINDS)})")


def chaos_overrides(overrides: list[str], out: Path) -> list[str]:
    """The overrides a run with faults needs: the orchestrator's journal in the run's folder, so an orchestrator
    that is killed and respawned ends its episode properly (unless the overrides set it already)."""
    if any(o.split("=", 1)[0].strip() == "orchestrator.state_dir" for o in overrides):
        return list(overrides)
    return [*overrides, f"orchestrator.state_dir={(out / 'state').resolve()}"]


def free_port() -> int:
    """A TCP port nothing listens on now, on the loopback interface."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def policy_on_free_port(policy: str, folder: Path) -> Path:
    """A copy of the policy config whose server is this machine's, on a free port (two rehearsals never meet)."""
    from ladder_ros.policies.factory import policy_config_path

    data = yaml.safe_load(policy_config_path(policy).read_text(encoding="utf-8"))
    server = data.setdefault("server", {})
    server["host"], server["port"] = "127.0.0.1", free_port()
    path = folder / f"{Path(str(policy)).stem}_rehearsal.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _check(args: argparse.Namespace) -> None:
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    if args.seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {args.seed}")
    for name in ("episode_timeout", "startup_timeout"):
        if not getattr(args, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be > 0 seconds, got {getattr(args, name)}")
    if args.inference_delay_ms is not None and not 0 <= args.inference_delay_ms <= 10000:
        raise ConfigError(f"--inference-delay-ms must be in [0, 10000] ms, got {args.inference_delay_ms}")
    if args.jitter_ms is not None and not 0 <= args.jitter_ms <= 10000:
        raise ConfigError(f"--jitter-ms must be in [0, 10000] ms, got {args.jitter_ms}")
    if args.variant:
        for variant in args.variant.split(","):
            Variant.parse(variant.strip())
        if "," in args.variant and not args.ab_pairs:
            raise ConfigError("--variant names one variant (a list names the cells of an --ab-pairs session)")
    if args.faults:
        from ladder_ros.evaluation.chaos import ChaosSchedule, parse_kinds

        ChaosSchedule(args.faults, args.seed, parse_kinds(args.fault_kinds))
        if getattr(args, "launch", None):
            raise ConfigError("--faults needs the graph's nodes as processes of this command (it kills and restarts "
                              "them): leave out --launch")


@dataclass
class RehearsalPlan:
    """Everything a rehearsal starts, checked: the graph's twin mode, its nodes' parameters and command lines."""

    graph: GraphDescription
    params_file: Path | None
    overrides: dict
    params: dict
    launches: list
    namespace: str


def plan_rehearsal(graph_name: str, out: Path, *, overrides: list[str] = (), params_file: str | None = None,
                   namespace: str | None = None, inference_delay_ms: float | None = None,
                   latency_model: str | None = None, jitter_ms: float | None = None,
                   execution: str | None = None, arms: Sequence[RehearsalArm] = ()) -> RehearsalPlan:
    """The rehearsal of ``graph_name`` writing into ``out``; ConfigError naming a bad value before anything starts.

    The policy and the rehearsal server get one copy of the policy config whose server is on a free
    loopback port, so two rehearsals on one machine never answer each other's requests. With ``arms`` (a
    blind A/B session, :mod:`ladder_ros.evaluation.rehearsal_ab`) the policy node serves each arm by name, from
    a copy of its config in ``OUT/policies``, answered by a rehearsal server of its own on a port of its own.
    """
    graph = load_graph(graph_name)
    if MODE not in graph.modes:
        raise ConfigError(f"graph {graph.name} has no {MODE} mode to rehearse on (it has: {', '.join(graph.modes)})")
    if arms:
        graph = with_rehearsal_servers(graph, MODE, len(arms))
    params_path = Path(params_file) if params_file else None
    if params_path is not None and not params_path.is_file():
        raise ConfigError("params file not found", source=str(params_path))
    parsed = parse_overrides(list(overrides))
    params = graph.node_parameters(MODE, params_path, parsed, namespace)  # every value checked first
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create it: {exc.strerror}") from None
    if arms:
        serve_arms(parsed, arms, params, out, free_port)
    else:
        policy = str(policy_on_free_port(params["policy"]["policy"], out / "logs"))
        parsed.setdefault("policy", {})["policy"] = policy
        parsed.setdefault("rehearsal_server", {})["policy"] = policy
    for arm in arms or [RehearsalArm("", "", None, None)]:
        server = parsed.setdefault(arm.server, {})
        if inference_delay_ms is not None and arm.delay_ms is None:
            server["inference_delay_ms"] = float(inference_delay_ms)
        if latency_model is not None:
            server["latency_model"] = latency_model
        if jitter_ms is not None:
            server["jitter_ms"] = float(jitter_ms)
    if execution is not None:
        parsed["policy"]["execution"] = execution
    recorder = parsed.setdefault("episode_recorder", {})
    recorder.setdefault("output_dir", str((out / "recordings").resolve()))
    recorder.setdefault("config_files", graph.config_files(params_path))
    params = graph.node_parameters(MODE, params_path, parsed, namespace)
    check_referenced_files(params)
    launches = graph.launches(MODE, params_path, parsed, namespace, work_dir=out / "logs")
    return RehearsalPlan(graph, params_path, parsed, params, launches,
                         graph.namespace if namespace is None else namespace.strip("/"))


def run(args: argparse.Namespace) -> int:
    from ladder_ros.bringup.session import GraphSession, launch_options
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import resolve_share_file

    _check(args)
    if args.ab_pairs or args.policies:
        return run_ab(args)
    out = Path(args.out)
    check_out_folder(out)
    overrides = chaos_overrides(args.overrides, out) if args.faults else args.overrides
    plan = plan_rehearsal(args.graph, out, overrides=overrides, params_file=args.params_file,
                          namespace=args.namespace, inference_delay_ms=args.inference_delay_ms,
                          latency_model=args.latency_model, jitter_ms=args.jitter_ms, execution=args.execution)
    graph, params, launches = plan.graph, plan.params, plan.launches
    robot = rehearsed_robot(params)
    suite = load_suite(resolve_share_file(params[robot.twin].get("suite") or params["orchestrator"]["suite"]))
    chosen = args.tasks if args.tasks is not None else DEFAULT_TASKS if robot.scored else UNSCORED_TASKS
    tasks = [suite.task(t.strip()) for t in chosen.split(",") if t.strip()]
    if not tasks:
        raise ConfigError("--tasks names no task")
    delay = params["rehearsal_server"]["inference_delay_ms"]
    latency = latency_line(params["rehearsal_server"])
    execution = execution_mode(params["policy"])
    server = "the scripted expert" if robot.scored else "a scripted sweep"
    print(f"ladder-ros rehearse: graph {graph.name} ({MODE}): the robot graph against {robot.what}, "
          f"{args.episodes} episodes, policy {params['policy']['policy']} ({execution} execution) served by "
          f"{server} at {latency} inference; loopback only; node logs in {out / 'logs'}", flush=True)
    chaos = None
    if args.faults:
        from ladder_ros.evaluation.chaos import chaos_plan

        chaos = chaos_plan(args.faults, args.seed, args.fault_kinds, params, out)
        print(f"chaos: {chaos.schedule.describe()}; each fault in {chaos.log.path}", flush=True)
    session = GraphSession(graph, launches, out / "logs", startup_timeout_s=args.startup_timeout,
                           **launch_options(args, graph, plan.params_file, plan.overrides, out / "logs", MODE))
    records: list[dict] = []
    with session, open(out / "episodes.jsonl", "a") as jsonl:
        rehearsal = Rehearsal(session, params, plan.namespace, chaos=chaos)
        print(f"graph up: {len(launches)} nodes; {rehearsal.prepare()}", flush=True)
        for k in range(args.episodes):
            task = tasks[k % len(tasks)]
            seed = args.seed + k
            record = rehearsal.episode(task.task_id, variant=args.variant, layout=seed % task.layouts, seed=seed,
                                       timeout_s=args.episode_timeout)
            record["rehearsal"] = {"inference_delay_ms": delay, "jitter_ms": params["rehearsal_server"]["jitter_ms"],
                                   "latency_model": params["rehearsal_server"]["latency_model"],
                                   "execution": execution, "camera": camera_line(params, robot)}
            records.append(record)
            jsonl.write(json.dumps(record) + "\n")
            jsonl.flush()
            _print_episode(record)
    summary = summarize(records)
    if chaos is not None:
        from ladder_ros.evaluation.chaos import chaos_summary, render_chaos

        summary["chaos"] = chaos_summary(chaos.log.records)
        print(render_chaos(summary["chaos"]))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if not summary["scored"]:
        print(f"success: none measured ({UNSCORED}); the timing below is what this rehearsal measures")
    for variant, s in summary["success"].items():
        print(f"{variant}: task success {s['task_success_rate']:.0%} (95% CI {s['ci95'][0]:.0%}-{s['ci95'][1]:.0%}), "
              f"subgoal progress {s['subgoal_progress']:.0%} over {s['episodes']} episodes")
    t = summary["timing"]
    if t:
        print(f"timing: control period p50 {t['control_period_ms']['p50']} ms, p99 {t['control_period_ms']['p99']} "
              f"ms (error p99 {t['period_error_p99_pct']} %), {t['idle_periods']} idle periods, largest gap "
              f"{t['max_action_gap_ms']} ms, observation to action p50/p95/p99 "
              f"{t['obs_to_action_age_ms']['p50']}/{t['obs_to_action_age_ms']['p95']}/"
              f"{t['obs_to_action_age_ms']['p99']} ms, inference p50/p95 {t['inference_ms']['p50']}/"
              f"{t['inference_ms']['p95']} ms")
    print(f"records: {out / 'episodes.jsonl'}, summary: {out / 'summary.json'}")
    return 0


def run_ab(args: argparse.Namespace) -> int:
    """``--ab-pairs N --policies NAME=SPEC,NAME=SPEC``: a blind policy A/B session with the panel's scripted operator,
    then the report (:mod:`ladder_ros.evaluation.rehearsal_ab`)."""
    from ladder_ros.bringup.graph import parse_overrides
    from ladder_ros.bringup.session import GraphSession
    from ladder_ros.core.suite import load_suite
    from ladder_ros.evaluation import rehearsal_ab as ab
    from ladder_ros.paths import resolve_share_file

    ab.check_ab_arguments(args)
    out = Path(args.out)
    check_out_folder(out)
    arms = ab.parse_arms(args.policies)
    plan = plan_rehearsal(args.graph, out, overrides=args.overrides, params_file=args.params_file,
                          namespace=args.namespace, inference_delay_ms=args.inference_delay_ms,
                          latency_model=args.latency_model, jitter_ms=args.jitter_ms, execution=args.execution,
                          arms=arms)
    params = plan.params
    made_of = load_graph(args.graph).node_parameters(  # the twin mode's own policy: what a preset is served as
        MODE, plan.params_file, parse_overrides(list(args.overrides)), args.namespace)["policy"]["policy"]
    robot = rehearsed_robot(params)
    if not robot.scored:
        raise ConfigError(f"a rehearsed blind A/B session needs a twin with a scene (its operator judges the "
                          f"outcomes); {robot.twin} has none")
    suite = load_suite(resolve_share_file(params[robot.twin].get("suite") or params["orchestrator"]["suite"]))
    tasks = [suite.task(t.strip()) for t in (args.tasks or DEFAULT_TASKS).split(",") if t.strip()]
    variants = [v.strip() for v in (args.variant or params["orchestrator"]["variant"]).split(",") if v.strip()]
    session_plan = ab.write_session_plan(out, arms, tasks, args.ab_pairs, seed=args.seed, order_seed=args.order_seed,
                                         variants=variants)
    execution = execution_mode(params["policy"])
    print(f"ladder-ros rehearse: graph {plan.graph.name} ({MODE}): a blind A/B session of {len(session_plan.pairs)} "
          f"pairs between {len(arms)} policies on {robot.what}, each served by its own rehearsal server ({execution} "
          f"execution); which policy runs as A or B stays sealed until the session closes; plan "
          f"{out / ab.PLAN_FILE}; loopback only; node logs in {out / 'logs'}", flush=True)
    secrets = ab.arm_secrets(arms, params)
    extra = {"rehearsal": {"latency_model": params[ab.SERVER]["latency_model"],
                           "jitter_ms": params[ab.SERVER]["jitter_ms"], "execution": execution,
                           "camera": camera_line(params, robot)}}
    session = GraphSession(plan.graph, plan.launches, out / "logs", startup_timeout_s=args.startup_timeout)
    with session, open(out / "episodes.jsonl", "a") as jsonl:
        rehearsal = Rehearsal(session, params, plan.namespace)
        node, operator = ab.open_panel(session, plan.namespace, out, session_plan)
        rehearsal.client = ab.PanelStarts(session.client, operator)  # each start is the operator's, on the panel
        try:
            operator.say(f"graph up: {len(plan.launches)} nodes; {rehearsal.prepare()}; the operator at "
                         f"{operator.shows}")
            records = ab.run_session(rehearsal, operator, session_plan, timeout_s=args.episode_timeout, jsonl=jsonl,
                                     extra=extra, secrets=secrets)
        finally:
            ab.close_panel(session, node, operator)
    counted = [{**r, "variant": f"{r.get('policy')}/{r.get('variant')}"} for r in records if not r["ab"]["void"]]
    found = ab.conclude(out, session_plan, arms, params, records, operator, secrets, summarize(counted), made_of)
    if found:
        raise LadderError(f"the operator could see {', '.join(found)} while the session was open "
                          f"({out / ab.TRANSCRIPT_FILE})")
    return 0


def latency_line(server: dict) -> str:
    """The rehearsal server's inference time in words (its parameters)."""
    from ladder_ros.instruments.rehearsal.server import InferenceLatency

    return InferenceLatency(server["latency_model"], server["inference_delay_ms"], server["jitter_ms"]).describe()


def execution_mode(policy_params: dict) -> str:
    """How the policy node runs chunks on the wall clock: its parameter, else its policy config's mode."""
    from ladder_ros.policies.factory import load_policy

    return policy_params.get("execution") or load_policy(policy_params["policy"]).execution.mode


def camera_line(params: dict, robot: RehearsedRobot) -> str:
    """The rehearsal's camera in a record: the twin's rendering, or the camera node's own (synthetic) frames."""
    if "camera_width" in params[robot.twin]:
        twin = params[robot.twin]
        return f"{twin['camera_width']}x{twin['camera_height']} at {twin['camera_fps']:g} Hz"
    camera = params["camera"]
    return f"{camera['backend']} {camera['width']}x{camera['height']} at {camera['fps']:g} Hz"


def summarize(records: list[dict]) -> dict:
    """Success (scored records only: a rate over unscored ones would be a made-up zero), timing, faults."""
    scored = [r for r in records if r.get("scored")]
    return {"scored": bool(scored), "success": summarize_episodes(scored),
            "timing": pooled_timing([r.get("timing") for r in records]),
            "faults": sum(1 for r in records if str(r.get("finish_reason", "")).startswith("aborted: robot fault"))}


def _print_episode(record: dict) -> None:
    t = record.get("timing") or {}
    age = (t.get("obs_to_action_age_ms") or {}).get("p50")
    outcome = (f"{'success' if record['success'] else 'failure'}, {record['subgoals_done']}/{record['horizon']} "
               "subgoals" if record.get("scored") else "unscored")
    print(f"  {record['episode_id']}: {record['task_id']} ({record['variant']}): {outcome}, "
          f"{record['steps_used']}/{record['budget_steps']} steps, {record['verification_queries']} queries, "
          f"{record['finish_reason']}; {t.get('applied_actions', 0)} actions, {t.get('idle_periods', 0)} idle "
          f"periods, observation to action p50 {age} ms, {record['wall_s']:.1f} s", flush=True)
    for fault in record.get("chaos") or []:
        print(f"    fault {fault['kind']}{' ' + fault['target'] if fault.get('target') else ''}: {fault['outcome']}",
              flush=True)


class Rehearsal:
    """The operator of one rehearsal: arms, homes, runs episodes, ends one whose arm faults, recovers.

    With ``chaos`` (a :class:`~ladder_ros.evaluation.chaos.ChaosPlan`) each episode also gets its seeded faults
    (:class:`~ladder_ros.evaluation.chaos.ChaosRunner`), and each fault's record goes into the episode's.
    """

    def __init__(self, session, params: dict, namespace: str, chaos=None):
        from ladder_ros.core.presets import get_preset
        from ladder_ros.evaluation.rehearsal_observer import RehearsalObserver

        self.session, self.client, self.executor = session, session.client, session.executor
        self.robot = rehearsed_robot(params)
        self.observer = RehearsalObserver(namespace=namespace,
                                          aperture_joint=params[self.robot.driver]["aperture_joint"])
        self.executor.add_node(self.observer)
        self.home_joints = self.robot.home_joints(params)
        self.period_s = 1.0 / get_preset(params["orchestrator"]["preset"]).control_rate_hz
        self.excused: set[str] = set()  # nodes down on purpose now (a policy server killed by the chaos runner)
        self.chaos = None if chaos is None else self._chaos_runner(chaos)

    def _chaos_runner(self, plan):
        from ladder_ros.evaluation.chaos import ChaosEndpoints, ChaosRunner

        observer = self.observer
        return ChaosRunner(plan, endpoints=ChaosEndpoints(observer), processes=self.session.processes,
                           excused=self.excused, tags=lambda episode_id: len(observer.tags.get(episode_id, [])),
                           abort=observer.abort,
                           spin=lambda condition, timeout_s, what: self._spin_until(self.executor, condition,
                                                                                    timeout_s, what),
                           armed=lambda: observer.safety.get("armed") == "true")

    def check_alive(self) -> None:
        """Every node of the graph runs, but those down on purpose (:attr:`excused`); NodeDied names one that
        is not."""
        processes = self.session.processes
        if not self.excused:
            processes.check_alive()
            return
        from ladder_ros.bringup.up import NodeDied

        dead = {name: code for name, code in processes.dead().items() if name not in self.excused}
        if dead:
            name, code = next(iter(dead.items()))
            raise NodeDied(f"node {name} exited with code {code}{processes.last_error(name)}")

    def _spin_until(self, executor, condition, timeout_s, what):
        self.client.spin_until(executor, condition, timeout_s, what, self.check_alive)

    def prepare(self) -> str:
        """Arm the driver and send the arm home, as the operator does before the first episode."""
        return f"armed ({self._arm_and_home()}), the arm at home"

    def _arm_and_home(self, attempts: int = 3) -> str:
        """Arm, then home; a fault the driver raises in between (a joint it saw lag on a loaded machine) disarms
        it and the home is refused: as an operator does, recover and try again, at most ``attempts`` times,
        saying each time why (the run ends with every reason when the arm never gets home)."""
        observer, reasons = self.observer, []
        for _ in range(attempts):
            if observer.fault:
                fault = observer.fault
                reasons.append(f"fault {fault!r}, recovered: {observer.recover(self.executor, self._spin_until)}")
                print(f"ladder-ros rehearse: the driver faulted before the arm was home ({fault}); recovered",
                      flush=True)
            armed = observer.arm(self.executor, self._spin_until)
            try:
                observer.home(self.executor, self._spin_until, self.home_joints)
                return armed
            except LadderError as exc:
                reasons.append(str(exc))
                try:  # a refused home: the driver's safety state says why once it is out
                    self._spin_until(self.executor, lambda: bool(observer.fault), 5.0, "the driver's fault")
                except LadderError:
                    pass
        raise LadderError(f"the arm did not get home in {attempts} attempts: {'; '.join(reasons)}")

    def episode(self, task_id: str, *, variant: str, layout: int, seed: int, timeout_s: float,
                during: Callable[[str], None] | None = None, **start: str) -> dict:
        """One episode with its timing and the twin's score; an arm fault ends it with the driver's reason.

        ``during(episode_id)`` runs at every turn of the wait (a benchmark's e-stop, a test's fault), before
        the fault check. ``start``: the episode's kind, start and start_after (a reset of ``task_id``'s scene, or
        an episode that continues an earlier one's scene; :class:`~ladder_ros.messages.EpisodeCommand`).
        """
        client, observer, chaos = self.client, self.observer, self.chaos
        episode_id = client.start_episode(task_id, variant=variant, layout=layout, seed=seed, **start)
        aborted: list[str] = []
        if chaos is not None:
            from ladder_ros.evaluation.chaos import episode_key

            is_reset = start.get("kind") == RESET_EPISODE  # a reset draws its own faults, apart from its task's
            chaos.begin(episode_id, episode_key(reset_task_id(task_id) if is_reset else task_id, variant, layout,
                                                seed))

        def check() -> None:
            self.check_alive()
            if chaos is not None:
                chaos.during(episode_id)
            if during is not None:
                during(episode_id)
            running = client.status is not None and client.status.episode_id == episode_id \
                and client.status.state == RUNNING
            if running and observer.fault and not aborted:
                aborted.append(f"robot fault: {observer.fault}")
                observer.abort(episode_id, aborted[0])

        try:
            outcome = client.wait_until_over(self.executor, episode_id, timeout_s, check)
        except LadderError as exc:
            if chaos is not None:
                chaos.interrupted(episode_id, exc)
            raise
        record = dict(outcome.result)
        if chaos is not None:
            chaos.end(episode_id, record)  # the faults undone (server back, e-stop released), each one's outcome
        if self.robot.scored and (record.get("events") or record.get("kind") != RESET_EPISODE):
            self._score(record, episode_id)
        elif self.robot.scored:  # a reset with nothing to move: it ended before its first step, nothing to score
            record["score_source"] = UNSCORED
        else:
            record["score_source"] = UNSCORED
            record["twin"] = {"franky_sim": dict(observer.simulator)}  # its lag behind the wall clock
        status = client.status
        tags = observer.tags.get(episode_id, [])
        end_ns = max((t.stamp_ns for t in tags), default=status.origin_ns) + int(self.period_s * 1e9)
        record["timing"] = episode_timing(observer.commands_between(status.origin_ns, end_ns), tags, self.period_s)
        self._ready_for_next(record)
        return record

    def _score(self, record: dict, episode_id: str) -> None:
        """The twin's score of the episode into the record (it scores once the orchestrator's last decision is out;
        the record may have left first)."""
        observer = self.observer
        try:
            self._spin_until(self.executor, lambda: episode_id in observer.scores, SCORE_WAIT_S,
                             f"the twin's score of {episode_id}")
        except LadderError as exc:
            print(f"ladder-ros rehearse: {exc}: the record stays unscored", flush=True)
        score = observer.scores.get(episode_id)
        if score is not None and not record.get("scored"):
            record.update(score_fields(score, record.get("steps_used", 0)))
            record["scored"] = True
            record["score_source"] = f"{self.robot.twin} (sim/episode_score)"
        record["twin"] = (score or {}).get("twin", {})

    def _ready_for_next(self, record: dict) -> None:
        """The arm recovered if it faulted, armed, and home (the driver homes an armed arm after each episode)."""
        observer = self.observer
        if observer.fault:
            record["recovery"] = observer.recover(self.executor, self._spin_until)
        if observer.safety.get("armed") == "true":
            def home_or_fault() -> bool:
                return bool(observer.fault) or (observer.joints is not None and bool(np.allclose(
                    observer.joints, self.home_joints, atol=0.01)))

            try:
                self._spin_until(self.executor, home_or_fault, 30.0, "the arm home after the episode")
                if not observer.fault:
                    return
            except LadderError:
                pass  # not home: arm (a no-op when armed) and home again below
        self._arm_and_home()
