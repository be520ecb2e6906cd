"""A blocked joint noticed from its motor's effort, and nothing else: the effort rule of the WidowX driver
(ladder_ros/robots/arm_health.py), the readings it takes from Interbotix's API, and the motors' error bits explained.

The driver itself, against the WidowX twin's motors, is test_widowx_driver.py's. Times here are the readings'
stamps, given.
"""

import math

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots import dynamixel as dxl
from ladder_ros.robots import wx250s
from ladder_ros.robots.arm_health import APPROACH_RAD_S, EffortStall, EffortStallDetector, TrackingMonitor
from ladder_ros.robots.dynamixel import ProfileRegisters
from ladder_ros.robots.interbotix_arm import MotorFaults
from ladder_ros.specs.robot_parameters import WIDOWX_DRIVER
from tests.test_arm_apis import connect

NAMES = ("a", "b")
SATURATED = (1840.0, 1840.0)
BLOCKED = 2300.0  # an XM430-W350 pushing against an obstacle at 12 V (mA)
PROFILE = ProfileRegisters(250, 100)


def detector(confirm_s=0.2, lag_rad=0.05):
    return EffortStallDetector(NAMES, SATURATED, lag_rad=lag_rad, confirm_s=confirm_s)


# ------------------------------------------------------------------ a blocked joint
@pytest.mark.parametrize("confirm_s", [0.125, 0.25, 0.3125])  # exact in binary, as the stamps below
def test_a_joint_pushing_at_its_limit_behind_its_goal_is_a_stall_once_its_run_lasts_the_confirm_time(confirm_s):
    rule = detector(confirm_s)
    goals = [0.0, 1.0]  # b's goal is 0.3 rad ahead of where it is stuck
    stamps = [10.0 + 0.0625 * k for k in range(12)]
    found = [(at, rule.check([0.0, 0.7], [0.0, 0.0], [10.0, BLOCKED], goals, at)) for at in stamps]
    first = next(at for at, stall in found if stall is not None)
    assert first == 10.0 + confirm_s  # by the stamps: not before, and at the first reading that completes the run
    stall = dict(found)[first]
    assert (stall.joint, stall.effort, stall.saturated, stall.measured, stall.goal) == ("b", BLOCKED, 1840.0, 0.7, 1.0)
    assert stall.held_s == pytest.approx(first - 10.0) and stall.error_rad == pytest.approx(0.3)
    assert stall.describe().startswith("b stopped following its command: its motor pushed at its limit (effort "
                                       "2300, saturated at 1840) for ")


def test_the_run_is_measured_by_the_readings_stamps_not_by_how_often_or_when_they_are_judged():
    rule = detector(0.2)
    # judged in bursts (a loaded machine): the same reading twice, an older one, then a jump
    assert rule.check([0.0, 0.7], None, [0.0, BLOCKED], [0.0, 1.0], 5.00) is None  # first: approach not known yet
    assert rule.check([0.0, 0.7], None, [0.0, BLOCKED], [0.0, 1.0], 5.01) is None  # still from positions: starts
    assert rule.check([0.0, 0.7], None, [0.0, BLOCKED], [0.0, 1.0], 5.01) is None  # the same reading again
    assert rule.check([0.0, 0.7], None, [0.0, BLOCKED], [0.0, 1.0], 4.90) is None  # older than the last judged
    assert rule.check([0.0, 0.7], None, [0.0, BLOCKED], [0.0, 1.0], 5.20) is None  # 0.19 s after the run began
    stall = rule.check([0.0, 0.7], None, [0.0, BLOCKED], [0.0, 1.0], 5.22)
    assert stall is not None and stall.held_s == pytest.approx(0.21)


@pytest.mark.parametrize("broken_by", ["effort", "lag", "approach", "efforts", "goals"])
def test_any_reading_that_is_not_all_three_ends_the_run(broken_by):
    rule = detector(0.25)
    blocked = dict(measured=[0.0, 0.7], velocities=[0.0, 0.0], efforts=[0.0, BLOCKED], goals=[0.0, 1.0])
    for at in (1.0, 1.125):
        assert rule.check(at=at, **blocked) is None
    broken = dict(blocked)
    if broken_by == "effort":
        broken["efforts"] = [0.0, 1839.0]
    elif broken_by == "lag":
        broken["goals"] = [0.0, 0.72]  # within the lag: not behind
    elif broken_by == "approach":
        broken["velocities"] = [0.0, APPROACH_RAD_S + 0.01]
    elif broken_by == "efforts":
        broken["efforts"] = None  # a joint state without efforts
    else:
        broken["goals"] = None  # nothing commanded (not predicting)
    assert rule.check(at=1.1875, **broken) is None
    assert rule.check(at=1.25, **blocked) is None and rule.check(at=1.375, **blocked) is None  # a new run: 0.125 s
    assert rule.check(at=1.5, **blocked) is not None


