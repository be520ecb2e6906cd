"""``ladder-ros up GRAPH``: start a graph's nodes as processes where ``ros2 launch`` is not installed.

Each node is ``python -m ladder_ros.nodes.<executable> --ros-args -r __node:=… -r __ns:=…
--params-file … -p clock_mode:=…`` (what the launch files start on a robot, from the same graph
description and params file). Before anything starts, the description and the params file are
checked against every node's parameter specs: a bad value is one error line and exit 2, with
nothing left running. The nodes run in the network-safe environment (:mod:`ladder_ros.ros_env`)
unless ``--allow-network`` is given (a multi-machine robot setup).

Ctrl-C, SIGTERM or SIGHUP (a closed terminal) stops the graph: the orchestrator first (it ends a
running episode as interrupted, with its final status and record), then every other node, each
with SIGINT; nodes that have not exited after ``--stop-timeout`` seconds are killed. When any node
dies on its own, the others are stopped and ``up`` exits non-zero naming it. Whatever kills ``up``
(even SIGKILL), its nodes get SIGTERM from the kernel (``PR_SET_PDEATHSIG``,
:func:`ladder_ros.runtime.supervision.die_with_supervisor`), so none is left running, and the temporary
folder with the generated params file goes with ``up`` (or with the next bringup, after a SIGKILL).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO, Mapping, Sequence

from ladder_ros.bringup.graph import (
    GraphDescription,
    NodeLaunch,
    check_referenced_files,
    load_graph,
    make_work_dir,
    parse_overrides,
)
from ladder_ros.core.errors import ConfigError, LadderError, did_you_mean
from ladder_ros.runtime.supervision import SUPERVISOR_PID_ENV
from ladder_ros.ros_env import network_safe_environment, with_ros_library_path

DEFAULT_STOP_TIMEOUT_S = 10.0
# Stopped first: the orchestrator's last word (an interrupted episode's final status) must reach the recorder.
STOP_FIRST = ("orchestrator",)


class NodeDied(LadderError):
    """A node of the graph exited while the graph was meant to run."""


class GraphProcesses:
    """The processes of one brought-up graph."""

    def __init__(self, launches: Sequence[NodeLaunch], env: Mapping[str, str], log_dir: Path | None = None):
        self.launches = list(launches)
        # The nodes die with this process (PR_SET_PDEATHSIG): start_node must run on the thread that
        # lives as long as the graph (the main thread), since the kernel ties the signal to it.
        self.env = {**env, SUPERVISOR_PID_ENV: str(os.getpid())}
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, BinaryIO] = {}  # one open log per node: a restart closes the dead process's

    def start(self) -> None:
        for launch in self.launches:
            self.start_node(launch.name)

    def start_node(self, name: str) -> None:
        """(Re)start one node, e.g. after it was killed."""
        launch = next(candidate for candidate in self.launches if candidate.name == name)
        if name in self.processes and self.processes[name].poll() is None:
            raise LadderError(f"node {name} is still running")
        stdout = stderr = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            previous = self._logs.pop(name, None)
            if previous is not None:
                previous.close()
            log = self._logs[name] = open(self.log_dir / f"{launch.name}.log", "ab")
            stdout, stderr = log, subprocess.STDOUT
        # Own process group: a terminal's Ctrl-C reaches only `up`, which forwards it in order.
        self.processes[name] = subprocess.Popen(launch.command(), env=self.env, stdout=stdout, stderr=stderr,
                                                start_new_session=True)

    def dead(self) -> dict[str, int]:
        """Nodes that have exited, with their exit codes."""
        return {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}

    def check_alive(self) -> None:
        dead = self.dead()
        if dead:
            name, code = next(iter(dead.items()))
            raise NodeDied(f"node {name} exited with code {code}{self.last_error(name)}")

    def last_error(self, name: str) -> str:
        """': <the node's last error line>' from its log (empty without a log folder)."""
        if self.log_dir is None:
            return ""
        try:
            lines = (self.log_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        errors = [line for line in lines if "error" in line.lower()]
        return f": {(errors or lines or [''])[-1].strip()}"

    def signal(self, name: str, sig: int) -> None:
        process = self.processes[name]
        if process.poll() is None:
            process.send_signal(sig)

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, between=None) -> dict[str, int]:
        """SIGINT the orchestrator, then every other node; wait, SIGKILL the rest; returns each node's exit code.

        ``between()`` runs once the orchestrator is down and before the others are stopped.
        """
        deadline = time.monotonic() + timeout_s
        executables = {launch.name: launch.executable for launch in self.launches}
        first = [name for name in self.processes if executables.get(name) in STOP_FIRST]
        for n, group in enumerate((first, [name for name in self.processes if name not in first])):
            if n == 1 and between is not None:
                between()
            for name in group:
                self.signal(name, signal.SIGINT)
            for name in group:
                try:
                    self.processes[name].wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.processes[name].kill()
                    self.processes[name].wait()
        for log in self._logs.values():
            log.close()
        self._logs = {}
        return {name: p.returncode for name, p in self.processes.items()}

    def __enter__(self) -> "GraphProcesses":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def prepare(graph_name: str, mode: str, params_file: str | None, overrides: list[str],
            namespace: str | None, work_dir: Path | None = None) -> tuple[GraphDescription, list[NodeLaunch]]:
    """Load and check everything a bringup needs; raises ConfigError before anything starts.

    The recorder keeps the graph description and the params file verbatim (``config_files``)
    unless an override says otherwise.
    """
    graph = load_graph(graph_name)
    params = Path(params_file) if params_file else None
    if params is not None and not params.is_file():
        raise ConfigError("params file not found", source=str(params))
    parsed = parse_overrides(overrides)
    if "episode_recorder" in graph.mode(mode).nodes:
        parsed.setdefault("episode_recorder", {}).setdefault("config_files", graph.config_files(params, mode))
    check_referenced_files(graph.node_parameters(mode, params, parsed, namespace))
    return graph, graph.launches(mode, params, parsed, namespace, work_dir=work_dir)


