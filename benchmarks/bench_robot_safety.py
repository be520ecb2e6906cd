"""Measure the robot drivers' safety timings and control loop on this machine and print the numbers.

    .venv/bin/python benchmarks/bench_robot_safety.py [--repeats N] [--robot widowx|franka|both]

Each driver runs in this process against its test target (WidowX: the Interbotix API test double;
Franka: franky-sim on a loopback address), armed, with a probe streaming actions at the control
rate. Measured, per robot, side by side with the control period:

* **e-stop latency**: from the ``robot/estop`` call to its reply, to the driver's stop command
  reaching the arm API, and to the arm at rest (joint speeds below 0.01 rad/s as the driver
  reports them);
* **watchdog hold**: from the last action sent to the watchdog's intervention and to the arm at
  rest, in milliseconds and in control periods;
* **control period and jitter** of the applied commands while streaming (the driver's diagnostics);
* WidowX: the driver's inverse kinematics (from the previous target) against the Interbotix API's
  own solve (``set_ee_pose_matrix(..., execute=False)``: ``modern_robotics.IKinSpace`` from fixed
  seeds) on the same one-step targets; Franka: the gripper width read, done in its own thread.

franky-sim may run slower than real time on a loaded machine; its real-time factor is printed, and
the Franka's times to rest are wall-clock times of that simulation. Nothing leaves the loopback
interface. Numbers are printed, never asserted.
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
from ladder_ros.nodes import topics  # noqa: E402
from tests.driver_probe import DriverProbe  # noqa: E402

REST_RAD_S = 0.01


def ms(values):
    values = [v * 1000.0 for v in values]
    if not values:
        return "n/a"
    return f"median {statistics.median(values):7.1f} ms  max {max(values):7.1f} ms  (n={len(values)})"


class Rig:
    def __init__(self, robot: str, driver, probe, executor, period: float, action):
        self.robot, self.driver, self.probe, self.executor, self.period, self.action = (
            robot, driver, probe, executor, period, action)
        self.k = 0

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
        """The arm's joints read directly from its API (faster than the driver's state stream)."""
        if self.robot == "widowx":
            return np.asarray(self.driver.arm.bot.arm.get_joint_positions())
        return np.asarray(self.driver.arm.robot.current_joint_positions, dtype=np.float64).ravel()

    def wait_rest(self, since: float, timeout_s: float = 60.0):
        """The first time after ``since`` from which the joints move slower than REST_RAD_S for 50 ms."""
        deadline = time.monotonic() + timeout_s
        samples = []
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.002)
            samples.append((time.monotonic(), self.joints_now(), self.sim_time()))
            window = [x for x in samples if x[0] >= samples[-1][0] - 0.05]
            if samples[-1][0] - samples[0][0] > 0.05 and len(window) >= 3:
                speed = np.max(np.abs(window[-1][1] - window[0][1])) / (window[-1][0] - window[0][0])
                if speed < REST_RAD_S:
                    self.rest_sim = window[0][2]
                    return window[0][0]
        return None


def widowx_rig(executor):
    sys.path.insert(0, str(REPO / "tests" / "interbotix_double"))
    from interbotix_xs_modules.xs_robot import _bus

    from ladder_ros.nodes.widowx_driver import WidowXDriverNode
    from ladder_ros.robots import wx250s

    bus = _bus.reset()
    driver = WidowXDriverNode(namespace="widowx", parameter_overrides=[Parameter("clock_mode", value="wall_clock")])
    probe = DriverProbe("widowx")
    for node in (driver, probe):
        executor.add_node(node)
    probe.spin_until(executor, lambda: probe.states and probe.joint_states, 60, "the driver")
    assert probe.arm(executor).success
    probe.trigger(executor, topics.HOME_SERVICE)
    neutral = np.array(wx250s.NEUTRAL_JOINTS)
    probe.spin_until(executor, lambda: np.allclose(probe.latest_joints(), neutral, atol=2e-3), 60, "home")

    x0 = probe.poses[-1][1][0, 3]

    def action(k):  # back and forth along x around home (10 cm), closing the loop on the measured pose
        goal = x0 + 0.05 + 0.05 * np.sin(2 * np.pi * k / 10)
        return ACTION_AXES, [float(np.clip(goal - probe.poses[-1][1][0, 3], -0.03, 0.03)), 0, 0, 0, 0, 0, 1.0]

    rig = Rig("widowx", driver, probe, executor, 0.2, action)
    rig.bus = bus
    return rig


def franka_rig(executor, sim):
    from ladder_ros.nodes.franka_driver import FrankaDriverNode

    params = [Parameter("clock_mode", value="wall_clock"), Parameter("preset", value="franka"),
              Parameter("host", value=sim.host), Parameter("model", value="fr3"), Parameter("realtime", value=False)]
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
    reply, command, rest = [], [], []
    for _ in range(repeats):
        rig.stream(1.0)
        calls_before = len(rig.bus.calls) if rig.robot == "widowx" else 0
        t0 = time.monotonic()
        response = rig.probe.trigger(rig.executor, topics.ESTOP_SERVICE)
        reply.append(time.monotonic() - t0)
        assert response.success
        if rig.robot == "widowx":
            sent = [t for t, c in zip(rig.bus.call_times[calls_before:], rig.bus.calls[calls_before:])
                    if c[0] == "arm.set_joint_positions"]
            if sent:
                command.append(sent[0] - t0)
        settled = rig.wait_rest(t0)
        if settled is not None:
            rest.append(settled - t0)
        rig.probe.trigger(rig.executor, topics.ESTOP_RELEASE_SERVICE)
        assert rig.probe.arm(rig.executor).success
    print(f"  e-stop: service reply      {ms(reply)}")
    if command:
        print(f"  e-stop: hold command sent  {ms(command)}")
    print(f"  e-stop: arm at rest        {ms(rest)}   (control period {rig.period * 1000:.0f} ms)")


def measure_watchdog(rig, repeats):
    doc, rest, rest_sim = [], [], []
    for _ in range(repeats):
        before = len(rig.probe.interventions)
        last = rig.stream(1.0)
        rig.probe.spin_until(rig.executor, lambda: any(d.kind == "watchdog" for d in rig.probe.interventions[before:]),
                             30, f"the watchdog (interventions {[d.kind for d in rig.probe.interventions[before:]]})")
        doc.append(time.monotonic() - last)  # an upper bound: received, not sent
        settled = rig.wait_rest(last)
        if settled is not None:
            rest.append(settled - last)
            if rig.robot == "franka":
                rest_sim.append(rig.rest_sim - rig.last_sim)
    periods = [r / rig.period for r in rest]
    print(f"  watchdog: intervention     {ms(doc)}   (limit {rig.driver.supervisor.config.watchdog_s * 1000:.0f} ms)")
    print(f"  watchdog: arm at rest      {ms(rest)}   = {statistics.median(periods):.2f} control periods (median)"
          if rest else "  watchdog: arm at rest      n/a")
    if rest_sim:
        print(f"  watchdog: arm at rest, in the simulator's time {ms(rest_sim)}   = "
              f"{statistics.median(rest_sim) / rig.period:.2f} control periods (median)")


def measure_loop(rig):
    rig.probe.diagnostics.clear()
    rig.stream(4.0)
    rig.probe.spin_until(rig.executor, lambda: rig.probe.diagnostics, 5, "diagnostics")
    d = rig.probe.diagnostics[-1]
    keys = ("period_p50_ms", "period_p99_ms", "jitter_p50_ms", "jitter_p99_ms", "action_age_p50_ms",
            "action_age_p99_ms", "ik_p50_ms", "ik_p99_ms", "gripper_read_p50_ms", "gripper_read_p99_ms")
    print("  control loop: " + ", ".join(f"{k} {d[k]}" for k in keys if d.get(k)))


def compare_ik(rig, repeats):
    from interbotix_xs_modules.xs_robot.arm import InterbotixArmXSInterface  # noqa: F401  (the double's)

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--robot", choices=("widowx", "franka", "both"), default="both")
    args = parser.parse_args()
    if args.robot in ("widowx", "both"):
        rclpy.init()
        executor = SingleThreadedExecutor()
        rig = widowx_rig(executor)
        print("WidowX 250 (Interbotix API test double), 5 Hz:")
        measure_loop(rig)
        measure_estop(rig, args.repeats)
        measure_watchdog(rig, args.repeats)
        compare_ik(rig, args.repeats)
        from interbotix_common_modules.common_robot import robot as interbotix_robot
        interbotix_robot._reset()
        rig.driver.destroy_node()
        rclpy.try_shutdown()
    if args.robot in ("franka", "both"):
        from tests.franky_sim_server import FrankySim
        sim = FrankySim()
        try:
            rclpy.init()
            executor = SingleThreadedExecutor()
            rig = franka_rig(executor, sim)
            robot = rig.driver.arm.robot
            t0, s0 = time.monotonic(), robot.state.time.to_msec() if hasattr(robot.state.time, "to_msec") else None
            print("Franka (franky-sim, MuJoCo FR3), 15 Hz:")
            measure_loop(rig)
            if s0 is not None:
                factor = (robot.state.time.to_msec() - s0) / 1000.0 / (time.monotonic() - t0)
                print(f"  franky-sim real-time factor: {factor:.2f}")
            measure_estop(rig, args.repeats)
            measure_watchdog(rig, args.repeats)
            rig.driver.close()
            rig.driver.destroy_node()
            rclpy.try_shutdown()
        finally:
            sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
