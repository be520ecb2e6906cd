"""Commands sent at their moment: when each is due (a control grid), and a thread that makes its vendor call then.

A wall-clock driver that sends each action the moment it has computed it hands the arm every delay
on the action's way: the policy's publish, DDS, the executor's queue, the time its process waited
for a CPU or for the GIL, the computation itself. Those delays vary from one action to the next
(on the rehearsal's two cores by up to 30 ms, against a 200 ms period), so the arm's period varied
with them although the policy stamped its actions exactly one period apart.

:class:`CommandPacer` separates the two: the driver computes a command when its action arrives
(filter, target, inverse kinematics, checks, the supervisor's verdict) and hands the vendor call to
the pacer with the moment it is due, the action's stamp plus a fixed delay; the pacer's thread makes
the call at that moment and nothing else. The arm's period is then the period of the stamps, however
long the way took, as long as it took less than the delay; a command computed after its moment is
sent at once (late, and counted: :meth:`CommandPacer.stats`).

* Commands are sent in the order they were scheduled, each at its moment or at once when that has
  passed (never two at once out of order: the driver computes each target from the previous one).
* :attr:`CommandPacer.lock` is held while a command's job runs. A driver that stops the arm holds it
  too, and :meth:`CommandPacer.cancel` drops the commands not sent yet: a stop is never overtaken by
  a command computed before it, and waits at most for one non-blocking vendor call.
* ``on_done(result, error)`` is called on the pacer's thread with what the job returned (or the
  exception it raised), while the lock is still held: once a driver holds the lock, everything sent
  so far has been reported.

:class:`ControlGrid` says when each action is due: its stamp plus the delay, held on a grid of
control periods. The policy stamps its actions one period apart on its own timer, but the stamp is
taken when its process gets to it: on a busy machine the stamps themselves varied by up to 8 % of a
period. The grid goes on from the last action's moment in whole periods; an action stamped near its
grid moment (within ``GRID_TOLERANCE`` periods) is sent on the grid, moved towards its own moment by a
small gain (``GRID_GAIN``, so the grid follows the policy's clock instead of drifting from it); one
stamped further away (a policy that restarted its timer, the first action of an episode) starts the
grid anew at its stamp plus the delay. An action is never due before its stamp, nor later than the
delay plus the tolerance after it.

No rclpy here; times are monotonic seconds (``clock``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

import numpy as np

from ladder_ros.core.errors import ConfigError

GRID_GAIN = 0.1  # how much of an action's offset from its grid moment the grid takes up (project choice)
GRID_TOLERANCE = 0.25  # an action stamped further than this (control periods) from its grid moment starts it anew
LATENESS_WINDOW = 200  # commands whose lateness the statistics cover
LATE_S = 0.001  # a job that starts more than this after its moment counts as late (a thread wakes in ~0.1 ms)


class ControlGrid:
    """When each action reaches the arm: its stamp plus ``delay_ns``, on a grid of ``period_ns`` (module docstring).

    Times are nanoseconds of one clock (the node's: stamps and now).
    """

    def __init__(self, period_ns: int, delay_ns: int, gain: float = GRID_GAIN, tolerance: float = GRID_TOLERANCE):
        if period_ns <= 0 or delay_ns < 0 or not 0.0 <= gain <= 1.0 or not 0.0 <= tolerance < 0.5:
            raise ConfigError(f"a control grid needs a positive period, a delay >= 0, a gain in [0, 1] and a "
                              f"tolerance in [0, 0.5) periods, got {period_ns} ns, {delay_ns} ns, {gain}, {tolerance}")
        self.period_ns, self.delay_ns, self.gain = int(period_ns), int(delay_ns), float(gain)
        self.tolerance_ns = int(tolerance * period_ns)
        self._moment: int | None = None  # the last action's grid moment
        self._stamp: int | None = None  # and its stamp
        self.anchored = 0  # times the grid started anew

    def reset(self) -> None:
        """Forget the grid (a new episode, the arm re-armed): the next action starts it."""
        self._moment = self._stamp = None

    def plan(self, stamp_ns: int, now_ns: int) -> int:
        """When the action stamped ``stamp_ns``, applied at ``now_ns``, is due: its grid moment, or now if that
        passed (the grid stays where it was: the next action is back on it)."""
        target = stamp_ns + self.delay_ns
        moment = None
        if self._moment is not None and self._stamp is not None:
            steps = round((stamp_ns - self._stamp) / self.period_ns)
            if steps >= 1:
                expected = self._moment + steps * self.period_ns
                offset = target - expected
                if abs(offset) <= self.tolerance_ns:
                    moment = expected + round(self.gain * offset)
        if moment is None:
            moment = target
            self.anchored += 1
        self._moment, self._stamp = moment, stamp_ns
        return max(moment, stamp_ns, now_ns)


class CommandPacer:
    """Runs each scheduled job at its moment on a thread of its own (module docstring)."""

    def __init__(self, name: str, on_done: Callable[[Any, BaseException | None], None],
                 clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.on_done = on_done
        self.clock = clock
        self.lock = threading.Lock()  # held while a job runs; a driver holds it to stop the arm
        self._wake = threading.Condition(threading.Lock())
        self._jobs: deque[tuple[float, Callable[[], Any]]] = deque()
        self._generation = 0  # moves on with every cancel: a job taken before a cancel is not run after it
        self._closed = False
        self._lateness: deque[float] = deque(maxlen=LATENESS_WINDOW)  # s after its moment each job started
        self.sent = 0
        self.late = 0  # jobs that started more than LATE_S after their moment
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, due: float, job: Callable[[], Any]) -> None:
        """Run ``job`` at ``due`` (monotonic s), after the jobs scheduled before it; at once if ``due`` has passed."""
        if not isinstance(due, (int, float)) or due != due:
            raise ConfigError(f"a paced command's moment must be a number of seconds, got {due!r}")
        with self._wake:
            if self._closed:
                raise ConfigError(f"the command pacer {self.name} is closed")
            self._jobs.append((float(due), job))
            self._wake.notify()

    def cancel(self) -> int:
        """Drop the jobs not started yet; how many. Hold :attr:`lock` around it to wait out a job running now."""
        with self._wake:
            dropped = len(self._jobs)
            self._jobs.clear()
            self._generation += 1
            return dropped

    @property
    def pending(self) -> int:
        with self._wake:
            return len(self._jobs)

    def stats(self) -> dict[str, float | int | None]:
        """Jobs run, how many started late (more than ``LATE_S`` after their moment), lateness p50/p99/max (ms)."""
        with self._wake:
            lateness = np.array(self._lateness) * 1000.0
            out: dict[str, float | int | None] = {"paced_commands": self.sent, "paced_late": self.late}
        if not len(lateness):
            return {**out, "paced_lateness_p50_ms": None, "paced_lateness_p99_ms": None,
                    "paced_lateness_max_ms": None}
        return {**out, "paced_lateness_p50_ms": float(np.percentile(lateness, 50)),
                "paced_lateness_p99_ms": float(np.percentile(lateness, 99)),
                "paced_lateness_max_ms": float(lateness.max())}

    def close(self) -> None:
        """Drop the jobs not started; the thread ends (after the job it is running, if any)."""
        with self._wake:
            self._closed = True
            self._jobs.clear()
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=2.0)

    def _next(self) -> tuple[float, Callable[[], Any], int] | None:
        """The next job once its moment has come (then no longer pending) and the generation it belongs to; None
        once closed."""
        with self._wake:
            while True:
                if self._closed:
                    return None
                if not self._jobs:
                    self._wake.wait()
                    continue
                due, job = self._jobs[0]
                left = due - self.clock()
                if left > 0:
                    self._wake.wait(left)  # a job scheduled, a cancel or close wakes it early: look again
                    continue
                self._jobs.popleft()
                return due, job, self._generation

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            due, job, generation = item
            with self.lock:
                if not self._still_wanted(generation):
                    continue
                started = self.clock()
                try:
                    result, error = job(), None
                except BaseException as exc:  # reported to the driver, never raised on this thread
                    result, error = None, exc
                with self._wake:
                    self.sent += 1
                    self._lateness.append(max(0.0, started - due))
                    if started - due > LATE_S:
                        self.late += 1
                try:
                    self.on_done(result, error)
                except Exception:  # the driver's bookkeeping failed: it cannot be told; the thread goes on
                    pass

    def _still_wanted(self, generation: int) -> bool:
        """False once closed, or cancelled since the job was taken (a stop came between its moment and the lock)."""
        with self._wake:
            return not self._closed and generation == self._generation
