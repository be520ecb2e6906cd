"""The policy node's status document: whether the policy can act, and what it did in the current episode.

Published latched on ``policy/status`` (:data:`ladder_ros.specs.topics.POLICY_STATUS`). ``state`` is
one of :data:`WARMING_UP` (the model loads, the server is reached, the first inference runs: a JAX
server compiles then), :data:`READY` or :data:`SERVER_ERROR` (``detail`` says what failed). The
orchestrator starts an episode only on a ready policy (it defers a start while the policy warms up
and refuses one while it fails, with the reason in the command reply); the operator panel can show
the line as it is. ``report`` is the episode ``episode_id``'s
:class:`~ladder_ros.policies.audit.PolicyReport` so far, ``final`` once that episode is over for the
policy; the orchestrator puts the final one in the episode's record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ladder_ros.messages import Document, SchemaError

WARMING_UP, READY, SERVER_ERROR = "warming up", "ready", "server error"
STATES = (WARMING_UP, READY, SERVER_ERROR)


@dataclass(frozen=True)
class PolicyStatusDoc(Document):
    """Whether the policy can act (``state``, ``detail``), how long getting ready took, and its episode report."""

    DOC: ClassVar[str] = "policy_status"
    policy: str
    state: str
    detail: str = ""
    config_hash: str = ""
    warm_up_s: float | None = None  # how long the last warm-up took (None: none finished)
    elapsed_s: float = 0.0  # how long the policy has been in this state
    deadline_s: float = 0.0  # the warm-up's own deadline
    episode_id: str = ""
    report: dict = field(default_factory=dict)
    final: bool = False

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise SchemaError(f"{self.DOC}: field 'state' must be one of {', '.join(STATES)}, got {self.state!r}")
        for name in ("policy", "detail", "config_hash", "episode_id"):
            if not isinstance(getattr(self, name), str):
                raise SchemaError(f"{self.DOC}: field {name!r} must be str, got {getattr(self, name)!r}")
        for name in ("elapsed_s", "deadline_s") + (("warm_up_s",) if self.warm_up_s is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(f"{self.DOC}: field {name!r} must be a number, got {value!r}")
        if not isinstance(self.report, dict) or not isinstance(self.final, bool):
            raise SchemaError(f"{self.DOC}: 'report' must be an object and 'final' a boolean")

    @property
    def ready(self) -> bool:
        return self.state == READY

    @property
    def line(self) -> str:
        """One line for an operator: ``ready``, ``warming up: …`` or ``server error: …``."""
        return f"{self.state}: {self.detail}" if self.detail and self.state != READY else self.state