def test_pushing_either_way_counts_and_the_joint_furthest_over_its_level_is_named():
    rule = EffortStallDetector(NAMES, (1000.0, 2000.0), lag_rad=0.05, confirm_s=0.1)
    for at in (0.0, 0.05):
        assert rule.check([0.5, 0.5], [0.0, 0.0], [-1500.0, 2500.0], [0.0, 1.0], at) is None
    stall = rule.check([0.5, 0.5], [0.0, 0.0], [-1500.0, 2500.0], [0.0, 1.0], 0.1)
    assert stall.joint == "a" and stall.effort == -1500.0  # 1.5 x its level, b only 1.25 x


def test_a_reset_forgets_every_run():
    rule = detector(0.2)
    for at in (0.0, 0.1):
        rule.check([0.0, 0.7], [0.0, 0.0], [0.0, BLOCKED], [0.0, 1.0], at)
    rule.reset()
    assert rule.check([0.0, 0.7], [0.0, 0.0], [0.0, BLOCKED], [0.0, 1.0], 0.2) is None
    assert rule.check([0.0, 0.7], [0.0, 0.0], [0.0, BLOCKED], [0.0, 1.0], 0.3) is None


# ------------------------------------------------------------------ nothing else
def motion(start, goals, late_s=0.0):
    """A joint's goals as sent (one every 200 ms from ``start``) and its true motion, which runs each move
    ``late_s`` after its goal was sent (a goal that reaches the motors late on a loaded machine)."""
    sent = TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.15, readings=2)
    true = TrackingMonitor(("a",), (math.pi,), tolerance_rad=0.15, readings=2)
    sent.start([0.0], None, start, PROFILE)
    true.start([0.0], None, start + late_s, PROFILE)
    for k, goal in enumerate(goals):
        sent.commanded([goal], start + 0.2 * k)
        true.commanded([goal], start + late_s + 0.2 * k)
    return sent, true


def reading(sent, true, at):
    """(position, velocity, effort) at ``at``: the effort at the motor's limit whenever it has a goal to drive to
    (accelerating hard, a heavy load: the hardest case for the rule), low while its goal has not reached it."""
    if true.predicted(at - 1e-4) is None:  # its first goal has not reached it yet
        return 0.0, 0.0, 100.0
    q = true.predicted(at)[0]
    v = (q - true.predicted(at - 1e-4)[0]) / 1e-4
    waiting = abs(true.goals(at)[0] - sent.goals(at)[0]) > 1e-9 and abs(v) < 1e-6
    return q, v, 100.0 if waiting else BLOCKED


@pytest.mark.parametrize("late_s", [0.0, 0.1, 0.3, 0.5])
def test_a_fast_free_turn_drawing_its_full_current_all_along_is_no_stall_even_with_goals_reaching_it_late(late_s):
    """The joint far behind its newest goal, its effort at the limit at every reading; it moves towards its goal,
    so it is not blocked. Goals that reach the motors late leave it standing behind them for a while, but a motor
    waiting for its goal draws no current."""
    sent, true = motion(20.0, [0.3 * (k + 1) for k in range(8)], late_s)
    rule = EffortStallDetector(("a",), (1840.0,), lag_rad=0.05, confirm_s=0.2)
    for at in [20.0 + 0.01 * k for k in range(1, 300)]:
        q, v, effort = reading(sent, true, at)
        assert rule.check([q], [v], [effort], sent.goals(at), at) is None, at


@pytest.mark.parametrize("goals_at", ["stamp", "judged"])
def test_joint_states_judged_late_and_in_bursts_on_a_busy_machine_are_no_stall(goals_at):
    """A joint turning back and forth, its readings (every 10 ms) judged in bursts 0.3 s late, each with the goals
    in force at its stamp: no stall. Held against the goals in force when they are judged, the readings before
    each turn back would look like a joint pushing away from its goal, and one would be taken for a stall."""
    goals = [0.3, 0.6, 0.9, 0.6, 0.3, 0.0] * 3
    sent, true = motion(30.0, goals)
    rule = EffortStallDetector(("a",), (1840.0,), lag_rad=0.05, confirm_s=0.2)
    stamps = [30.0 + 0.01 * k for k in range(1, 360)]
    stalls = []
    for burst in range(0, len(stamps), 30):
        judged = stamps[min(burst + 29, len(stamps) - 1)] + 0.3
        for at in stamps[burst:burst + 30] + [stamps[min(burst + 29, len(stamps) - 1)]]:  # the last one twice
            q, v, effort = reading(sent, true, at)
            stall = rule.check([q], [v], [effort], sent.goals(at if goals_at == "stamp" else judged), at)
            stalls += [stall] if stall is not None else []
    assert (stalls == []) == (goals_at == "stamp")


