"""The control thread of the wall clock: one call per period on absolute deadlines.

The policy node runs :class:`ControlLoop` to hand out one command per control period from the chunk
executor (:mod:`ladder_ros.policies.executor`); the benchmarks run it the same way. No rclpy here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable

LOG = logging.getLogger(__name__)

# The control thread shares the interpreter lock with the inference thread (image resizing, message packing):
# with CPython's default 5 ms switch interval a waking control thread can wait that long for the lock, a
# 7.5 % error at 15 Hz. 1 ms bounds it (project choice; set by the policy node on the wall clock).
CONTROL_SWITCH_INTERVAL_S = 0.001


class ControlLoop:
    """Calls ``on_tick(now)`` every ``period_s`` on absolute deadlines, in its own thread.

    Deadlines are ``start + n * period`` (no drift from the time ``on_tick`` takes); a tick that
    comes more than a period late skips the deadlines it missed (counted in ``missed``) rather
    than firing a burst. With ``priority`` 1-99 the thread asks for real-time scheduling
    (``SCHED_FIFO``, as ros2_control's control thread does where the system grants it, e.g. an
    ``rtprio`` limit for the user); refused, it runs at normal priority and says so in
    ``scheduling``. It sleeps between ticks, so it takes the CPU only for the tick itself.
    """

    def __init__(self, period_s: float, on_tick: Callable[[float], None], *,
                 clock: Callable[[], float] = time.monotonic, name: str = "control-loop", priority: int = 0):
        self.period_s = period_s
        self._on_tick = on_tick
        self._clock = clock
        self.priority = priority
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._scheduled = threading.Event()
        self.scheduling = "normal"
        self.missed = 0

    def start(self) -> None:
        """Start the thread; returns once its scheduling is settled (see ``scheduling``)."""
        self.thread.start()
        self._scheduled.wait(5.0)

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout_s)

    def _set_scheduling(self) -> None:
        if self.priority > 0:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))  # this thread only
                self.scheduling = f"SCHED_FIFO priority {self.priority}"
            except (AttributeError, OSError) as exc:  # not Linux, or no permission (no rtprio for this user)
                self.scheduling = f"normal (real-time priority {self.priority} refused: {exc})"
        self._scheduled.set()

    def _run(self) -> None:
        self._set_scheduling()
        deadline = self._clock() + self.period_s
        while True:
            # A late tick does not wait; a stop asked for meanwhile still comes before it.
            if self._stop.wait(max(deadline - self._clock(), 0.0)):
                return
            now = self._clock()
            try:
                self._on_tick(now)
            except Exception:  # the loop must keep its rhythm; the callback reports its own errors
                LOG.exception("control tick failed")
            deadline += self.period_s
            now = self._clock()
            while deadline < now:  # a tick that ends on the next deadline is followed by that tick, none missed
                deadline += self.period_s
                self.missed += 1
