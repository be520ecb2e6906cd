"""The proprioceptive verifier's rules (Appendix B): when it asks, what counts as complete, what it records."""

import math
import re

import pytest

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.presets import FRANKA, WIDOWX
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import (MAX_COUNT, VerificationRequest, VerificationResult, VerificationTiming,
                                          check_count, is_complete, required_count)

CORN = Subgoal("corn", "cloth", "put the corn on the cloth")
CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")


def queries(timing, releases, steps):
    """(step, reason) of every query the timing asks for over ``steps``, releases at ``releases``;
    a query is answered at once (the caller restarts the timing, as the orchestrator does)."""
    out = []
    for step in range(steps):
        reason = timing.update(step, step in releases)
        if reason is not None:
            out.append((step, reason))
            timing.restart(step)
    return out


@pytest.mark.parametrize("count, required, complete", [
    (0, 1, False), (1, 1, True), (2, 1, True),  # 'reaches': more than needed is complete too
    (1, 2, False), (2, 2, True), (3, 2, True), (None, 1, False),  # no count is never complete
])
def test_a_subgoal_is_complete_once_the_count_reaches_the_need(count, required, complete):
    assert is_complete(count, required) is complete


def test_the_need_is_the_occurrences_in_the_plan_so_far_and_one_on_revisits():
    assert required_count(CORN, []) == 1
    assert required_count(CORN, [CORN]) == 2
    assert required_count(CORN, [CARROT, CORN, CORN]) == 3
    assert required_count(CORN, [CARROT]) == 1  # other subgoals do not count
    assert required_count(CORN, [CORN, CORN], revisit=True) == 1


def test_widowx_queries_5_steps_after_a_release_even_when_that_passes_45_steps():
    # release at 42: the query goes out at 47 (after the release), not at 45 (without one)
    assert queries(VerificationTiming(WIDOWX.verifier_timing), {42}, 60) == [(47, "after_release")]


def test_widowx_queries_after_45_steps_without_a_release_and_again_45_later():
    assert queries(VerificationTiming(WIDOWX.verifier_timing), set(), 100) == [
        (45, "without_release"), (90, "without_release")]


def test_franka_queries_35_steps_after_a_release_or_300_without():
    timing = VerificationTiming(FRANKA.verifier_timing)
    assert queries(timing, {280}, 400) == [(315, "after_release")]
    assert queries(VerificationTiming(FRANKA.verifier_timing), set(), 400) == [(300, "without_release")]


def test_a_second_release_keeps_the_first_schedule():
    assert queries(VerificationTiming(WIDOWX.verifier_timing), {10, 13}, 30) == [(15, "after_release")]


def test_a_release_before_a_restart_is_forgotten():
    timing = VerificationTiming(WIDOWX.verifier_timing)
    timing.update(3, True)
    timing.restart(5)  # the subgoal changed: its release does not time the new subgoal's query
    assert [s for s in range(5, 60) if timing.update(s, False)][:1] == [50]


def test_the_result_dict_keeps_every_field_through_a_round_trip():
    result = VerificationResult(request_id=7, count=None, source="gemini", raw_reply="I see a carrot.",
                                error="no JSON object in the reply", latency_ms=812.5,
                                usage={"input_tokens": 1290, "output_tokens": 31})
    data = result.to_dict()
    assert data == {"request_id": 7, "count": None, "source": "gemini", "raw_reply": "I see a carrot.",
                    "error": "no JSON object in the reply", "latency_ms": 812.5,
                    "usage": {"input_tokens": 1290, "output_tokens": 31}}
    assert VerificationResult.from_dict(data) == result


def test_the_request_dict_keeps_every_field_through_a_round_trip():
    request = VerificationRequest(request_id=3, step=47, plan_index=1, subgoal=CORN, required=2,
                                  reason="after_release")
    assert request.to_dict() == {"request_id": 3, "step": 47, "plan_index": 1, "subgoal": CORN.to_dict(),
                                 "required": 2, "reason": "after_release"}
    assert VerificationRequest.from_dict(request.to_dict()) == request


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2", None])
def test_a_count_must_be_a_non_negative_integer(bad):
    with pytest.raises(InvalidInputError, match="count"):
        check_count(bad)
    if bad is not None:
        with pytest.raises(InvalidInputError, match="count"):
            VerificationResult(request_id=1, count=bad, source="x")


def test_an_integral_float_count_is_an_integer():
    assert check_count(2.0) == 2 and isinstance(check_count(2.0), int)


@pytest.mark.parametrize("value,message", [
    # more objects than any scene holds: a garbled reply, never a count (1e308 would be a 309-digit integer)
    (MAX_COUNT + 1, f"count must be at most {MAX_COUNT}, got {MAX_COUNT + 1}"),
    (1e308, f"count must be at most {MAX_COUNT}, got 1e+308"),
    (1e20, f"count must be at most {MAX_COUNT}, got 1e+20"),
    (10 ** 31, f"count must be at most {MAX_COUNT}, got {10 ** 31}"),
    # refused as they were given, never printed as the hundreds of digits they convert to
    (-1e308, "count must be a non-negative integer, got -1e+308"),
    (math.inf, "count must be an integer, got inf"),
    (-math.inf, "count must be an integer, got -inf"),
    (math.nan, "count must be an integer, got nan"),
    ("2", "count must be a non-negative integer, got '2'"),
])
def test_a_count_past_any_scene_or_not_finite_is_refused_with_its_value_as_given(value, message):
    with pytest.raises(InvalidInputError, match=f"^{re.escape(message)}$"):
        check_count(value)
    assert check_count(MAX_COUNT) == MAX_COUNT and check_count(float(MAX_COUNT)) == MAX_COUNT


def test_a_result_dict_may_leave_out_what_a_backend_did_not_report():
    result = VerificationResult.from_dict({"request_id": "4", "count": 2.0})
    assert result == VerificationResult(request_id=4, count=2, source="", raw_reply=None, error=None,
                                        latency_ms=0.0, usage={})
    assert isinstance(result.count, int) and isinstance(result.request_id, int)
    assert VerificationResult.from_dict({"request_id": 4}).count is None
