"""The dress rehearsal's numbers: success beside the lockstep loop, timing per inference delay, stops at the motors.

    .venv/bin/python benchmarks/bench_rehearsal.py [--episodes 24] [--delays 80,400,800] [--timing-episodes 6]
                                                   [--stops 3] [--parts success,timing,stops] [--out DIR]
    .venv/bin/python benchmarks/bench_rehearsal.py --graph franka [--delays 80,400] [--timing-episodes 3] [--stops 3]

Three parts, each on a graph of its own (every node its own process, loopback only):

* **success**: ``ladder-ros rehearse widowx --episodes N`` at the first delay (the user's command, as
  the README gives it), then the same episodes (task, layout, seed, variant, scripted expert, its
  noise, oracle verifier) in the in-process lockstep loop of ``sim-eval``; both success rates with
  their Wilson intervals, and per task.
* **timing**: ``ladder-ros rehearse widowx`` at each further delay (``--timing-episodes`` episodes
  each), and the success part's run for the first: the control period p50/p99, its error p99, idle
  periods, the largest gap between applied actions, observation-to-action age and the server's
  inference time, pooled over each run's episodes (``summary.json``).
* **stops**: the rehearsal's graph driven in this process (:class:`~ladder_ros.evaluation.rehearsal.Rehearsal`),
  ``--stops`` episodes interrupted mid-motion by the driver's e-stop (``robot/estop``), then one by
  killing the policy process (the driver's watchdog holds the arm; the graph ends with the policy):
  the time until the twin's motors are at rest, from the twin's own joint states
  (``/wx250s/joint_states``, 100 Hz, the motor model's velocities exactly 0 once every move has
  ended), in ms and in control periods; for the e-stop from the service call, for the watchdog from
  the last action the driver applied.

``--graph franka`` rehearses the Franka graph against franky-sim (docs/rehearsal_franka.md): no success
part (no object scene, nothing is scored), the timing part on its default task, and the stops read
franky-sim's own joint velocities (``twin/joint_states`` of the ``franka_twin`` node, sampled at 100 Hz
of simulated time): at rest once no joint moves faster than 0.01 rad/s (``bench_robot_safety.py``'s
threshold; a simulated Franka never stands exactly still).

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

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

TASKS = ("kitchen_single_2", "sorting_split_2", "relay_2")
VARIANT = "proprio_verifier"  # the WidowX params file's orchestrator variant
MOVING_RAD_S = 0.05  # a joint faster than this is "moving": the moment to interrupt
FRANKA_TASK = "kitchen_single_1"  # `rehearse franka`'s default: no scene, the task gives instruction and budget only
FRANKA_REST_RAD_S = 0.01  # franky-sim's arm at rest below this (bench_robot_safety.py)


def rehearse(out: Path, episodes: int, delay_ms: float, graph: str = "widowx") -> dict:
    """``ladder-ros rehearse GRAPH`` as a user runs it; its summary.json and records."""
    chosen = ["--tasks", ",".join(TASKS), "--variant", VARIANT] if graph == "widowx" else []  # franka: its defaults
    command = [str(REPO / ".venv" / "bin" / "ladder-ros"), "rehearse", graph, "--episodes", str(episodes),
               *chosen, "--inference-delay-ms", f"{delay_ms:g}", "--out", str(out)]
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


def lockstep(records: list[dict], out: Path) -> list[dict]:
    """The rehearsal's episodes (task, layout, seed, variant) in sim-eval's in-process lockstep loop."""
    from ladder_ros.evaluation import sim_eval

    config = sim_eval.EvalConfig(
        suite_path=str(sim_eval.share_path("config", "suites", "tabletop.yaml")), simulator="mujoco_tabletop",
        variants=(VARIANT,), task_ids=TASKS, episodes=1, base_seed=0, policy="scripted_expert",
        noise="bridge_like", verifier="oracle", render=False, jobs=1)
    jobs = [sim_eval.EvalJob(r["task_id"], r["variant"], layout=r["layout"], seed=r["seed"]) for r in records]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "episodes.jsonl"
    path.unlink(missing_ok=True)
    sim_eval.run_jobs(config, jobs, path, progress=False)
    return sim_eval.read_records(path)


def rate(records: list[dict]) -> str:
    from ladder_ros.core.metrics import wilson_interval

    wins = sum(1 for r in records if r.get("success"))
    low, high = wilson_interval(wins, len(records))
    return f"{wins}/{len(records)} = {wins / len(records):5.1%} [{low:.1%}, {high:.1%}]"


def episode_key(record: dict) -> tuple:
    return record["task_id"], record["layout"], record["seed"]


def success_part(args, out: Path) -> dict:
    run = rehearse(out / f"rehearse_{args.delays[0]:g}ms", args.episodes, args.delays[0])
    reference = lockstep(run["records"], out / "lockstep")
    print(f"\nsuccess, {VARIANT}, scripted expert (bridge_like noise), oracle verifier, the same "
          f"{len(run['records'])} episodes (task, layout, seed):")
    print(f"  rehearsal (wall clock, {args.delays[0]:g} ms inference): {rate(run['records'])}")
    print(f"  lockstep sim-eval (in process):            {rate(reference)}")
    by_key = {episode_key(r): r for r in reference}
    for task in TASKS:
        mine = [r for r in run["records"] if r["task_id"] == task]
        theirs = [by_key[episode_key(r)] for r in mine if episode_key(r) in by_key]
        if mine:
            print(f"  {task:18s} rehearsal {rate(mine)}   lockstep {rate(theirs)}")
    differ = [(*episode_key(r), r["success"], by_key[episode_key(r)]["success"], r["finish_reason"],
               r["steps_used"], by_key[episode_key(r)]["steps_used"])
              for r in run["records"] if episode_key(r) in by_key and r["success"] != by_key[episode_key(r)]["success"]]
    print(f"  episodes whose outcome differs: {len(differ)}")
    for task, layout, seed, ours, theirs, reason, steps, ref_steps in differ:
        print(f"    {task} layout {layout} seed {seed}: rehearsal {'success' if ours else 'failure'} "
              f"({reason}, {steps} steps), lockstep {'success' if theirs else 'failure'} ({ref_steps} steps)")
    steps = [(r["steps_used"], by_key[episode_key(r)]["steps_used"])
             for r in run["records"] if episode_key(r) in by_key]
    if steps:
        print(f"  steps per episode, median: rehearsal {statistics.median(s for s, _ in steps):.0f}, "
              f"lockstep {statistics.median(s for _, s in steps):.0f}")
    counts = [(r.get("safety") or {}).get("counts") or {} for r in run["records"]]
    if counts:  # the driver's interventions (lockstep has no driver: its tabletop clips the target silently)
        print("  the driver's interventions per episode, median (max): " + ", ".join(
            f"{kind} {statistics.median(c.get(kind, 0) for c in counts):g} ({max(c.get(kind, 0) for c in counts)})"
            for kind in ("workspace", "unreachable", "watchdog", "stall", "robot_error")))
    return run


def timing_row(delay: float, summary: dict, episodes: int) -> str:
    t = summary.get("timing") or {}
    if not t:
        return f"| {delay:g} ms | {episodes} | (no applied actions) |"
    age = t["obs_to_action_age_ms"]
    return (f"| {delay:g} ms | {episodes} | {t['control_period_ms']['p50']} / {t['control_period_ms']['p99']} | "
            f"{t['period_error_p99_pct']} | {t['idle_periods']} | {t['max_action_gap_ms']} | "
            f"{age['p50']} / {age['p95']} / {age['p99']} | {t['inference_ms']['p50']} / {t['inference_ms']['p95']} |")


def timing_part(args, out: Path, first: dict | None) -> None:
    rows = []
    for delay in args.delays:
        if first is not None and delay == args.delays[0]:
            rows.append(timing_row(delay, first["summary"], len(first["records"])))
            continue
        run = rehearse(out / f"rehearse_{delay:g}ms", args.timing_episodes, delay, args.graph)
        rows.append(timing_row(delay, run["summary"], len(run["records"])))
        sims = [r.get("twin", {}).get("franky_sim", {}) for r in run["records"]]
        if any(sims):
            print(f"  franky-sim's real-time factor at the end of each episode (over its last second): "
                  f"{[s.get('recent_real_time_factor') for s in sims]}; since it started: "
                  f"{[s.get('real_time_factor') for s in sims]}", flush=True)
    print("\n| inference | episodes | control period p50 / p99 (ms) | period error p99 (%) | idle periods | "
          "largest action gap (ms) | observation to action p50 / p95 / p99 (ms) | inference p50 / p95 (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows), flush=True)


class MotorWatch:
    """The simulated arm's own joint states: when every arm joint last moved faster than ``rest_rad_s``.

    The WidowX twin's xs_sdk joint states (its motor model's velocities are exactly 0 at rest), or franky-sim's
    as the ``franka_twin`` node publishes them.
    """

    def __init__(self, node, graph: str = "widowx"):
        from sensor_msgs.msg import JointState

        if graph == "franka":
            from ladder_ros.nodes.franka_twin import TWIN_JOINT_STATES as topic
            self.rest_rad_s = FRANKA_REST_RAD_S
        else:
            from ladder_ros.sim.widowx_twin import xs_wire
            topic = xs_wire.topic("wx250s", xs_wire.JOINT_STATES)
            self.rest_rad_s = 0.0
        self.moving_since: float | None = None
        self.last_moving = time.monotonic()
        self.speed = 0.0
        node.create_subscription(JointState, topic, self._on_state, 50)

    def _on_state(self, msg) -> None:
        fingers = ("gripper", "left_finger", "right_finger")
        arm = [abs(v) for name, v in zip(msg.name, msg.velocity) if name not in fingers]
        self.speed = max(arm, default=0.0)
        if self.speed > self.rest_rad_s:
            self.last_moving = time.monotonic()


def _at_rest(watch: MotorWatch, still_s: float = 0.2) -> bool:
    """Every arm motor has stood still for ``still_s`` (the motor model's velocities are exactly 0 then)."""
    return watch.speed <= watch.rest_rad_s and time.monotonic() - watch.last_moving > still_s


def stops_part(args, out: Path) -> None:
    """E-stops mid-motion on one graph, then a killed policy (the graph ends with it): time to the motors at rest."""
    from std_srvs.srv import Trigger

    from ladder_ros.bringup.session import GraphSession
    from ladder_ros.core.errors import LadderError
    from ladder_ros.evaluation.rehearsal import Rehearsal, plan_rehearsal
    from ladder_ros.nodes import topics

    plan = plan_rehearsal(args.graph, out / "stops", inference_delay_ms=args.delays[0])
    session = GraphSession(plan.graph, plan.launches, out / "stops" / "logs", startup_timeout_s=240.0)
    results: dict[str, list[float]] = {"e-stop (from the service call)": [],
                                       "watchdog (from the last applied action)": []}
    with session:
        operator = Rehearsal(session, plan.params, plan.namespace)
        operator.prepare()
        observer, executor, period_s = operator.observer, operator.executor, operator.period_s
        watch = MotorWatch(observer, args.graph)
        estop = observer.create_client(Trigger, topics.ESTOP_SERVICE)
        release = observer.create_client(Trigger, topics.ESTOP_RELEASE_SERVICE)
        for k in range(args.stops + 1):
            kind = "e-stop (from the service call)" if k < args.stops else "watchdog (from the last applied action)"
            state: dict = {}

            def during(episode_id: str, kind=kind, state=state) -> None:
                if "t0" not in state and "killed" not in state:
                    if watch.speed >= MOVING_RAD_S:  # mid-motion: interrupt now
                        if kind.startswith("e-stop"):
                            state["t0"] = time.monotonic()
                            estop.call_async(Trigger.Request())
                        else:
                            session.processes.signal("policy", signal.SIGKILL)
                            state["killed"] = time.monotonic()
                    return
                if "t0" in state and "rest" not in state and _at_rest(watch):
                    state["rest"] = watch.last_moving
                    state["release"] = release.call_async(Trigger.Request())  # the arm re-arms after the episode
                if "release" in state and state["release"].done() and "aborted" not in state:
                    state["aborted"] = True
                    observer.abort(episode_id, "stop measured")

            try:
                task, variant = (TASKS[k % len(TASKS)], VARIANT) if args.graph == "widowx" else (FRANKA_TASK, "")
                operator.episode(task, variant=variant, layout=0, seed=k, timeout_s=300.0, during=during)
            except LadderError as exc:  # the killed policy: the session says the graph lost it
                if "killed" not in state:
                    raise
                print(f"  the graph after the policy was killed: {str(exc).splitlines()[0][:200]}", flush=True)
            if "killed" in state:  # from the last action the driver applied (stamped in system time)
                wall_now, mono_now = time.time(), time.monotonic()
                last = max((s / 1e9 for s in observer.command_stamps_ns), default=wall_now)
                state["t0"] = mono_now - (wall_now - last)
                deadline = time.monotonic() + 30.0
                while time.monotonic() < deadline and not _at_rest(watch):
                    executor.spin_once(timeout_sec=0.01)
                state["rest"] = watch.last_moving
            if "t0" not in state:
                print(f"  stop {k}: the arm never moved fast enough to interrupt", flush=True)
                continue
            results[kind].append((state["rest"] - state["t0"]) * 1000.0)
            print(f"  stop {k}: {kind}: motors at rest after {results[kind][-1]:.0f} ms", flush=True)
    for kind, values in results.items():
        if values:
            print(f"{kind}: motors at rest after median {statistics.median(values):.0f} ms (max {max(values):.0f} "
                  f"ms) = {statistics.median(values) / 1000 / period_s:.2f} control periods of {period_s * 1000:.0f} "
                  f"ms (n={len(values)})", flush=True)


def main() -> int:
    apply_network_safe_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", choices=("widowx", "franka"), default="widowx",
                        help="franka: the Franka graph against franky-sim (no success part: nothing is scored)")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--delays", default="80,400,800", help="inference delays (ms); the first is the success run's")
    parser.add_argument("--timing-episodes", type=int, default=6)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--parts", default="success,timing,stops")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench_rehearsal"))
    args = parser.parse_args()
    args.delays = [float(d) for d in args.delays.split(",") if d.strip()]
    parts = {p.strip() for p in args.parts.split(",")}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.graph == "franka" and "success" in parts:
        print("no success part for franka: franky-sim has no object scene, so nothing is scored", flush=True)
        parts.discard("success")
    first = success_part(args, out) if "success" in parts else None
    if "timing" in parts:
        timing_part(args, out, first)
    if "stops" in parts:
        stops_part(args, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
