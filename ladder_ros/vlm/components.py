"""The three judgements the orchestrator delegates to a VLM, as the robot runs them.

* :class:`Planner`: instruction + reset frame -> subgoals (the PSP-Agent planning prompt,
  Appendix C, which returns ``{"goals": [{"goal", "object", "destination"}]}``).
* :class:`Verifier`: subgoal + current views -> object count -> complete or not by the count rule
  (Appendix B; ``core.verification``). Implements ``CountVerifier``.
* :class:`NextSubtask`: instruction + frame -> the one subtask to do next (stepwise form).

The offline benchmark drives these same classes (card: "drive the shipped component, not a
restatement"). Prompts are the shipped files; parsing is :mod:`ladder_ros.vlm.parsing`.

Failure policy. A call is failed when the backend got no reply (transport, HTTP status, timeout or
deadline, backend error), when the reply did not finish with ``STOP`` (cut at the token cap,
stopped by a filter, blocked prompt, any other or no finish reason), or when a complete reply has
no readable answer (:class:`~ladder_ros.vlm.backends.base.FailureKind`). A failed call gives a
result whose value is None, whose ``failure`` names the kind and whose ``error`` the reason, with
the raw reply (if any) kept; for the verifier that is a count of None, which the count rule never
takes as complete, and no draft text before a cut is ever read as a count, a plan or a subtask.
``verify``, ``plan`` and ``propose`` never raise, whatever the backend returns or raises.

There is no re-ask on an unreadable reply: the paper describes none for these components, a
re-ask is a second paid call inside the pause of a lockstep simulation, and the proprioceptive
verifier asks again by itself at its next trigger (45 steps without a release on the WidowX
suites, Appendix B). Transport failures (429, 5xx, timeouts) are retried inside the Gemini
backend, boundedly, within the call deadline.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.observation import Observation, PrivilegedState
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import VerificationRequest, VerificationResult, is_complete
from ladder_ros.vlm import prompts
from ladder_ros.vlm.accounting import CallRecord, UsageLedger
from ladder_ros.vlm.backends.base import (CallFailure, FailureKind, GenerationRequest, ImagePart, Purpose, Reply,
                                          VLMBackend)
from ladder_ros.vlm.config import NEXT_SUBTASK_MAX_OUTPUT_TOKENS, PLAN_MAX_OUTPUT_TOKENS, VERIFY_MAX_OUTPUT_TOKENS
from ladder_ros.vlm.goal_matching import head_noun
from ladder_ros.vlm.parsing import ParsedGoal, parse_count, parse_next_subtask, parse_plan

LOG = logging.getLogger(__name__)

# What a component accepts as "the current views": a simulator/robot Observation (its one camera
# image, plus privileged state in simulation), one image, or several named views.
ViewsInput = Union[Observation, ImagePart, np.ndarray, Any, Sequence[Union[ImagePart, tuple[str, Any]]]]


def _as_rgb_array(image: Any, name: str) -> np.ndarray:
    """An RGB uint8 array from a numpy array or a PIL image (the benchmark's frames are PIL)."""
    if isinstance(image, np.ndarray):
        return image
    convert = getattr(image, "convert", None)
    if callable(convert):  # a PIL image
        return np.asarray(convert("RGB"), dtype=np.uint8)
    raise InvalidInputError(f"view {name!r} is neither a numpy array nor a PIL image: {type(image).__name__}")


def to_views(observation: ViewsInput) -> tuple[list[ImagePart], PrivilegedState | None]:
    """Normalise the accepted inputs to named views, plus privileged state when an Observation has it.

    An ``Observation`` gives its camera image as the ``main`` view; a sequence gives each element,
    either an ``ImagePart`` or a ``(name, image)`` pair. View names must be unique.
    """
    if isinstance(observation, Observation):
        views = [] if observation.image is None else [ImagePart(_as_rgb_array(observation.image, "main"), "main")]
        return views, observation.privileged
    if isinstance(observation, ImagePart):
        return [observation], None
    if isinstance(observation, np.ndarray) or callable(getattr(observation, "convert", None)):
        return [ImagePart(_as_rgb_array(observation, "main"), "main")], None
    if isinstance(observation, (list, tuple)):
        views = []
        for item in observation:
            if isinstance(item, ImagePart):
                views.append(item)
            elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                views.append(ImagePart(_as_rgb_array(item[1], item[0]), item[0]))
            else:
                raise InvalidInputError(f"a view is an ImagePart or a (name, image) pair, got {type(item).__name__}")
        names = [v.name for v in views]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"view names must be unique, got {names}")
        return views, None
    raise InvalidInputError(f"cannot read views from {type(observation).__name__}")


