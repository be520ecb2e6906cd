"""Gemini through the official ``google-genai`` client.

Settings of the paper (Appendix B, "VLM settings"): temperature 0.0 and a per-purpose cap on
output tokens (2048 for verification; 8192 for planning, from the benchmark card); reasoning at the
provider's default unless configured.

Retries are done here, not by the client (its own retry is switched off with ``attempts=1``), so
that every attempt is recorded with its status and latency. HTTP 408, 429 and 5xx and transport
failures (timeouts, refused or dropped connections) are retried with exponential back-off and
jitter, up to ``max_attempts`` in all; anything else ends the call at once.

One number bounds a call: ``call_deadline_s`` covers every attempt and every back-off. An attempt
may take the smaller of ``timeout_s`` and what is left of the deadline; a retry starts only when
its back-off ends before the deadline with at least :data:`MIN_ATTEMPT_S` (or ``timeout_s`` when
smaller) left; and each attempt runs in its own thread, so a server that trickles bytes to keep a
read timeout alive still cannot hold the call past the deadline. The caller always has a
:class:`Reply` by then, and it never raises.

The reply's finish reason and ``promptFeedback.blockReason`` are kept: a blocked prompt is a failed
call of kind ``blocked``, and the text of any reply that did not finish with ``STOP`` is recorded
but is no answer (:attr:`Reply.failure`).

The API key is read from the environment variable ``api_key_env`` when the backend is built and
handed to the client explicitly (so neither ``GOOGLE_API_KEY`` nor ``GEMINI_API_KEY`` is picked up
behind the configuration's back, and Vertex AI is off whatever ``GOOGLE_GENAI_USE_VERTEXAI`` says).
The client still reads both variables at construction and warns that it is "Using GOOGLE_API_KEY"
when both are set, which is not true here; that one warning is replaced by a line saying which
variable the key came from. The key is scrubbed from every error text this module records or logs.
"""

from __future__ import annotations

import io
import logging
import os
import random
import threading
import time
from typing import Any, Callable

import numpy as np

from ladder_ros.vlm.backends.base import (Attempt, BackendError, FailureKind, GenerationRequest, ImagePart,
                                          Reply, TokenUsage)
from ladder_ros.vlm.config import DEFAULT_CALL_DEADLINE_S, GeminiSettings

LOG = logging.getLogger(__name__)

TEMPERATURE = 0.0  # Appendix B: the proprioceptive verifier and PSP-Agent decode at temperature 0.0
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})  # the google-genai client's own retry set
MIN_ATTEMPT_S = 1.0  # project choice: a retry with less time than this left is not worth sending
_CLIENT_LOGGER = "google_genai._api_client"  # where google-genai logs which environment key it picked
_BOTH_KEYS_WARNING = "Both GOOGLE_API_KEY and GEMINI_API_KEY are set"


def _transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(transport, timeout) exception classes of whichever HTTP stack google-genai uses (httpx or httpx2).

    Timeouts surface as these, not as genai errors (docs/dependencies.md).
    """
    transport: list[type[BaseException]] = []
    timeouts: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        transport.append(module.TransportError)
        timeouts.append(module.TimeoutException)
    return tuple(transport), tuple(timeouts)


class _DropBothKeysWarning(logging.Filter):
    """Drops google-genai's "Both ... are set. Using GOOGLE_API_KEY." line: the key is passed explicitly."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _BOTH_KEYS_WARNING not in record.getMessage()


