"""What the operator panel shows, computed from the graph's documents: pure, no Qt, no rclpy.

:class:`PanelModel` follows one episode at a time from the latched ``episode/status``, the
orchestrator's events and the verifier's results: the plan with each subgoal's state (current,
completed, advanced, pending), the VLM's verdict on it (count, required count, complete or not, with
its raw reply), the operator's label next to it, and an event log in words. A restarted panel
rebuilds the same view from the latched status and, for an episode that is over, from the events in
its record. :class:`SafetyState` reads the driver's ``robot/safety_state`` values.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ladder_ros.core import events as ev
from ladder_ros.messages import (
    ABORTED,
    FINISHED,
    RUNNING,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeStatus,
    VerificationResultDoc,
)

LOG_LINES = 500  # the event log keeps this many lines
REPLY_CHARS = 400  # a VLM reply is shown up to this length in the log


@dataclass
class Verdict:
    """The VLM's (or the oracle's) answer about one subgoal, as the orchestrator applied it."""

    request_id: int
    plan_index: int
    step: int
    count: int | None
    required: int
    complete: bool
    source: str
    error: str | None = None
    raw_reply: str | None = None
    latency_ms: float | None = None
    usage: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: Mapping) -> "Verdict":
        return cls(request_id=int(data["request_id"]), plan_index=int(data["plan_index"]), step=int(data["step"]),
                   count=None if data.get("count") is None else int(data["count"]), required=int(data["required"]),
                   complete=bool(data["complete"]), source=str(data.get("source", "")), error=data.get("error"),
                   raw_reply=data.get("raw_reply"), latency_ms=data.get("latency_ms"),
                   usage=dict(data.get("usage") or {}))

    @property
    def text(self) -> str:
        """The verdict in a few words: ``1/1 complete``, ``0/1 not complete``, ``no count``."""
        if self.count is None:
            return "no count" + (f" ({self.error})" if self.error else "")
        return f"{self.count}/{self.required} {'complete' if self.complete else 'not complete'}"


@dataclass
class SubgoalRow:
    index: int
    text: str
    state: str  # current, completed, advanced, pending
    attempts: int
    verdict: Verdict | None
    label: str | None


@dataclass(frozen=True)
class SafetyState:
    """The robot driver's safety state; ``available`` is False when no driver answers."""

    available: bool = False
    armed: bool = False
    estop: bool = False
    interventions: int = 0
    detail: str = ""

    @classmethod
    def from_values(cls, values: Mapping[str, str], message: str = "") -> "SafetyState":
        """From ``robot/safety_state`` key/values (``armed``, ``estop``, ``interventions``, ``detail``)."""
        def flag(name: str) -> bool:
            return str(values.get(name, "")).strip().lower() in ("true", "1", "yes")

        try:
            interventions = max(0, int(str(values.get("interventions", "0")).strip() or 0))
        except ValueError:
            interventions = 0
        return cls(available=True, armed=flag("armed"), estop=flag("estop"), interventions=interventions,
                   detail=str(values.get("detail", message or "")))

    @property
    def text(self) -> str:
        if not self.available:
            return "no driver"
        if self.estop:
            return "E-STOP latched"
        return ("ARMED" if self.armed else "disarmed (dry run)") + (
            f", {self.interventions} safety interventions" if self.interventions else "")


class EventLog:
    """The panel's log: the newest :data:`LOG_LINES` lines and how many were ever written. ``redact``, when set,
    rewrites every line before it is kept (a sealed blind session's secrets: :mod:`ladder_ros.panel.blind`)."""

    def __init__(self, maxlen: int = LOG_LINES, redact: Callable[[str], str] | None = None):
        self.lines: deque[str] = deque(maxlen=maxlen)
        self.total = 0
        self.redact = redact

    def append(self, line: str) -> None:
        self.lines.append(line if self.redact is None else self.redact(line))
        self.total += 1

    def since(self, total: int) -> list[str]:
        """The lines written after the log had ``total`` lines (as many as are still kept)."""
        new = self.total - total
        return list(self.lines)[-new:] if new > 0 else []

    def __iter__(self):
        return iter(self.lines)