def usage_dict(record: CallRecord | None) -> dict:
    """The accounting of one call as it travels in results (VerificationResult.usage and the like)."""
    if record is None:
        return {}
    return {"model": record.model, "input_tokens": record.input_tokens, "output_tokens": record.output_tokens,
            "thinking_tokens": record.thinking_tokens, "cost_usd": record.cost_usd,
            "cost_unknown": record.cost_unknown, "attempts": record.attempts,
            "finish_reason": record.finish_reason, "failure": record.failure_kind}


def _bad_input(exc: Exception) -> CallFailure:
    return CallFailure(FailureKind.BAD_INPUT, str(exc))


class _Component:
    """What the three components share: a backend, a ledger, and a call that never raises.

    :meth:`_ask` is the one path of every call: send, take the reply's own failure (no reply, or
    not finished with STOP) or else parse it, account it, and hand back the parsed value or the
    failure. Nothing a backend or a reply does can make it raise.
    """

    purpose: Purpose

    def __init__(self, backend: VLMBackend, ledger: UsageLedger | None, max_output_tokens: int):
        if isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens <= 0:
            raise InvalidInputError(f"max_output_tokens must be a positive integer, got {max_output_tokens!r}")
        self.backend = backend
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.max_output_tokens = max_output_tokens

    @property
    def name(self) -> str:
        return self.backend.name

    def _call(self, request: GenerationRequest) -> Reply:
        try:
            reply = self.backend.generate(request)
            if not isinstance(reply, Reply):
                raise TypeError(f"generate() returned {type(reply).__name__}, not a Reply")
            return reply
        except Exception as exc:  # the boundary: a backend bug must not take the loop down
            LOG.exception("%s backend raised during %s", self.backend.name, request.purpose.value)
            return Reply(text=None, backend=str(getattr(self.backend, "name", "?")),
                         model=str(getattr(self.backend, "model", "?")), latency_ms=0.0,
                         error=f"backend raised {type(exc).__name__}: {exc}", error_kind=FailureKind.BACKEND)

    def _ask(self, request: GenerationRequest, read: Any) -> tuple[Any, Reply, CallFailure | None, CallRecord | None]:
        """Send ``request``; ``read(text) -> (value, parse error)`` turns a complete reply into its value.

        Returns (value, reply, failure, record): value None exactly when failure is set.
        """
        reply = self._call(request)
        failure = reply.failure
        value = None
        if failure is None:
            try:
                value, parse_error = read(reply.text)
            except Exception as exc:  # the parser is bounded; a bug in it still must not escape
                LOG.exception("reading a %s reply raised", self.purpose.value)
                value, parse_error = None, f"the reply could not be read: {type(exc).__name__}: {exc}"
            if value is None:
                failure = CallFailure(FailureKind.UNPARSEABLE, parse_error or "no answer in the reply")
        record = None
        try:
            record = self.ledger.record(self.purpose.value, reply, failure=failure)
        except Exception:  # accounting must not lose the answer either
            LOG.exception("accounting a %s call raised", self.purpose.value)
        if failure is not None:
            LOG.warning("%s call via %s gave no answer: %s", self.purpose.value, reply.backend, failure)
        return value, reply, failure, record


