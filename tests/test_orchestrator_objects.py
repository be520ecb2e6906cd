"""The orchestrator node's objects wired together without rclpy: an outbox that records, a policy that is ready.

The node only converts messages and hands documents to these objects, so an episode's start, steps, deadlines
and end can be driven here step by step, with the deadlines given the time to judge by.
"""

import subprocess
import sys
from pathlib import Path

from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import load_suite
from ladder_ros.core.triggers import GripperEvents
from ladder_ros.messages import ABORT, IDLE, START, EpisodeCommand, EpisodeStatus, GripperEventsDoc, PlanResultDoc
from ladder_ros.nodes.orchestrator.control import EpisodeControl
from ladder_ros.nodes.orchestrator.deadlines import DeadlineLimits, Deadlines
from ladder_ros.nodes.orchestrator.ending import EpisodeEnder
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.journal import EpisodeJournal
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.nodes.orchestrator.steps import StepDecider
from ladder_ros.paths import resolve_share_file

REPO = Path(__file__).resolve().parent.parent
TASK = "kitchen_single_2"
ORIGIN_NS = 5_000_000_000
LIMITS = DeadlineLimits(planner_timeout_s=120.0, verifier_retry_s=5.0, verifier_abort_after_s=60.0,
                        decision_resend_s=2.0, score_timeout_s=10.0, stall_warn_s=10.0, stall_abort_s=60.0)


class RecordingOutbox:
    """Everything the objects publish, in order, as (topic, document)."""

    def __init__(self):
        self.sent = []

    def status(self, status):
        self.sent.append(("status", status))

    def subgoal(self, instruction):
        self.sent.append(("subgoal", instruction))

    def decision(self, doc):
        self.sent.append(("decision", doc))

    def event(self, doc):
        self.sent.append(("event", doc))

    def verification_request(self, doc):
        self.sent.append(("request", doc))

    def plan_request(self, doc):
        self.sent.append(("plan_request", doc))

    def command_reply(self, reply):
        self.sent.append(("reply", reply))

    def wait_for_status_acked(self, seconds):
        pass

    def of(self, topic):
        return [doc for name, doc in self.sent if name == topic]


class ReadyPolicy:
    """The policy gate's side the objects use, for a policy that is always ready and reports nothing."""

    warming_up = False

    def admit(self, command):
        return True

    def chosen(self, command):
        return command.policy, ""

    def is_repeat_of_deferred(self, command):
        return False

    def cancel(self, reason):
        return False

    def check_deadline(self, now):
        pass

    def final_report_in(self, episode_id):
        return True

    def report_for(self, episode_id):
        return None


class Log:
    def __init__(self):
        self.lines = []

    def _log(self, level, text, **kwargs):
        self.lines.append((level, text))

    def info(self, text, **kwargs):
        self._log("info", text)

    def warning(self, text, **kwargs):
        self._log("warning", text)

    def error(self, text, **kwargs):
        self._log("error", text)


class Orchestrator:
    """The objects as the node wires them (ladder_ros/nodes/orchestrator/node.py), on the wall clock."""

    def __init__(self, tmp_path, plan_source="reference", clock_mode="wall_clock"):
        self.outbox, self.log, gate = RecordingOutbox(), Log(), ReadyPolicy()
        preset = get_preset("widowx")
        lockstep = clock_mode == "lockstep"
        self.stall = StallWatch(LIMITS.stall_warn_s, LIMITS.stall_abort_s)
        self.episode = Episode(EpisodeStatus(episode_id="", state=IDLE, clock=clock_mode,
                                             rate_hz=preset.control_rate_hz), publish=self.outbox.status)
        self.ender = EpisodeEnder(self.episode, self.outbox, gate, EpisodeJournal(tmp_path / "journal.json"),
                                  preset=preset, lockstep=lockstep, score_timeout_s=LIMITS.score_timeout_s,
                                  logger=self.log)
        self.steps = StepDecider(self.episode, self.outbox, self.stall, lockstep=lockstep, logger=self.log,
                                 on_finished=self.ender.maybe_publish_result)
        self.control = EpisodeControl(
            self.episode, self.outbox, self.steps, gate, self.stall,
            suite=load_suite(resolve_share_file("config/suites/tabletop.yaml")), preset=preset,
            clock_mode=clock_mode, default_variant="proprio_verifier", plan_source=plan_source,
            now_ns=lambda: ORIGIN_NS, write_journal=self.ender.write_journal, logger=self.log)
        self.deadlines = Deadlines(
            self.episode, self.steps, gate, self.stall, LIMITS, lockstep=lockstep, logger=self.log,
            resend_plan_request=self.control.send_plan_request, plan_failed=self.control.plan_failed,
            publish_result=self.ender.publish_result, end_episode=self.control.end_episode)

    def start(self, variant="periodic_trigger", episode_id="e1"):
        self.control.command(EpisodeCommand(command=START, episode_id=episode_id, task_id=TASK, variant=variant))
        return self.episode.status

    def step(self, step, aperture=1.0):
        events = GripperEvents(step=step, aperture=aperture, is_open=aperture > 0.5)
        self.steps.gripper_events(GripperEventsDoc.of(self.episode.status.episode_id,
                                                      self.episode.step_stamp_ns(step), events))