def add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="graph name (config/graphs/NAME.yaml) or path to a graph description")
    parser.add_argument("--mode", default="sim", choices=("sim", "real", "twin"),
                        help="sim: the sim bridge in lockstep; real: the robot's drivers on the wall clock; twin: the "
                             "robot graph on the wall clock against a simulated robot (the dress rehearsal, "
                             "docs/rehearsal.md)")
    parser.add_argument("--params-file", default=None, help="ROS params YAML replacing the graph's own")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NODE.PARAM=VALUE",
                        help="override one node parameter (repeatable)")
    parser.add_argument("--namespace", default=None, help="replace the graph's namespace")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("up", help="start a graph's nodes as processes (no ros2 launch needed)",
                              description=__doc__.split("\n\n")[0])
    add_graph_arguments(p)
    p.add_argument("--allow-network", action="store_true",
                   help="use this shell's ROS network settings instead of loopback only (multi-machine robot)")
    p.add_argument("--log-dir", default=None, help="write each node's output to DIR/NODE.log instead of here")
    p.add_argument("--skip", action="append", default=[], metavar="NODE",
                   help="do not start this node: it runs elsewhere (a driver on the robot's own computer, a camera "
                        "node of another package); repeatable")
    p.add_argument("--stop-timeout", type=float, default=DEFAULT_STOP_TIMEOUT_S,
                   help="seconds nodes get to exit after Ctrl-C before they are killed")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.stop_timeout > 0:
        raise ConfigError(f"--stop-timeout must be > 0 seconds, got {args.stop_timeout}")
    work_dir = make_work_dir()
    try:
        return _run(args, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def skip_nodes(graph: GraphDescription, mode: str, launches: list[NodeLaunch], skip: Sequence[str]) -> list[NodeLaunch]:
    """``launches`` without the nodes named in ``skip`` (nodes that run elsewhere); an unknown name is an error."""
    nodes = graph.mode(mode).nodes
    for name in skip:
        if name not in nodes:
            raise ConfigError(f"--skip {name}: no node {name!r} in mode {mode} of graph {graph.name}"
                              f"{did_you_mean(name, nodes)}; nodes: {', '.join(nodes)}")
    kept = [launch for launch in launches if launch.name not in skip]
    if not kept:
        raise ConfigError(f"--skip leaves no node of graph {graph.name} to start")
    return kept


def _run(args: argparse.Namespace, work_dir: Path) -> int:
    graph, launches = prepare(args.graph, args.mode, args.params_file, args.overrides, args.namespace, work_dir)
    launches = skip_nodes(graph, args.mode, launches, args.skip)
    env = dict(with_ros_library_path(dict(os.environ))) if args.allow_network else network_safe_environment()
    requires = graph.mode(args.mode).requires
    print(f"ladder-ros up: graph {graph.name} ({args.mode}), namespace /{(args.namespace or graph.namespace)}, "
          f"ROS_DOMAIN_ID {env.get('ROS_DOMAIN_ID', '0')}"
          + ("" if args.allow_network else ", loopback only"), flush=True)
    if requires:
        print(f"ladder-ros up: this mode also needs: {'; '.join(requires)}", flush=True)
    stop_requested = []

    def on_signal(signum, _frame) -> None:
        stop_requested.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    graph_processes = GraphProcesses(launches, env, Path(args.log_dir) if args.log_dir else None)
    try:
        graph_processes.start()
        print(f"ladder-ros up: started {', '.join(l.name for l in launches)}; Ctrl-C stops them", flush=True)
        while not stop_requested:
            dead = graph_processes.dead()
            if dead:
                name, code = next(iter(dead.items()))
                print(f"ladder-ros up: error: node {name} exited with code {code}"
                      f"{graph_processes.last_error(name)}; stopping the graph", file=sys.stderr, flush=True)
                graph_processes.stop(args.stop_timeout)
                return 1
            time.sleep(0.1)
        codes = graph_processes.stop(args.stop_timeout)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if any(p.poll() is None for p in graph_processes.processes.values()):
            graph_processes.stop(args.stop_timeout)
    failed = {n: c for n, c in codes.items() if c not in (0, -signal.SIGINT)}
    if failed:
        print(f"ladder-ros up: nodes did not stop cleanly: {failed}", file=sys.stderr)
        return 1
    print("ladder-ros up: all nodes stopped", flush=True)
    return 0
