"""Measure the robot drivers' safety at the arm, beside the node's own reaction, and print the numbers.

    .venv/bin/python benchmarks/bench_robot_safety.py [--repeats N] [--robot widowx|franka|both] [--fuzz-s S]

Each driver runs in this process, armed, with a probe streaming actions at the control rate:
the WidowX driver against the WidowX twin (``interbotix_api: twin``: the vendor API's semantics
over simulated Dynamixel motors), the Franka driver against franky-sim on a loopback address.
Measured, per robot:

* **e-stop**: the service's reply (the node), the hold reaching the arm's API, and the **arm at
  rest**: WidowX: the twin's motors all standing still; Franka: no joint moving faster than
  0.01 rad/s over 50 ms in franky-sim's state, in wall-clock time and in the simulator's own time
  (franky-sim runs slower than real time here); in ms and in control periods; and when the driver's
  state first said "at rest";
* **watchdog**: from the last action to the intervention, and to the arm at rest;
* WidowX: a reboot that never returns (an injected xs_sdk hang): the e-stop's reply and the joint
  states' rate meanwhile; the driver's IK against the API's ``set_ee_pose_matrix``; and, from the
  motor model, how long the same hold takes with the profile the vendor API leaves in place
  (xs_sdk's ``modes.yaml``), which is what the driver replaced;
* Franka: overshoot past the last target when a fast stream stops; a fuzz of random legal
  actions for ``--fuzz-s`` seconds (default 120): actions sent and accepted, planner failures,
  workspace clips and how far the hand ever was outside the box.

Nothing leaves the loopback interface. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

apply_network_safe_environment(os.environ)

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.core.safety import ACTION_AXES  # noqa: E402
from ladder_ros.core.safety_supervisor import SupervisorConfig  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from tests.driver_probe import DriverProbe  # noqa: E402

REST_RAD_S = 0.01  # franky-sim: at rest when no joint moves faster than this over REST_WINDOW_S
REST_WINDOW_S = 0.05


def ms(values, period=None):
    values = [v * 1000.0 for v in values]
    if not values:
        return "n/a"
    text = f"median {statistics.median(values):7.1f} ms  max {max(values):7.1f} ms"
    if period:
        text += f"  = {statistics.median(values) / 1000 / period:.2f} / {max(values) / 1000 / period:.2f} periods"
    return text + f"  (n={len(values)})"


class Rig:
    def __init__(self, robot: str, driver, probe, executor, period: float, action):
        self.robot, self.driver, self.probe, self.executor, self.period, self.action = (
            robot, driver, probe, executor, period, action)
        self.k = 0
        self.sdk = None

    def stream(self, seconds: float) -> float:
        """Send actions at the control rate for ``seconds``; returns when the last one was sent."""
        last = time.monotonic()
        deadline = last + seconds
        while time.monotonic() < deadline:
            self.probe.send(*self.action(self.k))
            last = time.monotonic()
            self.last_sim = self.sim_time()
            self.k += 1
            self.probe.spin_for(self.executor, self.period)
        return last

    def sim_time(self) -> float | None:
        """franky-sim's own clock (s), which runs slower than the wall clock on a loaded machine."""
        if self.robot != "franka":
            return None
        return self.driver.arm.robot.state.time.to_sec()

    def joints_now(self) -> np.ndarray:
        if self.robot == "widowx":
            return self.sdk.motors.arm_state()[0]
        return np.asarray(self.driver.arm.robot.current_joint_positions, dtype=np.float64).ravel()

    def wait_rest(self, timeout_s: float = 60.0):
        """(wall time, simulator time) from which the arm stands still; None when it never does."""
        deadline = time.monotonic() + timeout_s
        if self.robot == "widowx":  # the motor model: exactly still once every move has ended
            while time.monotonic() < deadline:
                self.executor.spin_once(timeout_sec=0.002)
                if np.all(self.sdk.motors.arm_state()[1] == 0.0):
                    return time.monotonic(), None
            return None
        samples = []
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.002)
            samples.append((time.monotonic(), self.joints_now(), self.sim_time()))
            window = [x for x in samples if x[0] >= samples[-1][0] - REST_WINDOW_S]
            if samples[-1][0] - samples[0][0] > REST_WINDOW_S and len(window) >= 3:
                speed = np.max(np.abs(window[-1][1] - window[0][1])) / (window[-1][0] - window[0][0])
                if speed < REST_RAD_S:
                    return window[0][0], window[0][2]
        return None

    def state_said_rest(self, timeout_s: float = 60.0):
        self.probe.spin_until(self.executor, lambda: self.probe.state().get("arm_at_rest") == "true", timeout_s,
                              "the state saying at rest")
        return time.monotonic()


