"""Eye-to-hand calibration: the fixed camera's pose in the robot base frame, its residuals, and why a bad one fails.

The camera is fixed and the board is held by the gripper. For every view ``i`` the robot reports
the gripper pose ``T_base_gripper_i`` and the camera sees the board at ``T_cam_board_i``; the
unknowns are the camera in the base frame ``Y = T_base_cam`` and the board on the gripper
``X = T_gripper_board``, with ``T_base_gripper_i X = Y T_cam_board_i``. For each pair of views,
``A = T_base_gripper_j T_base_gripper_i^-1`` and ``B = T_cam_board_j T_cam_board_i^-1`` satisfy
``A Y = Y B`` once the board's mounting is eliminated: the classic ``AX = XB`` problem, solved in
closed form by Park and Martin (IEEE T-RA 1994: rotation from the rotation axes by an orthogonal
Procrustes fit, then translation by linear least squares), with the robot poses inverted as
OpenCV's ``calibrateHandEye`` documents for the eye-to-hand case. OpenCV 5.0's Python bindings (the
version ManiSkill's SAPIEN pulls in) no longer export ``calibrateHandEye``, so the solver is here.

The closed form is refined where the noise is: in the robot's poses. An arm repeats a pose to about
a millimetre and a few tenths of a degree (WidowX 250: 1 mm repeatability, 5-8 mm accuracy,
Trossen's wx250s specifications), far more than a board pose seen at a pixel's accuracy moves. So
both transforms are fitted to each view's board pose difference, ``Y T_cam_board_i`` against
``T_base_gripper_i X``: the board centre's position (m) and the board's orientation (rad), each
weighted by its noise, which is estimated from the residuals and the fit repeated (three rounds).
A fit of the corners' pixels instead lets the position noise swamp the orientation, and on poses
with 1 mm / 0.2 degree of noise put the camera several millimetres and half a degree further off.

Every result carries its residuals per view (mm, degrees, and the pixels by which the corners
predicted through the robot's pose miss the detected ones) and the noise floor they imply per axis,
which ``ladder-ros calibrate check`` uses to tell a moved camera from the arm's noise. A result
beyond :class:`ExtrinsicsLimits` is refused; :func:`likely_causes` then tries the usual mistakes of a
poses file (quaternions written w-first, millimetres, inverted poses, poses one image off, views
that belong elsewhere) and says which one makes the data fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ladder_ros.camera.charuco import BoardView, board_pose, project
from ladder_ros.camera.model import CameraIntrinsics, RigidTransform, rotation_angle_deg, rotation_vector
from ladder_ros.core.errors import ConfigError, InvalidInputError, read_text

MIN_VIEWS = 3
MIN_SPREAD_DEG = 5.0  # gripper orientations must differ by more than this (tens of degrees are usual)
MIN_PAIR_ROTATION_DEG = 2.0  # pairs of views rotating less say nothing about the rotation
REFINE_ROUNDS = 3  # fit, re-estimate the noise of positions and orientations, fit again
LM_MAX_EVALUATIONS = 400  # per round; a sound calibration converges in a few dozen
SCREEN_FACTOR = 3.0  # alternatives whose closed form is within this multiple of the limits get refined
ARM_REACH_M = 3.0  # poses farther than this from the base are not a tabletop arm's (Franka reach 0.855 m)


# ------------------------------------------------------------------------------ robot poses
@dataclass(frozen=True)
class PoseEntry:
    """One line of a poses file as written: the image, its position and orientation numbers."""

    image: str
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]  # read as (x, y, z, w)

    def transform(self) -> RigidTransform:
        return RigidTransform.from_quaternion(self.position, self.orientation)


def load_pose_entries(path: str | Path) -> list[PoseEntry]:
    """The entries of a poses file, in the file's order.

    The file (YAML)::

        frame: base_link                  # the robot base frame the poses are in
        poses:
          - image: 000.png
            position: [x, y, z]           # metres
            orientation: [x, y, z, w]     # quaternion (geometry_msgs order)
    """
    import yaml

    source = str(path)
    try:
        data = yaml.safe_load(read_text(path, "robot poses file"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("poses"), list) or not data["poses"]:
        raise ConfigError("expected {frame: ..., poses: [{image, position, orientation}, ...]}", source=source)
    entries: list[PoseEntry] = []
    seen: set[str] = set()
    for i, entry in enumerate(data["poses"]):
        key = f"poses[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("image"), str):
            raise ConfigError("expected {image: NAME, position: [x, y, z], orientation: [x, y, z, w]}",
                              source=source, key=key)
        if entry["image"] in seen:
            raise ConfigError(f"image {entry['image']!r} has a pose already", source=source, key=key)
        seen.add(entry["image"])
        position, orientation = entry.get("position") or [], entry.get("orientation") or []
        try:
            pose = PoseEntry(entry["image"], tuple(float(v) for v in position), tuple(float(v) for v in orientation))
            pose.transform()  # validates the lengths, finiteness and a non-zero quaternion
        except (InvalidInputError, TypeError, ValueError) as exc:
            raise ConfigError(str(exc), source=source, key=key) from None
        entries.append(pose)
    return entries


def load_poses(path: str | Path) -> dict[str, RigidTransform]:
    """Gripper poses in the robot base frame, by image file name (see :func:`load_pose_entries`)."""
    return {entry.image: entry.transform() for entry in load_pose_entries(path)}


def pair_views(views: Sequence[BoardView], poses: Mapping[str, RigidTransform]
               ) -> list[tuple[BoardView, RigidTransform]]:
    """Views with the gripper pose of the same image; images without a pose are an error."""
    missing = [v.name for v in views if v.name not in poses]
    if missing:
        raise ConfigError(f"no robot pose for {len(missing)} image(s): {', '.join(missing[:5])}")
    return [(v, poses[v.name]) for v in views]


# ------------------------------------------------------------------------------ the solution
@dataclass(frozen=True)
class ViewResidual:
    """How far one view is from the calibration: the board's centre and orientation as the camera sees
    it (through ``Y``) against where the robot holds it (through ``X``), and the corners' pixels."""

    name: str
    translation_m: float
    rotation_deg: float
    reprojection_px: float


