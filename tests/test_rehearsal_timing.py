"""The rehearsal's timing object from stamps: periods, idle periods by cause, the largest gap outside subgoal starts."""

import pytest

from ladder_ros.evaluation.rehearsal_timing import TaggedAction, episode_timing, pooled_timing

MS = 1_000_000


def tag(ms, subgoal="a", chunk=0, index=0, observed_ms=None, inference=400.0):
    return TaggedAction(ms * MS, (ms - 500 if observed_ms is None else observed_ms) * MS, chunk, index, inference,
                        "", subgoal)


def test_idle_gaps_are_told_apart_by_cause_and_the_period_error_is_over_consecutive_actions():
    # Commands every 200 ms with +-4 ms jitter; a 600 ms gap where the next subgoal's first chunk came, a 400 ms gap
    # where the policy handed out an action the driver did not apply, a 600 ms gap with nothing handed out.
    commands = [0, 204, 400, 596, 800, 1400, 1600, 2000, 2200, 2800, 3000]
    tags = [tag(0), tag(200), tag(400), tag(600), tag(800), tag(1400, "b", 1), tag(1600, "b", 1, 1),
            tag(1800, "b", 1, 2), tag(2000, "b", 2), tag(2200, "b", 2, 1), tag(3000, "b", 3)]
    timing = episode_timing([c * MS for c in commands], tags, 0.2)
    assert timing["gaps"] == {"subgoal_start": 2, "driver_hold": 1, "policy_idle": 2}
    assert timing["idle_periods"] == 5
    assert timing["max_action_gap_ms"] == 600.0 and timing["max_gap_outside_starts_ms"] == 600.0
    assert timing["period_error_p99_pct"] == pytest.approx(2.0, abs=0.1)  # the jitter, not the gaps
    pooled = pooled_timing([timing, timing])
    assert pooled["gaps"] == {"subgoal_start": 4, "driver_hold": 2, "policy_idle": 4}
    assert pooled["max_gap_outside_starts_ms"] == 600.0


def test_without_gaps_the_largest_gap_outside_starts_is_the_largest_period():
    commands = [0, 200, 410, 600]
    timing = episode_timing([c * MS for c in commands], [tag(c) for c in commands], 0.2)
    assert timing["gaps"] == {"subgoal_start": 0, "driver_hold": 0, "policy_idle": 0}
    assert timing["max_gap_outside_starts_ms"] == 210.0
    assert timing["obs_to_action_age_ms"]["p50"] == 500.0
