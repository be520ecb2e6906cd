"""The planner, verifier and next-subtask components on scripted, oracle and replay backends."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.vlm_fixtures.scripted import ScriptedBackend

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import Observation, PrivilegedState
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import CountVerifier, VerificationRequest, VerificationResult
from ladder_ros.vlm import ImagePart, NextSubtask, Planner, Purpose, UsageLedger, Verifier, VLMConfig, make_components
from ladder_ros.vlm.accounting import ModelPrice, PriceTable
from ladder_ros.vlm.backends.base import (Attempt, CallFailure, FailureKind, GenerationRequest, Reply, TokenUsage,
                                          finish_failure)
from ladder_ros.vlm.backends.oracle import OracleBackend
from ladder_ros.vlm.backends.replay import RecordingBackend, ReplayBackend
from ladder_ros.vlm.components import NextSubtaskResult, PlanResult
from ladder_ros.vlm.parsing import ParsedGoal
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
    reply = OracleBackend().generate(GenerationRequest(Purpose.NEXT_SUBTASK, ("x",), 10))
    assert reply.text is None and "count queries only" in reply.error


# --- The backend interface's own rules: what a request accepts, how a prompt is identified, which
# --- finish reasons are failures and what they say, and the records a recording keeps of a reply.


@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 9, 3), (9, 1, 3), (480, 640, 3)])
def test_an_image_of_any_size_down_to_one_pixel_is_a_valid_view(shape):
    part = ImagePart(np.zeros(shape, np.uint8), "wrist")
    assert part.image.shape == shape and part.name == "wrist"


@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 0, 3)])
def test_an_empty_image_is_refused_by_name_and_shape(shape):
    with pytest.raises(InvalidInputError) as refused:
        ImagePart(np.zeros(shape, np.uint8), "wrist")
    assert str(refused.value) == f"image 'wrist' is empty: shape {shape}"
    # Through a component the same words reach the result, and nothing is sent.
    backend = ScriptedBackend(lambda r: '{"count": 1}')
    result = Verifier(backend).verify(request(), [("wrist", np.zeros(shape, np.uint8))])
    assert result.count is None and result.error == f"bad_input: image 'wrist' is empty: shape {shape}"
    assert backend.requests == []


@pytest.mark.parametrize("dtype, shape", [(np.float32, (4, 4, 3)), (np.uint16, (4, 4, 3)), (np.int8, (4, 4, 3)),
                                          (np.uint8, (4, 4, 4)), (np.uint8, (4, 4, 1)), (np.uint8, (4, 4)),
                                          (np.uint8, (4, 4, 3, 1))])
def test_an_image_that_is_not_rgb_uint8_is_refused_with_its_dtype_and_shape(dtype, shape):
    image = np.zeros(shape, dtype)
    with pytest.raises(InvalidInputError) as refused:
        ImagePart(image, "main")
    assert str(refused.value) == f"image 'main' must be uint8 with shape (H, W, 3), got {image.dtype} {shape}"


@pytest.mark.parametrize("image", [[[1, 2, 3]], None, "pixels"])
def test_an_image_that_is_not_an_array_is_refused_with_its_type(image):
    with pytest.raises(InvalidInputError) as refused:
        ImagePart(image, "wrist")
    assert str(refused.value) == f"image 'wrist' must be a numpy array, got {type(image).__name__}"


def test_an_image_digest_follows_the_pixels_and_the_shape_not_the_array():
    rng = np.random.default_rng(7)
    for _ in range(20):
        h = int(rng.integers(2, 9))
        w = h + int(rng.integers(1, 4))  # not square, so the transposed shape is another shape
        pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        wide = np.zeros((h, 2 * w, 3), np.uint8)
        wide[:, ::2] = pixels  # the same pixels in a strided view of a larger array
        assert ImagePart(wide[:, ::2]).digest() == ImagePart(pixels.copy()).digest()
        changed = pixels.copy()
        changed[rng.integers(h), rng.integers(w), rng.integers(3)] ^= 1
        assert ImagePart(changed).digest() != ImagePart(pixels).digest()
        # The same bytes laid out in another shape are another image.
        assert ImagePart(pixels.reshape(w, h, 3)).digest() != ImagePart(pixels).digest()


def test_a_generation_request_refuses_an_empty_prompt_and_foreign_parts():
    with pytest.raises(InvalidInputError) as empty:
        GenerationRequest(Purpose.VERIFY, (), 10)
    assert str(empty.value) == "a generation request needs at least one prompt part"
    with pytest.raises(InvalidInputError) as foreign:
        GenerationRequest(Purpose.VERIFY, ("count the carrots", IMAGE), 10)
    assert str(foreign.value) == "prompt parts are str or ImagePart, got ndarray"


@pytest.mark.parametrize("tokens", [1, 2, 2048])
def test_any_positive_token_cap_is_accepted(tokens):
    assert GenerationRequest(Purpose.PLAN, ("x",), tokens).max_output_tokens == tokens


@pytest.mark.parametrize("tokens", [0, -1, -2048, 2.5, 10.0, "10", None])
def test_a_token_cap_that_is_not_a_positive_integer_is_refused_by_value(tokens):
    with pytest.raises(InvalidInputError) as refused:
        GenerationRequest(Purpose.PLAN, ("x",), tokens)
    assert str(refused.value) == f"max_output_tokens must be a positive integer, got {tokens!r}"


def documented_fingerprint(purpose: str, parts) -> str:
    """The fingerprint of a version-1 recording, rebuilt from its layout: SHA-256 over the purpose,
    then each part in order, a text as NUL "text" NUL and its UTF-8 bytes, an image as NUL "image"
    NUL and the hex SHA-256 of its shape's repr and its C-ordered bytes."""
    import hashlib

    h = hashlib.sha256(purpose.encode())
    for part in parts:
        if isinstance(part, str):
            h.update(b"\x00text\x00" + part.encode("utf-8"))
        else:
            image = hashlib.sha256(repr(part.shape).encode() + np.ascontiguousarray(part).tobytes()).hexdigest()
            h.update(b"\x00image\x00" + image.encode())
    return h.hexdigest()