@dataclass(frozen=True)
class HandEyeResult:
    base_to_camera: RigidTransform  # T_base_cam
    gripper_to_target: RigidTransform  # T_gripper_board
    method: str
    per_view: tuple[ViewResidual, ...]
    reprojection_rms_px: float  # every corner predicted through the robot poses
    noise_position_m: float  # per axis, the board position noise the residuals imply
    noise_rotation_deg: float  # per axis

    @property
    def views(self) -> int:
        return len(self.per_view)

    @property
    def rms_translation_m(self) -> float:
        return float(np.sqrt(np.mean([r.translation_m ** 2 for r in self.per_view])))

    @property
    def rms_rotation_deg(self) -> float:
        return float(np.sqrt(np.mean([r.rotation_deg ** 2 for r in self.per_view])))

    def summary(self) -> str:
        return (f"{self.rms_translation_m * 1000:.2f} mm, {self.rms_rotation_deg:.2f} deg, "
                f"{self.reprojection_rms_px:.2f} px RMS over {self.views} views")


def board_centre(view: BoardView) -> np.ndarray:
    """The centre of the corners a view saw, in the board frame: where its position is compared."""
    return np.asarray(view.object_points, dtype=np.float64).mean(axis=0)


def stack(transforms: Sequence[RigidTransform]) -> tuple[np.ndarray, np.ndarray]:
    """Rotations (N, 3, 3) and translations (N, 3) of several transforms, for vectorised arithmetic."""
    return np.array([T.R for T in transforms]), np.array([T.t for T in transforms])


def rotation_vectors(R: np.ndarray) -> np.ndarray:
    """Rotation vectors (N, 3), rad, of rotation matrices (N, 3, 3); accurate at small angles."""
    R = np.asarray(R, dtype=np.float64)
    v = np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], axis=1)  # 2 sin(a) k
    norm = np.linalg.norm(v, axis=1)
    angle = np.arctan2(norm / 2.0, (np.trace(R, axis1=1, axis2=2) - 1.0) / 2.0)
    out = v * np.where(norm > 1e-12, angle / np.maximum(norm, 1e-300), 0.5)[:, None]
    for i in np.nonzero(angle > math.pi - 1e-3)[0]:  # near 180 degrees the antisymmetric part vanishes
        out[i] = rotation_vector(R[i])
    return out


def _rotation_matrix(rvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula without :class:`RigidTransform`'s checks (the optimiser calls it thousands of times)."""
    angle = math.sqrt(float(rvec @ rvec))
    if angle < 1e-12:
        return np.eye(3)
    k = rvec / angle
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)


