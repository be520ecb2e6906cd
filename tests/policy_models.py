"""A tiny random PI0 action model built offline from configs and saved like a real checkpoint.

transformers' own ``PI0ForConditionalGeneration`` (a PaliGemma-style backbone plus a flow-matching action
expert) with one layer each and 32-wide hidden states, its ``PI0Processor`` with a byte-level BPE tokenizer
trained here and an image processor, and the dataset statistics saved with the processor. The image
processor is a SigLIP one (PIL backend, no torchvision) for the project's own environment, or, with
``image_processor="pi0"``, the real ``PI0ImageProcessor`` (torchvision backend, as a real PI0 checkpoint has
it; run in ``.venv-pi0``, requirements/pi0_processor.txt). The weights are random: the model's chunks are
noise, shaped and scaled like actions.
"""

from __future__ import annotations

from pathlib import Path

from tests.vlm_fixtures.tiny_vlm import byte_level_tokenizer

IMAGE_SIZE = 32
PATCH = 8
CHUNK_SIZE = 6
MAX_DIM = 8
# Dataset statistics of a Bridge-like 7-D state (ee position m, Euler rad, gripper) and action (metres and
# radians per step, gripper open fraction): small spreads, so a random model's outputs stay in the bounds.
STATE_MEAN = [0.3, 0.0, 0.1, 0.0, 0.0, 0.0, 0.5]
STATE_STD = [0.05, 0.05, 0.05, 0.2, 0.2, 0.2, 0.5]
ACTIONS_MEAN = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5]
ACTIONS_STD = [0.002, 0.002, 0.002, 0.01, 0.01, 0.01, 0.1]


def build_tiny_pi0(directory: str | Path, seed: int = 0, steps: int = 2, image_processor: str = "siglip_pil") -> Path:
    import torch
    from transformers import PI0Config, PI0ForConditionalGeneration, PI0Processor

    directory = Path(directory)
    tokenizer = byte_level_tokenizer(["put the carrot on the plate", "put the spoon on the cloth",
                                      "put the eggplant in the basket", "pick up the lemon"],
                                     ["<pad>", "<eos>", "<bos>", "<unk>"], vocab_size=300)
    if image_processor == "pi0":
        from transformers import PI0ImageProcessor

        images = PI0ImageProcessor(size={"max_height": IMAGE_SIZE, "max_width": IMAGE_SIZE},
                                   pad_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    else:
        from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

        images = SiglipImageProcessorPil(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    images.image_seq_length = (IMAGE_SIZE // PATCH) ** 2
    processor = PI0Processor(image_processor=images, tokenizer=tokenizer, state_mean=STATE_MEAN,
                             state_std=STATE_STD, actions_mean=ACTIONS_MEAN, actions_std=ACTIONS_STD,
                             max_state_dim=MAX_DIM, chunk_size=CHUNK_SIZE)
    vocab = len(processor.tokenizer)
    layer = {"model_type": "gemma", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": vocab}
    config = PI0Config(
        vlm_config={"model_type": "paligemma", "text_config": layer, "projection_dim": 32,
                    "image_token_id": processor.image_token_id,
                    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                                      "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": IMAGE_SIZE,
                                      "patch_size": PATCH, "vision_use_head": False}},
        dit_config=dict(layer), chunk_size=CHUNK_SIZE, max_state_dim=MAX_DIM, max_action_dim=MAX_DIM,
        num_inference_steps=steps)
    torch.manual_seed(seed)
    model = PI0ForConditionalGeneration(config).eval()
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def build_pi0_paper_size(directory: str | Path, device: str = "cuda", dtype: str = "bfloat16", seed: int = 0) -> Path:
    """pi0's architecture at its published size, with random weights: for timing, never for actions.

    transformers' ``PI0Config`` defaults are the released pi0's (a PaliGemma backbone: Gemma 2B, 18 layers of
    2048, with a 27-layer SigLIP at 224 px in 14-px patches; a Gemma action expert, 18 layers of 1024; 50-step
    chunks; 10 flow-matching steps). The tokenizer and the processor's statistics are the tiny model's; the
    weights are built on ``device`` in ``dtype`` (about 3.5 billion parameters) and saved as a checkpoint.
    """
    import torch
    from transformers import PI0Config, PI0ForConditionalGeneration, PI0Processor
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    directory = Path(directory)
    defaults = PI0Config()
    vision = defaults.vlm_config.vision_config
    tokenizer = byte_level_tokenizer(["put the carrot on the plate", "put the spoon on the cloth"],
                                     ["<pad>", "<eos>", "<bos>", "<unk>"], vocab_size=300)
    images = SiglipImageProcessorPil(size={"height": vision.image_size, "width": vision.image_size})
    images.image_seq_length = (vision.image_size // vision.patch_size) ** 2
    processor = PI0Processor(image_processor=images, tokenizer=tokenizer, state_mean=STATE_MEAN,
                             state_std=STATE_STD, actions_mean=ACTIONS_MEAN, actions_std=ACTIONS_STD,
                             max_state_dim=defaults.max_state_dim, chunk_size=defaults.chunk_size)
    vlm = defaults.vlm_config.to_dict()
    vlm["image_token_id"] = processor.image_token_id
    config = PI0Config(vlm_config=vlm, dit_config=defaults.dit_config.to_dict())
    torch.manual_seed(seed)
    with torch.device(device):
        model = PI0ForConditionalGeneration(config).to(getattr(torch, dtype)).eval()
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    del model
    return directory


def tiny_pi0_policy(model_dir: Path, *, threads: int = 1, chunk: tuple[int, int] = (5, 4), image_size: int = 32,
                    normalization="processor") -> dict:
    """A policy config (as a dict) for the tiny model on the WidowX: one camera, the Bridge-like state."""
    from tests.policy_fixtures import AXES

    return {
        "schema_version": 1, "name": "tiny_pi0", "embodiment": "widowx", "backend": "transformers",
        "model": {"path": str(model_dir), "device": "cpu", "threads": threads},
        "control_rate_hz": 5, "chunk": {"length": chunk[0], "execute": chunk[1]},
        "cameras": [{"name": "primary", "topic": "camera/image_raw", "key": "observation/image",
                     "height": image_size, "width": image_size, "resize": "resize_with_pad"}],
        "state": [{"key": "observation/state", "source": "ee_position", "unit": "m"},
                  {"key": "observation/state", "source": "ee_euler", "reference": "top_down",
                   "angles": "sxyz", "unit": "rad"},
                  {"key": "observation/state", "source": "gripper_open", "unit": "1 open"}],
        "action": {"key": "actions", "kind": "ee_delta", "rotation": "euler_xyz", "gripper": "open_fraction",
                   "axes": AXES},
        "normalization": normalization,
    }
