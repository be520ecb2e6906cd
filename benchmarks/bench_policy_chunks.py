"""Chunk execution on the wall clock: the chunk executor versus a synchronous request-then-execute loop.

Part 1, side by side in one run: an openpi-protocol stand-in server on 127.0.0.1 (in its own process, as
a real server is) answers after a fixed latency (50, 150, 400 ms); the same client and observation encoding
(the shipped Bridge and DROID configs' cameras and state, 640x480 images resized per request) drive either

* the chunk executor (``ladder_ros.policies.executor``: control thread on absolute deadlines, inference
  thread requesting the next chunk: ahead for absolute actions, once the queue is empty for deltas), or
* a synchronous loop like openpi's DROID example client: every k actions it asks for a chunk and waits,
  sends one action per iteration and sleeps out the rest of the period.

at 5 Hz with k = 4 of 5 (WidowX) and 15 Hz with k = 8 of 15 (Franka), paper Appendix A. Per run it prints
the share of control periods in which no action was sent (for the executor also how often its queue was
empty and how many deadlines the scheduler made its thread miss), the control-period error
(|interval between consecutive actions - period|, p50 and p99, in ms and % of the period) and the
observation-to-action age (action sent - observation taken, p50/p99).

Part 2: observation-to-action latency through the graph: ``ladder-ros up widowx --mode real`` as processes
with a policy config pointing at the stand-in server, a stand-in camera and driver here publishing 640x480
images, joint states and poses at 30 Hz, an episode started; for every action received, its tag's
observation stamp (the camera image's) against the time it arrived: p50/p99, all actions and the first of
each chunk.

    python benchmarks/bench_policy_chunks.py [--seconds 8] [--latencies 0.05,0.15,0.4] [--skip-graph]

Part 3 (``--compile-s S``): a stand-in server that compiles for S seconds on its first request, blocking
its event loop as openpi's does: how long the policy's warm-up takes, and the latency of the first requests
after it (what the first episode's first chunks wait).

    python benchmarks/bench_policy_chunks.py --skip-graph --compile-s 30

Prints numbers; asserts nothing (speed is measured here, never in tests). Loopback only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

apply_network_safe_environment(os.environ)

from ladder_ros.core.observation import Observation  # noqa: E402
from ladder_ros.policies.control_loop import CONTROL_SWITCH_INTERVAL_S, ControlLoop  # noqa: E402
from ladder_ros.policies.executor import ChunkExecutor  # noqa: E402
from ladder_ros.policies.factory import load_policy  # noqa: E402
from ladder_ros.instruments.openpi_fake_server import FakePolicyServer  # noqa: E402
from ladder_ros.policies.observation import ObservationBundle  # noqa: E402
from ladder_ros.policies.openpi_remote import OpenPISource  # noqa: E402

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])  # an end-effector orientation (w, x, y, z)

CAMERA = (480, 640)  # SimplerEnv's 3rd_view_camera
PRIORITY = 10  # the policy node's default control_priority (SCHED_FIFO where granted); --priority changes it


def bench_config(name: str, port: int):
    """A shipped server config pointed at the stand-in (rotation read as Euler XYZ: the bench sends zeros)."""
    config = load_policy(name)
    action = replace(config.action, rotation="euler_xyz") if config.action.kind == "ee_delta" else config.action
    return replace(config, server=replace(config.server, port=port, request_timeout_s=5.0), action=action,
                   max_observation_age_s=1.0)


def valid_chunk(config) -> np.ndarray:
    """A chunk in the middle of the config's bounds (a joint-position policy's zeros are outside the Panda's)."""
    middle = (config.action.low + config.action.high) / 2.0
    return np.tile(middle.astype(np.float32), (config.chunk_length, 1))


def observation_now(config) -> tuple[ObservationBundle, float]:
    joints = next((e.size for e in config.state if e.source == "joint_positions"), 6)
    image = np.random.default_rng(0).integers(0, 255, (*CAMERA, 3), dtype=np.uint8)
    # A joint-position policy's arm is where its chunks point (no seam jump); others' joints do not matter.
    at = valid_chunk(config)[0][:joints] if config.action.kind == "joint_position" else np.zeros(joints)
    observation = Observation(step=0, image=image, aperture=1.0, ee_position=np.array([0.3, 0.0, 0.1]),
                              ee_euler=np.zeros(3), joint_names=tuple(f"j{i}" for i in range(joints)),
                              joint_positions=at.astype(np.float64))
    images = {c.name: image for c in config.cameras}
    now = time.monotonic()
    return ObservationBundle(observation, int(now * 1e9), images), now


