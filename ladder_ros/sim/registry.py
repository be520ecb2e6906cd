"""Simulator backends by name, imported only when asked for (MuJoCo and ManiSkill are optional)."""

from __future__ import annotations

import importlib
from typing import Any

from ladder_ros.core.errors import unknown_name
from ladder_ros.core.suite import TaskSuite
from ladder_ros.sim.base import SimulatorBackend

# name -> "module:factory"; a factory takes (suite, **options) and returns a SimulatorBackend.
BACKENDS: dict[str, str] = {
    "mujoco_tabletop": "ladder_ros.sim.mujoco_tabletop:make_backend",
    "maniskill_bridge": "ladder_ros.sim.maniskill_bridge:make_backend",
}


def make_simulator(name: str, suite: TaskSuite, **options: Any) -> SimulatorBackend:
    """Build the backend ``name`` for ``suite``; an unknown name lists the valid ones."""
    if name not in BACKENDS:
        raise unknown_name("simulator", name, list(BACKENDS))
    module, factory = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), factory)(suite, **options)
