"""Reset episodes in the orchestrator's objects, without rclpy: the counts before, the plan, the episode, the
counts after; and the documents that carry a reset (the command's kind and start, the status, start regions in
the privileged state)."""

import time

import numpy as np
import pytest

from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import ContainerInfo, ObjectPose, PrivilegedState
from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import load_suite
from ladder_ros.core.triggers import GripperEvents
from ladder_ros.core.verification import VerificationResult
from ladder_ros.messages import (
    IDLE,
    START,
    EpisodeCommand,
    EpisodeStatus,
    GripperEventsDoc,
    PrivilegedStateDoc,
    SchemaError,
    VerificationResultDoc,
    decode,
    encode,
)
from ladder_ros.nodes.orchestrator.control import EpisodeControl
from ladder_ros.nodes.orchestrator.deadlines import Deadlines
from ladder_ros.nodes.orchestrator.ending import EpisodeEnder
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.journal import EpisodeJournal
from ladder_ros.nodes.orchestrator.resets import COUNT_REQUEST_BASE, ResetEpisodes
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.nodes.orchestrator.steps import StepDecider
from ladder_ros.paths import resolve_share_file
from tests.test_orchestrator_objects import LIMITS, ORIGIN_NS, Log, ReadyPolicy, RecordingOutbox

TASK = "kitchen_single_2"  # carrot and spoon onto the plate; start regions right_near, right_far


# ------------------------------------------------------------------------------ documents
def test_a_start_names_its_kind_and_start_and_a_bad_pair_is_refused():
    reset = EpisodeCommand(command=START, task_id=TASK, kind="reset", start="after_task", start_after="e1")
    assert reset.is_reset and decode(encode(reset), EpisodeCommand) == reset
    task = EpisodeCommand(command=START, task_id=TASK, start="after_reset", start_after="r1")
    assert not task.is_reset and decode(encode(task), EpisodeCommand) == task
    assert EpisodeCommand(command=START, task_id=TASK).start == "layout"
    for fields, named in (({"kind": "nap"}, "unknown kind 'nap'"), ({"start": "teleport"}, "unknown start"),
                          ({"start": "after_reset"}, "start_after"), ({"start_after": "e1"}, "start_after"),
                          ({"kind": "reset", "start": "after_reset", "start_after": "r"}, "a reset continues")):
        with pytest.raises(SchemaError, match=named):
            EpisodeCommand(command=START, task_id=TASK, **fields)
    status = EpisodeStatus(episode_id="r1", state="running", kind="reset", start="after_task", start_after="e1")
    assert status.keeps_scene and decode(encode(status), EpisodeStatus) == status
    assert not EpisodeStatus(episode_id="", state=IDLE).keeps_scene


def test_the_privileged_state_carries_the_start_regions():
    region = ContainerInfo(name="right_near", position=np.array([0.24, -0.165, 0.0]),
                           half_extents=np.array([0.08, 0.085]), surface_z=0.0)
    plate = ContainerInfo(name="plate", position=np.array([0.36, 0.12, 0.01]), half_extents=np.array([0.075]),
                          surface_z=0.012)
    privileged = PrivilegedState(goal=GoalState(resting={("carrot", "right_near"): 1}), objects={
        "carrot_0": ObjectPose(kind="carrot", position=np.array([0.25, -0.16, 0.02]),
                               quaternion=np.array([1.0, 0, 0, 0]))}, containers={"plate": plate},
        regions={"right_near": region})
    doc = decode(encode(PrivilegedStateDoc.of("e", 2, 7, privileged, (False,))), PrivilegedStateDoc)
    back = doc.privileged_state()
    assert set(back.regions) == {"right_near"} and set(back.containers) == {"plate"}
    np.testing.assert_array_equal(back.destination("right_near").position, region.position)
    assert back.goal.count("carrot", "right_near") == 1


def test_the_documents_survive_their_typed_messages():
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    pytest.importorskip("ladder_ros_interfaces", reason="needs the interface package (scripts/build_interfaces.sh)")
    from tests.test_interfaces import cdr_round_trip

    region = {"position": [0.24, -0.165, 0.0], "half_extents": [0.08, 0.085], "surface_z": 0.0}
    for document in (
            EpisodeCommand(command=START, episode_id="r", task_id=TASK, kind="reset", start="after_task",
                           start_after="e1", seed=3),
            EpisodeStatus(episode_id="e2", state="running", start="after_reset", start_after="r"),
            PrivilegedStateDoc(episode_id="e", step=1, stamp_ns=5, goal={"resting": [], "held": []},
                               goal_states=[], regions={"right_near": region})):
        assert cdr_round_trip(document) == document


