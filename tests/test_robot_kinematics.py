"""WX250s kinematics against modern_robotics (the library Interbotix's own API uses), and the pure helpers."""

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots import wx250s
from ladder_ros.core.rotations import matrix_to_quaternion, quaternion_to_matrix
from ladder_ros.robots.kinematics import joint_path, screw_exp, transform_inverse, transform_log

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
