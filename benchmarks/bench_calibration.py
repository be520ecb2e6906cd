"""How accurate is the eye-to-hand calibration when the arm's poses are noisy? Prints the accuracy table of
docs/calibration.md.

    .venv/bin/python benchmarks/bench_calibration.py [--scenes 4] [--draws 5] [--views 10]

Boards are rendered through a known camera (tests/camera_fixtures.py: OpenCV's own board image mapped
through a pinhole with lens distortion, 1 grey level of sensor noise), the intrinsics calibrated from
12 rendered views, then for each noise level the gripper poses get Gaussian noise per axis (position
mm, orientation deg) and the camera's pose is calibrated from ``--views`` held-board views, closed
form and refined (``ladder_ros.camera.hand_eye``). Each scene (a camera pose and its gripper poses,
rendered once) gets ``--draws`` noise draws. Errors against the truth: the camera's position (mm)
and orientation (deg), and the workspace error (mm RMS over the held board centres: where a point
seen by the camera lands in the base frame through the calibration, against where it is), which is
what placing depth in the robot's frame suffers. Median and 90th percentile over scenes x draws.
Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ladder_ros.camera import charuco, hand_eye  # noqa: E402
from ladder_ros.camera.model import CameraIntrinsics  # noqa: E402
from tests.camera_fixtures import eye_to_hand_scene, intrinsic_views, noisy_pose, render_board_view  # noqa: E402

SPEC = charuco.CharucoBoardSpec()
TRUTH = CameraIntrinsics(640, 480, 610.0, 608.0, 322.5, 241.0, "plumb_bob", (0.08, -0.15, 0.001, -0.0005, 0.05))
# Pose noise per axis: none; half a WidowX 250's 1 mm repeatability; the full 1 mm (Trossen's wx250s
# specifications) with 0.2 degree of orientation noise.
LEVELS = ((0.0, 0.0), (0.5, 0.1), (1.0, 0.2))


def detect(images, start=0):
    views = []
    for i, image in enumerate(images):
        view = charuco.detect_board(image, SPEC, f"{start + i:03d}.png")
        if view is None:
            raise SystemExit(f"the board was not found in rendered view {i}")
        views.append(view)
    return views


def pcts(values):
    values = sorted(values)
    return statistics.median(values), values[min(len(values) - 1, int(0.9 * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=4)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--views", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    intrinsics = charuco.calibrate_intrinsics(detect(
        [render_board_view(SPEC, TRUTH, T, noise_std=1.0, seed=i)
         for i, T in enumerate(intrinsic_views(TRUTH, SPEC, views=12))])).intrinsics
    scenes = []
    for s in range(args.scenes):
        scene = eye_to_hand_scene(TRUTH, SPEC, views=args.views, seed=s)
        images = [render_board_view(SPEC, TRUTH, scene.board_in_camera(i), noise_std=1.0, seed=1000 * s + i)
                  for i in range(args.views)]
        scenes.append((scene, detect(images)))
    print(f"rendered {args.scenes} scenes x {args.views} views and calibrated the intrinsics in "
          f"{time.perf_counter() - started:.0f} s (fx {intrinsics.fx:.1f} vs {TRUTH.fx}, cx {intrinsics.cx:.1f} vs "
          f"{TRUTH.cx})")
    print(f"\n{args.views} held-board views, camera 0.9 m from the workspace; median (90th percentile) over "
          f"{args.scenes * args.draws} calibrations per row\n")
    print("| pose noise per axis | method | camera position (mm) | camera orientation (deg) | workspace (mm) "
          "| residuals (mm / deg / px RMS) | time (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mm, deg in LEVELS:
        for refine in (False, True):
            position, orientation, workspace, residuals, seconds = [], [], [], [], []
            for s, (scene, views) in enumerate(scenes):
                for d in range(args.draws):
                    rng = np.random.default_rng(100 * s + d)
                    pairs = [(v, noisy_pose(g, rng, mm, deg)) for v, g in zip(views, scene.gripper_poses)]
                    t0 = time.perf_counter()
                    result = hand_eye.calibrate_eye_to_hand(pairs, intrinsics, refine=refine)
                    seconds.append(time.perf_counter() - t0)
                    shift, turn = result.base_to_camera.distance_to(scene.base_to_camera)
                    position.append(1000 * shift)
                    orientation.append(turn)
                    centres = np.array([(g @ scene.gripper_to_board).apply(hand_eye.board_centre(v)[None])[0]
                                        for v, g in zip(views, scene.gripper_poses)])
                    seen = (result.base_to_camera @ scene.base_to_camera.inverse()).apply(centres)
                    workspace.append(1000 * math.sqrt(float(np.mean(np.sum((seen - centres) ** 2, axis=1)))))
                    residuals.append((1000 * result.rms_translation_m, result.rms_rotation_deg,
                                      result.reprojection_rms_px))
            cells = [f"{a:.2f} ({b:.2f})" for a, b in (pcts(position), pcts(orientation), pcts(workspace))]
            r = np.median(np.array(residuals), axis=0)
            method = "closed form + pose-space refinement" if refine else "closed form (Park-Martin)"
            print(f"| {mm:g} mm, {deg:g} deg | {method} | {' | '.join(cells)} | {r[0]:.2f} / {r[1]:.2f} / {r[2]:.2f} "
                  f"| {statistics.median(seconds):.2f} |")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
