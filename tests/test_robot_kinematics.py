"""WX250s kinematics against modern_robotics (the library Interbotix's own API uses), and the pure helpers."""

import json
from decimal import Decimal

import numpy as np
import pytest
from scipy.linalg import expm

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots import wx250s
from ladder_ros.core.rotations import matrix_to_quaternion, quaternion_to_matrix
from ladder_ros.core.safety import JointLimits
from ladder_ros.robots.kinematics import (
    TWO_PI,
    ScrewChain,
    adjoint,
    joint_path,
    screw_exp,
    skew,
    transform_inverse,
    transform_log,
)

mr = pytest.importorskip("modern_robotics", reason="modern-robotics is a test requirement (requirements/test.txt)")

CHAIN = wx250s.chain()


def random_joints(rng, n=50):
    lower, upper = np.array(wx250s.LOWER), np.array(wx250s.UPPER)
    return [rng.uniform(lower * 0.8, upper * 0.8) for _ in range(n)]


def test_forward_kinematics_and_jacobian_match_modern_robotics():
    rng = np.random.default_rng(0)
    for q in random_joints(rng):
        assert np.allclose(CHAIN.forward(q), mr.FKinSpace(wx250s.M, wx250s.SLIST, q), atol=1e-12)
        assert np.allclose(CHAIN.jacobian(q), mr.JacobianSpace(wx250s.SLIST, q), atol=1e-12)
    assert np.allclose(CHAIN.forward(np.zeros(6)), wx250s.M)


def test_matrix_log_inverts_the_exponential():
    rng = np.random.default_rng(1)
    for _ in range(50):
        w = rng.normal(size=3)
        w /= np.linalg.norm(w)
        screw = np.concatenate([w, rng.normal(size=3)])
        theta = rng.uniform(-3.0, 3.0)
        t = screw_exp(screw, theta)
        assert np.allclose(mr.MatrixExp6(mr.VecTose3(transform_log(t))), t, atol=1e-9)
    assert np.allclose(transform_inverse(t) @ t, np.eye(4))


def test_inverse_kinematics_from_the_previous_target_reaches_nearby_poses():
    rng = np.random.default_rng(2)
    reached = 0
    for q in random_joints(rng, 40):
        target = CHAIN.forward(q + rng.uniform(-0.05, 0.05, size=6))  # one Bridge step away, about
        result = CHAIN.inverse(target, q)
        if not result.success:
            continue  # the perturbed pose may leave the limits; counted below
        reached += 1
        assert np.allclose(CHAIN.forward(result.joints)[:3, 3], target[:3, 3], atol=2e-4)
        assert result.iterations <= 6 and CHAIN.within_limits(result.joints)
    assert reached >= 35


def test_inverse_kinematics_refuses_unreachable_and_malformed_targets_with_a_reason():
    far = np.eye(4)
    far[:3, 3] = [2.0, 0.0, 0.3]  # beyond the 0.65 m reach
    result = CHAIN.inverse(far, np.array(wx250s.NEUTRAL_JOINTS))
    assert not result.success and "no convergence" in result.reason
    nan = np.full((4, 4), np.nan)
    assert "finite" in CHAIN.inverse(nan, np.zeros(6)).reason
    assert "start" in CHAIN.inverse(np.eye(4), np.zeros(5)).reason


def test_wrapping_puts_angles_into_the_limits_where_a_turn_helps():
    q = CHAIN.wrap(np.array([2 * np.pi + 0.1, 0.2, -2 * np.pi + 0.3, 0, 0, 0]))
    assert np.allclose(q, [0.1, 0.2, 0.3, 0, 0, 0])


def test_quaternions_round_trip_for_every_rotation_branch():
    rng = np.random.default_rng(3)
    rotations = [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0]), np.eye(3)]
    for _ in range(30):
        q = rng.normal(size=4)
        rotations.append(quaternion_to_matrix(q))
    for r in rotations:
        q = matrix_to_quaternion(r)
        assert q[0] >= 0 and np.isclose(np.linalg.norm(q), 1.0)
        assert np.allclose(quaternion_to_matrix(q), r, atol=1e-12)


