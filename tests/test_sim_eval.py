"""``ladder-ros sim-eval`` end to end on the built-in tabletop (small), and its error handling."""

import json

import pytest

from ladder_ros.cli import main

pytest.importorskip("mujoco")


def test_sim_eval_writes_records_summary_table_and_plot(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["sim-eval", "--tasks", "kitchen_single_1", "--episodes", "2", "--variants",
            "proprio_verifier,proprio_trigger", "--jobs", "1", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "proprio_verifier*" in printed and "oracle verifier (simulator state, not a VLM)" in printed
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 4
    rec = json.loads(lines[0])
    for key in ("task_id", "variant", "seed", "steps_used", "subgoals", "events", "success"):
        assert key in rec
    summary = json.loads((out / "summary.json").read_text())
    block = summary["variants"]["proprio_verifier"]
    for key in ("task_success_rate", "ci95", "subgoal_progress", "by_horizon", "failure_causes"):
        assert key in block
    assert summary["verifier"].startswith("oracle")
    assert (out / "success_vs_horizon.png").stat().st_size > 1000
    # the same variants meet the same layouts and seeds (paired)
    keys = sorted((json.loads(x)["variant"], json.loads(x)["layout"], json.loads(x)["seed"]) for x in lines)
    assert [k[1:] for k in keys if k[0] == "proprio_trigger"] == [k[1:] for k in keys if k[0] == "proprio_verifier"]
    # a rerun finds everything done and runs nothing new
    assert main(args) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 4
    assert "already in" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, message", [
    ("--variants", "magic", "unknown variant 'magic'; valid: low_level_policy"),
    ("--simulator", "gazebo", "unknown simulator 'gazebo'; valid: maniskill_bridge, mujoco_tabletop"),
    ("--tasks", "nope", "unknown task 'nope'"),
    ("--noise", "loud", "unknown expert noise model 'loud'"),
    ("--episodes", "0", "episodes must be >= 1"),
])
def test_bad_arguments_give_one_clear_error(tmp_path, capsys, flag, value, message):
    assert main(["sim-eval", flag, value, "--jobs", "1", "--no-progress", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
