"""The action safety filter: what may reach a simulator or a robot arm, one control step at a time.

The sim bridge applies it before every simulator step, and the robot drivers (WidowX through
Interbotix, Franka through franky) apply the same filter, with the same semantics and the same
counts, so a policy that is refused on the robot is refused the same way in simulation. The
drivers add what only a real arm needs, here too: the workspace box on the target pose
(:class:`WorkspaceBox`), joint limits and the largest joint step (:class:`JointLimits`,
:class:`JointTargetFilter`); arming, the latched e-stop, the command watchdog and the hold during
a verification are :mod:`ladder_ros.core.safety_supervisor`. No rclpy here.

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
* **Joint targets** (a joint-position policy, or the inverse kinematics of an end-effector one)
  are refused whole when a joint leaves its limits or moves further than the arm may in one
  control step from the previous target (a *jump*); the arm then holds the previous target.
* **The workspace box clips**, the one exception to "never clamp": Bridge's own controller clips
  the *target* pose into its workspace bounds, so a policy trained on Bridge data expects it. The
  clipped target is applied and the clip is counted.
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
# Robot drivers only (the simulators have no such failure):
STALE = "stale"  # an action stamped too long ago when it arrived: it answers a moment that has passed
WORKSPACE = "workspace"  # a target pose outside the workspace box: clipped onto it and applied
JOINT_LIMIT = "joint_limit"  # a joint target beyond the arm's limits
JUMP = "jump"  # a joint target further from the previous target than the arm may move in one step
UNREACHABLE = "unreachable"  # no inverse-kinematics solution within the joint limits
WATCHDOG = "watchdog"  # commands stopped while the arm moved: it was stopped and holds
ESTOP = "estop"  # an e-stop: the arm stopped and holds until the stop is released and the arm re-armed
ROBOT_ERROR = "robot_error"  # the arm reported an error (a reflex, a control exception): it holds, disarmed
FUTURE_STAMP = "future_stamp"  # an action stamped after it arrived, beyond the clocks' tolerance
STALL = "stall"  # a joint stopped following its command (an obstacle, a collision): held, disarmed
MOTOR_ERROR = "motor_error"  # a motor reported a hardware error or lost its torque: held, disarmed
GRIPPER_FAULT = "gripper_fault"  # the gripper did not reach its command, or reported an error: held, disarmed
HOLD_REFUSED = "hold_refused"  # the arm's API refused a hold: escalated (another hold, then torque off or stop)
VENDOR_TIMEOUT = "vendor_timeout"  # a vendor call, or the arm's state, missed its deadline: held, disarmed
INTERVENTION_KINDS = (NON_FINITE, MALFORMED, TRANSLATION_LIMIT, ROTATION_LIMIT, GRIPPER_DOMAIN, DUPLICATE,
                      FOREIGN_PUBLISHER, STALE, WORKSPACE, JOINT_LIMIT, JUMP, UNREACHABLE, WATCHDOG, ESTOP,
                      ROBOT_ERROR, FUTURE_STAMP, STALL, MOTOR_ERROR, GRIPPER_FAULT, HOLD_REFUSED, VENDOR_TIMEOUT)


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
    CLIPPED = "clipped"  # applied after the target pose was clipped into the workspace box (counted)
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
        """The offered action (or its clipped target) goes to the arm."""
        return self.verdict is not Verdict.REJECTED


class InterventionCounts:
    """An episode's intervention counts by kind and its applied actions; what every filter shares."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(INTERVENTION_KINDS, 0)
        self.applied = 0

    def reset(self) -> None:
        """A new episode: counts to zero."""
        self.counts = dict.fromkeys(INTERVENTION_KINDS, 0)
        self.applied = 0

    @property
    def interventions(self) -> int:
        return sum(self.counts.values())

    def count(self, kind: str) -> None:
        """Count one intervention of ``kind`` (one of :data:`INTERVENTION_KINDS`)."""
        if kind not in self.counts:
            raise ConfigError(f"unknown intervention kind {kind!r}; valid: {', '.join(INTERVENTION_KINDS)}")
        self.counts[kind] += 1

    def limits_dict(self) -> dict[str, Any]:
        return {}

    def summary(self) -> dict[str, Any]:
        """The episode record's ``safety`` entry."""
        return {"applied": self.applied, "interventions": self.interventions, "counts": dict(self.counts),
                "limits": self.limits_dict()}


