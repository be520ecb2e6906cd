"""Appendix B trigger rules, stated with hand-made aperture traces (0 closed, 1 open)."""

import math

import pytest

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.presets import FRANKA, WIDOWX, GripperTriggerParams
from ladder_ros.core.triggers import (AttemptEnd, GripperEvents, GripperMonitor, GripperTrigger,
                                      PeriodicTrigger, SuppressedRelease, normalised_aperture)

O, C = 1.0, 0.0  # open, closed


def attempt_ends(trigger, apertures, zs=None):
    """(step, AttemptEnd) for every step of the trace at which the trigger ends an attempt."""
    out = []
    for step, a in enumerate(apertures):
        end = trigger.update(step, a, None if zs is None else zs[step])
        if end is not None:
            out.append((step, end))
    return out


def fire_steps(trigger, apertures, zs=None):
    return [(step, end.reason) for step, end in attempt_ends(trigger, apertures, zs)]


def test_widowx_close_of_three_steps_then_open_ends_an_attempt():
    trace = [O, O, C, C, C, O, O]
    assert fire_steps(GripperTrigger(WIDOWX.trigger), trace) == [(5, "release")]


def test_widowx_close_one_step_too_short_does_not_fire():
    trace = [O, C, C, O, O, O]
    assert fire_steps(GripperTrigger(WIDOWX.trigger), trace) == []


def test_threshold_is_opening_past_one_half():
    # exactly 0.5 is not 'past 0.5': it counts as closed, and does not release
    trace = [O, 0.5, 0.5, 0.5, 0.5, 0.500001]
    assert fire_steps(GripperTrigger(WIDOWX.trigger), trace) == [(5, "release")]
    assert fire_steps(GripperTrigger(WIDOWX.trigger), [O, C, C, C, 0.5, 0.5]) == []


def test_widowx_release_during_cooldown_is_suppressed_and_consumed():
    # fire at 5; a release 8 steps later (13) is inside the cooldown of 8; 9 steps later fires
    trace = [O, O, C, C, C, O,  # fires at 5
             C, C, C, C, C, C, C, O,  # open at 13 = 5 + 8: suppressed, its close of 7 steps consumed
             O, O, O,  # still open after the cooldown: nothing is left to release
             C, C, C, O]  # a new close of 3 steps, open at 20: fires
    trig = GripperTrigger(WIDOWX.trigger)
    fired, suppressed = [], []
    for step, a in enumerate(trace):
        end = trig.update(step, a)
        if end:
            fired.append((step, end.close_steps))
        if trig.last_suppressed:
            suppressed.append((trig.last_suppressed.step, trig.last_suppressed.close_steps))
    assert fired == [(5, 3), (20, 3)]
    assert suppressed == [(13, 7)]


def test_a_suppressed_close_run_does_not_add_to_the_next_close():
    # suppressed at 8 (4 steps after the release at 4); the next close is 2 steps: too short,
    # even though 3 + 2 closed steps came since the last release that counted
    trace = [O, C, C, C, O, C, C, C, O, O, O, O, O, O, C, C, O, O]
    assert fire_steps(GripperTrigger(WIDOWX.trigger), trace) == [(4, "release")]


def test_widowx_release_just_after_cooldown_fires():
    trace = [O, C, C, C, O,  # fires at 4
             C, C, C, C, C, C, C, C, O]  # open at 13 = 4 + 9: outside the cooldown
    assert fire_steps(GripperTrigger(WIDOWX.trigger), trace) == [(4, "release"), (13, "release")]


def test_widowx_has_no_release_timeout():
    trace = [O] * 2000
    assert fire_steps(GripperTrigger(WIDOWX.trigger), trace) == []


def _franka_trace(close_steps, lift_m, lead=5):
    """Open, then a close of ``close_steps`` rising linearly by ``lift_m``, then open."""
    apertures = [O] * lead + [C] * close_steps + [O] * 3
    zs = [0.2] * lead + [0.2 + lift_m * i / (close_steps - 1) for i in range(close_steps)] + [0.2 + lift_m] * 3
    return apertures, zs


def test_franka_close_21_steps_with_3cm_lift_fires():
    aps, zs = _franka_trace(21, 0.03)
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == [(26, "release")]


def test_franka_lift_just_under_3cm_does_not_fire():
    aps, zs = _franka_trace(21, 0.0299)
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == []


def test_franka_close_one_step_too_short_does_not_fire():
    aps, zs = _franka_trace(20, 0.05)
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == []


def test_franka_lift_is_measured_from_the_start_of_the_close():
    # the arm was high before closing, then rose 2 cm during the close: a 2 cm lift, not 32 cm
    aps = [O] * 5 + [C] * 25 + [O]
    zs = [0.5] * 5 + [0.2 + 0.02 * i / 24 for i in range(25)] + [0.22]
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == []
    # the same close starting 1 cm lower rises 3 cm from its first closed step: a lift
    zs = [0.5] * 5 + [0.19 + 0.03 * i / 24 for i in range(25)] + [0.22]
    assert [(s, e.lift_m) for s, e in attempt_ends(GripperTrigger(FRANKA.trigger), aps, zs)] == [
        (30, pytest.approx(0.03))]


