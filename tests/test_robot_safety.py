"""The drivers' half of the safety filter: joint targets, the workspace box, and the supervisor's states."""

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.safety import (
    ESTOP,
    INTERVENTION_KINDS,
    JOINT_LIMIT,
    JUMP,
    MALFORMED,
    NON_FINITE,
    ROBOT_ERROR,
    STALL,
    WATCHDOG,
    ActionFilter,
    JointLimits,
    JointTargetFilter,
    Verdict,
    WorkspaceBox,
)
from ladder_ros.core.safety_supervisor import ERROR, OK, WARN, Permission, SafetySupervisor, SupervisorConfig

LIMITS = JointLimits(("a", "b"), (-1.0, -2.0), (1.0, 2.0), (0.1, 0.2), source="test")


def test_joint_limits_are_validated_with_the_bad_value_named():
    with pytest.raises(ConfigError, match="lower limit must be below upper"):
        JointLimits(("a",), (1.0,), (0.0,), (0.1,))
    with pytest.raises(ConfigError, match="max_step"):
        JointLimits(("a",), (-1.0,), (1.0,), (0.0,))
    with pytest.raises(ConfigError, match="2 values"):
        JointLimits(("a", "b"), (-1.0,), (1.0, 1.0), (0.1, 0.1))
    with pytest.raises(ConfigError, match="finite"):
        JointLimits(("a",), (-math.inf,), (1.0,), (0.1,))
    with pytest.raises(ConfigError, match="distinct"):
        JointLimits(("a", "a"), (-1.0, -1.0), (1.0, 1.0), (0.1, 0.1))
    assert LIMITS.scaled_steps(0.5).max_step == (0.05, 0.1)


@pytest.mark.parametrize("target,kind,axis", [
    ([0.05, math.nan], NON_FINITE, "b"),
    ([1.01, 0.0], JOINT_LIMIT, "a"),
    ([0.0, -2.5], JOINT_LIMIT, "b"),
    ([0.15, 0.0], JUMP, "a"),  # 0.15 rad in one step, the most is 0.1
    ([0.0, 0.0, 0.0], MALFORMED, None),
    (["x", 0.0], MALFORMED, None),
])
def test_a_bad_joint_target_is_refused_whole_and_the_previous_target_held(target, kind, axis):
    joints = JointTargetFilter(LIMITS)
    previous = np.array([0.0, 0.0])
    result = joints.check(target, previous)
    assert result.verdict is Verdict.REJECTED and result.kind == kind and result.axis == axis
    assert np.array_equal(result.action, previous) and joints.counts[kind] == 1 and joints.applied == 0


def test_a_good_joint_target_passes_unchanged_and_jumps_are_measured_from_the_previous_target():
    joints = JointTargetFilter(LIMITS)
    assert joints.check([0.09, -0.19], [0.0, 0.0]).applied
    assert joints.check([0.9, 1.9], [0.85, 1.75]).applied
    assert joints.check([0.9, 1.9], [0.0, 0.0]).kind == JUMP
    assert joints.applied == 2 and joints.interventions == 1
    assert joints.summary()["limits"]["max_step"] == [0.1, 0.2]


def test_a_shared_counter_counts_once_per_action():
    actions = ActionFilter(WIDOWX.action_limits)
    joints = JointTargetFilter(LIMITS, counter=actions)
    assert actions.check([0.01, 0, 0, 0, 0, 0, 1.0]).applied
    assert joints.check([0.5, 0.0], [0.0, 0.0]).kind == JUMP
    assert actions.counts[JUMP] == 1 and joints.interventions == 0 and actions.applied == 1
    assert set(actions.counts) == set(INTERVENTION_KINDS)


def test_the_workspace_box_clips_the_target_and_names_the_axes():
    box = WorkspaceBox((0.1, -0.2, 0.0), (0.4, 0.2, 0.3))
    inside = np.array([0.2, 0.0, 0.1])
    assert box.contains(inside) and box.clip(inside)[1] == []
    clipped, axes = box.clip([0.5, -0.3, 0.1])
    assert axes == ["x", "y"] and np.allclose(clipped, [0.4, -0.2, 0.1])
    with pytest.raises(ConfigError, match="z: low must be below high"):
        WorkspaceBox((0, 0, 0.3), (1, 1, 0.3))