class ActionFilter(InterventionCounts):
    """Checks actions against :class:`ActionLimits` and counts every intervention of an episode."""

    def __init__(self, limits: ActionLimits):
        if not isinstance(limits, ActionLimits):
            raise ConfigError(f"limits must be ActionLimits, got {type(limits).__name__}")
        self.limits = limits
        self._gripper = GRIPPER_OPEN
        super().__init__()

    def reset(self) -> None:
        """A new episode: counts to zero, the gripper as a reset leaves it (open)."""
        super().reset()
        self._gripper = GRIPPER_OPEN

    def limits_dict(self) -> dict[str, Any]:
        return self.limits.to_dict()

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
        self.count(kind)
        return SafetyResult(Verdict.REJECTED, self.hold_action(), kind=kind, axis=axis, value=value, limit=limit,
                            reason=reason)


def _finite_vector(name: str, values: Sequence[float], size: int | None = None) -> tuple[float, ...]:
    try:
        vector = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a list of numbers, got {values!r}") from None
    if size is not None and len(vector) != size:
        raise ConfigError(f"{name} must have {size} values, got {len(vector)}")
    if not all(math.isfinite(v) for v in vector):
        raise ConfigError(f"{name} must be finite numbers, got {list(vector)}")
    return vector


@dataclass(frozen=True)
class WorkspaceBox:
    """The box (m, robot base frame) the end-effector *target* may occupy; ``source`` says where it comes from."""

    low: tuple[float, float, float]
    high: tuple[float, float, float]
    source: str = ""

    def __post_init__(self) -> None:
        low = _finite_vector("workspace low", self.low, 3)
        high = _finite_vector("workspace high", self.high, 3)
        for axis, lo, hi in zip("xyz", low, high):
            if not lo < hi:
                raise ConfigError(f"workspace {axis}: low must be below high, got [{lo}, {hi}]")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    def contains(self, position: Sequence[float]) -> bool:
        p = np.asarray(position, dtype=np.float64)
        return bool(np.all(p >= np.array(self.low)) and np.all(p <= np.array(self.high)))

    def clip(self, position: Sequence[float]) -> tuple[np.ndarray, list[str]]:
        """The position clipped into the box and the axes that were clipped (empty: inside)."""
        p = np.asarray(position, dtype=np.float64)
        clipped = np.clip(p, self.low, self.high)
        return clipped, [axis for axis, a, b in zip("xyz", p, clipped) if a != b]

    def to_dict(self) -> dict[str, Any]:
        return {"low": list(self.low), "high": list(self.high)}


@dataclass(frozen=True)
class JointLimits:
    """Each arm joint's range (rad) and the most it may move in one control step (rad), with the source."""

    names: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_step: tuple[float, ...]
    source: str = ""

    def __post_init__(self) -> None:
        names = tuple(self.names)
        if not names or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ConfigError(f"joint limits need distinct joint names, got {list(names)}")
        n = len(names)
        lower = _finite_vector("joint lower limits", self.lower, n)
        upper = _finite_vector("joint upper limits", self.upper, n)
        step = _finite_vector("joint max_step", self.max_step, n)
        for name, lo, hi, st in zip(names, lower, upper, step):
            if not lo < hi:
                raise ConfigError(f"joint {name}: lower limit must be below upper, got [{lo}, {hi}]")
            if not 0.0 < st <= hi - lo:
                raise ConfigError(f"joint {name}: max_step must be in (0, {hi - lo:g}] rad, got {st}")
        for field_name, value in (("names", names), ("lower", lower), ("upper", upper), ("max_step", step)):
            object.__setattr__(self, field_name, value)

    def scaled_steps(self, factor: float) -> "JointLimits":
        """The same limits with every ``max_step`` times ``factor`` (a slower first run)."""
        if not 0.0 < factor <= 1.0:
            raise ConfigError(f"step factor must be in (0, 1], got {factor!r}")
        return JointLimits(self.names, self.lower, self.upper, tuple(s * factor for s in self.max_step), self.source)

    def to_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "lower": list(self.lower), "upper": list(self.upper),
                "max_step": list(self.max_step)}


