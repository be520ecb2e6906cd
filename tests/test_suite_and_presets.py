"""Suite files and presets: the paper's numbers, and errors that name the file and the key."""

import re
from dataclasses import replace

import pytest
import yaml

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import (FRANKA, WIDOWX, WIDOWX_ROBOTARENA, GripperTriggerParams, StepBudget,
                                     VerifierTimingParams, get_preset)
from ladder_ros.core.suite import load_suite
from ladder_ros.core.task import Subgoal, Task, TaskCategory

GOOD = {
    "schema_version": 1,
    "suite": "mini",
    "embodiment": "widowx",
    "scenes": {"kitchen": {"objects": {"carrot": {}, "spoon": {}}, "containers": {"plate": {}, "cloth": {}}}},
    "tasks": [
        {"id": "a", "scene": "kitchen", "category": "single_destination", "instruction": "put the carrot on the plate",
         "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"}]},
    ],
}


def write(tmp_path, data, name="suite.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_presets_carry_the_paper_numbers():
    assert (WIDOWX.control_rate_hz, FRANKA.control_rate_hz) == (5.0, 15.0)
    assert (WIDOWX.periodic_interval_steps, FRANKA.periodic_interval_steps) == (27, 250)
    assert (WIDOWX.trigger.min_close_steps, WIDOWX.trigger.cooldown_steps, WIDOWX.trigger.min_lift_m) == (3, 8, None)
    assert (FRANKA.trigger.min_close_steps, FRANKA.trigger.cooldown_steps, FRANKA.trigger.min_lift_m) == (21, 57, 0.03)
    assert FRANKA.trigger.release_timeout_steps == 300 and WIDOWX.trigger.release_timeout_steps is None
    timing = (WIDOWX.verifier_timing, FRANKA.verifier_timing)
    assert [(t.delay_after_release_steps, t.query_without_release_steps) for t in timing] == [(5, 45), (35, 300)]
    assert (WIDOWX.privileged_settle_steps, WIDOWX_ROBOTARENA.privileged_settle_steps,
            FRANKA.privileged_settle_steps) == (3, 10, 120)
    assert FRANKA.privileged_set_aside_steps == 600 and WIDOWX.privileged_set_aside_steps is None


def test_step_budgets_appendix_d():
    assert [WIDOWX.budget.steps_for(h) for h in (1, 2, 6, 10)] == [100, 200, 600, 1000]
    expected = [900, 1350, 2700, 2700, 2700, 2700, 3600, 4050, 4500, 4950]
    assert [FRANKA.budget.steps_for(h) for h in range(1, 11)] == expected
    with pytest.raises(ConfigError, match="horizon 11"):
        FRANKA.budget.steps_for(11)


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ConfigError, match="^unknown preset 'ur5'; valid: franka, widowx, widowx_robotarena$"):
        get_preset("ur5")
    assert get_preset("franka") is FRANKA


def test_good_suite_loads(tmp_path):
    suite = load_suite(write(tmp_path, GOOD))
    assert suite.task("a").horizon == 1
    assert suite.task("a").ladder == "kitchen/single_destination"


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: suite file not found"):
        load_suite(tmp_path / "nope.yaml")


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "schema_version: 1\ntasks: [\n  {id: a\n", name="bad.yaml")
    with pytest.raises(ConfigError, match=r"bad.yaml: line \d+, column \d+: invalid YAML"):
        load_suite(path)


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d["tasks"][0]["subgoals"][0].update(destination="bowl"), r"tasks\[0\] \(a\).subgoals\[0\].destination"),
    (lambda d: d["tasks"][0]["subgoals"][0].pop("text"), r"tasks\[0\] \(a\).subgoals\[0\].text"),
    (lambda d: d["tasks"][0].update(category="juggling"), r"tasks\[0\] \(a\).category"),
    (lambda d: d["tasks"][0].update(scene="garage"), r"tasks\[0\] \(a\).scene"),
    (lambda d: d.update(schema_version=7), "schema_version"),
    (lambda d: d.update(embodiment="ur5"), "embodiment"),
    (lambda d: d["tasks"].append(dict(d["tasks"][0])), r"tasks\[1\] \(a\).id"),
    (lambda d: d["tasks"][0].update(layouts=0), r"tasks\[0\] \(a\).layouts"),
])
def test_malformed_suite_names_file_and_key(tmp_path, mutate, key):
    import copy
    data = copy.deepcopy(GOOD)
    mutate(data)
    with pytest.raises(ConfigError, match=rf"suite.yaml: {key}"):
        load_suite(write(tmp_path, data))


