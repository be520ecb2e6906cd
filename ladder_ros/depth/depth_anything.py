"""Depth Anything V2 metric depth through Hugging Face transformers (Yang et al., NeurIPS 2024).

Loads a local model folder (``config.json``, weights, ``preprocessor_config.json``) with
``AutoModelForDepthEstimation`` and ``AutoImageProcessor``, never from a hub. Only the metric
checkpoints (``depth_estimation_type: metric``, e.g. Depth-Anything-V2-Metric-Indoor, whose
``max_depth`` bounds the output) give metres; the relative ones give inverse depth up to an unknown
scale and shift, so they are refused. The image processor resizes to the model's input and
``post_process_depth_estimation`` resizes the prediction back to the image, so the depth is aligned
with the colour image pixel for pixel. This model takes no camera intrinsics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.depth.base import DepthBackendError, DepthEstimate, check_rgb, finite_depth
from ladder_ros.depth.moge import resolve_device


def load_depth_anything(path: str | Path, device: str) -> tuple[Any, Any]:
    """(model, image processor) of a local Depth Anything V2 metric model folder."""
    try:
        from transformers import AutoImageProcessor, AutoModelForDepthEstimation
    except ImportError as exc:
        raise DepthBackendError(f"Depth Anything V2 needs transformers (requirements/vlm.txt): {exc}") from None
    folder = Path(path)
    if not str(path) or not (folder / "config.json").is_file():
        raise DepthBackendError(f"Depth Anything V2 model folder not found (no config.json): {str(path) or '(empty)'}; "
                                "give a local folder (weights are never downloaded at run time)")
    try:
        model = AutoModelForDepthEstimation.from_pretrained(str(folder), local_files_only=True)
        processor = AutoImageProcessor.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise DepthBackendError(f"{folder}: cannot load a depth model: {exc}") from None
    config = model.config
    if getattr(config, "model_type", "") != "depth_anything":
        raise DepthBackendError(f"{folder}: model type {getattr(config, 'model_type', '?')!r} is not Depth Anything")
    if getattr(config, "depth_estimation_type", "relative") != "metric":
        raise DepthBackendError(f"{folder}: a relative Depth Anything model gives inverse depth up to scale, not "
                                "metres; use a metric checkpoint (depth_estimation_type: metric)")
    return model.to(device).eval(), processor


class DepthAnythingDepth:
    """Depth Anything V2 (metric) behind :class:`~ladder_ros.depth.base.DepthEstimator`."""

    name = "depth_anything_v2"

    def __init__(self, model_path: str | Path, device: str = "auto"):
        self.device = resolve_device(device)
        self.model_path = str(model_path)
        self.model, self.processor = load_depth_anything(model_path, self.device)

    def estimate(self, rgb: np.ndarray, intrinsics: CameraIntrinsics | None) -> DepthEstimate:
        import torch

        rgb = check_rgb(rgb)
        started = time.perf_counter()
        inputs = self.processor(images=rgb, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            outputs = self.model(**inputs)
        post = self.processor.post_process_depth_estimation(outputs, target_sizes=[rgb.shape[:2]])
        depth = post[0]["predicted_depth"].float().cpu().numpy()
        return DepthEstimate(finite_depth(depth), "n/a", time.perf_counter() - started)
