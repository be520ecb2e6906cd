"""ChArUco calibration: intrinsics from board images, the camera's pose from robot poses (eye-to-hand), checks.

Detection and intrinsics are OpenCV (``cv2.aruco.CharucoDetector``, ``calibrateCamera``,
``solvePnP``; ChArUco is in the main package since OpenCV 4.7). The hand-eye solution is written
here in numpy, because OpenCV 5.0's Python bindings (the version ManiSkill's SAPIEN pulls in) no
longer export ``calibrateHandEye`` and ``Rodrigues``.

Eye-to-hand: the camera is fixed and the board is held by the gripper. For every view ``i`` the
robot reports the gripper pose ``T_base_gripper_i`` and the camera sees the board at
``T_cam_board_i``; the unknowns are the camera in the base frame ``Y = T_base_cam`` and the board
on the gripper ``X = T_gripper_board``, with ``T_base_gripper_i X = Y T_cam_board_i``. For each
pair of views, ``A = T_base_gripper_j T_base_gripper_i^-1`` and ``B = T_cam_board_j T_cam_board_i^-1``
satisfy ``A Y = Y B`` once the board's mounting is eliminated; this is the classic ``AX = XB``
problem, solved in closed form by Park and Martin (IEEE T-RA 1994: rotation from the
rotation axes by an orthogonal Procrustes fit, then translation by linear least squares), with the
robot poses inverted as OpenCV's ``calibrateHandEye`` documents for the eye-to-hand case. The
closed form is then refined by minimising the reprojection error of every detected corner over all
views (``scipy.optimize.least_squares``), which weighs each view by what the camera actually saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ladder_ros.camera.calibration_file import CameraCalibration
from ladder_ros.camera.model import CameraIntrinsics, RigidTransform, rotation_angle_deg, rotation_vector
from ladder_ros.camera.opencv_camera import import_cv2
from ladder_ros.core.errors import ConfigError, InvalidInputError

MIN_CORNERS = 6  # corners a view needs for a pose (PnP on a plane needs >= 4; 6 keeps it well posed)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


@dataclass(frozen=True)
class CharucoBoardSpec:
    """A ChArUco board: squares across and down, square and marker side (m), ArUco dictionary.

    ``legacy_pattern``: boards printed with OpenCV < 4.6 with an even number of rows have their
    markers shifted (OpenCV issue 23152); set it for those.
    """

    squares_x: int = 7
    squares_y: int = 5
    square_length_m: float = 0.04
    marker_length_m: float = 0.03
    dictionary: str = "DICT_5X5_100"
    legacy_pattern: bool = False

    def __post_init__(self) -> None:
        for name in ("squares_x", "squares_y"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 3 <= value <= 100:
                raise ConfigError(f"board {name} must be an integer in [3, 100], got {value!r}")
        if not (isinstance(self.square_length_m, (int, float)) and 0 < self.square_length_m <= 1.0):
            raise ConfigError(f"board square_length_m must be in (0, 1] metres, got {self.square_length_m!r}")
        if not (isinstance(self.marker_length_m, (int, float)) and 0 < self.marker_length_m < self.square_length_m):
            raise ConfigError(f"board marker_length_m must be positive and smaller than the square "
                              f"({self.square_length_m} m), got {self.marker_length_m!r}")
        cv2 = import_cv2()
        if not self.dictionary.startswith("DICT_") or not hasattr(cv2.aruco, self.dictionary):
            valid = sorted(n for n in dir(cv2.aruco) if n.startswith("DICT_"))
            raise ConfigError(f"unknown ArUco dictionary {self.dictionary!r}; valid: {', '.join(valid)}")
        markers = self.squares_x * self.squares_y // 2
        size = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary)).bytesList.shape[0]
        if markers > size:
            raise ConfigError(f"a {self.squares_x}x{self.squares_y} board needs {markers} markers but "
                              f"{self.dictionary} has {size}")

    def board(self):
        cv2 = import_cv2()
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        board = cv2.aruco.CharucoBoard((self.squares_x, self.squares_y), float(self.square_length_m),
                                       float(self.marker_length_m), dictionary)
        board.setLegacyPattern(bool(self.legacy_pattern))
        return board

    @property
    def corner_count(self) -> int:
        return (self.squares_x - 1) * (self.squares_y - 1)

    def to_dict(self) -> dict[str, Any]:
        return {"squares_x": self.squares_x, "squares_y": self.squares_y, "square_length_m": self.square_length_m,
                "marker_length_m": self.marker_length_m, "dictionary": self.dictionary,
                "legacy_pattern": self.legacy_pattern}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "board") -> "CharucoBoardSpec":
        if not isinstance(data, Mapping):
            raise ConfigError("a board is a mapping", source=source)
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"unknown board key {unknown[0]!r}; valid: {', '.join(cls.__dataclass_fields__)}",
                              source=source)
        return cls(**dict(data))

    def render(self, pixels_per_square: int = 100, margin_px: int = 0):
        """The board as a printable grey image (uint8), ``pixels_per_square`` per square."""
        size = (self.squares_x * pixels_per_square + 2 * margin_px, self.squares_y * pixels_per_square + 2 * margin_px)
        return self.board().generateImage(size, marginSize=margin_px, borderBits=1)


@dataclass(frozen=True)
class BoardView:
    """The ChArUco corners found in one image: pixel positions, ids and their points on the board (m)."""

    name: str
    image_size: tuple[int, int]  # (width, height)
    corners: np.ndarray  # (N, 2) float32 pixels
    ids: np.ndarray  # (N,) int
    object_points: np.ndarray  # (N, 3) float32 board frame, metres (z = 0)

    @property
    def count(self) -> int:
        return int(len(self.ids))


def _gray(image: np.ndarray) -> np.ndarray:
    cv2 = import_cv2()
    if image.ndim == 3:
        return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    return image


def detect_board(image: np.ndarray, spec: CharucoBoardSpec, name: str = "") -> BoardView | None:
    """The board's corners in ``image`` (RGB or grey), or None when fewer than :data:`MIN_CORNERS` are seen."""
    board = spec.board()
    detector = import_cv2().aruco.CharucoDetector(board)
    gray = _gray(np.asarray(image))
    corners, ids, _, _ = detector.detectBoard(gray)
    if ids is None or len(ids) < MIN_CORNERS:
        return None
    object_points, image_points = board.matchImagePoints(corners, ids)
    return BoardView(name=name, image_size=(int(gray.shape[1]), int(gray.shape[0])),
                     corners=np.asarray(image_points, dtype=np.float32).reshape(-1, 2),
                     ids=np.asarray(ids, dtype=np.int64).reshape(-1),
                     object_points=np.asarray(object_points, dtype=np.float32).reshape(-1, 3))


