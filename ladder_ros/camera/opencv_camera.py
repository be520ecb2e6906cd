"""A plain USB (UVC) camera, or a video file, through OpenCV's ``VideoCapture``.

``device`` is a camera index (``"0"``), a device path (``/dev/video0``) or a video file. USB
cameras keep a queue of frames in the driver; the capture buffer is set to one frame where the
driver allows it, and the capture loop reads continuously, so the newest frame is what gets
published. A UVC driver's own timestamps are in a clock OpenCV does not name, so frames are
stamped with the host's wall clock when ``read`` returns them; there is no depth.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ladder_ros.camera.base import CameraError, EndOfStream
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

    def __init__(self, device: str = "0", width: int = 0, height: int = 0, fps: float = 0.0):
        if not device:
            raise ConfigError("the opencv camera needs a device: an index such as 0, a path such as /dev/video0, "
                              "or a video file")
        for name, value in (("width", width), ("height", height), ("fps", fps)):
            if value < 0:
                raise ConfigError(f"opencv camera {name} must be >= 0 (0: the device's default), got {value}")
        self.cv2 = import_cv2()
        self.device, self.width, self.height, self.fps = device, width, height, fps
        self.is_file = not device.isdigit() and Path(device).is_file()
        self._capture = None
        self._sequence = 0

    def open(self) -> None:
        cv2 = self.cv2
        source: int | str = int(self.device) if self.device.isdigit() else self.device
        capture = cv2.VideoCapture(source)
        if not capture.isOpened():
            raise CameraError(f"OpenCV cannot open camera {self.device!r}")
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
        self._capture = capture
        return None  # a UVC camera reports no intrinsics: they come from the calibration file

    def read(self, timeout_s: float) -> Frame | None:
        if self._capture is None:
            raise CameraError("the OpenCV camera is not open (open() it first)")
        ok, bgr = self._capture.read()
        if not ok or bgr is None:
            if self.is_file:
                raise EndOfStream(f"video {self.device} ended")
            raise CameraError(f"camera {self.device!r} returned no frame")
        if bgr.ndim == 2:
            bgr = np.repeat(bgr[:, :, None], 3, axis=2)
        frame = Frame(color=np.ascontiguousarray(bgr[:, :, ::-1]), stamp_ns=time.time_ns(), sequence=self._sequence,
                      received_monotonic=time.monotonic())
        self._sequence += 1
        return frame

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
        self._capture = None
