"""The JSON schemas of the graph: round trips through the core types, strict parsing (no rclpy needed)."""

import json

import numpy as np
import pytest

from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import ContainerInfo, ObjectPose, PrivilegedState
from ladder_ros.core.task import Subgoal
from ladder_ros.core.triggers import AttemptEnd, GripperEvents
from ladder_ros.core.verification import VerificationRequest, VerificationResult
from ladder_ros.messages import (
    DOCUMENTS,
    SCHEMA_VERSION,
    DecisionDoc,
    EpisodeCommand,
    EpisodeStatus,
    GripperEventsDoc,
    PlanRequestDoc,
    PlanResultDoc,
    PrivilegedStateDoc,
    SchemaError,
    VerificationRequestDoc,
    VerificationResultDoc,
    decode,
    encode,
    stamp_of_step,
    step_of_stamp,
)

SUBGOAL = Subgoal("carrot", "plate", "put the carrot on the plate")


def test_gripper_events_round_trip():
    events = GripperEvents(step=7, aperture=0.8, is_open=True,
                           release=AttemptEnd(step=7, reason="release", close_steps=4))
    doc = decode(encode(GripperEventsDoc.of("ep", 123, events)), GripperEventsDoc)
    assert doc.gripper_events() == events and doc.stamp_ns == 123


def test_privileged_state_round_trip_is_bit_exact():
    rng = np.random.default_rng(0)
    privileged = PrivilegedState(
        goal=GoalState(resting={("carrot", "plate"): 1}, held=frozenset({"spoon"})),
        objects={"carrot_0": ObjectPose("carrot", rng.normal(size=3), rng.normal(size=4))},
        containers={"plate": ContainerInfo("plate", rng.normal(size=3), np.array([0.07, 0.07]), 0.0123456789)},
        grasped=("spoon_0",))
    euler, target = rng.normal(size=3), rng.normal(size=3)
    doc = decode(encode(PrivilegedStateDoc.of("ep", 3, 99, privileged, (True, False), euler, target)),
                 PrivilegedStateDoc)
    back = doc.privileged_state()
    assert back.goal == privileged.goal and back.grasped == privileged.grasped
    assert np.array_equal(back.objects["carrot_0"].position, privileged.objects["carrot_0"].position)
    assert np.array_equal(back.objects["carrot_0"].quaternion, privileged.objects["carrot_0"].quaternion)
    assert back.containers["plate"].surface_z == privileged.containers["plate"].surface_z
    assert np.array_equal(doc.ee_euler_array(), euler) and np.array_equal(doc.target_position_array(), target)
    assert doc.goal_states == [True, False]


def test_verification_round_trip():
    request = VerificationRequest(request_id=2, step=40, plan_index=1, subgoal=SUBGOAL, required=2,
                                  reason="after_release")
    doc = decode(encode(VerificationRequestDoc.of("ep", 5, request)), VerificationRequestDoc)
    assert doc.verification_request() == request
    result = VerificationResult(request_id=2, count=1, source="oracle", latency_ms=3.0)
    assert decode(encode(VerificationResultDoc.of("ep", 40, result)), VerificationResultDoc).verification_result() \
        == result


def test_malformed_payloads_fail_at_decode():
    with pytest.raises(SchemaError, match="gripper_events: malformed events"):
        GripperEventsDoc(episode_id="ep", step=3, stamp_ns=0, events={"step": 3, "is_open": True})
    with pytest.raises(SchemaError, match="verification_request: malformed request"):
        VerificationRequestDoc(episode_id="ep", step=3, stamp_ns=0, request={"request_id": 1})
    with pytest.raises(SchemaError, match="verification_result: malformed result"):
        VerificationResultDoc(episode_id="ep", step=3, result={"count": 2})


def test_plan_round_trip_and_refusals():
    request = PlanRequestDoc(episode_id="ep", step=0, stamp_ns=5, instruction="put the carrot on the plate")
    assert decode(encode(request), PlanRequestDoc) == request
    result = PlanResultDoc(episode_id="ep", subgoals=[SUBGOAL.to_dict()], raw_reply="{...}", latency_ms=3.5)
    assert decode(encode(result), PlanResultDoc).plan() == [SUBGOAL]
    with pytest.raises(SchemaError, match="no plan \\(no JSON object\\)"):
        PlanResultDoc(episode_id="ep", subgoals=None, error="no JSON object").plan()
    with pytest.raises(SchemaError, match="empty plan"):
        PlanResultDoc(episode_id="ep", subgoals=[]).plan()
    with pytest.raises(SchemaError, match="malformed subgoal"):
        PlanResultDoc(episode_id="ep", subgoals=[{"object": "carrot"}]).plan()
    with pytest.raises(SchemaError, match="'instruction' must not be empty"):
        PlanRequestDoc(episode_id="ep", step=0, stamp_ns=0, instruction=" ")


def test_status_round_trip_and_clock():
    status = EpisodeStatus(episode_id="ep", state="running", task={"task_id": "t"}, rate_hz=15.0,
                           origin_ns=1_700_000_000_000_000_000)
    assert decode(encode(status), EpisodeStatus) == status
    for step in (0, 1, 2, 3, 1000, 12345):
        assert status.step_of_stamp(status.step_stamp_ns(step)) == step
    assert status.step_of_stamp(status.step_stamp_ns(1) + 1) is None  # between steps
    assert status.step_of_stamp(status.origin_ns - 1) is None
    assert step_of_stamp(0, 5.0, stamp_of_step(0, 5.0, 7)) == 7


@pytest.mark.parametrize("cls", DOCUMENTS)
def test_unknown_schema_version_is_rejected(cls):
    with pytest.raises(SchemaError, match="unsupported schema_version"):
        decode(json.dumps({"doc": cls.DOC, "schema_version": SCHEMA_VERSION + 1}), cls)


def test_strict_parsing_names_the_problem():
    good = EpisodeCommand(command="start", task_id="t").to_dict()
    with pytest.raises(SchemaError, match="unknown field 'extra'"):
        EpisodeCommand.from_dict({**good, "extra": 1})
    with pytest.raises(SchemaError, match="wrong document kind"):
        decode(encode(EpisodeCommand(command="stop")), DecisionDoc)
    with pytest.raises(SchemaError, match="missing field 'step'"):
        DecisionDoc.from_dict({"doc": "decision", "schema_version": SCHEMA_VERSION, "episode_id": "e",
                               "stamp_ns": 0, "instruction": "x"})
    with pytest.raises(SchemaError, match="unknown command 'jump'"):
        EpisodeCommand(command="jump")
    with pytest.raises(SchemaError, match="names a task_id"):
        EpisodeCommand(command="start")
    with pytest.raises(SchemaError, match="field 'layout' must be int"):
        EpisodeCommand.from_dict({**good, "layout": True})
    with pytest.raises(SchemaError, match="not valid JSON"):
        decode("{", EpisodeCommand)
    with pytest.raises(SchemaError, match="names an instruction"):
        DecisionDoc(episode_id="e", step=0, stamp_ns=0, instruction=None, finished=False)
