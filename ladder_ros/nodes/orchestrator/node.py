"""The orchestrator node: owns the episode and its subgoal queue; decides every step."""

from __future__ import annotations

import os
from typing import Sequence

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.orchestrator import Orchestrator, Variant
from ladder_ros.core.presets import get_preset, parse_preset_options
from ladder_ros.core.record import REFERENCE
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.core.task import Task
from ladder_ros.messages import (
    FINISHED,
    IDLE,
    LOCKSTEP,
    DecisionDoc,
    EpisodeCommand,
    EpisodeStatus,
    PlanRequestDoc,
    VerificationRequestDoc,
)
from ladder_ros.specs import topics
from ladder_ros.nodes.orchestrator.journal import EpisodeJournal, default_state_dir, journal_path
from ladder_ros.nodes.orchestrator.ending import EpisodeEnding
from ladder_ros.nodes.orchestrator.episodes import EpisodeControl
from ladder_ros.nodes.orchestrator.steps import GRIPPER, StepDecisions
from ladder_ros.nodes.orchestrator.timers import EpisodeTimers
from ladder_ros.specs.parameters import ORCHESTRATOR
from ladder_ros.nodes.orchestrator.policy_gate import PolicyGate
from ladder_ros.runtime.endpoints import message_class, publisher, subscription
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.runtime.step_sync import StepAligner
from ladder_ros.paths import resolve_share_file
from ladder_ros.interface_conversions import document_to_msg

JOURNAL_PERIOD_S = 1.0  # the journal is rewritten at most this often while an episode runs


class OrchestratorNode(EpisodeControl, StepDecisions, EpisodeEnding, EpisodeTimers, Node):
    """Runs :func:`~ladder_ros.core.orchestrator.make_orchestrator` for one episode at a time.

    Episodes are started, stopped and aborted from outside the graph through ``episode/command``
    (ladder_ros_interfaces/EpisodeCommand) and the ``episode/stop`` / ``episode/abort`` services
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
    reason and its record kept (:mod:`ladder_ros.nodes.orchestrator.stall_watch`). A start command is checked
    before anything moves (known task, layout in range, seed >= 0, a fresh id of
    ``[A-Za-z0-9_.-]``); each command gets a reply on ``episode/command_reply`` and a refused start
    never touches the episode status. A start repeated as it was (a client sends again until it
    hears back) is answered again and never starts a second episode. A start waits for a ready
    policy (``policy/status``; deferred while it warms up, refused while it fails:
    :mod:`ladder_ros.nodes.orchestrator.policy_gate`), and the record waits for the policy's final report of the
    episode. Stopped by SIGINT/SIGTERM mid-episode, it ends the episode
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
        self._status_pub = publisher(self, message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS)
        self._subgoal_pub = publisher(self, message_class(topics.CURRENT_SUBGOAL), topics.CURRENT_SUBGOAL)
        self._decision_pub = publisher(self, message_class(topics.DECISION), topics.DECISION)
        self._events_pub = publisher(self, message_class(topics.EVENTS_TOPIC), topics.EVENTS_TOPIC)
        self._request_pub = publisher(self, message_class(topics.VERIFY_REQUEST), topics.VERIFY_REQUEST)
        self._plan_request_pub = publisher(self, message_class(topics.PLAN_REQUEST), topics.PLAN_REQUEST)
        self._reply_pub = publisher(self, message_class(topics.COMMAND_REPLY), topics.COMMAND_REPLY)
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
        self._accepted_starts: dict[str, EpisodeCommand] = {}  # the latest accepted starts, by episode id
        state_dir = self.params["state_dir"] or default_state_dir()
        self.journal = EpisodeJournal(journal_path(state_dir, self.get_fully_qualified_name(),
                                                   os.environ.get("ROS_DOMAIN_ID", "0")))
        self._journal_dirty = False
        self.create_timer(JOURNAL_PERIOD_S, self._write_journal_if_dirty)
        if not self._end_journalled_episode():
            self._publish_status(self.status)

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
