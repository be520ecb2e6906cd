"""Does franky's planner take every streamed Franka motion? Planner failures on franky-sim, quiet and busy.

    .venv/bin/python benchmarks/bench_franka_stream.py [--targets 2000] [--burners 0,2]
        [--streams sequence,chunks] [--policy policies/droid_pi05_server.yaml] [--speed 0.6] [--pause 0.2]
        [--seed 0]

The Franka driver turns each accepted 15 Hz joint target into one asynchronous franky motion
(:func:`ladder_ros.robots.franka.stream_waypoints`, :meth:`ladder_ros.robots.franky_arm.FrankyArm.send_joints`),
which takes over the running one; franky plans every motion with Ruckig on the client, and a plan
that fails ("Motion planner failed with error code -111") disarms the arm. This benchmark drives
that path itself, without ROS: the driver's own :class:`FrankyArm` connected to franky-sim (a
subprocess on a loopback address), the driver's joint filter (a refused target is not sent, as in
the driver), the measured joints and velocities read before each target, as the driver does. Two
streams, each until ``--targets`` targets have been streamed:

* ``sequence``: the Franka driver test's joint sequence (10 steps of 0.02, 0.015 and -0.02 rad on
  joints 1, 4 and 7 from where the arm is), then 30 periods holding its last target (the test holds
  there while the gripper closes and opens), back in 10 steps, 30 periods holding;
* ``chunks``: what a real-time chunk executor hands out at the policy's rate: chunks of the policy's
  length (15 for pi0.5-DROID) of absolute joint targets, each observed ``execute - latency``
  targets after the previous one took over and taking over ``latency`` (1 to 3) periods later, so
  that ``execute`` (8) of each run, the targets of the periods it took to compute dropped as stale;
  at the splice the new chunk's first target jumps from the last one given by up to the policy's
  seam guard (``seam.max_joint_rad``, 0.145 rad for pi0.5-DROID) on each joint, all of the jump in
  one step (no blending: the worst case), never more than the driver's joint filter lets through.
  Within a chunk each joint's speed drifts at random up to ``--speed`` of its velocity limit, kept
  within 0.35 rad of the ready pose: about a quarter of the steps reverse a joint; and about a
  ``--pause`` share of the chunks (0.2) hold still, one target repeated, in runs of 2 to 4 chunks,
  as a policy does while the gripper closes.

With ``--burners 0,2`` each stream runs on the machine as it is and then beside two CPU burners
(processes spinning in a loop, started here with a deadline, ended here by their ids): a late
stream is what lets franky reach a via point before the next motion takes over. Printed per row:
targets streamed, franky motions started and targets not sent again (the running motion rests on
them already), planner failures (-111 among them) and other arm errors (each recovered with
franky's error recovery, the stream starting again where it began), targets the filter
refused, targets whose via velocities were all zero, how late the stream's periods began (p50 /
p99 / max ms), franky-sim's real-time factor and the load average. Nothing leaves the loopback
interface. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.core.safety import JointTargetFilter  # noqa: E402
from ladder_ros.policies.config import load_policy_config  # noqa: E402
from ladder_ros.robots.franka import READY_JOINTS, get_model, stream_waypoints  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEQUENCE_STEP = np.array([0.02, 0.0, 0.0, 0.015, 0.0, 0.0, -0.02])  # tests/test_franka_driver.py's sequence
HOLD_PERIODS = 30
REST_SPEED = 0.15  # rad/s: franky-sim's joint 7 trembles at about 0.08 rad/s while it holds
WANDER_RAD = 0.35  # the chunk stream stays this close to the ready pose (inside every joint limit)
BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


class SequenceStream:
    """The driver test's joint sequence, there and back, holding at each end."""

    def __init__(self, start: np.ndarray):
        self.home = np.array(start, dtype=np.float64)  # where it starts again after an error
        self.reset(start)

    def reset(self, at: np.ndarray) -> None:
        self.start = np.array(at, dtype=np.float64)
        self.queue: list[np.ndarray] = []

    def next(self) -> np.ndarray:
        if not self.queue:
            s, k = self.start, SEQUENCE_STEP
            self.queue = ([s + k * i for i in range(1, 11)] + [s + k * 10] * HOLD_PERIODS
                          + [s + k * i for i in range(9, -1, -1)] + [s.copy()] * HOLD_PERIODS)
        return self.queue.pop(0)


