"""The Franka rehearsal's numbers: timing per inference delay, and the e-stop and watchdog at franky-sim's joints.

    .venv/bin/python benchmarks/bench_rehearsal_franka.py [--episodes 3] [--delays 80,400] [--stops 3]
                                                          [--parts timing,stops] [--out DIR]

Two parts, each on a graph of its own (the Franka graph's ``twin`` mode, every node its own process,
loopback only; docs/rehearsal_franka.md):

* **timing**: ``ladder-ros rehearse franka --episodes N`` at each delay (the user's command): the
  control period p50/p99, its error p99, idle periods, the largest gap between applied actions,
  observation-to-action age and the server's inference time, pooled over the run's episodes
  (``summary.json``), with franky-sim's real-time factor (its 1 kHz loop against the wall clock) from
  the records. No success: nothing is scored (no object scene).
* **stops**: the rehearsal's graph driven in this process
  (:class:`~ladder_ros.evaluation.rehearsal.Rehearsal`), ``--stops`` episodes interrupted mid-motion
  by the driver's e-stop (``robot/estop``), then one by killing the policy process (the driver's
  watchdog holds the arm; the graph ends with the policy): the time until franky-sim's arm is at rest,
  from franky-sim's own joint velocities (``twin/joint_states`` of the ``franka_twin`` node, sampled
  at 100 Hz of simulated time, stamped on the wall clock): the last sample in which a joint moved
  faster than 0.01 rad/s (``bench_robot_safety.py``'s threshold), in ms and in control periods; for the
  e-stop from the service call, for the watchdog from the last action the driver applied.

Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

REST_RAD_S = 0.01  # at rest: no joint faster than this (bench_robot_safety.py)
MOVING_RAD_S = 0.05  # a joint faster than this is "moving": the moment to interrupt
STILL_S = 0.3  # ... and at rest once it has stayed so this long (wall clock)
TASK = "kitchen_single_1"


def rehearse(out: Path, episodes: int, delay_ms: float) -> dict:
    """``ladder-ros rehearse franka`` as a user runs it; its summary.json and records."""
    command = [str(REPO / ".venv" / "bin" / "ladder-ros"), "rehearse", "franka", "--episodes", str(episodes),
               "--inference-delay-ms", f"{delay_ms:g}", "--out", str(out)]
    print("$", " ".join(command[1:]), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, text=True, capture_output=True)
    tail = "\n".join(done.stdout.splitlines()[-4:])
    print(f"  exit {done.returncode} after {time.monotonic() - started:.0f} s\n{tail}", flush=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], flush=True)
        raise SystemExit(f"rehearse failed with exit {done.returncode}")
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    return {"summary": json.loads((out / "summary.json").read_text()), "records": records}


def timing_part(args, out: Path) -> None:
    from bench_rehearsal import timing_row

    rows = []
    for delay in args.delays:
        run = rehearse(out / f"rehearse_{delay:g}ms", args.episodes, delay)
        rows.append(timing_row(delay, run["summary"], len(run["records"])))
        factors = [float(r["twin"]["franky_sim"]["real_time_factor"]) for r in run["records"]
                   if r.get("twin", {}).get("franky_sim", {}).get("real_time_factor") not in (None, "None")]
        ends = [sum(1 for e in r["events"] if e["kind"] == "attempt_ended") for r in run["records"]]
        print(f"  franky-sim real-time factor per episode: {factors}; trigger attempts per episode: {ends}",
              flush=True)
    print("\n| inference | episodes | control period p50 / p99 (ms) | period error p99 (%) | idle periods | "
          "largest action gap (ms) | observation to action p50 / p95 / p99 (ms) | inference p50 / p95 (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows), flush=True)


class SimulatedArmWatch:
    """franky-sim's own joint velocities (``twin/joint_states``): when a joint last moved, on the wall clock."""

    def __init__(self, node):
        from sensor_msgs.msg import JointState

        from ladder_ros.nodes import topics
        from ladder_ros.nodes.franka_twin import TWIN_JOINT_STATES
        from ladder_ros.nodes.runtime import qos

        self.speed = 0.0
        self.last_moving_s = time.time()  # stamp of the last sample with a joint faster than REST_RAD_S
        self.last_sample_s = 0.0
        node.create_subscription(JointState, TWIN_JOINT_STATES, self._on_state, qos(topics.STREAM))

    def _on_state(self, msg) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.speed = max((abs(v) for v in msg.velocity), default=0.0)
        self.last_sample_s = stamp
        if self.speed > REST_RAD_S:
            self.last_moving_s = stamp

    def at_rest(self) -> bool:
        return self.speed <= REST_RAD_S and self.last_sample_s - self.last_moving_s > STILL_S


