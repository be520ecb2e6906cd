"""The Franka loop in simulation: the tabletop's Franka Hand, its expert, its suite, its graph, and what it refuses."""

from __future__ import annotations

import copy
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("mujoco")

from ladder_ros.core.errors import ConfigError  # noqa: E402
from ladder_ros.core.presets import FRANKA  # noqa: E402
from ladder_ros.core.suite import load_suite, parse_suite  # noqa: E402
from ladder_ros.core.task import TaskCategory  # noqa: E402
from ladder_ros.evaluation.components import check_policy_for_suite, default_policy  # noqa: E402
from ladder_ros.evaluation.rollouts import run_subgoal_sequence  # noqa: E402
from ladder_ros.instruments.expert.instructions import read_instruction  # noqa: E402
from ladder_ros.instruments.expert.scripted import ScriptedExpert  # noqa: E402
from ladder_ros.instruments.expert.steering import expert_steering  # noqa: E402
from ladder_ros.sim.mujoco_tabletop import MujocoTabletop  # noqa: E402
from ladder_ros.sim.registry import check_action_kind  # noqa: E402
from ladder_ros.sim.tabletop_embodiment import FRANKA_HAND, WIDOWX_GRIPPER, embodiment_for  # noqa: E402
from ladder_ros.sim.tabletop_scene import parse_scene, parse_scenes, sample_layout  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "config" / "suites" / "robolab_tabletop.yaml"
WIDOWX_SUITE = REPO / "config" / "suites" / "tabletop.yaml"
OPEN, CLOSED = 1.0, -1.0
# franka_description's rubber fingertip (end_effectors/common/franka_hand.xacro): 17.5 x 15.2 x 18.5 mm
FINGERTIP_HALF = (0.00875, 0.0076, 0.00925)


def _probe_suite():
    """A 36 mm cube (held: aperture 0.45, a close) and a 44 mm orange (held: 0.55, no close) by a plate."""
    return parse_suite({
        "schema_version": 1, "suite": "franka_probe", "embodiment": "franka",
        "scenes": {"probe": {
            "container_jitter": 0.0,
            "objects": {"cube": {"shape": "box", "size": [0.018, 0.018, 0.018]},
                        "orange": {"shape": "cylinder", "size": [0.022, 0.02]}},
            "containers": {"plate": {"type": "plate", "position": [0.62, 0.15], "size": 0.11}},
        }},
        "tasks": [
            {"id": "cube", "scene": "probe", "category": "single_destination", "layouts": 8,
             "instruction": "put the cube on the plate",
             "subgoals": [{"object": "cube", "destination": "plate", "text": "put the cube on the plate"}]},
            {"id": "orange", "scene": "probe", "category": "single_destination", "layouts": 8,
             "instruction": "put the orange on the plate",
             "subgoals": [{"object": "orange", "destination": "plate", "text": "put the orange on the plate"}]},
        ],
    })


@pytest.fixture(scope="module")
def franka():
    suite = _probe_suite()
    backend = MujocoTabletop(suite, render=False)
    yield suite, backend
    backend.close()


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


def _act(delta=(0.0, 0.0, 0.0), gripper=OPEN) -> np.ndarray:
    return np.array([*delta, 0.0, 0.0, 0.0, gripper])


def _pad_faces(backend) -> float:
    """The gap between the fingertips' inner faces (m), from the simulated geoms."""
    model, data = backend.model, backend.data
    left, right = (model.geom(f"{side}_pad").id for side in ("left", "right"))
    return float(np.linalg.norm(data.geom_xpos[left] - data.geom_xpos[right])) - 2 * FINGERTIP_HALF[1]


# ---------------------------------------------------------------------------------------------- the hand