def summarise(sent: list[tuple[float, float]], period: float) -> dict:
    """``sent``: (time sent, time of the observation it came from) per action.

    Idle share: of the control periods between the first and the last action, those in which no action
    was sent (a period that ran long because the loop waited for inference counts once per period lost).
    """
    times = np.array([t for t, _ in sent])
    gaps = np.diff(times)
    errors = np.abs(gaps - period) * 1000.0
    lost = np.maximum(0, np.round(gaps / period) - 1).sum()
    ages = np.array([t - o for t, o in sent]) * 1000.0
    return {"idle": lost / (len(gaps) + lost), "err50": np.percentile(errors, 50),
            "err99": np.percentile(errors, 99), "age50": np.percentile(ages, 50), "age99": np.percentile(ages, 99)}


def run_chunked(config, seconds: float) -> dict:
    sys.setswitchinterval(CONTROL_SWITCH_INTERVAL_S)  # as the policy node does on the wall clock
    sent: list[tuple[float, float]] = []
    source = OpenPISource(config)
    source.client.connect()  # as the policy node does at start: the first chunk's latency excludes connecting
    executor = ChunkExecutor(source, config, lambda: observation_now(config), lambda now: 0.0,
                             log=lambda text: None)

    def tick(now: float) -> None:
        action = executor.tick(now)
        if action is not None:
            sent.append((time.monotonic(), action.observation_stamp_ns / 1e9))

    executor.start()
    executor.set_subgoal("put the carrot on the plate")
    deadline = time.monotonic() + 60
    while executor.tick(time.monotonic()) is None:  # the first chunk: not part of the steady state measured
        if time.monotonic() > deadline:
            raise RuntimeError(f"no chunk accepted: {executor.stats()['holding']}")
        time.sleep(0.001)
    executor.period_error_ms.clear()
    executor.idle = 0
    loop = ControlLoop(config.period_s, tick, priority=PRIORITY)
    loop.start()
    time.sleep(seconds)
    loop.stop()
    executor.stop()
    executor.source.close()
    result = summarise(sent, config.period_s)
    result["lead"] = executor.lead_periods()
    result["empty"] = executor.idle  # ticks that found the queue empty (after the first chunk)
    result["missed"] = loop.missed  # deadlines the scheduler made the control thread miss
    return result


def run_synchronous(config, seconds: float) -> dict:
    """openpi's example client loop: infer every k actions (blocking), one action per iteration, sleep the rest.

    It runs in a thread with the same scheduling as the chunk executor's control thread, so the two loops
    differ only in how they wait for inference."""
    results: list[dict] = []

    def body() -> None:
        if PRIORITY > 0:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
            except OSError:
                pass
        results.append(_synchronous_loop(config, seconds))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return results[0]


def _synchronous_loop(config, seconds: float) -> dict:
    source = OpenPISource(config)
    source.infer(observation_now(config)[0], "warm up", 0)  # connect first, as the chunked run does
    sent: list[tuple[float, float]] = []
    chunk, done, observed = None, 0, 0.0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        iteration = time.monotonic()
        if chunk is None or done >= config.execute_steps:
            bundle, observed = observation_now(config)
            chunk, done = source.infer(bundle, "put the carrot on the plate", 0).actions, 0
        _ = chunk[done]
        sent.append((time.monotonic(), observed))
        done += 1
        rest = config.period_s - (time.monotonic() - iteration)
        if rest > 0:
            time.sleep(rest)
    source.close()
    return summarise(sent, config.period_s)


def timer_floor(period: float, seconds: float) -> tuple[float, float]:
    """p50/p99 |period error| (ms) of the control thread alone: what this machine's scheduler gives."""
    ticks: list[float] = []
    loop = ControlLoop(period, lambda now: ticks.append(time.monotonic()), priority=PRIORITY)
    loop.start()
    time.sleep(seconds)
    loop.stop()
    errors = np.abs(np.diff(ticks) - period) * 1000.0
    return float(np.percentile(errors, 50)), float(np.percentile(errors, 99))


def _serve(name: str, latency: float, ports, stop) -> None:
    """The stand-in server's process: valid chunks for the config ``name`` after ``latency`` seconds."""
    config = load_policy(name)
    server = FakePolicyServer(lambda observation: {"actions": valid_chunk(config)}, latency_s=latency).start()
    ports.put(server.port)
    stop.wait()
    server.stop()