def stops_part(args, out: Path) -> None:
    """E-stops mid-motion on one graph, then a killed policy (the graph ends with it): time to the arm at rest."""
    from std_srvs.srv import Trigger

    from ladder_ros.bringup.session import GraphSession
    from ladder_ros.core.errors import LadderError
    from ladder_ros.evaluation.rehearsal import Rehearsal, plan_rehearsal
    from ladder_ros.nodes import topics

    plan = plan_rehearsal("franka", out / "stops", inference_delay_ms=args.delays[0])
    session = GraphSession(plan.graph, plan.launches, out / "stops" / "logs", startup_timeout_s=240.0)
    estop_kind, watchdog_kind = "e-stop (from the service call)", "watchdog (from the last applied action)"
    results: dict[str, list[float]] = {estop_kind: [], watchdog_kind: []}
    with session:
        operator = Rehearsal(session, plan.params, plan.namespace)
        operator.prepare()
        observer, executor, period_s = operator.observer, operator.executor, operator.period_s
        watch = SimulatedArmWatch(observer)
        estop = observer.create_client(Trigger, topics.ESTOP_SERVICE)
        release = observer.create_client(Trigger, topics.ESTOP_RELEASE_SERVICE)
        for k in range(args.stops + 1):
            kind = estop_kind if k < args.stops else watchdog_kind
            state: dict = {}

            def during(episode_id: str, kind=kind, state=state) -> None:
                if "t0" not in state and "killed" not in state:
                    if watch.speed >= MOVING_RAD_S and len(observer.tags.get(episode_id, [])) >= 16:
                        if kind == estop_kind:
                            state["t0"] = time.time()
                            estop.call_async(Trigger.Request())
                        else:
                            session.processes.signal("policy", signal.SIGKILL)
                            state["killed"] = time.time()
                    return
                if "t0" in state and "rest" not in state and watch.at_rest():
                    state["rest"] = watch.last_moving_s
                    state["release"] = release.call_async(Trigger.Request())  # the arm re-arms after the episode
                if "release" in state and state["release"].done() and "aborted" not in state:
                    state["aborted"] = True
                    observer.abort(episode_id, "stop measured")

            try:
                operator.episode(TASK, variant="", layout=0, seed=k, timeout_s=300.0, during=during)
            except LadderError as exc:  # the killed policy: the session says the graph lost it
                if "killed" not in state:
                    raise
                print(f"  the graph after the policy was killed: {str(exc).splitlines()[0][:200]}", flush=True)
            if "killed" in state:  # from the last action the driver applied (its stamp, system time)
                state["t0"] = max((s / 1e9 for s in observer.command_stamps_ns), default=state["killed"])
                deadline = time.monotonic() + 30.0
                while time.monotonic() < deadline and not watch.at_rest():
                    executor.spin_once(timeout_sec=0.01)
                state["rest"] = watch.last_moving_s
            if "t0" not in state:
                print(f"  stop {k}: the arm never moved fast enough to interrupt", flush=True)
                continue
            results[kind].append(max(0.0, state["rest"] - state["t0"]) * 1000.0)
            print(f"  stop {k}: {kind}: franky-sim's arm at rest after {results[kind][-1]:.0f} ms", flush=True)
        print(f"  franky-sim: {dict(observer.simulator)}", flush=True)
    for kind, values in results.items():
        if values:
            print(f"{kind}: franky-sim's arm at rest after median {statistics.median(values):.0f} ms (max "
                  f"{max(values):.0f} ms) = {statistics.median(values) / 1000 / period_s:.2f} control periods of "
                  f"{period_s * 1000:.0f} ms (n={len(values)})", flush=True)


def main() -> int:
    apply_network_safe_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--delays", default="80,400", help="inference delays (ms); the stops run at the first")
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--parts", default="timing,stops")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench_rehearsal_franka"))
    args = parser.parse_args()
    args.delays = [float(d) for d in args.delays.split(",") if d.strip()]
    parts = {p.strip() for p in args.parts.split(",")}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if "timing" in parts:
        timing_part(args, out)
    if "stops" in parts:
        stops_part(args, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
