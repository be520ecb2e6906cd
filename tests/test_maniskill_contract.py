"""Contract of the SimplerEnv (ManiSkill3) backend, on the real Bridge envs.

Needs mani-skill, the software Vulkan driver (scripts/install_maniskill.sh) and the offline Bridge
assets (``../shared/assets/maniskill_bridge`` or ``$MS_ASSET_DIR``); skips, saying which is missing,
otherwise. The env runs in this process (the backend sets up ManiSkill's environment itself); a
socket guard proves that nothing is fetched from the network while it builds and runs scenes.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.suite import load_suite
from ladder_ros.core.task import Subgoal, Task, TaskCategory
from ladder_ros.sim.base import SimulatorBackend
from ladder_ros.sim.maniskill_env import missing_prerequisites, repository_root
from ladder_ros.sim.maniskill_scripted import run_placement

pytestmark = [pytest.mark.maniskill, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REASON = missing_prerequisites()
if REASON is not None:
    pytest.skip(f"SimplerEnv (ManiSkill3) backend unavailable: {REASON}", allow_module_level=True)

SUITE = load_suite(repository_root() / "config" / "suites" / "bridge.yaml")


class NetworkGuard:
    """Refuses and records every outgoing connection and name lookup made from Python."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def refuse(kind):
            def _refuse(*args, **kwargs):
                self.attempts.append(f"{kind}{args[1:] if kind == 'connect' else args[:1]}")
                raise OSError(f"network access during a ManiSkill test: {kind}")
            return _refuse
        monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
        monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect"))
        monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))


@pytest.fixture(scope="module")
def network_guard():
    guard = NetworkGuard()
    with pytest.MonkeyPatch.context() as patch:
        guard.install(patch)
        yield guard


@pytest.fixture(scope="module")
def backend(network_guard):
    from ladder_ros.sim.registry import make_simulator

    sim = make_simulator("maniskill_bridge", SUITE)
    yield sim
    sim.close()
    assert network_guard.attempts == [], f"the backend tried to reach the network: {network_guard.attempts}"


def _hold(sim, gripper: float, steps: int):
    obs = None
    for _ in range(steps):
        obs = sim.step(np.array([0, 0, 0, 0, 0, 0, gripper], dtype=np.float64))
    return obs


def test_backend_implements_the_simulator_protocol(backend):
    assert isinstance(backend, SimulatorBackend)
    assert backend.name == "maniskill_bridge" and backend.control_rate_hz == 5.0


def test_env_observation_keys_and_shapes(backend):
    backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    raw = backend.env.unwrapped.get_obs()
    assert tuple(raw["agent"]["qpos"].shape) == (1, 8)  # 6 arm joints + 2 fingers
    assert tuple(raw["agent"]["controller"]["arm"]["target_pose"].shape) == (1, 7)  # p + q (w, x, y, z)
    rgb = raw["sensor_data"]["3rd_view_camera"]["rgb"]
    assert tuple(rgb.shape) == (1, 480, 640, 3) and str(rgb.dtype) == "torch.uint8"
    assert tuple(raw["sensor_data"]["3rd_view_camera"]["segmentation"].shape) == (1, 480, 640, 1)
    assert backend.env.unwrapped.agent.control_mode == "arm_pd_ee_target_delta_pose_align2_gripper_pd_joint_pos"
    assert tuple(backend.env.unwrapped.single_action_space.shape) == (7,)


def test_backend_observation_contract(backend):
    obs = backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    assert obs.step == 0
    assert obs.image.shape == (480, 640, 3) and obs.image.dtype == np.uint8
    assert obs.image.std() > 10  # a real picture (green-screened photo plus robot), not a blank
    assert obs.joint_names == ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate",
                               "left_finger", "right_finger")
    assert obs.joint_positions.shape == (8,)
    assert obs.aperture == pytest.approx(1.0)  # reset qpos has the fingers at 0.037 (base_env.py)
    np.testing.assert_allclose(obs.target_position, obs.ee_position, atol=1e-6)
    # the reset pose is within a few degrees of top-down, fingers travelling along base y
    assert np.all(np.abs(obs.ee_euler) < 0.1)
    priv = obs.privileged
    assert set(priv.objects) == {"carrot"} and set(priv.containers) == {"plate"}
    assert priv.goal.resting == {} and priv.goal.held == frozenset() and priv.grasped == ()
    # base frame: the table top is at z ~ 0 (robot base at world z 0.870, table at 0.87)
    assert abs(priv.containers["plate"].position[2]) < 0.01
    assert priv.containers["plate"].half_extents == pytest.approx([0.055, 0.055, 0.003], abs=1e-4)


def test_two_centimetres_in_x_move_the_target_by_two_centimetres_in_the_base_frame(backend):
    start = backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    arm = backend.env.unwrapped.agent.controller.controllers["arm"]
    world_start = arm.ee_pose.p[0].numpy().astype(float)
    moved = backend.step(np.array([0.02, 0, 0, 0, 0, 0, 1.0]))
    # the controller adds the delta to its previous *target*, exactly
    np.testing.assert_allclose(moved.target_position - start.target_position, [0.02, 0, 0], atol=1e-6)
    for _ in range(3):
        moved = backend.step(np.array([0, 0, 0, 0, 0, 0, 1.0]))
    travel = moved.ee_position - start.ee_position
    assert travel[0] == pytest.approx(0.02, abs=0.002)
    assert abs(travel[1]) < 0.002 and abs(travel[2]) < 0.002
    # ManiSkill's world frame is the base yawed by 180 degrees: +x in the base is -x in the world
    world_travel = arm.ee_pose.p[0].numpy().astype(float) - world_start
    assert world_travel[0] == pytest.approx(-0.02, abs=0.002)
    # and a second delta adds to the target again, whatever the arm's lag
    target = moved.target_position
    moved = backend.step(np.array([0, 0, -0.02, 0, 0, 0, 1.0]))
    np.testing.assert_allclose(moved.target_position - target, [0, 0, -0.02], atol=1e-6)


