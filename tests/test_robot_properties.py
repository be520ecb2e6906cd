"""The robot drivers' pure rules with a shape, word for word: admission of stamped actions at both edges, the
WidowX's limits against its URDF, the Franka's against Franka's datasheets and the URDF it reports, the
Bridge target and the gripper's domains on both sides.

Every refusal names its rule, its value and its bound exactly (the driver copies them into the
intervention record), and the configuration is refused on both sides of each bound.
"""

import math
import re
import threading

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.safety import DUPLICATE, FUTURE_STAMP, JOINT_LIMIT, STALE, JointTargetFilter, WorkspaceBox
from ladder_ros.robots import franka, wx250s
from ladder_ros.robots.admission import ActionAdmission, AdmissionConfig
from ladder_ros.robots.arm_health import TrackingFault, GripperMonitor, RestDetector, TrackingMonitor
from ladder_ros.robots.dynamixel import (
    ProfileRegisters,
    TimeProfile,
    describe_hardware_error,
    rad_to_ticks,
    ticks_to_rad,
    velocity_units_to_rad_s,
)
from ladder_ros.robots.ee_target import BridgeTarget
from ladder_ros.robots.gripper import DROID_AXIS, SIGNED_AXIS, ApertureRange, commanded_aperture
from ladder_ros.robots.timing import ControlTiming
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, LATE, VendorCallWorker

PERIOD_NS = 200_000_000  # 5 Hz, the WidowX's control rate (config/widowx_params.yaml)


def admission(**config):
    return ActionAdmission(AdmissionConfig(**{"period_s": 0.2, "max_age_s": 0.5, "future_tolerance_s": 0.05,
                                              **config}))


# ------------------------------------------------------------------ admission
@pytest.mark.parametrize("field", ["period_s", "max_age_s", "future_tolerance_s"])
@pytest.mark.parametrize("bad", [True, "0.1", math.inf, -math.inf, math.nan, -0.001, None])
def test_every_admission_bound_refuses_what_is_not_a_finite_number_of_seconds(field, bad):
    with pytest.raises(ConfigError, match=f"admission {field} must be .*got {re.escape(repr(bad))}"):
        admission(**{field: bad})


def test_a_zero_clock_tolerance_is_allowed_and_a_zero_period_or_age_is_not():
    assert admission(future_tolerance_s=0).judge(1_000, 1_000).admitted  # one clock: no tolerance needed
    assert admission(future_tolerance_s=0).judge(1_001, 1_000).kind == FUTURE_STAMP
    for field in ("period_s", "max_age_s"):
        with pytest.raises(ConfigError, match=f"admission {field} must be a positive number of seconds, got 0"):
            admission(**{field: 0})
    with pytest.raises(ConfigError, match="config must be an AdmissionConfig, got dict"):
        ActionAdmission({})


def test_a_first_action_is_never_held_even_at_time_zero_of_a_simulated_clock():
    verdict = admission().judge(0, 0)
    assert verdict.admitted and verdict.due_ns == 0 and verdict.reason == ""


def test_refusals_say_their_age_gap_and_bound_exactly():
    gate = admission()
    now = 10_000_000_000
    stale = gate.judge(now - 2_000_000_000, now)
    assert (stale.kind, stale.value, stale.limit) == (STALE, 2.0, 0.5)
    assert stale.reason == ("an action stamped 2.000 s before it arrived (max_action_age_s 0.5): it answers a "
                            "moment that has passed")
    ahead = gate.judge(now + 100_000_000, now)
    assert (ahead.kind, ahead.value, ahead.limit) == (FUTURE_STAMP, 0.1, 0.05)
    assert ahead.reason == ("an action stamped 0.100 s after it arrived (future_tolerance_s 0.05): its clock is "
                            "ahead, or it is one of a burst stamped ahead")
    gate.applied(now, now)
    twin = gate.judge(now + 40_000_000, now + PERIOD_NS)
    assert (twin.kind, twin.value, twin.limit) == (DUPLICATE, 0.04, 0.1)
    assert twin.reason == ("an action stamped 40.0 ms after the last one applied: one action per control period "
                           "(200 ms)")
    slow = admission(period_s=0.7)  # a period whose milliseconds a wrong scale would round differently
    slow.applied(now, now)
    assert slow.judge(now + 40_000_000, now + PERIOD_NS).reason.endswith("one action per control period (700 ms)")


def test_an_action_replaced_while_it_waits_is_a_duplicate_with_the_gap_and_the_spacing():
    gate = admission()
    t = 20 * PERIOD_NS
    assert gate.wait("a", t, t + PERIOD_NS) is None and gate.waiting
    replaced = gate.wait("b", t + 30_000_000, t + PERIOD_NS)
    assert (replaced.kind, replaced.value) == (DUPLICATE, 0.03) and replaced.limit == pytest.approx(0.15)
    assert replaced.reason == ("an action waiting for its period was replaced by a newer one (stamped 30.0 ms "
                               "later) before it was applied: one action per control period")
    assert gate.due(t + PERIOD_NS) == ("b", t + 30_000_000)


def test_a_reset_forgets_a_waiting_action():
    gate = admission()
    gate.wait("a", 0, PERIOD_NS)
    gate.applied(0, 0)
    gate.reset()
    assert not gate.waiting and gate.due(10 * PERIOD_NS) is None
    assert gate.last_stamp_ns is None and gate.last_applied_ns is None


# ------------------------------------------------------------------ the WidowX 250 6-DoF against its URDF
# interbotix_xsarm_descriptions urdf/wx250s.urdf.xacro, in degrees as the URDF's comments give them (waist,
# forearm roll and wrist rotate +-(pi - 1e-5) rad), and every arm joint's velocity limit pi rad/s.
URDF_DEG = {"waist": (-180, 180), "shoulder": (-108, 114), "elbow": (-123, 92), "forearm_roll": (-180, 180),
            "wrist_angle": (-100, 123), "wrist_rotate": (-180, 180)}


def test_the_wx250s_limits_are_its_urdf_per_joint_and_a_step_is_pi_rad_s_over_the_period():
    limits = wx250s.joint_limits()
    assert limits.names == tuple(URDF_DEG)
    for name, lo, hi in zip(limits.names, limits.lower, limits.upper):
        assert (math.degrees(lo), math.degrees(hi)) == pytest.approx(URDF_DEG[name], abs=1e-3), name
    assert limits.max_step == (math.pi * 0.2,) * 6 and wx250s.joint_limits(0.1).max_step == (math.pi * 0.1,) * 6
    assert limits.source == ("interbotix_xsarm_descriptions wx250s.urdf.xacro (limits, pi rad/s) over one "
                             "control period")
    chain = wx250s.chain()
    assert chain.name == "wx250s" and chain.limits == limits


@pytest.mark.parametrize("joint", list(URDF_DEG))
def test_every_wx250s_joint_is_held_to_its_own_urdf_bounds_on_both_sides(joint):
    limits = wx250s.joint_limits()
    i = limits.names.index(joint)
    joints = JointTargetFilter(limits)
    for bound, outside in ((limits.lower[i], -1e-6), (limits.upper[i], 1e-6)):
        target = list(wx250s.NEUTRAL_JOINTS)
        target[i] = bound
        assert joints.check(target, None).applied, (joint, bound)
        target[i] = bound + outside
        result = joints.check(target, None)
        assert (result.kind, result.axis, result.limit) == (JOINT_LIMIT, joint, bound)
    assert joints.counts[JOINT_LIMIT] == 2 and joints.applied == 2


