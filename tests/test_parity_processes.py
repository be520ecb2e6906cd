"""Tier three: `ladder-ros parity` with every node its own process, and the comparison itself."""

import subprocess
import sys
from pathlib import Path

import pytest

from ladder_ros.evaluation.parity import compare_records, first_difference, plan_episodes
from ladder_ros.core.suite import load_suite

REPO = Path(__file__).resolve().parent.parent


def test_the_comparison_finds_the_first_difference():
    reference = {"events": [{"step": 0, "kind": "episode_started"}, {"step": 30, "kind": "attempt_ended"}],
                 "final_goal": {"resting": [["carrot", "plate", 1]]}, "steps_used": 30}
    assert compare_records(reference, dict(reference)) is None
    moved = {**reference, "events": [reference["events"][0], {"step": 31, "kind": "attempt_ended"}]}
    assert compare_records(reference, moved) == "events[1].step: reference 30, graph 31"
    shorter = {**reference, "events": reference["events"][:1]}
    assert compare_records(reference, shorter).startswith("events: 2 items in the reference, 1 in the graph")
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ".b: only in the graph: 2"


def test_default_episodes_cover_three_horizons():
    suite = load_suite(REPO / "config" / "suites" / "tabletop.yaml")
    episodes = plan_episodes(suite, None, ["proprio_verifier", "periodic_trigger"], [0, 1], None)
    horizons = {suite.task(e.task_id).horizon for e in episodes}
    assert len(episodes) == 12 and len(horizons) == 3
    assert plan_episodes(suite, ["relay_2"], ["proprio_trigger"], [5], 1)[0].layout == 5


@pytest.mark.ros
@pytest.mark.slow
def test_graph_processes_reproduce_the_reference_loop(tmp_path):
    pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
    result = subprocess.run(
        [sys.executable, "-m", "ladder_ros.cli", "parity", "widowx", "--tasks", "kitchen_single_1,sorting_split_2",
         "--variants", "proprio_verifier,periodic_trigger", "--seeds", "3", "--set", "sim_bridge.render=false",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parity: 4/4 episodes identical" in result.stdout
    assert (tmp_path / "parity.json").is_file() and any((tmp_path / "recordings").iterdir())
