"""Graph descriptions and `ladder-ros up`: valid graphs start, bad input fails cleanly."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ladder_ros.bringup.graph import load_graph, parse_overrides, read_params_file
from ladder_ros.core.errors import ConfigError
from ladder_ros.bringup.graph import NODE_PARAMETERS
from ladder_ros.runtime.executables import node_module
from tests.processes import process_tree, run_tree

REPO = Path(__file__).resolve().parent.parent
LADDER = [sys.executable, "-m", "ladder_ros.cli"]


def up(*args, timeout=60):
    """``ladder-ros up`` that is expected to exit by itself; on timeout its nodes die with it."""
    return run_tree([*LADDER, "up", *args], timeout=timeout, cwd=REPO)


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_every_shipped_graph_and_mode_is_valid():
    for name in ("widowx", "franka"):
        graph = load_graph(name)
        for mode in graph.modes:
            params = graph.node_parameters(mode)
            assert set(params) == set(graph.mode(mode).nodes)
            for launch in graph.launches(mode):
                command = launch.command()
                assert command[1:3] == ["-m", node_module(launch.executable)]
                assert f"__ns:=/{graph.namespace}" in command


def test_widowx_real_mode_runs_on_the_wall_clock_without_the_bridge():
    params = load_graph("widowx").node_parameters("real")
    assert "sim_bridge" not in params and params["orchestrator"]["clock_mode"] == "wall_clock"


def test_the_twin_mode_is_the_real_graph_with_its_own_values_layered_over_the_params_file(tmp_path):
    import yaml

    graph = load_graph("widowx")
    real, twin = graph.mode("real"), graph.mode("twin")
    assert set(real.nodes) < set(twin.nodes) and set(twin.nodes) - set(real.nodes) == {"widowx_twin",
                                                                                       "rehearsal_server"}
    params = graph.node_parameters("twin", overrides={"widowx_driver": {"speed_scale": 0.5},
                                                      "camera": {"backend": "fake"}})
    driver = params["widowx_driver"]
    assert (driver["interbotix_api"], driver["twin_xs_sdk"], driver["clock_mode"]) == ("twin", "remote", "wall_clock")
    assert driver["speed_scale"] == 0.5 and params["camera"]["backend"] == "fake"  # --set wins over the mode
    assert graph.node_parameters("real")["widowx_driver"]["interbotix_api"] == "vendor"  # the lab's file, untouched
    launch = next(n for n in graph.launches("twin", work_dir=tmp_path) if n.name == "widowx_driver")
    layer = yaml.safe_load((tmp_path / "widowx_twin_overrides.yaml").read_text())
    assert layer["/**/widowx_driver"]["ros__parameters"]["workspace_low"] == [0.12, -0.28, 0.01]
    assert str(tmp_path / "widowx_twin_overrides.yaml") in launch.ros_args
    broken = tmp_path / "graph.yaml"
    broken.write_text(Path(graph.source).read_text().replace("      camera: {backend: twin}",
                                                             "      sim_bridge: {render: false}"))
    with pytest.raises(ConfigError, match="node 'sim_bridge' is not in this mode"):
        load_graph(str(broken))


def test_every_parameter_has_a_description():
    for specs in NODE_PARAMETERS.values():
        for spec in specs:
            assert len(spec.description) > 20, spec.name


def test_unknown_graph_is_one_clear_line():
    result = up("nosuch")
    assert result.returncode == 2
    assert error_lines(result) == ["ladder-ros up: error: unknown graph 'nosuch'; valid: franka, widowx"]


def test_missing_and_malformed_params_files(tmp_path):
    result = up("widowx", "--params-file", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2 and "missing.yaml: params file not found" in result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("/**:\n  ros__parameters: {preset: widowx\n")
    result = up("widowx", "--params-file", str(bad))
    assert result.returncode == 2 and len(error_lines(result)) == 1
    assert "bad.yaml: line" in result.stderr and "invalid YAML" in result.stderr
    shape = tmp_path / "shape.yaml"
    shape.write_text("/**:\n  parameters: {preset: widowx}\n")
    result = up("widowx", "--params-file", str(shape))
    assert result.returncode == 2 and "shape.yaml: /**: expected a mapping with a 'ros__parameters'" in result.stderr


def test_out_of_range_and_unknown_parameters_name_node_and_parameter(tmp_path):
    params = tmp_path / "params.yaml"
    original = (REPO / "config" / "widowx_params.yaml").read_text()
    params.write_text(original.replace("resend_after_s: 2.0", "resend_after_s: -1.0"))
    result = up("widowx", "--params-file", str(params))
    assert result.returncode == 2 and len(error_lines(result)) == 1
    assert "parameter sim_bridge.resend_after_s: must be >= 0.05, got -1.0" in result.stderr
    result = up("widowx", "--set", "sim_bridge.image_size=5")
    assert "parameter sim_bridge.image_size: must be >= 16, got 5" in result.stderr and result.returncode == 2
    result = up("widowx", "--set", "orchestrator.variant=bogus")
    assert "parameter orchestrator.variant: must be one of" in result.stderr
    result = up("widowx", "--set", "policy.speed=3")
    assert "unknown parameter policy.speed; valid:" in result.stderr
    with pytest.raises(ConfigError, match="expects NODE.PARAM=VALUE"):
        parse_overrides(["image_size=5"])


def test_a_graph_whose_nodes_disagree_on_a_shared_parameter_is_refused():
    graph = load_graph("widowx")
    for mode, (node, name, value) in (("sim", ("gripper_trigger", "aperture_joint", "left_finger")),
                                      ("sim", ("policy", "preset", "franka")),
                                      ("real", ("camera", "base_frame", "world"))):
        with pytest.raises(ConfigError, match=f"disagree on {name} .*{node}.{name} = '{value}'"):
            graph.node_parameters(mode, overrides={node: {name: value}})
    readers = ("sim_bridge", "policy", "gripper_trigger", "vlm_verifier")
    checked = graph.node_parameters("sim", overrides={name: {"aperture_joint": "left_finger"} for name in readers})
    assert {values["aperture_joint"] for values in checked.values() if "aperture_joint" in values} == {"left_finger"}
    unnamed = graph.node_parameters("real", overrides={"camera": {"base_frame": ""}})
    assert unnamed["camera"]["base_frame"] == ""  # the camera's empty base_frame names no frame: no disagreement


def test_a_node_refuses_an_out_of_range_value_on_its_own(tmp_path):
    # The same check inside the node (a params file edited for ros2 launch, where `up` does not check).
    result = subprocess.run([sys.executable, "-m", "ladder_ros.nodes.gripper_trigger", "--ros-args",
                             "-p", "max_state_age_s:=100.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert error_lines(result)[-1].startswith("ladder_ros gripper_trigger: error: parameter gripper_trigger."
                                              "max_state_age_s")


def _children(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def wait_until_the_graph_listens(namespace, timeout_s):
    """Until every node of the sim graph has made its subscriptions, seen from a probe in this domain.

    The episode status has four followers (sim bridge, policy, gripper trigger, recorder; the
    recorder subscribes to it last) and the privileged state four readers (orchestrator, policy,
    verifier, recorder); the orchestrator's latched status has arrived. ``timeout_s`` is reached
    only when the graph never comes up.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from ladder_ros.specs import topics
    from ladder_ros.runtime.endpoints import message_class, qos

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        probe = rclpy.create_node("bringup_probe", namespace=namespace, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        statuses = []
        probe.create_subscription(message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS.name, statuses.append,
                                  qos(topics.LATCHED))
        status, privileged = (probe.resolve_topic_name(t.name) for t in (topics.EPISODE_STATUS, topics.PRIVILEGED))
        deadline = time.monotonic() + timeout_s
        while not (statuses and probe.count_subscribers(status) >= 4 + 1 and probe.count_subscribers(privileged) >= 4):
            assert time.monotonic() < deadline, "the graph's nodes did not all come up"
            executor.spin_once(timeout_sec=0.1)
        executor.shutdown()
        probe.destroy_node()
    finally:
        rclpy.shutdown(context=context)


# Nodes stop by themselves on Ctrl-C (they have no episode to close here); `up` waits this long
# before it kills one, and the test waits for `up` that long plus its own exit.
STOP_TIMEOUT_S = 60


@pytest.mark.ros
def test_up_forwards_ctrl_c_and_every_node_stops(tmp_path):
    command = [*LADDER, "up", "widowx", "--set", "sim_bridge.render=false", "--set",
               f"episode_recorder.output_dir={tmp_path}", "--log-dir", str(tmp_path),
               "--stop-timeout", str(STOP_TIMEOUT_S)]
    with process_tree(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) as process:
        wait_until_the_graph_listens("widowx", timeout_s=120)
        nodes = _children(process.pid)
        assert len(nodes) == 6
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=STOP_TIMEOUT_S + 30)
    assert process.returncode == 0, err
    assert "all nodes stopped" in out
    for pid in nodes:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.ros
