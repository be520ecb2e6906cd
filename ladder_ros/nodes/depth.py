"""The depth node: metric depth aligned to any camera stream (the robot's camera or the sim bridge's)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from ladder_ros.camera.base import LatencyWindow, LatestSlot
from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.core.errors import LadderError
from ladder_ros.depth.base import DepthError, DepthEstimator, depth_error
from ladder_ros.depth.registry import SENSOR, make_estimator
from ladder_ros.depth.worker import DepthJob, DepthResult, DepthWorker
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import DEPTH
from ladder_ros.runtime.endpoints import publisher, subscription
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.ros_conversions import (
    depth_from_msg,
    depth_to_msg,
    diagnostics_to_msg,
    image_from_msg,
    intrinsics_from_camera_info,
    stamp_to_ns,
)

MATCH_WINDOW = 30  # recent estimates and measured depths kept to pair them by stamp


class ErrorAccumulator:
    """Depth error summed over the frames scored so far (pixel-weighted means)."""

    def __init__(self) -> None:
        self.frames = 0
        self.pixels = 0
        self._abs_rel = self._sq = self._delta1 = 0.0
        self.last: DepthError | None = None

    def add(self, error: DepthError) -> None:
        self.last = error
        if error.pixels == 0:
            return
        self.frames += 1
        self.pixels += error.pixels
        self._abs_rel += error.abs_rel * error.pixels
        self._sq += error.rmse_m ** 2 * error.pixels
        self._delta1 += error.delta1 * error.pixels

    def summary(self) -> dict[str, float]:
        if not self.pixels:
            return {"compared_frames": 0}
        return {"compared_frames": self.frames, "abs_rel": self._abs_rel / self.pixels,
                "rmse_m": (self._sq / self.pixels) ** 0.5, "delta1": self._delta1 / self.pixels}


class DepthNode(Node):
    """Publishes metric depth aligned to ``camera/image_raw`` from the chosen backend.

    ``moge2`` and ``depth_anything_v2`` estimate depth from each colour image in a worker thread
    (:class:`~ladder_ros.depth.worker.DepthWorker`): image callbacks only hand the newest image
    over, so neither capture nor the executor waits for the model, and frames arriving while the
    model is busy are dropped (counted). The result goes out with its image's stamp and frame id.
    MoGe-2 gets the calibrated horizontal field of view from ``camera/camera_info`` when there is
    one. ``sensor`` passes the camera's own aligned depth on (16UC1 mm or 32FC1 m in, 32FC1 m out).
    With ``compare_to_sensor`` each estimate is scored against the measured depth of the same stamp
    (in simulation the simulator's exact depth) and the running error is in the diagnostics.

    Topics (relative to the namespace): subscribes ``camera/image_raw``, ``camera/camera_info``,
    ``camera/aligned_depth_to_color/image_raw`` (sensor backend or compare_to_sensor); publishes
    ``camera/depth/image_raw`` (sensor_msgs/Image, 32FC1, m, NaN = no depth) and ``diagnostics``
    (backend, device, frames in/out, dropped, latency and inference time in ms, rate in Hz, depth
    error).
    Parameters: see ``DEPTH`` in :mod:`ladder_ros.specs.parameters` (backend, model_path, device,
    fp16, resolution_level, use_camera_info, compare_to_sensor, diagnostics_period_s (s)).
    """

    def __init__(self, *, estimator: DepthEstimator | None = None, node_name: str = "depth", **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, DEPTH)
        self.backend = self.params["backend"]
        self.estimator: DepthEstimator | None = None
        self.worker: DepthWorker | None = None
        if self.backend != SENSOR:
            fp16 = {"auto": None, "on": True, "off": False}[self.params["fp16"]]
            self.estimator = estimator if estimator is not None else make_estimator(
                self.backend, self.params["model_path"], self.params["device"],
                resolution_level=self.params["resolution_level"], fp16=fp16)
            self.worker = DepthWorker(self.estimator, self._on_result)
        self._depth_pub = publisher(self, Image, topics.DEPTH)
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)
        self._results: LatestSlot[DepthResult] = LatestSlot()
        self._ready = self.create_guard_condition(self._publish_results)
        self._intrinsics: CameraIntrinsics | None = None
        self._lock = threading.Lock()
        self.images_in = 0
        self.published = 0
        self.errors = 0
        self.last_error = ""
        self.latency = LatencyWindow()
        self.fov_source = "n/a"
        self.comparison = ErrorAccumulator()
        self._estimates: OrderedDict[int, np.ndarray] = OrderedDict()
        self._measured: OrderedDict[int, np.ndarray] = OrderedDict()
        if self.worker is not None:
            subscription(self, Image, topics.IMAGE, self._on_image, depth=1)
            subscription(self, CameraInfo, topics.CAMERA_INFO, self._on_camera_info, depth=1)
        if self.backend == SENSOR or self.params["compare_to_sensor"]:
            subscription(self, Image, topics.SENSOR_DEPTH, self._on_sensor_depth, depth=2)
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics)
        if self.worker is not None:
            self.worker.start()

    # ------------------------------------------------------------------ inputs
    def _on_camera_info(self, msg: CameraInfo) -> None:
        try:
            intrinsics = intrinsics_from_camera_info(msg)
        except LadderError as exc:
            self.get_logger().warning(f"ignoring camera_info: {exc}", throttle_duration_sec=10.0)
            return
        with self._lock:
            self._intrinsics = intrinsics

    def _on_image(self, msg: Image) -> None:
        try:
            rgb = image_from_msg(msg)
        except LadderError as exc:
            self._failed(f"ignoring an image: {exc}")
            return
        self.images_in += 1
        intrinsics = None
        if self.params["use_camera_info"]:
            with self._lock:
                intrinsics = self._intrinsics
            if intrinsics is not None and intrinsics.width * rgb.shape[0] != intrinsics.height * rgb.shape[1]:
                intrinsics = None  # camera_info of another stream (aspect differs): let the model estimate
        assert self.worker is not None
        self.worker.submit(DepthJob(rgb, intrinsics, stamp_to_ns(msg.header.stamp), msg.header.frame_id))

    def _on_sensor_depth(self, msg: Image) -> None:
        started = time.monotonic()
        try:
            depth = depth_from_msg(msg)
        except LadderError as exc:
            self._failed(f"ignoring measured depth: {exc}")
            return
        stamp = stamp_to_ns(msg.header.stamp)
        if self.backend == SENSOR:
            self.images_in += 1
            self._depth_pub.publish(depth_to_msg(depth, stamp, msg.header.frame_id))
            self.published += 1
            self.latency.add(time.monotonic() - started)
            self.fov_source = "n/a"
            return
        self._remember(self._measured, stamp, depth)
        self._score(stamp)

    def _failed(self, message: str) -> None:
        self.errors += 1
        self.last_error = message
        self.get_logger().error(message, throttle_duration_sec=5.0)

    # ------------------------------------------------------------------ results
    def _on_result(self, result: DepthResult) -> None:  # worker thread
        self._results.put(result)
        self._ready.trigger()

    def _publish_results(self) -> None:
        result = self._results.take()
        if result is None:
            return
        if result.estimate is None:
            self._failed(f"depth for the image stamped {result.job.stamp_ns} failed: {result.error}")
            return
        depth = result.estimate.depth
        if depth.shape != result.job.rgb.shape[:2]:
            self._failed(f"the {self.backend} backend returned depth {depth.shape} for an image "
                         f"{result.job.rgb.shape[:2]}; not published")
            return
        self._depth_pub.publish(depth_to_msg(depth, result.job.stamp_ns, result.job.frame_id))
        self.published += 1
        self.latency.add(time.monotonic() - result.job.submitted_monotonic)
        self.fov_source = result.estimate.fov_source
        if self.params["compare_to_sensor"]:
            self._remember(self._estimates, result.job.stamp_ns, depth)
            self._score(result.job.stamp_ns)

    @staticmethod
    def _remember(store: OrderedDict, stamp: int, depth: np.ndarray) -> None:
        store[stamp] = depth
        while len(store) > MATCH_WINDOW:
            store.popitem(last=False)

    def _score(self, stamp: int) -> None:
        if stamp in self._estimates and stamp in self._measured:
            estimate, measured = self._estimates.pop(stamp), self._measured.pop(stamp)
            if estimate.shape == measured.shape:
                self.comparison.add(depth_error(estimate, measured))

    # ------------------------------------------------------------------ diagnostics
    def diagnostics(self) -> tuple[str, str, dict[str, object]]:
        timing = self.latency.report()
        values: dict[str, object] = {"backend": self.backend, "frames_in": self.images_in,
                                     "published": self.published, "errors": self.errors,
                                     "rate_hz": timing["rate_hz"], "latency_p50_ms": timing["p50_ms"],
                                     "latency_p95_ms": timing["p95_ms"], "fov": self.fov_source}
        if self.worker is not None and self.estimator is not None:
            stats = self.worker.stats()
            values.update({"device": self.estimator.device, "model": getattr(self.estimator, "model_path", ""),
                           "dropped": stats.dropped, "inference_mean_ms": 1000.0 * stats.mean_inference_s})
        if self.params["compare_to_sensor"]:
            values.update(self.comparison.summary())
        if self.last_error:
            values["last_error"] = self.last_error
        if self.published == 0 and self.errors:
            return "error", self.last_error, values
        if timing["rate_hz"] == 0.0:
            return "warn", "no depth published in the last period (no input?)", values
        return "ok", f"{self.backend} at {timing['rate_hz']:.1f} Hz", values

    def _publish_diagnostics(self) -> None:
        level, message, values = self.diagnostics()
        device = self.estimator.device if self.estimator is not None else "sensor"
        self._diagnostics_pub.publish(diagnostics_to_msg(f"{self.get_name()}: depth {self.backend}", device, level,
                                                         message, values, self.get_clock().now().nanoseconds))

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("depth", DepthNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
