"""Test double of interbotix_common_modules.angle_manipulation: static 'sxyz' Euler angles, as the real one."""

import math
from typing import List

import numpy as np


def euler_angles_to_rotation_matrix(theta: List[float]) -> np.ndarray:
    """R = Rz(theta[2]) Ry(theta[1]) Rx(theta[0]) (tf_transformations euler_matrix, axes='sxyz')."""
    a, b, c = (float(v) for v in theta)
    rx = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
    rz = np.array([[math.cos(c), -math.sin(c), 0], [math.sin(c), math.cos(c), 0], [0, 0, 1]])
    return rz @ ry @ rx


def rotation_matrix_to_euler_angles(R: np.ndarray) -> List[float]:
    """Inverse of :func:`euler_angles_to_rotation_matrix` (tf_transformations euler_from_matrix, 'sxyz')."""
    m = np.asarray(R, dtype=np.float64)
    cy = math.hypot(m[0, 0], m[1, 0])
    if cy > 1e-9:
        return [math.atan2(m[2, 1], m[2, 2]), math.atan2(-m[2, 0], cy), math.atan2(m[1, 0], m[0, 0])]
    return [math.atan2(-m[1, 2], m[1, 1]), math.atan2(-m[2, 0], cy), 0.0]
