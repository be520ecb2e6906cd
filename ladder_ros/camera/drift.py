"""Does a calibration still hold? Intrinsics drift and a moved camera, each decided against its noise.

``ladder-ros calibrate check`` takes new images of the board. Each question gets one of three
answers, with the evidence: the calibration **holds** / the camera has **not moved**; the
intrinsics **drifted** / the camera **moved**; or the images **cannot tell** (they are too few or
too noisy to rule out a change as large as the tolerance), never a guess.

Intrinsics (every image): the intrinsics are estimated again from the new views, with the board's
known geometry and each view's pose free (``calibrateCamera`` started at the stored values), and
the change ``d`` is weighed against the uncertainty of both estimates (``S = S_new + S_stored``, the
covariances of :func:`ladder_ros.camera.charuco.calibrate_intrinsics`). One Wald test per part,
focal length (fx, fy), principal point (cx, cy) and distortion, the three sharing the confidence
(Bonferroni); each estimates the change of its part with the others as they were (generalised least
squares; chi-square with one degree of freedom per parameter of the part when nothing changed), the
most powerful test against one part changing alone. When something changed, the fewest parts that
explain it are named, so a focal change is not also blamed on the principal point. A named part beyond
its tolerance (focal length in %, principal point in px, distortion as the largest shift it makes at
the corners seen) has **drifted**. No such part means "holds" only when each test had the power to see
a change of tolerance size (the non-central chi-square), else "cannot tell". Per-view board poses
absorb most of a focal-length or centre error, which is why a reprojection error alone misses them.

Camera move (images with robot poses): each view's board is seen through the stored calibration
(``Y T_cam_board``) and held by the robot (``T_base_gripper X``); the differences of the board
centres' positions ``d_i`` and orientations ``r_i`` are what a move leaves. A small camera motion
moves every workspace point ``b`` by ``w x (b - b_mean) + t`` and turns every orientation by ``w``;
``(w, t)`` is fitted by least squares, each difference weighted by its noise: the arm's pose noise,
the calibration's own noise floor pooled with these views' residuals (or the arm's repeatability
given on the command line, taken as exact). The fitted move displaces the workspace (the board
centres) by ``e`` mm RMS; over the fit's confidence region (F distribution, 6 parameters, at
``confidence``, widened by ``sqrt(1 + N / N_calibration)`` because the stored calibration has the
same noise) ``e`` and the camera's turn ``|w|`` have lower and upper bounds. **Moved**: a lower bound
beyond its tolerance; **not moved**: both upper bounds within; otherwise **cannot tell**. A view that
fits no single move with the others (chi-square over its six differences) makes it "cannot tell",
naming the view; so do drifted intrinsics, because a focal or centre change looks like a move (a
principal point shifted by ``s`` px looks like the camera turned by ``s / f`` rad).

The simulation in ``tests/test_calibration.py`` (rendered boards, 10 views, gripper-pose noise of
1 mm and 0.2 degrees per axis) measures the rule: a 2 mm move is never called "moved", an 8 mm move
always is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ladder_ros.camera.calibration_file import CameraCalibration
from ladder_ros.camera.charuco import (
    BoardView,
    board_pose,
    calibrate_intrinsics,
    intrinsic_parameters,
    parameter_names,
)
from ladder_ros.camera.hand_eye import board_centre, board_discrepancies, stack
from ladder_ros.camera.model import CameraIntrinsics, RigidTransform
from ladder_ros.camera.opencv_camera import import_cv2
from ladder_ros.core.errors import ConfigError, InvalidInputError

HOLDS, DRIFTED = "holds", "drifted"
NOT_MOVED, MOVED = "not moved", "moved"
CANNOT_TELL = "cannot tell"
MIN_INTRINSIC_VIEWS = 4
FOCAL, CENTRE, DISTORTION = "focal length", "principal point", "distortion"


@dataclass(frozen=True)
class CheckThresholds:
    """Tolerances of ``check`` and the confidence of its decisions.

    The tolerances say how much change matters. By default they are errors of a few millimetres for
    a camera 0.9 m from the workspace: a 5 mm shift of the workspace; a 1 degree turn (8 mm at the
    edge of a 640 px wide view); a 3 px principal point (4.4 mm); distortion moving a seen corner by
    2 px; a 1 % focal length (9 mm of depth, and 1 % of MoGe-2's metric scale, which takes its
    field of view from the focal length). The focal length is looser because ten views of the default
    board pin it only to about 0.1 %: a 0.5 % test would say "cannot tell" on most routine checks.
    """

    max_reprojection_px: float = 1.0  # each view's own board pose with the stored intrinsics
    max_move_mm: float = 5.0  # RMS displacement of the workspace (the held board centres)
    max_turn_deg: float = 1.0
    max_focal_change_pct: float = 1.0
    max_centre_shift_px: float = 3.0
    max_distortion_px: float = 2.0
    confidence: float = 0.99
    power: float = 0.9  # "holds" needs this chance of seeing a change of tolerance size
    pose_noise_mm: float | None = None  # per axis; None: the calibration's noise floor
    pose_noise_deg: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_reprojection_px", "max_move_mm", "max_turn_deg", "max_focal_change_pct",
                     "max_centre_shift_px", "max_distortion_px", "pose_noise_mm", "pose_noise_deg"):
            value = getattr(self, name)
            if value is None and name.startswith("pose_noise"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ConfigError(f"check threshold {name} must be a positive number, got {value!r}")
        for name in ("confidence", "power"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.5 <= value < 1.0:
                raise ConfigError(f"check {name} must be in [0.5, 1), got {value!r}")
        if (self.pose_noise_mm is None) != (self.pose_noise_deg is None):
            raise ConfigError("give the arm's pose noise as both millimetres and degrees (per axis), or neither "
                              f"(got {self.pose_noise_mm!r} mm, {self.pose_noise_deg!r} deg)")


# ------------------------------------------------------------------------------ intrinsics
@dataclass
class IntrinsicsCheck:
    verdict: str
    reason: str
    views: int
    statistic: dict[str, float] = field(default_factory=dict)  # Wald statistic per part
    critical: dict[str, float] = field(default_factory=dict)
    focal_change_pct: tuple[float, float] | None = None  # fx, fy
    focal_std_pct: float | None = None  # of the change
    centre_shift_px: tuple[float, float] | None = None
    centre_std_px: float | None = None
    distortion_px: float | None = None  # largest shift the distortion change makes at the corners seen
    power: dict[str, float] = field(default_factory=dict)  # chance to see a change of tolerance size
    estimated: CameraIntrinsics | None = None
    stored_uncertainty: bool = False  # the calibration file held its covariance

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "estimated"}
        if self.estimated is not None:
            out["estimated"] = {"fx": self.estimated.fx, "fy": self.estimated.fy, "cx": self.estimated.cx,
                                "cy": self.estimated.cy, "distortion": list(self.estimated.distortion)}
        return out


def stored_covariance(calibration: CameraCalibration) -> np.ndarray | None:
    """The covariance of the stored intrinsics, when the file has one for the same parameters."""
    body = calibration.intrinsics_calibration.get("covariance")
    names = parameter_names(calibration.intrinsics)
    if not isinstance(body, Mapping) or list(body.get("parameters", [])) != names:
        return None
    try:
        matrix = np.array(body.get("matrix"), dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if matrix.shape != (len(names), len(names)) or not np.all(np.isfinite(matrix)):
        return None
    return matrix


def _rays(points_px: np.ndarray, intrinsics: CameraIntrinsics) -> np.ndarray:
    """Normalised image coordinates (N, 2) of pixels through ``intrinsics``."""
    cv2 = import_cv2()
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-12)
    return cv2.undistortPoints(np.asarray(points_px, np.float64).reshape(-1, 1, 2), intrinsics.K, intrinsics.D,
                               criteria=criteria).reshape(-1, 2)


def _pixels(rays: np.ndarray, K: np.ndarray, D: np.ndarray) -> np.ndarray:
    cv2 = import_cv2()
    points = np.column_stack([rays, np.ones(len(rays))])
    return cv2.projectPoints(points, np.zeros(3), np.zeros(3), K, D)[0].reshape(-1, 2)


def _restricted(d: np.ndarray, precision: np.ndarray, idx: list[int]) -> tuple[np.ndarray, float]:
    """The change ``d`` explained by the parameters ``idx`` alone (generalised least squares, the others
    unchanged) and what is left unexplained (chi-square with ``len(d) - len(idx)`` degrees of freedom)."""
    delta = np.zeros_like(d)
    if idx:
        delta[idx] = np.linalg.solve(precision[np.ix_(idx, idx)], (precision @ d)[idx])
    rest = d - delta
    return delta, float(rest @ precision @ rest)


def _explain(d: np.ndarray, precision: np.ndarray, groups: Mapping[str, list[int]], confidence: float
             ) -> tuple[tuple[str, ...], np.ndarray, float]:
    """The fewest parts whose change explains ``d`` (the rest consistent with no change), their change and
    the unexplained remainder. A focal length change alone is not blamed on the principal point too."""
    from itertools import combinations

    from scipy.stats import chi2

    k = len(d)
    for count in range(1, len(groups) + 1):
        options = []
        for parts in combinations(groups, count):
            idx = [i for name in parts for i in groups[name]]
            delta, rest = _restricted(d, precision, idx)
            options.append((rest, parts, delta))
        rest, parts, delta = min(options, key=lambda o: o[0])
        if count == len(groups) or rest <= chi2.ppf(confidence, k - len([i for n in parts for i in groups[n]])):
            return parts, delta, rest
    raise AssertionError("unreachable: all parts together explain every change")


def check_intrinsics(views: Sequence[BoardView], calibration: CameraCalibration,
                     thresholds: CheckThresholds = CheckThresholds()) -> IntrinsicsCheck:
    """Have the intrinsics changed since ``calibration``? (See the module's docstring.)"""
    from scipy.stats import chi2, ncx2

    stored = calibration.intrinsics
    if len(views) < MIN_INTRINSIC_VIEWS:
        return IntrinsicsCheck(CANNOT_TELL, f"the intrinsics need the board in at least {MIN_INTRINSIC_VIEWS} "
                               f"images; it was found in {len(views)}", len(views))
    try:
        fit = calibrate_intrinsics(views, start=stored)
    except InvalidInputError as exc:
        return IntrinsicsCheck(CANNOT_TELL, str(exc), len(views))
    prior = stored_covariance(calibration)
    covariance = fit.covariance + (prior if prior is not None else 0.0)
    precision = np.linalg.pinv(covariance)
    d = intrinsic_parameters(fit.intrinsics) - intrinsic_parameters(stored)
    k = len(d)
    groups = {FOCAL: [0, 1], CENTRE: [2, 3], DISTORTION: list(range(4, k))}
    # Detection: one test per part, the confidence shared among the three (Bonferroni). Each asks whether
    # the views show a change of that part with the others as they were (the change estimated under that
    # constraint; its precision is the part's block of the inverse covariance): the most powerful test
    # against one part changing alone (a touched focus ring, a knocked lens).
    critical = {name: float(chi2.ppf(1.0 - (1.0 - thresholds.confidence) / len(groups), len(idx)))
                for name, idx in groups.items()}
    block = {name: precision[np.ix_(idx, idx)] for name, idx in groups.items()}
    statistic = {}
    for name, idx in groups.items():
        alone = _restricted(d, precision, idx)[0][idx]
        statistic[name] = float(alone @ block[name] @ alone)
    changed = any(statistic[name] > critical[name] for name in groups)
    # Attribution: the fewest parts that explain the change.
    parts, delta, rest = _explain(d, precision, groups, thresholds.confidence) if changed else ((), np.zeros(k), 0.0)

    rays = _rays(np.concatenate([v.corners for v in views]), stored)
    shifted = _pixels(rays, stored.K, stored.D + delta[4:]) - _pixels(rays, stored.K, stored.D)
    focal_pct = (100.0 * delta[0] / stored.fx, 100.0 * delta[1] / stored.fy)
    size = {FOCAL: max(abs(v) for v in focal_pct), CENTRE: math.hypot(delta[2], delta[3]),
            DISTORTION: float(np.max(np.linalg.norm(shifted, axis=1)))}
    tolerance = {FOCAL: thresholds.max_focal_change_pct, CENTRE: thresholds.max_centre_shift_px,
                 DISTORTION: thresholds.max_distortion_px}
    chosen = [i for name in parts for i in groups[name]]
    spread = np.zeros((k, k))
    if chosen:
        spread[np.ix_(chosen, chosen)] = np.linalg.inv(precision[np.ix_(chosen, chosen)])
    report = IntrinsicsCheck(
        "", "", len(views), statistic, critical, focal_pct, 100.0 * math.sqrt(spread[0, 0]) / stored.fx,
        (float(delta[2]), float(delta[3])), math.sqrt(float(np.max(np.linalg.eigvalsh(spread[2:4, 2:4])))),
        size[DISTORTION], estimated=fit.intrinsics, stored_uncertainty=prior is not None)
    describe = {
        FOCAL: f"focal length {focal_pct[0]:+.2f} % (fx {stored.fx:.1f} -> {stored.fx + delta[0]:.1f} px, "
               f"+-{report.focal_std_pct:.2f} %)",
        CENTRE: f"principal point moved ({delta[2]:+.1f}, {delta[3]:+.1f}) px (+-{report.centre_std_px:.1f} px)",
        DISTORTION: f"distortion changed: it moves a seen corner by up to {size[DISTORTION]:.1f} px",
    }
    # Power: the chance each test sees a change of tolerance size in its part (the hardest direction).
    r_max = max(float(np.max(np.linalg.norm(rays, axis=1))), 1e-3)
    smallest = {FOCAL: thresholds.max_focal_change_pct / 100.0 * np.array([stored.fx, stored.fy]),
                DISTORTION: np.r_[thresholds.max_distortion_px / (stored.fx * r_max ** 3), np.zeros(k - 5)]}
    noncentrality = {name: float(v @ block[name] @ v) for name, v in smallest.items()}
    noncentrality[CENTRE] = thresholds.max_centre_shift_px ** 2 * float(np.min(np.linalg.eigvalsh(block[CENTRE])))
    report.power = {name: float(ncx2.sf(critical[name], len(groups[name]), noncentrality[name])) for name in groups}

    tests = ", ".join(f"{name} {statistic[name]:.1f} {'>' if statistic[name] > critical[name] else '<='} "
                      f"{critical[name]:.1f}" for name in groups)
    drifted = [name for name in parts if size[name] > tolerance[name]]
    weak = [name for name in groups if name not in parts and report.power[name] < thresholds.power]
    if drifted:
        report.verdict = DRIFTED
        report.reason = "; ".join(describe[name] for name in drifted) + \
            f" (Wald: {tests}; {' and '.join(parts)} explain{'s' if len(parts) == 1 else ''} the change, " \
            f"{rest:.1f} left): recalibrate the intrinsics, then the extrinsics"
    elif weak:
        report.verdict = CANNOT_TELL
        missed = ", ".join(f"{name} ({100 * report.power[name]:.0f} % chance to see {tolerance[name]:g} "
                           f"{'%' if name == FOCAL else 'px'})" for name in weak)
        report.reason = (f"no change beyond the tolerances found, but these views could miss one in the {missed}; "
                         "for the intrinsics, take views that fill the image at different tilts")
    else:
        report.verdict = HOLDS
        report.reason = ("no significant change" if not parts else
                         "; ".join(describe[name] for name in parts) + ": within the tolerances") + f" (Wald: {tests})"
    if prior is None:
        report.reason += " [the calibration file holds no covariance of its intrinsics: they were taken as exact]"
    return report


# ------------------------------------------------------------------------------ camera move
@dataclass
class CameraMoveCheck:
    verdict: str
    reason: str
    views: int
    workspace_shift_mm: float  # RMS over the views' board centres of the fitted move's displacement
    workspace_bounds_mm: tuple[float, float]
    turn_deg: float
    turn_bounds_deg: tuple[float, float]
    camera_shift_mm: float  # the camera centre's fitted displacement (less certain: far from the board)
    noise_mm: float  # per axis, used for the decision (the floor pooled with these views' residuals)
    noise_deg: float
    noise_source: str
    residual_ratio: float  # these views' residual noise / the floor's (about 1 when the noise is as before)
    outliers: list[str]  # views that fit no single move with the others
    per_view: dict[str, tuple[float, float]]  # name -> (mm, deg) from the stored calibration

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


@dataclass(frozen=True)
class _Floor:
    position_m: float  # per axis
    rotation_rad: float
    dof: float  # degrees of freedom behind each (inf: given, taken as exact)
    views: int | None  # calibration views (None: given)
    source: str


def _noise_floor(calibration: CameraCalibration, thresholds: CheckThresholds) -> _Floor:
    if thresholds.pose_noise_mm is not None and thresholds.pose_noise_deg is not None:
        return _Floor(thresholds.pose_noise_mm / 1000.0, math.radians(thresholds.pose_noise_deg), math.inf, None,
                      "the arm's repeatability as given")
    extrinsics = calibration.extrinsics
    if extrinsics is None or extrinsics.noise_position_m is None or extrinsics.noise_rotation_deg is None:
        raise ConfigError("the calibration has no noise floor (made before it was recorded): give the arm's "
                          "repeatability with --pose-noise-mm and --pose-noise-deg, or calibrate the extrinsics again")
    views = max(extrinsics.views, 3)
    # Each part of a calibration with N views keeps about 3N - 6 degrees of freedom (the fit's 12
    # parameters split about evenly between positions and orientations: their leverages).
    return _Floor(extrinsics.noise_position_m, math.radians(extrinsics.noise_rotation_deg), 3.0 * views - 6.0,
                  views, f"the calibration's residuals ({extrinsics.views} views)")


def _fit_move(held: np.ndarray, shifts: np.ndarray, turns: np.ndarray, sigma_t: float, sigma_r: float):
    """Weighted least squares of the small move ``(w, t)``: displacement ``w x (b - mean) + t``, turn ``w``.
    Returns the parameters, the residuals (N, 3) of positions and turns, and the degrees of freedom each
    part keeps (its rows' share of the leverage)."""
    mean = held.mean(axis=0)
    rows, values = [], []
    for b, d, r in zip(held, shifts, turns):
        rows += [np.hstack([-_skew(b - mean), np.eye(3)]) / sigma_t, np.hstack([np.eye(3), np.zeros((3, 3))]) / sigma_r]
        values += [d / sigma_t, r / sigma_r]
    A, y = np.vstack(rows), np.concatenate(values)
    theta, *_ = np.linalg.lstsq(A, y, rcond=None)
    leverage = np.einsum("ij,jk,ik->i", A, np.linalg.pinv(A.T @ A), A).reshape(len(held), 2, 3)
    residual = ((y - A @ theta).reshape(len(held), 2, 3) * np.array([sigma_t, sigma_r])[None, :, None])
    n = len(held)
    return theta, residual[:, 0], residual[:, 1], 3 * n - leverage[:, 0].sum(), 3 * n - leverage[:, 1].sum()


def check_camera_move(pairs: Sequence[tuple[BoardView, RigidTransform]], calibration: CameraCalibration,
                      thresholds: CheckThresholds = CheckThresholds(), intrinsics_verdict: str = HOLDS
                      ) -> CameraMoveCheck:
    """Has the camera moved since ``calibration``? ``pairs``: views with the gripper's pose. (See the module.)"""
    from scipy.stats import chi2, f

    extrinsics = calibration.extrinsics
    if extrinsics is None or extrinsics.target_in_gripper is None:
        raise ConfigError("the calibration has no extrinsics (with target_in_gripper) to check against; "
                          "run `ladder-ros calibrate extrinsics` first")
    n = len(pairs)
    if n < 3:
        raise InvalidInputError(f"checking the camera's pose needs at least 3 views with robot poses, got {n}")
    floor = _noise_floor(calibration, thresholds)
    Y, X = extrinsics.transform, extrinsics.target_in_gripper
    centres = np.array([board_centre(view) for view, _ in pairs])
    gripper = stack([T for _, T in pairs])
    shifts, turns = board_discrepancies(Y, X, gripper, stack([board_pose(v, calibration.intrinsics)[0]
                                                             for v, _ in pairs]), centres)
    held = np.einsum("nij,nj->ni", gripper[0] @ X.R, centres) + gripper[0] @ X.t + gripper[1]  # board centres
    mean = held.mean(axis=0)
    # The noise: the floor pooled with these views' own residuals (a floor from ten views is itself
    # uncertain by about 15 %); fitted twice, the second time weighted by the pooled noise.
    sigma_t, sigma_r, dof = floor.position_m, floor.rotation_rad, floor.dof
    for _ in range(2):
        theta, res_t, res_r, dof_t, dof_r = _fit_move(held, shifts, turns, sigma_t, sigma_r)
        if math.isinf(floor.dof):
            break
        sigma_t = math.sqrt((floor.position_m ** 2 * floor.dof + float(np.sum(res_t ** 2))) / (floor.dof + dof_t))
        sigma_r = math.sqrt((floor.rotation_rad ** 2 * floor.dof + float(np.sum(res_r ** 2))) / (floor.dof + dof_r))
        dof = floor.dof + min(dof_t, dof_r)
    ratio = math.sqrt(0.5 * (float(np.sum(res_t ** 2)) / max(dof_t, 1.0) / floor.position_m ** 2
                             + float(np.sum(res_r ** 2)) / max(dof_r, 1.0) / floor.rotation_rad ** 2))
    # A view that fits no single move with the others (chi-square, 6 degrees of freedom, one in a thousand
    # checks over all views).
    score = np.sum(res_t ** 2, axis=1) / sigma_t ** 2 + np.sum(res_r ** 2, axis=1) / sigma_r ** 2
    outliers = [pairs[i][0].name for i in np.nonzero(score > chi2.ppf(1.0 - 0.001 / n, 6))[0]]
    omega, tau = theta[:3], theta[3:]
    displacement = np.cross(omega, held - mean) + tau
    e_hat = 1000.0 * math.sqrt(float(np.mean(np.sum(displacement ** 2, axis=1))))
    turn = math.degrees(float(np.linalg.norm(omega)))
    # The confidence region of the move, widened because the stored calibration has the same kind of noise.
    widen = math.sqrt(1.0 + n / floor.views) if floor.views else 1.0
    quantile = 6.0 * float(f.ppf(thresholds.confidence, 6, dof)) if math.isfinite(dof) else \
        float(chi2.ppf(thresholds.confidence, 6))
    radius = widen * math.sqrt(quantile) / math.sqrt(n)
    margin_mm, margin_deg = 1000.0 * sigma_t * radius, math.degrees(sigma_r) * radius
    camera_shift = -(np.cross(omega, Y.t - mean) + tau)
    per_view = {view.name: (1000.0 * float(np.linalg.norm(d)), math.degrees(float(np.linalg.norm(r))))
                for (view, _), d, r in zip(pairs, shifts, turns)}
    report = CameraMoveCheck("", "", n, e_hat, (max(0.0, e_hat - margin_mm), e_hat + margin_mm), turn,
                             (max(0.0, turn - margin_deg), turn + margin_deg),
                             1000.0 * float(np.linalg.norm(camera_shift)), 1000.0 * sigma_t, math.degrees(sigma_r),
                             floor.source, ratio, outliers, per_view)
    low, high = report.workspace_bounds_mm
    evidence = (f"the workspace is {e_hat:.1f} mm RMS off through the stored calibration ({low:.1f}"
                f"-{high:.1f} mm at {100 * thresholds.confidence:g} %), the camera turned "
                f"{turn:.2f} deg ({report.turn_bounds_deg[0]:.2f}-{report.turn_bounds_deg[1]:.2f}); tolerances "
                f"{thresholds.max_move_mm:g} mm, {thresholds.max_turn_deg:g} deg; pose noise {report.noise_mm:.2f} mm, "
                f"{report.noise_deg:.2f} deg per axis (from {floor.source}, with these views' residuals at "
                f"{ratio:.1f}x the floor)")
    if intrinsics_verdict == DRIFTED:
        report.verdict = CANNOT_TELL
        report.reason = ("the intrinsics changed (see above), and a focal length or principal point change looks "
                         "like a move: recalibrate the intrinsics, then check or calibrate the extrinsics; " + evidence)
    elif outliers:
        report.verdict = CANNOT_TELL
        many = len(outliers) > 1
        report.reason = (f"view{'s' if many else ''} {', '.join(outliers)} fit{'' if many else 's'} "
                         "no single camera move with the others (check their poses and the board's mounting, then "
                         "retake or remove them); " + evidence)
    elif low > thresholds.max_move_mm or report.turn_bounds_deg[0] > thresholds.max_turn_deg:
        report.verdict = MOVED
        report.reason = "recalibrate the extrinsics: " + evidence
        if intrinsics_verdict == CANNOT_TELL:
            report.reason += ("; if nobody touched the camera, a changed focal length or principal point would look "
                              "the same, and these images cannot rule that out (see the intrinsics)")
    elif high <= thresholds.max_move_mm and report.turn_bounds_deg[1] <= thresholds.max_turn_deg:
        report.verdict = NOT_MOVED
        report.reason = evidence
    else:
        report.verdict = CANNOT_TELL
        report.reason = (f"{n} views cannot tell a move of the tolerance's size from the arm's noise (the margins "
                         "shrink with the square root of the number of views): " + evidence)
    return report


# ------------------------------------------------------------------------------ the whole check
@dataclass
class CheckReport:
    views: int
    missed: list[str]
    reprojection_rms_px: float  # per-view board poses with the stored intrinsics
    per_view_rms_px: dict[str, float]
    image_size_matches: bool = True
    intrinsics: IntrinsicsCheck | None = None
    camera: CameraMoveCheck | None = None
    views_without_pose: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def moved(self) -> bool:
        return self.camera is not None and self.camera.verdict == MOVED

    @property
    def undecided(self) -> list[str]:
        parts = []
        if self.intrinsics is not None and self.intrinsics.verdict == CANNOT_TELL:
            parts.append(f"intrinsics: {self.intrinsics.reason}")
        if self.camera is not None and self.camera.verdict == CANNOT_TELL:
            parts.append(f"camera pose: {self.camera.reason}")
        return parts

    @property
    def ok(self) -> bool:
        return not self.problems and not self.undecided

    @property
    def exit_code(self) -> int:
        """0: the calibration holds; 1: a problem (moved, drifted, does not fit); 3: cannot tell."""
        return 1 if self.problems else (3 if self.undecided else 0)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "exit_code": self.exit_code, "moved": self.moved, "views": self.views,
                "missed": self.missed, "views_without_pose": self.views_without_pose,
                "reprojection_rms_px": self.reprojection_rms_px, "per_view_rms_px": self.per_view_rms_px,
                "intrinsics": None if self.intrinsics is None else self.intrinsics.to_dict(),
                "camera": None if self.camera is None else self.camera.to_dict(),
                "problems": list(self.problems), "undecided": self.undecided}


