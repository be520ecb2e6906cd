"""How accepted Franka joint targets become franky motions: no plan may start from the target the arm stands on.

franky plans each waypoint with Ruckig and plans again whenever a waypoint is reached; a plan from
the target itself (off it only by floating-point residue) has a synchronised duration of zero and
Ruckig's step 2 fails on it ("Motion planner failed with error code -111"). The old stream made
such plans whenever every via velocity was zero: the via point was the target, and the rest
segment after it had no length (:mod:`ladder_ros.robots.franka`, "No plan from floating-point
residue"). These tests hold the rule that replaced it to its bounds, without franky: every motion
ends in a rest segment of :data:`REST_SEGMENT_MIN_S` or more, towards an end waypoint at rest
without a minimum time, and a target the running motion already rests on is not sent again.
The FrankyArm part runs on the fake franky of ``tests/arm_api_fakes.py``; the last test replays
the failing plan on Ruckig itself where its Python package is installed.
"""

import sys

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import JointTargetFilter
from ladder_ros.robots.franka import (
    BRAKE_MARGIN,
    FRANKY_ACCELERATION_LIMITS,
    FRANKY_JERK_LIMITS,
    FRANKY_VELOCITY_LIMITS,
    READY_JOINTS,
    REST_SEGMENT_MIN_S,
    SETTLE_S,
    StreamLimits,
    brake_duration,
    get_model,
    rest_segment_duration,
    rest_to_rest_duration,
    settle_distance,
    speed_change_distance,
    stopping_distance,
    stream_motion,
    stream_waypoints,
)

PERIOD = 1 / 15
FULL = StreamLimits.from_robot(get_model("fr3"), FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS,
                               FRANKY_JERK_LIMITS, 1.0)
SLOW = StreamLimits.from_robot(get_model("fr3"), FRANKY_VELOCITY_LIMITS, FRANKY_ACCELERATION_LIMITS,
                               FRANKY_JERK_LIMITS, 0.3)  # a first armed run at a reduced dynamics factor
READY = np.array(READY_JOINTS)
ZERO = np.zeros(7)


def check_motion(motion, target, limits, resting_at=None):
    """The bounds every streamed motion keeps (the module docstring); returns its kind."""
    if not motion:
        assert resting_at is not None, "nothing sent although no motion rests on the target"
        assert rest_to_rest_duration(np.asarray(target) - resting_at, np.array(limits.jerk)).max() < REST_SEGMENT_MIN_S
        return "held"
    assert len(motion) == 2
    reach, rest = motion
    # the end: the target itself, at rest, without a minimum time (franky plans nothing when it is reached)
    assert np.array_equal(rest.position, np.asarray(target, dtype=np.float64))
    assert not np.any(rest.velocity) and rest.minimum_time_s is None
    # the first waypoint: no sooner than the period, within the velocity limits
    assert reach.minimum_time_s == pytest.approx(PERIOD)
    assert np.all(np.abs(reach.velocity) <= np.array(limits.velocity) + 1e-12)
    # the rest segment has a real length: no plan from residue when the first waypoint is reached
    assert rest_segment_duration(reach.position, reach.velocity, rest.position, limits) >= REST_SEGMENT_MIN_S
    # and the arm passes no joint's target on it: each joint moving towards it brakes within its room
    gap = (rest.position - reach.position) * np.sign(reach.velocity)
    moving = reach.velocity != 0
    assert np.all(gap[moving] >= stopping_distance(reach.velocity, limits.acceleration, limits.jerk)[moving] - 1e-12)
    return "settle" if not np.any(reach.velocity) else "via"


def test_a_hold_the_running_motion_rests_on_is_not_sent_again():
    via, v = stream_waypoints(READY, READY, READY, PERIOD, FULL)  # the policy holds still
    assert np.array_equal(via, READY) and not np.any(v)  # the old stream's via point: the target itself
    assert stream_motion(via, v, READY, PERIOD, FULL, resting_at=READY) == ()
    # within a micro-radian (a policy's targets round differently): the same
    near = READY + np.array([0, 0, 0, 0, 0, 0, 5e-7])
    assert stream_motion(near, ZERO, near, PERIOD, FULL, resting_at=READY) == ()
    # farther, or with no motion running (None: after a stop, an error, a recovery): sent
    far = READY + np.array([0, 0, 0, 0, 0, 0, 1e-5])
    assert check_motion(stream_motion(far, ZERO, far, PERIOD, FULL, resting_at=READY), far, FULL) == "settle"
    assert check_motion(stream_motion(via, v, READY, PERIOD, FULL), READY, FULL) == "settle"


