"""Nodes die with the ``ladder-ros up`` that started them, however it dies. No rclpy here.

``up`` puts its pid into the nodes' environment (:data:`SUPERVISOR_PID_ENV`); each node then asks
the kernel for SIGTERM when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``), which covers the
SIGKILL no handler in ``up`` can catch. SIGTERM is a clean stop for a node (the orchestrator ends a
running episode as interrupted, the recorder closes its bag).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Mapping

SUPERVISOR_PID_ENV = "LADDER_ROS_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ParentGone(RuntimeError):
    """The process that started this one died before the death signal was set: nothing would stop it."""


def die_with_parent(parent: int, signum: int) -> None:
    """Ask Linux to send this process ``signum`` when ``parent`` (its parent's starting thread) exits.

    Raises :class:`OSError` when the kernel refuses and :class:`ParentGone` when the parent is already
    gone (it died between fork and here). The one place ``prctl(PR_SET_PDEATHSIG)`` is called: by the
    nodes ``ladder-ros up`` starts and by the guard in front of ``ros2 launch``
    (:mod:`ladder_ros.bringup.parent_guard`).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) refused: {os.strerror(errno)}")
    if os.getppid() != parent:
        raise ParentGone(f"the process that started this one (pid {parent}) is gone")


def die_with_supervisor(environ: Mapping[str, str] = os.environ) -> None:
    """When started by ``ladder-ros up``, get SIGTERM when ``up`` dies.

    ``PR_SET_PDEATHSIG`` fires when the parent (strictly: the parent's thread that started this
    process) exits; if the parent is already gone by the time this runs (it died between fork and
    here), exit at once. Elsewhere (``ros2 launch``, ``ros2 run``) this does nothing: the launcher
    owns the process.
    """
    supervisor = environ.get(SUPERVISOR_PID_ENV, "")
    if not supervisor.isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        die_with_parent(int(supervisor), signal.SIGTERM)
    except OSError:
        return
    except ParentGone:
        raise SystemExit(f"ladder_ros: the supervisor (pid {supervisor}) is gone; not starting") from None
