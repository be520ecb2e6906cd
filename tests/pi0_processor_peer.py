"""Runs in .venv-pi0 (transformers over a matched torch and torchvision; requirements/pi0_processor.txt): the
real ``PI0ImageProcessor`` in a tiny PI0 checkpoint, loaded and run by the project's own
:class:`~ladder_ros.policies.local_model.TransformersSource`. Prints one JSON line of what it saw.

    python tests/pi0_processor_peer.py MODEL_DIR        # with the repository on PYTHONPATH
"""

import json
import sys
from pathlib import Path

import numpy as np


def main(directory: str) -> None:
    from ladder_ros.policies.config import parse_policy_config
    from ladder_ros.policies.local_model import TransformersSource
    from ladder_ros.policies.observation import ObservationBundle
    from tests.policy_fixtures import observation
    from tests.policy_models import build_tiny_pi0, tiny_pi0_policy

    model_dir = build_tiny_pi0(Path(directory), image_processor="pi0")
    source = TransformersSource(parse_policy_config(tiny_pi0_policy(model_dir), source="tiny_pi0.yaml"))
    bundle = ObservationBundle(observation(image_size=48), 0)
    first = source.infer(bundle, "put the carrot on the plate", 7).actions
    again = source.infer(bundle, "put the carrot on the plate", 7).actions
    pixels = source.processor.image_processor(images=[source.encoder.images(bundle)["primary"]],
                                              return_tensors="pt")["pixel_values"]
    print(json.dumps({
        "image_processor": type(source.processor.image_processor).__name__,
        "pixel_values": list(pixels.shape), "chunk": list(first.shape),
        "finite": bool(np.isfinite(first).all()), "seeded": bool(np.array_equal(first, again)),
        "warm_up_s": source.warm_up_s,
    }))


if __name__ == "__main__":
    main(sys.argv[1])
