"""The orchestrator node: owns the episode and its subgoal queue; decides every step."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Sequence

from rclpy.duration import Duration
from rclpy.executors import Executor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import LadderError
from ladder_ros.core.orchestrator import Decision, Orchestrator, StepInput, Variant, make_orchestrator
from ladder_ros.core.presets import get_preset, parse_preset_options
from ladder_ros.core.record import PLANNER, REFERENCE, graph_record, interrupted_reason
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.core.task import Task
from ladder_ros.messages import (
    ABORT,
    ABORTED,
    FINISHED,
    IDLE,
    LOCKSTEP,
    RUNNING,
    START,
    STOP,
    DecisionDoc,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeEventDoc,
    EpisodeScoreDoc,
    EpisodeStatus,
    GripperEventsDoc,
    PlanRequestDoc,
    PlanResultDoc,
    PrivilegedStateDoc,
    SafetyInterventionDoc,
    SchemaError,
    VerificationRequestDoc,
    VerificationResultDoc,
    episode_id_problem,
)
from ladder_ros.nodes import stall_watch, topics
from ladder_ros.nodes.episode_journal import EpisodeJournal, default_state_dir, journal_path
from ladder_ros.nodes.parameters import ORCHESTRATOR
from ladder_ros.nodes.policy_gate import PolicyGate
from ladder_ros.nodes.runtime import (
    declare_parameters,
    publisher,
    received_document,
    run_node,
    spin_for,
    subscription,
)
from ladder_ros.nodes.stall_watch import StallWatch
from ladder_ros.nodes.step_sync import StepAligner
from ladder_ros.paths import resolve_share_file
from ladder_ros.ros_conversions import document_to_msg, stamp_to_ns

GRIPPER = "gripper"
PRIVILEGED = "privileged"
NS_PER_S = 1_000_000_000
JOURNAL_PERIOD_S = 1.0  # the journal is rewritten at most this often while an episode runs
LAST_WORD_S = 2.0  # on shutdown: how long the final status of an interrupted episode may take to go out


class OrchestratorNode(Node):
    """Runs :func:`~ladder_ros.core.orchestrator.make_orchestrator` for one episode at a time.

    Episodes are started, stopped and aborted from outside the graph through ``episode/command``
    (JSON :class:`EpisodeCommand`) and the ``episode/stop`` / ``episode/abort`` services
    (std_srvs/Trigger). The node owns each episode: it assigns the id and the clock origin, builds
    the plan (the task's reference subgoals, the paper's cached plans; or, with ``plan_source:
    planner``, the VLM planner's subgoals, asked on ``planner/request`` with the first frame while
    that step waits — an unreadable, empty or late plan aborts the episode with the reason and the
    raw reply in its record), publishes the latched ``episode/status`` (task, plan,
    clock, state; the episode record with every event and, in simulation, the privileged score once
    it is over) and ``orchestrator/current_subgoal``.

    Per step ``t`` it observes the gripper trigger's events of ``t`` (and, for the privileged
    verifier, the sim bridge's goal predicates of ``t``), publishes the events the core emits and,
    when the core asks for a count, a verification request. Lockstep: the step's decision is
    published only once the answer is in, and the simulator waits for it. Wall clock: the decision
    goes out at once and the answer is applied when it arrives (the core keeps the query pending).
    An unanswered query is resent every ``verifier_retry_s`` and the verifier is reported
    unavailable; the queue is kept and the episode resumes when an answer comes, or is aborted with
    reason ``verifier unavailable`` after ``verifier_abort_after_s``.

    No episode hangs: when no step advances for ``stall_warn_s`` (outside a pending query or plan,
    which have their own timers) the status names the missing input (``waiting_for``, e.g.
    ``joint_states of step 41``), and after ``stall_abort_s`` the episode is aborted with that
    reason and its record kept (:mod:`ladder_ros.nodes.stall_watch`). A start command is checked
    before anything moves (known task, layout in range, seed >= 0, a fresh id of
    ``[A-Za-z0-9_.-]``); each command gets a reply on ``episode/command_reply`` and a refused start
    never touches the episode status. A start waits for a ready policy (``policy/status``; deferred
    while it warms up, refused while it fails: :mod:`ladder_ros.nodes.policy_gate`), and the record
    waits for the policy's final report of the episode. Stopped by SIGINT/SIGTERM mid-episode, it ends the episode
    with a record marked ``interrupted``; killed, the journal (``state_dir``) lets the next
    orchestrator publish that episode's final status, marked the same way.

    Topics: subscribes ``gripper/events``, ``sim/privileged_state``, ``verifier/result``,
    ``planner/result``, ``sim/episode_score``, ``episode/command``, ``safety/interventions``,
    ``policy/status``, and
    the stamps of ``joint_states`` and ``policy/action`` (stall diagnosis); publishes
    ``orchestrator/decision``, ``orchestrator/events``, ``orchestrator/current_subgoal`` (latched),
    ``verifier/request``, ``planner/request``, ``episode/status`` (latched),
    ``episode/command_reply``. Services: ``episode/stop``, ``episode/abort``. Parameters: preset,
    clock_mode, suite (path), variant, preset_options, plan_source, planner_timeout_s (s),
    verifier_retry_s (s), verifier_abort_after_s (s), decision_resend_s (s), score_timeout_s (s),
    stall_warn_s (s), stall_abort_s (s), state_dir, policy_ready_wait_s (s).
    """

    def __init__(self, *, suite: TaskSuite | None = None, node_name: str = "orchestrator", **node_options):
        """``suite`` replaces the configured suite file (tests)."""
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, ORCHESTRATOR)
        self.preset = get_preset(self.params["preset"], parse_preset_options(self.params["preset_options"]))
        self.lockstep = self.params["clock_mode"] == LOCKSTEP
        self.suite = suite if suite is not None else load_suite(resolve_share_file(self.params["suite"]))
        self._status_pub = publisher(self, String, topics.EPISODE_STATUS)
        self._subgoal_pub = publisher(self, String, topics.CURRENT_SUBGOAL)
        self._decision_pub = publisher(self, String, topics.DECISION)
        self._events_pub = publisher(self, String, topics.EVENTS_TOPIC)
        self._request_pub = publisher(self, String, topics.VERIFY_REQUEST)
        self._plan_request_pub = publisher(self, String, topics.PLAN_REQUEST)
        self._reply_pub = publisher(self, String, topics.COMMAND_REPLY)
        subscription(self, String, topics.GRIPPER_EVENTS, self._on_gripper_events)
        subscription(self, JointState, topics.JOINT_STATES, self._on_joint_state)
        subscription(self, JointTrajectory, topics.ACTION, self._on_action)
        subscription(self, String, topics.SAFETY, self._on_safety)
        subscription(self, String, topics.PLAN_RESULT, self._on_plan_result)
        subscription(self, String, topics.PRIVILEGED, self._on_privileged)
        subscription(self, String, topics.VERIFY_RESULT, self._on_verification_result)
        subscription(self, String, topics.SCORE, self._on_score)
        subscription(self, String, topics.EPISODE_COMMAND, self._on_command)
        self.create_service(Trigger, topics.STOP_SERVICE, self._on_stop_service)
        self.create_service(Trigger, topics.ABORT_SERVICE, self._on_abort_service)
        self.create_timer(0.05, self._watchdog)
        self.policy_gate = PolicyGate(self, wait_s=self.params["policy_ready_wait_s"], start=self._start_episode,
                                      refuse=self._refuse, on_change=self._maybe_publish_result)
        self._score: dict | None = None
        self.aligner = StepAligner({GRIPPER})
        self.status = EpisodeStatus(episode_id="", state=IDLE, clock=self.params["clock_mode"],
                                    rate_hz=self.preset.control_rate_hz)
        self.orchestrator: Orchestrator | None = None
        self.task: Task | None = None
        self._episode_count = 0
        self._event_index = 0
        self._last_end_ns = 0
        self._last_decision: DecisionDoc | None = None
        self._decision_sent_at = 0.0
        self._awaiting: VerificationRequestDoc | None = None  # lockstep: the step waits for this answer
        self._request_first_sent = 0.0
        self._request_last_sent = 0.0
        self._finished_decision: DecisionDoc | None = None
        self._finished_at = 0.0
        self._end_state = FINISHED
        self._started_wall = 0.0
        self._variant = Variant.PROPRIO_VERIFIER
        self._planning: PlanRequestDoc | None = None  # the plan this episode waits for
        self._planning_since = 0.0
        self._planning_sent = 0.0
        self._plan_record: dict = {"source": REFERENCE}
        self.stall = StallWatch(self.params["stall_warn_s"], self.params["stall_abort_s"])
        self._safety_counts: dict = {}  # the latest counts of the episode's safety interventions
        self._interrupted = False
        self._used_ids: set[str] = set()
        state_dir = self.params["state_dir"] or default_state_dir()
        self.journal = EpisodeJournal(journal_path(state_dir, self.get_fully_qualified_name(),
                                                   os.environ.get("ROS_DOMAIN_ID", "0")))
        self._journal_dirty = False
        self.create_timer(JOURNAL_PERIOD_S, self._write_journal_if_dirty)
        if not self._end_journalled_episode():
            self._publish_status(self.status)

    # ------------------------------------------------------------------ episode control
    def _on_command(self, msg: String) -> None:
        command = received_document(self, msg, EpisodeCommand, "episode command")
        if command is None:
            return
        if command.command == START:
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
        # never pass for a step of this one (ladder_ros.nodes.step_sync).
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

    # ------------------------------------------------------------------ planning
    def _send_plan_request(self) -> None:
        assert self._planning is not None
        self._planning_sent = time.monotonic()
        self._plan_request_pub.publish(document_to_msg(self._planning))

    def _on_plan_result(self, msg: String) -> None:
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

    # ------------------------------------------------------------------ steps
    def _on_gripper_events(self, msg: String) -> None:
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

    def _on_privileged(self, msg: String) -> None:
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

    def _on_safety(self, msg: String) -> None:
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

    # ------------------------------------------------------------------ verification
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

    def _on_verification_result(self, msg: String) -> None:
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

    # ------------------------------------------------------------------ end of episode
    def _finish(self, decision: Decision) -> None:
        assert self.orchestrator is not None
        step = max(self.orchestrator.last_step, 0)
        stamp = self.status.step_stamp_ns(step)
        self._publish_decision(step, stamp, decision, summary=self.orchestrator.summary())
        self._finished_decision = self._last_decision
        self._finished_at = time.monotonic()
        self._last_end_ns = stamp
        self.aligner.stop()
        self._maybe_publish_result()

    def _on_score(self, msg: String) -> None:
        doc = received_document(self, msg, EpisodeScoreDoc, "episode score")
        if doc is None:
            return
        if self._finished_decision is not None and doc.episode_id == self.status.episode_id \
                and self.status.state == RUNNING:
            self._score = doc.score
            self._maybe_publish_result()

    def _maybe_publish_result(self) -> None:
        """The record goes out once the simulator's score (lockstep) and the policy's final report are in."""
        if self._finished_decision is None or self.status.state != RUNNING:
            return
        score_due = self.lockstep and self.params["score_timeout_s"] > 0.0 and self._score is None
        if not score_due and self.policy_gate.final_report_in(self.status.episode_id):
            self._publish_result(self._score)

    def _publish_result(self, score: dict | None) -> None:
        orchestrator, task = self.orchestrator, self.task
        assert orchestrator is not None and task is not None
        safety = dict(score["safety"]) if score and "safety" in score else {"counts": dict(self._safety_counts)}
        record = graph_record(
            self.status.to_dict(), events=[e.to_dict() for e in orchestrator.events],
            orchestration=orchestrator.summary(), finish_reason=orchestrator.finish_reason,
            last_step=orchestrator.last_step, score=score, wall_s=time.monotonic() - self._started_wall,
            preset=self.preset.name, preset_options=self.preset.options, plan=self._plan_record,
            policy=self.policy_gate.report_for(self.status.episode_id),
            extra={"safety": safety, "interrupted": self._interrupted})
        self._publish_status(self._replace_status(state=self._end_state, finish_reason=orchestrator.finish_reason,
                                                  result=record, step=orchestrator.last_step, instruction=None,
                                                  pending_request=None))
        self._write_journal()
        self.get_logger().info(f"episode {self.status.episode_id} over: {orchestrator.finish_reason}"
                               + (f", success {record['success']}, {record['subgoals_done']}/{task.horizon} subgoals"
                                  if score else " (no privileged score)"))

    # ------------------------------------------------------------------ shutdown, journal
    def on_shutdown(self, executor: Executor) -> None:
        """SIGINT/SIGTERM: end a running episode as interrupted, with its final status and record out."""
        if self.status.state != RUNNING:
            return
        if self._finished_decision is None:  # else it ended by its own rules and waits for its score
            self._interrupted = True
            self.end_episode("interrupted: the orchestrator was stopped")
        wait = min(self.params["score_timeout_s"], LAST_WORD_S) if self.lockstep else 0.0
        spin_for(executor, wait, until=lambda: self.status.state != RUNNING)  # the bridge's score, if it is up
        if self.status.state == RUNNING and self.orchestrator is not None:
            self._publish_result(None)
        self._status_pub.wait_for_all_acked(Duration(seconds=LAST_WORD_S))

    def _journal_data(self) -> dict:
        orchestrator = self.orchestrator
        return {"status": self.status.to_dict(),
                "events": [e.to_dict() for e in orchestrator.events] if orchestrator is not None else [],
                "orchestration": orchestrator.summary() if orchestrator is not None else {},
                "plan": self._plan_record,
                "started_wall_s": time.time() - (time.monotonic() - self._started_wall)}

    def _write_journal(self) -> None:
        self._journal_dirty = False
        if not self.journal.write(**self._journal_data()):
            self.get_logger().warning(f"cannot write the journal {self.journal.path}: {self.journal.error}",
                                      throttle_duration_sec=60.0)

    def _write_journal_if_dirty(self) -> None:
        if self._journal_dirty and self.status.state == RUNNING:
            self._write_journal()

    def _end_journalled_episode(self) -> bool:
        """At start: an episode the journal says was running was cut short by a crash; end it properly.

        Publishes that episode's final status (aborted, record marked ``interrupted``, events and
        queue as last journalled), so the nodes and clients that follow it see it end. True when it did.
        """
        data = self.journal.read()
        if data is None:
            if self.journal.error:
                self.get_logger().warning(self.journal.error)
            return False
        try:
            status = EpisodeStatus.from_dict(data["status"])
        except SchemaError as exc:
            self.get_logger().warning(f"ignoring the journal {self.journal.path}: {exc}")
            return False
        self._used_ids.add(status.episode_id)
        if status.state != RUNNING:
            return False
        reason = interrupted_reason("the orchestrator was killed mid-episode and restarted")
        record = graph_record(status.to_dict(), events=list(data.get("events") or []),
                              orchestration=dict(data.get("orchestration") or {}), finish_reason=reason,
                              last_step=status.step, score=None,
                              wall_s=max(0.0, time.time() - float(data.get("started_wall_s") or time.time())),
                              preset=self.preset.name, preset_options=self.preset.options,
                              plan=data["plan"] if isinstance(data.get("plan"), dict) else None,
                              extra={"interrupted": True})
        final = EpisodeStatus.from_dict({**status.to_dict(), "state": ABORTED, "seq": status.seq + 1,
                                         "finish_reason": reason, "result": record, "instruction": None,
                                         "pending_request": None, "message": reason})
        self.get_logger().error(f"episode {status.episode_id} was running when this orchestrator's predecessor "
                                f"stopped without ending it; publishing it as {reason}")
        # The journal's step lags the graph; no step of that episode can be stamped after its
        # budget, so the next origin goes past that (step stamps never run backwards, step_sync).
        self._last_end_ns = status.step_stamp_ns(max(status.step, status.budget_steps + 1))
        self._publish_status(final)
        self._write_journal()
        return True

    # ------------------------------------------------------------------ timers
    def _watchdog(self) -> None:
        now = time.monotonic()
        self.policy_gate.check_deadline(now)
        if self.status.state != RUNNING:
            return
        if self._planning is not None:
            if now - self._planning_since >= self.params["planner_timeout_s"]:
                self._plan_failed(f"no plan within {self.params['planner_timeout_s']} s")
            elif now - self._planning_sent >= self.params["verifier_retry_s"]:
                self._send_plan_request()  # the verifier node may have (re)started since
            return
        if self._finished_decision is not None:
            if now - self._finished_at >= self.params["score_timeout_s"]:
                missing = "the sim bridge's score" if self.lockstep and self._score is None else \
                    "the policy's final report"
                self.get_logger().warning(f"no {missing}; publishing the result without it")
                self._publish_result(self._score)
            elif now - self._decision_sent_at >= self.params["decision_resend_s"]:
                self._republish_last_decision()
            return
        if self.policy_gate.warming_up:
            self.stall.progressed(now)  # compile time never counts against an episode
        if not (self.lockstep and self._awaiting is not None):  # a held query has the verifier's timers
            self._check_stall(now)
            if self.status.state != RUNNING:
                return
        request = self._pending_request_doc()
        if request is not None:
            if now - self._request_first_sent >= self.params["verifier_abort_after_s"]:
                self.get_logger().error(f"no verifier answer for {self.params['verifier_abort_after_s']} s; "
                                        "aborting the episode")
                self.end_episode("verifier unavailable")
                return
            if now - self._request_last_sent >= self.params["verifier_retry_s"]:
                if self.status.verifier_available:
                    self.get_logger().warning(f"query {request.request['request_id']} unanswered for "
                                              f"{self.params['verifier_retry_s']} s: verifier unavailable; "
                                              "the queue is kept, resending")
                    self._publish_status(self._replace_status(verifier_available=False,
                                                              message="verifier unavailable"))
                self._send_request(request, first=False)
        if self.lockstep and self._awaiting is None and self._last_decision is not None \
                and now - self._decision_sent_at >= self.params["decision_resend_s"]:
            self._republish_last_decision()

    def _check_stall(self, now: float) -> None:
        due = self.stall.due(now)
        if not due:
            return
        if self.lockstep:
            what = self.stall.waiting_for_lockstep(self.aligner.next_step, PRIVILEGED in self.aligner.required)
        else:
            last = self.orchestrator.last_step if self.orchestrator is not None else -1
            what = self.stall.waiting_for_wall_clock(now, last + 1, self.params["stall_warn_s"])
        if due == stall_watch.WARN:
            self.get_logger().warning(f"episode {self.status.episode_id}: no step for "
                                      f"{self.stall.idle_s(now):.1f} s, waiting for {what}")
            self._publish_status(self._replace_status(waiting_for=what, message=f"stalled: waiting for {what}"))
        else:
            self.get_logger().error(f"episode {self.status.episode_id}: no step for {self.params['stall_abort_s']} s; "
                                    f"aborting (waiting for {what})")
            self.end_episode(f"stalled: no {what} within {self.params['stall_abort_s']:g} s")

    def _republish_last_decision(self) -> None:
        if self._last_decision is not None:
            self._decision_pub.publish(document_to_msg(self._last_decision))
            self._decision_sent_at = time.monotonic()

    # ------------------------------------------------------------------ status
    def _replace_status(self, **changes) -> EpisodeStatus:
        data = self.status.to_dict()
        data.update(changes)
        data["seq"] = self.status.seq + 1
        return EpisodeStatus.from_dict(data)

    def _publish_status(self, status: EpisodeStatus) -> None:
        self.status = status
        self._status_pub.publish(document_to_msg(status))
        self._journal_dirty = True


def main(args: Sequence[str] | None = None) -> int:
    return run_node("orchestrator", OrchestratorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
