"""Tiny depth models of the real classes, saved in the real formats (tests and benchmarks; CPU, offline)."""

from __future__ import annotations

from pathlib import Path

DIMS = [32, 16, 16, 8, 8]
HEAD = {"dim_in": DIMS, "dim_res_blocks": DIMS, "num_res_blocks": [0, 1, 1, 1, 0], "res_block_in_norm": "none",
        "res_block_hidden_norm": "none", "resamplers": ["conv_transpose", "conv_transpose", "conv_transpose",
                                                        "bilinear"]}
# MoGe-2's architecture (configs/train/v2.json of the MoGe repository) at the smallest DINOv2 backbone
# (ViT-S/14) with narrow necks and heads, and few tokens so it runs in a fraction of a second on a CPU.
TINY_MOGE = {"encoder": {"backbone": "dinov2_vits14", "intermediate_layers": [2, 5, 8, 11], "dim_out": 32},
             "neck": {**HEAD, "dim_in": [34, 2, 2, 2, 2], "dim_out": None},
             "points_head": {**HEAD, "dim_out": [None, None, None, None, 3]},
             "mask_head": {**HEAD, "dim_out": [None, None, None, None, 1]},
             "scale_head": {"dims": [384, 32, 1]}, "remap_output": "exp", "num_tokens_range": [64, 256]}


def save_tiny_moge(path: Path) -> Path:
    """A MoGe-2 model of the real class, saved as MoGe saves its releases: {"model_config", "model"}."""
    import torch

    from ladder_ros.depth.moge import import_moge_model_class

    torch.manual_seed(0)
    model = import_moge_model_class()(**TINY_MOGE)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_config": TINY_MOGE, "model": model.state_dict()}, path)
    return Path(path)


def save_tiny_depth_anything(folder: Path, kind: str = "metric") -> Path:
    """A Depth Anything V2 (``metric`` or ``relative``) built from a config, saved as a transformers folder."""
    import torch
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config, DPTImageProcessorPil

    torch.manual_seed(0)
    backbone = Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                            patch_size=14, image_size=56, out_features=["stage1", "stage2", "stage3", "stage4"],
                            reshape_hidden_states=False)
    config = DepthAnythingConfig(backbone_config=backbone, neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
                                 head_hidden_size=8, reassemble_hidden_size=32, depth_estimation_type=kind,
                                 max_depth=20)
    DepthAnythingForDepthEstimation(config).save_pretrained(folder)
    DPTImageProcessorPil(size={"height": 70, "width": 70}, keep_aspect_ratio=True, ensure_multiple_of=14,
                         image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)
    return Path(folder)


def save_depth_anything_small(folder: Path) -> Path:
    """Depth Anything V2 Small's architecture (its published transformers config: a DINOv2 ViT-S/14 backbone at
    518 px, DPT neck 48/96/192/384, fusion 64) as a metric model with random weights: for timing only."""
    import torch
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config, DPTImageProcessorPil

    torch.manual_seed(0)
    backbone = Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                            patch_size=14, image_size=518, out_features=["stage3", "stage6", "stage9", "stage12"],
                            reshape_hidden_states=False)
    config = DepthAnythingConfig(backbone_config=backbone, neck_hidden_sizes=[48, 96, 192, 384], fusion_hidden_size=64,
                                 head_hidden_size=32, reassemble_hidden_size=384, depth_estimation_type="metric",
                                 max_depth=20)
    DepthAnythingForDepthEstimation(config).save_pretrained(folder)
    DPTImageProcessorPil(size={"height": 518, "width": 518}, keep_aspect_ratio=True, ensure_multiple_of=14,
                         image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(folder)
    return Path(folder)
