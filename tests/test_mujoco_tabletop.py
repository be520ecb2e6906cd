"""The built-in MuJoCo tabletop: the Bridge action contract, observations, predicates, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("mujoco")

from ladder_ros.core.errors import ConfigError, InvalidInputError  # noqa: E402
from ladder_ros.core.goals import GoalState  # noqa: E402
from ladder_ros.core.observation import ContainerInfo, ObjectPose, Observation, PrivilegedState  # noqa: E402
from ladder_ros.core.suite import parse_suite  # noqa: E402
from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_euler_xyz  # noqa: E402
from ladder_ros.sim.base import SimulatorBackend  # noqa: E402
from ladder_ros.sim.mujoco_tabletop import JOINT_NAMES, MujocoTabletop, make_backend  # noqa: E402
from ladder_ros.sim.registry import make_simulator  # noqa: E402
from ladder_ros.sim.tabletop_scene import WORKSPACE_HIGH, WORKSPACE_LOW  # noqa: E402

OPEN = 1.0
CLOSED = -1.0


def _suite(plate_position=(0.36, 0.12), jitter=0.0):
    """One lemon (a cylinder: any yaw grasps it) and a plate that does not move between layouts."""
    return parse_suite({
        "schema_version": 1, "suite": "probe", "embodiment": "widowx",
        "scenes": {"probe": {
            "container_jitter": jitter,
            "objects": {"lemon": {"shape": "cylinder", "size": [0.017, 0.015]},
                        "cube": {"shape": "box", "size": [0.015, 0.015, 0.015], "count": 2}},
            "containers": {"plate": {"type": "plate", "position": list(plate_position), "size": 0.08}},
        }},
        "tasks": [
            {"id": "lemon", "scene": "probe", "category": "single_destination",
             "instruction": "put the lemon on the plate",
             "subgoals": [{"object": "lemon", "destination": "plate", "text": "put the lemon on the plate"}]},
            {"id": "cubes", "scene": "probe", "category": "duplicates", "instruction": "put both cubes on the plate",
             "subgoals": [{"object": "cube", "destination": "plate", "text": "put a cube on the plate"}] * 2},
        ],
    })


@pytest.fixture(scope="module")
def probe():
    suite = _suite()
    backend = MujocoTabletop(suite, render=False)
    yield suite, backend
    backend.close()


def _act(delta=(0.0, 0.0, 0.0), rot=(0.0, 0.0, 0.0), gripper=OPEN) -> np.ndarray:
    return np.array([*delta, *rot, gripper], dtype=np.float64)


def _move_to(backend, obs: Observation, goal, gripper, max_steps=40, step_m=0.03) -> Observation:
    """Scripted motion: servo the controller target to an absolute goal."""
    goal = np.asarray(goal, dtype=np.float64)
    for _ in range(max_steps):
        delta = goal - obs.target_position
        if np.linalg.norm(delta) < 1e-6 and np.linalg.norm(goal - obs.ee_position) < 0.004:
            break
        norm = np.linalg.norm(delta)
        if norm > step_m:
            delta *= step_m / norm
        obs = backend.step(_act(delta, gripper=gripper))
    return obs


def _hold(backend, obs, gripper, steps):
    for _ in range(steps):
        obs = backend.step(_act(gripper=gripper))
    return obs


def test_backend_satisfies_the_interface_and_the_registry_builds_it():
    suite = _suite()
    backend = make_simulator("mujoco_tabletop", suite, render=False)
    assert isinstance(backend, SimulatorBackend)
    assert backend.name == "mujoco_tabletop" and backend.control_rate_hz == 5.0
    backend.close()
    with pytest.raises(ConfigError, match="unknown mujoco_tabletop option 'fps'"):
        make_backend(suite, fps=10)
    with pytest.raises(ConfigError, match="image_size must be an integer"):
        make_backend(suite, image_size=3)


def test_observation_fields_and_shapes(probe):
    suite, backend = probe
    obs = backend.reset(suite.task("cubes"), 0, 0)
    assert obs.step == 0 and obs.image is None
    assert obs.ee_position.shape == (3,) and obs.ee_euler.shape == (3,) and obs.target_position.shape == (3,)
    assert obs.joint_names == JOINT_NAMES and obs.joint_positions.shape == (8,)
    assert 0.99 <= obs.aperture <= 1.0  # starts open
    assert np.allclose(obs.ee_euler, 0.0, atol=1e-3)  # fingers down
    priv = obs.privileged
    assert isinstance(priv, PrivilegedState) and isinstance(priv.goal, GoalState)
    assert sorted(priv.objects) == ["cube_0", "cube_1"]
    assert all(isinstance(p, ObjectPose) and p.kind == "cube" and p.position.shape == (3,)
               and p.quaternion.shape == (4,) for p in priv.objects.values())
    plate = priv.containers["plate"]
    assert isinstance(plate, ContainerInfo) and np.allclose(plate.position[:2], (0.36, 0.12))
    assert plate.surface_z > 0 and plate.half_extents[0] == pytest.approx(0.08)
    assert priv.grasped == () and priv.goal.held == frozenset() and priv.goal.count("cube", "plate") == 0
    obs = backend.step(_act())
    assert obs.step == 1


def test_translation_adds_to_the_previous_target_not_the_measured_pose(probe):
    suite, backend = probe
    obs = backend.reset(suite.task("lemon"), 0, 0)
    start = obs.target_position.copy()
    obs = backend.step(_act((0.02, 0.0, 0.0)))
    assert obs.target_position == pytest.approx(start + [0.02, 0.0, 0.0], abs=1e-12)
    assert np.linalg.norm(obs.ee_position - obs.target_position) < 0.003  # the servo follows within a step
    # press the closed fingers onto the lemon: the measured pose stays on top of it, the target goes lower
    lemon = obs.privileged.objects["lemon_0"].position
    obs = _move_to(backend, obs, [lemon[0], lemon[1], 0.10], CLOSED)
    obs = _move_to(backend, obs, [lemon[0], lemon[1], 0.02], CLOSED)
    assert obs.ee_position[2] > obs.target_position[2] + 0.01  # blocked by the lemon
    before = obs.target_position.copy()
    obs = backend.step(_act((0.0, 0.0, 0.005), gripper=CLOSED))
    assert obs.target_position == pytest.approx(before + [0.0, 0.0, 0.005], abs=1e-12)
    assert obs.ee_position[2] > obs.target_position[2]


def test_the_target_is_clipped_to_the_workspace(probe):
    suite, backend = probe
    backend.reset(suite.task("lemon"), 0, 0)
    obs = backend.step(_act((5.0, -5.0, -5.0)))
    assert obs.target_position == pytest.approx([WORKSPACE_HIGH[0], WORKSPACE_LOW[1], WORKSPACE_LOW[2]])
    obs = backend.step(_act((-0.05, 0.0, 0.05)))
    assert obs.target_position == pytest.approx([WORKSPACE_HIGH[0] - 0.05, WORKSPACE_LOW[1], WORKSPACE_LOW[2] + 0.05])


def test_rotation_delta_is_euler_xyz_applied_in_the_base_frame(probe):
    angles = np.array([0.2, -0.3, 0.5])
    rx = euler_xyz_to_matrix([angles[0], 0, 0])
    ry = euler_xyz_to_matrix([0, angles[1], 0])
    rz = euler_xyz_to_matrix([0, 0, angles[2]])
    assert np.allclose(euler_xyz_to_matrix(angles), rx @ ry @ rz)  # ManiSkill3 "XYZ": Rx @ Ry @ Rz
    assert np.allclose(matrix_to_euler_xyz(euler_xyz_to_matrix(angles)), angles)
    suite, backend = probe
    backend.reset(suite.task("lemon"), 0, 0)
    obs = backend.step(_act(rot=(0.0, 0.0, 0.4)))
    obs = _hold(backend, obs, OPEN, 2)
    assert obs.ee_euler == pytest.approx([0.0, 0.0, 0.4], abs=0.01)
    obs = _hold(backend, backend.step(_act(rot=(0.2, 0.0, 0.0))), OPEN, 2)
    # the delta multiplies from the left (base frame): R = Rx(0.2) @ Rz(0.4)
    assert np.allclose(euler_xyz_to_matrix(obs.ee_euler), euler_xyz_to_matrix([0.2, 0, 0]) @ rz_of(0.4), atol=0.02)


def rz_of(yaw: float) -> np.ndarray:
    return euler_xyz_to_matrix([0.0, 0.0, yaw])


def test_gripper_plus_one_opens_minus_one_closes_and_commands_are_binarised(probe):
    suite, backend = probe
    obs = backend.reset(suite.task("lemon"), 0, 0)
    assert obs.aperture > 0.99
    obs = backend.step(_act(gripper=CLOSED))
    assert obs.aperture < 0.02  # closed on nothing: near 0
    obs = backend.step(_act(gripper=OPEN))
    assert obs.aperture > 0.98
    obs = backend.step(_act(gripper=0.0))  # 2*(g>0)-1: zero closes
    assert obs.aperture < 0.02
    obs = backend.step(_act(gripper=0.3))
    assert obs.aperture > 0.98
    for value in (obs.aperture, *obs.joint_positions[6:]):
        assert math.isfinite(value)
    assert 0.0 <= obs.aperture <= 1.0


def test_bad_actions_and_calls_are_rejected(probe):
    suite, backend = probe
    fresh = MujocoTabletop(suite, render=False)
    with pytest.raises(InvalidInputError, match="before reset"):
        fresh.step(_act())
    backend.reset(suite.task("lemon"), 0, 0)
    with pytest.raises(InvalidInputError, match="non-finite"):
        backend.step(np.array([np.nan, 0, 0, 0, 0, 0, 1.0]))
    with pytest.raises(InvalidInputError, match="shape"):
        backend.step(np.zeros(6))
    with pytest.raises(ConfigError, match="layout must be an integer in \\[0, 23\\]"):
        backend.reset(suite.task("lemon"), 24, 0)
    other = _suite()
    with pytest.raises(ConfigError, match="scene 'elsewhere'"):
        task = other.task("lemon")
        backend.reset(type(task)(**{**task.__dict__, "scene": "elsewhere"}), 0, 0)


def test_predicates_flip_when_an_object_is_placed_and_flip_back_when_it_is_removed(probe):
    suite, backend = probe
    obs = backend.reset(suite.task("lemon"), 3, 0)
    lemon = obs.privileged.objects["lemon_0"].position.copy()
    plate = obs.privileged.containers["plate"]
    assert obs.privileged.goal.count("lemon", "plate") == 0
    obs = _move_to(backend, obs, [lemon[0], lemon[1], 0.10], OPEN)
    obs = _move_to(backend, obs, [lemon[0], lemon[1], lemon[2]], OPEN)
    obs = _hold(backend, obs, CLOSED, 2)
    assert obs.privileged.grasped == ("lemon_0",) and obs.privileged.goal.held == frozenset({"lemon"})
    assert 0.05 < obs.aperture < 0.5  # holding a 34 mm lemon: (0.017 - 0.010) / 0.025
    obs = _move_to(backend, obs, [lemon[0], lemon[1], 0.10], CLOSED)
    obs = _move_to(backend, obs, [plate.position[0], plate.position[1], 0.10], CLOSED)
    obs = _move_to(backend, obs, [plate.position[0], plate.position[1], plate.surface_z + 0.03], CLOSED)
    assert obs.privileged.goal.count("lemon", "plate") == 0  # held over the plate is not resting on it
    obs = _hold(backend, obs, OPEN, 2)
    obs = _move_to(backend, obs, [plate.position[0], plate.position[1], 0.10], OPEN)
    assert obs.privileged.goal.count("lemon", "plate") == 1 and obs.privileged.goal.held == frozenset()
    # pick it up again: while held it does not count, and once it lies on the table it stops counting
    on_plate = obs.privileged.objects["lemon_0"].position.copy()
    obs = _move_to(backend, obs, on_plate, OPEN)
    obs = _hold(backend, obs, CLOSED, 2)
    assert obs.privileged.goal.count("lemon", "plate") == 0 and obs.privileged.goal.held == frozenset({"lemon"})
    obs = _move_to(backend, obs, [on_plate[0], on_plate[1], 0.10], CLOSED)
    obs = _move_to(backend, obs, [0.22, -0.15, 0.10], CLOSED)
    obs = _move_to(backend, obs, [0.22, -0.15, 0.03], CLOSED)
    obs = _move_to(backend, _hold(backend, obs, OPEN, 2), [0.22, -0.15, 0.10], OPEN)
    assert obs.privileged.goal.count("lemon", "plate") == 0 and obs.privileged.goal.resting == {}


def _run(backend, task, layout, actions):
    observations = [backend.reset(task, layout, 7)]
    for a in actions:
        observations.append(backend.step(a))
    return observations


def _assert_identical(a: Observation, b: Observation) -> None:
    assert a.step == b.step and a.aperture == b.aperture and a.joint_names == b.joint_names
    for name in ("ee_position", "ee_euler", "joint_positions", "target_position"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.image is None) == (b.image is None)
    if a.image is not None:
        assert np.array_equal(a.image, b.image)
    assert a.privileged.goal == b.privileged.goal and a.privileged.grasped == b.privileged.grasped
    for name, pose in a.privileged.objects.items():
        assert np.array_equal(pose.position, b.privileged.objects[name].position)
        assert np.array_equal(pose.quaternion, b.privileged.objects[name].quaternion)


def test_same_task_layout_and_actions_give_bit_identical_observations(probe):
    suite, backend = probe
    rng = np.random.default_rng(3)
    actions = [np.concatenate([rng.uniform(-0.03, 0.03, 3), rng.uniform(-0.1, 0.1, 3), [rng.choice([-1.0, 1.0])]])
               for _ in range(25)]
    first = _run(backend, suite.task("cubes"), 5, actions)
    backend.reset(suite.task("lemon"), 2, 0)  # another model in between must not leak state
    second = _run(backend, suite.task("cubes"), 5, actions)
    other_instance = MujocoTabletop(suite, render=False)
    third = _run(other_instance, suite.task("cubes"), 5, actions)
    for a, b, c in zip(first, second, third):
        _assert_identical(a, b)
        _assert_identical(a, c)
    different = backend.reset(suite.task("cubes"), 6, 7)
    assert not np.array_equal(different.privileged.objects["cube_0"].position,
                              first[0].privileged.objects["cube_0"].position)


def test_reset_starts_objects_at_rest_where_the_layout_put_them(probe):
    suite, backend = probe
    for layout in (0, 11, 23):
        obs = backend.reset(suite.task("cubes"), layout, 0)
        for placed in backend.layout.objects:
            pose = obs.privileged.objects[placed.name]
            assert np.linalg.norm(pose.position - placed.position) < 0.003, placed.name


def test_camera_image_when_rendering_is_on():
    suite = _suite()
    try:
        backend = MujocoTabletop(suite, render=True, image_size=64)
        obs = backend.reset(suite.task("lemon"), 0, 0)
    except InvalidInputError as exc:  # no offscreen GL on this machine
        pytest.skip(f"offscreen rendering unavailable: {exc}")
    try:
        assert obs.image.shape == (64, 64, 3) and obs.image.dtype == np.uint8
        assert obs.image.std() > 5  # a scene, not a blank frame
        again = backend.reset(suite.task("lemon"), 0, 0)
        assert np.array_equal(obs.image, again.image)
        moved = backend.step(_act((0.1, 0.0, -0.05)))
        assert not np.array_equal(moved.image, obs.image)
    finally:
        backend.close()


def test_a_machine_without_offscreen_gl_gets_a_clear_error(monkeypatch):
    import mujoco

    from ladder_ros.sim import mujoco_tabletop

    def no_device(*args, **kwargs):
        raise RuntimeError("failed to find a rendering device")

    monkeypatch.setattr(mujoco, "Renderer", no_device)
    monkeypatch.setattr(mujoco_tabletop, "_switch_gl_backend", lambda name: False)
    suite = _suite()
    backend = MujocoTabletop(suite, render=True, image_size=32)
    with pytest.raises(InvalidInputError, match="failed to find a rendering device.*run with render=False"):
        backend.reset(suite.task("lemon"), 0, 0)
