"""Entry points of the node executables (``setup.py`` console scripts: what ``ros2 launch`` and ``ros2 run`` start).

A node module imports rclpy, numpy and its backends before its ``main()`` can set up the node's
signal handling (:func:`ladder_ros.runtime.process.run_node`), which takes seconds on a busy machine;
a Ctrl-C in that time would end the process with a ``KeyboardInterrupt`` traceback. These functions
take SIGINT and SIGTERM first, so a stop that comes while the node is still importing is a quiet
exit 0, then import the node and run its ``main()``.
"""

from __future__ import annotations

import importlib
import signal
from typing import Callable

from ladder_ros.runtime.executables import node_module


_stop_requested = False


def _stop_while_importing(signum: int, frame: object) -> None:
    global _stop_requested
    _stop_requested = True
    raise SystemExit(0)


def _run(node: str) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop_while_importing)
    try:
        module = importlib.import_module(node_module(node))
    except BaseException:
        # A stop that lands inside a C extension's initialisation (rclpy's) comes out of the import as
        # that extension's ImportError rather than as the SystemExit raised here: still a quiet stop.
        if _stop_requested:
            return 0
        raise
    return module.main()


def _entry_point(node: str) -> Callable[[], int]:
    def main() -> int:
        return _run(node)
    main.__name__ = main.__qualname__ = node
    return main


sim_bridge = _entry_point("sim_bridge")
camera = _entry_point("camera")
depth = _entry_point("depth")
policy = _entry_point("policy")
gripper_trigger = _entry_point("gripper_trigger")
vlm_verifier = _entry_point("vlm_verifier")
orchestrator = _entry_point("orchestrator")
episode_recorder = _entry_point("episode_recorder")
widowx_driver = _entry_point("widowx_driver")
franka_driver = _entry_point("franka_driver")
widowx_twin = _entry_point("widowx_twin")
rehearsal_server = _entry_point("rehearsal_server")
franka_twin = _entry_point("franka_twin")