def test_a_prompt_fingerprint_is_the_recording_format_s_key():
    """Recordings made by earlier builds must still be found: the key is fixed by the format."""
    wrist = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    parts = ("Count the carrots on the plate. Zählen: ½", ImagePart(IMAGE), "Camera view 'wrist':",
             ImagePart(wrist, "wrist"))
    request_ = GenerationRequest(Purpose.VERIFY, parts, 2048, subgoal=CARROT)
    assert request_.fingerprint() == documented_fingerprint("verify", (parts[0], IMAGE, parts[2], wrist))
    # Neither the token cap nor the oracle's inputs are part of it; purpose, order and pixels are.
    assert GenerationRequest(Purpose.VERIFY, parts, 7).fingerprint() == request_.fingerprint()
    assert GenerationRequest(Purpose.PLAN, parts, 2048).fingerprint() != request_.fingerprint()
    assert GenerationRequest(Purpose.VERIFY, parts[::-1], 2048).fingerprint() != request_.fingerprint()
    # A text and an image never collide however their bytes line up.
    as_text = GenerationRequest(Purpose.VERIFY, (ImagePart(wrist).digest(),), 10)
    assert as_text.fingerprint() != GenerationRequest(Purpose.VERIFY, (ImagePart(wrist),), 10).fingerprint()


def test_a_recording_written_in_the_version_1_layout_is_replayed_in_full(tmp_path):
    parts = ("Count the carrots.", ImagePart(IMAGE))
    line = {"fingerprint": documented_fingerprint("verify", ("Count the carrots.", IMAGE)), "purpose": "verify",
            "reply": {"text": '{"count": 2}', "backend": "gemini", "model": "gemini-2.5-pro", "latency_ms": 812.5,
                      "usage": {"input_tokens": 1290, "output_tokens": 14, "thinking_tokens": 301},
                      "thoughts": "two carrots", "finish_reason": "STOP", "error": None, "error_kind": None,
                      "attempts": [{"latency_ms": 300.0, "status": 503, "error": "overloaded"},
                                   {"latency_ms": 500.0, "status": 200, "error": None}]}}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"format": "ladder_ros.vlm.recording", "version": 1}) + "\n" + json.dumps(line) + "\n")
    reply = ReplayBackend(path).generate(GenerationRequest(Purpose.VERIFY, parts, 2048))
    assert reply.failure is None and reply.backend == "replay"
    assert (reply.text, reply.model, reply.thoughts, reply.finish_reason) == (
        '{"count": 2}', "gemini-2.5-pro", "two carrots", "STOP")
    assert reply.usage == TokenUsage(1290, 14, 301)
    assert reply.attempts == (Attempt(300.0, 503, "overloaded"), Attempt(500.0, 200, None))


