"""The real google-genai client against a local fake Gemini server on 127.0.0.1.

Each scenario of the acceptance list: counts, garbled text, code-fenced JSON, a blocked prompt,
429 then 200, persistent 500, and a hang past the timeout. None crashes, retries stay within
``max_attempts``, unreadable or failed calls are "not complete", and every call is recorded.
"""

from __future__ import annotations

import base64
import io
import logging

import numpy as np
import pytest
from PIL import Image

from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import VerificationRequest
from ladder_ros.vlm import GeminiSettings, VLMConfig, Verifier, make_components
from ladder_ros.vlm.accounting import ModelPrice, PriceTable, UsageLedger
from ladder_ros.vlm.prompts import load_prompt
from tests.vlm_fixtures.fake_gemini import (FakeGeminiServer, Hang, Respond, blocked_reply, error_reply,
                                            text_reply, use_local_endpoint)

SECRET = "test-key-7f3a9c-never-logged"
MODEL = "gemini-2.5-flash"
PRICES = PriceTable({MODEL: ModelPrice(0.30, 2.50)}, source="test", as_of="test")
CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
IMAGE = np.zeros((12, 16, 3), np.uint8)
IMAGE[:, :8] = (255, 128, 0)


@pytest.fixture(autouse=True)
def _local_only(monkeypatch):
    use_local_endpoint(monkeypatch, "LADDER_TEST_GEMINI_KEY", SECRET)


def components_for(server: FakeGeminiServer, **gemini):
    settings = dict(api_key_env="LADDER_TEST_GEMINI_KEY", base_url=server.url, timeout_s=2.0, max_attempts=3,
                    initial_backoff_s=0.01, max_backoff_s=0.05)
    settings.update(gemini)
    config = VLMConfig(backend="gemini", model=MODEL, gemini=GeminiSettings(**settings))
    return make_components(config, ledger=UsageLedger(PRICES))


def verify(components, required: int = 1):
    request = VerificationRequest(request_id=3, step=40, plan_index=0, subgoal=CARROT, required=required,
                                  reason="after_release")
    result = components.verifier.verify(request, [("main", IMAGE)])
    return result, Verifier.is_complete(result, request)


def test_count_reply_through_the_real_client():
    script = [text_reply('One carrot rests on the plate.\n{"count": 1}', prompt_tokens=1200, output_tokens=40,
                         thinking_tokens=180, thought="Looking at the plate...")]
    with FakeGeminiServer(script) as server:
        components = components_for(server, include_thoughts=True, thinking_budget=512)
        result, complete = verify(components)
        components.close()
    assert result.count == 1 and complete and result.error is None and result.source == "gemini"
    assert result.raw_reply == 'One carrot rests on the plate.\n{"count": 1}'  # thought parts are not the answer
    assert result.usage["input_tokens"] == 1200 and result.usage["thinking_tokens"] == 180
    assert result.usage["cost_usd"] == pytest.approx((1200 * 0.30 + (40 + 180) * 2.50) / 1e6)
    record = components.ledger.records[0]
    assert record.thoughts == "Looking at the plate..." and record.attempts == 1
    (sent,) = server.requests
    assert sent.path.endswith(f"/models/{MODEL}:generateContent")
    assert sent.headers.get("x-goog-api-key") == SECRET  # the key travels only to the endpoint
    config = sent.body["generationConfig"]
    assert config["temperature"] == 0.0 and config["maxOutputTokens"] == 2048
    assert 512 in config["thinkingConfig"].values()
    parts = sent.body["contents"][0]["parts"]
    assert parts[0]["text"] == load_prompt("verification.txt") + "\n\n" + load_prompt(
        "verification_container_suffix.txt")
    assert parts[1]["text"] == "Subtask: put the carrot on the plate"
    inline = parts[2].get("inlineData") or parts[2].get("inline_data")
    assert inline["mime_type" if "mime_type" in inline else "mimeType"] == "image/png"
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(inline["data"]))))
    assert np.array_equal(decoded, IMAGE)  # lossless


def test_count_two_is_not_enough_for_three_duplicates():
    with FakeGeminiServer([text_reply('{"count": 2}')]) as server:
        result, complete = verify(components_for(server), required=3)
    assert result.count == 2 and not complete


def test_garbled_reply_is_recorded_and_not_complete_without_a_re_ask():
    garbled = "carrot plate yes yes {count: one} ]]"
    with FakeGeminiServer([text_reply(garbled)]) as server:
        components = components_for(server)
        result, complete = verify(components)
    assert result.count is None and not complete and result.raw_reply == garbled
    assert len(server.requests) == 1
    assert components.ledger.summary()["failed_by_kind"] == {"unparseable": 1}


