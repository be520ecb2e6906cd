"""The twin of ``interbotix_xs_modules.xs_robot.gripper``: ``InterbotixGripperXSInterface`` (PWM gripper).

Follows Interbotix/interbotix_ros_toolboxes, branch rolling, commit
4c720477ff36231d6cfc256c6e55b9930537a081,
``interbotix_xs_toolbox/interbotix_xs_modules/interbotix_xs_modules/xs_robot/gripper.py``:
``grasp`` / ``release`` publish a PWM effort (``gripper_pressure`` between 150 and 350 PWM by
default) and then **sleep their ``delay``** (1 s unless given); a 50 Hz timer on the API's node
sets the PWM back to 0 once the left finger reaches its lower or upper limit. A finger stopped by
an object short of the limit keeps being pushed. The constructor sleeps 0.5 s, as upstream.
"""

from __future__ import annotations

import rclpy
from rclpy.constants import S_TO_NS
from rclpy.duration import Duration

from ladder_ros.instruments.widowx_twin import xs_msgs
from ladder_ros.instruments.widowx_twin.core import InterbotixRobotXSCore


class InterbotixGripperXSInterface:
    def __init__(self, core: InterbotixRobotXSCore, gripper_name: str, gripper_pressure: float = 0.5,
                 gripper_pressure_lower_limit: int = 150, gripper_pressure_upper_limit: int = 350) -> None:
        self.core = core
        self.gripper_name = gripper_name
        self.gripper_pressure = gripper_pressure
        self.future_gripper_info = self.core.srv_get_info.call_async(
            xs_msgs.RobotInfo.Request(cmd_type="single", name=gripper_name))
        self.gripper_moving: bool = False
        self.gripper_command = xs_msgs.JointSingleCommand(name=gripper_name)
        self.gripper_pressure_lower_limit = gripper_pressure_lower_limit
        self.gripper_pressure_upper_limit = gripper_pressure_upper_limit
        self.gripper_value = gripper_pressure_lower_limit + (
            gripper_pressure * (gripper_pressure_upper_limit - gripper_pressure_lower_limit))
        self.tmr_gripper_state = self.core.get_node().create_timer(timer_period_sec=0.02, callback=self.gripper_state)
        while rclpy.ok() and not self.future_gripper_info.done():
            rclpy.spin_until_future_complete(self.core.get_node(), self.future_gripper_info)
            rclpy.spin_once(self.core.get_node(), timeout_sec=0.0)
        self.gripper_info: xs_msgs.RobotInfo.Response = self.future_gripper_info.result()
        self.left_finger_index = self.core.js_index_map[self.gripper_info.joint_names[0]]
        self.left_finger_lower_limit = self.gripper_info.joint_lower_limits[0]
        self.left_finger_upper_limit = self.gripper_info.joint_upper_limits[0]
        if self.gripper_info.mode not in ("current", "pwm"):
            self.core.get_node().get_logger().warn(
                f"Motor '{gripper_name}' operating mode not set to 'pwm' or 'current'.")
        self.core.get_node().get_clock().sleep_for(Duration(nanoseconds=int(0.5 * S_TO_NS)))
        self.core.get_node().get_logger().info("Initialized InterbotixGripperXSInterface!")

    def gripper_state(self) -> None:
        """Stop the gripper moving past its limits when in PWM mode (the 50 Hz timer)."""
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
        """Open the gripper (PWM), then sleep ``delay``."""
        self.gripper_controller(self.gripper_value, delay)

    def grasp(self, delay: float = 1.0) -> None:
        """Close the gripper (PWM), then sleep ``delay``."""
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