FULL_TASK = {"task_id": "kitchen_exclusion_2", "scene": "kitchen", "category": "exclusion",
             "instruction": "put everything except the eggplant on the plate",
             "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
                          {"object": "spoon", "destination": "plate", "text": "put the spoon on the plate"}],
             "distractors": ["eggplant"], "suite": "tabletop", "ladder": "kitchen/exclusion", "layouts": 8,
             "success_rule": "ladder", "budget_steps": None}


def test_a_task_travels_as_a_dict_with_every_field():
    task = Task.from_dict(FULL_TASK)
    assert (task.task_id, task.scene, task.category, task.instruction) == (
        "kitchen_exclusion_2", "kitchen", TaskCategory.EXCLUSION, "put everything except the eggplant on the plate")
    assert task.subgoals == (Subgoal("carrot", "plate", "put the carrot on the plate"),
                             Subgoal("spoon", "plate", "put the spoon on the plate"))
    assert (task.distractors, task.suite, task.ladder, task.layouts, task.horizon) == (
        ("eggplant",), "tabletop", "kitchen/exclusion", 8, 2)
    assert task.to_dict() == FULL_TASK
    assert Task.from_dict(task.to_dict()) == task


def test_a_task_dict_may_leave_out_the_optional_fields():
    minimal = {k: FULL_TASK[k] for k in ("task_id", "scene", "instruction", "subgoals")}
    task = Task.from_dict({**minimal, "category": "single_destination"})
    assert (task.distractors, task.suite, task.ladder, task.layouts) == ((), "", "", 24)  # 24 layouts (App. D)
    with pytest.raises(ConfigError, match="unknown task category 'juggling'"):
        Task.from_dict({**minimal, "category": "juggling"})


def test_select_picks_tasks_by_id_in_the_given_order_and_by_horizon(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    two = {"id": "b", "scene": "kitchen", "category": "single_destination",
           "instruction": "put the carrot and the spoon on the plate",
           "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
                        {"object": "spoon", "destination": "plate", "text": "put the spoon on the plate"}]}
    data["tasks"].append(two)
    suite = load_suite(write(tmp_path, data))
    assert [t.task_id for t in suite.select()] == ["a", "b"]
    assert [t.task_id for t in suite.select(["b", "a"])] == ["b", "a"]
    assert [t.task_id for t in suite.select(None, max_horizon=1)] == ["a"]
    assert [t.task_id for t in suite.select(["b"], max_horizon=1)] == []
    assert [t.task_id for t in suite.select([], max_horizon=2)] == ["a", "b"]
    with pytest.raises(ConfigError, match="unknown task 'c'; valid: a, b"):
        suite.select(["c"])