def test_a_franka_suite_gets_the_franka_hand_at_15_hz_in_droids_reset_pose(franka):
    suite, backend = franka
    assert embodiment_for("franka") is FRANKA_HAND and embodiment_for("widowx_robotarena") is WIDOWX_GRIPPER
    assert backend.embodiment is FRANKA_HAND and backend.control_rate_hz == FRANKA.control_rate_hz == 15.0
    assert MujocoTabletop.control_rate_hz == 5.0  # the class keeps the WidowX stand-in's
    obs = backend.reset(suite.task("cube"), 0, 0)
    assert obs.joint_names[-2:] == ("panda_finger_joint1", "panda_finger_joint2") and obs.joint_positions.shape == (8,)
    # DROID's reset joints through the Panda's kinematics: the TCP 0.36 m out, 0.387 m up, turned -45 degrees
    assert np.allclose(obs.ee_position, (0.360, 0.0, 0.387), atol=0.003)
    assert obs.ee_euler[2] == pytest.approx(-math.pi / 4, abs=0.01) and np.allclose(obs.ee_euler[:2], 0.0, atol=0.01)
    assert obs.aperture == pytest.approx(1.0, abs=0.005)
    model = backend.model
    assert np.allclose(model.geom_size[model.geom("left_pad").id], FINGERTIP_HALF)
    assert model.opt.timestep * FRANKA_HAND.substeps == pytest.approx(1 / 15)
    assert _pad_faces(backend) == pytest.approx(0.08, abs=0.001)  # the Franka Hand opens 80 mm


def test_the_gripper_command_is_a_width_reached_at_the_hands_speed(franka):
    suite, backend = franka
    obs = backend.reset(suite.task("cube"), 0, 0)
    trace = []
    for _ in range(20):
        obs = backend.step(_act(gripper=CLOSED))
        trace.append(obs.aperture)
    # 0.1 m/s of opening width: 0.08 m take 0.8 s, 12 steps at 15 Hz; the aperture falls steadily
    assert all(b <= a + 1e-6 for a, b in zip(trace, trace[1:]))
    assert 5 <= sum(a > 0.5 for a in trace) <= 8
    assert trace[10] > 0.02 and trace[15] < 0.01
    assert _pad_faces(backend) == pytest.approx(0.0, abs=0.001)  # the fingertips meet
    for _ in range(20):  # 0 is half open: a width, not a binarised command (the WidowX would open)
        obs = backend.step(_act(gripper=0.0))
    assert obs.aperture == pytest.approx(0.5, abs=0.02)
    for _ in range(20):
        obs = backend.step(_act(gripper=OPEN))
    assert obs.aperture == pytest.approx(1.0, abs=0.005)


@pytest.mark.parametrize("task,width,closed", [("cube", 0.036, True), ("orange", 0.044, False)])
def test_a_held_object_holds_the_aperture_at_its_width(franka, task, width, closed):
    suite, backend = franka
    t = suite.task(task)
    obs = backend.reset(t, 0, 0)
    expert = ScriptedExpert(t, 0, embodiment="franka")
    start_z = None
    for _ in range(200):
        obs = backend.step(expert.act(obs, t.subgoals[0].text))
        if obs.privileged.grasped and start_z is None:
            start_z = obs.ee_position[2]
        if start_z is not None and obs.ee_position[2] > start_z + 0.05:
            break
    assert obs.privileged.grasped == (f"{task}_0",), "the expert lifts the object"
    # the aperture is the opening width over 0.08 m (the rubber gives by up to 2 mm): 36 mm reads as
    # closed (<= 0.5), 44 mm does not
    assert width - 0.0025 <= obs.aperture * 0.08 <= width
    assert (obs.aperture <= FRANKA.trigger.open_threshold) is closed


def test_targets_are_clipped_to_the_franka_workspace(franka):
    suite, backend = franka
    obs = backend.reset(suite.task("cube"), 0, 0)
    for _ in range(80):
        obs = backend.step(_act((0.1, 0.1, 0.1)))
    assert np.allclose(obs.target_position, FRANKA_HAND.workspace_high)
    assert np.allclose(obs.ee_position, FRANKA_HAND.workspace_high, atol=0.01)


