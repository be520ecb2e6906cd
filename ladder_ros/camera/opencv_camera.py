"""A plain USB (UVC) camera, or a video file, through OpenCV's ``VideoCapture``.

``device`` is a camera index (``"0"``), a device path (``/dev/video0``) or a video file. USB
cameras keep a queue of frames in the driver; the capture buffer is set to one frame where the
driver allows it, and the capture loop reads continuously, so the newest frame is what gets
published. A UVC driver's own timestamps are in a clock OpenCV does not name, so frames are
stamped with the host's wall clock when ``read`` returns them; there is no depth.

A video file plays at its own frame rate (``CAP_PROP_FPS``), or at ``fps`` when given, so a dry run
sees the camera rate the robot would (decoding alone runs many times faster); ``real_time=False``
plays it as fast as it decodes. Each frame is decoded, then handed over when it is due; a reader
that fell behind gets frames at once until it is back on the schedule, which never lags more than
one frame period. ``loop`` starts the file again at its end (the frame counter keeps counting).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ladder_ros.camera.base import NO_CAMERA, CameraError, EndOfStream
from ladder_ros.camera.model import Frame
from ladder_ros.core.errors import ConfigError

INSTALL_HINT = "pip install opencv-python-headless==4.14.0.94 (requirements/camera.txt)"


def import_cv2():
    try:
        import cv2
    except ImportError as exc:
        raise ConfigError(f"the opencv camera backend and calibration need OpenCV ({exc}); {INSTALL_HINT}") from None
    return cv2


class OpenCVCamera:
    """Colour frames from ``cv2.VideoCapture`` (``width``/``height``/``fps`` of 0: the device's default)."""

    name = "opencv"

    def __init__(self, device: str = "0", width: int = 0, height: int = 0, fps: float = 0.0, *,
                 real_time: bool = True, loop: bool = False, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if not device:
            raise ConfigError("the opencv camera needs a device: an index such as 0, a path such as /dev/video0, "
                              "or a video file")
        for name, value in (("width", width), ("height", height), ("fps", fps)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"opencv camera {name} must be >= 0 (0: the device's default), got {value}")
        self.cv2 = import_cv2()
        self.device, self.width, self.height, self.fps = device, width, height, fps
        self.is_file = not device.isdigit() and Path(device).is_file()
        self.real_time, self.loop = real_time, loop
        self._clock, self._sleep = clock, sleep  # injectable, so pacing is testable without waiting
        self._capture = None
        self._sequence = 0
        self.period_s = 0.0  # a video file's frame period when paced (0: not paced)
        self._next_due = 0.0
        self._pending: np.ndarray | None = None

    def open(self) -> None:
        cv2 = self.cv2
        source: int | str = int(self.device) if self.device.isdigit() else self.device
        capture = cv2.VideoCapture(source)
        if not capture.isOpened():
            raise CameraError(f"OpenCV cannot open camera {self.device!r} (see {NO_CAMERA})")
        if not self.is_file:
            capture.set(cv2.CAP_PROP_BUFFERSIZE, 1)
            if self.width:
                capture.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
            if self.height:
                capture.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
            if self.fps:
                capture.set(cv2.CAP_PROP_FPS, self.fps)
            got = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
            if (self.width and got[0] != self.width) or (self.height and got[1] != self.height):
                capture.release()
                raise CameraError(f"camera {self.device!r} does not do {self.width}x{self.height}; it gave "
                                  f"{got[0]}x{got[1]}")
        elif self.real_time:
            rate = self.fps or float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
            if not (math.isfinite(rate) and rate > 0):
                capture.release()
                raise CameraError(f"video {self.device!r} does not state its frame rate; set fps to play it")
            self.period_s = 1.0 / rate
            self._next_due = self._clock()
        self._capture = capture
        self._pending = None
        return None  # a UVC camera reports no intrinsics: they come from the calibration file

    def _decode(self) -> np.ndarray:
        assert self._capture is not None
        ok, bgr = self._capture.read()
        if (not ok or bgr is None) and self.is_file and self.loop and self._sequence > 0:
            self._capture.set(self.cv2.CAP_PROP_POS_FRAMES, 0)  # from the start again
            ok, bgr = self._capture.read()
        if not ok or bgr is None:
            if self.is_file:
                raise EndOfStream(f"video {self.device} ended")
            raise CameraError(f"camera {self.device!r} returned no frame")
        if bgr.ndim == 2:
            bgr = np.repeat(bgr[:, :, None], 3, axis=2)
        return np.ascontiguousarray(bgr[:, :, ::-1])

    def read(self, timeout_s: float) -> Frame | None:
        if self._capture is None:
            raise CameraError("the OpenCV camera is not open (open() it first)")
        if self._pending is None:
            self._pending = self._decode()
        if self.period_s:
            wait = self._next_due - self._clock()
            if wait > timeout_s:
                self._sleep(timeout_s)
                return None  # the frame waits for its time
            if wait > 0:
                self._sleep(wait)
            self._next_due = max(self._next_due + self.period_s, self._clock() - self.period_s)
        rgb, self._pending = self._pending, None
        frame = Frame(color=rgb, stamp_ns=time.time_ns(), sequence=self._sequence, received_monotonic=time.monotonic())
        self._sequence += 1
        return frame

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
        self._capture = None
