"""Two rules at their edges: a VLM reply counting 0 objects is a count of 0 (never an unreadable reply), and
a value below its lower bound is refused exactly as one above its upper bound, at every place that checks
bounds, on every axis, the gripper included.

A count of 0 is falsy and a lower bound is the side a check written as ``value > limit`` forgets; both are
the kind of slip that passes every test with typical values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ladder_ros.core import events as ev
from ladder_ros.core.orchestrator import StepInput, make_orchestrator
from ladder_ros.core.presets import PRESETS, WIDOWX
from ladder_ros.core.safety import (
    ACTION_AXES,
    GRIPPER_DOMAIN,
    JOINT_LIMIT,
    ROTATION,
    ROTATION_LIMIT,
    TRANSLATION,
    TRANSLATION_LIMIT,
    ActionFilter,
    ActionLimits,
    GripperDomain,
    JointLimits,
    JointTargetFilter,
    Verdict,
    WorkspaceBox,
)
from ladder_ros.core.task import Subgoal, TaskCategory
from ladder_ros.core.triggers import GripperMonitor
from ladder_ros.core.verification import VerificationRequest, VerificationResult, is_complete
from ladder_ros.messages import VerificationResultDoc, decode, encode
from ladder_ros.panel.model import Verdict as PanelVerdict
from ladder_ros.policies.actions import ActionProcessor, InvalidActionError
from ladder_ros.policies.config import load_policy_config
from ladder_ros.robots import wx250s
from ladder_ros.robots.gripper import DROID_AXIS, SIGNED_AXIS, ApertureRange, commanded_aperture
from ladder_ros.vlm import Verifier
from ladder_ros.vlm.parsing import parse_count
from tests.vlm_fixtures.scripted import ScriptedBackend

REPO = Path(__file__).resolve().parents[1]
CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
IMAGE = np.full((8, 8, 3), 128, np.uint8)
STEP = 1e-3  # how far past a bound the refused values lie (every bound here is far larger)


# ------------------------------------------------------------------------------ a count of 0
# Every reply format the verifier's parser reads (the last strict JSON object with an integer "count"), each
# written with a placeholder for the number.
COUNT_FORMATS = [
    '{"count": N}',
    '{"count":N}',
    '{ "count" : N }',
    '\n\n  {"count": N}  \n',
    '```json\n{"count": N}\n```',
    'First line: I see the plate and look for a carrot on it.\n{"count": N}',
    'The answer has the form {"count": 2}. Looking at the image now.\n{"count": N}',  # an echoed example first
    '{"count": N, "reason": "nothing else on the plate"}',
    '{"reason": "counted the carrots", "count": N}',
    '{"count": N}\nThat is my answer.',
    '{"count": N.0}',  # a float with no fraction is an integer count
    '{"count": Ne0}',
]


@pytest.mark.parametrize("reply", COUNT_FORMATS)
def test_every_count_format_reads_0_as_the_count_0(reply):
    for n in (0, 1, 3):  # 0 is read exactly as the other counts are
        parsed = parse_count(reply.replace("N", str(n)))
        assert parsed.count == n and parsed.error is None, (n, parsed)
        assert parsed.count is not None


def test_minus_zero_is_the_count_0():
    for reply in ('{"count": -0}', '{"count": -0.0}'):
        parsed = parse_count(reply)
        assert parsed.count == 0 and parsed.error is None


@pytest.mark.parametrize("reply", ["N", "N objects", "There are N carrots on the plate.", '{"count": "N"}',
                                   '{"answer": {"count": N}}'])
def test_a_reply_outside_the_format_is_unreadable_whatever_the_number(reply):
    """Prose, a bare number, a count as text or nested elsewhere are not the deployed format: unreadable for
    every number alike, so 0 is never singled out (neither read where 2 would not be, nor the reverse)."""
    results = [parse_count(reply.replace("N", str(n))) for n in (0, 2)]
    assert all(r.count is None and r.error for r in results)
    for words in ("zero", "none", "no carrots"):
        assert parse_count(f"There are {words} on the plate.").count is None


def test_the_verifier_answers_0_with_a_count_not_a_failure():
    for reply in ('No carrot is on the plate.\n{"count": 0}', '```json\n{"count": 0}\n```'):
        verifier = Verifier(ScriptedBackend(lambda r, text=reply: text))
        result = verifier.verify(_request(), [("main", IMAGE)])
        assert result.count == 0 and result.error is None and result.raw_reply == reply
        assert result.usage.get("failure") is None  # not an unparseable call in the ledger
        assert not Verifier.is_complete(result, _request())
        assert verifier.ledger.summary()["calls"] == 1


def test_the_oracle_counting_nothing_answers_0():
    from ladder_ros.core.goals import GoalState
    from ladder_ros.core.observation import Observation, PrivilegedState
    from ladder_ros.vlm import VLMConfig, make_components

    observation = Observation(step=0, image=IMAGE, aperture=1.0, ee_position=np.zeros(3), ee_euler=np.zeros(3),
                              joint_names=(), joint_positions=np.zeros(0),
                              privileged=PrivilegedState(goal=GoalState(resting={("spoon", "cloth"): 1})))
    result = make_components(VLMConfig(backend="oracle")).verifier.verify(_request(), observation)
    assert result.count == 0 and result.error is None


def test_a_count_of_0_survives_every_hand_over_as_0():
    result = VerificationResult(request_id=4, count=0, source="gemini", raw_reply='{"count": 0}')
    assert VerificationResult.from_dict(result.to_dict()).count == 0
    assert VerificationResult.from_dict(json.loads(json.dumps(result.to_dict()))).count == 0
    doc = decode(encode(VerificationResultDoc.of("e1", 9, result)), VerificationResultDoc)
    assert doc.verification_result().count == 0
    assert is_complete(0, 1) is False and is_complete(None, 1) is False and is_complete(1, 1) is True
    shown = PanelVerdict(request_id=4, plan_index=0, step=9, count=0, required=1, complete=False, source="gemini")
    assert shown.text == "0/1 not complete"
    assert PanelVerdict.from_dict(shown.to_dict()).count == 0


def test_a_count_of_0_crosses_the_typed_message_as_0():
    pytest.importorskip("ladder_ros_interfaces", reason="needs the interface package (scripts/build_interfaces.sh)")
    from ladder_ros.interface_conversions import document_from_msg, document_to_msg

    for count in (0, None, 2):
        doc = VerificationResultDoc.of("e1", 9, VerificationResult(request_id=1, count=count, source="gemini"))
        back = document_from_msg(document_to_msg(doc), VerificationResultDoc)
        assert back.verification_result().count == count


def test_the_orchestrator_records_an_answer_of_0_as_the_count_0():
    o = make_orchestrator("proprio_verifier", WIDOWX, [CARROT], instruction="put the carrot on the plate",
                          budget_steps=WIDOWX.budget.steps_for(1), category=TaskCategory.SINGLE_DESTINATION)
    monitor = GripperMonitor.for_preset(WIDOWX)
    for step in range(46):
        d = o.observe(StepInput(step=step, gripper=monitor.update(step, 1.0)))
        if d.request is not None:
            break
    assert d.request is not None
    d = o.resolve(VerificationResult(request_id=d.request.request_id, count=0, source="gemini"))
    answered = [e.to_dict() for e in d.events if e.kind == ev.VERIFICATION_ANSWERED]
    assert len(answered) == 1
    assert answered[0]["count"] == 0 and answered[0]["count"] is not None and answered[0]["error"] is None
    assert answered[0]["complete"] is False and o.queue.completed == []


def _request() -> VerificationRequest:
    return VerificationRequest(request_id=1, step=10, plan_index=0, subgoal=CARROT, required=1,
                               reason="after_release")


# ------------------------------------------------------------------------------ below the lower bound
SHIPPED_POLICIES = sorted((REPO / "policies").glob("*.yaml"))


def _processor(path: Path) -> tuple[ActionProcessor, np.ndarray, np.ndarray]:
    config = load_policy_config(path)
    processor = ActionProcessor(config)
    return processor, config.action.low, config.action.high


def _chunk(processor: ActionProcessor, low: np.ndarray, high: np.ndarray, axis: int, value: float) -> np.ndarray:
    """A chunk at the middle of every axis's range but ``axis`` = ``value`` in its last executed action."""
    chunk = np.tile((low + high) / 2.0, (processor.execute, 1))
    chunk[-1, axis] = value
    return chunk


