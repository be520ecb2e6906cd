"""Forward and inverse kinematics of a serial arm in product-of-exponentials form, in plain numpy.

An arm is its home pose ``M`` (the end effector at all joints zero, in the base frame) and the
screw axes ``Slist`` of its joints in the base frame (Lynch and Park, *Modern Robotics*, ch. 4 and
6; the form Interbotix publishes for its arms). The inverse kinematics is the book's Newton-Raphson
iteration on the space-frame twist, started from the previous joint target, which is what makes it
fast enough for a control loop: from a nearby start it converges in a few iterations (about a
millisecond), where a solve from fixed seeds (what the vendor's blocking call does) takes far longer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import JointLimits

TWO_PI = 2.0 * np.pi


def skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def screw_exp(screw: np.ndarray, theta: float) -> np.ndarray:
    """``exp([S] theta)`` for a unit screw ``S = (w, v)`` (revolute, ``|w| = 1``, or prismatic, ``w = 0``)."""
    w, v = screw[:3], screw[3:]
    out = np.eye(4)
    if np.allclose(w, 0.0):
        out[:3, 3] = v * theta
        return out
    wx = skew(w)
    s, c = np.sin(theta), np.cos(theta)
    out[:3, :3] = np.eye(3) + s * wx + (1.0 - c) * (wx @ wx)
    out[:3, 3] = (np.eye(3) * theta + (1.0 - c) * wx + (theta - s) * (wx @ wx)) @ v
    return out


def adjoint(t: np.ndarray) -> np.ndarray:
    r, p = t[:3, :3], t[:3, 3]
    out = np.zeros((6, 6))
    out[:3, :3] = r
    out[3:, 3:] = r
    out[3:, :3] = skew(p) @ r
    return out


def transform_inverse(t: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    r = t[:3, :3].T
    out[:3, :3] = r
    out[:3, 3] = -r @ t[:3, 3]
    return out


def transform_log(t: np.ndarray) -> np.ndarray:
    """The twist ``(w, v)`` with ``exp([twist]) = t`` (SE(3) matrix logarithm)."""
    r, p = t[:3, :3], t[:3, 3]
    cos_theta = np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)
    theta = float(np.arccos(cos_theta))
    if theta < 1e-9:
        return np.concatenate([np.zeros(3), p])
    if np.pi - theta < 1e-6:
        # A half turn: the axis from the symmetric part (R = 2 w w^T - I).
        i = int(np.argmax(np.diag(r)))
        w = (r[:, i] + np.eye(3)[:, i]) / np.sqrt(2.0 * (1.0 + r[i, i]))
    else:
        w = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / (2.0 * np.sin(theta))
    wx = skew(w)
    g_inv = (np.eye(3) / theta - 0.5 * wx + (1.0 / theta - 0.5 / np.tan(theta / 2.0)) * (wx @ wx))
    return np.concatenate([w * theta, g_inv @ p * theta])


@dataclass(frozen=True)
class IKResult:
    joints: np.ndarray
    success: bool
    iterations: int
    position_error_m: float
    rotation_error_rad: float
    reason: str = ""


class ScrewChain:
    """A serial arm: home pose, screw axes, joint limits. FK, space Jacobian, IK from a warm start."""

    def __init__(self, name: str, home: np.ndarray, screws: np.ndarray, limits: JointLimits):
        home = np.asarray(home, dtype=np.float64)
        screws = np.asarray(screws, dtype=np.float64)
        if home.shape != (4, 4):
            raise ConfigError(f"{name}: the home pose M is a 4x4 matrix, got shape {home.shape}")
        if screws.ndim != 2 or screws.shape[0] != 6:
            raise ConfigError(f"{name}: Slist is 6 x n (one screw per column), got shape {screws.shape}")
        if screws.shape[1] != len(limits.names):
            raise ConfigError(f"{name}: {screws.shape[1]} screws for {len(limits.names)} joint limits")
        self.name = name
        self.home = home
        self.screws = screws
        self.limits = limits
        self.lower = np.array(limits.lower)
        self.upper = np.array(limits.upper)

        # Per-joint constants of exp([S] theta) (revolute joints: |w| = 1), so a control-loop solve costs
        # a few small products per joint instead of rebuilding skew matrices.
        self._revolute = [not np.allclose(screws[:3, i], 0.0) for i in range(screws.shape[1])]
        self._w = [screws[:3, i].copy() for i in range(screws.shape[1])]
        self._v = [screws[3:, i].copy() for i in range(screws.shape[1])]
        self._wx = [skew(w) for w in self._w]
        self._wx2 = [wx @ wx for wx in self._wx]
        self._wxv = [wx @ v for wx, v in zip(self._wx, self._v)]
        self._wx2v = [wx2 @ v for wx2, v in zip(self._wx2, self._v)]

    @property
    def dof(self) -> int:
        return self.screws.shape[1]

    def _joint(self, i: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """(R, p) of ``exp([S_i] theta)``."""
        if not self._revolute[i]:
            return np.eye(3), self._v[i] * theta
        s, c = np.sin(theta), np.cos(theta)
        r = np.eye(3) + s * self._wx[i] + (1.0 - c) * self._wx2[i]
        return r, theta * self._v[i] + (1.0 - c) * self._wxv[i] + (theta - s) * self._wx2v[i]

    def forward_and_jacobian(self, joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The end-effector pose (4x4, base frame) and the space Jacobian (6 x n) at ``joints``, in one pass.

        Column i of the Jacobian is joint i's screw moved by the joints before it (``Ad(T_{i-1}) S_i``).
        """
        q = np.asarray(joints, dtype=np.float64)
        r_acc, p_acc = np.eye(3), np.zeros(3)
        jac = np.empty((6, self.dof))
        for i in range(self.dof):
            w = r_acc @ self._w[i]
            jac[:3, i] = w
            jac[3:, i] = np.cross(p_acc, w) + r_acc @ self._v[i]
            r_i, p_i = self._joint(i, q[i])
            p_acc = p_acc + r_acc @ p_i
            r_acc = r_acc @ r_i
        t = np.eye(4)
        t[:3, :3] = r_acc @ self.home[:3, :3]
        t[:3, 3] = r_acc @ self.home[:3, 3] + p_acc
        return t, jac

    def forward(self, joints: np.ndarray) -> np.ndarray:
        """The end-effector pose (4x4, base frame) at ``joints``."""
        return self.forward_and_jacobian(joints)[0]

    def jacobian(self, joints: np.ndarray) -> np.ndarray:
        """The space Jacobian (6 x n) at ``joints``."""
        return self.forward_and_jacobian(joints)[1]

    def within_limits(self, joints: np.ndarray) -> bool:
        q = np.asarray(joints, dtype=np.float64)
        return bool(np.all(q >= self.lower) and np.all(q <= self.upper))

    def wrap(self, joints: np.ndarray) -> np.ndarray:
        """Joint angles wrapped to [-pi, pi), then by a turn into their limits where that helps."""
        q = (np.asarray(joints, dtype=np.float64) + np.pi) % TWO_PI - np.pi
        q = np.where(q < self.lower, q + TWO_PI, q)
        return np.where(q > self.upper, q - TWO_PI, q)

    def inverse(self, target: np.ndarray, start: np.ndarray, *, max_iterations: int = 20,
                position_tol_m: float = 1e-4, rotation_tol_rad: float = 1e-3) -> IKResult:
        """Joints that put the end effector at ``target`` (4x4), starting from ``start`` (the previous target).

        Newton-Raphson on the space twist (Modern Robotics, section 6.2) with the pseudo-inverse
        Jacobian; succeeds when the position and rotation errors are within tolerance and the
        (wrapped) joints are within their limits.
        """
        target = np.asarray(target, dtype=np.float64)
        q = np.asarray(start, dtype=np.float64).copy()
        if target.shape != (4, 4) or not np.all(np.isfinite(target)):
            return IKResult(q, False, 0, np.inf, np.inf, "the target is not a finite 4x4 pose")
        if q.shape != (self.dof,) or not np.all(np.isfinite(q)):
            return IKResult(np.zeros(self.dof), False, 0, np.inf, np.inf, "the start is not a finite joint vector")
        iterations = 0
        while True:
            current, jac = self.forward_and_jacobian(q)
            twist = adjoint(current) @ transform_log(transform_inverse(current) @ target)
            rotation_error = float(np.linalg.norm(twist[:3]))
            position_error = float(np.linalg.norm(target[:3, 3] - current[:3, 3]))
            if rotation_error <= rotation_tol_rad and position_error <= position_tol_m:
                break
            if iterations >= max_iterations:
                return IKResult(q, False, iterations, position_error, rotation_error,
                                f"no convergence in {max_iterations} iterations (error {position_error * 1000:.1f} "
                                f"mm, {rotation_error:.3f} rad)")
            q = q + np.linalg.pinv(jac) @ twist
            iterations += 1
        q = self.wrap(q)
        if not self.within_limits(q):
            names = [n for n, v, lo, hi in zip(self.limits.names, q, self.lower, self.upper) if not lo <= v <= hi]
            return IKResult(q, False, iterations, position_error, rotation_error,
                            f"the solution leaves the joint limits of {', '.join(names)}")
        return IKResult(q, True, iterations, position_error, rotation_error)


def joint_path(start: np.ndarray, goal: np.ndarray, max_step: np.ndarray) -> list[np.ndarray]:
    """Joint targets from ``start`` (excluded) to ``goal`` (included), no joint moving more than ``max_step`` a step.

    A straight line in joint space, evenly divided: how a driver homes the arm through its
    ordinary control loop (one target per period, each checked by the safety filter).
    """
    q0 = np.asarray(start, dtype=np.float64)
    q1 = np.asarray(goal, dtype=np.float64)
    steps = np.asarray(max_step, dtype=np.float64)
    if q0.shape != q1.shape or q0.shape != steps.shape or np.any(steps <= 0):
        raise ConfigError(f"joint path: start {q0.shape}, goal {q1.shape} and positive max_step {steps.shape} "
                          "must match")
    count = max(1, int(np.ceil(np.max(np.abs(q1 - q0) / steps) - 1e-9)))
    return [q0 + (q1 - q0) * (i / count) for i in range(1, count + 1)]
