"""The one small interface every VLM backend implements, and the types that cross it.

A backend turns an interleaved prompt (text and camera images) into a :class:`Reply`. It never
parses the reply and never decides anything: the components in :mod:`ladder_ros.vlm.components`
own the prompts, the parsing and the count rule, so Gemini, a local model, the oracle and a replay
file are interchangeable under the same deployed behaviour.

A backend does not raise for the failures a remote model has in normal operation (rate limits,
server errors, timeouts, blocked prompts): it returns a :class:`Reply` whose ``error`` says why
and whose ``error_kind`` says what kind of failure it was, with every attempt listed, so the
component can record the failure. Exceptions are left for misuse and for bugs.

The finish reason is part of the reply. A reply is an answer only when the model stopped by
itself (``STOP``); a reply cut at the token cap (``MAX_TOKENS``), stopped by a filter
(``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ...), stopped for any other
reason, or with no finish reason at all, is a failed call whatever text it carries: a draft
``{"count": 2}`` before the cut is not the model's answer. :attr:`Reply.failure` is the one place
that decides this; every component asks it before parsing.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Protocol, Union, runtime_checkable

import numpy as np

from ladder_ros.core.errors import InvalidInputError, LadderError
from ladder_ros.core.observation import PrivilegedState
from ladder_ros.core.task import Subgoal


class BackendError(LadderError):
    """A backend cannot be built or used as configured (missing model files, missing key, ...)."""


class Purpose(str, enum.Enum):
    """What a generation is for; it selects the token cap and is kept in every record."""

    VERIFY = "verify"
    PLAN = "plan"
    NEXT_SUBTASK = "next_subtask"


@dataclass(frozen=True)
class ImagePart:
    """One camera image inside a prompt: an RGB ``uint8`` array of shape (H, W, 3).

    ``name`` names the camera (``main``, ``wrist``) for records and fingerprints; the text label a
    model sees is a separate text part written by the component.
    """

    image: np.ndarray
    name: str = "main"

    def __post_init__(self) -> None:
        image = self.image
        if not isinstance(image, np.ndarray):
            raise InvalidInputError(f"image {self.name!r} must be a numpy array, got {type(image).__name__}")
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise InvalidInputError(
                f"image {self.name!r} must be uint8 with shape (H, W, 3), got {image.dtype} {image.shape}")
        if image.shape[0] == 0 or image.shape[1] == 0:
            raise InvalidInputError(f"image {self.name!r} is empty: shape {image.shape}")

    def digest(self) -> str:
        """A content hash: equal pixels give equal digests, whatever array they sit in."""
        h = hashlib.sha256()
        h.update(repr(self.image.shape).encode())
        h.update(np.ascontiguousarray(self.image).tobytes())
        return h.hexdigest()


PromptPart = Union[str, ImagePart]


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt for one generation.

    ``parts`` is what a model sees, in order. ``subgoal`` and ``privileged`` are read only by the
    oracle backend, which answers from simulator state; no other backend may send them anywhere
    (they are not part of the fingerprint either, so a replay of an oracle run matches a real one).
    """

    purpose: Purpose
    parts: tuple[PromptPart, ...]
    max_output_tokens: int
    subgoal: Subgoal | None = None
    privileged: PrivilegedState | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.parts:
            raise InvalidInputError("a generation request needs at least one prompt part")
        for part in self.parts:
            if not isinstance(part, (str, ImagePart)):
                raise InvalidInputError(f"prompt parts are str or ImagePart, got {type(part).__name__}")
        if not isinstance(self.max_output_tokens, int) or self.max_output_tokens <= 0:
            raise InvalidInputError(f"max_output_tokens must be a positive integer, got {self.max_output_tokens!r}")

    @property
    def text_parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.parts if isinstance(p, str))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ImagePart))

    def fingerprint(self) -> str:
        """What identifies this prompt: purpose, texts and image contents, in order.

        Replay files are keyed on it, so a recorded reply is found again only for the same prompt.
        """
        h = hashlib.sha256()
        h.update(self.purpose.value.encode())
        for part in self.parts:
            if isinstance(part, str):
                h.update(b"\x00text\x00" + part.encode("utf-8"))
            else:
                h.update(b"\x00image\x00" + part.digest().encode())
        return h.hexdigest()


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one call as the backend reports them; None where it reports nothing."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    thinking_tokens: int | None = None

    def to_dict(self) -> dict:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "thinking_tokens": self.thinking_tokens}

    @classmethod
    def from_dict(cls, data: dict) -> "TokenUsage":
        def opt(name: str) -> int | None:
            value = data.get(name)
            return None if value is None else int(value)
        return cls(opt("input_tokens"), opt("output_tokens"), opt("thinking_tokens"))


@dataclass(frozen=True)
class Attempt:
    """One transport attempt of a call: how long it took and how it ended."""

    latency_ms: float
    status: int | None = None  # HTTP status where there was one
    error: str | None = None

    def to_dict(self) -> dict:
        return {"latency_ms": round(self.latency_ms, 3), "status": self.status, "error": self.error}

    @classmethod
    def from_dict(cls, data: dict) -> "Attempt":
        status = data.get("status")
        return cls(float(data.get("latency_ms", 0.0)), None if status is None else int(status), data.get("error"))


