"""The drivers' pure parts: Bridge target deltas, gripper normalisation, Franka streaming, control timing."""

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.safety import WorkspaceBox
from ladder_ros.robots.ee_target import BridgeTarget
from ladder_ros.robots.franka import MODELS, get_model, waypoint_velocity
from ladder_ros.robots.gripper import DROID_AXIS, SIGNED_AXIS, ApertureRange, commanded_aperture
from ladder_ros.robots.timing import ControlTiming
from ladder_ros.core.rotations import euler_xyz_to_matrix

BOX = WorkspaceBox((0.1, -0.3, 0.0), (0.5, 0.3, 0.4))


def pose(x, y, z, euler=(0.0, 0.0, 0.0)):
    t = np.eye(4)
    t[:3, :3] = euler_xyz_to_matrix(np.array(euler))
    t[:3, 3] = [x, y, z]
    return t


def test_deltas_move_the_previous_target_not_the_measured_pose():
    target = BridgeTarget(BOX)
    target.seed(pose(0.3, 0.0, 0.2))
    for _ in range(3):  # the arm has not moved yet: the target still advances by each delta
        new, clipped = target.propose(np.array([0.01, 0.0, -0.02, 0.0, 0.0, 0.1, -1.0]))
        assert clipped == []
        target.commit(new, -1.0)
    assert np.allclose(target.pose[:3, 3], [0.33, 0.0, 0.14])
    # rotations compose in the base frame: three turns of 0.1 about z make 0.3
    assert np.allclose(target.pose[:3, :3], euler_xyz_to_matrix(np.array([0.0, 0.0, 0.3])))
    assert target.gripper == -1.0


def test_rotation_deltas_left_multiply_as_the_simulators_do():
    target = BridgeTarget(BOX)
    start = pose(0.3, 0.0, 0.2, (0.0, 1.2, 0.0))
    target.seed(start)
    delta = np.array([0.3, -0.2, 0.1])
    new, _ = target.propose(np.array([0, 0, 0, *delta, 1.0]))
    assert np.allclose(new[:3, :3], euler_xyz_to_matrix(delta) @ start[:3, :3])
    assert np.allclose(new[:3, 3], start[:3, 3])  # turning about the end effector does not move it


def test_the_target_is_clipped_into_the_workspace_and_the_axes_named():
    target = BridgeTarget(BOX)
    target.seed(pose(0.49, 0.0, 0.01))
    new, clipped = target.propose(np.array([0.05, 0.0, -0.05, 0, 0, 0, 1.0]))
    assert clipped == ["x", "z"] and np.allclose(new[:3, 3], [0.5, 0.0, 0.0])
    target.seed(pose(0.9, 0.0, 0.2))  # a measured pose outside the box seeds a target inside it
    assert np.allclose(target.pose[:3, 3], [0.5, 0.0, 0.2])


def test_speed_scale_scales_every_delta():
    target = BridgeTarget(BOX, speed_scale=0.25)
    target.seed(pose(0.3, 0.0, 0.2))
    new, _ = target.propose(np.array([0.04, 0.0, 0.0, 0.0, 0.0, 0.4, 1.0]))
    assert np.allclose(new[:3, 3], [0.31, 0.0, 0.2])
    assert np.allclose(new[:3, :3], euler_xyz_to_matrix(np.array([0.0, 0.0, 0.1])))
    with pytest.raises(ConfigError, match="speed_scale"):
        BridgeTarget(BOX, speed_scale=0.0)
    with pytest.raises(InvalidInputError, match="seeded"):
        BridgeTarget(BOX).propose(np.zeros(7))


def test_the_aperture_is_the_bridge_finger_travel_clipped_to_zero_one():
    bridge = ApertureRange(0.010, 0.035)
    assert bridge.aperture(0.010) == 0.0 and bridge.aperture(0.035) == 1.0
    assert bridge.aperture(0.0225) == pytest.approx(0.5)
    assert bridge.aperture(0.037) == 1.0 and bridge.aperture(0.005) == 0.0  # outside the travel: clipped
    assert bridge.reading(0.5) == pytest.approx(0.0225)
    with pytest.raises(InvalidInputError):
        bridge.aperture(math.nan)
    with pytest.raises(ConfigError, match="open"):
        ApertureRange(0.03, 0.01)


def test_gripper_commands_in_both_conventions():
    assert commanded_aperture(SIGNED_AXIS, 1.0) == 1.0 and commanded_aperture(SIGNED_AXIS, -1.0) == 0.0
    assert commanded_aperture(DROID_AXIS, 0.0) == 1.0 and commanded_aperture(DROID_AXIS, 1.0) == 0.0
    assert commanded_aperture(DROID_AXIS, 0.25) == pytest.approx(0.75)
    for axis, bad in ((SIGNED_AXIS, 1.5), (DROID_AXIS, -0.1), (DROID_AXIS, math.inf)):
        with pytest.raises(InvalidInputError, match=axis):
            commanded_aperture(axis, bad)
    with pytest.raises(ConfigError, match="gripper axis"):
        commanded_aperture("claw", 0.0)


def test_waypoint_velocity_continues_the_motion_within_the_limits():
    model = get_model("panda")
    period = 1.0 / 15.0
    q0 = np.zeros(7) + np.array([0, 0, 0, -1.5, 0, 1.5, 0])
    q1 = q0 + 0.05
    v = waypoint_velocity(q0, q1, period, model)
    assert np.allclose(v, 0.05 / period)
    fast = waypoint_velocity(q0, q0 + 1.0, period, model)  # the filter would refuse this; capped anyway
    assert np.all(np.abs(fast) <= np.array(model.max_velocity) + 1e-12)
    near = q0.copy()
    near[0] = model.upper[0] - 0.001  # moving toward the limit with 1 mm... of room: must be able to stop
    v = waypoint_velocity(near - 0.05, near, period, model)
    assert abs(v[0]) <= math.sqrt(2 * model.max_acceleration[0] * 0.001) + 1e-12
    slow = waypoint_velocity(q0, q1, period, model, dynamics_factor=0.1)
    assert np.all(np.abs(slow) <= 0.1 * np.array(model.max_velocity) + 1e-12)
    assert set(MODELS) == {"panda", "fr3"}
    with pytest.raises(ConfigError, match="Franka model"):
        get_model("ur5")


def test_joint_limits_of_a_franka_allow_one_period_at_full_velocity():
    limits = get_model("fr3").joint_limits(period_s=1 / 15)
    assert limits.max_step[0] == pytest.approx(2.62 / 15)


def test_control_timing_reports_period_and_jitter_against_nominal():
    timing = ControlTiming(0.2)
    assert timing.stats()["period_mean_ms"] is None
    for t in (0.0, 0.2, 0.41, 0.6, 0.8):
        timing.tick(t)
    stats = timing.stats()
    assert stats["ticks"] == 5 and stats["period_mean_ms"] == pytest.approx(200.0)
    assert stats["jitter_max_ms"] == pytest.approx(10.0) and stats["period_max_ms"] == pytest.approx(210.0)
    timing.gap()
    timing.tick(5.0)  # after a hold, no period spans the gap
    assert timing.stats()["period_max_ms"] == pytest.approx(210.0)