def widowx_rig(executor):
    from ladder_ros.nodes.driver.widowx import WidowXDriverNode
    from ladder_ros.robots import wx250s
    from ladder_ros.instruments.widowx_twin import xs_sdk

    sdk = xs_sdk.register("wx250s", xs_sdk.SimulatedXsSdk())
    driver = WidowXDriverNode(namespace="widowx", parameter_overrides=[
        Parameter("clock_mode", value="wall_clock"), Parameter("interbotix_api", value="twin")])
    probe = DriverProbe("widowx")
    for node in (driver, probe):
        executor.add_node(node)
    probe.spin_until(executor, lambda: probe.states and probe.state().get("not_ready") == "", 60, "the driver")
    assert probe.arm(executor).success
    probe.trigger(executor, topics.HOME_SERVICE)
    neutral = np.array(wx250s.NEUTRAL_JOINTS)
    probe.spin_until(executor, lambda: np.allclose(probe.latest_joints(), neutral, atol=2e-3), 60, "home")
    probe.spin_until(executor, lambda: not driver.homing.active, 60, "the homing path to end")
    x0 = probe.poses[-1][1][0, 3]

    def action(k):  # back and forth along x around home (10 cm), closing the loop on the measured pose
        goal = x0 + 0.05 + 0.05 * np.sin(2 * np.pi * k / 10)
        return ACTION_AXES, [float(np.clip(goal - probe.poses[-1][1][0, 3], -0.03, 0.03)), 0, 0, 0, 0, 0, 1.0]

    rig = Rig("widowx", driver, probe, executor, 0.2, action)
    rig.sdk = sdk
    return rig


def franka_rig(executor, sim):
    from ladder_ros.nodes.driver.franka import FrankaDriverNode

    params = [Parameter("clock_mode", value="wall_clock"), Parameter("preset", value="franka"),
              Parameter("host", value=sim.host), Parameter("model", value="fr3"), Parameter("realtime", value=False),
              Parameter("max_action_age_s", value=0.5)]
    driver = FrankaDriverNode(namespace="franka", parameter_overrides=params)
    probe = DriverProbe("franka")
    for node in (driver, probe):
        executor.add_node(node)
    probe.spin_until(executor, lambda: probe.states and probe.joint_states, 60, "the driver")
    assert probe.arm(executor).success
    start = probe.latest_joints().copy()
    axes = (*(f"panda_joint{i}" for i in range(1, 8)), "gripper_position")

    def action(k):  # joint 1 swings about its start, closing the loop on the measured joints
        q = probe.latest_joints().copy()
        q[0] += float(np.clip(start[0] + 0.25 * np.sin(2.0 * k / 15.0) - q[0], -0.1, 0.1))
        return axes, [*q, 0.0]

    return Rig("franka", driver, probe, executor, 1 / 15, action)


