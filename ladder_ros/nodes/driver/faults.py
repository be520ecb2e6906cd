"""How a robot driver stops its arm and deals with faults, so that every path that must stop it stops it the same way.

The e-stop, the watchdog, disarming, a fault and a callback that failed all stop the arm through one
:class:`ArmStopper`, and the supervisor's state says how it went; the vendor calls that can block run through one
:class:`VendorCallRouter`, so the e-stop, the watchdog and the joint states never wait for the arm's API; and
:class:`ArmWatch` notices the faults that no single reading shows. None of them imports rclpy: the driver node
hands each the callables it needs.

* **Stopping**: the driver's ``arm_stop`` hook stops the arm and says how (:class:`StopOutcome`); a stop the arm's
  API refused escalates to the driver's last resort (the WidowX turns its torque off), run on the vendor-call
  worker.
* **Faults**: counted, disarmed, the arm stopped; arming waits for a confirmed recovery.
* **Vendor calls**: each runs on the :class:`~ladder_ros.robots.vendor_calls.VendorCallWorker` with a deadline and
  ends in a handler on the node's thread; a call past its deadline is a ``vendor_timeout`` fault.
* **Health**: joint states that stopped coming are a ``vendor_timeout`` fault; what the health poll (the motors'
  registers) reports is a fault, each once, or is reported beside a fault already pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ladder_ros.core.safety import HOLD_REFUSED, ROBOT_ERROR, VENDOR_TIMEOUT
from ladder_ros.core.safety_supervisor import SafetySupervisor
from ladder_ros.robots.arm_health import RestDetector
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, LATE, VendorCall, VendorCallWorker

Fault = Callable[[str, str], None]  # (kind, reason)


@dataclass(frozen=True)
class StopOutcome:
    """How a stop went: ``held`` (the arm took it), in words; ``refused``: the arm's API refused a first attempt.

    ``last_resort``: when not held, a blocking call that stops the arm another way (torque off),
    run on the vendor-call worker; it returns a sentence saying what it did.
    """

    held: bool
    how: str
    refused: bool = False
    last_resort: Callable[[], str] | None = None


class VendorCallRouter:
    """Blocking vendor calls on the worker; each ended call handed to its handler when :meth:`poll` runs.

    ``warn`` gets a line for a call that ended after its deadline; ``fault`` is told of a call past its deadline
    (the robot stays disarmed until a recovery succeeds).
    """

    def __init__(self, worker: VendorCallWorker, vendor: str, warn: Callable[[str], Any], fault: Fault):
        self.worker = worker
        self.vendor = vendor
        self.warn = warn
        self.fault = fault
        self._handlers: dict[int, Callable[[VendorCall], None]] = {}

    def run(self, name: str, function: Callable[[], Any], deadline_s: float,
            on_end: Callable[[VendorCall], None] | None = None) -> VendorCall:
        """Run a blocking vendor call on the worker; ``on_end`` gets it when it ended or missed its deadline."""
        call = self.worker.submit(name, function, deadline_s)
        if on_end is not None:
            self._handlers[id(call)] = on_end
        return call

    def poll(self) -> None:
        """On the node's thread: hand every call that ended (or missed its deadline) to its handler."""
        for call in self.worker.poll():
            if call.state == LATE:
                self.warn(f"{self.vendor}: {call.describe()}")
                continue
            handler = self._handlers.pop(id(call), None)
            if call.state == EXPIRED:
                self.fault(VENDOR_TIMEOUT, f"{self.vendor} did not answer ({call.describe()}); the robot stays "
                                           "disarmed until a recovery succeeds")
            if handler is not None:
                handler(call)