# ------------------------------------------------------------------------------ the orchestrator's objects
class Graph:
    """The orchestrator's objects wired as the node wires them, with the reset coordinator, in lockstep."""

    def __init__(self, tmp_path, clock_mode="lockstep", suite="config/suites/tabletop.yaml"):
        self.outbox, self.log, gate = RecordingOutbox(), Log(), ReadyPolicy()
        preset = get_preset("widowx")
        lockstep = clock_mode == "lockstep"
        suite = load_suite(resolve_share_file(suite))
        self.now = 100.0
        self.answered = set()
        self.stall = StallWatch(LIMITS.stall_warn_s, LIMITS.stall_abort_s)
        self.episode = Episode(EpisodeStatus(episode_id="", state=IDLE, clock=clock_mode,
                                             rate_hz=preset.control_rate_hz), publish=self.outbox.status)
        self.resets = ResetEpisodes(suite, lockstep=lockstep, retry_s=LIMITS.verifier_retry_s,
                                    give_up_s=LIMITS.verifier_abort_after_s, send=self.outbox.verification_request,
                                    start=lambda c: self.control.start(c),
                                    refuse=lambda c, why: self.control.refuse(c, why),
                                    counted=lambda: self.ender.maybe_publish_result(), now_ns=lambda: ORIGIN_NS,
                                    logger=self.log)
        self.ender = EpisodeEnder(self.episode, self.outbox, gate, EpisodeJournal(tmp_path / "journal.json"),
                                  preset=preset, lockstep=lockstep, score_timeout_s=LIMITS.score_timeout_s,
                                  logger=self.log, resets=self.resets)
        self.steps = StepDecider(self.episode, self.outbox, self.stall, lockstep=lockstep, logger=self.log,
                                 on_finished=self.ender.maybe_publish_result)
        self.control = EpisodeControl(
            self.episode, self.outbox, self.steps, gate, self.stall, suite=suite, preset=preset,
            clock_mode=clock_mode, default_variant="periodic_trigger", plan_source="reference",
            now_ns=lambda: ORIGIN_NS, write_journal=self.ender.write_journal, logger=self.log, resets=self.resets)
        self.deadlines = Deadlines(
            self.episode, self.steps, gate, self.stall, LIMITS, lockstep=lockstep, logger=self.log,
            resend_plan_request=self.control.send_plan_request, plan_failed=self.control.plan_failed,
            publish_result=self.ender.publish_result, end_episode=self.control.end_episode,
            confirming=lambda: self.resets.confirming)

    def command(self, **fields):
        self.control.command(EpisodeCommand(command=START, task_id=TASK, **fields))

    def run_task_to_its_end(self, episode_id="e1", **fields):
        """A task episode, ended by the operator after two steps (its score comes as the bridge sends it)."""
        self.command(episode_id=episode_id, **fields)
        assert self.episode.status.state == "running", self.outbox.of("reply")[-1]
        for step in range(2):
            self.step(step)
        self.control.end_episode("operator stop")
        self.ender.score(episode_id, {"success": False, "subgoals_done": 0, "subgoals": [], "violations": [],
                                      "final_goal": {}, "steps_used": 1})
        assert self.episode.status.result is not None

    def step(self, step):
        events = GripperEvents(step=step, aperture=1.0, is_open=True)
        self.steps.gripper_events(GripperEventsDoc.of(self.episode.status.episode_id,
                                                      self.episode.step_stamp_ns(step), events))

    def requests(self):
        return [d for d in self.outbox.of("request") if d.request["request_id"] > COUNT_REQUEST_BASE]

    def answer(self, doc, count):
        self.answered.add(doc.request["request_id"])
        result = VerificationResult(request_id=doc.request["request_id"], count=count, source="oracle")
        return self.resets.take_result(VerificationResultDoc.of(doc.episode_id, doc.step, result), self.now)

    def answer_all(self, counts):
        """Answer every count query not answered yet from ``counts`` ((kind, region) -> count)."""
        for doc in self.requests():
            rid = doc.request["request_id"]
            if rid in self.answered:
                continue
            self.answered.add(rid)
            subgoal = doc.request["subgoal"]
            assert self.answer(doc, counts.get((subgoal["object"], subgoal["destination"]), 0))