def check_calibration(views: Sequence[BoardView], calibration: CameraCalibration,
                      poses: Mapping[str, RigidTransform] | None = None,
                      thresholds: CheckThresholds = CheckThresholds(), missed: Sequence[str] = (),
                      check_intrinsics_too: bool = True) -> CheckReport:
    """How well ``calibration`` explains new board views: intrinsics drift (every view) and a moved camera
    (the views that have a robot pose in ``poses``; the others serve the intrinsics only)."""
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
    for view in views:
        report.per_view_rms_px[view.name] = board_pose(view, intrinsics)[1]
    report.reprojection_rms_px = float(np.sqrt(np.mean(np.square(list(report.per_view_rms_px.values())))))
    if report.reprojection_rms_px > thresholds.max_reprojection_px:
        report.problems.append(f"reprojection error {report.reprojection_rms_px:.2f} px exceeds "
                               f"{thresholds.max_reprojection_px} px: the intrinsics do not fit these images")
    if check_intrinsics_too:
        report.intrinsics = check_intrinsics(views, calibration, thresholds)
        if report.intrinsics.verdict == DRIFTED:
            report.problems.append(f"intrinsics drifted: {report.intrinsics.reason}")
    if poses is not None:
        posed = [(v, poses[v.name]) for v in views if v.name in poses]
        report.views_without_pose = [v.name for v in views if v.name not in poses]
        if not posed:
            raise ConfigError(f"none of the {len(views)} images has a robot pose in the poses file (images: "
                              f"{', '.join(v.name for v in views[:5])}{' ...' if len(views) > 5 else ''})")
        verdict = report.intrinsics.verdict if report.intrinsics is not None else HOLDS
        report.camera = check_camera_move(posed, calibration, thresholds, verdict)
        if report.camera.verdict == MOVED:
            report.problems.append(f"camera moved: {report.camera.reason}")
    return report
