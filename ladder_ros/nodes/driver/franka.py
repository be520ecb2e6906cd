"""The Franka driver: joint-position targets at 15 Hz in, one smooth franky trajectory out."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import ConfigError, InvalidInputError, LadderError
from ladder_ros.core.safety import (
    GRIPPER_DOMAIN,
    GRIPPER_FAULT,
    MALFORMED,
    NON_FINITE,
    ROBOT_ERROR,
    WORKSPACE,
    JointTargetFilter,
    WorkspaceBox,
)
from ladder_ros.core.safety_supervisor import Permission
from ladder_ros.specs.robot_parameters import FRANKA_DRIVER
from ladder_ros.nodes.driver.faults import StopOutcome
from ladder_ros.nodes.driver.node import ArmSnapshot, RobotDriverNode
from ladder_ros.runtime.process import run_node
from ladder_ros.robots.franka import clip_step_into_box, forward_kinematics, get_model, stream_waypoints
from ladder_ros.robots.franky_arm import connect_franky_arm
from ladder_ros.robots.gripper import GRIPPER_AXES, commanded_aperture


class FrankaDriverNode(RobotDriverNode):
    """Drives a Franka (Panda or FR3) at 15 Hz from a joint-position policy (pi0.5-DROID's layout).

    Each ``policy/action`` is one trajectory point over the seven arm joints and a gripper axis
    (``gripper_position``: DROID's 0 open / 1 closed; or ``gripper``: +1 open / -1 closed). The joint
    target passes the joint filter (limits, the largest step from the previous target: reject, never
    clamp; the velocity limits are those franky reports for the connected arm, see
    :mod:`ladder_ros.robots.franka`), a step that would take the hand out of the workspace box stops
    at its wall (counted), and the target is streamed to franky as a via point passed with a
    velocity and a final waypoint at rest (no overshoot when the stream stops); the gripper command
    goes to the gripper's own thread, which also reads the width (a blocking call) so the control
    loop never waits. Reflexes and control errors are faults; ``robot/recover`` runs franky's error
    recovery on the vendor-call worker. Dry run until armed; e-stop, watchdog and verification hold
    as in :class:`~ladder_ros.nodes.driver.node.RobotDriverNode`.

    Topics: subscribes ``policy/action`` (trajectory_msgs/JointTrajectory), ``episode/status``;
    publishes ``joint_states`` (sensor_msgs/JointState: seven joints in rad with velocities in
    rad/s, plus ``gripper_aperture`` = width / max_width_m), ``ee_pose`` (geometry_msgs/PoseStamped:
    the flange-to-end-effector pose franky reports, base frame, m; its height feeds the trigger's
    lift rule), ``robot/joint_command`` (the target and the via velocity), ``safety/interventions``,
    ``robot/safety_state`` (latched), ``/diagnostics`` (control period and jitter in ms, gripper read
    time).
    Services: ``robot/arm`` (std_srvs/SetBool), ``robot/estop``, ``robot/estop_release``,
    ``robot/home``, ``robot/recover`` (std_srvs/Trigger).
    Parameters: ``FRANKA_DRIVER`` in :mod:`ladder_ros.specs.robot_parameters` (the shared driver parameters
    and host, model, joint_names, ready_joints (rad), gripper_speed_m_s (m/s), gripper_force_n (N),
    max_width_m (m), realtime, max_joint_velocity (rad/s), workspace_low (m), workspace_high (m)).
    """

    vendor = "franky"

    def __init__(self, *, node_name: str = "franka_driver", **node_options):
        super().__init__(node_name, "franka_driver", FRANKA_DRIVER, **node_options)
        p = self.params
        self.model = get_model(p["model"])
        self.names = tuple(p["joint_names"])
        self.workspace = WorkspaceBox(tuple(p["workspace_low"]), tuple(p["workspace_high"]),
                                      source=f"{self.get_name()} parameters")
        self.ready = np.array(p["ready_joints"])
        self.arm = connect_franky_arm(
            p["connect_timeout_s"], host=p["host"], model=self.model, dynamics_factor=p["speed_scale"],
            gripper_speed_m_s=p["gripper_speed_m_s"], gripper_force_n=p["gripper_force_n"],
            max_width_m=p["max_width_m"], realtime=p["realtime"], max_joint_velocity=tuple(p["max_joint_velocity"]),
            on_retry=lambda exc: self.get_logger().info(f"{exc}; trying again for up to {p['connect_timeout_s']:g} s",
                                                        throttle_duration_sec=5.0))
        self.get_logger().info(self.arm.scheduling)
        self.limits = self.arm.limits
        self.filter = JointTargetFilter(self.limits.joint_limits(self.names, self.period))
        if not (np.all(self.ready >= self.limits.lower) and np.all(self.ready <= self.limits.upper)):
            self.arm.close()
            raise ConfigError(f"parameter {self.get_name()}.ready_joints: outside the {self.model.name} joint "
                              f"limits, got {p['ready_joints']}")
        if not self.workspace.contains(forward_kinematics(self.ready)[:3, 3]):
            self.arm.close()
            raise ConfigError(f"parameter {self.get_name()}.ready_joints: the hand would be outside the workspace box "
                              f"there ({np.round(forward_kinematics(self.ready)[:3, 3], 3).tolist()} m)")
        self.previous: np.ndarray | None = None  # the last joint target (sent, or computed in dry run)
        self.start(self.filter)

    # ------------------------------------------------------------------ state
    def arm_read(self) -> ArmSnapshot:
        reading = self.arm.read()
        if reading.aperture is None:
            raise LadderError("no gripper width read yet")
        return ArmSnapshot(self.names, reading.joints, reading.aperture, reading.ee_pose, reading.velocities)

    def arm_reseed(self) -> None:
        self.previous = None

    def _measured(self) -> tuple[np.ndarray, np.ndarray]:
        reading = self.arm.read()
        return reading.joints, reading.velocities

    def _previous(self) -> np.ndarray:
        return self.previous if self.previous is not None else self.arm.read().joints

    # ------------------------------------------------------------------ actions
    def arm_apply(self, msg: JointTrajectory, now: float) -> None:
        names = tuple(msg.joint_names)
        if len(msg.points) != 1 or names[:-1] != self.names or len(names) != len(self.names) + 1 \
                or names[-1] not in GRIPPER_AXES:
            self.intervene(MALFORMED, f"an action is one trajectory point over {list(self.names)} and one of "
                                      f"{list(GRIPPER_AXES)}, got {len(msg.points)} points over {list(names)}")
            return
        values = list(msg.points[0].positions)
        if len(values) != len(names):
            self.intervene(MALFORMED, f"{len(values)} positions for {len(names)} axes")
            return
        try:
            aperture = commanded_aperture(names[-1], values[-1])
        except InvalidInputError as exc:
            kind = NON_FINITE if not np.isfinite(values[-1]) else GRIPPER_DOMAIN
            self.intervene(kind, str(exc), axis=names[-1], value=float(values[-1]))
            return
        previous = self._previous()
        result = self.filter.check(values[:-1], previous)
        if not result.applied:
            self.intervene(str(result.kind), result.reason, axis=result.axis, value=result.value, limit=result.limit,
                           counted=True)
            return
        target, walls = clip_step_into_box(previous, result.action, self.workspace)
        if walls:
            box = self.workspace
            self.intervene(WORKSPACE, f"the step would take the hand out of the workspace box on {', '.join(walls)} "
                                      f"(low {list(box.low)}, high {list(box.high)} m): it stops at the wall",
                           axis=",".join(walls))
        permission = self.permit(now)
        if permission in (Permission.ESTOP, Permission.VERIFYING):
            return
        joints, speeds = self._measured()
        via, velocity = stream_waypoints(previous, target, joints, self.period, self.limits, speeds)
        self.previous = target
        self.publish_command(self.names, target, aperture, velocity)
        if permission is Permission.MOVE:
            self.arm.send_joints(via, velocity, target, self.period)
            self.arm.send_gripper(aperture)

    def arm_stop(self) -> StopOutcome:
        self.previous = None
        try:
            return StopOutcome(True, self.arm.stop())
        except Exception as exc:  # franky refused the stop motion: stop every motion, abruptly, off the loop
            return StopOutcome(False, f"franky refused the stop motion ({exc!r})", refused=True,
                               last_resort=self._stop_all_motions)

    def _stop_all_motions(self) -> str:
        """The last resort (blocking, on the worker): franky's ``Robot.stop`` preempts every running motion."""
        self.arm.robot.stop()
        return "every motion stopped (franky Robot.stop)"

    # ------------------------------------------------------------------ homing, errors
    def arm_home_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.arm.send_gripper(1.0)
        return self._previous(), self.ready, np.array(self.filter.limits.max_step)

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        previous = self._previous()
        target = np.asarray(joints, dtype=np.float64)
        if last:
            via, velocity = target, np.zeros(len(target))
        else:
            joints, speeds = self._measured()
            via, velocity = stream_waypoints(previous, target, joints, self.period, self.limits, speeds)
        self.previous = target
        self.publish_command(self.names, target, 1.0, velocity)
        self.arm.send_joints(via, velocity, target, self.period)

    def arm_check(self, snapshot: ArmSnapshot, now: float) -> list[tuple[str, str]]:
        error = self.arm.poll()
        if error is None:
            return []
        if error.startswith("gripper"):
            return [(GRIPPER_FAULT, error)]
        return [(ROBOT_ERROR, f"the arm reported an error, the robot is disarmed: {error}")]

    def arm_recover_job(self) -> Callable[[], str]:
        return self.arm.recover

    def arm_diagnostics(self) -> dict[str, Any]:
        reads = np.array(self.arm.gripper.read_times) * 1000.0 if self.arm.gripper.read_times else None
        latest = self.arm.gripper.latest()
        return {"gripper_read_p50_ms": None if reads is None else float(np.percentile(reads, 50)),
                "gripper_read_p99_ms": None if reads is None else float(np.percentile(reads, 99)),
                "gripper_width_m": None if latest is None else latest[0],
                "max_joint_velocity": list(self.limits.velocity)}

    def hardware_id(self) -> str:
        return f"franka {self.model.name} at {self.params['host']}"

    def close(self) -> None:
        self.arm.close()
        super().close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("franka_driver", FrankaDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
