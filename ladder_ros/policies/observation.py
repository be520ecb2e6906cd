"""What a learned policy is given: its cameras' images resized by the config's rule, its state vector, the prompt.

The same encoding serves the openpi client (a request map keyed as the server expects) and the
local model (images in camera order and one state vector), so both see the same numbers. The state
is built from the loop's :class:`~ladder_ros.core.observation.Observation` only, which a simulator
and the robot graph fill alike, so the same pose gives the same state vector in both
(:mod:`ladder_ros.policies.state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.observation import Observation
from ladder_ros.policies.config import CameraSpec, PolicyConfig
from ladder_ros.policies.state import orientation_state


@dataclass(frozen=True)
class ObservationBundle:
    """One observation as the policy reads it: ``images`` by camera name (RGB uint8, full size) and its stamp.

    ``stamp_ns`` is the time stamp of the observation (the camera image's, on a robot; the step's in
    simulation); every action computed from it carries it. The first camera may be left out of
    ``images`` when it is ``observation.image``.
    """

    observation: Observation
    stamp_ns: int
    images: Mapping[str, np.ndarray] = field(default_factory=dict)


def resize_image(image: np.ndarray, height: int, width: int, rule: str) -> np.ndarray:
    """``image`` at ``height`` x ``width`` by ``rule`` (see ``RESIZE_RULES`` in the config module).

    ``resize_with_pad`` scales by the larger of the two ratios so the whole image fits, then pads the
    borders with black, centred (the semantics of ``tf.image.resize_with_pad``, which openpi's
    clients apply before sending). Bilinear filtering, as PIL's ``Image.BILINEAR``.
    """
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise InvalidInputError(f"an image is a (H, W, 3) uint8 array, got {arr.dtype} {arr.shape}")
    h, w = arr.shape[:2]
    if rule == "none" or (h, w) == (height, width):
        return arr
    from PIL import Image

    picture = Image.fromarray(arr)
    if rule == "resize":
        return np.asarray(picture.resize((width, height), resample=Image.BILINEAR))
    ratio = max(w / width, h / height)
    scaled_h, scaled_w = max(1, int(h / ratio)), max(1, int(w / ratio))
    scaled = picture.resize((scaled_w, scaled_h), resample=Image.BILINEAR)
    canvas = Image.new("RGB", (width, height), 0)
    canvas.paste(scaled, ((width - scaled_w) // 2, (height - scaled_h) // 2))
    return np.asarray(canvas)


class ObservationEncoder:
    """Turns an :class:`ObservationBundle` into the inputs the config describes."""

    def __init__(self, config: PolicyConfig):
        self.config = config

    def camera_image(self, bundle: ObservationBundle, camera: CameraSpec, index: int) -> np.ndarray:
        image = bundle.images.get(camera.name)
        if image is None and index == 0:
            image = bundle.observation.image
        if image is None:
            raise InvalidInputError(f"no image from camera {camera.name!r} (topic {camera.topic})")
        return resize_image(image, camera.height, camera.width, camera.resize)

    def images(self, bundle: ObservationBundle) -> dict[str, np.ndarray]:
        """Each camera's image, resized, by camera name, in the config's order."""
        return {c.name: self.camera_image(bundle, c, i) for i, c in enumerate(self.config.cameras)}

    def state_parts(self, observation: Observation) -> list[tuple[str, np.ndarray]]:
        """(request key, values) per state entry, in the config's order; units as the entries say."""
        parts = []
        for entry in self.config.state:
            if entry.source == "joint_positions":
                values = np.asarray(observation.joint_positions, dtype=np.float64)
                if values.shape != (entry.size,):
                    raise InvalidInputError(f"the joint state has {values.size} arm joints "
                                            f"({', '.join(observation.joint_names)}); policy "
                                            f"{self.config.name} reads {entry.size}")
            elif entry.source == "ee_position":
                values = np.asarray(observation.ee_position, dtype=np.float64)
            elif entry.source == "ee_euler":
                values = orientation_state(observation.ee_euler, entry.reference, entry.angles,
                                           self.config.embodiment)
            elif entry.source == "zeros":
                values = np.zeros(entry.size)
            elif entry.source == "gripper_open":
                values = np.array([observation.aperture], dtype=np.float64)
            else:  # gripper_closed
                values = np.array([1.0 - observation.aperture], dtype=np.float64)
            if not np.all(np.isfinite(values)):
                raise InvalidInputError(f"state {entry.source} has non-finite values: {values.tolist()}")
            parts.append((entry.key, values.reshape(entry.size)))
        return parts

    def state(self, observation: Observation) -> np.ndarray:
        """The whole state vector (all entries concatenated in order)."""
        parts = [values for _, values in self.state_parts(observation)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def dummy_bundle(self) -> ObservationBundle:
        """An observation of the configured shapes (black images, a zero state): what a warm-up sends."""
        joints = next((e.size for e in self.config.state if e.source == "joint_positions"), 0)
        blank = Observation(step=0, image=None, aperture=1.0, ee_position=np.zeros(3), ee_euler=np.zeros(3),
                            joint_names=tuple(f"joint{i}" for i in range(joints)), joint_positions=np.zeros(joints))
        images = {c.name: np.zeros((c.height, c.width, 3), np.uint8) for c in self.config.cameras}
        return ObservationBundle(blank, 0, images)

    def openpi_request(self, bundle: ObservationBundle, instruction: str) -> dict:
        """The observation map an openpi server's input transforms read (keys from the config)."""
        request: dict = {}
        for name, image in self.images(bundle).items():
            request[next(c.key for c in self.config.cameras if c.name == name)] = np.ascontiguousarray(image)
        grouped: dict[str, list[np.ndarray]] = {}
        for key, values in self.state_parts(bundle.observation):
            grouped.setdefault(key, []).append(values)
        for key, values in grouped.items():
            request[key] = np.concatenate(values)
        request[self.config.prompt_key] = instruction
        return request