def supervisor(**config):
    counts = ActionFilter(WIDOWX.action_limits)
    return counts, SafetySupervisor(counts, SupervisorConfig(watchdog_s=0.3, **config))


def test_dry_run_by_default_then_armed_then_disarmed():
    counts, s = supervisor()
    assert not s.armed and s.level == WARN and s.permit(0.0) is Permission.DRY_RUN
    assert s.arm() == (True, "armed") and s.level == OK and s.permit(0.1) is Permission.MOVE
    assert s.disarm()[0] and s.permit(0.2) is Permission.DRY_RUN
    assert s.holds["dry_run"] == 2 and counts.interventions == 0  # holds are not interventions
    assert s.values()["armed"] == "false" and s.values()["interventions"] == "0"


def test_the_e_stop_latches_until_released_and_release_leaves_the_robot_disarmed():
    counts, s = supervisor()
    s.arm()
    s.estop()
    assert s.estopped and not s.armed and s.level == ERROR and s.permit(1.0) is Permission.ESTOP
    assert s.estop() == "e-stop already latched" and counts.counts[ESTOP] == 1  # counted once per latch
    ok, message = s.arm()
    assert not ok and "latched" in message and not s.armed
    assert s.release()[0] and not s.estopped and not s.armed and s.permit(2.0) is Permission.DRY_RUN
    assert s.arm()[0] and s.permit(2.1) is Permission.MOVE
    assert s.values()["estop"] == "false" and s.values()["interventions"] == "1"


def test_the_watchdog_stops_an_armed_arm_once_when_commands_stop():
    counts, s = supervisor()
    assert not s.watchdog_due(10.0)  # never commanded: nothing to stop
    s.arm()
    assert s.permit(1.0) is Permission.MOVE
    assert not s.watchdog_due(1.29)
    assert s.watchdog_due(1.31) and s.watchdog_holding
    assert not s.watchdog_due(5.0) and counts.counts[WATCHDOG] == 1  # one stop per silence
    assert s.permit(5.1) is Permission.MOVE and not s.watchdog_holding
    assert s.watchdog_due(5.5) and counts.counts[WATCHDOG] == 2
    s.disarm()
    s.permit(6.0)
    assert not s.watchdog_due(9.0)  # disarmed: nothing moves, nothing to stop


def test_the_verification_hold_is_an_option():
    _, s = supervisor()
    s.arm()
    s.set_verifying(True)
    assert s.permit(0.0) is Permission.MOVE  # default: the robot runs on, as in the paper
    _, s = supervisor(hold_while_verifying=True)
    s.arm()
    s.set_verifying(True)
    assert s.permit(0.0) is Permission.VERIFYING and s.holds["verifying"] == 1
    s.set_verifying(False)
    assert s.permit(0.1) is Permission.MOVE


def test_a_robot_error_disarms_and_counts_and_episodes_keep_a_lifetime_total():
    counts, s = supervisor()
    s.arm()
    s.robot_error("reflex: cartesian_reflex")
    assert not s.armed and counts.counts[ROBOT_ERROR] == 1 and "reflex" in s.detail
    s.new_episode()
    assert counts.interventions == 0 and s.interventions_total == 1
    s.estop()
    assert s.values()["interventions"] == "2" and s.values()["episode_interventions"] == "1"
    assert s.summary()["counts"][ESTOP] == 1


def test_supervisor_config_is_validated():
    for bad in (0, -1.0, math.nan, True):
        with pytest.raises(ConfigError, match="watchdog_s"):
            SupervisorConfig(watchdog_s=bad)
    with pytest.raises(ConfigError, match="hold_while_verifying"):
        SupervisorConfig(watchdog_s=1.0, hold_while_verifying="yes")


def test_an_intervention_document_carries_no_nan():
    from ladder_ros.messages import SafetyInterventionDoc, decode, encode

    doc = SafetyInterventionDoc(episode_id="e", step=0, source="/widowx/widowx_driver", kind=NON_FINITE,
                                reason="ee_dx is nan", axis="ee_dx", value=math.nan, limit=math.inf)
    assert doc.value is None and doc.limit is None
    assert decode(encode(doc), SafetyInterventionDoc) == doc