class Verifier(_Component):
    """Counts objects of the subgoal's kind at its destination and applies the count rule.

    Implements ``core.verification.CountVerifier``: ``verify(request, observation)`` where the
    observation is an ``Observation`` or a list of named views. The prompt is the deployed one
    with the container suffix always and the multi-view suffix when several views are sent.
    """

    purpose = Purpose.VERIFY

    def __init__(self, backend: VLMBackend, ledger: UsageLedger | None = None,
                 max_output_tokens: int = VERIFY_MAX_OUTPUT_TOKENS):
        super().__init__(backend, ledger, max_output_tokens)

    def verify(self, request: VerificationRequest, observation: ViewsInput) -> VerificationResult:
        """The count at the subgoal's destination now; count None (never complete) on any failure."""
        try:
            views, privileged = to_views(observation)
            if not views and self.backend.reads_pixels:
                raise InvalidInputError("no camera image to verify from")
            generation = GenerationRequest(
                purpose=Purpose.VERIFY, parts=prompts.verification_parts(request.subgoal.text, views),
                max_output_tokens=self.max_output_tokens, subgoal=request.subgoal, privileged=privileged)
        except Exception as exc:  # unusable views or request: nothing is sent
            LOG.warning("verification %s not sent: %s", getattr(request, "request_id", "?"), exc)
            return VerificationResult(request_id=request.request_id, count=None, source=self.name,
                                      error=str(_bad_input(exc)), usage={"failure": FailureKind.BAD_INPUT.value})

        def read(text: str) -> tuple[int | None, str | None]:
            parsed = parse_count(text)
            return parsed.count, parsed.error

        count, reply, failure, record = self._ask(generation, read)
        return VerificationResult(
            request_id=request.request_id, count=count, source=self.name, raw_reply=reply.text,
            error=None if failure is None else str(failure), latency_ms=reply.latency_ms,
            usage=usage_dict(record) or {"failure": None if failure is None else failure.kind.value})

    @staticmethod
    def is_complete(result: VerificationResult, request: VerificationRequest) -> bool:
        """The count rule on a result: complete once the count reaches the required number."""
        return is_complete(result.count, request.required)


@dataclass(frozen=True)
class PlanResult:
    """A plan, or why there is none. ``subgoals`` is what the orchestrator's queue takes.

    ``goals`` keeps the names as the model gave them ("the yellow lemon"); ``subgoals`` carries
    their head nouns as object and destination and the goal sentence as the policy's instruction.
    """

    goals: tuple[ParsedGoal, ...] | None
    subgoals: tuple[Subgoal, ...] | None
    raw_reply: str | None
    error: str | None
    latency_ms: float
    usage: dict = field(default_factory=dict)
    failure: FailureKind | None = None

    @property
    def ok(self) -> bool:
        return self.subgoals is not None

    def to_dict(self) -> dict:
        return {"goals": None if self.goals is None else [g.to_dict() for g in self.goals],
                "subgoals": None if self.subgoals is None else [s.to_dict() for s in self.subgoals],
                "raw_reply": self.raw_reply, "error": self.error, "latency_ms": round(self.latency_ms, 3),
                "usage": dict(self.usage), "failure": None if self.failure is None else self.failure.value}


def subgoal_from(goal: ParsedGoal) -> Subgoal:
    """A planned goal as a Subgoal: head nouns for matching and counting, the sentence as the text."""
    obj, dest = head_noun(goal.object), head_noun(goal.destination)
    if not obj or not dest:
        raise InvalidInputError(f"no noun in object {goal.object!r} or destination {goal.destination!r}")
    return Subgoal(object=obj, destination=dest, text=goal.goal)


