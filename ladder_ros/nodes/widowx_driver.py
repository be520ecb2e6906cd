"""The WidowX 250 driver: Bridge end-effector deltas in, joint targets to Interbotix's Python API out."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import (
    ACTION_AXES,
    GRIPPER,
    GRIPPER_FAULT,
    JUMP,
    MALFORMED,
    MOTOR_ERROR,
    STALL,
    UNREACHABLE,
    WORKSPACE,
    ActionFilter,
    JointTargetFilter,
    WorkspaceBox,
)
from ladder_ros.core.safety_supervisor import Permission
from ladder_ros.nodes.robot_parameters import WIDOWX_DRIVER
from ladder_ros.nodes.robot_driver import ArmSnapshot, RobotDriverNode, StopOutcome
from ladder_ros.nodes.runtime import run_node
from ladder_ros.robots import wx250s
from ladder_ros.robots.arm_health import GripperMonitor, TrackingMonitor
from ladder_ros.robots.ee_target import BridgeTarget
from ladder_ros.robots.gripper import ApertureRange
from ladder_ros.robots.interbotix_arm import InterbotixApi, InterbotixArm, vendor_api


def load_api(name: str, xs_sdk: str = "in_process", *, robot_name: str = "", node_name: str = "",
             namespace: str = "") -> InterbotixApi:
    """``vendor``: Interbotix's installed API; ``twin``: the simulated WidowX behind the same surface, its
    xs_sdk in this process (``in_process``) or the ``widowx_twin`` node's over ROS (``remote``)."""
    if name == "twin":
        from ladder_ros.sim import widowx_twin
        if xs_sdk == "remote":
            widowx_twin.connect_remote(robot_name, node_name=node_name, namespace=namespace)
        return widowx_twin.api()
    return vendor_api()


