"""What the WidowX and Franka driver nodes share: the safety interface, the state streams, the watchdog.

:class:`RobotDriverNode` is the base of both drivers. It owns everything that is the same for any
arm: the ``policy/action`` subscription and the checks every action gets before the arm's own
(only the configured policy publishes, not stale, one per control period), the safety supervisor
(:mod:`ladder_ros.core.safety_supervisor`: dry run until armed, latched e-stop, watchdog, hold while
verifying) with its services and latched state, the joint-state and end-effector-pose streams,
the published and counted interventions, homing through the control loop, and the diagnostics
(control period and jitter). A driver subclass supplies the arm: how to read it, how an action
becomes a target, how to send and hold.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.safety import (
    DUPLICATE,
    FOREIGN_PUBLISHER,
    ROBOT_ERROR,
    STALE,
    WATCHDOG,
    InterventionCounts,
)
from ladder_ros.core.safety_supervisor import Permission, SafetySupervisor, SupervisorConfig
from ladder_ros.messages import RUNNING, WALL_CLOCK, EpisodeStatus, SafetyInterventionDoc
from ladder_ros.nodes import topics
from ladder_ros.nodes.parameters import NODE_CHECKS, ParamSpec
from ladder_ros.nodes.runtime import ActionSource, EpisodeFollower, declare_parameters, publisher, subscription
from ladder_ros.robots.kinematics import joint_path
from ladder_ros.robots.timing import ControlTiming
from ladder_ros.ros_conversions import (
    diagnostic_status,
    diagnostics_to_msg,
    document_to_msg,
    joint_state_to_msg,
    pose_matrix_to_msg,
    stamp_to_ns,
)

LEVELS = {0: "ok", 1: "warn", 2: "error"}  # the supervisor's level (armed, dry run, e-stop) as a diagnostic level


class ArmSnapshot:
    """One reading of the arm: joints (rad), aperture in [0, 1], end-effector pose (4x4, base frame)."""

    __slots__ = ("names", "joints", "aperture", "pose", "velocities")

    def __init__(self, names: Sequence[str], joints: np.ndarray, aperture: float, pose: np.ndarray,
                 velocities: np.ndarray | None = None):
        self.names, self.joints, self.aperture, self.pose, self.velocities = (
            tuple(names), np.asarray(joints, dtype=np.float64), float(aperture), pose, velocities)


class RobotDriverNode(Node):
    """Base of the robot drivers (see the module docstring); subclasses implement the ``arm_*`` hooks."""

    def __init__(self, node_name: str, executable: str, specs: Sequence[ParamSpec], **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, specs)
        rule = NODE_CHECKS.get(executable)
        if rule is not None:
            rule(self.params, self.get_name())
        if self.params["clock_mode"] != WALL_CLOCK:
            raise ConfigError(f"parameter {self.get_name()}.clock_mode: a robot driver runs on the wall clock, got "
                              f"{self.params['clock_mode']!r}")
        self.preset = get_preset(self.params["preset"])
        self.period = 1.0 / self.preset.control_rate_hz
        self.timing = ControlTiming(self.period)
        self.supervisor: SafetySupervisor | None = None
        self.snapshot: ArmSnapshot | None = None
        self.homing: list[np.ndarray] = []  # joint targets still to send to reach home
        self.action_ages_ms: deque[float] = deque(maxlen=200)
        self._last_action_stamp_ns: int | None = None  # the stamp of the last action let in
        self._stopped_for_watchdog_at: float | None = None
        self._state_values: dict[str, str] = {}
        self._joint_pub = publisher(self, JointState, topics.JOINT_STATES)
        self._pose_pub = publisher(self, PoseStamped, topics.EE_POSE)
        self._command_pub = publisher(self, JointState, topics.JOINT_COMMAND)
        self._safety_pub = publisher(self, String, topics.SAFETY)
        self._state_pub = publisher(self, DiagnosticStatus, topics.SAFETY_STATE)
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)

    # ------------------------------------------------------------------ start (after the subclass has its arm)
    def start(self, counts: InterventionCounts) -> None:
        """Begin serving: the supervisor counts into ``counts`` (the subclass's filter); timers, services, topics."""
        self.supervisor = SafetySupervisor(counts, SupervisorConfig(
            watchdog_s=self.params["watchdog_periods"] * self.period,
            hold_while_verifying=self.params["hold_while_verifying"]))
        self.create_service(SetBool, topics.ARM_SERVICE, self._on_arm)
        self.create_service(Trigger, topics.ESTOP_SERVICE, self._on_estop)
        self.create_service(Trigger, topics.ESTOP_RELEASE_SERVICE, self._on_release)
        self.create_service(Trigger, topics.HOME_SERVICE, self._on_home)
        self.create_service(Trigger, topics.RECOVER_SERVICE, self._on_recover)
        subscription(self, JointTrajectory, topics.ACTION, self._on_action)
        self.action_source = ActionSource(self, self.params["action_source"])
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end)
        self.create_timer(self.period, self._on_control_tick)
        self.create_timer(self.period / 4, self._on_watchdog_tick)
        self.create_timer(1.0, self._publish_diagnostics)
        self._publish_state(force=True)
        self.get_logger().info(f"{self.get_name()}: started DISARMED (dry run): commands are computed and recorded, "
                               f"nothing moves until {self.resolve_service_name(topics.ARM_SERVICE)} arms the robot")

    # ------------------------------------------------------------------ hooks
    def arm_read(self) -> ArmSnapshot:
        raise NotImplementedError

    def arm_apply(self, msg: JointTrajectory, now: float) -> None:
        """Check one action (layout, filter, target) and send or hold it as ``self.supervisor.permit`` says."""
        raise NotImplementedError

    def arm_hold(self) -> None:
        """Stop the arm where it is going now and keep it there (watchdog, e-stop, disarm)."""
        raise NotImplementedError

    def arm_reseed(self) -> None:
        """Forget the previous target: the next one starts from the measured state (arming, a new episode)."""

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        raise NotImplementedError

    def arm_home_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(current joints, home joints, largest step per period) for homing; opens the gripper."""
        raise NotImplementedError

    def arm_poll_error(self) -> str | None:
        return None

    def arm_recover(self) -> str:
        raise NotImplementedError

    def arm_diagnostics(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------------ actions
    def _on_action(self, msg: JointTrajectory) -> None:
        try:
            now = time.monotonic()
            age_s = (self.get_clock().now().nanoseconds - stamp_to_ns(msg.header.stamp)) / 1e9
            self.action_ages_ms.append(age_s * 1000.0)
            foreign = self.action_source.foreign_publishers()
            if foreign:
                self.intervene(FOREIGN_PUBLISHER, f"policy/action has publishers besides the configured policy "
                               f"{self.action_source.name}: {', '.join(foreign)}; no action is trusted while they "
                               "publish")
                return
            if age_s > self.params["max_action_age_s"]:
                self.intervene(STALE, f"an action stamped {age_s:.3f} s ago (max_action_age_s "
                               f"{self.params['max_action_age_s']}): it answers a moment that has passed",
                               value=age_s, limit=self.params["max_action_age_s"])
                return
            # One action per control step, judged by the policy's stamps (the moment each answers), so
            # actions that the transport delivers bunched together are still told apart.
            stamp_ns = stamp_to_ns(msg.header.stamp)
            if self._last_action_stamp_ns is not None and \
                    stamp_ns - self._last_action_stamp_ns < 0.5e9 * self.period:
                gap_ms = (stamp_ns - self._last_action_stamp_ns) / 1e6
                self.intervene(DUPLICATE, f"an action stamped {gap_ms:.1f} ms after the last one: one action per "
                               f"control period ({1000 * self.period:.0f} ms) is applied")
                return
            self._last_action_stamp_ns = stamp_ns
            if self.homing:
                self.get_logger().warning("homing: actions are ignored until the arm is home",
                                          throttle_duration_sec=2.0)
                return
            self.arm_apply(msg, now)
            self._publish_state()
        except Exception as exc:  # a callback never lets an exception escape: hold, say why
            self.get_logger().error(f"action not applied (holding): {exc!r}")
            self._hold_quietly()

    def permit(self, now: float) -> Permission:
        """The supervisor's verdict on a command that passed the filter; a moving command is a control tick."""
        assert self.supervisor is not None
        permission = self.supervisor.permit(now)
        if permission is Permission.MOVE:
            self.timing.tick(now)
        return permission

    def intervene(self, kind: str, reason: str, *, axis: str | None = None, value: float | None = None,
                  limit: float | None = None, counted: bool = False) -> None:
        """Count (unless ``counted`` already) and publish one intervention; log it."""
        assert self.supervisor is not None
        if not counted:
            self.supervisor.counts.count(kind)
        self.get_logger().error(f"safety: {kind}: {reason}", throttle_duration_sec=1.0)
        status = self.episodes.current
        episode_id = status.episode_id if status is not None and status.state == RUNNING else ""
        step = max(0, status.step) if status is not None and status.state == RUNNING else 0
        self._safety_pub.publish(document_to_msg(SafetyInterventionDoc(
            episode_id=episode_id, step=step, source=self.get_fully_qualified_name(), kind=kind, reason=reason,
            axis=axis, value=None if value is None else float(value), limit=None if limit is None else float(limit),
            counts=dict(self.supervisor.counts.counts))))
        self._publish_state()

    def publish_command(self, names: Sequence[str], joints: np.ndarray, aperture: float,
                        velocities: np.ndarray | None = None) -> None:
        msg = joint_state_to_msg(names, joints, aperture, self.get_clock().now().nanoseconds,
                                 self.params["aperture_joint"])
        if velocities is not None:
            msg.velocity = [*map(float, velocities), 0.0]
        self._command_pub.publish(msg)

    # ------------------------------------------------------------------ periodic
    def _on_control_tick(self) -> None:
        """Read and publish the arm's state; poll its errors; follow a pending verification; step homing."""
        assert self.supervisor is not None
        try:
            snapshot = self.arm_read()
        except Exception as exc:
            self.get_logger().error(f"cannot read the arm: {exc!r}", throttle_duration_sec=1.0)
            return
        self.snapshot = snapshot
        stamp = self.get_clock().now().nanoseconds
        try:
            joints = joint_state_to_msg(snapshot.names, snapshot.joints, snapshot.aperture, stamp,
                                        self.params["aperture_joint"])
            if snapshot.velocities is not None:
                joints.velocity = [*map(float, snapshot.velocities), 0.0]
            self._joint_pub.publish(joints)
            self._pose_pub.publish(pose_matrix_to_msg(snapshot.pose, stamp, self.params["base_frame"]))
        except LadderError as exc:
            self.get_logger().error(f"not publishing the arm's state: {exc}", throttle_duration_sec=1.0)
        try:
            error = self.arm_poll_error()
        except Exception as exc:
            error = repr(exc)
        if error:
            self.supervisor.robot_error(error)
            self.homing = []
            self._hold_quietly()
            self.intervene(ROBOT_ERROR, f"the arm reported an error, the robot is disarmed: {error}", counted=True)
        status = self.episodes.current
        self.supervisor.set_verifying(status is not None and status.state == RUNNING
                                      and status.pending_request is not None)
        if self.homing:
            self._step_homing()
        self._publish_state()

    def _on_watchdog_tick(self) -> None:
        assert self.supervisor is not None
        now = time.monotonic()
        if self.supervisor.watchdog_due(now):
            self._hold_quietly()
            self.timing.gap()
            self._stopped_for_watchdog_at = now
            last = self.supervisor.last_command_at or now
            self.intervene(WATCHDOG, f"no action for {now - last:.3f} s (watchdog "
                           f"{self.supervisor.config.watchdog_s:.3f} s): the arm holds", counted=True,
                           value=now - last, limit=self.supervisor.config.watchdog_s)

    def _hold_quietly(self) -> None:
        try:
            self.arm_hold()
        except Exception as exc:
            self.get_logger().error(f"cannot command the hold: {exc!r}")

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
                self._hold_quietly()
            response.success, response.message = ok, message
        except Exception as exc:
            response.success, response.message = False, f"error: {exc!r}"
        self.get_logger().warning(f"{topics.ARM_SERVICE} {request.data}: {response.message}")
        self._publish_state(force=True)
        return response

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        assert self.supervisor is not None
        self.homing = []
        self._hold_quietly()  # first, before anything else
        already = self.supervisor.estopped
        message = self.supervisor.estop()
        if not already:
            self.intervene("estop", "e-stop by the operator: the arm holds until released and armed again",
                           counted=True)
        response.success, response.message = True, message
        self.get_logger().error(f"{topics.ESTOP_SERVICE}: {message}")
        self._publish_state(force=True)
        return response

    def _on_release(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        assert self.supervisor is not None
        response.success, response.message = self.supervisor.release()
        self.get_logger().warning(f"{topics.ESTOP_RELEASE_SERVICE}: {response.message}")
        self._publish_state(force=True)
        return response

    def _on_home(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.go_home()
        return response

    def _on_recover(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        assert self.supervisor is not None
        self.supervisor.disarm("recovering from an arm error")
        self.homing = []
        try:
            message = self.arm_recover()
            self.arm_reseed()
            response.success, response.message = True, f"{message}; the robot stays disarmed"
        except Exception as exc:
            response.success, response.message = False, f"recovery failed: {exc!r}"
        self.get_logger().warning(f"{topics.RECOVER_SERVICE}: {response.message}")
        self._publish_state(force=True)
        return response

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

    # ------------------------------------------------------------------ episodes
    def _on_episode_start(self, status: EpisodeStatus) -> None:
        assert self.supervisor is not None
        self.supervisor.new_episode()
        self.timing.gap()
        self.arm_reseed()
        self._publish_state(force=True)

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        assert self.supervisor is not None
        if self.params["home_after_episode"] and self.supervisor.armed:
            ok, message = self.go_home()
            self.get_logger().info(f"episode {status.episode_id} over: {message}")

    # ------------------------------------------------------------------ reporting
    def _publish_state(self, force: bool = False) -> None:
        assert self.supervisor is not None
        values = self.supervisor.values()
        if not force and values == self._state_values:
            return
        self._state_values = values
        level = self.supervisor.level
        message = {0: "ARMED", 1: "DRY RUN (disarmed)", 2: "E-STOP latched"}[level]
        self._state_pub.publish(diagnostic_status(f"{self.get_fully_qualified_name()}: safety", self.hardware_id(),
                                                  LEVELS[level], message, values))

    def hardware_id(self) -> str:
        return self.get_name()

    def _publish_diagnostics(self) -> None:
        assert self.supervisor is not None
        ages = np.array(self.action_ages_ms) if self.action_ages_ms else None
        values: dict[str, Any] = {
            **self.timing.stats(),
            "action_age_p50_ms": None if ages is None else float(np.percentile(ages, 50)),
            "action_age_p99_ms": None if ages is None else float(np.percentile(ages, 99)),
            "held": dict(self.supervisor.holds), "interventions": dict(self.supervisor.counts.counts),
            "armed": str(self.supervisor.armed).lower(), "estop": str(self.supervisor.estopped).lower(),
            **self.arm_diagnostics()}
        problem = "e-stop latched" if self.supervisor.estopped else "" if self.supervisor.armed else "dry run"
        level = LEVELS[2 if self.supervisor.estopped else 0 if self.supervisor.armed else 1]
        status_name = f"{self.get_fully_qualified_name()}: driver"
        self._diagnostics_pub.publish(diagnostics_to_msg(status_name, self.hardware_id(), level, problem or "armed",
                                                         values, self.get_clock().now().nanoseconds))

    def on_shutdown(self, executor) -> None:
        """Hold the arm before the process ends."""
        self._hold_quietly()
