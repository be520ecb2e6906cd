"""The action safety filter (ladder_ros.core.safety): preset bounds, reject and hold still, one action a step."""

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import FRANKA, PRESETS, WIDOWX
from ladder_ros.core.safety import (
    DUPLICATE,
    GRIPPER_DOMAIN,
    INTERVENTION_KINDS,
    MALFORMED,
    NON_FINITE,
    ROTATION_LIMIT,
    TRANSLATION_LIMIT,
    ActionFilter,
    ActionLimits,
    GripperDomain,
    StepActionGate,
    Verdict,
)


def test_every_preset_has_cited_limits():
    for preset in PRESETS.values():
        limits = preset.action_limits
        assert isinstance(limits, ActionLimits) and len(limits.source) > 20, preset.name
    assert WIDOWX.action_limits.gripper is GripperDomain.BINARY
    assert FRANKA.action_limits.gripper is GripperDomain.CONTINUOUS
    # Franka: the arm's Cartesian velocity limits over one 15 Hz period
    assert FRANKA.action_limits.max_translation_m == pytest.approx(1.7 / FRANKA.control_rate_hz)


def test_limits_are_validated_on_construction():
    for bad in (0.0, -0.1, math.nan, math.inf, 2.0, True):
        with pytest.raises(ConfigError, match="max_translation_m"):
            ActionLimits(max_translation_m=bad, max_rotation_rad=0.1, gripper=GripperDomain.BINARY)
    with pytest.raises(ConfigError, match="max_rotation_rad"):
        ActionLimits(max_translation_m=0.05, max_rotation_rad=4.0, gripper=GripperDomain.BINARY)
    with pytest.raises(ConfigError, match="gripper"):
        ActionLimits(max_translation_m=0.05, max_rotation_rad=0.1, gripper="binary")


def test_an_action_within_bounds_is_applied_unchanged():
    safety = ActionFilter(WIDOWX.action_limits)
    action = [0.04, -0.05, 0.03, 0.5, -math.pi / 2, 0.35, -1.0]
    result = safety.check(action)
    assert result.verdict is Verdict.APPLIED and np.array_equal(result.action, action)
    assert safety.applied == 1 and safety.interventions == 0


@pytest.mark.parametrize("index,value,kind,axis", [
    (0, 1e6, TRANSLATION_LIMIT, "ee_dx"),
    (2, -0.0501, TRANSLATION_LIMIT, "ee_dz"),
    (4, 1.6, ROTATION_LIMIT, "ee_dpitch"),
    (5, -math.inf, NON_FINITE, "ee_dyaw"),
    (1, math.nan, NON_FINITE, "ee_dy"),
    (6, 0.3, GRIPPER_DOMAIN, "gripper"),
    (6, 0.0, GRIPPER_DOMAIN, "gripper"),
])
def test_an_action_out_of_bounds_is_rejected_whole_and_the_arm_holds_still(index, value, kind, axis):
    safety = ActionFilter(WIDOWX.action_limits)
    safety.check([0.01, 0, 0, 0, 0, 0, -1.0])  # the gripper was last commanded closed
    action = [0.01, 0.01, 0.01, 0.0, 0.0, 0.0, 1.0]
    action[index] = value
    result = safety.check(action)
    assert result.verdict is Verdict.REJECTED and result.kind == kind and result.axis == axis
    assert axis in result.reason
    # hold still: no motion, and the gripper keeps its last applied command (closed), not the offered one
    assert np.array_equal(result.action, [0, 0, 0, 0, 0, 0, -1.0])
    assert safety.counts[kind] == 1 and safety.interventions == 1 and safety.applied == 1


def test_continuous_gripper_domain_and_malformed_actions():
    safety = ActionFilter(FRANKA.action_limits)
    assert safety.check([0, 0, 0, 0, 0, 0, 0.3]).applied
    assert safety.check([0, 0, 0, 0, 0, 0, 1.2]).kind == GRIPPER_DOMAIN
    assert safety.check([0, 0, 0]).kind == MALFORMED
    assert safety.check(["a"] * 7).kind == MALFORMED
    assert safety.check([[0] * 7]).kind == MALFORMED
    summary = safety.summary()
    assert summary["counts"][MALFORMED] == 3 and summary["applied"] == 1
    assert set(summary["counts"]) == set(INTERVENTION_KINDS)
    safety.reset()
    assert safety.interventions == 0 and safety.hold_action()[6] == 1.0  # a reset gripper is open


def test_one_action_per_step_a_second_is_an_error_not_a_race():
    gate = StepActionGate()
    gate.begin(0)
    assert not gate.ready
    assert gate.offer(0, "policy") == "accepted" and gate.ready
    assert gate.take() == "policy"
    assert gate.offer(0, "late") == DUPLICATE  # the step was executed already: dropped
    gate.begin(1)
    assert gate.offer(2, "future") == "other_step"
    assert gate.offer(1, "first") == "accepted"
    assert gate.offer(1, "second") == DUPLICATE  # still open: the two disagree
    assert gate.conflicted and gate.ready
    assert gate.take() is None  # the step holds still
    gate.begin(2)
    assert not gate.conflicted and gate.offer(2, "next") == "accepted"