# ------------------------------------------------------------------ the Bridge target
BOX = WorkspaceBox((0.1, -0.2, 0.05), (0.4, 0.2, 0.3))


def test_the_bridge_target_checks_its_arguments_and_starts_open():
    with pytest.raises(ConfigError, match="workspace must be a WorkspaceBox, got dict"):
        BridgeTarget({})
    for bad in (0.0, -0.5, 1.0001, 1.5, 2.0):
        with pytest.raises(ConfigError, match=f"speed_scale must be in \\(0, 1\\], got {bad!r}"):
            BridgeTarget(BOX, speed_scale=bad)
    target = BridgeTarget(BOX, speed_scale=1)
    assert target.gripper == 1.0 and not target.seeded  # a reset leaves the gripper open
    with pytest.raises(InvalidInputError, match="^the target has not been seeded from a measured pose$"):
        target.propose(np.zeros(7))


def test_a_measured_pose_must_be_a_finite_4x4_and_whole_numbers_are_metres_too():
    target = BridgeTarget(BOX)
    for bad, shape in ((np.eye(3), "(3, 3)"), (np.full((4, 4), np.nan), "(4, 4)"), (np.zeros((4, 3)), "(4, 3)")):
        with pytest.raises(InvalidInputError, match=f"a measured pose is a finite 4x4 matrix, got {re.escape(shape)}"):
            target.seed(bad)
    target.seed(np.eye(4, dtype=int))  # at the origin, below the box: clipped onto its low corner
    assert target.pose.dtype == np.float64 and target.pose[:3, 3].tolist() == [0.1, 0.0, 0.05]


def test_seeding_sets_the_gripper_only_when_told_and_a_committed_pose_keeps_small_moves():
    target = BridgeTarget(BOX)
    pose = np.eye(4)
    pose[:3, 3] = (0.2, 0.0, 0.1)
    for told, expected in ((False, -1.0), (None, -1.0), (True, 1.0), (None, 1.0), (0, -1.0), (1, 1.0)):
        target.seed(pose, told)
        assert target.gripper == expected, told
    target.commit(np.eye(4, dtype=int), 1)  # a pose of whole numbers: the next small move must not be lost
    moved, clipped = target.propose(["0.01", "0", "0", "0.05", "0", "0", "1"])  # numbers as text read as numbers
    assert clipped == ["x", "z"] and moved[:3, 3].tolist() == [0.1, 0.0, 0.05]
    target.commit(pose, -1)
    moved, clipped = target.propose([0.01, 0, 0, 0.05, 0, 0, 1])
    assert clipped == [] and moved[:3, 3] == pytest.approx([0.21, 0.0, 0.1]) and moved[1, 2] == pytest.approx(
        -math.sin(0.05)) and target.gripper == -1.0


# ------------------------------------------------------------------ gripper ranges and command domains
def test_a_gripper_range_is_two_finite_numbers_open_above_closed():
    for field, kwargs in (("closed", {"closed": math.nan, "open": 0.035}), ("open", {"closed": 0.01, "open": math.inf}),
                          ("closed", {"closed": True, "open": 0.035}), ("open", {"closed": 0.01, "open": "0.035"})):
        with pytest.raises(ConfigError, match=f"^gripper range {field} must be a finite number, got "):
            ApertureRange(**kwargs)
    with pytest.raises(ConfigError, match=r"gripper range: open \(0.02\) must be above closed \(0.02\)"):
        ApertureRange(0.02, 0.02)
    bridge = ApertureRange(0.010, 0.035)
    with pytest.raises(InvalidInputError, match="^gripper reading is nan$"):
        bridge.aperture(math.nan)
    for bad in (-0.001, 1.001, 1.5, 2.0):
        with pytest.raises(InvalidInputError, match=f"^aperture must be in \\[0, 1\\], got {bad}$"):
            bridge.reading(bad)
    assert bridge.reading(0.0) == 0.010 and bridge.reading(1.0) == 0.035


def test_each_gripper_convention_refuses_commands_past_either_end_of_its_domain():
    for axis, low, high in ((SIGNED_AXIS, -1.0, 1.0), (DROID_AXIS, 0.0, 1.0)):
        assert {commanded_aperture(axis, low), commanded_aperture(axis, high)} == {0.0, 1.0}
        for bad in (low - 0.5, low - 1e-9, high + 1e-9, high + 0.5):
            with pytest.raises(InvalidInputError, match=f"^{axis} .* is outside \\[{low:g}, {high:g}\\]"):
                commanded_aperture(axis, bad)
    with pytest.raises(ConfigError, match=r"unknown gripper axis 'width'; valid: gripper, gripper_position$"):
        commanded_aperture("width", 0.5)


# ------------------------------------------------------------------ control timing
def test_timing_needs_a_positive_period_and_reports_every_key_before_the_first_period():
    for bad in (0, 0.0, -0.2):
        with pytest.raises(ConfigError, match=f"^nominal period must be positive, got {bad!r}$"):
            ControlTiming(bad)
    timing = ControlTiming(0.2)
    timing.tick(5.0)
    assert timing.stats() == {"ticks": 1, "nominal_period_ms": 200.0, "period_mean_ms": None, "period_p50_ms": None,
                              "period_p99_ms": None, "period_max_ms": None, "jitter_p50_ms": None,
                              "jitter_p99_ms": None, "jitter_max_ms": None}


def test_timing_percentiles_over_periods_of_0_to_100_ms_against_a_30_ms_nominal():
    timing = ControlTiming(0.03)
    now = 100.0
    timing.tick(now)
    for k in range(101):  # periods 0, 1, ..., 100 ms: the q-th percentile is q ms
        now += k / 1000.0
        timing.tick(now)
    stats = timing.stats()
    # jitter |k - 30| sorted: 0, then 1..30 twice each, then 31..70: index 50 is 25, index 99 is 69
    expected = {"ticks": 102, "nominal_period_ms": 30.0, "period_mean_ms": 50.0, "period_p50_ms": 50.0,
                "period_p99_ms": 99.0, "period_max_ms": 100.0, "jitter_p50_ms": 25.0, "jitter_p99_ms": 69.0,
                "jitter_max_ms": 70.0}
    assert stats.keys() == expected.keys()
    for key, value in expected.items():
        assert stats[key] == pytest.approx(value, abs=1e-6), key


def test_timing_keeps_exactly_the_last_window_of_periods():
    timing = ControlTiming(0.01)
    now = 0.0
    timing.tick(now)
    for _ in range(100):
        now += 1.0  # an old stutter ...
        timing.tick(now)
    for _ in range(200):
        now += 0.01  # ... then exactly one default window (200) of steady periods
        timing.tick(now)
    assert timing.stats()["period_max_ms"] == pytest.approx(10.0, abs=1e-6)
    timing.gap()
    timing.tick(now + 50.0)  # after a hold: no period across the gap
    assert timing.stats()["period_max_ms"] == pytest.approx(10.0, abs=1e-6) and timing.ticks == 302


