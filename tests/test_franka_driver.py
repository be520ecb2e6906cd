"""The Franka driver against franky-sim, a real libfranka-protocol server on a loopback address.

franky (franky-control, the driver's real dependency) talks the robot's network protocol to the
simulator exactly as to an arm; nothing here is faked. The simulator may run slower than real time
on a loaded machine, so every wait is bounded by what it waits for, never by a guess at its speed.
"""

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("franky", reason="needs franky-control and franky-sim (requirements/robots.txt)")
pytest.importorskip("franky_sim", reason="needs franky-control and franky-sim (requirements/robots.txt)")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.core.safety_supervisor import SupervisorConfig  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.robots.franka import FRANKY_VELOCITY_LIMITS, forward_kinematics, get_model  # noqa: E402
from tests.driver_probe import DriverProbe  # noqa: E402
from tests.franky_sim_server import FrankySim  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]
NS = "franka"
NAMES = tuple(f"panda_joint{i}" for i in range(1, 8))
AXES = (*NAMES, "gripper_position")
FR3 = get_model("fr3")


@pytest.fixture(scope="module")
def sim():
    server = FrankySim()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def connected(sim):
    """One driver for the module: franky-sim serves one client at a time, like the arm."""
    from ladder_ros.nodes.driver.franka import FrankaDriverNode

    rclpy.init()
    executor = SingleThreadedExecutor()
    nodes = []
    try:
        params = [Parameter("clock_mode", value="wall_clock"), Parameter("preset", value="franka"),
                  Parameter("host", value=sim.host), Parameter("model", value="fr3"),
                  Parameter("realtime", value=False)]
        driver = FrankaDriverNode(namespace=NS, parameter_overrides=params)
        nodes.append(driver)
        probe = DriverProbe(NS)
        nodes.append(probe)
        for node in nodes:
            executor.add_node(node)
        probe.spin_until(executor, lambda: probe.states and probe.joint_states and probe.poses, 60,
                         "the driver's first state")
        yield executor, driver, probe
    finally:
        if nodes:
            nodes[0].close()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()


@pytest.fixture
def rig(connected):
    """Each test starts disarmed, with no e-stop latched, no fault held and the arm at rest.

    A fault the arm reports (a reflex, a planner failure) makes the driver hold the arm as
    ``robot_error`` and refuse to arm until ``robot/recover``. The test in which that happened fails;
    the next one starts from a recovered arm, as an operator would recover it, instead of failing on
    the previous test's fault (and says so). (The stream once made franky's planner fail now and then
    under load, Ruckig's -111: tests/test_franka_stream.py, benchmarks/bench_franka_stream.py.)
    """
    executor, driver, probe = connected
    probe.trigger(executor, topics.ESTOP_RELEASE_SERVICE)
    probe.arm(executor, False)
    probe.spin_until(executor, lambda: probe.state().get("armed") == "false", 10, "the disarmed state")
    probe.spin_until(executor, lambda: at_rest(probe), 60, "the arm at rest")
    # Checked once the arm is at rest and the driver has polled franky since: the previous test's last motion
    # (or the brake that disarming starts) may fail after that test ended, and its fault is reported then.
    probe.spin_for(executor, 3 / 15)
    fault = probe.state().get("recovery_required", "")
    if fault:
        print(f"the previous test left the arm holding for a fault ({fault}); recovering it first")
        assert probe.trigger(executor, topics.RECOVER_SERVICE).success, probe.state()
        probe.spin_until(executor, lambda: probe.state().get("recovery_required", "") == "", 60, "the fault cleared")
        probe.spin_until(executor, lambda: at_rest(probe), 60, "the arm at rest")
    probe.interventions.clear()
    probe.commands.clear()
    probe.spin_for(executor, 2 / 15)  # a fresh stamp for the next action (one per period)
    return connected


def at_rest(probe):
    return len(probe.joint_states) >= 3 and np.all(np.abs(probe.joint_states[-1][2] - probe.joint_states[-3][2]) < 1e-4)


def stream(probe, executor, targets, gripper=0.0, period=1 / 15):
    for q in targets:
        probe.send(AXES, [*q, gripper])
        probe.spin_for(executor, period)


