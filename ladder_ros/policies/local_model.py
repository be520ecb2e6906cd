"""A local action model through ``transformers``: a checkpoint folder, the GPU when present, no downloads.

One class serves the model families transformers can load for action prediction: an
``AutoModelForImageTextToText`` whose model has ``sample_actions`` (flow-matching action experts,
such as transformers' PI0), with its ``AutoProcessor`` for the prompt and the camera images. Weights
are read only from the local folder (``local_files_only=True``). On a GPU the model runs in bfloat16
where the GPU supports it, else float16 (``dtype: auto``); on the CPU in float32. Every unguided call
runs under ``torch.inference_mode``; one warm-up inference at load time takes the first-call costs
(allocations, kernel selection) before the robot waits on it.

What the config supplies and the checkpoint may not: the normalisation statistics (state in,
actions out, :class:`~ladder_ros.policies.config.Normalization`) and the sampling noise, drawn from
a seeded generator so a chunk is the same wherever it is computed (the parity between the graph and
the reference loop relies on it). The state vector is zero-padded to the model's ``max_state_dim``
and the first ``D`` of its ``max_action_dim`` outputs are the action's axes.

:meth:`TransformersSource.infer_guided` samples a chunk that continues the previous one (real-time chunking,
:mod:`ladder_ros.policies.guidance`): it runs the model's flow-matching loop itself, step by step, so that
each step's velocity can be corrected by RTC's guidance term; that part needs gradients through the action
expert (not the prefix's KV cache), so it runs under ``torch.enable_grad``, not ``inference_mode``.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from typing import Any

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.policies.chunked import RawChunk
from ladder_ros.policies.config import Normalization, PolicyConfig, Statistics
from ladder_ros.policies.guidance import Guidance, guidance_weight
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder
from ladder_ros.vlm.backends.local_transformers import resolve_device

LOG = logging.getLogger(__name__)


def resolve_dtype(dtype: str, device: str) -> Any:
    """``auto``: bfloat16 on a GPU that supports it, float16 on one that does not, float32 on the CPU."""
    import torch

    if dtype == "auto":
        if device == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, dtype)


class TransformersSource:
    """A :class:`~ladder_ros.policies.chunked.ChunkSource` running a local transformers action model."""

    def __init__(self, config: PolicyConfig, *, warm_up: bool = True):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if config.model is None:
            raise ConfigError("a transformers policy needs a model section", source=config.source)
        self.config = config
        self.name = config.name
        self.encoder = ObservationEncoder(config)
        self._torch = torch
        settings = config.model
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.device = resolve_device(settings.device)
        self.dtype = resolve_dtype(settings.dtype, self.device)
        try:
            self.processor = AutoProcessor.from_pretrained(settings.path, local_files_only=True)
            self.model = AutoModelForImageTextToText.from_pretrained(settings.path, local_files_only=True,
                                                                     dtype=self.dtype)
        except (OSError, ValueError, ImportError) as exc:  # missing folder, unknown model type, missing extra
            raise ConfigError(f"cannot load a local model from {settings.path} (weights are never downloaded at "
                              f"run time): {exc}", source=config.source, key="model.path") from None
        if not callable(getattr(self.model, "sample_actions", None)):
            raise ConfigError(f"{type(self.model).__name__} does not predict actions (it has no sample_actions)",
                              source=config.source, key="model.path")
        self.model.to(self.device)
        self.model.eval()
        self.model.requires_grad_(False)  # inference only; guidance differentiates w.r.t. the actions alone
        model_config = self.model.config
        self.chunk_size = int(model_config.chunk_size)
        self.max_state_dim = int(model_config.max_state_dim)
        self.max_action_dim = int(model_config.max_action_dim)
        for key, needed, available in (("chunk.length", config.chunk_length, self.chunk_size),
                                       ("action.axes", config.action.dim, self.max_action_dim),
                                       ("state", config.state_dim, self.max_state_dim)):
            if needed > available:
                raise ConfigError(f"the model at {settings.path} has {available} (chunk_size / max_action_dim / "
                                  f"max_state_dim), the config needs {needed}", source=config.source, key=key)
        self.normalization = self._statistics() if config.statistics_from_processor else config.normalization
        self._sample_arguments = set(inspect.signature(self.model.sample_actions).parameters)
        self.num_steps = settings.num_inference_steps
        self._lock = threading.Lock()
        self.warm_up_s = self._warm_up() if warm_up else None

    def _statistics(self) -> Normalization:
        """The dataset statistics saved with the checkpoint's processor (mean/std of state and actions)."""
        config = self.config
        values = {name: getattr(self.processor, name, None) for name in
                  ("state_mean", "state_std", "actions_mean", "actions_std")}
        missing = [name for name, value in values.items() if value is None]
        if missing:
            raise ConfigError(f"the processor at {config.model.path} has no {', '.join(missing)}; give the "
                              "statistics in the config (normalization: {mode, state, action})",
                              source=config.source, key="normalization")
        state_dim, action_dim = config.state_dim, config.action.dim
        if len(values["state_mean"]) != state_dim or len(values["actions_mean"]) < action_dim:
            raise ConfigError(f"the processor's statistics cover {len(values['state_mean'])} state and "
                              f"{len(values['actions_mean'])} action dimensions; the config has {state_dim} and "
                              f"{action_dim}", source=config.source, key="normalization")
        return Normalization(mode="mean_std",
                             state=Statistics(tuple(map(float, values["state_mean"])),
                                              tuple(map(float, values["state_std"]))),
                             action=Statistics(tuple(map(float, values["actions_mean"][:action_dim])),
                                               tuple(map(float, values["actions_std"][:action_dim]))))

    def _warm_up(self) -> float:
        started = time.perf_counter()
        self.infer(self.encoder.dummy_bundle(), "warm up", 0)
        elapsed = time.perf_counter() - started
        LOG.info("policy %s: warm-up inference on %s (%s) took %.3f s", self.name, self.device, self.dtype, elapsed)
        return elapsed

    def _inputs(self, bundle: ObservationBundle, instruction: str, noise_seed: int) -> dict:
        torch = self._torch
        from PIL import Image

        pictures = [Image.fromarray(image) for image in self.encoder.images(bundle).values()]
        encoded = self.processor(images=[pictures], text=[instruction], return_tensors="pt")
        state = self.encoder.state(bundle.observation)
        if self.normalization is not None:
            state = self.normalization.normalize_state(state)
        padded = np.zeros((1, self.max_state_dim), dtype=np.float32)
        padded[0, :state.size] = state
        generator = torch.Generator().manual_seed(int(noise_seed))
        noise = torch.randn((1, self.chunk_size, self.max_action_dim), generator=generator)
        inputs = {key: value for key, value in encoded.items() if key in self._sample_arguments}
        inputs["state"] = torch.from_numpy(padded)
        inputs["noise"] = noise
        if self.num_steps is not None:
            inputs["num_steps"] = self.num_steps
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor):
                value = value.to(self.device)
                inputs[key] = value.to(self.dtype) if value.is_floating_point() else value
        return inputs

    def infer(self, bundle: ObservationBundle, instruction: str, noise_seed: int) -> RawChunk:
        started = time.perf_counter()
        with self._lock:
            try:
                inputs = self._inputs(bundle, instruction, noise_seed)
            except (ValueError, TypeError) as exc:  # a processor refusing the inputs
                raise InvalidInputError(f"the model's processor refused the observation: {exc}") from None
            with self._torch.inference_mode():
                output = self.model.sample_actions(**inputs)
            actions = output.float().cpu().numpy()[0, :, :self.config.action.dim].astype(np.float64)
        if self.normalization is not None:
            actions = self.normalization.unnormalize_action(actions)
        return RawChunk(actions=actions, latency_s=time.perf_counter() - started)

    def infer_guided(self, bundle: ObservationBundle, instruction: str, noise_seed: int,
                     guidance: Guidance) -> RawChunk:
        """A chunk that continues ``guidance.prefix`` (RTC, paper Algorithm 1), from the same noise as
        :meth:`infer` for the same seed: with an empty prefix (or ``max_weight`` 0) it is :meth:`infer`'s chunk.

        The prefix is normalised into the model's space with the source's :class:`Normalization` and padded to
        ``max_action_dim`` (the padding's weight is 0). Every denoising step with something to guide costs a
        backward pass through the action expert on top of its forward pass.
        """
        started = time.perf_counter()
        dim = self.config.action.dim
        guidance.check(self.chunk_size, dim)
        mask = guidance.mask(self.chunk_size)
        guided = guidance.length > 0 and guidance.max_weight > 0
        target = np.zeros((1, self.chunk_size, self.max_action_dim), dtype=np.float32)
        weights = np.zeros_like(target)
        if guided:
            target[0, :guidance.length, :dim] = self._normalize_actions(guidance.prefix)
            weights[0, :, :dim] = mask[:, None]
        with self._lock:
            try:
                inputs = self._inputs(bundle, instruction, noise_seed)
            except (ValueError, TypeError) as exc:  # a processor refusing the inputs
                raise InvalidInputError(f"the model's processor refused the observation: {exc}") from None
            output = self._sample_guided(inputs, target if guided else None, weights, guidance.max_weight)
            actions = output.float().cpu().numpy()[0, :, :dim].astype(np.float64)
        if self.normalization is not None:
            actions = self.normalization.unnormalize_action(actions)
        return RawChunk(actions=actions, latency_s=time.perf_counter() - started)

    def _normalize_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions as the source returns them, back in the model's normalised space.

        Both normalisation modes are affine per axis, so the inverse of ``unnormalize_action`` follows from its
        values at 0 and 1.
        """
        if self.normalization is None:
            return actions
        dim = actions.shape[1]
        offset = self.normalization.unnormalize_action(np.zeros(dim))
        scale = self.normalization.unnormalize_action(np.ones(dim)) - offset
        if np.any(scale == 0):
            raise ConfigError(f"policy {self.name}: an action axis has a zero spread in the normalisation "
                              "statistics; a guidance prefix cannot be normalised", source=self.config.source,
                              key="normalization")
        return (actions - offset) / scale

    def _sample_guided(self, inputs: dict, target: np.ndarray | None, weights: np.ndarray,
                       max_weight: float) -> Any:
        """transformers' PI0 ``sample_actions`` loop, step by step, with RTC's guidance on each step's velocity.

        Time runs as in ``sample_actions``: t = 1 is noise, t = 0 the chunk; x_t = t noise + (1 - t) actions,
        the model predicts v = noise - actions and an Euler step is x <- x + dt v with dt = -1 / steps. The
        paper's tau is 1 - t and its velocity -v: its one-step estimate (Eq. 3) is x_0 = x_t - t v here, and
        its guided velocity (Eq. 2) v - w(tau) ((Y - x_0) W)^T dx_0/dx_t.
        """
        torch = self._torch
        model = self.model
        core = getattr(model, "model", None)
        if not callable(getattr(core, "embed_prefix", None)) or getattr(core, "vlm", None) is None:
            raise ConfigError(f"{type(model).__name__} has no PI0-style prefix (embed_prefix, vlm): guided "
                              "sampling needs one", source=self.config.source, key="model.path")
        inputs = dict(inputs)
        state, noise = inputs.pop("state"), inputs.pop("noise")
        input_ids, pixel_values = inputs.pop("input_ids"), inputs.pop("pixel_values")
        attention_mask = inputs.pop("attention_mask", None)
        pixel_attention_mask = inputs.pop("pixel_attention_mask", None)
        num_steps = inputs.pop("num_steps", None) or model.config.num_inference_steps
        batch_size, device = input_ids.shape[0], input_ids.device
        with torch.no_grad():  # the prefix's KV cache: computed once, never differentiated
            position_ids = None if attention_mask is None else attention_mask.cumsum(-1) - 1
            embeds = core.embed_prefix(input_ids, pixel_values, pixel_attention_mask)
            cache = core.vlm(inputs_embeds=embeds, attention_mask=attention_mask, position_ids=position_ids,
                             token_type_ids=torch.zeros_like(embeds)[:, :, 0], use_cache=True).cache
        prefix_length = cache.get_seq_length()
        if target is not None:
            target = torch.from_numpy(target).to(device=device, dtype=noise.dtype)
            weights = torch.from_numpy(weights).to(device=device, dtype=noise.dtype)

        def velocity(x, t):
            timestep = torch.full((batch_size,), t, dtype=torch.float32, device=device)
            return model(state=state, noise=x, timestep=timestep, pixel_attention_mask=pixel_attention_mask,
                         attention_mask=attention_mask, cache=cache, **inputs).logits

        dt = -1.0 / num_steps
        for step in range(num_steps):
            t = 1.0 + step * dt
            if target is None:
                with torch.no_grad():
                    v = velocity(noise, t)
            else:
                x = noise.detach().requires_grad_(True)
                with torch.enable_grad():
                    v = velocity(x, t)
                    estimate = x - t * v  # Eq. 3: the one-step estimate of the final chunk
                    # Eq. 2's vector-Jacobian product (Y - x_0)^T diag(W) dx_0/dx_t
                    correction, = torch.autograd.grad(estimate, x, grad_outputs=(target - estimate) * weights)
                v = v.detach() - guidance_weight(1.0 - t, max_weight) * correction
            cache.crop(prefix_length - cache.get_seq_length())  # keep the prefix only, as sample_actions does
            noise = noise + dt * v
        return noise.detach()

    def close(self) -> None:
        self.model = None
        if self.device == "cuda":
            self._torch.cuda.empty_cache()
