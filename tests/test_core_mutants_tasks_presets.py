"""Tasks, suites and presets built directly or read from a suite: every refusal is one exact error."""

import copy
import re
from dataclasses import replace

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import FRANKA, WIDOWX, parse_preset_options
from ladder_ros.core.suite import parse_suite
from ladder_ros.core.task import Subgoal, Task, TaskCategory

CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
SPOON = Subgoal("spoon", "plate", "put the spoon on the plate")

GOOD = {
    "schema_version": 1,
    "suite": "mini",
    "scenes": {"kitchen": {"objects": {"carrot": {}, "spoon": {}}, "containers": {"plate": {}, "cloth": {}}}},
    "tasks": [
        {"id": "a", "scene": "kitchen", "category": "single_destination", "instruction": "put the carrot on the plate",
         "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"}]},
    ],
}

# Values that are not a positive whole number of steps (a bool is not a count).
NOT_A_STEP_COUNT = [0, -1, -900, True, False, 2.5, 1.0, "100", [100]]


def _task(**change):
    fields = dict(task_id="a", scene="kitchen", category=TaskCategory.SINGLE_DESTINATION,
                  instruction="put the carrot on the plate", subgoals=(CARROT,))
    fields.update(change)
    return Task(**fields)


def _suite_with(change):
    data = copy.deepcopy(GOOD)
    change(data)
    return data


def _exactly(message):
    return "^" + re.escape(message) + "$"


# Presets

def test_a_horizon_past_the_budget_table_asks_the_task_for_its_own_budget():
    with pytest.raises(ConfigError, match=_exactly(
            "no step budget for horizon 11; the table covers horizons [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] "
            "(give the task its own budget_steps in the suite file)")):
        FRANKA.budget.steps_for(11)


def test_a_preset_may_go_without_action_limits_but_takes_nothing_else_in_their_place():
    assert replace(WIDOWX, action_limits=None).action_limits is None
    for wrong in ("0.05", 0.05, {"max_translation_m": 0.05}, (0.05, 1.57)):
        message = f"action_limits must be ActionLimits, got {type(wrong).__name__}"
        with pytest.raises(ConfigError, match=_exactly(message)):
            replace(WIDOWX, action_limits=wrong)


@pytest.mark.parametrize("option, value, valid", [
    ("after_last_subgoal", "loop", "end, restart, stay"),
    ("after_last_subgoal", "None", "end, restart, stay"),
    ("after_last_subgoal", "Stay", "end, restart, stay"),
    ("set_aside_exempt", "all", "order_constrained, ordered"),
])
def test_a_preset_built_directly_with_an_unknown_option_value_lists_the_valid_ones(option, value, valid):
    """with_options checks values before replace(); a preset built directly meets the same check in __post_init__."""
    message = f"unknown value of preset option {option} {value!r}; valid: {valid}"
    with pytest.raises(ConfigError, match=_exactly(message)):
        replace(WIDOWX, **{option: value})


OPTIONS_HELP = "after_last_subgoal=stay|restart|end; set_aside_exempt=ordered|order_constrained"


@pytest.mark.parametrize("item", ["after_last_subgoal", "=end", " = end", "after_last_subgoal=", "after_last_subgoal= ",
                                  "=", ""])
def test_a_preset_option_without_a_name_or_a_value_shows_the_form_and_every_option(item):
    message = f"a preset option is NAME=VALUE, got {item!r}; options: {OPTIONS_HELP}"
    with pytest.raises(ConfigError, match=_exactly(message)):
        parse_preset_options([item])


def test_a_preset_option_splits_at_its_first_equals_sign():
    with pytest.raises(ConfigError, match=_exactly(
            "unknown value of preset option after_last_subgoal 'end=stay'; valid: end, restart, stay")):
        parse_preset_options(["after_last_subgoal=end=stay"])


# Tasks built directly (Task.from_dict, result files, tests) rather than through the suite parser

def test_a_task_built_with_an_unknown_success_rule_names_its_key_and_the_rules():
    message = "a.success_rule: unknown success_rule 'strict'; valid: ladder, simplerenv"
    with pytest.raises(ConfigError, match=_exactly(message)):
        _task(success_rule="strict")
    with pytest.raises(ConfigError, match=_exactly(message)):
        Task.from_dict({**_task().to_dict(), "success_rule": "strict"})


