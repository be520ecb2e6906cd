"""Faults an instrument can be told to play: the lab day's troubles, on the rehearsal's stand-ins for the world.

The rehearsal's chaos runner (:mod:`ladder_ros.evaluation.chaos`) asks the instruments for a fault by publishing
an :class:`InstrumentFault` on ``instruments/fault`` (in the graph's namespace; ``std_msgs/String``, one JSON
document); each instrument plays the kinds it knows for ``duration_s`` and answers with a :class:`FaultApplied`
on ``instruments/fault_applied``, so the run's records say when the fault took effect, not only when it was
asked for. Nothing in the product listens to these topics: the faults reach the graph the way the real ones
do (a server that answers an error, a camera whose frames stop, a joint that is blocked).

* ``server_error`` (the rehearsal server): every request in the window is answered with openpi's error (the
  traceback, then a close with 1011), as a GPU server that ran out of memory answers;
* ``server_stall`` (the rehearsal server): the next request blocks the server's event loop for the window, as
  openpi's first-request compile or a swapping GPU machine does;
* ``camera_stall`` (the WidowX twin): the twin's frame channel stops updating for the window;
* ``oracle_hold`` (the WidowX twin): the twin holds back ``sim/privileged_state``, the oracle verifier's input,
  for the window: a query asked in it is answered when the verifier's ``observation_wait_s`` runs out, with the
  verifier's error and no count, as a VLM call that timed out is;
* ``motor_stall`` (the WidowX twin): ``joint`` is blocked for the window (docs/widowx_twin.md: its present
  current saturates, an overload error follows after a while), then the obstacle is taken away.

:class:`FaultWindow` is the small clock every instrument keeps per kind. No rclpy here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, ClassVar

from ladder_ros.messages import Document, SchemaError, check_field

FAULT_TOPIC = "instruments/fault"
APPLIED_TOPIC = "instruments/fault_applied"

SERVER_ERROR, SERVER_STALL = "server_error", "server_stall"
CAMERA_STALL, ORACLE_HOLD, MOTOR_STALL = "camera_stall", "oracle_hold", "motor_stall"
KINDS = (SERVER_ERROR, SERVER_STALL, CAMERA_STALL, ORACLE_HOLD, MOTOR_STALL)
MAX_DURATION_S = 600.0  # no fault an instrument plays lasts longer than an episode may


@dataclass(frozen=True)
class InstrumentFault(Document):
    """Play ``fault`` for ``duration_s`` seconds (``joint``: the motor a ``motor_stall`` blocks)."""

    DOC: ClassVar[str] = "instrument_fault"
    fault_id: int
    fault: str
    duration_s: float
    joint: str = ""

    def __post_init__(self) -> None:
        check_field(self.DOC, "fault_id", self.fault_id, int)
        check_field(self.DOC, "fault", self.fault, str)
        if self.fault not in KINDS:
            raise SchemaError(f"{self.DOC}: unknown fault {self.fault!r} (faults: {', '.join(KINDS)})")
        if isinstance(self.duration_s, bool) or not isinstance(self.duration_s, (int, float)) \
                or not math.isfinite(self.duration_s) or not 0 < self.duration_s <= MAX_DURATION_S:
            raise SchemaError(f"{self.DOC}: duration_s must be in (0, {MAX_DURATION_S:g}] s, got {self.duration_s!r}")
        check_field(self.DOC, "joint", self.joint, str)
        if self.fault == MOTOR_STALL and not self.joint:
            raise SchemaError(f"{self.DOC}: a {MOTOR_STALL} names the joint")


@dataclass(frozen=True)
class FaultApplied(Document):
    """An instrument's answer: fault ``fault_id`` took effect (``detail``: what it did), or why not (``error``)."""

    DOC: ClassVar[str] = "instrument_fault_applied"
    fault_id: int
    fault: str
    instrument: str
    detail: str = ""
    error: str = ""

    def __post_init__(self) -> None:
        check_field(self.DOC, "fault_id", self.fault_id, int)
        for name in ("fault", "instrument", "detail", "error"):
            check_field(self.DOC, name, getattr(self, name), str)


class FaultWindow:
    """When a fault of one kind plays: opened for a duration on ``clock``, over once it has run out."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._until = -math.inf
        self.opened = 0  # how many times a fault was played

    def open(self, duration_s: float) -> None:
        """Play for ``duration_s`` from now (a window already open is extended, never shortened)."""
        self._until = max(self._until, self._clock() + float(duration_s))
        self.opened += 1

    def remaining_s(self) -> float:
        return max(0.0, self._until - self._clock())

    @property
    def active(self) -> bool:
        return self.remaining_s() > 0.0

    def close(self) -> None:
        self._until = -math.inf