def test_a_target_every_joint_reaches_at_rest_ends_in_a_settling_move_of_the_last_joint():
    target = READY + np.array([0.05, -0.02, 0.0, 0.03, 0.0, 0.0, 0.01])
    reach, rest = stream_motion(target, ZERO, target, PERIOD, FULL)
    assert np.array_equal(reach.position[:6], target[:6]) and not np.any(reach.velocity)
    assert target[6] - reach.position[6] == pytest.approx(settle_distance(FULL)) == pytest.approx(2e-5)
    assert rest_segment_duration(reach.position, ZERO, target, FULL) == pytest.approx(SETTLE_S)
    assert settle_distance(SLOW) == pytest.approx(0.3 * 2e-5)  # franky's jerk limit times the dynamics factor
    at_limit = target.copy()
    at_limit[6] = FULL.lower[6]  # the settling move never leaves the joint's range: from above there
    reach, rest = stream_motion(at_limit, ZERO, at_limit, PERIOD, FULL)
    assert reach.position[6] - FULL.lower[6] == pytest.approx(2e-5) and rest.position[6] == FULL.lower[6]


def test_a_rest_segment_shorter_than_the_bound_is_never_sent():
    for speed in (1e-12, 1e-9, 1e-6, 1e-4, 1e-3):  # rest segments shorter than 2 ms at the jerk limits
        v = np.full(7, speed)
        target = READY + v * PERIOD
        via = target - np.sign(v) * stopping_distance(v, FULL.acceleration, FULL.jerk) * BRAKE_MARGIN
        assert rest_segment_duration(via, v, target, FULL) < REST_SEGMENT_MIN_S
        assert check_motion(stream_motion(via, v, target, PERIOD, FULL), target, FULL) == "settle"
    v = np.full(7, 0.05)  # a real brake: the stream's own two waypoints, unchanged
    target = READY + v * PERIOD
    via = target - np.sign(v) * stopping_distance(v, FULL.acceleration, FULL.jerk) * BRAKE_MARGIN
    reach, rest = stream_motion(via, v, target, PERIOD, FULL)
    assert np.array_equal(reach.position, via) and np.array_equal(reach.velocity, v)
    assert np.array_equal(rest.position, target) and rest.minimum_time_s is None


def test_one_fast_joint_keeps_the_stream_s_waypoints_with_the_others_still():
    v = np.zeros(7)
    v[0] = 0.3
    target = READY + v * PERIOD
    via, velocity = stream_waypoints(READY, target, READY, PERIOD, FULL)
    motion = stream_motion(via, velocity, target, PERIOD, FULL)
    assert check_motion(motion, target, FULL) == "via" and np.array_equal(motion[0].position, via)


def test_durations_agree_with_the_distances_they_cover():
    a, j = np.array(FULL.acceleration), np.array(FULL.jerk)
    for speed in (1e-4, 0.01, 0.5, 2.0):  # both jerk regimes (the knee a^2/j is 0.03 .. 0.04 rad/s)
        v = np.full(7, speed)
        # a symmetric brake covers its time at the mean speed
        assert np.allclose(brake_duration(v, a, j) * v / 2.0, stopping_distance(v, a, j))
        assert np.allclose(speed_change_distance(v, ZERO, a, j), stopping_distance(v, a, j))
    d = np.full(7, 1e-4)
    t = rest_to_rest_duration(d, j)
    assert np.allclose(j * t ** 3 / 32.0, d)  # four jerk phases of t/4
    assert np.all(rest_to_rest_duration(-d, j) == t)


def test_a_period_that_is_not_positive_is_refused():
    with pytest.raises(ConfigError, match="period must be positive"):
        stream_motion(READY, ZERO, READY, 0.0, FULL)


