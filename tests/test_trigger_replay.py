"""``ladder-ros trigger-replay`` on hand-made traces."""

import json

import pytest

from ladder_ros.cli import main


def write_csv(path, apertures, zs=None):
    lines = ["step,aperture" + (",z" if zs else "")]
    for i, a in enumerate(apertures):
        lines.append(f"{i},{a}" + (f",{zs[i]}" if zs else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_widowx_replay_json(tmp_path, capsys):
    trace = [1.0] * 3 + [0.0] * 3 + [1.0] * 60  # release at 6
    path = write_csv(tmp_path / "t.csv", trace)
    assert main(["trigger-replay", "--preset", "widowx", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attempt_end_steps"] == [6]
    # query 5 steps after the release (11), then 45 steps later without one (56)
    assert out["query_steps"] == [11, 56]


def test_franka_replay_from_jsonl_needs_z(tmp_path, capsys):
    rows = [{"aperture": 1.0, "z": 0.2}] * 5 + [{"aperture": 0.0, "z": 0.2 + 0.002 * i} for i in range(21)] \
        + [{"aperture": 1.0, "z": 0.25}] * 40
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert main(["trigger-replay", "--preset", "franka", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attempt_end_steps"] == [26] and out["query_steps"] == [61]
    bad = tmp_path / "noz.csv"
    write_csv(bad, [1.0] * 10)
    assert main(["trigger-replay", "--preset", "franka", str(bad)]) == 2
    assert "end-effector height" in capsys.readouterr().err


def test_table_output(tmp_path, capsys):
    path = write_csv(tmp_path / "t.csv", [1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    assert main(["trigger-replay", "--preset", "widowx", str(path)]) == 0
    out = capsys.readouterr().out
    assert "attempt end (release)" in out and "attempt ends: 1" in out


@pytest.mark.parametrize("content, message", [
    ("step,width\n0,1\n", "needs a header with an 'aperture' column"),
    ("aperture\n1\nnan\n", "row 2: aperture is NaN"),
    ("aperture\n1\nabc\n", "row 2: aperture must be a number"),
    ("step,aperture\n0,1\n2,1\n", "steps must count up by one"),
    ("aperture\n1\n1.7\n", "step 1: gripper aperture must be in [0, 1]"),
])
def test_bad_traces_name_file_and_row(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["trigger-replay", "--preset", "widowx", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err


def test_unknown_preset_lists_valid_names(tmp_path, capsys):
    path = write_csv(tmp_path / "t.csv", [1.0])
    assert main(["trigger-replay", "--preset", "ur5", str(path)]) == 2
    assert "valid: franka, widowx, widowx_robotarena" in capsys.readouterr().err


@pytest.mark.slow
def test_the_franka_trigger_on_a_recorded_sim_trace_agrees_with_trigger_replay(tmp_path, capsys):
    """Hold-out: an episode the other tests do not run, recorded step by step, replayed by the lab's tool."""
    pytest.importorskip("mujoco")
    from ladder_ros.core.presets import FRANKA
    from ladder_ros.core.suite import load_suite
    from ladder_ros.evaluation.components import make_policy, make_verifier
    from ladder_ros.evaluation.reference_loop import run_episode
    from ladder_ros.paths import share_path
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    suite = load_suite(share_path("config", "suites", "robolab_tabletop.yaml"))
    task = suite.task("sorting_split_2")
    with MujocoTabletop(suite, render=False) as sim:
        for variant, layout in (("proprio_trigger", 5), ("proprio_verifier", 6)):
            rows = []

            def record_trace(obs, _decision):
                rows.append((obs.step, float(obs.aperture), float(obs.ee_position[2])))
            record = run_episode(sim, make_policy("scripted_expert_franka", task, layout), task, variant, FRANKA,
                                 layout=layout, seed=layout, verifier=make_verifier("oracle"), on_step=record_trace)
            path = tmp_path / f"{variant}.csv"
            path.write_text("step,aperture,z\n" + "".join(f"{s},{a!r},{z!r}\n" for s, a, z in rows))
            assert main(["trigger-replay", "--preset", "franka", "--json", str(path)]) == 0
            replayed = json.loads(capsys.readouterr().out)
            events = record.events
            if variant == "proprio_trigger":
                ends = [(e["step"], e["reason"]) for e in events if e["kind"] == "attempt_ended"]
                assert list(zip(replayed["attempt_end_steps"], replayed["attempt_end_reasons"])) == ends
                assert {"release", "timeout"} <= {reason for _, reason in ends}, ends
            else:  # the verifier's queries: 35 steps after a release, or 300 without one (Appendix B)
                queries = [e["step"] for e in events if e["kind"] == "verification_requested"]
                assert replayed["query_steps"] == queries and queries, (replayed, queries)
