"""Measure camera capture and depth on this machine and print the numbers.

    .venv/bin/python benchmarks/bench_camera_depth.py [--frames N] [--size 640x480]
        [--moge-weights model.pt] [--depth-anything-weights FOLDER] [--device cuda]

* capture-to-publish latency of the camera node: a fake camera at 30 Hz through the capture thread,
  the newest-frame hand-over and the publishers, received by a subscriber in the same process
  (stamp = host time at capture, so the subscriber's clock gives the end-to-end latency);
* video playback: a 10 fps video file (MJPG, 640x480) through the capture thread, paced at its frame
  rate and unpaced (``realtime_playback: false``), against the wall clock;
* depth throughput and latency per backend: ``sensor`` (pass-through), MoGe-2 and Depth Anything V2.
  Without weights, tiny random models of the real classes (tests/depth_fixtures.py) on the CPU; with
  ``--moge-weights`` / ``--depth-anything-weights`` the real models on ``--device``;
* depth error against the simulator's true depth: MuJoCo tabletop frames (RGB + exact depth) through
  each backend, with the camera's intrinsics; with tiny random models these numbers measure the
  pipeline, not a model.

Nothing leaves 127.0.0.1 (ROS runs loopback-only); nothing is downloaded. Numbers are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
apply_network_safe_environment(os.environ)

from ladder_ros.camera.model import CameraIntrinsics  # noqa: E402
from ladder_ros.depth.base import depth_error  # noqa: E402
from ladder_ros.depth.registry import make_estimator  # noqa: E402


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def bench_capture(frames: int, width: int, height: int) -> None:
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    from ladder_ros.instruments.cameras.fake import FakeCamera
    from ladder_ros.specs import topics
    from ladder_ros.nodes.camera import CameraNode
    from ladder_ros.runtime.endpoints import subscription
    from ladder_ros.ros_conversions import stamp_to_ns

    rclpy.init()
    latencies: list[float] = []
    node = CameraNode(node_name="camera", namespace="/bench", backend=FakeCamera(width, height, 30.0, depth=True),
                      parameter_overrides=[Parameter("backend", value="fake")])
    probe = rclpy.create_node("probe", namespace="/bench")

    def on_image(msg: Image) -> None:
        latencies.append((time.time_ns() - stamp_to_ns(msg.header.stamp)) / 1e6)

    subscription(probe, Image, topics.IMAGE, on_image, depth=10)
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    executor.add_node(probe)
    deadline = time.monotonic() + frames / 30.0 + 20
    while len(latencies) < frames and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    stats = node.capture.snapshot()
    timing = node.latency.report()
    node.close()
    executor.shutdown()
    rclpy.shutdown()
    print(f"capture -> publish (camera node, fake {width}x{height} RGB + depth at 30 Hz), {len(latencies)} frames:")
    print(f"  in the node (capture thread hand-over to publish): p50 {timing['p50_ms']:.2f} ms, "
          f"p95 {timing['p95_ms']:.2f} ms")
    print(f"  capture stamp to subscriber callback:              p50 {pct(latencies, .5):.2f} ms, "
          f"p95 {pct(latencies, .95):.2f} ms, max {max(latencies, default=float('nan')):.2f} ms")
    print(f"  captured {stats.frames}, published {node.published}, overwritten {stats.overwritten}")


def tabletop_frames(count: int, size: int):
    """(rgb, true depth, intrinsics) of MuJoCo tabletop scenes: several tasks and layouts."""
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path
    from ladder_ros.sim import mujoco_tabletop as tabletop

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    sim = tabletop.MujocoTabletop(suite, render=True, image_size=size, render_depth=True)
    frames = []
    try:
        for i in range(count):
            task = suite.tasks[i % len(suite.tasks)]
            obs = sim.reset(task, i % task.layouts, 0)
            frames.append((obs.image, obs.depth))
    finally:
        sim.close()
    return frames, CameraIntrinsics.from_vertical_fov(tabletop.CAMERA_FOVY_DEG, size, size)


def bench_depth(name: str, estimator, frames, intrinsics, repeats: int) -> None:
    estimator.estimate(frames[0][0], intrinsics)  # warm-up (allocations, kernels)
    latencies, errors = [], []
    started = time.perf_counter()
    for i in range(repeats):
        rgb, truth = frames[i % len(frames)]
        estimate = estimator.estimate(rgb, intrinsics)
        latencies.append(estimate.inference_s * 1000)
        errors.append(depth_error(estimate.depth, truth))
    wall = time.perf_counter() - started
    valid = [e for e in errors if e.pixels]
    print(f"{name:<28} {repeats / wall:6.2f} Hz  p50 {pct(latencies, .5):8.1f} ms  p95 {pct(latencies, .95):8.1f} ms"
          f"  AbsRel {statistics.mean(e.abs_rel for e in valid) if valid else float('nan'):.3f}"
          f"  RMSE {statistics.mean(e.rmse_m for e in valid) if valid else float('nan'):.3f} m"
          f"  delta1 {statistics.mean(e.delta1 for e in valid) if valid else float('nan'):.3f}")


class SensorPassThrough:
    """The ``sensor`` backend's work (convert and republish the measured depth), timed like a model."""

    name, device = "sensor", "cpu"

    def __init__(self, frames):
        self._truth = {id(rgb): depth for rgb, depth in frames}

    def estimate(self, rgb, intrinsics):
        from ladder_ros.depth.base import DepthEstimate
        from ladder_ros.ros_conversions import depth_from_msg, depth_to_msg

        started = time.perf_counter()
        depth = depth_from_msg(depth_to_msg(self._truth[id(rgb)], 0, "cam"))
        return DepthEstimate(depth, "n/a", time.perf_counter() - started)