class JointTargetFilter(InterventionCounts):
    """Checks joint targets against :class:`JointLimits`: reject, never clamp; the arm holds the previous target.

    The same counts as :class:`ActionFilter`, so a joint-position policy's record reads like an
    end-effector one's. ``check`` takes the target and the previous target (the last one applied,
    or the measured position after a hold) and returns the target to send, or the previous one.
    ``counter``: count into another filter's counts instead (the WidowX checks the joints its
    inverse kinematics gives after the action filter passed the action: one action, one set of
    counts; the other filter counts it applied).
    """

    def __init__(self, limits: JointLimits, counter: InterventionCounts | None = None):
        if not isinstance(limits, JointLimits):
            raise ConfigError(f"limits must be JointLimits, got {type(limits).__name__}")
        if counter is not None and not isinstance(counter, InterventionCounts):
            raise ConfigError(f"counter must be InterventionCounts, got {type(counter).__name__}")
        self.limits = limits
        self.counter: InterventionCounts = counter if counter is not None else self
        super().__init__()

    def limits_dict(self) -> dict[str, Any]:
        return self.limits.to_dict()

    def check(self, values: Sequence[float] | np.ndarray, previous: Sequence[float] | np.ndarray) -> SafetyResult:
        limits = self.limits
        hold = np.asarray(previous, dtype=np.float64)
        try:
            target = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            return self.refuse(MALFORMED, f"not a vector of numbers ({exc})", hold)
        if target.shape != (len(limits.names),):
            return self.refuse(MALFORMED, f"a joint target has {len(limits.names)} values, got shape {target.shape}",
                               hold)
        for i, name in enumerate(limits.names):
            if not math.isfinite(target[i]):
                return self.refuse(NON_FINITE, f"{name} is {target[i]}", hold, axis=name, value=float(target[i]))
        for i, name in enumerate(limits.names):
            value = float(target[i])
            if value < limits.lower[i] or value > limits.upper[i]:
                bound = limits.lower[i] if value < limits.lower[i] else limits.upper[i]
                return self.refuse(JOINT_LIMIT, f"{name} {value:.6g} rad is outside [{limits.lower[i]:.6g}, "
                                   f"{limits.upper[i]:.6g}]", hold, axis=name, value=value, limit=bound)
        if hold.shape == target.shape and np.all(np.isfinite(hold)):
            step = np.abs(target - hold)
            worst = int(np.argmax(step / np.asarray(limits.max_step)))
            if step[worst] > limits.max_step[worst]:
                name = limits.names[worst]
                return self.refuse(JUMP, f"{name} would move {step[worst]:.6g} rad in one step, more than "
                                   f"{limits.max_step[worst]:.6g}", hold, axis=name, value=float(step[worst]),
                                   limit=limits.max_step[worst])
        if self.counter is self:
            self.applied += 1
        return SafetyResult(Verdict.APPLIED, target)

    def refuse(self, kind: str, reason: str, hold: np.ndarray, *, axis: str | None = None,
               value: float | None = None, limit: float | None = None) -> SafetyResult:
        """Count an intervention of ``kind``; the arm holds ``hold`` (the previous target)."""
        self.counter.count(kind)
        return SafetyResult(Verdict.REJECTED, np.asarray(hold, dtype=np.float64), kind=kind, axis=axis, value=value,
                            limit=limit, reason=reason)


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
        self._taken_through: int | None = None  # steps up to this one have been executed (None: no step yet)

    def begin(self, step: int) -> None:
        """The step now open (the observation the next action must answer)."""
        self.step, self._pending, self._offered, self._conflicted = step, None, False, False

    def reset(self) -> None:
        self.__init__()

    def offer(self, step: int, action: Any) -> str:
        """``accepted``, ``duplicate`` (a second action for an open or executed step) or ``other_step``."""
        if self._taken_through is not None and step <= self._taken_through:
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
            self._taken_through = self.step if self._taken_through is None else max(self._taken_through, self.step)
        action, self._pending, self._offered = self._pending, None, False
        return action
