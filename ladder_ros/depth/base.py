"""The depth estimator interface, what it returns, and how an estimate is scored against a reference.

An estimator turns one RGB image (and, when known, the camera's intrinsics) into depth in metres,
float32, of the image's size, NaN where it has no estimate (REP 118). It never invents depth: a
model that only gives relative depth is refused when it is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.core.errors import InvalidInputError, LadderError


class DepthBackendError(LadderError):
    """A depth backend cannot run: not installed, no weights, not a metric model, inference failed."""


@dataclass(frozen=True)
class DepthEstimate:
    depth: np.ndarray  # (H, W) float32 metres, NaN: no estimate
    fov_source: str  # "calibration" (the camera's intrinsics were used), "estimated" (the model's own), "n/a"
    inference_s: float  # time in the model, seconds

    def __post_init__(self) -> None:
        if self.depth.dtype != np.float32 or self.depth.ndim != 2:
            raise InvalidInputError(f"depth is an (H, W) float32 array, got {self.depth.dtype} {self.depth.shape}")


@runtime_checkable
class DepthEstimator(Protocol):
    """Metric depth from colour."""

    name: str
    device: str

    def estimate(self, rgb: np.ndarray, intrinsics: CameraIntrinsics | None) -> DepthEstimate:
        """Depth for an (H, W, 3) uint8 RGB image, aligned to it pixel for pixel."""


def check_rgb(rgb: np.ndarray) -> np.ndarray:
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise InvalidInputError(f"depth estimation takes an (H, W, 3) uint8 RGB image, got "
                                f"{getattr(rgb, 'dtype', type(rgb))} {getattr(rgb, 'shape', '')}")
    return rgb


def finite_depth(depth: np.ndarray) -> np.ndarray:
    """``depth`` as float32 with every non-finite or non-positive value replaced by NaN."""
    out = np.asarray(depth, dtype=np.float32).copy()
    out[~np.isfinite(out) | (out <= 0)] = np.nan
    return out


@dataclass(frozen=True)
class DepthError:
    """An estimate against a reference depth, over pixels where both are valid (standard monocular
    depth metrics: Eigen et al. 2014, as MoGe and Depth Anything report them)."""

    pixels: int  # compared pixels
    coverage: float  # compared / reference-valid pixels
    abs_rel: float  # mean |d - d*| / d*
    rmse_m: float
    mae_m: float
    delta1: float  # share of pixels with max(d / d*, d* / d) < 1.25

    def to_dict(self) -> dict[str, float]:
        return {"pixels": self.pixels, "coverage": self.coverage, "abs_rel": self.abs_rel, "rmse_m": self.rmse_m,
                "mae_m": self.mae_m, "delta1": self.delta1}


def depth_error(estimate: np.ndarray, reference: np.ndarray, max_depth_m: float | None = None) -> DepthError:
    """Score ``estimate`` against ``reference`` (same shape, metres; NaN or <= 0 invalid in either)."""
    estimate, reference = np.asarray(estimate, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if estimate.shape != reference.shape:
        raise InvalidInputError(f"estimate {estimate.shape} and reference {reference.shape} differ in size")
    ref_valid = np.isfinite(reference) & (reference > 0)
    if max_depth_m is not None:
        ref_valid &= reference <= max_depth_m
    both = ref_valid & np.isfinite(estimate) & (estimate > 0)
    n = int(both.sum())
    if n == 0:
        return DepthError(0, 0.0, float("nan"), float("nan"), float("nan"), float("nan"))
    d, ref = estimate[both], reference[both]
    diff = d - ref
    ratio = np.maximum(d / ref, ref / d)
    return DepthError(pixels=n, coverage=n / max(int(ref_valid.sum()), 1), abs_rel=float(np.mean(np.abs(diff) / ref)),
                      rmse_m=float(np.sqrt(np.mean(diff ** 2))), mae_m=float(np.mean(np.abs(diff))),
                      delta1=float(np.mean(ratio < 1.25)))
