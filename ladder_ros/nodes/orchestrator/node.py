"""The orchestrator node: the ROS endpoints of the LADDER loop, wired to the objects that run it."""

from __future__ import annotations

import os
import time
from typing import Sequence

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.presets import get_preset, parse_preset_options
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.messages import (
    IDLE,
    LOCKSTEP,
    EpisodeCommand,
    EpisodeScoreDoc,
    EpisodeStatus,
    GripperEventsDoc,
    PlanResultDoc,
    PrivilegedStateDoc,
    SafetyInterventionDoc,
    VerificationResultDoc,
)
from ladder_ros.nodes.orchestrator import stall_watch
from ladder_ros.nodes.orchestrator.control import EpisodeControl
from ladder_ros.nodes.orchestrator.deadlines import DeadlineLimits, Deadlines
from ladder_ros.nodes.orchestrator.ending import EpisodeEnder
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.journal import EpisodeJournal, default_state_dir, journal_path
from ladder_ros.nodes.orchestrator.outbox import Outbox
from ladder_ros.nodes.orchestrator.policy_gate import PolicyGate
from ladder_ros.nodes.orchestrator.resets import ResetEpisodes
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.nodes.orchestrator.steps import StepDecider
from ladder_ros.paths import resolve_share_file
from ladder_ros.ros_conversions import stamp_to_ns
from ladder_ros.runtime.endpoints import message_class, received_document, subscription
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node, spin_for
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import ORCHESTRATOR

JOURNAL_PERIOD_S = 1.0  # the journal is rewritten at most this often while an episode runs
WATCHDOG_PERIOD_S = 0.05  # how often late answers and stalls are looked for


