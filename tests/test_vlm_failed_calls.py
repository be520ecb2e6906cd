"""Failed calls through the real google-genai client and a local fake Gemini server on 127.0.0.1.

One table of hostile server behaviours, run for each of the three components (verifier, planner,
next subtask): a reply cut at the token cap after a draft answer, every non-STOP finish reason
with a valid-looking answer, a missing finish reason, a blocked prompt (with and without a
candidate), a degenerate reply, an oversized one, HTTP errors, a hang, a malformed body, no
candidates, thinking that ate the whole budget. Each must be a failed call of the right kind:
never a count, a plan, a subtask or "task done", the raw reply kept, nothing raised. A STOP reply
with the same answer is the control that shows the answer would have been read.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import VerificationRequest
from ladder_ros.vlm import GeminiSettings, VLMConfig, Verifier, make_components
from ladder_ros.vlm.accounting import ModelPrice, PriceTable, UsageLedger
from tests.vlm_fixtures.fake_gemini import (Drip, FakeGeminiServer, Hang, Respond, blocked_reply, error_reply,
                                            text_reply, use_local_endpoint)

SECRET = "test-key-5c1d-failed-calls"
MODEL = "gemini-2.5-flash"
PRICES = PriceTable({MODEL: ModelPrice(0.30, 2.50)}, source="test", as_of="test")
CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
IMAGE = np.full((12, 16, 3), 90, np.uint8)
INSTRUCTION = "put the carrot on the plate"

# A valid answer of each purpose, and what it must come out as when the call is complete.
ANSWERS = {
    "verify": 'One carrot on the plate.\n{"count": 2}',
    "plan": '{"goals": [{"goal": "put the orange carrot on the plate", "object": "the orange carrot", '
            '"destination": "the white plate"}]}',
    "next_subtask": 'Nothing is placed yet.\n{"goal": "put the carrot on the plate", "object": "the carrot (orange)", '
                    '"destination": "the plate"}',
}
DRAFT = {  # a draft answer, then the model goes on and is cut
    "verify": '... {"count": 2} ... let me re-check the left side of the plate, where',
    "plan": 'Draft: {"goals": [{"goal": "put the carrot on the plate", "object": "the carrot", "destination": '
            '"the plate"}]} Now checking whether the spoon also',
    "next_subtask": 'First guess {"goal": "put the carrot on the plate", "object": "the carrot", "destination": '
                    '"the plate"} but the image shows the carrot is',
}
DEGENERATE = '{"count": ' + "[" * 1500  # ~1.5 kB of nesting: a RecursionError for a naive parser


def answer(purpose):
    return ANSWERS[purpose]


# (case, steps for one call given the purpose, expected failure kind, requests the server sees)
CASES = [
    ("stop_control", lambda p: [text_reply(answer(p))], None, 1),
    ("max_tokens_after_a_draft", lambda p: [text_reply(DRAFT[p], finish_reason="MAX_TOKENS")], "truncated", 1),
    ("max_tokens_with_a_full_answer", lambda p: [text_reply(answer(p), finish_reason="MAX_TOKENS")], "truncated", 1),
    ("thinking_ate_the_budget", lambda p: [text_reply(None, thought="Let me think...", thinking_tokens=2048,
                                                      output_tokens=None, finish_reason="MAX_TOKENS")],
     "truncated", 1),
    ("safety", lambda p: [text_reply(answer(p), finish_reason="SAFETY")], "blocked", 1),
    ("recitation", lambda p: [text_reply(answer(p), finish_reason="RECITATION")], "blocked", 1),
    ("blocklist", lambda p: [text_reply(answer(p), finish_reason="BLOCKLIST")], "blocked", 1),
    ("prohibited_content", lambda p: [text_reply(answer(p), finish_reason="PROHIBITED_CONTENT")], "blocked", 1),
    ("other", lambda p: [text_reply(answer(p), finish_reason="OTHER")], "finish", 1),
    ("unspecified", lambda p: [text_reply(answer(p), finish_reason="FINISH_REASON_UNSPECIFIED")], "finish", 1),
    ("a_finish_reason_from_a_newer_api", lambda p: [text_reply(answer(p), finish_reason="SOMETHING_NEW")],
     "finish", 1),
    ("no_finish_reason", lambda p: [text_reply(answer(p), finish_reason=None)], "finish", 1),
    ("prompt_blocked", lambda p: [blocked_reply("SAFETY")], "blocked", 1),
    ("prompt_blocked_with_a_candidate", lambda p: [blocked_reply("PROHIBITED_CONTENT", with_text=answer(p))],
     "blocked", 1),
    ("degenerate_nesting", lambda p: [text_reply(DEGENERATE)], "unparseable", 1),
    ("oversized_reply", lambda p: [text_reply("carrot " * 12_000 + answer(p))], "unparseable", 1),
    ("absurd_number", lambda p: [text_reply('{"count": 1e999, "goals": [], "goal": null, "object": null, '
                                            '"destination": null}')], "unparseable", 1),
    ("garbled", lambda p: [text_reply("yes yes the carrot {count: one} ]]")], "unparseable", 1),
    ("stop_without_text", lambda p: [text_reply(None)], "no_text", 1),
    ("no_candidates", lambda p: [Respond(200, {"usageMetadata": {"promptTokenCount": 10}})], "no_text", 1),
    ("http_401", lambda p: [error_reply(401, "API key not valid")] * 3, "http", 1),
    ("http_403", lambda p: [error_reply(403, "permission denied")] * 3, "http", 1),
    ("http_429_every_time", lambda p: [error_reply(429, "quota")] * 3, "http", 2),
    ("http_500_then_a_cut_reply", lambda p: [error_reply(500, "x"), text_reply(DRAFT[p], finish_reason="MAX_TOKENS")],
     "truncated", 2),
    ("hang", lambda p: [Hang(3.0), Hang(3.0)], "timeout", 2),
    ("malformed_body", lambda p: [Respond(200, b"<html>proxy error</html>")], "backend", 1),
]
PURPOSES = ("verify", "plan", "next_subtask")


@pytest.fixture(autouse=True)
def _local_only(monkeypatch):
    use_local_endpoint(monkeypatch, "LADDER_TEST_GEMINI_KEY", SECRET)


def components_for(server, call_deadline_s=20.0, **gemini):
    settings = dict(api_key_env="LADDER_TEST_GEMINI_KEY", base_url=server.url, timeout_s=0.4, max_attempts=2,
                    initial_backoff_s=0.01, max_backoff_s=0.02)
    settings.update(gemini)
    config = VLMConfig(backend="gemini", model=MODEL, call_deadline_s=call_deadline_s,
                       gemini=GeminiSettings(**settings))
    return make_components(config, ledger=UsageLedger(PRICES))


def ask(components, purpose):
    """One call of ``purpose``: (value or None, failure kind or None, raw reply, error)."""
    if purpose == "verify":
        request = VerificationRequest(request_id=1, step=5, plan_index=0, subgoal=CARROT, required=1,
                                      reason="after_release")
        result = components.verifier.verify(request, [("main", IMAGE)])
        assert (result.count is None) == (result.error is not None)
        if result.count is None:
            assert not Verifier.is_complete(result, request)
        return result.count, result.usage.get("failure"), result.raw_reply, result.error
    if purpose == "plan":
        result = components.planner.plan(INSTRUCTION, IMAGE)
        assert result.ok == (result.failure is None) == (result.error is None)
        value = None if result.subgoals is None else [s.key for s in result.subgoals]
        return value, None if result.failure is None else result.failure.value, result.raw_reply, result.error
    result = components.next_subtask.propose(INSTRUCTION, IMAGE)
    if result.failure is not None:
        assert result.subgoal is None and result.goal is None and not result.task_done
    value = None if result.subgoal is None else result.subgoal.key
    return value, None if result.failure is None else result.failure.value, result.raw_reply, result.error


EXPECTED = {"verify": 2, "plan": [("carrot", "plate")], "next_subtask": ("carrot", "plate")}


@pytest.mark.filterwarnings("ignore:SOMETHING_NEW is not a valid FinishReason")
@pytest.mark.parametrize("purpose", PURPOSES)
@pytest.mark.parametrize("case, steps, kind, requests", CASES, ids=[c[0] for c in CASES])
def test_every_failed_call_is_a_failure_of_its_kind_never_an_answer(purpose, case, steps, kind, requests):
    script = steps(purpose)
    with FakeGeminiServer(script) as server:
        components = components_for(server)
        value, failure, raw, error = ask(components, purpose)
        components.close()
    assert len(server.requests) == requests, case
    records = components.ledger.records
    assert len(records) == 1 and records[0].failure_kind == failure
    if kind is None:
        assert value == EXPECTED[purpose] and failure is None and error is None
        return
    assert value is None, f"{case}: a failed call was read as {value!r}"
    assert failure == kind, f"{case}: {error}"
    assert error.startswith(f"{kind}: ")
    sent_text = next((s.body for s in script if isinstance(s, Respond) and isinstance(s.body, dict)
                      and s.body.get("candidates")), None)
    visible = [part for part in (sent_text or {}).get("candidates", [{}])[0].get("content", {}).get("parts", [])
               if not part.get("thought")]
    if kind in ("truncated", "finish") and visible:
        assert raw, f"{case}: the cut reply's text must be kept for the record"
    if kind == "unparseable":
        assert raw and ("degenerate" in error or "no JSON object" in error or "count" in error
                        or "goals" in error or "next subtask" in error)


def test_a_trickling_server_cannot_hold_a_call_past_its_deadline():
    # One byte every 0.1 s keeps a 0.5 s read timeout alive for as long as the server likes.
    with FakeGeminiServer([Drip(0.1, 4.0), text_reply(ANSWERS["verify"])]) as server:
        components = components_for(server, call_deadline_s=1.5, timeout_s=0.5, max_attempts=3)
        started = time.monotonic()
        value, failure, _, error = ask(components, "verify")
        elapsed = time.monotonic() - started
        components.close()
    assert value is None and failure == "timeout" and "call deadline of 1.5 s reached during attempt 1" in error
    assert len(server.requests) == 1
    assert elapsed < 4.0  # ended by the deadline, not by the server ending its 4 s drip
    assert components.ledger.records[0].cost_usd is None  # the abandoned attempt may be billed


def test_retries_and_back_off_stay_inside_the_call_deadline():
    script = [error_reply(503, "busy")] * 20
    with FakeGeminiServer(script) as server:
        components = components_for(server, call_deadline_s=2.5, max_attempts=20, initial_backoff_s=0.3,
                                    max_backoff_s=0.3, timeout_s=5.0)
        value, failure, _, error = ask(components, "verify")
    # A retry starts only with at least 1 s left after its back-off (MIN_ATTEMPT_S).
    assert value is None and failure == "http" and "no retry: the call deadline of 2.5 s" in error
    assert 1 < len(server.requests) < 20  # retried, but stopped by the deadline, not by max_attempts


def test_partial_usage_makes_the_cost_unknown_through_the_real_client():
    with FakeGeminiServer([text_reply(ANSWERS["verify"], output_tokens=None)]) as server:
        components = components_for(server)
        value, failure, _, _ = ask(components, "verify")
    assert value == 2 and failure is None
    record = components.ledger.records[0]
    assert record.cost_usd is None and "no output tokens" in record.cost_unknown
    assert components.ledger.summary()["cost_usd"] is None


def test_a_timed_out_first_attempt_makes_a_later_success_cost_unknown():
    with FakeGeminiServer([Hang(2.0), text_reply(ANSWERS["verify"])]) as server:
        components = components_for(server, timeout_s=0.3, max_attempts=2)
        value, failure, _, _ = ask(components, "verify")
    assert value == 2 and failure is None
    record = components.ledger.records[0]
    assert record.attempts == 2 and record.cost_usd is None and "attempt 1" in record.cost_unknown


def test_the_key_is_passed_explicitly_and_the_log_says_which_variable(monkeypatch, caplog):
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-must-not-be-used")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key-must-not-be-used")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")  # must not send the key to Vertex AI
    caplog.set_level(logging.DEBUG)
    with FakeGeminiServer([text_reply(ANSWERS["verify"])]) as server:
        components = components_for(server)
        value, _, _, _ = ask(components, "verify")
    assert value == 2
    assert server.requests[0].headers.get("x-goog-api-key") == SECRET
    assert server.requests[0].path.endswith(f"/models/{MODEL}:generateContent")
    assert "Using GOOGLE_API_KEY" not in caplog.text  # it would not be true
    assert "$LADDER_TEST_GEMINI_KEY" in caplog.text and "$GOOGLE_API_KEY, $GEMINI_API_KEY also set, not used" \
        in caplog.text
    assert SECRET not in caplog.text