def test_driver_parameters_are_checked_before_start_with_the_value_named():
    from ladder_ros.specs.parameters import check_node_parameters

    checked = check_node_parameters("widowx_driver", {"workspace_low": [0.1, -0.2, 0.05]})
    assert checked["workspace_low"] == [0.1, -0.2, 0.05] and checked["finger_open_m"] == 0.035
    with pytest.raises(ConfigError, match="decimal numbers"):
        check_node_parameters("widowx_driver", {"workspace_low": [0, -0.2, 0.05]}, strict={"workspace_low"})
    with pytest.raises(ConfigError, match="must have 3 values"):
        check_node_parameters("widowx_driver", {"workspace_high": [0.4, 0.2]})
    with pytest.raises(ConfigError, match="workspace_high: z must be above"):
        check_node_parameters("widowx_driver", {"workspace_high": [0.4, 0.2, 0.01]})
    with pytest.raises(ConfigError, match="finger_open_m"):
        check_node_parameters("widowx_driver", {"finger_open_m": 0.005})
    with pytest.raises(ConfigError, match="accel_time_s"):
        check_node_parameters("widowx_driver", {"accel_time_s": 0.2})
    with pytest.raises(ConfigError, match="7 distinct names"):
        check_node_parameters("franka_driver", {"joint_names": ["a"] * 7})
    with pytest.raises(ConfigError, match="speed_scale"):
        check_node_parameters("franka_driver", {"speed_scale": 0.0})


# ------------------------------------------------------------------ property-style checks of the filter and supervisor
ASYMMETRIC = JointLimits(("j1", "j2", "j3"), (-1.0, -0.2, 0.5), (0.7, 2.0, 0.9), (0.05, 0.3, 0.01), source="test")


def test_every_joint_is_held_to_its_own_limits_on_both_sides():
    joints = JointTargetFilter(ASYMMETRIC)
    middle = np.array([(lo + hi) / 2 for lo, hi in zip(ASYMMETRIC.lower, ASYMMETRIC.upper)])
    for i, name in enumerate(ASYMMETRIC.names):
        for bound, outward in ((ASYMMETRIC.lower[i], -1.0), (ASYMMETRIC.upper[i], 1.0)):
            at = middle.copy()
            at[i] = bound
            previous = at.copy()
            assert joints.check(at, previous).applied  # on the limit is inside
            beyond = at.copy()
            beyond[i] = bound + outward * 1e-6
            result = joints.check(beyond, previous)
            assert result.kind == JOINT_LIMIT and result.axis == name and result.limit == bound
    assert joints.counts[JOINT_LIMIT] == 6 and joints.applied == 6


def test_each_joint_may_step_its_own_largest_step_in_either_direction_and_no_more():
    joints = JointTargetFilter(ASYMMETRIC)
    previous = np.array([0.0, 0.9, 0.7])
    for i, name in enumerate(ASYMMETRIC.names):
        for sign in (-1.0, 1.0):
            ok = previous.copy()
            ok[i] += sign * ASYMMETRIC.max_step[i] * 0.999
            assert joints.check(ok, previous).applied
            too_far = previous.copy()
            too_far[i] += sign * ASYMMETRIC.max_step[i] * 1.001
            result = joints.check(too_far, previous)
            assert result.kind == JUMP and result.axis == name and result.limit == ASYMMETRIC.max_step[i]
            assert result.value == pytest.approx(ASYMMETRIC.max_step[i] * 1.001)
    # the joint named is the one furthest over its own step, not the one that moved furthest
    both = previous + np.array([0.06, 0.29, 0.0])  # j2 moved more, but j1 is over its smaller step
    assert joints.check(both, previous).axis == "j1"
    assert joints.counts[JUMP] == 7 and joints.applied == 6


def test_counts_add_up_over_many_episodes_and_the_lifetime_total_keeps_them():
    counts, s = supervisor()
    rng = np.random.default_rng(3)
    expected_total = 0
    for episode in range(12):
        s.new_episode()
        kinds = rng.choice([ESTOP, WATCHDOG, NON_FINITE, MALFORMED], size=int(rng.integers(0, 6)))
        for kind in kinds:
            counts.count(str(kind))
        expected_total += len(kinds)
        assert counts.interventions == len(kinds)
        assert s.values()["episode_interventions"] == str(len(kinds))
        assert s.interventions_total == expected_total
        assert sum(counts.counts.values()) == len(kinds)


