"""The camera backend interface and the capture loop that hands over only the newest frame.

A backend (:class:`CameraBackend`) does one thing: ``read`` blocks until the device's next frame.
:class:`CaptureLoop` wraps any backend in a thread that keeps reading, counts the frames the device
skipped (gaps in its frame counter) and the frames that were overwritten before anyone took them
(newest frame only: a slow consumer never makes capture wait), and tells its
owner that a frame is ready. No rclpy here.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Generic, Protocol, TypeVar, runtime_checkable

from ladder_ros.camera.model import CameraIntrinsics, Frame
from ladder_ros.core.errors import LadderError

T = TypeVar("T")


# Where a newcomer whose camera does not open reads what to check (tests/test_docs_shape.py checks it resolves).
NO_CAMERA = "docs/robot_bringup.md#no-camera"


class CameraError(LadderError):
    """The camera cannot be opened or stopped delivering (unplugged, busy, bad settings)."""


class EndOfStream(CameraError):
    """A recording or video file has no more frames."""


@runtime_checkable
class CameraBackend(Protocol):
    """A colour camera, optionally with depth aligned to colour."""

    name: str

    def open(self) -> CameraIntrinsics | None:
        """Start streaming; the colour stream's intrinsics as the device reports them (None: unknown)."""

    def read(self, timeout_s: float) -> Frame | None:
        """The next frame, waiting at most ``timeout_s``; None on timeout. Raises :class:`CameraError`
        when the device failed and :class:`EndOfStream` at the end of a recording."""

    def close(self) -> None:
        """Stop streaming and release the device."""


class LatestSlot(Generic[T]):
    """A hand-over of size one between threads: ``put`` never blocks and replaces an unread item.

    ``overwritten`` counts items replaced before anyone took them (dropped, newest wins).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: T | None = None
        self.overwritten = 0
        self._closed = False

    def put(self, item: T) -> bool:
        """Store ``item``; True when it replaced an item nobody took."""
        with self._cond:
            replaced = self._item is not None
            if replaced:
                self.overwritten += 1
            self._item = item
            self._cond.notify_all()
            return replaced

    def take(self) -> T | None:
        """The newest item, or None when there is none; the slot is empty afterwards."""
        with self._cond:
            item, self._item = self._item, None
            return item

    def wait(self, timeout_s: float | None = None) -> T | None:
        """Block until an item is there (or the slot is closed, or ``timeout_s`` passed), then take it."""
        with self._cond:
            self._cond.wait_for(lambda: self._item is not None or self._closed, timeout=timeout_s)
            item, self._item = self._item, None
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


@dataclass
class CaptureStats:
    """What the capture loop has seen (all counts since it started)."""

    frames: int = 0  # frames read from the device
    device_gaps: int = 0  # frames the device's counter skipped (dropped before they reached the host)
    overwritten: int = 0  # frames replaced in the hand-over before the consumer took them
    timeouts: int = 0  # reads that waited longer than the read timeout
    errors: int = 0
    last_error: str = ""
    ended: bool = False  # the recording or video file ended
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def dropped(self) -> int:
        return self.device_gaps + self.overwritten


class CaptureLoop:
    """Opens a backend and reads it in its own thread; the newest frame waits in :attr:`slot`.

    A camera that cannot be opened (not plugged in, busy) or that fails while streaming is closed
    and opened again every ``retry_s``, with the reason in :attr:`stats`; the end of a recording
    stops the loop. ``on_open(intrinsics)`` runs in the capture thread each time the camera opens,
    ``on_frame()`` after each frame is stored: both must be quick (a ROS node triggers a guard
    condition there, so its executor publishes the frame).
    """

    def __init__(self, backend: CameraBackend, *, on_frame: Callable[[], None] | None = None,
                 on_open: Callable[[CameraIntrinsics | None], None] | None = None,
                 read_timeout_s: float = 1.0, retry_s: float = 1.0):
        self.backend = backend
        self.slot: LatestSlot[Frame] = LatestSlot()
        self.stats = CaptureStats()
        self.is_open = False
        self._on_frame = on_frame
        self._on_open = on_open
        self._read_timeout_s = read_timeout_s
        self._retry_s = retry_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sequence: int | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"capture-{self.backend.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self.slot.close()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._thread is None or not self._thread.is_alive():
            self._close()  # never under a read still running in the thread

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def snapshot(self) -> CaptureStats:
        with self._lock:
            return CaptureStats(**{**self.stats.__dict__, "overwritten": self.slot.overwritten})

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            self.stats.errors += 1
            self.stats.last_error = str(exc)
        self._close()
        self._stop.wait(self._retry_s)

    def _close(self) -> None:
        if self.is_open:
            self.is_open = False
            try:
                self.backend.close()
            except CameraError:
                pass

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.is_open:
                try:
                    intrinsics = self.backend.open()
                except CameraError as exc:
                    self._failed(exc)
                    continue
                self.is_open = True
                self._last_sequence = None
                if self._on_open is not None:
                    self._on_open(intrinsics)
            try:
                frame = self.backend.read(self._read_timeout_s)
            except EndOfStream:
                with self._lock:
                    self.stats.ended = True
                self._close()
                return
            except CameraError as exc:
                self._failed(exc)
                continue
            if frame is None:
                with self._lock:
                    self.stats.timeouts += 1
                continue
            with self._lock:
                self.stats.frames += 1
                if self._last_sequence is not None and frame.sequence > self._last_sequence + 1:
                    self.stats.device_gaps += frame.sequence - self._last_sequence - 1
                self._last_sequence = frame.sequence
            self.slot.put(frame)
            if self._on_frame is not None:
                self._on_frame()


class DeviceClock:
    """Maps a device's own clock onto the host's epoch clock.

    A camera that stamps frames with its hardware clock (milliseconds since the device started)
    gives times that are exact relative to each other but not to the host. The offset is the
    smallest ``host arrival - device time`` seen so far: the frame that reached the host fastest
    bounds the transport delay from below, so stamps keep the device's spacing and lag the true
    capture time by at most the fastest transport delay (the same idea as librealsense's global
    time, which needs firmware support).
    """

    def __init__(self) -> None:
        self.offset_ns: int | None = None

    def to_host_ns(self, device_ns: int, arrival_host_ns: int) -> int:
        offset = arrival_host_ns - device_ns
        if self.offset_ns is None or offset < self.offset_ns:
            self.offset_ns = offset
        return device_ns + self.offset_ns


class LatencyWindow:
    """The latencies of the last ``size`` events and how many happened since the last report (for a rate)."""

    def __init__(self, size: int = 200):
        self._values: deque[float] = deque(maxlen=size)
        self._lock = threading.Lock()
        self.count = 0
        self._since_report = 0
        self._reported_at = time.monotonic()

    def add(self, seconds: float) -> None:
        with self._lock:
            self._values.append(seconds)
            self.count += 1
            self._since_report += 1

    def report(self) -> dict[str, float]:
        """``rate_hz`` since the previous report and the window's ``p50_ms``, ``p95_ms``, ``max_ms``."""
        with self._lock:
            now = time.monotonic()
            rate = self._since_report / max(now - self._reported_at, 1e-9)
            self._since_report, self._reported_at = 0, now
            values = sorted(self._values)
        if not values:
            return {"rate_hz": rate, "p50_ms": float("nan"), "p95_ms": float("nan"), "max_ms": float("nan")}

        def pick(q: float) -> float:
            return 1000.0 * values[min(len(values) - 1, int(q * len(values)))]
        return {"rate_hz": rate, "p50_ms": pick(0.5), "p95_ms": pick(0.95), "max_ms": 1000.0 * values[-1]}