def test_a_joint_holding_the_arm_up_at_its_goal_draws_current_and_is_no_stall():
    rule = detector(0.2)
    for k in range(40):
        at = 1.0 + 0.05 * k
        # b holds the arm against gravity: its effort at the limit, a small static error, not moving
        assert rule.check([0.0, 0.98], [0.0, 0.0], [0.0, BLOCKED], [0.0, 1.0], at) is None


def test_the_rule_judges_the_arm_joints_only_the_gripper_holding_an_object_at_full_pwm_is_not_one_of_them():
    """The gripper holds an object with its PWM on (interbotix gripper ``grasp``): its motor reads its full load
    while the fingers stand short of their goal. The driver's reading carries the six arm joints' efforts,
    taken by name, and the rule is built over those six."""
    _, arm = connect()
    core = arm.bot.core
    core.js_index_map["gripper"] = len(core.position)
    core.position.append(0.3)
    core.velocity.append(0.0)
    core.effort = [100.0 * (i + 1) for i in range(len(core.position) - 1)] + [1000 * dxl.CURRENT_UNIT_MA]
    reading = arm.read()
    assert reading.efforts.tolist() == [100.0 * (core.js_index_map[n] + 1) for n in wx250s.JOINT_NAMES]
    rule = EffortStallDetector(wx250s.JOINT_NAMES, [1840.0] * 6, lag_rad=0.05, confirm_s=0.2)
    assert rule.names == wx250s.JOINT_NAMES and "gripper" not in rule.names
    core.effort = []  # a joint-state publisher that leaves efforts out: no efforts, the rule stays quiet
    assert arm.read().efforts is None


# ------------------------------------------------------------------ settings, goals, defaults
@pytest.mark.parametrize("make, message", [
    (lambda: EffortStallDetector(("a", "b"), (1.0,), 0.05, 0.2), "1 saturated efforts for 2 joints"),
    (lambda: EffortStallDetector(("a",), (0.0,), 0.05, 0.2), "a saturated effort must be a positive number, got 0.0"),
    (lambda: EffortStallDetector(("a",), (1.0,), 0, 0.2), "stall lag_rad must be a positive number, got 0"),
    (lambda: EffortStallDetector(("a",), (1.0,), 0.05, math.nan), "stall confirm_s must be a positive number"),
    (lambda: EffortStallDetector(("a",), (1.0,), 0.05, 0.2, approach_rad_s=-1.0),
     "stall approach_rad_s must be a number >= 0, got -1.0"),
])
def test_every_effort_rule_setting_is_refused_in_its_own_name(make, message):
    with pytest.raises(ConfigError, match=f"^{message}"):
        make()


def test_the_goals_in_force_at_a_reading_are_those_of_the_last_command_sent_by_then():
    monitor = TrackingMonitor(("a", "b"), (math.pi, math.pi), tolerance_rad=0.1, readings=2)
    assert monitor.goals(1.0) is None
    monitor.start([0.1, 0.2], None, 1.0, PROFILE)
    monitor.commanded([0.5, 0.6], 2.0)
    monitor.commanded([0.7, 0.8], 3.0)
    assert monitor.goals(0.5) is None and monitor.goals(1.5).tolist() == [0.1, 0.2]
    assert monitor.goals(2.0).tolist() == [0.5, 0.6] and monitor.goals(9.0).tolist() == [0.7, 0.8]


def test_the_default_saturation_levels_are_80_percent_of_a_blocked_motors_effort_by_motor_model():
    spec = {p.name: p for p in WIDOWX_DRIVER}
    assert wx250s.MOTOR_MODELS == ("XM430-W350",) * 5 + ("XL430-W250",)
    assert spec["stall_effort_ma"].default == [1840.0] * 5 + [2152.0]  # 0.8 x 2.3 A; 0.8 x 100 % load x 2.69
    assert spec["stall_confirm_s"].default + 0.05 <= 0.25 and spec["stall_lag_rad"].default == 0.05
    assert dxl.BLOCKED_EFFORT["XM430-W350"] < 1193 * dxl.CURRENT_UNIT_MA  # under the motor's Current_Limit