def _short(text: str | None, limit: int = REPLY_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


class PanelModel:
    """The state of the episode the panel follows."""

    def __init__(self) -> None:
        self.status: EpisodeStatus | None = None
        self.current_subgoal = ""
        self.safety = SafetyState()
        self.labels: EpisodeLabels | None = None
        self.log = EventLog()
        # what the panel shows for the episode's system: the arm ("A"/"B") in a blind session, else None
        # (the status's variant is shown)
        self.shown_variant: str | None = None
        self._reset("")

    def _reset(self, episode_id: str) -> None:
        self.episode_id = episode_id
        self.event_indices: set[int] = set()
        self.completed: set[int] = set()
        self.advanced: set[int] = set()
        self.attempts: dict[int, int] = {}
        self.verdicts: list[Verdict] = []
        self.replies: dict[int, VerificationResultDoc] = {}  # request id -> the verifier's answer
        self.queries = 0
        self.finished_reason: str | None = None
        self.started_index: int | None = None  # the subgoal the last subgoal_started event named

    # ------------------------------------------------------------------ inputs
    def apply_status(self, status: EpisodeStatus) -> bool:
        """Take a status; True when it starts following another episode."""
        new_episode = status.episode_id != self.episode_id
        if new_episode and status.episode_id:
            self._reset(status.episode_id)
            self.labels = EpisodeLabels(episode_id=status.episode_id)
            self.log.append(f"episode {status.episode_id}: {(status.task or {}).get('task_id', '?')} "
                            f"({self.system(status)}), layout {status.layout}, seed {status.seed}")
        previous = self.status
        self.status = status
        if status.message and (previous is None or previous.message != status.message):
            self.log.append(f"orchestrator: {status.message}")
        if status.result is not None and (previous is None or previous.result is None or new_episode):
            for index, event in enumerate(status.result.get("events", [])):
                self._apply_event(index, event)
            self.log.append(f"episode over ({status.state}): {status.finish_reason}")
        return new_episode and bool(status.episode_id)

    def apply_event(self, doc: EpisodeEventDoc) -> Verdict | None:
        """Take an orchestrator event of the current episode; returns a new verdict, if it is one."""
        if doc.episode_id != self.episode_id:
            return None
        return self._apply_event(doc.index, doc.event)

    def apply_verification_result(self, doc: VerificationResultDoc) -> Verdict | None:
        """Keep the verifier's answer (raw reply, latency, usage) for the verdict it will become."""
        if doc.episode_id != self.episode_id:
            return None
        request_id = doc.result.get("request_id")
        if not isinstance(request_id, int):
            return None
        self.replies[request_id] = doc
        verdict = next((v for v in reversed(self.verdicts) if v.request_id == request_id), None)
        if verdict is not None and verdict.raw_reply is None:
            self._attach_reply(verdict)
            return verdict
        return None

    def restore(self, labels: EpisodeLabels | None, verdicts: list[dict]) -> None:
        """A restarted panel: the labels and verdicts its record file kept."""
        if labels is not None and labels.episode_id == self.episode_id:
            self.labels = labels
        known = {v.request_id for v in self.verdicts}
        for data in verdicts:
            try:
                verdict = Verdict.from_dict(data)
            except (KeyError, TypeError, ValueError):
                continue
            if verdict.request_id not in known:
                self.verdicts.append(verdict)
                known.add(verdict.request_id)
        self.verdicts.sort(key=lambda v: v.request_id)

    def _attach_reply(self, verdict: Verdict) -> None:
        reply = self.replies.get(verdict.request_id)
        if reply is None:
            return
        verdict.raw_reply = reply.result.get("raw_reply")
        verdict.latency_ms = reply.result.get("latency_ms")
        verdict.usage = dict(reply.result.get("usage") or {})

    def _apply_event(self, index: int, event: Mapping[str, Any]) -> Verdict | None:
        if index in self.event_indices:
            return None
        self.event_indices.add(index)
        kind, step = event.get("kind"), event.get("step")
        plan_index = event.get("plan_index")
        verdict = None
        if kind == ev.SUBGOAL_STARTED:
            self.started_index = int(plan_index)
            self.log.append(f"step {step}: subgoal {plan_index} started: {event.get('text', '')}")
        elif kind == ev.SUBGOAL_COMPLETED:
            self.completed.add(int(plan_index))
            self.advanced.discard(int(plan_index))
            self.log.append(f"step {step}: subgoal {plan_index} completed ({event.get('by', '')})")
        elif kind == ev.SUBGOAL_ADVANCED:
            self.advanced.add(int(plan_index))
            self.log.append(f"step {step}: moved on from subgoal {plan_index} without verifying")
        elif kind == ev.ATTEMPT_ENDED:
            current = self.started_index
            if current is not None:
                self.attempts[current] = self.attempts.get(current, 0) + 1
            self.log.append(f"step {step}: trigger: attempt ended ({event.get('reason', '')}, "
                            f"{event.get('close_steps', '?')} closed steps)")
        elif kind == ev.RELEASE_SUPPRESSED:
            self.log.append(f"step {step}: release in the cooldown, ignored")
        elif kind == ev.VERIFICATION_REQUESTED:
            self.queries += 1
            self.log.append(f"step {step}: VLM asked (query {event.get('request_id')}, {event.get('reason', '')}): "
                            f"{event.get('text', '')}, needs {event.get('required')}")
        elif kind == ev.VERIFICATION_ANSWERED:
            verdict = Verdict(request_id=int(event["request_id"]), plan_index=int(plan_index), step=int(step),
                              count=event.get("count"), required=int(event.get("required", 1)),
                              complete=bool(event.get("complete")), source=str(event.get("source", "")),
                              error=event.get("error"))
            self._attach_reply(verdict)
            self.verdicts = [v for v in self.verdicts if v.request_id != verdict.request_id] + [verdict]
            reply = f": {_short(verdict.raw_reply)}" if verdict.raw_reply else ""
            self.log.append(f"step {step}: VLM verdict on subgoal {plan_index}: {verdict.text} "
                            f"[{verdict.source}]{reply}")
        elif kind == ev.VERIFICATION_IGNORED:
            self.log.append(f"step {step}: late answer to query {event.get('request_id')} ignored")
        elif kind == ev.QUEUE_CHANGED:
            self.log.append(f"step {step}: queue now {event.get('pending')} ({event.get('reason', '')})")
        elif kind == ev.EPISODE_FINISHED:
            self.finished_reason = event.get("reason")
            self.completed |= set(event.get("completed", []))
            self.advanced |= set(event.get("advanced", []))
            self.log.append(f"step {step}: episode finished: {event.get('reason')}")
        return verdict

    # ------------------------------------------------------------------ views
    @property
    def plan(self) -> list[dict]:
        return list(self.status.plan) if self.status else []

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.state == RUNNING

    @property
    def over(self) -> bool:
        return self.status is not None and self.status.state in (FINISHED, ABORTED)

    def last_verdict(self, plan_index: int) -> Verdict | None:
        return next((v for v in reversed(self.verdicts) if v.plan_index == plan_index), None)

    def rows(self) -> list[SubgoalRow]:
        current = self.status.plan_index if self.running else None
        rows = []
        for i, subgoal in enumerate(self.plan):
            if i in self.completed:
                state = "completed"
            elif i == current:
                state = "current"
            elif i in self.advanced:
                state = "advanced"
            else:
                state = "pending"
            rows.append(SubgoalRow(index=i, text=str(subgoal.get("text", "")), state=state,
                                   attempts=self.attempts.get(i, 0), verdict=self.last_verdict(i),
                                   label=self.labels.subgoal_label(i) if self.labels else None))
        return rows

    def system(self, status: EpisodeStatus | None = None) -> str:
        """The system of the episode as the operator may see it: ``A``/``B`` in a blind session."""
        status = status or self.status
        if self.shown_variant:
            return f"system {self.shown_variant}"
        return status.variant if status is not None else ""

    def headline(self) -> str:
        s = self.status
        if s is None:
            return "NO ORCHESTRATOR: nothing on episode/status yet (is the graph running?)"
        if not s.episode_id:
            return "orchestrator ready · no episode yet" + (f" · {s.message}" if s.message else "")
        task = s.task or {}
        step = f"step {max(s.step, 0)}/{s.budget_steps}" if s.budget_steps else ""
        state = s.state + (f" ({s.finish_reason})" if s.finish_reason else "")
        verifier = "" if s.verifier_available else " — VERIFIER UNAVAILABLE"
        # the episode id last: on a narrow window it is what gets cut off
        return f"{task.get('task_id', '?')} · {self.system()} · {state} · {step}{verifier} · {s.episode_id}"

    def instruction(self) -> str:
        return str((self.status.task or {}).get("instruction", "")) if self.status else ""

    def vlm_summary(self) -> str:
        """Queries, verdicts and VLM tokens so far."""
        tokens = sum((v.usage.get("input_tokens") or 0) + (v.usage.get("output_tokens") or 0) for v in self.verdicts)
        complete = sum(1 for v in self.verdicts if v.complete)
        return (f"{self.queries} queries, {len(self.verdicts)} verdicts ({complete} complete)"
                + (f", {tokens} tokens" if tokens else ""))
