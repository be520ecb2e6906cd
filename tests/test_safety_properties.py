"""The action filter and the joint filter as rules with a shape: every axis on both sides, exact bounds, counts.

Each refusal must say which rule refused, on which axis, the value and the bound (the driver copies
them into the intervention record), and every count must add up over many actions and episodes.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import (
    ACTION_AXES,
    DUPLICATE,
    GRIPPER_DOMAIN,
    INTERVENTION_KINDS,
    JOINT_LIMIT,
    JUMP,
    MALFORMED,
    NON_FINITE,
    ROTATION_LIMIT,
    TRANSLATION_LIMIT,
    ActionFilter,
    ActionLimits,
    GripperDomain,
    InterventionCounts,
    JointLimits,
    JointTargetFilter,
    StepActionGate,
    Verdict,
    WorkspaceBox,
)

# Translation allowed further than rotation, so a rule applied to the wrong axes shows.
WIDE = ActionLimits(max_translation_m=0.5, max_rotation_rad=0.1, gripper=GripperDomain.BINARY, source="test")
NARROW = ActionLimits(max_translation_m=0.02, max_rotation_rad=0.6, gripper=GripperDomain.CONTINUOUS, source="test")


# ------------------------------------------------------------------ limits and boxes are validated and normalised
def test_action_limits_accept_their_ceilings_and_name_a_bad_field():
    at_ceiling = ActionLimits(max_translation_m=1.0, max_rotation_rad=math.pi, gripper=GripperDomain.BINARY)
    assert at_ceiling.to_dict() == {"max_translation_m": 1.0, "max_rotation_rad": math.pi, "gripper": "binary"}
    assert NARROW.to_dict() == {"max_translation_m": 0.02, "max_rotation_rad": 0.6, "gripper": "continuous"}
    with pytest.raises(ConfigError, match=r"action limit max_translation_m must be in \(0, 1\], got 1\.5"):
        ActionLimits(max_translation_m=1.5, max_rotation_rad=0.1, gripper=GripperDomain.BINARY)
    with pytest.raises(ConfigError, match=r"action limit max_rotation_rad must be in \(0, 3\.14159\], got 0"):
        ActionLimits(max_translation_m=0.1, max_rotation_rad=0, gripper=GripperDomain.BINARY)


def test_a_workspace_box_is_normalised_to_float_tuples_and_validated_per_field():
    box = WorkspaceBox([0, -1, 0], np.array([1, 1, 2]))
    assert box.low == (0.0, -1.0, 0.0) and box.high == (1.0, 1.0, 2.0)
    assert all(type(v) is float for v in box.low + box.high)
    assert hash(box) == hash(WorkspaceBox((0.0, -1.0, 0.0), (1.0, 1.0, 2.0)))  # frozen and hashable after all
    assert box.to_dict() == {"low": [0.0, -1.0, 0.0], "high": [1.0, 1.0, 2.0]}
    with pytest.raises(ConfigError, match="workspace low must have 3 values, got 2"):
        WorkspaceBox((0, 0), (1, 1, 1))
    with pytest.raises(ConfigError, match="workspace high must have 3 values, got 4"):
        WorkspaceBox((0, 0, 0), (1, 1, 1, 1))
    with pytest.raises(ConfigError, match="workspace high must be finite numbers"):
        WorkspaceBox((0, 0, 0), (1, math.nan, 1))
    with pytest.raises(ConfigError, match=r"workspace low must be a list of numbers, got \['a', 0, 0\]"):
        WorkspaceBox(["a", 0, 0], (1, 1, 1))


def test_the_workspace_box_is_closed_every_wall_belongs_to_it():
    box = WorkspaceBox((0.1, -0.2, 0.0), (0.4, 0.2, 0.3))
    rng = np.random.default_rng(7)
    for _ in range(50):
        inside = rng.uniform(box.low, box.high)
        for axis in range(3):
            for wall in (box.low[axis], box.high[axis]):
                on = inside.copy()
                on[axis] = wall
                assert box.contains(on) and box.clip(on)[1] == []
                past = on.copy()
                past[axis] = wall + (1e-9 if wall == box.high[axis] else -1e-9)
                assert not box.contains(past)
                clipped, axes = box.clip(past)
                assert axes == ["xyz"[axis]] and np.array_equal(clipped, on)


def test_the_workspace_box_reads_any_numbers_and_a_position_with_an_unknown_coordinate_is_outside():
    box = WorkspaceBox((0.1, -0.2, 0.0), (0.4, 0.2, 0.3))
    assert box.contains(["0.3", "0", "0.1"]) and not box.contains(["0.5", "0", "0.1"])  # numbers as text
    assert not box.contains([None, 0.0, 0.1])  # an unknown coordinate is not known to be inside
    clipped, axes = box.clip([Fraction(1, 2), Fraction(0), Fraction(1, 10)])
    assert clipped.dtype == np.float64 and axes == ["x"] and np.allclose(clipped, [0.4, 0.0, 0.1])
    clipped, axes = box.clip(["0.5", "0", "0.1"])
    assert clipped.dtype == np.float64 and axes == ["x"] and np.allclose(clipped, [0.4, 0.0, 0.1])


def test_joint_limits_are_normalised_and_every_bound_is_checked_with_its_name():
    limits = JointLimits(["a", "b"], np.array([-1, -2]), [1, 2], np.array([2, 0.5]))  # max_step the range: allowed
    assert limits.names == ("a", "b") and limits.lower == (-1.0, -2.0) and limits.upper == (1.0, 2.0)
    assert limits.max_step == (2.0, 0.5) and hash(limits)
    assert limits.to_dict() == {"names": ["a", "b"], "lower": [-1.0, -2.0], "upper": [1.0, 2.0], "max_step": [2.0, 0.5]}
    with pytest.raises(ConfigError, match=r"joint a: lower limit must be below upper, got \[1.0, 1.0\]"):
        JointLimits(("a",), (1.0,), (1.0,), (0.1,))
    with pytest.raises(ConfigError, match=r"joint b: max_step must be in \(0, 4\] rad, got 4.5"):
        JointLimits(("a", "b"), (-1.0, -2.0), (1.0, 2.0), (0.1, 4.5))
    for field, args in (("lower limits", ((-1.0,), (1.0, 1.0), (0.1, 0.1))),
                        ("upper limits", ((-1.0, -1.0), (1.0,), (0.1, 0.1))),
                        ("max_step", ((-1.0, -1.0), (1.0, 1.0), (0.1,)))):
        with pytest.raises(ConfigError, match=f"joint {field} must have 2 values, got 1"):
            JointLimits(("a", "b"), *args)
    for names in ((), ("a", ""), ("a", 3)):
        with pytest.raises(ConfigError, match="joint limits need distinct joint names"):
            JointLimits(names, (-1.0,) * len(names), (1.0,) * len(names), (0.1,) * len(names))


def test_scaled_steps_keep_everything_but_the_step_and_take_factors_in_zero_one():
    limits = JointLimits(("a", "b"), (-1.0, -2.0), (1.0, 2.0), (0.1, 0.2), source="the datasheet")
    assert limits.scaled_steps(1.0) == limits
    half = limits.scaled_steps(0.5)
    assert half.max_step == (0.05, 0.1) and half.source == "the datasheet" and half.lower == limits.lower
    for bad in (0.0, -0.5, 1.5, 2.0):
        with pytest.raises(ConfigError, match=rf"step factor must be in \(0, 1\], got {bad}"):
            limits.scaled_steps(bad)


# ------------------------------------------------------------------ the action filter, axis by axis
def refused_on(result, kind, axis, value, limit):
    assert result.verdict is Verdict.REJECTED and not result.applied
    assert (result.kind, result.axis, result.value, result.limit) == (kind, axis, value, limit)
    assert axis in result.reason


def test_every_axis_is_held_to_its_own_bound_on_both_sides_and_reported_with_value_and_limit():
    for limits in (WIDE, NARROW):
        for i in range(6):
            bound = limits.max_translation_m if i < 3 else limits.max_rotation_rad
            kind = TRANSLATION_LIMIT if i < 3 else ROTATION_LIMIT
            for sign in (-1.0, 1.0):
                safety = ActionFilter(limits)
                at = np.zeros(7)
                at[6] = 1.0
                at[i] = sign * bound
                result = safety.check(at)  # on the bound is inside
                assert result.verdict is Verdict.APPLIED and np.array_equal(result.action, at)
                past = at.copy()
                past[i] = sign * bound * 1.0001
                result = safety.check(past)
                refused_on(result, kind, ACTION_AXES[i], past[i], bound)
                assert f"{past[i]:.6g}" in result.reason and f"{bound:g}" in result.reason
                assert safety.counts[kind] == 1 and safety.interventions == 1 and safety.applied == 1


def test_a_translation_within_its_own_limit_is_never_judged_by_the_rotation_limit():
    safety = ActionFilter(WIDE)  # translation 0.5 m, rotation 0.1 rad
    assert safety.check([0.4, -0.45, 0.3, 0.05, -0.05, 0.0, -1.0]).applied
    assert safety.check([0.4, 0.0, 0.0, 0.2, 0.0, 0.0, -1.0]).kind == ROTATION_LIMIT


def test_the_gripper_domain_binary_exact_and_continuous_closed_interval():
    binary = ActionFilter(WIDE)
    for value in (-1.0, 1.0):
        assert binary.check([0, 0, 0, 0, 0, 0, value]).applied
    for value in (0.0, 0.999, -1.001, 2.0):
        result = binary.check([0, 0, 0, 0, 0, 0, value])
        refused_on(result, GRIPPER_DOMAIN, "gripper", value, 1.0)
        assert "neither -1 (closed) nor +1 (open)" in result.reason
    continuous = ActionFilter(NARROW)
    for value in (-1.0, -0.3, 0.0, 0.7, 1.0):
        assert continuous.check([0, 0, 0, 0, 0, 0, value]).applied
    for value in (-1.0001, 1.0001, 5.0):
        result = continuous.check([0, 0, 0, 0, 0, 0, value])
        refused_on(result, GRIPPER_DOMAIN, "gripper", value, 1.0)
        assert "is outside [-1, 1]" in result.reason
    assert binary.applied == 2 and continuous.applied == 5 and continuous.counts[GRIPPER_DOMAIN] == 3


def test_non_finite_and_malformed_actions_say_what_is_wrong():
    safety = ActionFilter(WIDE)
    for i, axis in enumerate(ACTION_AXES):
        for bad in (math.nan, math.inf, -math.inf):
            action = [0.0] * 6 + [1.0]
            action[i] = bad
            result = safety.check(action)
            assert result.kind == NON_FINITE and result.axis == axis and result.limit is None
            assert result.value is not None and (math.isnan(result.value) if math.isnan(bad) else result.value == bad)
            assert result.reason == f"{axis} is {bad}"
    result = safety.check([0.0] * 6)
    assert result.kind == MALFORMED and result.reason == "an action has 7 values, got shape (6,)"
    result = safety.check([0.0, "x", 0, 0, 0, 0, 1])
    assert result.kind == MALFORMED and result.reason.startswith("not a vector of numbers (")
    assert result.axis is None and result.value is None and result.limit is None
    assert safety.counts[NON_FINITE] == 21 and safety.counts[MALFORMED] == 2 and safety.applied == 0


def test_the_hold_keeps_the_last_applied_gripper_from_a_fresh_filter_on():
    safety = ActionFilter(NARROW)
    assert np.array_equal(safety.hold_action(), [0, 0, 0, 0, 0, 0, 1.0])  # a fresh filter: open, as a reset leaves it
    assert np.array_equal(safety.check([0.5] * 7).action, [0, 0, 0, 0, 0, 0, 1.0])
    safety.check([0, 0, 0, 0, 0, 0, -0.4])
    assert np.array_equal(safety.check([math.nan] * 7).action, [0, 0, 0, 0, 0, 0, -0.4])
    with pytest.raises(ConfigError, match="limits must be ActionLimits, got dict"):
        ActionFilter({"max_translation_m": 0.1})


def test_applied_and_refused_counts_add_up_over_many_random_actions_and_reset_to_zero():
    rng = np.random.default_rng(11)
    safety = ActionFilter(WIDE)
    for episode in range(5):
        applied = refused = 0
        for _ in range(200):
            action = np.concatenate([rng.uniform(-0.6, 0.6, 3), rng.uniform(-0.12, 0.12, 3), [rng.choice([-1.0, 1.0])]])
            inside = np.all(np.abs(action[:3]) <= 0.5) and np.all(np.abs(action[3:6]) <= 0.1)
            assert safety.check(action).applied == inside
            applied += int(inside)
            refused += int(not inside)
        assert safety.applied == applied and safety.interventions == refused
        assert safety.summary() == {"applied": applied, "interventions": refused, "counts": safety.counts,
                                    "limits": WIDE.to_dict()}
        safety.reset()
        assert safety.applied == 0 and safety.interventions == 0 and set(safety.counts) == set(INTERVENTION_KINDS)


def test_an_unknown_intervention_kind_is_refused_with_the_valid_ones_listed():
    counts = InterventionCounts()
    with pytest.raises(ConfigError, match="unknown intervention kind 'bump'; valid: non_finite, malformed, "):
        counts.count("bump")
    assert counts.summary() == {"applied": 0, "interventions": 0, "counts": dict.fromkeys(INTERVENTION_KINDS, 0),
                                "limits": {}}


# ------------------------------------------------------------------ the joint filter
ASYMMETRIC = JointLimits(("j1", "j2", "j3"), (-1.0, -0.2, 0.5), (0.7, 2.0, 0.9), (0.05, 0.3, 0.01), source="test")


def test_a_joint_step_of_exactly_the_largest_step_is_allowed_on_every_joint():
    # Steps and positions that binary floating point holds exactly, so "exactly the largest step" is exact.
    dyadic = JointLimits(("j1", "j2", "j3"), (-1.0, -0.25, 0.5), (0.75, 2.0, 1.0), (0.0625, 0.25, 0.015625))
    joints = JointTargetFilter(dyadic)
    previous = np.array([0.0, 0.5, 0.75])
    for i in range(3):
        for sign in (-1.0, 1.0):
            target = previous.copy()
            target[i] += sign * dyadic.max_step[i]
            result = joints.check(target, previous)
            assert result.verdict is Verdict.APPLIED and np.array_equal(result.action, target)
            target[i] += sign * 2.0 ** -20
            assert joints.check(target, previous).kind == JUMP
    assert joints.applied == 6 and joints.counts[JUMP] == 6


def test_every_joint_refusal_carries_kind_axis_value_limit_and_a_reason():
    joints = JointTargetFilter(ASYMMETRIC)
    previous = [0.0, 0.5, 0.7]
    result = joints.check([0.0, math.inf, 0.7], previous)
    assert (result.kind, result.axis, result.value, result.limit) == (NON_FINITE, "j2", math.inf, None)
    assert result.reason == "j2 is inf"
    result = joints.check([0.0, 0.5, 0.95], previous)
    assert (result.kind, result.axis, result.value, result.limit) == (JOINT_LIMIT, "j3", 0.95, 0.9)
    assert result.reason == "j3 0.95 rad is outside [0.5, 0.9]"
    result = joints.check([-1.5, 0.5, 0.7], previous)
    assert (result.kind, result.axis, result.value, result.limit) == (JOINT_LIMIT, "j1", -1.5, -1.0)
    result = joints.check([0.0, 0.9, 0.7], previous)
    assert (result.kind, result.axis, result.limit) == (JUMP, "j2", 0.3) and result.value == pytest.approx(0.4)
    assert result.reason == "j2 would move 0.4 rad in one step, more than 0.3"
    result = joints.check([0.0, 0.5], previous)
    assert result.kind == MALFORMED and result.reason == "a joint target has 3 values, got shape (2,)"
    result = joints.check([None, {}, 0.7], previous)
    assert result.kind == MALFORMED and result.reason.startswith("not a vector of numbers (")
    for r in (result,):
        assert r.verdict is Verdict.REJECTED and np.array_equal(r.action, previous) and r.action.dtype == np.float64
    assert joints.interventions == 6 and joints.applied == 0
    held = joints.refuse(JOINT_LIMIT, "refused by the driver", [0, 1, 1])  # whole numbers: still joint angles
    assert held.action.dtype == np.float64 and held.action.tolist() == [0.0, 1.0, 1.0] and joints.interventions == 7


def test_a_first_target_without_a_previous_one_is_judged_by_the_limits_alone():
    joints = JointTargetFilter(ASYMMETRIC)
    assert joints.check([0.6, 1.9, 0.85], []).applied  # no previous target yet: no step to measure
    assert joints.check([0.6, 1.9, 0.85], [math.nan] * 3).applied
    assert joints.check([0.6, 1.9, 0.85], [None] * 3).applied  # joints not measured yet read as unknown
    assert joints.check([0.8, 1.9, 0.85], []).kind == JOINT_LIMIT
    assert joints.applied == 3


def test_the_joint_filter_checks_its_arguments():
    with pytest.raises(ConfigError, match="limits must be JointLimits, got tuple"):
        JointTargetFilter((("a",), (-1,), (1,), (0.1,)))
    with pytest.raises(ConfigError, match="counter must be InterventionCounts, got dict"):
        JointTargetFilter(ASYMMETRIC, counter={})
    assert JointTargetFilter(ASYMMETRIC).summary()["limits"] == ASYMMETRIC.to_dict()


# ------------------------------------------------------------------ one action per step
def test_a_fresh_gate_has_nothing_in_and_a_taken_step_is_no_longer_ready():
    gate = StepActionGate()
    assert gate.ready is False and gate.conflicted is False and gate.step is None
    assert gate.take() is None and gate.ready is False  # nothing offered, no step open: nothing to take
    assert gate.offer(0, "early") == "other_step"  # no step open yet
    gate.begin(0)
    assert gate.offer(0, "a") == "accepted" and gate.ready is True
    assert gate.take() == "a" and gate.ready is False and gate.take() is None
    assert gate.offer(0, "b") == DUPLICATE
    gate.reset()
    assert gate.step is None and gate.ready is False and gate.offer(0, "again") == "other_step"


@pytest.mark.parametrize("first", [-3, -2, -1, 0, 7])
def test_no_step_counts_as_executed_before_one_was_taken(first):
    gate = StepActionGate()
    gate.begin(first)
    assert gate.offer(first, "a") == "accepted" and gate.take() == "a"
    assert gate.offer(first, "late") == DUPLICATE and gate.offer(first - 1, "older") == DUPLICATE
    gate.begin(first + 1)
    assert gate.offer(first + 1, "b") == "accepted"
    gate.begin(first - 2)  # a step opened out of order is taken, but the executed mark never moves back
    gate.take()
    assert gate.offer(first, "again") == DUPLICATE


# ------------------------------------------------------------------ the supervisor's state, word for word
from ladder_ros.core.safety import ESTOP, STALL, WATCHDOG  # noqa: E402
from ladder_ros.core.safety_supervisor import (  # noqa: E402
    ERROR, OK, WARN, Permission, SafetySupervisor, SupervisorConfig)

FRESH_VALUES = {"armed": "false", "estop": "false", "interventions": "0", "detail": "dry run: arm the robot to move",
                "episode_interventions": "0", "holding": "false", "verifying": "false",
                "hold_while_verifying": "false", "dry_run_commands": "0", "recovery_required": "", "not_ready": "",
                "stop": "", "arm_at_rest": ""}


def make_supervisor(watchdog_s=0.25, hold_while_verifying=False):
    counts = ActionFilter(WIDE)
    return counts, SafetySupervisor(counts, SupervisorConfig(watchdog_s, hold_while_verifying))


def test_a_fresh_supervisor_reports_a_disarmed_idle_robot_and_refuses_bad_counts():
    counts, s = make_supervisor()
    assert s.values() == FRESH_VALUES and s.level == WARN and s.last_command_at is None  # no command yet
    assert s.summary() == {**counts.summary(), "held": {"dry_run": 0, "estop": 0, "verifying": 0}, "armed": False,
                           "estop": False}
    with pytest.raises(ConfigError, match="counts must be InterventionCounts, got dict"):
        SafetySupervisor({}, SupervisorConfig(1.0))


def test_arming_disarming_and_the_e_stop_answer_in_their_own_words():
    _, s = make_supervisor()
    assert s.disarm() == (True, "already disarmed (dry run)")
    assert s.arm() == (True, "armed") and s.values()["holding"] == "false" and s.values()["armed"] == "true"
    assert s.arm() == (True, "already armed") and s.armed is True
    assert s.disarm() == (True, "disarmed") and s.detail == "dry run: disarmed by the operator"
    assert s.release() == (True, "no e-stop latched")
    assert s.estop() == "e-stop latched: the arm is being stopped; release it, then arm again"
    assert s.detail == "E-STOP: e-stop by the operator; the arm is stopping" and s.values()["armed"] == "false"
    assert s.arm() == (False, "refused: the e-stop is latched; release it first")
    assert s.disarm("by the panel") == (True, "already disarmed (dry run)")
    assert s.detail.startswith("E-STOP: e-stop by the operator")  # disarming never hides a latched e-stop
    assert s.release() == (True, "e-stop released; the robot stays disarmed until armed again")
    assert s.detail == "dry run: e-stop released; arm the robot to move; the arm is stopping"
    s.fault(STALL, "elbow blocked")
    assert s.disarm("by the panel") == (True, "already disarmed (dry run)")
    assert s.detail.startswith("FAULT: stall: elbow blocked")  # nor a fault that awaits its recovery
    s.estop("again")
    assert s.release()[0] and s.detail.startswith("FAULT: stall: elbow blocked") and s.level == ERROR


def test_a_fault_forgets_how_the_last_stop_went_and_says_the_arm_is_stopping():
    _, s = make_supervisor()
    s.arm()
    s.permit(0.0)
    assert s.watchdog_due(1.0)
    s.note_stop("held at the measured joints")
    s.note_rest(True)
    assert s.values()["stop"] == "held at the measured joints" and s.values()["arm_at_rest"] == "true"
    s.fault(STALL, "wrist blocked")
    assert s.values()["stop"] == "" and s.values()["arm_at_rest"] == "false"
    assert s.detail == "FAULT: stall: wrist blocked; the arm is stopping"
    assert s.armed is False and s.values()["armed"] == "false" and s.summary()["armed"] is False


def test_not_ready_disarms_only_when_there_is_a_reason_and_says_it():
    _, s = make_supervisor()
    s.arm()
    s.set_not_ready(None)  # ready: an armed robot stays armed
    assert s.armed and s.values()["not_ready"] == ""
    s.set_not_ready("reading back the profile")
    assert not s.armed and s.detail == "dry run: reading back the profile"
    assert s.values()["not_ready"] == "reading back the profile"


def test_the_watchdog_is_due_exactly_at_its_period_after_every_idle_period_once():
    counts, s = make_supervisor(watchdog_s=0.25)  # a period binary floating point holds exactly
    rng = np.random.default_rng(5)
    now, stops = 0.0, 0
    for _ in range(30):
        now += float(rng.integers(1, 64)) / 4.0  # an idle period (whole quarters: exact)
        if rng.random() < 0.3:  # sometimes the operator disarms and arms again meanwhile
            s.disarm()
            assert not s.watchdog_due(now + 100.0)
            s.arm()
            assert not s.watchdog_due(now + 100.0)  # armed, but no command since: nothing to stop
        elif not s.armed:
            s.arm()
        assert s.permit(now) is Permission.MOVE
        assert s.values()["holding"] == "false" and s.level == OK
        assert not s.watchdog_due(now + 0.25 - 2.0 ** -20)
        assert s.watchdog_due(now + 0.25)  # no command for exactly watchdog_s: due
        stops += 1
        assert s.detail == "armed, holding: no command for 0.250 s; the arm is stopping"
        assert s.values()["holding"] == "true" and not s.watchdog_due(now + 10.0)
        assert counts.counts[WATCHDOG] == stops
        now += 0.25
    assert s.interventions_total == stops


def test_every_held_command_is_counted_by_why_and_the_state_says_what_is_held():
    _, s = make_supervisor(hold_while_verifying=True)
    for t in range(3):
        assert s.permit(float(t)) is Permission.DRY_RUN
    s.arm()
    s.set_verifying(True)
    assert s.values()["verifying"] == "true" and s.values()["hold_while_verifying"] == "true"
    assert s.permit(4.0) is Permission.VERIFYING and s.permit(4.5) is Permission.VERIFYING
    s.estop()
    assert s.permit(5.0) is Permission.ESTOP
    assert s.summary()["held"] == {"dry_run": 3, "estop": 1, "verifying": 2}
    assert s.values()["dry_run_commands"] == "3" and s.summary()["estop"] is True and s.summary()["armed"] is False
    assert s.summary()["counts"][ESTOP] == 1
