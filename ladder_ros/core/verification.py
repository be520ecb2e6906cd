"""Verification: the count rule, the query/answer types, and when the proprioceptive verifier asks.

Appendix B (Proprioceptive verifier): the verifier asks for an object count rather than a binary
verdict, so repeated identical objects can be told apart: a subgoal is complete once the count
reaches the number of times it occurs in the plan so far (one on revisit tasks). A query goes out
a fixed number of steps after a release, or after a fixed number of steps without one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.presets import VerifierTimingParams
from ladder_ros.core.task import Subgoal


def required_count(subgoal: Subgoal, completed: Sequence[Subgoal], *, revisit: bool = False) -> int:
    """How many objects of ``subgoal``'s kind must rest at its destination for it to be complete.

    The count of its occurrences in the plan so far: the subgoals with the same (object,
    destination) already completed, plus this one. With a queue that only moves forward this is
    the card's ``subtasks[:query_idx + 1].count(subtask)``; when an interchangeable duplicate was
    moved to the end of the queue it still asks for exactly one more than is already done.
    On revisit tasks one object returns to the same place, so one is enough (Appendix B).
    """
    if revisit:
        return 1
    return 1 + sum(1 for s in completed if s.key == subgoal.key)


def is_complete(count: int | None, required: int) -> bool:
    """The count rule. No count (an unparseable reply) is never complete."""
    return count is not None and count >= required


@dataclass(frozen=True)
class VerificationRequest:
    """A count query about the current subgoal, sent at ``step``."""

    request_id: int
    step: int
    plan_index: int
    subgoal: Subgoal
    required: int
    reason: str  # "after_release" or "without_release"

    def to_dict(self) -> dict:
        return {"request_id": self.request_id, "step": self.step, "plan_index": self.plan_index,
                "subgoal": self.subgoal.to_dict(), "required": self.required, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> "VerificationRequest":
        return cls(request_id=int(data["request_id"]), step=int(data["step"]),
                   plan_index=int(data["plan_index"]), subgoal=Subgoal.from_dict(data["subgoal"]),
                   required=int(data["required"]), reason=str(data["reason"]))


@dataclass(frozen=True)
class VerificationResult:
    """The verifier's answer: a count (None when the reply could not be read) and where it came from."""

    request_id: int
    count: int | None
    source: str  # backend name, e.g. "oracle", "gemini", "replay"
    raw_reply: str | None = None
    error: str | None = None
    latency_ms: float = 0.0
    usage: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.count is not None:
            if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
                raise InvalidInputError(f"a verification count is a non-negative integer, got {self.count!r}")

    def to_dict(self) -> dict:
        return {"request_id": self.request_id, "count": self.count, "source": self.source,
                "raw_reply": self.raw_reply, "error": self.error, "latency_ms": self.latency_ms,
                "usage": dict(self.usage)}

    @classmethod
    def from_dict(cls, data: dict) -> "VerificationResult":
        count = data.get("count")
        return cls(request_id=int(data["request_id"]), count=None if count is None else int(count),
                   source=str(data.get("source", "")), raw_reply=data.get("raw_reply"),
                   error=data.get("error"), latency_ms=float(data.get("latency_ms", 0.0)),
                   usage=dict(data.get("usage", {})))


@runtime_checkable
class CountVerifier(Protocol):
    """Answers a count query from the current views (or, for the oracle, from simulator state)."""

    name: str

    def verify(self, request: VerificationRequest, observation: object) -> VerificationResult:
        ...


class VerificationTiming:
    """Decides the step at which the proprioceptive verifier queries (Appendix B).

    A query goes out ``delay_after_release_steps`` after a release, or
    ``query_without_release_steps`` after the anchor (the start of the current subgoal or the
    previous query) when no release came. A second release while a query is already scheduled
    keeps the earlier schedule. Call :meth:`restart` when a query was answered or the subgoal
    changed.
    """

    def __init__(self, params: VerifierTimingParams):
        self.params = params
        self.anchor_step = 0
        self.scheduled_step: int | None = None
        self.released_since_anchor = False

    def restart(self, step: int) -> None:
        self.anchor_step = step
        self.scheduled_step = None
        self.released_since_anchor = False

    def note_release(self, step: int) -> None:
        """A release at ``step``: schedule the query unless one is already scheduled."""
        self.released_since_anchor = True
        if self.scheduled_step is None:
            self.scheduled_step = step + self.params.delay_after_release_steps

    def update(self, step: int, released: bool) -> str | None:
        """Feed one step; returns the reason when a query is due at this step, else None."""
        if released:
            self.note_release(step)
        if self.scheduled_step is not None and step >= self.scheduled_step:
            return "after_release"
        if not self.released_since_anchor and step - self.anchor_step >= self.params.query_without_release_steps:
            return "without_release"
        return None


# Project choice: no tabletop holds a thousand objects (the paper's scenes hold a dozen at most), so a larger
# number in a verifier's reply is garbled text (``{"count": 1e308}`` is a 309-digit integer), never a count.
MAX_COUNT = 1000


def check_count(value: object) -> int:
    """A count from an untrusted source as a non-negative int, or raise naming the value as it was given."""
    if isinstance(value, bool):
        raise InvalidInputError(f"count must be an integer, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or value != math.floor(value)):
        raise InvalidInputError(f"count must be an integer, got {value!r}")
    if not isinstance(value, (int, float)) or value < 0:
        raise InvalidInputError(f"count must be a non-negative integer, got {value!r}")
    if value > MAX_COUNT:
        raise InvalidInputError(f"count must be at most {MAX_COUNT}, got {value!r}")
    return int(value)