class WidowXDriverNode(RobotDriverNode):
    """Drives a WidowX 250 (wx250s) at 5 Hz the way Bridge policies were trained to act.

    Each ``policy/action`` (the 7-D action contract: metres, intrinsic Euler XYZ radians, gripper
    +1 open / -1 closed) passes the action filter (the sim bridge's bounds), moves the end-effector
    *target* (deltas on the previous target, the position clipped into the workspace box, counted),
    is solved to joints by the driver's own inverse kinematics from the previous joint target
    (:mod:`ladder_ros.robots.kinematics`, about a millisecond, instead of the API's blocking solve),
    is checked against the joint limits and the largest step, and is sent with
    ``set_joint_positions(..., blocking=False)``; the gripper opens or closes without waiting.
    Before the robot can be armed, and after every recovery, the motion profile is written to the
    motors and read back (:mod:`ladder_ros.robots.interbotix_arm`). A joint that stops following
    its command (:class:`~ladder_ros.robots.arm_health.TrackingMonitor`), a motor in error or with
    its torque off (its registers, polled every ``health_poll_s`` on the vendor-call worker) and a
    gripper that does not arrive are faults: the arm holds, disarmed, until ``robot/recover``.

    Topics: subscribes ``policy/action`` (trajectory_msgs/JointTrajectory), ``episode/status``;
    publishes ``joint_states`` (sensor_msgs/JointState: the six arm joints in rad and rad/s plus
    ``gripper_aperture`` in [0, 1] from the left finger, 0.010 m closed to 0.035 m open),
    ``ee_pose`` (geometry_msgs/PoseStamped: forward kinematics of the measured joints, base frame,
    m and quaternion), ``robot/joint_command``, ``safety/interventions``, ``robot/safety_state``
    (latched), ``/diagnostics`` (control period and jitter in ms, inverse kinematics time, the arm
    state's age).
    Services: ``robot/arm`` (std_srvs/SetBool), ``robot/estop``, ``robot/estop_release``,
    ``robot/home``, ``robot/recover`` (std_srvs/Trigger).
    Parameters: ``WIDOWX_DRIVER`` in :mod:`ladder_ros.nodes.robot_parameters` (the shared driver parameters
    and interbotix_api, twin_xs_sdk, robot_model, robot_name, moving_time_s (s), accel_time_s (s),
    gripper_pressure, finger_closed_m (m), finger_open_m (m), workspace_low (m), workspace_high (m),
    home_joints (rad), ik_max_iterations, tracking_tolerance_rad (rad), command_latency_s (s), stall_readings,
    gripper_timeout_s (s)).
    """

    vendor = "the Interbotix API"

    def __init__(self, *, node_name: str = "widowx_driver", **node_options):
        super().__init__(node_name, "widowx_driver", WIDOWX_DRIVER, **node_options)
        p = self.params
        if self.preset.action_limits is None:
            raise ConfigError(f"preset {self.preset.name} has no action limits; the driver applies no action "
                              "without them")
        self.filter = ActionFilter(self.preset.action_limits)
        self.chain = wx250s.chain(self.period)
        self.joint_filter = JointTargetFilter(self.chain.limits, counter=self.filter)
        self.target = BridgeTarget(WorkspaceBox(tuple(p["workspace_low"]), tuple(p["workspace_high"]),
                                                source=f"{self.get_name()} parameters"), p["speed_scale"])
        self.home_joints = np.array(p["home_joints"])
        if not self.chain.within_limits(self.home_joints):
            raise ConfigError(f"parameter {self.get_name()}.home_joints: outside the wx250s joint limits, got "
                              f"{p['home_joints']}")
        api = load_api(p["interbotix_api"], p["twin_xs_sdk"], robot_name=p["robot_name"],
                       node_name=f"{self.get_name()}_xs_sdk", namespace=self.get_namespace())
        self.arm = InterbotixArm(api, robot_model=p["robot_model"],
                                 robot_name=p["robot_name"], moving_time_s=p["moving_time_s"],
                                 accel_time_s=p["accel_time_s"], gripper_pressure=p["gripper_pressure"],
                                 finger_range=ApertureRange(p["finger_closed_m"], p["finger_open_m"],
                                                            source="Bridge finger normalisation"),
                                 connect_timeout_s=p["connect_timeout_s"], node_name=f"{self.get_name()}_interbotix",
                                 namespace=self.get_namespace())
        self.tracking = TrackingMonitor(wx250s.JOINT_NAMES, self.arm.velocity_limits, p["tracking_tolerance_rad"],
                                        p["stall_readings"], latency_s=p["command_latency_s"])
        self.gripper_monitor = GripperMonitor(*reversed(self.arm.finger_limits), timeout_s=p["gripper_timeout_s"])
        self._torqued_off = False  # the driver turned the torque off itself (its last resort)
        self.joint_target: np.ndarray | None = None  # the last joint target (sent, or computed in dry run)
        self.ik_ms: deque[float] = deque(maxlen=200)
        self.ik_iterations: deque[int] = deque(maxlen=200)
        self.start(self.filter)

    # ------------------------------------------------------------------ state
    def arm_read(self) -> ArmSnapshot:
        reading = self.arm.read()
        return ArmSnapshot(wx250s.JOINT_NAMES, reading.joints, reading.aperture, self.chain.forward(reading.joints),
                           reading.velocities, reading.stamp_ns)

    def _seed_from_arm(self) -> None:
        reading = self.arm.read()
        self.joint_target = reading.joints.copy()
        self.target.seed(self.chain.forward(reading.joints), gripper_open=reading.aperture >= 0.5)

    def arm_reseed(self) -> None:
        self.joint_target = None
        self.target.pose = None

    # ------------------------------------------------------------------ actions
    def _refuse(self, kind: str, reason: str, **where: Any) -> None:
        """An action the filter passed but the arm cannot take: not applied after all; counted, published."""
        self.filter.applied -= 1
        self.intervene(kind, reason, **where)

    def _send(self, joints: np.ndarray, now: float) -> bool:
        sent = self.arm.send_joints(joints)
        if sent:
            self.tracking.commanded(joints, now)
        return sent

    def _send_gripper(self, open_: bool, now: float) -> None:
        if self.arm.send_gripper(open_):
            self.gripper_monitor.commanded(open_, self.arm.read().finger_m, now)

    def arm_apply(self, msg: JointTrajectory, now: float) -> None:
        if tuple(msg.joint_names) != ACTION_AXES or len(msg.points) != 1:
            self.intervene(MALFORMED, f"an action is one trajectory point over {list(ACTION_AXES)}, got "
                                      f"{len(msg.points)} points over {list(msg.joint_names)}")
            return
        result = self.filter.check(msg.points[0].positions)
        if not result.applied:
            self.intervene(str(result.kind), result.reason, axis=result.axis, value=result.value, limit=result.limit,
                           counted=True)
            return
        if self.joint_target is None or not self.target.seeded:
            self._seed_from_arm()
        assert self.joint_target is not None
        pose, clipped = self.target.propose(result.action)
        if clipped:
            box = self.target.workspace
            self.intervene(WORKSPACE, f"target clipped into the workspace box on {', '.join(clipped)} (low "
                                      f"{list(box.low)}, high {list(box.high)} m)", axis=",".join(clipped))
        started = time.perf_counter()
        ik = self.chain.inverse(pose, self.joint_target, max_iterations=self.params["ik_max_iterations"])
        self.ik_ms.append((time.perf_counter() - started) * 1000.0)
        self.ik_iterations.append(ik.iterations)
        if not ik.success:
            self._refuse(UNREACHABLE, f"no joints reach the target at {np.round(pose[:3, 3], 4).tolist()} m: "
                                      f"{ik.reason}")
            return
        joints = self.joint_filter.check(ik.joints, self.joint_target)
        if not joints.applied:
            self._refuse(str(joints.kind), joints.reason, axis=joints.axis, value=joints.value, limit=joints.limit)
            return
        gripper = float(result.action[GRIPPER])
        permission = self.permit(now)
        if permission in (Permission.ESTOP, Permission.VERIFYING):
            return  # held: the target does not move
        self.target.commit(pose, gripper)
        self.joint_target = ik.joints
        self.publish_command(wx250s.JOINT_NAMES, ik.joints, 1.0 if gripper > 0 else 0.0)
        if permission is Permission.MOVE:
            if not self._send(ik.joints, now):
                self.intervene(JUMP, "the Interbotix API refused the joint target (its joint or velocity limit "
                                     "check, measured from its last commanded joints); the arm is stopped")
                self.stop_arm()
                return
            self._send_gripper(gripper > 0, now)

    def arm_stop(self) -> StopOutcome:
        outcome = self.arm.hold()
        if not outcome.held:
            return StopOutcome(False, outcome.how, refused=True, last_resort=self._torque_off)
        self.tracking.commanded(outcome.joints, time.monotonic())
        self.joint_target = np.asarray(outcome.joints, dtype=np.float64)
        self.target.seed(self.chain.forward(self.joint_target))
        return StopOutcome(True, outcome.how, refused=outcome.refused)

    def _torque_off(self) -> str:
        """The last resort (blocking, on the worker): no hold could be sent, so the motors stop driving the arm."""
        self._torqued_off = True
        return self.arm.torque_off()

    # ------------------------------------------------------------------ faults the arm shows
    def arm_check(self, snapshot: ArmSnapshot, now: float) -> list[tuple[str, str]]:
        faults = []
        if snapshot.stamp_ns is not None:
            read_at = now - (self.get_clock().now().nanoseconds - snapshot.stamp_ns) / 1e9
            stalled = self.tracking.check(snapshot.joints, read_at)
            if stalled is not None:
                faults.append((STALL, f"{stalled.describe()} (blocked, faulted or without torque); the arm holds"))
        late = self.gripper_monitor.check(self.arm.read().finger_m, now)
        if late is not None:
            faults.append((GRIPPER_FAULT, late))
        return faults

    def arm_settles_at(self) -> float | None:
        return self.tracking.settles_at()

    def arm_health_job(self) -> Callable[[], list[tuple[str, str]]]:
        return self._poll_motors

    def _poll_motors(self) -> list[tuple[str, str]]:
        """Blocking, on the worker: the motors' error and torque registers."""
        faults = self.arm.read_faults()
        if faults.errors or (faults.torque_off and not self._torqued_off):
            return [(MOTOR_ERROR, f"{faults.describe()}; the arm holds")]
        return []

    def arm_ready_job(self) -> Callable[[], str]:
        return self.arm.verify_profile

    def arm_recover_job(self) -> Callable[[], str]:
        return self.arm.recover

    def arm_recovered(self) -> None:
        self._torqued_off = False
        reading = self.arm.read()
        self.tracking.start(reading.joints, reading.velocities, time.monotonic(), self.arm.profile)
        self.gripper_monitor.cancel()
        self.arm_reseed()

    # ------------------------------------------------------------------ homing
    def arm_home_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._send_gripper(True, time.monotonic())
        current = self.joint_target if self.joint_target is not None else self.arm.read().joints
        return current, self.home_joints, np.array(self.chain.limits.max_step)

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        self.joint_target = np.asarray(joints, dtype=np.float64)
        self.publish_command(wx250s.JOINT_NAMES, self.joint_target, 1.0)
        if not self._send(self.joint_target, time.monotonic()):
            self.homing = []
            self.intervene(JUMP, "the Interbotix API refused a homing step; homing stopped")

    def arm_diagnostics(self) -> dict[str, Any]:
        ik = np.array(self.ik_ms) if self.ik_ms else None
        return {"ik_p50_ms": None if ik is None else float(np.percentile(ik, 50)),
                "ik_p99_ms": None if ik is None else float(np.percentile(ik, 99)),
                "ik_iterations_max": max(self.ik_iterations) if self.ik_iterations else None,
                "interbotix_api": self.arm.api.name, "interbotix_node": self.arm.node_name}

    def hardware_id(self) -> str:
        return f"{self.params['robot_model']}:{self.params['robot_name']}"

    def close(self) -> None:
        self.arm.close()
        super().close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("widowx_driver", WidowXDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
