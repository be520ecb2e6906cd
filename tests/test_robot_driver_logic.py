"""The drivers' pure parts: Bridge target deltas, gripper normalisation, Franka streaming, control timing."""

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.safety import WorkspaceBox
from ladder_ros.robots.ee_target import BridgeTarget
from ladder_ros.robots.franka import (
    BRAKE_MARGIN,
    FRANKY_ACCELERATION_LIMITS,
    FRANKY_JERK_LIMITS,
    FRANKY_VELOCITY_LIMITS,
    MODELS,
    READY_JOINTS,
    StreamLimits,
    clip_step_into_box,
    forward_kinematics,
    get_model,
    speed_to_stop_within,
    stopping_distance,
    stream_waypoints,
    urdf_joint_limits,
)
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


FR3_STREAM = StreamLimits.from_robot(get_model("fr3"), FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS,
                                     FRANKY_JERK_LIMITS, 1.0)


def test_stopping_distance_and_its_inverse_agree_and_the_distance_grows_with_speed():
    a, j = np.array(FRANKY_ACCELERATION_LIMITS), np.array(FRANKY_JERK_LIMITS)
    for speed in (0.0, 1e-4, 0.01, 0.05, 0.5, 1.0, 2.175):
        v = np.full(7, speed)
        d = stopping_distance(v, a, j)
        assert np.allclose(speed_to_stop_within(d, a, j), v, atol=1e-9)
    # both regimes against their closed forms: v < a^2/j (no constant-deceleration phase) and above
    slow, fast = 0.005, 1.5
    assert stopping_distance(np.array([slow]), a[:1], j[:1])[0] == pytest.approx(slow * math.sqrt(slow / j[0]))
    assert stopping_distance(np.array([fast]), a[:1], j[:1])[0] == pytest.approx(fast / 2 * (fast / a[0] + a[0] / j[0]))
    speeds = np.linspace(0.0, 2.0, 50)
    distances = [stopping_distance(np.full(7, s), a, j) for s in speeds]
    assert all(np.all(d2 > d1) for d1, d2 in zip(distances, distances[1:]))
    assert np.all(speed_to_stop_within(np.full(7, -1.0), a, j) == 0.0)  # no room: no speed


def test_the_via_point_lies_short_of_the_target_by_the_braking_distance_of_its_velocity():
    period = 1.0 / 15.0
    q0 = np.array([0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0])
    step = np.array([0.05, -0.04, 0.03, 0.02, -0.1, 0.08, 0.0])
    q1 = q0 + step
    via, v = stream_waypoints(q0, q1, q0, period, FR3_STREAM)  # the arm still at q0
    a, j = np.array(FR3_STREAM.acceleration), np.array(FR3_STREAM.jerk)
    assert np.all(np.sign(v) == np.sign(step))
    assert np.all(np.abs(v) <= np.abs(step) / period + 1e-12)
    # braking from the via velocity ends exactly on the target, never past it
    assert np.allclose(via + np.sign(v) * stopping_distance(v, a, j) * BRAKE_MARGIN, q1)
    assert np.all((q1 - via) * np.sign(step) >= 0.0)
    # the via velocity is the most the room between the arm and the target allows
    assert np.all(stopping_distance(v, a, j) * BRAKE_MARGIN <= np.abs(q1 - q0) + 1e-12)


def test_the_via_velocity_is_capped_by_the_limit_and_zero_when_the_arm_is_at_or_past_the_target():
    period = 1.0 / 15.0
    q0 = np.zeros(7) + np.array([0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0])
    far = q0 - 3.0  # the arm far behind: room is no constraint, only the velocity limit is
    _, v = stream_waypoints(q0, q0 + 1.0, far, period, FR3_STREAM)
    assert np.allclose(np.abs(v), FR3_STREAM.velocity)
    at_target = q0 + 0.05
    via, v = stream_waypoints(q0, q0 + 0.05, at_target, period, FR3_STREAM)
    assert np.all(v == 0.0) and np.allclose(via, q0 + 0.05)
    past = q0 + 0.08  # the arm already past the target in the direction of motion
    _, v = stream_waypoints(q0, q0 + 0.05, past, period, FR3_STREAM)
    assert np.all(v == 0.0)
    backwards = stream_waypoints(q0, q0 - 0.05, far, period, FR3_STREAM)[1]  # moving down, arm far below
    assert np.all(backwards == 0.0)
    with pytest.raises(ConfigError, match="period"):
        stream_waypoints(q0, q0, q0, 0.0, FR3_STREAM)


