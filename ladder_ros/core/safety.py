"""The action safety filter: what may reach a simulator or a robot arm, one control step at a time.

The sim bridge applies it before every simulator step, and the robot drivers' safety filters
(WidowX through Interbotix, Franka through franky) reuse it with the same semantics, so a policy
that is refused on the robot is refused the same way in simulation. No rclpy here.

Rules (docs/safety.md says why):

* **Bounds per control step**, from the embodiment preset (:class:`ActionLimits`): every
  translation axis within ``max_translation_m``, every rotation axis within ``max_rotation_rad``,
  the gripper in its domain (``binary``: exactly -1 or +1; ``continuous``: [-1, 1]).
* **Reject, never clamp.** An action outside its bounds, with a non-finite entry or of the wrong
  shape is refused as a whole and the arm holds still for that step (zero motion, the gripper
  keeps its last applied command). A clamped garbage action would still move the arm at full
  speed in a direction nobody chose; holding still is the safe reading of "in doubt".
* **One action per step.** The first action offered for a step is the step's action; a second one
  for the same step is an error, never a race: if the step has not been applied yet it holds still
  (the two disagree about what to do), otherwise the late one is dropped. Either way it is counted.
* **Every intervention is counted** by kind (:data:`INTERVENTION_KINDS`), and the counts go into
  the episode record.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError

# The 7-D end-effector action every policy publishes and every simulator and driver reads: metres
# in the robot base frame, radians (Euler XYZ), and the gripper command (+1 open, -1 closed).
ACTION_AXES = ("ee_dx", "ee_dy", "ee_dz", "ee_droll", "ee_dpitch", "ee_dyaw", "gripper")
TRANSLATION = slice(0, 3)
ROTATION = slice(3, 6)
GRIPPER = 6
GRIPPER_OPEN = 1.0

# Intervention kinds, the keys of the counts in the episode record.
NON_FINITE = "non_finite"  # NaN or infinity in the action
MALFORMED = "malformed"  # wrong number of values, wrong axes
TRANSLATION_LIMIT = "translation_limit"  # a translation axis beyond max_translation_m
ROTATION_LIMIT = "rotation_limit"  # a rotation axis beyond max_rotation_rad
GRIPPER_DOMAIN = "gripper_domain"  # a gripper command outside its domain
DUPLICATE = "duplicate"  # a second action for a step
FOREIGN_PUBLISHER = "foreign_publisher"  # an action while someone besides the configured policy publishes
INTERVENTION_KINDS = (NON_FINITE, MALFORMED, TRANSLATION_LIMIT, ROTATION_LIMIT, GRIPPER_DOMAIN, DUPLICATE,
                      FOREIGN_PUBLISHER)


class GripperDomain(str, enum.Enum):
    """The gripper commands an embodiment accepts."""

    BINARY = "binary"  # exactly -1 (closed) or +1 (open): Bridge policies binarise (2 * (open > 0.5) - 1)
    CONTINUOUS = "continuous"  # any value in [-1, 1] (a width command)


@dataclass(frozen=True)
class ActionLimits:
    """Per-control-step bounds of the 7-D action; ``source`` cites where the numbers come from."""

    max_translation_m: float
    max_rotation_rad: float
    gripper: GripperDomain
    source: str = ""

    def __post_init__(self) -> None:
        for name, value, ceiling in (("max_translation_m", self.max_translation_m, 1.0),
                                     ("max_rotation_rad", self.max_rotation_rad, math.pi)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= ceiling:
                raise ConfigError(f"action limit {name} must be in (0, {ceiling:g}], got {value!r}")
        if not isinstance(self.gripper, GripperDomain):
            raise ConfigError(f"action limit gripper must be a GripperDomain, got {self.gripper!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"max_translation_m": self.max_translation_m, "max_rotation_rad": self.max_rotation_rad,
                "gripper": self.gripper.value}


class Verdict(str, enum.Enum):
    APPLIED = "applied"
    REJECTED = "rejected"  # the arm held still instead


@dataclass(frozen=True)
class SafetyResult:
    """What the filter did with one offered action and why.

    ``action`` is what goes to the simulator or the arm: the offered action when applied, the
    hold-still action when rejected. ``kind``, ``axis``, ``value`` and ``limit`` say which rule
    refused it (None when applied).
    """

    verdict: Verdict
    action: np.ndarray
    kind: str | None = None
    axis: str | None = None
    value: float | None = None
    limit: float | None = None
    reason: str = ""

    @property
    def applied(self) -> bool:
        return self.verdict is Verdict.APPLIED


class ActionFilter:
    """Checks actions against :class:`ActionLimits` and counts every intervention of an episode."""

    def __init__(self, limits: ActionLimits):
        if not isinstance(limits, ActionLimits):
            raise ConfigError(f"limits must be ActionLimits, got {type(limits).__name__}")
        self.limits = limits
        self.counts: dict[str, int] = {}
        self.applied = 0
        self._gripper = GRIPPER_OPEN
        self.reset()

    def reset(self) -> None:
        """A new episode: counts to zero, the gripper as a reset leaves it (open)."""
        self.counts = dict.fromkeys(INTERVENTION_KINDS, 0)
        self.applied = 0
        self._gripper = GRIPPER_OPEN

    @property
    def interventions(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> dict[str, Any]:
        """The episode record's ``safety`` entry."""
        return {"applied": self.applied, "interventions": self.interventions, "counts": dict(self.counts),
                "limits": self.limits.to_dict()}

    def hold_action(self) -> np.ndarray:
        """Zero motion; the gripper keeps its last applied command."""
        action = np.zeros(len(ACTION_AXES))
        action[GRIPPER] = self._gripper
        return action

    def check(self, values: Sequence[float] | np.ndarray) -> SafetyResult:
        """Apply ``values`` if every rule holds, else refuse it (hold still) naming the rule and the axis."""
        try:
            action = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            return self.refuse(MALFORMED, f"not a vector of numbers ({exc})")
        if action.shape != (len(ACTION_AXES),):
            return self.refuse(MALFORMED, f"an action has {len(ACTION_AXES)} values, got shape {action.shape}")
        limits = self.limits
        for i, axis in enumerate(ACTION_AXES):
            value = float(action[i])
            if not math.isfinite(value):
                return self.refuse(NON_FINITE, f"{axis} is {value}", axis=axis, value=value)
        for i in range(TRANSLATION.start, TRANSLATION.stop):
            if abs(action[i]) > limits.max_translation_m:
                return self.refuse(TRANSLATION_LIMIT, f"{ACTION_AXES[i]} {action[i]:.6g} m is beyond "
                                   f"+-{limits.max_translation_m:g} m per step", axis=ACTION_AXES[i],
                                   value=float(action[i]), limit=limits.max_translation_m)
        for i in range(ROTATION.start, ROTATION.stop):
            if abs(action[i]) > limits.max_rotation_rad:
                return self.refuse(ROTATION_LIMIT, f"{ACTION_AXES[i]} {action[i]:.6g} rad is beyond "
                                   f"+-{limits.max_rotation_rad:g} rad per step", axis=ACTION_AXES[i],
                                   value=float(action[i]), limit=limits.max_rotation_rad)
        gripper = float(action[GRIPPER])
        if limits.gripper is GripperDomain.BINARY and gripper not in (-1.0, 1.0):
            return self.refuse(GRIPPER_DOMAIN, f"gripper {gripper:.6g} is neither -1 (closed) nor +1 (open)",
                               axis="gripper", value=gripper, limit=1.0)
        if limits.gripper is GripperDomain.CONTINUOUS and abs(gripper) > 1.0:
            return self.refuse(GRIPPER_DOMAIN, f"gripper {gripper:.6g} is outside [-1, 1]", axis="gripper",
                               value=gripper, limit=1.0)
        self.applied += 1
        self._gripper = gripper
        return SafetyResult(Verdict.APPLIED, action)

    def refuse(self, kind: str, reason: str, *, axis: str | None = None, value: float | None = None,
               limit: float | None = None) -> SafetyResult:
        """Count an intervention of ``kind`` and return the hold-still result."""
        if kind not in self.counts:
            raise ConfigError(f"unknown intervention kind {kind!r}; valid: {', '.join(INTERVENTION_KINDS)}")
        self.counts[kind] += 1
        return SafetyResult(Verdict.REJECTED, self.hold_action(), kind=kind, axis=axis, value=value, limit=limit,
                            reason=reason)


