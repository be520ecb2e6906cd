"""Automatic resets: start regions in the scene schema, the reset plan, its check, and a reset run in the loop."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.goals import GoalState
from ladder_ros.core.record import EpisodeRecord, episode_kind, episode_start
from ladder_ros.core.reset import (
    ResetPlanError,
    ResetScene,
    StartRegion,
    auto_reset_refusal,
    out_of_place,
    plan_reset,
    retry_order,
    start_state_confirmed,
)
from ladder_ros.core.suite import load_suite
from ladder_ros.sim.tabletop_scene import parse_scene, parse_scenes, reset_scene, sample_layout

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "config" / "suites" / "tabletop.yaml"
BRIDGE = REPO / "config" / "suites" / "bridge.yaml"


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


@pytest.fixture(scope="module")
def scenes(suite):
    return parse_scenes(suite.scenes)


def _kitchen_raw():
    return copy.deepcopy(yaml.safe_load(SUITE.read_text())["scenes"]["kitchen"])


# ----------------------------------------------------------------------------- the schema


def test_start_regions_parse_and_every_table_scene_has_them(suite, scenes):
    kitchen = scenes["kitchen"]
    assert list(kitchen.start_regions) == ["right_near", "right_far"]
    near = kitchen.start_regions["right_near"]
    assert near.centre == (0.24, -0.165) and near.size == (0.08, 0.085)
    assert near.text == "the right side of the table near the robot" and near.capacity == 5
    assert near.contains_xy((0.30, -0.10)) and not near.contains_xy((0.36, 0.12))
    for name, scene in scenes.items():  # objects that start on the table have somewhere to go back to
        on_table = [k for k, o in scene.objects.items() if o.start == "table"]
        assert bool(scene.start_regions) == bool(on_table), name
    # the transfer scene's objects start on the plate: the plate is their start region
    transfer = reset_scene(scenes["transfer"], suite.task("transfer_2"))
    assert [(r.name, r.is_container, r.kinds, r.capacity) for r in transfer.regions] == [
        ("plate", True, ("carrot", "spoon"), 2)]
    for task in suite.tasks:
        assert auto_reset_refusal(task, reset_scene(scenes[task.scene], task)) is None, task.task_id


def test_start_regions_change_no_layout(suite):
    """Layouts (and so the model, the physics and the image) do not depend on the start regions."""
    with_regions = parse_scene("kitchen", _kitchen_raw())
    raw = _kitchen_raw()
    del raw["start_regions"]
    without = parse_scene("kitchen", raw)
    task = suite.task("kitchen_single_6")
    for k in (0, 9):
        a, b = sample_layout(with_regions, task, k), sample_layout(without, task, k)
        assert [(o.name, o.yaw) for o in a.objects] == [(o.name, o.yaw) for o in b.objects]
        assert all(np.array_equal(x.position, y.position) for x, y in zip(a.objects, b.objects))


@pytest.mark.parametrize("region, message", [
    ({"centre": [0.24, -0.165], "size": [0.08, 0.085]}, "right_near.text: missing required key"),
    ({"centre": [0.24, -0.165], "size": [0.08, 0.085], "text": " "}, "right_near.text: expected the area's name"),
    ({"centre": [0.24, -0.165], "size": [0.08, 0.085], "text": "t", "colour": 1}, "right_near.colour: unknown key"),
    ({"centre": [0.24], "size": [0.08, 0.085], "text": "t"}, "right_near.centre: expected a list of 2 numbers"),
    ({"centre": [0.24, -0.165], "size": [0.01, 0.085], "text": "t"}, "right_near.size: half extents of at least"),
    ({"centre": [0.24, -0.25], "size": [0.08, 0.085], "text": "t"}, "right_near: reaches y = [-0.335, -0.165]"),
    ({"centre": [0.30, 0.0], "size": [0.08, 0.085], "text": "t"}, "right_near: comes within"),
    ({"centre": [0.40, -0.165], "size": [0.08, 0.085], "text": "t"}, "right_near: overlaps start region"),
    ({"centre": [0.24, -0.165], "size": [0.08, 0.085], "text": "t", "objects": ["pear"]},
     "right_near.objects: unknown object 'pear'"),
    ({"centre": [0.24, -0.165], "size": [0.08, 0.085], "text": "t", "capacity": 0},
     "right_near.capacity: capacity must be a positive integer"),
])
def test_a_bad_start_region_is_refused_naming_the_scene_and_the_region(region, message):
    raw = _kitchen_raw()
    regions = {"right_far": raw["start_regions"]["right_far"], "right_near": region}
    raw["start_regions"] = regions
    with pytest.raises(ConfigError) as err:
        parse_scene("kitchen", raw)
    assert "scenes.kitchen.start_regions.right_near" in str(err.value) and message in str(err.value)


def test_a_start_region_named_like_a_container_or_for_an_object_on_a_container_is_refused():
    raw = _kitchen_raw()
    raw["start_regions"]["plate"] = raw["start_regions"].pop("right_near")
    with pytest.raises(ConfigError, match="scenes.kitchen.start_regions.plate: a start region needs a name"):
        parse_scene("kitchen", raw)
    raw = copy.deepcopy(yaml.safe_load(SUITE.read_text())["scenes"]["transfer"])
    raw["start_regions"] = {"near": {"centre": [0.2, -0.2], "size": [0.04, 0.04], "text": "t", "objects": ["carrot"]}}
    with pytest.raises(ConfigError, match="start_regions.near.objects: the carrot starts on the plate"):
        parse_scene("transfer", raw)


# ----------------------------------------------------------------------------- the plan


def test_moved_objects_go_back_to_the_first_region_with_room(suite, scenes):
    task = suite.task("kitchen_single_2")
    scene = reset_scene(scenes["kitchen"], task)
    plan = plan_reset(task, scene, GoalState({("carrot", "plate"): 1, ("spoon", "plate"): 1}))
    # the task undone in reverse: the spoon, put down last, goes back first
    assert [(s.object, s.destination, s.text) for s in plan.moves] == [
        ("spoon", "right_near", "put the spoon on the right side of the table near the robot"),
        ("carrot", "right_near", "put the carrot on the right side of the table near the robot")]
    assert plan.task.task_id == "kitchen_single_2/reset" and plan.task.scene == "kitchen"
    assert plan.task.instruction == "put the spoon and the carrot on the right side of the table near the robot"
    assert dict(plan.expected) == {("carrot", "right_near"): 1, ("spoon", "right_near"): 1}
    # where the episode started decides, when the counts at its start are given
    plan = plan_reset(task, scene, {("carrot", "plate"): 1}, before={("carrot", "right_far"): 1})
    assert [(s.object, s.destination) for s in plan.moves] == [("spoon", "right_near"), ("carrot", "right_far")]


def test_a_reset_run_again_sends_back_first_what_the_last_one_did_not_get_to(suite, scenes):
    moves = [{"object": "spoon", "destination": "right_far"}, {"object": "carrot", "destination": "right_near"},
             {"object": "cup", "destination": "left"}]
    last = {"reset": {"moves": moves}, "subgoals": [
        {"index": 0, "done": False, "cause": "attempted_never_completed"},
        {"index": 1, "done": False, "cause": "never_reached"}, {"index": 2, "done": True, "cause": None}]}
    assert retry_order(last) == ("carrot", "cup", "spoon")  # never reached, put back, tried and not moved
    for hostile in ({}, {"reset": None}, {"reset": {"moves": "spoon"}}, {"reset": {"moves": moves}, "subgoals": 3},
                    {"reset": {"moves": [None, 7]}, "subgoals": [{"done": False}, "x"]}):
        assert retry_order(hostile) == ()
    for cause in ([], {"a": 1}, 3):  # an unknown cause ranks with the failed ones
        assert retry_order({"reset": {"moves": moves[:2]}, "subgoals": [
            {"done": False, "cause": cause}, {"done": False, "cause": "never_reached"}]}) == ("carrot", "spoon")
    task = suite.task("kitchen_single_2")
    scene = reset_scene(scenes["kitchen"], task)
    after = {("carrot", "plate"): 1, ("spoon", "plate"): 1}
    plan = plan_reset(task, scene, after, first=("carrot", "cup", "carrot"))  # a kind the task does not move: none
    assert [(s.object, s.destination) for s in plan.moves] == [("carrot", "right_near"), ("spoon", "right_near")]
    assert [s.object for s in plan_reset(task, scene, after).moves] == ["spoon", "carrot"]


def test_an_object_already_in_a_start_region_is_left_alone(suite, scenes):
    task = suite.task("kitchen_single_2")
    scene = reset_scene(scenes["kitchen"], task)
    plan = plan_reset(task, scene, GoalState({("carrot", "right_far"): 1, ("spoon", "plate"): 1}))
    assert [(s.object, s.destination) for s in plan.moves] == [("spoon", "right_near")]
    assert dict(plan.expected) == {("carrot", "right_far"): 1, ("spoon", "right_near"): 1}


def test_nothing_moved_gives_an_empty_reset(suite, scenes):
    task = suite.task("kitchen_single_2")
    plan = plan_reset(task, reset_scene(scenes["kitchen"], task),
                      GoalState({("carrot", "right_near"): 1, ("spoon", "right_far"): 1}))
    assert plan.empty and plan.task is None and plan.moves == ()
    assert start_state_confirmed(GoalState({("carrot", "right_near"): 1, ("spoon", "right_far"): 1}), plan)


def test_transfer_objects_go_back_onto_the_plate(suite, scenes):
    task = suite.task("transfer_2")
    scene = reset_scene(scenes["transfer"], task)
    plan = plan_reset(task, scene, GoalState({("carrot", "towel"): 1, ("spoon", "plate"): 1}))
    assert [(s.object, s.destination, s.text) for s in plan.moves] == [
        ("carrot", "plate", "put the carrot on the plate")]
    assert dict(plan.expected) == {("carrot", "plate"): 1, ("spoon", "plate"): 1}


def test_duplicates_go_where_no_instance_of_their_kind_rests_yet(suite, scenes):
    task = suite.task("duplicates_2")
    scene = reset_scene(scenes["duplicates"], task)
    plan = plan_reset(task, scene, GoalState({("corn", "cloth"): 1, ("corn", "right_near"): 1}))
    # a second corn in right_near could not be told from the first by a count
    assert [(s.object, s.destination, s.text) for s in plan.moves] == [
        ("corn", "right_far", "put a corn on the far right side of the table")]
    plan = plan_reset(task, scene, GoalState({("corn", "cloth"): 2}))
    assert [(s.object, s.destination) for s in plan.moves] == [("corn", "right_near"), ("corn", "right_near")]
    assert dict(plan.expected) == {("corn", "right_near"): 2}


def test_no_room_and_unreadable_counts_are_refused_in_one_line(suite):
    task = suite.task("kitchen_single_2")
    tiny = ResetScene(scene="kitchen", regions=(StartRegion("corner", "the corner", capacity=1),),
                      object_counts={"carrot": 1, "spoon": 1})
    with pytest.raises(ResetPlanError, match="no start region has room for the carrot \\(the corner holds 1 of 1\\)"):
        plan_reset(task, tiny, GoalState({("carrot", "plate"): 1}))
    with pytest.raises(ResetPlanError, match="the count of the carrot on the corner after the episode could not"):
        plan_reset(task, tiny, {("carrot", "corner"): None})


def test_the_check_names_what_is_out_of_place(suite, scenes):
    task = suite.task("kitchen_single_2")
    plan = plan_reset(task, reset_scene(scenes["kitchen"], task), GoalState({("carrot", "plate"): 1}))
    done = GoalState({("carrot", "right_near"): 1, ("spoon", "right_near"): 1})
    assert start_state_confirmed(done, plan) and out_of_place(done, plan) == ()
    short = {("carrot", "right_near"): 1, ("spoon", "right_near"): None}
    assert not start_state_confirmed(short, plan)
    assert [s.describe({"right_near": "the right side"}) for s in out_of_place(short, plan)] == [
        "spoon on the right side: an unreadable count of 1"]


def test_a_task_without_start_regions_cannot_be_reset_and_says_so_in_one_line(suite):
    from ladder_ros.evaluation.auto_reset import check_auto_reset

    bridge = load_suite(BRIDGE)
    with pytest.raises(ResetPlanError) as err:
        check_auto_reset(bridge, "maniskill_bridge", bridge.tasks)
    assert "cannot be reset automatically" in str(err.value) and "\n" not in str(err.value)
    task = suite.task("kitchen_single_1")
    line = auto_reset_refusal(task, ResetScene(scene="kitchen", regions=(), object_counts={"carrot": 1}))
    assert line == ("task kitchen_single_1 (scene kitchen of suite tabletop) cannot be reset automatically: its scene "
                    "declares no start_regions and no object starts on a container")
    with pytest.raises(ResetPlanError, match="^task kitchen_single_1 .* cannot be reset automatically"):
        plan_reset(task, ResetScene(scene="kitchen", regions=(), object_counts={"carrot": 1}), GoalState())


def test_sim_eval_refuses_auto_reset_on_a_suite_without_start_regions(capsys):
    from ladder_ros.cli import main

    code = main(["sim-eval", "--suite", str(BRIDGE), "--simulator", "maniskill_bridge", "--auto-reset",
                 "--episodes", "1", "--out", "/nonexistent/never-written"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "cannot be reset automatically" in err, err


# ----------------------------------------------------------------------------- records


def test_records_say_what_the_episode_was_and_old_records_read_as_tasks_from_their_layout():
    assert episode_kind({"task_id": "t"}) == "task" and episode_start({"task_id": "t"}) == ("layout", None)
    assert episode_kind({"kind": "reset"}) == "reset"
    assert episode_start({"start": "after_reset", "start_after": "e0-reset"}) == ("after_reset", "e0-reset")
    fields = dict(task_id="t", suite="s", category="single_destination", horizon=1, variant="proprio_verifier",
                  layout=0, seed=0, success=True, subgoals_done=1, steps_used=3, budget_steps=100, finish_reason=None,
                  subgoals=[], violations=[], events=[], verification_queries=0, verifier=None, policy="p",
                  simulator="s", final_goal={}, orchestration={})
    assert EpisodeRecord(**fields).to_dict()["kind"] == "task"
    with pytest.raises(InvalidInputError, match="kind is one of task, reset"):
        EpisodeRecord(**fields, kind="teleport")
    with pytest.raises(InvalidInputError, match="names the episode it continues from"):
        EpisodeRecord(**fields, start="after_reset")


# ----------------------------------------------------------------------------- in the loop


class _Watched:
    """A simulator whose first observation of every episode, and the last one before it, are kept."""

    def __init__(self, simulator):
        self.simulator = simulator
        self.name = simulator.name
        self.control_rate_hz = simulator.control_rate_hz
        self.keeps_scene = simulator.keeps_scene
        self.starts: list[tuple[str, bool, object, object]] = []
        self.last = None

    def reset(self, task, layout, seed, **options):
        observation = self.simulator.reset(task, layout, seed, **options)
        self.starts.append((task.task_id, bool(options.get("keep_scene")), self.last, observation))
        self.last = observation
        return observation

    def step(self, action):
        self.last = self.simulator.step(action)
        return self.last

    def reset_scene(self, task):
        return self.simulator.reset_scene(task)

    def camera_intrinsics(self):
        return self.simulator.camera_intrinsics()

    def close(self):
        self.simulator.close()


def test_an_episode_its_reset_and_the_next_episode_from_the_scene_the_reset_left(suite):
    pytest.importorskip("mujoco")
    from ladder_ros.core.presets import get_preset
    from ladder_ros.evaluation.auto_reset import run_sequence
    from ladder_ros.evaluation.components import make_verifier
    from ladder_ros.instruments.expert.noise import expert_noise
    from ladder_ros.instruments.expert.scripted import ScriptedExpert
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    task = suite.task("kitchen_single_1")
    sim = _Watched(MujocoTabletop(suite, render=False))
    try:
        result = run_sequence(sim, lambda t, seed: ScriptedExpert(t, seed=seed, noise=expert_noise("off")), task,
                              "proprio_verifier", get_preset("widowx"), episodes=2, layout=3, base_seed=0,
                              verifier=make_verifier("oracle"), sequence_id="seq")
        # the scene the next episode would have been built from, had it been teleported to its layout
        layout_4 = sim.simulator.reset(task, 4, 0)
    finally:
        sim.close()
    assert result.stopped is None
    records = [r.to_dict() for r in result.records]
    assert [(r["kind"], r["task_id"], r["start"], r["start_after"], r["episode_id"]) for r in records] == [
        ("task", "kitchen_single_1", "layout", None, "seq-e0"),
        ("reset", "kitchen_single_1/reset", "after_task", "seq-e0", "seq-e0-reset"),
        ("task", "kitchen_single_1", "after_reset", "seq-e0-reset", "seq-e1"),
        ("reset", "kitchen_single_1/reset", "after_task", "seq-e1", "seq-e1-reset")]
    assert all(r["success"] for r in records)
    reset = records[1]
    assert reset["reset"]["confirmed"] and reset["reset"]["out_of_place"] == []
    assert reset["reset"]["moves"] == [{"object": "carrot", "destination": "right_near",
                                        "text": "put the carrot on the right side of the table near the robot"}]
    assert reset["budget_steps"] == 100  # the paper's 100 steps per subgoal, for one reset subgoal
    # the next episode starts from what the reset left: nothing teleported
    (_, _, _, first), (_, kept, _, _), (_, kept_next, before, after) = sim.starts[:3]
    assert kept and kept_next
    assert before.privileged.goal.count("carrot", "right_near") == 1
    assert after.privileged.goal.count("carrot", "right_near") == 1 and after.step == 0
    for name, pose in after.privileged.objects.items():
        assert np.allclose(pose.position, before.privileged.objects[name].position, atol=1e-3), name
        assert not np.allclose(pose.position, layout_4.privileged.objects[name].position, atol=1e-2), name
    assert np.allclose(after.ee_position, first.ee_position, atol=0.005)  # the gripper drove home


def test_sim_eval_auto_reset_writes_resets_beside_the_episodes_and_reports_them_apart(tmp_path, capsys):
    pytest.importorskip("mujoco")
    import json

    from ladder_ros.cli import main

    out = tmp_path / "run"
    args = ["sim-eval", "--tasks", "kitchen_single_1", "--episodes", "2", "--variants", "privileged_verifier",
            "--noise", "off", "--auto-reset", "--jobs", "1", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    records = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["task_id"], r["seed"], r["start"]) for r in records] == [
        ("task", "kitchen_single_1", 0, "layout"), ("reset", "kitchen_single_1/reset", 0, "after_task"),
        ("task", "kitchen_single_1", 1, "after_reset"), ("reset", "kitchen_single_1/reset", 1, "after_task")]
    assert records[-1]["sequence_stopped"] is None and all(r["run_key"] == records[0]["run_key"] for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["variants"]["privileged_verifier"]["episodes"] == 2  # resets count in no task's rate
    assert summary["auto_reset"]["resets"] == 2 and summary["auto_reset"]["confirmed"] == 2
    assert "automatic resets: 2 of 2 confirmed" in capsys.readouterr().out
    assert main(args) == 0 and len((out / "episodes.jsonl").read_text().splitlines()) == 4  # nothing rerun
    # the same folder without --auto-reset is another run
    assert main([a for a in args if a != "--auto-reset"]) == 2
