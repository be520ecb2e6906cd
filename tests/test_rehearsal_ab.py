"""The rehearsed blind policy A/B session (``ladder-ros rehearse widowx --ab-pairs N --policies ...``).

Without ROS: the policies on the command line, the twin mode with a rehearsal server per policy (each on its own
port, with its own noise and inference time, the policy node serving both by name), the session's plan and the
scripted operator's preference. End to end (slow): one pair on the twin, the panel offscreen with the scripted
operator, the sealed key naming each arm's policy and digest, nothing the operator saw naming either policy,
and the report ranking both by config.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
import yaml

from ladder_ros.core.errors import ConfigError
from ladder_ros.evaluation.rehearsal import plan_rehearsal, register
from ladder_ros.evaluation.rehearsal_ab import (
    RehearsalArm,
    check_ab_arguments,
    parse_arms,
    preference,
    session_plan,
)
from ladder_ros.panel.evaluation_plan import EvaluationPlan

REPO = Path(__file__).resolve().parent.parent


def test_the_policies_on_the_command_line():
    arms = parse_arms("steady=bridge_like, clumsy_ckpt=clumsy@150")
    assert arms == [RehearsalArm("steady", "", "bridge_like", None, "rehearsal_server"),
                    RehearsalArm("clumsy_ckpt", "", "clumsy", 150.0, "rehearsal_server_2")]
    assert parse_arms("lab=bridge_pi0_server,other=off")[0] == RehearsalArm("lab", "bridge_pi0_server", None, None)
    for text, match in (("steady=off", "two policies"), ("steady=off,steady=clumsy", "twice"),
                        ("steady=off,x y=clumsy", "must be 1-64 characters"), ("steady=off,other=nonsense", "policy"),
                        ("steady=off,other=clumsy@fast", "number of ms"), ("steady,other=off", "NAME=SPEC")):
        with pytest.raises(ConfigError, match=match):
            parse_arms(text)


def _args(*argv):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["rehearse", "widowx", *argv])


def test_a_session_is_refused_before_anything_starts():
    for argv, match in ((["--ab-pairs", "0", "--policies", "a1=off,b1=clumsy"], "--ab-pairs must be >= 1"),
                        (["--ab-pairs", "2"], "--policies"),
                        (["--ab-pairs", "2", "--policies", "a1=off,b1=clumsy", "--faults", "0.5"], "--faults"),
                        (["--ab-pairs", "2", "--policies", "a1=off,b1=clumsy", "--launch", "x.py"], "--launch")):
        with pytest.raises(ConfigError, match=match):
            check_ab_arguments(_args(*argv))


def test_the_twin_mode_serves_each_policy_from_a_server_of_its_own(tmp_path):
    arms = parse_arms("steady=bridge_like,clumsy_ckpt=clumsy@150")
    plan = plan_rehearsal("widowx", tmp_path, arms=arms, inference_delay_ms=100.0, latency_model="fixed")
    params = plan.params
    configs = {name: tmp_path.resolve() / "policies" / f"{name}.yaml" for name in ("steady", "clumsy_ckpt")}
    assert params["policy"]["policies"] == [f"{n}={p}" for n, p in configs.items()]
    assert params["policy"]["default_policy"] == "steady"
    servers = {name: params[name] for name in ("rehearsal_server", "rehearsal_server_2")}
    assert [(s["policy"], s["noise"], s["inference_delay_ms"], s["latency_model"]) for s in servers.values()] == [
        (str(configs["steady"]), "bridge_like", 100.0, "fixed"),
        (str(configs["clumsy_ckpt"]), "clumsy", 150.0, "fixed")]
    assert servers["rehearsal_server_2"]["gripper_pressure"] == servers["rehearsal_server"]["gripper_pressure"]
    written = {name: yaml.safe_load(path.read_text()) for name, path in configs.items()}
    assert written["steady"]["name"] == "steady" and "bridge_like noise" in written["steady"]["description"]
    ports = {w["server"]["port"] for w in written.values()}
    assert len(ports) == 2 and all(w["server"]["host"] == "127.0.0.1" for w in written.values())
    names = [launch.name for launch in plan.launches]
    assert names.index("rehearsal_server_2") == names.index("rehearsal_server") + 1
    assert "rehearsal_server_2" not in plan_rehearsal("widowx", tmp_path / "one").params  # one policy: one server


def test_the_sessions_plan_takes_the_tasks_in_turn():
    arms = parse_arms("steady=bridge_like,clumsy_ckpt=clumsy")
    data = session_plan(arms, ["kitchen_single_2", "sorting_split_2", "relay_2"], [24, 24, 3], 5, seed=10,
                        order_seed=3, variants=["proprio_verifier"])
    plan = EvaluationPlan.parse(data, served_policies=["steady", "clumsy_ckpt"])
    firsts = [arms["A"] for _, arms in sorted(plan.pairs.items())]
    assert [(e.task_id, e.layout, e.seed) for e in firsts] == [
        ("kitchen_single_2", 0, 10), ("kitchen_single_2", 1, 11), ("sorting_split_2", 0, 10),
        ("sorting_split_2", 1, 11), ("relay_2", 0, 10)]
    assert plan.compared_policies == ("steady", "clumsy_ckpt") and plan.order_seed == 3


def test_a_careful_operator_prefers_success_then_progress_and_ties_equal_outcomes():
    assert preference((True, 2, 2), (False, 1, 2)) == "A"
    assert preference((False, 0, 2), (False, 1, 2)) == "B"
    assert preference((False, 1, 2), (False, 1, 2)) == "tie" and preference((True, 2, 2), (True, 2, 2)) == "tie"
    assert preference(None, (True, 2, 2)) == "tie"


@pytest.mark.ros
@pytest.mark.slow
def test_a_rehearsed_blind_session_ends_in_a_ranking_and_showed_the_operator_no_policy(tmp_path):
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    pytest.importorskip("mujoco", reason="the twin's scene is the built-in MuJoCo tabletop")
    from tests.processes import run_tree

    out = tmp_path / "ab"
    # the driver tolerates 2 s old joint states here, as tests/test_rehearsal.py explains
    result = run_tree([sys.executable, "-m", "ladder_ros.cli", "rehearse", "widowx", "--ab-pairs", "1",
                       "--policies", "steady=off,clumsy_ckpt=clumsy", "--tasks", "kitchen_single_1",
                       "--set", "widowx_driver.max_state_age_s=2.0", "--out", str(out)], timeout=900, cwd=REPO)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    key = json.loads((out / "ab" / "rehearsal_ab" / "key.json").read_text())
    summary = json.loads((out / "summary.json").read_text())["ab"]
    digests = {}
    for arm in ("A", "B"):
        system = key["pairs"]["0"][arm]
        assert system["variant"] == "proprio_verifier" and len(system["config_hash"]) == 16
        digests[system["policy"]] = system["config_hash"]
    assert set(digests) == {"steady", "clumsy_ckpt"}
    assert summary["scan"]["found"] == [] and summary["scan"]["texts_shown"] > 20
    assert {"steady", "clumsy_ckpt", digests["steady"][:8]} <= set(summary["scan"]["secrets"])
    for line in (out / "episodes.jsonl").read_text().splitlines():  # the rehearsal's own records stay masked
        record = json.loads(line)
        assert record["policy"] in ("A", "B") and record["policy_config_hash"] in ("A", "B")
    ranking = json.loads((out / "report" / "summary.json").read_text())["ab_ranking"]
    assert {s["system"] for s in ranking["systems"]} == {f"{n}@{h[:8]}/proprio_verifier" for n, h in digests.items()}
    assert "Ranking across blind A/B sessions" in result.stdout and "panel scan" in result.stdout