def measure_estop(rig, repeats):
    reply, command, rest, rest_sim, said = [], [], [], [], []
    for _ in range(repeats):
        rig.stream(1.0)
        calls = len(rig.sdk.calls) if rig.sdk is not None else 0
        t0, s0 = time.monotonic(), rig.sim_time()
        response = rig.probe.trigger(rig.executor, topics.ESTOP_SERVICE)
        reply.append(time.monotonic() - t0)
        assert response.success
        if rig.sdk is not None:
            holds = [t for t, name, _ in list(rig.sdk.calls)[calls:] if name == "commands/joint_group"]
            if holds:
                command.append(holds[0] - t0)
        settled = rig.wait_rest()
        if settled is not None:
            rest.append(settled[0] - t0)
            if settled[1] is not None:
                rest_sim.append(settled[1] - s0)
        said.append(rig.state_said_rest() - t0)
        rig.probe.trigger(rig.executor, topics.ESTOP_RELEASE_SERVICE)
        assert rig.probe.arm(rig.executor).success
    print(f"  e-stop: service reply (node)          {ms(reply)}")
    if command:
        print(f"  e-stop: hold at xs_sdk                {ms(command)}")
    print(f"  e-stop: arm at rest (wall clock)      {ms(rest, rig.period)}")
    if rest_sim:
        print(f"  e-stop: arm at rest (simulator time)  {ms(rest_sim, rig.period)}")
    print(f"  e-stop: state says at rest            {ms(said, rig.period)}")


def measure_watchdog(rig, repeats):
    doc, rest, rest_sim = [], [], []
    for _ in range(repeats):
        before = len(rig.probe.interventions)
        last = rig.stream(1.0)
        rig.probe.spin_until(rig.executor, lambda: any(d.kind == "watchdog" for d in rig.probe.interventions[before:]),
                             30, f"the watchdog (interventions {[d.kind for d in rig.probe.interventions[before:]]})")
        doc.append(time.monotonic() - last)  # an upper bound: received, not sent
        settled = rig.wait_rest()
        if settled is not None:
            rest.append(settled[0] - last)
            if settled[1] is not None:
                rest_sim.append(settled[1] - rig.last_sim)
    limit = rig.driver.supervisor.config.watchdog_s
    print(f"  watchdog: intervention after the last action (node) {ms(doc, rig.period)}  (limit {limit * 1000:.0f} ms)")
    print(f"  watchdog: arm at rest after the last action (wall)  {ms(rest, rig.period)}")
    if rest_sim:
        print(f"  watchdog: arm at rest after the last action (sim)   {ms(rest_sim, rig.period)}")


def measure_loop(rig):
    rig.probe.diagnostics.clear()
    rig.stream(4.0)
    rig.probe.spin_until(rig.executor, lambda: rig.probe.diagnostics, 5, "diagnostics")
    d = [x for x in rig.probe.diagnostics if "jitter_p99_ms" in x][-1]
    keys = ("period_p50_ms", "period_p99_ms", "jitter_p50_ms", "jitter_p99_ms", "action_age_p50_ms",
            "action_age_p99_ms", "ik_p50_ms", "ik_p99_ms", "gripper_read_p50_ms", "gripper_read_p99_ms",
            "arm_state_age_ms")
    print("  control loop: " + ", ".join(f"{k} {float(d[k]):.1f}" for k in keys if d.get(k) not in (None, "None", "")))


def measure_hung_reboot(rig, repeats):
    """A reboot that never returns: the e-stop answers and the joint states keep flowing."""
    reply, rates = [], []
    for _ in range(repeats):
        hang = rig.sdk.hang("reboot_motors")
        assert rig.probe.trigger(rig.executor, topics.RECOVER_SERVICE).success
        assert hang.entered.wait(10)
        seen, t0 = len(rig.probe.joint_states), time.monotonic()
        response = rig.probe.trigger(rig.executor, topics.ESTOP_SERVICE)
        reply.append(time.monotonic() - t0)
        assert response.success
        rig.probe.spin_for(rig.executor, 1.0)
        rates.append((len(rig.probe.joint_states) - seen) / (time.monotonic() - t0))
        hang.release()
        rig.probe.spin_until(rig.executor, lambda: not rig.driver.recovery.running, 30, "the recovery's end")
        rig.probe.trigger(rig.executor, topics.ESTOP_RELEASE_SERVICE)
        if rig.probe.state().get("recovery_required"):
            rig.probe.trigger(rig.executor, topics.RECOVER_SERVICE)
            rig.probe.spin_until(rig.executor, lambda: not rig.probe.state().get("recovery_required"), 30,
                                 "a second recovery")
        assert rig.probe.arm(rig.executor).success
    print(f"  reboot hung: e-stop service reply     {ms(reply)}")
    print(f"  reboot hung: joint states published   {statistics.median(rates):.1f} /s (median; control rate 5 /s)")


