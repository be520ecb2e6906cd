"""The operator's services of a robot driver: arm, e-stop, release, home, recover; and homing.

A mixin of :class:`~ladder_ros.nodes.driver.node.RobotDriverNode`, split from it by
responsibility. Every service answers at once: recovery runs on the vendor-call worker and its
outcome arrives in ``robot/safety_state``; homing moves through the control loop, half the
largest joint step per period.
"""

from __future__ import annotations

from std_srvs.srv import SetBool, Trigger

from ladder_ros.core.safety import ESTOP, ROBOT_ERROR
from ladder_ros.specs import topics
from ladder_ros.robots.kinematics import joint_path
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, VendorCall


class OperatorServices:
    """The ``robot/*`` services and homing of a robot driver node (module docstring)."""

    def create_operator_services(self) -> None:
        self.create_service(SetBool, topics.ARM_SERVICE, self._on_arm)
        self.create_service(Trigger, topics.ESTOP_SERVICE, self._on_estop)
        self.create_service(Trigger, topics.ESTOP_RELEASE_SERVICE, self._on_release)
        self.create_service(Trigger, topics.HOME_SERVICE, self._on_home)
        self.create_service(Trigger, topics.RECOVER_SERVICE, self._on_recover)

    # ------------------------------------------------------------------ services
    def _on_arm(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        assert self.supervisor is not None
        try:
            if request.data:
                ok, message = self.supervisor.arm()
                if ok:
                    self.arm_reseed()
            else:
                ok, message = self.supervisor.disarm()
                self.homing = []
                self.stop_arm()
            response.success, response.message = ok, message
        except Exception as exc:
            response.success, response.message = False, f"error: {exc!r}"
        self.get_logger().warning(f"{topics.ARM_SERVICE} {request.data}: {response.message}")
        self.publish_state(force=True)
        return response

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        assert self.supervisor is not None
        already = self.supervisor.estopped
        message = self.supervisor.estop()
        self.homing = []
        if not already:
            self.stop_arm()
            self.timing.gap()
            self.intervene(ESTOP, "e-stop by the operator", counted=True)
        response.success, response.message = True, message
        self.get_logger().error(f"{topics.ESTOP_SERVICE}: {message}")
        self.publish_state(force=True)
        return response

    def _on_release(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        assert self.supervisor is not None
        response.success, response.message = self.supervisor.release()
        self.get_logger().warning(f"{topics.ESTOP_RELEASE_SERVICE}: {response.message}")
        self.publish_state(force=True)
        return response

    def _on_home(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.go_home()
        return response

    def _on_recover(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Start the vendor's recovery on the worker; its outcome arrives in ``robot/safety_state``."""
        assert self.supervisor is not None
        if self._recovery is not None:
            response.success, response.message = False, "a recovery is already running"
            return response
        self.supervisor.disarm("recovering")
        self.supervisor.set_not_ready("recovering")
        self.homing = []
        deadline = self.params["recover_timeout_s"]
        self._recovery = self.run_blocking("recovery", self.arm_recover_job(), deadline, self._on_recovered)
        response.success = True
        response.message = (f"recovery started (deadline {deadline:g} s); robot/safety_state reports its outcome; the "
                            "robot stays disarmed")
        self.get_logger().warning(f"{topics.RECOVER_SERVICE}: {response.message}")
        self.publish_state(force=True)
        return response

    def _on_recovered(self, call: VendorCall) -> None:
        assert self.supervisor is not None
        self._recovery = None
        self.supervisor.set_not_ready(None)
        if call.state == DONE:
            self._health_reported = ""
            self.supervisor.recovered(str(call.result))
            self.arm_recovered()
            self.get_logger().warning(f"recovered: {call.result}; the robot stays disarmed")
        elif call.state != EXPIRED:  # an expired recovery is a vendor_timeout fault already
            self.fault(ROBOT_ERROR, f"recovery failed: {call.error!r}")
        self.publish_state(force=True)

    # ------------------------------------------------------------------ homing
    def go_home(self) -> tuple[bool, str]:
        """Open the gripper and move to the home joints through the control loop (armed, no e-stop)."""
        assert self.supervisor is not None
        if self.supervisor.estopped or not self.supervisor.armed:
            return False, "refused: homing moves the arm; arm the robot first (and release any e-stop)"
        try:
            current, home, max_step = self.arm_home_start()
            self.homing = joint_path(current, home, max_step * 0.5)
        except Exception as exc:
            return False, f"cannot home: {exc!r}"
        return True, f"homing in {len(self.homing)} steps of {1000 * self.period:.0f} ms"

    def _step_homing(self) -> None:
        assert self.supervisor is not None
        if not self.supervisor.armed or self.supervisor.estopped:
            self.homing = []
            return
        target = self.homing.pop(0)
        self.arm_send_home_step(target, last=not self.homing)
        if not self.homing:
            self.arm_reseed()
            self.get_logger().info("home")
