"""The built-in tabletop suite: coverage, ladders, scene schema errors, and valid seeded layouts."""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.suite import load_suite, parse_suite
from ladder_ros.core.task import TaskCategory
from ladder_ros.instruments.expert.instructions import read_instruction
from ladder_ros.sim.tabletop_scene import (
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
    parse_scene,
    parse_scenes,
    sample_layout,
)

SUITE = Path(__file__).resolve().parents[1] / "config" / "suites" / "tabletop.yaml"


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


@pytest.fixture(scope="module")
def scenes(suite):
    return parse_scenes(suite.scenes)


def _ladders(suite):
    ladders = defaultdict(list)
    for t in suite.tasks:
        ladders[t.ladder].append(t)
    return {name: sorted(tasks, key=lambda t: t.horizon) for name, tasks in ladders.items()}


def test_suite_header_and_size(suite):
    assert suite.name == "tabletop" and suite.embodiment == "widowx"
    assert 25 <= len(suite.tasks) <= 40
    assert all(t.layouts == 24 for t in suite.tasks)  # SimplerEnv-Long: 24 seeded layouts (Appendix D)


def test_coverage_of_categories_and_horizons(suite):
    categories = {t.category for t in suite.tasks}
    assert len(categories) >= 5
    assert {TaskCategory.DUPLICATES, TaskCategory.ORDERED, TaskCategory.RELAY} <= categories
    horizons = {t.horizon for t in suite.tasks}
    assert min(horizons) == 1 and max(horizons) >= 6
    ladders = _ladders(suite)
    assert any(tasks[0].horizon == 1 and tasks[-1].horizon >= 6 for tasks in ladders.values())


def test_one_scene_per_family(suite):
    scene_categories = defaultdict(set)
    for t in suite.tasks:
        scene_categories[t.scene].add(t.category)
    assert all(len(c) == 1 for c in scene_categories.values()), scene_categories
    assert set(scene_categories) == set(suite.scenes)


def test_ladders_are_incremental(suite):
    for name, tasks in _ladders(suite).items():
        assert len({(t.scene, t.category) for t in tasks}) == 1, name
        for shorter, longer in zip(tasks, tasks[1:]):
            assert longer.horizon > shorter.horizon, name
            missing = Counter(s.key for s in shorter.subgoals) - Counter(s.key for s in longer.subgoals)
            assert not missing, f"{longer.task_id} drops subgoals of {shorter.task_id}: {dict(missing)}"


def test_containers_grow_with_the_ladder_and_objects_keep_their_size(suite, scenes):
    for name, tasks in _ladders(suite).items():
        scene = scenes[tasks[0].scene]
        sizes = [{c: scene.containers[c].size_for_load(n) for c, n in scene.container_loads(t).items()}
                 for t in tasks]
        for smaller, larger in zip(sizes, sizes[1:]):
            for container in smaller:
                assert all(b >= a for a, b in zip(smaller[container], larger[container])), (name, container)


def test_subgoal_texts_are_single_subgoal_sentences(suite, scenes):
    for t in suite.tasks:
        scene = scenes[t.scene]
        for s in t.subgoals:
            reading = read_instruction(s.text, scene.objects, scene.containers)
            assert reading.is_single and reading.objects == (s.object,) and reading.destinations == (s.destination,), \
                (t.task_id, s.text)


def test_instructions_name_every_target_object_except_on_exclusion_tasks(suite, scenes):
    for t in suite.tasks:
        scene = scenes[t.scene]
        reading = read_instruction(t.instruction, scene.objects, scene.containers)
        if t.category is TaskCategory.EXCLUSION:
            assert reading.everything and set(t.distractors) <= set(reading.objects), t.task_id
        else:
            assert {s.object for s in t.subgoals} <= set(reading.objects), t.task_id
            assert {s.destination for s in t.subgoals} <= set(reading.destinations), t.task_id


def test_every_layout_of_every_task_is_deterministic_distinct_and_inside_the_workspace(suite, scenes):
    for t in suite.tasks:
        scene = scenes[t.scene]
        signatures = set()
        for k in range(t.layouts):
            layout = sample_layout(scene, t, k)
            if k in (0, 23):
                again = sample_layout(scene, t, k)
                assert all(np.array_equal(a.position, b.position) and a.yaw == b.yaw
                           for a, b in zip(layout.objects, again.objects))
            signatures.add(tuple(np.round(np.concatenate([o.position for o in layout.objects]), 6)))
            for o in layout.objects:
                assert np.all(o.position[:2] >= WORKSPACE_LOW[:2]) and np.all(o.position[:2] <= WORKSPACE_HIGH[:2])
                if o.spec.start != "table":
                    start = next(c for c in layout.containers if c.spec.name == o.spec.start)
                    assert start.contains_xy(o.position[:2]), (t.task_id, k, o.name)
                else:
                    assert not any(c.contains_xy(o.position[:2]) for c in layout.containers), (t.task_id, k, o.name)
            names = [o.name for o in layout.objects]
            assert len(names) == len(set(names))
        assert len(signatures) == t.layouts, t.task_id