def test_code_fenced_json_after_reasoning():
    reply = "I see the carrot resting on the plate.\n```json\n{\"count\": 1}\n```"
    with FakeGeminiServer([text_reply(reply)]) as server:
        result, complete = verify(components_for(server))
    assert result.count == 1 and complete


def test_blocked_prompt_is_not_complete_and_keeps_its_input_tokens():
    with FakeGeminiServer([blocked_reply("SAFETY", prompt_tokens=900)]) as server:
        components = components_for(server)
        result, complete = verify(components)
    assert result.count is None and not complete and result.error == "blocked: prompt blocked: SAFETY"
    assert len(server.requests) == 1  # a blocked prompt is an answer, not a transport failure
    assert result.usage["input_tokens"] == 900 and result.usage["cost_usd"] == pytest.approx(900 * 0.30 / 1e6)


def test_429_then_200_is_retried_once(caplog):
    caplog.set_level(logging.DEBUG)
    with FakeGeminiServer([error_reply(429, "quota"), text_reply('{"count": 1}')]) as server:
        components = components_for(server)
        result, complete = verify(components)
    assert result.count == 1 and complete
    assert len(server.requests) == 2
    record = components.ledger.records[0]
    assert record.attempts == 2 and record.error is None
    assert "retrying" in caplog.text and SECRET not in caplog.text


def test_persistent_500_stops_after_max_attempts():
    script = [error_reply(500, "backend exploded")] * 5
    with FakeGeminiServer(script) as server:
        components = components_for(server, max_attempts=3)
        result, complete = verify(components)
    assert result.count is None and not complete
    assert len(server.requests) == 3
    assert "HTTP 500" in result.error and "after 3 attempts" in result.error
    summary = components.ledger.summary()
    assert summary["failed_calls"] == 1 and summary["attempts"] == 3
    assert summary["cost_usd"] == 0.0  # refused calls generate nothing


def test_client_errors_are_not_retried():
    with FakeGeminiServer([error_reply(400, "bad request"), text_reply('{"count": 1}')]) as server:
        result, complete = verify(components_for(server))
    assert result.count is None and not complete and "HTTP 400" in result.error
    assert len(server.requests) == 1


def test_hang_past_the_timeout_is_bounded_and_not_complete():
    with FakeGeminiServer([Hang(3.0), Hang(3.0), text_reply('{"count": 1}')]) as server:
        components = components_for(server, timeout_s=0.3, max_attempts=2)
        result, complete = verify(components)
    assert result.count is None and not complete
    assert len(server.requests) == 2  # bounded: the third scripted answer is never asked for
    assert "Timeout" in result.error and "after 2 attempts" in result.error
    assert components.ledger.summary()["cost_usd"] is None  # a timed-out call may have been billed


def test_a_malformed_response_body_is_recorded_not_raised():
    with FakeGeminiServer([Respond(200, b"<html>proxy error</html>")]) as server:
        result, complete = verify(components_for(server))
    assert result.count is None and not complete and result.error
    assert len(server.requests) == 1


def test_every_reply_is_recorded_and_the_key_never_is(caplog):
    caplog.set_level(logging.DEBUG)
    script = [text_reply('{"count": 1}'), text_reply("garbled"), blocked_reply(), error_reply(500, "x"),
              error_reply(500, "x"), text_reply("```json\n{\"count\": 0}\n```")]
    with FakeGeminiServer(script) as server:
        components = components_for(server, max_attempts=2)
        results = [verify(components)[0] for _ in range(5)]
    assert [r.count for r in results] == [1, None, None, None, 0]
    records = components.ledger.records
    assert len(records) == 5
    assert [r.raw_reply for r in records] == ['{"count": 1}', "garbled", None, None, "```json\n{\"count\": 0}\n```"]
    assert all(r.error or r.parse_error for r in records[1:4])
    dump = repr([r.to_dict() for r in records]) + repr([r.to_dict() for r in results]) + caplog.text
    assert SECRET not in dump


def test_planning_uses_the_planning_cap_and_parses_goals():
    reply = ('{"goals": [{"goal": "put the yellow lemon in the blue bin", "object": "the yellow lemon", '
             '"destination": "the blue bin"}]}')
    with FakeGeminiServer([text_reply(reply)]) as server:
        components = components_for(server)
        plan = components.planner.plan("put the lemon in the bin", IMAGE)
    assert plan.ok and plan.subgoals[0].key == ("lemon", "bin")
    assert server.requests[0].body["generationConfig"]["maxOutputTokens"] == 8192


def test_server_stops_by_itself():
    server = FakeGeminiServer([], lifetime_s=0.2).start()
    server._thread.join(timeout=5)
    assert not server._thread.is_alive()