def test_the_experts_franka_steering_moves_at_the_same_speeds_in_three_times_the_steps(franka):
    suite, backend = franka
    widowx, steer = expert_steering("widowx"), expert_steering("franka")
    assert steer.time_scale == 3 and steer.max_xy_step_m * 15 == pytest.approx(widowx.max_xy_step_m * 5)
    with pytest.raises(ConfigError, match="unknown scripted expert embodiment 'ur5'"):
        expert_steering("ur5")
    t = suite.task("cube")
    obs = backend.reset(t, 1, 1)
    expert = ScriptedExpert(t, 1, embodiment="franka")
    for _ in range(60):
        action = expert.act(obs, t.subgoals[0].text)
        assert np.linalg.norm(action[:2]) <= steer.max_xy_step_m + 1e-9 and abs(action[2]) <= steer.max_z_step_m + 1e-9
        obs = backend.step(action)


# ---------------------------------------------------------------------------------------------- refusals


def test_joint_position_policies_are_refused_on_the_tabletop_with_the_reason(suite):
    widowx = load_suite(WIDOWX_SUITE)
    with pytest.raises(ConfigError, match="droid_pi05_server acts in joint_position actions: .* without the Panda's "
                                          "arm joints, so joint-position actions have no kinematics to be mapped"):
        check_action_kind("mujoco_tabletop", suite, "joint_position", "droid_pi05_server")
    with pytest.raises(ConfigError, match="takes the action contract's end-effector deltas"):
        check_action_kind("mujoco_tabletop", widowx, "joint_position", "mine")
    check_action_kind("mujoco_tabletop", suite, "ee_delta", "scripted_expert_franka")
    with pytest.raises(ConfigError, match="no kinematics to be mapped through"):
        check_policy_for_suite("droid_pi05_server", suite, "mujoco_tabletop")


def test_a_policy_at_another_rate_than_the_suite_is_refused_naming_both(suite):
    with pytest.raises(ConfigError, match="policy scripted_expert runs at 5 Hz \\(widowx\\), but suite "
                                          "robolab_tabletop is a franka suite at 15 Hz.*scripted_expert_franka"):
        check_policy_for_suite("scripted_expert", suite, "mujoco_tabletop")
    widowx = load_suite(WIDOWX_SUITE)
    with pytest.raises(ConfigError, match="runs at 15 Hz \\(franka\\), but suite tabletop is a widowx suite at 5 Hz"):
        check_policy_for_suite("scripted_expert_franka", widowx, "mujoco_tabletop")
    assert default_policy(suite) == "scripted_expert_franka" and default_policy(widowx) == "scripted_expert"
    check_policy_for_suite(default_policy(suite), suite, "mujoco_tabletop")


def test_the_graph_refuses_a_joint_position_policy_in_simulation_before_anything_starts():
    from ladder_ros.bringup.graph import check_referenced_files, load_graph

    graph = load_graph("franka")
    params = graph.node_parameters("sim", overrides={"policy": {"policy": "droid_pi05_server"}})
    with pytest.raises(ConfigError, match="^parameter policy.policy: policy droid_pi05_server acts in joint_position"):
        check_referenced_files(params)
    check_referenced_files(graph.node_parameters("sim"))


