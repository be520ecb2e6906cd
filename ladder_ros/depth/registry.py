"""Depth backends by name. ``sensor`` is not an estimator: it passes the camera's own aligned depth on."""

from __future__ import annotations

from typing import Any

from ladder_ros.core.errors import unknown_name
from ladder_ros.depth.base import DepthEstimator

MOGE2 = "moge2"
DEPTH_ANYTHING_V2 = "depth_anything_v2"
SENSOR = "sensor"
DEPTH_BACKENDS = (MOGE2, DEPTH_ANYTHING_V2, SENSOR)
ESTIMATORS = (MOGE2, DEPTH_ANYTHING_V2)


def make_estimator(name: str, model_path: str, device: str = "auto", **options: Any) -> DepthEstimator:
    """The estimator ``name`` loaded from ``model_path`` (imports torch and the model code only here)."""
    if name == MOGE2:
        from ladder_ros.depth.moge import MoGeDepth

        return MoGeDepth(model_path, device, resolution_level=options.get("resolution_level", 9),
                         fp16=options.get("fp16"))
    if name == DEPTH_ANYTHING_V2:
        from ladder_ros.depth.depth_anything import DepthAnythingDepth

        return DepthAnythingDepth(model_path, device)
    raise unknown_name("depth estimator", name, ESTIMATORS)