def test_the_shipped_policy_configs_are_all_checked():
    assert {p.stem for p in SHIPPED_POLICIES} >= {"bridge_pi0_server", "droid_pi05_server"}


@pytest.mark.parametrize("path", SHIPPED_POLICIES, ids=lambda p: p.stem)
def test_a_policy_output_below_an_axis_low_is_refused_like_one_above_its_high(path):
    processor, low, high = _processor(path)
    assert len(processor.axes) == len(low) and processor.axes[-1].startswith("gripper")  # the gripper is checked
    for axis, name in enumerate(processor.axes):
        # the bounds themselves and the middle are kept
        for value in (low[axis], high[axis], (low[axis] + high[axis]) / 2.0):
            assert processor.check_chunk(_chunk(processor, low, high, axis, value)).shape[1] == len(low)
        refused = {}
        for side, value in (("low", low[axis] - STEP), ("high", high[axis] + STEP)):
            with pytest.raises(InvalidActionError) as error:
                processor.check_chunk(_chunk(processor, low, high, axis, value))
            refused[side] = str(error.value)
        for side, text in refused.items():
            assert f"axis {name} = " in text and "is outside the config's bounds" in text, (side, text)
            assert f"action {processor.execute - 1}," in text
        # far below (a large negative value) as well as just below
        with pytest.raises(InvalidActionError, match=f"axis {name} = "):
            processor.check_chunk(_chunk(processor, low, high, axis, low[axis] - 1e3))


