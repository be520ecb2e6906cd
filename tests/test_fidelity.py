"""The paper's readings that change results, and what every result says about how it was made.

Trigger after the last subgoal, privileged set-aside, step budgets, stock-task scoring, plans from a
planner in the reference loop, and the run key that keeps a sim-eval folder to one configuration.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ladder_ros.cli import main
from ladder_ros.core import events as ev
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.goals import GoalState, GoalTracker
from ladder_ros.core.metrics import score_episode
from ladder_ros.core.orchestrator import StepInput, make_orchestrator
from ladder_ros.core.presets import FRANKA, PRESET_OPTIONS, WIDOWX, StepBudget, get_preset, parse_preset_options
from ladder_ros.core.suite import parse_suite
from ladder_ros.core.task import Subgoal, Task, TaskCategory
from ladder_ros.core.triggers import GripperMonitor
from ladder_ros.evaluation.reference_loop import run_episode
from ladder_ros.evaluation.run_key import RunKeyMismatch, claim_output, key_digest, run_key
from tests.fakes import OracleCounter, ToyPolicy, ToyWorld

CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
SPOON = Subgoal("spoon", "plate", "put the spoon on the plate")
CLOTH = Subgoal("carrot", "cloth", "put the carrot on the cloth")
O, C = 1.0, 0.0
TOY = Task(task_id="toy2", scene="toy", category=TaskCategory.SINGLE_DESTINATION,
           instruction="put the carrot and the spoon on the plate", subgoals=(CARROT, SPOON))


def drive(orchestrator, apertures, goal_states=None):
    monitor = GripperMonitor.for_preset(orchestrator.preset)
    decisions = []
    for step, aperture in enumerate(apertures):
        states = None if goal_states is None else goal_states(step)
        decision = orchestrator.observe(StepInput(step=step, gripper=monitor.update(step, aperture, 0.3),
                                                  goal_states=states))
        decisions.append(decision)
        if decision.finished:
            break
    return decisions


# ------------------------------------------------------------------ 1. trigger after the last subgoal
def test_widowx_proprio_trigger_stays_on_the_last_subgoal_until_the_budget():
    assert WIDOWX.after_last_subgoal == "stay" and FRANKA.after_last_subgoal == "restart"
    o = make_orchestrator("proprio_trigger", WIDOWX, [CARROT, SPOON], instruction="x", budget_steps=200)
    attempt = [C, C, C, O] + [O] * 10
    decisions = drive(o, [O] + attempt * 20)
    assert decisions[4].instruction == SPOON.text  # the first release advances
    releases = [d.step for d in decisions if any(e.kind == ev.ATTEMPT_ENDED for e in d.events)]
    assert len(releases) >= 5  # releases after the last subgoal's ...
    assert all(d.instruction == SPOON.text for d in decisions[5:-1])  # ... keep the last subgoal
    assert decisions[-1].finish_reason == "budget_exhausted" and decisions[-1].step == 200
    assert o.queue.advanced == [0] and o.queue.pending == [1]


def test_ending_after_the_last_subgoal_is_a_preset_option():
    ending = get_preset("widowx", {"after_last_subgoal": "end"})
    assert ending.after_last_subgoal == "end" and ending.trigger == WIDOWX.trigger
    o = make_orchestrator("proprio_trigger", ending, [CARROT, SPOON], instruction="x", budget_steps=200)
    decisions = drive(o, [O, C, C, C, O] + [O] * 10 + [C, C, C, O] + [O] * 20)
    assert decisions[-1].finish_reason == "plan_exhausted" and decisions[-1].step == 18
    restarting = WIDOWX.with_options({"after_last_subgoal": "restart"})
    o = make_orchestrator("proprio_trigger", restarting, [CARROT, SPOON], instruction="x", budget_steps=200)
    decisions = drive(o, [O, C, C, C, O] + [O] * 10 + [C, C, C, O] + [O] * 20)
    assert decisions[18].instruction == CARROT.text and not decisions[18].finished


def test_preset_options_are_checked_and_named():
    assert set(PRESET_OPTIONS) == {"after_last_subgoal", "set_aside_exempt"}
    assert parse_preset_options(["after_last_subgoal=end", " set_aside_exempt = order_constrained "]) == {
        "after_last_subgoal": "end", "set_aside_exempt": "order_constrained"}
    with pytest.raises(ConfigError, match="unknown preset option 'cooldown'; valid: after_last_subgoal"):
        parse_preset_options(["cooldown=3"])
    with pytest.raises(ConfigError, match="value of preset option after_last_subgoal 'loop'; valid: end, restart"):
        get_preset("widowx", {"after_last_subgoal": "loop"})
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_preset_options(["after_last_subgoal"])
    with pytest.raises(ConfigError, match="given twice"):
        parse_preset_options(["after_last_subgoal=end", "after_last_subgoal=stay"])
    assert WIDOWX.options == {"after_last_subgoal": "stay", "set_aside_exempt": "ordered"}


def test_the_reference_loop_runs_the_trigger_to_the_budget_and_records_the_preset():
    record = run_episode(ToyWorld(), ToyPolicy(TOY, 0), TOY, "proprio_trigger", WIDOWX, layout=0, seed=0)
    assert record.finish_reason == "budget_exhausted" and record.steps_used == 200
    assert record.preset == "widowx" and record.preset_options["after_last_subgoal"] == "stay"
    ended = run_episode(ToyWorld(), ToyPolicy(TOY, 0), TOY, "proprio_trigger",
                        WIDOWX.with_options({"after_last_subgoal": "end"}), layout=0, seed=0)
    assert ended.finish_reason == "plan_exhausted" and ended.steps_used < 20


# ------------------------------------------------------------------ 2. privileged set-aside
@pytest.mark.parametrize("category, exempt, set_aside", [
    (TaskCategory.RELAY, "ordered", True),  # Appendix B: set aside 'except on ordered tasks'
    (TaskCategory.REVISIT, "ordered", True),
    (TaskCategory.ORDERED, "ordered", False),
    (TaskCategory.SINGLE_DESTINATION, "ordered", True),
    (TaskCategory.RELAY, "order_constrained", False),  # the broader reading, kept as an option
    (TaskCategory.ORDERED, "order_constrained", False),
])
def test_franka_privileged_verifier_sets_aside_except_on_ordered_tasks(category, exempt, set_aside):
    preset = FRANKA.with_options({"set_aside_exempt": exempt})
    o = make_orchestrator("privileged_verifier", preset, [CARROT, CLOTH], instruction="x", budget_steps=1350,
                          category=category)
    drive(o, [O] * 700, goal_states=lambda step: (False, False))
    moved = [e for e in o.events if e.kind == ev.QUEUE_CHANGED and e.data["reason"] == "set_aside"]
    assert bool(moved) is set_aside
    if set_aside:
        assert moved[0].step == 600 and o.queue.current == 1


def test_widowx_never_sets_aside():
    assert not WIDOWX.set_aside_allowed(TaskCategory.SINGLE_DESTINATION)
    assert FRANKA.set_aside_allowed(None)


# ------------------------------------------------------------------ 5 and 7. step budgets
def test_step_budget_docstring_and_behaviour_agree():
    assert "error" in StepBudget.__doc__ and "largest entry" not in StepBudget.__doc__
    with pytest.raises(ConfigError, match=r"horizon 11; the table covers horizons \[1, .*, 10\].*budget_steps"):
        FRANKA.budget.steps_for(11)
    with pytest.raises(ConfigError, match="each horizon once"):
        StepBudget(table=((1, 900), (1, 1000)))


def test_a_task_may_carry_its_own_budget():
    stock = Task(task_id="stock", scene="s", category=TaskCategory.SINGLE_DESTINATION,
                 instruction="put carrot on plate", subgoals=(CARROT,), budget_steps=60, success_rule="simplerenv")
    assert WIDOWX.budget_for(stock) == 60 and WIDOWX.budget_for(TOY) == 200
    assert FRANKA.budget_for(Task.from_dict(stock.to_dict())) == 60
    with pytest.raises(ConfigError, match="budget_steps must be a positive integer"):
        Task(task_id="t", scene="s", category=TaskCategory.SINGLE_DESTINATION, instruction="x",
             subgoals=(CARROT,), budget_steps=0)


# ------------------------------------------------------------------ 6. success rules
def _suite(**task_fields):
    task = {"id": "a", "scene": "s", "category": "single_destination", "instruction": "put carrot on plate",
            "subgoals": [{"object": "carrot", "destination": "plate", "text": "put carrot on plate"}]}
    task.update(task_fields)
    scenes = {"s": {"objects": {"carrot": {}}, "containers": {"plate": {}}}}
    return parse_suite({"schema_version": 1, "suite": "x", "scenes": scenes, "tasks": [task]}, source="x.yaml")


def test_suite_files_name_the_success_rule_and_budget():
    task = _suite(success_rule="simplerenv", budget_steps=60).task("a")
    assert (task.success_rule, task.budget_steps) == ("simplerenv", 60)
    assert _suite().task("a").success_rule == "ladder"
    with pytest.raises(ConfigError, match=r"x.yaml: tasks\[0\] \(a\).success_rule: unknown success_rule 'gym'"):
        _suite(success_rule="gym")
    with pytest.raises(ConfigError, match=r"tasks\[0\] \(a\).budget_steps"):
        _suite(budget_steps="sixty")


def test_a_simplerenv_task_is_scored_by_the_envs_own_check():
    stock = Task(task_id="stock", scene="s", category=TaskCategory.SINGLE_DESTINATION,
                 instruction="put carrot on plate", subgoals=(CARROT,), success_rule="simplerenv", budget_steps=60)
    tracker = GoalTracker(stock)
    # the carrot pressed onto the plate while still held: the env says success, the LADDER rule does not
    tracker.update(GoalState(resting={}, held=frozenset({"carrot"})), 0)
    summary = {"variant": "proprio_verifier", "plan": [CARROT.to_dict()], "pending": [0], "ever_current": [0]}
    held = score_episode(stock, tracker, summary, env_success=True)
    assert held.success and held.subgoals_done == 1 and held.outcomes[0].cause is None
    ladder = Task.from_dict({**stock.to_dict(), "success_rule": "ladder"})
    assert not score_episode(ladder, tracker, summary).success
    # and a resting carrot the env does not count is a failure
    tracker.update(GoalState(resting={("carrot", "plate"): 1}), 1)
    assert not score_episode(stock, tracker, summary, env_success=False).success
    with pytest.raises(InvalidInputError, match="reported none"):
        score_episode(stock, tracker, summary)
    with pytest.raises(ConfigError, match="single-subgoal"):
        Task(task_id="t", scene="s", category=TaskCategory.SINGLE_DESTINATION, instruction="x",
             subgoals=(CARROT, SPOON), success_rule="simplerenv")


def test_the_tabletop_refuses_tasks_it_cannot_score():
    pytest.importorskip("mujoco")
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    with pytest.raises(ConfigError, match="success_rule simplerenv"):
        MujocoTabletop(_suite(success_rule="simplerenv", budget_steps=60), render=False)


# ------------------------------------------------------------------ 3. plans from a planner
class CannedPlan:
    def __init__(self, subgoals, error=None):
        self.subgoals, self.error = subgoals, error

    def to_dict(self):
        return {"subgoals": None if self.subgoals is None else [s.to_dict() for s in self.subgoals],
                "error": self.error, "raw_reply": "canned"}


class CannedPlanner:
    name = "canned"

    def __init__(self, result):
        self.result = result
        self.frames = []

    def plan(self, instruction, frame):
        self.frames.append(frame.step)
        return self.result


@pytest.mark.parametrize("variant", ["periodic_trigger", "proprio_trigger", "proprio_verifier"])
def test_the_reference_loop_follows_the_planners_plan(variant):
    planner = CannedPlanner(CannedPlan((SPOON, CARROT)))
    record = run_episode(ToyWorld(), ToyPolicy(TOY, 0), TOY, variant, WIDOWX, layout=0, seed=0,
                         verifier=OracleCounter(), planner=planner)
    assert planner.frames == [0]  # planned once, from the reset frame
    assert record.orchestration["plan"] == [SPOON.to_dict(), CARROT.to_dict()]
    assert record.plan["source"] == "planner" and record.plan["planner"] == "canned"


@pytest.mark.parametrize("variant", ["low_level_policy", "privileged_verifier"])
def test_the_privileged_verifier_and_the_policy_alone_never_ask_the_planner(variant):
    planner = CannedPlanner(CannedPlan((SPOON, CARROT)))
    record = run_episode(ToyWorld(), ToyPolicy(TOY, 0), TOY, variant, WIDOWX, layout=0, seed=0, planner=planner)
    assert planner.frames == [] and record.plan == {"source": "reference"}


def test_no_plan_ends_the_episode_with_the_reason():
    planner = CannedPlanner(CannedPlan(None, error="no JSON object in the reply"))
    record = run_episode(ToyWorld(), ToyPolicy(TOY, 0), TOY, "proprio_verifier", WIDOWX, layout=0, seed=0,
                         verifier=OracleCounter(), planner=planner)
    assert record.finish_reason == "aborted: planner failed: no JSON object in the reply"
    assert record.steps_used == 0 and not record.success
    assert record.plan["error"] == "no JSON object in the reply"
    assert [e["kind"] for e in record.events] == [ev.EPISODE_FINISHED]


# ------------------------------------------------------------------ 4. the run key
def _key(tmp_path, **changes):
    suite = tmp_path / "suite.yaml"
    if not suite.exists():
        suite.write_text("suite: x\n")
    fields = dict(suite_path=suite, suite_name="x", simulator="mujoco_tabletop", simulator_options={"render": False},
                  policy="scripted_expert", noise="bridge_like", action_convention={"rotation": "euler_xyz"},
                  verifier={"name": "oracle"}, plan_source="reference", planner=None, preset=WIDOWX)
    fields.update(changes)
    return run_key(**fields)


def test_the_run_key_covers_what_changes_an_episode(tmp_path):
    base = _key(tmp_path)
    assert base["versions"]["ladder_ros"] and "mujoco" in base["versions"]
    assert base["preset"]["after_last_subgoal"] == "stay" and "description" not in base["preset"]
    changed = [_key(tmp_path, noise="off"), _key(tmp_path, plan_source="planner", planner={"backend": "gemini"}),
               _key(tmp_path, preset=WIDOWX.with_options({"after_last_subgoal": "end"})),
               _key(tmp_path, action_convention={"rotation": "sxyz_axis_angle"}),
               _key(tmp_path, simulator="maniskill_bridge"), _key(tmp_path, verifier={"name": "gemini"})]
    digests = {key_digest(k) for k in changed}
    assert len(digests) == len(changed) and key_digest(base) not in digests
    (tmp_path / "suite.yaml").write_text("suite: x\n# edited\n")
    assert _key(tmp_path)["suite_sha256"] != base["suite_sha256"]


def test_a_folder_of_another_configuration_is_refused_in_one_line(tmp_path):
    out = tmp_path / "run"
    key = _key(tmp_path)
    claim_output(out, key)
    claim_output(out, key)  # the same configuration resumes
    with pytest.raises(RunKeyMismatch) as err:
        claim_output(out, _key(tmp_path, noise="off"))
    message = str(err.value)
    assert "\n" not in message and 'noise "bridge_like" there, "off" now' in message
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "episodes.jsonl").write_text('{"task_id": "a"}\n')
    with pytest.raises(RunKeyMismatch, match="no run_key.json"):
        claim_output(legacy, key)


def test_sim_eval_refuses_to_mix_noise_models_and_labels_its_outputs(tmp_path, capsys):
    pytest.importorskip("mujoco")
    out = tmp_path / "run"

    def sim_eval(*extra, noise="off"):
        return main(["sim-eval", "--tasks", "kitchen_single_1", "--episodes", "1", "--variants",
                     "privileged_verifier", "--noise", noise, "--jobs", "1", "--no-progress", "--out", str(out),
                     *extra])

    assert sim_eval() == 0
    printed = capsys.readouterr().out
    assert "plans: reference plans" in printed and "success: LADDER rule" in printed
    assert "preset: widowx (after_last_subgoal stay" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["plan_source"] == "reference" and summary["preset_options"]["after_last_subgoal"] == "stay"
    assert summary["variants"]["privileged_verifier"]["plan_source"] == "reference"
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    assert record["run_key"] == summary["run_key"] and record["success_rule"] == "ladder"
    before = (out / "episodes.jsonl").read_text()
    assert sim_eval(noise="bridge_like") == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and 'noise "off" there, "bridge_like" now' in error
    assert (out / "episodes.jsonl").read_text() == before  # nothing reused, nothing touched
    assert sim_eval("--preset-option", "after_last_subgoal=end") == 2
    assert 'preset.after_last_subgoal "stay" there, "end" now' in capsys.readouterr().err
    assert sim_eval() == 0 and (out / "episodes.jsonl").read_text() == before  # the same key resumes


def test_sim_eval_plans_with_a_replayed_planner_and_says_so(tmp_path, capsys):
    pytest.importorskip("mujoco")
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop
    from ladder_ros.vlm.backends.base import Reply
    from ladder_ros.vlm.backends.replay import RecordingBackend
    from ladder_ros.vlm.components import Planner

    class Scripted:
        name, model, reads_pixels = "scripted", "scripted-vlm", True

        def generate(self, request):
            text = json.dumps({"goals": [
                {"goal": "put the spoon on the plate", "object": "the spoon", "destination": "the plate"},
                {"goal": "put the carrot on the plate", "object": "the carrot", "destination": "the plate"}]})
            return Reply(text=text, backend=self.name, model=self.model, latency_ms=1.0, finish_reason="STOP")

        def close(self):
            pass

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    task = suite.task("kitchen_single_2")
    sim = MujocoTabletop(suite, render=True)
    frame = sim.reset(task, 0, 0)
    sim.close()
    recording = tmp_path / "plans.jsonl"
    planner = Planner(RecordingBackend(Scripted(), recording), robot="WidowX 250 robot arm")
    for _ in range(2):  # one plan per variant that follows a plan
        assert planner.plan(task.instruction, frame).ok
    out = tmp_path / "run"
    assert main(["sim-eval", "--tasks", "kitchen_single_2", "--episodes", "1", "--variants",
                 "proprio_verifier,proprio_trigger,privileged_verifier", "--noise", "off", "--plan-source", "planner",
                 "--planner", "replay", "--planner-replay", str(recording), "--jobs", "1", "--no-progress",
                 "--out", str(out)]) == 0
    assert "plans: VLM planner (replay" in capsys.readouterr().out
    records = {r["variant"]: r for r in map(json.loads, (out / "episodes.jsonl").read_text().splitlines())}
    planned = [s["object"] for s in records["proprio_verifier"]["orchestration"]["plan"]]
    assert planned == ["spoon", "carrot"] and records["proprio_trigger"]["plan"]["source"] == "planner"
    assert records["privileged_verifier"]["plan"]["source"] == "reference"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["plan_source"] == "planner" and summary["planner"]["backend"] == "replay"
    assert summary["variants"]["privileged_verifier"]["plan_source"] == "reference"
    assert summary["variants"]["proprio_verifier"]["plan_source"] == "planner"


def test_sim_eval_rejects_an_oracle_planner(tmp_path, capsys):
    assert main(["sim-eval", "--plan-source", "planner", "--planner", "oracle", "--jobs", "1", "--no-progress",
                 "--out", str(tmp_path)]) == 2
    assert "unknown planner backend 'oracle'" in capsys.readouterr().err


# ------------------------------------------------------------------ 9. the policy's convention in the loop
def test_a_rotation_convention_chosen_for_the_expert_gives_the_same_episode():
    pytest.importorskip("mujoco")
    from ladder_ros.core.suite import load_suite
    from ladder_ros.evaluation.components import make_policy
    from ladder_ros.paths import share_path
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    task = suite.task("kitchen_single_1")
    sim = MujocoTabletop(suite, render=False)
    records = {}
    for name in ("euler_xyz", "sxyz_axis_angle", "axis_angle"):
        policy = make_policy("scripted_expert", task, 3, "bridge_like", name)
        assert policy.declared_convention.rotation.value == name
        records[name] = run_episode(sim, policy, task, "privileged_verifier", WIDOWX, layout=3, seed=3)
    sim.close()
    reference = records["euler_xyz"]
    assert reference.action_convention == {"rotation": "euler_xyz", "gripper": "signed"}
    for name in ("sxyz_axis_angle", "axis_angle"):
        assert records[name].action_convention["rotation"] == name
        assert records[name].events == reference.events and records[name].success == reference.success
        assert records[name].final_goal == reference.final_goal
    with pytest.raises(ConfigError, match="rotation convention 'quaternion'"):
        make_policy("scripted_expert", task, 0, "off", "quaternion")


def test_quaternions_of_the_tabletop_are_its_sites_own():
    pytest.importorskip("mujoco")
    from ladder_ros.core.rotations import quaternion_to_matrix
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    sim = MujocoTabletop(suite, render=False)
    sim.reset(suite.task("kitchen_single_1"), 0, 0)
    for _ in range(6):  # a turn about all three axes
        obs = sim.step(np.array([0.0, 0.0, 0.0, 0.1, -0.08, 0.12, 1.0]))
    site = sim.data.site_xmat[sim.model.site("tcp").id].reshape(3, 3)
    np.testing.assert_allclose(quaternion_to_matrix(obs.ee_quaternion), site, atol=1e-9)
    np.testing.assert_allclose(obs.base_orientation(), obs.ee_quaternion)
    assert np.abs(obs.ee_euler).min() > 0.05  # it did turn about every axis
    sim.close()


def test_the_base_orientation_is_the_quaternion_given_in_double_or_the_one_of_the_euler_angles():
    from ladder_ros.core.observation import Observation
    from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_quaternion

    image = np.zeros((4, 4, 3), dtype=np.uint8)
    euler = np.array([0.1, -0.2, 0.3])
    given = np.array([0.9, 0.1, -0.2, 0.3], dtype=np.float32)
    joints = {"joint_names": ("a",), "joint_positions": np.zeros(1)}
    with_quaternion = Observation(step=0, image=image, aperture=1.0, ee_position=np.zeros(3), ee_euler=euler,
                                  ee_quaternion=given, **joints)
    orientation = with_quaternion.base_orientation()
    assert orientation.dtype == np.float64 and np.array_equal(orientation, given.astype(np.float64))
    without = Observation(step=0, image=image, aperture=1.0, ee_position=np.zeros(3), ee_euler=euler, **joints)
    np.testing.assert_allclose(without.base_orientation(), matrix_to_quaternion(euler_xyz_to_matrix(euler)),
                               atol=1e-12)
    assert abs(np.linalg.norm(without.base_orientation()) - 1.0) < 1e-12


# ------------------------------------------------------------------ 11. the tabletop camera's intrinsics
def test_tabletop_intrinsics_project_onto_the_rendered_object():
    mujoco = pytest.importorskip("mujoco")
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path
    from ladder_ros.sim.mujoco_tabletop import CAMERA_FOVY_DEG, MujocoTabletop

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    sim = MujocoTabletop(suite, render=True, image_size=256)
    sim.reset(suite.task("kitchen_single_1"), 0, 0)
    intrinsics = sim.camera_intrinsics()
    assert (intrinsics.width, intrinsics.height, intrinsics.cx, intrinsics.cy) == (256, 256, 127.5, 127.5)
    model, data = sim.model, sim.data
    camera = model.camera("3rd_view").id
    assert model.cam_fovy[camera] == CAMERA_FOVY_DEG
    renderer = mujoco.Renderer(model, 256, 256)
    renderer.enable_segmentation_rendering()
    renderer.update_scene(data, camera="3rd_view")
    segmentation = renderer.render()
    renderer.close()
    carrot = model.geom("carrot_0").id  # a capsule: its silhouette is centred on its centre
    rows, cols = np.nonzero((segmentation[:, :, 0] == carrot) & (segmentation[:, :, 1] == mujoco.mjtObj.mjOBJ_GEOM))
    assert len(rows) > 100
    optical = data.cam_xmat[camera].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])  # x right, y down, z forward
    u, v = intrinsics.project(optical.T @ (data.geom_xpos[carrot] - data.cam_xpos[camera]))
    assert abs(u - cols.mean()) < 0.5 and abs(v - rows.mean()) < 0.5
    sim.close()