def test_joint_path_is_even_and_never_steps_further_than_allowed():
    path = joint_path(np.zeros(2), np.array([1.0, -0.25]), np.array([0.3, 0.3]))
    assert len(path) == 4 and np.allclose(path[-1], [1.0, -0.25])
    steps = np.diff(np.vstack([np.zeros(2), *path]), axis=0)
    assert np.all(np.abs(steps) <= 0.3 + 1e-12)
    assert len(joint_path(np.zeros(2), np.zeros(2), np.ones(2))) == 1  # already there: one step to hold
    with pytest.raises(ConfigError, match="joint path"):
        joint_path(np.zeros(2), np.zeros(3), np.ones(2))


# ------------------------------------------------------------------ any chain, prismatic joints included
def random_chain(rng, n, lower=-3.0, upper=3.0):
    """A random serial arm: each joint revolute (unit axis, any offset) or prismatic (no rotation, unit direction)."""
    screws = np.zeros((6, n))
    for i in range(n):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        if rng.random() < 0.4:
            screws[3:, i] = axis  # prismatic
        else:
            screws[:3, i] = axis
            screws[3:, i] = np.cross(rng.normal(size=3) * 0.3, axis)  # the axis through a random point
    home = mr.MatrixExp6(mr.VecTose3(rng.normal(size=6)))
    names = tuple(f"j{i}" for i in range(n))
    limits = JointLimits(names, (lower,) * n, (upper,) * n, (0.5,) * n)
    return ScrewChain("random", home, screws, limits)


def test_any_chain_revolute_or_prismatic_matches_modern_robotics_in_pose_jacobian_and_each_exponential():
    rng = np.random.default_rng(10)
    kinds = set()
    for trial in range(40):
        n = 1 + trial % 7
        chain = random_chain(rng, n)
        assert chain.dof == n
        for _ in range(5):
            q = rng.uniform(-3.0, 3.0, size=n)
            assert np.allclose(chain.forward(q), mr.FKinSpace(chain.home, chain.screws, q), atol=1e-12)
            assert np.allclose(chain.jacobian(q), mr.JacobianSpace(chain.screws, q), atol=1e-12)
            for i in range(n):
                screw = chain.screws[:, i]
                kinds.add(bool(np.any(screw[:3])))
                assert np.allclose(screw_exp(screw, q[i]), mr.MatrixExp6(mr.VecTose3(screw * q[i])), atol=1e-12)
    assert kinds == {True, False}  # both kinds of joint were drawn


def test_the_small_helpers_match_modern_robotics():
    rng = np.random.default_rng(11)
    for _ in range(50):
        v = rng.normal(size=3)
        t = mr.MatrixExp6(mr.VecTose3(rng.normal(size=6)))
        assert np.array_equal(skew(v), mr.VecToso3(v))
        assert np.allclose(adjoint(t), mr.Adjoint(t), atol=1e-12)
        assert np.allclose(transform_inverse(t), mr.TransInv(t), atol=1e-12)
        assert np.allclose(transform_inverse(t) @ t, np.eye(4), atol=1e-12)


def test_the_matrix_log_of_half_turns_pure_translations_and_small_turns_inverts_the_exponential():
    rng = np.random.default_rng(12)
    axes = [np.array(a, dtype=float) for a in np.eye(3)] + [-a for a in np.eye(3)]
    axes += [a / np.linalg.norm(a) for a in rng.normal(size=(60, 3))]
    for axis in axes:  # a half turn: the axis comes from the symmetric part, whichever diagonal entry is largest
        p = rng.normal(size=3)
        t = screw_exp(np.concatenate([axis, np.cross(p, axis)]), np.pi)
        twist = transform_log(t)
        assert np.linalg.norm(twist[:3]) == pytest.approx(np.pi)
        assert np.allclose(mr.MatrixExp6(mr.VecTose3(twist)), t, atol=1e-9), axis
    for _ in range(20):  # no rotation: the twist is the translation itself
        t = np.eye(4)
        t[:3, 3] = rng.normal(size=3)
        assert np.array_equal(transform_log(t), np.concatenate([np.zeros(3), t[:3, 3]]))
    for angle in (1e-7, 1e-5, 1e-3, np.pi - 1e-3, np.pi - 1e-5):  # near both ends of the range
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        t = screw_exp(np.concatenate([axis, rng.normal(size=3)]), angle)
        twist = transform_log(t)
        assert np.allclose(twist[:3], axis * angle, atol=1e-8), angle
        # The matrix exponential by its series (modern_robotics rounds turns below 1e-6 rad to none).
        assert np.allclose(expm(mr.VecTose3(twist)), t, atol=1e-9), angle


