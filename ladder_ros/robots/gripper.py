"""Gripper readings and commands in the graph's terms: the aperture in [0, 1], 0 closed, 1 open.

The gripper trigger reads the *normalised* aperture (paper Appendix B: "the normalized gripper
aperture ([0,1] travel)"), so every driver maps its own reading onto that travel: the WidowX's left
finger position between 0.010 m (closed) and 0.035 m (open), Bridge's normalisation
(bridge_data_robot ``custom_gripper_controller.py``); the Franka hand's opening width between 0 and
its maximum width (0.08 m for the Franka Hand; the homed ``max_width`` when known). Readings outside
the travel are clipped into [0, 1]; a non-finite reading is an error (no aperture is published).

Gripper commands come in one of two conventions, named by the action's last axis:
``gripper``: the 7-D action contract, +1 open and -1 closed (Bridge policies binarise); and
``gripper_position``: DROID's, 0 open and 1 closed (pi0.5-DROID predicts it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ladder_ros.core.errors import ConfigError, InvalidInputError

SIGNED_AXIS = "gripper"  # +1 open, -1 closed
DROID_AXIS = "gripper_position"  # 0 open, 1 closed
GRIPPER_AXES = (SIGNED_AXIS, DROID_AXIS)


@dataclass(frozen=True)
class ApertureRange:
    """The gripper's reading when closed and when open (metres); ``source`` says where the numbers come from."""

    closed: float
    open: float
    source: str = ""

    def __post_init__(self) -> None:
        for name, value in (("closed", self.closed), ("open", self.open)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"gripper range {name} must be a finite number, got {value!r}")
        if not self.open > self.closed:
            raise ConfigError(f"gripper range: open ({self.open}) must be above closed ({self.closed})")

    def aperture(self, reading: float) -> float:
        """The normalised aperture of a reading, clipped into [0, 1]."""
        value = float(reading)
        if not math.isfinite(value):
            raise InvalidInputError(f"gripper reading is {value}")
        return min(1.0, max(0.0, (value - self.closed) / (self.open - self.closed)))

    def reading(self, aperture: float) -> float:
        """The reading (m) at a normalised aperture in [0, 1]."""
        a = float(aperture)
        if not 0.0 <= a <= 1.0:
            raise InvalidInputError(f"aperture must be in [0, 1], got {a}")
        return self.closed + a * (self.open - self.closed)


def commanded_aperture(axis: str, value: float) -> float:
    """The aperture in [0, 1] a gripper command asks for; :class:`InvalidInputError` outside its domain."""
    v = float(value)
    if not math.isfinite(v):
        raise InvalidInputError(f"{axis} is {v}")
    if axis == SIGNED_AXIS:
        if not -1.0 <= v <= 1.0:
            raise InvalidInputError(f"{axis} {v:.6g} is outside [-1, 1] (+1 open, -1 closed)")
        return (v + 1.0) / 2.0
    if axis == DROID_AXIS:
        if not 0.0 <= v <= 1.0:
            raise InvalidInputError(f"{axis} {v:.6g} is outside [0, 1] (0 open, 1 closed)")
        return 1.0 - v
    raise ConfigError(f"unknown gripper axis {axis!r}; valid: {', '.join(GRIPPER_AXES)}")
