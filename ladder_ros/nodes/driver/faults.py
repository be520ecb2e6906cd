"""How a robot driver stops its arm, handles faults, and runs the vendor calls that can block.

A mixin of :class:`~ladder_ros.nodes.driver.node.RobotDriverNode` (it uses the node's supervisor,
worker, reporter and ``arm_*`` hooks), split from it by responsibility:

* **Stopping** (e-stop, watchdog, faults, disarming): the subclass stops the arm and says how
  (:class:`StopOutcome`); a stop the arm's API refused escalates to the subclass's last resort (the
  WidowX turns its torque off, on the worker), and the supervisor's state says what happened.
* **Faults** (``fault``): counted, disarmed, the arm stopped; arming waits for a confirmed recovery.
* **Vendor calls** (``run_blocking``): every call that can block runs on the
  :class:`~ladder_ros.robots.vendor_calls.VendorCallWorker` with a deadline and ends in a handler on
  the node's thread; a call past its deadline is a ``vendor_timeout`` fault. The start-up check, the
  health poll and a stale arm state are handled here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ladder_ros.core.safety import HOLD_REFUSED, ROBOT_ERROR, VENDOR_TIMEOUT
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, LATE, VendorCall

if TYPE_CHECKING:
    from ladder_ros.nodes.driver.node import ArmSnapshot


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


class ArmStopping:
    """Stopping, faults and vendor calls of a robot driver node (module docstring)."""

    # ------------------------------------------------------------------ stopping and faults
    def stop_arm(self) -> None:
        """Stop the arm now; escalate a refused stop; the state says how it went (module docstring)."""
        assert self.supervisor is not None
        try:
            outcome = self.arm_stop()
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
            self.run_blocking("last-resort stop", outcome.last_resort, self.params["vendor_call_timeout_s"],
                              lambda call: self._on_last_resort(outcome.how, call))
        self.intervene(HOLD_REFUSED, outcome.how, counted=True)

    def _on_last_resort(self, how: str, call: VendorCall) -> None:
        assert self.supervisor is not None
        if call.state == DONE:
            self.supervisor.note_stop(f"{how}; {call.result}")
        else:
            self.supervisor.note_stop(f"{how}; the last resort failed ({call.describe()}): use the hardware e-stop")
            self.get_logger().error(f"the arm could not be stopped: {call.describe()}: use the hardware e-stop")
        self.publish_state()

    def fault(self, kind: str, reason: str) -> None:
        """A fault: counted, disarmed, the arm stopped; arming waits for a confirmed recovery."""
        assert self.supervisor is not None
        self.supervisor.fault(kind, reason)
        self.homing = []
        self.stop_arm()
        self.intervene(kind, reason, counted=True)

    # ------------------------------------------------------------------ vendor calls
    def run_blocking(self, name: str, function: Callable[[], Any], deadline_s: float,
                     on_end: Callable[[VendorCall], None] | None = None) -> VendorCall:
        """Run a blocking vendor call on the worker; ``on_end`` gets it when it ended or missed its deadline."""
        call = self.worker.submit(name, function, deadline_s)
        if on_end is not None:
            self._handlers[id(call)] = on_end
        return call

    def _poll_vendor_calls(self) -> None:
        for call in self.worker.poll():
            if call.state == LATE:
                self.get_logger().warning(f"{self.vendor}: {call.describe()}")
                continue
            handler = self._handlers.pop(id(call), None)
            if call.state == EXPIRED:
                self.fault(VENDOR_TIMEOUT, f"{self.vendor} did not answer ({call.describe()}); the robot stays "
                                           "disarmed until a recovery succeeds")
            if handler is not None:
                handler(call)

    def _on_ready_checked(self, call: VendorCall) -> None:
        assert self.supervisor is not None
        if call.state == DONE:
            self.supervisor.set_not_ready(None)
            self.arm_recovered()
            self.get_logger().info(f"ready to arm: {call.result}")
        else:
            reason = f"start-up check failed: {call.error}" if call.error is not None else call.describe()
            self.supervisor.set_not_ready(reason)
            self.get_logger().error(f"the robot cannot be armed: {reason}")
        self.publish_state(force=True)

    def _stale(self, snapshot: "ArmSnapshot") -> list[tuple[str, str]]:
        if snapshot.stamp_ns is None or self._recovery is not None:
            return []
        age_s = (self.get_clock().now().nanoseconds - snapshot.stamp_ns) / 1e9
        if age_s <= self.params["max_state_age_s"]:
            return []
        return [(VENDOR_TIMEOUT, f"the arm's joint states are {age_s:.2f} s old (max_state_age_s "
                                 f"{self.params['max_state_age_s']:g}): {self.vendor} stopped reporting")]

    def _on_health(self, call: VendorCall) -> None:
        assert self.supervisor is not None
        if call.state != DONE:
            if call.state != EXPIRED and self.supervisor.recovery_required is None:
                self.fault(ROBOT_ERROR, f"the health poll failed: {call.error!r}")
            return
        for kind, reason in call.result or []:
            if reason == self._health_reported:
                break
            self._health_reported = reason
            if self.supervisor.recovery_required is None:
                self.fault(kind, reason)
            else:  # a fault is pending already: what the motors say about it is reported beside it
                self.intervene(kind, f"while a fault is pending: {reason}")
            break