def test_a_recording_keeps_every_field_of_a_reply_under_its_documented_name(tmp_path):
    failed = Reply(text='{"count": 3', backend="scripted", model="gemini-2.5-flash", latency_ms=1234.56789,
                   usage=TokenUsage(1200, None, 2048), thoughts="counting", finish_reason="MAX_TOKENS",
                   error="HTTP 503 after 2 attempts", error_kind=FailureKind.HTTP,
                   attempts=(Attempt(0.1234567, 503, "unavailable"), Attempt(99.9996, None, "timed out")))
    path = tmp_path / "calls.jsonl"
    RecordingBackend(ScriptedBackend(lambda r: failed), path).generate(GenerationRequest(Purpose.PLAN, ("x",), 5))
    entry = json.loads(path.read_text().splitlines()[1])
    assert entry["purpose"] == "plan"
    assert entry["reply"] == {
        "text": '{"count": 3', "backend": "scripted", "model": "gemini-2.5-flash", "latency_ms": 1234.568,
        "usage": {"input_tokens": 1200, "output_tokens": None, "thinking_tokens": 2048},
        "thoughts": "counting", "finish_reason": "MAX_TOKENS", "error": "HTTP 503 after 2 attempts",
        "error_kind": "http",
        "attempts": [{"latency_ms": 0.123, "status": 503, "error": "unavailable"},
                     {"latency_ms": 100.0, "status": None, "error": "timed out"}]}
    back = Reply.from_dict(entry["reply"])
    assert back.failure == CallFailure(FailureKind.HTTP, "HTTP 503 after 2 attempts")
    assert (back.text, back.backend, back.model, back.latency_ms, back.usage, back.thoughts, back.finish_reason,
            back.error, back.error_kind) == ('{"count": 3', "scripted", "gemini-2.5-flash", 1234.568,
                                             failed.usage, "counting", "MAX_TOKENS", failed.error, FailureKind.HTTP)
    assert back.attempts == (Attempt(0.123, 503, "unavailable"), Attempt(100.0, None, "timed out"))


def test_a_sparse_reply_record_reads_with_empty_defaults_and_numbers_from_text():
    reply = Reply.from_dict({"text": "{}", "finish_reason": "STOP"})
    assert (reply.backend, reply.model, reply.latency_ms, reply.usage, reply.attempts) == (
        "", "", 0.0, TokenUsage(None, None, None), ())
    assert (reply.thoughts, reply.error, reply.error_kind, reply.failure) == (None, None, None, None)
    assert Reply.from_dict({"text": None, "usage": None}).usage == TokenUsage()
    assert TokenUsage.from_dict({"input_tokens": "12", "output_tokens": 3.0}) == TokenUsage(12, 3, None)
    assert Attempt.from_dict({}) == Attempt(0.0, None, None)
    assert Attempt.from_dict({"latency_ms": "2.5", "status": "429"}) == Attempt(2.5, 429, None)


