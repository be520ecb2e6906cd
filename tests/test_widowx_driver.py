"""The WidowX driver against the WidowX twin: Interbotix's API surface with its real semantics, no hardware.

The driver runs with ``interbotix_api: twin`` (the code that runs on the arm, only the API's import
differs) over an in-process xs_sdk whose motors follow Dynamixel time-based profiles
(``ladder_ros/instruments/widowx_twin``); each test registers a fresh xs_sdk and can inject a stall, a motor
error or a service that never answers. The driver and a probe (playing the policy and the operator)
share one executor; the API's own node spins in the thread ``robot_startup`` starts, as on the robot.
Waits end on what they wait for; times are measured by benchmarks/bench_robot_safety.py, not here.
"""

import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.core.errors import LadderError  # noqa: E402
from ladder_ros.core.safety import ACTION_AXES  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.robots import dynamixel as dxl  # noqa: E402
from ladder_ros.robots import wx250s  # noqa: E402
from tests.driver_probe import DriverProbe  # noqa: E402

pytestmark = pytest.mark.ros
NS = "widowx"
CHAIN = wx250s.chain()
PROFILE = dxl.ProfileRegisters(250, 100)  # moving_time_s 0.25, accel_time_s 0.1 (config/widowx_params.yaml)


@pytest.fixture
def rig():
    from ladder_ros.nodes.driver.widowx import WidowXDriverNode
    from ladder_ros.instruments import widowx_twin
    from ladder_ros.instruments.widowx_twin import xs_sdk

    rclpy.init()
    executor = SingleThreadedExecutor()
    nodes = []
    try:
        def build(sdk=None, ready=True, **overrides):
            sdk = xs_sdk.register("wx250s", sdk or xs_sdk.SimulatedXsSdk())
            params = [Parameter("clock_mode", value="wall_clock"), Parameter("interbotix_api", value="twin"),
                      Parameter("connect_timeout_s", value=30.0),
                      *(Parameter(k, value=v) for k, v in overrides.items())]
            driver = WidowXDriverNode(namespace=NS, parameter_overrides=params)
            probe = DriverProbe(NS)
            for node in (driver, probe):
                executor.add_node(node)
                nodes.append(node)
            probe.spin_until(executor, lambda: probe.states and probe.joint_states and probe.poses, 20,
                             "the driver's first state")
            if ready:
                probe.spin_until(executor, lambda: probe.state().get("not_ready") == "", 20,
                                 "the motors' profile written and read back")
            return driver, probe, sdk
        yield executor, build
    finally:
        for node in nodes:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        widowx_twin.reset()
        rclpy.try_shutdown()


def action(dx=0.0, dy=0.0, dz=0.0, droll=0.0, dpitch=0.0, dyaw=0.0, gripper=1.0):
    return [dx, dy, dz, droll, dpitch, dyaw, gripper]


def act(probe, executor, values, steps=1, period=0.2, **send):
    for _ in range(steps):
        probe.send(ACTION_AXES, values, **send)
        probe.spin_for(executor, period)


def home(probe, executor, driver):
    reply = probe.arm(executor)
    assert reply.success, reply.message
    reply = probe.trigger(executor, topics.HOME_SERVICE)
    assert reply.success, reply.message
    neutral = np.array(wx250s.NEUTRAL_JOINTS)
    probe.spin_until(executor, lambda: np.allclose(probe.latest_joints(), neutral, atol=2e-3), 30, "the home pose")
    # the last waypoints of the homing path may still be on their way once the pose is within tolerance
    probe.spin_until(executor, lambda: not driver.homing.active, 30, "the homing path to end")


def level(name):
    return getattr(DiagnosticStatus, name)


