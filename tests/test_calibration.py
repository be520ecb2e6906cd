"""ChArUco calibration on synthetic images of a board rendered from known poses (tests/camera_fixtures.py).

The images are rendered by an exact inverse mapping of OpenCV's own board image (``generateImage``)
through a pinhole camera with lens distortion and 1 grey level of sensor noise; every expected value
comes from the known geometry, never from the code under test. Tolerances, for 640x480 images:
* intrinsics: fx, fy within 0.5 % and cx, cy within 3 px of the truth; RMS reprojection < 0.3 px;
* eye-to-hand from exact poses: the camera's pose in the base frame within 3 mm and 0.3 degrees, the
  board's pose on the gripper within 3 mm and 0.3 degrees; from poses with a WidowX's repeatability
  (1 mm, 0.2 degrees per axis): within 5 mm and 0.5 degrees;
* extrinsics refused with the cause named: quaternions written w-first, positions in millimetres,
  two views whose poses were swapped;
* check: a 2 mm move with 1 mm / 0.2 degree pose noise is never called moved in 20 trials, an 8 mm move
  always is; a 10 px centre shift, a 3 % focal change and a flipped k1 are intrinsics drift, not a move.
"""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("cv2", reason="needs OpenCV (requirements/camera.txt)")

from ladder_ros.camera import charuco, drift, hand_eye  # noqa: E402
from ladder_ros.camera.calibration_file import (  # noqa: E402
    CameraCalibration, Extrinsics, load_calibration, parse_calibration, save_calibration)
from ladder_ros.camera.model import CameraIntrinsics, RigidTransform  # noqa: E402
from ladder_ros.core.errors import ConfigError, InvalidInputError  # noqa: E402
from tests.camera_fixtures import (  # noqa: E402
    eye_to_hand_scene, intrinsic_views, noisy_pose, render_board_view, rotation)

REPO = Path(__file__).resolve().parent.parent
SPEC = charuco.CharucoBoardSpec(squares_x=7, squares_y=5, square_length_m=0.04, marker_length_m=0.03)
TRUTH = CameraIntrinsics(640, 480, 610.0, 608.0, 322.5, 241.0, "plumb_bob", (0.08, -0.15, 0.001, -0.0005, 0.05))
ARM_MM, ARM_DEG = 1.0, 0.2  # a WidowX 250's repeatability (Trossen's wx250s specifications: 1 mm)
HELD_VIEWS = 10


def write_images(folder: Path, poses, seed: int, intrinsics: CameraIntrinsics = TRUTH) -> list[Path]:
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, T in enumerate(poses):
        path = folder / f"{i:03d}.png"
        cv2.imwrite(str(path), render_board_view(SPEC, intrinsics, T, noise_std=1.0, seed=seed + i))
        paths.append(path)
    return paths


def write_poses(path: Path, names, poses, w_first: bool = False, millimetres: bool = False) -> Path:
    entries = []
    for name, T in zip(names, poses):
        x, y, z, w = (float(v) for v in T.quaternion_xyzw)
        entries.append({"image": name, "position": [float(v) * (1000.0 if millimetres else 1.0) for v in T.t],
                        "orientation": [w, x, y, z] if w_first else [x, y, z, w]})
    path.write_text(yaml.safe_dump({"frame": "base_link", "poses": entries}))
    return path


def views_of(images, names=None):
    views = []
    for i, image in enumerate(images):
        view = charuco.detect_board(image, SPEC, names[i] if names else f"{i:03d}.png")
        assert view is not None, f"the board was not found in rendered view {i}"
        views.append(view)
    return views


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibration")
    intrinsic_images = write_images(root / "intrinsics", intrinsic_views(TRUTH, SPEC, views=12), seed=0)
    scene = eye_to_hand_scene(TRUTH, SPEC, views=HELD_VIEWS)
    board_in_cam = [scene.board_in_camera(i) for i in range(len(scene.gripper_poses))]
    hand_images = write_images(root / "hand_eye", board_in_cam, seed=100)
    names = [p.name for p in hand_images]
    rng = np.random.default_rng(7)
    noisy = [noisy_pose(T, rng, ARM_MM, ARM_DEG) for T in scene.gripper_poses]
    return {"root": root, "intrinsics": root / "intrinsics", "hand_eye": root / "hand_eye", "scene": scene,
            "poses": write_poses(root / "poses.yaml", names, scene.gripper_poses), "names": names,
            "noisy": noisy, "noisy_poses": write_poses(root / "noisy.yaml", names, noisy),
            "n_intrinsic": len(intrinsic_images)}


