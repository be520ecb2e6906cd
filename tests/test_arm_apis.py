"""The wrappers of the two arm APIs, against in-process stand-ins of the vendors' APIs (tests/arm_api_fakes.py).

The WidowX wrapper must hold an arm that lags its commands, write and read back the motion profile,
report motor faults by motor, and recover; the Franka wrapper must take franky's limits, stream
two-waypoint motions, stop, report errors once and run the gripper off the control thread.
"""

import array
import contextlib
import math
import os
import re
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from ladder_ros.core.errors import LadderError
from ladder_ros.core.rotations import quaternion_to_matrix
from ladder_ros.robots import dynamixel as dxl
from ladder_ros.robots import franka, wx250s
from ladder_ros.robots.gripper import ApertureRange
from ladder_ros.robots import interbotix_arm
from ladder_ros.robots.interbotix_arm import (
    MISSING_INTERBOTIX,
    BackendUnavailable,
    HoldOutcome,
    InterbotixArm,
    MotorFaults,
    ProfileMismatch,
    vendor_api,
)
from tests.arm_api_fakes import FakeFranky, FakeInterbotix, FakeTimer, GroupInfo

FINGERS = ApertureRange(0.010, 0.035, source="bridge_data_robot")


def connect(fake=None, **overrides):
    fake = fake or FakeInterbotix()
    kwargs = dict(robot_model="wx250s", robot_name="wx", moving_time_s=0.2, accel_time_s=0.1, gripper_pressure=0.6,
                  finger_range=FINGERS, connect_timeout_s=5.0, node_name="widowx_driver_interbotix",
                  namespace="/widowx")
    kwargs.update(overrides)
    return fake, InterbotixArm(fake.api(), **kwargs)


def calls(arm, method=None):
    return [c for c in arm.bot.core.calls if method is None or c[0] == method]


# ------------------------------------------------------------------ connecting
def test_the_arm_is_built_on_a_node_of_its_own_with_the_drivers_times_and_limits():
    fake, arm = connect()
    node = fake.built["node"]
    assert (node.node_name, node.namespace, node.use_global_arguments) == ("widowx_driver_interbotix", "/widowx", False)
    assert arm.node_name == "/widowx/widowx_driver_interbotix" and fake.built["started"] is node
    assert fake.built["manipulator"] == dict(robot_model="wx250s", group_name="arm", gripper_name="gripper",
                                             robot_name="wx", moving_time=0.2, accel_time=0.1, gripper_pressure=0.6,
                                             node=node)
    assert arm.profile == dxl.ProfileRegisters(200, 100) and arm.finger_range is FINGERS
    assert np.array_equal(arm.lower, wx250s.LOWER) and np.array_equal(arm.upper, wx250s.UPPER)
    assert np.array_equal(arm.velocity_limits, [math.pi] * 6) and arm.lower.dtype == np.float64
    assert arm.finger_limits == (0.015, 0.037)
    assert calls(arm) == []  # connecting writes nothing: the profile is written by verify_profile


def test_a_connection_that_never_answers_or_fails_is_refused_with_what_to_check():
    hang = threading.Event()
    try:
        with pytest.raises(BackendUnavailable, match=r"^no Interbotix arm under /wx within 0\.05 s: is the xs_sdk "
                                                     r"node running \(robot_model wx250s, robot_name wx\)\?$"):
            connect(FakeInterbotix(hang=hang), connect_timeout_s=0.05)
    finally:
        hang.set()
    for error in (RuntimeError("no xs_sdk"), SystemExit(1)):  # the API exits the process on a bad group
        with pytest.raises(BackendUnavailable, match=rf"^Interbotix API failed to start: {error!r}".replace("(", r"\(")
                           .replace(")", r"\)")):
            connect(FakeInterbotix(error=error))


def test_an_arm_group_the_kinematics_do_not_fit_is_refused():
    names = ("waist", "shoulder", "elbow", "wrist_angle", "wrist_rotate")
    with pytest.raises(BackendUnavailable, match=r"arm group joints \['waist', 'shoulder', 'elbow', 'wrist_angle', "
                                                 r"'wrist_rotate'\] are not the wx250s joints \['waist', "):
        connect(FakeInterbotix(info=GroupInfo(joint_names=names)))
    for mode, profile in (("velocity", "time"), ("position", "velocity")):
        with pytest.raises(BackendUnavailable, match=f"the arm group runs mode '{mode}' with a '{profile}' profile; "
                                                     "the driver needs position mode with a time-based profile"):
            connect(FakeInterbotix(info=GroupInfo(mode=mode, profile_type=profile)))


def test_the_vendor_api_is_imported_when_present_and_named_when_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "interbotix_xs_modules", None)  # not installed: the import fails
    with pytest.raises(BackendUnavailable) as info:
        vendor_api()
    assert str(info.value).startswith(MISSING_INTERBOTIX + " (") and "interbotix_xs_modules" in str(info.value)
    arm = SimpleNamespace(InterbotixManipulatorXS=object())
    robot = SimpleNamespace(InterbotixRobotNode=object(), robot_startup=object())
    for name, module in (("interbotix_xs_modules", SimpleNamespace()), ("interbotix_xs_modules.xs_robot",
                                                                        SimpleNamespace()),
                         ("interbotix_xs_modules.xs_robot.arm", arm), ("interbotix_common_modules", SimpleNamespace()),
                         ("interbotix_common_modules.common_robot", SimpleNamespace()),
                         ("interbotix_common_modules.common_robot.robot", robot)):
        monkeypatch.setitem(sys.modules, name, module)
    api = vendor_api()
    assert (api.name, api.manipulator, api.robot_node, api.robot_startup) == (
        "vendor", arm.InterbotixManipulatorXS, robot.InterbotixRobotNode, robot.robot_startup)


