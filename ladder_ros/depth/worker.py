"""Run a depth estimator in its own thread on the newest frame only.

Capture and publishing never wait for the model: :meth:`DepthWorker.submit` drops any frame the
model has not started on yet and keeps the new one (newest frame wins, counted as dropped); the
thread estimates one frame at a time and hands each result to ``on_result``. Torch releases the GIL
inside its kernels, so the ROS executor keeps running while the model computes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ladder_ros.camera.base import LatestSlot
from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.depth.base import DepthEstimate, DepthEstimator


@dataclass(frozen=True)
class DepthJob:
    rgb: np.ndarray
    intrinsics: CameraIntrinsics | None
    stamp_ns: int
    frame_id: str
    submitted_monotonic: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class DepthResult:
    job: DepthJob
    estimate: DepthEstimate | None
    error: str = ""
    finished_monotonic: float = field(default_factory=time.monotonic)

    @property
    def latency_s(self) -> float:
        """From the frame's hand-over to the end of its estimate (queueing + inference)."""
        return self.finished_monotonic - self.job.submitted_monotonic


@dataclass
class WorkerStats:
    submitted: int = 0
    processed: int = 0
    dropped: int = 0
    errors: int = 0
    last_error: str = ""
    last_latency_s: float = float("nan")
    total_latency_s: float = 0.0
    last_inference_s: float = float("nan")
    total_inference_s: float = 0.0

    @property
    def mean_latency_s(self) -> float:
        return self.total_latency_s / self.processed if self.processed else float("nan")

    @property
    def mean_inference_s(self) -> float:
        return self.total_inference_s / self.processed if self.processed else float("nan")


class DepthWorker:
    """A thread that runs ``estimator`` on the newest submitted frame and calls ``on_result``."""

    def __init__(self, estimator: DepthEstimator, on_result: Callable[[DepthResult], None]):
        self.estimator = estimator
        self._on_result = on_result
        self._slot: LatestSlot[DepthJob] = LatestSlot()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stats = WorkerStats()
        self._thread = threading.Thread(target=self._run, name=f"depth-{estimator.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._slot.close()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def submit(self, job: DepthJob) -> None:
        """Queue ``job``, replacing one the thread has not started (never blocks)."""
        with self._lock:
            self._stats.submitted += 1
        self._slot.put(job)

    def stats(self) -> WorkerStats:
        with self._lock:
            return WorkerStats(**{**self._stats.__dict__, "dropped": self._slot.overwritten})

    def _run(self) -> None:
        while not self._stop.is_set():
            job = self._slot.wait(timeout_s=0.5)
            if job is None:
                continue
            try:
                estimate = self.estimator.estimate(job.rgb, job.intrinsics)
                result = DepthResult(job, estimate)
            except Exception as exc:  # noqa: BLE001 - model code raises anything; the thread must live on
                result = DepthResult(job, None, error=f"{type(exc).__name__}: {exc}")
            with self._lock:
                if result.estimate is None:
                    self._stats.errors += 1
                    self._stats.last_error = result.error
                else:
                    self._stats.processed += 1
                    self._stats.last_latency_s = result.latency_s
                    self._stats.total_latency_s += result.latency_s
                    self._stats.last_inference_s = result.estimate.inference_s
                    self._stats.total_inference_s += result.estimate.inference_s
            self._on_result(result)
