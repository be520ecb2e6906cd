"""Numbers comparable with SimplerEnv's own, checked on the real ManiSkill3 Bridge envs.

The stock tasks are the envs unchanged (instruction, episode length, success check), each rotation
convention turns ManiSkill's controller as the policy meant, and what the sim bridge publishes about
the robot and the camera is the simulator's own: the end effector's pose in the base frame and the
camera's intrinsics. Needs mani-skill, the software Vulkan driver and the offline Bridge assets;
skips, saying which is missing, otherwise.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ladder_ros.core.action_conventions import ActionConvention, RotationConvention
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.metrics import score_episode
from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.rotations import (
    axis_angle_to_matrix,
    euler_xyz_to_matrix,
    quaternion_multiply,
    quaternion_to_matrix,
    rotation_angle_between,
    sxyz_to_matrix,
)
from ladder_ros.core.suite import load_suite
from ladder_ros.evaluation.components import make_policy
from ladder_ros.evaluation.reference_loop import run_episode
from ladder_ros.sim.maniskill_env import missing_prerequisites, repository_root

pytestmark = [pytest.mark.maniskill, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REASON = missing_prerequisites()
if REASON is not None:
    pytest.skip(f"SimplerEnv (ManiSkill3) backend unavailable: {REASON}", allow_module_level=True)

SUITE = load_suite(repository_root() / "config" / "suites" / "bridge.yaml")
STOCK = ("carrot_on_plate_1", "spoon_on_cloth_1")


@pytest.fixture(scope="module")
def backend():
    from ladder_ros.sim.registry import make_simulator

    sim = make_simulator("maniskill_bridge", SUITE, render=False)
    yield sim
    sim.close()


def _success(env) -> bool:
    return bool(env.unwrapped.evaluate()["success"][0])


# ------------------------------------------------------------------ stock tasks
@pytest.mark.parametrize("task_id", STOCK)
def test_stock_tasks_are_the_envs_own(backend, task_id):
    task = SUITE.task(task_id)
    assert task.success_rule == "simplerenv"
    obs = backend.reset(task, layout=0, seed=0)
    env = backend.env
    assert task.instruction == env.unwrapped.get_language_instruction()[0]
    assert task.subgoals[0].text == task.instruction  # the orchestrated variants send the same string
    from mani_skill.utils.registration import REGISTERED_ENVS

    assert task.budget_steps == REGISTERED_ENVS[env.unwrapped.spec.id].max_episode_steps == 60
    assert obs.privileged.env_success is _success(env) is False
    changed = dataclasses.replace(task, instruction="put the object there", budget_steps=100)
    with pytest.raises(ConfigError, match="instruction 'put the object there' is not the env's .* and its "
                                          "budget_steps 100 is not the env's max_episode_steps 60"):
        backend.reset(changed, layout=0, seed=0)


def test_ladder_tasks_carry_no_env_success(backend):
    obs = backend.reset(SUITE.task("kitchen_split_2"), layout=0, seed=0)
    assert obs.privileged.env_success is None


@pytest.mark.parametrize("task_id", STOCK)
@pytest.mark.parametrize("variant, seed", [("low_level_policy", 0), ("proprio_verifier", 1),
                                           ("privileged_verifier", 2)])
def test_stock_episodes_are_scored_as_env_evaluate_on_every_step(backend, task_id, variant, seed):
    from ladder_ros.evaluation.components import make_verifier

    task = SUITE.task(task_id)
    tracker = GoalTracker(task)
    seen: list[tuple[bool, bool, bool]] = []

    def check(observation, decision):
        env_says = _success(backend.env)
        tracker.update(observation.privileged.goal, observation.step)
        summary = {"variant": variant, "plan": [s.to_dict() for s in task.subgoals], "pending": [0],
                   "ever_current": [0]}
        scored = score_episode(task, tracker, summary, observation.privileged.env_success).success
        ladder = observation.privileged.goal.count(task.subgoals[0].object, task.subgoals[0].destination) > 0
        seen.append((env_says, scored, ladder))

    policy = make_policy("scripted_expert", task, seed, "bridge_like")
    verifier = make_verifier("oracle") if variant == "proprio_verifier" else None
    record = run_episode(backend, policy, task, variant, WIDOWX, layout=seed, seed=seed, verifier=verifier,
                         on_step=check)
    assert record.success_rule == "simplerenv" and record.budget_steps == 60
    assert record.steps_used <= 60 and len(seen) == record.steps_used + 1
    assert all(env_says == scored for env_says, scored, _ in seen), "the score differs from env.evaluate()"
    assert record.success == seen[-1][0] == _success(backend.env)
    assert record.subgoals_done == int(record.success)


# ------------------------------------------------------------------ rotation conventions
TURN = np.array([0.3, 0.2, 0.25])  # about all three axes: the conventions differ by up to 6 degrees


@pytest.mark.parametrize("name, meaning", [("euler_xyz", euler_xyz_to_matrix), ("sxyz_axis_angle", sxyz_to_matrix),
                                           ("axis_angle", axis_angle_to_matrix)])
def test_each_convention_turns_maniskills_controller_as_the_policy_meant(backend, name, meaning):
    backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    arm = backend.env.unwrapped.agent.controller.controllers["arm"]

    def target_rotation():
        return quaternion_to_matrix(arm._target_pose.q[0].cpu().numpy().astype(np.float64))

    before = target_rotation()
    raw = np.r_[0.0, 0.0, 0.0, TURN, 1.0]  # the policy's own numbers
    backend.step(ActionConvention(RotationConvention(name)).to_canonical(raw))
    turned = target_rotation() @ before.T  # the controller left-multiplies (root_aligned_body_rotation)
    assert np.degrees(rotation_angle_between(turned, meaning(TURN))) < 1e-3
    if name != "euler_xyz":  # the same numbers sent unconverted land degrees away
        assert np.degrees(rotation_angle_between(euler_xyz_to_matrix(TURN), meaning(TURN))) > 2.0


# ------------------------------------------------------------------ what the sim bridge publishes
def test_ee_quaternion_is_the_links_own_pose_in_the_base_frame(backend):
    backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    obs = None
    for _ in range(4):
        obs = backend.step(np.array([0.0, 0.0, 0.0, 0.08, -0.06, 0.1, 1.0]))
    agent = backend.env.unwrapped.agent
    link = agent.robot.links_map["ee_gripper_link"].pose.raw_pose[0].cpu().numpy().astype(np.float64)
    root = agent.robot.pose.raw_pose[0].cpu().numpy().astype(np.float64)
    w, x, y, z = root[3:]
    in_base = quaternion_multiply(np.array([w, -x, -y, -z]), link[3:])
    assert rotation_angle_between(quaternion_to_matrix(obs.ee_quaternion), quaternion_to_matrix(in_base)) < 1e-5
    np.testing.assert_allclose(obs.ee_position, quaternion_to_matrix(root[3:]).T @ (link[:3] - root[:3]), atol=1e-5)
    # the robot base is yawed half a turn in ManiSkill's world: base and world orientations differ
    assert rotation_angle_between(quaternion_to_matrix(link[3:]), quaternion_to_matrix(in_base)) > 1.0


def test_camera_intrinsics_are_the_cameras_own_and_project_onto_the_rendered_object(backend):
    backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    intrinsics = backend.camera_intrinsics()
    assert (intrinsics.width, intrinsics.height) == (640, 480)
    assert intrinsics.fx == pytest.approx(623.588, abs=1e-3) and intrinsics.fy == pytest.approx(623.588, abs=1e-3)
    assert intrinsics.cx == pytest.approx(319.501, abs=1e-3) and intrinsics.cy == pytest.approx(239.545, abs=1e-3)
    unwrapped = backend.env.unwrapped
    camera = unwrapped.scene.sensors["3rd_view_camera"]
    params = camera.get_params()
    np.testing.assert_allclose(intrinsics.K, params["intrinsic_cv"][0].cpu().numpy(), atol=1e-4)
    # project the carrot's mesh with these intrinsics and the camera's pose: it covers the carrot's pixels
    raw = unwrapped.get_obs()
    segmentation = raw["sensor_data"]["3rd_view_camera"]["segmentation"][0, :, :, 0].cpu().numpy()
    carrot = unwrapped.objs["bridge_carrot_generated_modified"]
    rows, cols = np.nonzero(segmentation == int(carrot.per_scene_id[0]))
    assert len(rows) > 50
    extrinsic = params["extrinsic_cv"][0].cpu().numpy().astype(np.float64)  # world -> OpenCV camera
    vertices = np.asarray(carrot.get_first_collision_mesh(to_world_frame=True).vertices, dtype=np.float64)
    pixels = np.array([intrinsics.project(extrinsic[:3, :3] @ p + extrinsic[:3, 3]) for p in vertices])
    rendered = np.array([cols.min(), rows.min(), cols.max(), rows.max()], dtype=np.float64)
    projected = np.r_[pixels.min(axis=0), pixels.max(axis=0)]
    # the collision hull is a little larger than what is drawn: it contains the pixels, centred on them
    inside = np.all(projected[:2] <= rendered[:2] + 1) and np.all(projected[2:] >= rendered[2:] - 1)
    assert inside, (projected, rendered)
    centre = (projected[:2] + projected[2:]) / 2 - (rendered[:2] + rendered[2:]) / 2
    assert np.abs(centre).max() < 4.0, (projected, rendered)