# ------------------------------------------------------------------ reading and sending
def test_a_reading_takes_each_joint_by_name_and_the_stamp_of_the_joint_state():
    _, arm = connect()
    core = arm.bot.core
    core.js_index_map = {name: 7 - i for i, name in enumerate(reversed(wx250s.JOINT_NAMES))}  # another order
    core.js_index_map.update({"left_finger": 0, "right_finger": 1})
    arm.bot.gripper.left_finger_index = 0
    for i, name in enumerate(wx250s.JOINT_NAMES):
        core.position[core.js_index_map[name]] = 0.1 * (i + 1)
        core.velocity[core.js_index_map[name]] = -0.01 * (i + 1)
    core.position[0] = 0.0225
    core.stamp = (7, 250_000_000)
    reading = arm.read()
    assert np.allclose(reading.joints, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]) and reading.joints.dtype == np.float64
    assert np.allclose(reading.velocities, [-0.01, -0.02, -0.03, -0.04, -0.05, -0.06])
    assert reading.finger_m == 0.0225 and reading.aperture == pytest.approx(0.5)
    assert reading.stamp_ns == 7_250_000_000


def test_joints_go_out_without_blocking_and_the_apis_refusal_is_reported():
    _, arm = connect()
    assert arm.send_joints(np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0]))
    assert arm.bot.arm.published == [[0.1, 0.0, 0.0, 0.0, 0.0, 0.0]]
    assert all(type(v) is float for v in arm.bot.arm.published[0])
    assert np.array_equal(arm.commanded(), [0.1, 0, 0, 0, 0, 0]) and arm.commanded().dtype == np.float64
    assert arm.send_joints(np.array([0.1, 1.0, 0.0, 0.0, 0.0, 0.0])) is False  # 1 rad in 0.2 s: over pi rad/s
    assert len(arm.bot.arm.published) == 1


def test_the_gripper_is_commanded_without_waiting_and_only_when_the_command_changes():
    _, arm = connect()
    gripper = arm.bot.gripper
    assert arm.send_gripper(True) is True and gripper.calls == [("release", 0.0)]
    assert arm.send_gripper(True) is False and len(gripper.calls) == 1
    assert arm.send_gripper(False) is True and gripper.calls[-1] == ("grasp", 0.0)
    assert arm.send_gripper(False) is False and arm.send_gripper(True) is True and len(gripper.calls) == 3


# ------------------------------------------------------------------ holding
def test_a_hold_resets_the_commanded_joints_first_so_an_arm_that_lags_is_held_where_it_is():
    _, arm = connect()
    core = arm.bot.core
    arm.bot.arm.joint_commands = [1.0, 0.5, 0.2, 0.0, 0.3, 0.0]  # commanded far ahead of where the arm is
    measured = [0.2, -0.1, 0.1, 0.0, 0.2, 0.1]
    for name, value in zip(wx250s.JOINT_NAMES, measured):
        core.position[core.js_index_map[name]] = value
    outcome = arm.hold()
    assert outcome.held and outcome.how == "held at the measured joints" and not outcome.refused
    assert np.array_equal(outcome.joints, measured) and arm.bot.arm.published[-1] == measured


def test_a_hold_past_the_apis_limits_is_clamped_inside_them_and_reported_as_refused_once():
    _, arm = connect()
    core = arm.bot.core
    measured = np.array([0.0, wx250s.LOWER[1] - 0.004, 0.1, 0.0, wx250s.UPPER[4] + 0.001, 0.0])  # sagged past
    for name, value in zip(wx250s.JOINT_NAMES, measured):
        core.position[core.js_index_map[name]] = value
    outcome = arm.hold()
    clamped = np.clip(measured, np.array(wx250s.LOWER) + 2e-3, np.array(wx250s.UPPER) - 2e-3)
    assert outcome == HoldOutcome(True, "held at the measured joints clamped into the API's joint limits",
                                  outcome.joints, refused=True)
    assert np.array_equal(outcome.joints, clamped) and arm.bot.arm.published == [list(clamped)]
    assert clamped[1] == pytest.approx(wx250s.LOWER[1] + 2e-3) and clamped[4] == pytest.approx(wx250s.UPPER[4] - 2e-3)


def test_a_hold_the_api_refuses_or_raises_on_is_reported_as_not_held():
    _, arm = connect()
    arm.bot.arm.refuse_all = True
    outcome = arm.hold()
    assert (outcome.held, outcome.refused) == (False, True) and np.array_equal(outcome.joints, np.zeros(6))
    assert outcome.how == "the Interbotix API refused the hold at the measured joints and clamped into its limits"
    arm.bot.arm.raise_on_send = RuntimeError("publisher gone")
    assert arm.hold() == HoldOutcome(False, "the hold raised RuntimeError('publisher gone')", None, refused=True)
    arm.close()  # leaving the arm holding: the hold's failure is not raised on the way out


# ------------------------------------------------------------------ blocking calls: the profile, faults, recovery
def test_the_profile_is_written_to_every_arm_motor_and_read_back():
    _, arm = connect()
    assert arm.verify_profile() == "profile 200/100 ms written and read back"
    assert calls(arm, "robot_set_motor_registers") == [
        ("robot_set_motor_registers", "group", "arm", "Profile_Velocity", 200),
        ("robot_set_motor_registers", "group", "arm", "Profile_Acceleration", 100)]
    assert calls(arm, "robot_get_motor_registers") == [
        ("robot_get_motor_registers", "group", "arm", "Profile_Velocity"),
        ("robot_get_motor_registers", "group", "arm", "Profile_Acceleration")]
    assert arm.read_profile() == {name: dxl.ProfileRegisters(200, 100) for name in wx250s.JOINT_NAMES}