def test_the_objects_import_without_rclpy():
    modules = ", ".join(f"ladder_ros.nodes.orchestrator.{m}" for m in ("control", "deadlines", "ending", "steps"))
    probe = f"import sys, {modules}; print('rclpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          cwd=REPO).stdout.strip() == "False"


def test_a_started_episode_decides_every_step_and_an_abort_ends_it_with_its_record(tmp_path):
    graph = Orchestrator(tmp_path)
    status = graph.start()
    assert status.state == "running" and status.episode_id == "e1" and status.origin_ns == ORIGIN_NS
    (reply,) = graph.outbox.of("reply")
    assert reply.accepted and reply.assigned_id == "e1"
    for step in range(3):
        graph.step(step)
    decisions = graph.outbox.of("decision")
    assert [d.step for d in decisions] == [0, 1, 2]
    assert {d.instruction for d in decisions} == {"put the carrot on the plate"}
    assert graph.outbox.of("subgoal") == ["put the carrot on the plate"]  # said once, when it changed
    assert graph.steps.last_decision is decisions[-1]

    graph.control.command(EpisodeCommand(command=ABORT, episode_id="e1", reason="enough"))
    final = graph.outbox.of("decision")[-1]
    assert final.finished and final.summary is not None
    assert graph.outbox.sent[-1][0] == "reply" and graph.outbox.sent[-1][1].accepted
    status = graph.episode.status
    assert status.state == "aborted" and status.result["finish_reason"] == "aborted: enough"
    assert graph.episode.last_end_ns == final.stamp_ns
    events = graph.outbox.of("event")
    assert [e.index for e in events] == list(range(len(events)))


def test_a_refused_start_is_answered_and_leaves_the_status_alone(tmp_path):
    graph = Orchestrator(tmp_path)
    graph.start()
    seq = graph.episode.status.seq
    graph.control.command(EpisodeCommand(command=START, episode_id="e2", task_id=TASK))
    reply = graph.outbox.of("reply")[-1]
    assert not reply.accepted and reply.reason == "start refused: episode e1 is running"
    assert graph.episode.status.seq == seq and graph.control.episode_count == 1


def test_a_plan_that_does_not_come_is_asked_again_then_aborts_the_episode(tmp_path):
    graph = Orchestrator(tmp_path, plan_source="planner")
    status = graph.start(variant="proprio_trigger")
    assert status.message == "planning" and status.plan == []
    asked = graph.episode.planning_since
    graph.deadlines.check(graph.episode.planning_sent + LIMITS.verifier_retry_s)
    assert len(graph.outbox.of("plan_request")) == 2
    graph.step(0)  # wall clock: a step while the plan is awaited decides nothing
    assert graph.outbox.of("decision") == []
    graph.deadlines.check(asked + LIMITS.planner_timeout_s)
    status = graph.episode.status
    assert status.state == "aborted"
    assert status.result["finish_reason"] == "aborted: planner failed: no plan within 120.0 s"
    assert graph.episode.planning is None


def test_the_planners_plan_starts_the_steps(tmp_path):
    graph = Orchestrator(tmp_path, plan_source="planner")
    graph.start(variant="proprio_trigger")
    (request,) = graph.outbox.of("plan_request")
    plan = [{"object": "spoon", "destination": "plate", "text": "put the spoon on the plate"}]
    graph.control.plan_result(PlanResultDoc(episode_id=request.episode_id, subgoals=plan, source="test"))
    assert graph.episode.planning is None and graph.episode.status.plan[0]["text"] == "put the spoon on the plate"
    graph.step(0)
    assert graph.outbox.of("decision")[-1].instruction == "put the spoon on the plate"


def test_a_stalled_episode_names_what_it_waits_for_then_ends_with_that_reason(tmp_path):
    graph = Orchestrator(tmp_path)
    graph.start()
    since = graph.stall.progress_at
    graph.deadlines.check(since + LIMITS.stall_warn_s)
    status = graph.episode.status
    assert status.state == "running" and status.waiting_for.startswith("joint_states of step 0")
    graph.deadlines.check(since + LIMITS.stall_abort_s)
    status = graph.episode.status
    assert status.state == "aborted"
    assert status.result["finish_reason"].startswith("aborted: stalled: no joint_states of step 0")
