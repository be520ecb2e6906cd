"""The conversions between a policy's own action convention and the project's action contract.

Where the rotation conventions agree and where they differ is shown here, numerically, so a policy
trained on the old SimplerEnv (axis-angle) or through SimplerEnv's Bridge wrappers (static sxyz
angles turned into an axis-angle) is converted knowingly, not by accident.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.action_conventions import (
    CANONICAL,
    ActionConvention,
    GripperConvention,
    RotationConvention,
    binarize_gripper,
    canonical_action,
    policy_convention,
    validate_action,
)
from ladder_ros.core.rotations import (
    axis_angle_to_euler_xyz,
    axis_angle_to_matrix,
    euler_xyz_to_axis_angle,
    euler_xyz_to_matrix,
    matrix_to_axis_angle,
    matrix_to_euler_xyz,
    matrix_to_quaternion,
    matrix_to_sxyz,
    quaternion_multiply,
    quaternion_to_matrix,
    rotation_angle_between,
    sxyz_to_axis_angle,
    sxyz_to_matrix,
)

to_canonical = ActionConvention().to_canonical

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


def test_default_convention_passes_the_project_contract_through_bit_exactly():
    action = np.array([0.02, -0.01, 0.005, 0.1, -0.2, 0.3, -1.0])
    np.testing.assert_array_equal(to_canonical(action), action)
    clipped = ActionConvention.parse("sxyz_axis_angle").to_canonical(np.array([0, 0, 0, 0, 0, 0, 3.0]))
    assert clipped[6] == 1.0


def test_old_simplerenv_convention_converts_rotation_and_gripper_only():
    action = np.array([0.02, -0.01, 0.005, 0.4, 0.5, 0.0, 0.8])
    out = ActionConvention.parse("axis_angle", "open_fraction").to_canonical(action)
    np.testing.assert_array_equal(out[:3], action[:3])
    np.testing.assert_allclose(euler_xyz_to_matrix(out[3:6]), axis_angle_to_matrix(action[3:6]), atol=1e-12)
    assert out[6] == 1.0
    assert ActionConvention(RotationConvention.AXIS_ANGLE, GripperConvention.OPEN_FRACTION).to_canonical(
        np.r_[action[:6], 0.3])[6] == -1.0


def test_bad_actions_and_conventions_are_named():
    with pytest.raises(InvalidInputError, match="shape"):
        to_canonical(np.zeros(6))
    with pytest.raises(InvalidInputError, match="non-finite"):
        to_canonical(np.array([0, 0, np.nan, 0, 0, 0, 1.0]))
    with pytest.raises(ConfigError, match="axis_angle, euler_xyz, sxyz_axis_angle"):
        ActionConvention.parse("quaternion")
    with pytest.raises(ConfigError, match="open_fraction.*signed"):
        ActionConvention.parse("euler_xyz", "sticky")


# ------------------------------------------------------------------ sxyz (SimplerEnv's Bridge wrappers)
def test_sxyz_is_static_x_then_y_then_z():
    roll, pitch, yaw = 0.3, -0.7, 1.1
    expected = _elementary(2, yaw) @ _elementary(1, pitch) @ _elementary(0, roll)
    np.testing.assert_allclose(sxyz_to_matrix([roll, pitch, yaw]), expected, atol=1e-12)
    rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    np.testing.assert_allclose(sxyz_to_matrix([roll, pitch, yaw]),
                               rotation.from_euler("xyz", [roll, pitch, yaw]).as_matrix(), atol=1e-12)


@pytest.mark.parametrize("trial", range(25))
def test_sxyz_to_axis_angle_equals_the_wrappers_transforms3d_call(trial):
    # SimplerEnv's Octo and RT-1 wrappers: ax, angle = euler2axangle(roll, pitch, yaw); ax * angle
    euler = pytest.importorskip("transforms3d.euler")
    angles = RNG.uniform([-3.0, -1.5, -3.0], [3.0, 1.5, 3.0])
    axis, angle = euler.euler2axangle(*angles)
    np.testing.assert_allclose(axis_angle_to_matrix(sxyz_to_axis_angle(angles)),
                               axis_angle_to_matrix(np.asarray(axis) * angle), atol=1e-9)
    np.testing.assert_allclose(sxyz_to_matrix(angles), euler.euler2mat(*angles, "sxyz"), atol=1e-12)
    np.testing.assert_allclose(sxyz_to_matrix(matrix_to_sxyz(sxyz_to_matrix(angles))), sxyz_to_matrix(angles),
                               atol=1e-9)


def test_sxyz_and_euler_xyz_differ_by_6_degrees_at_a_typical_three_axis_turn():
    angles = np.array([0.3, 0.2, 0.25])
    apart = np.degrees(rotation_angle_between(sxyz_to_matrix(angles), euler_xyz_to_matrix(angles)))
    assert apart == pytest.approx(6.14, abs=0.01)
    converted = ActionConvention.parse("sxyz_axis_angle").to_canonical(np.r_[0.0, 0.0, 0.0, angles, 1.0])
    assert rotation_angle_between(euler_xyz_to_matrix(converted[3:6]), sxyz_to_matrix(angles)) < 1e-9


@pytest.mark.parametrize("name", [c.value for c in RotationConvention])
def test_every_convention_round_trips_through_the_contract(name):
    convention = ActionConvention.parse(name, "open_fraction")
    for _ in range(10):
        canonical = np.r_[RNG.normal(scale=0.02, size=3), RNG.uniform(-0.8, 0.8, 3), RNG.choice([-1.0, 1.0])]
        own = convention.from_canonical(canonical)
        assert own[6] in (0.0, 1.0)
        back = convention.to_canonical(own)
        np.testing.assert_array_equal(back[:3], canonical[:3])
        assert back[6] == canonical[6]
        assert rotation_angle_between(euler_xyz_to_matrix(back[3:6]), euler_xyz_to_matrix(canonical[3:6])) < 1e-9
        # and the policy's numbers mean the rotation the contract's numbers mean
        assert rotation_angle_between(convention.rotation.to_matrix(own[3:6]),
                                      euler_xyz_to_matrix(canonical[3:6])) < 1e-9


def test_policies_declare_their_convention_and_the_default_is_the_contract():
    class Plain:
        name = "plain"

    class Wrapped:
        name = "wrapped"
        action_convention = ActionConvention.parse("sxyz_axis_angle")

    class Broken:
        name = "broken"
        action_convention = "sxyz_axis_angle"

    assert policy_convention(Plain()).is_canonical
    action = np.array([0.0, 0.0, 0.0, 0.3, 0.2, 0.25, 1.0])
    np.testing.assert_array_equal(canonical_action(Plain(), action), action)
    moved = canonical_action(Wrapped(), action)
    assert rotation_angle_between(euler_xyz_to_matrix(moved[3:6]), sxyz_to_matrix(action[3:6])) < 1e-9
    with pytest.raises(ConfigError, match="broken"):
        canonical_action(Broken(), action)


@pytest.mark.parametrize("trial", range(10))
def test_quaternions_match_matrices(trial):
    rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    matrix = rotation.random(random_state=int(RNG.integers(1 << 30))).as_matrix()
    q = matrix_to_quaternion(matrix)
    assert q[0] >= 0 and abs(np.linalg.norm(q) - 1) < 1e-12
    np.testing.assert_allclose(quaternion_to_matrix(q), matrix, atol=1e-12)
    other = rotation.random(random_state=int(RNG.integers(1 << 30))).as_matrix()
    np.testing.assert_allclose(quaternion_to_matrix(quaternion_multiply(matrix_to_quaternion(other), q)),
                               other @ matrix, atol=1e-12)
    with pytest.raises(ValueError):
        quaternion_to_matrix(np.zeros(4))


# ------------------------------------------------------------------ gimbal lock and its neighbourhood
# bridge_data_robot's DEFAULT_ROTATION (docs/conventions.md): the WidowX gripper pointing straight down, its approach
# axis along -z of the base. Its base-frame Euler XYZ reading sits exactly at gimbal lock (pitch +pi/2).
WIDOWX_TOP_DOWN = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])


READINGS = [("euler_xyz", matrix_to_euler_xyz, euler_xyz_to_matrix), ("sxyz", matrix_to_sxyz, sxyz_to_matrix)]


@pytest.mark.parametrize("name,to_angles,to_matrix", READINGS)
@pytest.mark.parametrize("middle_sign", [1.0, -1.0])
@pytest.mark.parametrize("offset", [0.0, 1e-12, 1e-9, 1e-7, 1e-6, 1e-5, 3e-5, 1e-4, 1e-3, 1e-2, 0.1])
def test_angles_round_trip_at_and_near_gimbal_lock(name, to_angles, to_matrix, middle_sign, offset):
    # Near a middle angle of +/- pi/2 the first and last angles turn about (almost) the same axis; the reading
    # must still give angles that turn as the matrix does, on both sides of the lock, at every distance from it.
    # The worst case is 1e-8 rad where the reading switches to the lock formula (rotations.GIMBAL_LOCK_COS).
    rng = np.random.default_rng(int(offset * 1e12) + (7 if middle_sign > 0 else 11))
    for _ in range(20):
        first, last = rng.uniform(-math.pi, math.pi, 2)
        middle = middle_sign * (math.pi / 2 - offset)
        matrix = to_matrix([first, middle, last])
        angles = to_angles(matrix)
        assert abs(angles[1]) <= math.pi / 2
        assert math.copysign(1.0, angles[1]) == middle_sign
        assert rotation_angle_between(to_matrix(angles), matrix) < 2e-8, (name, offset, angles)


@pytest.mark.parametrize("yaw", [-3.0, -1.2, -0.4, 0.0, 0.25, 0.7, 1.9, math.pi])
def test_a_top_down_gripper_turned_about_its_approach_axis_reads_back_exactly(yaw):
    # Exact zeros in the matrix (no rounding left to steer atan2): only the lock formula can recover the yaw.
    for matrix in (WIDOWX_TOP_DOWN @ _elementary(2, yaw), _elementary(2, yaw) @ WIDOWX_TOP_DOWN.T,
                   _elementary(0, yaw) @ WIDOWX_TOP_DOWN, WIDOWX_TOP_DOWN.T @ _elementary(0, yaw)):
        for to_angles, to_matrix in ((matrix_to_euler_xyz, euler_xyz_to_matrix), (matrix_to_sxyz, sxyz_to_matrix)):
            angles = to_angles(matrix)
            assert rotation_angle_between(to_matrix(angles), matrix) < 1e-12
            if abs(abs(angles[1]) - math.pi / 2) < 1e-12:
                assert angles[2] == 0.0  # at the lock the whole turn is put into the first angle


@pytest.mark.parametrize("middle_sign", [1.0, -1.0])
def test_a_locked_orientation_that_came_as_a_quaternion_reads_back(middle_sign):
    # ee_pose carries a quaternion: its matrix at the lock has a lock entry a hair past +/-1 in about half the
    # cases (1.0000000000000002) and rounding noise where the cosine should be 0. The reading must neither fail
    # (asin of 1 + 2e-16) nor let that noise pick the angles.
    rng = np.random.default_rng(42 if middle_sign > 0 else 43)
    past_one = 0
    for _ in range(40):
        first, last = rng.uniform(-math.pi, math.pi, 2)
        for to_angles, to_matrix, (i, j) in ((matrix_to_euler_xyz, euler_xyz_to_matrix, (0, 2)),
                                             (matrix_to_sxyz, sxyz_to_matrix, (2, 0))):
            matrix = quaternion_to_matrix(matrix_to_quaternion(to_matrix([first, middle_sign * math.pi / 2, last])))
            past_one += abs(matrix[i, j]) > 1.0
            angles = to_angles(matrix)
            assert angles[1] == pytest.approx(middle_sign * math.pi / 2, abs=1e-12)
            assert rotation_angle_between(to_matrix(angles), matrix) < 1e-12
    assert past_one > 10  # the case this guards against did occur


# ------------------------------------------------------------------ the conversions' own rules
CONVENTIONS = [ActionConvention.parse(r, g) for r in [c.value for c in RotationConvention]
               for g in [c.value for c in GripperConvention]]


@pytest.mark.parametrize("convention", CONVENTIONS, ids=lambda c: f"{c.rotation.value}-{c.gripper.value}")
def test_a_conversion_never_changes_the_policys_own_array_or_the_translation(convention):
    for _ in range(10):
        action = np.r_[RNG.normal(scale=0.05, size=3), RNG.uniform(-1.0, 1.0, 3), RNG.uniform(-2.0, 2.0)]
        given = action.copy()
        out = convention.to_canonical(action)
        np.testing.assert_array_equal(action, given)  # the policy's buffer is the policy's
        np.testing.assert_array_equal(out[:3], given[:3])  # metres in the base frame in every convention
        back = convention.from_canonical(out)
        np.testing.assert_array_equal(out, convention.to_canonical(action))
        np.testing.assert_array_equal(back[:3], given[:3])
        assert out.dtype == np.float64 and out.shape == (7,)


@pytest.mark.parametrize("rotation", ["sxyz_axis_angle", "axis_angle"])
def test_a_converted_signed_gripper_is_clipped_to_the_contract(rotation):
    # +1 open, -1 closed; a signed policy's value in between passes as it is, a value past either end is clipped
    # to that end. (The contract's own convention passes every number through untouched, a gripper past +/-1
    # included: the safety filter refuses that one, test_default_convention_passes_the_project_contract_through.)
    convention = ActionConvention.parse(rotation, "signed")
    for value, expected in [(-3.0, -1.0), (-1.0, -1.0), (-0.4, -0.4), (0.0, 0.0), (0.3, 0.3), (1.0, 1.0), (2.5, 1.0)]:
        assert convention.to_canonical(np.r_[np.zeros(6), value])[6] == expected
        assert convention.from_canonical(np.r_[np.zeros(6), value])[6] == value  # a signed policy means the same
    np.testing.assert_array_equal(CANONICAL.to_canonical(np.r_[np.zeros(6), 2.5]), np.r_[np.zeros(6), 2.5])


@pytest.mark.parametrize("rotation", [c.value for c in RotationConvention])
def test_an_open_fraction_policy_is_given_the_gripper_as_simplerenv_would_read_it(rotation):
    # The contract's signed value s is the open fraction (s + 1) / 2 (+1 -> 1 open, -1 -> 0 closed). A policy in
    # the open-fraction convention is given 1 or 0 for s, and reading that back must decide as SimplerEnv's
    # 2 * (open > 0.5) - 1 decides on (s + 1) / 2: s = 0 (open 0.5) is closed.
    convention = ActionConvention.parse(rotation, "open_fraction")
    for s in np.r_[np.linspace(-1.0, 1.0, 41), -1e-9, 1e-9]:
        own = convention.from_canonical(np.r_[np.zeros(6), s])[6]
        assert own in (0.0, 1.0)
        assert convention.to_canonical(np.r_[np.zeros(6), own])[6] == binarize_gripper((s + 1.0) / 2.0), s


@pytest.mark.parametrize("name", [c.value for c in RotationConvention])
def test_each_convention_reads_its_three_numbers_as_its_own_rotation(name):
    # The named reading, and no other: checked against the formulas (ManiSkill3 XYZ, transforms3d sxyz, Rodrigues).
    readings = {"euler_xyz": euler_xyz_to_matrix, "sxyz_axis_angle": sxyz_to_matrix, "axis_angle": axis_angle_to_matrix}
    convention = RotationConvention.parse(name)
    for _ in range(10):
        angles = RNG.uniform(-1.2, 1.2, 3)
        np.testing.assert_allclose(convention.to_matrix(angles), readings[name](angles), atol=1e-12)
        for other, reading in readings.items():
            if other != name:
                assert rotation_angle_between(convention.to_matrix(angles), reading(angles)) > 1e-6
        np.testing.assert_allclose(readings[name](convention.from_matrix(readings[name](angles))),
                                   readings[name](angles), atol=1e-12)
        action = np.r_[0.0, 0.0, 0.0, angles, 1.0]
        canonical = ActionConvention(convention).to_canonical(action)
        assert rotation_angle_between(euler_xyz_to_matrix(canonical[3:6]), readings[name](angles)) < 1e-9


def test_only_euler_xyz_with_a_signed_gripper_is_the_contract():
    assert [c.is_canonical for c in CONVENTIONS] == [True, False, False, False, False, False]
    assert ActionConvention().is_canonical and ActionConvention.parse().is_canonical
    assert ActionConvention.parse("euler_xyz", "open_fraction").to_dict() == {"rotation": "euler_xyz",
                                                                              "gripper": "open_fraction"}
    assert ActionConvention.parse("axis_angle").to_dict() == {"rotation": "axis_angle", "gripper": "signed"}
    # parse takes the enum members as well as their names
    assert ActionConvention.parse(RotationConvention.SXYZ_AXIS_ANGLE, GripperConvention.OPEN_FRACTION) == CONVENTIONS[3]
    # an open-fraction gripper alone converts the gripper and leaves the rotation's numbers as they are
    out = ActionConvention.parse("euler_xyz", "open_fraction").to_canonical(np.r_[0.0, 0.0, 0.0, 0.3, 0.2, 0.25, 0.9])
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, 0.3, 0.2, 0.25, 1.0])
    given = ActionConvention.parse("euler_xyz", "open_fraction").from_canonical(np.r_[0.0, 0, 0, 0.3, 0.2, 0.25, -1])
    np.testing.assert_array_equal(given, [0.0, 0.0, 0.0, 0.3, 0.2, 0.25, 0.0])


def test_an_action_convention_is_made_of_the_two_enums_and_says_what_it_got():
    with pytest.raises(ConfigError, match=r"RotationConvention and a GripperConvention, got 'euler_xyz' and "
                                          r"<GripperConvention.SIGNED: 'signed'>"):
        ActionConvention("euler_xyz", GripperConvention.SIGNED)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"got <RotationConvention.AXIS_ANGLE: 'axis_angle'> and 'signed'"):
        ActionConvention(RotationConvention.AXIS_ANGLE, "signed")  # type: ignore[arg-type]


def test_bad_names_and_actions_are_refused_with_the_whole_message():
    with pytest.raises(ConfigError, match=r"^unknown rotation convention 'quaternion'; valid: axis_angle, euler_xyz, "
                                          r"sxyz_axis_angle$"):
        RotationConvention.parse("quaternion")
    with pytest.raises(ConfigError, match=r"^unknown gripper convention '3'; valid: open_fraction, signed$"):
        GripperConvention.parse(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"^action must have shape \(7,\), got \(2, 7\)$"):
        validate_action(np.zeros((2, 7)))
    with pytest.raises(InvalidInputError, match=r"^action has non-finite entries: \[0\.0, 0\.0, 0\.0, 0\.0, 0\.0, "
                                                r"inf, 1\.0\]$"):
        validate_action(np.r_[np.zeros(5), np.inf, 1.0])
    for convention in CONVENTIONS:  # every convention refuses before converting
        with pytest.raises(InvalidInputError, match="non-finite"):
            convention.to_canonical(np.r_[np.zeros(6), np.nan])
        with pytest.raises(InvalidInputError, match="shape"):
            convention.from_canonical(np.zeros(8))
    with pytest.raises(InvalidInputError, match=r"^gripper value must be finite, got inf$"):
        binarize_gripper(float("inf"))
    ints = validate_action([0, 0, 0, 0, 0, 0, 1])
    assert ints.dtype == np.float64 and ints.tolist() == [0.0] * 6 + [1.0]


def test_a_policys_convention_must_be_an_action_convention_and_the_error_names_the_policy_and_the_type():
    class Named:
        name = "octo_bridge"
        action_convention = {"rotation": "sxyz_axis_angle"}

    class Unnamed:
        action_convention = "axis_angle"

        def __repr__(self) -> str:
            return "Unnamed()"

    with pytest.raises(ConfigError, match=r"^policy 'octo_bridge': action_convention must be an ActionConvention, "
                                          r"got dict$"):
        policy_convention(Named())
    with pytest.raises(ConfigError, match=r"^policy Unnamed\(\): action_convention must be an ActionConvention, got "
                                          r"str$"):
        policy_convention(Unnamed())

    class Declared:
        action_convention = ActionConvention.parse("axis_angle", "open_fraction")

    assert policy_convention(Declared()) is Declared.action_convention


# ------------------------------------------------------------------ axis-angle and quaternions at their edges
def _random_axes(rng, count):
    axes = rng.normal(size=(count, 3))
    return axes / np.linalg.norm(axes, axis=1, keepdims=True)


@pytest.mark.parametrize("angle", [1e-11, 1e-9, 1e-6, 1e-3, 0.5, 1.5, 2.0, 2.09, 2.1, 2.5, 3.0, math.pi - 1e-3,
                                   math.pi - 1e-6])
def test_a_rotation_vector_comes_back_itself_from_a_hair_to_just_short_of_a_half_turn(angle):
    # The reading switches from the antisymmetric part to the symmetric part past 120 degrees (cos < -1/2) and
    # takes the sign from the antisymmetric part; the vector must come back in every direction, both signs.
    rng = np.random.default_rng(int(angle * 1e6) + 5)
    for axis in _random_axes(rng, 30):
        for rotvec in (axis * angle, -axis * angle):
            back = matrix_to_axis_angle(axis_angle_to_matrix(rotvec))
            np.testing.assert_allclose(back, rotvec, rtol=1e-6, atol=1e-15)
            assert np.linalg.norm(back) <= math.pi


@pytest.mark.parametrize("axis", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, -1.0, 1.0],
                                  [1.0, -2.0, 3.0], [-0.2, 0.1, -0.9]])
def test_a_half_turn_reads_as_a_half_turn_about_its_axis(axis):
    # At exactly pi the antisymmetric part is gone: the axis comes from the symmetric part (either sign is the same
    # rotation), whichever of its entries is largest.
    axis = np.asarray(axis) / np.linalg.norm(axis)
    matrix = axis_angle_to_matrix(axis * math.pi)
    back = matrix_to_axis_angle(matrix)
    assert np.linalg.norm(back) == pytest.approx(math.pi, abs=1e-12)
    assert abs(abs(back @ axis) - math.pi) < 1e-9  # along the axis, one way or the other
    np.testing.assert_allclose(axis_angle_to_matrix(back), matrix, atol=1e-12)


def test_below_a_trillionth_of_a_radian_a_rotation_is_none():
    # 1e-12 rad: the threshold both ways (a zero vector has no axis); above it the angle is kept, not rounded away.
    for size in (0.0, 1e-14, 9.9e-13):
        np.testing.assert_array_equal(axis_angle_to_matrix([size, 0.0, 0.0]), np.eye(3))
        np.testing.assert_array_equal(matrix_to_axis_angle(axis_angle_to_matrix([0.0, size, 0.0])), np.zeros(3))
    np.testing.assert_array_equal(matrix_to_axis_angle(np.eye(3)), np.zeros(3))
    assert matrix_to_axis_angle(axis_angle_to_matrix([0.0, 0.0, 2e-12]))[2] == pytest.approx(2e-12, rel=1e-6, abs=0)
    assert matrix_to_axis_angle(axis_angle_to_matrix([1e-12, 0.0, 0.0]))[0] == pytest.approx(1e-12, rel=1e-6, abs=0)
    tiny = rotation_angle_between(np.eye(3), axis_angle_to_matrix([3e-12, 0.0, 0.0]))
    assert tiny == pytest.approx(3e-12, rel=1e-6, abs=0)


@pytest.mark.parametrize("trial", range(10))
def test_the_angle_between_two_orientations_is_the_angle_of_the_turn_from_one_to_the_other(trial):
    rng = np.random.default_rng(300 + trial)
    start = axis_angle_to_matrix(rng.normal(size=3))
    turn = _random_axes(rng, 1)[0] * rng.uniform(0.0, math.pi)
    for end in (start @ axis_angle_to_matrix(turn), axis_angle_to_matrix(turn) @ start):
        # the turn from start to end: start.T @ end (or end @ start.T) has the same angle
        assert rotation_angle_between(start, end) == pytest.approx(np.linalg.norm(turn), abs=1e-9)
        assert rotation_angle_between(end, start) == pytest.approx(np.linalg.norm(turn), abs=1e-9)
    assert rotation_angle_between(start, start) < 1e-12
    assert rotation_angle_between(start.tolist(), (start @ _elementary(2, 0.25)).tolist()) == pytest.approx(0.25)


def _half_turn_quaternion(axis):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return np.r_[0.0, axis]


@pytest.mark.parametrize("quaternion", [
    [1.0, 0.0, 0.0, 0.0], [0.9, 0.1, -0.3, 0.2],  # the trace is the largest
    _half_turn_quaternion([1.0, 0.1, 0.2]), [0.1, 0.9, 0.2, -0.3],  # m00
    _half_turn_quaternion([0.1, 1.0, -0.2]), [0.2, -0.1, 0.9, 0.3],  # m11
    _half_turn_quaternion([0.2, -0.1, 1.0]), [-0.2, 0.3, 0.1, 0.9],  # m22
    [0.5, 0.5, 0.5, 0.5], [0.0, 0.6, 0.8, 0.0], [0.0, 0.0, 0.6, -0.8], [0.0, 0.8, 0.0, 0.6]])
def test_every_branch_of_the_matrix_to_quaternion_reading_gives_the_quaternion_back(quaternion):
    # Shepperd's method divides by the largest of 4w^2, 4x^2, 4y^2, 4z^2 (trace, m00, m11, m22): each case once.
    q = np.asarray(quaternion, dtype=np.float64)
    q /= np.linalg.norm(q)
    expected = q if q[0] > 0 else (-q if q[0] < 0 else q)  # w >= 0; at w == 0 both signs are the same rotation
    back = matrix_to_quaternion(quaternion_to_matrix(q))
    assert back[0] >= 0.0 and abs(np.linalg.norm(back) - 1.0) < 1e-12
    if q[0] != 0.0:
        np.testing.assert_allclose(back, expected, atol=1e-12)
    else:
        assert min(np.abs(back - q).max(), np.abs(back + q).max()) < 1e-12
    rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    x, y, z, w = rotation.from_matrix(quaternion_to_matrix(q)).as_quat()  # SciPy stores (x, y, z, w)
    assert abs(abs(np.dot(back, [w, x, y, z])) - 1.0) < 1e-12


def test_a_quaternion_is_read_whatever_its_length_and_a_broken_one_is_refused():
    q = np.array([0.3, -0.5, 0.1, 0.8])
    matrix = quaternion_to_matrix(q)
    np.testing.assert_allclose(matrix @ matrix.T, np.eye(3), atol=1e-12)
    for scale in (1e-6, 0.5, 3.0, 1e6, -1.0):  # -q is the same rotation
        np.testing.assert_allclose(quaternion_to_matrix(q * scale), matrix, atol=1e-12)
    for broken in ([0.0, 0.0, 0.0, 0.0], [np.inf, 0.0, 0.0, 0.0], [1.0, np.nan, 0.0, 0.0], [np.inf, -np.inf, 0, 0]):
        with pytest.raises(ValueError, match=r"^a quaternion must be finite and non-zero, got \["):
            quaternion_to_matrix(broken)


def test_a_nearly_orthonormal_matrix_still_gives_a_unit_quaternion():
    # A rotation read from a calibration file or a solver is orthonormal only to its printed digits; a pose message
    # needs a unit quaternion all the same.
    rng = np.random.default_rng(8)
    for _ in range(20):
        exact = axis_angle_to_matrix(rng.normal(size=3))
        noisy = exact + rng.normal(scale=1e-4, size=(3, 3))
        q = matrix_to_quaternion(noisy)
        assert abs(np.linalg.norm(q) - 1.0) < 1e-12 and q[0] >= 0.0
        assert rotation_angle_between(quaternion_to_matrix(q), exact) < 1e-3


@pytest.mark.parametrize("trial", range(5))
def test_the_hamilton_product_composes_rotations_left_after_right(trial):
    rng = np.random.default_rng(900 + trial)
    a, b = rng.normal(size=4), rng.normal(size=4)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    product = quaternion_multiply(a, b)
    np.testing.assert_allclose(quaternion_to_matrix(product), quaternion_to_matrix(a) @ quaternion_to_matrix(b),
                               atol=1e-12)
    assert abs(np.linalg.norm(product) - 1.0) < 1e-12  # unit times unit, not normalised afterwards
    np.testing.assert_allclose(quaternion_multiply([1.0, 0.0, 0.0, 0.0], b), b, atol=0)  # the identity
    np.testing.assert_allclose(quaternion_multiply(a, a * [1, -1, -1, -1]), [1.0, 0.0, 0.0, 0.0], atol=1e-12)


def test_float32_inputs_are_read_at_float64_precision():
    # A policy's action and a model's state come as float32 (openpi and LeRobot return float32 arrays): the numbers
    # are converted first and the arithmetic is float64, so a float32 input means exactly its own values.
    rng = np.random.default_rng(12)
    for _ in range(20):
        rotvec32 = rng.normal(size=3).astype(np.float32)
        rotvec64 = rotvec32.astype(np.float64)
        np.testing.assert_allclose(axis_angle_to_matrix(rotvec32), axis_angle_to_matrix(rotvec64), rtol=0, atol=1e-15)
        matrix32 = axis_angle_to_matrix(rotvec64).astype(np.float32)
        matrix64 = matrix32.astype(np.float64)
        np.testing.assert_allclose(matrix_to_axis_angle(matrix32), matrix_to_axis_angle(matrix64), rtol=0, atol=1e-15)
        np.testing.assert_array_equal(matrix_to_sxyz(matrix32), matrix_to_sxyz(matrix64))
        np.testing.assert_array_equal(matrix_to_euler_xyz(matrix32), matrix_to_euler_xyz(matrix64))
        np.testing.assert_allclose(matrix_to_quaternion(matrix32), matrix_to_quaternion(matrix64), rtol=0, atol=1e-15)
        q32 = rng.normal(size=4).astype(np.float32)
        np.testing.assert_allclose(quaternion_to_matrix(q32), quaternion_to_matrix(q32.astype(np.float64)), rtol=0,
                                   atol=1e-15)
        near32 = (matrix64 @ _elementary(2, 1e-4)).astype(np.float32)
        assert rotation_angle_between(matrix32, near32) == pytest.approx(
            rotation_angle_between(matrix64, near32.astype(np.float64)), rel=0, abs=1e-15)


def test_a_rotation_vector_or_quaternion_as_a_column_or_a_row_reads_as_a_flat_one():
    # OpenCV's Rodrigues and solvePnP give a rotation vector as a 3x1 column; a batch of one is a 1xN row.
    rotvec = np.array([0.3, -0.2, 0.9])
    for shaped in (rotvec.reshape(3, 1), rotvec.reshape(1, 3), rotvec.tolist()):
        np.testing.assert_array_equal(axis_angle_to_matrix(shaped), axis_angle_to_matrix(rotvec))
        np.testing.assert_array_equal(euler_xyz_to_matrix(shaped), euler_xyz_to_matrix(rotvec))
        np.testing.assert_array_equal(sxyz_to_matrix(shaped), sxyz_to_matrix(rotvec))
    q = np.array([0.9, 0.1, -0.3, 0.2])
    for shaped in (q.reshape(4, 1), q.reshape(1, 4)):
        np.testing.assert_array_equal(quaternion_to_matrix(shaped), quaternion_to_matrix(q))


@pytest.mark.parametrize("zeros", [(1,), (2,), (3,), (0,), (1, 2), (1, 3), (2, 3), (0, 1), (0, 2), (0, 3)])
def test_a_rotation_about_an_axis_in_a_coordinate_plane_reads_back_as_its_quaternion(zeros):
    # Quaternions with zero components (turns about an axis in the y-z plane, about a coordinate axis, half turns):
    # the branch Shepperd's method picks must be the one whose divisor is the largest, never a vanishing one.
    rng = np.random.default_rng(sum(10 ** i for i in zeros))
    for _ in range(50):
        q = rng.normal(size=4)
        q[list(zeros)] = 0.0
        q /= np.linalg.norm(q)
        q = q if q[0] >= 0 else -q
        back = matrix_to_quaternion(quaternion_to_matrix(q))
        if q[0] == 0.0:  # a half turn: q and -q are the same rotation and both have w = 0
            back = back if back @ q >= 0 else -back
        np.testing.assert_allclose(back, q, atol=1e-12)