def test_arming_after_an_idle_period_restarts_the_watchdog_from_the_first_command():
    counts, s = supervisor()
    s.arm()
    assert s.permit(1.0) is Permission.MOVE
    s.disarm()
    assert not s.watchdog_due(100.0)  # idle while disarmed: nothing to stop
    s.arm()
    assert s.last_command_at is None and not s.watchdog_due(200.0)  # armed but never commanded since: nothing
    assert s.permit(200.0) is Permission.MOVE
    assert not s.watchdog_due(200.29) and s.watchdog_due(200.31)
    assert counts.counts[WATCHDOG] == 1


def test_a_fault_blocks_arming_until_a_recovery_is_confirmed_and_the_state_says_why():
    counts, s = supervisor()
    s.arm()
    s.fault(STALL, "shoulder stopped following its command")
    assert not s.armed and counts.counts[STALL] == 1 and s.level == ERROR
    assert s.values()["recovery_required"] == "stall: shoulder stopped following its command"
    ok, message = s.arm()
    assert not ok and "stall" in message and "robot/recover" in message
    s.estop()
    s.release()
    assert not s.arm()[0] and s.detail.startswith("FAULT: stall")  # releasing an e-stop does not clear a fault
    s.recovered("motors rebooted")
    assert s.values()["recovery_required"] == "" and s.level == WARN and "recovered" in s.detail
    assert s.arm()[0]
    s.robot_error("reflex")
    assert counts.counts[ROBOT_ERROR] == 1 and s.values()["recovery_required"] == "robot_error: reflex"


def test_not_ready_blocks_arming_and_disarms_an_armed_robot():
    _, s = supervisor()
    s.set_not_ready("checking the motors' profile")
    ok, message = s.arm()
    assert not ok and message == "refused: checking the motors' profile"
    s.set_not_ready(None)
    assert s.arm()[0]
    s.set_not_ready("recovering")
    assert not s.armed and s.values()["not_ready"] == "recovering"


def test_the_state_says_a_stopped_arm_is_at_rest_only_when_told_so():
    _, s = supervisor()
    assert s.values()["arm_at_rest"] == ""  # no stop to report
    s.arm()
    s.estop()
    assert s.values()["arm_at_rest"] == "false" and s.detail.endswith("the arm is stopping")
    s.note_stop("hold refused by the API; arm motors torqued off")
    assert "hold refused" in s.detail and "holds" not in s.detail
    s.note_rest(True)
    assert s.values()["arm_at_rest"] == "true" and s.detail.endswith("the arm is at rest")
    s.release()
    s.arm()
    assert s.values()["arm_at_rest"] == "" and s.values()["stop"] == ""
    s.permit(0.0)
    assert s.watchdog_due(1.0) and s.values()["arm_at_rest"] == "false"
    s.permit(1.1)  # the next command lifts the hold: nothing stopped to report any more
    assert s.values()["arm_at_rest"] == "" and s.detail == "armed"


def test_the_reason_shown_follows_what_matters_most_estop_then_fault_then_dry_run():
    counts, s = supervisor()
    s.arm()
    s.estop("from the panel")
    s.fault(STALL, "elbow blocked")  # a fault while the e-stop is latched: the e-stop stays the headline
    assert s.detail.startswith("E-STOP: from the panel") and s.values()["recovery_required"] == "stall: elbow blocked"
    s.disarm("operator")
    assert s.detail.startswith("E-STOP: from the panel")  # disarming never hides a latched e-stop
    s.release()
    assert s.detail.startswith("FAULT: stall: elbow blocked") and s.level == ERROR
    s.recovered("rebooted")
    assert s.detail.startswith("dry run: recovered (rebooted)") and s.level == WARN
    assert counts.counts[ESTOP] == 1 and counts.counts[STALL] == 1
    s.disarm("operator")
    assert s.detail == "dry run: operator; the arm is stopping"  # not measured at rest since the stop
    s.note_rest(True)
    assert s.detail == "dry run: operator; the arm is at rest"
    s.arm()
    assert s.detail == "armed" and s.level == OK and s.summary()["armed"] is True
