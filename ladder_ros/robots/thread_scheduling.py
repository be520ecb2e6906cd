"""The calling thread's scheduling policy and priority, kept through a vendor call or lent to one.

On Linux the policy (``SCHED_OTHER``, ``SCHED_FIFO``, ...) and the real-time priority belong to each
thread, and a thread or process started by a thread inherits them. The libfranka that
franky-control 2.0.0 bundles sets the thread that constructs a ``franka::Robot`` to ``SCHED_FIFO``
at the highest priority (99), whatever the ``RealtimeConfig`` says (``Ignore`` only stops it failing
where the system refuses; ``setCurrentThreadToHighestSchedulerPriority``; measured against
franky-sim: the connecting thread is SCHED_FIFO 99 after ``franky.Robot(host,
realtime_config=Ignore)``), and franky's control thread, started by ``Robot.move``, inherits the
setting of the thread that starts it. In a driver that connects from its ROS thread, that thread
stays real-time for good: the executor, Python's garbage collector and every process the thread
starts later run at priority 99 beside the control loop, and on a two-core machine they starve
everything else. :func:`kept` puts the thread back after such a call and says what the call had
set; :func:`lent` gives that setting to a thread for one call only (the call that starts franky's
control thread).

Where the platform has no per-thread scheduling calls (not Linux), both are no-ops.

:func:`favour` is for a whole driver process, called before it starts any thread: a lower niceness
for the calling thread (on Linux each thread has its own, and the threads it starts inherit it) and
a shorter GIL switch interval, so that the thread that makes a driver's vendor calls is neither left
waiting for a CPU behind the other processes of a busy machine while it (or the thread holding the
GIL) is runnable, nor waits the default 5 ms for the GIL while another of the process's threads runs
Python. Both stay within the normal scheduling policy (no real-time priority that could starve the
machine); where the system refuses the niceness (an unprivileged user without an ``RLIMIT_NICE``
that allows it), the process runs as it was and the result says why.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

POLICY_NAMES = {getattr(os, name): name for name in ("SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH",
                                                     "SCHED_IDLE") if hasattr(os, name)}


@dataclass(frozen=True)
class Scheduling:
    """A thread's policy (an ``os.SCHED_*`` value) and its real-time priority (0 for the normal policies)."""

    policy: int
    priority: int

    @property
    def realtime(self) -> bool:
        return self.priority > 0

    def describe(self) -> str:
        name = POLICY_NAMES.get(self.policy, f"policy {self.policy}")
        return f"{name} priority {self.priority}" if self.realtime else name


def current() -> Scheduling | None:
    """The calling thread's scheduling, or None where the platform cannot say."""
    if not hasattr(os, "sched_getscheduler"):
        return None
    return Scheduling(os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)


def apply(scheduling: Scheduling) -> None:
    """Set the calling thread's scheduling (``OSError`` where the system refuses it)."""
    os.sched_setscheduler(0, scheduling.policy, os.sched_param(scheduling.priority))


@dataclass
class Kept:
    """What a :func:`kept` block found: the thread's scheduling before, and what the block had set (or None)."""

    before: Scheduling | None
    set_by_call: Scheduling | None = None
    restore_error: str = ""


@contextmanager
def kept() -> Iterator[Kept]:
    """Run the block, then put the calling thread back to the scheduling it had before (also on an error).

    ``set_by_call`` is the scheduling the block left when it differed (what a vendor call chose for the
    thread); ``restore_error`` says why the thread could not be put back, if the system refused.
    """
    record = Kept(current())
    try:
        yield record
    finally:
        after = current()
        if record.before is not None and after is not None and after != record.before:
            record.set_by_call = after
            try:
                apply(record.before)
            except OSError as exc:
                record.restore_error = f"could not put the thread back to {record.before.describe()}: {exc}"


@contextmanager
def lent(scheduling: Scheduling | None) -> Iterator[None]:
    """Run the block with the calling thread at ``scheduling`` (None: as it is), then put it back.

    A thread the block starts inherits ``scheduling``. Refused by the system, the block runs as the
    thread is (the caller has said how it would be scheduled when it kept the setting).
    """
    before = current()
    if scheduling is None or before is None or scheduling == before:
        yield
        return
    try:
        apply(scheduling)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        apply(before)


@dataclass(frozen=True)
class Favoured:
    """What :func:`favour` did: the calling thread's niceness after it, the GIL switch interval, and a refusal."""

    niceness: int | None  # None where the platform cannot say
    switch_interval_s: float
    refused: str = ""

    def describe(self) -> str:
        nice = "niceness unknown" if self.niceness is None else f"niceness {self.niceness}"
        text = f"{nice}, GIL switch interval {self.switch_interval_s * 1000:g} ms"
        return f"{text} ({self.refused})" if self.refused else text


def favour(niceness: int, switch_interval_s: float) -> Favoured:
    """Lower the calling thread's niceness to ``niceness`` (never raise it) and set the GIL switch interval.

    Call it before the process starts its threads: they inherit the niceness (see the module docstring).
    """
    sys.setswitchinterval(switch_interval_s)
    interval = sys.getswitchinterval()
    if not hasattr(os, "getpriority"):
        return Favoured(None, interval, "this platform has no niceness")
    current = os.getpriority(os.PRIO_PROCESS, 0)  # on Linux: the calling thread's
    if current <= niceness:
        return Favoured(current, interval)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except OSError as exc:
        return Favoured(current, interval, f"niceness {niceness} refused: {exc.strerror or exc}; it needs "
                                           f"CAP_SYS_NICE or an RLIMIT_NICE allowing it (limits.conf: nice {niceness})")
    return Favoured(os.getpriority(os.PRIO_PROCESS, 0), interval)
