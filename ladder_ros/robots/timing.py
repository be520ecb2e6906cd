"""Control timing as data: the period between the commands a driver sends, and its jitter.

A driver records the monotonic time of every command it applies; the statistics go on
``/diagnostics`` and into the benchmarks. Jitter is the deviation of each period from the nominal
one (the preset's control period), so a loop that runs steadily slow shows up as well as one that
stutters.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ladder_ros.core.errors import ConfigError


class ControlTiming:
    """The last ``window`` periods between ticks, against the nominal period (s)."""

    def __init__(self, nominal_period_s: float, window: int = 200):
        if not nominal_period_s > 0:
            raise ConfigError(f"nominal period must be positive, got {nominal_period_s!r}")
        self.nominal = float(nominal_period_s)
        self._periods: deque[float] = deque(maxlen=window)
        self._last: float | None = None
        self.ticks = 0

    def tick(self, now: float) -> None:
        if self._last is not None:
            self._periods.append(now - self._last)
        self._last = now
        self.ticks += 1

    def gap(self) -> None:
        """The stream stopped on purpose (a hold): the next tick starts a new run of periods."""
        self._last = None

    def stats(self) -> dict[str, float | int | None]:
        """Period mean, p50, p99 and max (ms); jitter p50, p99 and max (ms, |period - nominal|)."""
        out: dict[str, float | int | None] = {"ticks": self.ticks, "nominal_period_ms": self.nominal * 1000.0}
        if not self._periods:
            return {**out, **dict.fromkeys(("period_mean_ms", "period_p50_ms", "period_p99_ms", "period_max_ms",
                                            "jitter_p50_ms", "jitter_p99_ms", "jitter_max_ms"))}
        periods = np.array(self._periods) * 1000.0
        jitter = np.abs(periods - self.nominal * 1000.0)
        return {**out, "period_mean_ms": float(periods.mean()), "period_p50_ms": float(np.percentile(periods, 50)),
                "period_p99_ms": float(np.percentile(periods, 99)), "period_max_ms": float(periods.max()),
                "jitter_p50_ms": float(np.percentile(jitter, 50)), "jitter_p99_ms": float(np.percentile(jitter, 99)),
                "jitter_max_ms": float(jitter.max())}