def test_the_franka_graph_runs_its_own_params_file_in_simulation():
    from ladder_ros.bringup.graph import load_graph

    graph = load_graph("franka")
    sim, real = graph.node_parameters("sim"), graph.node_parameters("real")
    assert graph.params_file_for("sim").name == "franka_sim_params.yaml"
    assert graph.params_file_for("real") == graph.params_file and graph.params_file.name == "franka_params.yaml"
    assert {p["preset"] for p in sim.values()} == {"franka"} and sim["orchestrator"]["clock_mode"] == "lockstep"
    assert (sim["sim_bridge"]["simulator"], sim["sim_bridge"]["suite"]) == ("mujoco_tabletop",
                                                                            "config/suites/robolab_tabletop.yaml")
    assert sim["orchestrator"]["suite"] == sim["sim_bridge"]["suite"]
    assert (sim["policy"]["policy"], sim["vlm_verifier"]["backend"]) == ("scripted_expert_franka", "oracle")
    assert (real["policy"]["policy"], real["vlm_verifier"]["backend"]) == ("droid_pi05_server", "gemini")
    assert "sim_bridge" not in real and "franka_driver" not in sim
    assert graph.config_files(mode="sim")[1].endswith("franka_sim_params.yaml")


def test_a_bad_mode_params_file_is_named(tmp_path):
    from ladder_ros.bringup.graph import load_graph

    data = yaml.safe_load((REPO / "config" / "graphs" / "franka.yaml").read_text())
    data["modes"]["sim"]["params_file"] = 3
    path = tmp_path / "graphs" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="modes.sim.params_file: must be a params file name"):
        load_graph(str(path))
    data["modes"]["sim"]["params_file"] = "nowhere.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="nowhere.yaml: params file not found"):
        load_graph(str(path)).node_parameters("sim")


# ---------------------------------------------------------------------------------------------- the suite


def test_the_suite_is_robolab_sized_with_every_category_over_a_few_scenes(suite):
    assert (suite.name, suite.embodiment) == ("robolab_tabletop", "franka")
    assert all(t.layouts == 8 for t in suite.tasks)  # RoboLab-Long: 8 episodes per task (Appendix D)
    assert {t.category for t in suite.tasks} == set(TaskCategory)  # all eight categories
    per_scene = defaultdict(set)
    ladders = defaultdict(list)
    for t in suite.tasks:
        per_scene[t.scene].add(t.category)
        ladders[t.ladder].append(t)
    assert 2 <= len(per_scene) <= 5 and all(len(c) >= 2 for c in per_scene.values()), per_scene
    for name, tasks in ladders.items():
        tasks.sort(key=lambda t: t.horizon)
        for shorter, longer in zip(tasks, tasks[1:]):
            assert longer.horizon > shorter.horizon, name
            assert not Counter(s.key for s in shorter.subgoals) - Counter(s.key for s in longer.subgoals), name
    assert {FRANKA.budget_for(t) for t in suite.tasks} == {900, 1350, 2700}  # Appendix D's budgets


def test_instructions_and_subgoal_texts_read_as_the_expert_and_the_vlm_need(suite):
    scenes = parse_scenes(suite.scenes, FRANKA_HAND)
    for t in suite.tasks:
        scene = scenes[t.scene]
        for s in t.subgoals:
            reading = read_instruction(s.text, scene.objects, scene.containers)
            assert reading.is_single and reading.objects == (s.object,), (t.task_id, s.text)
        reading = read_instruction(t.instruction, scene.objects, scene.containers)
        if t.category is TaskCategory.EXCLUSION:
            assert reading.everything and set(t.distractors) <= set(reading.objects), t.task_id
        else:
            assert {s.object for s in t.subgoals} <= set(reading.objects), t.task_id


def test_layouts_are_deterministic_distinct_and_inside_the_franka_workspace(suite):
    scenes = parse_scenes(suite.scenes, FRANKA_HAND)
    low, high = np.array(FRANKA_HAND.workspace_low), np.array(FRANKA_HAND.workspace_high)
    for t in suite.tasks:
        layouts = [sample_layout(scenes[t.scene], t, k) for k in range(t.layouts)]
        again = sample_layout(scenes[t.scene], t, 7)
        assert all(np.array_equal(a.position, b.position) for a, b in zip(layouts[7].objects, again.objects))
        assert len({tuple(np.round(np.concatenate([o.position for o in lay.objects]), 6)) for lay in layouts}) == 8
        for lay in layouts:
            for o in lay.objects:
                assert np.all(o.position[:2] >= low[:2]) and np.all(o.position[:2] <= high[:2]), (t.task_id, o.name)
                assert FRANKA_HAND.min_grasp_width_m <= o.spec.grasp_width <= FRANKA_HAND.max_grasp_width_m


