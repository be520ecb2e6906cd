"""Which action a wall-clock driver applies, and when: judged by its stamp and by when it arrived, together.

A robot driver gets a stream of actions on ``policy/action``, each stamped by the policy with the
moment it answers. Before an action reaches the safety filter it must be *admitted*:

* **not stale**: stamped at most ``max_age_s`` before it arrived (a late action answers a moment
  that has passed);
* **not from the future**: stamped at most ``future_tolerance_s`` after it arrived (two machines'
  clocks disagree by a little; an action stamped further ahead is a broken clock, or one of a burst
  stamped ahead that would get round the one-per-period rule, its "age" being negative);
* **a new control step**: stamped at least half a period after the last applied action's stamp
  (two actions for one step are a duplicate, however they travelled);
* **at most one per control period, by arrival**: an action that arrives sooner than
  ``spacing`` (3/4 of a period) after the last applied one is not dropped but *waits* until then, and
  a newer one replaces it while it waits (the replaced one is counted as a duplicate). Jitter in
  delivery, or a callback the executor runs late, then costs a little delay instead of an action,
  and a burst of actions never moves the arm more than once per period: the newest of the burst is
  applied, one period after the last.

The marks move only when an action is applied (:meth:`ActionAdmission.applied`). Times are
nanoseconds of the node's clock (stamps and arrivals on the same clock). No rclpy here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import DUPLICATE, FUTURE_STAMP, STALE

SPACING_PERIODS = 0.75  # the least time between two applied actions, in control periods


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

    @property
    def spacing_ns(self) -> int:
        return int(SPACING_PERIODS * self.period_s * 1e9)


@dataclass(frozen=True)
class Admission:
    """The verdict on one action: ``kind`` None when admitted (``due_ns``: not before then), else why not."""

    kind: str | None
    reason: str = ""
    value: float | None = None
    limit: float | None = None
    due_ns: int = 0

    @property
    def admitted(self) -> bool:
        return self.kind is None


@dataclass
class _Waiting:
    item: Any
    stamp_ns: int
    due_ns: int


class ActionAdmission:
    """Judges each arriving action and holds one that came too soon (module docstring)."""

    def __init__(self, config: AdmissionConfig):
        if not isinstance(config, AdmissionConfig):
            raise ConfigError(f"config must be an AdmissionConfig, got {type(config).__name__}")
        self.config = config
        self.last_stamp_ns: int | None = None
        self.last_applied_ns: int | None = None
        self._waiting: _Waiting | None = None

    def reset(self) -> None:
        """Start afresh (a new episode): the next action is judged by its own stamp only."""
        self.last_stamp_ns = None
        self.last_applied_ns = None
        self._waiting = None

    def judge(self, stamp_ns: int, arrival_ns: int) -> Admission:
        """Whether an action that arrived at ``arrival_ns`` may be applied, and from when."""
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
        due = 0 if self.last_applied_ns is None else self.last_applied_ns + config.spacing_ns
        return Admission(None, due_ns=due if due > arrival_ns else 0)

    def wait(self, item: Any, stamp_ns: int, due_ns: int) -> Admission | None:
        """Hold an admitted action until ``due_ns``; the verdict on the one it replaces (a duplicate), if any."""
        replaced = self._waiting
        self._waiting = _Waiting(item, stamp_ns, due_ns)
        if replaced is None:
            return None
        gap_ms = (stamp_ns - replaced.stamp_ns) / 1e6
        return Admission(DUPLICATE, f"an action waiting for its period was replaced by a newer one (stamped "
                                    f"{gap_ms:.1f} ms later) before it was applied: one action per control period",
                         gap_ms / 1000.0, self.config.period_s * SPACING_PERIODS)

    def due(self, now_ns: int) -> tuple[Any, int] | None:
        """The waiting action and its stamp once its time has come (then no longer waiting), else None."""
        waiting = self._waiting
        if waiting is None or now_ns < waiting.due_ns:
            return None
        self._waiting = None
        return waiting.item, waiting.stamp_ns

    @property
    def waiting(self) -> bool:
        return self._waiting is not None

    def applied(self, stamp_ns: int, now_ns: int) -> None:
        """An action with this stamp was applied at ``now_ns``: the marks the next ones are judged by."""
        self.last_stamp_ns = stamp_ns
        self.last_applied_ns = now_ns
