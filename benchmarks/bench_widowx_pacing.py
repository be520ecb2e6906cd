"""The WidowX driver's control period as the arm sees it: each action's stamp, its joint command, its vendor call.

    .venv/bin/python benchmarks/bench_widowx_pacing.py [--episodes 3] [--inference-delay-ms 80] [--burners 0]
                                                       [--tasks kitchen_single_2,sorting_split_2,relay_2] [--out DIR]

Runs ``ladder-ros rehearse widowx`` (the robot graph on the wall clock against the WidowX twin,
docs/rehearsal.md) and, in this process, a node on the same loopback graph that records the stamps of

* every ``policy/action``: when the policy answered (the cadence the driver receives);
* every ``robot/joint_command``: when the driver applied the action (the rehearsal's ``timing`` is
  computed from these);
* every ``/<robot_name>/commands/joint_group``: stamped by the twin's API inside
  ``set_joint_positions``, the moment of the vendor call, from which the twin's motors start the move.

It prints, beside the load average before and after:

* the rehearsal's own ``timing`` per episode and pooled (``period_error_p99_pct`` counts every time
  between two applied actions, the idle periods of a policy that had no action to give included);
* for each action, the time from its stamp to its joint command and to its vendor call;
* the period error between the vendor calls of consecutive actions (stamped one period apart):
  the control loop's own steadiness, idle periods left out; and the same for the policy's stamps.

``--burners N`` runs N busy loops beside the graph for the run (a loaded machine). Numbers are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

TASKS = "kitchen_single_2,sorting_split_2,relay_2"
VARIANT = "proprio_verifier"
PERIOD_MS = 200.0  # the widowx preset's 5 Hz


def stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


class Recorder:
    """A node in a thread of its own that records the stamps of the three topics (module docstring)."""

    def __init__(self, namespace: str, robot_name: str):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        rclpy.init()
        self.node = rclpy.create_node("pacing_bench_recorder")
        self.stamps: dict[str, list[int]] = {"action": [], "command": [], "vendor": []}
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        for key, msg_type, topic in (("action", JointTrajectory, f"/{namespace}/policy/action"),
                                     ("command", JointState, f"/{namespace}/robot/joint_command"),
                                     ("vendor", JointState, f"/{robot_name}/commands/joint_group")):
            self.node.create_subscription(msg_type, topic, lambda m, k=key: self.stamps[k].append(stamp_ns(m)), qos)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # shut down under it
            pass

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown()


def percentiles(values, unit: str = "ms") -> str:
    if not len(values):
        return "none"
    v = np.asarray(values, dtype=np.float64)
    return (f"p50 {np.percentile(v, 50):.2f}, p90 {np.percentile(v, 90):.2f}, p99 {np.percentile(v, 99):.2f}, "
            f"max {v.max():.2f} {unit} (n {len(v)})")


def analyse(stamps: dict[str, list[int]]) -> None:
    actions = sorted(stamps["action"])
    for key, label in (("command", "joint command"), ("vendor", "vendor call")):
        later = sorted(stamps[key])
        delays, errors, previous = [], [], None
        for k, stamp in enumerate(actions):
            i = bisect.bisect_left(later, stamp)
            moment = later[i] if i < len(later) and later[i] - stamp < 150e6 else None  # the first within 150 ms
            if moment is not None:
                delays.append((moment - stamp) / 1e6)
            one_period = k > 0 and abs((stamp - actions[k - 1]) / 1e6 - PERIOD_MS) < 0.1 * PERIOD_MS
            if one_period and moment is not None and previous is not None:
                errors.append(abs((moment - previous) / 1e6 - PERIOD_MS) / PERIOD_MS * 100.0)
            previous = moment
        print(f"  action stamp -> {label}: {percentiles(delays)}")
        print(f"  period error between the {label}s of consecutive actions: {percentiles(errors, '%')}")
    periods = np.diff(actions) / 1e6
    periods = periods[np.abs(periods - PERIOD_MS) < 0.1 * PERIOD_MS]
    print(f"  period error of the policy's stamps (consecutive): {percentiles(np.abs(periods - PERIOD_MS) / 2, '%')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--inference-delay-ms", type=float, default=80.0)
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--burners", type=int, default=0, help="busy loops beside the graph (a loaded machine)")
    parser.add_argument("--namespace", default="widowx")
    parser.add_argument("--robot-name", default="wx250s")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    apply_network_safe_environment()  # the graph (a child) inherits this process's domain
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_widowx_pacing_"))
    recorder = Recorder(args.namespace, args.robot_name)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    command = [str(REPO / ".venv" / "bin" / "ladder-ros"), "rehearse", "widowx", "--episodes", str(args.episodes),
               "--tasks", args.tasks, "--variant", VARIANT, "--inference-delay-ms", f"{args.inference_delay_ms:g}",
               "--out", str(out)]
    print("$", " ".join(command[1:]), f"(with {args.burners} busy loops beside it)" if args.burners else "",
          flush=True)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    try:
        done = subprocess.run(command, cwd=REPO, text=True, capture_output=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    time.sleep(0.5)  # the last messages on their way to the recorder
    recorder.close()
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-3000:], flush=True)
        raise SystemExit(f"rehearse failed with exit {done.returncode}")
    for line in (out / "episodes.jsonl").read_text().splitlines():
        if line.strip():
            t = json.loads(line)["timing"]
            print(f"  episode: {t['applied_actions']} actions, period error p99 {t['period_error_p99_pct']} %, "
                  f"{t['idle_periods']} idle periods, control period p50/p99 {t['control_period_ms']['p50']}/"
                  f"{t['control_period_ms']['p99']} ms")
    pooled = json.loads((out / "summary.json").read_text()).get("timing", {})
    print(f"  pooled: period error p99 {pooled.get('period_error_p99_pct')} % (median of the episodes'), "
          f"{pooled.get('idle_periods')} idle periods")
    analyse(recorder.stamps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