def vendor_profile_hold():
    """From the motor model: a hold sent at 1 rad/s under the driver's profile and under modes.yaml's."""
    from ladder_ros.robots.dynamixel import ProfileRegisters, TimeProfile
    from ladder_ros.instruments.widowx_twin.motors import MODES_PROFILE

    for name, profile in (("driver's 250/100 ms", ProfileRegisters(250, 100)),
                          ("modes.yaml 2000/300 ms", MODES_PROFILE)):
        hold = TimeProfile(0.0, 0.0, 1.0, 0.0, profile, np.pi)
        past = max(hold.position(t) for t in np.linspace(0, hold.duration, 2001))
        print(f"  motor model: a hold at 1 rad/s under the {name} profile: at rest after {hold.duration * 1000:.0f} ms "
              f"({hold.duration / 0.2:.2f} periods), {past:.3f} rad past the hold")


def compare_ik(rig, repeats):
    from ladder_ros.robots import wx250s
    chain = wx250s.chain()
    arm = rig.driver.arm.bot.arm
    rng = np.random.default_rng(0)
    ours, vendor = [], []
    q = np.array(wx250s.NEUTRAL_JOINTS)
    for _ in range(repeats * 10):
        target = chain.forward(q + rng.uniform(-0.05, 0.05, size=6))
        t0 = time.perf_counter()
        chain.inverse(target, q)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        arm.set_ee_pose_matrix(target, execute=False)
        vendor.append(time.perf_counter() - t0)
    print(f"  IK, driver (from the previous target): {ms(ours)}")
    print(f"  IK, Interbotix API (fixed seeds):       {ms(vendor)}")


def measure_overshoot(rig, repeats):
    """A fast stream on joint 7 that stops: how far past its last target the arm goes."""
    driver, probe = rig.driver, rig.probe
    axes = (*(f"panda_joint{i}" for i in range(1, 8)), "gripper_position")
    overshoots = []
    watchdog = driver.supervisor.config
    driver.supervisor.config = SupervisorConfig(watchdog_s=120.0)  # franky-sim is slower than real time
    try:
        for r in range(repeats):
            rig.wait_rest()
            start = probe.latest_joints().copy()
            step = -np.sign(start[6] or 1.0) * 0.95 * driver.filter.limits.max_step[6]
            seen = len(probe.joint_states)
            for k in range(1, 9):
                probe.send(axes, [*(start + np.array([0, 0, 0, 0, 0, 0, step * k])), 0.0])
                probe.spin_for(rig.executor, rig.period)
            final = start[6] + 8 * step
            probe.spin_until(rig.executor, lambda: abs(probe.latest_joints()[6] - start[6]) > 0.1, 60, "motion")
            rig.wait_rest()
            probe.spin_for(rig.executor, 0.2)
            reached = np.array([js[2][6] for js in probe.joint_states[seen:]]) * np.sign(step)
            overshoots.append(max(0.0, reached.max() - final * np.sign(step)))
    finally:
        driver.supervisor.config = watchdog
    print(f"  overshoot past the last target (joint 7 at 95 % of its limit, {repeats} runs): max "
          f"{max(overshoots):.4f} rad, median {statistics.median(overshoots):.4f} rad")


