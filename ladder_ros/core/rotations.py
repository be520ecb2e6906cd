"""Rotations in plain numpy: the one tested place for every angle convention the project reads.

Three readings of three angles meet in robot learning, and they differ at second order whenever
two or more axes turn together (6.1 degrees apart at (0.3, 0.2, 0.25) rad):

* **Euler XYZ, intrinsic** — ``R = Rx(a) @ Ry(b) @ Rz(c)``. ManiSkill3's end-effector controller
  reads an action's rotation this way (``euler_angles_to_matrix(delta, "XYZ")`` in
  ``mani_skill/agents/controllers/pd_ee_pose.py``), and so does this project's action contract.
* **Static (extrinsic) xyz, "sxyz"** — ``R = Rz(c) @ Ry(b) @ Rx(a)``: roll about the fixed x axis,
  then pitch about the fixed y, then yaw about the fixed z. This is ``transforms3d``'s default
  axes, which SimplerEnv's Bridge policy wrappers pass to ``euler2axangle``.
* **Axis-angle** (rotation vector) — the rotation by ``|v|`` radians about ``v / |v|``; the old
  SimplerEnv (ManiSkill2) controller read an action's rotation this way.

Quaternions are (w, x, y, z), as ROS messages and ManiSkill store them (with w first here).
"""

from __future__ import annotations

import math

import numpy as np


def _rot_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _rot_y(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rot_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


# Below this cosine of the middle angle the first and last angles are read as one turn (gimbal lock). Dropping the
# last angle there costs about cos(middle) rad; reading both from matrix entries of size cos(middle) that carry
# rounding noise of ~1e-16 costs about 1e-16 / cos(middle). They balance at sqrt(1e-16) = 1e-8.
GIMBAL_LOCK_COS = 1e-8


def _three(angles) -> tuple[float, float, float]:
    a, b, c = (float(v) for v in np.asarray(angles, dtype=np.float64).reshape(3))
    return a, b, c


# ------------------------------------------------------------------------- Euler XYZ (intrinsic)
def euler_xyz_to_matrix(euler) -> np.ndarray:
    """``Rx(a) @ Ry(b) @ Rz(c)``: ManiSkill3's ``euler_angles_to_matrix(angles, "XYZ")``."""
    a, b, c = _three(euler)
    return _rot_x(a) @ _rot_y(b) @ _rot_z(c)


def matrix_to_euler_xyz(matrix) -> np.ndarray:
    """Inverse of :func:`euler_xyz_to_matrix`, with the middle angle in [-pi/2, pi/2]."""
    m = np.asarray(matrix, dtype=np.float64)
    cos_b = math.hypot(m[1, 2], m[2, 2])  # (-sin a, cos a) * cos b
    b = math.atan2(m[0, 2], cos_b)  # unlike asin: exact near the lock, and an entry rounded past 1 is no error
    if cos_b > GIMBAL_LOCK_COS:
        a = math.atan2(-m[1, 2], m[2, 2])
        c = math.atan2(-m[0, 1], m[0, 0])
    else:  # gimbal lock: only a +/- c is defined; put it all in a
        a = math.atan2(m[2, 1], m[1, 1])
        c = 0.0
    return np.array([a, b, c])


# ------------------------------------------------------------------------- static xyz ("sxyz")
def sxyz_to_matrix(euler) -> np.ndarray:
    """``Rz(yaw) @ Ry(pitch) @ Rx(roll)``: transforms3d's ``euler2mat(roll, pitch, yaw, "sxyz")``."""
    roll, pitch, yaw = _three(euler)
    return _rot_z(yaw) @ _rot_y(pitch) @ _rot_x(roll)


def matrix_to_sxyz(matrix) -> np.ndarray:
    """Inverse of :func:`sxyz_to_matrix`, with the pitch in [-pi/2, pi/2]."""
    m = np.asarray(matrix, dtype=np.float64)
    cos_pitch = math.hypot(m[2, 1], m[2, 2])  # (sin roll, cos roll) * cos pitch
    pitch = math.atan2(-m[2, 0], cos_pitch)
    if cos_pitch > GIMBAL_LOCK_COS:
        roll = math.atan2(m[2, 1], m[2, 2])
        yaw = math.atan2(m[1, 0], m[0, 0])
    else:  # gimbal lock: only roll -/+ yaw is defined; put it all in roll
        roll = math.atan2(-m[1, 2], m[1, 1])
        yaw = 0.0
    return np.array([roll, pitch, yaw])


# ------------------------------------------------------------------------- axis-angle
def axis_angle_to_matrix(rotvec) -> np.ndarray:
    """Rodrigues' formula: the rotation by ``|v|`` radians about ``v / |v|``."""
    v = np.asarray(rotvec, dtype=np.float64).reshape(3)
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.eye(3)
    k = v / angle
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * kx + (1.0 - math.cos(angle)) * (kx @ kx)


def matrix_to_axis_angle(matrix) -> np.ndarray:
    """Inverse of :func:`axis_angle_to_matrix`, with the angle in [0, pi]."""
    m = np.asarray(matrix, dtype=np.float64)
    antisymmetric = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]]) / 2.0  # sin * axis
    sin_angle = float(np.linalg.norm(antisymmetric))
    cos_angle = (float(np.trace(m)) - 1.0) / 2.0
    angle = math.atan2(sin_angle, cos_angle)  # well conditioned over [0, pi], unlike arccos
    if angle < 1e-12:
        return np.zeros(3)
    if cos_angle > -0.5:
        return antisymmetric / sin_angle * angle
    # Near a half turn the antisymmetric part vanishes: R + R^T - 2 cos I = 2 (1 - cos) k k^T, whose largest column
    # is along k (only its direction is used: the positive factor 2 (1 - cos) needs no dividing out).
    outer = m + m.T - 2.0 * cos_angle * np.eye(3)
    column = outer[:, int(np.argmax(np.diag(outer)))]
    axis = column / np.linalg.norm(column)
    if axis @ antisymmetric < 0:
        axis = -axis
    return axis * angle


