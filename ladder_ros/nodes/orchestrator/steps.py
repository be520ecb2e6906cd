"""The orchestrator node's steps: each step's inputs, the core's decision, verification.

A part of :class:`~ladder_ros.nodes.orchestrator.node.OrchestratorNode`, split out by responsibility: it works on
the node's state (``self.status``, ``self.orchestrator``, the publishers) that the node sets up.
"""

from __future__ import annotations

import time

from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.errors import LadderError
from ladder_ros.core.orchestrator import Decision, StepInput
from ladder_ros.messages import (
    RUNNING,
    DecisionDoc,
    EpisodeEventDoc,
    GripperEventsDoc,
    PrivilegedStateDoc,
    SafetyInterventionDoc,
    VerificationRequestDoc,
    VerificationResultDoc,
)
from ladder_ros.nodes.orchestrator import stall_watch
from ladder_ros.runtime.endpoints import received_document
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import stamp_to_ns

GRIPPER = "gripper"
PRIVILEGED = "privileged"


class StepDecisions:
    """Steps: the inputs of each step, the core's decision, its events, verification requests and answers."""

    def _on_gripper_events(self, msg: interfaces.GripperEvents) -> None:
        doc = received_document(self, msg, GripperEventsDoc, "gripper events")
        if doc is None:
            return
        if doc.episode_id == self.status.episode_id:
            self.stall.saw(stall_watch.GRIPPER_EVENTS, doc.step, time.monotonic())
        events = doc.gripper_events()
        if not self.lockstep:
            if self.status.state == RUNNING and doc.episode_id == self.status.episode_id:
                self._observe(doc.step, doc.stamp_ns, events, None)
            return
        self.aligner.add(doc.stamp_ns, GRIPPER, events)
        self._process_ready()

    def _on_privileged(self, msg: interfaces.PrivilegedState) -> None:
        if PRIVILEGED not in self.aligner.required:
            return
        doc = received_document(self, msg, PrivilegedStateDoc, "privileged state")
        if doc is None:
            return
        if doc.episode_id == self.status.episode_id:
            self.stall.saw(stall_watch.PRIVILEGED, doc.step, time.monotonic())
        self.aligner.add(doc.stamp_ns, PRIVILEGED, tuple(doc.goal_states))
        self._process_ready()

    def _on_joint_state(self, msg: JointState) -> None:
        """Stall diagnosis only: which step's joint state (the start of a step's chain) has come."""
        self._saw_stamp(stall_watch.JOINT_STATES, msg.header.stamp)

    def _on_action(self, msg: JointTrajectory) -> None:
        """Stall diagnosis only: which step's action has come."""
        self._saw_stamp(stall_watch.ACTION, msg.header.stamp)

    def _saw_stamp(self, name: str, stamp) -> None:
        if self.status.state != RUNNING:
            return
        step = self.status.step_of_stamp(stamp_to_ns(stamp)) if self.lockstep else 0
        if step is not None:
            self.stall.saw(name, step, time.monotonic())

    def _on_safety(self, msg: interfaces.SafetyIntervention) -> None:
        doc = received_document(self, msg, SafetyInterventionDoc, "safety intervention")
        if doc is not None and doc.episode_id == self.status.episode_id and self.status.state == RUNNING:
            self._safety_counts = dict(doc.counts)

    def _process_ready(self) -> None:
        if self._planning is not None:
            return  # lockstep: the first step waits until the plan is in
        for step, inputs in self.aligner.pop_ready():
            self._observe(step, self.status.step_stamp_ns(step), inputs[GRIPPER], inputs.get(PRIVILEGED))

    def _observe(self, step: int, stamp_ns: int, events, goal_states) -> None:
        if self.orchestrator is None or self._finished_decision is not None or self._awaiting is not None:
            return
        try:
            decision = self.orchestrator.observe(StepInput(step=step, gripper=events, goal_states=goal_states))
        except LadderError as exc:
            self.get_logger().error(f"step {step}: input refused: {exc}")
            return
        self._note_progress()
        self._publish_events(decision)
        if decision.request is not None and self._awaiting is None and (
                self._last_decision is None or self._last_decision.pending_request != decision.request.request_id):
            request = VerificationRequestDoc.of(self.status.episode_id, stamp_ns, decision.request)
            self._send_request(request, first=True)
            if self.lockstep:
                self._awaiting = request
                self._publish_status(self._replace_status(step=step, pending_request=decision.request.request_id))
                return
        self._conclude(step, stamp_ns, decision)

    def _conclude(self, step: int, stamp_ns: int, decision: Decision) -> None:
        """Publish the step's final decision (and end the episode when it says so)."""
        if decision.finished:
            self._finish(decision)
            return
        self._publish_decision(step, stamp_ns, decision)

    def _publish_decision(self, step: int, stamp_ns: int, decision: Decision, summary: dict | None = None) -> None:
        assert self.orchestrator is not None
        doc = DecisionDoc(episode_id=self.status.episode_id, step=step, stamp_ns=stamp_ns,
                          instruction=decision.instruction, plan_index=self.orchestrator.queue.current,
                          finished=decision.finished, finish_reason=decision.finish_reason,
                          pending_request=None if decision.request is None else decision.request.request_id,
                          summary=summary)
        previous = self._last_decision
        self._last_decision = doc
        self._decision_pub.publish(document_to_msg(doc))
        self._decision_sent_at = time.monotonic()
        if previous is None or previous.instruction != doc.instruction:
            self._subgoal_pub.publish(String(data=doc.instruction or ""))
        # The status follows the instruction, not every step; it also marks the first executed step
        # (step >= 1), which tells a node coming up mid-episode that nodes before it served this one.
        if (self.status.plan_index, self.status.pending_request, self.status.instruction) != (
                doc.plan_index, doc.pending_request, doc.instruction) or self.status.step < 1 <= step:
            self._publish_status(self._replace_status(step=step, plan_index=doc.plan_index,
                                                      instruction=doc.instruction,
                                                      pending_request=doc.pending_request))

    def _publish_events(self, decision: Decision) -> None:
        for event in decision.events:
            doc = EpisodeEventDoc(episode_id=self.status.episode_id, index=self._event_index, event=event.to_dict())
            self._event_index += 1
            self._events_pub.publish(document_to_msg(doc))
            self._journal_dirty = True

    def _note_progress(self) -> None:
        """A step advanced: clear a stall report."""
        if self.stall.progressed(time.monotonic()) and self.status.waiting_for:
            self.get_logger().info(f"the episode moves again (it waited for {self.status.waiting_for})")
            self._publish_status(self._replace_status(waiting_for="", message=""))

    def _send_request(self, request: VerificationRequestDoc, first: bool) -> None:
        now = time.monotonic()
        if first:
            self._request_first_sent = now
        self._request_last_sent = now
        self._request_pub.publish(document_to_msg(request))

    def _pending_request_doc(self) -> VerificationRequestDoc | None:
        if self._awaiting is not None:
            return self._awaiting
        if self.orchestrator is not None and self.orchestrator.pending_request is not None:
            request = self.orchestrator.pending_request
            return VerificationRequestDoc.of(self.status.episode_id, self.status.step_stamp_ns(request.step), request)
        return None

    def _on_verification_result(self, msg: interfaces.VerificationResult) -> None:
        doc = received_document(self, msg, VerificationResultDoc, "verification result")
        if doc is None:
            return
        result = doc.verification_result()
        orchestrator = self.orchestrator
        if (orchestrator is None or doc.episode_id != self.status.episode_id or orchestrator.pending_request is None
                or result.request_id != orchestrator.pending_request.request_id):
            return  # a repeat, or an answer to a query that is no longer asked
        if not self.status.verifier_available:
            self.get_logger().info("the verifier answers again; the episode resumes")
            self._publish_status(self._replace_status(verifier_available=True, message=""))
        decision = orchestrator.resolve(result)
        self._note_progress()
        self._publish_events(decision)
        awaiting, self._awaiting = self._awaiting, None
        if awaiting is not None:  # lockstep: this completes the step the simulator is waiting on
            self._conclude(awaiting.step, awaiting.stamp_ns, decision)
        else:
            self._conclude(orchestrator.last_step, self.status.step_stamp_ns(orchestrator.last_step), decision)
