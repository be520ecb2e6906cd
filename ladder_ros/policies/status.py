"""The policy node's status document: whether its policies can act, and what one did in the current episode.

Published latched on ``policy/status`` (:data:`ladder_ros.specs.topics.POLICY_STATUS`). A policy's
``state`` is one of :data:`WARMING_UP` (the model loads, the server is reached, the first inference
runs: a JAX server compiles then), :data:`READY`, :data:`SERVER_ERROR` (``detail`` says what failed)
or :data:`UNAVAILABLE` (its server stopped answering between episodes; it warms up again once the
server is back). The node serves one or more policies by name (``policies``, each a
:class:`PolicyEntry`; ``default_policy`` is the one an episode runs under when its start names none);
``policy``, ``state``, ``detail`` and ``config_hash`` describe the policy of the current (or last)
episode, before any episode the default one. The orchestrator starts an episode only on a ready
policy of the name it asks for (it defers a start while that policy warms up, and refuses one, or
waits, while it cannot act, with the reason in the command reply); the operator panel can show the
line as it is. ``report`` is the episode ``episode_id``'s
:class:`~ladder_ros.policies.audit.PolicyReport` so far, ``final`` once that episode is over for the
policy; the orchestrator puts the final one in the episode's record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ladder_ros.messages import Document, SchemaError, check_field

WARMING_UP, READY, SERVER_ERROR, UNAVAILABLE = "warming up", "ready", "server error", "unavailable"
# Where a reader whose policy server does not answer finds what to check (tests/test_docs_shape.py checks it).
SERVER_NOT_ANSWERING = "docs/robot_bringup.md#a-policy-server-that-does-not-answer"
STATES = (WARMING_UP, READY, SERVER_ERROR, UNAVAILABLE)
CANNOT_ACT = (SERVER_ERROR, UNAVAILABLE)  # neither ready nor on its way to it: the server failed or is gone


def _check_state(doc: str, state: object) -> None:
    if state not in STATES:
        raise SchemaError(f"{doc}: field 'state' must be one of {', '.join(STATES)}, got {state!r}")


def state_line(state: str, detail: str) -> str:
    """A policy's state for an operator: ``ready``, or the state with its detail (``server error: …``)."""
    return f"{state}: {detail}" if detail and state != READY else state


@dataclass(frozen=True)
class PolicyEntry:
    """One named policy of the node: its config (name and digest) and whether an episode naming it can start."""

    name: str
    config: str
    config_hash: str
    state: str
    detail: str = ""
    warm_up_s: float | None = None

    KEYS: ClassVar[tuple[str, ...]] = ("name", "config", "config_hash", "state", "detail", "warm_up_s")

    def __post_init__(self) -> None:
        _check_state("policy_status.policies", self.state)
        for name in ("name", "config", "config_hash", "detail"):
            check_field("policy_status.policies", name, getattr(self, name), str)
        if not self.name:
            raise SchemaError("policy_status.policies: every policy has a name")

    @property
    def ready(self) -> bool:
        return self.state == READY

    @property
    def line(self) -> str:
        """``ready``, ``warming up: …``, ``server error: …`` or ``unavailable: …``."""
        return state_line(self.state, self.detail)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.KEYS}

    @classmethod
    def from_dict(cls, data: object) -> "PolicyEntry":
        if not isinstance(data, dict) or set(data) - set(cls.KEYS):
            raise SchemaError(f"policy_status.policies: an entry is an object of {', '.join(cls.KEYS)}, got {data!r}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise SchemaError(f"policy_status.policies: {exc}") from None


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
    default_policy: str = ""
    policies: list = field(default_factory=list)  # PolicyEntry.to_dict() of each named policy

    def __post_init__(self) -> None:
        _check_state(self.DOC, self.state)
        for name in ("policy", "detail", "config_hash", "episode_id", "default_policy"):
            check_field(self.DOC, name, getattr(self, name), str)
        for name in ("elapsed_s", "deadline_s") + (("warm_up_s",) if self.warm_up_s is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(f"{self.DOC}: field {name!r} must be a number, got {value!r}")
        if not isinstance(self.report, dict) or not isinstance(self.final, bool):
            raise SchemaError(f"{self.DOC}: 'report' must be an object and 'final' a boolean")
        if not isinstance(self.policies, list):
            raise SchemaError(f"{self.DOC}: 'policies' must be a list, got {self.policies!r}")
        names = [PolicyEntry.from_dict(e).name for e in self.policies]
        if len(set(names)) != len(names):
            raise SchemaError(f"{self.DOC}: a policy name is listed twice in {names}")
        if self.policies and self.default_policy not in names:
            raise SchemaError(f"{self.DOC}: default_policy {self.default_policy!r} is not one of {', '.join(names)}")

    @property
    def ready(self) -> bool:
        return self.state == READY

    @property
    def line(self) -> str:
        """One line for an operator: ``ready``, ``warming up: …``, ``server error: …`` or ``unavailable: …``."""
        return state_line(self.state, self.detail)

    def entries(self) -> dict[str, PolicyEntry]:
        """Every policy the node serves, by name; a status from a node that serves one policy without naming it
        lists that one under its config's name."""
        if self.policies:
            return {e.name: e for e in map(PolicyEntry.from_dict, self.policies)}
        return {self.policy: PolicyEntry(name=self.policy or "policy", config=self.policy,
                                         config_hash=self.config_hash, state=self.state, detail=self.detail,
                                         warm_up_s=self.warm_up_s)}

    @property
    def default_name(self) -> str:
        """The policy an episode whose start names none runs under."""
        return self.default_policy or next(iter(self.entries()))