class ServerProcess:
    """The stand-in server in a child process, so its work does not share this process's interpreter."""

    def __init__(self, name: str, latency: float):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._ports, self._stop = context.Queue(), context.Event()
        self._process = context.Process(target=_serve, args=(name, latency, self._ports, self._stop), daemon=True)

    def __enter__(self) -> "ServerProcess":
        self._process.start()
        self.port = self._ports.get(timeout=120)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()


def part_one(latencies: list[float], seconds: float, configs: list[str]) -> None:
    print("Part 1: chunk executor vs synchronous request-then-execute loop (stand-in openpi server, loopback)")
    probe = ControlLoop(1.0, lambda now: None, priority=PRIORITY)
    probe.start()
    probe.stop()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; control threads: {probe.scheduling}")
    print(f"{'rate':>6} {'k':>3} {'latency':>8} {'loop':>12} {'idle':>7} {'period err p50':>15} {'p99':>16} "
          f"{'obs->action p50':>16} {'p99':>8}")
    for name in configs:
        period = load_policy(name).period_s
        floor50, floor99 = timer_floor(period, seconds)
        print(f"{1 / period:4.0f}Hz   -        - {'timer alone':>12}       - {floor50:7.2f}ms "
              f"{floor50 / period / 10:5.1f}% {floor99:8.2f}ms {floor99 / period / 10:5.1f}%", flush=True)
        for latency in latencies:
            with ServerProcess(name, latency) as server:
                config = bench_config(name, server.port)
                for label, run in (("chunked", run_chunked), ("synchronous", run_synchronous)):
                    r = run(config, seconds)
                    period_ms = config.period_s * 1000.0
                    extra = (f"  (queue empty {r['empty']} times, deadlines missed {r['missed']}, lead {r['lead']})"
                             if "lead" in r else "")
                    print(f"{config.control_rate_hz:4.0f}Hz {config.execute_steps:3d} {latency * 1000:6.0f}ms "
                          f"{label:>12} {r['idle'] * 100:6.1f}% {r['err50']:7.2f}ms "
                          f"{r['err50'] / period_ms * 100:5.1f}% {r['err99']:8.2f}ms "
                          f"{r['err99'] / period_ms * 100:5.1f}% {r['age50']:14.0f}ms {r['age99']:6.0f}ms{extra}",
                          flush=True)


def part_two(latency: float, seconds: float) -> None:
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState

    from ladder_ros.bringup.client import EpisodeClient
    from ladder_ros.bringup.up import GraphProcesses, prepare
    from ladder_ros.interface_conversions import document_from_msg
    from ladder_ros.messages import ActionTagDoc
    from ladder_ros.specs import topics
    from ladder_ros.runtime.endpoints import message_class, qos
    from ladder_ros.ros_conversions import image_to_msg, joint_state_to_msg, pose_to_msg

    print(f"\nPart 2: camera image published -> action published, through the graph (widowx, real mode, "
          f"stand-in server {latency * 1000:.0f} ms)")
    work = Path(tempfile.mkdtemp(prefix="ladder_bench_policy_"))
    with FakePolicyServer(lambda obs: {"actions": np.zeros((5, 7), dtype=np.float32)}, latency_s=latency) as server:
        config = load_policy("bridge_pi0_server").raw
        policy_file = work / "bench_policy.yaml"
        data = dict(config, name="bench_bridge", server=dict(config["server"], port=server.port),
                    action=dict(config["action"], rotation="euler_xyz"))
        policy_file.write_text(yaml.safe_dump(data))
        overrides = [f"policy.policy={policy_file}", "vlm_verifier.backend=oracle",
                     f"episode_recorder.output_dir={work / 'rec'}"]
        _, launches = prepare("widowx", "real", None, overrides, None)
        ns = "widowx"
        rclpy.init()
        received: list[tuple[int, int, int]] = []  # (arrival ns, observation stamp ns, index in chunk)

        class StandIn(Node):
            def __init__(self):
                super().__init__("bench_stand_in", namespace=ns)
                self.image = self.create_publisher(Image, topics.IMAGE.name, qos(topics.SENSOR))
                self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
                self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
                self.create_subscription(message_class(topics.ACTION_TAG), topics.ACTION_TAG.name, self.on_tag,
                                         qos(topics.STREAM))
                self.frame = np.random.default_rng(0).integers(0, 255, (*CAMERA, 3), dtype=np.uint8)
                self.create_timer(1 / 30, self.publish)

            def publish(self):
                stamp = self.get_clock().now().nanoseconds
                self.image.publish(image_to_msg(self.frame, stamp, "camera"))
                self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), 1.0, stamp, "gripper_aperture"))
                self.pose.publish(pose_to_msg(np.array([0.3, 0.0, 0.1]), IDENTITY, stamp, "base_link"))

            def on_tag(self, msg):
                tag = document_from_msg(msg, ActionTagDoc)
                received.append((self.get_clock().now().nanoseconds, tag.observation_stamp_ns, tag.index))

        with GraphProcesses(launches, dict(os.environ), work / "logs"):
            stand_in, client = StandIn(), EpisodeClient(namespace=ns)
            executor = SingleThreadedExecutor()
            executor.add_node(stand_in)
            executor.add_node(client)
            client.wait_for_graph(executor, timeout_s=120)
            client.start_episode("kitchen_single_2", variant="low_level_policy")
            deadline = time.monotonic() + 120
            while len(received) < 5 and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            received.clear()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            stand_in.destroy_node()
            client.destroy_node()
        rclpy.shutdown()
    ages = np.array([(a - o) / 1e6 for a, o, _ in received])
    first = np.array([(a - o) / 1e6 for a, o, i in received if i == 0])
    print(f"  {len(ages)} actions in {seconds:.0f} s: image published -> action arrived p50 "
          f"{np.percentile(ages, 50):.0f} ms, p99 {np.percentile(ages, 99):.0f} ms; first action of each chunk p50 "
          f"{np.percentile(first, 50):.0f} ms, p99 {np.percentile(first, 99):.0f} ms")


