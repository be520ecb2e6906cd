"""A one-frame hand-over between two processes through shared memory: the newest frame, its stamp and number.

The WidowX twin renders its scene in its own process; the camera node reads those frames through
its ``twin`` backend (:mod:`ladder_ros.instruments.cameras.twin`) exactly as it reads a RealSense: a device buffer
that always holds the newest frame, stamped when it was taken, with a frame counter whose gaps are
frames the reader never saw. A ROS topic between the two would serialise every image twice (the
twin to the camera node, the camera node to the graph) and put rclpy into a camera backend; a
file on ``/dev/shm`` (tmpfs, memory only) mapped by both costs one copy each way and nothing when
nobody reads.

Layout of the file (little endian): a 128-byte header, then the colour image (``height x width x 3``
uint8, RGB) and, when the channel carries depth, the depth image (``height x width`` float32 metres,
NaN where nothing was hit). The header::

    magic b"LDRFRAME" | version u32 | width u32 | height u32 | depth u32 | writer pid u32 | pad u32
    fps f64 | fx f64 | fy f64 | cx f64 | cy f64 | counter u64 | stamp_ns i64 | sequence u64

``counter`` is a sequence lock: the writer makes it odd before it writes a frame and even after,
so a reader that sees the same even value before and after its copy has a whole frame (and tries
again otherwise). The writer creates the file under a temporary name and renames it into place, so
a reader never maps a half-written header; a writer that starts again replaces the file, which the
reader notices (another inode) and reopens. No rclpy here.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.core.errors import ConfigError, LadderError

MAGIC = b"LDRFRAME"
VERSION = 1
HEADER_SIZE = 128
_FIXED = struct.Struct("<8s6I5d")  # magic, version, width, height, depth, pid, pad, fps, fx, fy, cx, cy
_COUNTER = struct.Struct("<Q")
_FRAME = struct.Struct("<qQ")  # stamp_ns, sequence
COUNTER_OFFSET = _FIXED.size
FRAME_OFFSET = COUNTER_OFFSET + _COUNTER.size
POLL_S = 0.002  # how often a reader looks for a new frame once one is due
STALE_CHECK_S = 0.5  # how often a reader checks that its writer is still the one in the file


class ChannelError(LadderError):
    """The frame channel is missing, malformed, or its writer went away."""


def channel_folder() -> Path:
    """Where channels live: ``/dev/shm`` (memory only) where there is one, else the temporary folder."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def default_channel(namespace: str, camera: str, domain_id: str | None = None) -> str:
    """The channel name a twin and a camera node agree on without being told: ROS domain, namespace, camera.

    Two graphs on one machine (other ROS domains or namespaces) never share a channel.
    """
    domain = domain_id if domain_id is not None else os.environ.get("ROS_DOMAIN_ID", "0")
    parts = [p for p in namespace.strip("/").split("/") if p] or ["root"]
    return "ladder_frames_" + "_".join([domain or "0", *parts, camera])


def channel_path(name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"a frame channel name is a plain file name, got {name!r}")
    return channel_folder() / name


@dataclass(frozen=True)
class ChannelFrame:
    """One frame read from a channel (copies, safe to keep)."""

    color: np.ndarray
    depth: np.ndarray | None
    stamp_ns: int
    sequence: int


class FrameWriter:
    """The writing end: creates the channel and publishes frames into it (one writer per channel)."""

    def __init__(self, name: str, intrinsics: CameraIntrinsics, *, fps: float, depth: bool = False):
        if not fps > 0:
            raise ConfigError(f"a frame channel's fps must be positive, got {fps!r}")
        self.path = channel_path(name)
        self.intrinsics = intrinsics
        self.width, self.height, self.has_depth = intrinsics.width, intrinsics.height, bool(depth)
        self.color_bytes = self.width * self.height * 3
        self.depth_bytes = self.width * self.height * 4 if depth else 0
        size = HEADER_SIZE + self.color_bytes + self.depth_bytes
        header = _FIXED.pack(MAGIC, VERSION, self.width, self.height, int(self.has_depth), os.getpid(), 0, float(fps),
                             intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy)
        folder = self.path.parent
        fd, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=folder)
        try:
            os.ftruncate(fd, size)
            os.pwrite(fd, header, 0)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)  # readers see a complete header or no file
        self._inode = os.stat(self.path).st_ino
        self._counter = 0
        self.sequence = 0
        self._color = np.frombuffer(self._map, dtype=np.uint8, count=self.color_bytes, offset=HEADER_SIZE).reshape(
            self.height, self.width, 3)
        self._depth = None if not depth else np.frombuffer(
            self._map, dtype=np.float32, count=self.width * self.height,
            offset=HEADER_SIZE + self.color_bytes).reshape(self.height, self.width)

    def write(self, color: np.ndarray, stamp_ns: int, depth: np.ndarray | None = None) -> int:
        """Publish one frame; returns its sequence number (0, 1, 2, ...)."""
        if color.shape != (self.height, self.width, 3) or color.dtype != np.uint8:
            raise ConfigError(f"frame channel {self.path.name} carries {self.width}x{self.height} RGB uint8 frames, "
                              f"got {color.dtype} {color.shape}")
        if self.has_depth and (depth is None or depth.shape != (self.height, self.width)):
            raise ConfigError(f"frame channel {self.path.name} carries depth of {self.width}x{self.height}, got "
                              f"{None if depth is None else depth.shape}")
        self._counter += 1  # odd: a frame is being written
        _COUNTER.pack_into(self._map, COUNTER_OFFSET, self._counter)
        self._color[...] = color
        if self._depth is not None:
            self._depth[...] = depth
        sequence = self.sequence
        _FRAME.pack_into(self._map, FRAME_OFFSET, int(stamp_ns), sequence)
        self._counter += 1  # even: the frame is whole
        _COUNTER.pack_into(self._map, COUNTER_OFFSET, self._counter)
        self.sequence += 1
        return sequence

    def close(self) -> None:
        """Remove the channel (readers notice at their next check)."""
        try:
            if os.stat(self.path).st_ino == self._inode:  # still ours (a new writer may have replaced it)
                self.path.unlink()
        except OSError:
            pass
        self._color = self._depth = None  # release the views before the map
        try:
            self._map.close()
        except BufferError:  # a view is still held somewhere: the map goes with the process
            pass


