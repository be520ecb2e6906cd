"""Test double of interbotix_xs_modules.xs_robot.mr_descriptions: the real wx250s description."""

from abc import ABC

import numpy as np


class ModernRoboticsDescription(ABC):
    Slist: np.ndarray = None
    M: np.ndarray = None


class wx250s(ModernRoboticsDescription):
    Slist = np.array([[0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
                      [0.0, 1.0, 0.0, -0.11065, 0.0, 0.0],
                      [0.0, 1.0, 0.0, -0.36065, 0.0, 0.04975],
                      [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0],
                      [0.0, 1.0, 0.0, -0.36065, 0.0, 0.29975],
                      [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0]]).T

    M = np.array([[1.0, 0.0, 0.0, 0.458325],
                  [0.0, 1.0, 0.0, 0.0],
                  [0.0, 0.0, 1.0, 0.36065],
                  [0.0, 0.0, 0.0, 1.0]])
