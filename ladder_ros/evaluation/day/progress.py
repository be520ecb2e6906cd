"""The day's progress on the terminal and its time budget: both from the mean time of the episodes so far.

The mean counts every episode that finished on this folder (an earlier run's too, so a resumed day has an
estimate from its first line), from the moment the day asked for the episode to the moment its result was in:
what the next one will take, arming and homing included. Pure: no rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def clock(seconds: float | None) -> str:
    """``h:mm:ss`` (``-`` for no value)."""
    if seconds is None:
        return "-"
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class DayProgress:
    """Episodes done of the plan, successes so far, and how long the rest will take."""

    total: int
    done: int = 0
    successes: int = 0
    scored: int = 0
    episode_s: list[float] = field(default_factory=list)

    def add(self, wall_s: float, success: bool, scored: bool) -> None:
        self.done += 1
        self.episode_s.append(float(wall_s))
        if scored:
            self.scored += 1
            self.successes += int(bool(success))

    @property
    def mean_episode_s(self) -> float | None:
        return sum(self.episode_s) / len(self.episode_s) if self.episode_s else None

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    def eta_s(self) -> float | None:
        mean = self.mean_episode_s
        return None if mean is None else mean * self.remaining

    def line(self, elapsed_s: float) -> str:
        """``[ 3/12] 2/3 successes · elapsed 0:01:23 · ETA 0:04:10 (27.6 s an episode)``."""
        width = len(str(self.total))
        mean = self.mean_episode_s
        success = f"{self.successes}/{self.scored} successes" if self.scored or not self.done else "unscored"
        return (f"[{self.done:>{width}}/{self.total}] {success} · elapsed {clock(elapsed_s)} · "
                f"ETA {clock(self.eta_s())}" + (f" ({mean:.1f} s an episode)" if mean is not None else ""))


@dataclass(frozen=True)
class TimeBudget:
    """Stop between episodes once the next one would not fit: elapsed plus the mean episode time past the budget.

    The budget counts from this run's start (graph start-up included); before any episode has finished there
    is no mean, and the first episode runs.
    """

    budget_s: float | None

    def __post_init__(self) -> None:
        if self.budget_s is not None and not self.budget_s > 0:
            raise ValueError(f"a time budget must be > 0 seconds, got {self.budget_s}")

    def next_fits(self, elapsed_s: float, mean_episode_s: float | None) -> bool:
        if self.budget_s is None or mean_episode_s is None:
            return True
        return elapsed_s + mean_episode_s <= self.budget_s

    def stop_line(self, elapsed_s: float, mean_episode_s: float | None, remaining: int) -> str:
        return (f"stopping: the time budget ({clock(self.budget_s)}) leaves {clock(self.budget_s - elapsed_s)}, "
                f"less than an episode takes ({mean_episode_s:.1f} s on average); {remaining} episodes not run "
                "(start the day again on the same --out to finish them)")