def test_a_chain_is_refused_when_its_shapes_do_not_fit_naming_them():
    limits = wx250s.joint_limits()
    with pytest.raises(ConfigError, match=r"^arm: the home pose M is a 4x4 matrix, got shape \(3, 4\)$"):
        ScrewChain("arm", np.eye(4)[:3], wx250s.SLIST, limits)
    for screws, shape in ((wx250s.SLIST[:5], r"\(5, 6\)"), (np.zeros(6), r"\(6,\)")):
        with pytest.raises(ConfigError, match=rf"^arm: Slist is 6 x n \(one screw per column\), got shape {shape}$"):
            ScrewChain("arm", wx250s.M, screws, limits)
    with pytest.raises(ConfigError, match=r"^arm: 5 screws for 6 joint limits$"):
        ScrewChain("arm", wx250s.M, wx250s.SLIST[:, :5], limits)


# ------------------------------------------------------------------ limits: per joint, both sides, bounds included
# Each joint its own range, with bounds that a wrap to [-pi, pi) leaves exactly as they are.
OWN_LOWER = (-0.5, -1.0, -1.5, -2.0, -0.25, -0.75)
OWN_UPPER = (0.25, 1.5, 0.5, 1.0, 2.0, 0.75)


def own_chain():
    limits = JointLimits(wx250s.JOINT_NAMES, OWN_LOWER, OWN_UPPER, (0.1,) * 6)
    return ScrewChain(wx250s.MODEL, wx250s.M, wx250s.SLIST, limits)


def test_joints_are_within_limits_exactly_when_every_joint_is_inside_its_own_bounds_on_both_sides():
    chain = own_chain()
    rng = np.random.default_rng(13)
    lower, upper = np.array(OWN_LOWER), np.array(OWN_UPPER)
    for _ in range(200):
        q = rng.uniform(lower - 0.3, upper + 0.3)
        assert chain.within_limits(q) == bool(np.all((lower <= q) & (q <= upper)))
    assert chain.within_limits(lower) and chain.within_limits(upper)  # the bounds themselves are allowed
    for i in range(6):
        for bound, outside in ((lower, -1e-9), (upper, 1e-9)):
            q = (lower + upper) / 2
            q[i] = bound[i]
            assert chain.within_limits(q), (i, bound[i])
            q[i] += outside
            assert not chain.within_limits(q), (i, q[i])


def test_a_solution_on_its_bounds_is_accepted_and_one_past_them_is_refused_naming_only_that_joint():
    chain = own_chain()
    lower, upper = np.array(OWN_LOWER), np.array(OWN_UPPER)
    for bound in (lower, upper):
        result = chain.inverse(chain.forward(bound), bound)  # already there: no iteration
        assert result.success and result.reason == "" and result.iterations == 0
        assert np.array_equal(result.joints, bound)
    for i, name in enumerate(wx250s.JOINT_NAMES):
        for side, bound, past in (("lower", lower, -0.1), ("upper", upper, 0.1)):
            q = np.where(np.arange(6) % 2 == 0, lower, upper)  # every other joint on one of its bounds
            q[i] = bound[i] + past
            result = chain.inverse(chain.forward(q), q)
            assert result.success is False and result.reason == f"the solution leaves the joint limits of {name}"
            assert (result.position_error_m, result.rotation_error_rad) == (0.0, 0.0)  # the pose itself is reached
            assert np.allclose(np.cos(result.joints - q), 1.0) and result.iterations == 0  # q, up to whole turns
    q = lower - 0.1
    every = ", ".join(wx250s.JOINT_NAMES)
    assert chain.inverse(chain.forward(q), q).reason == f"the solution leaves the joint limits of {every}"