@pytest.mark.parametrize("make, message", [
    (lambda: VerifierTimingParams(delay_after_release_steps=-1), "delay_after_release_steps must be a non-negative"),
    (lambda: VerifierTimingParams(delay_after_release_steps=2.5), "delay_after_release_steps must be a non-negative"),
    (lambda: VerifierTimingParams(query_without_release_steps=0), "query_without_release_steps must be a positive"),
    (lambda: VerifierTimingParams(query_without_release_steps=True), "query_without_release_steps must be a positive"),
    (lambda: GripperTriggerParams(min_close_steps=0), "min_close_steps must be a positive integer, got 0"),
    (lambda: GripperTriggerParams(open_threshold=0.0), "open_threshold must be in"),
    (lambda: GripperTriggerParams(open_threshold=1.0), "open_threshold must be in"),
    (lambda: GripperTriggerParams(open_threshold=float("nan")), "open_threshold must be in"),
    (lambda: GripperTriggerParams(cooldown_steps=-1), "cooldown_steps must be a non-negative integer, got -1"),
    (lambda: GripperTriggerParams(min_lift_m=0.0), "min_lift_m must be in"),
    (lambda: GripperTriggerParams(min_lift_m=1.0), "min_lift_m must be in"),
    (lambda: GripperTriggerParams(release_timeout_steps=0), "release_timeout_steps must be a positive integer, got 0"),
    (lambda: StepBudget(), "a step budget is either per_subgoal or a table, exactly one"),
    (lambda: StepBudget(per_subgoal=100, table=((1, 900),)),
     "a step budget is either per_subgoal or a table, exactly one"),
    (lambda: StepBudget(per_subgoal=0), "per_subgoal must be a positive integer, got 0"),
    (lambda: StepBudget(table=((0, 900),)), "budget horizon must be a positive integer, got 0"),
    (lambda: StepBudget(table=((1, -5),)), "budget steps must be a positive integer, got -5"),
    (lambda: replace(WIDOWX, control_rate_hz=0.0), "control_rate_hz must be positive, got 0.0"),
    (lambda: replace(WIDOWX, control_rate_hz=float("inf")), "control_rate_hz must be positive, got inf"),
    (lambda: replace(WIDOWX, control_rate_hz=float("nan")), "control_rate_hz must be positive, got nan"),
    (lambda: replace(WIDOWX, periodic_interval_steps=0), "periodic_interval_steps must be a positive integer, got 0"),
    (lambda: replace(WIDOWX, privileged_settle_steps=0), "privileged_settle_steps must be a positive integer, got 0"),
    (lambda: replace(FRANKA, privileged_set_aside_steps=0), "privileged_set_aside_steps must be a positive integer"),
])
def test_out_of_range_loop_parameters_name_themselves(make, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        make()


def test_edge_values_of_the_loop_parameters_are_valid():
    timing = VerifierTimingParams(delay_after_release_steps=0, query_without_release_steps=1)
    assert (timing.delay_after_release_steps, timing.query_without_release_steps) == (0, 1)
    assert GripperTriggerParams(cooldown_steps=0, min_close_steps=1, release_timeout_steps=1).cooldown_steps == 0
    assert StepBudget(per_subgoal=1).steps_for(3) == 3
    assert StepBudget(table=((1, 1),)).steps_for(1) == 1
    assert replace(WIDOWX, periodic_interval_steps=1, privileged_settle_steps=1).privileged_settle_steps == 1
    assert replace(FRANKA, privileged_set_aside_steps=1).privileged_set_aside_steps == 1
    assert replace(WIDOWX, control_rate_hz=0.5).control_rate_hz == 0.5  # a slow arm is still a rate
    with pytest.raises(ConfigError, match="horizon must be a positive integer, got 0"):
        WIDOWX.budget.steps_for(0)
    with pytest.raises(ConfigError, match=r"no step budget for horizon 11; the table covers horizons \[1, 2, 3"):
        FRANKA.budget.steps_for(11)


def test_the_verifiers_release_detector_is_the_trigger_without_cooldown_or_timeout():
    for preset in (WIDOWX, FRANKA):
        detector = preset.release_detector
        assert (detector.open_threshold, detector.min_close_steps, detector.min_lift_m) == (
            preset.trigger.open_threshold, preset.trigger.min_close_steps, preset.trigger.min_lift_m)
        assert (detector.cooldown_steps, detector.release_timeout_steps) == (0, None)
    assert FRANKA.release_detector == GripperTriggerParams(open_threshold=0.5, min_close_steps=21, min_lift_m=0.03,
                                                           cooldown_steps=0, release_timeout_steps=None)


def _with(change):
    import copy
    data = copy.deepcopy(GOOD)
    change(data)
    return data


EXCLUSION = {"id": "x", "scene": "kitchen", "category": "exclusion", "instruction": "all but the spoon",
             "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"}]}


