"""MoGe-2 metric depth from one colour image (Wang et al., NeurIPS 2025; LADDER Section 5 uses it on the
real robots, with calibrated cameras).

MoGe is not on PyPI under its own name: ``dlr-moge`` 2.0.0 packages the same ``moge`` sources
(installed with ``--no-deps``, with ``dlr-utils3d`` for its geometry helpers; requirements/moge.txt).
Loading reads a local checkpoint in MoGe's own format, ``torch.save({"model_config": ...,
"model": state_dict})`` (the ``model.pt`` of the published MoGe-2 weights), into the real
``moge.model.v2.MoGeModel``. It never downloads: ``MoGeModel.from_pretrained`` would fetch from a
hub when the path does not exist, so the path is checked first and the checkpoint loaded here.
A checkpoint that would leave any parameter at its random initial value, or that has no metric
scale head (MoGe-1, relative models), is refused: such a model would publish made-up metres.

Inference: ``infer(image, fov_x=..., use_fp16=...)``. ``fov_x`` is the horizontal field of view
of the calibrated camera when intrinsics are known (MoGe assumes a centred principal point), else
MoGe estimates it. fp16 is for CUDA only: on a CPU, autocast to float16 is very slow.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.depth.base import DepthBackendError, DepthEstimate, check_rgb, finite_depth

INSTALL_HINT = ("MoGe-2 is not installed: pip install --no-deps -r requirements/moge.txt "
                "(dlr-moge==2.0.0 and dlr-utils3d==1.3, which package the moge sources) plus scipy")


def import_moge_model_class():
    """``moge.model.v2.MoGeModel``, or a :class:`DepthBackendError` saying how to install it."""
    try:
        from moge.model.v2 import MoGeModel
    except ImportError as exc:
        raise DepthBackendError(f"{INSTALL_HINT} ({exc})") from None
    return MoGeModel


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` without one is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DepthBackendError(f"device {device!r} requested but torch sees no CUDA device")
    if device != "cpu" and not device.startswith("cuda"):
        raise DepthBackendError(f"device must be cpu, cuda, cuda:N or auto, got {device!r}")
    return device


def load_moge_checkpoint(path: str | Path, device: str = "cpu"):
    """The MoGe-2 model in ``path`` (MoGe's checkpoint format), on ``device``, in eval mode."""
    if not str(path) or not Path(path).is_file():
        raise DepthBackendError(f"MoGe-2 checkpoint not found: {str(path) or '(empty path)'}; give the local "
                                "model.pt of a MoGe-2 release (weights are never downloaded at run time)")
    import torch

    MoGeModel = import_moge_model_class()
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises pickle, zip and runtime errors for a bad file
        raise DepthBackendError(f"{path}: not a readable torch checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(checkpoint, dict) or "model_config" not in checkpoint or "model" not in checkpoint:
        raise DepthBackendError(f"{path}: not a MoGe checkpoint (expected the keys 'model_config' and 'model')")
    try:
        model = MoGeModel(**checkpoint["model_config"])
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        raise DepthBackendError(f"{path}: not a MoGe-2 model configuration ({exc}); MoGe-1 checkpoints are "
                                "not metric") from None
    if not hasattr(model, "scale_head"):
        raise DepthBackendError(f"{path}: this MoGe model has no metric scale head, so its depth is not in metres")
    result = model.load_state_dict(checkpoint["model"], strict=False)
    parameters = {name for name, _ in model.named_parameters()}
    missing = sorted(set(result.missing_keys) & parameters)
    if missing:
        raise DepthBackendError(f"{path}: the checkpoint lacks {len(missing)} of the model's parameters "
                                f"(first: {missing[0]}); refusing to run with random weights")
    return model.to(device).eval()


class MoGeDepth:
    """MoGe-2 behind :class:`~ladder_ros.depth.base.DepthEstimator`.

    ``resolution_level`` (0-9) picks MoGe's number of ViT tokens between its configured minimum and
    maximum (MoGe's default 9 is the most accurate and slowest); ``fp16`` None means on for CUDA,
    off for the CPU.
    """

    name = "moge2"

    def __init__(self, model_path: str | Path, device: str = "auto", resolution_level: int = 9,
                 fp16: bool | None = None):
        if not 0 <= resolution_level <= 9:
            raise DepthBackendError(f"MoGe resolution_level must be in [0, 9], got {resolution_level}")
        if not str(model_path) or not Path(model_path).is_file():
            load_moge_checkpoint(model_path)  # the clear error, before torch is imported
        self.device = resolve_device(device)
        self.model_path = str(model_path)
        self.model: Any = load_moge_checkpoint(model_path, self.device)
        self.resolution_level = resolution_level
        self.fp16 = self.device.startswith("cuda") if fp16 is None else bool(fp16)

    def estimate(self, rgb: np.ndarray, intrinsics: CameraIntrinsics | None) -> DepthEstimate:
        import torch

        rgb = check_rgb(rgb)
        if intrinsics is not None and (intrinsics.width, intrinsics.height) != (rgb.shape[1], rgb.shape[0]):
            intrinsics = intrinsics.scaled(rgb.shape[1], rgb.shape[0])
        started = time.perf_counter()
        image = torch.from_numpy(rgb).to(self.device).permute(2, 0, 1).float().div_(255.0)
        output = self.model.infer(image, resolution_level=self.resolution_level,
                                  fov_x=None if intrinsics is None else intrinsics.horizontal_fov_deg,
                                  use_fp16=self.fp16)
        depth = output["depth"].float().cpu().numpy()
        elapsed = time.perf_counter() - started
        return DepthEstimate(finite_depth(depth), "calibration" if intrinsics is not None else "estimated", elapsed)
