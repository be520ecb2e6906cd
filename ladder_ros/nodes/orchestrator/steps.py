"""Each control step's decision: the step's inputs in, the core's decision and its events out.

The gripper trigger's events of step ``t`` (and, for the privileged verifier, the sim bridge's goal
predicates of ``t``) go to the core orchestrator, which answers with the step's instruction, the
events it emitted and, when it wants the verifier's count, a query. The decision goes out on
``orchestrator/decision`` (and the subgoal, when it changed, on ``orchestrator/current_subgoal``).
Lockstep: the inputs of a step are paired by stamp and taken strictly in step order, and a step
that asked the verifier is decided only once the answer is in, since the simulator waits for it.
Wall clock: the decision goes out at once and the answer is applied when it arrives (the core keeps
the query pending). When a decision finishes the episode, the final one goes out and the ending
is told. No rclpy here: the node hands in documents it has read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from ladder_ros.core.errors import LadderError
from ladder_ros.core.orchestrator import Decision, StepInput
from ladder_ros.messages import (
    ABORTED,
    DecisionDoc,
    EpisodeEventDoc,
    GripperEventsDoc,
    PrivilegedStateDoc,
    VerificationRequestDoc,
    VerificationResultDoc,
)
from ladder_ros.nodes.orchestrator import stall_watch
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.runtime.step_sync import StepAligner

if TYPE_CHECKING:
    from ladder_ros.nodes.orchestrator.outbox import Outbox

GRIPPER = "gripper"
PRIVILEGED = "privileged"


class StepDecider:
    """Turns each step's inputs into the core's decision and publishes it (module docstring)."""

    def __init__(self, episode: Episode, outbox: Outbox, stall: StallWatch, *, lockstep: bool, logger,
                 on_finished: Callable[[], None]):
        """``on_finished`` runs once the final decision of an episode went out."""
        self._episode = episode
        self._outbox = outbox
        self._stall = stall
        self._lockstep = lockstep
        self._log = logger
        self._on_finished = on_finished
        self._aligner = StepAligner({GRIPPER})
        self._event_index = 0
        self.last_decision: DecisionDoc | None = None
        self.decision_sent_at = 0.0  # monotonic: when the last decision went out
        self.awaiting: VerificationRequestDoc | None = None  # lockstep: the step waits for this answer
        self.request_first_sent = 0.0  # monotonic: when the pending query was first sent
        self.request_last_sent = 0.0  # monotonic: when it was last sent

    def begin(self, origin_ns: int, rate_hz: float, privileged: bool) -> None:
        """A new episode whose step 0 is stamped ``origin_ns``; ``privileged``: its steps need goal predicates."""
        self._event_index = 0
        self.last_decision = None
        self.awaiting = None
        self._aligner.start(origin_ns, rate_hz, {GRIPPER, PRIVILEGED} if privileged else {GRIPPER})

    @property
    def wants_privileged(self) -> bool:
        """The episode's steps wait for the sim bridge's goal predicates (the privileged verifier)."""
        return PRIVILEGED in self._aligner.required

    # ------------------------------------------------------------------ inputs
    def gripper_events(self, doc: GripperEventsDoc) -> None:
        episode = self._episode
        if episode.is_current(doc.episode_id):
            self._stall.saw(stall_watch.GRIPPER_EVENTS, doc.step, time.monotonic())
        events = doc.gripper_events()
        if not self._lockstep:
            if episode.running and episode.is_current(doc.episode_id):
                self._observe(doc.step, doc.stamp_ns, events, None)
            return
        self._aligner.add(doc.stamp_ns, GRIPPER, events)
        self.process_ready()

    def privileged_state(self, doc: PrivilegedStateDoc) -> None:
        if self._episode.is_current(doc.episode_id):
            self._stall.saw(stall_watch.PRIVILEGED, doc.step, time.monotonic())
        self._aligner.add(doc.stamp_ns, PRIVILEGED, tuple(doc.goal_states))
        self.process_ready()

    def saw_stamp(self, name: str, stamp_ns: int) -> None:
        """Stall diagnosis only: input ``name`` (joint states, the policy's action) stamped ``stamp_ns`` came."""
        if not self._episode.running:
            return
        step = self._episode.status.step_of_stamp(stamp_ns) if self._lockstep else 0
        if step is not None:
            self._stall.saw(name, step, time.monotonic())

    def missing_input(self, now: float, fresh_s: float) -> str:
        """The input a stalled episode waits for, with its producer (stall watchdog)."""
        if self._lockstep:
            return self._stall.waiting_for_lockstep(self._aligner.next_step, self.wants_privileged)
        orchestrator = self._episode.orchestrator
        last = orchestrator.last_step if orchestrator is not None else -1
        return self._stall.waiting_for_wall_clock(now, last + 1, fresh_s)

    def process_ready(self) -> None:
        """Decide every step whose inputs are all in (lockstep)."""
        if self._episode.planning is not None:
            return  # lockstep: the first step waits until the plan is in
        for step, inputs in self._aligner.pop_ready():
            self._observe(step, self._episode.step_stamp_ns(step), inputs[GRIPPER], inputs.get(PRIVILEGED))

    # ------------------------------------------------------------------ decisions
    def _observe(self, step: int, stamp_ns: int, events, goal_states) -> None:
        episode = self._episode
        orchestrator = episode.orchestrator
        if orchestrator is None or episode.finished is not None or self.awaiting is not None:
            return
        try:
            decision = orchestrator.observe(StepInput(step=step, gripper=events, goal_states=goal_states))
        except LadderError as exc:
            self._log.error(f"step {step}: input refused: {exc}")
            return
        self._note_progress()
        self._publish_events(decision)
        if decision.request is not None and self.awaiting is None and (
                self.last_decision is None or self.last_decision.pending_request != decision.request.request_id):
            request = VerificationRequestDoc.of(episode.status.episode_id, stamp_ns, decision.request)
            self._send_request(request, first=True)
            if self._lockstep:
                self.awaiting = request
                episode.update_status(step=step, pending_request=decision.request.request_id)
                return
        self._conclude(step, stamp_ns, decision)

    def verification_result(self, doc: VerificationResultDoc) -> None:
        episode = self._episode
        result = doc.verification_result()
        orchestrator = episode.orchestrator
        if (orchestrator is None or not episode.is_current(doc.episode_id) or orchestrator.pending_request is None
                or result.request_id != orchestrator.pending_request.request_id):
            return  # a repeat, or an answer to a query that is no longer asked
        if not episode.status.verifier_available:
            self._log.info("the verifier answers again; the episode resumes")
            episode.update_status(verifier_available=True, message="")
        decision = orchestrator.resolve(result)
        self._note_progress()
        self._publish_events(decision)
        awaiting, self.awaiting = self.awaiting, None
        if awaiting is not None:  # lockstep: this completes the step the simulator is waiting on
            self._conclude(awaiting.step, awaiting.stamp_ns, decision)
        else:
            self._conclude(orchestrator.last_step, episode.step_stamp_ns(orchestrator.last_step), decision)

    def abort(self, reason: str) -> None:
        """End the running episode now, from outside its rules (operator, watchdog, planner, signal)."""
        orchestrator = self._episode.orchestrator
        assert orchestrator is not None
        self.awaiting = None
        self._episode.end_state = ABORTED
        decision = orchestrator.abort(reason)
        self._publish_events(decision)
        self._finish(decision)

    def _conclude(self, step: int, stamp_ns: int, decision: Decision) -> None:
        """Publish the step's final decision (and end the episode when it says so)."""
        if decision.finished:
            self._finish(decision)
            return
        self._publish_decision(step, stamp_ns, decision)

    def _finish(self, decision: Decision) -> None:
        orchestrator = self._episode.orchestrator
        assert orchestrator is not None
        step = max(orchestrator.last_step, 0)
        stamp = self._episode.step_stamp_ns(step)
        self._publish_decision(step, stamp, decision, summary=orchestrator.summary())
        assert self.last_decision is not None
        self._episode.finish(self.last_decision, stamp, time.monotonic())
        self._aligner.stop()
        self._on_finished()

    def _publish_decision(self, step: int, stamp_ns: int, decision: Decision, summary: dict | None = None) -> None:
        episode = self._episode
        assert episode.orchestrator is not None
        doc = DecisionDoc(episode_id=episode.status.episode_id, step=step, stamp_ns=stamp_ns,
                          instruction=decision.instruction, plan_index=episode.orchestrator.queue.current,
                          finished=decision.finished, finish_reason=decision.finish_reason,
                          pending_request=None if decision.request is None else decision.request.request_id,
                          summary=summary)
        previous = self.last_decision
        self.last_decision = doc
        self._outbox.decision(doc)
        self.decision_sent_at = time.monotonic()
        if previous is None or previous.instruction != doc.instruction:
            self._outbox.subgoal(doc.instruction or "")
        # The status follows the instruction, not every step; it also marks the first executed step
        # (step >= 1), which tells a node coming up mid-episode that nodes before it served this one.
        status = episode.status
        if (status.plan_index, status.pending_request, status.instruction) != (
                doc.plan_index, doc.pending_request, doc.instruction) or status.step < 1 <= step:
            episode.update_status(step=step, plan_index=doc.plan_index, instruction=doc.instruction,
                                  pending_request=doc.pending_request)

    def republish_last_decision(self) -> None:
        """Send the latest decision again (lockstep: the next step did not come)."""
        if self.last_decision is not None:
            self._outbox.decision(self.last_decision)
            self.decision_sent_at = time.monotonic()

    def _publish_events(self, decision: Decision) -> None:
        for event in decision.events:
            doc = EpisodeEventDoc(episode_id=self._episode.status.episode_id, index=self._event_index,
                                  event=event.to_dict())
            self._event_index += 1
            self._outbox.event(doc)
            self._episode.changed = True

    def _note_progress(self) -> None:
        """A step advanced: clear a stall report."""
        if self._stall.progressed(time.monotonic()) and self._episode.status.waiting_for:
            self._log.info(f"the episode moves again (it waited for {self._episode.status.waiting_for})")
            self._episode.update_status(waiting_for="", message="")

    # ------------------------------------------------------------------ verification queries
    def _send_request(self, request: VerificationRequestDoc, first: bool) -> None:
        now = time.monotonic()
        if first:
            self.request_first_sent = now
        self.request_last_sent = now
        self._outbox.verification_request(request)

    def resend_request(self, request: VerificationRequestDoc) -> None:
        """Send an unanswered query again (the verifier may have restarted)."""
        self._send_request(request, first=False)

    def pending_request(self) -> VerificationRequestDoc | None:
        """The query the episode waits on, if any."""
        if self.awaiting is not None:
            return self.awaiting
        orchestrator = self._episode.orchestrator
        if orchestrator is not None and orchestrator.pending_request is not None:
            request = orchestrator.pending_request
            return VerificationRequestDoc.of(self._episode.status.episode_id,
                                             self._episode.step_stamp_ns(request.step), request)
        return None
