"""``ladder-ros parity`` on the real Bridge env: the ROS graph (nodes as processes, lockstep) must
reproduce the in-process reference loop event for event.

Two multi-subgoal episodes on the four-object table (split destinations and relay) with the
proprioceptive verifier, so the orchestrator's triggers, count queries, retries and subgoal switches
all run on ManiSkill3. The WidowX graph's own params file is used with the simulator and suite
swapped, written to a temporary file (``--params-file``). The camera is off: the oracle verifier and
the scripted expert read the privileged state, and the event logs do not depend on images.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import yaml

from ladder_ros.sim.maniskill_env import missing_prerequisites, repository_root

pytestmark = [pytest.mark.maniskill, pytest.mark.ros, pytest.mark.slow]

EPISODE_TASKS = "kitchen_split_2,kitchen_relay_2"
BRIDGE_SUITE = "config/suites/bridge.yaml"


def _skip_reason() -> str | None:
    reason = missing_prerequisites()
    if reason is not None:
        return f"SimplerEnv (ManiSkill3) backend unavailable: {reason}"
    for module in ("rclpy", "ladder_ros.evaluation.parity", "ladder_ros.bringup.session"):
        try:
            if importlib.util.find_spec(module) is None:
                return f"{module} is not available"
        except ModuleNotFoundError:
            return f"{module} is not available"
    return None


def _bridge_params_file(tmp_path) -> str:
    """config/widowx_params.yaml with the sim bridge on ManiSkill and the Bridge suite everywhere."""
    params = yaml.safe_load((repository_root() / "config" / "widowx_params.yaml").read_text())
    bridge = next(v["ros__parameters"] for k, v in params.items() if k.endswith("sim_bridge"))
    orchestrator = next(v["ros__parameters"] for k, v in params.items() if k.endswith("orchestrator"))
    bridge.update(simulator="maniskill_bridge", suite=BRIDGE_SUITE, render=False)
    orchestrator["suite"] = BRIDGE_SUITE
    path = tmp_path / "widowx_maniskill_params.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path)


def test_graph_reproduces_the_reference_loop_on_the_bridge_env(tmp_path):
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "parity"
    command = [sys.executable, "-m", "ladder_ros.cli", "parity", "widowx",
               "--params-file", _bridge_params_file(tmp_path), "--tasks", EPISODE_TASKS,
               "--variants", "proprio_verifier", "--seeds", "0", "--out", str(out)]
    run = subprocess.run(command, cwd=repository_root(), capture_output=True, text=True, timeout=900)
    summary = [line for line in run.stdout.splitlines() if line.startswith("parity:")]
    assert run.returncode == 0, f"parity failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    assert summary[-1] == "parity: 2/2 episodes identical"
    results = json.loads((out / "parity.json").read_text())
    assert [r["episode"]["task_id"] for r in results] == EPISODE_TASKS.split(",")
    assert all(r["identical"] for r in results)
    assert all(r["steps"] > 0 for r in results)


def test_sim_eval_runs_on_the_bridge_backend(tmp_path):
    reason = missing_prerequisites()
    if reason is not None:
        pytest.skip(f"SimplerEnv (ManiSkill3) backend unavailable: {reason}")
    if importlib.util.find_spec("ladder_ros.evaluation.sim_eval") is None:
        pytest.skip("ladder_ros.evaluation.sim_eval is not available")
    out = tmp_path / "sim-eval"
    command = [sys.executable, "-m", "ladder_ros.cli", "sim-eval", "--suite", BRIDGE_SUITE, "--simulator",
               "maniskill_bridge", "--tasks", "carrot_on_plate_1", "--episodes", "1", "--variants",
               "privileged_verifier", "--noise", "off", "--jobs", "1", "--out", str(out), "--no-progress"]
    run = subprocess.run(command, cwd=repository_root(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"sim-eval failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    assert len(episodes) == 1
    record = episodes[0]
    assert (record["task_id"], record["simulator"], record["variant"]) == \
        ("carrot_on_plate_1", "maniskill_bridge", "privileged_verifier")
    # the noise-free scripted expert places the carrot on SimplerEnv's own scene within the budget
    assert record["success"] and record["steps_used"] < record["budget_steps"]
