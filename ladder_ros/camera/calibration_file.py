"""Calibration files: ``calibration/<robot>_<camera>.yaml``, the ROS ``camera_info`` layout plus extrinsics.

The top of the file is exactly what ROS's camera_calibration_parsers read and write
(``image_width``, ``image_height``, ``camera_name``, ``camera_matrix``, ``distortion_model``,
``distortion_coefficients``, ``rectification_matrix``, ``projection_matrix``), so any ROS camera
driver can load it too. ladder_ros adds, under keys those parsers ignore:

``ladder_ros_schema_version``
    1.
``frame_id``
    The optical frame of the images.
``intrinsics_calibration``
    How the intrinsics were found: method, board, number of views, RMS reprojection error (px), date.
``extrinsics``
    The camera's pose in the robot base frame (eye-to-hand): ``parent_frame``, ``child_frame``,
    ``translation`` (m) and ``rotation`` (quaternion x, y, z, w) of ``T_parent_child``, plus the
    board's pose on the gripper (``target_in_gripper``) that ``ladder-ros calibrate check`` needs,
    the method, the number of views, the residuals (RMS over the views: ``residual_translation_m``,
    ``residual_rotation_deg``, ``reprojection_rms_px``; per view: ``residuals_per_view``, name ->
    [mm, deg, px]), the noise floor they imply per axis (``noise_position_m``,
    ``noise_rotation_deg``: what ``check`` weighs a move against) and the date.

The camera node publishes ``extrinsics`` on ``/tf_static`` (``parent_frame`` -> ``child_frame``);
``child_frame`` is the frame its images name.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from ladder_ros.camera.model import CameraIntrinsics, RigidTransform
from ladder_ros.core.errors import ConfigError, InvalidInputError, read_text

SCHEMA_VERSION = 1
DEFAULT_FRAME = "camera_color_optical_frame"


def calibration_path(folder: str | Path, robot: str, camera: str) -> Path:
    """``<folder>/<robot>_<camera>.yaml``; names are checked so they cannot leave the folder."""
    for what, name in (("robot", robot), ("camera", camera)):
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigError(f"a {what} name is letters, digits, '-' and '_', got {name!r}")
    return Path(folder) / f"{robot}_{camera}.yaml"


def now_utc() -> str:
    """The current UTC time as ISO 8601, for ``calibrated_at``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Extrinsics:
    """``T_parent_child``: the camera's optical frame (child) in the robot base frame (parent)."""

    parent_frame: str
    child_frame: str
    transform: RigidTransform
    target_in_gripper: RigidTransform | None = None  # the board's pose on the gripper (eye-to-hand)
    method: str = ""
    views: int = 0
    residual_translation_m: float | None = None  # RMS over the views
    residual_rotation_deg: float | None = None
    calibrated_at: str = ""
    reprojection_rms_px: float | None = None
    noise_position_m: float | None = None  # per axis
    noise_rotation_deg: float | None = None
    residuals_per_view: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)  # mm, deg, px

    def to_dict(self) -> dict[str, Any]:
        def pose(t: RigidTransform) -> dict[str, list[float]]:
            return {"translation": [float(v) for v in t.t], "rotation": [float(v) for v in t.quaternion_xyzw]}

        out: dict[str, Any] = {"parent_frame": self.parent_frame, "child_frame": self.child_frame,
                               **pose(self.transform)}
        if self.target_in_gripper is not None:
            out["target_in_gripper"] = pose(self.target_in_gripper)
        out.update({"method": self.method, "views": self.views,
                    "residual_translation_m": self.residual_translation_m,
                    "residual_rotation_deg": self.residual_rotation_deg,
                    "reprojection_rms_px": self.reprojection_rms_px, "noise_position_m": self.noise_position_m,
                    "noise_rotation_deg": self.noise_rotation_deg, "calibrated_at": self.calibrated_at})
        if self.residuals_per_view:
            out["residuals_per_view"] = {name: [round(float(v), 4) for v in values]
                                         for name, values in self.residuals_per_view.items()}
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str) -> "Extrinsics":
        if not isinstance(data, Mapping):
            raise ConfigError("expected a mapping", source=source, key="extrinsics")

        def pose(body: Any, key: str) -> RigidTransform:
            if not isinstance(body, Mapping):
                raise ConfigError("expected {translation: [x, y, z], rotation: [x, y, z, w]}", source=source, key=key)
            try:
                translation = _numbers(body.get("translation"), 3, source, f"{key}.translation")
                return RigidTransform.from_quaternion(translation,
                                                      _numbers(body.get("rotation"), 4, source, f"{key}.rotation"))
            except InvalidInputError as exc:
                raise ConfigError(str(exc), source=source, key=key) from None

        for key in ("parent_frame", "child_frame"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ConfigError("must be a frame name", source=source, key=f"extrinsics.{key}")
        target = data.get("target_in_gripper")
        numbers = {key: _optional_number(data.get(key), source, f"extrinsics.{key}")
                   for key in ("residual_translation_m", "residual_rotation_deg", "reprojection_rms_px",
                               "noise_position_m", "noise_rotation_deg")}
        for key in ("noise_position_m", "noise_rotation_deg"):
            if numbers[key] is not None and numbers[key] <= 0:
                raise ConfigError(f"must be positive, got {numbers[key]!r}", source=source, key=f"extrinsics.{key}")
        per_view = data.get("residuals_per_view") or {}
        if not isinstance(per_view, Mapping):
            raise ConfigError("expected {image: [mm, deg, px]}", source=source, key="extrinsics.residuals_per_view")
        residuals = {str(name): tuple(_numbers(values, 3, source, f"extrinsics.residuals_per_view.{name}"))
                     for name, values in per_view.items()}
        return cls(parent_frame=data["parent_frame"], child_frame=data["child_frame"],
                   transform=pose(data, "extrinsics"),
                   target_in_gripper=None if target is None else pose(target, "extrinsics.target_in_gripper"),
                   method=str(data.get("method", "")), views=int(data.get("views", 0) or 0),
                   calibrated_at=str(data.get("calibrated_at", "")), residuals_per_view=residuals, **numbers)


@dataclass(frozen=True)
class CameraCalibration:
    """One camera's calibration: intrinsics (ROS camera_info), optional extrinsics, and how they were made."""

    camera_name: str
    intrinsics: CameraIntrinsics
    frame_id: str = DEFAULT_FRAME
    rectification: np.ndarray = field(default_factory=lambda: np.eye(3))
    projection: np.ndarray | None = None  # 3x4; None: [K | 0] (a monocular camera)
    intrinsics_calibration: Mapping[str, Any] = field(default_factory=dict)
    extrinsics: Extrinsics | None = None

    @property
    def P(self) -> np.ndarray:  # noqa: N802
        if self.projection is not None:
            return np.asarray(self.projection, dtype=np.float64)
        return np.hstack([self.intrinsics.K, np.zeros((3, 1))])

    def with_extrinsics(self, extrinsics: Extrinsics) -> "CameraCalibration":
        return CameraCalibration(self.camera_name, self.intrinsics, self.frame_id, self.rectification, self.projection,
                                 self.intrinsics_calibration, extrinsics)

    def to_dict(self) -> dict[str, Any]:
        intr = self.intrinsics

        def matrix(rows: int, cols: int, values: np.ndarray) -> dict[str, Any]:
            return {"rows": rows, "cols": cols, "data": [float(v) for v in np.ravel(values)]}

        data: dict[str, Any] = {
            "image_width": intr.width, "image_height": intr.height, "camera_name": self.camera_name,
            "camera_matrix": matrix(3, 3, intr.K), "distortion_model": intr.distortion_model,
            "distortion_coefficients": matrix(1, len(intr.distortion), intr.D),
            "rectification_matrix": matrix(3, 3, self.rectification), "projection_matrix": matrix(3, 4, self.P),
            "ladder_ros_schema_version": SCHEMA_VERSION, "frame_id": self.frame_id,
        }
        if self.intrinsics_calibration:
            data["intrinsics_calibration"] = dict(self.intrinsics_calibration)
        if self.extrinsics is not None:
            data["extrinsics"] = self.extrinsics.to_dict()
        return data


def _numbers(value: Any, count: int, source: str, key: str) -> list[float]:
    if not isinstance(value, list) or len(value) != count or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ConfigError(f"expected a list of {count} numbers, got {value!r}", source=source, key=key)
    return [float(v) for v in value]


def _optional_number(value: Any, source: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise ConfigError(f"expected a number, got {value!r}", source=source, key=key)
    return float(value)


def _matrix(data: Mapping[str, Any], key: str, rows: int, cols: int | None, source: str) -> np.ndarray:
    body = data.get(key)
    if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
        raise ConfigError("expected {rows: R, cols: C, data: [...]}", source=source, key=key)
    cols = cols if cols is not None else body.get("cols")
    if body.get("rows") != rows or body.get("cols") != cols or not isinstance(cols, int):
        raise ConfigError(f"expected {rows}x{cols}, got {body.get('rows')}x{body.get('cols')}", source=source, key=key)
    values = _numbers(body["data"], rows * cols, source, f"{key}.data")
    return np.array(values, dtype=np.float64).reshape(rows, cols)


def parse_calibration(data: Any, source: str = "<calibration>") -> CameraCalibration:
    """A :class:`CameraCalibration` from a parsed YAML document; errors name the file and the key."""
    if not isinstance(data, Mapping):
        raise ConfigError("a calibration file is a mapping in the ROS camera_info layout", source=source)
    version = data.get("ladder_ros_schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ConfigError(f"unsupported ladder_ros_schema_version {version!r}; this version reads {SCHEMA_VERSION}",
                          source=source, key="ladder_ros_schema_version")
    for key in ("image_width", "image_height"):
        if not isinstance(data.get(key), int) or isinstance(data.get(key), bool) or data[key] <= 0:
            raise ConfigError(f"must be a positive integer, got {data.get(key)!r}", source=source, key=key)
    K = _matrix(data, "camera_matrix", 3, 3, source)
    model = data.get("distortion_model", "plumb_bob")
    D = _matrix(data, "distortion_coefficients", 1, None, source)
    R = _matrix(data, "rectification_matrix", 3, 3, source) if "rectification_matrix" in data else np.eye(3)
    P = _matrix(data, "projection_matrix", 3, 4, source) if "projection_matrix" in data else None
    try:
        intrinsics = CameraIntrinsics.from_matrix(K, data["image_width"], data["image_height"], D.ravel(), str(model))
    except ConfigError as exc:
        raise ConfigError(str(exc), source=source) from None
    if abs(K[0, 1]) > 1e-9 or K[1, 0] != 0 or K[2, 0] != 0 or K[2, 1] != 0 or K[2, 2] != 1:
        raise ConfigError("a camera matrix is [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]", source=source,
                          key="camera_matrix")
    meta = data.get("intrinsics_calibration", {})
    if not isinstance(meta, Mapping):
        raise ConfigError("expected a mapping", source=source, key="intrinsics_calibration")
    extrinsics = Extrinsics.from_dict(data["extrinsics"], source) if data.get("extrinsics") is not None else None
    frame_id = data.get("frame_id", DEFAULT_FRAME)
    if not isinstance(frame_id, str) or not frame_id:
        raise ConfigError("must be a frame name", source=source, key="frame_id")
    return CameraCalibration(camera_name=str(data.get("camera_name", "")), intrinsics=intrinsics, frame_id=frame_id,
                             rectification=R, projection=P, intrinsics_calibration=dict(meta), extrinsics=extrinsics)


def load_calibration(path: str | Path) -> CameraCalibration:
    text = read_text(path, "calibration file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=str(path)) from None
    return parse_calibration(data, str(path))


def save_calibration(calibration: CameraCalibration, path: str | Path) -> Path:
    """Write ``calibration`` (creating the folder); the previous file, if any, is kept as ``.yaml.bak``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Camera calibration (ladder_ros). The top keys are the ROS camera_info layout\n"
              "# (camera_calibration_parsers); extrinsics: the optical frame in the robot base frame,\n"
              "# T_parent_child with translation in metres and rotation as a quaternion [x, y, z, w].\n")
    text = header + yaml.safe_dump(calibration.to_dict(), sort_keys=False, default_flow_style=None)
    if path.exists():
        path.with_suffix(path.suffix + ".bak").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