def hold_at(probe, executor, q, gripper, until, timeout_s, what):
    """Keep sending the final target at 15 Hz (as a policy holding still does) until ``until()``."""
    import time
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:  # say why the driver did not get there: it holds for a reason it names
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; the driver's safety state: "
                                 f"{probe.state()}; interventions: {sorted(set(probe.kinds()))}")
        stream(probe, executor, [q], gripper)


def test_connecting_leaves_this_thread_and_the_processes_it_starts_at_normal_scheduling(connected):
    """libfranka makes the thread that connects real-time (SCHED_FIFO 99 where the system lets it); the driver
    connected from this thread, which must keep its own scheduling, and so must every process it starts later
    (a test's graph, a launch): priority 99 inherited by them starved a two-core machine."""
    import os
    import subprocess
    import sys

    executor, driver, probe = connected
    assert os.sched_getscheduler(0) == os.SCHED_OTHER, driver.arm.scheduling
    child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                           capture_output=True, text=True, timeout=60, check=True)
    assert int(child.stdout) == os.SCHED_OTHER
    assert driver.arm.scheduling.startswith("franky's control thread: ")


def test_publishes_joints_aperture_and_height_and_stays_still_in_dry_run(rig):
    executor, driver, probe = rig
    state = probe.state()
    assert state["armed"] == "false" and state["estop"] == "false"
    names, joints, aperture = probe.joint_states[-1][1], probe.latest_joints(), probe.latest_aperture()
    assert names == NAMES and joints.shape == (7,) and 0.0 <= aperture <= 1.0
    height = probe.poses[-1][1][2, 3]
    assert 0.1 < height < 1.2  # the end effector's height above the base, for the trigger's lift rule
    start = joints.copy()
    stream(probe, executor, [start + 0.01 * k for k in range(1, 6)])
    probe.spin_until(executor, lambda: len(probe.commands) >= 5, 10, "five dry-run commands")
    assert np.allclose(probe.latest_joints(), start, atol=2e-3)


def test_armed_the_arm_follows_a_joint_sequence_and_the_gripper_closes_and_opens(rig):
    executor, driver, probe = rig
    assert probe.arm(executor).success
    start = probe.latest_joints().copy()
    targets = [start + np.array([0.02, 0.0, 0.0, 0.015, 0.0, 0.0, -0.02]) * k for k in range(1, 11)]
    stream(probe, executor, targets)
    final = targets[-1]
    hold_at(probe, executor, final, 0.0, lambda: np.allclose(probe.latest_joints(), final, atol=5e-3), 120,
            "the arm at the sequence's last target")
    visited = np.array([js[2] for js in probe.joint_states])
    assert visited[:, 0].max() > start[0] + 0.15  # it went there along the sequence, not in a jump
    hold_at(probe, executor, final, 1.0, lambda: probe.latest_aperture() < 0.05, 120, "the gripper closed")
    hold_at(probe, executor, final, 0.0, lambda: probe.latest_aperture() > 0.95, 120, "the gripper open")
    velocities = [c.velocity[:7] for c in probe.commands]
    assert any(np.any(np.abs(v) > 0) for v in velocities)  # waypoints carried velocities


def test_a_held_target_is_sent_once_and_the_arm_rests_on_it(rig):
    """A policy holding still repeats its target: franky is not asked again to plan from the target the arm
    stands on (Ruckig failed there with -111 now and then: tests/test_franka_stream.py)."""
    executor, driver, probe = rig
    assert probe.arm(executor).success
    start = probe.latest_joints().copy()
    target = start + np.array([0.03, 0.0, 0.0, 0.02, 0.0, 0.0, -0.03])
    streamed, held, applied = driver.arm.streamed, driver.arm.held, driver.filter.applied
    stream(probe, executor, [target] * 30)
    hold_at(probe, executor, target, 0.0, lambda: np.allclose(probe.latest_joints(), target, atol=5e-3), 120,
            "the arm at the held target")
    sent = driver.filter.applied - applied
    assert sent >= 20, probe.kinds()  # (the driver may drop a late action now and then)
    assert driver.arm.streamed - streamed == 1 and driver.arm.held - held == sent - 1
    assert probe.state().get("recovery_required", "") == "" and driver.arm.poll() is None