def test_a_bound_on_a_wholly_negative_range_is_checked_on_both_sides():
    """panda_joint4 lives in [-3.07, -0.07]: a check on the magnitude would refuse 0 and pass -3.5."""
    processor, low, high = _processor(REPO / "policies" / "droid_pi05_server.yaml")
    axis = processor.axes.index("panda_joint4")
    assert high[axis] < 0.0
    for value in (0.0, high[axis] + STEP, low[axis] - STEP):
        with pytest.raises(InvalidActionError, match="panda_joint4"):
            processor.check_chunk(_chunk(processor, low, high, axis, value))


@pytest.mark.parametrize("preset", sorted(p for p in PRESETS if PRESETS[p].action_limits is not None))
def test_the_safety_filter_refuses_below_minus_the_limit_like_above_the_limit(preset):
    """The filter the sim bridge and the drivers apply, with each embodiment's limits: per axis, both signs."""
    limits = PRESETS[preset].action_limits
    checked = ActionFilter(limits)
    axes = [(i, limits.max_translation_m, TRANSLATION_LIMIT) for i in range(TRANSLATION.start, TRANSLATION.stop)]
    axes += [(i, limits.max_rotation_rad, ROTATION_LIMIT) for i in range(ROTATION.start, ROTATION.stop)]
    for i, limit, kind in axes:
        for value in (-limit, limit):
            assert checked.check(_action(i, value)).verdict is Verdict.APPLIED
        outcomes = {}
        for value in (-limit - STEP, limit + STEP):
            result = checked.check(_action(i, value))
            outcomes[value > 0] = result
            assert result.verdict is Verdict.REJECTED and result.kind == kind and result.axis == ACTION_AXES[i]
            assert result.value == pytest.approx(value) and result.limit == limit
            np.testing.assert_array_equal(result.action[:6], np.zeros(6))  # held still
        assert outcomes[False].kind == outcomes[True].kind
    _check_gripper(ActionFilter(limits), limits.gripper)


@pytest.mark.parametrize("domain", list(GripperDomain))
def test_the_gripper_below_its_domain_is_refused_like_above_it(domain):
    _check_gripper(ActionFilter(ActionLimits(0.05, 0.5, domain)), domain)


def _check_gripper(checked: ActionFilter, domain: GripperDomain) -> None:
    for value in (-1.0, 1.0):
        assert checked.check(_action(6, value)).verdict is Verdict.APPLIED
    for value in (-1.0 - STEP, 1.0 + STEP, -2.0, 2.0, -1e6):
        result = checked.check(_action(6, value))
        assert result.verdict is Verdict.REJECTED and result.kind == GRIPPER_DOMAIN and result.axis == "gripper"
    interventions = checked.interventions
    if domain is GripperDomain.CONTINUOUS:
        assert checked.check(_action(6, -0.5)).verdict is Verdict.APPLIED
    else:  # binary: anything but exactly -1 or +1, on either side of 0
        for value in (-0.5, 0.5, 0.0):
            assert checked.check(_action(6, value)).kind == GRIPPER_DOMAIN
        assert checked.interventions == interventions + 3