def board_discrepancies(Y: RigidTransform, X: RigidTransform, gripper_in_base, board_in_cam, centres: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Each view's board pose seen through the camera (``Y T_cam_board``) against the robot's
    (``T_base_gripper X``), both in the base frame: the difference of the board centre's position (N, 3),
    m, and the rotation vector of the orientation difference (N, 3), rad. ``gripper_in_base`` and
    ``board_in_cam`` are :func:`stack`-ed; ``centres`` (N, 3) in the board frame."""
    return _discrepancies(Y.R, Y.t, X.R, X.t, *gripper_in_base, *board_in_cam, centres)


def _discrepancies(YR, Yt, XR, Xt, GR, Gt, CR, Ct, centres) -> tuple[np.ndarray, np.ndarray]:
    camera_R = YR @ CR
    camera_p = np.einsum("nij,nj->ni", camera_R, centres) + Ct @ YR.T + Yt
    robot_R = GR @ XR
    robot_p = np.einsum("nij,nj->ni", robot_R, centres) + np.einsum("nij,j->ni", GR, Xt) + Gt
    return camera_p - robot_p, rotation_vectors(camera_R @ np.transpose(robot_R, (0, 2, 1)))


def _noise(shifts: np.ndarray, turns: np.ndarray) -> tuple[float, float]:
    """Per-axis noise (m, rad) of position and orientation differences left by a fit of two transforms."""
    dof = max(3 * len(shifts) - 6, 1)
    return math.sqrt(float(np.sum(shifts ** 2)) / dof), math.sqrt(float(np.sum(turns ** 2)) / dof)


def _residuals(pairs, board_in_cam, Y: RigidTransform, X: RigidTransform, intrinsics: CameraIntrinsics
               ) -> tuple[tuple[ViewResidual, ...], float, float, float]:
    centres = np.array([board_centre(view) for view, _ in pairs])
    shifts, turns = board_discrepancies(Y, X, stack([T for _, T in pairs]), stack(board_in_cam), centres)
    per_view, errors = [], []
    for (view, T_bg), d, r in zip(pairs, shifts, turns):
        predicted = project((Y.inverse() @ T_bg @ X).apply(view.object_points), intrinsics) - view.corners
        errors.append(predicted)
        per_view.append(ViewResidual(view.name, float(np.linalg.norm(d)), math.degrees(float(np.linalg.norm(r))),
                                     _rms(predicted)))
    noise_t, noise_r = _noise(shifts, turns)
    return tuple(per_view), _rms(np.concatenate(errors)), noise_t, math.degrees(noise_r)


def _rms(residuals: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum(np.asarray(residuals, dtype=np.float64) ** 2, axis=1))))


def solve_ax_xb(A: Sequence[RigidTransform], B: Sequence[RigidTransform]) -> RigidTransform:
    """X with ``A_k X = X B_k`` for relative motions ``A_k``, ``B_k`` (Park and Martin 1994)."""
    alphas = np.array([rotation_vector(a.R) for a in A])
    betas = np.array([rotation_vector(b.R) for b in B])
    M = betas.T @ alphas  # sum of beta_k alpha_k^T
    w, V = np.linalg.eigh(M.T @ M)
    if np.min(w) <= 1e-12:
        raise InvalidInputError("the robot motions do not rotate about two different axes; hand-eye "
                                "calibration needs rotations about at least two axes")
    R = _orthonormal(V @ np.diag(1.0 / np.sqrt(w)) @ V.T @ M.T)
    C = np.vstack([np.eye(3) - a.R for a in A])
    d = np.concatenate([a.t - R @ b.t for a, b in zip(A, B)])
    t, *_ = np.linalg.lstsq(C, d, rcond=None)
    return RigidTransform(R, t)


def _closed_form(gripper_in_base: Sequence[RigidTransform], board_in_cam: Sequence[RigidTransform]
                 ) -> tuple[RigidTransform, RigidTransform]:
    """(Y, X) in closed form. Eye-to-hand as eye-in-hand: with G_i = T_gripper_base_i (the inverted robot
    poses) and C_i = T_cam_board_i, X = G_i Y C_i for every view, so G_j^-1 G_i Y = Y C_j C_i^-1."""
    if len(gripper_in_base) < MIN_VIEWS:
        raise InvalidInputError(f"hand-eye calibration needs at least {MIN_VIEWS} views with different gripper "
                                f"orientations; got {len(gripper_in_base)}")
    spread = max(rotation_angle_deg(gripper_in_base[0].R.T @ T.R) for T in gripper_in_base[1:])
    if spread < MIN_SPREAD_DEG:
        raise InvalidInputError(f"the gripper orientations differ by at most {spread:.1f} degrees; hand-eye "
                                "calibration needs rotations about at least two axes (tens of degrees)")
    A, B = [], []
    for i in range(len(gripper_in_base)):
        for j in range(i + 1, len(gripper_in_base)):
            a = gripper_in_base[j] @ gripper_in_base[i].inverse()
            if rotation_angle_deg(a.R) < MIN_PAIR_ROTATION_DEG:
                continue  # nearly pure translations say nothing about the rotation and little about X
            A.append(a)
            B.append(board_in_cam[j] @ board_in_cam[i].inverse())
    if len(A) < 2:
        raise InvalidInputError(f"too few pairs of views rotate the gripper by more than {MIN_PAIR_ROTATION_DEG:g} "
                                "degrees")
    Y = solve_ax_xb(A, B)
    X = _average([T_bg.inverse() @ Y @ T_cb for T_bg, T_cb in zip(gripper_in_base, board_in_cam)])
    return Y, X


def _refine_in_pose_space(pairs, board_in_cam, Y: RigidTransform, X: RigidTransform
                          ) -> tuple[RigidTransform, RigidTransform]:
    """Y and X minimising each view's board position and orientation difference, each weighted by its
    noise (estimated from the residuals, then the fit repeated)."""
    from scipy.optimize import least_squares

    centres = np.array([board_centre(view) for view, _ in pairs])
    gripper, camera = stack([T for _, T in pairs]), stack(board_in_cam)

    def differences(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        YR, XR = _rotation_matrix(p[0:3]), _rotation_matrix(p[6:9])
        return _discrepancies(YR, p[3:6], XR, p[9:12], *gripper, *camera, centres)

    params = np.concatenate([rotation_vector(Y.R), Y.t, rotation_vector(X.R), X.t])
    for _ in range(REFINE_ROUNDS):
        sigma_t, sigma_r = _noise(*differences(params))
        # Floors keep a noise-free simulation well posed: 10 micrometres, 0.001 degree.
        sigma_t, sigma_r = max(sigma_t, 1e-5), max(sigma_r, math.radians(1e-3))

        def weighted(p: np.ndarray, sigma_t: float = sigma_t, sigma_r: float = sigma_r) -> np.ndarray:
            shifts, turns = differences(p)
            return np.concatenate([(shifts / sigma_t).ravel(), (turns / sigma_r).ravel()])

        params = least_squares(weighted, params, method="lm", x_scale="jac", max_nfev=LM_MAX_EVALUATIONS).x
    return RigidTransform.from_rvec(params[0:3], params[3:6]), RigidTransform.from_rvec(params[6:9], params[9:12])


def calibrate_eye_to_hand(pairs: Sequence[tuple[BoardView, RigidTransform]], intrinsics: CameraIntrinsics,
                          refine: bool = True) -> HandEyeResult:
    """The fixed camera's pose in the robot base frame from board views with the gripper's poses."""
    if len(pairs) < MIN_VIEWS:
        raise InvalidInputError(f"hand-eye calibration needs at least {MIN_VIEWS} views with different gripper "
                                f"orientations; got {len(pairs)}")
    board_in_cam = [board_pose(view, intrinsics)[0] for view, _ in pairs]
    return _solve(pairs, board_in_cam, intrinsics, refine)


def _solve(pairs, board_in_cam, intrinsics: CameraIntrinsics, refine: bool) -> HandEyeResult:
    Y, X = _closed_form([T for _, T in pairs], board_in_cam)
    method = "park-martin"
    if refine:
        Y, X = _refine_in_pose_space(pairs, board_in_cam, Y, X)
        method = "park-martin+pose-space"
    per_view, reprojection, noise_t, noise_r = _residuals(pairs, board_in_cam, Y, X, intrinsics)
    return HandEyeResult(Y, X, method, per_view, reprojection, noise_t, noise_r)


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


# ------------------------------------------------------------------------------ limits
@dataclass(frozen=True)
class ExtrinsicsLimits:
    """A calibration whose residuals exceed any of these is refused (nothing is written).

    Defaults sit above what a sound calibration leaves on a WidowX 250, whose poses are repeatable to
    1 mm but accurate only to 5-8 mm (Trossen's wx250s specifications): its hand-eye residuals are
    a few millimetres, under a degree and a few pixels at 0.9 m. The usual mistakes leave hundreds of
    millimetres, tens of degrees and tens of pixels.
    """

    max_rms_mm: float = 10.0
    max_rms_deg: float = 2.0
    max_rms_px: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_rms_mm", "max_rms_deg", "max_rms_px"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ConfigError(f"extrinsics limit {name} must be a positive number, got {value!r}")

    def exceeded(self, result: HandEyeResult) -> list[str]:
        """What is beyond the limits, in words (empty: within them)."""
        found = []
        for value, limit, unit, what in ((result.rms_translation_m * 1000, self.max_rms_mm, "mm", "position"),
                                         (result.rms_rotation_deg, self.max_rms_deg, "deg", "orientation"),
                                         (result.reprojection_rms_px, self.max_rms_px, "px", "reprojection")):
            if not value <= limit:
                found.append(f"{what} residual {value:.2f} {unit} RMS exceeds {limit:g} {unit}")
        return found

    def score(self, result: HandEyeResult) -> float:
        """The largest residual as a multiple of its limit (<= 1: within the limits)."""
        return max(result.rms_translation_m * 1000 / self.max_rms_mm, result.rms_rotation_deg / self.max_rms_deg,
                   result.reprojection_rms_px / self.max_rms_px)


# ------------------------------------------------------------------------------ why it failed
@dataclass(frozen=True)
class Alternative:
    """One reading of the poses file other than the one given, and the calibration it leads to."""

    cause: str  # what would be wrong with the file
    fix: str  # what to change
    result: HandEyeResult | None = None
    error: str = ""  # why this reading gives no calibration at all
    dropped: tuple[str, ...] = field(default_factory=tuple)  # views left out


def _w_first(entry: PoseEntry) -> PoseEntry:
    w, x, y, z = entry.orientation
    return PoseEntry(entry.image, entry.position, (x, y, z, w))


def _millimetres(entry: PoseEntry) -> PoseEntry:
    x, y, z = entry.position
    return PoseEntry(entry.image, (x / 1000.0, y / 1000.0, z / 1000.0), entry.orientation)


def _pairs_with(views: Mapping[str, BoardView], entries: Sequence[PoseEntry],
                change: Callable[[PoseEntry], PoseEntry]) -> list[tuple[BoardView, RigidTransform]]:
    return [(views[e.image], change(e).transform()) for e in entries if e.image in views]


def _shifted(views: Mapping[str, BoardView], entries: Sequence[PoseEntry], by: int
             ) -> list[tuple[BoardView, RigidTransform]]:
    """Each image with the pose listed ``by`` entries later in the file (the poses recorded one image off)."""
    named = [e for e in entries if e.image in views]
    out = []
    for k, entry in enumerate(named):
        if 0 <= k + by < len(named):
            out.append((views[entry.image], named[k + by].transform()))
    return out


def likely_causes(entries: Sequence[PoseEntry], views: Sequence[BoardView], intrinsics: CameraIntrinsics,
                  limits: ExtrinsicsLimits, refine: bool = True, max_dropped: int = 3) -> list[Alternative]:
    """Readings of the poses file that make the calibration fit the limits, the best first (empty: none does).

    Tried: orientations written ``[w, x, y, z]``; positions in millimetres; both; each pose inverted
    (the base in the gripper's frame); each pose belonging to the next or the previous image; and,
    one at a time up to ``max_dropped``, leaving out the view that fits the others worst (a pose
    typed under another image's name, or the board slipping on the gripper).
    """
    by_name = {v.name: v for v in views}
    board_in_cam = {v.name: board_pose(v, intrinsics)[0] for v in views}

    def attempt(cause: str, fix: str, pairs, dropped: tuple[str, ...] = ()) -> Alternative:
        cams = [board_in_cam[v.name] for v, _ in pairs]
        try:
            result = _solve(pairs, cams, intrinsics, refine=False)
            # The refinement only polishes: a reading whose closed form is far off is not the answer.
            if refine and limits.score(result) < SCREEN_FACTOR:
                result = _solve(pairs, cams, intrinsics, refine=True)
        except InvalidInputError as exc:
            return Alternative(cause, fix, None, str(exc), dropped)
        return Alternative(cause, fix, result, "", dropped)

    identity = _pairs_with(by_name, entries, lambda e: e)
    tried = [
        attempt("the orientations are written [w, x, y, z]", "write each orientation as [x, y, z, w] "
                "(the order of geometry_msgs/Quaternion)", _pairs_with(by_name, entries, _w_first)),
        attempt("the positions are in millimetres", "write the positions in metres",
                _pairs_with(by_name, entries, _millimetres)),
        attempt("the positions are in millimetres and the orientations are written [w, x, y, z]",
                "write the positions in metres and each orientation as [x, y, z, w]",
                _pairs_with(by_name, entries, lambda e: _w_first(_millimetres(e)))),
        attempt("each pose is the base in the gripper's frame (inverted)", "write the gripper's pose in the base "
                "frame (T_base_gripper), not its inverse",
                [(v, T.inverse()) for v, T in identity]),
        attempt("each pose belongs to the next image (poses recorded one image late)",
                "pair each image with the pose taken when it was shot", _shifted(by_name, entries, 1)),
        attempt("each pose belongs to the previous image (poses recorded one image early)",
                "pair each image with the pose taken when it was shot", _shifted(by_name, entries, -1)),
    ]
    tried.append(_drop_worst(identity, board_in_cam, intrinsics, limits, refine, max_dropped, attempt))
    fitting = [a for a in tried if a.result is not None and not limits.exceeded(a.result)]
    return sorted(fitting, key=lambda a: (len(a.dropped), limits.score(a.result)))


def _drop_worst(pairs, board_in_cam, intrinsics, limits, refine, max_dropped, attempt) -> Alternative:
    """Leave out, one at a time, the view whose removal leaves the closed form's residuals smallest."""
    kept = list(pairs)
    dropped: list[str] = []
    outcome = Alternative("no view can be left out", "", None, "too few views to leave any out")
    floor = max(MIN_VIEWS + 1, (len(pairs) + 1) // 2)
    while len(dropped) < max_dropped and len(kept) > floor:
        best = None
        for k in range(len(kept)):
            rest = kept[:k] + kept[k + 1:]
            cams = [board_in_cam[v.name] for v, _ in rest]
            try:
                Y, X = _closed_form([T for _, T in rest], cams)
            except InvalidInputError:
                continue
            shifts, turns = board_discrepancies(Y, X, stack([T for _, T in rest]), stack(cams),
                                                np.array([board_centre(v) for v, _ in rest]))
            size = float(np.mean(np.sum(shifts ** 2, axis=1))) * 1e6 / limits.max_rms_mm ** 2 \
                + math.degrees(1) ** 2 * float(np.mean(np.sum(turns ** 2, axis=1))) / limits.max_rms_deg ** 2
            if best is None or size < best[0]:
                best = (size, k)
        if best is None:
            break
        dropped.append(kept.pop(best[1])[0].name)
        many = len(dropped) > 1
        outcome = attempt(f"view{'s' if many else ''} {', '.join(dropped)} do{'' if many else 'es'} not fit the "
                          "others (a pose under another image's name, or the board moved on the gripper)",
                          f"retake or remove {'them' if many else 'it'}", kept, tuple(dropped))
        if outcome.result is not None and not limits.exceeded(outcome.result):
            break
    return outcome


def plausibility_notes(entries: Sequence[PoseEntry]) -> list[str]:
    """What in the poses file looks wrong by itself: positions out of an arm's reach, non-unit quaternions."""
    notes = []
    far = max(entries, key=lambda e: float(np.linalg.norm(e.position)))
    reach = float(np.linalg.norm(far.position))
    if reach > ARM_REACH_M:
        notes.append(f"{far.image}: position {reach:g} from the base; an arm's poses are within about a metre of "
                     "it, so these look like millimetres")
    for entry in entries:
        norm = float(np.linalg.norm(entry.orientation))
        if abs(norm - 1.0) > 1e-3:
            notes.append(f"{entry.image}: orientation {list(entry.orientation)} has norm {norm:.4f}, not 1 (a unit "
                         "quaternion [x, y, z, w] is expected)")
            break
    return notes
