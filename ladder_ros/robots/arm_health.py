"""What a driver notices from the arm's own readings: a joint that stopped tracking, a gripper that did not
arrive, an arm at rest.

* :class:`TrackingMonitor` predicts where each joint of a Dynamixel arm should be, from the goals
  the driver sent and the motion profile it wrote and read back (:mod:`ladder_ros.robots.dynamixel`:
  the motor runs the same trapezoid), and reports a joint whose measured position stays further
  than ``tolerance_rad`` from its prediction for ``readings`` readings in a row: it is blocked (an
  obstacle, a collision), faulted, or has no torque. A reading is compared with the prediction at the
  moment it was taken, from the moves in force then (the last ``HISTORY`` commands are kept): joint
  states that arrive late on a loaded machine must not be held against the goals sent since. A
  goal may also reach the motors late (the vendor's command callback runs on a loaded machine): with
  ``latency_s`` a joint is off only when it is further than the tolerance from every place its
  profile put it over the last ``latency_s`` before the reading, so a joint running its moves up to
  that late still tracks, and one that stopped is caught that much later. A motor that faults turns
  its torque off and then stops following its goals, so this also catches motor errors between
  register polls, as soon as the arm is asked to move.
* :class:`EffortStallDetector` notices a blocked joint fast, from what its motor says: a joint whose
  effort (xs_sdk's present current, :data:`ladder_ros.robots.dynamixel.BLOCKED_EFFORT`) has stayed at or above
  its ``saturated`` level while it lagged its goal by more than ``lag_rad`` and did not move towards it, for
  ``confirm_s`` by the readings' stamps. No one of these alone is a stall: a fast free move draws current
  but moves towards its goal, a goal that reaches the motors late leaves the joint behind it but drawing little,
  a joint holding the arm against gravity draws current but sits at its goal. The tracking rule above stays as
  the backstop (a joint without a current sensor, a motor without torque). The gripper is no arm joint here: it
  runs in PWM mode and holds an object at its full PWM by design (:class:`GripperMonitor` judges it).
* :class:`GripperMonitor` checks that a gripper command had its effect within ``timeout_s``:
  opening reaches the open finger position; closing moves the fingers towards closed (an object
  may stop them short of the limit: that is a grasp, not a fault) or finds them closed already.
* :class:`RestDetector` says when the arm is at rest: no joint moved faster than ``speed_rad_s``
  over the last ``window_s`` of readings.

No rclpy here; times are monotonic seconds, passed in.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots.dynamixel import ProfileRegisters, TimeProfile


# A joint moving towards its goal faster than this is not stalled, whatever its current: two steps of a Dynamixel's
# velocity reading (Present_Velocity(128) counts 0.229 rpm = 0.024 rad/s, e-manual) (project choice).
APPROACH_RAD_S = 0.05
LATENCY_STEP_S = 0.01  # a late command's window is sampled this finely: 0.03 rad apart at 3.14 rad/s (project choice)
HISTORY = 32  # commands whose moves are kept to judge late readings: 6.4 s at 5 Hz, 2.1 s at 15 Hz (project choice)


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _not_negative(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class TrackingFault:
    joint: str
    error_rad: float
    measured: float
    predicted: float
    late_s: float = 0.0  # the command latency allowed: ``error_rad`` is from the nearest place over that window

    def describe(self) -> str:
        late = f" at any moment of the last {self.late_s:g} s" if self.late_s else ""
        return (f"{self.joint} stopped following its command: at {self.measured:.3f} rad, "
                f"{self.error_rad:.3f} rad from where its profile put it{late} (now {self.predicted:.3f} rad)")


class TrackingMonitor:
    """Predicts each joint from the goals sent and the profile in force; reports a joint that falls away from it."""

    def __init__(self, names: Sequence[str], max_velocity: Sequence[float], tolerance_rad: float, readings: int,
                 latency_s: float = 0.0):
        self.names = tuple(names)
        if len(max_velocity) != len(self.names):
            raise ConfigError(f"{len(max_velocity)} velocity limits for {len(self.names)} joints")
        self.max_velocity = tuple(_positive("a joint velocity limit", v) for v in max_velocity)
        self.tolerance = _positive("tracking tolerance_rad", tolerance_rad)
        self.readings = _count("tracking readings", readings)
        self.latency = _not_negative("tracking latency_s", latency_s)
        self.profile: ProfileRegisters | None = None
        self._history: deque[tuple[float, list[TimeProfile]]] = deque(maxlen=HISTORY)  # (since, moves), oldest first
        self._strikes = [0] * len(self.names)

    def start(self, measured: Sequence[float], velocities: Sequence[float] | None, now: float,
              profile: ProfileRegisters) -> None:
        """Start predicting from the measured joints, with the profile the motors now hold (verified)."""
        q = [float(qi) for qi in measured]
        v = [0.0] * len(q) if velocities is None else [float(vi) for vi in velocities]
        self.profile = profile
        self._history.clear()
        self._history.append((now, [TimeProfile(now, qi, vi, qi, ProfileRegisters(0, 0), vm)
                                    for qi, vi, vm in zip(q, v, self.max_velocity)]))
        self._strikes = [0] * len(self.names)

    def stop(self) -> None:
        """Stop predicting (torque off, a reboot: the motors do not follow goals until started again)."""
        self._history.clear()  # the strikes start again with the next start()

    @property
    def _moves(self) -> list[TimeProfile] | None:
        """The moves the last command started (None when not predicting)."""
        return self._history[-1][1] if self._history else None

    @property
    def active(self) -> bool:
        return bool(self._history)

    def predicted(self, now: float) -> np.ndarray | None:
        """Where the joints are at ``now`` by the moves in force then; None when not predicting, or when
        ``now`` is older than every move kept (a reading that cannot be judged)."""
        moves = next((m for since, m in reversed(self._history) if since <= now), None)
        if moves is None:
            return None
        return np.array([m.position(now) for m in moves])

    def settles_at(self) -> float | None:
        """When (monotonic s) the last commanded moves end, by the profile; None when not predicting."""
        if self._moves is None:
            return None
        return max(m.end_time for m in self._moves)

    def goals(self, at: float) -> np.ndarray | None:
        """The goals in force at ``at`` (the last command sent by then); None when not predicting, or when ``at``
        is older than every command kept."""
        moves = next((m for since, m in reversed(self._history) if since <= at), None)
        return None if moves is None else np.array([m.q1 for m in moves])

    def commanded(self, goals: Sequence[float], now: float) -> None:
        """A goal for every joint went to the motors at ``now``: each starts a new move from its predicted state."""
        if self._moves is None or self.profile is None:
            return
        moves = []
        for move, goal, vmax in zip(self._moves, goals, self.max_velocity):
            q, v = move.state(now)
            moves.append(TimeProfile(now, q, v, float(goal), self.profile, vmax))
        self._history.append((now, moves))

    def check(self, measured: Sequence[float], at: float) -> TrackingFault | None:
        """Compare a reading taken at ``at`` with the prediction; a fault once a joint is off for enough readings."""
        predicted = self.predicted(at)
        if predicted is None:
            return None
        q = [float(qi) for qi in measured]  # a missing reading (None) is an error, never a NaN that passes
        errors = [abs(qi - float(pi)) for qi, pi in zip(q, predicted)]
        if max(errors) > self.tolerance:  # only then can the window of a late command change a verdict
            self._nearest_in_window(q, at, errors)
        worst: TrackingFault | None = None
        for i, name in enumerate(self.names):
            self._strikes[i] = self._strikes[i] + 1 if errors[i] > self.tolerance else 0
            if self._strikes[i] >= self.readings and (worst is None or errors[i] > worst.error_rad):
                worst = TrackingFault(name, errors[i], q[i], float(predicted[i]), self.latency)
        return worst

    def _nearest_in_window(self, q: list[float], at: float, errors: list[float]) -> None:
        """Lower each joint's error to its distance from the nearest place its profile put it over the
        ``latency_s`` before ``at``, sampled every ``LATENCY_STEP_S`` or finer (moments older than every
        move kept are skipped)."""
        steps = math.ceil(self.latency / LATENCY_STEP_S)  # none without a latency
        for k in range(1, steps + 1):
            earlier = self.predicted(at - self.latency * k / steps)
            if earlier is None:
                return
            for i, qi in enumerate(q):
                errors[i] = min(errors[i], abs(qi - float(earlier[i])))


@dataclass(frozen=True)
class EffortStall:
    """A joint that pushed at its motor's limit, behind its goal and not moving towards it, for ``held_s``."""

    joint: str
    effort: float  # the joint's effort at the last reading (xs_sdk's units: mA, or load x 2.69 on an XL430)
    saturated: float  # the level it stayed at or above
    measured: float
    goal: float
    held_s: float  # from the first reading of the run to the last, by their stamps

    @property
    def error_rad(self) -> float:
        return abs(self.goal - self.measured)

    def describe(self) -> str:
        return (f"{self.joint} stopped following its command: its motor pushed at its limit (effort "
                f"{self.effort:.0f}, saturated at {self.saturated:.0f}) for {self.held_s:.2f} s at "
                f"{self.measured:.3f} rad, {self.error_rad:.3f} rad from its goal and not moving towards it: "
                "blocked")