# Every finish reason and what a user reads about it: only STOP is an answer.
FINISHES = [
    ("STOP", None, None),
    (None, "finish", "no finish reason reported: the reply may be incomplete"),
    ("", "finish", "no finish reason reported: the reply may be incomplete"),
    ("  ", "finish", "no finish reason reported: the reply may be incomplete"),
    ("MAX_TOKENS", "truncated", "the reply was cut at the output-token cap (MAX_TOKENS)"),
    ("DEADLINE", "timeout", "generation stopped at the call deadline (DEADLINE)"),
    *[(reason, "blocked", f"the reply was stopped by a filter ({reason})")
      for reason in ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                     "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "LANGUAGE")],
    *[(reason, "finish", f"the reply did not finish normally ({reason})")
      for reason in ("OTHER", "FINISH_REASON_UNSPECIFIED", "MALFORMED_FUNCTION_CALL", "stop", "None")],
]


@pytest.mark.parametrize("finish_reason, kind, reason", FINISHES)
def test_every_finish_reason_but_stop_is_a_failure_of_its_kind_with_its_words(finish_reason, kind, reason):
    failure = finish_failure(finish_reason)
    assert (None if failure is None else (failure.kind.value, failure.reason)) == (
        None if kind is None else (kind, reason))
    reply = Reply(text='{"count": 2}', backend="b", model="m", latency_ms=1.0, finish_reason=finish_reason)
    assert reply.failure == failure
    result = Verifier(ScriptedBackend(lambda r: reply)).verify(request(), [("main", IMAGE)])
    assert result.count == (2 if kind is None else None)
    assert result.error == (None if kind is None else f"{kind}: {reason}")
    assert result.usage["failure"] == kind


def test_a_failure_record_reads_back_as_the_same_failure():
    for kind in FailureKind:
        failure = CallFailure(kind, f"why {kind.value}")
        assert failure.to_dict() == {"kind": kind.value, "reason": f"why {kind.value}"}
        assert CallFailure.from_dict(failure.to_dict()) == failure
        assert str(failure) == f"{kind.value}: why {kind.value}"


# --- The components' own paths: what a caller may pass as views, what a refused input says, and the
# --- exact results and records of answered, failed and unreadable calls.

def scripted(answer='{"count": 1}', **kwargs):
    return ScriptedBackend(lambda r: answer, **kwargs)


def ask_each(backend, views, ledger=None):
    """The same views to each component: (verification result, plan result, next-subtask result)."""
    return (Verifier(backend, ledger).verify(request(), views), Planner(backend, ledger).plan("put it away", views),
            NextSubtask(backend, ledger).propose("put it away", views))


def assert_refused(results, message, backend):
    """Each component refused the input with ``message``, sent nothing and accounted nothing."""
    verified, planned, proposed = results
    assert verified == VerificationResult(request_id=7, count=None, source=backend.name,
                                          error=f"bad_input: {message}", usage={"failure": "bad_input"})
    assert planned == PlanResult(None, None, None, f"bad_input: {message}", 0.0, {}, FailureKind.BAD_INPUT)
    assert proposed == NextSubtaskResult(None, None, False, None, f"bad_input: {message}", 0.0, {},
                                         FailureKind.BAD_INPUT)
    assert backend.requests == []


@pytest.mark.parametrize("views, message", [
    ([("main", IMAGE), ("main", IMAGE)], "view names must be unique, got ['main', 'main']"),
    ([IMAGE], "a view is an ImagePart or a (name, image) pair, got ndarray"),
    ([(3, IMAGE)], "a view is an ImagePart or a (name, image) pair, got tuple"),
    ([("main", IMAGE, "extra")], "a view is an ImagePart or a (name, image) pair, got tuple"),
    ([("wrist", "not pixels")], "view 'wrist' is neither a numpy array nor a PIL image: str"),
    (observation(b"not pixels"), "view 'main' is neither a numpy array nor a PIL image: bytes"),
    (42, "cannot read views from int"),
    ("main", "cannot read views from str"),
    ([("main", np.zeros((4, 4, 3), np.float32))],
     "image 'main' must be uint8 with shape (H, W, 3), got float32 (4, 4, 3)"),
])
def test_views_that_cannot_be_read_are_refused_by_every_component_with_the_reason(views, message, caplog):
    ledger = UsageLedger(PRICES)
    backend = scripted()
    with caplog.at_level("WARNING", logger="ladder_ros.vlm.components"):
        assert_refused(ask_each(backend, views, ledger), message, backend)
    assert ledger.records == []
    assert f"verification 7 not sent: {message}" in [r.getMessage() for r in caplog.records]


def test_no_camera_image_is_refused_where_the_backend_reads_pixels_and_sent_where_it_does_not():
    backend = scripted()
    verified, planned, proposed = ask_each(backend, observation(None))
    assert verified.error == "bad_input: no camera image to verify from"
    assert planned.error == "bad_input: no camera image to plan from"
    assert proposed.error == "bad_input: no camera image to choose the next subtask from"
    assert backend.requests == []
    blind = scripted('{"count": 1, "goals": [], "goal": null, "object": null, "destination": null}')
    blind.reads_pixels = False
    verified, planned, proposed = ask_each(blind, observation(None))
    assert (verified.count, planned.subgoals, proposed.task_done) == (1, (), True)
    assert [(r.purpose, r.images) for r in blind.requests] == [
        (Purpose.VERIFY, ()), (Purpose.PLAN, ()), (Purpose.NEXT_SUBTASK, ())]


def test_every_accepted_form_of_views_reaches_the_model_as_named_rgb_images():
    from PIL import Image

    grey = np.arange(6 * 5, dtype=np.uint8).reshape(6, 5)
    wrist = np.full((3, 4, 3), 7, np.uint8)
    forms = [
        (IMAGE, [("main", IMAGE)]),
        (ImagePart(wrist, "wrist"), [("wrist", wrist)]),
        (Image.fromarray(grey), [("main", np.repeat(grey[:, :, None], 3, axis=2))]),
        (observation(IMAGE), [("main", IMAGE)]),
        ([ImagePart(IMAGE, "main"), ("wrist", wrist)], [("main", IMAGE), ("wrist", wrist)]),
        ((("wrist", Image.fromarray(wrist)),), [("wrist", wrist)]),
    ]
    for views, expected in forms:
        backend = scripted()
        assert Verifier(backend).verify(request(), views).count == 1
        sent = backend.requests[0].images
        assert [p.name for p in sent] == [name for name, _ in expected]
        for part, (_, pixels) in zip(sent, expected):
            assert part.image.dtype == np.uint8 and np.array_equal(part.image, pixels)


def test_an_observation_hands_its_privileged_state_to_the_backend_and_nothing_else_does():
    goal = GoalState(resting={("carrot", "plate"): 1}, held=frozenset())
    backend = scripted()
    Verifier(backend).verify(request(), observation(IMAGE, goal))
    Verifier(backend).verify(request(), [("main", IMAGE)])
    assert backend.requests[0].privileged == PrivilegedState(goal=goal)
    assert backend.requests[1].privileged is None
    assert [r.subgoal for r in backend.requests] == [CARROT, CARROT]


@pytest.mark.parametrize("cap", [0, -5, True, 2.0, "2048", None])
def test_a_component_refuses_a_token_cap_that_is_not_a_positive_integer(cap):
    for component in (Verifier, Planner, NextSubtask):
        with pytest.raises(InvalidInputError) as refused:
            component(scripted(), max_output_tokens=cap)
        assert str(refused.value) == f"max_output_tokens must be a positive integer, got {cap!r}"


def test_each_component_sends_its_own_token_cap_and_a_configured_one():
    backend = scripted()
    ask_each(backend, IMAGE)
    assert [r.max_output_tokens for r in backend.requests] == [2048, 8192, 2048]  # config.py cites the sources
    Verifier(backend, max_output_tokens=1).verify(request(), IMAGE)
    Planner(backend, max_output_tokens=3).plan("x", IMAGE)
    NextSubtask(backend, max_output_tokens=5).propose("x", IMAGE)
    assert [r.max_output_tokens for r in backend.requests[3:]] == [1, 3, 5]
    assert Verifier(backend).name == Planner(backend).name == NextSubtask(backend).name == "scripted"


def test_a_component_without_a_ledger_keeps_its_own_and_one_given_is_the_one_used():
    own = Verifier(scripted())
    result = own.verify(request(), IMAGE)
    assert [r.purpose for r in own.ledger.records] == ["verify"] and result.usage["model"] == "gemini-2.5-flash"
    shared = UsageLedger(PRICES)
    planner, proposer = Planner(scripted('{"goals": []}'), shared), NextSubtask(scripted("hmm"), shared)
    planner.plan("x", IMAGE)
    proposer.propose("x", IMAGE)
    assert planner.ledger is shared and proposer.ledger is shared
    assert [(r.purpose, r.failure_kind) for r in shared.records] == [("plan", None), ("next_subtask", "unparseable")]


def test_the_planner_prompt_carries_the_robot_the_task_and_the_goals_already_attempted():
    from ladder_ros.vlm import prompts

    backend = scripted('{"goals": []}')
    attempted = ("put the carrot on the plate: reported done", "put the spoon on the cloth: failed")
    Planner(backend).plan("tidy the table", IMAGE, attempted=attempted)
    Planner(backend, robot="WidowX 250 robot arm").plan("tidy the table", IMAGE)
    Planner(backend, robot="WidowX 250 robot arm").plan("tidy the table", IMAGE, robot="Franka Panda robot arm")
    texts = [r.parts[0] for r in backend.requests]
    assert texts == [prompts.planning_text("robot arm", "tidy the table", attempted),
                     prompts.planning_text("WidowX 250 robot arm", "tidy the table"),
                     prompts.planning_text("Franka Panda robot arm", "tidy the table")]
    assert all(entry in texts[0] for entry in attempted) and attempted[0] not in texts[1]
    NextSubtask(backend, robot="WidowX 250 robot arm").propose("tidy the table", IMAGE)
    NextSubtask(backend).propose("tidy the table", IMAGE, robot="Franka Panda robot arm")
    NextSubtask(backend).propose("tidy the table", IMAGE)
    assert [r.parts[0] for r in backend.requests[3:]] == [
        prompts.next_subtask_text("WidowX 250 robot arm", "tidy the table"),
        prompts.next_subtask_text("Franka Panda robot arm", "tidy the table"),
        prompts.next_subtask_text("robot arm", "tidy the table")]
    assert [r.purpose for r in backend.requests] == [Purpose.PLAN] * 3 + [Purpose.NEXT_SUBTASK] * 3


def test_an_answered_call_s_results_carry_the_reply_and_its_accounting():
    reply = Reply(text='{"count": 2, "goals": [{"goal": "put the carrot on the plate", "object": "the carrot", '
                       '"destination": "the plate"}], "goal": "put the spoon on the cloth", "object": "a spoon", '
                       '"destination": "the blue cloth"}',
                  backend="scripted", model="gemini-2.5-flash", latency_ms=321.5, usage=TokenUsage(1000, 20, 5),
                  finish_reason="STOP", attempts=(Attempt(100.0, 503, "busy"), Attempt(221.5, 200, None)))
    ledger = UsageLedger(PRICES)
    verified, planned, proposed = ask_each(ScriptedBackend(lambda r: reply), IMAGE, ledger)
    usage = {"model": "gemini-2.5-flash", "input_tokens": 1000, "output_tokens": 20, "thinking_tokens": 5,
             "cost_usd": pytest.approx((1000 * 0.30 + 25 * 2.50) / 1e6), "cost_unknown": None, "attempts": 2,
             "finish_reason": "STOP", "failure": None}
    assert verified == VerificationResult(7, 2, "scripted", reply.text, None, 321.5, usage)
    goal = ParsedGoal("put the carrot on the plate", "the carrot", "the plate")
    assert planned == PlanResult((goal,), (CARROT,), reply.text, None, 321.5, usage, None)
    spoon = ParsedGoal("put the spoon on the cloth", "a spoon", "the blue cloth")
    assert proposed == NextSubtaskResult(spoon, Subgoal("spoon", "cloth", "put the spoon on the cloth"), False,
                                         reply.text, None, 321.5, usage, None)
    assert [r.purpose for r in ledger.records] == ["verify", "plan", "next_subtask"]


def test_a_failed_call_s_results_carry_its_kind_its_reason_and_the_raw_reply(caplog):
    reply = Reply(text='{"count": 2, "goals": [], "goal": null, "object": null, "destination": null}',
                  backend="scripted", model="gemini-2.5-flash", latency_ms=9.0, usage=TokenUsage(10, 2048, None),
                  finish_reason="MAX_TOKENS", attempts=(Attempt(9.0, 200, None),))
    with caplog.at_level("WARNING", logger="ladder_ros.vlm.components"):
        verified, planned, proposed = ask_each(ScriptedBackend(lambda r: reply), IMAGE, UsageLedger(PRICES))
    why = "truncated: the reply was cut at the output-token cap (MAX_TOKENS)"
    usage = {"model": "gemini-2.5-flash", "input_tokens": 10, "output_tokens": 2048, "thinking_tokens": None,
             "cost_usd": pytest.approx((10 * 0.30 + 2048 * 2.50) / 1e6), "cost_unknown": None, "attempts": 1,
             "finish_reason": "MAX_TOKENS", "failure": "truncated"}
    assert verified == VerificationResult(7, None, "scripted", reply.text, why, 9.0, usage)
    assert planned == PlanResult(None, None, reply.text, why, 9.0, usage, FailureKind.TRUNCATED)
    assert proposed == NextSubtaskResult(None, None, False, reply.text, why, 9.0, usage, FailureKind.TRUNCATED)
    assert [r.getMessage() for r in caplog.records] == [
        f"{purpose} call via scripted gave no answer: {why}" for purpose in ("verify", "plan", "next_subtask")]


def test_results_of_every_kind_serialise_to_their_documented_fields():
    goal = ParsedGoal("put the carrot on the plate", "the carrot", "the plate")
    plan = PlanResult((goal,), (CARROT,), "raw", None, 1.23456, {"attempts": 1}, None)
    assert plan.to_dict() == {
        "goals": [{"goal": "put the carrot on the plate", "object": "the carrot", "destination": "the plate"}],
        "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"}],
        "raw_reply": "raw", "error": None, "latency_ms": 1.235, "usage": {"attempts": 1}, "failure": None}
    failed = PlanResult(None, None, None, "http: 429", 0.0, {}, FailureKind.HTTP)
    assert failed.to_dict() == {"goals": None, "subgoals": None, "raw_reply": None, "error": "http: 429",
                                "latency_ms": 0.0, "usage": {}, "failure": "http"}
    assert plan.ok and not failed.ok
    step = NextSubtaskResult(goal, CARROT, False, "raw", None, 7.00049, {"attempts": 2}, None)
    assert step.to_dict() == {
        "goal": {"goal": "put the carrot on the plate", "object": "the carrot", "destination": "the plate"},
        "subgoal": {"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
        "task_done": False, "raw_reply": "raw", "error": None, "latency_ms": 7.0, "usage": {"attempts": 2},
        "failure": None}
    done = NextSubtaskResult(None, None, True, None, "blocked: x", 0.5, {}, FailureKind.BLOCKED)
    assert done.to_dict() == {"goal": None, "subgoal": None, "task_done": True, "raw_reply": None,
                              "error": "blocked: x", "latency_ms": 0.5, "usage": {}, "failure": "blocked"}
    for result in (plan, failed, step, done):  # the usage dict is a copy: a record cannot change the result
        result.to_dict()["usage"]["attempts"] = 99
        assert result.usage.get("attempts") != 99


@pytest.mark.parametrize("obj, dest", [("the", "the plate"), ("the carrot", "the"), ("the", "of")])
def test_a_goal_without_a_noun_is_unreadable_with_both_names(obj, dest):
    goal = json.dumps({"goal": "put it there", "object": obj, "destination": dest})
    why = f"unparseable: no noun in object {obj!r} or destination {dest!r}"
    planned = Planner(scripted('{"goals": [' + goal + "]}")).plan("x", IMAGE)
    proposed = NextSubtask(scripted(goal)).propose("x", IMAGE)
    assert (planned.error, planned.failure, planned.subgoals) == (why, FailureKind.UNPARSEABLE, None)
    assert (proposed.error, proposed.failure, proposed.subgoal, proposed.goal) == (
        why, FailureKind.UNPARSEABLE, None, None)


@pytest.mark.parametrize("answer, why", [
    ("no json here", "unparseable: no JSON object in the reply"),
    ('{"count": -1}', None),
    ('{"goals": "carrot"}', "unparseable: the last JSON object has no 'goals' list: {'goals': 'carrot'}"),
])
def test_an_unreadable_answer_gives_the_parser_s_reason(answer, why):
    planned = Planner(scripted(answer)).plan("x", IMAGE)
    verified = Verifier(scripted(answer)).verify(request(), IMAGE)
    assert verified.count is None and verified.error.startswith("unparseable: ")
    if why is not None:
        assert planned.error == why
    proposed = NextSubtask(scripted(answer)).propose("x", IMAGE)
    assert proposed.failure is FailureKind.UNPARSEABLE and proposed.error.startswith("unparseable: ")


def test_a_backend_that_raises_or_returns_no_reply_is_a_backend_failure_logged_with_its_purpose(caplog):
    def explode(r):
        raise RuntimeError("CUDA out of memory")

    with caplog.at_level("ERROR", logger="ladder_ros.vlm.components"):
        verified, planned, proposed = ask_each(ScriptedBackend(explode, model="local-7b"), IMAGE)
    why = "backend: backend raised RuntimeError: CUDA out of memory"
    assert (verified.count, verified.error, verified.raw_reply, verified.latency_ms) == (None, why, None, 0.0)
    assert verified.usage["model"] == "local-7b" and verified.usage["failure"] == "backend"
    assert (planned.error, planned.failure, proposed.error, proposed.failure) == (
        why, FailureKind.BACKEND, why, FailureKind.BACKEND)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        f"scripted backend raised during {purpose}" for purpose in ("verify", "plan", "next_subtask")]

    class NotABackend(ScriptedBackend):  # a backend bug: the raw body instead of a Reply
        def generate(self, request_):
            self.requests.append(request_)
            return b'{"count": 1}'

    verified, planned, _ = ask_each(NotABackend(None), IMAGE)
    assert verified.error == "backend: backend raised TypeError: generate() returned bytes, not a Reply"
    assert planned.failure is FailureKind.BACKEND

    class Unnamed:  # names itself but not its model: the record says so rather than failing
        name = "home-made"
        reads_pixels = True

        def generate(self, request_):
            raise ConnectionError("refused")

    ledger = UsageLedger(PRICES)
    verified = Verifier(Unnamed(), ledger).verify(request(), IMAGE)
    assert verified.error == "backend: backend raised ConnectionError: refused"
    assert (ledger.records[0].backend, ledger.records[0].model) == ("home-made", "?")