@pytest.mark.parametrize("data, message", [
    ([1, 2], "a suite file is a mapping at the top level"),
    (_with(lambda d: d.pop("schema_version")), "schema_version: missing required key"),
    (_with(lambda d: d.update(schema_version="1")), "schema_version: expected int, got str '1'"),
    (_with(lambda d: d.update(schema_version=2)), "schema_version: unsupported schema_version 2; this version reads 1"),
    (_with(lambda d: d.pop("suite")), "suite: missing required key"),
    (_with(lambda d: d.update(embodiment="ur5")), "embodiment: unknown preset 'ur5'; valid: franka, widowx, "
                                                  "widowx_robotarena"),
    (_with(lambda d: d.update(scenes=[])), "scenes: expected Mapping, got list []"),
    (_with(lambda d: d["scenes"]["kitchen"].pop("containers")), "scenes.kitchen.containers: missing required key"),
    (_with(lambda d: d["scenes"].update(garage=[])), "scenes.garage: expected a mapping, got list"),
    (_with(lambda d: d.update(tasks={})), "tasks: expected list, got dict {}"),
    (_with(lambda d: d.update(tasks=[])), "tasks: a suite needs at least one task"),
    (_with(lambda d: d["tasks"][0].pop("id")), "tasks[0].id: missing required key"),
    (_with(lambda d: d["tasks"].append(dict(d["tasks"][0]))), "tasks[1] (a).id: duplicate task id"),
    (_with(lambda d: d["tasks"][0].update(scene="garage")),
     "tasks[0] (a).scene: unknown scene 'garage'; valid: kitchen"),
    (_with(lambda d: d["tasks"][0].update(category="juggling")),
     "tasks[0] (a).category: unknown task category 'juggling'; valid: duplicates, exclusion, ordered, relay"),
    (_with(lambda d: d["tasks"][0].update(subgoals={})), "tasks[0] (a).subgoals: expected list, got dict {}"),
    (_with(lambda d: d["tasks"][0]["subgoals"][0].pop("object")), "tasks[0] (a).subgoals[0].object: missing required"),
    (_with(lambda d: d["tasks"][0]["subgoals"][0].update(object="pear")),
     "tasks[0] (a).subgoals[0].object: unknown object 'pear' in scene 'kitchen'; valid: carrot, spoon"),
    (_with(lambda d: d["tasks"][0]["subgoals"][0].update(destination="bowl")),
     "tasks[0] (a).subgoals[0].destination: unknown destination 'bowl' in scene 'kitchen'; valid: cloth, plate"),
    (_with(lambda d: d["tasks"][0].update(distractors="spoon")), "tasks[0] (a).distractors: expected a list"),
    (_with(lambda d: d["tasks"][0].update(distractors=["pear"])),
     "tasks[0] (a).distractors: unknown distractor 'pear' in scene 'kitchen'"),
    (_with(lambda d: d["tasks"][0].update(layouts="many")),
     "tasks[0] (a).layouts: layouts must be a positive integer, got 'many'"),
    (_with(lambda d: d["tasks"][0].pop("instruction")), "tasks[0] (a).instruction: missing required key"),
    (_with(lambda d: d["tasks"].append(EXCLUSION)), "x.distractors: an exclusion task names its distractors"),
    (_with(lambda d: d["tasks"][0].update(distractors=["carrot"])),
     "a.distractors: objects are both moved and distractors: ['carrot']"),
])
def test_every_malformed_suite_is_one_exact_error(data, message):
    from ladder_ros.core.suite import parse_suite

    with pytest.raises(ConfigError) as error:
        parse_suite(data, source="s.yaml")
    assert str(error.value).startswith(f"s.yaml: {message}"), str(error.value)


