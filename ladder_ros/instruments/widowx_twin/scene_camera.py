"""The twin's camera: the tabletop's third-person view of the twin's scene, rendered on the wall clock.

:class:`SceneCamera` renders :class:`~.world.TwinWorld`'s scene at ``fps`` in its own thread (the
offscreen GL context belongs to the thread that made it) and writes each frame, stamped with the
moment its scene was captured, into a shared-memory frame channel
(:mod:`ladder_ros.instruments.cameras.shared_frame`) that the camera node reads through its ``twin`` backend. A
frame that is due while the previous one is still rendering is skipped (counted in
:attr:`SceneCamera.late`): a camera that cannot keep its rate delivers fewer frames, never older
ones. :meth:`SceneCamera.stall` stops it for a while (the rehearsal's camera fault): the channel keeps its
last frame, as a camera whose USB link hangs delivers nothing new. With ``depth`` it also renders the
camera's exact depth (float32 metres along the optical axis, NaN where nothing was hit), which stands in for
a depth sensor's.

The intrinsics are the tabletop camera's: MuJoCo's vertical field of view spans the image height,
square pixels, the principal point at the image centre.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.instruments.cameras.shared_frame import FrameWriter
from ladder_ros.instruments.faults import FaultWindow
from ladder_ros.core.errors import ConfigError
from ladder_ros.sim.mujoco_tabletop import CAMERA_FOVY_DEG
from ladder_ros.instruments.widowx_twin.world import TwinWorld

import mujoco  # noqa: E402,I100  (after the tabletop module set MUJOCO_GL)

CAMERA = "3rd_view"  # the tabletop's third-person camera


def scene_intrinsics(width: int, height: int, fovy_deg: float = CAMERA_FOVY_DEG) -> CameraIntrinsics:
    focal = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
    return CameraIntrinsics(width=width, height=height, fx=focal, fy=focal, cx=(width - 1) / 2.0,
                            cy=(height - 1) / 2.0)


class SceneCamera:
    """Renders ``world`` into the frame channel ``channel`` at ``fps`` (see the module docstring)."""

    def __init__(self, world: TwinWorld, channel: str, *, width: int, height: int, fps: float, depth: bool = False):
        if not 1.0 <= fps <= 60.0:
            raise ConfigError(f"the twin camera's fps must be in [1, 60], got {fps!r}")
        self.world = world
        self.intrinsics = scene_intrinsics(width, height)
        self.period_s = 1.0 / fps
        self.depth = depth
        self.writer = FrameWriter(channel, self.intrinsics, fps=fps, depth=depth)
        self.frames = 0
        self.late = 0  # frames skipped because rendering fell behind
        self.stalled = FaultWindow()  # while open, no frame is written (an injected camera stall)
        self.stalled_frames = 0  # frames not written because of a stall
        self.render_ms: list[float] = []  # the recent frames' render times (capture to written)
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def channel(self) -> str:
        return self.writer.path.name

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="twin-camera", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.writer.close()

    def stall(self, duration_s: float) -> None:
        """Write no frame for ``duration_s`` seconds: the channel's last frame stays, growing old."""
        self.stalled.open(duration_s)

    def _run(self) -> None:
        renderer = None
        version = -1
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                wait = next_at - time.monotonic()
                if wait > 0 and self._stop.wait(wait):
                    break
                started = time.monotonic()
                if self.stalled.active:
                    self.stalled_frames += 1
                    next_at = started + self.period_s
                    continue
                with self.world.lock:
                    if not self.world.ready:
                        next_at = started + self.period_s
                        continue
                    model = self.world.tabletop.model
                    if renderer is None or version != self.world.model_version:
                        if renderer is not None:
                            renderer.close()
                        renderer = mujoco.Renderer(model, self.intrinsics.height, self.intrinsics.width)
                        version = self.world.model_version
                    renderer.update_scene(self.world.tabletop.data, camera=CAMERA)
                    stamp_ns = time.time_ns()
                color = np.array(renderer.render(), dtype=np.uint8, copy=True)
                depth = None
                if self.depth:
                    renderer.enable_depth_rendering()
                    try:
                        depth = np.array(renderer.render(), dtype=np.float32, copy=True)
                    finally:
                        renderer.disable_depth_rendering()
                    depth[depth >= 0.999 * model.vis.map.zfar * model.stat.extent] = np.nan
                self.writer.write(color, stamp_ns, depth)
                self.frames += 1
                self.render_ms = (self.render_ms + [(time.monotonic() - started) * 1000.0])[-100:]
                next_at += self.period_s
                now = time.monotonic()
                if next_at < now:  # rendering took longer than a period: skip what is overdue
                    skipped = int((now - next_at) / self.period_s) + 1
                    self.late += skipped
                    next_at += skipped * self.period_s
        except Exception as exc:  # the GL context or the scene failed: the camera stops, saying why
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if renderer is not None:
                renderer.close()

    def stats(self) -> dict:
        times = sorted(self.render_ms)
        return {"frames": self.frames, "late": self.late, "channel": self.channel,
                "render_p50_ms": times[len(times) // 2] if times else None,
                "render_max_ms": times[-1] if times else None, "error": self.error}
