"""Intel RealSense cameras through ``pyrealsense2``: colour, and depth aligned to colour, by serial number.

The same code reads a live device (``serial``) or plays back a recording (``recording``, the
``.db3`` files librealsense 2.59 writes; rs.recorder and the RealSense Viewer make them), so tests
and dry runs use the real pipeline without a camera. Frames:

* colour as RGB (``rgb8``; ``bgr8`` recordings are converted),
* depth from ``z16`` times the sensor's depth scale, aligned to colour by librealsense's
  ``rs.align`` (the colour camera's viewpoint and size), 0 (no return) becomes NaN,
* stamps from the device: ``global_time`` and ``system_time`` stamps are host epoch times already;
  ``hardware_clock`` stamps are mapped onto the host clock by :class:`~ladder_ros.camera.base.DeviceClock`,
* ``sequence`` from the colour frame counter (its gaps are frames the device dropped).

Needs Debian's ``libusb-1.0-0`` (pyrealsense2 links it even for playback).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ladder_ros.camera.base import NO_CAMERA, CameraError, DeviceClock, EndOfStream
from ladder_ros.camera.model import EQUIDISTANT, PLUMB_BOB, CameraIntrinsics, Frame
from ladder_ros.core.errors import ConfigError

INSTALL_HINT = ("pip install pyrealsense2==2.59.1.11053 (requirements/camera.txt) and, on Debian, "
                "apt-get install libusb-1.0-0")


def import_pyrealsense2():
    """``pyrealsense2``, or a :class:`ConfigError` that says how to install it."""
    try:
        import pyrealsense2 as rs
    except ImportError as exc:
        raise ConfigError(f"the realsense camera backend needs pyrealsense2 ({exc}); {INSTALL_HINT}") from None
    return rs


def connected_devices() -> list[dict[str, str]]:
    """Serial number, name and USB type of every RealSense device plugged in."""
    rs = import_pyrealsense2()
    devices = []
    for device in rs.context().query_devices():
        def info(key: Any) -> str:
            return device.get_info(key) if device.supports(key) else ""
        devices.append({"serial": info(rs.camera_info.serial_number), "name": info(rs.camera_info.name),
                        "usb": info(rs.camera_info.usb_type_descriptor)})
    return devices


def intrinsics_from_rs(intr: Any) -> CameraIntrinsics:
    """:class:`CameraIntrinsics` of an ``rs.intrinsics`` (the Brown-Conrady family as plumb_bob, as
    the realsense-ros driver publishes it; Kannala-Brandt as equidistant)."""
    rs = import_pyrealsense2()
    coeffs = tuple(float(c) for c in intr.coeffs)
    if intr.model in (rs.distortion.kannala_brandt4, rs.distortion.ftheta):
        model, coeffs = EQUIDISTANT, coeffs[:4]
    else:
        model = PLUMB_BOB
    return CameraIntrinsics(int(intr.width), int(intr.height), float(intr.fx), float(intr.fy), float(intr.ppx),
                            float(intr.ppy), model, coeffs)


class RealSenseCamera:
    """A RealSense device by serial number, or a recording played back through the same pipeline.

    ``width``/``height``/``fps`` of 0 take the device's default colour mode. ``depth`` adds the
    depth stream, aligned to colour. ``real_time`` (playback only) plays at the recorded speed;
    False reads as fast as the consumer does (tests).
    """

    name = "realsense"

    def __init__(self, serial: str = "", recording: str = "", width: int = 0, height: int = 0, fps: int = 0,
                 depth: bool = True, real_time: bool = True):
        if serial and recording:
            raise ConfigError("give either a RealSense serial number or a recording to play back, not both")
        if recording and not Path(recording).is_file():
            raise ConfigError("RealSense recording not found", source=recording)
        for name, value in (("width", width), ("height", height), ("fps", fps)):
            if value < 0:
                raise ConfigError(f"realsense {name} must be >= 0 (0: the device's default), got {value}")
        self.rs = import_pyrealsense2()
        self.serial, self.recording = serial, recording
        self.width, self.height, self.fps, self.with_depth, self.real_time = width, height, fps, depth, real_time
        self.device_name = ""
        self.depth_scale = 0.0
        self._pipeline = None
        self._align = None
        self._playback = None
        self._clock = DeviceClock()

    def open(self) -> CameraIntrinsics:
        rs = self.rs
        config = rs.config()
        if self.recording:
            config.enable_device_from_file(self.recording, repeat_playback=False)
        else:
            serials = [d["serial"] for d in connected_devices()]
            if self.serial and self.serial not in serials:
                raise CameraError(f"no RealSense camera with serial {self.serial!r}; connected: "
                                  f"{', '.join(serials) or 'none'} (see {NO_CAMERA})")
            if not self.serial and len(serials) != 1:
                raise CameraError(f"{len(serials)} RealSense cameras connected ({', '.join(serials) or 'none'}): "
                                  f"name one by its serial number (see {NO_CAMERA})")
            config.enable_device(self.serial or serials[0])
        config.enable_stream(rs.stream.color, self.width, self.height, rs.format.rgb8 if not self.recording
                             else rs.format.any, self.fps)
        if self.with_depth:
            config.enable_stream(rs.stream.depth, rs.format.z16 if not self.recording else rs.format.any, self.fps)
        pipeline = rs.pipeline()
        try:
            profile = pipeline.start(config)
        except RuntimeError as exc:
            where = f"recording {self.recording}" if self.recording else f"camera {self.serial or '(the only one)'}"
            raise CameraError(f"cannot start the RealSense pipeline on {where}: {exc}") from None
        device = profile.get_device()
        self.serial = device.get_info(rs.camera_info.serial_number) if device.supports(
            rs.camera_info.serial_number) else self.serial
        self.device_name = device.get_info(rs.camera_info.name) if device.supports(rs.camera_info.name) else ""
        if self.recording:
            self._playback = device.as_playback()
            self._playback.set_real_time(self.real_time)
        if self.with_depth:
            self.depth_scale = float(device.first_depth_sensor().get_depth_scale())
            self._align = rs.align(rs.stream.color)
        self._pipeline = pipeline
        color = profile.get_stream(rs.stream.color).as_video_stream_profile()
        if color.format() not in (rs.format.rgb8, rs.format.bgr8):
            pipeline.stop()
            self._pipeline = None
            raise CameraError(f"colour format {color.format()} is not supported; record rgb8 or bgr8")
        return intrinsics_from_rs(color.get_intrinsics())

    def read(self, timeout_s: float) -> Frame | None:
        rs = self.rs
        if self._pipeline is None:
            raise CameraError("the RealSense pipeline is not running (open() it first)")
        try:
            ok, frames = self._pipeline.try_wait_for_frames(max(1, int(timeout_s * 1000)))
        except RuntimeError as exc:
            raise CameraError(f"RealSense {self.serial}: {exc}") from None
        arrival_ns = time.time_ns()
        if not ok:
            if self._playback is not None and self._playback.current_status() == rs.playback_status.stopped:
                raise EndOfStream(f"recording {self.recording} ended")
            return None
        if self._align is not None:
            frames = self._align.process(frames)
        color = frames.get_color_frame()
        if not color:
            return None
        rgb = np.asanyarray(color.get_data())
        rgb = rgb[:, :, ::-1].copy() if color.get_profile().format() == rs.format.bgr8 else rgb.copy()
        depth = None
        if self._align is not None:
            depth_frame = frames.get_depth_frame()
            if depth_frame:
                z16 = np.asanyarray(depth_frame.get_data())
                depth = z16.astype(np.float32) * np.float32(self.depth_scale)
                depth[z16 == 0] = np.nan
        return Frame(color=rgb, stamp_ns=self._stamp_ns(color, arrival_ns), sequence=int(color.get_frame_number()),
                     received_monotonic=time.monotonic(), depth=depth)

    def _stamp_ns(self, frame: Any, arrival_ns: int) -> int:
        device_ns = int(round(frame.get_timestamp() * 1e6))  # librealsense stamps are milliseconds
        if frame.get_frame_timestamp_domain() == self.rs.timestamp_domain.hardware_clock:
            return self._clock.to_host_ns(device_ns, arrival_ns)
        return device_ns  # global_time / system_time: already the host's epoch clock

    def close(self) -> None:
        if self._pipeline is not None:
            try:
                self._pipeline.stop()
            except RuntimeError:
                pass
        self._pipeline = None