def part_three(compile_s: float, latency: float) -> None:
    from ladder_ros.policies.factory import PolicyProvider
    from ladder_ros.instruments.openpi_fake_server import FakePolicyServer
    from ladder_ros.policies.warmup import WarmUp

    print(f"\npart 3: warm-up against a server that compiles {compile_s:g} s on its first request "
          f"(then {latency * 1000:.0f} ms per inference)")
    chunk = valid_chunk(load_policy("bridge_pi0_server"))
    with FakePolicyServer(lambda observation: {"actions": chunk}, latency_s=latency, compile_s=compile_s) as server:
        config = bench_config("bridge_pi0_server", server.port)
        provider = PolicyProvider(replace(config, server=replace(config.server, request_timeout_s=2.0)))
        warmup = WarmUp(provider, deadline_s=max(300.0, 2 * compile_s))
        started = time.monotonic()
        ready = warmup.attempt()
        print(f"  warm-up: {'ready' if ready else warmup.snapshot()} after {time.monotonic() - started:.2f} s "
              f"(server compile ended {server.compiled_at - started:.2f} s after the start)")
        source = provider.source()
        waits = []
        for n in range(5):
            bundle, _ = observation_now(config)
            t0 = time.perf_counter()
            source.infer(bundle, "put the carrot on the plate", n)
            waits.append((time.perf_counter() - t0) * 1000)
        print(f"  first requests after the warm-up (request bound 2 s): {', '.join(f'{w:.0f}' for w in waits)} ms")
        provider.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--latencies", default="0.05,0.15,0.4", help="stand-in server latencies (s)")
    parser.add_argument("--graph-latency", type=float, default=0.15, help="server latency in part 2 (s)")
    parser.add_argument("--configs", default="bridge_pi0_server,droid_pi05_server",
                        help="policy configs whose layout, rate and horizon part 1 uses")
    parser.add_argument("--skip-graph", action="store_true", help="part 1 only")
    parser.add_argument("--compile-s", type=float, default=0.0,
                        help="part 3: a server compiling this long on its first request (0: skip part 3)")
    parser.add_argument("--priority", type=int, default=PRIORITY,
                        help="control thread SCHED_FIFO priority (0: normal scheduling), as the node's "
                             "control_priority")
    args = parser.parse_args()
    globals()["PRIORITY"] = args.priority
    part_one([float(v) for v in args.latencies.split(",")], args.seconds, args.configs.split(","))
    if not args.skip_graph:
        part_two(args.graph_latency, args.seconds * 2)
    if args.compile_s > 0:
        part_three(args.compile_s, args.graph_latency)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