def test_bad_joint_actions_are_refused_counted_and_the_arm_holds(rig):
    executor, driver, probe = rig
    assert probe.arm(executor).success
    here = probe.latest_joints().copy()
    nan = here.copy()
    nan[2] = float("nan")
    beyond = here.copy()
    beyond[3] = FR3.upper[3] + 0.1
    jump = here + np.array([0.5, 0, 0, 0, 0, 0, 0])
    for values, kind in ((nan, "non_finite"), (beyond, "joint_limit"), (jump, "jump")):
        stream(probe, executor, [values])
        probe.spin_until(executor, lambda: kind in probe.kinds(), 10, f"a {kind} intervention")
    probe.send(AXES, [*here, 1.7])
    probe.spin_until(executor, lambda: "gripper_domain" in probe.kinds(), 10, "a gripper_domain intervention")
    probe.spin_for(executor, 2 / 15)
    probe.send(NAMES, list(here))
    probe.spin_until(executor, lambda: "malformed" in probe.kinds(), 10, "a malformed intervention")
    probe.spin_for(executor, 1.0)
    assert np.allclose(probe.latest_joints(), here, atol=5e-3)
    assert probe.interventions[-1].counts["jump"] == 1


def test_estop_stops_motion_and_latches(rig):
    executor, driver, probe = rig
    assert probe.arm(executor).success
    start = probe.latest_joints().copy()
    stream(probe, executor, [start + np.array([0.03, 0, 0, 0, 0, 0, 0]) * k for k in range(1, 6)])
    assert probe.trigger(executor, topics.ESTOP_SERVICE).success
    probe.spin_until(executor, lambda: probe.state().get("estop") == "true", 5, "the e-stop state")
    probe.spin_until(executor, lambda: probe.state().get("arm_at_rest") == "true", 60, "the state saying at rest")
    assert "JointStopMotion" in probe.state()["stop"]
    stream(probe, executor, [start + np.array([0.3, 0, 0, 0, 0, 0, 0])] * 5)  # ignored while latched
    probe.spin_until(executor, lambda: at_rest(probe), 60, "the arm at rest")
    rest = probe.latest_joints().copy()
    probe.spin_for(executor, 1.0)
    assert np.allclose(probe.latest_joints(), rest, atol=1e-3) and rest[0] < start[0] + 0.2
    assert not probe.arm(executor).success
    assert probe.trigger(executor, topics.ESTOP_RELEASE_SERVICE).success


def test_the_watchdog_stops_the_arm_when_the_policy_goes_quiet(rig):
    executor, driver, probe = rig
    assert probe.arm(executor).success
    start = probe.latest_joints().copy()
    stream(probe, executor, [start + np.array([0.02, 0, 0, 0, 0, 0, 0]) * k for k in range(1, 8)])
    probe.spin_until(executor, lambda: "watchdog" in probe.kinds(), 5, "a watchdog intervention")
    doc = [d for d in probe.interventions if d.kind == "watchdog"][-1]
    assert doc.limit == pytest.approx(1.5 / 15)
    probe.spin_until(executor, lambda: at_rest(probe), 60, "the arm at rest")


def test_the_streaming_limits_are_what_franky_reports_for_the_connected_arm(rig):
    executor, driver, probe = rig
    assert driver.arm.reported_velocity == pytest.approx(FRANKY_VELOCITY_LIMITS)
    assert driver.limits.velocity == pytest.approx(FRANKY_VELOCITY_LIMITS)  # below the FR3 datasheet's 2.62..5.26
    assert max(driver.limits.velocity) < max(FR3.max_velocity)
    assert driver.filter.limits.max_step[4] == pytest.approx(2.61 / 15)
    # the URDF franky-sim reports (joint 6: 0.4398 .. 4.6216) narrows nothing the FR3 table allows; both sides kept
    assert driver.limits.lower[5] == pytest.approx(max(FR3.lower[5], 0.4398))
    assert driver.limits.upper[5] == pytest.approx(min(FR3.upper[5], 4.6216))


