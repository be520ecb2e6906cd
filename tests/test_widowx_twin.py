"""The WidowX twin: the Dynamixel profile arithmetic, the motor model on a fake clock, and the vendor-API semantics.

The motor model is pure: a fake clock makes every motion exact and repeatable. The API tests build
the twin's ``InterbotixManipulatorXS`` over an in-process xs_sdk, as the driver does, and check the
behaviour read from Interbotix's sources: the constructor never writes the profile, the limit check
measures from the last commanded joints, service calls wait without a timeout, and so on.
"""

import math
import threading
import time

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots import dynamixel as dxl
from ladder_ros.robots import wx250s
from ladder_ros.instruments.widowx_twin import motors as twin_motors
from ladder_ros.instruments.widowx_twin.motors import (
    FINGER_LOWER_M,
    FINGER_UPPER_M,
    MODES_PROFILE,
    WidowXMotors,
    finger_angle,
    finger_position,
)


class FakeClock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t

    def advance(self, dt):
        self.t += dt


def profile(ms_total, ms_ramp):
    return dxl.ProfileRegisters(ms_total, ms_ramp)


# ------------------------------------------------------------------ the time-based profile
@pytest.mark.parametrize("q0,v0,q1,total,ramp", [
    (0.0, 0.0, 1.0, 2000, 300), (0.5, 0.0, -0.7, 250, 100), (0.0, 1.2, 0.0, 250, 100), (-1.0, -0.8, 0.4, 600, 300),
    (0.2, 0.0, 0.9, 400, 0), (1.0, 0.5, 1.3, 1000, 700)])
