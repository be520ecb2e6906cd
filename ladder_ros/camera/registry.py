"""Camera backends by name, built from the camera node's parameters (no rclpy)."""

from __future__ import annotations

from typing import Any, Mapping

from ladder_ros.camera.base import CameraBackend
from ladder_ros.core.errors import unknown_name
from ladder_ros.instrument_registry import load_instrument

CAMERA_BACKENDS = ("realsense", "opencv", "fake", "twin")


def make_camera(params: Mapping[str, Any]) -> CameraBackend:
    """The backend ``params["backend"]`` with its settings; device libraries are imported only here."""
    name = params["backend"]
    width, height, fps = int(params.get("width", 0)), int(params.get("height", 0)), float(params.get("fps", 0.0))
    if name == "realsense":
        from ladder_ros.camera.realsense import RealSenseCamera

        return RealSenseCamera(serial=params.get("serial", ""), recording=params.get("recording", ""), width=width,
                               height=height, fps=int(round(fps)), depth=bool(params.get("depth", True)),
                               real_time=bool(params.get("realtime_playback", True)))
    if name == "opencv":
        from ladder_ros.camera.opencv_camera import OpenCVCamera

        return OpenCVCamera(device=str(params.get("device", "0")), width=width, height=height, fps=fps,
                            real_time=bool(params.get("realtime_playback", True)), loop=bool(params.get("loop", False)))
    if name == "fake":
        fake_camera = load_instrument("fake_camera")
        return fake_camera(width=width or 640, height=height or 480, fps=fps or 30.0,
                           depth=bool(params.get("depth", True)))
    if name == "twin":
        default_channel = load_instrument("twin_camera_channel")
        channel = params.get("twin_channel", "") or default_channel(str(params.get("namespace", "")),
                                                                    str(params.get("camera_name", "camera")))
        twin_camera = load_instrument("twin_camera")
        return twin_camera(channel, width=width, height=height, depth=bool(params.get("depth", True)))
    raise unknown_name("camera backend", name, CAMERA_BACKENDS)
