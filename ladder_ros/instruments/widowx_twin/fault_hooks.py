"""The instrument faults the WidowX twin plays (:mod:`ladder_ros.instruments.faults`): its camera, its oracle's
input and its motors.

:class:`TwinFaultHooks` is asked by the twin node's :class:`~ladder_ros.instruments.fault_inbox.FaultInbox`:

* ``camera_stall``: the scene camera writes no frame for the window (:meth:`.SceneCamera.stall`);
* ``oracle_hold``: :attr:`TwinFaultHooks.privileged_held` is true for the window, and the node publishes no
  ``sim/privileged_state`` meanwhile (the oracle verifier's input; the rehearsal server keeps the last one);
* ``motor_stall``: the joint is blocked through the twin's own fault path (``twin/fault``'s ``stall``, under
  xs_sdk's motor lock) and released once the window has run out (:meth:`TwinFaultHooks.expire`, which the node
  calls every control period): the obstacle is taken away, as an operator clears the arm.

No rclpy here; times are monotonic seconds from ``clock``.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol

from ladder_ros.instruments.faults import CAMERA_STALL, MOTOR_STALL, ORACLE_HOLD, FaultWindow, InstrumentFault
from ladder_ros.instruments.widowx_twin import xs_wire
from ladder_ros.instruments.widowx_twin.motors import ARM


class StallableCamera(Protocol):
    channel: str

    def stall(self, duration_s: float) -> None: ...


class TwinFaultHooks:
    """Plays ``camera_stall``, ``oracle_hold`` and ``motor_stall`` on the twin's camera and motors."""

    def __init__(self, camera: StallableCamera, inject: Callable[[xs_wire.TwinFault], None],
                 clock: Callable[[], float] = time.monotonic):
        self.camera = camera
        self._inject = inject
        self._clock = clock
        self.oracle = FaultWindow(clock)
        self.held_privileged = 0  # privileged states not published because of an oracle_hold
        self.stalls: dict[str, float] = {}  # joint -> when its obstacle is taken away (monotonic s)

    def handlers(self) -> dict[str, Callable[[InstrumentFault], str]]:
        return {CAMERA_STALL: self.camera_stall, ORACLE_HOLD: self.oracle_hold, MOTOR_STALL: self.motor_stall}

    def camera_stall(self, fault: InstrumentFault) -> str:
        self.camera.stall(fault.duration_s)
        return f"no frame written into {self.camera.channel} for {fault.duration_s:g} s"

    def oracle_hold(self, fault: InstrumentFault) -> str:
        self.oracle.open(fault.duration_s)
        return f"sim/privileged_state (the oracle's input) held back for {fault.duration_s:g} s"

    def motor_stall(self, fault: InstrumentFault) -> str:
        if fault.joint not in ARM:
            raise KeyError(f"the twin has no arm joint {fault.joint!r} (joints: {', '.join(ARM)})")
        self._inject(xs_wire.TwinFault(fault=xs_wire.STALL, joint=fault.joint))
        self.stalls[fault.joint] = max(self.stalls.get(fault.joint, 0.0), self._clock() + fault.duration_s)
        return f"{fault.joint} blocked for {fault.duration_s:g} s"

    def privileged_held(self) -> bool:
        """Whether the privileged state of this control period is held back (counted when it is)."""
        if self.oracle.active:
            self.held_privileged += 1
            return True
        return False

    def expire(self) -> list[str]:
        """Take away the obstacles whose time is up; returns the joints released."""
        now = self._clock()
        due = [joint for joint, until in self.stalls.items() if until <= now]
        for joint in due:
            del self.stalls[joint]
            self._inject(xs_wire.TwinFault(fault=xs_wire.RELEASE_STALL, joint=joint))
        return due

    def release_all(self) -> None:
        """Every obstacle taken away now (the twin stops)."""
        for joint in list(self.stalls):
            self.stalls[joint] = -1.0
        self.expire()