def test_a_time_profile_starts_where_the_joint_is_and_ends_at_the_goal_at_rest(q0, v0, q1, total, ramp):
    move = dxl.TimeProfile(10.0, q0, v0, q1, profile(total, ramp), max_velocity=50.0)
    assert move.state(10.0) == (q0, v0) and move.state(9.0) == (q0, v0)
    assert move.duration == pytest.approx(total / 1000.0)
    assert move.state(10.0 + total / 1000.0) == pytest.approx((q1, 0.0), abs=1e-9)
    assert move.state(99.0) == (q1, 0.0)
    ramp_s = min(ramp, total // 2) / 1000.0  # the acceleration time is at most half the move
    distance = q1 - q0
    assert distance == pytest.approx(v0 * ramp_s / 2 + move.cruise_velocity * (total / 1000.0 - ramp_s))
    # position is continuous and its numerical derivative is the reported velocity, everywhere
    times = np.linspace(10.0, 10.0 + total / 1000.0, 401)
    states = np.array([move.state(t) for t in times])
    steps = np.diff(states[:, 0])
    assert np.max(np.abs(steps)) < (abs(move.cruise_velocity) + abs(v0)) * (times[1] - times[0]) + 1e-9
    mid = (times[1:] + times[:-1]) / 2
    numeric = steps / np.diff(times)
    reported = np.array([move.velocity(t) for t in mid])
    assert np.allclose(numeric, reported, atol=1e-6 + 0.02 * max(1.0, abs(move.cruise_velocity)))


def test_a_goal_while_moving_brakes_past_it_and_comes_back_at_rest_in_the_profile_time():
    hold = dxl.TimeProfile(0.0, 0.3, 1.0, 0.3, profile(250, 100), max_velocity=math.pi)  # a hold at 1 rad/s
    positions = [hold.position(t) for t in np.linspace(0, 0.25, 251)]
    cruise = -(1.0 * 0.1 / 2) / (0.25 - 0.1)  # back towards the goal after the ramp
    assert hold.cruise_velocity == pytest.approx(cruise)
    # past the goal by v0^2 ramp / (2 (v0 - cruise)) where the velocity crosses zero, then back
    assert max(positions) == pytest.approx(0.3 + 1.0 * 0.1 / (2 * (1.0 - cruise)), abs=1e-4)
    assert hold.state(0.25) == (0.3, 0.0)
    slow = dxl.TimeProfile(0.0, 0.3, 1.0, 0.3, MODES_PROFILE, max_velocity=math.pi)  # the same hold at 2 s / 0.3 s
    assert slow.end_time == pytest.approx(2.0)
    assert abs(slow.position(0.4) - 0.3) > 0.1 and abs(slow.velocity(0.4)) > 0.05  # two 5 Hz periods on: moving


def test_no_profile_is_a_step_at_the_velocity_limit_and_a_fast_move_is_capped_and_takes_longer():
    step = dxl.TimeProfile(0.0, 0.0, 0.0, -1.0, profile(0, 0), max_velocity=2.0)
    assert step.duration == pytest.approx(0.5) and step.velocity(0.1) == -2.0
    assert step.position(0.25) == pytest.approx(-0.5)
    still = dxl.TimeProfile(0.0, 0.4, 0.0, 0.4, profile(0, 0), max_velocity=2.0)
    assert still.duration == 0.0 and still.state(1.0) == (0.4, 0.0)
    capped = dxl.TimeProfile(0.0, 0.0, 0.0, 0.628, profile(250, 100), max_velocity=math.pi)
    assert abs(capped.cruise_velocity) == pytest.approx(math.pi)
    assert capped.duration == pytest.approx(0.1 + 0.628 / math.pi) and capped.duration > 0.25
    assert capped.state(capped.duration) == (0.628, 0.0)
    with pytest.raises(ConfigError, match="max_velocity"):
        dxl.TimeProfile(0.0, 0.0, 0.0, 1.0, profile(250, 100), max_velocity=0.0)


def test_profile_registers_are_what_the_api_writes_and_are_checked():
    assert dxl.ProfileRegisters.from_times(0.25, 0.1) == profile(250, 100)
    assert dxl.ProfileRegisters.from_times(2.0, 0.3) == MODES_PROFILE == profile(2000, 300)
    assert profile(250, 200).ramp_s == pytest.approx(0.125) and profile(250, 100).ramp_s == pytest.approx(0.1)
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="Profile_Velocity"):
            dxl.ProfileRegisters(bad, 0)
    assert dxl.describe_hardware_error(0) == ""
    assert dxl.describe_hardware_error(32) == "overload"
    assert dxl.describe_hardware_error(1 + 4 + 32) == "input voltage, overheating, overload"
    assert dxl.describe_hardware_error(2) == "unknown bits 0x02"


def test_the_motors_limits_from_the_vendor_motor_config_agree_with_the_urdf_within_a_tick():
    tick = 2 * math.pi / dxl.TICKS_PER_TURN
    for i, name in enumerate(wx250s.JOINT_NAMES):
        _, low, high, velocity = twin_motors.MOTOR_CONFIG[name]
        assert dxl.ticks_to_rad(low) == pytest.approx(wx250s.LOWER[i], abs=tick)
        assert dxl.ticks_to_rad(high) == pytest.approx(wx250s.UPPER[i], abs=tick)
        assert dxl.velocity_units_to_rad_s(velocity) == pytest.approx(wx250s.VELOCITY_LIMIT_RAD_S, rel=1e-3)
    for rad in (-3.0, -1.2, 0.0, 0.5, 3.0):
        assert dxl.ticks_to_rad(dxl.rad_to_ticks(rad)) == pytest.approx(rad, abs=tick / 2)
    assert twin_motors.SLEEP_POSITIONS[:6] == wx250s.SLEEP_JOINTS