def test_up_exits_non_zero_when_a_node_dies(tmp_path):
    # A missing suite is refused before anything starts; a missing replay file is found by the node.
    result = up("widowx", "--set", "vlm_verifier.backend=replay", "--set",
                "vlm_verifier.replay_path=/nonexistent.jsonl", "--set", "sim_bridge.render=false",
                "--set", f"episode_recorder.output_dir={tmp_path}", timeout=90)
    assert result.returncode == 1
    assert "error: node vlm_verifier exited with code 2" in result.stderr and "stopping the graph" in result.stderr


def test_params_file_reader_flattens_nested_parameters(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("/**/vlm_verifier:\n  ros__parameters:\n    gemini: {timeout_s: 3}\n")
    assert read_params_file(path) == {"/**/vlm_verifier": {"gemini.timeout_s": 3}}


@pytest.mark.ros
def test_real_mode_refuses_the_simulation_only_policy(tmp_path):
    # The driver talks to the WidowX twin, so the policy's refusal is the graph's only error.
    result = subprocess.run([*LADDER, "up", "widowx", "--mode", "real", "--set",
                             f"episode_recorder.output_dir={tmp_path}", "--set", "widowx_driver.interbotix_api=twin",
                             "--log-dir", str(tmp_path)], capture_output=True, text=True, timeout=90, cwd=REPO)
    assert result.returncode == 1
    assert "node policy exited with code 2: ladder_ros policy: error: parameter policy.policy: scripted_expert " \
           "reads the simulator's privileged state and cannot drive a robot" in result.stderr


def test_skip_leaves_out_the_named_nodes_and_refuses_an_unknown_one(tmp_path):
    from ladder_ros.bringup.up import skip_nodes

    graph = load_graph("widowx")
    launches = graph.launches("real", work_dir=tmp_path)
    kept = skip_nodes(graph, "real", launches, ["widowx_driver", "camera"])
    rest = [n for n in graph.mode("real").nodes if n not in ("widowx_driver", "camera")]
    assert [launch.name for launch in kept] == rest
    with pytest.raises(ConfigError, match="--skip widowx_drivr: no node 'widowx_drivr' in mode real of graph widowx; "
                                          "did you mean 'widowx_driver'"):
        skip_nodes(graph, "real", launches, ["widowx_drivr"])
    with pytest.raises(ConfigError, match="--skip leaves no node of graph widowx to start"):
        skip_nodes(graph, "real", launches, list(graph.mode("real").nodes))


def test_every_policy_a_graph_serves_is_checked_before_start():
    from ladder_ros.bringup.graph import check_referenced_files

    graph = load_graph("widowx")
    named = {"policy": {"policies": ["calm=scripted_expert", "brisk=no_such_config"]}}
    with pytest.raises(ConfigError, match=r"parameter policy.policies\[1\]: unknown policy 'no_such_config'"):
        check_referenced_files(graph.node_parameters("sim", overrides=named))
    check_referenced_files(graph.node_parameters("sim", overrides={"policy": {"policies": ["calm=scripted_expert"]}}))


class _SleeperLaunch:
    """A node stand-in: a process that waits to be killed (GraphProcesses needs name, executable, command)."""

    name = "sleeper"
    executable = "sleeper"

    def command(self):
        return [sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(60)"]


def test_restarting_a_node_keeps_one_log_open_for_it(tmp_path):
    """A day restarts killed nodes many times: each restart must close the dead process's log."""
    from ladder_ros.bringup.up import GraphProcesses

    def open_files():
        return len(os.listdir("/proc/self/fd"))

    log = tmp_path / "sleeper.log"

    def wait_for_starts(count):
        deadline = time.monotonic() + 20
        while log.read_text().count("up") < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.read_text().count("up") == count  # every start writes to the node's one log

    processes = GraphProcesses([_SleeperLaunch()], dict(os.environ), tmp_path)
    processes.start()
    try:
        wait_for_starts(1)
        after_start = open_files()
        for restart in range(5):
            processes.signal("sleeper", signal.SIGKILL)
            processes.processes["sleeper"].wait(timeout=10)
            processes.start_node("sleeper")
            wait_for_starts(restart + 2)
        assert open_files() == after_start
    finally:
        processes.stop(timeout_s=10)
