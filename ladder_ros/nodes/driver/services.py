"""What the operator can ask of a robot driver: arm or disarm, e-stop and release, home, recover.

:class:`OperatorServices` serves the ``robot/*`` services (:mod:`ladder_ros.specs.topics`) on the driver node. Every
service answers at once and republishes the safety state; homing moves through the control loop
(:class:`~ladder_ros.nodes.driver.homing.Homing`), and :class:`Recovery` runs the vendor's recovery on the
vendor-call worker, its outcome arriving in ``robot/safety_state``. The robot stays disarmed after a recovery and
after an e-stop is released: only ``robot/arm`` arms it.
"""

from __future__ import annotations

from typing import Any, Callable

from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

from ladder_ros.core.safety import ESTOP, ROBOT_ERROR
from ladder_ros.core.safety_supervisor import SafetySupervisor
from ladder_ros.nodes.driver.faults import Fault, VendorCallRouter
from ladder_ros.nodes.driver.homing import Homing
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, VendorCall
from ladder_ros.specs import topics


class Recovery:
    """``robot/recover``'s vendor recovery: one at a time, on the worker, with its deadline; the robot disarmed.

    ``job`` is the driver's ``arm_recover_job`` hook; ``recovered`` runs after a confirmed recovery (restart what
    follows the arm's motion); a recovery that failed is a ``fault``; starting one drops the way home
    (``cancel_homing``).
    """

    def __init__(self, supervisor: SafetySupervisor, calls: VendorCallRouter, job: Callable[[], Callable[[], str]],
                 deadline_s: float, *, cancel_homing: Callable[[], None], recovered: Callable[[], None], fault: Fault,
                 publish_state: Callable[..., None], logger: Any):
        self.supervisor = supervisor
        self.calls = calls
        self.job = job
        self.deadline_s = deadline_s
        self.cancel_homing = cancel_homing
        self.recovered = recovered
        self.fault = fault
        self.publish_state = publish_state
        self.logger = logger
        self._call: VendorCall | None = None

    @property
    def running(self) -> bool:
        return self._call is not None

    def start(self) -> tuple[bool, str]:
        """Disarm and start the vendor's recovery; (started, what happens next)."""
        if self._call is not None:
            return False, "a recovery is already running"
        self.supervisor.disarm("recovering")
        self.supervisor.set_not_ready("recovering")
        self.cancel_homing()
        self._call = self.calls.run("recovery", self.job(), self.deadline_s, self._on_end)
        return True, (f"recovery started (deadline {self.deadline_s:g} s); robot/safety_state reports its outcome; "
                      "the robot stays disarmed")

    def _on_end(self, call: VendorCall) -> None:
        self._call = None
        self.supervisor.set_not_ready(None)
        if call.state == DONE:
            self.supervisor.recovered(str(call.result))
            self.recovered()
            self.logger.warning(f"recovered: {call.result}; the robot stays disarmed")
        elif call.state != EXPIRED:  # an expired recovery is a vendor_timeout fault already
            self.fault(ROBOT_ERROR, f"recovery failed: {call.error!r}")
        self.publish_state(force=True)


class OperatorServices:
    """The ``robot/*`` services of a robot driver node (module docstring).

    ``reseed`` forgets the previous target once the robot is armed; ``stop`` stops the arm (disarming, the first
    e-stop); ``gap`` marks a gap in the control timing and ``intervene(kind, reason, counted=...)`` counts and
    publishes (the first e-stop); ``recover`` starts a recovery; ``publish_state(force=...)`` republishes the
    safety state.
    """

    def __init__(self, node: Node, supervisor: SafetySupervisor, homing: Homing, *, reseed: Callable[[], None],
                 stop: Callable[[], None], gap: Callable[[], None], intervene: Callable[..., None],
                 recover: Callable[[], tuple[bool, str]], publish_state: Callable[..., None]):
        self.node = node
        self.supervisor = supervisor
        self.homing = homing
        self.reseed = reseed
        self.stop = stop
        self.gap = gap
        self.intervene = intervene
        self.recover = recover
        self.publish_state = publish_state
        node.create_service(SetBool, topics.ARM_SERVICE, self._on_arm)
        node.create_service(Trigger, topics.ESTOP_SERVICE, self._on_estop)
        node.create_service(Trigger, topics.ESTOP_RELEASE_SERVICE, self._on_release)
        node.create_service(Trigger, topics.HOME_SERVICE, self._on_home)
        node.create_service(Trigger, topics.RECOVER_SERVICE, self._on_recover)

    def _on_arm(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        try:
            if request.data:
                ok, message = self.supervisor.arm()
                if ok:
                    self.reseed()
            else:
                ok, message = self.supervisor.disarm()
                self.homing.cancel()
                self.stop()
            response.success, response.message = ok, message
        except Exception as exc:
            response.success, response.message = False, f"error: {exc!r}"
        self.node.get_logger().warning(f"{topics.ARM_SERVICE} {request.data}: {response.message}")
        self.publish_state(force=True)
        return response

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        already = self.supervisor.estopped
        message = self.supervisor.estop()
        self.homing.cancel()
        if not already:
            self.stop()
            self.gap()
            self.intervene(ESTOP, "e-stop by the operator", counted=True)
        response.success, response.message = True, message
        self.node.get_logger().error(f"{topics.ESTOP_SERVICE}: {message}")
        self.publish_state(force=True)
        return response

    def _on_release(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.supervisor.release()
        self.node.get_logger().warning(f"{topics.ESTOP_RELEASE_SERVICE}: {response.message}")
        self.publish_state(force=True)
        return response

    def _on_home(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.homing.go()
        return response

    def _on_recover(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Start the vendor's recovery on the worker; its outcome arrives in ``robot/safety_state``."""
        response.success, response.message = self.recover()
        if response.success:
            self.node.get_logger().warning(f"{topics.RECOVER_SERVICE}: {response.message}")
            self.publish_state(force=True)
        return response