def make_client(key: str, key_env: str, http_options: Any) -> Any:
    """A google-genai client for the Gemini Developer API with ``key`` passed explicitly.

    Logs, truthfully, where the key came from; the client's own line about environment keys, which
    describes a choice it does not make when a key is passed, is filtered out while it is built.
    """
    from google import genai

    others = [name for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY") if name != key_env and os.environ.get(name)]
    client_log = logging.getLogger(_CLIENT_LOGGER)
    drop = _DropBothKeysWarning()
    client_log.addFilter(drop)
    try:
        client = genai.Client(vertexai=False, api_key=key, http_options=http_options)
    finally:
        client_log.removeFilter(drop)
    LOG.info("Gemini API key taken from $%s and passed to the client explicitly%s", key_env,
             f" ({', '.join('$' + n for n in others)} also set, not used)" if others else "")
    return client


def encode_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of an RGB uint8 image (the paper does not say which encoding it sent)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


class GeminiBackend:
    """Generates replies with a Gemini model; see the module docstring for the retry and deadline contract."""

    name = "gemini"
    reads_pixels = True

    def __init__(self, model: str, settings: GeminiSettings, *, call_deadline_s: float = DEFAULT_CALL_DEADLINE_S,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        from google.genai import errors as genai_errors
        from google.genai import types

        key = os.environ.get(settings.api_key_env, "")
        if not key.strip():
            raise BackendError(f"no Gemini API key: set the environment variable {settings.api_key_env}")
        self.model = model
        self.settings = settings
        self.call_deadline_s = float(call_deadline_s)
        self._secrets = tuple({key, key.strip()})
        self._types = types
        self._api_error = genai_errors.APIError
        self._transport_errors, self._timeout_errors = _transport_errors()
        self._sleep = sleep
        self._rng = rng or random.Random()
        http_options = types.HttpOptions(
            base_url=settings.base_url,
            timeout=_milliseconds(settings.timeout_s),
            retry_options=types.HttpRetryOptions(attempts=1),  # retries are ours, so each is recorded
        )
        # Keep the reference: the client closes its connection pool when it is collected.
        self._client = make_client(key.strip(), settings.api_key_env, http_options)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _generation_config(self, max_output_tokens: int, timeout_s: float) -> Any:
        types = self._types
        s = self.settings
        thinking = None
        if s.thinking_budget is not None or s.thinking_level is not None or s.include_thoughts:
            thinking = types.ThinkingConfig(
                thinking_budget=s.thinking_budget,
                thinking_level=s.thinking_level.upper() if s.thinking_level else None,
                include_thoughts=s.include_thoughts or None)
        return types.GenerateContentConfig(
            temperature=TEMPERATURE, max_output_tokens=max_output_tokens, thinking_config=thinking,
            http_options=types.HttpOptions(timeout=_milliseconds(timeout_s)))  # this attempt's share

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

    def _attempt(self, contents: list[Any], config: Any, wait_s: float) -> tuple[str, Any]:
        """One request in its own thread, waited for at most ``wait_s``.

        Returns ("ok", response), ("raised", exception) or ("deadline", None). A request still
        running at the deadline is left to finish on its own (its timeout ends it) and ignored.
        """
        outcome: list[tuple[str, Any]] = []
        done = threading.Event()

        def run() -> None:
            try:
                outcome.append(("ok", self._client.models.generate_content(
                    model=self.model, contents=contents, config=config)))
            except BaseException as exc:  # handed to the caller, never lost in the thread
                outcome.append(("raised", exc))
            finally:
                done.set()

        threading.Thread(target=run, name="gemini-attempt", daemon=True).start()
        if not done.wait(timeout=max(wait_s, 0.0)):
            return "deadline", None
        return outcome[0]

    def generate(self, request: GenerationRequest) -> Reply:
        contents = self._contents(request)
        attempts: list[Attempt] = []
        started = time.monotonic()
        deadline = started + self.call_deadline_s
        last_error, last_kind = "no attempt made", FailureKind.TIMEOUT
        for attempt in range(1, self.settings.max_attempts + 1):
            t0 = time.monotonic()
            budget = min(self.settings.timeout_s, deadline - t0)
            retryable = False
            # The request's own timeout is this attempt's share; the wait is what is left of the call.
            how, value = self._attempt(contents, self._generation_config(request.max_output_tokens, budget),
                                       deadline - t0)
            elapsed_ms = (time.monotonic() - t0) * 1000
            if how == "ok":
                attempts.append(Attempt(elapsed_ms, 200, None))
                return self._reply_from(value, attempts, started)
            if how == "deadline":
                last_error = (f"call deadline of {self.call_deadline_s:g} s reached during attempt {attempt} "
                              "(call_deadline_s)")
                last_kind = FailureKind.TIMEOUT
                attempts.append(Attempt(elapsed_ms, None, last_error))
                break
            exc = value
            if isinstance(exc, self._api_error):
                status = getattr(exc, "code", None)
                last_error, last_kind = self._scrub(f"HTTP {status}: {exc}"), FailureKind.HTTP
                attempts.append(Attempt(elapsed_ms, status, last_error))
                retryable = status in RETRYABLE_STATUS
            elif isinstance(exc, self._transport_errors):
                last_kind = FailureKind.TIMEOUT if isinstance(exc, self._timeout_errors) else FailureKind.TRANSPORT
                last_error = self._scrub(f"{type(exc).__name__}: {exc}")
                attempts.append(Attempt(elapsed_ms, None, last_error))
                retryable = True
            elif isinstance(exc, Exception):  # a malformed response body and the like: recorded, not retried
                last_error, last_kind = self._scrub(f"{type(exc).__name__}: {exc}"), FailureKind.BACKEND
                attempts.append(Attempt(elapsed_ms, None, last_error))
            else:  # KeyboardInterrupt, SystemExit: not ours to swallow
                raise exc
            if not retryable or attempt == self.settings.max_attempts:
                break
            delay = self._backoff_s(attempt)
            left_after_delay = deadline - time.monotonic() - delay
            if left_after_delay < min(MIN_ATTEMPT_S, self.settings.timeout_s):
                last_error += (f" (no retry: the call deadline of {self.call_deadline_s:g} s leaves "
                               f"{max(left_after_delay, 0.0):.1f} s after the back-off)")
                break
            LOG.warning("Gemini attempt %d/%d failed (%s); retrying in %.2f s",
                        attempt, self.settings.max_attempts, last_error[:200], delay)
            self._sleep(delay)
        error = last_error if len(attempts) == 1 else f"{last_error} (after {len(attempts)} attempts)"
        return Reply(text=None, backend=self.name, model=self.model,
                     latency_ms=(time.monotonic() - started) * 1000, error=error, error_kind=last_kind,
                     attempts=tuple(attempts))

    def _reply_from(self, response: Any, attempts: list[Attempt], started: float) -> Reply:
        """The reply of a 200 response: text, thoughts, usage, finish reason, or why it is no answer."""
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
            reason = _enum_text(block)
            message = getattr(feedback, "block_reason_message", None)
            return Reply(text=None, error=f"prompt blocked: {reason}" + (f" ({message})" if message else ""),
                         error_kind=FailureKind.BLOCKED, **common)
        candidates = getattr(response, "candidates", None) or []
        if not candidates:
            return Reply(text=None, error="the response has no candidates", error_kind=FailureKind.NO_TEXT, **common)
        candidate = candidates[0]
        finish = getattr(candidate, "finish_reason", None)
        finish_reason = None if finish is None else _enum_text(finish)
        texts: list[str] = []
        thoughts: list[str] = []
        content = getattr(candidate, "content", None)
        for part in (getattr(content, "parts", None) or []):
            text = getattr(part, "text", None)
            if not isinstance(text, str):
                continue
            (thoughts if getattr(part, "thought", None) else texts).append(text)
        # Text is kept whatever the finish reason; Reply.failure decides whether it is an answer.
        return Reply(text="".join(texts) if texts else None, thoughts="".join(thoughts) or None,
                     finish_reason=finish_reason, **common)

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


def _milliseconds(seconds: float) -> int:
    """HttpOptions.timeout is in milliseconds; never 0, which the client reads as "no timeout"."""
    return max(1, int(round(seconds * 1000)))


def _enum_text(value: Any) -> str:
    """The name a google-genai enum (or a plain string from a newer API) stands for."""
    text = getattr(value, "value", value)
    return str(text)