# ------------------------------------------------------------------ the motors on a fake clock
def test_the_motors_start_with_the_modes_yaml_profile_and_move_along_it():
    clock = FakeClock()
    m = WidowXMotors(clock)
    assert set(m.profile().values()) == {MODES_PROFILE}
    start = np.array(wx250s.SLEEP_JOINTS)
    goal = start + np.array([0.5, 0.2, -0.3, 0.0, 0.1, -0.4])
    assert m.write_group("arm", goal)
    clock.advance(0.25)
    q, v = m.arm_state()
    expected = [dxl.TimeProfile(100.0, s, 0.0, g, MODES_PROFILE, math.pi).position(100.25) for s, g in zip(start, goal)]
    assert np.allclose(q, expected)
    moving = np.abs(goal - start) > 0
    assert np.all(np.abs(q - goal)[moving] > 0.8 * np.abs(goal - start)[moving])  # after 0.25 s, barely started
    clock.advance(1.75)
    q, v = m.arm_state()
    assert np.allclose(q, goal) and np.all(v == 0.0)


def test_a_written_profile_governs_the_next_goal_and_a_reboot_resets_it_to_no_profile():
    clock = FakeClock()
    m = WidowXMotors(clock)
    m.set_registers("group", "arm", dxl.PROFILE_VELOCITY, 250)
    m.set_registers("group", "arm", dxl.PROFILE_ACCELERATION, 100)
    assert m.get_registers("group", "arm", dxl.PROFILE_VELOCITY) == [250] * 6
    assert m.get_registers("single", "elbow", dxl.PROFILE_ACCELERATION) == [100]
    goal = np.array(wx250s.SLEEP_JOINTS) + np.array([0.2, 0.2, -0.2, 0.2, 0.2, 0.2])
    assert m.write_group("arm", goal)
    clock.advance(0.25)
    assert np.allclose(m.arm_state()[0], goal)
    rebooted = m.reboot("group", "arm", enable=True, smart_reboot=False)
    assert rebooted == list(wx250s.JOINT_NAMES)
    assert m.get_registers("group", "arm", dxl.PROFILE_VELOCITY) == [0] * 6  # RAM initial values
    assert m.get_registers("group", "arm", dxl.TORQUE_ENABLE) == [1] * 6
    m.write_single("waist", float(goal[0]) + 0.6)  # no profile: a step at the velocity limit
    clock.advance(0.1)
    assert m.arm_state()[0][0] == pytest.approx(goal[0] + 0.1 * dxl.velocity_units_to_rad_s(131))
    m.reboot("group", "arm", enable=False)
    assert m.get_registers("group", "arm", dxl.TORQUE_ENABLE) == [0] * 6


def test_an_error_turns_the_torque_off_and_only_a_smart_reboot_of_that_motor_clears_it():
    clock = FakeClock()
    m = WidowXMotors(clock)
    goal = np.array(wx250s.SLEEP_JOINTS) + np.array([0.3, 0.3, -0.3, 0.3, 0.3, 0.3])
    assert m.write_group("arm", goal)
    clock.advance(0.5)
    m.inject_error("elbow")
    frozen = m.arm_state()[0][2]
    assert m.get_registers("group", "arm", dxl.HARDWARE_ERROR_STATUS) == [0, 0, 32, 0, 0, 0]
    assert m.get_registers("group", "arm", dxl.TORQUE_ENABLE) == [1, 1, 0, 1, 1, 1]
    clock.advance(3.0)
    q = m.arm_state()[0]
    assert q[2] == frozen and np.allclose(np.delete(q, 2), np.delete(goal, 2))
    m.torque_enable("single", "elbow", True)  # refused while in error
    assert m.get_registers("single", "elbow", dxl.TORQUE_ENABLE) == [0]
    assert not m.write_single("elbow", float(goal[2]))
    assert m.reboot("group", "arm", enable=True, smart_reboot=True) == ["elbow"]
    assert m.get_registers("group", "arm", dxl.HARDWARE_ERROR_STATUS) == [0] * 6
    assert m.get_registers("single", "waist", dxl.PROFILE_VELOCITY) == [2000]  # not rebooted: kept
    assert m.get_registers("single", "elbow", dxl.PROFILE_VELOCITY) == [0]
    m.inject_error("gripper", bits=4)
    assert m.get_registers("single", "gripper", dxl.HARDWARE_ERROR_STATUS) == [4]