class ChunkStream:
    """A real-time chunk executor's targets (module docstring): chunks spliced in while the old one runs."""

    def __init__(self, rng: np.random.Generator, start: np.ndarray, max_step: np.ndarray, seam_rad: float,
                 length: int, execute: int, speed: float, pause: float):
        self.rng, self.max_step, self.length, self.execute = rng, np.asarray(max_step), length, execute
        self.speed, self.pause, self.paused = speed, pause, 0
        self.centre = self.home = np.array(READY_JOINTS)
        # the jump at a splice: up to the seam guard, and never a step the driver's filter refuses
        self.bound = np.minimum(seam_rad, self.max_step) * 0.999
        self.splices = 0
        self.reset(start)

    def reset(self, at: np.ndarray) -> None:
        self.last = np.array(at, dtype=np.float64)  # (the arm may rest outside the box: the chunk leads it in)
        self.queue, self.velocity = self._predict(self.last, np.zeros(len(self.last)))
        self.given, self.latency, self.arriving = 0, int(self.rng.integers(1, 4)), []

    def _predict(self, start: np.ndarray, velocity: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """A chunk from ``start``: each joint's step drifts at random, at most ``speed`` of its largest step; or the
        policy holds still (its chunk repeats one target), for 2 to 4 chunks in a row (about 1 to 2 s)."""
        if self.paused == 0 and self.rng.random() < self.pause / 3.0:
            self.paused = int(self.rng.integers(2, 5))
        if self.paused > 0:
            self.paused -= 1
            return [start.copy() for _ in range(self.length)], np.zeros(len(start))
        out, q, v = [], start.copy(), velocity.copy()
        top = self.speed * self.max_step
        for _ in range(self.length):
            v = np.clip(v + self.rng.normal(0.0, 0.25, len(q)) * self.max_step, -top, top)
            away = q - self.centre
            v = np.where(np.abs(away) > WANDER_RAD - top, -np.sign(away) * np.abs(v), v)  # turn back in time
            q = self._inside(q + v)
            out.append(q)
        return out, v

    def _inside(self, q: np.ndarray) -> np.ndarray:
        """``q`` kept within ``WANDER_RAD`` of the ready pose (a projection: it never lengthens a step)."""
        return np.clip(q, self.centre - WANDER_RAD, self.centre + WANDER_RAD)

    def next(self) -> np.ndarray:
        if self.given == self.execute - self.latency:  # observe: a chunk from the target given last, a new drift
            chunk, self.velocity = self._predict(self.last, self.velocity
                                                 + self.rng.normal(0.0, 0.5, len(self.last)) * self.max_step)
            self.arriving = chunk[self.latency:]  # the targets of the periods it took to compute are stale
        if self.given == self.execute:  # it takes over (``execute`` targets of this one ran): the splice jump
            fresh = self.arriving
            jump = self.rng.uniform(-1.0, 1.0, len(self.last)) * self.bound
            first = self.last + np.clip(fresh[0] - self.last + jump, -self.bound, self.bound)
            self.queue = [self._inside(q + (first - fresh[0])) for q in fresh]
            self.given, self.latency = 0, int(self.rng.integers(1, 4))
            self.splices += 1
        self.given += 1
        self.last = self.queue.pop(0)
        return self.last


def burners(count: int, seconds: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=seconds)]) for _ in range(count)]