# ------------------------------------------------------------------ what the arm's readings show
@pytest.mark.parametrize("make, message", [
    (lambda: TrackingMonitor(("a", "b"), (1.0, 0.0), 0.1, 2),
     "a joint velocity limit must be a positive number, got 0.0"),
    (lambda: TrackingMonitor(("a",), (1.0,), 0, 2), "tracking tolerance_rad must be a positive number, got 0"),
    (lambda: TrackingMonitor(("a",), (1.0,), 0.1, 0), "tracking readings must be a whole number >= 1, got 0"),
    (lambda: TrackingMonitor(("a",), (1.0,), 0.1, True), "tracking readings must be a whole number >= 1, got True"),
    (lambda: TrackingMonitor(("a",), (1.0,), 0.1, 1.5), "tracking readings must be a whole number >= 1, got 1.5"),
    (lambda: GripperMonitor(0.02, 0.02, 1.0), r"gripper open position \(0.02\) must be above the closed one \(0.02\)"),
    (lambda: GripperMonitor(0.03, 0.01, 0.0), "gripper timeout_s must be a positive number, got 0.0"),
    (lambda: GripperMonitor(0.03, 0.01, 1.0, tolerance_m=-1e-3), "gripper tolerance_m must be a positive number"),
    (lambda: GripperMonitor(0.03, 0.01, 1.0, moved_m=math.inf), "gripper moved_m must be a positive number, got inf"),
    (lambda: RestDetector(0.0, 0.1), "rest speed_rad_s must be a positive number, got 0.0"),
    (lambda: RestDetector(0.1, True), "rest window_s must be a positive number, got True"),
])
def test_every_health_monitor_setting_is_refused_in_its_own_name(make, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        make()


@pytest.mark.parametrize("readings", [1, 2, 3, 5])
def test_a_tracking_fault_needs_exactly_its_readings_in_a_row_after_every_start(readings):
    monitor = TrackingMonitor(("a", "b"), (math.pi, 2.0), tolerance_rad=0.1, readings=readings)
    assert monitor.profile is None and not monitor.active
    for start in (0.0, 100.0):  # a second start (after a recovery) counts afresh
        monitor.start([0, 1], None, start, ProfileRegisters(250, 100))
        assert monitor.settles_at() == start  # holding where it was measured: settled already
        for k in range(1, readings):
            assert monitor.check([0.0, 1.2], start + k) is None  # b off by 0.2 rad, not yet long enough
        fault = monitor.check([0.0, 1.2], start + readings)
        assert (fault.joint, fault.measured, fault.predicted) == ("b", 1.2, 1.0)
        assert fault.error_rad == pytest.approx(0.2)
    monitor.stop()
    monitor.commanded([0.5, 0.5], 200.0)  # stopped: a goal starts no prediction
    assert monitor.predicted(200.5) is None and monitor.check([9.0, 9.0], 201.0) is None


def test_a_joint_exactly_at_the_tolerance_still_tracks_and_of_two_equal_faults_the_first_joint_is_named():
    monitor = TrackingMonitor(("a", "b"), (math.pi, math.pi), tolerance_rad=0.125, readings=1)  # exact in binary
    monitor.start([0.0, 0.0], None, 0.0, ProfileRegisters(250, 100))
    assert monitor.check([0.125, -0.125], 1.0) is None
    fault = monitor.check([0.25, -0.25], 2.0)
    assert (fault.joint, fault.error_rad) == ("a", 0.25)
    with pytest.raises(TypeError):
        monitor.check([None, 0.0], 3.0)  # a missing reading is an error, never a NaN that passes every check


def test_tracking_starts_from_the_measured_velocity():
    monitor = TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.1, readings=2)
    monitor.start(["0.25"], [1.0], 0.0, ProfileRegisters(1000, 250))  # moving at 1 rad/s when started
    monitor.commanded([0.25], 0.0)  # hold where it is: it brakes, passes the goal and comes back
    assert monitor.predicted(0.125)[0] > 0.3 and monitor.predicted(1.0)[0] == 0.25
    still = TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.1, readings=2)
    still.start([0.25], None, 0.0, ProfileRegisters(1000, 250))
    still.commanded([0.25], 0.0)
    assert still.predicted(0.125)[0] == 0.25


def test_the_gripper_arrives_exactly_at_its_tolerances_and_is_late_exactly_at_its_timeout():
    gripper = GripperMonitor(open_m=0.5, closed_m=0.25, timeout_s=1.0, tolerance_m=0.125, moved_m=0.0625)  # exact
    assert gripper.arrived(True, 0.3, 0.375) and not gripper.arrived(True, 0.3, 0.37)
    assert gripper.arrived(False, 0.4, 0.375) and not gripper.arrived(False, 0.4, 0.38)  # at the closed stop
    assert gripper.arrived(False, 0.5, 0.4375) and not gripper.arrived(False, 0.5, 0.44)  # moved towards closed
    gripper.commanded(True, 0.3, 100.0)
    assert gripper.check(0.3, 100.5) is None and gripper.check(0.3, 100.999) is None
    assert gripper.check(0.3, 101.0) == ("the gripper did not open within 1 s: the left finger is at 0.3000 m (it "
                                         "was at 0.3000 m when commanded)")


def test_rest_is_judged_over_exactly_one_window_and_motion_of_exactly_the_speed_is_motion():
    rest = RestDetector(0.25, 1.0)
    assert rest.at_rest is False
    rest.update([0.0], 0.0)
    assert rest.update([0.25], 1.0) is False  # exactly 0.25 rad/s over the window: moving
    rest.reset()
    assert rest.at_rest is False
    rest.update([0.0], 0.0)
    rest.update([1.0], 1.0)
    assert rest.update([1.0], 2.0) is True  # the reading a whole window old is where the window starts
    assert rest.update(["1.0"], 3.0) is True  # numbers as text read as numbers


# ------------------------------------------------------------------ Dynamixel X-series (ROBOTIS e-manual control table)
def test_position_ticks_are_4096_a_turn_with_2048_at_zero_and_round_to_the_nearest_tick():
    for ticks, rad in ((2048, 0.0), (3072, math.pi / 2), (1024, -math.pi / 2), (0, -math.pi),
                       (4095, math.pi * 2047 / 2048)):
        assert ticks_to_rad(ticks) == pytest.approx(rad, abs=1e-12) and rad_to_ticks(rad) == ticks
    tick = 2 * math.pi / 4096
    assert rad_to_ticks(0.49 * tick) == 2048 and rad_to_ticks(0.51 * tick) == 2049
    assert rad_to_ticks(-0.51 * tick) == 2047
    assert ticks_to_rad("3072") == pytest.approx(math.pi / 2) and rad_to_ticks("0") == 2048  # register text
    assert all(type(rad_to_ticks(r)) is int for r in (-3.0, 0.0, 0.5, 3.0))  # a register holds whole ticks


def test_a_velocity_unit_is_0_229_rpm():
    assert velocity_units_to_rad_s(1) == pytest.approx(0.229 * 2 * math.pi / 60, rel=1e-12)
    assert velocity_units_to_rad_s("131") == pytest.approx(3.14149, abs=1e-5)  # 131 units: 29.999 rpm


def test_hardware_error_bits_are_named_and_unknown_bits_shown_in_hex():
    assert describe_hardware_error(0) == ""
    assert describe_hardware_error(1 << 5) == "overload"
    assert describe_hardware_error(0b111101) == "input voltage, overheating, motor encoder, electrical shock, overload"
    assert describe_hardware_error(1 << 1) == "unknown bits 0x02"  # bit 1 is not an X-series error bit
    assert describe_hardware_error((1 << 0) | (1 << 5) | (1 << 7)) == "input voltage, overload, unknown bits 0x80"


