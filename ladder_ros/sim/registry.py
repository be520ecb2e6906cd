"""Simulator backends by name, imported only when asked for (MuJoCo and ManiSkill are optional)."""

from __future__ import annotations

import importlib
from typing import Any

from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.suite import TaskSuite
from ladder_ros.sim.base import SimulatorBackend
from ladder_ros.sim.tabletop_embodiment import JOINT_POSITION_REFUSAL

# name -> "module:factory"; a factory takes (suite, **options) and returns a SimulatorBackend.
BACKENDS: dict[str, str] = {
    "mujoco_tabletop": "ladder_ros.sim.mujoco_tabletop:make_backend",
    "maniskill_bridge": "ladder_ros.sim.maniskill_bridge:make_backend",
}

# The action kinds (policy configs' ``action.kind``) each backend's step() takes: the action
# contract's end-effector deltas. Neither has an arm whose joint positions a policy could command.
ACTION_KINDS: dict[str, tuple[str, ...]] = {"mujoco_tabletop": ("ee_delta",), "maniskill_bridge": ("ee_delta",)}


def make_simulator(name: str, suite: TaskSuite, **options: Any) -> SimulatorBackend:
    """Build the backend ``name`` for ``suite``; an unknown name lists the valid ones."""
    if name not in BACKENDS:
        raise unknown_name("simulator", name, list(BACKENDS))
    module, factory = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), factory)(suite, **options)


def check_action_kind(name: str, suite: TaskSuite, kind: str, policy: str) -> None:
    """Refuse, before anything is built, a policy whose actions simulator ``name`` cannot take, saying why."""
    if name not in BACKENDS:
        raise unknown_name("simulator", name, list(BACKENDS))
    if kind in ACTION_KINDS[name]:
        return
    if name == "mujoco_tabletop" and suite.embodiment == "franka":
        reason = JOINT_POSITION_REFUSAL
    else:
        reason = f"simulator {name} takes the action contract's end-effector deltas ({', '.join(ACTION_KINDS[name])})"
    raise ConfigError(f"policy {policy} acts in {kind} actions: {reason}")
