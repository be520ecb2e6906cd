"""The refusals in front of the safety filter, word for word: a chunk with the wrong width or too few actions, a
hold-still command the arm can really give, a convention this build does not know and an orientation state entry
with an unknown reference or angle reading (each reachable by a caller that builds its config or calls directly)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.policies.actions import ActionProcessor, InvalidActionError
from ladder_ros.policies.state import orientation_state
from tests.policy_fixtures import make_config, observation

JOINT_AXES = [{"name": f"joint{i}", "unit": "rad", "low": -3.0, "high": 3.0} for i in range(2)] + [
    {"name": "gripper_position", "unit": "0 open", "low": 0.0, "high": 1.0}]


def joint_processor() -> ActionProcessor:
    """Two arm joints and DROID's gripper_position (0 open): the observation fixture's two joints fit it."""
    return ActionProcessor(make_config(action={"key": "actions", "kind": "joint_position", "axes": JOINT_AXES}))


# ------------------------------------------------------------------------------ the processor and its config
def test_the_processor_executes_the_configs_horizon_over_its_axes():
    config = make_config()
    processor = ActionProcessor(config)
    assert processor.execute == config.execute_steps and processor.axes == config.action.names


@pytest.mark.parametrize("field,name,valid", [("rotation", "quaternion", "axis_angle, euler_xyz, sxyz_axis_angle"),
                                              ("gripper", "binary", "open_fraction, signed")])
def test_a_hand_built_config_with_a_convention_this_build_lacks_is_refused_naming_file_and_key(field, name, valid):
    """The loader only lets known conventions through; a caller replacing the action spec by hand does not."""
    config = make_config()
    unknown = dataclasses.replace(config, action=dataclasses.replace(config.action, **{field: name}))
    message = (f"test.yaml: action.{field}: unknown {field} convention '{name}'; valid: {valid} (not available in "
               "this build's action conventions)")
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$") as caught:
        ActionProcessor(unknown)
    assert (caught.value.source, caught.value.key) == ("test.yaml", f"action.{field}")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# ------------------------------------------------------------------------------ chunk refusals, word for word
def test_a_chunk_of_the_wrong_width_is_refused_listing_the_configs_axes():
    processor = ActionProcessor(make_config())
    for width in (1, 6, 8):
        with pytest.raises(InvalidActionError, match=rf"^wrong action dimension: {width} numbers per action, the "
                                                     r"config expects 7 \(ee_dx, ee_dy, ee_dz, ee_droll, ee_dpitch, "
                                                     r"ee_dyaw, gripper\)$"):
            processor.check_chunk(np.zeros((5, width)))
    with pytest.raises(InvalidActionError, match=r"^wrong action dimension: 2 numbers per action, the config expects "
                                                 r"3 \(joint0, joint1, gripper_position\)$"):
        joint_processor().check_chunk(np.zeros((5, 2)))


def test_a_chunk_shorter_than_the_execution_horizon_is_refused_counting_its_actions():
    processor = ActionProcessor(make_config())  # k = 4 of 5, 7 numbers per action
    for length in range(4):
        with pytest.raises(InvalidActionError, match=rf"^chunk of {length} actions is shorter than the execution "
                                                     r"horizon \(4\)$"):
            processor.check_chunk(np.zeros((length, 7)))
    assert processor.check_chunk(np.zeros((4, 7))).shape == (4, 7)


# ------------------------------------------------------------------------------ holding still
def test_an_end_effector_hold_keeps_the_gripper_as_the_driver_reads_the_aperture():
    """Open at an aperture of 0.5 and above, as the WidowX driver seeds its gripper state (aperture >= 0.5): the
    hold then asks for the gripper the driver already has, so holding still never opens or closes it."""
    processor = ActionProcessor(make_config())
    for aperture in np.linspace(0.0, 1.0, 41):
        hold = processor.hold_command(observation(aperture=float(aperture)))
        expected = 1.0 if aperture >= 0.5 else -1.0
        assert hold.tolist() == [0.0] * 6 + [expected], aperture
    assert processor.hold_command(observation(aperture=0.5))[6] == 1.0
    assert processor.hold_command(observation(aperture=np.nextafter(0.5, 0.0)))[6] == -1.0


def test_a_joint_hold_is_float64_even_from_a_float32_observation():
    """The joints where they are and DROID's gripper_position (1 - aperture), as float64 like every command."""
    processor = joint_processor()
    joints = np.array([0.1, -0.2], dtype=np.float32)
    state = dataclasses.replace(observation(), joint_positions=joints, aperture=np.float32(0.25))
    hold = processor.hold_command(state)
    assert hold.dtype == np.float64
    assert hold.tolist() == [float(joints[0]), float(joints[1]), 0.75]


def test_no_joint_hold_when_the_state_has_a_different_number_of_joints():
    processor = joint_processor()
    for count in (0, 1, 3, 7):
        state = dataclasses.replace(observation(), joint_names=tuple(f"j{i}" for i in range(count)),
                                    joint_positions=np.zeros(count))
        with pytest.raises(InvalidActionError, match=rf"^no hold command for 3 joint axes from a state of {count} "
                                                     r"joints$"):
            processor.hold_command(state)


# ------------------------------------------------------------------------------ the orientation state entry
def test_an_orientation_state_with_an_unknown_reference_is_refused_listing_the_known_ones():
    for reference in ("world", "", "TOP_DOWN"):
        with pytest.raises(ConfigError, match=rf"^orientation reference must be one of top_down, base, got "
                                              rf"{reference!r}$"):
            orientation_state(np.zeros(3), reference, "sxyz", "widowx")


def test_an_orientation_state_with_unknown_angles_is_refused_listing_the_known_ones():
    for reference in ("top_down", "base"):
        for angles in ("rpy", "", "szyx"):
            with pytest.raises(ConfigError, match=rf"^orientation angles must be one of sxyz, euler_xyz, got "
                                                  rf"{angles!r}$"):
                orientation_state(np.zeros(3), reference, angles, "widowx")
