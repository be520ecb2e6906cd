"""Which action a wall-clock driver lets in: judged by its stamp and by when it arrived, together.

A robot driver gets a stream of actions on ``policy/action``, each stamped by the policy with the
moment it answers. Before an action reaches the safety filter it must be *admitted*:

* **not stale**: stamped at most ``max_age_s`` before it arrived (a late action answers a moment
  that has passed);
* **not from the future**: stamped at most ``future_tolerance_s`` after it arrived (clocks of two
  machines disagree by a little; an action stamped further ahead is a broken clock or a burst that
  would get round the one-per-period rule, since its "age" would be negative);
* **one per control period**: its stamp at least half a period after the last admitted action's
  stamp *and* its arrival at least half a period after that action's arrival. Stamps tell apart
  actions that the transport delivers bunched together; arrivals make sure the arm never gets two
  targets inside one period whatever the stamps say (a burst of actions stamped a period apart
  but arriving together applies one, not all). Half a period leaves room for jitter.

Refused actions leave the marks of the last admitted one untouched. Times are nanoseconds of the
node's clock (stamps and arrivals on the same clock). No rclpy here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import DUPLICATE, FUTURE_STAMP, STALE


@dataclass(frozen=True)
class AdmissionConfig:
    """``period_s``: the control period; ``max_age_s``: the oldest stamp let in; ``future_tolerance_s``: the newest."""

    period_s: float
    max_age_s: float
    future_tolerance_s: float

    def __post_init__(self) -> None:
        for name in ("period_s", "max_age_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ConfigError(f"admission {name} must be a positive number of seconds, got {value!r}")
        value = self.future_tolerance_s
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"admission future_tolerance_s must be a number of seconds >= 0, got {value!r}")


@dataclass(frozen=True)
class Admission:
    """The verdict on one action: ``kind`` is None when admitted, else the intervention kind, with the reason."""

    kind: str | None
    reason: str = ""
    value: float | None = None
    limit: float | None = None

    @property
    def admitted(self) -> bool:
        return self.kind is None


class ActionAdmission:
    """Judges each arriving action (see the module docstring); :meth:`reset` forgets the last one."""

    def __init__(self, config: AdmissionConfig):
        if not isinstance(config, AdmissionConfig):
            raise ConfigError(f"config must be an AdmissionConfig, got {type(config).__name__}")
        self.config = config
        self.last_stamp_ns: int | None = None
        self.last_arrival_ns: int | None = None

    def reset(self) -> None:
        """Start afresh (a new episode): the next action is judged by its own age only."""
        self.last_stamp_ns = None
        self.last_arrival_ns = None

    def judge(self, stamp_ns: int, arrival_ns: int) -> Admission:
        config = self.config
        age_s = (arrival_ns - stamp_ns) / 1e9
        if age_s > config.max_age_s:
            return Admission(STALE, f"an action stamped {age_s:.3f} s before it arrived (max_action_age_s "
                                    f"{config.max_age_s:g}): it answers a moment that has passed", age_s,
                             config.max_age_s)
        if -age_s > config.future_tolerance_s:
            return Admission(FUTURE_STAMP, f"an action stamped {-age_s:.3f} s after it arrived (future_tolerance_s "
                                           f"{config.future_tolerance_s:g}): its clock is ahead, or it is one of a "
                                           "burst stamped ahead", -age_s, config.future_tolerance_s)
        half_ns = 0.5e9 * config.period_s
        if self.last_stamp_ns is not None and stamp_ns - self.last_stamp_ns < half_ns:
            gap_ms = (stamp_ns - self.last_stamp_ns) / 1e6
            return Admission(DUPLICATE, f"an action stamped {gap_ms:.1f} ms after the last one applied: one action "
                                        f"per control period ({1000 * config.period_s:.0f} ms)", gap_ms / 1000.0,
                             config.period_s / 2)
        if self.last_arrival_ns is not None and arrival_ns - self.last_arrival_ns < half_ns:
            gap_ms = (arrival_ns - self.last_arrival_ns) / 1e6
            return Admission(DUPLICATE, f"an action arrived {gap_ms:.1f} ms after the last one applied: one action "
                                        f"per control period ({1000 * config.period_s:.0f} ms)", gap_ms / 1000.0,
                             config.period_s / 2)
        self.last_stamp_ns = stamp_ns
        self.last_arrival_ns = arrival_ns
        return Admission(None)
