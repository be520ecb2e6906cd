"""ChArUco boards: printing, detection, intrinsics (with their uncertainty) and a view's board pose.

Detection and intrinsics are OpenCV (``cv2.aruco.CharucoDetector``, ``calibrateCamera``,
``solvePnP``; ChArUco is in the main package since OpenCV 4.7). The eye-to-hand solution is in
:mod:`ladder_ros.camera.hand_eye`, the checks of a calibration in :mod:`ladder_ros.camera.drift`.

An intrinsic calibration also gives the covariance of its parameters (``fx, fy, cx, cy`` and the
distortion coefficients), from the Jacobian of every corner's projection with the corner noise
estimated from the residuals (the standard deviations OpenCV's ``calibrateCameraExtended``
reports are the square roots of its diagonal). ``ladder-ros calibrate check`` needs it to tell a
real change of the intrinsics from the noise of two calibrations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ladder_ros.camera.model import CameraIntrinsics, RigidTransform
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
def intrinsic_parameters(intrinsics: CameraIntrinsics) -> np.ndarray:
    """``[fx, fy, cx, cy, *distortion]``: the order of :attr:`IntrinsicsFit.covariance`."""
    return np.array([intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy, *intrinsics.distortion])


def parameter_names(intrinsics: CameraIntrinsics) -> list[str]:
    """Names of :func:`intrinsic_parameters` (OpenCV's order of the distortion coefficients)."""
    names = ["k1", "k2", "p1", "p2", "k3", "k4", "k5", "k6"]
    return ["fx", "fy", "cx", "cy", *names[:len(intrinsics.distortion)]]


@dataclass(frozen=True)
class IntrinsicsFit:
    intrinsics: CameraIntrinsics
    rms_px: float  # OpenCV's RMS reprojection error over all corners
    per_view_rms_px: dict[str, float]
    views: int
    covariance: np.ndarray  # of intrinsic_parameters(intrinsics)
    sigma_px: float  # the corner noise (per image coordinate) the residuals imply

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))


def calibrate_intrinsics(views: Sequence[BoardView], *, rational: bool = False,
                         start: CameraIntrinsics | None = None) -> IntrinsicsFit:
    """Intrinsics from board views of one camera (OpenCV ``calibrateCamera``; plumb_bob or rational).

    ``start``: the intrinsics to start from (a check re-estimates a stored calibration this way, with
    the stored distortion model); by default a centred camera with a focal length of the image width.
    """
    cv2 = import_cv2()
    if len(views) < 4:
        raise InvalidInputError(f"intrinsic calibration needs the board in at least 4 images from different "
                                f"angles; it was found in {len(views)}")
    sizes = {v.image_size for v in views}
    if len(sizes) != 1:
        raise InvalidInputError(f"all images must have the same size, got {sorted(sizes)}")
    width, height = sizes.pop()
    if start is not None:
        if start.distortion_model not in ("plumb_bob", "rational_polynomial"):
            raise InvalidInputError(f"intrinsics are estimated for the plumb_bob and rational_polynomial models, "
                                    f"not {start.distortion_model}")
        rational = start.distortion_model == "rational_polynomial" or len(start.distortion) == 8
        K0, D0 = start.K, start.D.copy()
    else:
        K0 = np.array([[max(width, height), 0, (width - 1) / 2], [0, max(width, height), (height - 1) / 2],
                       [0, 0, 1.0]])
        D0 = None
    count = 8 if rational else (len(D0) if D0 is not None else 5)
    flags = cv2.CALIB_USE_INTRINSIC_GUESS | (cv2.CALIB_RATIONAL_MODEL if rational else 0)
    rms, K, D, rvecs, tvecs = cv2.calibrateCamera([v.object_points for v in views], [v.corners for v in views],
                                                  (width, height), K0.copy(), D0, flags=flags)
    D = np.ravel(D)[:count]
    model = "rational_polynomial" if rational else "plumb_bob"
    intrinsics = CameraIntrinsics.from_matrix(K, width, height, D, model)
    covariance, sigma, per_view = _covariance(views, intrinsics, rvecs, tvecs)
    return IntrinsicsFit(intrinsics, float(rms), per_view, len(views), covariance, sigma)


def _covariance(views: Sequence[BoardView], intrinsics: CameraIntrinsics, rvecs, tvecs
                ) -> tuple[np.ndarray, float, dict[str, float]]:
    """Covariance of the intrinsic parameters (with each view's pose as a free parameter), the corner
    noise per coordinate, and each view's RMS reprojection error."""
    cv2 = import_cv2()
    k = 4 + len(intrinsics.distortion)
    n = len(views)
    blocks, residuals, per_view = [], [], {}
    for i, (view, rvec, tvec) in enumerate(zip(views, rvecs, tvecs)):
        projected, jacobian = cv2.projectPoints(view.object_points.astype(np.float64), rvec, tvec, intrinsics.K,
                                                intrinsics.D)
        error = projected.reshape(-1, 2) - view.corners
        per_view[view.name] = _rms(error)
        residuals.append(error.ravel())
        block = np.zeros((jacobian.shape[0], 6 * n + k))
        block[:, 6 * i:6 * i + 6] = jacobian[:, :6]  # rvec, tvec
        block[:, 6 * n:] = jacobian[:, 6:6 + k]  # fx, fy, cx, cy, distortion
        blocks.append(block)
    J, r = np.vstack(blocks), np.concatenate(residuals)
    dof = max(len(r) - J.shape[1], 1)
    sigma2 = float(r @ r) / dof
    covariance = np.linalg.pinv(J.T @ J) * sigma2
    return covariance[6 * n:, 6 * n:], math.sqrt(sigma2), per_view


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