def _streams(rng, stream_limits=FULL):
    """Target streams a policy and a driver produce: holds, tiny steps, reversals, splice jumps, one joint alone."""
    limits = stream_limits.joint_limits(period_s=PERIOD)
    top = np.array(limits.max_step)
    q = READY.copy()
    step = np.zeros(7)
    for k in range(1500):
        kind = k // 100 % 5
        if kind == 0:  # holds, with now and then one step
            step = np.zeros(7) if rng.random() < 0.8 else rng.uniform(-0.5, 0.5, 7) * top
        elif kind == 1:  # tiny steps: the policy's jitter, down to floating-point residue
            step = rng.normal(0.0, 1.0, 7) * 10.0 ** rng.uniform(-16, -3, 7)
        elif kind == 2:  # reversals at speed
            step = -step if np.any(step) and rng.random() < 0.5 else rng.uniform(-0.95, 0.95, 7) * top
        elif kind == 3:  # chunks with a splice jump every 8 targets, up to the seam guard (0.145 rad)
            step = np.clip(step + rng.normal(0.0, 0.2, 7) * top, -0.6 * top, 0.6 * top)
            if k % 8 == 0:
                step = np.clip(step + rng.uniform(-0.145, 0.145, 7) * top / top[0], -0.999 * top, 0.999 * top)
        else:  # one joint at a time, the others still
            step = np.zeros(7)
            step[rng.integers(7)] = rng.uniform(-0.9, 0.9) * top[0]
        q = np.clip(q + step, np.array(limits.lower) + 0.3, np.array(limits.upper) - 0.3)
        yield q.copy()


@pytest.mark.parametrize("limits", [FULL, SLOW], ids=["factor 1", "factor 0.3"])
def test_every_motion_of_a_long_mixed_stream_keeps_the_bounds(limits):
    """The driver's path (filter, measured state, stream_waypoints) as FrankyArm turns it into motions."""
    rng = np.random.default_rng(11)
    check = JointTargetFilter(limits.joint_limits(period_s=PERIOD))
    previous, resting = READY.copy(), None
    measured, speeds = READY.copy(), np.zeros(7)
    kinds = {"via": 0, "settle": 0, "held": 0}
    for target in _streams(rng, limits):
        if not check.check(list(target), previous).applied:
            continue
        # the arm somewhere along the way, moving either way (a lagging, noisy measurement)
        measured = previous + rng.normal(0.0, 1.0, 7) * 10.0 ** rng.uniform(-9, -2, 7)
        speeds = (target - previous) / PERIOD * rng.uniform(-0.5, 1.2, 7)
        via, v = stream_waypoints(previous, target, measured, PERIOD, limits, speeds)
        motion = stream_motion(via, v, target, PERIOD, limits, resting_at=resting)
        kinds[check_motion(motion, target, limits, resting)] += 1
        if motion:
            resting = motion[-1].position
        previous = target
    assert all(count > 50 for count in kinds.values()), kinds  # every kind of motion was met, many times


# ---------------------------------------------------------------------------- FrankyArm on the fake franky
@pytest.fixture
def arm(monkeypatch):
    from tests.arm_api_fakes import FakeFranky

    fake = FakeFranky()
    monkeypatch.setitem(sys.modules, "franky", fake)
    from ladder_ros.robots.franky_arm import FrankyArm

    made = FrankyArm(host="172.16.0.2", model=get_model("fr3"), dynamics_factor=1.0, gripper_speed_m_s=0.05,
                     gripper_force_n=20.0, max_width_m=0.08, realtime=False)
    yield fake, made
    made.close()


def test_the_arm_sends_a_held_target_once_and_again_after_a_stop_or_an_error(arm):
    fake, franky_arm = arm
    robot = fake.state.robots[-1]
    step = READY + np.array([0.02, 0, 0, 0.015, 0, 0, -0.02])
    via, v = stream_waypoints(READY, step, READY, PERIOD, franky_arm.limits)
    franky_arm.send_joints(via, v, step, PERIOD)
    assert len(robot.moves) == 1 and np.array_equal(franky_arm.resting_at, step)
    for _ in range(5):  # the policy holds: the running motion comes to rest on the target
        franky_arm.send_joints(step, ZERO, step, PERIOD)
    assert len(robot.moves) == 1 and (franky_arm.streamed, franky_arm.held) == (1, 5)
    franky_arm.stop()  # the stop motion took over: the target is sent again, as a settling move
    franky_arm.send_joints(step, ZERO, step, PERIOD)
    motion = robot.moves[-1][0]
    assert motion.kind == "waypoints" and len(motion.waypoints) == 2
    reach, rest = motion.waypoints
    assert reach.minimum_time == ("ms", 67) and rest.minimum_time is None and rest.target.velocity is None
    assert step[6] - reach.target.position[6] == pytest.approx(2e-5)
    fake.state.motion_error = RuntimeError("Motion planner failed with error code -111")
    assert franky_arm.poll().endswith("-111") and franky_arm.resting_at is None
    fake.state.in_control = False  # nothing runs: a held target is sent (franky then reports the error, or moves)
    franky_arm.send_joints(step, ZERO, step, PERIOD)
    assert len(robot.moves) == 4