def test_franka_a_drop_during_the_close_is_not_a_lift():
    # closed for 25 steps while the arm goes DOWN 4 cm (a grasp pressed onto the table): no attempt
    aps = [O] * 5 + [C] * 25 + [O] * 3
    zs = [0.30] * 5 + [0.30 - 0.04 * i / 24 for i in range(25)] + [0.26] * 3
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == []


def test_franka_lift_is_the_highest_point_of_the_close():
    # up 3.5 cm and back down 1 cm before the release: the lift reached 3 cm, the attempt ends
    aps = [O] * 5 + [C] * 30 + [O]
    zs = [0.2] * 5 + [0.2 + 0.035 * i / 19 for i in range(20)] + [0.235 - 0.01 * i / 9 for i in range(10)] + [0.225]
    fired = attempt_ends(GripperTrigger(FRANKA.trigger), aps, zs)
    assert [(s, e.reason, e.close_steps, e.lift_m) for s, e in fired] == [(35, "release", 30, pytest.approx(0.035))]


def test_franka_attempt_ends_after_300_steps_without_release():
    aps = [O] * 700
    zs = [0.3] * 700
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == [(300, "timeout"), (600, "timeout")]


def test_franka_timeout_counts_from_the_last_release():
    aps, zs = _franka_trace(21, 0.04)  # release at 26
    aps += [O] * 400
    zs += [0.3] * 400
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps, zs) == [(26, "release"), (326, "timeout")]


def test_franka_cooldown_is_57_steps():
    aps, zs = _franka_trace(21, 0.04, lead=0)  # release at 21
    # next close of 21 steps with lift ends with an open at 21 + 57 = 78: suppressed
    gap = 78 - 21 - 21 - 1  # open steps in between so that the open lands on 78
    aps2 = aps[:22] + [O] * gap + [C] * 21 + [O]
    zs2 = zs[:22] + [0.2] * gap + [0.2 + 0.04 * i / 20 for i in range(21)] + [0.24]
    assert len(aps2) == 79
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps2, zs2) == [(21, "release")]
    aps3 = aps[:22] + [O] * (gap + 1) + [C] * 21 + [O]
    zs3 = zs[:22] + [0.2] * (gap + 1) + [0.2 + 0.04 * i / 20 for i in range(21)] + [0.24]
    assert fire_steps(GripperTrigger(FRANKA.trigger), aps3, zs3) == [(21, "release"), (79, "release")]


def test_franka_trigger_needs_the_end_effector_height():
    with pytest.raises(InvalidInputError, match="end-effector height"):
        GripperTrigger(FRANKA.trigger).update(0, 1.0, None)


def test_release_detector_of_the_verifier_has_no_cooldown():
    trig = GripperTrigger(WIDOWX.release_detector)
    trace = [O, C, C, C, O, C, C, C, O]
    assert fire_steps(trig, trace) == [(4, "release"), (8, "release")]
    assert WIDOWX.release_detector.cooldown_steps == 0
    assert FRANKA.release_detector.min_lift_m == 0.03
    assert FRANKA.release_detector.release_timeout_steps is None


@pytest.mark.parametrize("bad", [math.nan, 1.2, -0.3, "x", None])
def test_bad_aperture_is_rejected_with_its_value(bad):
    with pytest.raises(InvalidInputError, match="aperture"):
        normalised_aperture(bad)


def test_small_overshoot_is_clamped():
    assert normalised_aperture(1.03) == 1.0
    assert normalised_aperture(-0.01) == 0.0


def test_bad_input_leaves_the_trigger_unchanged():
    trig = GripperTrigger(WIDOWX.trigger)
    for step, a in enumerate([O, C, C]):
        trig.update(step, a)
    with pytest.raises(InvalidInputError):
        trig.update(3, math.nan)
    assert trig.closed_run == 2
    trig.update(3, C)
    assert trig.update(4, O) is not None


def test_periodic_trigger_every_27_steps():
    trig = PeriodicTrigger(WIDOWX.periodic_interval_steps)
    fired = [s for s in range(100) if trig.update(s)]
    assert fired == [27, 54, 81]


def test_trigger_params_are_validated():
    with pytest.raises(ValueError, match="min_close_steps"):
        GripperTriggerParams(min_close_steps=0)
    with pytest.raises(ValueError, match="open_threshold"):
        GripperTriggerParams(open_threshold=1.5)


def test_an_attempt_end_carries_its_step_reason_close_and_lift():
    aps, zs = _franka_trace(21, 0.04)  # release at 26 after 21 closed steps rising 4 cm
    [(step, end)] = attempt_ends(GripperTrigger(FRANKA.trigger), aps, zs)
    assert (step, end.step, end.reason, end.close_steps) == (26, 26, "release", 21)
    assert end.to_dict() == {"reason": "release", "close_steps": 21, "lift_m": 0.04}
    # WidowX measures no lift: the end says nothing about one
    [(_, widowx)] = attempt_ends(GripperTrigger(WIDOWX.trigger), [O, C, C, C, O])
    assert widowx.lift_m is None and widowx.to_dict() == {"reason": "release", "close_steps": 3}


