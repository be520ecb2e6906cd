"""How a ladder_ros process ends when native code will not let it end the usual way. No rclpy here.

Two ways a process that did its work can still fail to end, both below Python:

* CPython 3.11-3.13 ends a daemon thread that comes back from a C or C++ call while the interpreter is
  finalizing with ``pthread_exit``; unwinding that through C++ frames (torch's kernels, franky's bindings)
  calls ``std::terminate``, so a node that stopped cleanly dies with SIGABRT ("terminate called without an
  active exception") and ``ros2 launch`` reports "process has died". Daemon threads are the node's workers
  (a gripper read, an inference, a vendor call on a dead link) that its ``close()`` asked to stop but that
  have not come back yet: :func:`exit_past_native_threads` ends the process at once after a short grace,
  output flushed, with the status it would have had, instead of running Python's finalization under them.
* Fast DDS 3.2 (the ROS 2 wheels' middleware) can deadlock two of its own threads when a remote
  participant's lease check fires while a remote writer is being removed, as happens when a graph's nodes
  stop (eProsima/Fast-DDS issue 6502, open): every later teardown call then waits forever while holding
  Python's GIL, so neither a Python timer nor Ctrl-C can end it. :func:`ros_teardown_deadline` arms
  faulthandler's watchdog, a C thread, around such a teardown.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

# How long a node's daemon threads get to come back once the node is closed and rclpy shut down (s); a
# project choice: a worker told to stop returns within a control period, one blocked in a vendor call may not.
THREAD_GRACE_S = 1.0


def running_daemon_threads() -> list[threading.Thread]:
    """Daemon threads of this process, the calling one aside (threads started by native code are left out)."""
    dummy = getattr(threading, "_DummyThread", ())
    return [t for t in threading.enumerate()
            if t is not threading.current_thread() and t.daemon and t.is_alive() and not isinstance(t, dummy)]


def exit_past_native_threads(name: str, code: int, grace_s: float = THREAD_GRACE_S) -> None:
    """Return if no daemon thread is left after ``grace_s``; otherwise say which and end the process with ``code``."""
    deadline = time.monotonic() + grace_s
    for thread in running_daemon_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    left = running_daemon_threads()
    if not left:
        return
    print(f"ladder_ros {name}: threads still running after the node closed ({', '.join(t.name for t in left)}): "
          f"ending the process now (exit status {code}) rather than in Python's finalization, which aborts a "
          f"process whose threads come back from native code", file=sys.stderr, flush=True)
    logging.shutdown()
    flush_output()
    os._exit(code)


def flush_output() -> None:
    """Standard output and error on their way, before anything that may end the process without Python's exit."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


@contextmanager
def ros_teardown_deadline(seconds: float) -> Iterator[None]:
    """Past ``seconds`` inside the block, print where the process hangs and exit with status 1.

    Output is flushed first, so nothing already printed is lost. The traceback goes to the process's own
    standard error (a replaced ``sys.stderr`` may have no file descriptor); a process without one (windowless)
    runs the block without the watchdog.
    """
    flush_output()
    try:
        faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    except (AttributeError, ValueError, OSError):
        pass
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