def test_wrapping_moves_an_angle_by_whole_turns_only_when_that_brings_it_into_its_limits():
    # The first joint turns further than a full turn in each direction, the second less; the third is the
    # wx250s waist (+-(pi - 1e-5)).
    limits = JointLimits(("a", "b", "c"), (-1.0, -6.0, -np.pi + 1e-5), (6.0, 1.0, np.pi - 1e-5), (0.1,) * 3)
    chain = ScrewChain("turns", np.eye(4), np.array([[0, 0, 1, 0, 0, 0]] * 3, dtype=float).T, limits)
    rng = np.random.default_rng(14)
    for _ in range(300):
        q = rng.uniform(-np.pi, np.pi - 1e-9, size=3)
        wrapped = chain.wrap(q + TWO_PI * rng.integers(-3, 4, size=3))
        # Same angle, into [-pi, pi) first, then by a turn only where the angle leaves the limits.
        expected = np.where(q < chain.lower, q + TWO_PI, np.where(q > chain.upper, q - TWO_PI, q))
        assert np.allclose(wrapped, expected, atol=1e-9), q
        assert np.allclose(np.cos(wrapped), np.cos(q)) and np.allclose(np.sin(wrapped), np.sin(q))
    # On a bound: kept (a turn would leave the limits or is not needed).
    assert np.array_equal(chain.wrap(np.array([-1.0, 1.0, 0.0])), [-1.0, 1.0, 0.0])
    assert np.allclose(chain.wrap(np.array([-2.0, 2.0, 3.0])), [TWO_PI - 2.0, 2.0 - TWO_PI, 3.0])  # a turn helps
    assert np.allclose(chain.wrap(np.array([-0.5, 0.5, -3.0 - TWO_PI])), [-0.5, 0.5, -3.0])


# ------------------------------------------------------------------ inverse kinematics: what a result reports
def test_a_solution_is_within_the_tolerances_it_reports_and_its_errors_are_the_real_ones():
    rng = np.random.default_rng(15)
    solved = 0
    for q in random_joints(rng, 30):
        start = q + rng.uniform(-0.05, 0.05, size=6)
        target = CHAIN.forward(q)
        target[:3, 3] += rng.uniform(-0.01, 0.01, size=3)  # a target that moves, and (below) one that only turns
        for goal in (target, CHAIN.forward(q) @ screw_exp(np.array([0, 0, 1.0, 0, 0, 0]), 0.05)):
            result = CHAIN.inverse(goal, start)
            if not result.success:
                continue
            solved += 1
            reached = CHAIN.forward(result.joints)
            position_error = np.linalg.norm(reached[:3, 3] - goal[:3, 3])
            rotation_error = np.linalg.norm(transform_log(transform_inverse(reached) @ goal)[:3])
            assert result.position_error_m <= 1e-4 and result.rotation_error_rad <= 1e-3
            assert result.position_error_m == pytest.approx(position_error, abs=1e-12)
            assert result.rotation_error_rad == pytest.approx(rotation_error, abs=1e-9)
            assert 1 <= result.iterations <= 6 and result.reason == ""
    assert solved >= 50
    q = np.array(wx250s.NEUTRAL_JOINTS)
    loose = CHAIN.inverse(CHAIN.forward(q + 0.01), q, position_tol_m=0.05, rotation_tol_rad=0.05)
    assert loose.success and loose.iterations == 0 and np.allclose(loose.joints, q, atol=1e-12)  # within tolerance
    tight = CHAIN.inverse(CHAIN.forward(q + 0.01), q, position_tol_m=1e-9, rotation_tol_rad=1e-9)
    assert tight.success and tight.position_error_m <= 1e-9 and tight.rotation_error_rad <= 1e-9


