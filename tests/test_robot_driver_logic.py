"""The drivers' pure parts: Bridge target deltas, gripper normalisation, Franka streaming, control timing."""

import math
import threading

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.safety import DUPLICATE, FUTURE_STAMP, STALE, WorkspaceBox
from ladder_ros.robots.admission import ActionAdmission, AdmissionConfig
from ladder_ros.robots.arm_health import GripperMonitor, RestDetector, TrackingMonitor
from ladder_ros.robots.dynamixel import ProfileRegisters, TimeProfile
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, FAILED, LATE, VendorCallWorker
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
    speed_change_distance,
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
    # from rest the arm must speed up to the via velocity and brake again within the room to the target
    used = speed_change_distance(np.zeros(7), v, a, j) + BRAKE_MARGIN * stopping_distance(v, a, j)
    assert np.all(used <= np.abs(step) + 1e-9)
    capped = np.abs(v) < np.abs(step) / period - 1e-9
    assert np.allclose(used[capped], np.abs(step)[capped], atol=1e-6)  # where capped, the room is used up
    # already moving at the via speed, the arm needs only the braking distance: a faster via velocity
    _, moving = stream_waypoints(q0, q1, q0, period, FR3_STREAM, measured_velocity=v)
    assert np.all(np.abs(moving) >= np.abs(v) - 1e-12)
    # moving away from the target, it must first undo that motion: a slower via velocity
    _, away = stream_waypoints(q0, q1, q0, period, FR3_STREAM, measured_velocity=-np.sign(step) * 0.3)
    assert np.all(np.abs(away) <= np.abs(v) + 1e-12) and np.any(np.abs(away) < np.abs(v) - 1e-6)
    assert speed_change_distance(np.array([0.5]), np.array([0.5]), a[:1], j[:1])[0] == 0.0
    assert speed_change_distance(np.array([0.0]), np.array([1.0]), a[:1], j[:1])[0] == pytest.approx(
        stopping_distance(np.array([1.0]), a[:1], j[:1])[0])


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


# ------------------------------------------------------------------ admission: stamp and arrival together
PERIOD_NS = 200_000_000


def admission(**config):
    return ActionAdmission(AdmissionConfig(**{"period_s": 0.2, "max_age_s": 0.5, "future_tolerance_s": 0.05,
                                              **config}))


def test_stale_and_future_stamps_are_refused_with_a_small_tolerance_either_way():
    gate = admission()
    now = 10_000_000_000
    assert gate.judge(now - 500_000_000, now).admitted  # exactly max_age: let in
    verdict = gate.judge(now - 500_000_001, now)
    assert verdict.kind == STALE and verdict.value == pytest.approx(0.500000001) and verdict.limit == 0.5
    assert gate.judge(now + 50_000_000, now).admitted  # 50 ms ahead: within the clocks' tolerance
    verdict = gate.judge(now + 50_000_001, now)
    assert verdict.kind == FUTURE_STAMP and verdict.limit == 0.05 and "ahead" in verdict.reason
    assert gate.last_stamp_ns is None and gate.last_applied_ns is None  # judging leaves no mark