def test_a_suite_keeps_its_fields_and_defaults():
    from ladder_ros.core.suite import parse_suite

    data = _with(lambda d: d.update(description="a small kitchen", embodiment="franka"))
    data["tasks"][0].update(ladder="carrots", layouts=3, distractors=["spoon"])
    suite = parse_suite(data, source="s.yaml")
    assert (suite.name, suite.source, suite.embodiment, suite.description) == ("mini", "s.yaml", "franka",
                                                                               "a small kitchen")
    assert set(suite.scenes) == {"kitchen"}
    task = suite.task("a")
    assert (task.suite, task.ladder, task.layouts, task.distractors) == ("mini", "carrots", 3, ("spoon",))
    plain = parse_suite(GOOD)
    assert (plain.embodiment, plain.description, plain.source) == ("widowx", "", "<suite>")
    assert (plain.task("a").layouts, plain.task("a").distractors) == (24, ())  # 24 seeded layouts (App. D)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(suite=5), "suite: expected str, got int 5"),
    (lambda d: d["tasks"][0].update(id=7), "tasks[0].id: expected str, got int 7"),
    (lambda d: d["tasks"][0].update(scene=["kitchen"]), "tasks[0] (a).scene: expected str, got list ['kitchen']"),
    (lambda d: d["tasks"][0].update(category=3), "tasks[0] (a).category: expected str, got int 3"),
    (lambda d: d["tasks"][0]["subgoals"][0].update(object=1),
     "tasks[0] (a).subgoals[0].object: expected str, got int 1"),
    (lambda d: d["tasks"][0]["subgoals"][0].update(destination=2),
     "tasks[0] (a).subgoals[0].destination: expected str, got int 2"),
    (lambda d: d["tasks"][0]["subgoals"][0].pop("destination"), "tasks[0] (a).subgoals[0].destination: missing"),
    (lambda d: d["tasks"][0]["subgoals"][0].update(text=None), "tasks[0] (a).subgoals[0].text: expected str, got "
                                                               "NoneType None"),
    (lambda d: d["tasks"][0].update(instruction=["a"]), "tasks[0] (a).instruction: expected str, got list ['a']"),
])
def test_a_value_of_the_wrong_type_is_named_with_its_type(change, message):
    from ladder_ros.core.suite import parse_suite

    with pytest.raises(ConfigError) as error:
        parse_suite(_with(change), source="s.yaml")
    assert str(error.value).startswith(f"s.yaml: {message}"), str(error.value)


def test_a_suite_without_an_embodiment_is_for_the_widowx_and_one_layout_is_enough():
    from ladder_ros.core.suite import parse_suite

    data = _with(lambda d: d.pop("embodiment"))
    data["tasks"][0]["layouts"] = 1
    suite = parse_suite(data)
    task = suite.task("a")
    assert suite.embodiment == "widowx" and task.layouts == 1
    assert (task.scene, task.instruction) == ("kitchen", "put the carrot on the plate")
    assert task.category is TaskCategory.SINGLE_DESTINATION


def test_invalid_yaml_names_the_line_column_and_problem(tmp_path):
    path = write(tmp_path, "schema_version: 1\ntasks: [\n  {id: a\n", name="bad.yaml")
    with pytest.raises(ConfigError) as error:
        load_suite(path)
    assert str(error.value) == f"{path}: line 4, column 1: invalid YAML: expected ',' or '}}', but got '<stream end>'"


def test_invalid_yaml_without_a_position_still_names_the_file_and_problem(tmp_path):
    path = write(tmp_path, "suite: a\x07\n", name="bell.yaml")  # a control character: no line/column mark
    with pytest.raises(ConfigError) as error:
        load_suite(path)
    assert str(error.value).startswith(f"{path}: invalid YAML: unacceptable character #x0007")


def test_scene_parts_are_mappings_and_unknown_scenes_list_every_scene():
    from ladder_ros.core.suite import parse_suite

    with pytest.raises(ConfigError) as listed:
        parse_suite(_with(lambda d: d["scenes"]["kitchen"].update(objects=["carrot", "spoon"])), source="s.yaml")
    assert str(listed.value) == "s.yaml: scenes.kitchen.objects: expected Mapping, got list ['carrot', 'spoon']"
    two = _with(lambda d: d["scenes"].update(garden={"objects": {}, "containers": {}}))
    two["tasks"][0]["scene"] = "attic"
    with pytest.raises(ConfigError) as unknown:
        parse_suite(two, source="s.yaml")
    assert str(unknown.value) == "s.yaml: tasks[0] (a).scene: unknown scene 'attic'; valid: garden, kitchen"