def axis_angle_to_euler_xyz(rotvec) -> np.ndarray:
    """The Euler XYZ angles ManiSkill3 must read to turn as the axis-angle ``rotvec`` means."""
    return matrix_to_euler_xyz(axis_angle_to_matrix(rotvec))


def euler_xyz_to_axis_angle(euler) -> np.ndarray:
    """The axis-angle vector that turns as ManiSkill3 reads the Euler XYZ ``euler``."""
    return matrix_to_axis_angle(euler_xyz_to_matrix(euler))


def sxyz_to_axis_angle(euler) -> np.ndarray:
    """SimplerEnv's Bridge wrapper step: ``axis * angle`` of ``transforms3d.euler.euler2axangle(r, p, y)``."""
    return matrix_to_axis_angle(sxyz_to_matrix(euler))


# ------------------------------------------------------------------------- quaternions (w, x, y, z)
def quaternion_to_matrix(quaternion) -> np.ndarray:
    """The rotation matrix of a (w, x, y, z) quaternion (normalised first; a zero one is an error)."""
    q = np.asarray(quaternion, dtype=np.float64).reshape(4)
    norm = float(np.linalg.norm(q))
    if not norm > 0.0 or not math.isfinite(norm):
        raise ValueError(f"a quaternion must be finite and non-zero, got {q.tolist()}")
    w, x, y, z = q / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quaternion(matrix) -> np.ndarray:
    """The (w, x, y, z) unit quaternion of a rotation matrix, with w >= 0 (Shepperd's method).

    The square roots are of 4 w^2, 4 x^2, 4 y^2 or 4 z^2, whichever is largest (the largest of the trace and the
    diagonal picks it): at least 1, since the four squares sum to 1; for any real matrix it is 1 or more too.
    """
    m = np.asarray(matrix, dtype=np.float64)
    trace = float(np.trace(m))
    diagonal = (trace, float(m[0, 0]), float(m[1, 1]), float(m[2, 2]))
    largest = int(np.argmax(diagonal))
    if largest == 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = np.array([s / 4, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    elif largest == 1:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = np.array([(m[2, 1] - m[1, 2]) / s, s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s])
    elif largest == 2:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = np.array([(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s])
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = np.array([(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4])
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def quaternion_multiply(a, b) -> np.ndarray:
    """The Hamilton product ``a * b`` of two (w, x, y, z) quaternions (rotate by b, then by a)."""
    w1, x1, y1, z1 = (float(v) for v in a)
    w2, x2, y2, z2 = (float(v) for v in b)
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def rotation_angle_between(a, b) -> float:
    """The angle (rad) of the rotation that takes matrix ``a`` to matrix ``b``."""
    relative = np.asarray(a, dtype=np.float64).T @ np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(matrix_to_axis_angle(relative)))  # atan2-based: exact near zero too