def test_objects_start_apart_and_at_rest_in_the_simulator(suite):
    pytest.importorskip("mujoco")
    import mujoco

    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    with MujocoTabletop(suite, render=False) as sim:
        for t in suite.tasks:
            for k in (0, 7, 23):
                obs = sim.reset(t, k, 0)
                model, data = sim.model, sim.data
                objects = {model.body(o.name).id for o in sim.layout.objects}
                for i in range(data.ncon):
                    b1 = model.geom_bodyid[data.contact.geom1[i]]
                    b2 = model.geom_bodyid[data.contact.geom2[i]]
                    assert not (b1 in objects and b2 in objects), (t.task_id, k, mujoco.mj_id2name(
                        model, mujoco.mjtObj.mjOBJ_BODY, b1), mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b2))
                for placed in sim.layout.objects:
                    assert np.linalg.norm(obs.privileged.objects[placed.name].position - placed.position) < 0.005
                starting = Counter((o.spec.kind, o.spec.start) for o in sim.layout.objects if o.spec.start != "table")
                assert {key: obs.privileged.goal.count(*key) for key in starting} == dict(starting)
                # nothing else rests on a container (objects resting in a start region are on the table)
                on_containers = {key: n for key, n in obs.privileged.goal.resting.items()
                                 if key[1] in obs.privileged.containers}
                assert sum(on_containers.values()) == sum(starting.values())


def _kitchen_raw():
    data = yaml.safe_load(SUITE.read_text())
    return copy.deepcopy(data["scenes"]["kitchen"])


@pytest.mark.parametrize("path, value, message", [
    (("objects", "carrot", "shape"), "blob", "scenes.kitchen.objects.carrot.shape: unknown shape 'blob'"),
    (("objects", "carrot", "size"), [0.013], "scenes.kitchen.objects.carrot.size: expected a list of 2 numbers"),
    (("objects", "carrot", "size"), [0.05, 0.035], "scenes.kitchen.objects.carrot.size: grasp width 0.100 m"),
    (("objects", "carrot", "count"), 0, "scenes.kitchen.objects.carrot.count: count must be a positive integer"),
    (("objects", "carrot", "start"), "sink", "scenes.kitchen.objects.carrot.start: unknown start 'sink'"),
    (("objects", "carrot", "colour"), [1, 0, 0], "scenes.kitchen.objects.carrot.colour: unknown key"),
    (("objects", "carrot", "rgba"), [2, 0, 0], "scenes.kitchen.objects.carrot.rgba: colour components"),
    (("containers", "plate", "type"), "bowl", "scenes.kitchen.containers.plate.type: unknown container type 'bowl'"),
    (("containers", "plate", "size"), [0.1, 0.1], "scenes.kitchen.containers.plate.size: expected a list of 1"),
    (("containers", "plate", "size_by_load"), {0: 0.1}, "scenes.kitchen.containers.plate.size_by_load: loads"),
    (("containers", "plate", "wall_height"), 0.03, "scenes.kitchen.containers.plate.wall_height: only a bin"),
    (("containers", "plate", "position"), [0.9, 0.0], "scenes.kitchen.containers.plate.position: x=0.9 lies outside"),
    (("region",), {"x": [0.0, 0.4], "y": [-0.2, 0.2]}, "scenes.kitchen.region.x: must satisfy"),
    (("container_jitter",), -1, "scenes.kitchen.container_jitter: must be in [0, 0.1]"),
])
def test_malformed_scenes_name_the_scene_and_the_key(path, value, message):
    raw = _kitchen_raw()
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError) as err:
        parse_scene("kitchen", raw)
    assert message in str(err.value)


def test_a_scene_too_crowded_to_place_says_so(suite):
    raw = _kitchen_raw()
    raw["region"] = {"x": [0.15, 0.25], "y": [-0.05, 0.05]}
    raw["containers"]["plate"]["position"] = [0.2, 0.0]
    del raw["start_regions"]  # they would now overlap the moved plate
    scene = parse_scene("kitchen", raw)
    with pytest.raises(ConfigError, match="cannot place the objects of task 'kitchen_single_6'"):
        sample_layout(scene, suite.task("kitchen_single_6"), 0)
    with pytest.raises(ConfigError, match="layout must be an integer in \\[0, 23\\]"):
        sample_layout(parse_scene("kitchen", _kitchen_raw()), suite.task("kitchen_single_1"), -1)


def test_suite_without_required_scene_parts_is_rejected():
    data = yaml.safe_load(SUITE.read_text())
    del data["scenes"]["kitchen"]["containers"]
    with pytest.raises(ConfigError, match="scenes.kitchen.containers"):
        parse_suite(data, source="tabletop.yaml")


@pytest.mark.slow
def test_noise_free_expert_validates_two_layouts_of_every_task(suite):
    pytest.importorskip("mujoco")
    from ladder_ros.instruments.expert.scripted import ScriptedExpert
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop
    from ladder_ros.evaluation.rollouts import run_subgoal_sequence

    failures = []
    with MujocoTabletop(suite, render=False) as sim:
        for t in suite.tasks:
            for k in (5, 17):
                result = run_subgoal_sequence(sim, t, k, ScriptedExpert(t, seed=k))
                if not result.success:
                    failures.append((t.task_id, k, result.achieved))
    assert not failures
