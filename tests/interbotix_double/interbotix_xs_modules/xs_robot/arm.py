"""Test double of interbotix_xs_modules.xs_robot.arm: InterbotixManipulatorXS and InterbotixArmXSInterface.

The same signatures and behaviour as the real module, over the simulated bus: blocking moves sleep
``moving_time``; a new ``moving_time``/``accel_time`` costs register writes; ``set_ee_pose_*`` solve
the IK with ``modern_robotics`` from the three fixed seeds (which is why a driver should not call
them every control step); ``set_joint_positions`` checks the joint and velocity limits.
"""

import math
from typing import Any, List, Tuple, Union

import interbotix_common_modules.angle_manipulation as ang
import modern_robotics as mr
import numpy as np
from rclpy.constants import S_TO_NS
from rclpy.duration import Duration
from rclpy.logging import LoggingSeverity

from interbotix_common_modules.common_robot.robot import InterbotixRobotNode
from interbotix_xs_modules.xs_robot import mr_descriptions as mrd
from interbotix_xs_modules.xs_robot.core import InterbotixRobotXSCore, JointGroupCommand
from interbotix_xs_modules.xs_robot.gripper import InterbotixGripperXSInterface

REV: float = 2 * np.pi


class InterbotixManipulatorXS:
    """Standalone Module to control an Interbotix Arm and Gripper."""

    def __init__(self, robot_model: str, group_name: str = 'arm', gripper_name: str = 'gripper',
                 robot_name: str = None, moving_time: float = 2.0, accel_time: float = 0.3,
                 gripper_pressure: float = 0.5, gripper_pressure_lower_limit: int = 150,
                 gripper_pressure_upper_limit: int = 350, topic_joint_states: str = 'joint_states',
                 logging_level: LoggingSeverity = LoggingSeverity.INFO, node_name: str = 'robot_manipulation',
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
        self.moving_time, self.accel_time = None, None
        self.group_name = group_name
        self.iterative_update_fk = iterative_update_fk
        self.robot_des: mrd.ModernRoboticsDescription = getattr(mrd, self.robot_model)
        self.group_info = self.core.robot_get_robot_info("group", group_name)
        if self.group_info.num_joints != self.robot_des.Slist.shape[1]:
            raise SystemExit(1)
        self.initial_guesses = [[0.0] * self.group_info.num_joints for _ in range(3)]
        self.initial_guesses[1][0] = np.deg2rad(-120)
        self.initial_guesses[2][0] = np.deg2rad(120)
        self.joint_commands = []
        for name in self.group_info.joint_names:
            self.joint_commands.append(self.core.joint_states.position[self.core.js_index_map[name]])
        self._update_Tsb()
        self.set_trajectory_time(moving_time, accel_time)
        self.info_index_map = dict(zip(self.group_info.joint_names, range(self.group_info.num_joints)))

    def _publish_commands(self, positions: List[float], moving_time: float = None, accel_time: float = None,
                          blocking: bool = True) -> None:
        self.set_trajectory_time(moving_time, accel_time)
        self.joint_commands = list(positions)
        self.core.pub_group.publish(JointGroupCommand(name=self.group_name, cmd=self.joint_commands))
        if blocking:
            self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(self.moving_time * S_TO_NS)))
        if self.iterative_update_fk:
            self._update_Tsb()

    def set_trajectory_time(self, moving_time: float = None, accel_time: float = None) -> None:
        if moving_time is not None and moving_time != self.moving_time:
            self.moving_time = moving_time
            self.core.robot_set_motor_registers("group", self.group_name, "Profile_Velocity", int(moving_time * 1000))
        if accel_time is not None and accel_time != self.accel_time:
            self.accel_time = accel_time
            self.core.robot_set_motor_registers("group", self.group_name, "Profile_Acceleration",
                                                int(accel_time * 1000))

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
        return (self.group_info.joint_lower_limits[i] <= theta <= self.group_info.joint_upper_limits[i]
                and speed <= self.group_info.joint_velocity_limits[i])

    def set_joint_positions(self, joint_positions: List[float], moving_time: float = None, accel_time: float = None,
                            blocking: bool = True) -> bool:
        self.core.bus.record("arm.set_joint_positions", list(joint_positions), moving_time, accel_time, blocking)
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
        self.core.robot_write_joint_command(joint_name, position)
        if blocking:
            self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(self.moving_time * S_TO_NS)))
        if self.iterative_update_fk:
            self._update_Tsb()
        return True

    def set_ee_pose_matrix(self, T_sd: np.ndarray, custom_guess: List[float] = None, execute: bool = True,
                           moving_time: float = None, accel_time: float = None,
                           blocking: bool = True) -> Tuple[Union[np.ndarray, Any, List[float]], bool]:
        self.core.bus.record("arm.set_ee_pose_matrix", execute, blocking)
        initial_guesses = self.initial_guesses if custom_guess is None else [custom_guess]
        for guess in initial_guesses:
            theta_list, success = mr.IKinSpace(Slist=self.robot_des.Slist, M=self.robot_des.M, T=T_sd,
                                               thetalist0=guess, eomg=0.001, ev=0.001)
            solution_found = success and self._check_joint_limits(self._wrap_theta_list(theta_list))
            if success:
                theta_list = self._wrap_theta_list(theta_list)
            if solution_found:
                if execute:
                    self._publish_commands(theta_list, moving_time, accel_time, blocking)
                    self.T_sb = T_sd
                return theta_list, True
        return theta_list, False

    def set_ee_pose_components(self, x: float = 0, y: float = 0, z: float = 0, roll: float = 0, pitch: float = 0,
                               yaw: float = None, custom_guess: List[float] = None, execute: bool = True,
                               moving_time: float = None, accel_time: float = None,
                               blocking: bool = True) -> Tuple[Union[np.ndarray, Any, List[float]], bool]:
        if self.group_info.num_joints < 6 or (self.group_info.num_joints >= 6 and yaw is None):
            yaw = math.atan2(y, x)
        T_sd = np.identity(4)
        T_sd[:3, :3] = ang.euler_angles_to_rotation_matrix([roll, pitch, yaw])
        T_sd[:3, 3] = [x, y, z]
        return self.set_ee_pose_matrix(T_sd, custom_guess, execute, moving_time, accel_time, blocking)

    def set_ee_cartesian_trajectory(self, x: float = 0, y: float = 0, z: float = 0, roll: float = 0,
                                    pitch: float = 0, yaw: float = 0, moving_time: float = None,
                                    wp_moving_time: float = 0.2, wp_accel_time: float = 0.1,
                                    wp_period: float = 0.05) -> bool:
        raise NotImplementedError("the test double does not play Cartesian trajectories")

    def get_joint_commands(self) -> List[float]:
        return list(self.joint_commands)

    def get_single_joint_command(self, joint_name: str) -> float:
        return self.joint_commands[self.info_index_map[joint_name]]

    def get_ee_pose_command(self) -> np.ndarray:
        return np.array(self.T_sb)

    def get_ee_pose(self) -> np.ndarray:
        return mr.FKinSpace(self.robot_des.M, self.robot_des.Slist, self.get_joint_positions())

    def capture_joint_positions(self) -> None:
        self.core.bus.record("arm.capture_joint_positions")
        self.joint_commands = self.get_joint_positions()
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
        self.T_sb = mr.FKinSpace(self.robot_des.M, self.robot_des.Slist, self.joint_commands)

    def _wrap_theta_list(self, theta_list: List[np.ndarray]) -> List[np.ndarray]:
        theta_list = (np.asarray(theta_list) + np.pi) % REV - np.pi
        for x in range(len(theta_list)):
            if round(theta_list[x], 3) < round(self.group_info.joint_lower_limits[x], 3):
                theta_list[x] += REV
            elif round(theta_list[x], 3) > round(self.group_info.joint_upper_limits[x], 3):
                theta_list[x] -= REV
        return theta_list
