"""Synthetic camera data for the camera, depth and calibration tests.

* :func:`render_board_view`: what a pinhole camera with lens distortion sees of a ChArUco board at a
  known pose (exact inverse mapping: every pixel is undistorted, its ray cut with the board plane and
  the board texture sampled there), so calibration can be checked against the truth.
* :func:`eye_to_hand_scene`: gripper poses for an eye-to-hand calibration, from a known camera pose
  and a known board mounting, that keep the board in view; :func:`noisy_pose` adds an arm's
  repeatability to a pose (position and orientation noise per axis, seeded).
* :func:`write_realsense_recording`: a RealSense recording (``.db3``) written by librealsense's own
  recorder from a software device with colour and depth sensors, known intrinsics, extrinsics, frame
  numbers and stamps, to be played back through the real ``pyrealsense2`` pipeline.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ladder_ros.camera.charuco import CharucoBoardSpec
from ladder_ros.camera.model import CameraIntrinsics, RigidTransform


def spin_until(executor, condition, timeout_s: float) -> bool:
    """Spin ``executor`` until ``condition()`` holds or ``timeout_s`` passed; the condition's last value."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    return condition()


def diagnostic_values(diagnostic) -> dict:
    """The key/value pairs of the first status of a ``DiagnosticArray``."""
    return {kv.key: kv.value for kv in diagnostic.status[0].values}


PIXELS_PER_SQUARE = 120
SUPERSAMPLE = 2  # 2x2 samples per pixel, so edges are anti-aliased as a real sensor integrates them
_RAYS: dict[CameraIntrinsics, np.ndarray] = {}


def _normalized_rays(intrinsics: CameraIntrinsics) -> np.ndarray:
    """Undistorted normalised coordinates (x, y) of every sub-pixel sample (cached per camera)."""
    import cv2

    if intrinsics not in _RAYS:
        ss, w, h = SUPERSAMPLE, intrinsics.width, intrinsics.height
        u, v = np.meshgrid((np.arange(w * ss) + 0.5) / ss - 0.5, (np.arange(h * ss) + 0.5) / ss - 0.5)
        pixels = np.stack([u.ravel(), v.ravel()], axis=1).astype(np.float64).reshape(-1, 1, 2)
        criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-10)
        _RAYS[intrinsics] = cv2.undistortPoints(pixels, intrinsics.K, intrinsics.D, criteria=criteria).reshape(-1, 2)
    return _RAYS[intrinsics]


def _texture(spec: CharucoBoardSpec) -> tuple[np.ndarray, float]:
    """The board image and its pixels per metre."""
    image = spec.render(PIXELS_PER_SQUARE)
    return image, PIXELS_PER_SQUARE / spec.square_length_m


