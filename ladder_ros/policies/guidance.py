"""Real-time chunking (RTC): what the next chunk must continue, and how strongly each of its steps is held to it.

Black, Galliker and Levine, "Real-Time Execution of Action Chunking Flow Policies" (arXiv 2506.07339). On the
wall clock the next chunk is computed while the previous one is still running. When the new chunk's
observation is taken, ``P`` of the previous chunk's actions have not been executed yet (the *prefix*, the
paper's ``H - s`` overlapping steps); the first ``d`` of them (*frozen*, the paper's inference delay) will run
while the new chunk is computed, so the new chunk's first ``d`` actions are replaced by them in any case. RTC
samples the new chunk as an inpainting problem: at every denoising step the flow's velocity is corrected by
a guidance term (a vector-Jacobian product through the model's one-step estimate of the final chunk) that
pulls the new chunk's first actions towards the prefix, with the soft mask :func:`soft_mask` (weight 1 on
the frozen steps, decaying exponentially to 0 at ``P``) and the guidance weight clipped at ``beta``
(:func:`guidance_weight`).

Index ``i`` of the new chunk and ``prefix[i]`` are the same control step: the prefix starts at the action
the previous chunk would have given at the new observation's step.

This module is pure numpy: a source that can guide its sampler (the local transformers backend,
:meth:`~ladder_ros.policies.local_model.TransformersSource.infer_guided`) implements
:class:`GuidedChunkSource`; the executor builds :class:`Guidance` from the chunk it is running.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.policies.chunked import RawChunk
from ladder_ros.policies.observation import ObservationBundle

# The paper's guidance weight cap (beta = 5 in its experiments, Section 4 and Appendix).
DEFAULT_MAX_WEIGHT = 5.0


@dataclass(frozen=True)
class Guidance:
    """What the next chunk should continue (RTC).

    ``prefix`` (P, D): the previous chunk's actions that were not yet executed when this chunk's observation
    was taken, in the policy's own action space exactly as its source returned them (unnormalised, before
    any convention conversion); ``prefix[i]`` and the new chunk's action ``i`` belong to the same control
    step. ``frozen``: how many of them run while this inference computes (hard mask, weight 1);
    ``0 <= frozen <= P``. ``max_weight``: the guidance weight cap beta (0 turns guidance off).
    An empty prefix (``(0, D)``) with ``frozen=0`` guides nothing: the chunk is the unguided one.
    """

    prefix: np.ndarray
    frozen: int
    max_weight: float = DEFAULT_MAX_WEIGHT

    def __post_init__(self):
        try:
            prefix = np.array(self.prefix, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"guidance prefix is not an array of numbers: {exc}") from None
        if prefix.ndim != 2:
            raise InvalidInputError(f"guidance prefix must be (P, D) actions, got shape {prefix.shape}")
        bad = np.argwhere(~np.isfinite(prefix))
        if bad.size:
            step, axis = (int(v) for v in bad[0])
            raise InvalidInputError(f"guidance prefix has {len(bad)} non-finite values (first: "
                                    f"{prefix[step, axis]} at step {step}, axis {axis})")
        prefix.setflags(write=False)
        object.__setattr__(self, "prefix", prefix)
        frozen = self.frozen
        if isinstance(frozen, bool) or not isinstance(frozen, (int, np.integer)):
            raise InvalidInputError(f"guidance frozen must be an integer count of actions, got {frozen!r}")
        if not 0 <= frozen <= len(prefix):
            raise InvalidInputError(f"guidance frozen must be in [0, {len(prefix)}] (the prefix's length), "
                                    f"got {frozen}")
        object.__setattr__(self, "frozen", int(frozen))
        try:
            weight = float(self.max_weight)
        except (TypeError, ValueError):
            raise ConfigError(f"guidance max_weight must be a number, got {self.max_weight!r}") from None
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"guidance max_weight must be finite and >= 0, got {self.max_weight!r}")
        object.__setattr__(self, "max_weight", weight)

    @property
    def length(self) -> int:
        """P, the number of prefix actions."""
        return int(self.prefix.shape[0])

    def check(self, chunk_length: int, action_dim: int) -> None:
        """Raises :class:`InvalidInputError` unless the prefix fits a source's chunks of ``chunk_length``
        actions of ``action_dim`` axes (an empty prefix fits any action dimension)."""
        if self.length > chunk_length:
            raise InvalidInputError(f"guidance prefix has {self.length} actions, more than the chunk length "
                                    f"{chunk_length}")
        if self.length and self.prefix.shape[1] != action_dim:
            raise InvalidInputError(f"guidance prefix has {self.prefix.shape[1]} action axes, the policy "
                                    f"{action_dim}")

    def mask(self, chunk_length: int) -> np.ndarray:
        """:func:`soft_mask` of this prefix over a chunk of ``chunk_length`` actions."""
        return soft_mask(chunk_length, self.frozen, self.length)


def soft_mask(chunk_length: int, frozen: int, prefix_length: int) -> np.ndarray:
    """(chunk_length,) weights: 1 for i < frozen; RTC's exponential decay for frozen <= i < prefix_length; 0 after.

    The paper's Eq. 5 with d = ``frozen`` and H - s = ``prefix_length``:
    ``c_i = (H - s - i) / (H - s - d + 1)``, ``W_i = c_i (e^{c_i} - 1) / (e - 1)``.
    """
    for name, value in (("chunk_length", chunk_length), ("frozen", frozen), ("prefix_length", prefix_length)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise InvalidInputError(f"soft_mask {name} must be an integer, got {value!r}")
    if not 0 <= frozen <= prefix_length <= chunk_length:
        raise InvalidInputError(f"soft_mask needs 0 <= frozen <= prefix_length <= chunk_length, got frozen={frozen}, "
                                f"prefix_length={prefix_length}, chunk_length={chunk_length}")
    weights = np.zeros(int(chunk_length), dtype=np.float64)
    weights[:frozen] = 1.0
    i = np.arange(frozen, prefix_length, dtype=np.float64)
    c = (prefix_length - i) / (prefix_length - frozen + 1)
    weights[frozen:prefix_length] = c * np.expm1(c) / (math.e - 1.0)
    return weights


def guidance_weight(tau: float, max_weight: float) -> float:
    """The guidance weight at flow time ``tau`` in the paper's convention (0: noise, 1: the chunk), clipped.

    Eq. 2 and 4: ``min(beta, (1 - tau) / (tau r^2))`` with ``r^2 = (1 - tau)^2 / (tau^2 + (1 - tau)^2)``, which
    is ``(tau^2 + (1 - tau)^2) / (tau (1 - tau))``: at least 2 (tau = 0.5), unbounded at both ends (beta then).
    """
    if max_weight <= 0:
        return 0.0
    denominator = tau * (1.0 - tau)
    if denominator <= 0:
        return float(max_weight)
    return float(min(max_weight, (tau * tau + (1.0 - tau) ** 2) / denominator))


@runtime_checkable
class GuidedChunkSource(Protocol):
    """A chunk source whose sampler can continue a prefix (RTC)."""

    name: str

    def infer_guided(self, bundle: ObservationBundle, instruction: str, noise_seed: int,
                     guidance: Guidance) -> RawChunk:
        """One chunk for ``bundle`` that continues ``guidance.prefix``; with the same ``noise_seed`` and an empty
        prefix it is :meth:`~ladder_ros.policies.chunked.ChunkSource.infer`'s chunk."""