class EffortStallDetector:
    """A joint at its current limit, lagging its goal and not approaching it for ``confirm_s``: a stall (module
    docstring). ``saturated``: per joint, the effort (magnitude) at or above which its motor pushes at its limit."""

    def __init__(self, names: Sequence[str], saturated: Sequence[float], lag_rad: float, confirm_s: float,
                 approach_rad_s: float = APPROACH_RAD_S):
        self.names = tuple(names)
        if len(saturated) != len(self.names):
            raise ConfigError(f"{len(saturated)} saturated efforts for {len(self.names)} joints")
        self.saturated = tuple(_positive("a saturated effort", v) for v in saturated)
        self.lag = _positive("stall lag_rad", lag_rad)
        self.confirm = _positive("stall confirm_s", confirm_s)
        self.approach = _not_negative("stall approach_rad_s", approach_rad_s)
        self._since: list[float | None] = [None] * len(self.names)
        self._last: tuple[float, np.ndarray] | None = None  # the last reading judged: (stamp, joints)

    def reset(self) -> None:
        """Forget every run (after a fault, a stop of the predictions, a recovery)."""
        self._since = [None] * len(self.names)
        self._last = None

    def check(self, measured: Sequence[float], velocities: Sequence[float] | None, efforts: Sequence[float] | None,
              goals: Sequence[float] | None, at: float) -> EffortStall | None:
        """Judge one reading stamped ``at`` against the goals in force then; a stall once a joint's run has lasted
        ``confirm_s``. A reading no newer than the last one judged changes nothing; one without efforts or goals
        (nothing commanded, a motor model without the field) ends every run."""
        if self._last is not None and at <= self._last[0]:
            return None
        q = np.array([float(v) for v in measured])  # a missing value is an error, never a NaN that passes
        previous, self._last = self._last, (at, q)
        if efforts is None or goals is None or len(efforts) != len(self.names):
            self._since = [None] * len(self.names)
            return None
        if velocities is not None:
            v = np.array([float(x) for x in velocities])
        elif previous is not None:
            v = (q - previous[1]) / (at - previous[0])
        else:
            v = None  # the first reading: whether the joints approach their goals is not known yet
        worst: EffortStall | None = None
        for i, name in enumerate(self.names):
            goal, effort = float(goals[i]), float(efforts[i])
            behind = goal - q[i]
            approaching = v is None or float(v[i]) * math.copysign(1.0, behind) > self.approach
            if abs(effort) < self.saturated[i] or abs(behind) <= self.lag or approaching:
                self._since[i] = None
                continue
            since = self._since[i] = at if self._since[i] is None else self._since[i]
            if at - since >= self.confirm:
                stall = EffortStall(name, effort, self.saturated[i], float(q[i]), goal, at - since)
                if worst is None or abs(effort) / self.saturated[i] > abs(worst.effort) / worst.saturated:
                    worst = stall
        return worst


