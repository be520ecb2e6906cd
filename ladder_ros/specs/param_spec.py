"""How a ladder_ros node's ROS parameter is declared: its type, default, description, range and choices.

:class:`ParamSpec` is plain data, checked the same way by the node at start-up (declared with
descriptors) and by ``ladder-ros up`` and the launch files before any process starts
(:mod:`ladder_ros.specs.parameters`). ``COMMON`` holds the parameters every node has. No rclpy here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import PRESETS
from ladder_ros.messages import CLOCK_MODES, LOCKSTEP

BOOL, INT, FLOAT, STR, STR_LIST, FLOAT_LIST = "bool", "int", "float", "str", "str_list", "float_list"


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its type, default, description (with units), and allowed values."""

    name: str
    type: str
    default: Any
    description: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = True
    size: int | None = None  # float lists: the number of values

    def check(self, value: Any, node: str = "", *, strict: bool = False) -> Any:
        """``value`` if it is valid for this parameter; else a :class:`ConfigError` naming it.

        ``strict``: the value is what a node will read itself (a params file), so an integer for a
        decimal parameter is refused, as ROS 2 refuses it ("expecting type DOUBLE"); otherwise
        (values this package writes for the node, e.g. ``--set``) it is converted.
        """
        where = f"{node}.{self.name}" if node else self.name

        def fail(why: str) -> ConfigError:
            return ConfigError(f"parameter {where}: {why}, got {value!r}")

        if self.type == BOOL:
            if not isinstance(value, bool):
                raise fail("must be true or false")
        elif self.type == INT:
            if isinstance(value, bool) or not isinstance(value, int):
                raise fail("must be an integer")
        elif self.type == FLOAT:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise fail("must be a finite number")
            if strict and isinstance(value, int):
                raise fail(f"must be a decimal number: ROS 2 refuses an integer for a double parameter, "
                           f"write {value}.0")
            value = float(value)
        elif self.type == STR:
            if not isinstance(value, str):
                raise fail("must be a string")
        elif self.type == STR_LIST:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise fail("must be a list of strings")
        elif self.type == FLOAT_LIST:
            if not isinstance(value, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
                raise fail("must be a list of finite numbers")
            if strict and any(isinstance(v, int) for v in value):
                raise fail("must be a list of decimal numbers: ROS 2 refuses integers in a double array, write 0.0 "
                           "for 0")
            if self.size is not None and len(value) != self.size:
                raise fail(f"must have {self.size} values")
            value = [float(v) for v in value]
            if self.min is not None and any(v < self.min for v in value):
                raise fail(f"values must be >= {self.min}")
            if self.max is not None and any(v > self.max for v in value):
                raise fail(f"values must be <= {self.max}")
            return value
        if self.min is not None and value < self.min:
            raise fail(f"must be >= {self.min}")
        if self.max is not None and value > self.max:
            raise fail(f"must be <= {self.max}")
        if self.choices and value not in self.choices:
            raise fail(f"must be one of {', '.join(self.choices)}")
        return value


def _preset_choices() -> tuple[str, ...]:
    return tuple(sorted(PRESETS))


# The scripted expert's execution noise, read by the policy node and the rehearsal's policy server alike.
EXPERT_NOISE = ParamSpec("noise", STR, "bridge_like", "Scripted expert execution noise preset, as in simulation "
                         "(ladder_ros/instruments/expert/noise.py ExpertNoise)", choices=("off", "bridge_like"))

# Shared by every node: the loop's parameters come from the embodiment preset (core/presets.py,
# paper Appendix B), never from per-node copies of its numbers.
# Parameters several nodes read that must agree across a graph (bringup refuses a graph whose nodes disagree:
# ladder_ros/specs/parameters.py check_shared_parameters): one spec each, declared by every node that reads it.
APERTURE_JOINT = ParamSpec("aperture_joint", STR, "gripper_aperture", "Name of the JointState entry carrying the "
                           "normalised gripper aperture (0 closed, 1 open); the same in every node of a graph")
BASE_FRAME = ParamSpec("base_frame", STR, "base_link", "Frame of the end-effector pose (the arm's base); the same in "
                       "every node of a graph")

COMMON = (
    ParamSpec("preset", STR, "widowx", "Embodiment preset: control rate, trigger and verifier timing "
              "(paper Appendix B; ladder_ros/core/presets.py)", choices=_preset_choices()),
    ParamSpec("clock_mode", STR, LOCKSTEP, "lockstep: the simulator steps only when the step's decisions and "
              "action are in (simulation); wall_clock: the robot runs at the control rate", choices=CLOCK_MODES),
)