def fuzz(rig, seconds):
    """Random legal actions for ``seconds``: every accepted one must be taken by franky's planner."""
    from ladder_ros.robots.franka import forward_kinematics

    driver, probe = rig.driver, rig.probe
    axes = (*(f"panda_joint{i}" for i in range(1, 8)), "gripper_position")
    rng = np.random.default_rng(11)
    limits = driver.filter.limits
    lower, upper = np.array(limits.lower) + 0.2, np.array(limits.upper) - 0.2
    box = driver.workspace
    counts_before = dict(driver.filter.counts)
    applied_before, sent, outside = driver.filter.applied, 0, 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        base = driver.previous if driver.previous is not None else probe.latest_joints()
        anywhere = rng.random() < 0.2  # a fifth of the steps may head out of the box (they stop at its wall)
        for _ in range(50):
            target = np.clip(base + rng.uniform(-0.95, 0.95, size=7) * np.array(limits.max_step), lower, upper)
            if anywhere or box.contains(forward_kinematics(target)[:3, 3]):
                break
        probe.send(axes, [*target, float(rng.integers(0, 2))])
        sent += 1
        probe.spin_for(rig.executor, rig.period)
        hand = forward_kinematics(probe.latest_joints())[:3, 3]
        outside = max(outside, float(np.max(np.maximum(np.array(box.low) - hand, hand - np.array(box.high)))))
    counts = {k: v - counts_before.get(k, 0) for k, v in driver.filter.counts.items() if v - counts_before.get(k, 0)}
    print(f"  fuzz {seconds:.0f} s: {sent} actions sent, {driver.filter.applied - applied_before} accepted, "
          f"planner failures (robot_error) {counts.get('robot_error', 0)}, interventions {counts}")
    print(f"  fuzz: workspace clips {counts.get('workspace', 0)}, the hand at most {max(outside, 0.0) * 1000:.1f} mm "
          "outside the box (measured)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--robot", choices=("widowx", "franka", "both"), default="both")
    parser.add_argument("--fuzz-s", type=float, default=120.0)
    args = parser.parse_args()
    if args.robot in ("widowx", "both"):
        from ladder_ros.instruments import widowx_twin
        rclpy.init()
        executor = SingleThreadedExecutor()
        rig = widowx_rig(executor)
        print("WidowX 250 (WidowX twin behind the Interbotix API surface), 5 Hz:")
        measure_loop(rig)
        measure_estop(rig, args.repeats)
        measure_watchdog(rig, args.repeats)
        measure_hung_reboot(rig, max(1, args.repeats // 2))
        vendor_profile_hold()
        compare_ik(rig, args.repeats)
        rig.driver.close()
        rig.driver.destroy_node()
        widowx_twin.reset()
        rclpy.try_shutdown()
    if args.robot in ("franka", "both"):
        from tests.franky_sim_server import FrankySim
        sim = FrankySim()
        try:
            rclpy.init()
            executor = SingleThreadedExecutor()
            rig = franka_rig(executor, sim)
            robot = rig.driver.arm.robot
            t0, s0 = time.monotonic(), robot.state.time.to_sec()
            print("Franka (franky-sim, MuJoCo FR3), 15 Hz:")
            measure_loop(rig)
            print(f"  franky-sim real-time factor: {(robot.state.time.to_sec() - s0) / (time.monotonic() - t0):.2f}")
            limits = [round(float(v), 3) for v in rig.driver.limits.velocity]
            print(f"  streaming velocity limits (franky's): {limits} rad/s")
            measure_estop(rig, args.repeats)
            measure_watchdog(rig, args.repeats)
            measure_overshoot(rig, max(2, args.repeats // 2))
            fuzz(rig, args.fuzz_s)
            rig.driver.close()
            rig.driver.destroy_node()
            rclpy.try_shutdown()
        finally:
            sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