def test_the_arm_comes_to_rest_on_the_last_target_without_overshoot(rig):
    executor, driver, probe = rig
    assert probe.arm(executor).success
    start = probe.latest_joints().copy()
    # joint 7 (it turns the hand in place: no workspace wall in the way) at 95 % of its velocity limit
    step = -np.sign(start[6]) * 0.95 * driver.filter.limits.max_step[6]
    targets = [start + np.array([0, 0, 0, 0, 0, 0, step]) * k for k in range(1, 9)]
    seen = len(probe.joint_states)
    watchdog = driver.supervisor.config
    # franky-sim runs slower than real time: a wall-clock watchdog would stop the arm before the stream's end
    driver.supervisor.config = SupervisorConfig(watchdog_s=120.0)
    try:
        stream(probe, executor, targets)  # then nothing: the last motion ends at its final waypoint, at rest
        final = targets[-1][6]
        probe.spin_until(executor, lambda: abs(probe.latest_joints()[6] - start[6]) > 0.1 and at_rest(probe), 120,
                         "the arm to move and come to rest")
    finally:
        driver.supervisor.config = watchdog
    reached = np.array([js[2][6] for js in probe.joint_states[seen:]]) * np.sign(step)
    assert reached.max() > (start[6] + 0.5 * (final - start[6])) * np.sign(step), probe.kinds()  # it moved fast
    overshoot = reached.max() - final * np.sign(step)
    assert overshoot < 0.01, f"the arm went {overshoot:.4f} rad past its last target"
    assert abs(probe.latest_joints()[6] - final) < 0.01  # and it rests on it


def test_a_step_out_of_the_workspace_box_stops_the_hand_at_its_wall(connected):
    executor, driver, probe = connected
    probe.trigger(executor, topics.ESTOP_RELEASE_SERVICE)
    probe.arm(executor, False)
    box = driver.workspace
    start = probe.latest_joints().copy()
    hand = forward_kinematics(start)[:3, 3]
    from ladder_ros.core.safety import WorkspaceBox
    driver.workspace = WorkspaceBox(tuple(hand - 0.2), (hand[0] + 0.2, hand[1] + 0.2, hand[2] + 0.03))
    try:
        probe.interventions.clear()
        probe.spin_for(executor, 2 / 15)
        assert probe.arm(executor).success
        up = np.array([0.0, -0.04, 0.0, 0.04, 0.0, 0.0, 0.0])  # raises the hand about 2 cm a step
        targets = [start + up * k for k in range(1, 8)]
        stream(probe, executor, targets)
        hold_at(probe, executor, targets[-1], 0.0, lambda: "workspace" in probe.kinds(), 60, "a workspace clip")
        probe.spin_until(executor, lambda: at_rest(probe), 120, "the arm at rest")
        assert forward_kinematics(probe.latest_joints())[2, 3] <= driver.workspace.high[2] + 2e-3
        assert [d.axis for d in probe.interventions if d.kind == "workspace"][0] == "z"
    finally:
        driver.workspace = box


def test_fuzzing_the_supervisor_with_legal_actions_never_makes_the_planner_fail(rig):
    """A bounded run of random actions the filter accepts: franky must take every one (no planner error)."""
    import time
    executor, driver, probe = rig
    assert probe.arm(executor).success
    rng = np.random.default_rng(7)
    limits = driver.filter.limits
    lower, upper = np.array(limits.lower) + 0.2, np.array(limits.upper) - 0.2
    applied_before = driver.filter.applied
    sent = 0
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        base = driver.previous if driver.previous is not None else probe.latest_joints()
        for _ in range(50):  # a random step the filter accepts, with the hand inside the workspace box
            target = np.clip(base + rng.uniform(-0.95, 0.95, size=7) * np.array(limits.max_step), lower, upper)
            if driver.workspace.contains(forward_kinematics(target)[:3, 3]):
                break
        probe.send(AXES, [*target, float(rng.integers(0, 2))])
        sent += 1
        probe.spin_for(executor, 1 / 15)
        assert probe.state().get("recovery_required", "") == "", probe.state()
    accepted = driver.filter.applied - applied_before
    kinds = probe.kinds()
    assert accepted >= 0.8 * sent, (accepted, sent, kinds)
    assert "robot_error" not in kinds and "vendor_timeout" not in kinds, kinds
    assert driver.arm.poll() is None