def render_board_view(spec: CharucoBoardSpec, intrinsics: CameraIntrinsics, T_cam_board: RigidTransform,
                      background: int = 200, noise_std: float = 0.0, seed: int = 0) -> np.ndarray:
    """A grey uint8 image of the board at ``T_cam_board`` (board frame: origin at the board's corner,
    x along the squares, y down the squares, z into the board)."""
    import cv2

    texture, per_m = _texture(spec)
    w, h = intrinsics.width, intrinsics.height
    ss = SUPERSAMPLE
    normalized = _normalized_rays(intrinsics)
    # Cut each ray (x, y, 1) with the board plane z_b = 0: p_cam = R [X, Y, 0] + t.
    R, t = T_cam_board.R, T_cam_board.t
    H = np.column_stack([R[:, 0], R[:, 1], t])  # maps (X, Y, 1) to the ray direction up to scale
    rays = np.column_stack([normalized, np.ones(len(normalized))])
    board_xy = np.linalg.solve(H, rays.T).T
    valid = board_xy[:, 2] > 0  # in front of the camera
    X = board_xy[:, 0] / board_xy[:, 2]
    Y = board_xy[:, 1] / board_xy[:, 2]
    map_x = (X * per_m - 0.5).astype(np.float32).reshape(h * ss, w * ss)
    map_y = (Y * per_m - 0.5).astype(np.float32).reshape(h * ss, w * ss)
    map_x[~valid.reshape(h * ss, w * ss)] = -1e6
    big = cv2.remap(texture, map_x, map_y, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                    borderValue=background)
    image = cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA).astype(np.float32)
    if noise_std > 0:
        image += np.random.default_rng(seed).normal(0.0, noise_std, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def look_at(camera_position: np.ndarray, target: np.ndarray, up: np.ndarray = np.array([0.0, 0.0, 1.0])
            ) -> RigidTransform:
    """``T_world_cam`` of an optical frame (z forward, y down) at ``camera_position`` looking at ``target``."""
    z = np.asarray(target, float) - np.asarray(camera_position, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return RigidTransform(np.column_stack([x, y, z]), np.asarray(camera_position, float))


def rotation(axis: str, degrees: float) -> np.ndarray:
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def noisy_pose(T: RigidTransform, rng: np.random.Generator, mm: float, deg: float) -> RigidTransform:
    """``T`` as an arm reports it: Gaussian noise of ``mm`` per axis on the position and a rotation of
    ``deg`` per axis (about the gripper's own axes) on the orientation."""
    turn = RigidTransform.from_rvec(rng.normal(0.0, math.radians(deg), 3), np.zeros(3))
    return RigidTransform(T.R @ turn.R, T.t + rng.normal(0.0, mm / 1000.0, 3))


@dataclass(frozen=True)
class EyeToHandScene:
    spec: CharucoBoardSpec
    intrinsics: CameraIntrinsics
    base_to_camera: RigidTransform  # T_base_cam, the truth
    gripper_to_board: RigidTransform  # T_gripper_board, the truth
    gripper_poses: list[RigidTransform]  # T_base_gripper per view

    def board_in_camera(self, i: int, base_to_camera: RigidTransform | None = None) -> RigidTransform:
        Y = base_to_camera or self.base_to_camera
        return Y.inverse() @ self.gripper_poses[i] @ self.gripper_to_board


def eye_to_hand_scene(intrinsics: CameraIntrinsics, spec: CharucoBoardSpec, views: int = 12,
                      seed: int = 0) -> EyeToHandScene:
    """A camera 0.9 m from the workspace looking at it, a board on a plate at the gripper, and
    gripper poses spread over positions and orientations (up to ~35 degrees) that face the camera."""
    rng = np.random.default_rng(seed)
    workspace = np.array([0.35, 0.0, 0.15])
    T_base_cam = look_at(np.array([0.35, -0.75, 0.55]), workspace)
    board_w, board_h = spec.squares_x * spec.square_length_m, spec.squares_y * spec.square_length_m
    # The board hangs 5 cm in front of the flange, centred on it, facing along the gripper's -z.
    T_gripper_board = RigidTransform(rotation("x", 180.0), np.array([-board_w / 2, board_h / 2, 0.05]))
    poses = []
    while len(poses) < views:
        # Orient the board to face the camera, then tilt it.
        position = workspace + rng.uniform([-0.12, -0.08, -0.08], [0.12, 0.08, 0.12])
        facing = look_at(T_base_cam.t, position).R  # camera-to-position axes
        # board z axis must point away from the camera (into the board, seen from the camera)
        R_board = facing @ rotation("x", rng.uniform(-35, 35)) @ rotation("y", rng.uniform(-35, 35)) \
            @ rotation("z", rng.uniform(-30, 30))
        T_base_board = RigidTransform(R_board, np.zeros(3))
        centre_in_board = np.array([board_w / 2, board_h / 2, 0.0])
        T_base_board = RigidTransform(R_board, position - R_board @ centre_in_board)
        T_base_gripper = T_base_board @ T_gripper_board.inverse()
        T_cam_board = T_base_cam.inverse() @ T_base_board
        corners = T_cam_board.apply(np.array([[0, 0, 0], [board_w, 0, 0], [0, board_h, 0], [board_w, board_h, 0]]))
        uv = corners[:, :2] / corners[:, 2:3] * [intrinsics.fx, intrinsics.fy] + [intrinsics.cx, intrinsics.cy]
        margin = 10
        if np.all(corners[:, 2] > 0.2) and np.all(uv >= margin) and np.all(uv[:, 0] < intrinsics.width - margin) \
                and np.all(uv[:, 1] < intrinsics.height - margin):
            poses.append(T_base_gripper)
    return EyeToHandScene(spec, intrinsics, T_base_cam, T_gripper_board, poses)


def intrinsic_views(intrinsics: CameraIntrinsics, spec: CharucoBoardSpec, views: int = 14,
                    seed: int = 1) -> list[RigidTransform]:
    """Board poses (``T_cam_board``) that fill different parts of the image at different tilts."""
    rng = np.random.default_rng(seed)
    board_w, board_h = spec.squares_x * spec.square_length_m, spec.squares_y * spec.square_length_m
    poses = []
    while len(poses) < views:
        distance = rng.uniform(0.35, 0.7)
        R = rotation("x", rng.uniform(-40, 40)) @ rotation("y", rng.uniform(-40, 40)) \
            @ rotation("z", rng.uniform(-25, 25))
        centre = np.array([rng.uniform(-0.12, 0.12), rng.uniform(-0.08, 0.08), distance])
        T = RigidTransform(R, centre - R @ np.array([board_w / 2, board_h / 2, 0.0]))
        corners = T.apply(np.array([[0, 0, 0], [board_w, 0, 0], [0, board_h, 0], [board_w, board_h, 0]]))
        uv = corners[:, :2] / corners[:, 2:3] * [intrinsics.fx, intrinsics.fy] + [intrinsics.cx, intrinsics.cy]
        if np.all(uv >= 5) and np.all(uv[:, 0] < intrinsics.width - 5) and np.all(uv[:, 1] < intrinsics.height - 5):
            poses.append(T)
    return poses


# ------------------------------------------------------------------------------ RealSense recordings
@dataclass(frozen=True)
class Recording:
    path: Path
    color_intrinsics: CameraIntrinsics
    depth_intrinsics: CameraIntrinsics
    stamps_ms: list[float]
    frame_numbers: list[int]
    colors: list[np.ndarray]  # RGB
    depths_mm: list[np.ndarray]
    serial: str
    depth_units: float


def write_realsense_recording(path: Path, *, width: int = 64, height: int = 48, frames: int = 8,
                              skip: tuple[int, ...] = (), serial: str = "012345678901",
                              start_ms: float = 1.7e12, color_format: str = "rgb8") -> Recording:
    """Record colour + depth frames from a librealsense software device with its own recorder.

    Depth and colour share the size and have a 15 mm baseline (like a D435's colour camera beside
    its left imager). Frame numbers in ``skip`` are left out, as frames the device dropped.
    """
    import pyrealsense2 as rs

    def rs_intrinsics(f: float) -> rs.intrinsics:
        i = rs.intrinsics()
        i.width, i.height, i.ppx, i.ppy, i.fx, i.fy = width, height, (width - 1) / 2, (height - 1) / 2, f, f
        i.model, i.coeffs = rs.distortion.brown_conrady, [0.0] * 5
        return i

    depth_f, color_f = 0.75 * width, 0.875 * width  # exact in float32, as librealsense stores them
    device = rs.software_device()
    device.register_info(rs.camera_info.serial_number, serial)
    device.register_info(rs.camera_info.name, "Intel RealSense (software device)")
    depth_sensor, color_sensor = device.add_sensor("Stereo Module"), device.add_sensor("RGB Camera")
    depth_units = 0.001
    depth_sensor.add_read_only_option(rs.option.depth_units, depth_units)

    def stream(kind, uid: int, fmt, bpp: int, f: float) -> rs.video_stream:
        s = rs.video_stream()
        s.type, s.index, s.uid, s.width, s.height, s.fps, s.bpp, s.fmt = kind, 0, uid, width, height, 30, bpp, fmt
        s.intrinsics = rs_intrinsics(f)
        return s

    fmt = rs.format.rgb8 if color_format == "rgb8" else rs.format.bgr8
    depth_profile = depth_sensor.add_video_stream(stream(rs.stream.depth, 0, rs.format.z16, 2, depth_f))
    color_profile = color_sensor.add_video_stream(stream(rs.stream.color, 1, fmt, 3, color_f))
    extrinsics = rs.extrinsics()
    extrinsics.rotation = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
    extrinsics.translation = [0.015, 0.0, 0.0]
    depth_profile.register_extrinsics_to(color_profile, extrinsics)
    recorder = rs.recorder(str(path), device)
    depth_sensor.open(depth_profile)
    color_sensor.open(color_profile)
    syncer = rs.syncer()
    depth_sensor.start(syncer)
    color_sensor.start(syncer)
    time.sleep(0.3)  # the recorder opens its file in the background: frames sent before that are lost
    colors, depths, stamps, numbers, keep_alive = [], [], [], [], []
    v, u = np.mgrid[0:height, 0:width]
    for n in range(frames):
        if n in skip:
            continue
        rgb = np.zeros((height, width, 3), np.uint8)
        rgb[..., 0] = (u * 4 + n) % 256
        rgb[..., 1] = (v * 5 + 2 * n) % 256
        rgb[..., 2] = 40 * n % 256
        depth = (600 + 4 * v + n).astype(np.uint16)  # 0.6 m at the top, rising downwards, 1 mm more per frame
        depth[20:23, 40:43] = 0  # a patch without a return
        pixels = rgb if color_format == "rgb8" else np.ascontiguousarray(rgb[..., ::-1])
        stamp = start_ms + n * 1000.0 / 30.0
        for sensor, profile, data, bpp in ((depth_sensor, depth_profile, depth, 2),
                                           (color_sensor, color_profile, pixels, 3)):
            frame = rs.software_video_frame()
            frame.pixels, frame.bpp, frame.stride = data, bpp, width * bpp
            frame.timestamp, frame.domain, frame.frame_number = stamp, rs.timestamp_domain.global_time, n
            frame.profile = profile.as_video_stream_profile()
            if sensor is depth_sensor:
                frame.depth_units = depth_units
            sensor.on_video_frame(frame)
        keep_alive += [depth, pixels]
        colors.append(rgb)
        depths.append(depth)
        stamps.append(stamp)
        numbers.append(n)
        time.sleep(0.01)  # let the recorder's writer keep up
    depth_sensor.stop()
    color_sensor.stop()
    depth_sensor.close()
    color_sensor.close()
    recorder.pause()
    del recorder

    def to_intrinsics(f: float) -> CameraIntrinsics:
        return CameraIntrinsics(width, height, f, f, (width - 1) / 2, (height - 1) / 2)

    return Recording(path, to_intrinsics(color_f), to_intrinsics(depth_f), stamps, numbers, colors, depths,
                     serial, depth_units)
