"""A graph brought up as processes plus an episode client in this process (``run``, ``parity``, benchmarks).

The nodes start either one process each, as ``ladder-ros up`` starts them, or through ``ros2 launch
ladder_ros FILE`` (:class:`LaunchedGraph`), as on a robot. The client joins the graph in the same
network-safe environment (same claimed domain id) as the node processes; rclpy is imported only
after that environment is in place.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from ladder_ros.bringup.graph import GraphDescription, NodeLaunch
from ladder_ros.bringup.parent_guard import guarded
from ladder_ros.bringup.up import DEFAULT_STOP_TIMEOUT_S, GraphProcesses, NodeDied
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.runtime.process_exit import ros_teardown_deadline
from ladder_ros.ros_env import apply_network_safe_environment


RECORDER_WAIT_MIN_S = 10.0  # at least this long for the recorder to match the graph once the nodes are up (s)
# A client's ROS 2 teardown takes well under a second; past this it waits on a middleware deadlock (see
# ladder_ros.runtime.process_exit).
RELEASE_DEADLINE_S = 30.0
STATUS_FOLLOWERS = frozenset({"sim_bridge", "policy", "gripper_trigger", "episode_recorder", "widowx_driver",
                              "franka_driver", "widowx_twin", "rehearsal_server"})


class GraphSession:
    """Start the nodes, wait until they listen, run episodes through the client, stop everything.

    With ``launch_file`` the nodes are started by ``ros2 launch ladder_ros <launch_file>
    <launch_arguments>``; ``launches`` then only says which nodes to wait for.
    """

    def __init__(self, graph: GraphDescription, launches: list[NodeLaunch], log_dir: Path,
                 startup_timeout_s: float = 60.0, launch_file: str | None = None,
                 launch_arguments: Sequence[str] = ()):
        self.graph = graph
        self.launches = launches
        self.log_dir = log_dir
        self.startup_timeout_s = startup_timeout_s
        self.launch_file = launch_file
        self.launch_arguments = list(launch_arguments)
        self.processes: GraphProcesses | LaunchedGraph | None = None
        self.client: Any = None
        self.executor: Any = None

    def __enter__(self) -> "GraphSession":
        env = apply_network_safe_environment(os.environ)
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        from ladder_ros.bringup.client import EpisodeClient

        if self.launch_file is None:
            self.processes = GraphProcesses(self.launches, env, self.log_dir)
        else:
            self.processes = LaunchedGraph(self.launch_file, self.launch_arguments, env, self.log_dir)
        self.processes.start()
        try:
            # Ctrl-C is a KeyboardInterrupt here (not a context shut down under the client), so the
            # caller can stop the graph in order and still hear the interrupted episode's final status.
            rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
            self.client = EpisodeClient(namespace=self.graph.namespace)
            self.executor = SingleThreadedExecutor()
            self.executor.add_node(self.client)
            # Nodes that subscribe to the episode status, plus this client.
            followers = sum(1 for launch in self.launches if launch.executable in STATUS_FOLLOWERS)
            deadline = time.monotonic() + self.startup_timeout_s
            status_topic = self.client.resolve_topic_name("episode/status")
            while self.client.count_subscribers(status_topic) < followers + 1 or self.client.status is None:
                self.processes.check_alive()
                if time.monotonic() > deadline:
                    raise LadderError(f"the graph did not come up within {self.startup_timeout_s:.0f} s "
                                      f"(logs: {self.log_dir})")
                self.executor.spin_once(timeout_sec=0.1)
            if any(launch.executable == "episode_recorder" for launch in self.launches):
                self._wait_for_recorder(max(RECORDER_WAIT_MIN_S, deadline - time.monotonic()))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_for_recorder(self, timeout_s: float) -> None:
        """Until the recorder hears every publisher, so the first episode's bag misses none of its first
        messages; past ``timeout_s`` the graph runs anyway, with a warning (a recording is not the episode)."""
        from ladder_ros.bringup.client import EpisodeTimeout

        try:
            self.client.wait_for_recorder(self.executor, timeout_s)
        except EpisodeTimeout as exc:
            self.client.get_logger().warning(f"{exc}: the first episode's bag may miss its first messages")

    def run_episode(self, task_id: str, *, variant: str, layout: int, seed: int, timeout_s: float = 900.0,
                    **start: str):
        """One episode through the graph (``start``: its kind, start and start_after); a node that dies meanwhile
        ends it with NodeDied."""
        assert self.client is not None and self.processes is not None
        return self.client.run_episode(self.executor, task_id, variant=variant, layout=layout, seed=seed,
                                       timeout_s=timeout_s, check=self.processes.check_alive, **start)

    def stop(self, final_status_wait_s: float = 5.0):
        """Stop the graph, the orchestrator first; the final status of an episode it interrupted, or None.

        The orchestrator ends a running episode as interrupted before it exits; the client listens
        for that status until the other nodes are stopped too.
        """
        if self.processes is None:
            return None
        client, executor = self.client, self.executor
        outcome = []

        def collect_final_status() -> None:
            if client is None or client.current is None:
                return
            try:
                outcome.append(client.wait_until_over(executor, client.current, final_status_wait_s))
            except LadderError:
                pass  # no final status came (the orchestrator was gone already): the recorder has the record

        self.processes.stop(between=collect_final_status)
        self.processes = None
        return outcome[0] if outcome else None

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._release_ros_within_deadline()

    def _release_ros_within_deadline(self) -> None:
        """Destroy the client node and shut rclpy down; if the middleware deadlocks there (Fast DDS 3.2, see
        :mod:`ladder_ros.runtime.process_exit`), the process ends with status 1 after ``RELEASE_DEADLINE_S``."""
        import rclpy

        with ros_teardown_deadline(RELEASE_DEADLINE_S):
            if self.client is not None:
                self.client.destroy_node()
                self.client = None
            rclpy.try_shutdown()


def add_launch_argument(parser) -> None:
    parser.add_argument("--launch", metavar="FILE", default=None,
                        help="start the graph with `ros2 launch ladder_ros FILE` (e.g. sim_orchestrator.launch.py), as "
                             "on a robot, instead of one process per node")


def launch_options(args, graph: GraphDescription, params_file: Path | None,
                   overrides: Mapping[str, Mapping[str, Any]], work_dir: Path, mode: str = "sim") -> dict[str, Any]:
    """The :class:`GraphSession` keywords for ``--launch FILE`` (none without it), checked before anything starts."""
    from ladder_ros.bringup.launch_description import session_launch_arguments

    if not args.launch:
        return {}
    ros2_executable()
    return {"launch_file": args.launch, "launch_arguments": session_launch_arguments(
        graph, params_file, overrides, args.namespace, work_dir, mode)}


class LaunchedGraph:
    """``ros2 launch ladder_ros FILE ARGS`` as the processes of a :class:`GraphSession`.

    It runs in a process group of its own with its output in ``<log_dir>/launch.log``; stopping it
    is a terminal's Ctrl-C (SIGINT to the whole group), then SIGKILL for whatever is left after the
    stop timeout. A node that dies, or launch itself exiting, is a :class:`NodeDied`.
    """

    def __init__(self, launch_file: str, arguments: Sequence[str], env: Mapping[str, str], log_dir: Path):
        self.command = [ros2_executable(), "launch", "ladder_ros", launch_file, *arguments]
        self.env = launch_environment(env)
        self.log_path = Path(log_dir) / "launch.log"
        self.process: subprocess.Popen | None = None
        self._log: Any = None
        self._log_offset = 0
        self._died: tuple[str, int] | None = None
        self._last_error = ""

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        # guarded: the graph stops (launch's SIGINT) if this program is killed without stopping it
        self.process = subprocess.Popen(guarded(self.command), env=self.env, stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def check_alive(self) -> None:
        assert self.process is not None
        self._read_log()
        if self._died:
            name, code = self._died
            raise NodeDied(f"node {name} died under ros2 launch (exit code {code}); log: {self.log_path}")
        if self.process.poll() is not None:
            self._read_log()
            raise NodeDied(f"ros2 launch exited with code {self.process.returncode}"
                           f"{': ' + self._last_error if self._last_error else ''} (log: {self.log_path})")

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, between=None) -> dict[str, int]:
        """Ctrl-C to the whole group, as a terminal sends it; returns launch's exit code.

        ``between`` runs right after the Ctrl-C, while the nodes shut down (every node gets it at once
        here, so the orchestrator's final status of an interrupted episode comes while launch waits).
        """
        assert self.process is not None
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGINT)
            if between is not None:
                between()
            try:
                # launch itself escalates a node that does not stop to SIGTERM after 5 s, SIGKILL after 10 s.
                self.process.wait(timeout=timeout_s + 10.0)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.process.pid, signal.SIGKILL)  # nothing of the group outlives the session
        self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return {"ros2 launch": self.process.returncode}

    def _read_log(self) -> None:
        """Scan the log lines written since the last call for a dead node and the last error."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                chunk = log.read()
        except OSError:
            return
        complete = chunk.rfind(b"\n") + 1
        self._log_offset += complete
        for line in chunk[:complete].decode(errors="replace").splitlines():
            died = _DIED.search(line)
            if died and self._died is None:
                self._died = (died.group(1), int(died.group(2)))
            if "ERROR" in line or "error:" in line:
                self._last_error = line.strip()


# launch's line for a node that exited on its own with a non-zero code (not after a stop request).
_DIED = re.compile(r"\[ERROR\] \[([A-Za-z0-9_]+)-\d+\]: process has died \[pid \d+, exit code (-?\d+)")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def ros2_executable() -> str:
    """The ``ros2`` command: beside this Python (the venv ``scripts/setup.sh`` builds), else on PATH."""
    beside = Path(sys.executable).parent / "ros2"
    if beside.is_file():
        return str(beside)
    found = shutil.which("ros2")
    if found is None:
        raise ConfigError("ros2 launch is not installed: scripts/setup.sh installs it into .venv from "
                          "../shared/vendor/ros2_launch; on a robot, source the ROS 2 setup first")
    return found


def launch_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this Python's prefix on ``AMENT_PREFIX_PATH`` when ladder_ros is indexed there.

    ``scripts/setup.sh`` registers the package in the venv's ament index (as a colcon install does in
    its prefix); activating the venv adds it to the path, this does the same for a child process.
    """
    env = dict(env)
    prefix = sys.prefix
    marker = Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / "ladder_ros"
    paths = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if marker.is_file() and prefix not in paths:
        env["AMENT_PREFIX_PATH"] = os.pathsep.join([prefix, *paths])
    return env