def test_a_stalled_joint_stays_put_and_moves_on_to_its_goal_when_released():
    clock = FakeClock()
    m = WidowXMotors(clock)
    m.set_registers("group", "arm", dxl.PROFILE_VELOCITY, 500)
    m.set_registers("group", "arm", dxl.PROFILE_ACCELERATION, 100)
    goal = np.array(wx250s.SLEEP_JOINTS) + np.array([0.4, 0.0, 0.0, 0.0, 0.0, 0.0])
    m.write_group("arm", goal)
    clock.advance(0.2)
    m.stall("waist")
    stuck = m.arm_state()[0][0]
    assert 0.0 < stuck < 0.4
    clock.advance(2.0)
    assert m.arm_state()[0][0] == stuck and m.arm_state()[1][0] == 0.0
    m.write_single("waist", 0.5)  # goals are taken but the joint cannot move
    clock.advance(1.0)
    assert m.arm_state()[0][0] == stuck
    m.release_stall("waist")
    clock.advance(0.5)
    assert m.arm_state()[0][0] == pytest.approx(0.5)


def test_goals_outside_a_motors_position_limits_are_refused_by_the_motor():
    clock = FakeClock()
    m = WidowXMotors(clock)
    shoulder = m.arm["shoulder"]
    assert not m.write_single("shoulder", shoulder.upper + 0.01) and shoulder.refused_goals == 1
    assert not m.write_single("shoulder", shoulder.lower - 0.01) and shoulder.refused_goals == 2
    assert m.write_single("shoulder", shoulder.lower + 0.01)
    assert not m.write_group("arm", [0.0] * 5)  # the wrong number of commands: not executed
    with pytest.raises(ConfigError, match="outside its motor limits"):
        WidowXMotors(clock, joints=(0.0, -2.5, 1.55, 0.0, 0.8, 0.0))


def test_the_fingers_move_under_pwm_until_a_limit_or_an_object():
    assert finger_position(finger_angle(0.02)) == pytest.approx(0.02)
    assert finger_position(0.0) == pytest.approx(math.sqrt(0.024 ** 2 - 0.014 ** 2))
    clock = FakeClock()
    m = WidowXMotors(clock)
    finger = lambda: m.joint_states().position[7]  # noqa: E731
    assert finger() == pytest.approx(FINGER_UPPER_M)
    m.write_single("gripper", -250.0)  # grasp at the default pressure
    stroke = finger_angle(FINGER_UPPER_M) - finger_angle(FINGER_LOWER_M)
    full_time = stroke / (twin_motors.GRIPPER_FULL_PWM_RAD_S * 250 / twin_motors.PWM_LIMIT)
    clock.advance(full_time / 2)
    assert FINGER_LOWER_M < finger() < FINGER_UPPER_M and m.joint_states().velocity[6] < 0
    clock.advance(full_time)
    assert finger() == pytest.approx(FINGER_LOWER_M) and m.joint_states().velocity[6] == 0.0
    m.write_single("gripper", 350.0)
    clock.advance(full_time)
    assert finger() == pytest.approx(FINGER_UPPER_M)
    m.place_object(0.025)
    m.write_single("gripper", -350.0)
    clock.advance(2 * full_time)
    assert finger() == pytest.approx(0.025)  # the object stops the fingers; the PWM keeps pushing
    assert m.joint_states().position[8] == -finger()


@pytest.mark.parametrize("pressure", [0.0, 0.5, 1.0])
def test_the_finger_stroke_time_is_the_time_the_motors_take_to_close(pressure):
    clock = FakeClock()
    m = WidowXMotors(clock)
    finger = lambda: m.joint_states().position[7]  # noqa: E731
    stroke_s = twin_motors.finger_stroke_s(pressure)
    m.write_single("gripper", -(150.0 + pressure * 200.0))  # the API's grasp at that pressure (150-350 PWM)
    clock.advance(stroke_s * 0.99)
    assert finger() > FINGER_LOWER_M + 1e-5
    clock.advance(stroke_s * 0.02)
    assert finger() == pytest.approx(FINGER_LOWER_M)
    with pytest.raises(ConfigError, match="gripper_pressure"):
        twin_motors.finger_stroke_s(1.5)