STOP = "STOP"  # the one finish reason of a complete reply (Gemini ``FinishReason.STOP``; EOS locally)
MAX_TOKENS = "MAX_TOKENS"  # cut at the output-token cap (Gemini; max_new_tokens locally)
DEADLINE = "DEADLINE"  # this project's: generation stopped at the call deadline (local models)
# Finish reasons that mean a filter stopped the reply (google-genai ``FinishReason``).
FILTER_FINISH_REASONS = frozenset({
    "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "LANGUAGE",
})


class FailureKind(str, enum.Enum):
    """Why a call gave no answer. Every failed call has exactly one kind."""

    TRANSPORT = "transport"  # the request did not get through: refused, reset, DNS, TLS
    TIMEOUT = "timeout"  # an attempt timed out, or the call deadline ended the call
    HTTP = "http"  # the server answered with an HTTP error status (401, 403, 429, 5xx ...)
    BLOCKED = "blocked"  # the prompt was blocked, or a filter stopped the reply
    TRUNCATED = "truncated"  # cut at the output-token cap: indistinguishable from a wrong answer
    FINISH = "finish"  # any other finish reason than STOP, or none reported
    NO_TEXT = "no_text"  # the model stopped without any visible text
    BACKEND = "backend"  # the backend failed (bad response body, model error, no recorded reply)
    UNPARSEABLE = "unparseable"  # a complete reply with no readable answer in the deployed format
    BAD_INPUT = "bad_input"  # nothing was sent: the views or the request were unusable


@dataclass(frozen=True)
class CallFailure:
    """A failed call: its kind and a one-line reason (never containing a secret)."""

    kind: FailureKind
    reason: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.reason}"

    def to_dict(self) -> dict:
        return {"kind": self.kind.value, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> "CallFailure":
        return cls(FailureKind(data["kind"]), str(data["reason"]))


def finish_failure(finish_reason: str | None) -> CallFailure | None:
    """The failure a finish reason means: None for STOP, a failure for anything else, missing included."""
    if finish_reason == STOP:
        return None
    if finish_reason is None or not str(finish_reason).strip():
        return CallFailure(FailureKind.FINISH, "no finish reason reported: the reply may be incomplete")
    if finish_reason == MAX_TOKENS:
        return CallFailure(FailureKind.TRUNCATED, "the reply was cut at the output-token cap (MAX_TOKENS)")
    if finish_reason == DEADLINE:
        return CallFailure(FailureKind.TIMEOUT, "generation stopped at the call deadline (DEADLINE)")
    if finish_reason in FILTER_FINISH_REASONS:
        return CallFailure(FailureKind.BLOCKED, f"the reply was stopped by a filter ({finish_reason})")
    return CallFailure(FailureKind.FINISH, f"the reply did not finish normally ({finish_reason})")


@dataclass(frozen=True)
class Reply:
    """What a backend answered.

    ``text`` is the visible text (thought summaries excluded), kept even when the call failed (a
    draft cut at the token cap is recorded, never used). ``error`` is set when the backend got no
    reply it could hand on, with ``error_kind`` saying what kind of failure (``BACKEND`` when
    unset). ``finish_reason`` is the model's, as reported (``STOP`` is the only complete one).
    ``latency_ms`` is the wall time of the whole call, retries and back-off included, because that
    is what the loop waits for. Whether the call gave an answer is :attr:`failure`.
    """

    text: str | None
    backend: str
    model: str
    latency_ms: float
    usage: TokenUsage = TokenUsage()
    thoughts: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    attempts: tuple[Attempt, ...] = ()
    error_kind: FailureKind | None = None

    @property
    def failure(self) -> CallFailure | None:
        """Why this reply is no answer, or None when it is one (text, and the model stopped by itself)."""
        if self.error is not None:
            return CallFailure(self.error_kind or FailureKind.BACKEND, self.error)
        stopped = finish_failure(self.finish_reason)
        if stopped is not None:
            return stopped
        if self.text is None:
            return CallFailure(FailureKind.NO_TEXT, "the model stopped without any visible text")
        return None

    def to_dict(self) -> dict:
        return {"text": self.text, "backend": self.backend, "model": self.model,
                "latency_ms": round(self.latency_ms, 3), "usage": self.usage.to_dict(),
                "thoughts": self.thoughts, "finish_reason": self.finish_reason, "error": self.error,
                "error_kind": None if self.error_kind is None else self.error_kind.value,
                "attempts": [a.to_dict() for a in self.attempts]}

    @classmethod
    def from_dict(cls, data: dict) -> "Reply":
        kind = data.get("error_kind")
        return cls(text=data.get("text"), backend=str(data.get("backend", "")), model=str(data.get("model", "")),
                   latency_ms=float(data.get("latency_ms", 0.0)),
                   usage=TokenUsage.from_dict(data.get("usage") or {}),
                   thoughts=data.get("thoughts"), finish_reason=data.get("finish_reason"),
                   error=data.get("error"), error_kind=None if kind is None else FailureKind(kind),
                   attempts=tuple(Attempt.from_dict(a) for a in data.get("attempts", ())))


@runtime_checkable
class VLMBackend(Protocol):
    """Generates one reply for one prompt.

    ``reads_pixels`` is False only for backends that answer from something other than the images
    (the oracle), so a component can tell "no camera image" apart from "not needed".
    """

    name: str
    model: str
    reads_pixels: bool

    def generate(self, request: GenerationRequest) -> Reply:
        ...

    def close(self) -> None:
        ...
