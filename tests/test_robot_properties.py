"""The robot drivers' pure rules with a shape, word for word: admission of stamped actions at both edges.

Every refusal names its rule, its value and its bound exactly (the driver copies them into the
intervention record), and the configuration is refused on both sides of each bound.
"""

import math
import re

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import DUPLICATE, FUTURE_STAMP, STALE
from ladder_ros.robots.admission import ActionAdmission, AdmissionConfig

PERIOD_NS = 200_000_000  # 5 Hz, the WidowX's control rate (config/widowx_params.yaml)


def admission(**config):
    return ActionAdmission(AdmissionConfig(**{"period_s": 0.2, "max_age_s": 0.5, "future_tolerance_s": 0.05,
                                              **config}))


# ------------------------------------------------------------------ admission
@pytest.mark.parametrize("field", ["period_s", "max_age_s", "future_tolerance_s"])
@pytest.mark.parametrize("bad", [True, "0.1", math.inf, -math.inf, math.nan, -0.001, None])
def test_every_admission_bound_refuses_what_is_not_a_finite_number_of_seconds(field, bad):
    with pytest.raises(ConfigError, match=f"admission {field} must be .*got {re.escape(repr(bad))}"):
        admission(**{field: bad})


def test_a_zero_clock_tolerance_is_allowed_and_a_zero_period_or_age_is_not():
    assert admission(future_tolerance_s=0).judge(1_000, 1_000).admitted  # one clock: no tolerance needed
    assert admission(future_tolerance_s=0).judge(1_001, 1_000).kind == FUTURE_STAMP
    for field in ("period_s", "max_age_s"):
        with pytest.raises(ConfigError, match=f"admission {field} must be a positive number of seconds, got 0"):
            admission(**{field: 0})
    with pytest.raises(ConfigError, match="config must be an AdmissionConfig, got dict"):
        ActionAdmission({})


def test_a_first_action_is_never_held_even_at_time_zero_of_a_simulated_clock():
    verdict = admission().judge(0, 0)
    assert verdict.admitted and verdict.due_ns == 0 and verdict.reason == ""


def test_refusals_say_their_age_gap_and_bound_exactly():
    gate = admission()
    now = 10_000_000_000
    stale = gate.judge(now - 2_000_000_000, now)
    assert (stale.kind, stale.value, stale.limit) == (STALE, 2.0, 0.5)
    assert stale.reason == ("an action stamped 2.000 s before it arrived (max_action_age_s 0.5): it answers a "
                            "moment that has passed")
    ahead = gate.judge(now + 100_000_000, now)
    assert (ahead.kind, ahead.value, ahead.limit) == (FUTURE_STAMP, 0.1, 0.05)
    assert ahead.reason == ("an action stamped 0.100 s after it arrived (future_tolerance_s 0.05): its clock is "
                            "ahead, or it is one of a burst stamped ahead")
    gate.applied(now, now)
    twin = gate.judge(now + 40_000_000, now + PERIOD_NS)
    assert (twin.kind, twin.value, twin.limit) == (DUPLICATE, 0.04, 0.1)
    assert twin.reason == ("an action stamped 40.0 ms after the last one applied: one action per control period "
                           "(200 ms)")


def test_an_action_replaced_while_it_waits_is_a_duplicate_with_the_gap_and_the_spacing():
    gate = admission()
    t = 20 * PERIOD_NS
    assert gate.wait("a", t, t + PERIOD_NS) is None and gate.waiting
    replaced = gate.wait("b", t + 30_000_000, t + PERIOD_NS)
    assert (replaced.kind, replaced.value) == (DUPLICATE, 0.03) and replaced.limit == pytest.approx(0.15)
    assert replaced.reason == ("an action waiting for its period was replaced by a newer one (stamped 30.0 ms "
                               "later) before it was applied: one action per control period")
    assert gate.due(t + PERIOD_NS) == ("b", t + 30_000_000)


def test_a_reset_forgets_a_waiting_action():
    gate = admission()
    gate.wait("a", 0, PERIOD_NS)
    gate.applied(0, 0)
    gate.reset()
    assert not gate.waiting and gate.due(10 * PERIOD_NS) is None
    assert gate.last_stamp_ns is None and gate.last_applied_ns is None