def test_robot_info_is_the_urdfs_in_float32_with_the_gripper_as_its_left_finger():
    m = WidowXMotors(FakeClock())
    info = m.robot_info("group", "arm")
    assert tuple(info.joint_names) == wx250s.JOINT_NAMES and info.mode == "position" and info.profile_type == "time"
    assert info.joint_lower_limits[1] == float(np.float32(wx250s.LOWER[1])) != wx250s.LOWER[1]
    assert info.joint_ids == [1, 2, 4, 6, 7, 8] and info.num_joints == 6
    gripper = m.robot_info("single", "gripper")
    assert gripper.joint_names == ["left_finger"] and gripper.mode == "pwm"
    assert gripper.joint_upper_limits[0] == pytest.approx(FINGER_UPPER_M)
    with pytest.raises(KeyError, match="does not exist"):
        m.robot_info("group", "legs")


# ------------------------------------------------------------------ the API's semantics (rclpy)
@pytest.fixture
def twin_api():
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    import rclpy

    from ladder_ros.instruments import widowx_twin
    from ladder_ros.instruments.widowx_twin import xs_sdk

    rclpy.init()
    sdk = xs_sdk.register("wx250s", xs_sdk.SimulatedXsSdk())
    try:
        yield sdk
    finally:
        widowx_twin.reset()
        rclpy.try_shutdown()


def build_bot(**kwargs):
    from ladder_ros.instruments.widowx_twin.arm import InterbotixManipulatorXS

    return InterbotixManipulatorXS(robot_model="wx250s", robot_name="wx250s", moving_time=0.25, accel_time=0.1,
                                   **kwargs)


def wait_for(condition, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.005)


@pytest.mark.ros
def test_the_constructor_stores_its_times_and_never_writes_the_profile(twin_api):
    bot = build_bot()
    assert bot.arm.moving_time == 0.25 and bot.arm.accel_time == 0.1
    assert twin_api.calls_of("set_motor_registers") == []
    assert set(twin_api.motors.profile().values()) == {MODES_PROFILE}  # the motors still run 2 s / 0.3 s
    assert bot.get_node().get_name() == "interbotix_robot_manipulation"  # the global node, default name
    bot.arm.set_trajectory_time(0.25, 0.1)  # the same times: still nothing written
    assert twin_api.calls_of("set_motor_registers") == []
    bot.arm.set_trajectory_time(0.5, 0.1)
    assert [(r.reg, r.value) for r in twin_api.calls_of("set_motor_registers")] == [("Profile_Velocity", 500)]


@pytest.mark.ros
def test_set_joint_positions_measures_from_the_last_commanded_joints_and_capture_resets_them(twin_api):
    bot = build_bot()
    start = np.array(bot.arm.get_joint_positions())
    step = np.array([0.7, 0, 0, 0, 0, 0])  # 0.7 rad in 0.25 s = 2.8 rad/s < pi rad/s: accepted
    assert bot.arm.set_joint_positions(list(start + step), blocking=False)
    assert bot.arm.set_joint_positions(list(start + 2 * step), blocking=False)  # 0.7 from the last command
    assert np.allclose(bot.arm.get_joint_commands(), start + 2 * step)
    wait_for(lambda: len(twin_api.calls_of("commands/joint_group")) == 2, 5, "two commands at xs_sdk")
    beyond = start + 2 * step + np.array([0.9, 0, 0, 0, 0, 0])  # 0.9 rad from the last command: > pi rad/s
    assert bot.arm.set_joint_positions(list(beyond), blocking=False) is False
    assert np.allclose(bot.arm.get_joint_commands(), start + 2 * step)
    # the motors (2 s profile) lag far behind the commands: a hold at the measured joints is refused...
    wait_for(lambda: abs(bot.arm.get_joint_positions()[0] - start[0]) > 0.02, 5, "the waist to start moving")
    measured = bot.arm.get_joint_positions()
    assert bot.arm.set_joint_positions(measured, blocking=False) is False
    time.sleep(0.05)
    assert len(twin_api.calls_of("commands/joint_group")) == 2  # the refused ones published nothing
    # ...until the commanded joints are reset to the measured ones
    bot.arm.capture_joint_positions()
    assert np.allclose(bot.arm.get_joint_commands(), bot.arm.get_joint_positions(), atol=0.05)
    assert bot.arm.set_joint_positions(bot.arm.get_joint_positions(), blocking=False)
    outside = list(start)
    outside[1] = wx250s.UPPER[1] + 0.01
    assert bot.arm.set_joint_positions(outside, blocking=False) is False


