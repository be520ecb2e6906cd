"""ChArUco calibration on synthetic images of a board rendered from known poses (tests/camera_fixtures.py).

Tolerances, for 640x480 images with lens distortion and 1 grey level of sensor noise:
* intrinsics: fx, fy within 0.5 % and cx, cy within 3 px of the truth; RMS reprojection < 0.3 px;
* eye-to-hand: the camera's pose in the base frame within 3 mm and 0.3 degrees, the board's pose on the
  gripper within 3 mm and 0.3 degrees;
* check: an unmoved camera passes; one moved by 1 cm or turned by 1 degree is flagged as moved.
"""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("cv2", reason="needs OpenCV (requirements/camera.txt)")

from ladder_ros.camera import charuco  # noqa: E402
from ladder_ros.camera.calibration_file import (  # noqa: E402
    CameraCalibration, Extrinsics, load_calibration, parse_calibration, save_calibration)
from ladder_ros.camera.model import CameraIntrinsics, RigidTransform  # noqa: E402
from ladder_ros.core.errors import ConfigError, InvalidInputError  # noqa: E402
from tests.camera_fixtures import (  # noqa: E402
    eye_to_hand_scene, intrinsic_views, render_board_view, rotation)

REPO = Path(__file__).resolve().parent.parent
SPEC = charuco.CharucoBoardSpec(squares_x=7, squares_y=5, square_length_m=0.04, marker_length_m=0.03)
TRUTH = CameraIntrinsics(640, 480, 610.0, 608.0, 322.5, 241.0, "plumb_bob", (0.08, -0.15, 0.001, -0.0005, 0.05))


def write_images(folder: Path, poses, seed: int) -> list[Path]:
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, T in enumerate(poses):
        path = folder / f"{i:03d}.png"
        cv2.imwrite(str(path), render_board_view(SPEC, TRUTH, T, noise_std=1.0, seed=seed + i))
        paths.append(path)
    return paths


def write_poses(path: Path, names, poses) -> Path:
    entries = [{"image": n, "position": [float(v) for v in T.t], "orientation": [float(v) for v in T.quaternion_xyzw]}
               for n, T in zip(names, poses)]
    path.write_text(yaml.safe_dump({"frame": "base_link", "poses": entries}))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibration")
    intrinsic_images = write_images(root / "intrinsics", intrinsic_views(TRUTH, SPEC, views=12), seed=0)
    scene = eye_to_hand_scene(TRUTH, SPEC, views=10)
    board_in_cam = [scene.board_in_camera(i) for i in range(len(scene.gripper_poses))]
    hand_images = write_images(root / "hand_eye", board_in_cam, seed=100)
    poses = write_poses(root / "poses.yaml", [p.name for p in hand_images], scene.gripper_poses)
    return {"root": root, "intrinsics": root / "intrinsics", "hand_eye": root / "hand_eye", "poses": poses,
            "scene": scene, "n_intrinsic": len(intrinsic_images)}