def test_a_target_that_only_turns_the_gripper_in_place_is_turned_to():
    rng = np.random.default_rng(17)
    solved = 0
    for q in random_joints(rng, 20):
        axis = rng.normal(size=3)
        turn = screw_exp(np.concatenate([axis / np.linalg.norm(axis), np.zeros(3)]), 0.2)
        target = CHAIN.forward(q) @ turn  # the same point, the gripper turned 0.2 rad about it
        result = CHAIN.inverse(target, q)
        if not result.success:
            continue  # the turn may need a joint past its limit
        solved += 1
        reached = CHAIN.forward(result.joints)
        assert result.iterations >= 1 and result.rotation_error_rad <= 1e-3
        assert np.linalg.norm(transform_log(transform_inverse(reached) @ target)[:3]) <= 1e-3
    assert solved >= 10


def test_a_target_out_of_reach_stops_after_the_iterations_allowed_and_says_how_far_it_got():
    far = np.eye(4)
    far[:3, 3] = [2.0, 0.0, 0.3]
    start = np.array(wx250s.NEUTRAL_JOINTS)
    for kwargs, count in (({}, 20), ({"max_iterations": 3}, 3), ({"max_iterations": 0}, 0)):
        result = CHAIN.inverse(far, start, **kwargs)
        assert result.success is False and result.iterations == count
        assert result.reason == (f"no convergence in {count} iterations (error {result.position_error_m * 1000:.1f} "
                                 f"mm, {result.rotation_error_rad:.3f} rad)")
        reached = CHAIN.forward(result.joints)  # the errors are those of the joints returned
        assert result.position_error_m == pytest.approx(np.linalg.norm(reached[:3, 3] - far[:3, 3]))
        assert result.position_error_m > 1.0
    assert np.array_equal(CHAIN.inverse(far, start, max_iterations=0).joints, start)


def test_a_malformed_target_or_start_is_refused_before_any_iteration_with_what_was_wrong():
    start = np.array(wx250s.NEUTRAL_JOINTS)
    good = CHAIN.forward(start)
    nan_pose, inf_pose = good.copy(), good.copy()
    nan_pose[0, 3], inf_pose[2, 2] = np.nan, np.inf
    for target in (good[:3], nan_pose, inf_pose, np.eye(3)):
        result = CHAIN.inverse(target, start)
        assert (result.success, result.iterations, result.position_error_m, result.rotation_error_rad) == (
            False, 0, np.inf, np.inf)
        assert result.reason == "the target is not a finite 4x4 pose" and np.array_equal(result.joints, start)
    for bad in (start[:5], np.append(start, 0.0), np.where(np.arange(6) == 2, np.nan, start),
                np.where(np.arange(6) == 4, -np.inf, start)):
        result = CHAIN.inverse(good, bad)
        assert (result.success, result.iterations, result.position_error_m, result.rotation_error_rad) == (
            False, 0, np.inf, np.inf)
        assert result.reason == "the start is not a finite joint vector"
        assert np.array_equal(result.joints, np.zeros(6)) and result.joints.shape == (6,)


def test_a_solve_leaves_its_start_untouched():
    start = np.array(wx250s.NEUTRAL_JOINTS)
    kept = start.copy()
    result = CHAIN.inverse(CHAIN.forward(start + 0.03), start)
    assert result.success and np.array_equal(start, kept) and not np.array_equal(result.joints, start)


# ------------------------------------------------------------------ joint paths
def test_joint_paths_take_the_fewest_even_steps_within_each_joints_own_step():
    rng = np.random.default_rng(16)
    for _ in range(200):
        n = int(rng.integers(1, 7))
        start, goal = rng.uniform(-3, 3, size=n), rng.uniform(-3, 3, size=n)
        step = rng.uniform(0.01, 0.5, size=n)
        path = joint_path(start, goal, step)
        moves = np.diff(np.vstack([start, *path]), axis=0)
        assert np.all(np.abs(moves) <= step + 1e-12)  # no joint steps further than its own max_step
        assert np.allclose(moves, moves[0], atol=1e-12)  # evenly divided
        assert np.allclose(path[-1], goal, atol=1e-12)
        assert len(path) == max(1, int(np.ceil(np.max(np.abs(goal - start) / step) - 1e-9)))
        if len(path) > 1:  # one step fewer would be too long for some joint
            assert np.any(np.abs(goal - start) / (len(path) - 1) > step)


