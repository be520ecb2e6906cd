"""The twin of ``interbotix_xs_modules.xs_robot.arm``: ``InterbotixManipulatorXS`` and ``InterbotixArmXSInterface``.

Follows Interbotix/interbotix_ros_toolboxes, branch rolling (ROS 2; the Humble branch has the
same arm code), commit 4c720477ff36231d6cfc256c6e55b9930537a081,
``interbotix_xs_toolbox/interbotix_xs_modules/interbotix_xs_modules/xs_robot/arm.py``, with the
behaviour a driver meets on the real arm:

* **The constructor never writes the profile.** ``InterbotixArmXSInterface.__init__`` stores
  ``moving_time`` / ``accel_time`` *before* it calls ``set_trajectory_time(moving_time,
  accel_time)``, which writes the ``Profile_Velocity`` / ``Profile_Acceleration`` registers only
  for a value that differs from the stored one: nothing is written, and the motors keep the
  profile xs_sdk gave them at its start (``modes.yaml``: 2 s / 0.3 s), while the API believes its
  own times. (The ROS 1 API set both to None first.)
* **``set_joint_positions`` refuses** (returns False, publishes nothing) a target with a joint
  outside the URDF limits or farther from the last *commanded* joints (``joint_commands``, not
  the measured ones) than the joint's velocity limit times the API's ``moving_time``; positions are
  truncated to 1 mrad before the check, as upstream.
* **``capture_joint_positions``** resets ``joint_commands`` to the measured joints.
* ``blocking=True`` moves sleep ``moving_time``; ``moving_time`` / ``accel_time`` passed to a move
  go through ``set_trajectory_time`` (a blocking register write when they differ).
* ``set_ee_pose_matrix`` solves the inverse kinematics with ``modern_robotics.IKinSpace`` from the
  three fixed seeds (imported when called: modern-robotics is the real API's dependency too).
"""

from __future__ import annotations

import importlib
import math
import sys
from typing import Any, List, Tuple, Union

import numpy as np
import rclpy
from rclpy.constants import S_TO_NS
from rclpy.duration import Duration
from rclpy.logging import LoggingSeverity

from ladder_ros.core.rotations import euler_xyz_to_matrix
from ladder_ros.robots import wx250s
from ladder_ros.instruments.widowx_twin import xs_msgs
from ladder_ros.instruments.widowx_twin.core import InterbotixRobotXSCore
from ladder_ros.instruments.widowx_twin.gripper import InterbotixGripperXSInterface
from ladder_ros.instruments.widowx_twin.robot import InterbotixRobotNode

REV: float = 2 * np.pi
_CHAIN = wx250s.chain()  # forward kinematics (modern_robotics.FKinSpace upstream; the same M and Slist)


class _Description:
    """The Modern Robotics description (``mr_descriptions.wx250s``): M and Slist."""

    def __init__(self, model: str):
        if model != wx250s.MODEL:
            raise ValueError(f"the WidowX twin simulates a {wx250s.MODEL}, not {model!r}")
        self.M, self.Slist = wx250s.M, wx250s.SLIST


class InterbotixManipulatorXS:
    """Standalone Module to control an Interbotix Arm and Gripper."""

    def __init__(self, robot_model: str, group_name: str = "arm", gripper_name: str = "gripper",
                 robot_name: str = None, moving_time: float = 2.0, accel_time: float = 0.3,
                 gripper_pressure: float = 0.5, gripper_pressure_lower_limit: int = 150,
                 gripper_pressure_upper_limit: int = 350, topic_joint_states: str = "joint_states",
                 logging_level: LoggingSeverity = LoggingSeverity.INFO, node_name: str = "robot_manipulation",
                 node: InterbotixRobotNode = None, iterative_update_fk: bool = True, args=None) -> None:
        self.core = InterbotixRobotXSCore(robot_model=robot_model, robot_name=robot_name,
                                          topic_joint_states=topic_joint_states, logging_level=logging_level,
                                          node_name=node_name, node=node, args=args)
        self.arm = InterbotixArmXSInterface(core=self.core, robot_model=robot_model, group_name=group_name,
                                            moving_time=moving_time, accel_time=accel_time,
                                            iterative_update_fk=iterative_update_fk)
        if gripper_name is not None:
            self.gripper = InterbotixGripperXSInterface(
                core=self.core, gripper_name=gripper_name, gripper_pressure=gripper_pressure,
                gripper_pressure_lower_limit=gripper_pressure_lower_limit,
                gripper_pressure_upper_limit=gripper_pressure_upper_limit)
        self.robot_name = robot_name

    def get_node(self) -> InterbotixRobotNode:
        return self.core.robot_node


