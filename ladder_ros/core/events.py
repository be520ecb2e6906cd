"""Episode events: what the orchestrator decided and when, in one JSON-friendly form.

The in-process reference loop and the ROS graph produce these same records step for step; the
parity check compares them field by field, so every value is a plain int, float, str, bool or list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Event kinds, in the order they can appear within one step.
EPISODE_STARTED = "episode_started"
SUBGOAL_STARTED = "subgoal_started"
ATTEMPT_ENDED = "attempt_ended"
RELEASE_SUPPRESSED = "release_suppressed"
VERIFICATION_REQUESTED = "verification_requested"
VERIFICATION_ANSWERED = "verification_answered"
VERIFICATION_IGNORED = "verification_ignored"
SUBGOAL_COMPLETED = "subgoal_completed"
SUBGOAL_ADVANCED = "subgoal_advanced"
QUEUE_CHANGED = "queue_changed"
EPISODE_FINISHED = "episode_finished"

EVENT_KINDS = (EPISODE_STARTED, SUBGOAL_STARTED, ATTEMPT_ENDED, RELEASE_SUPPRESSED, VERIFICATION_REQUESTED,
               VERIFICATION_ANSWERED, VERIFICATION_IGNORED, SUBGOAL_COMPLETED, SUBGOAL_ADVANCED,
               QUEUE_CHANGED, EPISODE_FINISHED)


@dataclass(frozen=True)
class Event:
    """One thing that happened at control step ``step``."""

    step: int
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "kind": self.kind, **self.data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Event":
        rest = {k: v for k, v in data.items() if k not in ("step", "kind")}
        return cls(step=int(data["step"]), kind=str(data["kind"]), data=rest)
