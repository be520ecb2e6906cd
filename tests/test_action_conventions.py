"""The one conversion between Bridge policy actions and ManiSkill3's WidowX controller.

Where the two rotation conventions agree and where they differ is shown here, numerically, so a
policy trained on the old SimplerEnv (axis-angle) is converted knowingly, not by accident.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.sim.action_conventions import (
    ActionConvention,
    GripperConvention,
    RotationConvention,
    axis_angle_to_euler_xyz,
    axis_angle_to_matrix,
    binarize_gripper,
    euler_xyz_to_axis_angle,
    euler_xyz_to_matrix,
    matrix_to_axis_angle,
    matrix_to_euler_xyz,
    to_maniskill_action,
)

RNG = np.random.default_rng(20261129)


def _elementary(axis: int, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    if axis == 0:
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == 1:
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def test_euler_xyz_is_intrinsic_x_then_y_then_z_as_maniskill_reads_it():
    # pd_ee_pose.py: euler_angles_to_matrix(delta_rot, "XYZ") = Rx(a) @ Ry(b) @ Rz(c)
    a, b, c = 0.3, -0.7, 1.1
    expected = _elementary(0, a) @ _elementary(1, b) @ _elementary(2, c)
    np.testing.assert_allclose(euler_xyz_to_matrix([a, b, c]), expected, atol=1e-12)


def test_euler_matches_scipy_intrinsic_xyz():
    rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    for _ in range(20):
        angles = RNG.uniform(-1.5, 1.5, 3)
        np.testing.assert_allclose(euler_xyz_to_matrix(angles),
                                   rotation.from_euler("XYZ", angles).as_matrix(), atol=1e-12)
        rotvec = RNG.uniform(-2.0, 2.0, 3)
        np.testing.assert_allclose(axis_angle_to_matrix(rotvec),
                                   rotation.from_rotvec(rotvec).as_matrix(), atol=1e-12)


@pytest.mark.parametrize("trial", range(25))
def test_round_trips(trial):
    angles = RNG.uniform([-3.0, -1.5, -3.0], [3.0, 1.5, 3.0])
    np.testing.assert_allclose(matrix_to_euler_xyz(euler_xyz_to_matrix(angles)), angles, atol=1e-9)
    rotvec = RNG.normal(size=3)
    rotvec *= RNG.uniform(0.0, 3.0) / np.linalg.norm(rotvec)
    np.testing.assert_allclose(matrix_to_axis_angle(axis_angle_to_matrix(rotvec)), rotvec, atol=1e-9)
    # converting to the other convention and back is the identity on the rotation
    np.testing.assert_allclose(euler_xyz_to_matrix(axis_angle_to_euler_xyz(rotvec)),
                               axis_angle_to_matrix(rotvec), atol=1e-9)
    np.testing.assert_allclose(axis_angle_to_matrix(euler_xyz_to_axis_angle(angles)),
                               euler_xyz_to_matrix(angles), atol=1e-9)


def test_half_turn_axis_angle_round_trip():
    for axis in (np.array([1.0, 0, 0]), np.array([0, 1.0, 1.0]) / math.sqrt(2), np.array([-1.0, 2.0, 0.5])):
        rotvec = axis / np.linalg.norm(axis) * math.pi
        back = matrix_to_axis_angle(axis_angle_to_matrix(rotvec))
        np.testing.assert_allclose(axis_angle_to_matrix(back), axis_angle_to_matrix(rotvec), atol=1e-9)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("angle", [-1.2, -0.05, 0.3, 1.5])
def test_conventions_agree_exactly_for_a_turn_about_one_axis(axis, angle):
    vector = np.zeros(3)
    vector[axis] = angle
    np.testing.assert_allclose(axis_angle_to_euler_xyz(vector), vector, atol=1e-12)


def test_conventions_agree_to_first_order_for_small_turns():
    # A typical Bridge step: a few degrees about several axes. The difference is second order:
    # it shrinks ~100x when the angles shrink 10x.
    direction = np.array([1.0, -0.6, 0.8])
    differences = []
    for scale in (0.1, 0.01, 0.001):
        rotvec = direction * scale
        differences.append(np.linalg.norm(axis_angle_to_euler_xyz(rotvec) - rotvec))
    assert differences[0] > 1e-4  # they do differ
    assert differences[1] < differences[0] / 50 and differences[2] < differences[1] / 50


def test_conventions_differ_for_large_turns_about_several_axes():
    rotvec = np.array([0.8, 0.8, 0.0])  # 65 degrees about a diagonal axis
    euler = axis_angle_to_euler_xyz(rotvec)
    assert np.linalg.norm(euler - rotvec) > 0.1
    assert abs(euler[2]) > 0.1  # an axis-angle turn in x and y needs a z component in Euler XYZ
    # reading the same numbers in the wrong convention lands far from the intended orientation
    wrong = euler_xyz_to_matrix(rotvec)
    right = axis_angle_to_matrix(rotvec)
    assert np.degrees(np.arccos(np.clip((np.trace(wrong.T @ right) - 1) / 2, -1, 1))) > 10.0


@pytest.mark.parametrize("value,expected", [(1.0, 1.0), (0.51, 1.0), (0.5, -1.0), (0.2, -1.0), (0.0, -1.0),
                                            (-0.3, -1.0), (1.7, 1.0)])
def test_bridge_gripper_binarisation(value, expected):
    # SimplerEnv: 2 * (open > 0.5) - 1
    assert binarize_gripper(value) == expected


def test_binarisation_rejects_nan():
    with pytest.raises(InvalidInputError):
        binarize_gripper(float("nan"))


def test_default_convention_passes_the_project_contract_through():
    action = np.array([0.02, -0.01, 0.005, 0.1, -0.2, 0.3, -1.0])
    np.testing.assert_array_equal(to_maniskill_action(action), action)
    clipped = to_maniskill_action(np.array([0, 0, 0, 0, 0, 0, 3.0]))
    assert clipped[6] == 1.0


def test_old_simplerenv_convention_converts_rotation_and_gripper_only():
    action = np.array([0.02, -0.01, 0.005, 0.4, 0.5, 0.0, 0.8])
    out = to_maniskill_action(action, ActionConvention.parse("axis_angle", "open_fraction"))
    np.testing.assert_array_equal(out[:3], action[:3])
    np.testing.assert_allclose(euler_xyz_to_matrix(out[3:6]), axis_angle_to_matrix(action[3:6]), atol=1e-12)
    assert out[6] == 1.0
    assert to_maniskill_action(np.r_[action[:6], 0.3], ActionConvention(RotationConvention.AXIS_ANGLE,
                                                                        GripperConvention.OPEN_FRACTION))[6] == -1.0


def test_bad_actions_and_conventions_are_named():
    with pytest.raises(InvalidInputError, match="shape"):
        to_maniskill_action(np.zeros(6))
    with pytest.raises(InvalidInputError, match="non-finite"):
        to_maniskill_action(np.array([0, 0, np.nan, 0, 0, 0, 1.0]))
    with pytest.raises(ConfigError, match="axis_angle.*euler_xyz"):
        ActionConvention.parse("quaternion")
    with pytest.raises(ConfigError, match="open_fraction.*signed"):
        ActionConvention.parse("euler_xyz", "sticky")
