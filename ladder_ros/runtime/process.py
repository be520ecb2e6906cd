"""A node process from start to end: :func:`run_node` is the body of every node's ``main()``.

It inits rclpy, builds the node, spins, and shuts down cleanly on Ctrl-C, SIGTERM or an external shutdown
(ros2/demos talker anatomy), giving the node a last word (``on_shutdown``) and closing it while it can still
publish and log; it exits 2 with one error line when the node cannot start. Started by ``ladder-ros up`` it
also dies with its supervisor (:func:`~ladder_ros.runtime.supervision.die_with_supervisor`).
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any, Callable, Sequence

import rclpy
from rclpy.executors import (
    Executor,
    ExternalShutdownException,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ladder_ros.core.errors import LadderError
from ladder_ros.runtime.process_exit import exit_past_native_threads
from ladder_ros.runtime.supervision import die_with_supervisor

# How often a spinning node checks for a stop request (s): the longest a Ctrl-C waits for an idle node.
STOP_CHECK_PERIOD_S = 0.1
STOP_DEADLINE_S = 20.0  # after a stop signal, a node that has not exited by then is killed (SIGALRM)


class _StopRequest:
    """SIGINT and SIGTERM handler of a node process: the first signal asks the node to stop, later ones are ignored.

    rclpy's own handlers shut the context down the moment a signal arrives, so a node could no longer
    publish or log while it closes (the orchestrator's last word, the final status of an interrupted
    episode, needs it still up), and under ``ros2 launch`` a Ctrl-C reaches a node twice, from the
    terminal (the whole process group) and from launch, the second raising ``KeyboardInterrupt`` in
    the middle of the cleanup. Here the first signal interrupts a node that is still starting
    (building it can take long) and otherwise ends the spin loop between two callbacks; the last word
    and ``close()`` then run with the context alive. A node that has not exited ``STOP_DEADLINE_S``
    after the first signal is ended by SIGALRM; SIGKILL (launch sends it when a node has not exited
    10 s after the stop) stays the last resort.
    """

    def __init__(self) -> None:
        self.requested = False
        self.interrupt = True  # raise KeyboardInterrupt: the node is starting, not spinning

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested:
            return
        self.requested = True
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(STOP_DEADLINE_S))
        if self.interrupt:
            raise KeyboardInterrupt


def _drain(executor: Executor, seconds: float) -> None:
    """Run the callbacks whose input has already arrived, without waiting for more, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    handled = False  # since the last wait
    while time.monotonic() < deadline:
        try:
            handler, _, _ = executor.wait_for_ready_callbacks(timeout_sec=0.0)
        except TimeoutException:  # a zero-timeout wait ends with this, also after yielding work
            if not handled:
                return
            handled = False
            continue
        except ShutdownException:
            return
        handler()
        if handler.exception() is not None:
            raise handler.exception()
        handled = True


def run_node(name: str, build: Callable[[], Node], args: Sequence[str] | None = None,
             executor_factory: Callable[[], Executor] = SingleThreadedExecutor) -> int:
    """Init rclpy, build the node, spin until Ctrl-C or shutdown; exit 2 with one line when it cannot start.

    Exit status 0 after Ctrl-C, SIGTERM or an external shutdown: a stop on request is a clean end
    (``ros2 launch`` reports "process has finished cleanly"). On a stop signal the node's
    ``on_shutdown(executor)`` (if it has one) runs while the node can still publish, then its
    ``close()``; then the node is destroyed and rclpy shut down. A node with a ``drain_on_stop_s``
    attribute (the recorder) first handles the messages that had already arrived when the stop came,
    for at most that long, so what was sent before the stop is kept.
    Threads of the node still in native code after all that end the process at once
    (:mod:`ladder_ros.runtime.process_exit`).
    """
    code = _serve_node(name, build, args, executor_factory)
    exit_past_native_threads(name, code)
    return code


def _serve_node(name: str, build: Callable[[], Node], args: Sequence[str] | None,
                executor_factory: Callable[[], Executor]) -> int:
    die_with_supervisor()
    stop = _StopRequest()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    try:
        rclpy.init(args=list(args) if args is not None else None, signal_handler_options=SignalHandlerOptions.NO)
    except KeyboardInterrupt:
        return 0
    node: Node | None = None
    try:
        try:
            node = build()
        except LadderError as exc:
            print(f"ladder_ros {name}: error: {exc}", file=sys.stderr, flush=True)
            return 2
        executor = executor_factory()
        executor.add_node(node)
        stop.interrupt = False
        while not stop.requested and rclpy.ok():
            executor.spin_once(timeout_sec=STOP_CHECK_PERIOD_S)
        if stop.requested and rclpy.ok():
            drain_s = getattr(node, "drain_on_stop_s", 0.0)
            if drain_s > 0:
                _drain(executor, drain_s)
            last_word = getattr(node, "on_shutdown", None)
            if callable(last_word):
                last_word(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except _rclpy.RCLError:
        # An external shutdown that lands while the executor builds its wait set makes rcl report
        # an invalid context: the same clean stop.
        if rclpy.ok():
            raise
    finally:
        # From here on a stop signal (launch's SIGINT after a node that failed to start, a second Ctrl-C) only
        # marks the stop: raising in the middle of destroying the node would leave a traceback, not a stop.
        stop.interrupt = False
        try:
            if node is not None:
                close = getattr(node, "close", None)
                if callable(close):
                    close()
                node.destroy_node()
            rclpy.try_shutdown()
        finally:
            signal.alarm(0)
            # While Python exits it resets a signal with a Python handler to the default action, so a
            # late second Ctrl-C would end the process by signal after all; ignored signals stay ignored.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
    return 0


def spin_for(executor: Executor, seconds: float, until: Callable[[], bool] = lambda: False) -> None:
    """Spin ``executor`` for up to ``seconds`` or until ``until()`` holds (a node's last word on shutdown)."""
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline and rclpy.ok():
        executor.spin_once(timeout_sec=min(0.05, max(0.0, deadline - time.monotonic())))
