"""Triggers: when an attempt at the current subgoal ends (Section 4, Appendix B).

* :class:`PeriodicTrigger` fires every fixed number of steps.
* :class:`GripperTrigger` (the proprioceptive trigger) reads the normalised gripper aperture
  (0 closed, 1 open): an attempt ends when the gripper opens past a threshold after a close of at
  least ``min_close_steps`` steps (on Franka also with a lift of ``min_lift_m`` during the close),
  not within ``cooldown_steps`` of the previous end; optionally an attempt also ends after
  ``release_timeout_steps`` steps without a release.

Conventions, fixed here once and tested with hand-made traces:

* a step is *closed* when ``aperture <= open_threshold`` and *open* when it is above
  ("opens past 0.5"); a release is the first open step after a run of closed steps;
* the lift is the highest end-effector z during the closed run minus z at its first closed step;
* cooldown: after an attempt ends at step ``t``, releases at steps ``t+1 .. t+cooldown`` are
  suppressed (and their close run is consumed);
* the release timeout counts from the previous attempt end, or from :meth:`GripperTrigger.restart`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.presets import GripperTriggerParams

# Grippers report a little beyond their calibrated travel; more than this is a sensor or calibration fault.
APERTURE_TOLERANCE = 0.05


def normalised_aperture(aperture: float) -> float:
    """``aperture`` clamped to [0, 1]; NaN or far out of range raises :class:`InvalidInputError`."""
    try:
        value = float(aperture)
    except (TypeError, ValueError):
        raise InvalidInputError(f"gripper aperture must be a number, got {aperture!r}") from None
    if math.isnan(value) or not (-APERTURE_TOLERANCE <= value <= 1.0 + APERTURE_TOLERANCE):
        raise InvalidInputError(f"gripper aperture must be in [0, 1], got {aperture!r}")
    return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class AttemptEnd:
    """An attempt ended at ``step``: by a ``release`` (with its close length and lift) or a ``timeout``."""

    step: int
    reason: str
    close_steps: int = 0
    lift_m: float | None = None

    def to_dict(self) -> dict:
        data = {"reason": self.reason, "close_steps": self.close_steps}
        if self.lift_m is not None:
            data["lift_m"] = round(self.lift_m, 6)
        return data


@dataclass(frozen=True)
class SuppressedRelease:
    """A release that met the close rule but fell inside the cooldown."""

    step: int
    close_steps: int


class PeriodicTrigger:
    """Fires every ``interval_steps`` steps after the last firing (or :meth:`restart`)."""

    def __init__(self, interval_steps: int):
        if not isinstance(interval_steps, int) or interval_steps <= 0:
            raise InvalidInputError(f"interval_steps must be a positive integer, got {interval_steps!r}")
        self.interval_steps = interval_steps
        self.anchor_step = 0

    def restart(self, step: int) -> None:
        self.anchor_step = step

    def update(self, step: int) -> AttemptEnd | None:
        if step - self.anchor_step >= self.interval_steps:
            self.anchor_step = step
            return AttemptEnd(step=step, reason="periodic")
        return None


class GripperTrigger:
    """The proprioceptive trigger of Appendix B, one instance per episode."""

    def __init__(self, params: GripperTriggerParams):
        self.params = params
        self.closed_run = 0
        self._close_start_z: float | None = None
        self._max_lift = 0.0
        self.last_end_step: int | None = None
        self.anchor_step = 0
        self.last_suppressed: SuppressedRelease | None = None

    def restart(self, step: int) -> None:
        """Re-anchor the release timeout (e.g. when the subgoal changed for another reason)."""
        self.anchor_step = step

    def _lift_ok(self) -> bool:
        return self.params.min_lift_m is None or self._max_lift >= self.params.min_lift_m - 1e-12

    def update(self, step: int, aperture: float, ee_z: float | None = None) -> AttemptEnd | None:
        """Feed the aperture (and, when a lift is required, the end-effector z in metres) at ``step``."""
        value = normalised_aperture(aperture)
        z = None
        if self.params.min_lift_m is not None:
            if ee_z is None or not math.isfinite(float(ee_z)):
                raise InvalidInputError(f"this trigger needs the end-effector height in metres, got {ee_z!r}")
            z = float(ee_z)
        self.last_suppressed = None
        ended: AttemptEnd | None = None
        if value <= self.params.open_threshold:
            if self.closed_run == 0:
                self._close_start_z = z
                self._max_lift = 0.0
            self.closed_run += 1
            if z is not None and self._close_start_z is not None:
                self._max_lift = max(self._max_lift, z - self._close_start_z)
        else:
            if self.closed_run >= self.params.min_close_steps and self._lift_ok():
                in_cooldown = (self.last_end_step is not None
                               and step - self.last_end_step <= self.params.cooldown_steps)
                if in_cooldown:
                    self.last_suppressed = SuppressedRelease(step=step, close_steps=self.closed_run)
                else:
                    lift = self._max_lift if self.params.min_lift_m is not None else None
                    ended = AttemptEnd(step=step, reason="release", close_steps=self.closed_run, lift_m=lift)
            self.closed_run = 0
            self._close_start_z = None
            self._max_lift = 0.0
        timeout = self.params.release_timeout_steps
        if ended is None and timeout is not None:
            if step - self.anchor_step >= timeout:
                ended = AttemptEnd(step=step, reason="timeout", close_steps=self.closed_run)
        if ended is not None:
            self.last_end_step = step
            self.anchor_step = step
        return ended


@dataclass(frozen=True)
class GripperEvents:
    """What the gripper says at one step, for every variant at once.

    ``attempt_end`` comes from the proprioceptive trigger (cooldown, optional release timeout);
    ``release`` from the verifier's release detector, which is the same rule without the cooldown
    (Appendix B). ``is_open`` is the aperture above the threshold (the privileged verifier's
    'gripper open').
    """

    step: int
    aperture: float
    is_open: bool
    attempt_end: AttemptEnd | None = None
    release: AttemptEnd | None = None
    suppressed: SuppressedRelease | None = None

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "aperture": self.aperture,
            "is_open": self.is_open,
            "attempt_end": None if self.attempt_end is None else self.attempt_end.to_dict(),
            "release": None if self.release is None else self.release.to_dict(),
            "suppressed_close_steps": None if self.suppressed is None else self.suppressed.close_steps,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "GripperEvents":
        step = int(data["step"])

        def end(d: dict | None) -> AttemptEnd | None:
            if d is None:
                return None
            return AttemptEnd(step=step, reason=str(d["reason"]), close_steps=int(d.get("close_steps", 0)),
                              lift_m=None if d.get("lift_m") is None else float(d["lift_m"]))

        suppressed = data.get("suppressed_close_steps")
        return cls(step=step, aperture=float(data["aperture"]), is_open=bool(data["is_open"]),
                   attempt_end=end(data.get("attempt_end")), release=end(data.get("release")),
                   suppressed=None if suppressed is None else SuppressedRelease(step=step, close_steps=int(suppressed)))


class GripperMonitor:
    """Runs the trigger and the release detector of one preset over the same aperture stream."""

    def __init__(self, trigger: GripperTriggerParams, release_detector: GripperTriggerParams):
        self.trigger = GripperTrigger(trigger)
        self.detector = GripperTrigger(release_detector)
        self.last_step = -1

    @classmethod
    def for_preset(cls, preset) -> "GripperMonitor":
        return cls(preset.trigger, preset.release_detector)

    def update(self, step: int, aperture: float, ee_z: float | None = None) -> GripperEvents:
        """Feed one step; invalid input raises before either detector changes."""
        if step <= self.last_step:
            raise InvalidInputError(f"steps must increase: got {step} after {self.last_step}")
        value = normalised_aperture(aperture)
        if self.trigger.params.min_lift_m is not None and (ee_z is None or not math.isfinite(float(ee_z))):
            raise InvalidInputError(f"this trigger needs the end-effector height in metres, got {ee_z!r}")
        self.last_step = step
        attempt_end = self.trigger.update(step, value, ee_z)
        release = self.detector.update(step, value, ee_z)
        return GripperEvents(step=step, aperture=value, is_open=value > self.trigger.params.open_threshold,
                             attempt_end=attempt_end, release=release, suppressed=self.trigger.last_suppressed)
