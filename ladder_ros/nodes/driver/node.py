"""What the WidowX and Franka driver nodes share: the way an action reaches the arm, the safety around it, the streams.

:class:`RobotDriverNode` is the base of both drivers. It owns the ROS endpoints and wires the objects it composes;
a driver supplies its arm through the ``arm_*`` hooks and calls back the base's ``permit``, ``intervene``,
``publish_command``, ``publish_state`` and ``stop_arm`` (and ``homing.cancel`` when a step home is refused).

* Actions on ``policy/action`` go through the source check (only the configured policy publishes),
  :class:`~ladder_ros.robots.admission.ActionAdmission` (not stale, not from the future, one per control period)
  and then the driver's filter and arm (``arm_apply``); a driver that sends its commands at their own moment
  rather than on arrival (the WidowX, on its control grid) says when each reaches the arm
  (``plan_application``), and admission spaces the actions by that moment.
* The safety supervisor (:mod:`ladder_ros.core.safety_supervisor`: dry run until armed, latched e-stop,
  watchdog, hold while verifying, faults that need a recovery), and two timers: the control tick (read and
  publish the arm, notice faults, step homing, poll the arm's health) and a fast tick at a quarter period (an
  action that waited for its period, the watchdog, finished vendor calls, whether a stopped arm is at rest yet).
* Composed: :class:`~ladder_ros.nodes.driver.faults.ArmStopper` (every stop and fault),
  :class:`~ladder_ros.nodes.driver.faults.VendorCallRouter` (blocking vendor calls off the node's thread, each
  with a deadline), :class:`~ladder_ros.nodes.driver.faults.ArmWatch` (stale states, the health poll),
  :class:`~ladder_ros.nodes.driver.homing.Homing`, :class:`~ladder_ros.nodes.driver.services.OperatorServices`
  and :class:`~ladder_ros.nodes.driver.services.Recovery` (the operator's ``robot/*`` services), and
  :class:`~ladder_ros.nodes.driver.reporting.DriverReporter` (what is published and logged).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.safety import FOREIGN_PUBLISHER, WATCHDOG, InterventionCounts
from ladder_ros.core.safety_supervisor import Permission, SafetySupervisor, SupervisorConfig
from ladder_ros.messages import RUNNING, WALL_CLOCK, EpisodeStatus
from ladder_ros.specs import topics
from ladder_ros.nodes.driver.faults import ArmStopper, ArmWatch, StopOutcome, VendorCallRouter
from ladder_ros.nodes.driver.homing import Homing
from ladder_ros.nodes.driver.reporting import DriverReporter
from ladder_ros.nodes.driver.services import OperatorServices, Recovery
from ladder_ros.specs.parameters import NODE_CHECKS
from ladder_ros.specs.param_spec import ParamSpec
from ladder_ros.runtime.endpoints import ActionSource, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.robots.admission import ActionAdmission, AdmissionConfig
from ladder_ros.robots.arm_health import RestDetector
from ladder_ros.robots.timing import ControlTiming
from ladder_ros.robots.vendor_calls import DONE, VendorCall, VendorCallWorker
from ladder_ros.ros_conversions import stamp_to_ns

__all__ = ["ArmSnapshot", "RobotDriverNode"]

# At rest: no joint moved faster than this (rad/s) over the last REST_WINDOW_S of readings. One Dynamixel
# encoder tick (2 pi / 4096 = 0.0015 rad, e-manual) over the window reads as 0.015 rad/s: still at rest.
REST_SPEED_RAD_S = 0.03
REST_WINDOW_S = 0.1
# ... and, where the driver knows when the motion it commanded ends (a time-based profile), not before that
# moment plus this margin for the command's way to the motors.
SETTLE_MARGIN_S = 0.05


class ArmSnapshot:
    """One reading of the arm: joints (rad), aperture in [0, 1], end-effector pose (4x4, base frame)."""

    __slots__ = ("names", "joints", "aperture", "pose", "velocities", "stamp_ns")

    def __init__(self, names: Sequence[str], joints: np.ndarray, aperture: float, pose: np.ndarray,
                 velocities: np.ndarray | None = None, stamp_ns: int | None = None):
        self.names, self.joints, self.aperture, self.pose, self.velocities, self.stamp_ns = (
            tuple(names), np.asarray(joints, dtype=np.float64), float(aperture), pose, velocities, stamp_ns)


class RobotDriverNode(Node):
    """Base of the robot drivers (see the module docstring); subclasses implement the ``arm_*`` hooks."""

    vendor = "the arm's API"  # how log lines name the vendor API
    # built by start(), once the driver has its arm and the filter the supervisor counts into
    homing: Homing
    stopper: ArmStopper
    recovery: Recovery
    watch: ArmWatch
    operator_services: OperatorServices

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
        self.admission = ActionAdmission(AdmissionConfig(self.period, self.params["max_action_age_s"],
                                                         self.params["future_tolerance_s"]))
        self.worker = VendorCallWorker(f"{node_name}-vendor-calls")
        self.calls = VendorCallRouter(self.worker, self.vendor, self.get_logger().warning, self.fault)
        self.reporter = DriverReporter(self, self.params["aperture_joint"], self.params["base_frame"], time.monotonic)
        self.rest = RestDetector(REST_SPEED_RAD_S, REST_WINDOW_S)
        self.supervisor: SafetySupervisor | None = None
        self.snapshot: ArmSnapshot | None = None
        self.action_ages_ms: deque[float] = deque(maxlen=200)

    # ------------------------------------------------------------------ start (after the subclass has its arm)
    def start(self, counts: InterventionCounts) -> None:
        """Begin serving: the supervisor counts into ``counts`` (the subclass's filter); timers, services, topics."""
        p, logger = self.params, self.get_logger()
        supervisor = self.supervisor = SafetySupervisor(counts, SupervisorConfig(
            watchdog_s=p["watchdog_periods"] * self.period, hold_while_verifying=p["hold_while_verifying"]))
        self.homing = Homing(supervisor, self.period, start=self.arm_home_start, send_step=self.arm_send_home_step,
                             arrived=self.arm_reseed, logger=logger)
        self.stopper = ArmStopper(supervisor, self.arm_stop, self.rest, self.calls, p["vendor_call_timeout_s"],
                                  intervene=self.intervene, cancel_homing=self.homing.cancel,
                                  publish_state=self.publish_state, logger=logger)
        self.recovery = Recovery(supervisor, self.calls, self.arm_recover_job, p["recover_timeout_s"],
                                 cancel_homing=self.homing.cancel, recovered=self._after_recovery, fault=self.fault,
                                 publish_state=self.publish_state, logger=logger)
        self.watch = ArmWatch(supervisor, self.vendor, p["max_state_age_s"], p["health_poll_s"], fault=self.fault,
                              intervene=self.intervene, recovering=lambda: self.recovery.running,
                              clock_ns=self.reporter.now_ns)
        self.operator_services = OperatorServices(self, supervisor, self.homing, reseed=self.arm_reseed,
                                                  stop=self.stop_arm, gap=self.timing.gap, intervene=self.intervene,
                                                  recover=self.recovery.start, publish_state=self.publish_state)
        subscription(self, JointTrajectory, topics.ACTION, self._on_action)
        self.action_source = ActionSource(self, self.params["action_source"])
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end)
        self.create_timer(self.period, self._on_control_tick)
        self.create_timer(self.period / 4, self._on_fast_tick)
        self.create_timer(1.0, self._publish_diagnostics)
        check = self.arm_ready_job()
        if check is not None:
            self.supervisor.set_not_ready("checking the arm before it can be armed")
            self.calls.run("start-up check", check, p["vendor_call_timeout_s"], self._on_ready_checked)
        self.publish_state(force=True)
        self.get_logger().info(f"{self.get_name()}: started DISARMED (dry run): commands are computed and recorded, "
                               f"nothing moves until {self.resolve_service_name(topics.ARM_SERVICE)} arms the robot")

    # ------------------------------------------------------------------ hooks
    def arm_read(self) -> ArmSnapshot:
        raise NotImplementedError

    def arm_apply(self, msg: JointTrajectory, now: float) -> None:
        """Check one action (layout, filter, target) and send or hold it as ``self.permit`` says."""
        raise NotImplementedError

    def arm_stop(self) -> StopOutcome:
        """Stop the arm where it is now and keep it there (never blocking); say how it went."""
        raise NotImplementedError

    def arm_reseed(self) -> None:
        """Forget the previous target: the next one starts from the measured state (arming, a new episode)."""

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        raise NotImplementedError

    def arm_home_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(current joints, home joints, largest step per period) for homing; opens the gripper."""
        raise NotImplementedError

    def arm_check(self, snapshot: ArmSnapshot, now: float) -> list[tuple[str, str]]:
        """Faults seen in a reading, as (kind, reason): a stalled joint, an overdue gripper, an arm's error."""
        return []

    def arm_ready_job(self) -> Callable[[], str] | None:
        """A blocking check to pass before the robot may be armed (the WidowX's profile), or None."""
        return None

    def arm_health_job(self) -> Callable[[], list[tuple[str, str]]] | None:
        """A blocking poll of the arm's health (motor registers), run every ``health_poll_s``; None: none."""
        return None

    def arm_recover_job(self) -> Callable[[], str]:
        raise NotImplementedError

    def arm_recovered(self) -> None:
        """After a confirmed recovery (never blocking): restart what follows the arm's motion."""

    def arm_settles_at(self) -> float | None:
        """When (monotonic s) the arm's commanded motion ends, if the driver knows (a time-based profile)."""
        return None

    def arm_diagnostics(self) -> dict[str, Any]:
        return {}

    def plan_application(self, stamp_ns: int, now_ns: int) -> int:
        """Once per action about to be applied (before ``arm_apply``): when (node clock, ns) it reaches the arm. Now,
        unless the driver paces its commands (the WidowX: on its control grid). Admission spaces actions by it."""
        return now_ns

    def hardware_id(self) -> str:
        return self.get_name()

    # ------------------------------------------------------------------ actions
    def _on_action(self, msg: JointTrajectory) -> None:
        try:
            now = time.monotonic()
            arrival_ns = self.get_clock().now().nanoseconds
            stamp_ns = stamp_to_ns(msg.header.stamp)
            self.action_ages_ms.append((arrival_ns - stamp_ns) / 1e6)
            foreign = self.action_source.foreign_publishers()
            if foreign:
                self.intervene(FOREIGN_PUBLISHER, f"policy/action has publishers besides the configured policy "
                               f"{self.action_source.name}: {', '.join(foreign)}; no action is trusted while they "
                               "publish")
                return
            verdict = self.admission.judge(stamp_ns, arrival_ns)
            if not verdict.admitted:
                self.intervene(str(verdict.kind), verdict.reason, value=verdict.value, limit=verdict.limit)
                return
            if verdict.due_ns:  # too soon after the last one: it waits for its period (the newest wins)
                replaced = self.admission.wait(msg, stamp_ns, verdict.due_ns)
                if replaced is not None:
                    self.intervene(str(replaced.kind), replaced.reason, value=replaced.value, limit=replaced.limit)
                return
            self._apply(msg, stamp_ns, now, arrival_ns)
        except Exception as exc:  # a callback never lets an exception escape: stop, say why
            self.get_logger().error(f"action not applied (stopping the arm): {exc!r}")
            self.stop_arm()

    def _apply(self, msg: JointTrajectory, stamp_ns: int, now: float, now_ns: int) -> None:
        self.admission.applied(stamp_ns, self.plan_application(stamp_ns, now_ns))
        if self.homing.active:
            self.get_logger().warning("homing: actions are ignored until the arm is home", throttle_duration_sec=2.0)
            return
        self.arm_apply(msg, now)
        self.publish_state()

    def _apply_waiting(self) -> None:
        ready = self.admission.due(self.get_clock().now().nanoseconds)
        if ready is None:
            return
        try:
            self._apply(ready[0], ready[1], time.monotonic(), self.get_clock().now().nanoseconds)
        except Exception as exc:  # as in _on_action: stop, say why
            self.get_logger().error(f"action not applied (stopping the arm): {exc!r}")
            self.stop_arm()

    def permit(self, now: float, tick: bool = True) -> Permission:
        """The supervisor's verdict on a command that passed the filter; a moving command is a control tick
        (``tick`` False: the driver records the tick itself, when the command reaches the arm)."""
        assert self.supervisor is not None
        permission = self.supervisor.permit(now)
        if permission is Permission.MOVE and tick:
            self.timing.tick(now)
        return permission

    def intervene(self, kind: str, reason: str, *, axis: str | None = None, value: float | None = None,
                  limit: float | None = None, counted: bool = False) -> None:
        """Count (unless ``counted`` already), publish and log one intervention."""
        assert self.supervisor is not None
        if not counted:
            self.supervisor.counts.count(kind)
        status = self.episodes.current
        running = status is not None and status.state == RUNNING
        self.reporter.intervention(kind, reason, self.supervisor.counts.counts, status.episode_id if running else "",
                                   max(0, status.step) if running else 0, axis=axis, value=value, limit=limit)
        self.publish_state()

    def publish_command(self, names: Sequence[str], joints: np.ndarray, aperture: float,
                        velocities: np.ndarray | None = None, stamp_ns: int | None = None) -> None:
        """``robot/joint_command``, stamped ``stamp_ns`` (the moment the command went to the arm) or now."""
        self.reporter.command(names, joints, aperture, velocities, stamp_ns)

    def stop_arm(self) -> None:
        """Stop the arm now; a refused stop escalates; the safety state says how it went (ArmStopper)."""
        self.stopper.stop()

    def fault(self, kind: str, reason: str) -> None:
        """A fault: counted, disarmed, the arm stopped; arming waits for a confirmed recovery."""
        self.stopper.fault(kind, reason)

    def _after_recovery(self) -> None:
        self.watch.forget_reported()
        self.arm_recovered()

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

    # ------------------------------------------------------------------ periodic
    def _read(self) -> ArmSnapshot | None:
        try:
            self.snapshot = self.arm_read()
        except Exception as exc:
            self.get_logger().error(f"cannot read the arm: {exc!r}", throttle_duration_sec=1.0)
            return None
        return self.snapshot

    def _on_control_tick(self) -> None:
        """Publish the arm's state; notice faults; follow a pending verification; step homing; poll the health."""
        assert self.supervisor is not None
        now = time.monotonic()
        snapshot = self._read()
        if snapshot is not None:
            self.reporter.arm_state(snapshot.names, snapshot.joints, snapshot.aperture, snapshot.pose,
                                    snapshot.velocities)
            if self.supervisor.recovery_required is None:
                for kind, reason in self.watch.stale(snapshot.stamp_ns) + self.arm_check(snapshot, now):
                    self.fault(kind, reason)
                    break
        status = self.episodes.current
        self.supervisor.set_verifying(status is not None and status.state == RUNNING
                                      and status.pending_request is not None)
        if self.homing.active:
            self.homing.step()
        health = self.arm_health_job()
        if health is not None and not self.worker.busy and self.watch.health_due(now):
            self.calls.run("health poll", health, self.params["vendor_call_timeout_s"], self.watch.on_health)
        self.calls.poll()
        self.publish_state()

    def _on_fast_tick(self) -> None:
        """An action that waited for its period, the watchdog, the vendor calls, whether a stopped arm rests."""
        assert self.supervisor is not None
        self._apply_waiting()
        now = time.monotonic()
        if self.supervisor.watchdog_due(now):
            last = self.supervisor.last_command_at or now
            self.stop_arm()
            self.timing.gap()
            self.intervene(WATCHDOG, f"no action for {now - last:.3f} s (watchdog "
                           f"{self.supervisor.config.watchdog_s:.3f} s): the arm is stopped and holds", counted=True,
                           value=now - last, limit=self.supervisor.config.watchdog_s)
        if self.supervisor.at_rest is False:
            snapshot = self._read()
            settles = self.arm_settles_at()
            still = snapshot is not None and self.rest.update(snapshot.joints, now)
            if still and (settles is None or now >= settles + SETTLE_MARGIN_S):
                self.supervisor.note_rest(True)
        self.calls.poll()
        self.publish_state()

    # ------------------------------------------------------------------ episodes
    def _on_episode_start(self, status: EpisodeStatus) -> None:
        assert self.supervisor is not None
        self.supervisor.new_episode()
        self.admission.reset()
        self.reporter.log.reset()
        self.timing.gap()
        self.arm_reseed()
        self.publish_state(force=True)

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        assert self.supervisor is not None
        if self.params["home_after_episode"] and self.supervisor.armed:
            ok, message = self.homing.go()
            self.get_logger().info(f"episode {status.episode_id} over: {message}")

    # ------------------------------------------------------------------ reporting
    def publish_state(self, force: bool = False) -> None:
        assert self.supervisor is not None
        self.reporter.safety_state(self.supervisor, self.hardware_id(), force)

    def _publish_diagnostics(self) -> None:
        assert self.supervisor is not None
        ages = np.array(self.action_ages_ms) if self.action_ages_ms else None
        running = self.worker.running()
        snapshot = self.snapshot
        state_age = None if snapshot is None or snapshot.stamp_ns is None else \
            (self.get_clock().now().nanoseconds - snapshot.stamp_ns) / 1e6
        values: dict[str, Any] = {
            **self.timing.stats(),
            "action_age_p50_ms": None if ages is None else float(np.percentile(ages, 50)),
            "action_age_p99_ms": None if ages is None else float(np.percentile(ages, 99)),
            "arm_state_age_ms": state_age, "vendor_call_running": running.name if running else "",
            "vendor_threads_given_up": self.worker.threads_given_up,
            "held": dict(self.supervisor.holds), "interventions": dict(self.supervisor.counts.counts),
            "armed": str(self.supervisor.armed).lower(), "estop": str(self.supervisor.estopped).lower(),
            **self.arm_diagnostics()}
        self.reporter.diagnostics(self.supervisor, self.hardware_id(), values)

    def on_shutdown(self, executor) -> None:
        """Stop the arm before the process ends."""
        if self.supervisor is not None:
            self.stop_arm()

    def close(self) -> None:
        self.worker.close()
