"""A scripted top-down pick-and-place for the Bridge backend: a test and benchmark instrument.

It reads the privileged state (object pose, container top) and the controller target, all in the
robot base frame, and emits the same 7-D actions a Bridge policy sends (metres added to the previous
target, Euler XYZ rotation delta, gripper +1 open / -1 closed). The contract tests use it to place
an object for real and watch the predicates flip; it is not a policy and knows nothing of images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ladder_ros.core.observation import Observation

# Motion limits per 5 Hz step: the WidowX tracks a 2-3 cm target jump within one or two steps
# (measured: +2 cm in x is 63 % done after one step, 98 % after four).
MAX_TRANSLATION_STEP_M = 0.025
MAX_YAW_STEP_RAD = 0.3
HOVER_HEIGHT_M = 0.08  # above the object's centre while travelling (clears plate and cloth)
GRASP_BELOW_CENTRE_M = 0.005  # finger tips slightly below the centre of a lying object
RELEASE_ABOVE_SURFACE_M = 0.03  # object centre this far above the container top when let go
ARRIVAL_TOLERANCE_M = 0.006
SETTLE_LIMIT_STEPS = 8  # steps to wait for the arm to reach a target before moving on anyway
GRIPPER_STEPS = 4  # measured: the fingers travel their 22 mm (0.037 to 0.015 m) in three to four steps


def _wrap_half_turn(angle: float) -> float:
    """A parallel gripper is symmetric under a half turn: map to (-pi/2, pi/2]."""
    wrapped = (angle + math.pi / 2) % math.pi - math.pi / 2
    return wrapped if wrapped != -math.pi / 2 else math.pi / 2


def _yaw_of(quaternion: np.ndarray) -> float:
    w, x, y, z = (float(v) for v in quaternion)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


@dataclass
class ScriptedPlacement:
    """Moves ``object_name`` onto ``container_name``; feed observations, get actions until done."""

    object_name: str
    container_name: str

    def actions(self, first: Observation) -> Iterator[np.ndarray]:
        """A generator: ``send(observation)`` after each step returns the next action."""
        obs = first
        priv = obs.privileged
        assert priv is not None, "the scripted placement needs the privileged state"
        target_yaw = _wrap_half_turn(_yaw_of(priv.objects[self.object_name].quaternion))
        above_object = priv.objects[self.object_name].position + np.array([0.0, 0.0, HOVER_HEIGHT_M])
        obs = yield from self._move(obs, above_object, target_yaw, gripper=1.0)
        grasp = priv.objects[self.object_name].position - np.array([0.0, 0.0, GRASP_BELOW_CENTRE_M])
        obs = yield from self._move(obs, grasp, target_yaw, gripper=1.0)
        obs = yield from self._hold(obs, gripper=-1.0)
        lift = obs.target_position + np.array([0.0, 0.0, HOVER_HEIGHT_M])
        obs = yield from self._move(obs, lift, target_yaw, gripper=-1.0)
        container = obs.privileged.containers[self.container_name]
        above_container = np.array([container.position[0], container.position[1], lift[2]])
        obs = yield from self._move(obs, above_container, target_yaw, gripper=-1.0)
        release = np.array([container.position[0], container.position[1],
                            container.surface_z + RELEASE_ABOVE_SURFACE_M])
        obs = yield from self._move(obs, release, target_yaw, gripper=-1.0)
        obs = yield from self._hold(obs, gripper=1.0)
        obs = yield from self._move(obs, release + np.array([0.0, 0.0, HOVER_HEIGHT_M]), target_yaw, gripper=1.0)

    def _move(self, obs: Observation, goal: np.ndarray, yaw: float, gripper: float):
        waited = 0
        while True:
            delta = goal - obs.target_position
            yaw_error = yaw - float(obs.ee_euler[2])
            if np.linalg.norm(delta) < 1e-6 and abs(yaw_error) < 0.02:
                if np.linalg.norm(obs.ee_position - goal) < ARRIVAL_TOLERANCE_M or waited >= SETTLE_LIMIT_STEPS:
                    return obs
                waited += 1
            norm = float(np.linalg.norm(delta))
            if norm > MAX_TRANSLATION_STEP_M:
                delta = delta * (MAX_TRANSLATION_STEP_M / norm)
            action = np.zeros(7)
            action[:3] = delta
            action[5] = float(np.clip(yaw_error, -MAX_YAW_STEP_RAD, MAX_YAW_STEP_RAD))
            action[6] = gripper
            obs = yield action

    def _hold(self, obs: Observation, gripper: float):
        for _ in range(GRIPPER_STEPS):
            action = np.zeros(7)
            action[6] = gripper
            obs = yield action
        return obs


def run_placement(backend, first: Observation, object_name: str, container_name: str,
                  max_steps: int = 150) -> list[Observation]:
    """Drive ``backend`` with a :class:`ScriptedPlacement` to its end; returns every observation."""
    plan = ScriptedPlacement(object_name, container_name).actions(first)
    observations = [first]
    try:
        action = next(plan)
        for _ in range(max_steps):
            observations.append(backend.step(action))
            action = plan.send(observations[-1])
    except StopIteration:
        pass
    return observations
