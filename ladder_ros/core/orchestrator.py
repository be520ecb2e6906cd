"""The orchestrator state machine, one class per variant of Table 2 of the LADDER paper.

Per control step the caller reports what the robot senses (:class:`StepInput`) through
:meth:`Orchestrator.observe`; the returned :class:`Decision` says which instruction the low-level
policy must follow now, whether a verification query must be answered first, what happened
(events) and whether the episode is over. A verification answer goes back in through
:meth:`Orchestrator.resolve`, which returns the decision that replaces the previous one.

In simulation the loop is lockstep: a query is answered before the step's action is computed, so
``observe`` → (``resolve``) → act happen within one step, exactly as the paper's simulator pauses
while a system computes (Section 3). On a robot the same object runs on the wall clock: steps keep
coming while a query is in flight, and its answer is applied at the step it arrives.

Variants (Section 4, Appendix B):

``low_level_policy``     the full instruction for the whole budget, no plan.
``periodic_trigger``     advance every ``periodic_interval_steps``; stays on the last subgoal.
``proprio_trigger``      advance when the gripper trigger ends an attempt, without verifying;
                         on the last subgoal it stays there (WidowX), or the plan restarts from
                         its first subgoal (RoboLab-Long), or, as a preset option, the episode
                         ends (``after_last_subgoal``).
``proprio_verifier``     count query after a release or a release-less stretch; complete once
                         the count reaches the required number; otherwise retry in place, or move
                         interchangeable duplicates to the end of the queue (RoboLab-Long).
``privileged_verifier``  the simulator's predicate for the current subgoal held for the settle
                         window with the gripper open; RoboLab-Long sets a subgoal aside after
                         600 steps and returns to it later, except on ordered tasks
                         (``set_aside_exempt``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from ladder_ros.core import events as ev
from ladder_ros.core.errors import UNKNOWN_NAME_GUIDE, InvalidInputError, unknown_name
from ladder_ros.core.events import Event
from ladder_ros.core.presets import END, RESTART, EmbodimentPreset
from ladder_ros.core.queue import SubgoalQueue
from ladder_ros.core.task import Subgoal, TaskCategory
from ladder_ros.core.triggers import GripperEvents, PeriodicTrigger
from ladder_ros.core.verification import (
    VerificationRequest,
    VerificationResult,
    VerificationTiming,
    is_complete,
    required_count,
)


class Variant(str, enum.Enum):
    """The orchestrator variants this package runs (Table 2 of the paper)."""

    LOW_LEVEL_POLICY = "low_level_policy"
    PERIODIC_TRIGGER = "periodic_trigger"
    PROPRIO_TRIGGER = "proprio_trigger"
    PROPRIO_VERIFIER = "proprio_verifier"
    PRIVILEGED_VERIFIER = "privileged_verifier"

    @classmethod
    def parse(cls, name: "str | Variant") -> "Variant":
        if isinstance(name, Variant):
            return name
        try:
            return cls(name)
        except ValueError:
            raise unknown_name("variant", str(name), [v.value for v in cls], see=UNKNOWN_NAME_GUIDE) from None

    @property
    def needs_verifier(self) -> bool:
        return self is Variant.PROPRIO_VERIFIER

    @property
    def needs_privileged_state(self) -> bool:
        return self is Variant.PRIVILEGED_VERIFIER


@dataclass(frozen=True)
class StepInput:
    """What the orchestrator reads at one control step.

    ``gripper``: the gripper monitor's events for this step (attempt ends, releases, open or
    not), computed from the aperture by :class:`~ladder_ros.core.triggers.GripperMonitor` — in the
    reference loop in-process, in the ROS graph by the gripper trigger node. ``goal_states``: the
    simulator's per-subgoal predicates in plan order (privileged verifier only; None on a robot).
    """

    step: int
    gripper: GripperEvents
    goal_states: tuple[bool, ...] | None = None


@dataclass(frozen=True)
class Decision:
    """The orchestrator's answer for one step.

    ``instruction`` is what the low-level policy must follow now (None once finished: hold still).
    ``request`` is a verification query to answer before acting (lockstep) or in the background
    (wall clock). ``events`` are the events since the previous decision.
    """

    step: int
    instruction: str | None
    request: VerificationRequest | None
    events: tuple[Event, ...]
    finished: bool
    finish_reason: str | None


class Orchestrator:
    """Shared machinery: queue, budget, events, verification plumbing. Subclasses add the rule."""

    variant: Variant

    def __init__(self, preset: EmbodimentPreset, plan: Sequence[Subgoal], *, instruction: str,
                 budget_steps: int, category: TaskCategory | None = None):
        if not isinstance(budget_steps, int) or isinstance(budget_steps, bool) or budget_steps <= 0:
            raise InvalidInputError(f"budget_steps must be a positive integer, got {budget_steps!r}")
        if not isinstance(instruction, str) or not instruction.strip():
            raise InvalidInputError(f"instruction must be a non-empty string, got {instruction!r}")
        self.preset = preset
        self.instruction = instruction
        self.budget_steps = budget_steps
        self.category = category
        self.queue = SubgoalQueue(plan)
        self.events: list[Event] = []
        self._new_events: list[Event] = []
        self.last_step = -1
        self.started = False
        self.finished = False
        self.finish_reason: str | None = None
        self.finish_step: int | None = None
        self.pending_request: VerificationRequest | None = None
        self._next_request_id = 1
        self.subgoal_start_step = 0

    # ------------------------------------------------------------------ public API
    @property
    def plan(self) -> tuple[Subgoal, ...]:
        return self.queue.plan

    @property
    def current_instruction(self) -> str | None:
        if self.finished:
            return None
        subgoal = self.queue.current_subgoal
        return subgoal.text if subgoal is not None else None

    def observe(self, inp: StepInput) -> Decision:
        """Feed step ``inp.step``. Invalid input raises before any state changes."""
        self._validate(inp)
        self.last_step = inp.step
        if not self.started:
            self._start(inp.step)
        if not self.finished:
            if inp.step >= self.budget_steps:
                self._finish(inp.step, "budget_exhausted")
            else:
                self._on_step(inp)
        return self._decision()

    def resolve(self, result: VerificationResult) -> Decision:
        """Apply a verification answer; an answer to no pending query is recorded and ignored."""
        request = self.pending_request
        if request is None or result.request_id != request.request_id or self.finished:
            self._emit(self.last_step, ev.VERIFICATION_IGNORED, request_id=result.request_id,
                       count=result.count, source=result.source)
            return self._decision()
        self.pending_request = None
        complete = is_complete(result.count, request.required)
        self._emit(self.last_step, ev.VERIFICATION_ANSWERED, request_id=request.request_id,
                   plan_index=request.plan_index, count=result.count, required=request.required,
                   complete=complete, source=result.source, error=result.error)
        self._on_answer(request, complete)
        return self._decision()

    def abort(self, reason: str) -> Decision:
        """End the episode now (operator abort, dead node); the queue is kept in the summary."""
        if not self.finished:
            self._finish(max(self.last_step, 0), f"aborted: {reason}")
        return self._decision()

    def summary(self) -> dict:
        """The queue's final bookkeeping, for scoring and the episode record."""
        return {
            "variant": self.variant.value,
            "plan": [s.to_dict() for s in self.plan],
            "completed": list(self.queue.completed),
            "advanced": list(self.queue.advanced),
            "pending": list(self.queue.pending),
            "ever_current": sorted(self.queue.ever_current) if self.variant is not Variant.LOW_LEVEL_POLICY else [],
            "finish_reason": self.finish_reason,
            "finish_step": self.finish_step,
        }

    # ------------------------------------------------------------------ hooks
    def _on_step(self, inp: StepInput) -> None:
        """The variant's rule for one step."""

    def _on_answer(self, request: VerificationRequest, complete: bool) -> None:
        raise InvalidInputError(f"variant {self.variant.value} sends no verification queries")

    def _on_subgoal_started(self, step: int) -> None:
        """Reset per-subgoal timers."""

    # ------------------------------------------------------------------ machinery
    def _validate(self, inp: StepInput) -> None:
        if not isinstance(inp.step, int) or isinstance(inp.step, bool) or inp.step < 0:
            raise InvalidInputError(f"step must be a non-negative integer, got {inp.step!r}")
        if inp.step <= self.last_step:
            raise InvalidInputError(f"steps must increase: got {inp.step} after {self.last_step}")
        if not isinstance(inp.gripper, GripperEvents) or inp.gripper.step != inp.step:
            raise InvalidInputError(f"gripper events must be those of step {inp.step}, got {inp.gripper!r}")

    def _emit(self, step: int, kind: str, **data) -> None:
        event = Event(step=step, kind=kind, data=data)
        self.events.append(event)
        self._new_events.append(event)

    def _decision(self) -> Decision:
        new, self._new_events = tuple(self._new_events), []
        instruction = None
        if not self.finished:
            instruction = (self.instruction if self.variant is Variant.LOW_LEVEL_POLICY
                           else self.current_instruction)
        return Decision(step=self.last_step, instruction=instruction, request=self.pending_request,
                        events=new, finished=self.finished, finish_reason=self.finish_reason)

    def _start(self, step: int) -> None:
        self.started = True
        self._emit(step, ev.EPISODE_STARTED, variant=self.variant.value, preset=self.preset.name,
                   instruction=self.instruction, plan=[s.text for s in self.plan],
                   budget_steps=self.budget_steps)
        if self.variant is not Variant.LOW_LEVEL_POLICY:
            self._start_subgoal(step)

    def _start_subgoal(self, step: int) -> None:
        self.subgoal_start_step = step
        index = self.queue.current
        subgoal = self.plan[index]
        self._emit(step, ev.SUBGOAL_STARTED, plan_index=index, text=subgoal.text,
                   object=subgoal.object, destination=subgoal.destination)
        self._on_subgoal_started(step)

    def _finish(self, step: int, reason: str) -> None:
        self.finished = True
        self.finish_reason = reason
        self.finish_step = step
        self.pending_request = None
        self._emit(step, ev.EPISODE_FINISHED, reason=reason, completed=list(self.queue.completed),
                   advanced=list(self.queue.advanced), pending=list(self.queue.pending))

    def _queue_changed(self, step: int, reason: str) -> None:
        self._emit(step, ev.QUEUE_CHANGED, reason=reason, pending=list(self.queue.pending))

    def _complete_current(self, step: int, by: str) -> None:
        index = self.queue.complete_current()
        self._emit(step, ev.SUBGOAL_COMPLETED, plan_index=index, by=by)
        if self.queue.current is None:
            self._finish(step, "plan_complete")
        else:
            self._start_subgoal(step)