def test_gripper_minus_one_closes_and_plus_one_opens(backend):
    obs = backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    assert obs.aperture == pytest.approx(1.0)
    closed = _hold(backend, -1.0, 5)
    assert closed.aperture < 0.05
    np.testing.assert_allclose(closed.joint_positions[6:], [0.015, 0.015], atol=1e-3)
    opened = _hold(backend, +1.0, 5)
    assert opened.aperture > 0.95
    np.testing.assert_allclose(opened.joint_positions[6:], [0.037, 0.037], atol=1e-3)


def test_bridge_open_fraction_convention_closes_below_one_half(backend):
    from ladder_ros.core.action_conventions import ActionConvention

    backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    bridge = ActionConvention.parse("euler_xyz", "open_fraction")
    assert _hold(backend, bridge.to_canonical(np.r_[np.zeros(6), 0.3])[6], 5).aperture < 0.05  # 2*(0.3>0.5)-1
    assert _hold(backend, bridge.to_canonical(np.r_[np.zeros(6), 0.7])[6], 5).aperture > 0.95


def test_placing_the_carrot_flips_the_predicate_like_the_env_success_check(backend):
    first = backend.reset(SUITE.task("carrot_on_plate_1"), layout=0, seed=0)
    unwrapped = backend.env.unwrapped
    assert not bool(unwrapped.evaluate()["success"][0])
    observations = run_placement(backend, first, "carrot", "plate")
    final = observations[-1]
    assert final.privileged.goal.resting == {("carrot", "plate"): 1}
    assert bool(unwrapped.evaluate()["success"][0]), "SimplerEnv's own success check disagrees"
    held_steps = [o.step for o in observations if "carrot" in o.privileged.goal.held]
    rest_steps = [o.step for o in observations if o.privileged.goal.count("carrot", "plate")]
    assert held_steps, "the scripted motion never grasped the carrot"
    lifted = max(o.privileged.objects["carrot"].position[2] for o in observations)
    assert lifted > first.privileged.objects["carrot"].position[2] + 0.05
    # while it is held it is never counted as resting; it rests from its release to the end
    assert not set(held_steps) & set(rest_steps)
    assert rest_steps == list(range(rest_steps[0], final.step + 1))
    assert rest_steps[0] > held_steps[-1]
    assert final.aperture > 0.95


def test_relay_on_the_four_object_table(backend):
    task = SUITE.task("kitchen_relay_2")
    first = backend.reset(task, layout=5, seed=3)
    priv = first.privileged
    assert set(priv.objects) == {"carrot", "spoon"} and set(priv.containers) == {"plate", "cloth"}
    positions = [p.position[:2] for p in priv.objects.values()] + [c.position[:2] for c in priv.containers.values()]
    gaps = [np.linalg.norm(a - b) for i, a in enumerate(positions) for b in positions[i + 1:]]
    assert min(gaps) > 0.14  # one item per cell of the 15 cm grid
    tracker = GoalTracker(task)
    leg_one = run_placement(backend, first, "carrot", "plate")
    for obs in leg_one:
        tracker.update(obs.privileged.goal, obs.step)
    assert leg_one[-1].privileged.goal.resting == {("carrot", "plate"): 1}
    assert tracker.achieved == (True, False)
    leg_two = run_placement(backend, leg_one[-1], "carrot", "cloth")
    for obs in leg_two[1:]:
        tracker.update(obs.privileged.goal, obs.step)
    assert leg_two[-1].privileged.goal.resting == {("carrot", "cloth"): 1}
    assert tracker.achieved == (True, True) and tracker.success


def test_same_inputs_give_identical_observations(backend):
    task = SUITE.task("kitchen_split_2")
    actions = [np.array([0.01, -0.01, -0.01, 0.0, 0.0, 0.1, 1.0 if i < 4 else -1.0]) for i in range(8)]

    def run():
        out = [backend.reset(task, layout=11, seed=7)]
        out += [backend.step(a) for a in actions]
        return out

    first, second = run(), run()
    for a, b in zip(first, second):
        assert np.array_equal(a.image, b.image)
        assert np.array_equal(a.joint_positions, b.joint_positions)
        assert np.array_equal(a.ee_position, b.ee_position) and np.array_equal(a.target_position, b.target_position)
        assert a.privileged.goal == b.privileged.goal
        for name in a.privileged.objects:
            assert np.array_equal(a.privileged.objects[name].position, b.privileged.objects[name].position)


def test_bad_input_gets_a_clear_error(backend):
    task = SUITE.task("carrot_on_plate_1")
    with pytest.raises(InvalidInputError, match=r"\[0, 24\)"):
        backend.reset(task, layout=24, seed=0)
    stranger = Task(task_id="elsewhere", scene="sink", category=TaskCategory.SINGLE_DESTINATION,
                    instruction="x", subgoals=(Subgoal("eggplant", "basket", "x"),))
    with pytest.raises(ConfigError, match="carrot_plate, kitchen, spoon_cloth"):
        backend.reset(stranger, layout=0, seed=0)
    backend.reset(task, layout=0, seed=0)
    with pytest.raises(InvalidInputError, match="shape"):
        backend.step(np.zeros(3))