def test_a_reset_counts_the_scene_the_task_left_then_runs_and_confirms_it(tmp_path):
    graph = Graph(tmp_path)
    graph.run_task_to_its_end()
    last = graph.episode.status
    graph.command(episode_id="r1", kind="reset", start="after_task", start_after="e1", seed=4)
    asked = graph.requests()
    # Each kind the task moves (spoon last, so first) in each of its start regions, on the task's last step.
    assert [(d.request["subgoal"]["object"], d.request["subgoal"]["destination"]) for d in asked] == [
        ("spoon", "right_near"), ("spoon", "right_far"), ("carrot", "right_near"), ("carrot", "right_far")]
    assert {d.episode_id for d in asked} == {"e1"} and {d.stamp_ns for d in asked} == {graph.episode.last_end_ns}
    assert {d.request["reason"] for d in asked} == {"start_regions"}
    assert graph.outbox.of("reply") and graph.outbox.of("reply")[-1].episode_id == "e1"  # none for r1 yet
    # A repeat of the start while it is counted changes nothing.
    graph.command(episode_id="r1", kind="reset", start="after_task", start_after="e1", seed=4)
    assert len(graph.requests()) == 4 and graph.episode.status is last
    # An unreadable count is asked again; then the spoon is still in its region, the carrot is not.
    assert graph.answer(asked[0], None)
    again = graph.requests()[-1]
    assert again.request["subgoal"] == asked[0].request["subgoal"] and again.request["request_id"] > \
        asked[-1].request["request_id"]
    graph.answer_all({("spoon", "right_near"): 1})
    status = graph.episode.status
    assert status.state == "running" and status.episode_id == "r1"
    assert (status.kind, status.start, status.start_after) == ("reset", "after_task", "e1")
    assert status.task["task_id"] == f"{TASK}/reset"
    assert [s["text"] for s in status.plan] == ["put the carrot on the right side of the table near the robot"]
    assert status.budget_steps == 100 and graph.outbox.of("reply")[-1].assigned_id == "r1"
    # The reset runs like an episode; once over, its record waits for the counts that confirm it.
    graph.step(0)
    graph.control.end_episode("done here")
    graph.ender.score("r1", {"success": True, "subgoals_done": 1, "subgoals": [], "violations": [],
                             "final_goal": {}, "steps_used": 1})
    confirm = graph.requests()[len(asked) + 1:]
    assert {(d.episode_id, d.stamp_ns) for d in confirm} == {("r1", graph.episode.last_end_ns)}
    assert graph.episode.status.state == "running"  # the record is not out yet
    assert len(confirm) == 2  # what the plan expects: the spoon left alone, the carrot sent back
    graph.answer_all({("spoon", "right_near"): 1, ("carrot", "right_near"): 1})
    status = graph.episode.status
    assert status.state == "aborted" and status.result["kind"] == "reset"
    assert status.result["start"] == "after_task" and status.result["start_after"] == "e1"
    reset = status.result["reset"]
    assert reset["confirmed"] and reset["out_of_place"] == []
    assert reset["expected"] == [["carrot", "right_near", 1], ["spoon", "right_near", 1]]
    assert ["spoon", "right_near", 1] in reset["counted_after_task"]
    # The next task episode continues from that scene, its record saying so.
    graph.run_task_to_its_end("e2", start="after_reset", start_after="r1")
    result = graph.episode.status.result
    assert (result["kind"], result["start"], result["start_after"]) == ("task", "after_reset", "r1")


def test_an_unconfirmed_reset_names_what_is_out_of_place(tmp_path):
    graph = Graph(tmp_path)
    graph.run_task_to_its_end()
    graph.command(episode_id="r1", kind="reset", start="after_task", start_after="e1")
    graph.answer_all({})  # nothing in any region: both go back, spread over the regions (no count of the start)
    assert [(s["object"], s["destination"]) for s in graph.episode.status.plan] == [
        ("spoon", "right_far"), ("carrot", "right_near")]
    graph.step(0)
    graph.control.end_episode("done here")
    graph.ender.score("r1", {"success": False, "subgoals_done": 0, "subgoals": [], "violations": [],
                             "final_goal": {}, "steps_used": 1})
    graph.answer_all({("spoon", "right_far"): 1})
    status = graph.episode.status
    assert not status.result["reset"]["confirmed"]
    assert status.message == ("the reset after episode e1 left objects out of place: carrot on the right side of "
                              "the table near the robot: 0 of 1")