def test_stream_limits_come_from_franky_and_a_request_above_them_is_refused():
    fr3 = get_model("fr3")
    limits = StreamLimits.from_robot(fr3, FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS, FRANKY_JERK_LIMITS, 0.5)
    assert limits.velocity == pytest.approx(tuple(0.5 * v for v in FRANKY_VELOCITY_LIMITS))
    assert limits.jerk[1] == pytest.approx(0.5 * 3750.0) and limits.acceleration[6] == pytest.approx(10.0)
    assert max(limits.velocity) < min(fr3.max_velocity)  # franky's limits, not the datasheet's, govern streaming
    lower = StreamLimits.from_robot(fr3, FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS, FRANKY_JERK_LIMITS, 1.0,
                                    requested_velocity=(1.0,) * 7)
    assert lower.velocity == (1.0,) * 7
    asked = list(FRANKY_VELOCITY_LIMITS)
    asked[4] = 4.18
    with pytest.raises(ConfigError, match="joint 5 4.18 > 2.61"):
        StreamLimits.from_robot(fr3, FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS, FRANKY_JERK_LIMITS, 1.0,
                                requested_velocity=asked)
    with pytest.raises(ConfigError, match="dynamics factor"):
        StreamLimits.from_robot(fr3, FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS, FRANKY_JERK_LIMITS, 0.0)
    # the URDF the arm reports narrows the model's position limits on each side, never widens them
    urdf_lower = np.array(fr3.lower) + np.array([0.1, -0.5, 0, 0, 0, 0, 0])
    urdf_upper = np.array(fr3.upper) - np.array([0, 0, 0.2, 0, 0, 0, 0]) + np.array([0, 0, 0, 0, 0, 0, 0.5])
    narrowed = StreamLimits.from_robot(fr3, FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS, FRANKY_JERK_LIMITS,
                                       1.0, urdf_lower, urdf_upper)
    assert narrowed.lower[0] == pytest.approx(fr3.lower[0] + 0.1) and narrowed.lower[1] == fr3.lower[1]
    assert narrowed.upper[2] == pytest.approx(fr3.upper[2] - 0.2) and narrowed.upper[6] == fr3.upper[6]
    steps = narrowed.joint_limits(period_s=1 / 15).max_step
    assert steps[0] == pytest.approx(2.175 / 15) and steps[6] == pytest.approx(2.61 / 15)
    assert set(MODELS) == {"panda", "fr3"}
    with pytest.raises(ConfigError, match="Franka model"):
        get_model("ur5")


def test_urdf_joint_limits_are_read_per_joint_and_a_missing_joint_is_named():
    urdf = "".join(f'<joint name="fr3_joint{i}" type="revolute"><limit effort="1" lower="-{i}.5" upper="{i}.25" '
                   f'velocity="2.6"/></joint>' for i in range(7, 0, -1))
    lower, upper = urdf_joint_limits(urdf)
    assert lower.tolist() == [-(i + 0.5) for i in range(1, 8)] and upper.tolist() == [i + 0.25 for i in range(1, 8)]
    with pytest.raises(ConfigError, match=r"joints \[7\]"):
        urdf_joint_limits(urdf.replace("fr3_joint7", "fr3_finger"))


def test_franka_forward_kinematics_matches_the_pose_franky_sim_reports():
    # franky-sim 1.0.4's FR3 at its start joints reports the hand at (0.5544, 0, 0.5214) m, pointing down
    pose = forward_kinematics([0.0, 0.0, 0.0, -1.57, 0.0, 1.57, 0.785])
    assert np.allclose(pose[:3, 3], [0.5544, 0.0, 0.5214], atol=5e-4)
    assert np.allclose(pose[:3, :3] @ [0, 0, 1], [0, 0, -1], atol=1e-3)
    zero = forward_kinematics(np.zeros(7))  # stretched up: 0.088 forward, 0.333 + 0.316 + 0.384 - 0.107 - 0.1034 up
    assert np.allclose(zero[:3, 3], [0.088, 0.0, 0.333 + 0.316 + 0.384 - 0.107 - 0.1034], atol=1e-9)
    with pytest.raises(ConfigError, match="7 joints"):
        forward_kinematics(np.zeros(6))


def test_a_step_that_would_leave_the_box_stops_at_its_wall():
    q0 = np.array(READY_JOINTS)
    start = forward_kinematics(q0)[:3, 3]
    box = WorkspaceBox(tuple(start - 0.1), (start[0] + 0.1, start[1] + 0.1, start[2] + 0.02))
    up = q0 + np.array([0.0, -0.15, 0.0, 0.15, 0.0, 0.0, 0.0])  # lifts the hand by several cm
    assert forward_kinematics(up)[2, 3] > box.high[2]
    clipped, axes = clip_step_into_box(q0, up, box)
    assert axes == ["z"] and box.contains(forward_kinematics(clipped)[:3, 3])
    assert forward_kinematics(clipped)[2, 3] == pytest.approx(box.high[2], abs=2e-3)  # at the wall, not short of it
    direction = (clipped - q0) / np.linalg.norm(clipped - q0)
    assert np.allclose(direction, (up - q0) / np.linalg.norm(up - q0))  # along the step's own line
    inside = q0 + 0.01
    assert np.array_equal(clip_step_into_box(q0, inside, box)[0], inside)
    outside_box = WorkspaceBox(tuple(start + 0.2), tuple(start + 0.4))  # the hand is outside already
    towards = clip_step_into_box(q0, up, WorkspaceBox((start[0] - 0.1, start[1] - 0.1, start[2] + 0.05),
                                                      (start[0] + 0.1, start[1] + 0.1, start[2] + 0.3)))
    assert np.array_equal(towards[0], up)  # a step that brings it closer is taken
    away = clip_step_into_box(up, q0, WorkspaceBox((start[0] - 0.1, start[1] - 0.1, start[2] + 0.2),
                                                   (start[0] + 0.1, start[1] + 0.1, start[2] + 0.3)))
    assert np.array_equal(away[0], up)  # one that does not stays put
    assert clip_step_into_box(q0, q0, outside_box)[1] == ["x", "y", "z"]


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