@pytest.fixture(scope="module")
def stored(data):
    """A calibration made as a lab makes it: intrinsics from the intrinsic images, extrinsics from the held
    board with the arm's noisy poses."""
    fit = charuco.calibrate_intrinsics(charuco.detect_in_files(charuco.image_files(data["intrinsics"]), SPEC)[0])
    views, _ = charuco.detect_in_files(charuco.image_files(data["hand_eye"]), SPEC)
    poses = dict(zip(data["names"], data["noisy"]))
    result = hand_eye.calibrate_eye_to_hand(hand_eye.pair_views(views, poses), fit.intrinsics)
    meta = {"covariance": {"parameters": charuco.parameter_names(fit.intrinsics),
                           "matrix": fit.covariance.tolist()}}
    return CameraCalibration("widowx_main", fit.intrinsics, intrinsics_calibration=meta, extrinsics=Extrinsics(
        "base_link", "camera_color_optical_frame", result.base_to_camera, result.gripper_to_target,
        views=result.views, noise_position_m=result.noise_position_m, noise_rotation_deg=result.noise_rotation_deg))


def ladder(*args):
    return subprocess.run([sys.executable, "-m", "ladder_ros.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)


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
    assert drift.stored_covariance(calibration).shape == (9, 9)  # what check weighs a change against
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
    assert extrinsics.views == HELD_VIEWS and len(extrinsics.residuals_per_view) == HELD_VIEWS
    assert 0 < extrinsics.noise_position_m < 0.001 and 0 < extrinsics.noise_rotation_deg < 0.2

    # The same held views: the camera has not moved. Ten views of a board 0.9 m away cannot pin the
    # intrinsics to their tolerances, and the check says so (exit 3) instead of claiming they hold.
    result = ladder("calibrate", "check", data["hand_eye"], "--calibration", path, "--poses", data["poses"])
    assert result.returncode == 3, result.stdout + result.stderr
    assert "camera pose: NOT MOVED" in result.stdout and "intrinsics: CANNOT TELL" in result.stdout
    # Views that fill the image settle the intrinsics: all holds.
    result = ladder("calibrate", "check", data["intrinsics"], "--calibration", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "intrinsics: HOLDS" in result.stdout and "calibration OK" in result.stdout


def test_extrinsics_from_noisy_poses_are_refused_when_the_file_is_wrong_and_the_cause_is_named(data, tmp_path):
    path = save_calibration(CameraCalibration("widowx_main", TRUTH), tmp_path / "widowx_main.yaml")
    good = ladder("calibrate", "extrinsics", data["hand_eye"], "--poses", data["noisy_poses"], "--calibration", path)
    assert good.returncode == 0, good.stdout + good.stderr
    # With a WidowX's pose noise the camera is still within 5 mm and 0.5 degrees (docs/calibration.md, accuracy).
    shift, angle = load_calibration(path).extrinsics.transform.distance_to(data["scene"].base_to_camera)
    assert shift < 0.005 and angle < 0.5, (shift, angle)
    before = path.read_bytes()
    cases = {"w_first": ("the orientations are written [w, x, y, z]", {"w_first": True}),
             "millimetres": ("the positions are in millimetres", {"millimetres": True})}
    for name, (cause, style) in cases.items():
        poses = write_poses(tmp_path / f"{name}.yaml", data["names"], data["noisy"], **style)
        result = ladder("calibrate", "extrinsics", data["hand_eye"], "--poses", poses, "--calibration", path)
        assert result.returncode == 1, (name, result.stdout + result.stderr)
        assert "REFUSED" in result.stderr and f"likeliest cause: {cause}" in result.stderr, (name, result.stderr)
        assert "nothing written" in result.stderr
        assert path.read_bytes() == before, f"{name}: the previous calibration must be kept"
    assert "these look like millimetres" in result.stderr  # positions beyond an arm's reach


def test_two_swapped_views_are_named(data):
    views, _ = charuco.detect_in_files(charuco.image_files(data["hand_eye"]), SPEC)
    entries = [hand_eye.PoseEntry(name, tuple(T.t), tuple(T.quaternion_xyzw))
               for name, T in zip(data["names"], data["noisy"])]
    entries[2], entries[6] = (hand_eye.PoseEntry(entries[2].image, entries[6].position, entries[6].orientation),
                              hand_eye.PoseEntry(entries[6].image, entries[2].position, entries[2].orientation))
    limits = hand_eye.ExtrinsicsLimits()
    result = hand_eye.calibrate_eye_to_hand(hand_eye.pair_views(views, {e.image: e.transform() for e in entries}),
                                            TRUTH)
    assert limits.exceeded(result)
    worst = sorted(result.per_view, key=lambda r: -r.translation_m)[:2]
    assert {r.name for r in worst} == {"002.png", "006.png"}  # the per-view residuals point at them
    causes = hand_eye.likely_causes(entries, views, TRUTH, limits)
    assert causes and set(causes[0].dropped) == {"002.png", "006.png"}, [c.cause for c in causes]
    assert not limits.exceeded(causes[0].result)


@pytest.fixture(scope="module")
def moved_views(data):
    """Held-board views after the camera moved 0, 2 or 8 mm (two directions each), with the true gripper poses."""
    scene = data["scene"]
    Y = scene.base_to_camera
    out = {}
    for mm in (0.0, 2.0, 8.0):
        for k, direction in enumerate((np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.6, 0.8]))):
            moved = RigidTransform(Y.R, Y.t + Y.R @ direction * mm / 1000.0)
            images = [render_board_view(SPEC, TRUTH, moved.inverse() @ g @ scene.gripper_to_board, noise_std=1.0,
                                        seed=500 + 20 * k + i) for i, g in enumerate(scene.gripper_poses)]
            out[(mm, k)] = views_of(images)
    return out


def test_the_drift_rule_knows_the_arms_noise(data, stored, moved_views):
    """20 trials per move (2 directions x 10 draws of the arm's pose noise, seeded): false alarms and misses."""
    scene = data["scene"]
    verdicts = {0.0: [], 2.0: [], 8.0: []}
    for (mm, k), views in moved_views.items():
        for trial in range(10):
            rng = np.random.default_rng(1000 + 100 * k + trial)
            pairs = [(v, noisy_pose(g, rng, ARM_MM, ARM_DEG)) for v, g in zip(views, scene.gripper_poses)]
            report = drift.check_camera_move(pairs, stored)
            verdicts[mm].append(report.verdict)
    rates = {mm: {v: found.count(v) for v in set(found)} for mm, found in verdicts.items()}
    print(f"\ndrift rule over 20 trials each (1 mm / 0.2 deg pose noise, {HELD_VIEWS} views): {rates}")
    assert drift.MOVED not in verdicts[0.0] and drift.MOVED not in verdicts[2.0], rates  # no false alarm
    assert verdicts[8.0] == [drift.MOVED] * 20, rates  # no miss
    assert verdicts[0.0].count(drift.NOT_MOVED) >= 18, rates  # and an unmoved camera is cleared, not shrugged at


def test_check_flags_a_moved_camera_with_the_evidence(data):
    scene = data["scene"]
    views, _ = charuco.detect_in_files(charuco.image_files(data["intrinsics"]), SPEC)
    intrinsics = charuco.calibrate_intrinsics(views).intrinsics
    # Images taken after the camera was knocked 1 cm sideways and turned 1 degree about its optical axis.
    moved = RigidTransform(scene.base_to_camera.R @ rotation("z", 1.0),
                           scene.base_to_camera.t + scene.base_to_camera.R @ np.array([0.01, 0.0, 0.0]))
    new_views = views_of([render_board_view(SPEC, TRUTH, moved.inverse() @ g @ scene.gripper_to_board,
                                            noise_std=1.0, seed=300 + i) for i, g in enumerate(scene.gripper_poses)])
    poses = {f"{i:03d}.png": p for i, p in enumerate(scene.gripper_poses)}

    def calibration(camera):
        return CameraCalibration("widowx_main", intrinsics, extrinsics=Extrinsics(
            "base_link", "camera_color_optical_frame", camera, scene.gripper_to_board, views=HELD_VIEWS,
            noise_position_m=0.0005, noise_rotation_deg=0.05))

    report = drift.check_calibration(new_views, calibration(scene.base_to_camera), poses)
    assert report.moved and not report.ok and report.exit_code == 1
    camera = report.camera
    assert 8.0 < camera.workspace_shift_mm < 12.0 and 0.8 < camera.turn_deg < 1.2, camera.reason
    assert "recalibrate the extrinsics" in camera.reason and len(camera.per_view) == HELD_VIEWS
    assert report.reprojection_rms_px < 0.3  # the intrinsics still fit: only the pose changed
    # The same views against the moved pose: not moved.
    report = drift.check_calibration(new_views, calibration(moved), poses)
    assert report.camera.verdict == drift.NOT_MOVED and report.camera.workspace_bounds_mm[1] < 3.0


def test_intrinsics_drift_is_reported_as_such_not_as_a_move(data, stored):
    scene = data["scene"]

    def lens(scale=1.0, dcx=0.0, k1=None):
        return CameraIntrinsics(640, 480, TRUTH.fx * scale, TRUTH.fy * scale, TRUTH.cx + dcx, TRUTH.cy, "plumb_bob",
                                TRUTH.distortion if k1 is None else (k1, *TRUTH.distortion[1:]))

    cases = {"unchanged": (lens(), None), "focal +3 %": (lens(scale=1.03), drift.FOCAL),
             "centre +10 px": (lens(dcx=10.0), drift.CENTRE), "k1 flipped": (lens(k1=-0.08), drift.DISTORTION)}
    boards = intrinsic_views(TRUTH, SPEC, views=8, seed=7)  # new views that fill the image
    for name, (truth, part) in cases.items():
        views = views_of([render_board_view(SPEC, truth, T, noise_std=1.0, seed=900 + i) for i, T in enumerate(boards)])
        report = drift.check_intrinsics(views, stored)
        if part is None:
            assert report.verdict == drift.HOLDS, (name, report.reason)
        else:
            assert report.verdict == drift.DRIFTED and report.reason.startswith(part), (name, report.reason)
    report = drift.check_intrinsics(views, stored)
    assert report.reason.startswith("distortion changed: it moves a seen corner by up to")
    # How large, with the uncertainty: the estimates match the truth.
    views = views_of([render_board_view(SPEC, lens(scale=1.03), T, noise_std=1.0, seed=950 + i)
                      for i, T in enumerate(boards)])
    report = drift.check_intrinsics(views, stored)
    assert abs(report.focal_change_pct[0] - 100 * (1.03 * TRUTH.fx / stored.intrinsics.fx - 1)) < 3 * max(
        report.focal_std_pct, 0.05)
    # With the board held by the robot and its poses, a focal change is intrinsics drift, and the camera's
    # pose is "cannot tell": never "moved, recalibrate the extrinsics", the wrong fix.
    held = views_of([render_board_view(SPEC, lens(scale=1.03), scene.board_in_camera(i), noise_std=1.0, seed=700 + i)
                     for i in range(HELD_VIEWS)])
    rng = np.random.default_rng(3)
    poses = {v.name: noisy_pose(g, rng, ARM_MM, ARM_DEG) for v, g in zip(held, scene.gripper_poses)}
    report = drift.check_calibration(held, stored, poses)
    assert report.intrinsics.verdict == drift.DRIFTED and report.intrinsics.reason.startswith(drift.FOCAL)
    assert report.camera.verdict == drift.CANNOT_TELL and not report.moved
    assert "the intrinsics changed" in report.camera.reason and report.exit_code == 1


def test_check_flags_intrinsics_that_no_longer_fit(data):
    views, _ = charuco.detect_in_files(charuco.image_files(data["intrinsics"]), SPEC)
    # Another lens (strong barrel distortion): a per-view board pose cannot absorb it.
    wrong = CameraIntrinsics(640, 480, TRUTH.fx, TRUTH.fy, TRUTH.cx, TRUTH.cy, "plumb_bob", (-0.6, 0.3, 0, 0, 0))
    report = drift.check_calibration(views, CameraCalibration("x", wrong))
    assert not report.ok and report.reprojection_rms_px > 1.0
    assert report.intrinsics.verdict == drift.DRIFTED and "no covariance" in report.intrinsics.reason
    smaller = CameraCalibration("x", TRUTH.scaled(320, 240))
    report = drift.check_calibration(views, smaller)
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
        hand_eye.calibrate_eye_to_hand(views, TRUTH)


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
        hand_eye.load_poses(poses)
    poses.write_text("poses:\n  - {image: a.png, position: [0, 0, 0], orientation: [0, 0, 0, 1]}\n"
                     "  - {image: a.png, position: [0, 0, 1], orientation: [0, 0, 0, 1]}\n")
    with pytest.raises(ConfigError, match=r"poses\[1\]: image 'a.png' has a pose already"):
        hand_eye.load_poses(poses)
    with pytest.raises(ConfigError, match="max_rms_mm must be a positive number, got -1"):
        hand_eye.ExtrinsicsLimits(max_rms_mm=-1)
    with pytest.raises(ConfigError, match="both millimetres and degrees"):
        drift.CheckThresholds(pose_noise_mm=1.0)
    with pytest.raises(ConfigError, match="confidence must be in"):
        drift.CheckThresholds(confidence=1.0)
    result = ladder("calibrate", "check", tmp_path, "--calibration", tmp_path / "none.yaml")
    assert result.returncode == 2 and "none.yaml: calibration file not found" in result.stderr


def test_calibration_file_round_trip_and_malformed_files(tmp_path):
    calibration = CameraCalibration("widowx_main", TRUTH, extrinsics=Extrinsics(
        "base_link", "camera_color_optical_frame",
        RigidTransform.from_quaternion([0.1, -0.5, 0.6], [0.3, 0.1, -0.2, 0.9]),
        RigidTransform.from_quaternion([0.0, 0.0, 0.05], [1.0, 0.0, 0.0, 0.0]), method="park-martin", views=10,
        reprojection_rms_px=0.4, noise_position_m=0.0009, noise_rotation_deg=0.2,
        residuals_per_view={"000.png": (1.2, 0.3, 0.5)}))
    path = save_calibration(calibration, tmp_path / "c.yaml")
    back = load_calibration(path)
    assert back.intrinsics == TRUTH
    assert back.extrinsics.transform.distance_to(calibration.extrinsics.transform) < (1e-12, 1e-6)
    assert (back.extrinsics.noise_position_m, back.extrinsics.noise_rotation_deg) == (0.0009, 0.2)
    assert back.extrinsics.residuals_per_view == {"000.png": (1.2, 0.3, 0.5)}
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
    data = yaml.safe_load(path.read_text())
    data["extrinsics"]["noise_position_m"] = "1 mm"
    with pytest.raises(ConfigError, match="extrinsics.noise_position_m: expected a number, got '1 mm'"):
        parse_calibration(data, "f.yaml")
    assert math.isclose(CameraIntrinsics.from_vertical_fov(90.0, 100, 100).fy, 50.0)