@pytest.mark.parametrize("path,value,message", [
    ("objects.carrot.size", [0.036, 0.04], "grasp width 0.072 m is outside what the franka fingers hold "
                                           "\\(0.020-0.068 m\\)"),
    ("objects.green_cube.size", [0.018, 0.018, 0.024], "objects stand at most 0.045 m tall under the franka gripper"),
    ("region", {"x": [0.2, 0.7], "y": [-0.3, 0.3]}, "region.x: must satisfy 0.28 <= lo < hi <= 0.78"),
])
def test_franka_scene_errors_name_the_key_and_the_hand(suite, path, value, message):
    raw = copy.deepcopy(dict(suite.scenes["counter"]))
    target = raw
    *parents, last = path.split(".")
    for key in parents:
        target = target[key]
    target[last] = value
    with pytest.raises(ConfigError, match=message):
        parse_scene("counter", raw, FRANKA_HAND)


@pytest.mark.slow
def test_the_noise_free_expert_validates_the_last_layout_of_every_task(suite):
    failures = []
    with MujocoTabletop(suite, render=False) as sim:
        for t in suite.tasks:
            result = run_subgoal_sequence(sim, t, 7, ScriptedExpert(t, seed=7, embodiment="franka"), preset=FRANKA)
            if not result.success:
                failures.append((t.task_id, result.achieved))
    assert not failures


@pytest.mark.slow
def test_sim_eval_runs_a_franka_suite_with_its_expert_and_its_layouts_by_default(tmp_path, capsys):
    import json

    from ladder_ros.cli import main

    out = tmp_path / "eval"
    assert main(["sim-eval", "--suite", str(SUITE), "--tasks", "counter_single_1", "--variants", "privileged_verifier",
                 "--jobs", "1", "--no-progress", "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["layout"] for r in records) == list(range(8))  # RoboLab-Long's 8 episodes per task
    expected = {("scripted_expert_franka", "franka", 900)}
    assert {(r["policy"], r["preset"], r["budget_steps"]) for r in records} == expected
    assert all(r["success"] and 120 < r["steps_used"] < 900 for r in records)  # done after the 120-step settle window
    capsys.readouterr()
    assert main(["sim-eval", "--suite", str(SUITE), "--policy", "scripted_expert", "--jobs", "1", "--no-progress",
                 "--out", str(tmp_path / "refused")]) == 2
    assert "policy scripted_expert runs at 5 Hz (widowx), but suite robolab_tabletop" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()


def test_sim_eval_counts_the_triggers_attempt_ends_by_reason():
    from ladder_ros.evaluation.summary_tables import attempt_ends_by_reason, format_attempt_ends

    def ended(step, reason):
        return {"step": step, "kind": "attempt_ended", "reason": reason}

    records = [{"variant": "proprio_trigger", "events": [ended(88, "release"), ended(388, "timeout"),
                                                         {"step": 388, "kind": "subgoal_advanced"}]},
               {"variant": "proprio_trigger", "events": [ended(300, "timeout"), ended(600, "timeout")]},
               {"variant": "periodic_trigger", "events": [ended(250, "periodic")]},
               {"variant": "privileged_verifier", "events": []}]
    counts = attempt_ends_by_reason(records)
    assert counts == {"proprio_trigger": {"release": 1, "timeout": 3}, "periodic_trigger": {"periodic": 1}}
    assert format_attempt_ends(counts).splitlines() == [
        "attempt ends by reason:", "  periodic_trigger: periodic 1 (100.0 %)",
        "  proprio_trigger: release 1 (25.0 %), timeout 3 (75.0 %)"]