def test_a_parser_that_raises_or_gives_no_reason_is_still_an_unreadable_call(monkeypatch, caplog):
    import ladder_ros.vlm.components as components
    from ladder_ros.vlm.parsing import ParsedCount

    def broken(text):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(components, "parse_count", broken)
    with caplog.at_level("ERROR", logger="ladder_ros.vlm.components"):
        result = Verifier(scripted()).verify(request(), IMAGE)
    assert result.error == ("unparseable: the reply could not be read: RecursionError: maximum recursion depth "
                            "exceeded")
    assert "reading a verify reply raised" in [r.getMessage() for r in caplog.records]
    monkeypatch.setattr(components, "parse_count", lambda text: ParsedCount(None, None))
    assert Verifier(scripted()).verify(request(), IMAGE).error == "unparseable: no answer in the reply"


def test_an_accounting_failure_loses_neither_the_answer_nor_the_failure(caplog):
    class BrokenLedger(UsageLedger):
        def record(self, *args, **kwargs):
            raise OSError("disk full")

    ledger = BrokenLedger(PRICES)
    with caplog.at_level("ERROR", logger="ladder_ros.vlm.components"):
        answered = Verifier(scripted('{"count": 3, "goals": []}'), ledger).verify(request(), IMAGE)
        failed = Verifier(scripted(None), ledger).verify(request(), IMAGE)
        planned = Planner(scripted('{"goals": []}'), ledger).plan("x", IMAGE)
    assert (answered.count, answered.error, answered.usage) == (3, None, {"failure": None})
    assert (failed.count, failed.error, failed.usage) == (None, "backend: scripted failure", {"failure": "backend"})
    assert (planned.subgoals, planned.usage) == ((), {})
    assert "accounting a verify call raised" in [r.getMessage() for r in caplog.records]