# ------------------------------------------------------------------ the motors' error bits
def test_each_error_bit_is_named_and_explained_in_the_e_manuals_words():
    assert dxl.explain_hardware_error(0) == ""
    assert dxl.explain_hardware_error(dxl.OVERLOAD) == "overload: a load beyond the motor's maximum output persisted"
    assert dxl.explain_hardware_error(0b10101) == (
        "input voltage: the input voltage is outside the configured operating range; overheating: the internal "
        "temperature exceeds the configured limit; electrical shock: an electric shock on the circuit, or too little "
        "power to drive the motor")
    assert dxl.explain_hardware_error(0b1000_0010) == "unknown bits 0x82: not an X-series error"


def test_motor_faults_read_from_the_registers_carry_what_each_bit_means():
    _, arm = connect()
    core = arm.bot.core
    core.registers[("elbow", "Hardware_Error_Status")] = dxl.OVERLOAD | 0b100
    core.registers[("elbow", "Torque_Enable")] = 0
    faults = arm.read_faults()
    assert faults == MotorFaults({"elbow": "overheating, overload"}, ("elbow",))
    assert faults.explain() == ("elbow overheating: the internal temperature exceeds the configured limit; overload: "
                                "a load beyond the motor's maximum output persisted")
    assert MotorFaults({}, ("waist",)).explain() == ""


def test_an_effort_stall_keeps_its_numbers():
    stall = EffortStall("elbow", -2300.0, 1840.0, 0.4, 0.2, 0.25)
    assert stall.error_rad == pytest.approx(0.2)
    assert stall.describe() == ("elbow stopped following its command: its motor pushed at its limit (effort -2300, "
                                "saturated at 1840) for 0.25 s at 0.400 rad, 0.200 rad from its goal and not moving "
                                "towards it: blocked")


def test_a_motor_that_shut_down_between_the_two_reads_is_read_again_and_reported_with_its_error():
    """An overload trips between the error read and the torque read: the torque reads off, the error 0. The error
    register is read once more, so the poll reports the error with the torque it turned off."""
    _, arm = connect()
    core = arm.bot.core
    read = core.robot_get_motor_registers

    def trips_after_the_error_read(cmd_type, name, reg):
        values = read(cmd_type, name, reg)
        if (name, reg) == ("arm", "Hardware_Error_Status") and not core.registers[("elbow", "Hardware_Error_Status")]:
            core.registers[("elbow", "Hardware_Error_Status")] = dxl.OVERLOAD  # the motor shuts down now
            core.registers[("elbow", "Torque_Enable")] = 0
        return values

    core.robot_get_motor_registers = trips_after_the_error_read
    faults = arm.read_faults()
    assert faults == MotorFaults({"elbow": "overload"}, ("elbow",))
    assert [c[2:] for c in core.calls if c[0] == "robot_get_motor_registers"] == [
        ("arm", "Hardware_Error_Status"), ("arm", "Torque_Enable"), ("arm", "Hardware_Error_Status"),
        ("gripper", "Hardware_Error_Status"), ("gripper", "Torque_Enable")]


def test_the_twins_gripper_reads_its_load_while_it_holds_an_object_and_nothing_while_it_moves_or_rests_open():
    from ladder_ros.instruments.widowx_twin.motors import GRIPPER, JOINT_STATE_NAMES, PWM_LIMIT, WidowXMotors

    now = [0.0]
    motors = WidowXMotors(lambda: now[0])
    i = JOINT_STATE_NAMES.index(GRIPPER)
    assert motors.joint_states().effort[i] == 0.0  # open, no PWM
    motors.place_object(0.025)
    motors.write_single(GRIPPER, -250.0)  # the API's grasp at gripper_pressure 0.5
    now[0] = 0.1
    assert motors.joint_states().velocity[i] < 0 and motors.joint_states().effort[i] == 0.0  # closing: moving
    now[0] = 5.0
    assert motors.joint_states().velocity[i] == 0.0  # on the object
    assert motors.joint_states().effort[i] == pytest.approx(-250 / PWM_LIMIT * 1000 * dxl.CURRENT_UNIT_MA)
    motors.write_single(GRIPPER, 0.0)
    assert motors.joint_states().effort[i] == 0.0