def test_a_goal_a_whole_number_of_steps_away_takes_exactly_that_many():
    # 2.1 / 0.3 is 7.000000000000001 in floating point: still seven steps, not eight.
    assert len(joint_path(np.zeros(1), np.array([2.1]), np.array([0.3]))) == 7
    assert len(joint_path(np.zeros(2), np.array([0.6000000000000001, 0.0]), np.array([0.2, 0.2]))) == 3
    assert len(joint_path(np.zeros(1), np.array([2.1 + 1e-6]), np.array([0.3]))) == 8


def test_a_joint_path_needs_matching_shapes_and_a_positive_step_for_every_joint():
    message = (r"^joint path: start \(2,\), goal \(2,\) and positive max_step \(2,\) must match$")
    for step in (np.array([0.1, 0.0]), np.array([-0.1, 0.1]), np.zeros(2)):
        with pytest.raises(ConfigError, match=message):
            joint_path(np.zeros(2), np.ones(2), step)
    with pytest.raises(ConfigError, match=r"^joint path: start \(2,\), goal \(2,\) and positive max_step \(3,\) must"):
        joint_path(np.zeros(2), np.ones(2), np.ones(3))
    with pytest.raises(ConfigError, match=r"^joint path: start \(3,\), goal \(2,\) and positive max_step \(2,\) must"):
        joint_path(np.zeros(3), np.ones(2), np.ones(2))


def test_a_start_exactly_on_the_target_meets_even_zero_tolerances():
    # At all joints zero the pose is M exactly and M^-1 M is exactly the identity: both errors are 0.0.
    result = CHAIN.inverse(wx250s.M, np.zeros(6), position_tol_m=0.0, rotation_tol_rad=0.0)
    assert result.success and result.iterations == 0
    assert (result.position_error_m, result.rotation_error_rad) == (0.0, 0.0)


def test_numbers_of_any_type_are_read_as_floats_exact_decimals_from_a_file_included():
    # A JSON file read with parse_float=Decimal gives Decimal values; numpy keeps them as Python objects
    # unless told to convert, and float arithmetic then refuses them.
    def exact(values):
        return json.loads(json.dumps(np.asarray(values).tolist()), parse_float=Decimal)

    chain = ScrewChain(wx250s.MODEL, exact(wx250s.M), exact(wx250s.SLIST), wx250s.joint_limits())
    q = np.array(wx250s.NEUTRAL_JOINTS)
    assert np.allclose(chain.forward(q), CHAIN.forward(q), atol=1e-12)
    assert np.allclose(CHAIN.forward(exact(q)), CHAIN.forward(q))
    assert np.allclose(CHAIN.jacobian(exact(q)), CHAIN.jacobian(q))
    assert chain.within_limits(exact(q)) and not chain.within_limits(exact(q + [0, 0, 0, 0, 1.0, 0]))
    # A joint written exactly at its bound is within it: the decimal a file holds is read as the bound's float.
    assert chain.within_limits(exact(wx250s.LOWER)) and chain.within_limits(exact(wx250s.UPPER))
    assert np.allclose(CHAIN.wrap(exact(q + TWO_PI)), q) and CHAIN.wrap(exact(q)).dtype == np.float64
    target = CHAIN.forward(q + 0.02)
    result = CHAIN.inverse(exact(target), exact(q))
    assert result.success and np.allclose(result.joints, q + 0.02, atol=1e-3) and result.joints.dtype == np.float64
    for start in ([0, 0, 0, 0, 0, 0], exact(q)):  # a refused target gives the start back, as floats
        refused = CHAIN.inverse(np.eye(3), start)
        assert refused.joints.dtype == np.float64 and np.allclose(refused.joints, np.asarray(start, dtype=float))
    path = joint_path(exact([0.0, 0.0]), exact([0.3, -0.15]), exact([0.1, 0.1]))
    assert len(path) == 3 and np.allclose(path[-1], [0.3, -0.15]) and path[-1].dtype == np.float64
