"""The orchestrator node's episode control: commands and services, start checks, planning, ending.

A part of :class:`~ladder_ros.nodes.orchestrator.node.OrchestratorNode`, split out by responsibility: it works on
the node's state (``self.status``, ``self.orchestrator``, the publishers) that the node sets up.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from std_srvs.srv import Trigger
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.errors import LadderError
from ladder_ros.core.orchestrator import Variant, make_orchestrator
from ladder_ros.core.record import PLANNER, REFERENCE
from ladder_ros.messages import (
    ABORT,
    ABORTED,
    FINISHED,
    RUNNING,
    START,
    STOP,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeStatus,
    PlanRequestDoc,
    PlanResultDoc,
    SchemaError,
    episode_id_problem,
)
from ladder_ros.nodes.orchestrator.steps import GRIPPER, PRIVILEGED
from ladder_ros.runtime.endpoints import received_document
from ladder_ros.interface_conversions import document_to_msg

NS_PER_S = 1_000_000_000
# Accepted starts remembered to answer a repeat of one: a client sends its start again until it hears back, as a
# first message can be lost while DDS discovery completes; a handful covers any repeat still in flight.
ACCEPTED_STARTS_KEPT = 16


class EpisodeControl:
    """Episode control: commands and services, the start checks, planning, ending an episode from outside."""

    def _on_command(self, msg: interfaces.EpisodeCommand) -> None:
        command = received_document(self, msg, EpisodeCommand, "episode command")
        if command is None:
            return
        if command.command == START:
            if not self._repeated_start(command):
                self._start_episode(command)
        elif command.command in (STOP, ABORT):
            if command.episode_id and command.episode_id != self.status.episode_id:
                self.get_logger().warning(f"{command.command} for episode {command.episode_id!r} ignored: "
                                          f"the current one is {self.status.episode_id!r}")
                self._reply(command, False, f"episode {command.episode_id!r} is not the current one")
                return
            reason = command.reason or ("operator stop" if command.command == STOP else "operator abort")
            self.policy_gate.cancel(reason)
            accepted, message = self.end_episode(reason)
            self._reply(command, accepted, message)

    def _reply(self, command: EpisodeCommand, accepted: bool, reason: str = "", assigned_id: str = "") -> None:
        self._reply_pub.publish(document_to_msg(EpisodeCommandReply(
            command=command.command, episode_id=command.episode_id, accepted=accepted, reason=reason,
            assigned_id=assigned_id)))

    def _on_stop_service(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.end_episode("operator stop")
        return response

    def _on_abort_service(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.end_episode("operator abort")
        return response

    def _refuse(self, command: EpisodeCommand, why: str) -> None:
        """A refused start: logged and answered on episode/command_reply; the episode status is not touched."""
        self.get_logger().error(f"start refused: {why}")
        self._reply(command, False, f"start refused: {why}")

    def _check_start(self, command: EpisodeCommand) -> None:
        """Everything a start must satisfy before anything moves; raises LadderError naming what is wrong."""
        if self.status.state == RUNNING:
            raise LadderError(f"episode {self.status.episode_id} is running")
        if command.episode_id:
            problem = episode_id_problem(command.episode_id)
            if problem:
                raise LadderError(problem)
            if command.episode_id in self._used_ids:
                raise LadderError(f"episode id {command.episode_id!r} was used before; every episode needs a fresh "
                                  "id (its recording and record are named after it)")
        if command.seed < 0:
            raise LadderError(f"seed must be >= 0, got {command.seed}")

    def _repeated_start(self, command: EpisodeCommand) -> bool:
        """A start equal to one taken already (accepted, or deferred for the policy): never run twice.

        Its sender repeats a start until it hears back; an accepted one is answered again, a deferred one
        is answered when it starts. A start that reuses an id with other fields is not a repeat (refused as
        a reused id).
        """
        if not command.episode_id:
            return False  # the orchestrator names it: every such start is a new episode
        if self.policy_gate.is_repeat_of_deferred(command):
            return True
        if self._accepted_starts.get(command.episode_id) == command:
            self._reply(command, True, "already started", assigned_id=command.episode_id)
            return True
        return False

    def _start_episode(self, command: EpisodeCommand) -> None:
        try:
            self._check_start(command)
            task = self.suite.task(command.task_id)
            variant = Variant.parse(command.variant or self.params["variant"])
            if variant.needs_privileged_state and not self.lockstep:
                raise LadderError("the privileged verifier needs a simulator (clock_mode lockstep)")
            if command.layout >= task.layouts:
                raise LadderError(f"layout {command.layout} is out of range: task {task.task_id} has "
                                  f"{task.layouts} layouts")
            budget = self.preset.budget_for(task)
            # The privileged verifier takes the ground-truth subgoals and the low-level policy no plan
            # (Section 4): only the other variants ask the planner.
            use_planner = self.params["plan_source"] == "planner" and variant not in (
                Variant.LOW_LEVEL_POLICY, Variant.PRIVILEGED_VERIFIER)
            orchestrator = None if use_planner else make_orchestrator(
                variant, self.preset, list(task.subgoals), instruction=task.instruction, budget_steps=budget,
                category=task.category)
        except LadderError as exc:
            self._refuse(command, str(exc))
            return
        if not self.policy_gate.admit(command):
            return  # deferred until the policy is ready, or refused with its status
        self._episode_count += 1
        now_ns = self.get_clock().now().nanoseconds
        # Step stamps never run backwards across episodes, so a late message of a past episode can
        # never pass for a step of this one (ladder_ros.runtime.step_sync).
        origin = max(now_ns, self._last_end_ns + NS_PER_S)
        episode_id = command.episode_id or self._fresh_id(task.task_id)
        self._used_ids.add(episode_id)
        self.task, self.orchestrator, self._variant = task, orchestrator, variant
        self._plan_record = {"source": PLANNER if orchestrator is None else REFERENCE}
        self._event_index = 0
        self._last_decision = None
        self._awaiting = None
        self._finished_decision = None
        self._end_state = FINISHED
        self._started_wall = time.monotonic()
        self._safety_counts = {}
        self._score = None
        self._interrupted = False
        self.stall.restart(self._started_wall)
        required = {GRIPPER, PRIVILEGED} if variant.needs_privileged_state else {GRIPPER}
        self.aligner.start(origin, self.preset.control_rate_hz, required)
        self.status = EpisodeStatus(
            episode_id=episode_id, state=RUNNING, seq=self.status.seq + 1, task=task.to_dict(),
            variant=variant.value, preset=self.preset.name, layout=command.layout, seed=command.seed,
            plan=[] if orchestrator is None else [s.to_dict() for s in orchestrator.plan], budget_steps=budget,
            clock=self.params["clock_mode"], rate_hz=self.preset.control_rate_hz, origin_ns=origin,
            message="planning" if orchestrator is None else "")
        self._status_pub.publish(document_to_msg(self.status))
        self._write_journal()
        self._reply(command, True, assigned_id=episode_id)
        if command.episode_id:
            self._accepted_starts[command.episode_id] = command
            while len(self._accepted_starts) > ACCEPTED_STARTS_KEPT:
                self._accepted_starts.pop(next(iter(self._accepted_starts)))
        self.get_logger().info(f"episode {episode_id}: {task.task_id} ({variant.value}), layout {command.layout}, "
                               f"seed {command.seed}, budget {budget} steps"
                               + (", plan from the planner" if orchestrator is None else ""))
        if orchestrator is None:
            self._planning = PlanRequestDoc(episode_id=episode_id, step=0, stamp_ns=origin,
                                            instruction=task.instruction)
            self._planning_since = time.monotonic()
            self._send_plan_request()

    def _fresh_id(self, task_id: str) -> str:
        base = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{self._episode_count:03d}-{task_id}"
        episode_id, n = base, 1
        while episode_id in self._used_ids:
            n += 1
            episode_id = f"{base}.{n}"
        return episode_id

    def _send_plan_request(self) -> None:
        assert self._planning is not None
        self._planning_sent = time.monotonic()
        self._plan_request_pub.publish(document_to_msg(self._planning))

    def _on_plan_result(self, msg: interfaces.PlanResult) -> None:
        doc = received_document(self, msg, PlanResultDoc, "plan result")
        if doc is None or self._planning is None or doc.episode_id != self._planning.episode_id:
            return
        self._plan_record = {"source": PLANNER, "planner": doc.source, "error": doc.error,
                             "raw_reply": doc.raw_reply, "latency_ms": doc.latency_ms, "usage": doc.usage}
        try:
            plan = doc.plan()
        except SchemaError as exc:
            self._plan_failed(str(exc))
            return
        assert self.task is not None
        try:
            self.orchestrator = make_orchestrator(self._variant, self.preset, plan,
                                                  instruction=self.task.instruction,
                                                  budget_steps=self.status.budget_steps, category=self.task.category)
        except LadderError as exc:
            self._plan_failed(str(exc))
            return
        self._planning = None
        self.get_logger().info(f"episode {self.status.episode_id}: planned {len(plan)} subgoals: "
                               + "; ".join(s.text for s in plan))
        self._publish_status(self._replace_status(plan=[s.to_dict() for s in plan], message=""))
        self.stall.restart(time.monotonic())  # the steps start now
        self._process_ready()  # the first step has waited for the plan

    def _plan_failed(self, reason: str) -> None:
        """No usable plan: the episode ends as aborted, with the reason (and the raw reply) in its record."""
        assert self.task is not None
        self.get_logger().error(f"episode {self.status.episode_id}: planner failed: {reason}")
        self._planning = None
        self._plan_record.setdefault("error", reason)
        # The queue of the record is the task's reference plan, none of it started.
        self.orchestrator = make_orchestrator(self._variant, self.preset, list(self.task.subgoals),
                                              instruction=self.task.instruction,
                                              budget_steps=self.status.budget_steps, category=self.task.category)
        self.end_episode(f"planner failed: {reason}")

    def end_episode(self, reason: str) -> tuple[bool, str]:
        """Stop or abort the running episode from outside; the queue is kept in the record."""
        if self.status.state == RUNNING and self._planning is not None:
            self._plan_failed(f"episode ended while planning ({reason})")
            return True, f"episode {self.status.episode_id} ended while planning: {reason}"
        if self.status.state != RUNNING or self.orchestrator is None:
            return False, "no episode is running"
        if self._finished_decision is not None:
            return False, f"episode {self.status.episode_id} is already over"
        self._awaiting = None
        self._end_state = ABORTED
        decision = self.orchestrator.abort(reason)
        self._publish_events(decision)
        self._finish(decision)
        return True, f"episode {self.status.episode_id} ended: {reason}"