def _action(axis: int, value: float) -> np.ndarray:
    action = np.zeros(len(ACTION_AXES))
    action[6] = 1.0
    action[axis] = value
    return action


JOINT_LIMITS = {
    "wx250s": wx250s.joint_limits(),
    # a joint whose range is wholly negative and one wholly positive, as the Panda's fourth and sixth
    "negative_and_positive": JointLimits(("j1", "j2", "j3"), (-3.07, -0.02, -1.0), (-0.07, 3.75, 1.0),
                                         (0.2, 0.2, 0.2)),
}


@pytest.mark.parametrize("name", sorted(JOINT_LIMITS))
def test_a_joint_target_below_its_lower_limit_is_refused_like_one_above_its_upper(name):
    limits = JOINT_LIMITS[name]
    lower, upper = np.array(limits.lower), np.array(limits.upper)
    for j, joint in enumerate(limits.names):
        checked = JointTargetFilter(limits)
        for bound, value in ((lower[j], lower[j] - STEP), (upper[j], upper[j] + STEP)):
            previous = np.clip((lower + upper) / 2.0, lower, upper)
            previous[j] = bound  # one small step from the bound: only the limit can refuse it
            target = previous.copy()
            target[j] = value
            result = checked.check(target, previous)
            assert result.verdict is Verdict.REJECTED and result.kind == JOINT_LIMIT and result.axis == joint
            assert result.limit == pytest.approx(bound)
            np.testing.assert_array_equal(result.action, previous)  # the arm holds the previous target
            assert checked.check(previous, previous).verdict is Verdict.APPLIED  # the bound itself is inside
        assert checked.counts[JOINT_LIMIT] == 2


def test_the_arm_model_sees_a_joint_below_its_lower_limit_as_outside():
    from ladder_ros.robots.kinematics import ScrewChain

    chain = ScrewChain("wx250s", wx250s.M, wx250s.SLIST, wx250s.joint_limits())
    lower, upper = chain.lower, chain.upper
    middle = (lower + upper) / 2.0
    assert chain.within_limits(middle) and chain.within_limits(lower) and chain.within_limits(upper)
    for j in range(chain.dof):
        for value in (lower[j] - STEP, upper[j] + STEP):
            q = middle.copy()
            q[j] = value
            assert not chain.within_limits(q), (j, value)


@pytest.mark.parametrize("axis, low, high", [(SIGNED_AXIS, -1.0, 1.0), (DROID_AXIS, 0.0, 1.0)])
def test_a_gripper_command_below_its_range_is_refused_like_one_above(axis, low, high):
    assert 0.0 <= commanded_aperture(axis, low) <= 1.0 and 0.0 <= commanded_aperture(axis, high) <= 1.0
    for value in (low - STEP, high + STEP, low - 1e3):
        with pytest.raises(Exception, match=f"{axis} .* is outside"):
            commanded_aperture(axis, value)


def test_an_aperture_below_0_is_refused_like_one_above_1():
    travel = ApertureRange(closed=wx250s.FINGER_CLOSED_M, open=wx250s.FINGER_OPEN_M)
    assert travel.reading(0.0) == pytest.approx(wx250s.FINGER_CLOSED_M)
    assert travel.reading(1.0) == pytest.approx(wx250s.FINGER_OPEN_M)
    for value in (-STEP, 1.0 + STEP):
        with pytest.raises(Exception, match="aperture must be in"):
            travel.reading(value)
    # a reading outside the travel is clipped on either side, not only above it
    assert travel.aperture(0.0) == 0.0 and travel.aperture(1.0) == 1.0


def test_the_workspace_box_clips_below_low_as_it_clips_above_high():
    box = WorkspaceBox(low=(0.1, -0.2, 0.0), high=(0.4, 0.2, 0.3))
    for i, axis in enumerate("xyz"):
        for value, bound in ((box.low[i] - STEP, box.low[i]), (box.high[i] + STEP, box.high[i])):
            p = (np.array(box.low) + np.array(box.high)) / 2.0
            p[i] = value
            assert not box.contains(p)
            clipped, axes = box.clip(p)
            assert axes == [axis] and clipped[i] == pytest.approx(bound) and box.contains(clipped)