class LowLevelPolicyOrchestrator(Orchestrator):
    """No orchestrator: the full instruction for the whole budget (the paper's baseline)."""

    variant = Variant.LOW_LEVEL_POLICY


class PeriodicTriggerOrchestrator(Orchestrator):
    """Advance every ``periodic_interval_steps`` steps; stay on the last subgoal (Appendix B)."""

    variant = Variant.PERIODIC_TRIGGER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trigger = PeriodicTrigger(self.preset.periodic_interval_steps)

    def _on_step(self, inp: StepInput) -> None:
        fired = self.trigger.update(inp.step)
        if fired is None:
            return
        self._emit(inp.step, ev.ATTEMPT_ENDED, **fired.to_dict())
        if len(self.queue.pending) > 1:
            index = self.queue.advance_current()
            self._emit(inp.step, ev.SUBGOAL_ADVANCED, plan_index=index, verified=False)
            self._start_subgoal(inp.step)

    def _on_subgoal_started(self, step: int) -> None:
        self.trigger.restart(step)


class ProprioTriggerOrchestrator(Orchestrator):
    """Advance, without verifying, whenever the gripper trigger ends an attempt (Appendix B)."""

    variant = Variant.PROPRIO_TRIGGER

    def _on_step(self, inp: StepInput) -> None:
        ended = inp.gripper.attempt_end
        if inp.gripper.suppressed is not None:
            self._emit(inp.step, ev.RELEASE_SUPPRESSED, close_steps=inp.gripper.suppressed.close_steps)
        if ended is None:
            return
        self._emit(inp.step, ev.ATTEMPT_ENDED, **ended.to_dict())
        after_last = self.preset.after_last_subgoal
        if len(self.queue.pending) == 1 and after_last not in (END, RESTART):
            return  # nothing to advance to: stay on the last subgoal, as the periodic trigger does
        index = self.queue.advance_current()
        self._emit(inp.step, ev.SUBGOAL_ADVANCED, plan_index=index, verified=False)
        if self.queue.current is None:
            if after_last == END:
                self._finish(inp.step, "plan_exhausted")
                return
            self.queue.restart()
            self._queue_changed(inp.step, "restart")
        self._start_subgoal(inp.step)