def test_the_arm_never_sends_two_waypoints_on_one_target(arm):
    fake, franky_arm = arm
    robot = fake.state.robots[-1]
    rng = np.random.default_rng(3)
    previous = READY.copy()
    for target in _streams(rng):
        via, v = stream_waypoints(previous, target, previous, PERIOD, franky_arm.limits)
        franky_arm.send_joints(via, v, target, PERIOD)
        previous = target
    assert franky_arm.held > 100 and franky_arm.streamed == len(robot.moves) > 500
    for motion, asynchronous in robot.moves:
        reach, rest = motion.waypoints
        assert asynchronous and rest.minimum_time is None and reach.minimum_time == ("ms", 67)
        assert rest_segment_duration(reach.target.position, reach.target.velocity, rest.target.position,
                                     franky_arm.limits) >= REST_SEGMENT_MIN_S


# ---------------------------------------------------------------------------- the root cause, on Ruckig itself
# A state franky planned from on franky-sim's FR3 and Ruckig 0.17.3 refused: the arm at the end of a hold's
# via point (the target), off it by residue, asked to rest at the target with no minimum time.
RESIDUE = dict(
    current_position=[0.06232960589299087, -0.2324615506735735, -0.49224495095090376, -2.9335171200518513,
                      0.28232054365159837, 1.6752311737050498, -0.03839128256926408],
    current_velocity=[0.0, 3.4304834363799164e-20, 2.202285662861181e-20, 1.1434944787933055e-20,
                      -1.5234986672607521e-24, -8.575536506702092e-24, 2.565759791040623e-15],
    current_acceleration=[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.5337367701985455e-14],
    target_position=[0.06232960589302872, -0.23246155067357355, -0.4922449509509046, -2.9335171200518513,
                     0.2823205436515983, 1.6752311737050496, -0.03839128256926416])


def test_ruckig_fails_on_a_plan_from_residue_and_plans_the_settling_move():
    ruckig = pytest.importorskip("ruckig", reason="the Ruckig replay needs its Python package (pip install ruckig)")

    def plan(current, target, minimum=None):
        inp = ruckig.InputParameter(7)
        inp.current_position, inp.current_velocity, inp.current_acceleration = current
        inp.target_position, inp.target_velocity, inp.target_acceleration = list(target), [0.0] * 7, [0.0] * 7
        inp.max_velocity, inp.max_acceleration = list(FULL.velocity), list(FULL.acceleration)
        inp.max_jerk, inp.synchronization = list(FULL.jerk), ruckig.Synchronization.Time
        if minimum is not None:
            inp.minimum_duration = minimum
        trajectory = ruckig.Trajectory(7)
        try:
            return ruckig.Ruckig(7, 0.001).calculate(inp, trajectory), trajectory.duration
        except Exception as exc:  # the Python package's Ruckig throws on errors: its message names step 2
            return str(exc), None

    velocity, acceleration = RESIDUE["current_velocity"], RESIDUE["current_acceleration"]
    result, _ = plan((RESIDUE["current_position"], velocity, acceleration), RESIDUE["target_position"])
    assert "error in step 2" in str(result) or result == ruckig.Result.ErrorSynchronizationCalculation
    # with the minimum time franky plans the via point with, the same state plans (and so it ran until reached)
    result, duration = plan((RESIDUE["current_position"], velocity, acceleration), RESIDUE["target_position"],
                            minimum=PERIOD)
    assert result == ruckig.Result.Working and duration == pytest.approx(PERIOD)
    # the same residue at the settling move's first waypoint instead: the end is planned, in SETTLE_S
    short = np.array(RESIDUE["current_position"])
    short[-1] -= settle_distance(FULL)
    result, duration = plan((list(short), velocity, acceleration), RESIDUE["target_position"])
    assert result == ruckig.Result.Working and duration == pytest.approx(SETTLE_S, rel=1e-3)
