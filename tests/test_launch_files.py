"""The launch files, run for real: `ros2 launch ladder_ros …` as a user types it, loopback only.

``scripts/setup.sh`` installs ``ros2 launch`` into the venv and registers the package in its ament
index (share/ and lib/ladder_ros/, as colcon does). The launch processes inherit this test session's
network-safe environment (discovery range LOCALHOST, its own ROS_DOMAIN_ID, the loopback Fast DDS
profile) and ``scripts/test.sh`` runs them inside a loopback-only network namespace.

* ``sim_orchestrator.launch.py`` brings the WidowX graph up and ``ladder-ros parity --launch`` runs
  episodes through ``episode/command``: every one identical to the in-process reference loop.
* ``widowx_orchestrator.launch.py use_sim:=false`` and ``franka_orchestrator.launch.py`` end the whole graph,
  with the reason, when a node it cannot run without (the driver here, lacking its arm) exits;
  ``robot:=twin`` starts the WidowX graph against the twin, and the Franka graph against franky-sim (the dress
  rehearsal), and stops it cleanly.
* A Ctrl-C mid-episode (SIGINT to the whole process group, as a terminal sends it) stops every
  process cleanly and leaves a complete recording.
* Bad arguments end the launch with one clear line before any node starts.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ladder_ros.bringup.graph import load_graph
from ladder_ros.bringup.launch_description import (
    launch_arguments,
    localhost_environment,
    plan_launch,
    write_params_file,
)
from ladder_ros.bringup.session import launch_environment
from ladder_ros.core.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
ROS2 = Path(sys.executable).parent / "ros2"
INDEXED = Path(sys.prefix, "share", "ament_index", "resource_index", "packages", "ladder_ros").is_file()
HAS_LAUNCH = ROS2.is_file() and INDEXED and importlib.util.find_spec("launch_ros") is not None
needs_launch = pytest.mark.skipif(not HAS_LAUNCH, reason="ros2 launch is not installed in this venv (scripts/setup.sh "
                                                         "installs it from ../shared/vendor/ros2_launch)")
NODE_EXIT_S = 20.0  # launch escalates a node that ignores SIGINT to SIGTERM after 5 s and SIGKILL after 10 s


# ---------------------------------------------------------------------------------------------
# The launch arguments and their check (plain Python, no launch needed)


def _defaults(graph, **flags):
    return {a.name: a.default for a in launch_arguments(graph, **flags)}


def test_robot_files_join_the_users_network_and_the_sim_file_stays_local():
    graph = load_graph("widowx")
    robot = {a.name: a for a in launch_arguments(graph, use_sim=False, localhost_only=False)}
    sim = {a.name: a for a in launch_arguments(graph, use_sim=True, localhost_only=True)}
    assert set(robot) == {"use_sim", "robot", "namespace", "params_file", "output_dir", "localhost_only", "log_level"}
    assert robot["robot"].default == "arm" and robot["robot"].choices == ("arm", "twin")
    franka = {a.name: a for a in launch_arguments(load_graph("franka"), use_sim=False, localhost_only=False)}
    assert franka["robot"].default == "arm" and "franky-sim" in franka["robot"].description  # its twin mode
    assert (robot["use_sim"].default, robot["localhost_only"].default) == ("false", "false")
    assert (sim["use_sim"].default, sim["localhost_only"].default) == ("true", "true")
    assert robot["use_sim"].choices == robot["localhost_only"].choices == ("true", "false")
    assert robot["namespace"].default == "widowx" and Path(robot["params_file"].default).is_file()
    assert all(len(a.description) > 25 for a in robot.values())


def test_the_check_of_the_arguments_names_the_bad_value(tmp_path):
    widowx, franka = load_graph("widowx"), load_graph("franka")
    sim = plan_launch(widowx, {**_defaults(widowx, use_sim=True, localhost_only=True), "output_dir": str(tmp_path)})
    assert (sim.mode, sim.clock_mode, sim.nodes[0]) == ("sim", "lockstep", "sim_bridge")
    assert sim.recording_dir == str(tmp_path)
    real = plan_launch(franka, _defaults(franka, use_sim=False, localhost_only=False))
    assert (real.clock_mode, real.environment, "sim_bridge" in real.nodes) == ("wall_clock", {}, False)
    assert "this mode also needs: Franka control box reachable over FCI" in real.summary()
    assert real.params_file.endswith("franka_params.yaml")
    # the Franka graph's params file follows the mode unless one is given: `use_sim:=true` on its robot file
    franka_defaults = _defaults(franka, use_sim=False, localhost_only=False)
    assert franka_defaults["params_file"] == ""
    franka_sim = plan_launch(franka, {**franka_defaults, "use_sim": "true"})
    assert (franka_sim.mode, franka_sim.clock_mode, franka_sim.nodes[0]) == ("sim", "lockstep", "sim_bridge")
    assert franka_sim.params_file.endswith("franka_sim_params.yaml")
    assert plan_launch(widowx, _defaults(widowx, use_sim=True, localhost_only=True)).params_file.endswith(
        "widowx_params.yaml")
    values = _defaults(widowx, use_sim=False, localhost_only=False)
    with pytest.raises(ConfigError, match="namespace: '9lives' is not a ROS namespace"):
        plan_launch(widowx, {**values, "namespace": "9lives"})
    with pytest.raises(ConfigError, match="missing.yaml: params file not found"):
        plan_launch(widowx, {**values, "params_file": str(tmp_path / "missing.yaml")})
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        plan_launch(widowx, {**values, "output_dir": str(tmp_path / "a_file")})
    twin = plan_launch(widowx, {**values, "robot": "twin"})
    assert (twin.mode, twin.clock_mode, twin.nodes[:2]) == ("twin", "wall_clock", ("widowx_twin", "rehearsal_server"))
    assert twin.localhost_only and "loopback only" in twin.summary()  # nothing the rehearsal runs needs another machine
    assert twin.mode_parameters["widowx_driver"]["interbotix_api"] == "twin"
    assert twin.mode_parameters["camera"] == {"backend": "twin"}
    with pytest.raises(ConfigError, match="robot:=twin is the wall-clock rehearsal"):
        plan_launch(widowx, {**values, "robot": "twin", "use_sim": "true"})
    params = tmp_path / "params.yaml"
    original = (REPO / "config" / "widowx_params.yaml").read_text()
    params.write_text(original.replace("decision_resend_s: 2.0", "decision_resend_s: -3.0"))
    with pytest.raises(ConfigError, match="parameter orchestrator.decision_resend_s: must be >= "):
        plan_launch(widowx, {**values, "params_file": str(params)})


def test_localhost_only_keeps_an_exported_domain_and_drops_remote_peers():
    changes = localhost_environment({"ROS_DOMAIN_ID": "42", "ROS_STATIC_PEERS": "192.168.1.20", "PATH": "/bin"})
    assert "ROS_DOMAIN_ID" not in changes  # kept as exported
    assert changes["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and changes["ROS_STATIC_PEERS"] == ""
    assert changes["FASTDDS_DEFAULT_PROFILES_FILE"].endswith("fastdds_localhost.xml")
    assert "ROS_DOMAIN_ID" not in localhost_environment({"ROS_DOMAIN_ID": "0"})  # exported: kept, as `up` keeps it
    claimed = localhost_environment({"PATH": "/bin"})  # none exported: a free one
    assert 1 <= int(claimed["ROS_DOMAIN_ID"]) <= 101


def test_overrides_for_a_launch_file_go_into_a_copy_of_its_params_file(tmp_path):
    from ladder_ros.bringup.graph import read_params_file
    from ladder_ros.bringup.launch_description import session_launch_arguments

    widowx = load_graph("widowx")
    arguments = session_launch_arguments(widowx, None, {"sim_bridge": {"render": False}, "episode_recorder": {
        "output_dir": "/tmp/rec", "config_files": ["x"]}}, None, tmp_path)
    merged = tmp_path / "widowx_launch_params.yaml"
    assert arguments == ["use_sim:=true", "localhost_only:=true", f"params_file:={merged}", "output_dir:=/tmp/rec"]
    sections = read_params_file(merged)
    assert sections["/**/sim_bridge"]["render"] is False and sections["/**/sim_bridge"]["image_size"] == 256
    assert widowx.node_parameters("sim", merged)["sim_bridge"]["render"] is False
    # a node without a section of its own gets one; the original file is untouched
    write_params_file(widowx.params_file, {"policy": {"noise": "off"}, "new_node": {"a": 1}}, "widowx",
                      tmp_path / "p.yaml")
    sections = read_params_file(tmp_path / "p.yaml")
    assert sections["/**/policy"]["noise"] == "off" and sections["/**/new_node"] == {"a": 1}
    assert read_params_file(widowx.params_file)["/**/policy"]["noise"] == "bridge_like"
    assert session_launch_arguments(widowx, None, {}, "robot2", tmp_path)[-1] == "namespace:=robot2"


def test_launch_files_import_their_body_from_the_package():
    for path in sorted((REPO / "launch").glob("*.py")):
        text = path.read_text()
        assert path.name.endswith(".launch.py") and "sys.path" not in text
        assert "from ladder_ros.bringup.graph_launch import graph_launch_description" in text


# ---------------------------------------------------------------------------------------------
# ros2 launch, for real


def _env(tmp_path: Path) -> dict[str, str]:
    env = launch_environment(os.environ)  # the session's network-safe settings, the venv on the ament path
    env["ROS_LOG_DIR"] = str(tmp_path / "ros_log")
    env["PYTHONUNBUFFERED"] = "1"
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):  # no VLM service is reachable from a test
        env.pop(key, None)
    return env


def ros2_launch(tmp_path: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """A launch that is expected to end by itself (bad arguments, -s, -p)."""
    return subprocess.run([str(ROS2), "launch", "ladder_ros", *args], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path)


class Launch:
    """``ros2 launch`` in a process group of its own, stopped like a terminal's Ctrl-C."""

    def __init__(self, tmp_path: Path, *args: str):
        self.log_path = tmp_path / "launch.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen([str(ROS2), "launch", "ladder_ros", *args], env=_env(tmp_path),
                                        stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        cwd=tmp_path, start_new_session=True)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def processes(self) -> list[int]:
        """Every live process of the launch's session (launch and its nodes)."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == self.process.pid and fields[0] != "Z":  # session id; not a zombie
                pids.append(int(stat.parent.name))
        return pids

    def node_pid(self, executable: str) -> int:
        """The process of node ``executable`` (launch runs ``lib/ladder_ros/<executable>``)."""
        for pid in self.processes():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(Path(arg.decode(errors="replace")).name == executable for arg in argv[:2]):
                return pid
        raise AssertionError(f"no {executable} process in the launch")

    def ctrl_c(self, timeout_s: float = NODE_EXIT_S + 30.0) -> int:
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=timeout_s)

    def close(self) -> None:
        if self.process.poll() is None or self.processes():
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self._log.close()


def assert_stopped_cleanly(launch: Launch, code: int, nodes: int, died: tuple[str, ...] = ()) -> None:
    """launch exited 0, ``nodes`` nodes report a clean finish, only ``died`` died, no traceback, nothing left."""
    log = launch.log
    assert code == 0, log[-3000:]
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
    assert "context is invalid" not in log, log[-3000:]  # nodes still log and publish while they close
    started = set(re.findall(r"\[INFO\] \[(\w+-\d+)\]: process started", log))
    finished = set(re.findall(r"\[INFO\] \[(\w+-\d+)\]: process has finished cleanly", log))
    assert len(finished) == nodes, (f"not finished cleanly: {sorted(started - finished)}", log[-3000:])
    assert sorted(re.findall(r"\[ERROR\] \[(\w+)-\d+\]: process has died", log)) == sorted(died), log[-3000:]
    assert launch.processes() == []


@pytest.fixture
def ros():
    import rclpy

    rclpy.init()
    try:
        yield rclpy
    finally:
        rclpy.try_shutdown()


def _client(namespace: str, *extra):
    from rclpy.executors import SingleThreadedExecutor

    from ladder_ros.bringup.client import EpisodeClient

    client = EpisodeClient(namespace=namespace)
    executor = SingleThreadedExecutor()
    for node in (client, *extra):
        executor.add_node(node)
    return client, executor


def wait_for_graph(launch: Launch, client, executor, followers: int, timeout_s: float = 120.0) -> None:
    """Until the orchestrator's latched status is here and ``followers`` nodes (plus the client) follow it."""
    topic = client.resolve_topic_name("episode/status")

    def check():
        assert launch.process.poll() is None, launch.log[-3000:]
    client.spin_until(executor, lambda: client.status is not None and client.count_subscribers(topic) >= followers + 1,
                      timeout_s, "the launched graph", check)


