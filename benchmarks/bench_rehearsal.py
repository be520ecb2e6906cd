"""The dress rehearsal's numbers: success beside the lockstep loop, timing per inference delay, stops at the motors.

    .venv/bin/python benchmarks/bench_rehearsal.py [--episodes 24] [--delays 80,400,800] [--timing-episodes 6]
                                                   [--stops 3] [--parts success,timing,stops] [--out DIR]
    .venv/bin/python benchmarks/bench_rehearsal.py --graph franka [--delays 80,400] [--timing-episodes 3] [--stops 3]
    .venv/bin/python benchmarks/bench_rehearsal.py --parts modes --conditions 400:normal:24,800:normal:6
    .venv/bin/python benchmarks/bench_rehearsal.py --graph franka --parts modes --conditions 400:normal:3

Four parts, each on a graph of its own (every node its own process, loopback only):

* **success**: ``ladder-ros rehearse widowx --episodes N`` at the first delay (the user's command, as
  docs/robot_bringup.md gives it), then the same episodes (task, layout, seed, variant, scripted expert, its
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

* **modes**: for each condition ``DELAY[:LATENCY_MODEL[:EPISODES]]`` of ``--conditions``, the same episodes (tasks,
  layouts, seeds, expert noise) rehearsed under ``--execution synchronous`` and ``--execution realtime`` side by
  side: success with its Wilson interval, the median episode wall time, the idle periods by cause (the first chunk
  of a subgoal, the driver holding, the policy having nothing to give) and their share, the largest gap between
  applied actions outside subgoal starts, observation-to-action age against the inference time plus 1.5 periods,
  the actions dropped as stale and the largest splice jump against the seam guard. Beside every measurement: the
  latency distribution the policy measured (every chunk's, read from the recordings), the one-request-in-flight
  condition for zero idle (``length - d >= L / P``, d the periods of latency) and the least idle share any schedule
  with one request in flight can reach at those latencies (:func:`one_in_flight_idle_bound`).

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


def rehearse(out: Path, episodes: int, delay_ms: float, graph: str = "widowx", *, execution: str | None = None,
             latency_model: str | None = None) -> dict:
    """``ladder-ros rehearse GRAPH`` as a user runs it; its summary.json and records."""
    chosen = ["--tasks", ",".join(TASKS), "--variant", VARIANT] if graph == "widowx" else []  # franka: its defaults
    extra = ["--execution", execution] if execution else []
    extra += ["--latency-model", latency_model] if latency_model else []
    command = [str(REPO / ".venv" / "bin" / "ladder-ros"), "rehearse", graph, "--episodes", str(episodes),
               *chosen, "--inference-delay-ms", f"{delay_ms:g}", *extra, "--out", str(out)]
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
            from ladder_ros.instruments.franka_twin.node import TWIN_JOINT_STATES as topic
            self.rest_rad_s = FRANKA_REST_RAD_S
        else:
            from ladder_ros.instruments.widowx_twin import xs_wire
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
    from ladder_ros.specs import topics

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


def one_in_flight_idle_bound(length: int, latencies_periods) -> float:
    """The least idle share of a schedule that asks at control ticks with one request in flight, chunk after chunk,
    at these latencies (in control periods); a schedule that times its requests between ticks (realtime) can do
    a little better.

    A request goes out at a tick with ``x`` commands still queued; its chunk serves from ``d = floor(l) + 1``
    ticks later; the ``min(x, d - 1)`` commands given meanwhile are stale in it. With ``length >= 2d - 1`` some
    ``x`` leaves no idle period; otherwise the best split is ``x = floor((length - 1) / 2)``, idling ``d - 1 - x``
    periods in a cycle of ``d - 1 + length - 2x``.
    """
    idle = cycle = 0.0
    for ell in latencies_periods:
        d = int(ell) + 1
        if length >= 2 * d - 1:
            cycle += max(1, d)
            continue
        x = (length - 1) // 2
        idle += d - 1 - x
        cycle += d - 1 + length - 2 * x
    return idle / cycle if cycle else 0.0


def chunk_latencies_ms(out: Path, namespace: str) -> list[float]:
    """Every chunk's inference latency as the policy measured it, from the episodes' recordings (action tags)."""
    from ladder_ros.recording.bag import read_bag

    topic = f"/{namespace}/policy/action_tag"
    latencies = []
    for bag in sorted((out / "recordings").glob("*")):
        try:
            _, messages = read_bag(bag, decode_topics=[topic])
        except Exception as exc:  # a bag that cannot be read is said, not fatal to the benchmark
            print(f"  (cannot read {bag.name}: {exc})", flush=True)
            continue
        seen = set()
        for tag in messages.get(topic, []):
            if tag.chunk_id not in seen and not tag.held:
                seen.add(tag.chunk_id)
                latencies.append(float(tag.inference_ms))
    return latencies


def mode_summary(run: dict, period_ms: float) -> dict:
    """The modes table's numbers of one rehearsal run."""
    records = run["records"]
    timings = [r.get("timing") or {} for r in records]
    gaps = {cause: sum((t.get("gaps") or {}).get(cause, 0) for t in timings)
            for cause in ("subgoal_start", "driver_hold", "policy_idle")}
    applied = sum(t.get("applied_actions", 0) for t in timings)
    outside = [t["max_gap_outside_starts_ms"] for t in timings if t.get("max_gap_outside_starts_ms") is not None]
    ages = [t["obs_to_action_age_ms"]["p50"] for t in timings if (t.get("obs_to_action_age_ms") or {}).get("p50")]
    reports = [r.get("policy_report") or {} for r in records]
    splice, command = {}, {}
    for report in reports:
        for name, value in (report.get("splice_jump_max") or {}).items():
            splice[name] = max(splice.get(name, 0.0), value)
        if report.get("execution") == "realtime":  # the largest command a takeover gave (after its blend)
            for name, value in (report.get("seam_jump_max") or {}).items():
                command[name] = max(command.get(name, 0.0), value)
    return {"success": rate(records) if any(r.get("scored") for r in records) else "unscored",
            "wall_s": statistics.median(r["wall_s"] for r in records),
            "steps": statistics.median(r["steps_used"] for r in records), "gaps": gaps,
            "idle_share": gaps["policy_idle"] / max(1, applied + gaps["policy_idle"] + gaps["driver_hold"]),
            "max_gap_outside_starts_ms": max(outside) if outside else None,
            "age_p50_ms": statistics.median(ages) if ages else None,
            "stale": sum(r.get("stale_dropped", 0) for r in reports),
            "refused": sum(sum((r.get("rejected_chunks") or {}).values()) for r in reports),
            "splice_jump_max": splice, "splice_command_max": command,
            "reanchored": sum(r.get("reanchored", 0) for r in reports),
            "execution": {r.get("execution") for r in reports}}