class OrchestratorNode(Node):
    """Runs :func:`~ladder_ros.core.orchestrator.make_orchestrator` for one episode at a time.

    The node reads its parameters, owns the endpoints and converts messages; the episode is run by
    the objects it composes: :class:`~ladder_ros.nodes.orchestrator.episode.Episode` (the episode's
    state and latched status), :class:`~ladder_ros.nodes.orchestrator.control.EpisodeControl` (start,
    stop and abort, the planner's plan), :class:`~ladder_ros.nodes.orchestrator.steps.StepDecider`
    (each step's decision and verifier queries), :class:`~ladder_ros.nodes.orchestrator.ending.EpisodeEnder`
    (the final status and record, the journal), :class:`~ladder_ros.nodes.orchestrator.deadlines.Deadlines`
    (late plans, answers, scores and stalls), :class:`~ladder_ros.nodes.orchestrator.policy_gate.PolicyGate`
    (starts wait for a ready policy), :class:`~ladder_ros.nodes.orchestrator.resets.ResetEpisodes` (reset
    starts counted and planned, reset episodes confirmed) and
    :class:`~ladder_ros.nodes.orchestrator.stall_watch.StallWatch`.

    Topics: subscribes ``gripper/events``, ``sim/privileged_state``, ``verifier/result``,
    ``planner/result``, ``sim/episode_score``, ``episode/command``, ``safety/interventions``,
    ``policy/status``, and the stamps of ``joint_states`` and ``policy/action`` (stall diagnosis);
    publishes ``orchestrator/decision``, ``orchestrator/events``, ``orchestrator/current_subgoal``
    (latched), ``verifier/request``, ``planner/request``, ``episode/status`` (latched),
    ``episode/command_reply``. Services: ``episode/stop``, ``episode/abort`` (std_srvs/Trigger).
    Parameters: preset, clock_mode, suite (path), variant, preset_options, plan_source,
    planner_timeout_s (s), verifier_retry_s (s), verifier_abort_after_s (s), decision_resend_s (s),
    score_timeout_s (s), stall_warn_s (s), stall_abort_s (s), state_dir, policy_ready_wait_s (s),
    unavailable_policy (refuse or wait).
    """

    def __init__(self, *, suite: TaskSuite | None = None, node_name: str = "orchestrator", **node_options):
        """``suite`` replaces the configured suite file (tests)."""
        super().__init__(node_name, **node_options)
        self.params = params = declare_parameters(self, ORCHESTRATOR)
        self.preset = get_preset(params["preset"], parse_preset_options(params["preset_options"]))
        self.lockstep = params["clock_mode"] == LOCKSTEP
        self.suite = suite if suite is not None else load_suite(resolve_share_file(params["suite"]))
        self.outbox = Outbox(self)
        subscription(self, message_class(topics.GRIPPER_EVENTS), topics.GRIPPER_EVENTS, self._on_gripper_events)
        subscription(self, JointState, topics.JOINT_STATES, self._on_joint_state)
        subscription(self, JointTrajectory, topics.ACTION, self._on_action)
        subscription(self, message_class(topics.SAFETY), topics.SAFETY, self._on_safety)
        subscription(self, message_class(topics.PLAN_RESULT), topics.PLAN_RESULT, self._on_plan_result)
        subscription(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED, self._on_privileged)
        subscription(self, message_class(topics.VERIFY_RESULT), topics.VERIFY_RESULT, self._on_verification_result)
        subscription(self, message_class(topics.SCORE), topics.SCORE, self._on_score)
        subscription(self, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND, self._on_command)
        self.create_service(Trigger, topics.STOP_SERVICE, self._on_stop_service)
        self.create_service(Trigger, topics.ABORT_SERVICE, self._on_abort_service)
        self.create_timer(WATCHDOG_PERIOD_S, self._on_watchdog)
        # The gate calls back into objects built below; it subscribes to policy/status now.
        self.policy_gate = PolicyGate(self, wait_s=params["policy_ready_wait_s"],
                                      start=lambda command: self.control.start(command),
                                      refuse=lambda command, why: self.control.refuse(command, why),
                                      on_change=lambda: self.ender.maybe_publish_result(),
                                      unavailable=params["unavailable_policy"])
        logger = self.get_logger()
        self.stall = StallWatch(params["stall_warn_s"], params["stall_abort_s"])
        self.episode = Episode(EpisodeStatus(episode_id="", state=IDLE, clock=params["clock_mode"],
                                             rate_hz=self.preset.control_rate_hz), publish=self.outbox.status)
        journal = EpisodeJournal(journal_path(params["state_dir"] or default_state_dir(),
                                              self.get_fully_qualified_name(), os.environ.get("ROS_DOMAIN_ID", "0")))
        now_ns = self._now_ns
        self.resets = ResetEpisodes(self.suite, lockstep=self.lockstep, retry_s=params["verifier_retry_s"],
                                    give_up_s=params["verifier_abort_after_s"], send=self.outbox.verification_request,
                                    start=lambda command: self.control.start(command),
                                    refuse=lambda command, why: self.control.refuse(command, why),
                                    counted=lambda: self.ender.maybe_publish_result(), now_ns=now_ns, logger=logger)
        self.ender = EpisodeEnder(self.episode, self.outbox, self.policy_gate, journal, preset=self.preset,
                                  lockstep=self.lockstep, score_timeout_s=params["score_timeout_s"], logger=logger,
                                  resets=self.resets)
        self.steps = StepDecider(self.episode, self.outbox, self.stall, lockstep=self.lockstep, logger=logger,
                                 on_finished=self.ender.maybe_publish_result)
        self.control = EpisodeControl(
            self.episode, self.outbox, self.steps, self.policy_gate, self.stall, suite=self.suite,
            preset=self.preset, clock_mode=params["clock_mode"], default_variant=params["variant"],
            plan_source=params["plan_source"], now_ns=now_ns, write_journal=self.ender.write_journal, logger=logger,
            resets=self.resets)
        self.deadlines = Deadlines(
            self.episode, self.steps, self.policy_gate, self.stall, DeadlineLimits.from_params(params),
            lockstep=self.lockstep, logger=logger, resend_plan_request=self.control.send_plan_request,
            plan_failed=self.control.plan_failed, publish_result=self.ender.publish_result,
            end_episode=self.control.end_episode, confirming=lambda: self.resets.confirming)
        self.create_timer(JOURNAL_PERIOD_S, self.ender.write_journal_if_changed)
        if not self.ender.end_journalled_episode():
            self.episode.publish_status(self.episode.status)

    # ------------------------------------------------------------------ the node's public face
    def end_episode(self, reason: str) -> tuple[bool, str]:
        """Stop or abort the running episode; (accepted, what happened)."""
        return self.control.end_episode(reason)

    def on_shutdown(self, executor) -> None:
        """SIGINT/SIGTERM: a running episode ends as interrupted, its final status out (runtime.process)."""
        self.ender.on_shutdown(self.control.end_episode,
                               lambda seconds, until: spin_for(executor, seconds, until=until))

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    # ------------------------------------------------------------------ callbacks
    def _on_command(self, msg: interfaces.EpisodeCommand) -> None:
        command = received_document(self, msg, EpisodeCommand, "episode command")
        if command is not None:
            self.control.command(command)

    def _on_stop_service(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.control.end_episode("operator stop")
        return response

    def _on_abort_service(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.control.end_episode("operator abort")
        return response

    def _on_plan_result(self, msg: interfaces.PlanResult) -> None:
        doc = received_document(self, msg, PlanResultDoc, "plan result")
        if doc is not None:
            self.control.plan_result(doc)

    def _on_gripper_events(self, msg: interfaces.GripperEvents) -> None:
        doc = received_document(self, msg, GripperEventsDoc, "gripper events")
        if doc is not None:
            self.steps.gripper_events(doc)

    def _on_privileged(self, msg: interfaces.PrivilegedState) -> None:
        if not self.steps.wants_privileged:
            return
        doc = received_document(self, msg, PrivilegedStateDoc, "privileged state")
        if doc is not None:
            self.steps.privileged_state(doc)

    def _on_verification_result(self, msg: interfaces.VerificationResult) -> None:
        doc = received_document(self, msg, VerificationResultDoc, "verification result")
        if doc is not None and not self.resets.take_result(doc, time.monotonic()):
            self.steps.verification_result(doc)

    def _on_joint_state(self, msg: JointState) -> None:
        """Stall diagnosis only: which step's joint state (the start of a step's chain) has come."""
        self.steps.saw_stamp(stall_watch.JOINT_STATES, stamp_to_ns(msg.header.stamp))

    def _on_action(self, msg: JointTrajectory) -> None:
        """Stall diagnosis only: which step's action has come."""
        self.steps.saw_stamp(stall_watch.ACTION, stamp_to_ns(msg.header.stamp))

    def _on_safety(self, msg: interfaces.SafetyIntervention) -> None:
        doc = received_document(self, msg, SafetyInterventionDoc, "safety intervention")
        if doc is not None:
            self.episode.record_safety(doc.episode_id, doc.counts)

    def _on_score(self, msg: interfaces.EpisodeScore) -> None:
        doc = received_document(self, msg, EpisodeScoreDoc, "episode score")
        if doc is not None:
            self.ender.score(doc.episode_id, doc.score)

    def _on_watchdog(self) -> None:
        now = time.monotonic()
        self.resets.check(now)
        self.deadlines.check(now)


def main(args: Sequence[str] | None = None) -> int:
    return run_node("orchestrator", OrchestratorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