class FrameReader:
    """The reading end: maps the channel and waits for frames newer than the last one read."""

    def __init__(self, name: str):
        self.path = channel_path(name)
        self._map: mmap.mmap | None = None
        self._inode: int | None = None
        self.width = self.height = 0
        self.has_depth = False
        self.fps = 0.0
        self.writer_pid = 0
        self.intrinsics: CameraIntrinsics | None = None
        self._last_sequence: int | None = None
        self._last_frame_at = 0.0
        self._checked_at = 0.0

    def open(self) -> CameraIntrinsics:
        """Map the channel; :class:`ChannelError` when there is none (yet) or it is not a frame channel."""
        self.close()
        try:
            with open(self.path, "rb") as f:
                stat = os.fstat(f.fileno())
                if stat.st_size < HEADER_SIZE:
                    raise ChannelError(f"frame channel {self.path} is too short to be one")
                self._map = mmap.mmap(f.fileno(), stat.st_size, access=mmap.ACCESS_READ)
                self._inode = stat.st_ino
        except FileNotFoundError:
            raise ChannelError(f"no frame channel {self.path}: is its writer (the twin) running?") from None
        except OSError as exc:
            raise ChannelError(f"cannot open the frame channel {self.path}: {exc.strerror}") from None
        magic, version, width, height, depth, pid, _, fps, fx, fy, cx, cy = _FIXED.unpack_from(self._map, 0)
        if magic != MAGIC or version != VERSION:
            self.close()
            raise ChannelError(f"{self.path} is not a version {VERSION} frame channel")
        expected = HEADER_SIZE + width * height * (3 + (4 if depth else 0))
        if len(self._map) != expected:
            size = len(self._map)
            self.close()
            raise ChannelError(f"frame channel {self.path} holds {size} bytes, its header says {expected}")
        self.width, self.height, self.has_depth, self.writer_pid, self.fps = width, height, bool(depth), pid, fps
        self.intrinsics = CameraIntrinsics(width, height, fx, fy, cx, cy)
        self._last_sequence = None
        self._last_frame_at = time.monotonic()
        self._checked_at = time.monotonic()
        return self.intrinsics

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        self._map = None

    def _whole_frame(self) -> ChannelFrame | None:
        """The frame in the channel now, or None while the writer is in the middle of one."""
        assert self._map is not None
        before = _COUNTER.unpack_from(self._map, COUNTER_OFFSET)[0]
        if before == 0 or before % 2:
            return None
        stamp_ns, sequence = _FRAME.unpack_from(self._map, FRAME_OFFSET)
        if sequence == self._last_sequence:
            return None
        n = self.width * self.height
        color = np.frombuffer(self._map, dtype=np.uint8, count=3 * n, offset=HEADER_SIZE).reshape(
            self.height, self.width, 3).copy()
        depth = None
        if self.has_depth:
            depth = np.frombuffer(self._map, dtype=np.float32, count=n, offset=HEADER_SIZE + 3 * n).reshape(
                self.height, self.width).copy()
        if _COUNTER.unpack_from(self._map, COUNTER_OFFSET)[0] != before:
            return None  # the writer started the next frame during the copy: read again
        return ChannelFrame(color, depth, int(stamp_ns), int(sequence))

    def _check_writer(self) -> None:
        """The writer is still alive and still the one in the file, else :class:`ChannelError`."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            raise ChannelError(f"the frame channel {self.path} was removed (its writer stopped)") from None
        if inode != self._inode:
            raise ChannelError(f"the frame channel {self.path} has a new writer")
        try:
            os.kill(self.writer_pid, 0)
        except ProcessLookupError:
            raise ChannelError(f"the writer of {self.path} (pid {self.writer_pid}) is gone") from None
        except PermissionError:
            pass

    def read(self, timeout_s: float) -> ChannelFrame | None:
        """The next frame (newer than the last one returned), waiting at most ``timeout_s``; None on timeout.

        It sleeps until the next frame is due (the writer's fps) and then looks every ``POLL_S``.
        """
        if self._map is None:
            raise ChannelError("the frame channel is not open")
        deadline = time.monotonic() + timeout_s
        due = self._last_frame_at + 1.0 / self.fps - 2 * POLL_S
        while True:
            now = time.monotonic()
            if now - self._checked_at >= STALE_CHECK_S:
                self._checked_at = now
                self._check_writer()
            if now >= due:
                frame = self._whole_frame()
                if frame is not None:
                    self._last_sequence = frame.sequence
                    self._last_frame_at = time.monotonic()
                    return frame
            if now >= deadline:
                return None
            wake = max(due, now + POLL_S) if now < due else now + POLL_S
            time.sleep(max(0.0, min(wake, deadline) - now))
