"""Franka arms (Panda, FR3): limits, the ready pose, and how a 15 Hz joint-target stream becomes smooth motion.

Limits are the Franka Control Interface's "Robot and interface specifications" (joint position
limits, maximum joint velocities and accelerations) for the Panda and the FR3; ``franky-sim``
simulates an FR3. The ready pose is DROID's reset joints (droid ``robot_env``:
``[0, -pi/5, 0, -4 pi/5, 0, 3 pi/5, 0]``), where pi0.5-DROID's episodes begin.

**Smooth streaming.** A fresh motion to each 15 Hz target that ends at rest makes the arm brake
and re-accelerate every 67 ms: jerky. Instead each target becomes a waypoint that the arm reaches
*with a velocity*, the average velocity of the last step, so the trajectory generator (franky's
Ruckig) passes through it and the next target takes over smoothly; a second waypoint at the same
target with zero velocity brings the arm to rest there if no next target comes. The waypoint
velocity is capped so the arm can still stop before a joint limit (``v^2 / 2a`` within the room
left), and by the joint velocity limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.safety import JointLimits

JOINT_NAMES = tuple(f"panda_joint{i}" for i in range(1, 8))
READY_JOINTS = (0.0, -math.pi / 5, 0.0, -4 * math.pi / 5, 0.0, 3 * math.pi / 5, 0.0)
HAND_MAX_WIDTH_M = 0.08  # Franka Hand stroke (Franka product manual)
CONTROL_PERIOD_S = 1.0 / 15.0  # 15 Hz (paper Appendix A)


@dataclass(frozen=True)
class FrankaModel:
    name: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_velocity: tuple[float, ...]  # rad/s
    max_acceleration: tuple[float, ...]  # rad/s^2

    def joint_limits(self, names: tuple[str, ...] = JOINT_NAMES, period_s: float = CONTROL_PERIOD_S) -> JointLimits:
        """Limits for the safety filter: a joint may move at most its velocity limit times one period per step."""
        return JointLimits(names, self.lower, self.upper, tuple(v * period_s for v in self.max_velocity),
                           source=f"Franka {self.name} joint limits and velocity limits over one control period")


MODELS = {
    "panda": FrankaModel("panda",
                         (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
                         (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
                         (2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100),
                         (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)),
    "fr3": FrankaModel("fr3",
                       (-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159),
                       (2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159),
                       (2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
                       (10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0)),
}


def get_model(name: str) -> FrankaModel:
    if name not in MODELS:
        raise unknown_name("Franka model", name, list(MODELS))
    return MODELS[name]


def waypoint_velocity(previous: np.ndarray, target: np.ndarray, period_s: float, model: FrankaModel,
                      dynamics_factor: float = 1.0) -> np.ndarray:
    """The velocity (rad/s) the arm should have on reaching ``target``, one period after ``previous``.

    The last step's average velocity, capped by the (scaled) velocity limit and so that the arm,
    decelerating at its (scaled) acceleration limit, stops before the joint limit ahead of it.
    """
    if not period_s > 0:
        raise ConfigError(f"period must be positive, got {period_s!r}")
    if not 0.0 < dynamics_factor <= 1.0:
        raise ConfigError(f"dynamics factor must be in (0, 1], got {dynamics_factor!r}")
    q0 = np.asarray(previous, dtype=np.float64)
    q1 = np.asarray(target, dtype=np.float64)
    v = (q1 - q0) / period_s
    v_max = np.asarray(model.max_velocity) * dynamics_factor
    a_max = np.asarray(model.max_acceleration) * dynamics_factor
    v = np.clip(v, -v_max, v_max)
    room = np.where(v > 0, np.asarray(model.upper) - q1, q1 - np.asarray(model.lower))
    v_stop = np.sqrt(2.0 * a_max * np.maximum(room, 0.0))
    return np.sign(v) * np.minimum(np.abs(v), v_stop)
