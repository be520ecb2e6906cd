"""The WidowX 250 driver: Bridge end-effector deltas in, joint targets to Interbotix's Python API out."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Sequence

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import (
    ACTION_AXES,
    GRIPPER,
    JUMP,
    MALFORMED,
    UNREACHABLE,
    WORKSPACE,
    ActionFilter,
    JointTargetFilter,
    WorkspaceBox,
)
from ladder_ros.core.safety_supervisor import Permission
from ladder_ros.nodes.parameters import WIDOWX_DRIVER
from ladder_ros.nodes.robot_driver import ArmSnapshot, RobotDriverNode
from ladder_ros.nodes.runtime import run_node
from ladder_ros.robots import wx250s
from ladder_ros.robots.ee_target import BridgeTarget
from ladder_ros.robots.gripper import ApertureRange
from ladder_ros.robots.interbotix_arm import InterbotixArm


class WidowXDriverNode(RobotDriverNode):
    """Drives a WidowX 250 (wx250s) at 5 Hz the way Bridge policies were trained to act.

    Each ``policy/action`` (the 7-D action contract: metres, intrinsic Euler XYZ radians, gripper
    +1 open / -1 closed) passes the action filter (the sim bridge's bounds), moves the end-effector
    *target* (deltas on the previous target, the position clipped into the workspace box, counted),
    is solved to joints by the driver's own inverse kinematics from the previous joint target
    (:mod:`ladder_ros.robots.kinematics`, about a millisecond, instead of the API's blocking solve),
    is checked against the joint limits and the largest step, and is sent with
    ``set_joint_positions(..., blocking=False)``; the gripper opens or closes without waiting. Every
    refusal holds the arm at its last target and is counted and published. Dry run until armed;
    e-stop, watchdog and verification hold as in :class:`~ladder_ros.nodes.robot_driver.RobotDriverNode`.

    Topics: subscribes ``policy/action`` (trajectory_msgs/JointTrajectory), ``episode/status``;
    publishes ``joint_states`` (sensor_msgs/JointState: the six arm joints in rad plus
    ``gripper_aperture`` in [0, 1] from the left finger, 0.010 m closed to 0.035 m open),
    ``ee_pose`` (geometry_msgs/PoseStamped: forward kinematics of the measured joints, base frame,
    m and quaternion), ``robot/joint_command``, ``safety/interventions``, ``robot/safety_state``
    (latched), ``/diagnostics`` (control period and jitter in ms, inverse kinematics time).
    Services: ``robot/arm`` (std_srvs/SetBool), ``robot/estop``, ``robot/estop_release``,
    ``robot/home``, ``robot/recover`` (std_srvs/Trigger).
    Parameters: ``WIDOWX_DRIVER`` in :mod:`ladder_ros.nodes.parameters` (preset, clock_mode,
    base_frame, aperture_joint, action_source, max_action_age_s (s), watchdog_periods,
    hold_while_verifying, speed_scale, home_after_episode, connect_timeout_s (s), robot_model,
    robot_name, moving_time_s (s), accel_time_s (s), gripper_pressure, finger_closed_m (m),
    finger_open_m (m), workspace_low (m), workspace_high (m), home_joints (rad), ik_max_iterations).
    """

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
        self.arm = InterbotixArm(robot_model=p["robot_model"], robot_name=p["robot_name"],
                                 moving_time_s=p["moving_time_s"], accel_time_s=p["accel_time_s"],
                                 gripper_pressure=p["gripper_pressure"],
                                 finger_range=ApertureRange(p["finger_closed_m"], p["finger_open_m"],
                                                            source="Bridge finger normalisation"),
                                 connect_timeout_s=p["connect_timeout_s"])
        self.joint_target: np.ndarray | None = None  # the last joint target (sent, or computed in dry run)
        self.ik_ms: deque[float] = deque(maxlen=200)
        self.ik_iterations: deque[int] = deque(maxlen=200)
        self.start(self.filter)

    # ------------------------------------------------------------------ state
    def arm_read(self) -> ArmSnapshot:
        reading = self.arm.read()
        return ArmSnapshot(wx250s.JOINT_NAMES, reading.joints, reading.aperture, self.chain.forward(reading.joints))

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
            if not self.arm.send_joints(ik.joints):
                self.intervene(JUMP, "the Interbotix API refused the joint target (its joint or velocity limit "
                                     "check); the arm holds")
                self.arm_hold()
                return
            self.arm.send_gripper(gripper > 0)

    def arm_hold(self) -> None:
        joints = self.arm.hold()
        self.joint_target = np.asarray(joints, dtype=np.float64)
        self.target.seed(self.chain.forward(self.joint_target))

    # ------------------------------------------------------------------ homing, errors
    def arm_home_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.arm.send_gripper(True)
        current = self.joint_target if self.joint_target is not None else self.arm.read().joints
        return current, self.home_joints, np.array(self.chain.limits.max_step)

    def arm_send_home_step(self, joints: np.ndarray, last: bool) -> None:
        self.joint_target = np.asarray(joints, dtype=np.float64)
        self.publish_command(wx250s.JOINT_NAMES, self.joint_target, 1.0)
        if not self.arm.send_joints(self.joint_target):
            self.homing = []
            self.intervene(JUMP, "the Interbotix API refused a homing step; homing stopped")

    def arm_recover(self) -> str:
        return self.arm.recover()

    def arm_diagnostics(self) -> dict[str, Any]:
        ik = np.array(self.ik_ms) if self.ik_ms else None
        return {"ik_p50_ms": None if ik is None else float(np.percentile(ik, 50)),
                "ik_p99_ms": None if ik is None else float(np.percentile(ik, 99)),
                "ik_iterations_max": max(self.ik_iterations) if self.ik_iterations else None}

    def hardware_id(self) -> str:
        return f"{self.params['robot_model']}:{self.params['robot_name']}"

    def close(self) -> None:
        self.arm.close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("widowx_driver", WidowXDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