def test_profile_registers_are_whole_milliseconds_written_as_the_interbotix_api_truncates_them():
    for name, kwargs in (("Profile_Velocity", {"velocity_ms": -1, "acceleration_ms": 0}),
                         ("Profile_Acceleration", {"velocity_ms": 100, "acceleration_ms": 1.5}),
                         ("Profile_Velocity", {"velocity_ms": True, "acceleration_ms": 0})):
        with pytest.raises(ConfigError, match=f"^{name} must be a whole number of ms >= 0, got "):
            ProfileRegisters(**kwargs)
    assert ProfileRegisters(0, 0).total_s == 0.0
    assert ProfileRegisters.from_times(2.0, 0.3) == ProfileRegisters(2000, 300)
    assert ProfileRegisters.from_times(4.0, 2.0) == ProfileRegisters(4000, 2000)
    assert ProfileRegisters.from_times(0.2999, 0.0999) == ProfileRegisters(299, 99)  # int(), not round()
    assert ProfileRegisters(1000, 700).ramp_s == 0.5 and ProfileRegisters(1000, 250).ramp_s == 0.25


def _profiles():
    """Arguments of moves (built in the test, so the code under test builds them): some start at t0 = 0."""
    rng = np.random.default_rng(11)
    for k in range(60):
        velocity_ms = int(rng.choice([0, 200, 500, 1000, 2000]))
        acceleration_ms = int(rng.choice([0, velocity_ms // 8, velocity_ms // 4]))  # ramps well inside the move
        yield (0.0 if k % 3 == 0 else float(rng.uniform(0, 10)), float(rng.uniform(-2, 2)),
               float(rng.uniform(-1, 1)), float(rng.uniform(-2, 2)), (velocity_ms, acceleration_ms),
               float(rng.uniform(0.5, 4.0)))


@pytest.mark.parametrize("args", list(_profiles()), ids=lambda a: f"{a[4][0]}ms")
def test_every_move_starts_where_and_as_fast_as_the_joint_is_and_ends_at_rest_on_its_goal_smoothly(args):
    t0, q0, v0, q1, registers, max_velocity = args
    move = TimeProfile(t0, q0, v0, q1, ProfileRegisters(*registers), max_velocity)
    if t0 == 0.0:  # exactly at the end of the move: at rest on the goal
        assert move.state(move.duration) == (move.q1, 0.0)
    assert move.state(move.t0 - 1.0) == (move.q0, move.v0) and move.state(move.t0) == (move.q0, move.v0)
    assert move.state(move.end_time + 1e-9) == (move.q1, 0.0) and move.state(move.end_time + 5.0) == (move.q1, 0.0)
    assert abs(move.cruise_velocity) <= move.max_velocity + 1e-12
    if move.registers.velocity_ms:
        assert move.duration >= move.registers.total_s - 1e-12
        if abs(move.cruise_velocity) < move.max_velocity:
            assert move.duration == pytest.approx(move.registers.total_s)
    else:  # no profile: a step at the velocity limit
        assert move.duration == pytest.approx(abs(move.q1 - move.q0) / move.max_velocity)
    ts = np.linspace(move.t0, move.end_time, 401)
    h = 1e-6
    for t in ts[1:-1]:
        q, v = move.state(t)
        assert move.position(t) == q and move.velocity(t) == v
        if move.registers.velocity_ms:  # a trapezoid: position and velocity continuous, velocity its slope
            assert (move.position(t + h) - move.position(t - h)) / (2 * h) == pytest.approx(v, abs=1e-4)
            assert abs(move.velocity(t + h) - v) < 1e-3 * max(1.0, abs(move.v0 - move.cruise_velocity)) / max(
                move.registers.ramp_s, 1e-3) + 1e-9
    ramp = move.registers.ramp_s
    if 0 < ramp and move.duration > 2 * ramp:  # no jump where the ramps meet the cruise
        for boundary in (move.t0 + ramp, move.end_time - ramp):
            assert move.position(boundary - 1e-9) == pytest.approx(move.position(boundary + 1e-9), abs=1e-6)
    if move.registers.ramp_s > 0:  # a ramp down: the joint comes to rest smoothly
        q_end, v_end = move.state(move.end_time - 1e-9)
        assert q_end == pytest.approx(move.q1, abs=1e-6) and v_end == pytest.approx(0.0, abs=1e-5)


def test_a_move_needs_a_positive_velocity_limit_and_a_step_of_no_distance_takes_no_time():
    with pytest.raises(ConfigError, match="^max_velocity must be positive, got 0$"):
        TimeProfile(0.0, 0.0, 0.0, 1.0, ProfileRegisters(100, 0), 0)
    still = TimeProfile(1.0, 0.5, 0.0, 0.5, ProfileRegisters(0, 0), 2.0)
    assert still.duration == 0.0 and still.cruise_velocity == 0.0 and still.end_time == 1.0
    step = TimeProfile(1.0, 0.5, 0.0, -0.5, ProfileRegisters(0, 0), 2.0)
    assert step.duration == 0.5 and step.cruise_velocity == -2.0 and step.state(1.25) == (0.0, -2.0)


# ------------------------------------------------------------------ vendor calls with deadlines
class Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def _thread(name):
    return next((t for t in threading.enumerate() if t.name == name), None)


def _wait(condition, what):
    done = threading.Event()
    for _ in range(5000):  # polls every 2 ms: 10 s at most, reached only when something is broken
        if condition():
            return
        done.wait(0.002)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_worker_runs_on_a_named_daemon_thread_and_names_the_next_one_after_a_give_up():
    clock = Clock(100.0)  # a monotonic clock far from zero: deadlines are measured from each start
    worker = VendorCallWorker(clock=clock)
    assert worker.name == "vendor-calls" and worker.running() is None and worker.threads_given_up == 0
    first = _thread("vendor-calls-1")
    assert first is not None and first.daemon
    release, finished = threading.Event(), threading.Event()
    stuck = worker.submit("reboot", lambda: release.wait(10.0) and "rebooted", 2.0)
    assert stuck.submitted_at == 100.0
    _wait(lambda: worker.running() is stuck, "the call to start")
    clock.t = 102.0  # exactly its deadline: still within it
    assert worker.poll() == [] and worker.running() is stuck
    clock.t = 102.001
    assert worker.poll() == [stuck] and stuck.state == EXPIRED and worker.running() is None
    assert worker.threads_given_up == 1 and _thread("vendor-calls-2").daemon
    after = worker.submit("torque", lambda: finished.set() or "on", 1.0)
    _wait(lambda: after.state == DONE, "the next call on the fresh thread")
    assert worker.running() is None and worker.poll() == [after]
    release.set()  # the stuck call answers late, and its thread ends instead of serving the queue too
    first.join(10.0)
    assert not first.is_alive()
    _wait(lambda: stuck.state == LATE, "the late answer")
    assert worker.poll() == [stuck] and stuck.result == "rebooted" and worker.poll() == []
    hold = threading.Event()
    again = worker.submit("reboot", lambda: hold.wait(10.0), 1.0)
    _wait(lambda: worker.running() is again, "the second stuck call to start")
    clock.t = 110.0
    assert worker.poll() == [again] and worker.threads_given_up == 2 and _thread("vendor-calls-3") is not None
    hold.set()
    worker.close()
    with pytest.raises(ConfigError, match="^the vendor call worker is closed$"):
        worker.submit("late", lambda: None, 1.0)


# ------------------------------------------------------------------ the Franka's limits against Franka's datasheets
# Franka Control Interface documentation, "Robot and interface specifications" (frankaemika/docs
# source/control-parameters-joint-panda.csv @cda9283a and control-parameters-joint-fr3.csv @1b6fed8c):
# q_min, q_max (rad), dq_max (rad/s), ddq_max (rad/s^2), dddq_max (rad/s^3), joints 1-7.
FCI = {
    "panda": {"q_min": (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
              "q_max": (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
              "dq_max": (2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100),
              "ddq_max": (15, 7.5, 10, 12.5, 15, 20, 20),
              "dddq_max": (7500, 3750, 5000, 6250, 7500, 10000, 10000)},
    "fr3": {"q_min": (-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159),
            "q_max": (2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159),
            "dq_max": (2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
            "ddq_max": (10, 10, 10, 10, 10, 10, 10)},
}


@pytest.mark.parametrize("name", sorted(FCI))
def test_each_franka_model_is_its_datasheet_joint_by_joint(name):
    model, sheet = franka.get_model(name), FCI[name]
    assert model.name == name
    assert model.lower == sheet["q_min"] and model.upper == sheet["q_max"]
    assert model.max_velocity == sheet["dq_max"] and model.max_acceleration == sheet["ddq_max"]


def test_the_limits_franky_reports_are_the_panda_s_fci_limits():
    # What franky-control 2.0.0 reports for a connected arm: the Panda's FCI velocity, acceleration and jerk
    # limits (libfranka include/franka/rate_limiting.h @1ba89c29, kMaxJoint* before their safety margins).
    panda = FCI["panda"]
    assert franka.FRANKY_VELOCITY_LIMITS == panda["dq_max"]
    assert franka.FRANKY_ACCELERATION_LIMITS == panda["ddq_max"]
    assert franka.FRANKY_JERK_LIMITS == panda["dddq_max"]


def test_an_unknown_franka_model_is_refused_listing_the_known_ones():
    with pytest.raises(ConfigError, match=r"^unknown Franka model 'ur5'; valid: fr3, panda$"):
        franka.get_model("ur5")
    assert franka.get_model("fr3") is franka.MODELS["fr3"] and franka.get_model("panda") is franka.MODELS["panda"]


def _urdf_joint(name: str, kind: str, limits: tuple[float, float] | None) -> str:
    """One joint as franka_description writes it: one element per line, the limit among them."""
    limit = "" if limits is None else (f'    <limit effort="87.0" lower="{limits[0]}" upper="{limits[1]}" '
                                       f'velocity="2.62"/>\n')
    return (f'  <joint name="{name}" type="{kind}">\n    <origin rpy="0 0 0" xyz="0 0 0.333"/>\n'
            f'    <parent link="{name}_parent"/>\n    <child link="{name}_child"/>\n    <axis xyz="0 0 1"/>\n'
            f'{limit}  </joint>\n')


def _fr3_urdf(skip: int | None = None) -> str:
    joints = [_urdf_joint(f"fr3_joint{i}", "revolute", (lo, hi))
              for i, (lo, hi) in enumerate(zip(FCI["fr3"]["q_min"], FCI["fr3"]["q_max"]), start=1) if i != skip]
    joints.insert(3, _urdf_joint("fr3_finger_joint1", "prismatic", (0.0, 0.04)))  # the hand's: not an arm joint
    joints.append(_urdf_joint("fr3_joint8", "fixed", None))
    return '<?xml version="1.0" ?>\n<robot name="fr3">\n' + "".join(joints) + "</robot>\n"


def test_the_urdf_limits_are_read_from_the_revolute_arm_joints_of_a_multi_line_urdf():
    lower, upper = franka.urdf_joint_limits(_fr3_urdf())
    assert lower.tolist() == list(FCI["fr3"]["q_min"]) and upper.tolist() == list(FCI["fr3"]["q_max"])
    assert franka.urdf_joint_limits(_fr3_urdf(), count=3)[1].tolist() == list(FCI["fr3"]["q_max"][:3])
    joint8 = _fr3_urdf() + _urdf_joint("fr3_joint8", "revolute", (-1.0, 1.0))
    assert franka.urdf_joint_limits(joint8, count=8)[0].tolist() == [*FCI["fr3"]["q_min"], -1.0]


@pytest.mark.parametrize("joint", range(1, 8))
def test_a_urdf_without_one_arm_joint_is_refused_naming_it(joint):
    with pytest.raises(ConfigError, match=rf"^the arm's URDF has no position limits for joints \[{joint}\]$"):
        franka.urdf_joint_limits(_fr3_urdf(skip=joint))
    with pytest.raises(ConfigError, match=r"joints \[8\]$"):
        franka.urdf_joint_limits(_fr3_urdf(), count=8)


STREAM_FIELDS = ("velocity", "acceleration", "jerk")


def _stream(**fields):
    fr3 = franka.get_model("fr3")
    values = dict(lower=fr3.lower, upper=fr3.upper, velocity=franka.FRANKY_VELOCITY_LIMITS,
                  acceleration=franka.FRANKY_ACCELERATION_LIMITS, jerk=franka.FRANKY_JERK_LIMITS)
    values.update(fields)
    return franka.StreamLimits(**values)


@pytest.mark.parametrize("field", STREAM_FIELDS)
@pytest.mark.parametrize("joint", [0, 6])
@pytest.mark.parametrize("bad", [0.0, -0.5, math.inf, math.nan])
def test_every_dynamics_limit_of_every_joint_must_be_a_positive_finite_number(field, joint, bad):
    values = list(getattr(_stream(), field))
    values[joint] = bad
    with pytest.raises(ConfigError, match=rf"^stream limits: every {field} limit must be positive, got "
                                          rf"{re.escape(str(values))}$"):
        _stream(**{field: tuple(values)})
    values[joint] = 0.25  # small, below one, is fine
    assert getattr(_stream(**{field: tuple(values)}), field)[joint] == 0.25


@pytest.mark.parametrize("field", ("lower", "upper", *STREAM_FIELDS))
def test_stream_limits_need_one_value_per_joint_in_every_field(field):
    short = getattr(_stream(), field)[:6]
    with pytest.raises(ConfigError, match=r"^stream limits need one value per joint in every field, got sizes "
                                          r"\[6, 7\]$"):
        _stream(**{field: short})


@pytest.mark.parametrize("joint", range(7))
def test_a_joint_whose_lower_limit_is_not_below_its_upper_is_refused(joint):
    fr3 = franka.get_model("fr3")
    for lower in (fr3.upper[joint], fr3.upper[joint] + 0.1):
        bad = list(fr3.lower)
        bad[joint] = lower
        with pytest.raises(ConfigError, match=rf"^stream limits: lower must be below upper, got "
                                              rf"{re.escape(str(bad))} / {re.escape(str(list(fr3.upper)))}$"):
            _stream(lower=tuple(bad))


def _from_robot(factor=1.0, **options):
    return franka.StreamLimits.from_robot(franka.get_model("fr3"), franka.FRANKY_VELOCITY_LIMITS,
                                          franka.FRANKY_ACCELERATION_LIMITS, franka.FRANKY_JERK_LIMITS, factor,
                                          **options)


@pytest.mark.parametrize("factor", [0.0, -0.1, 1.0 + 1e-9, 1.5, 2.0, math.nan])
def test_a_dynamics_factor_outside_zero_to_one_is_refused(factor):
    with pytest.raises(ConfigError, match=rf"^dynamics factor must be in \(0, 1\], got {re.escape(repr(factor))}$"):
        _from_robot(factor)


@pytest.mark.parametrize("factor", [1e-3, 0.3, 1.0])
def test_every_dynamics_limit_is_franky_s_times_the_dynamics_factor_joint_by_joint(factor):
    rng = np.random.default_rng(int(factor * 1000))
    asked = np.array(franka.FRANKY_VELOCITY_LIMITS) * rng.uniform(0.1, 1.0, 7)
    for requested, velocity in ((None, franka.FRANKY_VELOCITY_LIMITS), (asked, asked)):
        limits = _from_robot(factor, requested_velocity=requested)
        assert limits.velocity == pytest.approx(tuple(np.array(velocity) * factor), rel=1e-12)
        assert limits.acceleration == pytest.approx(tuple(np.array(franka.FRANKY_ACCELERATION_LIMITS) * factor))
        assert limits.jerk == pytest.approx(tuple(np.array(franka.FRANKY_JERK_LIMITS) * factor), rel=1e-12)
    mixed = np.array(franka.FRANKY_VELOCITY_LIMITS)
    mixed[::2] = 0.5  # lower on some joints, franky's own on the others
    assert _from_robot(factor, requested_velocity=mixed).velocity == pytest.approx(tuple(mixed * factor))


def test_a_velocity_request_may_equal_franky_s_limit_up_to_rounding_but_not_exceed_it():
    reported = np.array(franka.FRANKY_VELOCITY_LIMITS)
    assert _from_robot(requested_velocity=reported).velocity == franka.FRANKY_VELOCITY_LIMITS
    assert _from_robot(requested_velocity=reported + 1e-9).velocity == franka.FRANKY_VELOCITY_LIMITS
    for over in (2e-9, 0.5):
        with pytest.raises(ConfigError, match=r"^max_joint_velocity asks for more than franky reports for the "
                                              r"connected fr3 \(joint 1 .*, joint 7 .* rad/s\): its planner "
                                              r"would refuse such waypoints$"):
            _from_robot(requested_velocity=reported + over)
    asked = reported.copy()
    asked[[1, 5]] += 0.5
    with pytest.raises(ConfigError, match=r"\(joint 2 2\.675 > 2\.175, joint 6 3\.11 > 2\.61 rad/s\)"):
        _from_robot(requested_velocity=asked)
    with pytest.raises(ConfigError, match=r"^max_joint_velocity has 6 values for 7 joints$"):
        _from_robot(requested_velocity=reported[:6])


def test_urdf_limits_narrow_the_model_only_when_both_sides_are_reported():
    fr3 = franka.get_model("fr3")
    urdf_lower, urdf_upper = np.array(fr3.lower) + 0.1, np.array(fr3.upper) - 0.1
    for one_side in (dict(urdf_lower=urdf_lower), dict(urdf_upper=urdf_upper)):
        limits = _from_robot(**one_side)
        assert (limits.lower, limits.upper) == (fr3.lower, fr3.upper)
    both = _from_robot(urdf_lower=urdf_lower, urdf_upper=urdf_upper)
    assert both.lower == pytest.approx(tuple(urdf_lower)) and both.upper == pytest.approx(tuple(urdf_upper))


def test_the_safety_filter_s_limits_are_the_stream_s_over_one_15_hz_period_named_as_the_panda_joints():
    limits = _from_robot(0.5)
    joints = limits.joint_limits()
    assert joints.names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert (joints.lower, joints.upper) == (franka.get_model("fr3").lower, franka.get_model("fr3").upper)
    assert joints.max_step == pytest.approx(tuple(0.5 * v / 15.0 for v in franka.FRANKY_VELOCITY_LIMITS))
    assert joints.source == "Franka joint limits; velocity limits over one control period"
    assert _from_robot(source="franky at 10.0.0.2").joint_limits(period_s=0.1).source == "franky at 10.0.0.2"
    assert _from_robot().joint_limits(("a", "b", "c", "d", "e", "f", "g"), 0.1).max_step == pytest.approx(
        tuple(0.1 * v for v in franka.FRANKY_VELOCITY_LIMITS))


# ------------------------------------------------------------------ the Franka's hand and the workspace box
READY = np.array(franka.READY_JOINTS)
HAND = franka.forward_kinematics(READY)[:3, 3]
LIFT = np.array([0.0, -0.15, 0.0, 0.15, 0.0, 0.0, 0.0])  # lifts the hand by several centimetres at the ready pose


def _hand(q):
    return franka.forward_kinematics(q)[:3, 3]


def _around(z_low, z_high):
    """A box wide in x and y around the ready hand, its floor and ceiling ``z_low`` / ``z_high`` above the hand."""
    return WorkspaceBox((HAND[0] - 1.0, HAND[1] - 1.0, HAND[2] + z_low),
                        (HAND[0] + 1.0, HAND[1] + 1.0, HAND[2] + z_high))


def test_a_hand_outside_the_box_takes_each_step_that_brings_it_closer_on_either_side():
    lifted = _hand(READY + LIFT)[2] - HAND[2]
    assert 0.02 < lifted < 0.2
    below = _around(lifted + 0.05, 0.6)  # the hand under the floor, lifted towards it and still under it
    assert not below.contains(_hand(READY + LIFT))
    assert np.array_equal(franka.clip_step_into_box(READY, READY + LIFT, below)[0], READY + LIFT)
    assert np.array_equal(franka.clip_step_into_box(READY + LIFT, READY, below)[0], READY + LIFT)  # away: stays
    above = _around(-0.6, -0.05)  # the hand over the ceiling, lowered towards it and still over it
    assert np.array_equal(franka.clip_step_into_box(READY + LIFT, READY, above)[0], READY)
    assert np.array_equal(franka.clip_step_into_box(READY, READY + LIFT, above)[0], READY)
    assert franka.clip_step_into_box(READY, READY + LIFT, above)[1] == ["z"]


def test_a_step_that_keeps_an_outside_hand_exactly_as_far_from_the_box_stays_put():
    turned = READY + np.array([0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # about the base's vertical axis: same height
    assert _hand(turned)[2] == HAND[2] and not np.allclose(_hand(turned)[:2], HAND[:2])
    for box in (_around(0.05, 0.5), _around(-0.5, -0.05)):
        joints, axes = franka.clip_step_into_box(READY, turned, box)
        assert np.array_equal(joints, READY) and axes == ["z"]


def test_the_hand_stops_at_the_wall_to_a_4096th_of_the_step_on_every_step_tried():
    rng = np.random.default_rng(7)
    box = _around(-0.3, 0.03)  # the ceiling 3 cm above the ready hand
    stopped = 0
    for _ in range(40):
        step = rng.uniform(-0.25, 0.25, 7)
        if box.contains(_hand(READY + step)):
            continue
        joints, axes = franka.clip_step_into_box(READY, READY + step, box)
        fraction = float(np.dot(joints - READY, step) / np.dot(step, step))
        assert np.allclose(joints, READY + fraction * step, atol=1e-12)  # along the step's own line
        assert abs(fraction * 4096 - round(fraction * 4096)) < 1e-6 and 0 <= fraction < 1  # on the 4096th grid
        assert box.contains(_hand(joints)) and axes
        assert not box.contains(_hand(READY + (fraction + 1 / 4096) * step))  # and the next 4096th is past the wall
        stopped += 1
    assert stopped >= 10


def test_joints_given_as_whole_numbers_come_back_as_floats():
    box = WorkspaceBox((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
    target = np.zeros(7, dtype=int)
    joints, axes = franka.clip_step_into_box(target, target, box)
    assert joints.dtype == np.float64 and axes == [] and np.array_equal(joints, np.zeros(7))
    away = WorkspaceBox((5.0, 5.0, 5.0), (6.0, 6.0, 6.0))  # the hand outside, a step that does not bring it closer
    joints, axes = franka.clip_step_into_box(target, target, away)
    assert joints.dtype == np.float64 and axes == ["x", "y", "z"]


def test_single_precision_inputs_are_computed_in_double_precision_exactly_as_their_values():
    """A float32 array (a message or a recording may carry one) gives bit for bit the result of its float64 copy."""
    rng = np.random.default_rng(11)
    limits = franka.StreamLimits.from_robot(franka.get_model("fr3"), franka.FRANKY_VELOCITY_LIMITS,
                                            franka.FRANKY_ACCELERATION_LIMITS, franka.FRANKY_JERK_LIMITS, 0.7)
    a32, j32 = rng.uniform(5.0, 20.0, 7).astype(np.float32), rng.uniform(2000.0, 10000.0, 7).astype(np.float32)

    def same(function, *args, **kwargs):
        single = function(*args, **kwargs)
        double = function(*(np.asarray(x, dtype=np.float64) if isinstance(x, np.ndarray) else x for x in args),
                          **kwargs)
        for s, d in zip(single if isinstance(single, tuple) else (single,),
                        double if isinstance(double, tuple) else (double,)):
            if isinstance(d, list):  # the walls met
                assert s == d, function.__name__
            else:
                assert s.dtype == np.float64 and np.array_equal(s, d), function.__name__

    for _ in range(20):
        speeds, other = (rng.uniform(0.0, 1.5, 7).astype(np.float32) for _ in range(2))
        same(franka.stopping_distance, speeds, a32, j32)
        for longest in (1e-5, 0.2):  # below and above the distance at the knee (5e-6 to 1.3e-3 rad here)
            same(franka.speed_to_stop_within, rng.uniform(0.0, longest, 7).astype(np.float32), a32, j32)
        same(franka.speed_change_distance, speeds, other, a32, j32)
        q0 = (READY + rng.uniform(-0.3, 0.3, 7)).astype(np.float32)
        q1 = (q0 + rng.uniform(-0.1, 0.1, 7)).astype(np.float32)
        qm = (q0 + rng.uniform(-0.05, 0.05, 7)).astype(np.float32)
        same(franka.stream_waypoints, q0, q1, qm, 1 / 15, limits)
        same(franka.stream_waypoints, q0, q1, qm, 1 / 15, limits, measured_velocity=other - 0.75)
        same(franka.clip_step_into_box, q0, q1, _around(-0.3, 0.03))


def test_speeding_up_from_rest_takes_the_distance_of_braking_to_rest_in_both_jerk_regimes():
    a, j = np.array(franka.FRANKY_ACCELERATION_LIMITS), np.array(franka.FRANKY_JERK_LIMITS)
    knee = a * a / j  # below it the acceleration limit is never reached (0.015 to 0.04 rad/s here, per joint)
    for scale in (0.01, 0.3, 0.9, 1.0, 1.1, 3.0, 50.0):
        v = knee * scale
        assert np.allclose(franka.speed_change_distance(np.zeros(7), v, a, j), franka.stopping_distance(v, a, j),
                           rtol=1e-12, atol=0)
        assert np.allclose(franka.speed_change_distance(v, np.zeros(7), a, j), franka.stopping_distance(v, a, j),
                           rtol=1e-12, atol=0)
        # from u to u + dv: the mean speed over 2 sqrt(dv/j) below the knee, over dv/a + a/j above it
        u = np.full(7, 0.4)
        duration = np.where(v >= knee, v / a + a / j, 2.0 * np.sqrt(v / j))
        assert np.allclose(franka.speed_change_distance(u, u + v, a, j), (u + v / 2.0) * duration, rtol=1e-12, atol=0)
        assert np.allclose(franka.speed_change_distance(-u, -(u + v), a, j), (u + v / 2.0) * duration, rtol=1e-12,
                           atol=0)  # speeds are magnitudes


# ------------------------------------------------------------------ the Franka's joint stream
STREAM = franka.StreamLimits.from_robot(franka.get_model("fr3"), franka.FRANKY_VELOCITY_LIMITS,
                                        franka.FRANKY_ACCELERATION_LIMITS, franka.FRANKY_JERK_LIMITS, 1.0)
A, J, VMAX = np.array(STREAM.acceleration), np.array(STREAM.jerk), np.array(STREAM.velocity)
PERIOD = 1.0 / 15.0


def _room_used(now, speed):
    """What a via speed needs (module docstring): reach it from ``now``, then brake onto the target with the margin."""
    return (franka.speed_change_distance(now, speed, A, J)
            + franka.BRAKE_MARGIN * franka.stopping_distance(speed, A, J))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_via_velocity_is_capped_at_each_joint_s_own_limit_in_either_direction(sign):
    far = READY - sign * 5.0  # the arm far behind the target: room is no constraint
    for size in (0.5, 1.0, 3.0):  # steps of 7.5 to 45 rad/s
        via, v = franka.stream_waypoints(READY, READY + sign * size, far, PERIOD, STREAM)
        assert np.array_equal(v, sign * VMAX)  # 2.175 rad/s for joints 1-4, 2.61 for 5-7
        assert np.allclose(via, READY + sign * size - sign * franka.BRAKE_MARGIN
                           * franka.stopping_distance(VMAX, A, J), atol=1e-12)


def test_a_step_with_room_to_spare_is_streamed_at_exactly_its_own_average_velocity():
    rng = np.random.default_rng(3)
    for _ in range(20):
        step = rng.uniform(-0.1, 0.1, 7)
        behind = READY - np.sign(step) * 2.0  # room to spare in the direction of the step
        target = READY + step
        _, v = franka.stream_waypoints(READY, target, behind, PERIOD, STREAM)
        assert np.array_equal(v, (target - READY) / PERIOD)


def test_a_via_speed_held_back_by_the_room_is_the_largest_that_fits_to_a_2_30th_of_the_step_s_velocity():
    rng, held_back = np.random.default_rng(5), 0
    for _ in range(20):
        step = rng.uniform(0.02, 0.1, 7) * rng.choice([-1.0, 1.0], 7)
        measured = READY + step * rng.uniform(0.3, 0.9, 7)  # the arm most of the way to the target already
        coasting = np.sign(step) * rng.uniform(0.0, 0.5, 7)  # and moving towards it
        _, v = franka.stream_waypoints(READY, READY + step, measured, PERIOD, STREAM, measured_velocity=coasting)
        target = READY + step
        full, speed = np.abs(target - READY) / PERIOD, np.abs(v)
        room = (target - measured) * np.sign(step)
        bisected = speed < full  # the rest fit at their full speed, which is then taken as it is
        assert np.array_equal(speed[~bisected], full[~bisected])
        moving = bisected & (speed > 0.0)  # zero where even braking from the arm's own speed overruns the target
        assert np.all(_room_used(np.abs(coasting), speed)[moving] <= room[moving])
        held_back += int(np.sum(moving))
        grid = speed[bisected] / full[bisected] * 2 ** 30
        assert np.allclose(grid, np.round(grid), rtol=0, atol=1e-3)
        more = _room_used(np.abs(coasting), speed + full / 2 ** 30)
        assert np.all(more[bisected] > room[bisected])  # a 2^-30 more does not fit
    assert held_back >= 100


def test_an_arm_moving_away_from_its_target_loses_the_distance_it_needs_to_brake_from_that_motion():
    rng = np.random.default_rng(9)
    for speed_away in (0.005, 0.02, 0.3, 1.0):  # both sides of every joint's jerk knee (0.015 to 0.04 rad/s)
        step = rng.uniform(0.05, 0.1, 7) * rng.choice([-1.0, 1.0], 7)
        measured = READY - np.sign(step) * 0.05
        away = -np.sign(step) * speed_away
        _, moving = franka.stream_waypoints(READY, READY + step, measured, PERIOD, STREAM, measured_velocity=away)
        # the same as an arm at rest, that much closer to the target
        closer = measured + np.sign(step) * franka.stopping_distance(np.full(7, speed_away), A, J)
        _, resting = franka.stream_waypoints(READY, READY + step, closer, PERIOD, STREAM)
        assert np.allclose(moving, resting, rtol=1e-6, atol=1e-9)


def test_a_joint_that_holds_still_while_the_arm_coasts_streams_without_a_floating_point_error():
    step = np.array([0.05, 0.0, -0.03, 0.0, 0.02, 0.0, 0.0])
    coasting = np.array([0.2, -0.3, 0.1, 0.4, 0.0, -0.1, 0.0])  # still joints moving either way, or not at all
    with np.errstate(all="raise"):  # numpy would otherwise warn at 15 Hz about a division by zero
        via, v = franka.stream_waypoints(READY, READY + step, READY + 0.01 * step, PERIOD, STREAM,
                                         measured_velocity=coasting)
    still = step == 0.0
    assert np.all(v[still] == 0.0) and np.array_equal(via[still], READY[still])


def test_a_step_that_needs_exactly_the_room_there_is_is_streamed_at_its_full_speed():
    rng, exact = np.random.default_rng(13), 0
    for _ in range(50):
        target = rng.uniform(0.002, 0.009, 7)  # from 0: 0.03 to 0.135 rad/s, within every joint's limit
        full = (target - 0.0) / PERIOD
        measured = target - _room_used(np.zeros(7), full)  # the arm at rest exactly that far from the target
        fits = (target - measured) == _room_used(np.zeros(7), full)  # where the subtraction gives it back exactly
        _, v = franka.stream_waypoints(np.zeros(7), target, measured, PERIOD, STREAM)
        assert np.array_equal(v[fits], full[fits])
        exact += int(np.sum(fits))
    assert exact >= 20


def test_stream_limits_reported_in_single_precision_are_scaled_in_double_precision():
    fr3 = franka.get_model("fr3")
    single = [np.array(x, dtype=np.float32) for x in (franka.FRANKY_VELOCITY_LIMITS, franka.FRANKY_ACCELERATION_LIMITS,
                                                      franka.FRANKY_JERK_LIMITS)]
    got = franka.StreamLimits.from_robot(fr3, *single, 0.3)
    want = franka.StreamLimits.from_robot(fr3, *(x.astype(np.float64) for x in single), 0.3)
    assert got == want and all(type(v) is np.float64 for v in got.velocity)


@pytest.mark.parametrize("late_s", [0.1, 0.3, 0.5])
def test_goals_that_reach_the_motors_up_to_the_latency_late_still_track_and_a_stopped_joint_is_caught(late_s):
    """A joint that runs each move ``late_s`` after its goal was sent (a loaded machine) is no stall while
    ``late_s`` is within the latency allowed; the same joint stuck where it started is caught, only once it is
    further than the tolerance from every place the profile put it over the window."""
    profile = ProfileRegisters(250, 100)
    goals = [0.3 * (k + 1) for k in range(8)]  # a fast turn: 0.3 rad every 200 ms

    def monitors(latency_s):
        sent, late = (TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.15, readings=2, latency_s=latency_s)
                      for _ in range(2))
        sent.start([0.0], None, 10.0, profile)
        late.start([0.0], None, 10.0 + late_s, profile)
        for k, goal in enumerate(goals):
            sent.commanded([goal], 10.0 + 0.2 * k)
            late.commanded([goal], 10.0 + late_s + 0.2 * k)  # where the joint really is: its moves start late
        return sent, late
    readings = [10.0 + late_s + 0.05 * k for k in range(1, 40)]
    tolerant, late = monitors(0.5)
    assert all(tolerant.check(late.predicted(at), at) is None for at in readings)
    strict, late = monitors(0.0)
    faults = [strict.check(late.predicted(at), at) for at in readings]
    assert any(f is not None for f in faults)  # without the allowance the late joint reads as a stall
    stuck, _ = monitors(0.5)
    caught = next(at for at in readings if stuck.check([0.0], at) is not None)
    fault = stuck.check([0.0], caught + 0.05)
    # the nearest place over the window (the earliest: the joint only went up) is more than the tolerance away
    earliest = stuck.predicted(caught + 0.05 - 0.5)[0]
    assert fault.error_rad == pytest.approx(earliest, abs=1e-9) and earliest > 0.15
    assert fault.predicted == stuck.predicted(caught + 0.05)[0] and fault.late_s == 0.5
    assert stuck.predicted(caught - 0.5)[0] > 0.15 - 1e-9  # not caught before it had left for the whole window


def test_a_stall_message_says_how_late_a_goal_was_allowed_to_be():
    assert TrackingFault("shoulder", 0.25, -0.5, 0.75).describe() == (
        "shoulder stopped following its command: at -0.500 rad, 0.250 rad from where its profile put it "
        "(now 0.750 rad)")
    assert TrackingFault("waist", 0.125, 0.0, 1.0, 0.5).describe() == (
        "waist stopped following its command: at 0.000 rad, 0.125 rad from where its profile put it at any "
        "moment of the last 0.5 s (now 1.000 rad)")


@pytest.mark.parametrize("latency_s", [0.01, 0.05, 0.5])
def test_the_latency_window_is_searched_at_every_sample_step_and_not_beyond_its_end(latency_s):
    """A joint running exactly its profile late by any multiple of the 10 ms sample step within the window
    tracks even with a tolerance far below one step's motion; one late by a step more than the window is off."""
    from ladder_ros.robots.arm_health import LATENCY_STEP_S

    tolerance = 1e-4  # a step of 10 ms at the cruise speed below moves 12 mrad
    for late_steps in range(1, round(latency_s / LATENCY_STEP_S) + 2):
        late_s = late_steps * LATENCY_STEP_S
        monitor = TrackingMonitor(("a",), (math.pi,), tolerance_rad=tolerance, readings=1, latency_s=latency_s)
        monitor.start([0.0], None, 0.0, ProfileRegisters(1000, 100))
        monitor.commanded([1.0], 0.0)  # 1 rad in 1 s, cruising at 1.1 rad/s from 0.1 s to 0.9 s
        at = 0.8  # every moment compared lies in the cruise
        fault = monitor.check(monitor.predicted(at - late_s), at)
        if late_s <= latency_s + 1e-12:
            assert fault is None, late_s
        else:
            assert fault is not None and fault.error_rad == pytest.approx(
                monitor.predicted(at - latency_s)[0] - monitor.predicted(at - late_s)[0], abs=1e-9)
            assert fault.error_rad > tolerance


def test_a_negative_or_unreadable_command_latency_is_refused_by_name():
    for bad in (-0.1, math.nan, True, "0.5"):
        with pytest.raises(ConfigError, match="^tracking latency_s must be a number >= 0"):
            TrackingMonitor(("a",), (1.0,), 0.1, 2, latency_s=bad)