class Planner(_Component):
    """Plans the subgoals of an instruction from the reset frame (PSP-Agent planning prompt)."""

    purpose = Purpose.PLAN

    def __init__(self, backend: VLMBackend, ledger: UsageLedger | None = None, robot: str = "robot arm",
                 max_output_tokens: int = PLAN_MAX_OUTPUT_TOKENS):
        super().__init__(backend, ledger, max_output_tokens)
        self.robot = robot

    def plan(self, instruction: str, frame: ViewsInput, attempted: Sequence[str] = (),
             robot: str | None = None) -> PlanResult:
        """Plan ``instruction`` from ``frame``; ``robot`` overrides the configured ``<robot>`` text."""
        try:
            views, _ = to_views(frame)
            if not views and self.backend.reads_pixels:
                raise InvalidInputError("no camera image to plan from")
            generation = GenerationRequest(
                purpose=Purpose.PLAN, parts=prompts.frame_parts(
                    prompts.planning_text(robot or self.robot, instruction, attempted), views),
                max_output_tokens=self.max_output_tokens)
        except Exception as exc:  # unusable views or request: nothing is sent
            bad = _bad_input(exc)
            return PlanResult(None, None, None, str(bad), 0.0, failure=bad.kind)

        def read(text: str) -> tuple[tuple | None, str | None]:
            parsed = parse_plan(text)
            if parsed.goals is None:
                return None, parsed.error
            try:
                return (parsed.goals, tuple(subgoal_from(g) for g in parsed.goals)), None
            except InvalidInputError as exc:
                return None, str(exc)

        value, reply, failure, record = self._ask(generation, read)
        goals, subgoals = value if value is not None else (None, None)
        return PlanResult(goals=goals, subgoals=subgoals, raw_reply=reply.text,
                          error=None if failure is None else str(failure), latency_ms=reply.latency_ms,
                          usage=usage_dict(record), failure=None if failure is None else failure.kind)


@dataclass(frozen=True)
class NextSubtaskResult:
    """The subtask to do next, ``task_done`` when the model says nothing is left, or why neither."""

    goal: ParsedGoal | None
    subgoal: Subgoal | None
    task_done: bool
    raw_reply: str | None
    error: str | None
    latency_ms: float
    usage: dict = field(default_factory=dict)
    failure: FailureKind | None = None

    def to_dict(self) -> dict:
        return {"goal": None if self.goal is None else self.goal.to_dict(),
                "subgoal": None if self.subgoal is None else self.subgoal.to_dict(),
                "task_done": self.task_done, "raw_reply": self.raw_reply, "error": self.error,
                "latency_ms": round(self.latency_ms, 3), "usage": dict(self.usage),
                "failure": None if self.failure is None else self.failure.value}


class NextSubtask(_Component):
    """Names the one subtask to do next from the instruction and the current frame.

    Its prompt (``next_subtask.txt``) is this project's own: the paper prints no next-subtask
    prompt. It asks for the same goal fields as the planner, or all null when the task is done.
    """

    purpose = Purpose.NEXT_SUBTASK

    def __init__(self, backend: VLMBackend, ledger: UsageLedger | None = None, robot: str = "robot arm",
                 max_output_tokens: int = NEXT_SUBTASK_MAX_OUTPUT_TOKENS):
        super().__init__(backend, ledger, max_output_tokens)
        self.robot = robot

    def propose(self, instruction: str, frame: ViewsInput, robot: str | None = None) -> NextSubtaskResult:
        """The next subtask of ``instruction`` seen in ``frame``; ``robot`` overrides ``<robot>``."""
        try:
            views, _ = to_views(frame)
            if not views and self.backend.reads_pixels:
                raise InvalidInputError("no camera image to choose the next subtask from")
            generation = GenerationRequest(
                purpose=Purpose.NEXT_SUBTASK,
                parts=prompts.frame_parts(prompts.next_subtask_text(robot or self.robot, instruction), views),
                max_output_tokens=self.max_output_tokens)
        except Exception as exc:  # unusable views or request: nothing is sent
            bad = _bad_input(exc)
            return NextSubtaskResult(None, None, False, None, str(bad), 0.0, failure=bad.kind)

        def read(text: str) -> tuple[tuple | None, str | None]:
            parsed = parse_next_subtask(text)
            if parsed.task_done:
                return (None, None, True), None
            if parsed.goal is None:
                return None, parsed.error
            try:
                return (parsed.goal, subgoal_from(parsed.goal), False), None
            except InvalidInputError as exc:
                return None, str(exc)

        value, reply, failure, record = self._ask(generation, read)
        goal, subgoal, done = value if value is not None else (None, None, False)
        return NextSubtaskResult(goal=goal, subgoal=subgoal, task_done=done, raw_reply=reply.text,
                                 error=None if failure is None else str(failure), latency_ms=reply.latency_ms,
                                 usage=usage_dict(record), failure=None if failure is None else failure.kind)
