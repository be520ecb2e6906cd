"""A camera that needs no device: a synthetic scene at a fixed rate, for tests, benchmarks and dry runs.

Every frame shows a grey ramp with the frame's sequence number written into its first pixels (so a
receiver can tell which frame it got), and, with ``depth=True``, the depth of a tilted plane seen
by the camera's intrinsics. Stamps are the host's wall clock when the frame is made, like a device
whose clock is synchronised with the host.
"""

from __future__ import annotations

import time

import numpy as np

from ladder_ros.camera.base import EndOfStream
from ladder_ros.camera.model import CameraIntrinsics, Frame
from ladder_ros.core.errors import ConfigError


def sequence_from_image(color: np.ndarray) -> int:
    """The sequence number a :class:`FakeCamera` wrote into an image."""
    head = np.asarray(color[0, :8, 0], dtype=np.uint64)
    return int(sum(int(b) << (8 * i) for i, b in enumerate(head)))


class FakeCamera:
    """Synthetic frames at ``fps`` (``frames``: stop after that many, 0 = never)."""

    name = "fake"

    def __init__(self, width: int = 640, height: int = 480, fps: float = 30.0, depth: bool = True,
                 frames: int = 0, intrinsics: CameraIntrinsics | None = None):
        if width < 8 or height < 2:
            raise ConfigError(f"a fake camera image is at least 8x2 pixels, got {width}x{height}")
        if not 0 < fps <= 1000:
            raise ConfigError(f"fake camera fps must be in (0, 1000], got {fps!r}")
        self.width, self.height, self.fps, self.with_depth, self.frames = width, height, float(fps), depth, frames
        self.intrinsics = intrinsics or CameraIntrinsics(width, height, 0.9 * width, 0.9 * width,
                                                         (width - 1) / 2, (height - 1) / 2)
        self._sequence = 0
        self._next_due = 0.0
        self._base = np.tile(np.linspace(0, 255, width, dtype=np.float32).astype(np.uint8)[None, :, None],
                             (height, 1, 3))
        v, u = np.mgrid[0:height, 0:width].astype(np.float32)
        # A plane tilted away from the camera: 0.6 m at the top row to 1.0 m at the bottom.
        self._depth = (0.6 + 0.4 * v / max(height - 1, 1)).astype(np.float32)
        self._opened = False

    def open(self) -> CameraIntrinsics:
        self._opened = True
        self._next_due = time.monotonic()
        return self.intrinsics

    def read(self, timeout_s: float) -> Frame | None:
        if not self._opened:
            raise ConfigError("open() the fake camera before reading it")
        if self.frames and self._sequence >= self.frames:
            raise EndOfStream(f"fake camera: all {self.frames} frames sent")
        wait = self._next_due - time.monotonic()
        if wait > timeout_s:
            time.sleep(timeout_s)
            return None
        if wait > 0:
            time.sleep(wait)
        self._next_due = max(self._next_due + 1.0 / self.fps, time.monotonic() - 1.0 / self.fps)
        color = self._base.copy()
        seq = self._sequence
        color[0, :8, 0] = [(seq >> (8 * i)) & 0xFF for i in range(8)]
        self._sequence += 1
        return Frame(color=color, stamp_ns=time.time_ns(), sequence=seq, received_monotonic=time.monotonic(),
                     depth=self._depth.copy() if self.with_depth else None)

    def close(self) -> None:
        self._opened = False