def image_files(folder: str | Path) -> list[Path]:
    """The images in ``folder`` (by suffix), sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError("image folder not found", source=str(folder))
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise ConfigError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in the folder", source=str(folder))
    return files


def read_image(path: Path) -> np.ndarray:
    cv2 = import_cv2()
    image = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    if image is None:
        raise ConfigError("cannot read the image", source=str(path))
    return image


def detect_in_files(files: Sequence[Path], spec: CharucoBoardSpec) -> tuple[list[BoardView], list[str]]:
    """Views of every image where the board was found, and the names of those where it was not."""
    views, missed = [], []
    for path in files:
        view = detect_board(read_image(path), spec, path.name)
        if view is None:
            missed.append(path.name)
        else:
            views.append(view)
    return views, missed


# ------------------------------------------------------------------------------ intrinsics
@dataclass(frozen=True)
class IntrinsicsResult:
    intrinsics: CameraIntrinsics
    rms_px: float  # OpenCV's RMS reprojection error over all corners
    per_view_rms_px: dict[str, float]
    views: int


def calibrate_intrinsics(views: Sequence[BoardView], *, rational: bool = False,
                         fix_aspect: bool = False) -> IntrinsicsResult:
    """Intrinsics from board views of one camera (OpenCV ``calibrateCamera``; plumb_bob or rational)."""
    cv2 = import_cv2()
    if len(views) < 4:
        raise InvalidInputError(f"intrinsic calibration needs the board in at least 4 images from different "
                                f"angles; it was found in {len(views)}")
    sizes = {v.image_size for v in views}
    if len(sizes) != 1:
        raise InvalidInputError(f"all images must have the same size, got {sorted(sizes)}")
    width, height = sizes.pop()
    flags = cv2.CALIB_RATIONAL_MODEL if rational else 0
    if fix_aspect:
        flags |= cv2.CALIB_FIX_ASPECT_RATIO
    K0 = np.array([[max(width, height), 0, (width - 1) / 2], [0, max(width, height), (height - 1) / 2], [0, 0, 1.0]])
    rms, K, D, rvecs, tvecs = cv2.calibrateCamera([v.object_points for v in views], [v.corners for v in views],
                                                  (width, height), K0, None,
                                                  flags=flags | cv2.CALIB_USE_INTRINSIC_GUESS)
    D = np.ravel(D)[:8 if rational else 5]
    model = "rational_polynomial" if rational else "plumb_bob"
    intrinsics = CameraIntrinsics.from_matrix(K, width, height, D, model)
    per_view = {}
    for view, rvec, tvec in zip(views, rvecs, tvecs):
        projected, _ = cv2.projectPoints(view.object_points, rvec, tvec, K, D)
        per_view[view.name] = _rms(projected.reshape(-1, 2) - view.corners)
    return IntrinsicsResult(intrinsics, float(rms), per_view, len(views))


def _rms(residuals: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum(np.asarray(residuals, dtype=np.float64) ** 2, axis=1))))


def board_pose(view: BoardView, intrinsics: CameraIntrinsics) -> tuple[RigidTransform, float]:
    """``T_cam_board`` of a view and its RMS reprojection error (px)."""
    cv2 = import_cv2()
    ok, rvec, tvec = cv2.solvePnP(view.object_points, view.corners, intrinsics.K, intrinsics.D,
                                  flags=cv2.SOLVEPNP_IPPE)
    if not ok:
        raise InvalidInputError(f"{view.name}: no board pose")
    rvec, tvec = cv2.solvePnPRefineLM(view.object_points, view.corners, intrinsics.K, intrinsics.D, rvec, tvec)
    projected, _ = cv2.projectPoints(view.object_points, rvec, tvec, intrinsics.K, intrinsics.D)
    return RigidTransform.from_rvec(rvec, tvec), _rms(projected.reshape(-1, 2) - view.corners)


def project(points_cam: np.ndarray, intrinsics: CameraIntrinsics) -> np.ndarray:
    """Pixels of points given in the camera's optical frame."""
    cv2 = import_cv2()
    projected, _ = cv2.projectPoints(np.asarray(points_cam, dtype=np.float64).reshape(-1, 1, 3), np.zeros(3),
                                     np.zeros(3), intrinsics.K, intrinsics.D)
    return projected.reshape(-1, 2)