def test_a_reset_with_nothing_to_move_ends_at_once_and_a_count_nobody_answers_is_resent_then_unreadable(tmp_path):
    graph = Graph(tmp_path)
    graph.run_task_to_its_end()
    graph.command(episode_id="r1", kind="reset", start="after_task", start_after="e1")
    graph.answer_all({("spoon", "right_near"): 1, ("carrot", "right_far"): 1})
    status = graph.episode.status
    assert status.state == "finished" and status.episode_id == "r1" and status.finish_reason == "nothing to move"
    assert status.result["reset"]["confirmed"] and status.result["reset"]["moves"] == []
    assert graph.outbox.of("reply")[-1].accepted

    graph.run_task_to_its_end("e2", start="after_reset", start_after="r1")
    graph.command(episode_id="r2", kind="reset", start="after_task", start_after="e2")
    first = graph.requests()[-4:]
    asked = time.monotonic()  # the counts were asked before this
    graph.resets.check(asked + LIMITS.verifier_retry_s)
    assert graph.requests()[-4:] == first and len(graph.requests()) == 4 + 4 + 4  # each sent again
    graph.resets.check(asked + LIMITS.verifier_abort_after_s)
    reply = graph.outbox.of("reply")[-1]
    assert not reply.accepted and reply.reason.startswith(
        "start refused: the reset after episode e2 cannot be planned: task kitchen_single_2: cannot plan its reset, "
        "the count of the spoon on the right side of the table near the robot after the episode could not be read")
    assert graph.resets.preparing is None


def test_a_task_without_start_regions_is_refused_in_one_line_and_lockstep_counts_only_the_last_episode(tmp_path):
    graph = Graph(tmp_path, suite="config/suites/bridge.yaml")
    graph.control.command(EpisodeCommand(command=START, episode_id="r0", task_id="carrot_on_plate_1", kind="reset",
                                         start="after_task", start_after="e0"))
    reply = graph.outbox.of("reply")[-1]
    assert not reply.accepted and "\n" not in reply.reason
    assert reply.reason.startswith("start refused: task carrot_on_plate_1 (scene ")
    assert reply.reason.endswith("cannot be reset automatically: its scene declares no start_regions and no object "
                                 "starts on a container")

    graph = Graph(tmp_path)
    graph.run_task_to_its_end()
    graph.command(episode_id="r1", kind="reset", start="after_task", start_after="e0")
    reply = graph.outbox.of("reply")[-1]
    assert not reply.accepted and reply.reason == ("start refused: cannot count the scene episode e0 left: the last "
                                                   "episode this orchestrator ran is e1 (aborted)")


def test_a_reset_that_runs_again_continues_the_last_ones_scene_and_starts_with_what_it_did_not_get_to(tmp_path):
    """After an unconfirmed reset the day asks for the reset of the same scene again: in lockstep it continues the
    scene the last reset left, and it sends back first what that one never got to, last what it tried and could
    not move (a carrot lying against the spoon kept the fingers off the spoon)."""
    graph = Graph(tmp_path)
    graph.run_task_to_its_end()
    graph.command(episode_id="r1", kind="reset", start="after_task", start_after="e1")
    graph.answer_all({})
    assert [(s["object"], s["destination"]) for s in graph.episode.status.plan] == [
        ("spoon", "right_far"), ("carrot", "right_near")]
    graph.step(0)
    graph.control.end_episode("budget spent")
    tried = [{"index": 0, "text": "put the spoon on the far right side of the table", "done": False,
              "cause": "attempted_never_completed", "first_done_step": None},
             {"index": 1, "text": "put the carrot on the right side of the table near the robot", "done": False,
              "cause": "never_reached", "first_done_step": None}]
    graph.ender.score("r1", {"success": False, "subgoals_done": 0, "subgoals": tried, "violations": [],
                             "final_goal": {}, "steps_used": 1})
    graph.answer_all({})
    assert not graph.episode.status.result["reset"]["confirmed"]
    r1_end = graph.episode.last_end_ns
    graph.command(episode_id="r2", kind="reset", start="after_task", start_after="e1")
    counted = [d for d in graph.requests() if d.request["reason"] == "start_regions"][-4:]
    assert {(d.episode_id, d.stamp_ns) for d in counted} == {("e1", r1_end)}  # the scene as r1 left it
    graph.answer_all({})
    status = graph.episode.status
    assert (status.episode_id, status.state, status.start_after) == ("r2", "running", "e1")
    assert [(s["object"], s["destination"]) for s in status.plan] == [("carrot", "right_near"), ("spoon", "right_far")]
