"""The ``twin`` camera backend: the frames the WidowX twin renders of its scene, read like a device's.

The twin (``ladder_ros/instruments/widowx_twin/node.py``) renders its camera on the wall clock and writes each
frame, stamped when it was rendered, into a shared-memory channel
(:mod:`ladder_ros.instruments.cameras.shared_frame`); this backend reads the newest one, so the camera node
publishes the twin's images, camera info and (when the twin renders depth) its exact depth as it
would a RealSense's: the camera → depth → policy path of the robot runs unchanged. Frames the
camera node did not read before the next one came are counted as the device's dropped frames.
"""

from __future__ import annotations

import time

from ladder_ros.camera.base import CameraError
from ladder_ros.camera.model import CameraIntrinsics, Frame
from ladder_ros.instruments.cameras.shared_frame import ChannelError, FrameReader


class TwinCamera:
    """Reads the twin's frame channel ``channel``; ``width``/``height`` (0: any) must match what it renders."""

    name = "twin"

    def __init__(self, channel: str, *, width: int = 0, height: int = 0, depth: bool = True):
        self.channel = channel
        self.device = channel  # what the camera node's diagnostics name as the hardware
        self.width, self.height, self.depth = int(width), int(height), bool(depth)
        self._reader = FrameReader(channel)

    def open(self) -> CameraIntrinsics:
        try:
            intrinsics = self._reader.open()
        except ChannelError as exc:
            raise CameraError(str(exc)) from None
        size = (intrinsics.width, intrinsics.height)
        if (self.width and self.width != size[0]) or (self.height and self.height != size[1]):
            self._reader.close()
            raise CameraError(f"the twin renders {size[0]}x{size[1]} frames into {self.channel}, the camera was "
                              f"asked for {self.width or size[0]}x{self.height or size[1]}: set the twin's "
                              "camera_width/camera_height or the camera's width/height to match")
        return intrinsics

    def read(self, timeout_s: float) -> Frame | None:
        try:
            frame = self._reader.read(timeout_s)
        except ChannelError as exc:
            raise CameraError(str(exc)) from None
        if frame is None:
            return None
        return Frame(color=frame.color, stamp_ns=frame.stamp_ns, sequence=frame.sequence,
                     received_monotonic=time.monotonic(), depth=frame.depth if self.depth else None)

    def close(self) -> None:
        self._reader.close()