class GripperMonitor:
    """Checks each gripper command against the finger position ``timeout_s`` later (module docstring)."""

    def __init__(self, open_m: float, closed_m: float, timeout_s: float, tolerance_m: float = 0.003,
                 moved_m: float = 0.002):
        if not open_m > closed_m:
            raise ConfigError(f"gripper open position ({open_m}) must be above the closed one ({closed_m})")
        self.open_m, self.closed_m = float(open_m), float(closed_m)
        self.timeout = _positive("gripper timeout_s", timeout_s)
        self.tolerance = _positive("gripper tolerance_m", tolerance_m)
        self.moved = _positive("gripper moved_m", moved_m)
        self._pending: tuple[bool, float, float] | None = None  # (open, finger at the command, when)

    def commanded(self, open_: bool, finger_m: float, now: float) -> None:
        self._pending = (bool(open_), float(finger_m), now)

    def cancel(self) -> None:
        self._pending = None

    def arrived(self, open_: bool, start_m: float, finger_m: float) -> bool:
        if open_:
            return finger_m >= self.open_m - self.tolerance
        return finger_m <= self.closed_m + self.tolerance or finger_m <= start_m - self.moved

    def check(self, finger_m: float, now: float) -> str | None:
        """None while the command is on its way or done; the reason once it is overdue (reported once)."""
        if self._pending is None:
            return None
        open_, start, since = self._pending
        if self.arrived(open_, start, finger_m):
            self._pending = None
            return None
        if now - since < self.timeout:
            return None
        self._pending = None
        what = "open" if open_ else "close"
        return (f"the gripper did not {what} within {self.timeout:g} s: the left finger is at {finger_m:.4f} m "
                f"(it was at {start:.4f} m when commanded)")


class RestDetector:
    """At rest once no joint has moved faster than ``speed_rad_s`` over the last ``window_s`` of readings.

    Judged by positions, not by reported velocities: a motor's velocity reading is quantised (a
    Dynamixel reports steps of 0.024 rad/s) and a simulator's may carry an offset while its
    positions stand still; positions over a window long enough to average out one encoder tick are
    what "the arm is not moving" means.
    """

    def __init__(self, speed_rad_s: float, window_s: float):
        self.speed = _positive("rest speed_rad_s", speed_rad_s)
        self.window = _positive("rest window_s", window_s)
        self._readings: list[tuple[float, np.ndarray]] = []
        self._at_rest = False

    def reset(self) -> None:
        self._readings = []
        self._at_rest = False

    def update(self, joints: Sequence[float], now: float) -> bool:
        q = np.asarray(joints, dtype=np.float64)
        self._readings.append((now, q))
        while len(self._readings) > 1 and now - self._readings[1][0] >= self.window:
            self._readings.pop(0)  # keep one reading at least a window old
        first_t, first_q = self._readings[0]
        span = now - first_t
        self._at_rest = span >= self.window and float(np.max(np.abs(q - first_q))) < self.speed * span
        return self._at_rest

    @property
    def at_rest(self) -> bool:
        return self._at_rest