class ProprioVerifierOrchestrator(Orchestrator):
    """Count queries timed by the gripper; the count rule decides (Appendix B)."""

    variant = Variant.PROPRIO_VERIFIER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.timing = VerificationTiming(self.preset.verifier_timing)
        self._release_in_flight: int | None = None

    def _on_subgoal_started(self, step: int) -> None:
        self.timing.restart(step)

    def _on_step(self, inp: StepInput) -> None:
        ended = inp.gripper.release
        released = ended is not None and ended.reason == "release"
        if released:
            self._emit(inp.step, ev.ATTEMPT_ENDED, **ended.to_dict())
        if self.pending_request is not None:  # wall clock: a query is in flight
            if released:
                self._release_in_flight = inp.step
            return
        reason = self.timing.update(inp.step, released)
        if reason is None:
            return
        index = self.queue.current
        subgoal = self.plan[index]
        required = required_count(subgoal, self.queue.completed_subgoals(),
                                  revisit=self.category is TaskCategory.REVISIT)
        self.pending_request = VerificationRequest(request_id=self._next_request_id, step=inp.step,
                                                   plan_index=index, subgoal=subgoal, required=required,
                                                   reason=reason)
        self._next_request_id += 1
        self._release_in_flight = None
        self._emit(inp.step, ev.VERIFICATION_REQUESTED, request_id=self.pending_request.request_id,
                   plan_index=index, text=subgoal.text, required=required, reason=reason)

    def _interchangeable(self, index: int) -> bool:
        ordered = self.category is not None and self.category.is_order_constrained
        return self.queue.occurrences(index) > 1 and not ordered

    def _on_answer(self, request: VerificationRequest, complete: bool) -> None:
        step = self.last_step
        late_release, self._release_in_flight = self._release_in_flight, None
        if complete:
            self._complete_current(step, by="verifier")
            return
        index = self.queue.current
        if (self.preset.move_incomplete_duplicates_to_end and self._interchangeable(index)
                and len(self.queue.pending) > 1):
            self.queue.move_current_to_end()
            self._queue_changed(step, "moved_to_end")
            self._start_subgoal(step)
            return
        self._queue_changed(step, "retry_in_place")
        self.timing.restart(step)
        if late_release is not None:  # wall clock: a release came while the query was in flight
            self.timing.note_release(late_release)


