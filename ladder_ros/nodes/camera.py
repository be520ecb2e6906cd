"""The camera node: a RealSense, USB or fake camera on the topics the sim bridge publishes in simulation,
and the camera's calibrated pose on ``/tf_static``."""

from __future__ import annotations

import threading
import time
from typing import Sequence

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from ladder_ros.camera.base import CameraBackend, CaptureLoop, LatencyWindow
from ladder_ros.camera.calibration_file import CameraCalibration, load_calibration
from ladder_ros.camera.model import CameraIntrinsics, Frame
from ladder_ros.camera.registry import make_camera
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import CAMERA
from ladder_ros.runtime.endpoints import publisher
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.paths import resolve_share_file
from ladder_ros.ros_conversions import (
    camera_info_to_msg,
    depth_to_msg,
    diagnostics_to_msg,
    image_to_msg,
    transform_to_msg,
)


class CameraNode(Node):
    """Publishes one camera's newest frames as the sim bridge does, so policy and verifier cannot tell.

    A capture thread (:class:`~ladder_ros.camera.base.CaptureLoop`) reads the device and keeps only
    the newest frame; a guard condition wakes the executor, which publishes that frame: the image
    (rgb8), its ``CameraInfo`` and, for a RealSense with depth, the depth aligned to colour (32FC1,
    m), all with the device's capture stamp. Frames the device skipped (frame-counter gaps) and
    frames replaced before they were published are counted as dropped. A camera that is missing or
    fails is reopened every ``retry_s``; the node stays up and says why in its diagnostics.

    Intrinsics come from ``calibration_file`` (ROS camera_info YAML), else from the device
    (RealSense factory calibration); a plain USB camera without a calibration file publishes no
    ``CameraInfo``. A calibration whose image size differs from the frames is never published.

    A calibration with extrinsics puts the camera in the robot's TF tree: its pose goes out once, at
    start, on ``/tf_static`` (tf2_msgs/TFMessage, transient local depth 1, as tf2's
    StaticTransformBroadcaster sends it), from the extrinsics' ``parent_frame`` (the robot base) to
    ``child_frame``, which must be ``frame_id``, the frame the images, camera info and depth name; with
    ``base_frame`` set, the parent must be that frame too. Without ``tf2_msgs`` (not on PyPI; a ROS
    install has it, ``scripts/setup.sh`` builds it) the node says so once and publishes no transform.

    Topics (relative to the namespace): publishes ``camera/image_raw`` (sensor_msgs/Image, rgb8),
    ``camera/camera_info`` (sensor_msgs/CameraInfo), ``camera/aligned_depth_to_color/image_raw``
    (sensor_msgs/Image, 32FC1, m), ``/diagnostics`` (diagnostic_msgs/DiagnosticArray: frames,
    drops, capture-to-publish latency in ms, rate in Hz, last error, the camera pose's transform) and
    ``/tf_static`` (tf2_msgs/TFMessage).
    Parameters: see ``CAMERA`` in :mod:`ladder_ros.specs.parameters` (backend, serial, recording,
    device, width/height (px), fps (Hz), depth, realtime_playback, loop, calibration_file, frame_id,
    base_frame, camera_name, retry_s (s), diagnostics_period_s (s)).
    """

    def __init__(self, *, backend: CameraBackend | None = None, node_name: str = "camera", **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, CAMERA)
        self.calibration: CameraCalibration | None = None
        if self.params["calibration_file"]:
            self.calibration = load_calibration(resolve_share_file(self.params["calibration_file"]))
            size = (self.calibration.intrinsics.width, self.calibration.intrinsics.height)
            wanted = (self.params["width"], self.params["height"])
            if all(wanted) and wanted != size:
                raise ConfigError(f"parameter {self.get_name()}.width/height: {wanted[0]}x{wanted[1]} differs from "
                                  f"the calibration's {size[0]}x{size[1]} ({self.params['calibration_file']})")
        self.frame_id = self.params["frame_id"]
        self._check_frames()
        self.backend = backend if backend is not None else \
            make_camera({**self.params, "namespace": self.get_namespace()})
        self._device_intrinsics: CameraIntrinsics | None = None
        self._lock = threading.Lock()
        self._image_pub = publisher(self, Image, topics.IMAGE)
        self._info_pub = publisher(self, CameraInfo, topics.CAMERA_INFO)
        self._depth_pub = publisher(self, Image, topics.SENSOR_DEPTH)
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)
        self.camera_pose: TransformStamped | None = None  # what went out on /tf_static
        self.camera_pose_note = ""
        self._tf_static_pub = self._publish_camera_pose()
        self.published = 0
        self.latency = LatencyWindow()
        self._size_error = ""
        self._ready = self.create_guard_condition(self._publish_newest)
        self.capture = CaptureLoop(self.backend, on_frame=self._ready.trigger, on_open=self._on_open,
                                   retry_s=self.params["retry_s"])
        self.create_timer(self.params["diagnostics_period_s"], self._publish_diagnostics)
        self.capture.start()

    def _check_frames(self) -> None:
        """The images must name the frame the calibration places in the robot's TF tree."""
        extrinsics = self.calibration.extrinsics if self.calibration is not None else None
        if extrinsics is None:
            return
        source = self.params["calibration_file"]
        if extrinsics.child_frame != self.frame_id:
            raise ConfigError(f"parameter {self.get_name()}.frame_id is {self.frame_id!r} but the calibration's "
                              f"extrinsics place {extrinsics.child_frame!r} ({source}): the images would name a frame "
                              "that /tf_static does not connect to the robot; make them the same")
        base = self.params["base_frame"]
        if base and extrinsics.parent_frame != base:
            raise ConfigError(f"parameter {self.get_name()}.base_frame is {base!r} but the calibration's extrinsics "
                              f"are in {extrinsics.parent_frame!r} ({source}): calibrate with --base-frame {base}")

    def _publish_camera_pose(self):
        """Send the calibrated camera pose on /tf_static once; transient local keeps it for late listeners."""
        extrinsics = self.calibration.extrinsics if self.calibration is not None else None
        if extrinsics is None:
            self.camera_pose_note = "none (no extrinsics in the calibration)" if self.calibration is not None else \
                "none (no calibration file)"
            return None
        try:
            from tf2_msgs.msg import TFMessage

            tf_static = publisher(self, TFMessage, topics.TF_STATIC)
        except Exception as exc:  # ImportError, or the typesupport library not on the loader's path
            self.camera_pose_note = f"not published: tf2_msgs is unavailable ({exc})"
            self.get_logger().warning(f"/tf_static: {self.camera_pose_note}; a ROS install has tf2_msgs, "
                                      "scripts/setup.sh builds it into the venv (docs/calibration.md)")
            return None
        self.camera_pose = transform_to_msg(extrinsics.transform, extrinsics.parent_frame, extrinsics.child_frame,
                                            self.get_clock().now().nanoseconds)
        tf_static.publish(TFMessage(transforms=[self.camera_pose]))
        self.camera_pose_note = f"{extrinsics.parent_frame} -> {extrinsics.child_frame}"
        self.get_logger().info(f"camera pose on /tf_static: {self.camera_pose_note} (calibrated "
                               f"{extrinsics.calibrated_at or 'at an unknown date'})")
        return tf_static

    def _on_open(self, intrinsics: CameraIntrinsics | None) -> None:  # capture thread
        with self._lock:
            self._device_intrinsics = intrinsics

    @property
    def intrinsics(self) -> CameraIntrinsics | None:
        if self.calibration is not None:
            return self.calibration.intrinsics
        with self._lock:
            return self._device_intrinsics

    def _publish_newest(self) -> None:
        frame = self.capture.slot.take()
        if frame is None:
            return
        try:
            self._publish(frame)
        except LadderError as exc:
            self.get_logger().error(f"frame {frame.sequence}: not published: {exc}", throttle_duration_sec=5.0)

    def _publish(self, frame: Frame) -> None:
        self._image_pub.publish(image_to_msg(frame.color, frame.stamp_ns, self.frame_id))
        intrinsics = self.intrinsics
        if intrinsics is not None:
            if (intrinsics.width, intrinsics.height) == (frame.width, frame.height):
                self._size_error = ""
                calibration = self.calibration
                self._info_pub.publish(camera_info_to_msg(
                    intrinsics, frame.stamp_ns, self.frame_id,
                    calibration.rectification if calibration is not None else None,
                    calibration.P if calibration is not None else None))
            else:
                self._size_error = (f"frames are {frame.width}x{frame.height} but the intrinsics are for "
                                    f"{intrinsics.width}x{intrinsics.height}: no camera_info published")
                self.get_logger().error(self._size_error, throttle_duration_sec=10.0)
        if frame.depth is not None:
            self._depth_pub.publish(depth_to_msg(frame.depth, frame.stamp_ns, self.frame_id))
        self.published += 1
        self.latency.add(time.monotonic() - frame.received_monotonic)

    def diagnostics(self) -> tuple[str, str, dict[str, object]]:
        """(level, message, values) describing capture now."""
        stats = self.capture.snapshot()
        timing = self.latency.report()
        values: dict[str, object] = {
            "backend": self.backend.name, "frames": stats.frames, "published": self.published,
            "dropped": stats.dropped, "device_gaps": stats.device_gaps, "overwritten": stats.overwritten,
            "rate_hz": timing["rate_hz"], "capture_to_publish_p50_ms": timing["p50_ms"],
            "capture_to_publish_p95_ms": timing["p95_ms"], "errors": stats.errors,
            "camera_info": "calibration" if self.calibration is not None else (
                "device" if self.intrinsics is not None else "none"),
            "tf_static": self.camera_pose_note,
        }
        if stats.last_error:
            values["last_error"] = stats.last_error
        if stats.ended:
            return "warn", "recording ended", values
        if not self.capture.is_open:
            return "error", f"camera not open: {stats.last_error or 'opening'}", values
        if self._size_error:
            return "error", self._size_error, values
        if timing["rate_hz"] == 0.0:
            return "warn", "no frames", values
        return "ok", "streaming", values

    def _publish_diagnostics(self) -> None:
        level, message, values = self.diagnostics()
        hardware = getattr(self.backend, "serial", "") or getattr(self.backend, "device", "") or self.backend.name
        self._diagnostics_pub.publish(diagnostics_to_msg(
            f"{self.get_name()}: camera {self.params['camera_name']}", str(hardware), level, message, values,
            self.get_clock().now().nanoseconds))

    def close(self) -> None:
        self.capture.stop()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("camera", CameraNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
