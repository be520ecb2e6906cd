"""The WidowX 250 driver: Bridge end-effector deltas in, joint targets to Interbotix's Python API out."""

from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

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
from ladder_ros.specs.robot_parameters import WIDOWX_DRIVER
from ladder_ros.nodes.driver.faults import StopOutcome
from ladder_ros.nodes.driver.node import ArmSnapshot, RobotDriverNode
from ladder_ros.nodes.driver.paced import PacedCommand, PacedCommands
from ladder_ros.runtime.process import run_node
from ladder_ros.robots import thread_scheduling, wx250s
from ladder_ros.robots.arm_health import EffortStallDetector, GripperMonitor, TrackingMonitor
from ladder_ros.robots.ee_target import BridgeTarget
from ladder_ros.robots.gripper import ApertureRange
from ladder_ros.robots.interbotix_arm import InterbotixArm, load_api

# Project choices, measured in the dress rehearsal (docs/rehearsal.md; benchmarks/bench_rehearsal.py):
# each action reaches the arm this long after its stamp, on the control grid (APPLY_DELAY_PERIODS control
# periods: 20 ms at 5 Hz), more than its way from the policy to the vendor call takes on a busy two-core machine,
# p99, with the priority below (the way itself varied by up to 30 ms there, and the arm's period with it while
# each action was sent on arrival);
APPLY_DELAY_PERIODS = 0.1
# the driver process's niceness and GIL switch interval (thread_scheduling.favour), set by main() only.
CONTROL_NICENESS = -10
SWITCH_INTERVAL_S = 0.001
# the motors' efforts are judged this often (xs_sdk publishes at 100 Hz): a blocked joint is held within
# stall_confirm_s plus this (project choice).
EFFORT_CHECK_S = 0.05