# ------------------------------------------------------------------------------ robot poses
def load_poses(path: str | Path) -> dict[str, RigidTransform]:
    """Gripper poses in the robot base frame, by image file name.

    The file (YAML)::

        frame: base_link                  # the robot base frame the poses are in
        poses:
          - image: 000.png
            position: [x, y, z]           # metres
            orientation: [x, y, z, w]     # quaternion
    """
    import yaml

    from ladder_ros.core.errors import read_text

    source = str(path)
    try:
        data = yaml.safe_load(read_text(path, "robot poses file"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("poses"), list) or not data["poses"]:
        raise ConfigError("expected {frame: ..., poses: [{image, position, orientation}, ...]}", source=source)
    poses: dict[str, RigidTransform] = {}
    for i, entry in enumerate(data["poses"]):
        key = f"poses[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("image"), str):
            raise ConfigError("expected {image: NAME, position: [x, y, z], orientation: [x, y, z, w]}",
                              source=source, key=key)
        try:
            poses[entry["image"]] = RigidTransform.from_quaternion(entry.get("position") or [],
                                                                   entry.get("orientation") or [])
        except (InvalidInputError, TypeError, ValueError) as exc:
            raise ConfigError(str(exc), source=source, key=key) from None
    return poses


def pair_views(views: Sequence[BoardView], poses: Mapping[str, RigidTransform]
               ) -> list[tuple[BoardView, RigidTransform]]:
    """Views with the gripper pose of the same image; images without a pose are an error."""
    missing = [v.name for v in views if v.name not in poses]
    if missing:
        raise ConfigError(f"no robot pose for {len(missing)} image(s): {', '.join(missing[:5])}")
    return [(v, poses[v.name]) for v in views]


# ------------------------------------------------------------------------------ eye-to-hand
@dataclass(frozen=True)
class HandEyeResult:
    base_to_camera: RigidTransform  # T_base_cam
    gripper_to_target: RigidTransform  # T_gripper_board
    method: str
    views: int
    residual_translation_m: float  # median over views of |T_base_gripper_i X - Y T_cam_board_i|
    residual_rotation_deg: float
    reprojection_rms_px: float  # of every corner predicted through the robot poses


def _pose_residuals(pairs, views_to_board, Y: RigidTransform, X: RigidTransform) -> tuple[float, float]:
    shifts, angles = [], []
    for (view, T_bg), T_cb in zip(pairs, views_to_board):
        left, right = T_bg @ X, Y @ T_cb
        d_t, d_r = left.distance_to(right)
        shifts.append(d_t)
        angles.append(d_r)
    return float(np.median(shifts)), float(np.median(angles))


def _predicted_corners(view: BoardView, T_bg: RigidTransform, Y: RigidTransform, X: RigidTransform,
                       intrinsics: CameraIntrinsics) -> np.ndarray:
    """Where the board's corners should appear, from the robot pose and the calibration."""
    T_cam_board = Y.inverse() @ T_bg @ X
    return project(T_cam_board.apply(view.object_points), intrinsics)


def _refine(pairs, intrinsics: CameraIntrinsics, Y: RigidTransform, X: RigidTransform
            ) -> tuple[RigidTransform, RigidTransform]:
    """Y and X minimising the reprojection error of every corner through the robot poses."""
    from scipy.optimize import least_squares

    def unpack(p: np.ndarray) -> tuple[RigidTransform, RigidTransform]:
        return RigidTransform.from_rvec(p[0:3], p[3:6]), RigidTransform.from_rvec(p[6:9], p[9:12])

    def residuals(p: np.ndarray) -> np.ndarray:
        y, x = unpack(p)
        return np.concatenate([(_predicted_corners(v, T_bg, y, x, intrinsics) - v.corners).ravel()
                               for v, T_bg in pairs])

    start = np.concatenate([rotation_vector(Y.R), Y.t, rotation_vector(X.R), X.t])
    fit = least_squares(residuals, start, method="lm", x_scale="jac")
    return unpack(fit.x)


def solve_ax_xb(A: Sequence[RigidTransform], B: Sequence[RigidTransform]) -> RigidTransform:
    """X with ``A_k X = X B_k`` for relative motions ``A_k``, ``B_k`` (Park and Martin 1994)."""
    alphas = np.array([rotation_vector(a.R) for a in A])
    betas = np.array([rotation_vector(b.R) for b in B])
    M = betas.T @ alphas  # sum of beta_k alpha_k^T
    w, V = np.linalg.eigh(M.T @ M)
    if np.min(w) <= 1e-12:
        raise InvalidInputError("the robot motions do not rotate about two different axes; hand-eye "
                                "calibration needs rotations about at least two axes")
    R = V @ np.diag(1.0 / np.sqrt(w)) @ V.T @ M.T
    R = _orthonormal(R)
    C = np.vstack([np.eye(3) - a.R for a in A])
    d = np.concatenate([a.t - R @ b.t for a, b in zip(A, B)])
    t, *_ = np.linalg.lstsq(C, d, rcond=None)
    return RigidTransform(R, t)


def calibrate_eye_to_hand(pairs: Sequence[tuple[BoardView, RigidTransform]], intrinsics: CameraIntrinsics,
                          refine: bool = True) -> HandEyeResult:
    """The fixed camera's pose in the robot base frame from board views with the gripper's poses."""
    if len(pairs) < 3:
        raise InvalidInputError(f"hand-eye calibration needs at least 3 views with different gripper "
                                f"orientations; got {len(pairs)}")
    board_in_cam = [board_pose(view, intrinsics)[0] for view, _ in pairs]
    gripper_in_base = [T_bg for _, T_bg in pairs]
    spread = max(rotation_angle_deg(gripper_in_base[0].R.T @ T.R) for T in gripper_in_base[1:])
    if spread < 5.0:
        raise InvalidInputError(f"the gripper orientations differ by at most {spread:.1f} degrees; hand-eye "
                                "calibration needs rotations about at least two axes (tens of degrees)")
    # Eye-to-hand as eye-in-hand: with G_i = T_gripper_base_i (the inverted robot poses) and
    # C_i = T_cam_board_i, X = G_i Y C_i for every view, so G_j^-1 G_i Y = Y C_j C_i^-1.
    A, B = [], []
    for i in range(len(pairs)):
        for j in range(i + 1, len(pairs)):
            a = gripper_in_base[j] @ gripper_in_base[i].inverse()
            if rotation_angle_deg(a.R) < 2.0:
                continue  # nearly pure translations say nothing about the rotation and little about X
            A.append(a)
            B.append(board_in_cam[j] @ board_in_cam[i].inverse())
    if len(A) < 2:
        raise InvalidInputError("too few pairs of views rotate the gripper by more than 2 degrees")
    Y = solve_ax_xb(A, B)
    X = _average([T_bg.inverse() @ Y @ T_cb for T_bg, T_cb in zip(gripper_in_base, board_in_cam)])
    method = "park-martin"
    if refine:
        Y, X = _refine(pairs, intrinsics, Y, X)
        method = "park-martin+reprojection"
    shift, angle = _pose_residuals(pairs, board_in_cam, Y, X)
    predicted = np.concatenate([_predicted_corners(v, T_bg, Y, X, intrinsics) - v.corners for v, T_bg in pairs])
    return HandEyeResult(Y, X, method, len(pairs), shift, angle, _rms(predicted))


def _orthonormal(R: np.ndarray) -> np.ndarray:
    u, _, vt = np.linalg.svd(np.asarray(R, dtype=np.float64))
    M = u @ vt
    if np.linalg.det(M) < 0:
        u[:, -1] *= -1
        M = u @ vt
    return M


def _average(transforms: Sequence[RigidTransform]) -> RigidTransform:
    """The mean translation and the chordal mean rotation of several transforms."""
    return RigidTransform(_orthonormal(sum(T.R for T in transforms)), np.mean([T.t for T in transforms], axis=0))


# ------------------------------------------------------------------------------ check
@dataclass(frozen=True)
class CheckThresholds:
    """When ``check`` fails. A sound calibration reprojects to well under a pixel and its hand-eye
    residuals are a few millimetres and a few tenths of a degree; the defaults sit above that."""

    max_reprojection_px: float = 1.0
    max_shift_m: float = 0.005
    max_rotation_deg: float = 0.5

    def __post_init__(self) -> None:
        for name in ("max_reprojection_px", "max_shift_m", "max_rotation_deg"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"check threshold {name} must be a positive number, got {value!r}")


@dataclass
class CheckReport:
    views: int
    missed: list[str]
    reprojection_rms_px: float  # per-view board poses with the stored intrinsics (checks the intrinsics)
    per_view_rms_px: dict[str, float]
    prediction_rms_px: float | None = None  # corners predicted from robot poses and the stored extrinsics
    camera_shift_m: float | None = None  # median distance of the camera seen now from where it was calibrated
    camera_rotation_deg: float | None = None
    image_size_matches: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def moved(self) -> bool:
        return any(p.startswith("camera moved") for p in self.problems)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "moved": self.moved, "views": self.views, "missed": self.missed,
                "reprojection_rms_px": self.reprojection_rms_px, "prediction_rms_px": self.prediction_rms_px,
                "camera_shift_m": self.camera_shift_m, "camera_rotation_deg": self.camera_rotation_deg,
                "problems": list(self.problems), "per_view_rms_px": self.per_view_rms_px}