def test_a_profile_that_reads_back_different_names_each_motor():
    _, arm = connect()
    arm.bot.core.stuck = {"elbow", "wrist_rotate"}
    with pytest.raises(ProfileMismatch, match=r"^the motors' profile reads back as elbow 2000/300 ms, wrist_rotate "
                                              r"2000/300 ms, not the 200/100 ms written$"):
        arm.verify_profile()
    for short, counts in (("Profile_Velocity", "5 Profile_Velocity and 6"),
                          ("Profile_Acceleration", "6 Profile_Velocity and 5")):
        arm.bot.core.short_reads = {short}
        with pytest.raises(ProfileMismatch, match=f"^xs_sdk returned {counts} Profile_Acceleration values for the 6 "
                                                  "arm motors$"):
            arm.read_profile()


def test_motor_faults_are_read_by_motor_the_gripper_included():
    _, arm = connect()
    core = arm.bot.core
    assert arm.read_faults() == MotorFaults({}, ()) and not arm.read_faults() and arm.read_faults().describe() == ""
    assert calls(arm, "robot_get_motor_registers")[:4] == [
        ("robot_get_motor_registers", "group", "arm", "Hardware_Error_Status"),
        ("robot_get_motor_registers", "group", "arm", "Torque_Enable"),
        ("robot_get_motor_registers", "single", "gripper", "Hardware_Error_Status"),
        ("robot_get_motor_registers", "single", "gripper", "Torque_Enable")]
    core.registers[("elbow", "Hardware_Error_Status")] = dxl.OVERLOAD
    core.registers[("elbow", "Torque_Enable")] = 0
    core.registers[("gripper", "Torque_Enable")] = 0
    faults = arm.read_faults()
    assert faults == MotorFaults({"elbow": "overload"}, ("elbow", "gripper")) and bool(faults)
    assert faults.describe() == "elbow: Hardware_Error_Status overload; torque off: elbow, gripper"
    assert MotorFaults({}, ("waist",)) and MotorFaults({"waist": "overheating"}, ())
    core.short_reads = {"Torque_Enable"}
    with pytest.raises(BackendUnavailable, match="^xs_sdk returned 7 error and 5 torque values for the 7 motors$"):
        arm.read_faults()


def test_torque_off_and_recovery_make_the_calls_upstream_needs_in_order():
    _, arm = connect()
    core = arm.bot.core
    assert arm.torque_off() == "arm motors torqued off"
    assert calls(arm)[-1] == ("robot_torque_enable", "group", "arm", False)
    arm.send_gripper(True)
    core.calls.clear()
    message = arm.recover()
    assert message.startswith("arm motors rebooted and torqued on, profile 200/100 ms written and read back, in ")
    assert message.endswith(" s")
    assert calls(arm)[:5] == [("robot_reboot_motors", "group", "arm", True, True),
                              ("robot_get_motor_registers", "single", "gripper", "Hardware_Error_Status"),
                              ("robot_torque_enable", "group", "arm", True),
                              ("robot_torque_enable", "single", "gripper", True),
                              ("robot_set_motor_registers", "group", "arm", "Profile_Velocity", 200)]
    assert arm.send_gripper(True) is True  # after a reboot the gripper's state is unknown: sent again
    core.registers[("gripper", "Hardware_Error_Status")] = 4
    core.calls.clear()
    arm.recover()
    assert calls(arm)[2] == ("robot_reboot_motors", "single", "gripper", True, False)


def test_recovery_resets_the_commanded_joints_to_the_measured_ones():
    _, arm = connect()
    arm.bot.arm.joint_commands = [1.0] * 6
    arm.recover()
    assert arm.commanded().tolist() == arm.bot.core.measured()


def test_the_rate_timers_service_waits_leave_are_destroyed_once_no_call_is_in_flight():
    _, arm = connect()
    node = arm.node
    own = FakeTimer(lambda: None)  # a timer of the node's own: kept
    node.timers.append(own)
    with arm._service_calls():  # a call given up on is still waiting
        arm.write_profile()
        assert len(node.timers) == 3 and node.destroyed == []
    assert node.timers == [own] and len(node.destroyed) == 2
    node.timers.append(FakeTimer(print))  # a builtin's __self__ is a module, not an Event: kept
    arm.torque_off()
    assert node.timers[0] is own and len(node.timers) == 2 and len(node.destroyed) == 3
    assert arm._in_flight == 0


def test_a_failed_blocking_call_still_cleans_up_and_leaves_no_call_in_flight():
    _, arm = connect()
    arm.bot.core.fail["robot_torque_enable"] = RuntimeError("service gone")
    arm.node.leave_rate_timer()
    with pytest.raises(RuntimeError, match="service gone"):
        arm.torque_off()
    assert arm._in_flight == 0 and arm.node.timers == []


# ------------------------------------------------------------------ what the wrapper keeps and reports
def test_the_driver_can_name_the_api_the_arm_runs_on():
    fake = FakeInterbotix()
    api = fake.api()
    arm = InterbotixArm(api, robot_model="wx250s", robot_name="wx", moving_time_s=0.2, accel_time_s=0.1,
                        gripper_pressure=0.6, finger_range=FINGERS, connect_timeout_s=5.0,
                        node_name="widowx_driver_interbotix", namespace="/widowx")
    assert arm.api is api and arm.api.name == "fake"  # the driver reports it in its status


def test_a_connection_given_up_on_is_left_to_a_named_daemon_thread_that_cannot_keep_the_process_alive():
    hang = threading.Event()
    try:
        with pytest.raises(BackendUnavailable, match="^no Interbotix arm under /wx within 0.05 s"):
            connect(FakeInterbotix(hang=hang), connect_timeout_s=0.05)
        waiting = [t for t in threading.enumerate() if t.name == "interbotix-connect" and t.is_alive()]
        assert waiting and all(t.daemon for t in waiting)  # still waiting on xs_sdk, and the process may exit
    finally:
        hang.set()
    for thread in waiting:
        thread.join(10.0)
        assert not thread.is_alive(), "the connect thread did not end once the API answered"


