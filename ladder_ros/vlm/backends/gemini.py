"""Gemini through the official ``google-genai`` client.

Settings of the paper (Appendix B, "VLM settings"): temperature 0.0 and a per-purpose cap on
output tokens (2048 for verification; 8192 for planning, from the benchmark card); reasoning at the
provider's default unless configured.

Retries are done here, not by the client (its own retry is switched off with ``attempts=1``), so
that every attempt is recorded with its status and latency. HTTP 408, 429 and 5xx and transport
failures (timeouts, refused or dropped connections) are retried with exponential back-off and
jitter, up to ``max_attempts`` in all; anything else ends the call at once. A call that ends
without text returns a :class:`Reply` with ``error`` set and never raises.

The API key is read from the environment when the backend is built, handed to the client, and
scrubbed from every error text this module records or logs.
"""

from __future__ import annotations

import io
import logging
import os
import random
import time
from typing import Any, Callable

import numpy as np

from ladder_ros.vlm.backends.base import (Attempt, BackendError, GenerationRequest, ImagePart, Reply,
                                          TokenUsage)
from ladder_ros.vlm.config import GeminiSettings

LOG = logging.getLogger(__name__)

TEMPERATURE = 0.0  # Appendix B: the proprioceptive verifier and PSP-Agent decode at temperature 0.0
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})  # the google-genai client's own retry set


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Transport exception classes of whichever HTTP stack google-genai uses (httpx or httpx2).

    Timeouts surface as these, not as genai errors (docs/dependencies.md).
    """
    classes: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        classes.append(module.TransportError)
    return tuple(classes)


def encode_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of an RGB uint8 image (the paper does not say which encoding it sent)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


class GeminiBackend:
    """Generates replies with a Gemini model; see the module docstring for the retry contract."""

    name = "gemini"
    reads_pixels = True

    def __init__(self, model: str, settings: GeminiSettings, *,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        from google import genai
        from google.genai import errors as genai_errors
        from google.genai import types

        key = os.environ.get(settings.api_key_env, "")
        if not key.strip():
            raise BackendError(f"no Gemini API key: set the environment variable {settings.api_key_env}")
        self.model = model
        self.settings = settings
        self._secret = key
        self._types = types
        self._api_error = genai_errors.APIError
        self._transport_errors = _transport_errors()
        self._sleep = sleep
        self._rng = rng or random.Random()
        http_options = types.HttpOptions(
            base_url=settings.base_url,
            timeout=int(round(settings.timeout_s * 1000)),  # HttpOptions.timeout is in milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),  # retries are ours, so each is recorded
        )
        # Keep the reference: the client closes its connection pool when it is collected.
        self._client = genai.Client(api_key=key, http_options=http_options)

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _generation_config(self, max_output_tokens: int) -> Any:
        types = self._types
        s = self.settings
        thinking = None
        if s.thinking_budget is not None or s.thinking_level is not None or s.include_thoughts:
            thinking = types.ThinkingConfig(
                thinking_budget=s.thinking_budget,
                thinking_level=s.thinking_level.upper() if s.thinking_level else None,
                include_thoughts=s.include_thoughts or None)
        return types.GenerateContentConfig(temperature=TEMPERATURE, max_output_tokens=max_output_tokens,
                                           thinking_config=thinking)

    def _contents(self, request: GenerationRequest) -> list[Any]:
        types = self._types
        parts = []
        for part in request.parts:
            if isinstance(part, ImagePart):
                parts.append(types.Part.from_bytes(data=encode_png(part.image), mime_type="image/png"))
            else:
                parts.append(types.Part.from_text(text=part))
        return [types.Content(role="user", parts=parts)]

    def _backoff_s(self, attempt: int) -> float:
        """Exponential back-off with 'equal jitter': half the step fixed, half random."""
        step = min(self.settings.max_backoff_s, self.settings.initial_backoff_s * (2 ** (attempt - 1)))
        return step / 2 + self._rng.uniform(0, step / 2)

    def generate(self, request: GenerationRequest) -> Reply:
        contents = self._contents(request)
        config = self._generation_config(request.max_output_tokens)
        attempts: list[Attempt] = []
        started = time.monotonic()
        last_error = "no attempt made"
        for attempt in range(1, self.settings.max_attempts + 1):
            t0 = time.monotonic()
            retryable = False
            try:
                response = self._client.models.generate_content(model=self.model, contents=contents, config=config)
            except self._api_error as exc:
                status = getattr(exc, "code", None)
                last_error = self._scrub(f"HTTP {status}: {exc}")
                attempts.append(Attempt((time.monotonic() - t0) * 1000, status, last_error))
                retryable = status in RETRYABLE_STATUS
            except self._transport_errors as exc:
                last_error = self._scrub(f"{type(exc).__name__}: {exc}")
                attempts.append(Attempt((time.monotonic() - t0) * 1000, None, last_error))
                retryable = True
            except Exception as exc:  # a malformed response body and the like: recorded, not retried
                last_error = self._scrub(f"{type(exc).__name__}: {exc}")
                attempts.append(Attempt((time.monotonic() - t0) * 1000, None, last_error))
            else:
                attempts.append(Attempt((time.monotonic() - t0) * 1000, 200, None))
                return self._reply_from(response, attempts, started)
            if not retryable or attempt == self.settings.max_attempts:
                break
            delay = self._backoff_s(attempt)
            LOG.warning("Gemini attempt %d/%d failed (%s); retrying in %.2f s",
                        attempt, self.settings.max_attempts, last_error[:200], delay)
            self._sleep(delay)
        error = last_error if len(attempts) == 1 else f"{last_error} (after {len(attempts)} attempts)"
        return Reply(text=None, backend=self.name, model=self.model,
                     latency_ms=(time.monotonic() - started) * 1000, error=error, attempts=tuple(attempts))

    def _reply_from(self, response: Any, attempts: list[Attempt], started: float) -> Reply:
        meta = getattr(response, "usage_metadata", None)
        usage = TokenUsage(
            input_tokens=getattr(meta, "prompt_token_count", None),
            output_tokens=getattr(meta, "candidates_token_count", None),
            thinking_tokens=getattr(meta, "thoughts_token_count", None))
        latency_ms = (time.monotonic() - started) * 1000
        common = dict(backend=self.name, model=self.model, latency_ms=latency_ms, usage=usage,
                      attempts=tuple(attempts))
        feedback = getattr(response, "prompt_feedback", None)
        block = getattr(feedback, "block_reason", None)
        if block is not None:
            reason = getattr(block, "value", str(block))
            return Reply(text=None, finish_reason="BLOCKED", error=f"prompt blocked: {reason}", **common)
        candidates = getattr(response, "candidates", None) or []
        if not candidates:
            return Reply(text=None, error="the response has no candidates", **common)
        candidate = candidates[0]
        finish = getattr(candidate, "finish_reason", None)
        finish_reason = getattr(finish, "value", None if finish is None else str(finish))
        texts: list[str] = []
        thoughts: list[str] = []
        content = getattr(candidate, "content", None)
        for part in (getattr(content, "parts", None) or []):
            text = getattr(part, "text", None)
            if not isinstance(text, str):
                continue
            (thoughts if getattr(part, "thought", None) else texts).append(text)
        thought_text = "".join(thoughts) or None
        if not texts:
            return Reply(text=None, thoughts=thought_text, finish_reason=finish_reason,
                         error=f"the response has no text (finish reason {finish_reason})", **common)
        return Reply(text="".join(texts), thoughts=thought_text, finish_reason=finish_reason, **common)

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()