def launched_parity(tmp_path: Path, graph: str, launch_file: str, tasks: str, variants: str, seeds: str,
                    timeout_s: float) -> tuple[subprocess.CompletedProcess, str]:
    """``ladder-ros parity GRAPH --launch FILE``: its result once it succeeded with every episode identical, and the
    launch log, after checking that the graph came up in simulation, loopback only, and its six nodes ended cleanly."""
    pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
    result = subprocess.run(
        [sys.executable, "-m", "ladder_ros.cli", "parity", graph, "--launch", launch_file, "--tasks", tasks,
         "--variants", variants, "--seeds", seeds, "--set", "sim_bridge.render=false", "--out", str(tmp_path)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    log = (tmp_path / "logs" / "launch.log").read_text(errors="replace")
    assert result.returncode == 0, result.stdout + result.stderr + log[-3000:]
    episodes = len(tasks.split(",")) * len(variants.split(",")) * len(seeds.split(","))
    assert f"parity: {episodes}/{episodes} episodes identical" in result.stdout
    assert f"as ros2 launch ladder_ros {launch_file}" in result.stdout
    assert f"graph {graph} (sim, lockstep) in /{graph}" in log and "loopback only" in log
    assert len(re.findall(r"process has finished cleanly", log)) == 6 and "Traceback" not in log
    return result, log


@needs_launch
@pytest.mark.slow
def test_sim_launch_file_runs_episodes_identical_to_the_reference_loop(tmp_path):
    launched_parity(tmp_path, "widowx", "sim_orchestrator.launch.py", "kitchen_single_1,sorting_split_2",
                    "proprio_verifier,periodic_trigger", "3", timeout_s=900)
    assert len(list((tmp_path / "recordings").iterdir())) == 4


@needs_launch
@pytest.mark.slow
def test_the_franka_launch_file_in_simulation_runs_episodes_identical_to_the_reference_loop(tmp_path):
    launched_parity(tmp_path, "franka", "franka_orchestrator.launch.py", "counter_single_1", "proprio_verifier", "2",
                    timeout_s=600)
    # use_sim:=true with (a copy, for --set, of) the simulation's own params file
    assert "scripted_expert_franka" in (tmp_path / "logs" / "franka_launch_params.yaml").read_text()


# launch's line when a node the graph cannot run without exits (ladder_ros/bringup/graph_launch.py)
ENDED = re.compile(r"\[ERROR\] \[launch\]: Caught exception in launch \(see debug for traceback\): (\w+) exited with "
                   r"code (-?\d+): (.*); the graph cannot run without it, so every node is stopped")


@needs_launch
@pytest.mark.slow
@pytest.mark.parametrize("launch_file,namespace,refusals", [
    # Without Interbotix's API the WidowX driver refuses to start, and so does the policy node given the params
    # file's simulator-only expert; whichever exits first ends the graph.
    ("widowx_orchestrator.launch.py", "widowx", {"widowx_driver": "interbotix_xs_modules",
                                                 "policy": "cannot drive a robot"}),
    # No Franka answers at the loopback address: its driver refuses (the verifier, lacking a Gemini key, refuses
    # too, but the graph runs without a verifier's answers as it would without the network).
    ("franka_orchestrator.launch.py", "franka", {"franka_driver": "cannot connect to the Franka at 127.0.0.1"}),
])
def test_a_robot_launch_ends_the_graph_when_a_node_it_cannot_run_without_exits(
        tmp_path, launch_file, namespace, refusals):
    graph = load_graph(namespace)
    params = {name: {"backend": "fake"} for name in graph.mode("real").nodes
              if graph.nodes[name].executable == "camera"}  # no camera here: the fake one, which starts
    if namespace == "franka":  # refused at once: no retrying for the robot's 30 s (a booting control box)
        params["franka_driver"] = {"host": "127.0.0.1", "connect_timeout_s": 2.0}
    params_file = write_params_file(graph.params_file_for("real"), params, namespace, tmp_path / "p.yaml")
    launch = Launch(tmp_path, launch_file, "use_sim:=false", f"output_dir:={tmp_path / 'recordings'}",
                    f"params_file:={params_file}")
    try:
        code = launch.process.wait(timeout=180)
        log = launch.log
        ended = ENDED.findall(log)
        assert code == 1 and len(ended) == 1, log[-4000:]
        node, exit_code, reason = ended[0]
        assert node in refusals and exit_code == "2" and refusals[node] in reason, ended
        assert reason.startswith(f"ladder_ros {node}: error: "), reason  # the node's own line, once
        assert "Traceback" not in log and launch.processes() == [], log[-3000:]
        started = len(re.findall(r"process started with pid", log))
        stopped = len(re.findall(r"process has finished cleanly|process has died", log))
        assert stopped == started, log[-3000:]  # every node ended; none is left running without the driver
    finally:
        launch.close()


TWIN_LAUNCHES = {
    # Six nodes follow the episodes (the graph's followers, the twin and its server among them).
    "widowx": ("widowx_orchestrator.launch.py", 6, 10, (
        "ready to arm: profile 250/100 ms written and read back",  # the driver, over the twin's xs_sdk
        "policy bridge_pi0_server: ready after a warm-up")),  # the policy, warmed up by the rehearsal server
    # Five follow them (franky-sim has no scene to reset); ten nodes with the wrist camera.
    "franka": ("franka_orchestrator.launch.py", 5, 10, (
        "Franka twin: franky-sim (MuJoCo FR3 and Franka Hand) listening at 127.0.0.1",
        "policy droid_pi05_server: ready after a warm-up")),
}


@needs_launch
@pytest.mark.slow
@pytest.mark.parametrize("robot", sorted(TWIN_LAUNCHES))
def test_robot_twin_starts_the_robot_graph_against_the_twin_and_stops_cleanly(tmp_path, robot):
    if robot == "widowx":
        pytest.importorskip("mujoco", reason="the twin's scene is the built-in MuJoCo tabletop")
    else:
        pytest.importorskip("franky_sim", reason="needs franky-control and franky-sim (requirements/robots.txt)")
    import rclpy

    launch_file, followers, nodes, ready = TWIN_LAUNCHES[robot]
    launch = Launch(tmp_path, launch_file, "robot:=twin", f"output_dir:={tmp_path / 'rec'}")
    rclpy.init()
    try:
        from diagnostic_msgs.msg import DiagnosticStatus

        from ladder_ros.specs import topics
        from ladder_ros.runtime.endpoints import qos

        client, executor = _client(robot)
        safety = {}
        client.create_subscription(DiagnosticStatus, topics.SAFETY_STATE.name,
                                   lambda m: safety.update({kv.key: kv.value for kv in m.values}),
                                   qos(topics.SAFETY_STATE.qos))
        wait_for_graph(launch, client, executor, followers=followers, timeout_s=240)

        # The driver reached the simulated arm through its own vendor API: it may be armed.

        def running() -> None:
            assert launch.process.poll() is None, launch.log[-3000:]

        client.spin_until(executor, lambda: safety.get("not_ready") == "" and safety.get("armed") == "false", 180,
                          "the driver ready to arm", running)
        client.spin_until(executor, lambda: all(line in launch.log for line in ready), 60, "the nodes' lines in the "
                          "launch log", running)
        assert f"graph {robot} (twin, wall_clock) in /{robot}" in launch.log and "loopback only" in launch.log
        assert_stopped_cleanly(launch, launch.ctrl_c(), nodes=nodes)
    finally:
        launch.close()
        rclpy.try_shutdown()


@needs_launch
def test_bad_launch_arguments_are_one_clear_line_and_start_nothing(tmp_path):
    cases = {
        ("sim_orchestrator.launch.py", "use_sim:=maybe"):
            "Argument \"use_sim\" provided value \"maybe\" is not valid. Valid options are: ['true', 'false']",
        ("franka_orchestrator.launch.py", "use_sim:=true", f"params_file:={tmp_path / 'nah.yaml'}"):
            "nah.yaml: params file not found (launch argument params_file)",
        ("widowx_orchestrator.launch.py", f"params_file:={tmp_path / 'nope.yaml'}"):
            "nope.yaml: params file not found (launch argument params_file)",
        ("widowx_orchestrator.launch.py", "namespace:=9lives", "use_sin:=true"):
            "launch argument namespace: '9lives' is not a ROS namespace",
    }
    for args, message in cases.items():
        result = ros2_launch(tmp_path, *args)
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        errors = [line for line in output.splitlines() if "[ERROR]" in line]
        assert errors and all(message in line for line in errors), output
        assert "Traceback" not in output and "process started" not in output, output
    assert "ignoring launch argument 'use_sin': the widowx graph's launch arguments are use_sim," in output


@needs_launch
def test_show_arguments_and_introspection_list_the_arguments_and_the_nodes(tmp_path):
    shown = ros2_launch(tmp_path, "widowx_orchestrator.launch.py", "-s")
    assert shown.returncode == 0, shown.stderr
    for name in ("use_sim", "namespace", "params_file", "output_dir", "localhost_only", "log_level"):
        assert f"'{name}':" in shown.stdout
    assert "Valid choices are: ['true', 'false']" in shown.stdout
    assert re.search(r"'localhost_only':\n.*\n\s+\(default: 'false'\)", shown.stdout)
    printed = ros2_launch(tmp_path, "sim_orchestrator.launch.py", "-p")
    assert printed.returncode == 0, printed.stderr
    for executable in ("sim_bridge", "policy", "gripper_trigger", "vlm_verifier", "orchestrator", "episode_recorder"):
        assert f"ExecInPkg(pkg='ladder_ros', exec='{executable}')" in printed.stdout


# ---------------------------------------------------------------------------------------------
# Ctrl-C mid-episode


def _importing_rclpy(pid: int) -> bool:
    """rclpy's extension is loaded: the process runs the node module's imports (its main() comes later)."""
    try:
        return "_rclpy_pybind11" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_node_stopped_while_it_still_imports_exits_quietly(tmp_path, signum):
    executable = Path(sys.prefix, "lib", "ladder_ros", "policy")
    if not executable.exists():
        pytest.skip("the node executables are not in lib/ladder_ros (scripts/setup.sh links them)")
    process = subprocess.Popen([str(executable)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while not _importing_rclpy(process.pid):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.01)
        process.send_signal(signum)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and "Traceback" not in out, out


SLOW_SINK = """
import sys, time
from rclpy.node import Node
from std_msgs.msg import String
from ladder_ros.runtime.process import run_node

class SlowSink(Node):
    drain_on_stop_s = float(sys.argv[1])

    def __init__(self):
        super().__init__("slow_sink")
        self.count = 0
        self.create_subscription(String, "drain_test", self.on_message, 100)

    def on_message(self, msg):
        self.count += 1
        if self.count == 1:
            print("first", flush=True)
        time.sleep(0.05)  # a recorder that lags behind what it receives

    def close(self):
        print(f"handled {self.count}", flush=True)

sys.exit(run_node("slow_sink", SlowSink))
"""


@pytest.mark.parametrize("drain_s", [10.0, 0.0])
def test_a_stopping_node_handles_what_already_arrived_only_when_it_drains(ros, drain_s):
    """Two SIGINTs (a terminal's and launch's): one clean stop; a draining node (the recorder) first
    handles every message already received, any other node stops between two callbacks."""
    from std_msgs.msg import String

    sink = subprocess.Popen([sys.executable, "-c", SLOW_SINK, str(drain_s)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        source = ros.create_node("drain_source")
        publisher = source.create_publisher(String, "drain_test", 100)
        deadline = time.monotonic() + 60
        while publisher.get_subscription_count() < 1:
            assert time.monotonic() < deadline and sink.poll() is None, "the sink never subscribed"
            time.sleep(0.05)
        for i in range(40):
            publisher.publish(String(data=str(i)))
        assert sink.stdout.readline().strip() == "first"
        sink.send_signal(signal.SIGINT)
        sink.send_signal(signal.SIGINT)
        out, err = sink.communicate(timeout=60)
    finally:
        if sink.poll() is None:
            sink.kill()
    assert sink.returncode == 0 and "Traceback" not in err, err
    handled = int(out.split("handled ")[1])
    assert handled == 40 if drain_s else handled < 40


@dataclass
class Interrupted:
    launch: Launch
    code: int  # ros2 launch's exit code
    pids: list[int]  # launch and its nodes just before the Ctrl-C
    bag: Path
    episode: str
    step: int  # the last step the client saw before the Ctrl-C


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """The sim launch file stopped by a Ctrl-C in the middle of an episode (shared by the tests below)."""
    if not HAS_LAUNCH:
        pytest.skip("ros2 launch is not installed in this venv (scripts/setup.sh installs it)")
    pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
    import rclpy

    tmp_path = tmp_path_factory.mktemp("ctrl_c")
    launch = Launch(tmp_path, "sim_orchestrator.launch.py", f"output_dir:={tmp_path / 'recordings'}")
    rclpy.init()
    try:
        client, executor = _client("widowx")
        wait_for_graph(launch, client, executor, followers=4)
        # Short episodes until the recorder has heard the sim bridge (discovery between six processes on
        # a loaded machine can take seconds), so the interrupted episode's recording can be checked from
        # its first step.
        from ladder_ros.recording.bag import read_bag

        for _ in range(5):
            first = client.run_episode(executor, "kitchen_single_1", variant="proprio_verifier", timeout_s=120)
            bag = tmp_path / "recordings" / first.episode_id
            client.spin_until(executor, lambda: (bag / "metadata.yaml").is_file(), 60, "the first recording")
            if read_bag(bag)[0].topics.get("/widowx/joint_states"):
                break
        else:
            raise AssertionError(f"the recorder never heard the sim bridge's joint states\n{launch.log[-3000:]}")
        # The verifier is stopped (SIGSTOP; its process and subscriptions stay): the episode runs until its
        # first verification query and waits there (lockstep), so the Ctrl-C lands mid-episode however fast
        # the machine. It resumes after the Ctrl-C, with the SIGINT waiting for it.
        verifier = launch.node_pid("vlm_verifier")
        os.kill(verifier, signal.SIGSTOP)
        try:
            episode = client.start_episode("relay_2", variant="proprio_verifier", layout=1, seed=1)
            client.spin_until(executor, lambda: client.status.episode_id == episode
                              and client.status.pending_request is not None, 120, "the episode's first query")
            assert client.status.state == "running" and client.status.step >= 5  # mid-episode
            step = client.status.step
            pids = launch.processes()
            os.killpg(launch.process.pid, signal.SIGINT)
        finally:
            os.kill(verifier, signal.SIGCONT)
        code = launch.process.wait(timeout=NODE_EXIT_S + 30.0)
        yield Interrupted(launch, code, pids, tmp_path / "recordings" / episode, episode, step)
    finally:
        rclpy.try_shutdown()
        launch.close()


@pytest.mark.slow
def test_ctrl_c_mid_episode_stops_every_process_cleanly_and_keeps_a_complete_recording(interrupted):
    from ladder_ros.recording.bag import read_bag
    from ladder_ros.interface_conversions import recorded_document
    from ladder_ros.messages import DecisionDoc

    assert len(interrupted.pids) == 7  # launch and six nodes
    assert_stopped_cleanly(interrupted.launch, interrupted.code, nodes=6)
    bag = interrupted.bag
    assert (bag / "metadata.yaml").is_file()  # closed by the recorder, not left for `recording recover`
    summary, decoded = read_bag(bag, ["/widowx/orchestrator/decision"])
    assert summary.custom_data["episode_id"] == interrupted.episode
    # Every step up to the Ctrl-C is in the bag, the ones the recorder had not yet written included.
    steps = {recorded_document(m, DecisionDoc).step for m in decoded["/widowx/orchestrator/decision"]}
    assert steps >= set(range(interrupted.step + 1))
    assert summary.topics["/widowx/joint_states"] >= interrupted.step + 1


@pytest.mark.slow
def test_ctrl_c_mid_episode_leaves_an_episode_record_marked_interrupted(interrupted):
    from ladder_ros.recording.bag import read_bag
    from ladder_ros.interface_conversions import recorded_document
    from ladder_ros.messages import EpisodeStatus

    _, decoded = read_bag(interrupted.bag, ["/widowx/episode/status"])
    statuses = [recorded_document(m, EpisodeStatus) for m in decoded["/widowx/episode/status"]]
    last = [s for s in statuses if s.episode_id == interrupted.episode][-1]
    assert last.state in ("finished", "aborted") and last.result is not None
    assert "interrupted" in (last.finish_reason, last.result.get("finish_reason")) or last.result.get("interrupted")