class PrivilegedVerifierOrchestrator(Orchestrator):
    """The simulator's predicate, held for the settle window with the gripper open (Appendix B)."""

    variant = Variant.PRIVILEGED_VERIFIER

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.held_steps = 0

    def _on_subgoal_started(self, step: int) -> None:
        self.held_steps = 0

    def _validate(self, inp: StepInput) -> None:
        super()._validate(inp)
        if inp.goal_states is None:
            raise InvalidInputError("the privileged verifier needs the simulator's goal states")
        if len(inp.goal_states) != len(self.plan):
            raise InvalidInputError(f"expected {len(self.plan)} goal states (one per subgoal), "
                                    f"got {len(inp.goal_states)}")

    def _set_aside_allowed(self) -> bool:
        return self.preset.set_aside_allowed(self.category) and len(self.queue.pending) > 1

    def _on_step(self, inp: StepInput) -> None:
        index = self.queue.current
        self.held_steps = self.held_steps + 1 if (inp.goal_states[index] and inp.gripper.is_open) else 0
        if self.held_steps >= self.preset.privileged_settle_steps:
            self._complete_current(inp.step, by="privileged")
            return
        if self._set_aside_allowed() and inp.step - self.subgoal_start_step >= self.preset.privileged_set_aside_steps:
            self.queue.move_current_to_end()
            self._queue_changed(inp.step, "set_aside")
            self._start_subgoal(inp.step)


_VARIANT_CLASSES: dict[Variant, type[Orchestrator]] = {
    cls.variant: cls for cls in (LowLevelPolicyOrchestrator, PeriodicTriggerOrchestrator,
                                 ProprioTriggerOrchestrator, ProprioVerifierOrchestrator,
                                 PrivilegedVerifierOrchestrator)
}


def make_orchestrator(variant: "str | Variant", preset: EmbodimentPreset, plan: Sequence[Subgoal], *,
                      instruction: str, budget_steps: int, category: TaskCategory | None = None) -> Orchestrator:
    """The orchestrator for ``variant``; an unknown name lists the valid ones."""
    cls = _VARIANT_CLASSES[Variant.parse(variant)]
    return cls(preset, plan, instruction=instruction, budget_steps=budget_steps, category=category)
