"""One validation for configuration: params files, suites and command lines are refused before anything starts.

Each refusal is one line naming the file, the key and the nearest valid key; nothing is started and
nothing is written. (Before, a whole number for a decimal parameter passed the check and then
killed the node after start, misspelt sections and suite keys were silently ignored, and negative
timeouts were accepted.)
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ladder_ros.bringup.graph import load_graph
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.suite import load_suite, parse_suite
from ladder_ros.messages import EpisodeCommand, SchemaError, decode
from ladder_ros.specs.parameters import ORCHESTRATOR, check_node_parameters

REPO = Path(__file__).resolve().parent.parent
LADDER = [sys.executable, "-m", "ladder_ros.cli"]
PARAMS = (REPO / "config" / "widowx_params.yaml").read_text()


def ladder(*args, cwd=REPO, timeout=60):
    return subprocess.run([*LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_error_line(result, command="up"):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ladder-ros {command}: error: ") and "Traceback" not in result.stderr
    return lines[0]


def params_file(tmp_path, text):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_a_whole_number_for_a_decimal_parameter_is_refused_before_start_naming_file_and_key(tmp_path):
    path = params_file(tmp_path, PARAMS.replace("verifier_retry_s: 5.0", "verifier_retry_s: 5"))
    line = one_error_line(ladder("up", "widowx", "--params-file", str(path)))
    assert f"{path}: parameter orchestrator.verifier_retry_s: must be a decimal number" in line
    assert "write 5.0, got 5" in line


def test_a_whole_number_given_with_set_is_written_as_a_decimal_for_the_node(tmp_path):
    graph = load_graph("widowx")
    launches = graph.launches("sim", overrides={"orchestrator": {"verifier_retry_s": 60}}, work_dir=tmp_path)
    layer = yaml.safe_load((tmp_path / "widowx_sim_overrides.yaml").read_text())
    value = layer["/**/orchestrator"]["ros__parameters"]["verifier_retry_s"]
    assert value == 60.0 and isinstance(value, float)
    assert len(launches) == 6


def test_misspelt_sections_and_parameters_name_the_nearest_valid_key(tmp_path):
    path = params_file(tmp_path, PARAMS.replace("/**/orchestrator:", "orchestrator_typo:"))
    line = one_error_line(ladder("up", "widowx", "--params-file", str(path)))
    assert f"{path}: orchestrator_typo: unknown node section; did you mean 'orchestrator'?" in line
    path = params_file(tmp_path, PARAMS.replace("verifier_retry_s:", "verifer_retry_s:"))
    line = one_error_line(ladder("up", "widowx", "--params-file", str(path)))
    assert "unknown parameter orchestrator.verifer_retry_s; did you mean 'verifier_retry_s'?" in line
    path = params_file(tmp_path, PARAMS.replace("preset: widowx", "presett: widowx"))
    line = one_error_line(ladder("up", "widowx", "--params-file", str(path)))
    assert "unknown parameter /**.presett: no node of graph widowx has it; did you mean 'preset'?" in line


def test_unknown_simulator_and_misordered_stall_bounds_are_found_before_start():
    line = one_error_line(ladder("up", "widowx", "--set", "sim_bridge.simulator=gazebo"))
    assert "parameter sim_bridge.simulator: must be one of maniskill_bridge, mujoco_tabletop, got 'gazebo'" in line
    line = one_error_line(ladder("up", "widowx", "--set", "orchestrator.stall_warn_s=30.0",
                                 "--set", "orchestrator.stall_abort_s=20.0"))
    assert "parameter orchestrator.stall_abort_s: must be more than stall_warn_s (30.0), got 20.0" in line
    with pytest.raises(ConfigError, match="stall_abort_s"):
        check_node_parameters("orchestrator", {"stall_warn_s": 5.0, "stall_abort_s": 5.0})
    assert {s.name for s in ORCHESTRATOR} >= {"stall_warn_s", "stall_abort_s", "state_dir"}


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.__setitem__("sceens", d.pop("scenes")), "sceens: unknown key; did you mean 'scenes'?"),
    (lambda d: d["tasks"][0].__setitem__("distractor", []),
     "tasks[0] (kitchen_single_1).distractor: unknown key; did you mean 'distractors'?"),
    (lambda d: d["tasks"][0].__setitem__("budget", -100), "tasks[0] (kitchen_single_1).budget: unknown key"),
    (lambda d: d["tasks"][0]["subgoals"][0].__setitem__("destinaton", "plate"),
     "subgoals[0].destinaton: unknown key; did you mean 'destination'?"),
])
def test_misspelt_suite_keys_are_refused(edit, message):
    data = yaml.safe_load((REPO / "config" / "suites" / "tabletop.yaml").read_text())
    edit(data)
    with pytest.raises(ConfigError, match="suite.yaml: ") as excinfo:
        parse_suite(data, "suite.yaml")
    assert message in str(excinfo.value)


def test_a_bad_suite_file_stops_up_before_start(tmp_path):
    data = yaml.safe_load((REPO / "config" / "suites" / "tabletop.yaml").read_text())
    data["tasks"][0]["budget"] = -100
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(data))
    line = one_error_line(ladder("up", "widowx", "--set", f"orchestrator.suite={suite}"))
    assert f"parameter orchestrator.suite: {suite}: tasks[0] (kitchen_single_1).budget: unknown key" in line
    for shipped in sorted((REPO / "config" / "suites").glob("*.yaml")):
        load_suite(shipped)  # the shipped suites pass


def test_graph_description_keys_are_checked(tmp_path):
    text = (REPO / "config" / "graphs" / "widowx.yaml").read_text().replace("remappings: {}", "remapings: {}")
    path = tmp_path / "g.yaml"
    params = REPO / "config" / "widowx_params.yaml"
    path.write_text(text.replace("params_file: widowx_params.yaml", f"params_file: {params}"))
    with pytest.raises(ConfigError, match="remapings: unknown key; did you mean 'remappings'"):
        load_graph(str(path))


def test_run_checks_its_arguments_before_touching_the_disk(tmp_path):
    out = tmp_path / "out"
    line = one_error_line(ladder("run", "widowx", "--episode-timeout", "-5", "--out", str(out)), "run")
    assert line.endswith("--episode-timeout must be > 0 seconds, got -5.0")
    line = one_error_line(ladder("run", "widowx", "--seed", "-1", "--out", str(out)), "run")
    assert line.endswith("--seed must be >= 0, got -1")
    line = one_error_line(ladder("run", "widowx", "--tasks", "nosuch", "--out", str(out)), "run")
    assert "unknown task 'nosuch'" in line
    assert not out.exists()  # nothing was created for a refused run
    a_file = tmp_path / "file"
    a_file.write_text("x")
    line = one_error_line(ladder("run", "widowx", "--out", str(a_file)), "run")
    assert line.endswith(f"--out {a_file} is a file, not a folder")
    line = one_error_line(ladder("run", "widowx", "--out", str(a_file / "sub")), "run")
    assert line.endswith(f"--out {a_file / 'sub'}: {a_file} is a file, not a folder")
    line = one_error_line(ladder("run", "widowx", "--out", "/proc/ladder_ros_out"), "run")  # read-only even for root
    assert "--out /proc/ladder_ros_out" in line
    line = one_error_line(ladder("up", "widowx", "--stop-timeout", "0"))
    assert line.endswith("--stop-timeout must be > 0 seconds, got 0.0")


def test_error_lines_name_the_document_once():
    with pytest.raises(SchemaError) as excinfo:
        decode(json.dumps({**EpisodeCommand(command="stop").to_dict(), "command": "start"}), EpisodeCommand)
    assert str(excinfo.value) == "episode_command: a start command names a task_id"