def test_an_arm_group_in_the_wrong_mode_is_refused_with_where_the_mode_is_set():
    with pytest.raises(BackendUnavailable, match=r"^the arm group runs mode 'pwm' with a 'time' profile; the driver "
                                                 r"needs position mode with a time-based profile \(modes\.yaml of the "
                                                 r"Interbotix launch\)$"):
        connect(FakeInterbotix(info=GroupInfo(mode="pwm")))


def test_the_apis_float32_limits_are_widened_before_the_hold_margin_is_added():
    # Interbotix/interbotix_ros_core, commit 3e87890bf9bdfbd3d1083b2b59c61a35f6c0a3c3,
    # interbotix_xs_msgs/srv/RobotInfo.srv: the limits are float32[] fields, which rclpy delivers as
    # array('f'); the 2 mrad margin is added in double precision.
    info = GroupInfo(joint_lower_limits=array.array("f", wx250s.LOWER),
                     joint_upper_limits=array.array("f", wx250s.UPPER),
                     joint_velocity_limits=array.array("f", [math.pi] * 6))
    _, arm = connect(FakeInterbotix(info=info))
    for values, reported in ((arm.lower, info.joint_lower_limits), (arm.upper, info.joint_upper_limits),
                             (arm.velocity_limits, info.joint_velocity_limits)):
        assert values.dtype == np.float64 and values.tolist() == list(reported)
    core = arm.bot.core
    lower32, upper32 = np.array(info.joint_lower_limits, np.float64), np.array(info.joint_upper_limits, np.float64)
    measured = np.array([0.0, lower32[1] - 0.01, 0.1, 0.0, upper32[4] + 0.01, 0.0])  # sagged past two limits
    for name, value in zip(wx250s.JOINT_NAMES, measured):
        core.position[core.js_index_map[name]] = value
    outcome = arm.hold()
    assert outcome.held and outcome.refused
    assert outcome.joints[1] == lower32[1] + 2e-3 and outcome.joints[4] == upper32[4] - 2e-3


def test_readings_and_commanded_joints_are_float_arrays_whatever_number_type_the_api_hands_back():
    _, arm = connect()
    core = arm.bot.core
    core.position = [0, 1, -1, 0, 2, 0, 0, 0]  # integers, and numpy float32 below
    core.velocity = [np.float32(0.5)] * 8
    reading = arm.read()
    assert reading.joints.dtype == np.float64 and reading.joints.tolist() == [0.0, 1.0, -1.0, 0.0, 2.0, 0.0]
    assert reading.velocities.dtype == np.float64 and reading.velocities.tolist() == [0.5] * 6
    for commands in ([0, 1, -1, 0, 0, 0], [np.float32(0.1)] * 6):
        arm.bot.arm.joint_commands = commands
        commanded = arm.commanded()
        assert commanded.dtype == np.float64 and commanded.tolist() == [float(v) for v in commands]


