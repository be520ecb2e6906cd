"""Test double of interbotix_xs_modules.xs_robot.gripper (InterbotixGripperXSInterface)."""

from rclpy.constants import S_TO_NS
from rclpy.duration import Duration

from interbotix_xs_modules.xs_robot.core import InterbotixRobotXSCore, JointSingleCommand


class InterbotixGripperXSInterface:
    def __init__(self, core: InterbotixRobotXSCore, gripper_name: str, gripper_pressure: float = 0.5,
                 gripper_pressure_lower_limit: int = 150, gripper_pressure_upper_limit: int = 350) -> None:
        self.core = core
        self.gripper_name = gripper_name
        self.gripper_pressure = gripper_pressure
        self.gripper_moving: bool = False
        self.gripper_command = JointSingleCommand(name=gripper_name)
        self.gripper_pressure_lower_limit = gripper_pressure_lower_limit
        self.gripper_pressure_upper_limit = gripper_pressure_upper_limit
        self.gripper_value = gripper_pressure_lower_limit + (
            gripper_pressure * (gripper_pressure_upper_limit - gripper_pressure_lower_limit))
        self.tmr_gripper_state = self.core.get_node().create_timer(timer_period_sec=0.02, callback=self.gripper_state)
        self.gripper_info = self.core.robot_get_robot_info("single", gripper_name)
        self.left_finger_index = self.core.js_index_map[self.gripper_info.joint_names[0]]
        self.left_finger_lower_limit = self.gripper_info.joint_lower_limits[0]
        self.left_finger_upper_limit = self.gripper_info.joint_upper_limits[0]
        self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(0.5 * S_TO_NS)))

    def gripper_state(self) -> None:
        """Stop the gripper moving past its limits when in PWM mode (50 Hz timer, as the real one)."""
        if self.gripper_moving:
            with self.core.js_mutex:
                gripper_pos = self.core.joint_states.position[self.left_finger_index]
            if (self.gripper_command.cmd > 0 and gripper_pos >= self.left_finger_upper_limit) or (
                    self.gripper_command.cmd < 0 and gripper_pos <= self.left_finger_lower_limit):
                self.gripper_command.cmd = float(0.0)
                self.core.pub_single.publish(self.gripper_command)
                self.gripper_moving = False

    def gripper_controller(self, effort: float, delay: float) -> None:
        self.gripper_command.cmd = effort
        with self.core.js_mutex:
            gripper_pos = self.core.joint_states.position[self.left_finger_index]
        if (self.gripper_command.cmd > 0 and gripper_pos < self.left_finger_upper_limit) or (
                self.gripper_command.cmd < 0 and gripper_pos > self.left_finger_lower_limit):
            self.core.pub_single.publish(self.gripper_command)
            self.gripper_moving = True
            self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(delay * S_TO_NS)))

    def set_pressure(self, pressure: float) -> None:
        self.gripper_value = self.gripper_pressure_lower_limit + pressure * (
            self.gripper_pressure_upper_limit - self.gripper_pressure_lower_limit)

    def release(self, delay: float = 1.0) -> None:
        self.core.bus.record("gripper.release", delay)
        self.gripper_controller(self.gripper_value, delay)

    def grasp(self, delay: float = 1.0) -> None:
        self.core.bus.record("gripper.grasp", delay)
        self.gripper_controller(-self.gripper_value, delay)

    def get_gripper_position(self) -> float:
        with self.core.js_mutex:
            return self.core.joint_states.position[self.core.js_index_map[self.gripper_name]]

    def get_gripper_velocity(self) -> float:
        with self.core.js_mutex:
            return self.core.joint_states.velocity[self.core.js_index_map[self.gripper_name]]

    def get_gripper_effort(self) -> float:
        with self.core.js_mutex:
            return self.core.joint_states.effort[self.core.js_index_map[self.gripper_name]]

    def get_finger_position(self) -> float:
        with self.core.js_mutex:
            return self.core.joint_states.position[self.left_finger_index]
