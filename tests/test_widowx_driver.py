"""The WidowX driver against the Interbotix Python API test double (tests/interbotix_double), no hardware.

The double has the real module path, classes, method names and signatures, the wx250s kinematics
and a simulated motor bus that records every call. The driver and a probe (playing the policy and
the operator) share one executor; the double's own node spins in the thread ``robot_startup``
starts, as the real API's does.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("modern_robotics", reason="the Interbotix double needs modern-robotics (requirements/test.txt)")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.core.errors import LadderError  # noqa: E402
from ladder_ros.core.safety import ACTION_AXES  # noqa: E402
from ladder_ros.nodes import topics  # noqa: E402
from ladder_ros.robots import wx250s  # noqa: E402
from tests.driver_probe import DriverProbe  # noqa: E402

pytestmark = pytest.mark.ros
DOUBLE = Path(__file__).resolve().parent / "interbotix_double"
NS = "widowx"
CHAIN = wx250s.chain()


@pytest.fixture
def double_on_path():
    sys.path.insert(0, str(DOUBLE))
    try:
        from interbotix_common_modules.common_robot import robot
        from interbotix_xs_modules.xs_robot import _bus
        yield _bus.reset()
        robot._reset()
    finally:
        sys.path.remove(str(DOUBLE))
        for name in [m for m in sys.modules if m.startswith(("interbotix_xs_modules", "interbotix_common_modules"))]:
            del sys.modules[name]


@pytest.fixture
def rig(double_on_path):
    from ladder_ros.nodes.widowx_driver import WidowXDriverNode

    rclpy.init()
    executor = SingleThreadedExecutor()
    nodes = []
    try:
        def build(**overrides):
            params = [Parameter("clock_mode", value="wall_clock"), Parameter("connect_timeout_s", value=30.0),
                      *(Parameter(k, value=v) for k, v in overrides.items())]
            driver = WidowXDriverNode(namespace=NS, parameter_overrides=params)
            probe = DriverProbe(NS)
            for node in (driver, probe):
                executor.add_node(node)
                nodes.append(node)
            probe.spin_until(executor, lambda: probe.states and probe.joint_states and probe.poses, 20,
                             "the driver's first state")
            return driver, probe, double_on_path
        yield executor, build
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()


def action(dx=0.0, dy=0.0, dz=0.0, droll=0.0, dpitch=0.0, dyaw=0.0, gripper=1.0):
    return [dx, dy, dz, droll, dpitch, dyaw, gripper]


def act(probe, executor, values, steps=1, period=0.2, **send):
    for _ in range(steps):
        probe.send(ACTION_AXES, values, **send)
        probe.spin_for(executor, period)


def home(probe, executor, driver):
    assert probe.arm(executor).success
    reply = probe.trigger(executor, topics.HOME_SERVICE)
    assert reply.success, reply.message
    neutral = np.array(wx250s.NEUTRAL_JOINTS)
    probe.spin_until(executor, lambda: np.allclose(probe.latest_joints(), neutral, atol=2e-3), 30, "the home pose")
    # the last waypoints of the homing path may still be on their way once the pose is within tolerance
    probe.spin_until(executor, lambda: not driver.homing, 30, "the homing path to end")


def test_missing_interbotix_api_is_one_clear_error():
    rclpy.init()
    try:
        from ladder_ros.nodes.widowx_driver import WidowXDriverNode
        with pytest.raises(LadderError, match="interbotix_xs_modules.*not on PyPI"):
            WidowXDriverNode(namespace=NS, parameter_overrides=[Parameter("clock_mode", value="wall_clock")])
    finally:
        rclpy.try_shutdown()
    run = subprocess.run([sys.executable, "-m", "ladder_ros.nodes.widowx_driver", "--ros-args", "-p",
                          "clock_mode:=wall_clock"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "source that workspace" in run.stderr and "Traceback" not in run.stderr


def test_starts_disarmed_publishing_state_and_moves_nothing_in_dry_run(rig):
    executor, build = rig
    driver, probe, bus = build()
    state = probe.state()
    assert state["armed"] == "false" and state["estop"] == "false" and state["interventions"] == "0"
    assert probe.states[-1].level == topics_level("WARN")
    names, joints = probe.joint_states[-1][1], probe.latest_joints()
    assert names == wx250s.JOINT_NAMES and np.allclose(joints, wx250s.SLEEP_JOINTS, atol=1e-6)
    assert probe.latest_aperture() == 1.0  # fingers at 0.037 m, past Bridge's open 0.035 m: clipped
    pose = probe.poses[-1][1]
    assert np.allclose(pose, CHAIN.forward(joints), atol=1e-9)  # the true orientation, not just a position
    before = len(bus.calls)
    act(probe, executor, action(dz=0.02, gripper=-1.0), steps=5)
    probe.spin_until(executor, lambda: len(probe.commands) >= 5, 10, "five dry-run commands")
    moved = [c for c in bus.calls[before:] if c[0] in ("arm.set_joint_positions", "gripper.grasp")]
    assert moved == []  # computed and recorded, nothing sent
    assert np.allclose(probe.latest_joints(), wx250s.SLEEP_JOINTS, atol=1e-6)
    assert int(probe.state()["dry_run_commands"]) >= 5


def topics_level(name):
    from diagnostic_msgs.msg import DiagnosticStatus
    return getattr(DiagnosticStatus, name)


def test_armed_the_arm_follows_bridge_deltas_and_the_gripper_closes_and_opens(rig):
    executor, build = rig
    driver, probe, bus = build()
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
    # never a blocking call: joints without moving_time and blocking=False, gripper with delay 0, no IK call
    sets = [c for c in bus.calls if c[0] == "arm.set_joint_positions"]
    assert sets and all(c[2:] == (None, None, False) for c in sets)
    assert all(c[1] == 0.0 for c in bus.calls if c[0] in ("gripper.grasp", "gripper.release"))
    assert not any(c[0] == "arm.set_ee_pose_matrix" for c in bus.calls)
    assert len([c for c in bus.calls if c[0] == "robot_set_motor_registers"]) == 2  # the profile, once at start
    stats = probe.diagnostics[-1] if probe.diagnostics else {}
    probe.spin_until(executor, lambda: any(d.get("ik_p50_ms") for d in probe.diagnostics), 5, "diagnostics")
    assert "jitter_p99_ms" in stats or any("jitter_p99_ms" in d for d in probe.diagnostics)


def test_bad_actions_are_refused_counted_and_published_and_the_arm_holds(rig):
    executor, build = rig
    driver, probe, bus = build()
    home(probe, executor, driver)
    held = probe.latest_joints().copy()
    cases = [(action(dx=float("nan")), "non_finite"), (action(dy=0.2), "translation_limit"),
             (action(dyaw=2.0), "rotation_limit"), (action(gripper=0.3), "gripper_domain")]
    for values, kind in cases:
        act(probe, executor, values, steps=1, period=0.25)
        probe.spin_until(executor, lambda: kind in probe.kinds(), 5, f"a {kind} intervention")
    act(probe, executor, action(dx=0.01), steps=1, period=0.25, age_s=2.0)  # stamped 2 s ago
    probe.spin_until(executor, lambda: "stale" in probe.kinds(), 5, "a stale intervention")
    probe.send(ACTION_AXES, action(dx=0.01))
    probe.send(ACTION_AXES, action(dx=0.01))  # a second action in the same period
    probe.spin_until(executor, lambda: "duplicate" in probe.kinds(), 5, "a duplicate intervention")
    probe.spin_for(executor, 0.5)
    doc = probe.interventions[-1]
    assert doc.counts["non_finite"] == 1 and doc.counts["translation_limit"] == 1 and doc.counts["stale"] == 1
    assert doc.source.endswith("widowx_driver") and "gripper" in [d.axis for d in probe.interventions]
    assert int(probe.state()["interventions"]) >= 6
    # only the one accepted action (dx=0.01) moved the arm, by one centimetre
    moved = CHAIN.forward(probe.latest_joints())[:3, 3] - CHAIN.forward(held)[:3, 3]
    assert np.linalg.norm(moved) < 0.012


def test_the_workspace_box_clips_the_target_and_counts_it(rig):
    executor, build = rig
    driver, probe, bus = build(workspace_low=[0.10, -0.25, 0.20], workspace_high=[0.45, 0.25, 0.35])
    home(probe, executor, driver)
    act(probe, executor, action(dz=-0.04), steps=4)  # 16 cm down from 0.247 m: the floor is 0.20 m
    probe.spin_until(executor, lambda: "workspace" in probe.kinds(), 5, "a workspace intervention")
    probe.spin_until(executor, lambda: abs(probe.poses[-1][1][2, 3] - 0.20) < 3e-3, 10, "the arm at the floor")
    assert probe.interventions[-1].axis == "z"


def test_estop_holds_latches_and_release_leaves_the_robot_disarmed(rig):
    executor, build = rig
    driver, probe, bus = build()
    home(probe, executor, driver)
    for _ in range(3):
        act(probe, executor, action(dx=0.03))
    reply = probe.trigger(executor, topics.ESTOP_SERVICE)
    assert reply.success and "latched" in reply.message
    probe.spin_until(executor, lambda: probe.state().get("estop") == "true", 5, "the e-stop state")
    stop_calls = len(bus.calls)
    act(probe, executor, action(dx=0.03), steps=3)
    assert not any(c[0] == "arm.set_joint_positions" for c in bus.calls[stop_calls:])
    seen = len(probe.joint_states)
    probe.spin_until(executor, lambda: len(probe.joint_states) >= seen + 2, 5, "joint states after the stop")
    still = probe.latest_joints().copy()
    probe.spin_for(executor, 0.5)
    assert np.allclose(probe.latest_joints(), still, atol=1e-4)
    assert not probe.arm(executor).success  # cannot arm while latched
    assert probe.trigger(executor, topics.ESTOP_RELEASE_SERVICE).success
    probe.spin_until(executor, lambda: probe.state().get("estop") == "false", 5, "the released state")
    assert probe.state()["armed"] == "false" and probe.states[-1].level == topics_level("WARN")
    assert "estop" in probe.kinds()


def test_the_watchdog_holds_the_arm_when_actions_stop(rig):
    executor, build = rig
    driver, probe, bus = build()
    home(probe, executor, driver)
    act(probe, executor, action(dx=0.02), steps=3)
    probe.spin_until(executor, lambda: "watchdog" in probe.kinds(), 5, "a watchdog intervention")
    probe.spin_until(executor, lambda: probe.state().get("holding") == "true", 5, "the holding state")
    seen = len(probe.joint_states)
    probe.spin_until(executor, lambda: len(probe.joint_states) >= seen + 2, 5, "joint states after the hold")
    still = probe.latest_joints().copy()
    probe.spin_for(executor, 0.6)
    assert np.allclose(probe.latest_joints(), still, atol=2e-3)
    act(probe, executor, action(dx=0.01))  # the next action lifts the hold
    probe.spin_until(executor, lambda: probe.state().get("holding") == "false", 5, "the hold lifted")


def test_holds_while_a_verification_is_pending_when_asked(rig):
    from ladder_ros.messages import RUNNING, WALL_CLOCK, EpisodeStatus
    from ladder_ros.ros_conversions import document_to_msg

    executor, build = rig
    driver, probe, bus = build(hold_while_verifying=True)
    home(probe, executor, driver)
    status = EpisodeStatus(episode_id="e1", state=RUNNING, clock=WALL_CLOCK, rate_hz=5.0, step=3,
                           pending_request=1, task={})
    probe.status_pub.publish(document_to_msg(status))
    probe.spin_until(executor, lambda: probe.state().get("verifying") == "true", 5, "the verifying state")
    calls = len(bus.calls)
    act(probe, executor, action(dx=0.02), steps=3)
    assert not any(c[0] == "arm.set_joint_positions" for c in bus.calls[calls:])
    probe.status_pub.publish(document_to_msg(EpisodeStatus(episode_id="e1", state=RUNNING, clock=WALL_CLOCK,
                                                           rate_hz=5.0, step=4, task={})))
    probe.spin_until(executor, lambda: probe.state().get("verifying") == "false", 5, "the verification over")
    act(probe, executor, action(dx=0.02), steps=2)
    assert any(c[0] == "arm.set_joint_positions" for c in bus.calls[calls:])


def test_recovery_reboots_the_faulted_motors_and_stays_disarmed(rig):
    executor, build = rig
    driver, probe, bus = build()
    home(probe, executor, driver)
    bus.fault("elbow")
    reply = probe.trigger(executor, topics.RECOVER_SERVICE)
    assert reply.success and "stays disarmed" in reply.message
    assert ("robot_reboot_motors", "group", "arm", True, True) in bus.calls and not bus.faulted
    assert ("robot_torque_enable", "group", "arm", True) in bus.calls
    assert ("arm.capture_joint_positions",) in bus.calls
    probe.spin_until(executor, lambda: probe.state().get("armed") == "false", 5, "the disarmed state")


def test_no_action_is_trusted_while_a_second_node_publishes_actions(rig):
    from trajectory_msgs.msg import JointTrajectory

    from ladder_ros.nodes.runtime import qos

    executor, build = rig
    driver, probe, bus = build()
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