class ArmStopper:
    """Stops the arm now, escalates a refused stop, and turns a fault into a stop (module docstring).

    ``stop``: the driver's ``arm_stop`` hook; ``intervene(kind, reason, counted=...)`` counts and publishes;
    ``cancel_homing`` drops the way home; ``publish_state`` republishes the safety state; ``logger`` logs.
    """

    def __init__(self, supervisor: SafetySupervisor, stop: Callable[[], StopOutcome], rest: RestDetector,
                 calls: VendorCallRouter, deadline_s: float, *, intervene: Callable[..., None],
                 cancel_homing: Callable[[], None], publish_state: Callable[..., None], logger: Any):
        self.supervisor = supervisor
        self._stop = stop
        self.rest = rest
        self.calls = calls
        self.deadline_s = deadline_s
        self.intervene = intervene
        self.cancel_homing = cancel_homing
        self.publish_state = publish_state
        self.logger = logger

    def stop(self) -> None:
        """Stop the arm now; escalate a refused stop; the state says how it went."""
        try:
            outcome = self._stop()
        except Exception as exc:
            outcome = StopOutcome(False, f"the stop raised {exc!r}", refused=True)
        self.rest.reset()
        if outcome.held:
            self.supervisor.note_stop(outcome.how)
            if outcome.refused:
                self.intervene(HOLD_REFUSED, outcome.how)
            return
        self.supervisor.fault(HOLD_REFUSED, outcome.how)
        if outcome.last_resort is None:
            self.supervisor.note_stop(f"{outcome.how}; NOT STOPPED: use the hardware e-stop")
        else:
            self.supervisor.note_stop(f"{outcome.how}; stopping it by its last resort")
            self.calls.run("last-resort stop", outcome.last_resort, self.deadline_s,
                           lambda call: self._on_last_resort(outcome.how, call))
        self.intervene(HOLD_REFUSED, outcome.how, counted=True)

    def _on_last_resort(self, how: str, call: VendorCall) -> None:
        if call.state == DONE:
            self.supervisor.note_stop(f"{how}; {call.result}")
        else:
            self.supervisor.note_stop(f"{how}; the last resort failed ({call.describe()}): use the hardware e-stop")
            self.logger.error(f"the arm could not be stopped: {call.describe()}: use the hardware e-stop")
        self.publish_state()

    def fault(self, kind: str, reason: str) -> None:
        """A fault: counted, disarmed, the arm stopped; arming waits for a confirmed recovery."""
        self.supervisor.fault(kind, reason)
        self.cancel_homing()
        self.stop()
        self.intervene(kind, reason, counted=True)


class ArmWatch:
    """The faults no single reading shows: joint states that stopped coming, and the health poll's findings.

    ``recovering`` says whether a recovery runs (the arm's states may pause meanwhile); ``clock_ns`` is the node's
    clock, the one the readings are stamped with.
    """

    def __init__(self, supervisor: SafetySupervisor, vendor: str, max_state_age_s: float, health_poll_s: float, *,
                 fault: Fault, intervene: Callable[..., None], recovering: Callable[[], bool],
                 clock_ns: Callable[[], int]):
        self.supervisor = supervisor
        self.vendor = vendor
        self.max_state_age_s = max_state_age_s
        self.health_poll_s = health_poll_s
        self.fault = fault
        self.intervene = intervene
        self.recovering = recovering
        self.clock_ns = clock_ns
        self._next_health_at = 0.0
        self._reported = ""  # the last fault the health poll reported (each is reported once)

    def stale(self, stamp_ns: int | None) -> list[tuple[str, str]]:
        """A reading stamped ``stamp_ns`` that is too old, as (kind, reason); none while a recovery runs."""
        if stamp_ns is None or self.recovering():
            return []
        age_s = (self.clock_ns() - stamp_ns) / 1e9
        if age_s <= self.max_state_age_s:
            return []
        return [(VENDOR_TIMEOUT, f"the arm's joint states are {age_s:.2f} s old (max_state_age_s "
                                 f"{self.max_state_age_s:g}): {self.vendor} stopped reporting")]

    def health_due(self, now: float) -> bool:
        """Whether to poll the arm's health at ``now`` (monotonic s); the next poll is then ``health_poll_s`` on."""
        if now < self._next_health_at:
            return False
        self._next_health_at = now + self.health_poll_s
        return True

    def on_health(self, call: VendorCall) -> None:
        """The health poll's outcome: a list of (kind, reason), the first new one a fault."""
        if call.state != DONE:
            if call.state != EXPIRED and self.supervisor.recovery_required is None:
                self.fault(ROBOT_ERROR, f"the health poll failed: {call.error!r}")
            return
        for kind, reason in call.result or []:
            if reason == self._reported:
                break
            self._reported = reason
            if self.supervisor.recovery_required is None:
                self.fault(kind, reason)
            else:  # a fault is pending already: what the motors say about it is reported beside it
                self.intervene(kind, f"while a fault is pending: {reason}")
            break

    def forget_reported(self) -> None:
        """After a recovery: a fault the poll reported before is reported again if it comes back."""
        self._reported = ""