class StepActionGate:
    """One action per control step: the first one offered is the step's, a second one is an error.

    ``offer`` files an action for a step; ``take`` hands the step's action over when the step is
    executed. A second offer for a step that is still open marks the step conflicted (``take``
    then returns None: hold still); a second offer for a step already taken is late. Both are
    reported as duplicates for the caller to count.
    """

    def __init__(self) -> None:
        self.step: int | None = None
        self._pending: Any = None
        self._offered = False
        self._conflicted = False
        self._taken_through = -1  # steps up to this one have been executed

    def begin(self, step: int) -> None:
        """The step now open (the observation the next action must answer)."""
        self.step, self._pending, self._offered, self._conflicted = step, None, False, False

    def reset(self) -> None:
        self.__init__()

    def offer(self, step: int, action: Any) -> str:
        """``accepted``, ``duplicate`` (a second action for an open or executed step) or ``other_step``."""
        if step <= self._taken_through:
            return DUPLICATE
        if step != self.step:
            return "other_step"
        if self._offered:
            self._pending, self._conflicted = None, True
            return DUPLICATE
        self._pending, self._offered = action, True
        return "accepted"

    @property
    def ready(self) -> bool:
        """An action (or a conflict, which holds still) is in for the open step."""
        return self._offered

    @property
    def conflicted(self) -> bool:
        return self._conflicted

    def take(self) -> Any:
        """The open step's action (None when conflicted); the step is then executed."""
        if self.step is not None:
            self._taken_through = max(self._taken_through, self.step)
        action, self._pending, self._offered = self._pending, None, False
        return action