def check_calibration(views: Sequence[BoardView], calibration: CameraCalibration,
                      poses: Mapping[str, RigidTransform] | None = None,
                      thresholds: CheckThresholds = CheckThresholds(), missed: Sequence[str] = ()) -> CheckReport:
    """How well ``calibration`` explains new board views; flags a camera that moved since calibration.

    Without robot poses only the intrinsics are checked (board poses per view, reprojection error).
    With poses and extrinsics, each view also gives where the camera is now
    (``T_base_gripper X T_cam_board^-1``), compared with the calibrated ``T_base_cam``.
    """
    intrinsics = calibration.intrinsics
    if not views:
        raise InvalidInputError("the board was found in none of the images")
    report = CheckReport(views=len(views), missed=list(missed), reprojection_rms_px=0.0, per_view_rms_px={})
    sizes = {v.image_size for v in views}
    if sizes != {(intrinsics.width, intrinsics.height)}:
        report.image_size_matches = False
        report.problems.append(f"image size {sorted(sizes)} differs from the calibration's "
                               f"{intrinsics.width}x{intrinsics.height}")
        return report
    poses_cam = {}
    all_residuals = []
    for view in views:
        T_cb, rms = board_pose(view, intrinsics)
        poses_cam[view.name] = T_cb
        report.per_view_rms_px[view.name] = rms
        all_residuals.append(rms)
    report.reprojection_rms_px = float(np.sqrt(np.mean(np.square(all_residuals))))
    if report.reprojection_rms_px > thresholds.max_reprojection_px:
        report.problems.append(f"reprojection error {report.reprojection_rms_px:.2f} px exceeds "
                               f"{thresholds.max_reprojection_px} px: the intrinsics do not fit these images")
    if poses is not None:
        extrinsics = calibration.extrinsics
        if extrinsics is None or extrinsics.target_in_gripper is None:
            raise ConfigError("the calibration has no extrinsics (with target_in_gripper) to check against; "
                              "run `ladder-ros calibrate extrinsics` first")
        Y, X = extrinsics.transform, extrinsics.target_in_gripper
        pairs = pair_views(views, poses)
        shifts, angles, predicted = [], [], []
        for view, T_bg in pairs:
            seen = T_bg @ X @ poses_cam[view.name].inverse()
            d_t, d_r = seen.distance_to(Y)
            shifts.append(d_t)
            angles.append(d_r)
            predicted.append(_predicted_corners(view, T_bg, Y, X, intrinsics) - view.corners)
        report.camera_shift_m = float(np.median(shifts))
        report.camera_rotation_deg = float(np.median(angles))
        report.prediction_rms_px = _rms(np.concatenate(predicted))
        if report.camera_shift_m > thresholds.max_shift_m or report.camera_rotation_deg > thresholds.max_rotation_deg:
            report.problems.append(
                f"camera moved: it is {report.camera_shift_m * 1000:.1f} mm and {report.camera_rotation_deg:.2f} deg "
                f"from its calibrated pose (limits {thresholds.max_shift_m * 1000:.1f} mm, "
                f"{thresholds.max_rotation_deg} deg); recalibrate the extrinsics")
    return report