def test_a_recovery_reports_how_long_it_took(monkeypatch):
    _, arm = connect()
    ticks = iter([100.0, 101.25])
    monkeypatch.setattr(interbotix_arm, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    assert arm.recover() == ("arm motors rebooted and torqued on, profile 200/100 ms written and read back, "
                             "in 1.25 s")


# ------------------------------------------------------------------ franky
@pytest.fixture
def franky(monkeypatch):
    fake = FakeFranky()
    monkeypatch.setitem(sys.modules, "franky", fake)
    arms = []
    yield fake, arms
    for arm in arms:
        if arm.robot is not None:
            arm.close()


def franky_arm(franky, **overrides):
    from ladder_ros.robots.franky_arm import FrankyArm

    fake, arms = franky
    kwargs = dict(host="172.16.0.2", model=franka.get_model("panda"), dynamics_factor=0.5, gripper_speed_m_s=0.05,
                  gripper_force_n=20.0, max_width_m=0.08, realtime=False)
    kwargs.update(overrides)
    arm = FrankyArm(**kwargs)
    arms.append(arm)
    return arm


def wait_for(condition, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.002)


URDF = "".join(f'<joint name="panda_joint{i}" type="revolute"><limit lower="{-2.0 - i * 0.01}" upper="{2.0}" '
               f'effort="87" velocity="2.1"/></joint>' for i in range(1, 8))


def test_franky_limits_are_taken_from_the_connected_arm_times_the_dynamics_factor(franky):
    fake, _ = franky
    arm = franky_arm(franky, realtime=True)
    robot = fake.state.robots[-1]
    assert (robot.host, robot.realtime_config, robot.relative_dynamics_factor, robot.recoveries) == (
        "172.16.0.2", "enforce", 0.5, 1)
    assert arm.reported_velocity == fake.state.velocity_limits and all(type(v) is float for v in arm.reported_velocity)
    assert np.allclose(arm.limits.velocity, np.array(fake.state.velocity_limits) * 0.5)
    assert np.allclose(arm.limits.acceleration, np.array(fake.state.acceleration_limits) * 0.5)
    assert np.allclose(arm.limits.jerk, np.array(fake.state.jerk_limits) * 0.5)
    panda = franka.get_model("panda")
    assert arm.model is panda and arm.dynamics_factor == 0.5
    assert arm.limits.lower == panda.lower and arm.limits.upper == panda.upper  # no URDF limits: the model's
    assert arm.limits.source == "franky's limits for the Franka at 172.16.0.2 (x 0.5), panda positions"
    assert arm.gripper.range.open == 0.08 and arm.gripper.speed == 0.05 and arm.gripper.force == 20.0
    fake.state.urdf = URDF
    narrowed = franky_arm(franky, realtime=False, max_joint_velocity=(1.0,) * 7)
    assert fake.state.robots[-1].realtime_config == "ignore"
    assert np.allclose(narrowed.limits.upper, np.minimum(panda.upper, 2.0))
    assert np.allclose(narrowed.limits.lower, np.maximum(panda.lower, [-2.0 - i * 0.01 for i in range(1, 8)]))
    assert np.allclose(narrowed.limits.velocity, [0.5] * 7)


def test_a_franka_that_cannot_be_reached_is_refused_naming_the_host(franky):
    fake, _ = franky
    fake.state.connect_error = RuntimeError("connection refused")
    with pytest.raises(BackendUnavailable, match=r"^cannot connect to the Franka at 172\.16\.0\.2: "
                                                 r"RuntimeError\('connection refused'\)$"):
        franky_arm(franky)


def test_a_franka_that_refuses_connections_for_a_while_is_tried_again_until_the_connect_timeout(franky):
    from ladder_ros.robots.franky_arm import CONNECT_RETRY_S, connect_franky_arm

    fake, arms = franky
    fake.state.connect_error = RuntimeError("connection refused")  # still booting (franky-sim loading its model)
    now, refused, listens_at = [0.0], [], [2.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= listens_at[0]:
            fake.state.connect_error = None  # it listens now

    kwargs = dict(host="172.16.0.2", model=franka.get_model("panda"), dynamics_factor=0.5, gripper_speed_m_s=0.05,
                  gripper_force_n=20.0, max_width_m=0.08, realtime=False)
    arms.append(connect_franky_arm(5.0, sleep=sleep, clock=lambda: now[0], on_retry=refused.append, **kwargs))
    assert len(refused) == round(2.0 / CONNECT_RETRY_S) and now[0] == pytest.approx(2.0)
    fake.state.connect_error, listens_at[0] = RuntimeError("connection refused"), float("inf")  # never listens
    with pytest.raises(BackendUnavailable, match=r"^cannot connect to the Franka at 172\.16\.0\.2: "):
        connect_franky_arm(3.0, sleep=sleep, clock=lambda: now[0], **kwargs)
    assert now[0] == pytest.approx(2.0 + 3.0 - CONNECT_RETRY_S, abs=CONNECT_RETRY_S)


def test_franky_missing_is_named_with_what_to_install(monkeypatch):
    from ladder_ros.robots.franky_arm import MISSING_FRANKY, import_franky

    monkeypatch.setitem(sys.modules, "franky", None)
    with pytest.raises(BackendUnavailable) as info:
        import_franky()
    assert str(info.value).startswith(MISSING_FRANKY + " (")


def test_a_franka_reading_converts_franky_s_state_and_the_gripper_width(franky):
    fake, _ = franky
    fake.state.width_error = RuntimeError("not homed")
    arm = franky_arm(franky)
    wait_for(lambda: arm.gripper.error is not None, "the gripper worker's first failed read")
    reading = arm.read()
    assert (reading.aperture, reading.width_m, reading.width_age_s) == (None, None, None)
    assert np.allclose(reading.joints, np.arange(7) * 0.1) and np.allclose(reading.velocities, np.arange(7) * 0.01)
    expected = np.eye(4)
    expected[:3, 3] = [0.3, 0.0, 0.5]
    assert np.allclose(reading.ee_pose, expected)
    pose = fake.state.robots[-1].current_cartesian_state.pose.end_effector_pose
    pose.quaternion = np.array([0.0, 0.0, math.sin(0.3), math.cos(0.3)])  # franky: x, y, z, w
    assert np.allclose(arm.read().ee_pose[:3, :3], quaternion_to_matrix(np.array([math.cos(0.3), 0, 0,
                                                                                  math.sin(0.3)])))
    fake.state.width_error, fake.state.width_m = None, 0.02
    wait_for(lambda: arm.gripper.latest() is not None, "a gripper width read")
    reading = arm.read()
    assert reading.width_m == 0.02 and reading.aperture == pytest.approx(0.25) and 0.0 <= reading.width_age_s < 10.0


def test_a_target_is_streamed_as_two_waypoints_the_via_point_passed_within_a_period(franky):
    fake, _ = franky
    arm = franky_arm(franky)
    via, velocity, target = np.full(7, 0.1), np.full(7, 0.2), np.full(7, 0.3)
    arm.send_joints(via, velocity, target, 1.0 / 15.0)
    motion, asynchronous = fake.state.robots[-1].moves[-1]
    assert asynchronous is True and motion.return_when_finished is False and len(motion.waypoints) == 2
    reach, rest = motion.waypoints
    assert np.array_equal(reach.target.position, via) and np.array_equal(reach.target.velocity, velocity)
    assert reach.minimum_time == ("ms", 67) and rest.minimum_time is None
    assert np.array_equal(rest.target.position, target) and rest.target.velocity is None
    arm.send_joints(via, velocity, target, 0.0001)
    assert fake.state.robots[-1].moves[-1][0].waypoints[0].minimum_time == ("ms", 1)


def test_stopping_polling_and_recovery_say_what_happened(franky):
    fake, _ = franky
    arm = franky_arm(franky)
    robot = fake.state.robots[-1]
    fake.state.in_control = False
    assert arm.stop() == "no motion running: the arm rests where it is" and robot.moves == []
    fake.state.in_control = True
    assert arm.stop() == "braking to rest (franky JointStopMotion)"
    assert robot.moves[-1][0].kind == "stop" and robot.moves[-1][1] is True
    assert arm.poll() is None
    fake.state.motion_error = RuntimeError("cartesian_reflex")
    assert arm.poll() == "RuntimeError: cartesian_reflex" and arm.poll() is None
    arm.gripper.error = "gripper: RuntimeError('usb')"
    assert arm.poll() == "gripper: RuntimeError('usb')" and arm.poll() is None and arm.gripper.error is None
    assert arm.recover() == "franky error recovery succeeded" and robot.recoveries == 2
    fake.state.recover_ok = False
    with pytest.raises(LadderError, match="^franky's error recovery reported failure$"):
        arm.recover()


def test_closing_stops_the_arm_and_the_gripper_worker_and_drops_the_connections(franky):
    fake, _ = franky
    arm = franky_arm(franky)
    gripper, robot = arm.gripper, fake.state.robots[-1]
    fake.state.stop_error = RuntimeError("connection lost")  # the connection may be gone: closing still ends
    arm.close()
    assert robot.stopped and arm.robot is None and gripper.gripper is None and not gripper._thread.is_alive()


def test_the_gripper_worker_opens_by_moving_closes_by_grasping_and_skips_repeats(franky):
    fake, _ = franky
    fake.state.width_m = 0.04
    arm = franky_arm(franky)
    hand = fake.state.grippers[-1]
    wait_for(lambda: arm.gripper.latest() is not None, "a gripper width read")
    arm.send_gripper(1.0)  # open: a move to the full width
    wait_for(hand.sent.is_set, "the gripper's move")
    assert hand.calls == [("move", 0.08, 0.05)] and arm.gripper.moves == 1
    hand.sent.clear()
    arm.send_gripper(0.97)  # within the tolerance of the last command: not sent again
    arm.send_gripper(0.0)  # close below the width the fingers are at: grasp whatever is there
    wait_for(hand.sent.is_set, "the gripper's grasp")
    assert hand.calls[-1] == ("grasp", 0.0, 0.05, 20.0, 1.0, 1.0) and len(hand.calls) == 2
    fake.state.reach = False
    hand.sent.clear()
    arm.send_gripper(0.5)
    wait_for(hand.sent.is_set, "the gripper's move")
    wait_for(lambda: arm.gripper.error is not None, "the gripper's error")
    assert arm.gripper.error == "gripper: the move to 0.0400 m did not reach its command"
    assert len(arm.gripper.read_times) <= 200 and all(t >= 0 for t in arm.gripper.read_times)


def test_a_failing_width_read_is_reported_and_the_worker_keeps_reading(franky):
    fake, _ = franky
    fake.state.width_error = RuntimeError("usb")
    arm = franky_arm(franky)
    wait_for(lambda: arm.gripper.error == "gripper: RuntimeError('usb')", "the read error")
    fake.state.width_error = None
    wait_for(lambda: arm.gripper.latest() is not None, "a read after the error")


def test_a_refusing_franka_is_tried_every_half_second_up_to_and_at_its_deadline(franky):
    from ladder_ros.robots.franky_arm import CONNECT_RETRY_S, connect_franky_arm

    fake, _ = franky
    fake.state.connect_error = RuntimeError("connection refused")
    now, naps, refused = [10.0], [], []

    def sleep(seconds):
        naps.append(seconds)
        now[0] += seconds

    kwargs = dict(host="172.16.0.2", model=franka.get_model("panda"), dynamics_factor=0.5, gripper_speed_m_s=0.05,
                  gripper_force_n=20.0, max_width_m=0.08, realtime=False)
    with pytest.raises(BackendUnavailable) as given_up:
        connect_franky_arm(3.0, sleep=sleep, clock=lambda: now[0], on_retry=refused.append, **kwargs)
    # tries at 10.0, 10.5, ... 13.0: the last one exactly at the deadline, none after it
    assert now[0] == 13.0 and naps == [CONNECT_RETRY_S] * 6 and CONNECT_RETRY_S == 0.5
    assert len(refused) == 6 and all(type(e) is BackendUnavailable for e in refused)
    assert [str(e) for e in refused] == [str(given_up.value)] * 6 == [
        "cannot connect to the Franka at 172.16.0.2: RuntimeError('connection refused')"] * 6


def test_franky_missing_is_refused_at_once_not_retried_until_the_connect_timeout(monkeypatch):
    from ladder_ros.robots.franky_arm import MISSING_FRANKY, connect_franky_arm

    monkeypatch.setitem(sys.modules, "franky", None)
    naps, refused = [], []
    with pytest.raises(BackendUnavailable, match=f"^{re.escape(MISSING_FRANKY)}"):
        connect_franky_arm(30.0, sleep=naps.append, clock=lambda: 0.0, on_retry=refused.append, host="h",
                           model=franka.get_model("fr3"), dynamics_factor=1.0, gripper_speed_m_s=0.05,
                           gripper_force_n=20.0, max_width_m=0.08, realtime=False)
    assert naps == [] and refused == []


def test_the_hand_is_reached_at_the_arm_s_host_and_its_width_range_names_its_source(franky):
    fake, _ = franky
    arm = franky_arm(franky, host="10.0.0.7", max_width_m=0.07)
    assert fake.state.grippers[-1].host == "10.0.0.7" and arm.gripper.gripper is fake.state.grippers[-1]
    assert arm.gripper.range == ApertureRange(0.0, 0.07, source="Franka Hand opening width")


@pytest.mark.parametrize("period_s, ms", [(1.0, 1000), (0.2, 200), (1 / 15, 67), (0.0666, 67), (0.0004, 1)])
def test_the_via_point_s_minimum_time_is_the_period_in_whole_milliseconds_at_least_one(franky, period_s, ms):
    fake, _ = franky
    arm = franky_arm(franky)
    arm.send_joints(np.zeros(7), np.zeros(7), np.zeros(7), period_s)
    assert fake.state.robots[-1].moves[-1][0].waypoints[0].minimum_time == ("ms", ms)


def _new_worker(fake, tolerance=0.05):
    from ladder_ros.robots.franky_arm import GripperWorker

    return GripperWorker(fake.Gripper("172.16.0.2"), ApertureRange(0.0, 0.08), 0.05, 20.0, tolerance=tolerance)


@contextlib.contextmanager
def _worker(fake, tolerance=0.05):
    """A gripper worker on the fake's hand, closed when the test is done with it."""
    worker = _new_worker(fake, tolerance)
    try:
        yield worker
    finally:
        worker.close()


def _reads_after(hand, count):
    """Wait until the worker has read the width ``count`` more times (each read is followed by its command check)."""
    start = hand.reads
    wait_for(lambda: hand.reads >= start + count, f"{count} more width reads")


def test_a_fresh_gripper_worker_reads_on_a_named_daemon_thread_and_moves_nothing_until_told(franky):
    fake, _ = franky
    with _worker(fake) as worker:
        assert worker.error is None and worker.moves == 0
        _reads_after(fake.state.grippers[-1], 3)
        assert fake.state.grippers[-1].calls == [] and worker.error is None and worker.moves == 0
        assert worker._thread.name == "franky-gripper" and worker._thread.daemon  # never holds the process up
        assert worker.latest()[0] == 0.08


def test_a_command_exactly_the_tolerance_from_the_last_is_not_sent_again_and_each_move_is_counted(franky):
    fake, _ = franky
    fake.state.width_m = 0.02  # the fingers at a quarter open
    with _worker(fake, tolerance=0.25) as worker:  # 0.25 and the apertures below are exact in binary
        hand = fake.state.grippers[-1]
        wait_for(lambda: worker.latest() is not None, "a gripper width read")
        worker.command(0.5)
        wait_for(lambda: worker.moves == 1, "the first move")
        worker.command(0.75)  # exactly the tolerance away: not sent
        _reads_after(hand, 2)
        worker.command(0.25)  # exactly the tolerance away on the other side: not sent either
        _reads_after(hand, 2)
        assert hand.calls == [("move", 0.04, 0.05)] and worker.moves == 1
        worker.command(0.2)  # past it, below the fingers' width: a grasp
        wait_for(lambda: worker.moves == 2, "the second command")
        assert hand.calls[-1] == ("grasp", 0.2 * 0.08, 0.05, 20.0, 1.0, 1.0) and worker.error is None


def test_a_grasp_that_does_not_reach_its_command_is_reported_as_a_grasp(franky):
    fake, _ = franky
    fake.state.reach = False
    with _worker(fake) as worker:
        wait_for(lambda: worker.latest() is not None, "a gripper width read")
        worker.command(0.0)
        wait_for(lambda: worker.error is not None, "the gripper's error")
        assert worker.error == "gripper: the grasp to 0.0000 m did not reach its command" and worker.moves == 1


def test_the_worker_keeps_the_last_200_read_times_each_the_duration_of_one_read(franky):
    fake, _ = franky
    began = time.monotonic()
    with _worker(fake) as worker:
        hand = fake.state.grippers[-1]
        wait_for(lambda: hand.reads >= 5, "five width reads")
        assert 1 <= len(worker.read_times) <= hand.reads
        wait_for(lambda: hand.reads >= 250, "250 width reads")
        times, elapsed = list(worker.read_times), time.monotonic() - began
        assert len(times) == 200 and all(0.0 < t <= elapsed for t in times)


class _RecordingStop(threading.Event):
    """The worker's stop event, remembering how long each wait was for."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return super().wait(timeout)


def test_a_failed_width_read_is_tried_again_after_a_tenth_of_a_second(franky):
    fake, _ = franky
    fake.state.width_error = RuntimeError("usb")
    with _worker(fake) as worker:
        stop = _RecordingStop()
        worker._stop = stop  # the loop reads it on every turn
        wait_for(lambda: len(stop.waits) >= 2, "two pauses after failed reads")
        assert set(stop.waits) == {0.1} and worker.error == "gripper: RuntimeError('usb')"


def test_closing_returns_while_a_width_read_hangs_after_waiting_two_seconds_for_it(franky):
    fake, _ = franky
    hang = threading.Event()
    worker = _new_worker(fake)
    thread, joins = worker._thread, []

    class RecordingThread:
        def join(self, timeout=None):
            joins.append(timeout)
            thread.join(timeout)

    try:
        wait_for(lambda: worker.latest() is not None, "a gripper width read")
        fake.state.width_hang = hang
        reads = fake.state.grippers[-1].reads
        wait_for(lambda: fake.state.grippers[-1].reads > reads, "a read that hangs")
        worker._thread = RecordingThread()
        closed = threading.Thread(target=worker.close, daemon=True)
        closed.start()
        closed.join(30.0)
        assert not closed.is_alive(), "close() did not return while the width read hung"
        assert joins == [2.0] and thread.is_alive()  # the hung read is left behind, on a daemon thread
    finally:
        hang.set()
        thread.join(10.0)
    assert not thread.is_alive()


# ------------------------------------------------------------------ thread scheduling around franky
class ThreadSchedulers:
    """Each thread's scheduling as the kernel keeps it (per thread), for the fake franky to change."""

    def __init__(self, monkeypatch):
        from ladder_ros.robots import thread_scheduling as ts

        self.ts = ts
        self.normal = ts.Scheduling(os.SCHED_OTHER, 0)
        self.by_thread: dict[int, object] = {}
        self.refuse = False
        monkeypatch.setattr(ts, "current", lambda: self.by_thread.get(threading.get_ident(), self.normal))
        monkeypatch.setattr(ts, "apply", self.apply)

    def apply(self, scheduling):
        if self.refuse:
            raise PermissionError(1, "Operation not permitted")
        self.by_thread[threading.get_ident()] = scheduling

    def here(self):
        return self.ts.current()


def libfranka_realtime(schedulers, priority=99):
    """What libfranka's Robot constructor does to the thread that calls it (SCHED_FIFO at the highest priority)."""
    return lambda: schedulers.by_thread.__setitem__(threading.get_ident(),
                                                    schedulers.ts.Scheduling(os.SCHED_FIFO, priority))


def test_the_connecting_thread_keeps_its_scheduling_and_each_motion_start_lends_libfrankas_to_the_control_thread(
        franky, monkeypatch):
    fake, _ = franky
    schedulers = ThreadSchedulers(monkeypatch)
    fake.state.on_connect = libfranka_realtime(schedulers)
    arm = franky_arm(franky)
    fifo99 = schedulers.ts.Scheduling(os.SCHED_FIFO, 99)
    assert schedulers.here() == schedulers.normal  # the driver's thread is back to what it was
    assert arm.control_scheduling == fifo99
    assert arm.scheduling == ("franky's control thread: SCHED_FIFO priority 99 (libfranka's choice); the driver's "
                              "thread kept SCHED_OTHER")
    seen = []
    robot = fake.state.robots[-1]
    robot.move_hook = lambda motion: seen.append(schedulers.here())
    arm.send_joints(np.zeros(7), np.zeros(7), np.zeros(7), 1 / 15)
    arm.stop()
    assert seen == [fifo99, fifo99]  # the thread franky starts for the motion inherits this
    assert schedulers.here() == schedulers.normal
    # The gripper's worker thread was started after the connecting thread was put back.
    assert arm.gripper._thread.is_alive()


def test_a_connection_that_changes_no_scheduling_lends_nothing(franky, monkeypatch):
    fake, _ = franky
    schedulers = ThreadSchedulers(monkeypatch)
    arm = franky_arm(franky)
    assert arm.control_scheduling is None
    assert arm.scheduling == "franky's control thread: scheduled as the driver's thread (libfranka changed nothing)"
    seen = []
    fake.state.robots[-1].move_hook = lambda motion: seen.append(schedulers.here())
    arm.send_joints(np.zeros(7), np.zeros(7), np.zeros(7), 1 / 15)
    assert seen == [schedulers.normal] and schedulers.by_thread == {}


def test_a_refused_connection_also_puts_the_thread_back(franky, monkeypatch):
    fake, _ = franky
    schedulers = ThreadSchedulers(monkeypatch)
    fake.state.on_connect = libfranka_realtime(schedulers)
    fake.state.connect_error = RuntimeError("Connection refused")
    with pytest.raises(interbotix_arm.BackendUnavailable):
        franky_arm(franky)
    assert schedulers.here() == schedulers.normal


def test_a_thread_that_cannot_be_put_back_is_reported_and_a_refused_lend_runs_the_call_as_the_thread_is(
        franky, monkeypatch):
    fake, _ = franky
    schedulers = ThreadSchedulers(monkeypatch)

    def realtime_then_refuse():
        libfranka_realtime(schedulers, priority=80)()
        schedulers.refuse = True

    fake.state.on_connect = realtime_then_refuse
    arm = franky_arm(franky)
    assert arm.scheduling == ("franky's control thread: SCHED_FIFO priority 80 (libfranka's choice); the driver's "
                              "thread kept SCHED_OTHER; could not put the thread back to SCHED_OTHER: [Errno 1] "
                              "Operation not permitted")
    schedulers.by_thread.clear()  # (the thread as an operator would have reset it)
    seen = []
    fake.state.robots[-1].move_hook = lambda motion: seen.append(schedulers.here())
    arm.send_joints(np.zeros(7), np.zeros(7), np.zeros(7), 1 / 15)
    assert seen == [schedulers.normal]  # the system refused the lend: the motion starts as the thread is


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="per-thread scheduling calls are Linux's")
def test_kept_and_lent_on_this_machines_threads():
    """The real system calls: a thread started inside ``lent`` inherits the setting; ``kept`` undoes a change."""
    from ladder_ros.robots import thread_scheduling as ts

    def in_thread(fn):
        out = []
        worker = threading.Thread(target=lambda: out.append(fn()))
        worker.start()
        worker.join(10)
        return out[0]

    def scenario():
        before = ts.current()
        fifo = ts.Scheduling(os.SCHED_FIFO, 1)
        try:  # whether this machine lets the process use real-time scheduling (root, or an rtprio limit)
            ts.apply(fifo)
            ts.apply(before)
            allowed = True
        except OSError:
            allowed = False
        with ts.lent(fifo):
            inherited = in_thread(ts.current)
        after_lend = ts.current()
        with ts.kept() as record:
            if allowed:
                ts.apply(fifo)
        return before, allowed, inherited, after_lend, record, ts.current()

    before, allowed, inherited, after_lend, record, after_kept = in_thread(scenario)
    assert after_lend == before and after_kept == before
    if allowed:
        assert inherited == ts.Scheduling(os.SCHED_FIFO, 1)
        assert record.set_by_call == ts.Scheduling(os.SCHED_FIFO, 1) and record.restore_error == ""
    else:
        assert inherited == before and record.set_by_call is None


def test_every_motion_starts_asynchronously_and_is_the_one_asked_for(franky, monkeypatch):
    fake, _ = franky
    ThreadSchedulers(monkeypatch)
    arm = franky_arm(franky)
    robot = fake.state.robots[-1]
    arm.send_joints(np.zeros(7), np.zeros(7), np.ones(7), 1 / 15)
    arm.stop()
    (stream, stream_async), (stop, stop_async) = robot.moves
    assert stream_async is True and stop_async is True  # the driver's thread never waits for the arm
    assert stream.kind == "waypoints" and np.array_equal(stream.waypoints[-1].target.position, np.ones(7))
    assert stop.kind == "stop"


def test_the_scheduling_report_and_names():
    from ladder_ros.robots import thread_scheduling as ts
    from ladder_ros.robots.franky_arm import scheduling_report

    fifo = ts.Scheduling(os.SCHED_FIFO, 5)
    assert fifo.describe() == "SCHED_FIFO priority 5" and fifo.realtime
    assert ts.Scheduling(os.SCHED_OTHER, 0).describe() == "SCHED_OTHER"
    assert ts.Scheduling(12345, 0).describe() == "policy 12345"  # a policy this module has no name for
    assert scheduling_report(ts.Kept(before=None, set_by_call=fifo)) == (
        "franky's control thread: SCHED_FIFO priority 5 (libfranka's choice); the driver's thread kept its own")