class InterbotixArmXSInterface:
    """Definition of the Interbotix Arm component."""

    def __init__(self, core: InterbotixRobotXSCore, robot_model: str, group_name: str, moving_time: float = 2.0,
                 accel_time: float = 0.3, iterative_update_fk: bool = True) -> None:
        self.core = core
        self.robot_model = robot_model
        self.moving_time, self.accel_time = moving_time, accel_time  # stored first: see the module docstring
        self.group_name = group_name
        self.iterative_update_fk = iterative_update_fk
        self.robot_des = _Description(robot_model)
        self.future_group_info = self.core.srv_get_info.call_async(
            xs_msgs.RobotInfo.Request(cmd_type="group", name=group_name))
        while rclpy.ok() and not self.future_group_info.done():
            rclpy.spin_until_future_complete(self.core.get_node(), self.future_group_info)
            rclpy.spin_once(self.core.get_node(), timeout_sec=0.0)
        self.group_info: xs_msgs.RobotInfo.Response = self.future_group_info.result()
        if self.group_info.num_joints != self.robot_des.Slist.shape[1]:
            self.core.get_node().get_logger().fatal(
                f"Number of joints in group '{group_name}' does not match Modern Robotics description for arm "
                f"model '{robot_model}' ({self.group_info.num_joints} != {self.robot_des.Slist.shape[1]}).")
            sys.exit(1)
        if self.group_info.profile_type != "time":
            self.core.get_node().get_logger().warn(f"Group '{group_name}' profile_type not set to 'time'.")
        if self.group_info.mode != "position":
            self.core.get_node().get_logger().warn(f"Group '{group_name}' operating mode not set to 'position'.")
        self.initial_guesses = [[0.0] * self.group_info.num_joints for _ in range(3)]
        self.initial_guesses[1][0] = np.deg2rad(-120)
        self.initial_guesses[2][0] = np.deg2rad(120)
        self.joint_commands = []
        for name in self.group_info.joint_names:
            self.joint_commands.append(self.core.joint_states.position[self.core.js_index_map[name]])
        self._update_Tsb()
        self.set_trajectory_time(self.moving_time, self.accel_time)  # equal to the stored times: writes nothing
        self.info_index_map = dict(zip(self.group_info.joint_names, range(self.group_info.num_joints)))
        self.core.get_node().get_logger().info(
            f"\n\tArm Group Name: {self.group_name}\n\tMoving Time: {self.moving_time:.2f} seconds\n"
            f"\tAcceleration Time: {self.accel_time:.2f} seconds\n\tDrive Mode: Time-Based-Profile")
        self.core.get_node().get_logger().info("Initialized InterbotixArmXSInterface!")

    def _publish_commands(self, positions: List[float], moving_time: float = None, accel_time: float = None,
                          blocking: bool = True) -> None:
        self.set_trajectory_time(moving_time, accel_time)
        self.joint_commands = list(positions)
        self.core.pub_group.publish(xs_msgs.JointGroupCommand(name=self.group_name, cmd=self.joint_commands))
        if blocking:
            self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(self.moving_time * S_TO_NS)))
        if self.iterative_update_fk:
            self._update_Tsb()

    def set_trajectory_time(self, moving_time: float = None, accel_time: float = None) -> None:
        """Write Profile_Velocity / Profile_Acceleration, each only when it differs from the stored time."""
        if moving_time is not None and moving_time != self.moving_time:
            self.moving_time = moving_time
            future = self.core.srv_set_reg.call_async(xs_msgs.RegisterValues.Request(
                cmd_type="group", name=self.group_name, reg="Profile_Velocity", value=int(moving_time * 1000)))
            self.core.get_node().wait_until_future_complete(future)
        if accel_time is not None and accel_time != self.accel_time:
            self.accel_time = accel_time
            future = self.core.srv_set_reg.call_async(xs_msgs.RegisterValues.Request(
                cmd_type="group", name=self.group_name, reg="Profile_Acceleration", value=int(accel_time * 1000)))
            self.core.get_node().wait_until_future_complete(future)

    def _check_joint_limits(self, positions: List[float]) -> bool:
        theta_list = [int(elem * 1000) / 1000.0 for elem in positions]
        speed_list = [abs(goal - current) / float(self.moving_time)
                      for goal, current in zip(theta_list, self.joint_commands)]
        for x in range(self.group_info.num_joints):
            if not (self.group_info.joint_lower_limits[x] <= theta_list[x] <= self.group_info.joint_upper_limits[x]):
                return False
            if speed_list[x] > self.group_info.joint_velocity_limits[x]:
                return False
        return True

    def _check_single_joint_limit(self, joint_name: str, position: float) -> bool:
        i = self.info_index_map[joint_name]
        theta = int(position * 1000) / 1000.0
        speed = abs(theta - self.joint_commands[i]) / float(self.moving_time)
        if not (self.group_info.joint_lower_limits[i] <= theta <= self.group_info.joint_upper_limits[i]):
            return False
        return speed <= self.group_info.joint_velocity_limits[i]

    def set_joint_positions(self, joint_positions: List[float], moving_time: float = None, accel_time: float = None,
                            blocking: bool = True) -> bool:
        """Command the arm joints; False (and nothing sent) when a joint or its speed is out of limits."""
        if self._check_joint_limits(joint_positions):
            self._publish_commands(joint_positions, moving_time, accel_time, blocking)
            return True
        return False

    def go_to_home_pose(self, moving_time: float = None, accel_time: float = None, blocking: bool = True) -> None:
        self._publish_commands([0] * self.group_info.num_joints, moving_time, accel_time, blocking)

    def go_to_sleep_pose(self, moving_time: float = None, accel_time: float = None, blocking: bool = True) -> None:
        self._publish_commands(self.group_info.joint_sleep_positions, moving_time, accel_time, blocking)

    def set_single_joint_position(self, joint_name: str, position: float, moving_time: float = None,
                                  accel_time: float = None, blocking: bool = True) -> bool:
        if not self._check_single_joint_limit(joint_name, position):
            return False
        self.set_trajectory_time(moving_time, accel_time)
        self.joint_commands[self.core.js_index_map[joint_name]] = position
        self.core.pub_single.publish(xs_msgs.JointSingleCommand(name=joint_name, cmd=position))
        if blocking:
            self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(self.moving_time * S_TO_NS)))
        if self.iterative_update_fk:
            self._update_Tsb()
        return True

    def set_ee_pose_matrix(self, T_sd: np.ndarray, custom_guess: List[float] = None, execute: bool = True,
                           moving_time: float = None, accel_time: float = None,
                           blocking: bool = True) -> Tuple[Union[np.ndarray, Any, List[float]], bool]:
        mr = importlib.import_module("modern_robotics")
        initial_guesses = self.initial_guesses if custom_guess is None else [custom_guess]
        for guess in initial_guesses:
            theta_list, success = mr.IKinSpace(Slist=self.robot_des.Slist, M=self.robot_des.M, T=T_sd,
                                               thetalist0=guess, eomg=0.001, ev=0.001)
            if success:
                theta_list = self._wrap_theta_list(theta_list)
                solution_found = self._check_joint_limits(theta_list)
            else:
                solution_found = False
            if solution_found:
                if execute:
                    self._publish_commands(theta_list, moving_time, accel_time, blocking)
                    self.T_sb = T_sd
                return theta_list, True
        self.core.get_node().get_logger().warn("No valid pose could be found. Will not execute")
        return theta_list, False

    def set_ee_pose_components(self, x: float = 0, y: float = 0, z: float = 0, roll: float = 0, pitch: float = 0,
                               yaw: float = None, custom_guess: List[float] = None, execute: bool = True,
                               moving_time: float = None, accel_time: float = None,
                               blocking: bool = True) -> Tuple[Union[np.ndarray, Any, List[float]], bool]:
        if self.group_info.num_joints < 6 or (self.group_info.num_joints >= 6 and yaw is None):
            yaw = math.atan2(y, x)
        T_sd = np.identity(4)
        # angle_manipulation.euler_angles_to_rotation_matrix: static 'sxyz', R = Rz(yaw) Ry(pitch) Rx(roll)
        T_sd[:3, :3] = euler_xyz_to_matrix(np.array([roll, pitch, yaw]))
        T_sd[:3, 3] = [x, y, z]
        return self.set_ee_pose_matrix(T_sd, custom_guess, execute, moving_time, accel_time, blocking)

    def set_ee_cartesian_trajectory(self, *args, **kwargs) -> bool:
        raise NotImplementedError("the WidowX twin does not play Cartesian trajectories (docs/widowx_twin.md)")

    def get_joint_commands(self) -> List[float]:
        return list(self.joint_commands)

    def get_single_joint_command(self, joint_name: str) -> float:
        return self.joint_commands[self.info_index_map[joint_name]]

    def get_ee_pose_command(self) -> np.ndarray:
        return np.array(self.T_sb)

    def get_ee_pose(self) -> np.ndarray:
        joint_states = [self.core.joint_states.position[self.core.js_index_map[name]]
                        for name in self.group_info.joint_names]
        return _CHAIN.forward(np.array(joint_states))

    def capture_joint_positions(self) -> None:
        """Reset the commanded joints to the measured ones (after a torque-off, a reboot, a hold)."""
        self.joint_commands = []
        for name in self.group_info.joint_names:
            self.joint_commands.append(self.core.joint_states.position[self.core.js_index_map[name]])
        self._update_Tsb()

    def get_joint_positions(self) -> List[float]:
        with self.core.js_mutex:
            return [self.core.joint_states.position[self.core.js_index_map[name]]
                    for name in self.group_info.joint_names]

    def get_joint_velocities(self) -> List[float]:
        with self.core.js_mutex:
            return [self.core.joint_states.velocity[self.core.js_index_map[name]]
                    for name in self.group_info.joint_names]

    def get_joint_efforts(self) -> List[float]:
        with self.core.js_mutex:
            return [self.core.joint_states.effort[self.core.js_index_map[name]]
                    for name in self.group_info.joint_names]

    def get_number_of_joints(self) -> int:
        return self.group_info.num_joints

    def _update_Tsb(self) -> None:
        self.T_sb = _CHAIN.forward(np.array(self.joint_commands, dtype=np.float64))

    def _wrap_theta_list(self, theta_list: List[np.ndarray]) -> List[np.ndarray]:
        theta_list = (np.asarray(theta_list) + np.pi) % REV - np.pi
        for x in range(len(theta_list)):
            if round(theta_list[x], 3) < round(self.group_info.joint_lower_limits[x], 3):
                theta_list[x] += REV
            elif round(theta_list[x], 3) > round(self.group_info.joint_upper_limits[x], 3):
                theta_list[x] -= REV
        return theta_list