def bench_video(seconds: float, width: int, height: int) -> None:
    import cv2
    import numpy as np

    from ladder_ros.camera.base import CaptureLoop
    from ladder_ros.camera.opencv_camera import OpenCVCamera

    fps = 10.0
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "video.avi")
        writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
        frames = int(seconds * fps)
        for i in range(frames):
            writer.write(np.full((height, width, 3), (7 * i) % 256, np.uint8))
        writer.release()
        print(f"\nvideo file: {frames} frames at {fps:g} fps ({seconds:g} s), {width}x{height} MJPG, through the "
              "capture thread:")
        for paced in (True, False):
            loop = CaptureLoop(OpenCVCamera(path, real_time=paced), retry_s=0.05)
            start = time.perf_counter()
            loop.start()
            while loop.running:
                time.sleep(0.01)
            elapsed = time.perf_counter() - start
            stats = loop.snapshot()
            loop.stop()
            print(f"  {'paced' if paced else 'unpaced'}: {stats.frames} frames in {elapsed:.2f} s = "
                  f"{stats.frames / elapsed:.1f} frames/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=150, help="frames for the capture benchmark")
    parser.add_argument("--size", default="640x480", help="capture image size WxH")
    parser.add_argument("--sim-size", type=int, default=256, help="MuJoCo image side (px) for the depth runs")
    parser.add_argument("--repeats", type=int, default=10, help="depth estimates per backend")
    parser.add_argument("--moge-weights", help="a real MoGe-2 model.pt (else a tiny random model)")
    parser.add_argument("--depth-anything-weights", help="a real metric Depth Anything V2 folder (else tiny)")
    parser.add_argument("--device", default="cpu", help="torch device for the depth models (cpu, cuda)")
    parser.add_argument("--skip-capture", action="store_true")
    parser.add_argument("--video-seconds", type=float, default=5.0, help="length of the video playback run")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    if not args.skip_capture:
        bench_capture(args.frames, width, height)
        bench_video(args.video_seconds, width, height)
    os.environ.setdefault("MUJOCO_GL", "egl")
    frames, intrinsics = tabletop_frames(6, args.sim_size)
    print(f"\ndepth on {len(frames)} MuJoCo tabletop frames ({args.sim_size}x{args.sim_size}), against the "
          f"simulator's true depth, {args.repeats} estimates each (device {args.device}):")
    bench_depth("sensor (pass-through)", SensorPassThrough(frames), frames, intrinsics, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        from tests.depth_fixtures import save_tiny_depth_anything, save_tiny_moge

        moge = args.moge_weights or str(save_tiny_moge(Path(tmp) / "moge.pt"))
        label = "MoGe-2" + ("" if args.moge_weights else " (tiny, random)")
        bench_depth(label, make_estimator("moge2", moge, args.device), frames, intrinsics, args.repeats)
        da = args.depth_anything_weights or str(save_tiny_depth_anything(Path(tmp) / "da"))
        label = "Depth Anything V2" + ("" if args.depth_anything_weights else " (tiny, random)")
        bench_depth(label, make_estimator("depth_anything_v2", da, args.device), frames, intrinsics, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
