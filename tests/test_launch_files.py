"""The launch files, run for real: `ros2 launch ladder_ros …` as a user types it, loopback only.

``scripts/setup.sh`` installs ``ros2 launch`` into the venv and registers the package in its ament
index (share/ and lib/ladder_ros/, as colcon does). The launch processes inherit this test session's
network-safe environment (discovery range LOCALHOST, its own ROS_DOMAIN_ID, the loopback Fast DDS
profile) and ``scripts/test.sh`` runs them inside a loopback-only network namespace.

* ``sim_orchestrator.launch.py`` brings the WidowX graph up and ``ladder-ros parity --launch`` runs
  episodes through ``episode/command``: every one identical to the in-process reference loop.
* ``widowx_orchestrator.launch.py use_sim:=false`` and ``franka_orchestrator.launch.py`` start the
  robot graphs on the wall clock, fed by a stand-in driver.
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

import numpy as np
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
    assert set(robot) == {"use_sim", "namespace", "params_file", "output_dir", "localhost_only", "log_level"}
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
    assert len(re.findall(r"process has finished cleanly", log)) == nodes, log[-3000:]
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


class StandInDriver:
    """A robot driver stand-in: joint states with the gripper aperture and the end-effector pose.

    The gripper closes for ``closed_s``, lifting the hand by ``lift_m`` meanwhile, then opens for
    ``open_s``, over and over.
    """

    def __init__(self, namespace: str, rate_hz: float, closed_s: float, open_s: float, lift_m: float):
        from geometry_msgs.msg import PoseStamped
        from rclpy.node import Node
        from sensor_msgs.msg import JointState

        from ladder_ros.nodes import topics
        from ladder_ros.nodes.runtime import qos

        self.node = Node("stand_in_driver", namespace=namespace)
        self.joints = self.node.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
        self.pose = self.node.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
        self.period = closed_s + open_s
        self.closed_s, self.lift_m = closed_s, lift_m
        self.start = time.monotonic()
        self.node.create_timer(1.0 / rate_hz, self._publish)

    def _publish(self):
        from ladder_ros.ros_conversions import joint_state_to_msg, pose_to_msg

        stamp = self.node.get_clock().now().nanoseconds
        phase = (time.monotonic() - self.start) % self.period
        closed = phase < self.closed_s
        height = 0.1 + (self.lift_m * phase / self.closed_s if closed else 0.0)
        self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), 0.1 if closed else 1.0, stamp,
                                               "gripper_aperture"))
        self.pose.publish(pose_to_msg(np.array([0.3, 0.0, height]), np.array([1.0, 0.0, 0.0, 0.0]), stamp, "base_link"))


def run_robot_graph(tmp_path, launch_file, namespace, driver, run_episode, *args, refusing=("policy",),
                    overrides=None):
    """Launch a robot graph, run ``run_episode(client, executor) -> episode id`` on the stand-in driver, Ctrl-C.

    The nodes in ``refusing`` are expected to refuse to start (exit 2, one line) for want of what a
    robot provides and this machine has not (the graph's own driver among them: the stand-in takes its
    place). ``overrides`` ({node: {parameter: value}}) go into the params file. Returns the launch, the
    episode's final status and its recording's summary.
    """
    from ladder_ros.bringup.client import EpisodeTimeout
    from ladder_ros.bringup.recording import read_bag

    graph = load_graph(namespace)
    # No camera is attached here: a camera node of the real mode runs on its fake backend.
    params = {name: {"backend": "fake"} for name in graph.mode("real").nodes
              if graph.nodes[name].executable == "camera"}
    params.update(overrides or {})
    if params:
        args = (*args, f"params_file:={write_params_file(graph.params_file, params, namespace, tmp_path / 'p.yaml')}")
    launch = Launch(tmp_path, launch_file, f"output_dir:={tmp_path / 'recordings'}", *args)
    try:
        client, executor = _client(namespace, driver.node)
        # Every node that follows the episode and starts here (policy, gripper trigger, recorder): an episode
        # started before one of them is up would be ended by it (its state of the episode is lost).
        followers = [n for n in graph.mode("real").nodes if n not in refusing
                     and graph.nodes[n].executable in ("policy", "gripper_trigger", "episode_recorder")]
        wait_for_graph(launch, client, executor, followers=len(followers))
        try:
            episode = run_episode(client, executor)
        except EpisodeTimeout as exc:
            raise AssertionError(f"{exc}; last status {client.status}\n{launch.log[-4000:]}") from None
        client.spin_until(executor, lambda: client.status.episode_id == episode and client.status.result is not None,
                          30, "the episode's record")
        status = client.status
        bag = tmp_path / "recordings" / episode
        client.spin_until(executor, lambda: (bag / "metadata.yaml").is_file(), 30, "the recording to close")
        client.spin_until(executor, lambda: all(f"[ERROR] [{node}-" in launch.log for node in refusing), 120,
                          f"{', '.join(refusing)} to refuse")  # a slow start could otherwise meet the Ctrl-C first
        nodes = len(graph.mode("real").nodes) - len(refusing)
        assert_stopped_cleanly(launch, launch.ctrl_c(), nodes=nodes, died=refusing)
        summary, _ = read_bag(bag)
        return launch, status, summary
    finally:
        launch.close()


def _refusal(log: str, node: str) -> list[str]:
    return [line for line in log.splitlines() if f"ladder_ros {node}: error:" in line]


@needs_launch
def test_widowx_robot_launch_runs_the_wall_clock_graph_on_a_stand_in_driver(ros, tmp_path):
    # WidowX trigger: a close of >= 3 steps at 5 Hz (Appendix B); 2 s closed leave margin for a loaded machine.
    driver = StandInDriver("widowx", rate_hz=10, closed_s=2.0, open_s=1.0, lift_m=0.0)

    def episode(client, executor):
        return client.run_episode(executor, "kitchen_single_2", variant="proprio_trigger", timeout_s=120).episode_id

    # Without Interbotix's API the graph's own driver refuses to start (the stand-in publishes instead).
    # The WidowX trigger stays on the last subgoal until the budget ends (Appendix B); the preset option
    # ends the episode after it instead, so the test need not wait out the budget.
    launch, status, recording = run_robot_graph(
        tmp_path, "widowx_orchestrator.launch.py", "widowx", driver, episode, "use_sim:=false",
        refusing=("policy", "widowx_driver"),
        overrides={"orchestrator": {"preset_options": ["after_last_subgoal=end"]}})
    log = launch.log
    assert "graph widowx (real, wall_clock) in /widowx" in log and "this shell's ROS network settings" in log
    assert "sim_bridge" not in re.findall(r"\[INFO\] \[(\w+)-\d+\]: process started", log)
    assert (status.clock, status.rate_hz, status.preset) == ("wall_clock", 5.0, "widowx")
    kinds = [(e["kind"], e.get("reason")) for e in status.result["events"]]
    assert ("attempt_ended", "release") in kinds and status.result["finish_reason"] == "plan_exhausted"
    assert status.result["scored"] is False
    assert recording.topics["/widowx/joint_states"] > 10
    assert "widowx_params.yaml" in recording.custom_data["config_files"]
    # The params file's policy is the simulator-only expert: the policy node refuses it on a robot, in one line.
    assert len(_refusal(log, "policy")) == 1 and "cannot drive a robot" in _refusal(log, "policy")[0]
    assert len(_refusal(log, "widowx_driver")) == 1 and "interbotix_xs_modules" in _refusal(log, "widowx_driver")[0]
    assert re.search(r"\[ERROR\] \[policy-\d+\]: process has died \[pid \d+, exit code 2", log)


@needs_launch
def test_franka_robot_launch_runs_the_wall_clock_graph_on_a_stand_in_driver(ros, tmp_path):
    # RoboLab-Long trigger: a close of >= 21 steps at 15 Hz with a 3 cm lift ends an attempt (Appendix B);
    # 4 s closed (60 steps) leave margin for a loaded machine, and a 5 s cycle clears the 57-step cooldown.
    driver = StandInDriver("franka", rate_hz=30, closed_s=4.0, open_s=1.0, lift_m=0.06)

    def episode(client, executor):
        # On RoboLab-Long the plan restarts from its first subgoal after the last (Appendix B), so a
        # proprio_trigger episode runs to its budget: stop it once both subgoals had an attempt.
        from ladder_ros.interface_conversions import document_to_msg
        from ladder_ros.messages import STOP, EpisodeCommand
        from ladder_ros.nodes import topics
        from ladder_ros.nodes.runtime import message_class, publisher

        episode_id = client.start_episode("kitchen_single_2", variant="proprio_trigger")
        plan_indices = []

        def plan_restarted() -> bool:
            if client.status.episode_id == episode_id and client.status.state == "running":
                plan_indices.append(client.status.plan_index)
            return 1 in plan_indices and plan_indices[-1] == 0

        client.spin_until(executor, plan_restarted, 120, "an attempt at each subgoal and the plan's restart")
        publisher(client, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND).publish(
            document_to_msg(EpisodeCommand(command=STOP, episode_id=episode_id)))
        return episode_id

    # The Franka graph's verifier is Gemini (config/franka_params.yaml): without a key it refuses to start,
    # in one line, and so does the driver with no arm at its address (loopback here: nothing listens);
    # the policy holds without its openpi server; the orchestrator and the trigger run on regardless.
    launch, status, recording = run_robot_graph(tmp_path, "franka_orchestrator.launch.py", "franka", driver, episode,
                                                refusing=("franka_driver", "vlm_verifier"),
                                                overrides={"franka_driver": {"host": "127.0.0.1"}})
    log = launch.log
    assert "graph franka (real, wall_clock) in /franka" in log
    assert (status.clock, status.rate_hz, status.preset) == ("wall_clock", 15.0, "franka")
    ends = [e for e in status.result["events"] if e["kind"] == "attempt_ended"]
    assert len(ends) >= 2 and all(e.get("reason") == "release" and e.get("lift_m", 0) >= 0.03 for e in ends), ends
    assert recording.topics["/franka/joint_states"] > 10
    assert _refusal(log, "policy") == []  # it holds still without its server
    assert len(_refusal(log, "franka_driver")) == 1 and "cannot connect to the Franka at 127.0.0.1" in log
    refusals = _refusal(log, "vlm_verifier")  # one line, prefixed by launch with the process's name and number
    expected = (r"\[vlm_verifier-\d+\] ladder_ros vlm_verifier: error: no Gemini API key: "
                r"set the environment variable GEMINI_API_KEY")
    assert len(refusals) == 1 and re.fullmatch(expected, refusals[0]), refusals


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
from ladder_ros.nodes.runtime import run_node

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
        from ladder_ros.bringup.recording import read_bag

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
    from ladder_ros.bringup.recording import read_bag
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
    from ladder_ros.bringup.recording import read_bag
    from ladder_ros.interface_conversions import recorded_document
    from ladder_ros.messages import EpisodeStatus

    _, decoded = read_bag(interrupted.bag, ["/widowx/episode/status"])
    statuses = [recorded_document(m, EpisodeStatus) for m in decoded["/widowx/episode/status"]]
    last = [s for s in statuses if s.episode_id == interrupted.episode][-1]
    assert last.state in ("finished", "aborted") and last.result is not None
    assert "interrupted" in (last.finish_reason, last.result.get("finish_reason")) or last.result.get("interrupted")