@pytest.mark.ros
def test_service_calls_wait_without_a_timeout_and_xs_sdk_stalls_behind_a_hung_one(twin_api):
    from ladder_ros.instruments.widowx_twin import robot

    bot = build_bot(node=robot.InterbotixRobotNode("api_under_test", use_global_arguments=False))
    robot.robot_startup(bot.get_node())
    hang = twin_api.hang("reboot_motors")
    finished = threading.Event()
    threading.Thread(target=lambda: (bot.core.robot_reboot_motors("group", "arm", True, True), finished.set()),
                     daemon=True).start()
    assert hang.entered.wait(5.0), "the reboot never reached xs_sdk"
    published = twin_api.published
    time.sleep(0.3)
    assert not finished.is_set()  # still waiting: no timeout
    assert twin_api.published == published  # no joint states while xs_sdk serves the hung call
    hang.release()
    assert finished.wait(5.0), "the reboot never returned after its release"
    wait_for(lambda: twin_api.published > published, 5, "joint states again")


@pytest.mark.ros
def test_every_service_wait_leaves_a_rate_timer_on_the_api_node_once_it_is_up(twin_api):
    from ladder_ros.instruments.widowx_twin import robot

    bot = build_bot(node=robot.InterbotixRobotNode("api_under_test", use_global_arguments=False))
    before = len(list(bot.get_node().timers))
    robot.robot_startup(bot.get_node())
    for _ in range(3):
        bot.core.robot_get_motor_registers("group", "arm", "Profile_Velocity")
    assert len(list(bot.get_node().timers)) == before + 3
    with pytest.raises(robot.InterbotixException, match="already"):
        robot.robot_startup(bot.get_node())


@pytest.mark.ros
def test_grasp_and_release_sleep_their_delay_and_the_api_stops_the_pwm_at_the_limit(twin_api):
    from ladder_ros.instruments.widowx_twin import robot

    bot = build_bot(node=robot.InterbotixRobotNode("api_under_test", use_global_arguments=False))
    robot.robot_startup(bot.get_node())
    started = time.monotonic()
    bot.gripper.grasp(delay=0.3)
    assert time.monotonic() - started >= 0.3
    wait_for(lambda: bot.gripper.get_finger_position() <= FINGER_LOWER_M + 1e-6, 10, "the fingers closed")
    wait_for(lambda: not bot.gripper.gripper_moving, 5, "the API's timer to stop the PWM")
    # The API publishes the zero PWM and then clears gripper_moving; the twin hears the message on its own thread.
    wait_for(lambda: twin_api.calls_of("commands/joint_single")[-1].cmd == 0.0, 10, "the zero PWM at the twin")
    started = time.monotonic()
    bot.gripper.release(delay=0.0)
    assert time.monotonic() - started < 0.3
    wait_for(lambda: bot.gripper.get_finger_position() >= FINGER_UPPER_M - 1e-6, 10, "the fingers open")
