"""When the WidowX driver's joint targets reach the arm, and how the node learns what became of each.

The WidowX driver computes a command when its action arrives; :class:`PacedCommands` gives it its moment on the
control grid (:class:`~ladder_ros.robots.pacing.ControlGrid`: the action's stamp plus the apply delay, held to
whole periods from the previous action) and has the :class:`~ladder_ros.robots.pacing.CommandPacer`'s thread make
the vendor calls then, and nothing else. What that thread did with each command (:class:`PacedCommand`) queues for
the node's thread, which ``wake`` wakes, and :meth:`PacedCommands.drain` hands the records over in the order they
reached the arm. A stop holds the pacer (:meth:`PacedCommands.held`): commands not sent yet are dropped and none is
sent until the stop is made. No rclpy here: the node gives the clock and the wake-up.
"""

from __future__ import annotations

import queue
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from ladder_ros.robots.pacing import CommandPacer, ControlGrid


@dataclass(frozen=True)
class PacedCommand:
    """What the pacer's thread did with one command: sent it to the arm, or (dry run) only stamped it."""

    joints: np.ndarray
    gripper_open: bool
    at: float  # monotonic s: the moment of the vendor call
    stamp_ns: int  # the same moment on the node's clock (the joint command's stamp)
    move: bool  # the command was for the arm (armed); False: dry run
    sent: bool = False  # the API took the joint target
    gripper_sent: bool = False  # a new gripper command went out with it
    skipped: str = ""  # not sent: why (the robot was disarmed or e-stopped by then)


class PacedArm(Protocol):
    """The two non-blocking vendor calls the pacer's thread makes."""

    def send_joints(self, joints: np.ndarray) -> bool: ...

    def send_gripper(self, open_: bool) -> bool: ...


class PacedCommands:
    """The WidowX's commands, each sent at its moment from the pacer's thread (module docstring).

    ``may_move`` says, on the pacer's thread, whether the robot is still armed and not e-stopped (every stop
    cancels the pending commands; this is a second check); ``now_ns`` is the node's clock.
    """

    def __init__(self, name: str, period_ns: int, delay_ns: int, arm: PacedArm, may_move: Callable[[], bool],
                 now_ns: Callable[[], int], wake: Callable[[], None]):
        self.arm = arm
        self.may_move = may_move
        self.now_ns = now_ns
        self.wake = wake
        self.grid = ControlGrid(period_ns, delay_ns)
        self._applying_at_ns = 0  # when the action being applied reaches the arm (node clock)
        self._outcomes: queue.SimpleQueue[tuple[PacedCommand | None, BaseException | None]] = queue.SimpleQueue()
        self.pacer = CommandPacer(name, self._done)

    def plan(self, stamp_ns: int, now_ns: int) -> int:
        """When the action stamped ``stamp_ns``, about to be applied, reaches the arm (node clock, ns)."""
        self._applying_at_ns = self.grid.plan(stamp_ns, now_ns)
        return self._applying_at_ns

    def reset(self) -> None:
        """Forget the grid: the next action starts it anew."""
        self.grid.reset()

    def send(self, joints: np.ndarray, gripper_open: bool, move: bool) -> None:
        """Send ``joints`` (and the gripper) at the planned moment of the action being applied; ``move`` False:
        dry run, only stamped then."""
        now_ns = self.now_ns()
        due = time.monotonic() + max(0, self._applying_at_ns - now_ns) / 1e9
        self.pacer.schedule(due, lambda: self._send_now(joints, gripper_open, move))

    def _send_now(self, joints: np.ndarray, gripper_open: bool, move: bool) -> PacedCommand:
        """On the pacer's thread, at the command's moment, its lock held: the vendor calls and nothing else."""
        at, stamp_ns = time.monotonic(), self.now_ns()
        if not move:
            return PacedCommand(joints, gripper_open, at, stamp_ns, move=False)
        if not self.may_move():
            return PacedCommand(joints, gripper_open, at, stamp_ns, move=True, skipped="not armed any more")
        if not self.arm.send_joints(joints):
            return PacedCommand(joints, gripper_open, at, stamp_ns, move=True)
        gripper_sent = self.arm.send_gripper(gripper_open)
        return PacedCommand(joints, gripper_open, at, stamp_ns, move=True, sent=True, gripper_sent=gripper_sent)

    def _done(self, paced: PacedCommand | None, error: BaseException | None) -> None:
        """On the pacer's thread, its lock still held: hand the outcome to the node's thread."""
        self._outcomes.put((paced, error))
        self.wake()

    @contextmanager
    def held(self) -> Iterator[None]:
        """The node's own motion calls (a hold, homing): commands not sent yet dropped, a command being sent
        finished first, none sent until the block ends."""
        with self.pacer.lock:
            self.pacer.cancel()
            yield

    def drain(self, account: Callable[[PacedCommand], None]) -> list[BaseException | None]:
        """On the node's thread: ``account`` for each command made (sent, or stamped in dry run), in order; the
        failures: the exception a vendor call raised, or None for a joint target the API refused."""
        failed: list[BaseException | None] = []
        while True:
            try:
                paced, error = self._outcomes.get_nowait()
            except queue.Empty:
                return failed
            if error is not None or paced is None:
                failed.append(error)
                continue
            if paced.skipped:
                continue
            if paced.move and not paced.sent:
                failed.append(None)
                continue
            account(paced)

    def stats(self) -> dict[str, Any]:
        return {"apply_delay_ms": self.grid.delay_ns / 1e6, **self.pacer.stats(), "grid_anchored": self.grid.anchored}

    def close(self) -> None:
        self.pacer.close()
