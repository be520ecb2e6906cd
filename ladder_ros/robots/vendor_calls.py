"""Vendor calls that can block, run off the control thread and each with a deadline.

Vendor APIs wait without end in places: Interbotix's ``robot_reboot_motors``,
``robot_torque_enable`` and register calls wait for xs_sdk's answer with no timeout, and xs_sdk
answers nothing while it is busy (a reboot) or wedged; franky's error recovery waits for the robot.
A driver that makes such a call on its control thread stops serving its e-stop, its watchdog and
its joint states until the call returns, if ever. So every such call goes to a
:class:`VendorCallWorker`: one thread that runs the calls in order, each with a deadline.

* :meth:`VendorCallWorker.submit` returns a :class:`VendorCall` at once; the control thread polls
  :meth:`VendorCallWorker.poll` each tick and gets the calls that finished (a result or an error)
  or ran past their deadline.
* A call past its deadline is reported once, as ``expired``; the thread running it is given up on
  (it may never return) and a fresh thread takes the calls queued behind it. If the stuck call
  returns later, it is reported again as ``late`` with what it returned.

No rclpy here; ``clock`` is injected (monotonic seconds).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ladder_ros.core.errors import ConfigError

PENDING, RUNNING, DONE, FAILED, EXPIRED, LATE = "pending", "running", "done", "failed", "expired", "late"


@dataclass
class VendorCall:
    """One submitted call: what, its deadline (s from its start), and how it ended."""

    name: str
    function: Callable[[], Any]
    deadline_s: float
    submitted_at: float
    state: str = PENDING
    started_at: float | None = None
    ended_at: float | None = None
    result: Any = None
    error: BaseException | None = None
    reported: bool = field(default=False, repr=False)

    @property
    def seconds(self) -> float | None:
        """How long it ran (s), once it ended."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    def describe(self) -> str:
        if self.state == DONE:
            return f"{self.name}: done in {self.seconds:.3f} s"
        if self.state == FAILED:
            return f"{self.name}: failed after {self.seconds:.3f} s: {self.error!r}"
        if self.state == EXPIRED:
            return f"{self.name}: no answer within its {self.deadline_s:g} s deadline"
        if self.state == LATE:
            return (f"{self.name}: answered {self.seconds:.3f} s after it started, past its {self.deadline_s:g} s "
                    "deadline")
        return f"{self.name}: {self.state}"


class VendorCallWorker:
    """Runs blocking vendor calls in order on a thread of its own, each with a deadline (module docstring)."""

    def __init__(self, name: str = "vendor-calls", clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.clock = clock
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._calls: list[VendorCall] = []
        self._current: VendorCall | None = None
        self._generation = 0
        self._closed = False
        self.threads_given_up = 0
        self._start_thread()

    def _start_thread(self) -> None:
        self._generation += 1
        generation = self._generation
        threading.Thread(target=self._run, args=(generation,), name=f"{self.name}-{generation}", daemon=True).start()

    def submit(self, name: str, function: Callable[[], Any], deadline_s: float) -> VendorCall:
        """Queue ``function`` (a call of the vendor API); it must end within ``deadline_s`` of its start."""
        if not deadline_s > 0:
            raise ConfigError(f"a vendor call's deadline must be positive, got {deadline_s!r}")
        call = VendorCall(name, function, float(deadline_s), self.clock())
        with self._lock:
            if self._closed:
                raise ConfigError("the vendor call worker is closed")
            self._calls.append(call)
        self._queue.put(call)
        return call

    @property
    def busy(self) -> bool:
        with self._lock:
            return any(c.state in (PENDING, RUNNING) for c in self._calls)

    def running(self) -> VendorCall | None:
        with self._lock:
            return self._current

    def poll(self) -> list[VendorCall]:
        """Calls that ended, expired or came back late since the last poll (each state reported once)."""
        now = self.clock()
        out = []
        give_up = False
        with self._lock:
            current = self._current
            if current is not None and current.state == RUNNING and current.started_at is not None \
                    and now - current.started_at > current.deadline_s:
                current.state = EXPIRED
                current.reported = False
                self._current = None
                give_up = True
            keep = []
            for call in self._calls:
                if call.state in (DONE, FAILED, EXPIRED, LATE) and not call.reported:
                    call.reported = True
                    out.append(call)
                if call.state in (PENDING, RUNNING, EXPIRED):
                    keep.append(call)  # an expired call may still come back late
            self._calls = keep
        if give_up:
            self.threads_given_up += 1
            self._start_thread()  # the stuck thread keeps its call; the next ones get a fresh thread
        return out

    def _run(self, generation: int) -> None:
        while True:
            call = self._queue.get()
            if call is None:
                return
            with self._lock:
                if generation != self._generation:  # this thread was given up on: hand the call back
                    self._queue.put(call)
                    return
                call.state = RUNNING
                call.started_at = self.clock()
                self._current = call
            try:
                result, error = call.function(), None
            except BaseException as exc:  # reported to the driver, never raised on this thread
                result, error = None, exc
            with self._lock:
                call.ended_at = self.clock()
                call.result, call.error = result, error
                if call.state == EXPIRED:  # poll() keeps an expired call listed: it is reported again, as late
                    call.state = LATE
                    call.reported = False
                else:
                    call.state = FAILED if error is not None else DONE
                if self._current is call:
                    self._current = None
                stale = generation != self._generation
            if stale:
                return  # a fresh thread serves the queue now

    def close(self) -> None:
        """No more calls; the thread ends once idle (a stuck one is left behind, a daemon)."""
        with self._lock:
            self._closed = True
        self._queue.put(None)