def test_missing_interbotix_api_is_one_clear_error():
    rclpy.init()
    try:
        from ladder_ros.nodes.driver.widowx import WidowXDriverNode
        with pytest.raises(LadderError, match="interbotix_xs_modules.*not on PyPI.*interbotix_api: twin"):
            WidowXDriverNode(namespace=NS, parameter_overrides=[Parameter("clock_mode", value="wall_clock")])
    finally:
        rclpy.try_shutdown()
    run = subprocess.run([sys.executable, "-m", "ladder_ros.nodes.driver.widowx", "--ros-args", "-p",
                          "clock_mode:=wall_clock"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "source that workspace" in run.stderr and "Traceback" not in run.stderr


def test_starts_disarmed_with_the_profile_written_and_read_back_and_moves_nothing_in_dry_run(rig):
    executor, build = rig
    driver, probe, sdk = build()
    state = probe.state()
    assert state["armed"] == "false" and state["estop"] == "false" and state["interventions"] == "0"
    assert probe.states[-1].level == level("WARN")
    # the API's constructor wrote nothing; the driver wrote both registers and read them back
    writes = [(r.reg, r.value) for r in sdk.calls_of("set_motor_registers")]
    assert writes == [("Profile_Velocity", 250), ("Profile_Acceleration", 100)]
    assert [r.reg for r in sdk.calls_of("get_motor_registers")][:2] == ["Profile_Velocity", "Profile_Acceleration"]
    assert set(sdk.motors.profile().values()) == {PROFILE}
    names, joints = probe.joint_states[-1][1], probe.latest_joints()
    assert names == wx250s.JOINT_NAMES and np.allclose(joints, wx250s.SLEEP_JOINTS, atol=1e-6)
    assert probe.latest_aperture() == 1.0  # fingers at 0.037 m, past Bridge's open 0.035 m: clipped
    assert np.allclose(probe.poses[-1][1], CHAIN.forward(joints), atol=1e-9)
    act(probe, executor, action(dz=0.02, gripper=-1.0), steps=5)
    probe.spin_until(executor, lambda: len(probe.commands) >= 5, 10, "five dry-run commands")
    assert sdk.calls_of("commands/joint_group") == [] and sdk.calls_of("commands/joint_single") == []
    assert np.allclose(probe.latest_joints(), wx250s.SLEEP_JOINTS, atol=1e-6)
    assert int(probe.state()["dry_run_commands"]) >= 5


def test_arming_waits_for_the_profile_check_and_a_wedged_xs_sdk_is_a_fault(rig):
    from ladder_ros.instruments.widowx_twin import xs_sdk

    executor, build = rig
    sdk = xs_sdk.SimulatedXsSdk()
    hang = sdk.hang("set_motor_registers")  # the first register write never answers: xs_sdk stalls behind it
    driver, probe, _ = build(sdk=sdk, ready=False)
    assert hang.entered.wait(10)
    reply = probe.arm(executor)
    assert not reply.success and "checking the arm" in reply.message  # the check is still running
    # the driver keeps publishing, notices that the arm's state stopped coming, and says so
    probe.spin_until(executor, lambda: probe.state().get("recovery_required", "").startswith("vendor_timeout"), 10,
                     "the stale arm state noticed")
    assert "vendor_timeout" in probe.kinds() and len(probe.joint_states) > 2
    hang.release()
    probe.spin_until(executor, lambda: probe.state().get("not_ready") == "", 10, "the profile check")
    reply = probe.arm(executor)
    assert not reply.success and "robot/recover" in reply.message
    assert probe.trigger(executor, topics.RECOVER_SERVICE).success
    probe.spin_until(executor, lambda: "recovered" in probe.state().get("detail", ""), 10, "the recovery")
    assert probe.arm(executor).success


def test_arming_is_refused_when_the_motors_read_the_profile_back_otherwise(rig):
    from ladder_ros.instruments.widowx_twin import xs_sdk

    executor, build = rig
    sdk = xs_sdk.SimulatedXsSdk()
    original = sdk.motors.set_registers

    def lossy(cmd_type, name, reg, value):  # an elbow whose Profile_Velocity does not take the write
        original(cmd_type, name, reg, value)
        if reg == dxl.PROFILE_VELOCITY:
            sdk.motors.arm["elbow"].registers[reg] = 2000
    sdk.motors.set_registers = lossy
    driver, probe, _ = build(sdk=sdk, ready=False)
    probe.spin_until(executor, lambda: "profile reads back" in probe.state().get("not_ready", ""), 10,
                     "the profile mismatch")
    assert "elbow 2000/100 ms" in probe.state()["not_ready"]
    reply = probe.arm(executor)
    assert not reply.success and "elbow 2000/100 ms" in reply.message


def test_armed_the_arm_follows_bridge_deltas_and_the_gripper_closes_and_opens(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    start = CHAIN.forward(probe.latest_joints())[:3, 3]
    act(probe, executor, action(dx=0.02, dz=-0.01), steps=5)
    expected = start + np.array([0.10, 0.0, -0.05])
    probe.spin_until(executor, lambda: np.allclose(probe.poses[-1][1][:3, 3], expected, atol=3e-3), 10,
                     "the end effector 10 cm forward and 5 cm down")
    act(probe, executor, action(gripper=-1.0), steps=3)
    # The stock fingers stop at 0.015 m (URDF), which Bridge's 0.010..0.035 m travel reads as 0.2
    closed = (0.015 - 0.010) / 0.025
    probe.spin_until(executor, lambda: abs(probe.latest_aperture() - closed) < 1e-6, 10, "the gripper closed")
    act(probe, executor, action(gripper=1.0), steps=3)
    probe.spin_until(executor, lambda: probe.latest_aperture() == 1.0, 10, "the gripper open")
    assert len(sdk.calls_of("set_motor_registers")) == 2  # the profile, once at start: never per command
    pwm = [c.cmd for c in sdk.calls_of("commands/joint_single")]
    assert -250.0 in pwm and 250.0 in pwm  # the API's PWM at gripper_pressure 0.5
    probe.spin_until(executor, lambda: any(d.get("ik_p50_ms") for d in probe.diagnostics), 5, "diagnostics")
    diagnostics = [d for d in probe.diagnostics if "jitter_p99_ms" in d][-1]
    assert diagnostics["interbotix_api"] == "twin" and float(diagnostics["arm_state_age_ms"]) >= 0.0
    assert set(probe.kinds()) <= {"watchdog"}  # the pauses between the test's steps, nothing else


def test_the_vendor_api_gets_its_own_node_and_its_service_waits_leave_no_timers_behind(rig):
    executor, build = rig
    driver, probe, sdk = build(health_poll_s=0.1)
    assert driver.arm.node_name == f"/{NS}/widowx_driver_interbotix"
    polls = len(sdk.calls_of("get_motor_registers"))
    probe.spin_until(executor, lambda: len(sdk.calls_of("get_motor_registers")) >= polls + 12, 20,
                     "three health polls")
    probe.spin_until(executor, lambda: not driver.worker.busy, 10, "no vendor call in flight")
    # each service wait of the API created a 20 Hz Rate timer; none is left (the gripper's own timer is)
    rates = [t for t in driver.arm.node.timers if isinstance(getattr(t.callback, "__self__", None), threading.Event)]
    assert rates == [] and len(list(driver.arm.node.timers)) == 1


def test_a_launch_remapping_renames_the_driver_and_not_the_vendor_node(tmp_path):
    rclpy.init()
    watcher = rclpy.create_node("watcher")
    process = subprocess.Popen([sys.executable, "-m", "ladder_ros.nodes.driver.widowx", "--ros-args", "-r",
                                "__node:=widowx_driver", "-r", f"__ns:=/{NS}", "-p", "clock_mode:=wall_clock", "-p",
                                "interbotix_api:=twin"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        names = []
        while time.monotonic() < deadline:
            names = watcher.get_node_names_and_namespaces()
            if ("widowx_driver_interbotix", f"/{NS}") in names:
                break
            time.sleep(0.2)
        assert ("widowx_driver_interbotix", f"/{NS}") in names, names
        assert names.count(("widowx_driver", f"/{NS}")) == 1
        assert not any(name == "interbotix_robot_manipulation" for name, _ in names)
    finally:
        process.terminate()
        process.wait(timeout=30)
        watcher.destroy_node()
        rclpy.try_shutdown()


def test_bad_actions_are_refused_counted_and_published_and_the_arm_holds(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    held = probe.latest_joints().copy()
    cases = [(action(dx=float("nan")), "non_finite"), (action(dy=0.2), "translation_limit"),
             (action(dyaw=2.0), "rotation_limit"), (action(gripper=0.3), "gripper_domain")]
    for values, kind in cases:
        act(probe, executor, values, steps=1, period=0.25)
        probe.spin_until(executor, lambda: kind in probe.kinds(), 5, f"a {kind} intervention")
    act(probe, executor, action(dx=0.01), steps=1, period=0.25, age_s=2.0)  # stamped 2 s ago
    probe.spin_until(executor, lambda: "stale" in probe.kinds(), 5, "a stale intervention")
    act(probe, executor, action(dx=0.01), steps=1, period=0.25, age_s=-1.0)  # stamped 1 s ahead
    probe.spin_until(executor, lambda: "future_stamp" in probe.kinds(), 5, "a future_stamp intervention")
    probe.send(ACTION_AXES, action(dx=0.01))
    probe.send(ACTION_AXES, action(dx=0.01))  # a second action in the same period
    probe.spin_until(executor, lambda: "duplicate" in probe.kinds(), 5, "a duplicate intervention")
    probe.spin_for(executor, 0.5)
    doc = probe.interventions[-1]
    assert doc.counts["non_finite"] == 1 and doc.counts["translation_limit"] == 1 and doc.counts["stale"] == 1
    assert doc.counts["future_stamp"] == 1
    assert doc.source.endswith("widowx_driver") and "gripper" in [d.axis for d in probe.interventions]
    assert int(probe.state()["interventions"]) >= 7
    # only the one accepted action (dx=0.01) moved the arm, by one centimetre
    moved = CHAIN.forward(probe.latest_joints())[:3, 3] - CHAIN.forward(held)[:3, 3]
    assert np.linalg.norm(moved) < 0.012


def test_the_workspace_box_clips_the_target_and_counts_it(rig):
    executor, build = rig
    driver, probe, sdk = build(workspace_low=[0.10, -0.25, 0.20], workspace_high=[0.45, 0.25, 0.35])
    home(probe, executor, driver)
    act(probe, executor, action(dz=-0.04), steps=4)  # 16 cm down from 0.247 m: the floor is 0.20 m
    probe.spin_until(executor, lambda: "workspace" in probe.kinds(), 5, "a workspace intervention")
    probe.spin_until(executor, lambda: abs(probe.poses[-1][1][2, 3] - 0.20) < 3e-3, 10, "the arm at the floor")
    assert probe.interventions[-1].axis == "z"


def motors_at_rest_at(sdk):
    """When (monotonic s) the twin's motors finish their current moves: each joint's profile end."""
    return max(m.move.end_time if m.move is not None else 0.0 for m in sdk.motors.arm.values())


def test_an_estop_mid_motion_brings_the_motors_to_rest_within_two_periods_and_says_so_only_then(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    for _ in range(3):
        act(probe, executor, action(dx=0.04, dz=0.02))
    assert np.max(np.abs(sdk.motors.arm_state()[1])) > 0.1  # moving
    sent = len(sdk.calls_of("commands/joint_group"))
    reply = probe.trigger(executor, topics.ESTOP_SERVICE)
    assert reply.success and "latched" in reply.message
    probe.spin_until(executor, lambda: len(sdk.calls_of("commands/joint_group")) > sent, 5, "the hold at xs_sdk")
    hold_at = [t for t, name, _ in list(sdk.calls) if name == "commands/joint_group"][-1]
    rest_at = motors_at_rest_at(sdk)
    assert rest_at - hold_at <= 2 * driver.period  # the hold's profile (0.25 s) ends within two 0.2 s periods
    probe.spin_until(executor, lambda: probe.state().get("estop") == "true", 5, "the e-stop state")
    assert probe.state()["arm_at_rest"] in ("false", "true")
    probe.spin_until(executor, lambda: probe.state().get("arm_at_rest") == "true", 10, "the state saying at rest")
    said_at = time.monotonic()
    assert said_at >= rest_at and np.all(sdk.motors.arm_state()[1] == 0.0)  # said only once it was true
    assert "the arm is at rest" in probe.state()["detail"] and "held at the measured joints" in probe.state()["stop"]
    after = len(sdk.calls_of("commands/joint_group"))
    act(probe, executor, action(dx=0.03), steps=3)
    assert len(sdk.calls_of("commands/joint_group")) == after  # nothing sent while latched
    assert not probe.arm(executor).success  # cannot arm while latched
    assert probe.trigger(executor, topics.ESTOP_RELEASE_SERVICE).success
    probe.spin_until(executor, lambda: probe.state().get("estop") == "false", 5, "the released state")
    assert probe.state()["armed"] == "false" and probe.states[-1].level == level("WARN")
    assert "estop" in probe.kinds()


def test_a_hold_the_api_refuses_escalates_to_torque_off_and_says_so(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    act(probe, executor, action(dx=0.03), steps=2)
    api_arm = driver.arm.bot.arm
    api_arm.set_joint_positions = lambda *args, **kwargs: False  # an API that refuses every hold
    assert probe.trigger(executor, topics.ESTOP_SERVICE).success
    probe.spin_until(executor, lambda: "hold_refused" in probe.kinds(), 5, "a hold_refused intervention")
    probe.spin_until(executor, lambda: "torqued off" in probe.state().get("stop", ""), 10, "the torque-off")
    assert sdk.motors.get_registers("group", "arm", dxl.TORQUE_ENABLE) == [0] * 6
    assert [(r.name, r.enable) for r in sdk.calls_of("torque_enable")] == [("arm", False)]
    state = probe.state()
    assert "refused" in state["stop"] and "holds" not in state["detail"].split(";")[0]
    assert state["recovery_required"].startswith("hold_refused")
    probe.spin_until(executor, lambda: probe.state().get("arm_at_rest") == "true", 10, "the arm at rest")


def test_a_stalled_joint_is_noticed_the_arm_holds_and_arming_waits_for_a_recovery(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    sdk.motors.stall("shoulder")
    act(probe, executor, action(dx=0.03, dz=0.03), steps=6)
    probe.spin_until(executor, lambda: "stall" in probe.kinds(), 10, "a stall intervention")
    stall = [d for d in probe.interventions if d.kind == "stall"][0]
    assert "shoulder stopped following its command" in stall.reason
    probe.spin_until(executor, lambda: probe.state().get("armed") == "false", 5, "disarmed")
    assert probe.states[-1].level == level("ERROR") and probe.state()["recovery_required"].startswith("stall")
    sent = len(sdk.calls_of("commands/joint_group"))
    act(probe, executor, action(dx=0.03), steps=2)
    assert len(sdk.calls_of("commands/joint_group")) == sent
    reply = probe.arm(executor)
    assert not reply.success and "robot/recover" in reply.message
    sdk.motors.release_stall("shoulder")  # the obstacle is taken away
    reply = probe.trigger(executor, topics.RECOVER_SERVICE)
    assert reply.success and "stays disarmed" in reply.message
    probe.spin_until(executor, lambda: "recovered" in probe.state().get("detail", ""), 10, "the recovery")
    assert probe.arm(executor).success


def test_a_motor_error_is_noticed_and_recovery_reboots_it_and_writes_the_profile_again(rig):
    executor, build = rig
    driver, probe, sdk = build(health_poll_s=0.2)
    home(probe, executor, driver)
    sdk.motors.inject_error("elbow")
    probe.spin_until(executor, lambda: "motor_error" in probe.kinds() or "stall" in probe.kinds(), 10,
                     "the fault noticed")
    probe.spin_until(executor, lambda: any("elbow: Hardware_Error_Status overload" in d.reason
                                           for d in probe.interventions), 10, "the motor error named")
    probe.spin_until(executor, lambda: probe.state().get("armed") == "false" and probe.state()["recovery_required"], 5,
                     "disarmed until recovered")
    reply = probe.trigger(executor, topics.RECOVER_SERVICE)
    assert reply.success
    probe.spin_until(executor, lambda: "recovered" in probe.state().get("detail", ""), 10, "the recovery")
    assert [(r.name, r.smart_reboot) for r in sdk.calls_of("reboot_motors")] == [("arm", True)]
    assert sdk.motors.get_registers("group", "arm", dxl.HARDWARE_ERROR_STATUS) == [0] * 6
    assert set(sdk.motors.profile().values()) == {PROFILE}  # the reboot reset the elbow's profile: written again
    assert [(r.reg, r.value) for r in sdk.calls_of("set_motor_registers")][-2:] == [
        ("Profile_Velocity", 250), ("Profile_Acceleration", 100)]
    assert "250/100 ms written and read back" in probe.state()["detail"]
    assert probe.arm(executor).success


def test_a_reboot_that_never_returns_leaves_the_estop_and_the_joint_states_working(rig):
    executor, build = rig
    driver, probe, sdk = build(recover_timeout_s=3.0)
    home(probe, executor, driver)
    hang = sdk.hang("reboot_motors")
    assert probe.trigger(executor, topics.RECOVER_SERVICE).success  # answered at once; the reboot runs off-loop
    assert hang.entered.wait(10), "the reboot never reached xs_sdk"
    seen = len(probe.joint_states)
    reply = probe.trigger(executor, topics.ESTOP_SERVICE)
    assert reply.success and not hang._released.is_set()  # answered while the reboot still hangs
    probe.spin_until(executor, lambda: len(probe.joint_states) >= seen + 5, 10, "joint states during the hang")
    probe.spin_until(executor, lambda: "vendor_timeout" in probe.kinds(), 10, "the recovery's deadline")
    assert "recovery" in [d for d in probe.interventions if d.kind == "vendor_timeout"][0].reason
    probe.spin_until(executor, lambda: probe.state().get("recovery_required", "").startswith("vendor_timeout"), 5,
                     "the fault in the state")
    hang.release()
    assert probe.trigger(executor, topics.ESTOP_RELEASE_SERVICE).success
    reply = probe.trigger(executor, topics.RECOVER_SERVICE)
    assert reply.success
    probe.spin_until(executor, lambda: "recovered" in probe.state().get("detail", ""), 20, "a second recovery")
    assert probe.arm(executor).success


def test_a_gripper_that_does_not_close_is_a_fault(rig):
    executor, build = rig
    driver, probe, sdk = build(gripper_timeout_s=1.0)
    home(probe, executor, driver)
    sdk.motors.inject_error("gripper", bits=4)  # overheated: the fingers no longer move
    act(probe, executor, action(gripper=-1.0), steps=2)
    probe.spin_until(executor, lambda: "gripper_fault" in probe.kinds() or "motor_error" in probe.kinds(), 10,
                     "the gripper fault")
    probe.spin_until(executor, lambda: probe.state().get("armed") == "false", 5, "disarmed")
    assert probe.state()["recovery_required"]


def test_the_watchdog_holds_the_arm_when_actions_stop(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    act(probe, executor, action(dx=0.02), steps=3)
    probe.spin_until(executor, lambda: "watchdog" in probe.kinds(), 5, "a watchdog intervention")
    probe.spin_until(executor, lambda: probe.state().get("holding") == "true", 5, "the holding state")
    probe.spin_until(executor, lambda: probe.state().get("arm_at_rest") == "true", 10, "the arm at rest")
    still = probe.latest_joints().copy()
    seen = len(probe.joint_states)
    probe.spin_until(executor, lambda: len(probe.joint_states) >= seen + 3, 5, "joint states after the hold")
    assert np.allclose(probe.latest_joints(), still, atol=1e-6)
    act(probe, executor, action(dx=0.01))  # the next action lifts the hold
    probe.spin_until(executor, lambda: probe.state().get("holding") == "false", 5, "the hold lifted")


def test_holds_while_a_verification_is_pending_when_asked(rig):
    from ladder_ros.messages import RUNNING, WALL_CLOCK, EpisodeStatus
    from ladder_ros.interface_conversions import document_to_msg

    executor, build = rig
    driver, probe, sdk = build(hold_while_verifying=True)
    home(probe, executor, driver)
    status = EpisodeStatus(episode_id="e1", state=RUNNING, clock=WALL_CLOCK, rate_hz=5.0, step=3,
                           pending_request=1, task={})
    probe.status_pub.publish(document_to_msg(status))
    probe.spin_until(executor, lambda: probe.state().get("verifying") == "true", 5, "the verifying state")
    sent = len(sdk.calls_of("commands/joint_group"))
    act(probe, executor, action(dx=0.02), steps=3)
    assert len(sdk.calls_of("commands/joint_group")) == sent
    probe.status_pub.publish(document_to_msg(EpisodeStatus(episode_id="e1", state=RUNNING, clock=WALL_CLOCK,
                                                           rate_hz=5.0, step=4, task={})))
    probe.spin_until(executor, lambda: probe.state().get("verifying") == "false", 5, "the verification over")
    act(probe, executor, action(dx=0.02), steps=2)
    assert len(sdk.calls_of("commands/joint_group")) > sent


def test_no_action_is_trusted_while_a_second_node_publishes_actions(rig):
    from trajectory_msgs.msg import JointTrajectory

    from ladder_ros.runtime.endpoints import qos

    executor, build = rig
    driver, probe, sdk = build()
    intruder = rclpy.create_node("intruder", namespace=NS)
    intruder.create_publisher(JointTrajectory, topics.ACTION.name, qos(topics.STREAM))
    executor.add_node(intruder)
    try:
        probe.spin_until(executor, lambda: len(driver.action_source.foreign_publishers()) == 1, 10,
                         "the driver to see the second publisher")
        act(probe, executor, action(dx=0.01))
        probe.spin_until(executor, lambda: "foreign_publisher" in probe.kinds(), 5, "a foreign_publisher intervention")
        assert "/widowx/intruder" in probe.interventions[-1].reason
    finally:
        executor.remove_node(intruder)
        intruder.destroy_node()


def test_no_blocking_call_runs_on_the_control_thread(rig):
    """Every service call of the API runs on the driver's vendor-call worker, never on the executor's thread."""
    executor, build = rig
    driver, probe, sdk = build(health_poll_s=0.1)
    control = threading.get_ident()
    callers = []
    core = driver.arm.bot.core
    original = core.get_node().wait_until_future_complete

    def spy(future, timeout_sec=None):
        callers.append(threading.get_ident())
        return original(future, timeout_sec)
    core.get_node().wait_until_future_complete = spy
    home(probe, executor, driver)
    act(probe, executor, action(dx=0.02), steps=3)
    assert probe.trigger(executor, topics.ESTOP_SERVICE).success
    probe.spin_until(executor, lambda: len(callers) >= 8, 10, "health polls")
    assert callers and control not in callers


def test_a_hold_refused_at_a_joint_past_the_apis_limit_is_sent_clamped_inside_it_and_counted(rig):
    import time as clock

    from ladder_ros.instruments.widowx_twin import xs_sdk
    from ladder_ros.instruments.widowx_twin.motors import WidowXMotors

    executor, build = rig
    # the shoulder's motor limit (819 ticks, -1.8852 rad) lies 0.3 mrad past the URDF's -108 deg the API checks
    start = (0.0, -1.8851, 1.55, 0.0, 0.8, 0.0)
    driver, probe, sdk = build(sdk=xs_sdk.SimulatedXsSdk(WidowXMotors(clock.monotonic, joints=start)))
    assert probe.arm(executor).success
    assert probe.trigger(executor, topics.ESTOP_SERVICE).success
    probe.spin_until(executor, lambda: "hold_refused" in probe.kinds(), 5, "the refused hold counted")
    probe.spin_until(executor, lambda: "clamped" in probe.state().get("stop", ""), 5, "the clamped hold")
    # the state can say so before the SDK's subscriber has taken the command: wait for the command itself
    probe.spin_until(executor, lambda: sdk.calls_of("commands/joint_group"), 5, "the clamped hold at the SDK")
    hold = sdk.calls_of("commands/joint_group")[-1].cmd
    assert hold[1] == pytest.approx(wx250s.LOWER[1] + 2e-3, abs=1e-6)  # just inside the API's limit
    assert probe.state()["recovery_required"] == ""  # held: no torque-off, no recovery needed
    assert sdk.calls_of("torque_enable") == []


# ------------------------------------------------------------------ a blocked joint, by its motor's effort
def block(sdk, joint):
    """Block ``joint`` where it is now; (the motors' time of the block, where it stands)."""
    with sdk.motor_lock:
        blocked_at = sdk.motors.clock()
        sdk.motors.stall(joint)
        return blocked_at, float(sdk.motors.arm_state()[0][wx250s.JOINT_NAMES.index(joint)])


def first_hold(sdk, joint, since, position):
    """When (the motors' time) xs_sdk took the first command after ``since`` that holds ``joint`` at ``position``."""
    i = wx250s.JOINT_NAMES.index(joint)
    return next(t for t, name, request in list(sdk.calls) if name == "commands/joint_group" and t >= since
                and abs(request.cmd[i] - position) < 2e-3)


@pytest.mark.parametrize("phase_s", [0.0, 0.07, 0.14])  # when, after an action, the obstacle is met
def test_an_elbow_blocked_while_commanded_on_is_held_and_reported_within_half_a_second(rig, phase_s):
    """The twin's elbow meets an obstacle mid-motion: its motor pushes at its stall current (effort on
    joint_states, as xs_sdk publishes present current) while its goals run on. The arm is held and the stall
    reported, counted once, within 0.5 s of the block by the twin's own clock (xs_sdk's record of the hold), long
    before the motor's overload would trip."""
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    act(probe, executor, action(dx=0.02, dz=0.02), steps=2)
    probe.send(ACTION_AXES, action(dx=0.02, dz=0.02))
    probe.spin_for(executor, phase_s)
    blocked_at, position = block(sdk, "elbow")
    probe.spin_for(executor, 0.2 - phase_s)
    act(probe, executor, action(dx=0.02, dz=0.02), steps=3)
    probe.spin_until(executor, lambda: "stall" in probe.kinds(), 10, "a stall intervention")
    stalls = [d for d in probe.interventions if d.kind == "stall"]
    assert len(stalls) == 1 and stalls[0].counts["stall"] == 1
    assert re.match(r"elbow stopped following its command: its motor pushed at its limit \(effort -?2300, "
                    r"saturated at 1840\) for 0\.\d\d s at ", stalls[0].reason), stalls[0].reason
    held_at = first_hold(sdk, "elbow", blocked_at, position)
    print(f"block to hold (twin clock): {held_at - blocked_at:.3f} s")
    assert held_at - blocked_at <= 0.5
    probe.spin_until(executor, lambda: probe.state().get("recovery_required", "").startswith("stall"), 5,
                     "the fault in the state")
    assert sdk.motors.joint_states().effort[2] == 0.0  # held where it stands: the motor no longer pushes
    probe.spin_for(executor, 0.5)
    assert sdk.motors.overloads == 0 and [d.kind for d in probe.interventions].count("stall") == 1


def late_joint_states(delay_s):
    """An in-process xs_sdk on a busy machine: each joint state reaches the API ``delay_s`` after xs_sdk read the
    motors (stamped then), in bursts as a starved process delivers them."""
    import queue

    from ladder_ros.instruments.widowx_twin.xs_sdk import SimulatedXsSdk

    class LateStates(SimulatedXsSdk):
        def subscribe_joint_states(self, callback):
            pending: queue.Queue = queue.Queue()

            def deliver():
                while not self._stop.is_set():
                    try:
                        due, sample = pending.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    time.sleep(max(0.0, due - time.monotonic()))
                    callback(sample)

            threading.Thread(target=deliver, name="late-joint-states", daemon=True).start()
            super().subscribe_joint_states(lambda sample: pending.put((time.monotonic() + delay_s, sample)))
            callback(self._sample())  # the API waits for a first state before it starts

    return LateStates()


@pytest.mark.parametrize("states_late_s", [0.0, 0.2])
def test_fast_free_motion_late_joint_states_and_a_grasp_raise_no_stall(rig, states_late_s):
    """Nothing but a blocked joint is a stall: the arm turned back and forth at the largest steps the filter passes,
    with its joint states on time and 0.2 s late (a busy machine), and the gripper closed on an object (its motor
    held at its PWM, its load high: the gripper is no joint the effort rule judges)."""
    executor, build = rig
    driver, probe, sdk = build(sdk=late_joint_states(states_late_s) if states_late_s else None)
    home(probe, executor, driver)
    for sign in (1, -1, 1, -1):
        act(probe, executor, action(dx=0.05 * sign, dz=0.05 * sign, dyaw=0.5 * sign), steps=3)
    sdk.motors.place_object(0.025)  # an object between the fingers: they stop at 0.025 m
    act(probe, executor, action(gripper=-1.0), steps=8)
    act(probe, executor, action(dx=0.03, dz=0.03, gripper=-1.0), steps=5)
    act(probe, executor, action(dx=-0.03, dz=-0.03, gripper=-1.0), steps=5)
    assert probe.latest_aperture() == pytest.approx((0.025 - 0.010) / 0.025, abs=0.01)  # held on the object
    # the gripper's motor pushes on the object at the API's PWM (250 at gripper_pressure 0.5): its load is high
    assert sdk.motors.joint_states().effort[6] == pytest.approx(-250 / 885 * 1000 * dxl.CURRENT_UNIT_MA)
    assert not {"stall", "motor_error", "gripper_fault"} & set(probe.kinds()), probe.interventions
    assert probe.state()["armed"] == "true"


def test_a_motor_that_shuts_down_on_overload_is_reported_at_the_next_poll_with_what_the_bit_means(rig):
    """With the effort rule set out of reach and the tracking rule slow, a blocked elbow pushes on until the twin's
    motor trips its overload error and turns its torque off, as a Dynamixel does; the health poll reads
    Hardware_Error_Status and reports the bit at once, named and explained."""
    from ladder_ros.instruments.widowx_twin.motors import WidowXMotors
    from ladder_ros.instruments.widowx_twin.xs_sdk import SimulatedXsSdk

    executor, build = rig
    sdk = SimulatedXsSdk(WidowXMotors(time.monotonic, overload_after_s=1.0))
    driver, probe, sdk = build(sdk=sdk, health_poll_s=0.2, stall_effort_ma=[10000.0] * 6, tracking_tolerance_rad=1.0,
                               stall_readings=50)
    home(probe, executor, driver)
    block(sdk, "elbow")
    act(probe, executor, action(dx=0.01, dz=0.01), steps=8)  # commanded on past the overload time
    probe.spin_until(executor, lambda: "motor_error" in probe.kinds(), 10, "the overload reported")
    error = [d for d in probe.interventions if d.kind == "motor_error"][0]
    assert error.reason.startswith("elbow: Hardware_Error_Status overload; torque off: elbow (elbow overload: a load "
                                   "beyond the motor's maximum output persisted); the arm holds until robot/recover "
                                   "reboots the motor"), error.reason
    assert sdk.motors.overloads == 1 and "stall" not in probe.kinds()
