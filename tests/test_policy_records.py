"""Every held step on record: refused chunks by reason, seam jumps refused above their bound and measured below it,
states and actions outside the training data counted, inference latency; the same report from the synchronous and
the wall-clock executor, in the episode record, and in ``sim-eval``'s table when a policy's chunks are all refused."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ladder_ros.core.record import EpisodeRecord, graph_record, interrupted_reason, score_fields, without_timing
from ladder_ros.policies.audit import SEAM_JUMP, ChunkScreen, PolicyReport, RejectedChunk, guard_statistics
from ladder_ros.policies.chunked import ChunkedPolicy
from ladder_ros.policies.config import Normalization, Statistics, parse_policy_config
from tests.policy_fixtures import ExecutorSimulation, ScriptedSource, bundle, config_data, observation, write_config


def seam_config(**seam):
    """The test config with the given seam bounds, under the synchronous rule (its seams are at chunk ends)."""
    return parse_policy_config(config_data(seam=seam, execution="synchronous"), source="seam.yaml")


def chunk_of(first_dx: float, then_dx: float = 0.0) -> np.ndarray:
    actions = np.zeros((5, 7))
    actions[0, 0], actions[1:, 0], actions[:, 6] = first_dx, then_dx, 1.0
    return actions


def test_a_seam_jump_above_its_bound_is_refused_and_counted_and_the_largest_is_kept():
    chunks = iter([chunk_of(0.01, 0.01), chunk_of(0.03, 0.0), chunk_of(-0.05, 0.0), chunk_of(0.0)])
    source = ScriptedSource(chunk=lambda n: next(chunks))
    messages = []
    policy = ChunkedPolicy(source, seam_config(max_translation_m=0.04), seed=0, log=messages.append)
    given = [policy.act_tagged(bundle(step), "go") for step in range(10)]
    # chunk 0 starts from standing still (0.01 m: fine); chunk 1 continues at 0.01 -> 0.03 (a change of 0.02,
    # fine); chunk 2 jumps from 0.0 to -0.05 (0.05 > 0.04: refused, the robot holds); chunk 3 starts at 0.0
    assert [g.chunk_id for g in given] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 3]
    assert given[8].held and not given[8].command[:6].any()
    report = policy.policy_report()
    assert report["rejected_chunks"] == {SEAM_JUMP: 1} and report["chunks"] == 3
    assert report["held_by_reason"] == {SEAM_JUMP: 1} and report["held_steps"] == 1 and report["steps"] == 10
    assert report["seam_jump_max"]["translation_m"] == pytest.approx(0.05)
    assert messages == ["holding still: seam_jump: chunk 2: the chunk's first action jumps 0.05 m from the last one "
                        "given (seam bound 0.04)", "acting again"]


def test_without_a_seam_bound_jumps_are_measured_not_refused():
    chunks = iter([chunk_of(0.0), chunk_of(0.08)])
    policy = ChunkedPolicy(ScriptedSource(chunk=lambda n: next(chunks)), seam_config(), seed=0)
    for step in range(5):
        policy.act_tagged(bundle(step), "go")
    report = policy.policy_report()
    assert report["rejected_chunks"] == {} and report["seam_jump_max"]["translation_m"] == pytest.approx(0.08)


def test_joint_targets_jump_from_where_the_arm_is_then_from_the_last_target():
    data = config_data(embodiment="franka", control_rate_hz=15, chunk={"length": 2, "execute": 1},
                       action={"key": "actions", "kind": "joint_position", "axes": [
                           {"name": f"j{i}", "unit": "rad", "low": -3, "high": 3} for i in range(2)] + [
                           {"name": "gripper", "unit": "1 closed", "low": 0, "high": 1}]},
                       seam={"max_joint_rad": 0.1})
    config = parse_policy_config(data, source="joints.yaml")
    screen = ChunkScreen(config, PolicyReport.of(config))
    measured = observation()  # two joints at 0.0
    screen.check_seam(np.array([0.05, -0.08, 1.0]), None, measured)  # from the measured joints: 0.08
    with pytest.raises(RejectedChunk, match=r"jumps 0\.15 rad from the last one given \(seam bound 0\.1\)"):
        screen.check_seam(np.array([0.2, -0.08, 0.0]), np.array([0.05, -0.08, 1.0]), measured)
    assert screen.report.seam_max == {"joint_rad": pytest.approx(0.15)}  # the gripper's jump is not a seam jump


def test_states_and_actions_far_from_the_training_data_are_counted_and_said_once():
    stats = Normalization(mode="mean_std", state=Statistics((0.3, 0.0, 0.1, 0.0, 0.0, 0.0, 0.5), (0.05,) * 6 + (0.5,)),
                          action=Statistics((0.0,) * 6 + (0.5,), (0.01,) * 6 + (0.5,)))
    config = parse_policy_config(config_data(ood_sigmas=3.0), source="ood.yaml")
    far = chunk_of(0.05)  # 5 standard deviations of ee_dx in one step
    chunks = iter([chunk_of(0.0), far, far])
    messages = []
    policy = ChunkedPolicy(ScriptedSource(chunk=lambda n: next(chunks)), config, seed=0, log=messages.append,
                           statistics=stats)
    for step in range(12):
        policy.act_tagged(bundle(step), "go")
    ood = policy.policy_report()["ood"]
    assert ood["action"] == 2 and ood["state"] == 0  # observation(): ee at (0.3, 0, 0.1), open: in distribution
    assert ood["worst"] == "action[0] (ee_dx) 5.0 standard deviations from the data's mean"
    assert messages == ["action out of the training data's distribution: action[0] (ee_dx) 5.0 standard deviations "
                        "from the data's mean (guard: 3)"]
    assert policy.policy_report()["held_steps"] == 0  # counted, never refused


def test_a_servers_statistics_in_the_config_drive_the_guard():
    statistics = {"mode": "quantile", "state": {"q01": [0.2, -0.2, 0.0, -0.5, -0.5, -0.5, 0.0],
                                                "q99": [0.5, 0.2, 0.3, 0.5, 0.5, 0.5, 1.0]},
                  "action": {"q01": [-0.02] * 6 + [0.0], "q99": [0.02] * 6 + [1.0]}}
    config = parse_policy_config(config_data(statistics=statistics), source="server.yaml")
    assert config.statistics is not None and config.normalization is None  # the server normalises, not us
    screen = ChunkScreen(config, PolicyReport.of(config), statistics=config.statistics)
    screen.check_state(np.array([0.35, 0.0, 0.15, 0.0, 0.0, 0.0, 0.5]))
    assert screen.report.ood["state"] == 0
    screen.check_state(np.array([0.35, 0.0, 0.15, 0.0, 2.5, 0.0, 0.5]))  # pitch 2.5 rad: q99 + 4 widths out
    assert screen.report.ood["state"] == 1 and "state[4] (ee_euler)" in screen.report.ood["worst"]


def test_the_wall_clock_executor_checks_the_seam_where_the_new_chunk_takes_over():
    # chunk n keeps ee_dx = 0.01 * n throughout: a seam jump of 0.01 between consecutive chunks
    source = ScriptedSource(chunk=lambda n: chunk_of(0.03 * n, 0.03 * n))
    config = seam_config(max_translation_m=0.05)
    sim = ExecutorSimulation(source, config, latency_s=0.05)
    sim.executor.set_subgoal("go")
    sim.run(20)
    report = sim.executor.episode_report()
    # 0 -> 0.03 is fine, 0.03 -> 0.06 is fine... the seam measured against the last queued command each time
    assert report["seam_jump_max"]["translation_m"] == pytest.approx(0.03)
    source2 = ScriptedSource(chunk=lambda n: chunk_of(0.06 * n, 0.06 * n))
    sim2 = ExecutorSimulation(source2, config, latency_s=0.05)
    sim2.executor.set_subgoal("go")
    given = sim2.run(20)
    report2 = sim2.executor.episode_report()
    assert report2["rejected_chunks"].get(SEAM_JUMP, 0) >= 1
    assert report2["held_by_reason"].get(SEAM_JUMP, 0) >= 1 and any(g is None for g in given)
    assert report2["inference_ms"]["count"] >= 2 and report2["steps"] == 20


def test_a_seam_jump_is_measured_per_axis_as_the_safety_filter_bounds_a_step():
    screen = ChunkScreen(seam_config(max_translation_m=0.05), PolicyReport.of(seam_config()))
    diagonal = np.array([0.04, 0.0, -0.03, 0.0, 0.0, 0.0, 1.0])  # 0.05 m long, within 0.05 m on every axis
    screen.check_seam(diagonal * [1, 1, 1.0001, 1, 1, 1, 1], None, None)  # from standing still: no jump
    with pytest.raises(RejectedChunk, match=r"jumps 0\.08 m"):
        screen.check_seam(-diagonal * [1, 1, 1, 1, 1, 1, -1], diagonal, None)  # a reversal: 0.08 m on x


def test_after_a_refused_chunk_the_next_seam_is_measured_from_standing_still():
    # The policy reverses once (+0.04 m, then -0.04 m a step): the reversing chunk jumps 0.08 m and is refused, the
    # arm holds a period, and the next chunk takes over from standing still (a jump of 0.04 m), not from a command
    # given before the hold.
    source = ScriptedSource(chunk=lambda n: chunk_of(0.04 if n == 0 else -0.04, 0.04 if n == 0 else -0.04))
    sim = ExecutorSimulation(source, seam_config(max_translation_m=0.05), latency_s=0.05)
    sim.executor.set_subgoal("go")
    given = sim.run(20)
    report = sim.executor.episode_report()
    assert report["rejected_chunks"] == {SEAM_JUMP: 1}
    acted = [g.command[0] for g in given if g is not None]
    assert acted[:4] == pytest.approx([0.04] * 4) and acted[-1] == pytest.approx(-0.04) and len(acted) >= 14


def test_the_graph_record_names_the_policy_and_carries_its_report():
    report = PolicyReport.of(seam_config()).to_dict()
    task = {"task_id": "t", "suite": "s", "category": "single_destination", "subgoals": []}
    status = {"episode_id": "e1", "task": task, "variant": "low_level_policy"}
    record = graph_record(status, events=[], orchestration={}, finish_reason="plan_exhausted", last_step=3,
                          score=None, wall_s=1.0, policy=report)
    assert record["policy"] == "test_bridge" and record["policy_report"]["config_hash"] == seam_config().digest()
    assert graph_record(status, events=[], orchestration={}, finish_reason=None, last_step=0, score=None,
                        wall_s=0.0)["policy"] == ""


def test_the_config_hash_follows_what_runs():
    base = seam_config()
    assert base.digest() == seam_config().digest() and len(base.digest()) == 16
    assert seam_config(max_translation_m=0.03).digest() != base.digest()
    from dataclasses import replace

    rotated = replace(base, action=replace(base.action, rotation="sxyz_axis_angle"))
    assert rotated.digest() != base.digest()  # a rotation convention given on the command line is part of it


def test_sim_eval_says_when_every_chunk_of_the_policy_was_refused(tmp_path, capsys):
    pytest.importorskip("mujoco", reason="sim-eval runs the built-in MuJoCo tabletop")
    from ladder_ros.cli import main
    from ladder_ros.instruments.openpi_fake_server import FakePolicyServer

    def eight_numbers(request):  # one number too many per action, as a server trained for another layout
        return {"actions": np.zeros((5, 8), dtype=np.float32)}

    with FakePolicyServer(eight_numbers) as server:
        policy = write_config(tmp_path / "misfit.yaml", config_data(
            name="misfit", server={"host": "127.0.0.1", "port": server.port}))
        out = tmp_path / "run"
        code = main(["sim-eval", "--tasks", "kitchen_single_1", "--episodes", "1", "--variants", "low_level_policy",
                     "--policy", str(policy), "--jobs", "1", "--no-progress", "--out", str(out)])
    assert code == 0
    table = (out / "table.txt").read_text()
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    report = record["policy_report"]
    assert record["policy"] == "misfit" and report["all_chunks_rejected"] is True and report["chunks"] == 0
    refused = report["rejected_chunks"]["invalid action"]
    assert report["held_steps"] == report["steps"] == record["steps_used"] == refused
    assert f"policy misfit: {refused} of {refused} steps held (100.0 %) (by reason: invalid action {refused})" in table
    assert (f"WARNING: every chunk policy misfit returned was refused (invalid action {refused}): the robot held "
            "still in every episode") in table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy_steps"]["episodes_all_rejected"] == 1
    assert "WARNING: every chunk policy misfit returned was refused" in capsys.readouterr().out


def test_two_runs_of_an_episode_differ_only_in_timing_fields_and_the_record_keeps_its_own():
    policy = ChunkedPolicy(ScriptedSource(chunk=lambda n: chunk_of(0.01)), seam_config(), seed=0)
    for step in range(6):
        policy.act_tagged(bundle(step), "go")
    report = policy.policy_report()
    record = {"task_id": "t", "wall_s": 1.5, "execution": {"attempts": 1}, "policy_report": report}
    kept = without_timing(record)
    assert set(kept) == {"task_id", "policy_report"}
    assert "inference_ms" not in kept["policy_report"] and "warm_up_s" not in kept["policy_report"]
    assert kept["policy_report"]["chunks"] == report["chunks"] > 0  # the policy's account stays
    assert record["policy_report"] is report and "inference_ms" in report and record["wall_s"] == 1.5  # untouched
    assert without_timing({"task_id": "t", "policy_report": {}}) == {"task_id": "t", "policy_report": {}}


# ------------------------------------------------------------------ the episode record's own fields
def _status(**overrides):
    task = {"task_id": "kitchen_multi_2", "suite": "kitchen", "category": "multi_destination",
            "subgoals": [{"text": "pick the carrot"}, {"text": "place it on the plate"}, {"text": "open the drawer"}],
            "success_rule": "simplerenv"}
    return {"episode_id": "ep-7", "task": task, "variant": "ladder", "layout": 3, "seed": 11, "budget_steps": 300,
            **overrides}


EVENTS = [{"step": 0, "kind": "episode_started"}, {"step": 4, "kind": "verification_requested"},
          {"step": 9, "kind": "subgoal_started"}, {"step": 12, "kind": "verification_requested"},
          {"step": 15, "kind": "verification_requested"}]


def test_the_graph_record_of_a_scored_episode_holds_every_field_of_the_schema():
    score = {"success": 1, "subgoals_done": 2.0, "steps_used": 187, "subgoals": ({"done": True}, {"done": True}),
             "violations": ("knocked the cup",), "simulator": "maniskill3", "final_goal": {"carrot": "plate"},
             "safety": {"counts": {"workspace": 2}}, "bridge_timing_s": {"step_p95": 0.01}, "steps_taken": 187,
             "other": "not in the record"}
    record = graph_record(_status(), events=EVENTS, orchestration={"subgoal_index": 2}, finish_reason="success",
                          last_step=190, score=score, wall_s=12.5, preset="ladder_default",
                          preset_options={"verifier": "none"}, plan={"source": "planner", "subgoals": 3},
                          policy={"policy": "octo_bridge", "chunks": 40}, extra={"note": "kept"})
    assert record == {
        "schema_version": 1, "task_id": "kitchen_multi_2", "suite": "kitchen", "category": "multi_destination",
        "horizon": 3, "variant": "ladder", "layout": 3, "seed": 11, "success": True, "subgoals_done": 2,
        "steps_used": 187, "budget_steps": 300, "finish_reason": "success",
        "subgoals": [{"done": True}, {"done": True}], "violations": ["knocked the cup"], "events": EVENTS,
        "verification_queries": 3, "verifier": None, "policy": "octo_bridge", "simulator": "maniskill3",
        "final_goal": {"carrot": "plate"}, "orchestration": {"subgoal_index": 2}, "wall_s": 12.5,
        "success_rule": "simplerenv", "preset": "ladder_default", "preset_options": {"verifier": "none"},
        "plan": {"source": "planner", "subgoals": 3}, "action_convention": {},
        "policy_report": {"policy": "octo_bridge", "chunks": 40},
        "kind": "task", "start": "layout", "start_after": None,  # a graph episode built from its layout
        "policy_config_hash": "",  # neither the status nor the report names one
        "episode_id": "ep-7", "scored": True, "safety": {"counts": {"workspace": 2}},
        "bridge": {"bridge_timing_s": {"step_p95": 0.01}, "steps_taken": 187}, "interrupted": False,
        "note": "kept"}
    assert type(record["success"]) is bool and type(record["subgoals_done"]) is int
    assert list(record) == list(record)[:1] + [f for f in EpisodeRecord.__dataclass_fields__ if f != "extra"] + [
        "episode_id", "scored", "safety", "bridge", "interrupted", "note"]  # schema_version first, the extras last


def test_an_unscored_episode_counts_as_failed_with_nothing_done_and_the_steps_the_graph_reached():
    for last_step, steps_used in ((57, 57), (0, 0), (-1, 0)):  # -1: no step was taken
        record = graph_record(_status(), events=[], orchestration={}, finish_reason=None, last_step=last_step,
                              score=None, wall_s=0.5)
        assert {k: record[k] for k in ("success", "subgoals_done", "steps_used", "subgoals", "violations",
                                       "simulator", "final_goal", "scored", "safety", "bridge")} == {
            "success": False, "subgoals_done": 0, "steps_used": steps_used, "subgoals": [], "violations": [],
            "simulator": "", "final_goal": {}, "scored": False, "safety": {}, "bridge": {}}
        assert record["plan"] == {"source": "reference"} and record["verification_queries"] == 0
    assert score_fields(None, 12) == {"success": False, "subgoals_done": 0, "steps_used": 12, "subgoals": [],
                                      "violations": [], "simulator": "", "final_goal": {}}


def test_a_score_without_safety_bridge_timing_or_simulator_leaves_those_empty():
    score = {"success": False, "subgoals_done": 0, "steps_used": 40, "subgoals": [], "violations": [],
             "final_goal": {}}
    record = graph_record(_status(), events=[], orchestration={}, finish_reason="budget", last_step=40, score=score,
                          wall_s=1.0)
    assert record["scored"] is True and record["safety"] == {} and record["bridge"] == {} and record["simulator"] == ""
    partial = graph_record(_status(), events=[], orchestration={}, finish_reason="budget", last_step=40,
                           score={**score, "steps_taken": 39}, wall_s=1.0)
    assert partial["bridge"] == {"steps_taken": 39}


def test_a_status_missing_its_fields_gives_empty_ones_not_an_error():
    # An episode recorder that lost the orchestrator may hold a status with no task yet.
    record = graph_record({}, events=[], orchestration={}, finish_reason=interrupted_reason("the graph stopped"),
                          last_step=0, score=None, wall_s=0.0)
    assert {k: record[k] for k in ("task_id", "suite", "category", "horizon", "variant", "layout", "seed",
                                   "budget_steps", "success_rule", "episode_id", "preset", "preset_options",
                                   "policy", "policy_report", "finish_reason", "interrupted")} == {
        "task_id": "", "suite": "", "category": "", "horizon": 0, "variant": "", "layout": 0, "seed": 0,
        "budget_steps": 0, "success_rule": "ladder", "episode_id": "", "preset": "", "preset_options": {},
        "policy": "", "policy_report": {}, "finish_reason": "aborted: interrupted: the graph stopped",
        "interrupted": False}
    assert graph_record(_status(task=None), events=[], orchestration={}, finish_reason=None, last_step=0,
                        score=None, wall_s=0.0)["horizon"] == 0


def test_the_caller_s_extra_fields_override_the_defaults():
    # The orchestrator puts its own safety counts and its interrupted flag in: they win over the record's defaults.
    score = {"success": True, "subgoals_done": 1, "steps_used": 5, "subgoals": [], "violations": [],
             "final_goal": {}, "safety": {"counts": {"from_bridge": 1}}}
    record = graph_record(_status(), events=[], orchestration={}, finish_reason="aborted", last_step=5, score=score,
                          wall_s=1.0, extra={"safety": {"counts": {"from_node": 3}}, "interrupted": True})
    assert record["safety"] == {"counts": {"from_node": 3}} and record["interrupted"] is True
    assert "extra" not in record


def test_the_in_process_record_has_the_graphs_fields_first_and_its_extras_merged():
    record = EpisodeRecord(task_id="t", suite="s", category="c", horizon=1, variant="v", layout=0, seed=1,
                           success=True, subgoals_done=1, steps_used=3, budget_steps=100, finish_reason="success",
                           subgoals=[], violations=[], events=[], verification_queries=0, verifier=None, policy="p",
                           simulator="tabletop", final_goal={}, orchestration={}, extra={"episode_id": "e"})
    data = record.to_dict()
    assert data["schema_version"] == 1 and next(iter(data)) == "schema_version"
    assert data["episode_id"] == "e" and "extra" not in data
    assert data["plan"] == {"source": "reference"} and data["success_rule"] == "ladder" and data["wall_s"] == 0.0


def test_without_timing_touches_only_the_timing_paths():
    record = {"task_id": "t", "wall_s": 3.0, "execution": "pool", "inference_ms": {"p50": 1.0}, "warm_up_s": 2.0,
              "policy_report": None}
    # policy_report is no mapping here: the top-level keys that share a nested timing field's name stay
    assert without_timing(record) == {"task_id": "t", "inference_ms": {"p50": 1.0}, "warm_up_s": 2.0,
                                      "policy_report": None}
    assert without_timing({"policy_report": {"inference_ms": 1, "warm_up_s": 2, "chunks": 3}}) == {
        "policy_report": {"chunks": 3}}
    assert interrupted_reason("the recorder lost the orchestrator") == (
        "aborted: interrupted: the recorder lost the orchestrator")


# ------------------------------------------------------------------ the report's fields and the screen's edges
def test_the_report_says_every_field_with_latency_percentiles_in_double_precision():
    config = seam_config()
    report = PolicyReport.of(config)
    empty = report.to_dict()
    assert empty["final"] is True and empty["all_chunks_rejected"] is False  # nothing refused: not "all refused"
    assert empty["inference_ms"] == {"p50": None, "p95": None, "count": 0}
    report.inference_ms += [10.0, 20.0, 30.0, 40.0]
    report.chunks, report.server_errors, report.warm_up_s = 2, 3, 12.5
    report.refused(SEAM_JUMP)
    report.step()
    report.step(SEAM_JUMP)
    report.seam_max["translation_m"] = 0.02
    assert report.to_dict(final=False) == {
        "policy": "test_bridge", "config": "test_bridge", "config_hash": config.digest(), "final": False, "chunks": 2,
        "rejected_chunks": {SEAM_JUMP: 1}, "all_chunks_rejected": False, "steps": 2, "held_steps": 1,
        "held_by_reason": {SEAM_JUMP: 1}, "inference_ms": {"p50": 25.0, "p95": 38.5, "count": 4},
        "seam_jump_max": {"translation_m": 0.02}, "ood": {"state": 0, "action": 0, "worst_sigma": 0.0, "worst": ""},
        "server_errors": 3, "warm_up_s": 12.5, "execution": "lockstep", "blend_steps": 0, "stale_dropped": 0,
        "splice_jump_max": {}, "splices": 0, "blended": 0, "reanchored": 0, "guided_chunks": 0}
    report.chunks = 0
    assert report.to_dict()["all_chunks_rejected"] is True
    single = PolicyReport.of(config)  # a model timed in single precision: the percentile is still a double's
    single.inference_ms += [np.float32(1.1), np.float32(1.3)]
    expected = float(np.float32(1.1)) + 0.95 * (float(np.float32(1.3)) - float(np.float32(1.1)))
    assert single.to_dict()["inference_ms"]["p95"] == pytest.approx(expected, rel=1e-15, abs=0)


def joint_screen(joints: int, bound: float = 0.1) -> ChunkScreen:
    data = config_data(embodiment="franka", control_rate_hz=15, chunk={"length": 2, "execute": 1},
                       action={"key": "actions", "kind": "joint_position", "axes": [
                           {"name": f"j{i}", "unit": "rad", "low": -3, "high": 3} for i in range(joints)] + [
                           {"name": "gripper", "unit": "1 closed", "low": 0, "high": 1}]},
                       seam={"max_joint_rad": bound})
    config = parse_policy_config(data, source="joints.yaml")
    return ChunkScreen(config, PolicyReport.of(config))


def with_joints(*positions: float):
    return dataclasses.replace(observation(), joint_names=tuple(f"j{i}" for i in range(len(positions))),
                               joint_positions=np.array(positions, dtype=np.float64))


def test_joint_seams_without_a_joint_reading_or_with_the_gripper_among_the_joints():
    screen = joint_screen(2)
    screen.check_seam(np.array([0.9, 0.0, 1.0]), None, None)  # nothing given, nothing measured: not measured
    screen.check_seam(np.array([0.9, 0.0, 1.0]), None, with_joints())  # a robot without joint readings: the same
    assert screen.report.seam_max == {}
    with pytest.raises(RejectedChunk, match=r"jumps 0\.3 rad"):  # from the last target, the arm unobserved
        screen.check_seam(np.array([0.3, 0.0, 1.0]), np.array([0.0, 0.0, 1.0]), None)
    # a reading that holds the gripper too (as many numbers as the command): the seam from all of it
    screen.check_seam(np.array([0.05, 0.0, 1.0]), None, with_joints(0.0, 0.0, 0.95))
    assert screen.report.seam_max == {"joint_rad": pytest.approx(0.3)}
    one = joint_screen(1)  # one arm joint and the gripper: the gripper's change is no seam jump
    one.check_seam(np.array([0.05, 1.0]), np.array([0.0, 0.0]), with_joints(0.0))
    assert one.report.seam_max == {"joint_rad": pytest.approx(0.05)}


def test_a_jump_exactly_at_the_bound_is_allowed():
    screen = joint_screen(2, bound=0.25)
    screen.check_seam(np.array([0.25, 0.0, 1.0]), np.array([0.0, 0.0, 1.0]), None)  # exact in binary
    with pytest.raises(RejectedChunk, match=r"jumps 0\.25 rad from the last one given \(seam bound 0\.25\)"):
        screen.check_seam(np.array([0.25 + 1e-12, 0.0, 1.0]), np.array([0.0, 0.0, 1.0]), None)


def ood_screen():
    stats = Normalization(mode="mean_std", state=Statistics((0.0,) * 7, (0.5,) * 7),
                          action=Statistics((0.0,) * 7, (0.015625,) * 7))
    config = parse_policy_config(config_data(ood_sigmas=3.0), source="ood.yaml")
    return ChunkScreen(config, PolicyReport.of(config), statistics=stats)


def test_a_value_exactly_at_the_guard_is_in_distribution_and_the_first_of_equal_worsts_is_named():
    screen = ood_screen()
    screen.check_state(np.array([1.5, 0, 0, 0, 0, 0, 0]))  # 1.5 / 0.5: exactly 3 standard deviations
    assert screen.report.ood == {"state": 0, "action": 0, "worst_sigma": 0.0, "worst": ""}
    screen.check_state(np.array([0, 0, 0, 0, -2.0, 0, 0]))  # 4 standard deviations on ee_euler
    action = np.zeros((5, 7))
    action[:, 1] = 0.0625  # 0.0625 / 0.015625: 4 standard deviations on ee_dy, no worse than the state's
    screen.commands(action)
    assert screen.report.ood == {"state": 1, "action": 1, "worst_sigma": 4.0,
                                 "worst": "state[4] (ee_euler) 4.0 standard deviations from the data's mean"}


def test_the_guard_reads_a_local_models_statistics_then_the_configs_normalisation_then_its_statistics():
    config = seam_config()
    own = Normalization(mode="mean_std", state=Statistics((0.0,) * 7, (1.0,) * 7),
                        action=Statistics((0.0,) * 7, (1.0,) * 7))
    given = dataclasses.replace(own, mode="quantile")
    server = dataclasses.replace(own, state=Statistics((0.0,) * 7, (2.0,) * 7))

    class LocalModel:
        normalization = own

    assert guard_statistics(dataclasses.replace(config, normalization=given), LocalModel()) is own
    assert guard_statistics(dataclasses.replace(config, normalization=given), object()) is given
    assert guard_statistics(dataclasses.replace(config, normalization=given, statistics=server), None) is given
    assert guard_statistics(dataclasses.replace(config, statistics=server), LocalModel()) is own
    assert guard_statistics(dataclasses.replace(config, statistics=server), None) is server
    assert guard_statistics(config, None) is None
