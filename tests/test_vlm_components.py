"""The planner, verifier and next-subtask components on scripted, oracle and replay backends."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.vlm_fixtures.scripted import ScriptedBackend

from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import Observation, PrivilegedState
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import CountVerifier, VerificationRequest
from ladder_ros.vlm import ImagePart, NextSubtask, Planner, Purpose, UsageLedger, Verifier, VLMConfig, make_components
from ladder_ros.vlm.accounting import ModelPrice, PriceTable
from ladder_ros.vlm.backends.oracle import OracleBackend
from ladder_ros.vlm.backends.replay import RecordingBackend, ReplayBackend
from ladder_ros.vlm.prompts import load_prompt

CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
PRICES = PriceTable({"gemini-2.5-flash": ModelPrice(0.30, 2.50)}, source="test", as_of="test")


def observation(image=None, goal: GoalState | None = None, step: int = 10) -> Observation:
    return Observation(step=step, image=image, aperture=1.0, ee_position=np.zeros(3), ee_euler=np.zeros(3),
                       joint_names=(), joint_positions=np.zeros(0),
                       privileged=None if goal is None else PrivilegedState(goal=goal))


def request(required: int = 1, subgoal: Subgoal = CARROT) -> VerificationRequest:
    return VerificationRequest(request_id=7, step=10, plan_index=0, subgoal=subgoal, required=required,
                               reason="after_release")


IMAGE = np.full((8, 8, 3), 120, np.uint8)


def test_verifier_is_a_count_verifier_and_applies_the_count_rule():
    backend = ScriptedBackend(lambda r: 'One carrot on the plate.\n{"count": 1}')
    verifier = Verifier(backend, UsageLedger(PRICES))
    assert isinstance(verifier, CountVerifier)
    result = verifier.verify(request(required=1), observation(IMAGE))
    assert (result.request_id, result.count, result.source, result.error) == (7, 1, "scripted", None)
    assert Verifier.is_complete(result, request(required=1))
    assert not Verifier.is_complete(result, request(required=2))  # a duplicate needs two
    assert result.raw_reply.endswith('{"count": 1}')
    assert result.usage["input_tokens"] == 100
    assert result.usage["cost_usd"] == pytest.approx((100 * 0.3 + 10 * 2.5) / 1e6)
    sent = backend.requests[0]
    assert sent.purpose is Purpose.VERIFY and sent.max_output_tokens == 2048
    assert sent.parts[0].startswith(load_prompt("verification.txt"))
    assert sent.parts[0].endswith(load_prompt("verification_container_suffix.txt"))
    assert sent.parts[1] == "Subtask: put the carrot on the plate"
    assert isinstance(sent.parts[2], ImagePart) and np.array_equal(sent.parts[2].image, IMAGE)


def test_garbled_reply_is_recorded_raw_and_never_complete():
    ledger = UsageLedger(PRICES)
    backend = ScriptedBackend(lambda r: "The carrot is definitely on the plate, done!")
    result = Verifier(backend, ledger).verify(request(), observation(IMAGE))
    assert result.count is None and "no JSON object" in result.error
    assert result.raw_reply == "The carrot is definitely on the plate, done!"
    assert not Verifier.is_complete(result, request())
    assert len(backend.requests) == 1  # no re-ask
    assert ledger.records[0].parse_error and ledger.records[0].raw_reply == result.raw_reply


def test_backend_failure_and_backend_exception_are_not_complete():
    failing = ScriptedBackend(lambda r: None)
    result = Verifier(failing).verify(request(), observation(IMAGE))
    assert result.count is None and result.error == "backend: scripted failure"

    def explode(r):
        raise RuntimeError("CUDA out of memory")

    ledger = UsageLedger(PRICES)
    result = Verifier(ScriptedBackend(explode), ledger).verify(request(), observation(IMAGE))
    assert result.count is None and "RuntimeError: CUDA out of memory" in result.error
    assert ledger.summary()["failed_calls"] == 1


def test_bad_input_is_reported_without_calling_the_backend():
    backend = ScriptedBackend(lambda r: '{"count": 1}')
    verifier = Verifier(backend)
    no_image = verifier.verify(request(), observation(None))
    wrong_dtype = verifier.verify(request(), [("main", np.zeros((4, 4, 3), np.float32))])
    same_names = verifier.verify(request(), [("main", IMAGE), ("main", IMAGE)])
    for result in (no_image, wrong_dtype, same_names):
        assert result.count is None and result.error.startswith("bad_input: ")
        assert result.usage["failure"] == "bad_input"
    assert backend.requests == []


def test_multi_view_verification_sends_labelled_views_and_the_suffix():
    backend = ScriptedBackend(lambda r: '{"count": 2}')
    wrist = np.zeros((6, 6, 3), np.uint8)
    from PIL import Image

    result = Verifier(backend).verify(request(), [("main", IMAGE), ("wrist", Image.fromarray(wrist))])
    assert result.count == 2
    parts = backend.requests[0].parts
    assert load_prompt("verification_multiview_suffix.txt") in parts[0]
    assert parts[2] == "Camera view 'main':" and parts[4] == "Camera view 'wrist':"
    assert np.array_equal(parts[5].image, wrist)


def test_oracle_answers_from_the_privileged_goal_state_through_the_deployed_parser():
    components = make_components(VLMConfig(backend="oracle"))
    goal = GoalState(resting={("carrot", "plate"): 2, ("spoon", "cloth"): 1}, held=frozenset({"carrot"}))
    result = components.verifier.verify(request(required=2), observation(None, goal))
    assert result.count == 2 and result.source == "oracle" and result.raw_reply.endswith('{"count": 2}')
    spoon = components.verifier.verify(request(subgoal=Subgoal("spoon", "plate", "put the spoon on the plate")),
                                       observation(IMAGE, goal))
    assert spoon.count == 0
    without_state = components.verifier.verify(request(), [("main", IMAGE)])
    assert without_state.count is None and "privileged" in without_state.error
    plan = components.planner.plan("put the carrot on the plate", IMAGE)
    assert not plan.ok and "count queries only" in plan.error
    assert components.ledger.summary()["calls"] == 4


PLAN_REPLY = ('Two goals.\n{"goals": [{"goal": "put the orange carrot on the white plate", "object": "the orange '
              'carrot", "destination": "the white plate"}, {"goal": "put the yellow corn cobs on the cloth", '
              '"object": "both corn cobs", "destination": "the blue cloth"}]}')


def test_planner_turns_goals_into_subgoals_with_head_nouns():
    backend = ScriptedBackend(lambda r: PLAN_REPLY)
    result = Planner(backend, robot="WidowX 250 robot arm").plan("put the carrot on the plate", observation(IMAGE))
    assert result.ok and result.error is None
    assert result.subgoals == (Subgoal("carrot", "plate", "put the orange carrot on the white plate"),
                               Subgoal("cob", "cloth", "put the yellow corn cobs on the cloth"))
    assert result.goals[1].object == "both corn cobs"
    sent = backend.requests[0]
    assert sent.purpose is Purpose.PLAN and sent.max_output_tokens == 8192
    assert sent.parts[0].startswith("You are planning for a WidowX 250 robot arm working on a tabletop")
    assert json.loads(json.dumps(result.to_dict()))["subgoals"][0]["object"] == "carrot"
    other_robot = Planner(backend).plan("x", IMAGE, robot="Franka Panda robot arm")
    assert "Franka Panda robot arm" in backend.requests[-1].parts[0] and other_robot.ok


@pytest.mark.parametrize("reply", ["I would start with the carrot.", '{"goals": [{"goal": "x", "object": "the", '
                                                                     '"destination": "plate"}]}'])
def test_unreadable_plans_keep_the_raw_reply(reply):
    result = Planner(ScriptedBackend(lambda r: reply)).plan("put the carrot on the plate", IMAGE)
    assert not result.ok and result.subgoals is None and result.raw_reply == reply and result.error


def test_next_subtask_names_a_goal_or_reports_done():
    replies = iter(['The carrot is done.\n{"goal": "put the spoon on the plate", "object": "the metal spoon", '
                    '"destination": "the plate"}', '{"goal": null, "object": null, "destination": null}', "hmm"])
    component = NextSubtask(ScriptedBackend(lambda r: next(replies)))
    first = component.propose("put the carrot and the spoon on the plate", IMAGE)
    assert first.subgoal == Subgoal("spoon", "plate", "put the spoon on the plate") and not first.task_done
    done = component.propose("put the carrot and the spoon on the plate", IMAGE)
    assert done.task_done and done.goal is None and done.error is None
    garbled = component.propose("put the carrot and the spoon on the plate", IMAGE)
    assert garbled.goal is None and not garbled.task_done and garbled.raw_reply == "hmm"


def test_recording_then_replay_gives_the_same_results(tmp_path):
    path = tmp_path / "calls.jsonl"
    counts = iter(['{"count": 1}', "garbled", '{"count": 0}'])
    recorder = RecordingBackend(ScriptedBackend(lambda r: next(counts)), path)
    images = [IMAGE, np.zeros((8, 8, 3), np.uint8), IMAGE]
    live = [Verifier(recorder).verify(request(), [("main", img)]) for img in images]
    replayed_backend = ReplayBackend(path)
    assert replayed_backend.model == "gemini-2.5-flash"
    # Fingerprint matching: the same prompt gets its recorded replies in recorded order.
    replayed = [Verifier(replayed_backend).verify(request(), [("main", img)]) for img in images]
    assert [(r.count, r.raw_reply, r.error) for r in replayed] == [(r.count, r.raw_reply, r.error) for r in live]
    assert [r.count for r in live] == [1, None, 0]
    missing = Verifier(replayed_backend).verify(request(), [("main", np.ones((8, 8, 3), np.uint8))])
    assert missing.count is None and "no recorded reply" in missing.error
    sequence = ReplayBackend(path, match="sequence")
    plan = Planner(sequence).plan("x", IMAGE)
    assert not plan.ok and "for 'verify', not 'plan'" in plan.error


def test_replay_rejects_foreign_files(tmp_path):
    from ladder_ros.core.errors import ConfigError

    path = tmp_path / "x.jsonl"
    path.write_text('{"format": "something else"}\n')
    with pytest.raises(ConfigError, match="not a ladder_ros.vlm.recording"):
        ReplayBackend(path)
    path.write_text('{"format": "ladder_ros.vlm.recording", "version": 99}\n')
    with pytest.raises(ConfigError, match="unsupported recording version 99"):
        ReplayBackend(path)
    with pytest.raises(ConfigError, match="no such recording"):
        ReplayBackend(tmp_path / "missing.jsonl")


def test_oracle_refuses_other_purposes_directly():
    from ladder_ros.vlm.backends.base import GenerationRequest

    reply = OracleBackend().generate(GenerationRequest(Purpose.NEXT_SUBTASK, ("x",), 10))
    assert reply.text is None and "count queries only" in reply.error
