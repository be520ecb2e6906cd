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
    records = [json.loads(x) for x in lines]
    for rec in records:
        assert rec["task_id"] == "kitchen_single_1" and rec["horizon"] == 1
        assert rec["subgoals_done"] == sum(o["done"] for o in rec["subgoals"])
        assert rec["success"] == (rec["subgoals_done"] == 1 and not rec["violations"])
        assert rec["events"][0]["kind"] == "episode_started" and rec["events"][-1]["kind"] == "episode_finished"
        assert rec["steps_used"] <= 100  # 100 steps per subgoal on the WidowX suites (Section 3)
    summary = json.loads((out / "summary.json").read_text())
    # 95 % Wilson intervals for n = 2 episodes, by hand: 0/2, 1/2, 2/2
    wilson_of_two = {0: [0.0, 0.6576], 1: [0.0945, 0.9055], 2: [0.3424, 1.0]}
    for variant in ("proprio_verifier", "proprio_trigger"):
        recs = [r for r in records if r["variant"] == variant]
        wins = sum(r["success"] for r in recs)
        block = summary["variants"][variant]
        assert block["episodes"] == 2 and block["task_success_rate"] == wins / 2
        assert block["ci95"] == pytest.approx(wilson_of_two[wins], abs=1e-4)
        assert block["subgoal_progress"] == sum(r["subgoals_done"] for r in recs) / 2
        assert block["by_horizon"] == {"1": {"success_rate": wins / 2, "ci95": block["ci95"], "n": 2}}
        undone = [o["cause"] for r in recs for o in r["subgoals"] if not o["done"]]
        assert sum(block["failure_causes"].values()) == len(undone)
        assert all(block["failure_causes"][c] == undone.count(c) for c in set(undone))
        assert block["verification_queries"] == sum(r["verification_queries"] for r in recs)
    assert summary["variants"]["proprio_trigger"]["verification_queries"] == 0  # it never verifies
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
