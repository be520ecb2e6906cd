"""A local vision-language model through ``transformers`` (``AutoModelForImageTextToText``).

Any chat VLM whose processor has a chat template works (Gemma 3, Qwen3-VL, ...). Weights are read
only from a local directory or the local Hugging Face cache (``local_files_only=True``): this
project never downloads a model at run time. Decoding is greedy, the local equivalent of the
paper's temperature 0.0 (Appendix B).

Qwen3-VL's processor needs torchvision; Gemma 3's image processor falls back to its PIL backend
when torchvision is missing, which is what the CPU tests use.

Reasoning models that think in ``<think> ... </think>`` have the thinking split off into
``Reply.thoughts`` and counted as thinking tokens, so parsing sees only the answer.

The finish reason is read from how generation ended: ``STOP`` when the model emitted an
end-of-sequence token, ``MAX_TOKENS`` when it used up ``max_new_tokens`` without one,
``DEADLINE`` when the call deadline stopped it (``max_time``), ``OTHER`` for anything else. Only
``STOP`` is an answer (:attr:`Reply.failure`); the text of the others is kept for the record.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ladder_ros.vlm.backends.base import (DEADLINE, MAX_TOKENS, STOP, Attempt, BackendError, FailureKind,
                                          GenerationRequest, ImagePart, Reply, TokenUsage)
from ladder_ros.vlm.config import DEFAULT_CALL_DEADLINE_S, LocalSettings

LOG = logging.getLogger(__name__)

THINK_END = "</think>"


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendError("local.device is 'cuda' but no CUDA device is available")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device == "cuda" else torch.float32
    return getattr(torch, dtype)


class LocalTransformersBackend:
    """Generates replies with a transformers VLM loaded once; calls are serialised by a lock."""

    name = "local"
    reads_pixels = True

    def __init__(self, model_path: str, settings: LocalSettings | None = None, *,
                 call_deadline_s: float = DEFAULT_CALL_DEADLINE_S):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        settings = settings or LocalSettings()
        self.model = model_path
        self.call_deadline_s = float(call_deadline_s)
        self.device = resolve_device(settings.device)
        self.dtype = resolve_dtype(settings.dtype, self.device)
        self._torch = torch
        try:
            self._processor = AutoProcessor.from_pretrained(model_path, local_files_only=True)
            self._model = AutoModelForImageTextToText.from_pretrained(
                model_path, local_files_only=True, dtype=self.dtype)
        except (OSError, ValueError) as exc:  # a missing directory, or a name that is no local model
            raise BackendError(f"cannot load a local model from {model_path!r} (weights are never downloaded "
                               f"at run time; give a local directory or a cached model): {exc}") from None
        self._model.to(self.device)
        self._model.eval()
        self._tokenizer = getattr(self._processor, "tokenizer", self._processor)
        self._lock = threading.Lock()

    def _messages(self, request: GenerationRequest) -> list[dict]:
        from PIL import Image

        content = []
        for part in request.parts:
            if isinstance(part, ImagePart):
                content.append({"type": "image", "image": Image.fromarray(part.image)})
            else:
                content.append({"type": "text", "text": part})
        return [{"role": "user", "content": content}]

    def generate(self, request: GenerationRequest) -> Reply:
        started = time.monotonic()
        try:
            with self._lock:
                text, usage, thoughts, finish_reason = self._generate_locked(request)
        except Exception as exc:  # out of memory, a processor that rejects the input: recorded, not raised
            latency_ms = (time.monotonic() - started) * 1000
            error = f"{type(exc).__name__}: {exc}"
            LOG.error("local generation failed: %s", error)
            return Reply(text=None, backend=self.name, model=self.model, latency_ms=latency_ms,
                         error=error, error_kind=FailureKind.BACKEND, attempts=(Attempt(latency_ms, None, error),))
        latency_ms = (time.monotonic() - started) * 1000
        return Reply(text=text, backend=self.name, model=self.model, latency_ms=latency_ms, usage=usage,
                     thoughts=thoughts, finish_reason=finish_reason, attempts=(Attempt(latency_ms, None, None),))

    def _generate_locked(self, request: GenerationRequest) -> tuple[str, TokenUsage, str | None, str]:
        inputs = self._processor.apply_chat_template(
            self._messages(request), add_generation_prompt=True, tokenize=True, return_dict=True,
            return_tensors="pt").to(self.device)
        if "pixel_values" in inputs and inputs["pixel_values"].is_floating_point():
            inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        prompt_length = int(inputs["input_ids"].shape[1])
        started = time.monotonic()
        with self._torch.inference_mode():
            output = self._model.generate(**inputs, max_new_tokens=request.max_output_tokens, do_sample=False,
                                          max_time=self.call_deadline_s)
        elapsed_s = time.monotonic() - started
        new_tokens = output[0, prompt_length:].tolist()
        finish_reason = self._finish_reason(new_tokens, request.max_output_tokens, elapsed_s)
        text = self._tokenizer.decode(new_tokens, skip_special_tokens=True)
        thoughts = None
        thinking_tokens = 0
        if THINK_END in text:
            thoughts, text = text.split(THINK_END, 1)
            thoughts = thoughts.replace("<think>", "").strip()
            thinking_tokens = len(self._tokenizer.encode(thoughts + THINK_END, add_special_tokens=False))
        usage = TokenUsage(input_tokens=prompt_length,
                           output_tokens=max(len(new_tokens) - thinking_tokens, 0),
                           thinking_tokens=thinking_tokens)
        return text.strip(), usage, thoughts, finish_reason

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for eos in (self._model.generation_config.eos_token_id, getattr(self._tokenizer, "eos_token_id", None)):
            if eos is not None:
                ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
        return ids

    def _finish_reason(self, new_tokens: list[int], max_new_tokens: int, elapsed_s: float) -> str:
        """How generation ended: end-of-sequence, the token cap, the deadline, or something else."""
        if new_tokens and new_tokens[-1] in self._eos_ids():
            return STOP
        if len(new_tokens) >= max_new_tokens:
            return MAX_TOKENS
        if elapsed_s >= self.call_deadline_s:
            return DEADLINE
        return "OTHER"

    def close(self) -> None:
        self._model = None
        if self.device == "cuda":
            self._torch.cuda.empty_cache()