class WidowXDriverNode(RobotDriverNode):
    """Drives a WidowX 250 (wx250s) at 5 Hz the way Bridge policies were trained to act.

    Each ``policy/action`` (the 7-D action contract: metres, intrinsic Euler XYZ radians, gripper
    +1 open / -1 closed) passes the action filter (the sim bridge's bounds), moves the end-effector
    *target* (deltas on the previous target, the position clipped into the workspace box, counted),
    is solved to joints by the driver's own inverse kinematics from the previous joint target
    (:mod:`ladder_ros.robots.kinematics`, about a millisecond, instead of the API's blocking solve),
    is checked against the joint limits and the largest step, all when it arrives; then it is sent
    with ``set_joint_positions(..., blocking=False)`` at its moment on the control grid (its stamp plus
    ``APPLY_DELAY_PERIODS`` control periods, held to whole periods from the previous action:
    :class:`~ladder_ros.robots.pacing.ControlGrid`), by a thread that makes only that call
    (:class:`~ladder_ros.nodes.driver.paced.PacedCommands`): the arm's period is the control period, not the
    policy's plus the varying time each action took to be stamped, arrive and be computed. The
    gripper opens or closes with it, without waiting. ``robot/joint_command`` is published once the command went out,
    stamped with the moment of the vendor call (in dry run: the moment it would have).
    Before the robot can be armed, and after every recovery, the motion profile is written to the
    motors and read back (:mod:`ladder_ros.robots.interbotix_arm`). A joint that stops following
    its command is a stall: at once, checked every ``EFFORT_CHECK_S``, when its motor has pushed at its limit while
    it lagged its goal (:class:`~ladder_ros.robots.arm_health.EffortStallDetector`), else once it is off its
    profile (:class:`~ladder_ros.robots.arm_health.TrackingMonitor`). A motor in error or with
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
    Parameters: ``WIDOWX_DRIVER`` in :mod:`ladder_ros.specs.robot_parameters` (the shared driver parameters
    and interbotix_api, twin_xs_sdk, robot_model, robot_name, moving_time_s (s), accel_time_s (s),
    gripper_pressure, finger_closed_m (m), finger_open_m (m), workspace_low (m), workspace_high (m),
    home_joints (rad), ik_max_iterations, tracking_tolerance_rad (rad), command_latency_s (s), stall_readings,
    stall_effort_ma (mA), stall_lag_rad (rad), stall_confirm_s (s), gripper_timeout_s (s)).
    """

    vendor = "the Interbotix API"

    def __init__(self, *, node_name: str = "widowx_driver", favoured: thread_scheduling.Favoured | None = None,
                 **node_options):
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
        self.effort_stall = EffortStallDetector(wx250s.JOINT_NAMES, p["stall_effort_ma"], p["stall_lag_rad"],
                                                p["stall_confirm_s"])
        self.gripper_monitor = GripperMonitor(*reversed(self.arm.finger_limits), timeout_s=p["gripper_timeout_s"])
        self._torqued_off = False  # the driver turned the torque off itself (its last resort)
        self.joint_target: np.ndarray | None = None  # the last joint target (sent, or computed in dry run)
        self.ik_ms: deque[float] = deque(maxlen=200)
        self.ik_iterations: deque[int] = deque(maxlen=200)
        self.favoured = favoured
        if favoured is not None:
            log = self.get_logger().warning if favoured.refused else self.get_logger().info
            log(f"control process: {favoured.describe()}")
        paced_ready = self.create_guard_condition(self._on_paced)
        self.paced = PacedCommands(f"{self.get_name()}-commands", int(self.period * 1e9),
                                   int(APPLY_DELAY_PERIODS * self.period * 1e9), self.arm, self._may_move,
                                   self.reporter.now_ns, paced_ready.trigger)
        self.start(self.filter)
        self.create_timer(EFFORT_CHECK_S, self._on_effort_check)

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
        with self._arm_calls():  # a command of the previous target not sent yet is not sent
            pass
        self.paced.reset()
        self.joint_target = None
        self.target.pose = None

    # ------------------------------------------------------------------ actions
    def _refuse(self, kind: str, reason: str, **where: Any) -> None:
        """An action the filter passed but the arm cannot take: not applied after all; counted, published."""
        self.filter.applied -= 1
        self.intervene(kind, reason, **where)

    def _send(self, joints: np.ndarray, now: float) -> bool:
        """On this thread, inside :meth:`_arm_calls`: a joint target now."""
        sent = self.arm.send_joints(joints)
        if sent:
            self.tracking.commanded(joints, now)
        return sent

    def _send_gripper(self, open_: bool, now: float) -> None:
        """On this thread, inside :meth:`_arm_calls`: a gripper command now."""
        if self.arm.send_gripper(open_):
            self.gripper_monitor.commanded(open_, self.arm.read().finger_m, now)

    # ------------------------------------------------------------------ paced commands
    def plan_application(self, stamp_ns: int, now_ns: int) -> int:
        return self.paced.plan(stamp_ns, now_ns)

    @contextmanager
    def _arm_calls(self) -> Iterator[None]:
        """This thread's own motion calls (a hold, homing): paced commands not sent yet dropped, those sent
        accounted for first (in the order they reached the arm), none sent until the block ends."""
        with self.paced.held():
            failed = self._account_paced()
            yield
        for failure in failed:  # the stop that follows is the caller's (it is stopping, or moving anew)
            self._paced_failed(failure, stop=False)

    def _may_move(self) -> bool:
        """On the pacer's thread: every stop cancels the paced commands; this is a second check."""
        supervisor = self.supervisor
        return supervisor is not None and supervisor.armed and not supervisor.estopped

    def _on_paced(self) -> None:
        """On the node's thread: what the pacer sent is tracked, published and, when refused, stops the arm."""
        try:
            failed = self._account_paced()
        except Exception as exc:  # as in _on_action: stop, say why
            self.get_logger().error(f"paced command not accounted for (stopping the arm): {exc!r}")
            self.stop_arm()
            return
        for i, failure in enumerate(failed):
            self._paced_failed(failure, stop=i == len(failed) - 1)
        self.publish_state()

    def _account_paced(self) -> list[BaseException | None]:
        """Track and publish the commands the pacer made, in order; those that failed: the exception a vendor call
        raised, or None for a joint target the API refused."""
        return self.paced.drain(self._account)

    def _account(self, paced: PacedCommand) -> None:
        if paced.sent:
            self.tracking.commanded(paced.joints, paced.at)
            self.timing.tick(paced.at)
            if paced.gripper_sent:
                self.gripper_monitor.commanded(paced.gripper_open, self.arm.read().finger_m, paced.at)
        self.publish_command(wx250s.JOINT_NAMES, paced.joints, 1.0 if paced.gripper_open else 0.0,
                             stamp_ns=paced.stamp_ns)

    def _paced_failed(self, error: BaseException | None, stop: bool) -> None:
        """A paced command the API refused (``error`` None: a jump, counted) or that raised: said, the arm stopped."""
        if error is None:
            self.intervene(JUMP, "the Interbotix API refused the joint target (its joint or velocity limit "
                                 "check, measured from its last commanded joints); the arm is stopped")
        else:
            self.get_logger().error(f"action not applied (stopping the arm): {error!r}")
        if stop:
            self.stop_arm()

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
        permission = self.permit(now, tick=False)  # the control tick is counted when the command goes out
        if permission in (Permission.ESTOP, Permission.VERIFYING):
            return  # held: the target does not move
        self.target.commit(pose, gripper)
        self.joint_target = ik.joints
        self.paced.send(ik.joints, gripper > 0, permission is Permission.MOVE)

    def arm_stop(self) -> StopOutcome:
        with self._arm_calls():
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

    def _on_effort_check(self) -> None:
        """The latest joint state: a joint pushing at its motor's limit while it lags its goal is a stall at once."""
        supervisor = self.supervisor
        if supervisor is None or supervisor.recovery_required is not None:
            self.effort_stall.reset()  # judged afresh once recovered
            return
        try:
            reading = self.arm.read()
            at = time.monotonic() - (self.get_clock().now().nanoseconds - reading.stamp_ns) / 1e9
            stall = self.effort_stall.check(reading.joints, reading.velocities, reading.efforts,
                                            self.tracking.goals(at), at)
        except Exception as exc:  # a callback never lets an exception escape; the tracking rule still runs
            self.get_logger().error(f"the motors' efforts could not be judged: {exc!r}", throttle_duration_sec=1.0)
            return
        if stall is not None:
            self.fault(STALL, f"{stall.describe()}; the arm holds")

    def arm_settles_at(self) -> float | None:
        return self.tracking.settles_at()

    def arm_health_job(self) -> Callable[[], list[tuple[str, str]]]:
        return self._poll_motors

    def _poll_motors(self) -> list[tuple[str, str]]:
        """Blocking, on the worker: the motors' error and torque registers."""
        faults = self.arm.read_faults()
        if faults.errors:
            return [(MOTOR_ERROR, f"{faults.describe()} ({faults.explain()}); the arm holds until robot/recover "
                                  "reboots the motor")]
        if faults.torque_off and not self._torqued_off:
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
        with self._arm_calls():
            self._send_gripper(True, time.monotonic())
        current = self.joint_target if self.joint_target is not None else self.arm.read().joints
        return current, self.home_joints, np.array(self.chain.limits.max_step)

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        self.joint_target = np.asarray(joints, dtype=np.float64)
        with self._arm_calls():
            stamp_ns = self.get_clock().now().nanoseconds
            sent = self._send(self.joint_target, time.monotonic())
        self.publish_command(wx250s.JOINT_NAMES, self.joint_target, 1.0, stamp_ns=stamp_ns)
        if not sent:
            self.homing.cancel()
            self.intervene(JUMP, "the Interbotix API refused a homing step; homing stopped")

    def arm_diagnostics(self) -> dict[str, Any]:
        ik = np.array(self.ik_ms) if self.ik_ms else None
        return {"ik_p50_ms": None if ik is None else float(np.percentile(ik, 50)),
                "ik_p99_ms": None if ik is None else float(np.percentile(ik, 99)),
                "ik_iterations_max": max(self.ik_iterations) if self.ik_iterations else None,
                **self.paced.stats(),
                "niceness": None if self.favoured is None else self.favoured.niceness,
                "interbotix_api": self.arm.api.name, "interbotix_node": self.arm.node_name}

    def hardware_id(self) -> str:
        return f"{self.params['robot_model']}:{self.params['robot_name']}"

    def close(self) -> None:
        self.paced.close()
        self.arm.close()
        super().close()


def main(args: Sequence[str] | None = None) -> int:
    favoured = thread_scheduling.favour(CONTROL_NICENESS, SWITCH_INTERVAL_S)  # before any thread starts
    return run_node("widowx_driver", lambda: WidowXDriverNode(favoured=favoured), args)


if __name__ == "__main__":
    raise SystemExit(main())