def test_the_simplerenv_rule_scores_single_subgoal_tasks_only():
    assert _task(success_rule="simplerenv").success_rule == "simplerenv"
    for subgoals in ((CARROT, SPOON), (CARROT, SPOON, CARROT)):
        with pytest.raises(ConfigError, match=_exactly(
                "a.success_rule: success_rule simplerenv scores SimplerEnv's single-subgoal envs only; "
                f"this task has {len(subgoals)} subgoals")):
            _task(success_rule="simplerenv", subgoals=subgoals)


def test_a_task_budget_is_a_positive_whole_number_of_steps_or_absent():
    for steps in (None, 1, 2, 900):
        assert _task(budget_steps=steps).budget_steps == steps
    for wrong in NOT_A_STEP_COUNT:
        with pytest.raises(ConfigError, match=_exactly(
                f"a.budget_steps: budget_steps must be a positive integer or absent, got {wrong!r}")):
            _task(budget_steps=wrong)


def test_a_task_has_a_positive_whole_number_of_layouts_built_directly_or_from_a_dict():
    for count in (1, 2, 24):
        assert _task(layouts=count).layouts == count
        assert Task.from_dict({**_task().to_dict(), "layouts": count}).layouts == count
    for wrong in NOT_A_STEP_COUNT + [2.7, "3"]:
        message = _exactly(f"a.layouts: layouts must be a positive integer, got {wrong!r}")
        with pytest.raises(ConfigError, match=message):
            _task(layouts=wrong)
        with pytest.raises(ConfigError, match=message):  # a dict (an episode's status) is not cut or converted
            Task.from_dict({**_task().to_dict(), "layouts": wrong})


def test_a_task_dict_with_another_success_rule_type_is_refused_not_converted():
    with pytest.raises(ConfigError, match=_exactly("a.success_rule: unknown success_rule None; valid: ladder, "
                                                   "simplerenv")):
        Task.from_dict({**_task().to_dict(), "success_rule": None})


def test_a_task_dict_keeps_its_success_rule():
    task = Task.from_dict({**_task().to_dict(), "success_rule": "simplerenv"})
    assert task.success_rule == "simplerenv"
    assert Task.from_dict(task.to_dict()) == task


# Suite files

def test_an_unknown_top_level_suite_key_names_the_file_and_the_nearest_key():
    with pytest.raises(ConfigError, match=_exactly(
            "s.yaml: suites: unknown key; did you mean 'suite'? "
            "(valid: description, embodiment, scenes, schema_version, suite, tasks)")):
        parse_suite(_suite_with(lambda d: d.update(suites="mini")), source="s.yaml")


def test_an_unknown_task_key_names_the_file_the_task_and_the_nearest_key():
    with pytest.raises(ConfigError, match=_exactly(
            "s.yaml: tasks[0] (a).budget: unknown key; did you mean 'budget_steps'? (valid: budget_steps, category, "
            "distractors, id, instruction, ladder, layouts, scene, subgoals, success_rule)")):
        parse_suite(_suite_with(lambda d: d["tasks"][0].update(budget=900)), source="s.yaml")


def test_an_unknown_subgoal_key_names_the_file_the_subgoal_and_the_nearest_key():
    with pytest.raises(ConfigError, match=_exactly(
            "s.yaml: tasks[0] (a).subgoals[0].destinaton: unknown key; did you mean 'destination'? "
            "(valid: destination, object, text)")):
        parse_suite(_suite_with(lambda d: d["tasks"][0]["subgoals"][0].update(destinaton="plate")), source="s.yaml")


@pytest.mark.parametrize("key,good", [("budget_steps", (1, 2, 900)), ("layouts", (1, 24))])
def test_a_suite_tasks_step_budget_and_layouts_are_positive_whole_numbers(key, good):
    for value in good:
        suite = parse_suite(_suite_with(lambda d: d["tasks"][0].update({key: value})), source="s.yaml")
        assert getattr(suite.task("a"), key) == value
    for wrong in NOT_A_STEP_COUNT:
        with pytest.raises(ConfigError, match=_exactly(
                f"s.yaml: tasks[0] (a).{key}: {key} must be a positive integer, got {wrong!r}")):
            parse_suite(_suite_with(lambda d: d["tasks"][0].update({key: wrong})), source="s.yaml")


def test_a_suite_task_with_an_unknown_success_rule_names_the_file_the_task_and_the_rules():
    for wrong in ("strict", "LADDER", None, ["ladder"]):
        with pytest.raises(ConfigError, match=_exactly(
                f"s.yaml: tasks[0] (a).success_rule: unknown success_rule {wrong!r}; valid: ladder, simplerenv")):
            parse_suite(_suite_with(lambda d: d["tasks"][0].update(success_rule=wrong)), source="s.yaml")