def modes_part(args, out: Path) -> None:
    """Synchronous and realtime execution side by side on the same episodes, per condition (module docstring)."""
    import numpy as np

    from ladder_ros.core.presets import get_preset
    from ladder_ros.policies.factory import load_policy

    policy = load_policy("droid_pi05_server" if args.graph == "franka" else "bridge_pi0_server")
    period_ms = 1000.0 / get_preset(policy.embodiment).control_rate_hz
    seam = policy.seam
    for condition in args.conditions:
        delay, model, episodes = condition
        print(f"\n== {args.graph}, {delay:g} ms inference ({model}), {episodes} episodes per mode ==", flush=True)
        rows = []
        for mode in ("synchronous", "realtime"):
            folder = out / f"modes_{args.graph}_{delay:g}ms_{model}_{mode}"
            run = rehearse(folder, episodes, delay, args.graph, execution=mode, latency_model=model)
            latencies = chunk_latencies_ms(folder, "franka" if args.graph == "franka" else "widowx")
            rows.append((mode, mode_summary(run, period_ms), latencies))
        for mode, summary, latencies in rows:
            arr = np.asarray(latencies or [np.nan])
            ell = arr / period_ms
            p50, p99 = np.percentile(arr, 50), np.percentile(arr, 99)
            d50, d99 = int(p50 // period_ms) + 1, int(p99 // period_ms) + 1
            bound = one_in_flight_idle_bound(policy.chunk_length, ell[np.isfinite(ell)])
            print(f"  {mode}: measured latency p50/p90/p99/max {p50:.0f}/{np.percentile(arr, 90):.0f}/{p99:.0f}/"
                  f"{arr.max():.0f} ms over {len(latencies)} chunks; zero idle with one request in flight needs "
                  f"length - d >= L/P: {policy.chunk_length} - {d50 - 1} >= {p50 / period_ms:.2f} at p50 "
                  f"({'holds' if policy.chunk_length - (d50 - 1) >= p50 / period_ms else 'fails'}), "
                  f"{policy.chunk_length} - {d99 - 1} >= {p99 / period_ms:.2f} at p99 "
                  f"({'holds' if policy.chunk_length - (d99 - 1) >= p99 / period_ms else 'fails'}); least idle share "
                  f"with one in flight at these latencies {bound:.1%}", flush=True)
            summary["bound"], summary["latency_p50"] = bound, p50
        print("\n| mode | success (Wilson 95 %) | episode wall time, median (s) | steps, median | idle periods: "
              "subgoal starts / driver holds / policy idle | policy idle share (bound) | largest gap outside subgoal "
              "starts (ms) | observation to action p50 (ms) vs inference p50 + 1.5 periods | dropped as stale | "
              "refused / reanchored chunks | largest splice offset; largest command a takeover gave (seam guard) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        bounds = (("translation_m", seam.max_translation_m), ("rotation_rad", seam.max_rotation_rad),
                  ("joint_rad", seam.max_joint_rad))
        guard = ", ".join(f"{k} {v:g}" for k, v in bounds if v is not None)
        for mode, s, _ in rows:
            g = s["gaps"]
            gap = s["max_gap_outside_starts_ms"]
            jump = ", ".join(f"{k} {v:.3g}" for k, v in s["splice_jump_max"].items()) or "none"
            jump += "; " + (", ".join(f"{k} {v:.3g}" for k, v in s["splice_command_max"].items()) or "none")
            print(f"| {mode} | {s['success']} | {s['wall_s']:.1f} | {s['steps']:.0f} | {g['subgoal_start']} / "
                  f"{g['driver_hold']} / {g['policy_idle']} | {s['idle_share']:.1%} ({s['bound']:.1%}) | "
                  f"{gap} ({(gap or 0) / period_ms:.2f} periods) | {s['age_p50_ms']} vs "
                  f"{s['latency_p50'] + 1.5 * period_ms:.0f} | {s['stale']} | {s['refused']} / {s['reanchored']} | "
                  f"{jump} ({guard}) |")
        sync, real = rows[0][1], rows[1][1]
        print(f"  realtime's median episode is {1 - real['wall_s'] / sync['wall_s']:.1%} shorter than synchronous's",
              flush=True)


def parse_conditions(text: str) -> list[tuple[float, str, int]]:
    """``DELAY[:MODEL[:EPISODES]]`` items, comma-separated (defaults: normal, 3 episodes)."""
    conditions = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        fields = item.split(":")
        conditions.append((float(fields[0]), fields[1] if len(fields) > 1 else "normal",
                           int(fields[2]) if len(fields) > 2 else 3))
    return conditions


def main() -> int:
    apply_network_safe_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", choices=("widowx", "franka"), default="widowx",
                        help="franka: the Franka graph against franky-sim (no success part: nothing is scored)")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--delays", default="80,400,800", help="inference delays (ms); the first is the success run's")
    parser.add_argument("--timing-episodes", type=int, default=6)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--parts", default="success,timing,stops", help="success, timing, stops, modes")
    parser.add_argument("--conditions", default="400:normal:24,800:normal:6,400:heavy_tail:6",
                        help="the modes part's conditions: DELAY[:LATENCY_MODEL[:EPISODES]], comma-separated")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench_rehearsal"))
    args = parser.parse_args()
    args.delays = [float(d) for d in args.delays.split(",") if d.strip()]
    args.conditions = parse_conditions(args.conditions)
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
    if "modes" in parts:
        modes_part(args, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
