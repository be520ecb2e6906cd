"""Start ``ros2 launch`` so that its graph stops when the program that started it dies.

``ladder-ros run``/``parity``/``rehearse --launch FILE`` start ``ros2 launch`` in a process group of
its own, so that a terminal's Ctrl-C reaches the program first and it stops the graph in order. The
other side of that: a program killed outright (SIGKILL, the kernel's out-of-memory killer, a test's
time-out) cannot stop anything, and its graph ran on without it (a driver, a simulator and a policy
nobody watches, each holding a core). (``ladder-ros up`` starts each node itself, and its nodes watch
its pid: :mod:`ladder_ros.runtime.supervision`, which holds the ``prctl`` call used here too.) Started
through :func:`guarded`, the command first asks Linux to send it ``signum`` (SIGINT: launch's own orderly
stop) when its parent dies (``prctl(PR_SET_PDEATHSIG)``, kept across ``exec``), then replaces itself with the
command: same pid, same process group, no process in between.

Linux delivers that signal when the *thread* that started the child ends, so the program starts its
graph from a thread that lives as long as the graph (the main thread, in every caller here). Elsewhere
than Linux the command runs unguarded.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Sequence

from ladder_ros.runtime.supervision import ParentGone, die_with_parent


def guarded(command: Sequence[str], signum: int = signal.SIGINT) -> list[str]:
    """``command``, prefixed so that it gets ``signum`` when this process dies."""
    if not sys.platform.startswith("linux"):
        return list(command)
    return [sys.executable, "-m", "ladder_ros.bringup.parent_guard", str(os.getpid()), str(int(signum)), "--",
            *command]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m ladder_ros.bringup.parent_guard PARENT_PID SIGNAL -- COMMAND ...", file=sys.stderr)
        return 2
    parent, signum, command = int(argv[0]), int(argv[1]), list(argv[3:])
    try:
        die_with_parent(parent, signum)
    except OSError as exc:
        print(f"parent_guard: {exc.strerror}", file=sys.stderr)
        return 1
    except ParentGone:  # the parent died before the guard was set: nothing would stop the command
        print(f"parent_guard: the process that started {command[0]} (pid {parent}) is gone; not starting it",
              file=sys.stderr)
        return 1
    os.execvp(command[0], command)
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