def test_a_lift_is_recorded_to_the_micrometre():
    assert AttemptEnd(step=1, reason="release", close_steps=21, lift_m=0.0312345678).to_dict()["lift_m"] == 0.031235


def test_a_release_timeout_during_a_close_reports_the_close_so_far():
    # Franka: open until 289, closed from 290; 300 steps after the start the attempt ends anyway
    aps = [O] * 290 + [C] * 20
    [(step, end)] = attempt_ends(GripperTrigger(FRANKA.trigger), aps, [0.3] * len(aps))
    assert (step, end.step, end.reason, end.close_steps, end.lift_m) == (300, 300, "timeout", 11, None)
    assert end.to_dict() == {"reason": "timeout", "close_steps": 11}


def test_a_restart_re_anchors_the_release_timeout():
    trig = GripperTrigger(FRANKA.trigger)
    fired = []
    for step in range(700):
        if step == 100:
            trig.restart(100)  # e.g. the subgoal changed for another reason
        if trig.update(step, O, 0.3):
            fired.append(step)
    assert fired == [400]


def test_gripper_events_round_trip_with_every_field():
    events = GripperEvents(step=78, aperture=0.75, is_open=True,
                           attempt_end=AttemptEnd(step=78, reason="release", close_steps=21, lift_m=0.035),
                           release=AttemptEnd(step=78, reason="release", close_steps=21, lift_m=0.035),
                           suppressed=SuppressedRelease(step=78, close_steps=24))
    data = events.to_dict()
    assert data == {"step": 78, "aperture": 0.75, "is_open": True,
                    "attempt_end": {"reason": "release", "close_steps": 21, "lift_m": 0.035},
                    "release": {"reason": "release", "close_steps": 21, "lift_m": 0.035},
                    "suppressed_close_steps": 24}
    assert GripperEvents.from_dict(data) == events
    quiet = GripperEvents(step=3, aperture=0.0, is_open=False)
    assert quiet.to_dict() == {"step": 3, "aperture": 0.0, "is_open": False, "attempt_end": None, "release": None,
                               "suppressed_close_steps": None}
    assert GripperEvents.from_dict(quiet.to_dict()) == quiet
    # an end written without its close length reads as a close of 0 steps
    bare = GripperEvents.from_dict({"step": 5, "aperture": 1.0, "is_open": True, "attempt_end": {"reason": "periodic"}})
    assert bare.attempt_end == AttemptEnd(step=5, reason="periodic", close_steps=0, lift_m=None)


def test_the_monitor_reports_the_clamped_aperture_and_open_past_the_threshold():
    monitor = GripperMonitor.for_preset(WIDOWX)
    first = monitor.update(0, 1.03)
    assert (first.step, first.aperture, first.is_open) == (0, 1.0, True)
    half = monitor.update(1, 0.5)
    assert (half.aperture, half.is_open) == (0.5, False)  # 0.5 is not past 0.5


def test_the_monitor_needs_increasing_non_negative_steps():
    monitor = GripperMonitor.for_preset(WIDOWX)
    with pytest.raises(InvalidInputError, match="steps must increase: got -1 after -1"):
        monitor.update(-1, O)
    monitor.update(3, O)
    with pytest.raises(InvalidInputError, match="steps must increase: got 3 after 3"):
        monitor.update(3, O)
    with pytest.raises(InvalidInputError, match="end-effector height"):
        GripperMonitor.for_preset(FRANKA).update(0, O, None)


def test_apertures_at_the_tolerance_edges_are_clamped_not_rejected():
    assert normalised_aperture(-0.05) == 0.0 and normalised_aperture(1.05) == 1.0
    with pytest.raises(InvalidInputError, match="in \\[0, 1\\], got 1.0500001"):
        normalised_aperture(1.0500001)


@pytest.mark.parametrize("bad", [0, -27, 1.5, "27", None])
def test_periodic_interval_must_be_a_positive_integer(bad):
    with pytest.raises(InvalidInputError, match=f"interval_steps must be a positive integer, got {bad!r}"):
        PeriodicTrigger(bad)


def test_periodic_trigger_of_one_step_fires_every_step_with_its_reason():
    trig = PeriodicTrigger(1)
    ends = [trig.update(s) for s in range(1, 4)]
    assert ends == [AttemptEnd(step=s, reason="periodic") for s in range(1, 4)]
    trig.restart(10)
    assert trig.update(10) is None and trig.update(11) == AttemptEnd(step=11, reason="periodic")


def test_the_monitors_attempt_end_and_release_are_of_the_step_fed():
    monitor = GripperMonitor.for_preset(WIDOWX)
    events = [monitor.update(step, a) for step, a in enumerate([O, C, C, C, O])]
    assert (events[4].attempt_end.step, events[4].release.step) == (4, 4)
    assert all(e.attempt_end is None and e.release is None for e in events[:4])