def ladder(*args):
    return subprocess.run([sys.executable, "-m", "ladder_ros.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=REPO)


def test_intrinsics_extrinsics_and_check_through_the_cli(data, tmp_path):
    out_dir = tmp_path / "calibration"
    result = ladder("calibrate", "intrinsics", data["intrinsics"], "--robot", "widowx", "--camera", "main",
                    "--out-dir", out_dir)
    assert result.returncode == 0, result.stderr
    path = out_dir / "widowx_main.yaml"
    calibration = load_calibration(path)
    got = calibration.intrinsics
    assert (got.width, got.height) == (640, 480)
    assert abs(got.fx / TRUTH.fx - 1) < 0.005 and abs(got.fy / TRUTH.fy - 1) < 0.005
    assert abs(got.cx - TRUTH.cx) < 3 and abs(got.cy - TRUTH.cy) < 3
    assert calibration.intrinsics_calibration["rms_px"] < 0.3
    assert calibration.intrinsics_calibration["views"] == data["n_intrinsic"]
    # The file is the ROS camera_info layout (what camera_calibration_parsers read) plus ladder_ros keys.
    raw = yaml.safe_load(path.read_text())
    assert raw["camera_matrix"]["rows"] == 3 and len(raw["projection_matrix"]["data"]) == 12
    assert raw["distortion_model"] == "plumb_bob" and raw["image_width"] == 640

    result = ladder("calibrate", "extrinsics", data["hand_eye"], "--poses", data["poses"], "--calibration", path)
    assert result.returncode == 0, result.stderr
    extrinsics = load_calibration(path).extrinsics
    scene = data["scene"]
    shift, angle = extrinsics.transform.distance_to(scene.base_to_camera)
    assert shift < 0.003 and angle < 0.3, (shift, angle)
    shift, angle = extrinsics.target_in_gripper.distance_to(scene.gripper_to_board)
    assert shift < 0.003 and angle < 0.3, (shift, angle)
    assert extrinsics.parent_frame == "base_link" and extrinsics.child_frame == "camera_color_optical_frame"

    result = ladder("calibrate", "check", data["hand_eye"], "--calibration", path, "--poses", data["poses"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "calibration OK" in result.stdout


def test_check_flags_a_moved_camera(data):
    scene = data["scene"]
    views, _ = charuco.detect_in_files(charuco.image_files(data["intrinsics"]), SPEC)
    intrinsics = charuco.calibrate_intrinsics(views).intrinsics
    # Images taken after the camera was knocked 1 cm sideways and turned 1 degree about its optical axis.
    moved = RigidTransform(scene.base_to_camera.R @ rotation("z", 1.0),
                           scene.base_to_camera.t + scene.base_to_camera.R @ np.array([0.01, 0.0, 0.0]))
    new_views = []
    for i, gripper in enumerate(scene.gripper_poses):
        image = render_board_view(SPEC, TRUTH, moved.inverse() @ gripper @ scene.gripper_to_board, noise_std=1.0,
                                  seed=300 + i)
        new_views.append(charuco.detect_board(image, SPEC, f"{i:03d}.png"))
    poses = {f"{i:03d}.png": p for i, p in enumerate(scene.gripper_poses)}
    calibration = CameraCalibration("widowx_main", intrinsics, extrinsics=Extrinsics(
        "base_link", "camera_color_optical_frame", scene.base_to_camera, scene.gripper_to_board))
    report = charuco.check_calibration(new_views, calibration, poses)
    assert report.moved and not report.ok
    assert 0.008 < report.camera_shift_m < 0.012 and 0.8 < report.camera_rotation_deg < 1.2
    assert report.reprojection_rms_px < 0.3  # the intrinsics still fit: only the pose changed
    # The same views against the moved pose pass.
    report = charuco.check_calibration(new_views, calibration.with_extrinsics(Extrinsics(
        "base_link", "camera_color_optical_frame", moved, scene.gripper_to_board)), poses)
    assert report.ok and report.camera_shift_m < 0.003


def test_check_flags_intrinsics_that_no_longer_fit(data):
    views, _ = charuco.detect_in_files(charuco.image_files(data["intrinsics"]), SPEC)
    # Another lens (strong barrel distortion): a per-view board pose cannot absorb it. (A focal-length
    # error alone mostly can, by moving the board: the extrinsic check with robot poses catches that.)
    wrong = CameraIntrinsics(640, 480, TRUTH.fx, TRUTH.fy, TRUTH.cx, TRUTH.cy, "plumb_bob", (-0.6, 0.3, 0, 0, 0))
    report = charuco.check_calibration(views, CameraCalibration("x", wrong))
    assert not report.ok and report.reprojection_rms_px > 1.0
    smaller = CameraCalibration("x", TRUTH.scaled(320, 240))
    report = charuco.check_calibration(views, smaller)
    assert not report.image_size_matches and "differs from the calibration's 320x240" in report.problems[0]


def test_hand_eye_needs_rotations():
    scene = eye_to_hand_scene(TRUTH, SPEC, views=4)
    same = scene.gripper_poses[0]
    views = []
    for i in range(4):
        shifted = RigidTransform(same.R, same.t + np.array([0.01 * i, 0, 0]))
        image = render_board_view(SPEC, TRUTH, scene.base_to_camera.inverse() @ shifted @ scene.gripper_to_board)
        views.append((charuco.detect_board(image, SPEC, str(i)), shifted))
    with pytest.raises(InvalidInputError, match="rotations about at least two axes"):
        charuco.calibrate_eye_to_hand(views, TRUTH)


def test_bad_input_names_what_is_wrong(tmp_path):
    with pytest.raises(ConfigError, match="marker_length_m must be positive and smaller"):
        charuco.CharucoBoardSpec(marker_length_m=0.05)
    with pytest.raises(ConfigError, match="unknown ArUco dictionary 'DICT_9X9'"):
        charuco.CharucoBoardSpec(dictionary="DICT_9X9")
    with pytest.raises(ConfigError, match="needs 50 markers but DICT_4X4_50 has 50|needs 60 markers"):
        charuco.CharucoBoardSpec(squares_x=12, squares_y=10, dictionary="DICT_4X4_50")
    with pytest.raises(ConfigError, match="no images"):
        charuco.image_files(tmp_path)
    with pytest.raises(InvalidInputError, match="at least 4 images"):
        charuco.calibrate_intrinsics([])
    poses = tmp_path / "poses.yaml"
    poses.write_text("poses:\n  - {image: a.png, position: [0, 0], orientation: [0, 0, 0, 1]}\n")
    with pytest.raises(ConfigError, match=r"poses\.yaml: poses\[0\]: a pose is a translation"):
        charuco.load_poses(poses)
    result = ladder("calibrate", "check", tmp_path, "--calibration", tmp_path / "none.yaml")
    assert result.returncode == 2 and "none.yaml: calibration file not found" in result.stderr


def test_calibration_file_round_trip_and_malformed_files(tmp_path):
    calibration = CameraCalibration("widowx_main", TRUTH, extrinsics=Extrinsics(
        "base_link", "camera_color_optical_frame",
        RigidTransform.from_quaternion([0.1, -0.5, 0.6], [0.3, 0.1, -0.2, 0.9]),
        RigidTransform.from_quaternion([0.0, 0.0, 0.05], [1.0, 0.0, 0.0, 0.0]), method="park-martin", views=10))
    path = save_calibration(calibration, tmp_path / "c.yaml")
    back = load_calibration(path)
    assert back.intrinsics == TRUTH
    assert back.extrinsics.transform.distance_to(calibration.extrinsics.transform) < (1e-12, 1e-6)
    save_calibration(back, path)
    assert (tmp_path / "c.yaml.bak").exists()
    data = yaml.safe_load(path.read_text())
    data["camera_matrix"]["data"] = [1, 2, 3]
    with pytest.raises(ConfigError, match="camera_matrix.data: expected a list of 9 numbers"):
        parse_calibration(data, "f.yaml")
    data = yaml.safe_load(path.read_text())
    data["distortion_model"] = "fisheye9"
    with pytest.raises(ConfigError, match="unknown distortion model 'fisheye9'"):
        parse_calibration(data, "f.yaml")
    data = yaml.safe_load(path.read_text())
    data["extrinsics"]["rotation"] = [0, 0, 0, 0]
    with pytest.raises(ConfigError, match="extrinsics: a rotation quaternion must be finite and non-zero"):
        parse_calibration(data, "f.yaml")
    assert math.isclose(CameraIntrinsics.from_vertical_fov(90.0, 100, 100).fy, 50.0)