def stop_burners(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def wait_at_rest(arm, timeout_s: float = 10.0) -> np.ndarray:
    """The joints once the arm has stopped (franky-sim's wrist keeps a small tremor: under REST_SPEED for 0.25 s)."""
    deadline = time.monotonic() + timeout_s
    calm = 0
    reading = arm.read()
    while time.monotonic() < deadline and calm < 5:
        time.sleep(0.05)
        reading = arm.read()
        calm = calm + 1 if np.max(np.abs(reading.velocities)) < REST_SPEED else 0
    return reading.joints


def go_to(arm, goal: np.ndarray, period: float) -> None:
    """Bring the arm to ``goal`` as the driver homes it: targets half a largest step apart, streamed, then rest."""
    step = np.array(arm.limits.joint_limits(period_s=period).max_step) * 0.5
    here = wait_at_rest(arm)
    count = int(np.ceil(np.max(np.abs(goal - here) / step)))
    previous = here
    for k in range(1, count + 1):
        target = here + (goal - here) * k / count
        reading = arm.read()
        via, velocity = stream_waypoints(previous, target, reading.joints, period, arm.limits, reading.velocities)
        try:
            arm.send_joints(via, velocity, target, period)
        except Exception:  # franky raised an earlier motion's error: recover, go on from where the arm is
            arm.recover()
            return go_to(arm, goal, period)
        previous = target
        time.sleep(period)
    wait_at_rest(arm)


def run_stream(arm, stream, targets: int, period: float) -> dict:
    """Stream ``targets`` accepted targets at ``period`` as the driver does; count what franky did with them."""
    limits = arm.limits
    check = JointTargetFilter(limits.joint_limits(period_s=period))
    previous = wait_at_rest(arm)
    stream.reset(previous)
    streamed = refused = still = 0
    motions0, held0 = arm.streamed, arm.held
    failures: list[str] = []
    late: list[float] = []
    started = time.monotonic()
    sim0 = arm.robot.state.time.to_sec()
    deadline = started
    while streamed < targets:
        deadline += period
        pause = deadline - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        late.append(max(0.0, -pause))
        error = arm.poll()
        if error is None:
            target = stream.next()
            if not check.check(list(target), previous).applied:
                refused += 1  # the driver sends nothing: the running motion goes on
                continue
            reading = arm.read()
            via, velocity = stream_waypoints(previous, target, reading.joints, period, limits, reading.velocities)
            still += int(not np.any(velocity))
            try:
                arm.send_joints(via, velocity, target, period)
            except Exception as exc:  # franky raises a failed motion's error on the next move
                error = f"{type(exc).__name__}: {exc}"
            else:
                previous = np.asarray(target, dtype=np.float64)
                streamed += 1
                continue
        failures.append(error)
        print(f"  ({streamed} streamed) {error}", flush=True)
        arm.recover()
        go_to(arm, stream.home, period)  # (not counted: the stream starts again where it began)
        previous = wait_at_rest(arm)
        stream.reset(previous)
        deadline = time.monotonic()
    wall = time.monotonic() - started
    simulated = arm.robot.state.time.to_sec() - sim0
    arm.stop()
    wait_at_rest(arm)
    late_ms = np.array(late) * 1000.0
    return {"streamed": streamed, "motions": arm.streamed - motions0, "held": arm.held - held0,
            "planner": sum("-111" in f for f in failures), "failures": failures, "refused": refused, "still": still,
            "late_ms": (float(np.percentile(late_ms, 50)), float(np.percentile(late_ms, 99)), float(late_ms.max())),
            "seconds": wall, "rtf": simulated / wall, "load": os.getloadavg()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=2000, help="targets streamed, per stream and load")
    parser.add_argument("--burners", default="0,2", help="comma-separated numbers of CPU burners")
    parser.add_argument("--streams", default="sequence,chunks")
    parser.add_argument("--policy", default=str(ROOT / "policies" / "droid_pi05_server.yaml"))
    parser.add_argument("--speed", type=float, default=0.6, help="chunk stream: largest speed, of the velocity limit")
    parser.add_argument("--pause", type=float, default=0.2,
                        help="chunk stream: the share of chunks in which the policy holds still")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated run still stops franky-sim and burners

    from ladder_ros.robots.franky_arm import FrankyArm
    from tests.franky_sim_server import FrankySim

    policy = load_policy_config(args.policy)
    seam = policy.seam.max_joint_rad
    if seam is None:
        raise SystemExit(f"{args.policy} has no seam.max_joint_rad")
    period = policy.period_s
    rng = np.random.default_rng(args.seed)
    streams = [s.strip() for s in args.streams.split(",") if s.strip()]
    loads = [int(b) for b in args.burners.split(",")]
    estimate_s = args.targets * period * 1.5 + 60.0  # a burner's deadline: the longest a row may take, and then some
    print(f"{os.cpu_count()} CPUs; {policy.name}: {policy.control_rate_hz:g} Hz, chunks of {policy.chunk_length}, "
          f"{policy.execute_steps} executed, seam guard {seam:g} rad; {args.targets} targets streamed per row",
          flush=True)
    sim = FrankySim()
    arm = None
    try:
        arm = FrankyArm(host=sim.host, model=get_model("fr3"), dynamics_factor=1.0, gripper_speed_m_s=0.05,
                        gripper_force_n=20.0, max_width_m=0.08, realtime=False)
        print(f"franky-sim at {sim.host}; streaming limits {[round(float(v), 3) for v in arm.limits.velocity]} rad/s",
              flush=True)
        print("| burners | stream | targets streamed | franky motions started | not sent again (held) | "
              "planner failures (-111) | other arm errors | refused by the filter | all via velocities zero | "
              "late p50/p99/max (ms) | s | franky-sim real-time factor | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        notes = []
        go_to(arm, np.array(READY_JOINTS), period)  # where pi0.5-DROID's episodes begin
        for count in loads:
            for name in streams:
                start = wait_at_rest(arm)
                if name == "sequence":
                    stream = SequenceStream(start)
                elif name == "chunks":
                    stream = ChunkStream(rng, start, np.array(arm.limits.joint_limits(period_s=period).max_step), seam,
                                         policy.chunk_length, policy.execute_steps, args.speed, args.pause)
                else:
                    raise SystemExit(f"unknown stream {name!r} (sequence, chunks)")
                procs = burners(count, estimate_s)
                try:
                    r = run_stream(arm, stream, args.targets, period)
                finally:
                    stop_burners(procs)
                other = len(r["failures"]) - r["planner"]
                p50, p99, top = r["late_ms"]
                print(f"| {count} | {name} | {r['streamed']} | {r['motions']} | {r['held']} | {r['planner']} | "
                      f"{other} | {r['refused']} | {r['still']} | {p50:.1f}/{p99:.1f}/{top:.0f} | "
                      f"{r['seconds']:.0f} | {r['rtf']:.2f} | {r['load']:.1f} |", flush=True)
                notes += [f"{count} burners, {name}: {f}" for f in dict.fromkeys(r["failures"])]
        for note in notes[:20]:
            print(f"  {note}")
    finally:
        if arm is not None:
            arm.close()
        sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
