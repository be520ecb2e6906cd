"""Checking what a policy returned, and turning one of its actions into the command the graph publishes.

A chunk is refused as a whole (and the robot holds still) when it has the wrong number of numbers
per action, too few actions for the execution horizon, a NaN or infinity, or a value outside the
bounds the policy's config gives per axis, in the policy's own units. Values are never clipped
here: clipping to what the arm may do is the safety filter's job, and an out-of-range output from a
model is a symptom worth stopping for.

End-effector delta actions are then converted to the graph's action contract (``policy/action``:
metres, Euler XYZ radians, gripper +1 open / -1 closed) by the project's one conversion module
(:mod:`ladder_ros.core.action_conventions`), from the rotation and gripper conventions the config
names: the policy knows how it was trained, so every consumer of ``policy/action`` reads one
convention. Joint-position actions pass through with the config's axis names.
"""

from __future__ import annotations

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.observation import Observation
from ladder_ros.policies.config import EE_DELTA, PolicyConfig
from ladder_ros.core.action_conventions import (GRIPPER_OPEN_THRESHOLD, ActionConvention, GripperConvention,
                                                RotationConvention)


class InvalidActionError(InvalidInputError):
    """A chunk that fails validation; the message says why, naming the action, the axis and the bound."""


def _convention(kind: type, name: str, source: str, key: str):
    """``kind.parse(name)``; a name this build lacks is refused naming the config's file and key."""
    try:
        return kind.parse(name)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (not available in this build's action conventions)", source=source,
                          key=key) from None


class ActionProcessor:
    """Validates chunks and converts single actions, for one policy config."""

    def __init__(self, config: PolicyConfig):
        self.spec = config.action
        self.execute = config.execute_steps
        self._low, self._high = self.spec.low, self.spec.high
        self.convention: ActionConvention | None = None
        if self.spec.kind == EE_DELTA:
            self.convention = ActionConvention(
                _convention(RotationConvention, self.spec.rotation, config.source, "action.rotation"),
                _convention(GripperConvention, self.spec.gripper, config.source, "action.gripper"))

    @property
    def axes(self) -> tuple[str, ...]:
        return self.spec.names

    def check_chunk(self, actions: object, steps: int | None = None) -> np.ndarray:
        """The first ``steps`` actions of a chunk (default and at least the execution horizon ``k``; fewer when
        the chunk is shorter, never fewer than ``k``) as float64; :class:`InvalidActionError` if bad."""
        arr = np.asarray(actions)
        if arr.dtype.kind not in "biuf":
            raise InvalidActionError(f"actions must be numbers, got dtype {arr.dtype}")
        if arr.ndim != 2:
            raise InvalidActionError(f"a chunk is a (steps, {self.spec.dim}) array, got shape {arr.shape}")
        if arr.shape[1] != self.spec.dim:
            raise InvalidActionError(f"wrong action dimension: {arr.shape[1]} numbers per action, the config "
                                     f"expects {self.spec.dim} ({', '.join(self.axes)})")
        if arr.shape[0] < self.execute:
            raise InvalidActionError(f"chunk of {arr.shape[0]} actions is shorter than the execution horizon "
                                     f"({self.execute})")
        rows = arr[:max(self.execute, steps or 0)].astype(np.float64)
        bad = ~np.isfinite(rows)
        if bad.any():
            i, j = map(int, np.argwhere(bad)[0])
            raise InvalidActionError(f"action {i}, axis {self.axes[j]} is {rows[i, j]} (not a finite number)")
        outside = (rows < self._low) | (rows > self._high)
        if outside.any():
            i, j = map(int, np.argwhere(outside)[0])
            axis = self.spec.axes[j]
            raise InvalidActionError(f"action {i}, axis {axis.name} = {rows[i, j]:.6g} {axis.unit} is outside the "
                                     f"config's bounds [{axis.low:g}, {axis.high:g}]")
        return rows

    def command(self, action: np.ndarray) -> np.ndarray:
        """One checked action as the graph's command (see the module docstring)."""
        if self.convention is None:
            return np.asarray(action, dtype=np.float64).copy()
        return self.convention.to_canonical(action)

    def hold_command(self, observation: Observation) -> np.ndarray:
        """The command that keeps the arm where it is: no motion, the gripper as it is now (or joints in place)."""
        if self.convention is not None:
            gripper = 1.0 if observation.aperture >= GRIPPER_OPEN_THRESHOLD else -1.0
            return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, gripper])
        joints = np.asarray(observation.joint_positions, dtype=np.float64)
        if joints.size + 1 == self.spec.dim:  # arm joints plus the gripper, DROID's layout
            return np.append(joints, 1.0 - observation.aperture)
        raise InvalidActionError(f"no hold command for {self.spec.dim} joint axes from a state of {joints.size} "
                                 "joints")