def apply_stream(gate, stamps, arrivals, tick_ns=PERIOD_NS // 4):
    """Feed actions to ``gate`` as a driver does; returns the (stamp, time) of every applied action and the refusals."""
    applied, refused = [], []
    events = sorted(zip(arrivals, stamps))
    t = events[0][0]
    end = events[-1][0] + 4 * PERIOD_NS
    i = 0
    while t <= end:
        while i < len(events) and events[i][0] <= t:
            arrival, stamp = events[i]
            verdict = gate.judge(stamp, arrival)
            if not verdict.admitted:
                refused.append(verdict.kind)
            elif verdict.due_ns:
                replaced = gate.wait(stamp, stamp, verdict.due_ns)
                if replaced is not None:
                    refused.append(replaced.kind)
            else:
                gate.applied(stamp, arrival)
                applied.append((stamp, arrival))
            i += 1
        ready = gate.due(t)
        if ready is not None:
            gate.applied(ready[1], t)
            applied.append((ready[1], t))
        t += tick_ns if i >= len(events) else min(tick_ns, max(1, events[i][0] - t))
    return applied, refused


def test_a_burst_stamped_a_period_apart_but_arriving_together_moves_the_arm_once_with_the_newest():
    gate = admission(future_tolerance_s=10.0)  # even with a lax clock tolerance
    arrival = 50_000_000_000
    stamps = [arrival + k * PERIOD_NS for k in range(30)]
    applied, refused = apply_stream(gate, stamps, [arrival + k * 1_000_000 for k in range(30)])
    assert len(applied) == 2 and applied[0][0] == stamps[0] and applied[1][0] == stamps[-1]
    assert applied[1][1] - applied[0][1] >= 0.75 * PERIOD_NS  # the second one waited for its period
    assert refused == [DUPLICATE] * 28


def test_never_two_actions_in_less_than_three_quarters_of_a_period_and_none_lost_to_jitter():
    rng = np.random.default_rng(0)
    stamps = [k * PERIOD_NS for k in range(1, 300)]
    arrivals = [s + int(rng.uniform(0, 90e6)) for s in stamps]  # delivery jitter up to 90 ms at 5 Hz
    gate = admission()
    applied, refused = apply_stream(gate, stamps, arrivals, tick_ns=1_000_000)
    times = np.array([t for _, t in applied])
    assert np.min(np.diff(times)) >= 0.75 * PERIOD_NS
    assert refused == [] and [s for s, _ in applied] == stamps  # every action applied, in order
    # two actions for one step (stamps closer than half a period) are a duplicate however they arrive
    gate = admission()
    t = 100 * PERIOD_NS
    gate.applied(t, t)
    assert gate.judge(t + PERIOD_NS // 2 - 1, t + 2 * PERIOD_NS).kind == DUPLICATE
    assert gate.judge(t + PERIOD_NS // 2, t + 2 * PERIOD_NS).admitted
    soon = gate.judge(t + PERIOD_NS // 2, t + PERIOD_NS // 2)
    assert soon.admitted and soon.due_ns == t + int(0.75 * PERIOD_NS)
    assert gate.judge(t + PERIOD_NS // 2, t + int(0.75 * PERIOD_NS)).due_ns == 0  # just in time: no wait
    assert gate.due(t + 10 * PERIOD_NS) is None  # nothing waiting
    gate.wait("a", t + PERIOD_NS, t + 3 * PERIOD_NS)
    assert gate.waiting and gate.due(t + 3 * PERIOD_NS - 1) is None
    assert gate.due(t + 3 * PERIOD_NS) == ("a", t + PERIOD_NS)
    assert not gate.waiting
    gate.reset()
    assert gate.judge(t, t + 1).due_ns == 0 and gate.last_stamp_ns is None


def test_admission_config_is_validated():
    for bad in ({"period_s": 0.0}, {"max_age_s": -1.0}, {"future_tolerance_s": -0.1}, {"period_s": math.nan},
                {"max_age_s": True}):
        with pytest.raises(ConfigError, match="admission"):
            admission(**bad)


# ------------------------------------------------------------------ vendor calls with deadlines
class StepClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def wait_until(condition, what, timeout_s=10.0):
    import time
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def test_vendor_calls_run_in_order_and_report_results_and_errors_once():
    clock = StepClock()
    worker = VendorCallWorker("test", clock)
    done = []
    first = worker.submit("write", lambda: done.append(1) or "written", 1.0)
    second = worker.submit("read", lambda: 1 / 0, 1.0)
    wait_until(lambda: not worker.busy, "the calls to end")
    ended = worker.poll()
    assert [c.name for c in ended] == ["write", "read"] and done == [1]
    assert first.state == DONE and first.result == "written"
    assert second.state == FAILED and isinstance(second.error, ZeroDivisionError) and "failed" in second.describe()
    assert worker.poll() == []  # each reported once
    with pytest.raises(ConfigError, match="deadline"):
        worker.submit("x", lambda: None, 0.0)
    worker.close()
    with pytest.raises(ConfigError, match="closed"):
        worker.submit("x", lambda: None, 1.0)


def test_a_call_past_its_deadline_expires_a_fresh_thread_serves_the_rest_and_a_late_answer_is_reported():
    import threading
    clock = StepClock()
    worker = VendorCallWorker("test", clock)
    release = threading.Event()
    entered = threading.Event()
    stuck = worker.submit("reboot", lambda: (entered.set(), release.wait(), "rebooted")[2], 2.0)
    queued = worker.submit("read", lambda: "value", 2.0)
    assert entered.wait(10.0)
    clock.t = 1.9
    assert worker.poll() == [] and worker.running() is stuck  # within its deadline
    clock.t = 2.1
    expired = worker.poll()
    assert expired == [stuck] and stuck.state == EXPIRED and worker.threads_given_up == 1
    assert "2 s deadline" in stuck.describe()
    wait_until(lambda: queued.state == DONE, "the queued call on a fresh thread")
    assert worker.poll() == [queued]
    clock.t = 5.0
    release.set()
    wait_until(lambda: stuck.state == LATE, "the stuck call to come back")
    late = worker.poll()
    assert late == [stuck] and stuck.result == "rebooted" and "past its 2 s deadline" in stuck.describe()
    assert worker.poll() == []
    worker.close()


class GiveUpRaceWorker(VendorCallWorker):
    """A worker on which the moments of a give-up race are the test's to choose: ``while_giving_up`` runs inside
    poll(), after the stuck call is marked expired and before the fresh thread is counted (the moment the stuck
    call may return), and a fresh thread starts serving only once ``fresh_may_start`` is set (a loaded machine)."""

    def __init__(self, name, clock):
        self.while_giving_up = None
        self.fresh_may_start = threading.Event()
        super().__init__(name, clock)

    def _start_thread(self):
        hook, self.while_giving_up = self.while_giving_up, None
        if hook is not None:
            hook()
        super()._start_thread()

    def _run(self, generation):
        if generation > 1:
            assert self.fresh_may_start.wait(60), "the test never let the fresh thread start"
        super()._run(generation)


def test_a_call_taken_by_a_thread_given_up_on_goes_to_the_fresh_thread():
    """The stuck call returns while poll() gives its thread up: that thread, not yet told, takes the next call;
    it must hand that call (not nothing) to the fresh thread, which runs it."""
    released, ended = threading.Event(), threading.Event()

    def clock():  # the old thread reads the clock when its stuck call has returned (under the worker's lock)
        if threading.current_thread().name == "race-1" and released.is_set():
            ended.set()
        return time_[0]

    time_ = [0.0]
    worker = GiveUpRaceWorker("race", clock)
    old = next(t for t in threading.enumerate() if t.name == "race-1")
    entered = threading.Event()
    stuck = worker.submit("reboot", lambda: (entered.set(), released.wait(60), "rebooted")[2], 2.0)
    assert entered.wait(60), "the stuck call never started"

    def stuck_call_returns():
        released.set()
        assert ended.wait(60), "the stuck call never returned"
        assert worker.running() is None  # the lock is free again: the old thread ended that call, not told yet

    worker.while_giving_up = stuck_call_returns
    time_[0] = 2.5
    assert worker.poll() == [stuck] and worker.threads_given_up == 1
    ran = threading.Event()
    queued = worker.submit("read", lambda: (ran.set(), "value")[1], 2.0)  # only the old thread serves the queue now
    old.join(60)
    assert not old.is_alive(), "the thread given up on kept serving"
    assert queued.state == "pending"  # it took the call and handed it back
    worker.fresh_may_start.set()
    assert ran.wait(60), "the call the old thread took never ran on the fresh thread"
    wait_until(lambda: not worker.busy, "the handed-back call to end")
    assert worker.poll() == [stuck, queued] and stuck.state == LATE and queued.result == "value"
    worker.close()


# ------------------------------------------------------------------ what the readings show
def test_tracking_predicts_each_joint_and_reports_one_that_falls_behind_for_enough_readings():
    profile = ProfileRegisters(250, 100)
    monitor = TrackingMonitor(("a", "b"), (math.pi, 2.0), tolerance_rad=0.1, readings=2)
    assert monitor.check([0.0, 0.0], 0.0) is None and not monitor.active  # not started: nothing to compare
    monitor.start([0.0, 0.5], None, 10.0, profile)
    monitor.commanded([0.4, 0.1], 10.0)
    predicted = monitor.predicted(10.1)
    expected = [TimeProfile(10.0, q0, 0.0, q1, profile, vmax).position(10.1)
                for q0, q1, vmax in ((0.0, 0.4, math.pi), (0.5, 0.1, 2.0))]
    assert np.allclose(predicted, expected)
    assert monitor.check(predicted, 10.1) is None
    # joint a stuck at 0: off by more than 0.1 rad once the profile has moved on, for two readings
    assert monitor.check([0.0, monitor.predicted(10.15)[1]], 10.15) is None  # first strike
    fault = monitor.check([0.0, monitor.predicted(10.2)[1]], 10.2)
    assert fault is not None and fault.joint == "a" and fault.error_rad == pytest.approx(monitor.predicted(10.2)[0])
    assert "a stopped following its command" in fault.describe()
    # a joint back on its track clears its strikes
    assert monitor.check(monitor.predicted(10.3), 10.3) is None
    assert monitor.check([0.0, monitor.predicted(10.35)[1]], 10.35) is None
    # joint a ends with the 250 ms profile; joint b would need 2.67 rad/s, more than its 2 rad/s: it takes longer
    assert monitor.settles_at() == pytest.approx(10.0 + 0.1 + 0.4 / 2.0)
    monitor.commanded([0.4, 0.1], 10.5)
    assert monitor.settles_at() == pytest.approx(10.75)  # already there: the profile's 250 ms pass standing still
    monitor.stop()
    assert monitor.check([9.0, 9.0], 11.0) is None and monitor.settles_at() is None
    with pytest.raises(ConfigError, match="velocity limits"):
        TrackingMonitor(("a",), (1.0, 2.0), 0.1, 2)
    with pytest.raises(ConfigError, match="readings"):
        TrackingMonitor(("a",), (1.0,), 0.1, 0)


def test_a_late_reading_is_judged_by_the_moves_in_force_when_it_was_taken():
    """Joint states that arrive 0.8 s late (a loaded machine) while new goals go out every 200 ms: a joint that
    followed its goals is no stall; one that stopped is still caught; a reading older than every move kept
    is not judged."""
    profile = ProfileRegisters(250, 100)
    monitor = TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.15, readings=2)
    monitor.start([0.0], None, 10.0, profile)
    goals = [0.3 * (k + 1) for k in range(8)]  # a fast turn: 0.3 rad every period
    truth = TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.15, readings=2)
    truth.start([0.0], None, 10.0, profile)
    for k, goal in enumerate(goals):
        monitor.commanded([goal], 10.0 + 0.2 * k)
        truth.commanded([goal], 10.0 + 0.2 * k)
    # readings taken 0.2-0.6 s after the first goal, arriving after all eight goals went out
    for at in (10.2, 10.4, 10.6):
        assert monitor.check(truth.predicted(at), at) is None
    stuck = [monitor.check([0.0], at) for at in (10.5, 10.7)]  # the joint never moved: caught all the same
    assert stuck[0] is None and stuck[1] is not None and stuck[1].predicted == pytest.approx(truth.predicted(10.7)[0])
    assert monitor.predicted(9.9) is None and monitor.check([5.0], 9.9) is None  # before anything kept
    for k in range(40):  # the history is bounded: the oldest moves are forgotten
        monitor.commanded([goals[-1]], 12.0 + 0.2 * k)
    assert monitor.predicted(10.2) is None and monitor.predicted(19.9) is not None


def test_a_gripper_command_must_open_or_move_towards_closed_within_its_timeout():
    gripper = GripperMonitor(open_m=0.037, closed_m=0.015, timeout_s=2.0)
    assert gripper.check(0.02, 0.0) is None  # nothing commanded
    gripper.commanded(False, 0.037, 0.0)
    assert gripper.check(0.037, 1.9) is None  # still on its way
    late = gripper.check(0.0365, 2.0)
    assert late is not None and "did not close within 2 s" in late and "0.0365" in late
    assert gripper.check(0.0365, 5.0) is None  # reported once
    gripper.commanded(False, 0.037, 10.0)
    assert gripper.check(0.030, 10.5) is None and gripper.check(0.030, 20.0) is None  # stopped on an object: a grasp
    gripper.commanded(True, 0.015, 30.0)
    assert gripper.check(0.0345, 32.5) is None  # within 3 mm of open
    gripper.commanded(True, 0.015, 40.0)
    assert "did not open" in gripper.check(0.020, 42.0)
    gripper.commanded(False, 0.016, 50.0)
    assert gripper.check(0.016, 52.0) is None  # at the closed stop already
    gripper.commanded(True, 0.02, 60.0)
    gripper.cancel()
    assert gripper.check(0.02, 99.0) is None
    with pytest.raises(ConfigError, match="open position"):
        GripperMonitor(open_m=0.01, closed_m=0.02, timeout_s=1.0)


def test_rest_is_judged_by_positions_over_a_window_on_every_joint():
    rest = RestDetector(0.03, 0.1)
    q = np.array([0.5, -0.2])
    assert not rest.update(q, 0.0) and not rest.update(q, 0.05)  # less than a window of readings
    assert rest.update(q, 0.1) and rest.at_rest
    assert rest.update(q + [0.0, 0.0029], 0.2)  # 0.029 rad/s over the window: one encoder tick of noise, at rest
    assert not rest.update(q + [0.0, 0.0075], 0.25)  # the second joint moves: not at rest
    assert not rest.update(q + [0.0045, 0.0075], 0.3) and not rest.at_rest  # now the first one
    assert rest.update(q + [0.0045, 0.0075], 0.41)
    rest.reset()
    assert not rest.at_rest and not rest.update(q, 1.0)
    with pytest.raises(ConfigError, match="window_s"):
        RestDetector(0.03, 0.0)


def test_the_first_intervention_of_each_kind_is_logged_and_later_ones_once_a_second_with_a_count():
    from ladder_ros.nodes.driver.reporting import InterventionLog

    log = InterventionLog(every_s=1.0)
    assert "first this episode" in log.line("stale", "late", 0.0)
    assert log.line("stale", "late", 0.1) is None and log.line("stale", "late", 0.5) is None
    assert "first this episode" in log.line("robot_error", "reflex", 0.6)  # never swallowed by another kind
    assert log.line("stale", "late", 1.2) == "safety: stale: late (2 more stale not logged)"
    assert log.line("stale", "late", 2.3) == "safety: stale: late"
    log.reset()
    assert "first this episode" in log.line("stale", "late", 2.4)
