"""The Franka driver: joint-position targets at 15 Hz in, one smooth franky trajectory out."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import ConfigError, InvalidInputError, LadderError
from ladder_ros.core.safety import GRIPPER_DOMAIN, MALFORMED, NON_FINITE, JointTargetFilter
from ladder_ros.core.safety_supervisor import Permission
from ladder_ros.nodes.parameters import FRANKA_DRIVER
from ladder_ros.nodes.robot_driver import ArmSnapshot, RobotDriverNode
from ladder_ros.nodes.runtime import run_node
from ladder_ros.robots.franka import get_model, waypoint_velocity
from ladder_ros.robots.franky_arm import FrankyArm
from ladder_ros.robots.gripper import GRIPPER_AXES, commanded_aperture


class FrankaDriverNode(RobotDriverNode):
    """Drives a Franka (Panda or FR3) at 15 Hz from a joint-position policy (pi0.5-DROID's layout).

    Each ``policy/action`` is one trajectory point over the seven arm joints and a gripper axis
    (``gripper_position``: DROID's 0 open / 1 closed; or ``gripper``: +1 open / -1 closed). The joint
    target passes the joint filter (limits, the largest step from the previous target: reject, never
    clamp) and is streamed to franky as a waypoint reached with a velocity (smooth, see
    :mod:`ladder_ros.robots.franka`); the gripper command goes to the gripper's own thread, which
    also reads the width (a blocking call) so the control loop never waits. Reflexes and control
    errors disarm the robot (counted); ``robot/recover`` runs franky's error recovery. Dry run until
    armed; e-stop, watchdog and verification hold as in :class:`~ladder_ros.nodes.robot_driver.RobotDriverNode`.

    Topics: subscribes ``policy/action`` (trajectory_msgs/JointTrajectory), ``episode/status``;
    publishes ``joint_states`` (sensor_msgs/JointState: seven joints in rad with velocities in
    rad/s, plus ``gripper_aperture`` = width / max_width_m), ``ee_pose`` (geometry_msgs/PoseStamped:
    the flange-to-end-effector pose franky reports, base frame, m; its height feeds the trigger's
    lift rule), ``robot/joint_command``, ``safety/interventions``, ``robot/safety_state`` (latched),
    ``/diagnostics`` (control period and jitter in ms, gripper read time).
    Services: ``robot/arm`` (std_srvs/SetBool), ``robot/estop``, ``robot/estop_release``,
    ``robot/home``, ``robot/recover`` (std_srvs/Trigger).
    Parameters: ``FRANKA_DRIVER`` in :mod:`ladder_ros.nodes.parameters` (the shared driver parameters
    and host, model, joint_names, ready_joints (rad), gripper_speed_m_s (m/s), gripper_force_n (N),
    max_width_m (m), realtime).
    """

    def __init__(self, *, node_name: str = "franka_driver", **node_options):
        super().__init__(node_name, "franka_driver", FRANKA_DRIVER, **node_options)
        p = self.params
        self.model = get_model(p["model"])
        self.names = tuple(p["joint_names"])
        self.filter = JointTargetFilter(self.model.joint_limits(self.names, self.period))
        self.ready = np.array(p["ready_joints"])
        if not (np.all(self.ready >= self.model.lower) and np.all(self.ready <= self.model.upper)):
            raise ConfigError(f"parameter {self.get_name()}.ready_joints: outside the {self.model.name} joint "
                              f"limits, got {p['ready_joints']}")
        self.dynamics = p["speed_scale"]
        self.arm = FrankyArm(host=p["host"], model=self.model, dynamics_factor=self.dynamics,
                             gripper_speed_m_s=p["gripper_speed_m_s"], gripper_force_n=p["gripper_force_n"],
                             max_width_m=p["max_width_m"], realtime=p["realtime"])
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
        permission = self.permit(now)
        if permission in (Permission.ESTOP, Permission.VERIFYING):
            return
        target = result.action
        velocity = waypoint_velocity(previous, target, self.period, self.model, self.dynamics)
        self.previous = target
        self.publish_command(self.names, target, aperture, velocity)
        if permission is Permission.MOVE:
            self.arm.send_joints(target, velocity, self.period)
            self.arm.send_gripper(aperture)

    def arm_hold(self) -> None:
        self.arm.stop()
        self.previous = None

    # ------------------------------------------------------------------ homing, errors
    def arm_home_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.arm.send_gripper(1.0)
        return self._previous(), self.ready, np.array(self.filter.limits.max_step)

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        previous = self._previous()
        velocity = np.zeros(len(joints)) if last else waypoint_velocity(previous, joints, self.period, self.model,
                                                                        self.dynamics)
        self.previous = np.asarray(joints, dtype=np.float64)
        self.publish_command(self.names, self.previous, 1.0, velocity)
        self.arm.send_joints(self.previous, velocity, self.period)

    def arm_poll_error(self) -> str | None:
        return self.arm.poll()

    def arm_recover(self) -> str:
        return self.arm.recover()

    def arm_diagnostics(self) -> dict[str, Any]:
        reads = np.array(self.arm.gripper.read_times) * 1000.0 if self.arm.gripper.read_times else None
        latest = self.arm.gripper.latest()
        return {"gripper_read_p50_ms": None if reads is None else float(np.percentile(reads, 50)),
                "gripper_read_p99_ms": None if reads is None else float(np.percentile(reads, 99)),
                "gripper_width_m": None if latest is None else latest[0]}

    def hardware_id(self) -> str:
        return f"franka {self.model.name} at {self.params['host']}"

    def close(self) -> None:
        self.arm.close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("franka_driver", FrankaDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
