"""The twin of ``interbotix_xs_modules.xs_robot.core``: ``InterbotixRobotXSCore``, the API's link to xs_sdk.

Follows Interbotix/interbotix_ros_toolboxes, branch rolling, commit
4c720477ff36231d6cfc256c6e55b9930537a081,
``interbotix_xs_toolbox/interbotix_xs_modules/interbotix_xs_modules/xs_robot/core.py``, method for
method, with xs_sdk reached through :func:`ladder_ros.instruments.widowx_twin.xs_sdk.connect` instead of
ROS services and topics under ``/<robot_name>``. The behaviour that matters to a driver is kept:

* every ``robot_*`` service method sends its request and then waits in
  ``wait_until_future_complete`` **without a timeout**: a reboot, a register write or a torque
  change that xs_sdk does not answer blocks the caller for ever;
* commands (``robot_write_commands``, ``robot_write_joint_command``, the ``pub_group`` and
  ``pub_single`` publishers) return at once;
* the joint states are the latest xs_sdk published (100 Hz), read under ``js_mutex``; the
  constructor waits until the first one arrives.
"""

from __future__ import annotations

import copy
from threading import Lock
from typing import Dict, List, Optional

import rclpy
from rclpy.logging import LoggingSeverity, set_logger_level
from rclpy.task import Future
from sensor_msgs.msg import JointState

from ladder_ros.instruments.widowx_twin import xs_msgs, xs_sdk
from ladder_ros.instruments.widowx_twin.motors import JointStateSample
from ladder_ros.instruments.widowx_twin.robot import InterbotixRobotNode, create_interbotix_global_node


class _ServiceClient:
    """A service client of xs_sdk with rclpy's ``call_async`` shape: the answer arrives in an rclpy Future."""

    def __init__(self, sdk: xs_sdk.XsSdk, service: str):
        self.sdk, self.srv_name = sdk, service

    def call_async(self, request) -> Future:
        future = Future()
        answer = self.sdk.call(self.srv_name, request)
        answer.add_done_callback(lambda done: future.set_result(done.result()) if done.exception() is None
                                 else future.set_exception(done.exception()))
        return future

    def wait_for_service(self, timeout_sec: Optional[float] = None) -> bool:
        return True


class _Publisher:
    def __init__(self, sdk: xs_sdk.XsSdk, topic: str):
        self.sdk, self.topic_name = sdk, topic

    def publish(self, msg) -> None:
        self.sdk.publish(self.topic_name, copy.deepcopy(msg))  # a ROS publish sends the message as it is now


class InterbotixRobotXSCore:
    """Class that interfaces with the xs_sdk node ROS interfaces."""

    def __init__(self, robot_model: str, robot_name: Optional[str] = None, topic_joint_states: str = "joint_states",
                 logging_level: LoggingSeverity = LoggingSeverity.INFO,
                 node_name: str = "interbotix_robot_manipulation", node: Optional[InterbotixRobotNode] = None,
                 args=None) -> None:
        self.robot_model = robot_model
        self.robot_name = robot_name
        self.node_name = node_name
        if self.robot_name is None:
            self.robot_name = robot_model
        self.ns = "" if self.robot_name == "" else f"/{self.robot_name}"
        # As upstream: without a node the global node is created, ignoring ``node_name``.
        self.robot_node = create_interbotix_global_node() if node is None else node
        set_logger_level(self.node_name, logging_level)
        self.topic_joint_states = topic_joint_states
        self.joint_states: JointState = None
        self.js_mutex = Lock()
        self.sdk = xs_sdk.connect(self.robot_name)
        self.srv_set_op_modes = _ServiceClient(self.sdk, "set_operating_modes")
        self.srv_set_pids = _ServiceClient(self.sdk, "set_motor_pid_gains")
        self.srv_set_reg = _ServiceClient(self.sdk, "set_motor_registers")
        self.srv_get_reg = _ServiceClient(self.sdk, "get_motor_registers")
        self.srv_get_info = _ServiceClient(self.sdk, "get_robot_info")
        self.srv_torque = _ServiceClient(self.sdk, "torque_enable")
        self.srv_reboot = _ServiceClient(self.sdk, "reboot_motors")
        self.pub_group = _Publisher(self.sdk, "commands/joint_group")
        self.pub_single = _Publisher(self.sdk, "commands/joint_single")
        self.pub_traj = _Publisher(self.sdk, "commands/joint_trajectory")
        self.sdk.subscribe_joint_states(self._joint_state_cb)
        while self.joint_states is None and rclpy.ok():
            rclpy.spin_once(self.robot_node, timeout_sec=0.01)
        self.js_index_map = dict(zip(self.joint_states.name, range(len(self.joint_states.name))))
        self.robot_node.get_logger().info(f"\n\tRobot Name: {self.robot_name}\n\tRobot Model: {self.robot_model}")
        self.robot_node.get_logger().info("Initialized InterbotixRobotXSCore!")

    def get_node(self) -> InterbotixRobotNode:
        return self.robot_node

    def robot_set_operating_modes(self, cmd_type: str, name: str, mode: str, profile_type: str = "velocity",
                                  profile_velocity: int = 0, profile_acceleration: int = 0) -> None:
        future = self.srv_set_op_modes.call_async(xs_msgs.OperatingModes.Request(
            cmd_type=cmd_type, name=name, mode=mode, profile_type=profile_type, profile_velocity=profile_velocity,
            profile_acceleration=profile_acceleration))
        self.get_node().wait_until_future_complete(future)

    def robot_set_motor_pid_gains(self, cmd_type: str, name: str, kp_pos: int, ki_pos: int = 0, kd_pos: int = 0,
                                  k1: int = 0, k2: int = 0, kp_vel: int = 100, ki_vel: int = 1920) -> None:
        future = self.srv_set_pids.call_async(xs_msgs.MotorGains.Request(
            cmd_type=cmd_type, name=name, kp_pos=kp_pos, ki_pos=ki_pos, kd_pos=kd_pos, k1=k1, k2=k2, kp_vel=kp_vel,
            ki_vel=ki_vel))
        self.get_node().wait_until_future_complete(future)

    def robot_set_motor_registers(self, cmd_type: str, name: str, reg: str, value: int) -> None:
        future = self.srv_set_reg.call_async(xs_msgs.RegisterValues.Request(cmd_type=cmd_type, name=name, reg=reg,
                                                                            value=value))
        self.get_node().wait_until_future_complete(future)

    def robot_get_motor_registers(self, cmd_type: str, name: str, reg: str) -> List[int]:
        future = self.srv_get_reg.call_async(xs_msgs.RegisterValues.Request(cmd_type=cmd_type, name=name, reg=reg))
        self.get_node().wait_until_future_complete(future)
        return future.result().values

    def robot_get_robot_info(self, cmd_type: str, name: str) -> xs_msgs.RobotInfo.Response:
        future = self.srv_get_info.call_async(xs_msgs.RobotInfo.Request(cmd_type=cmd_type, name=name))
        self.get_node().wait_until_future_complete(future)
        return future.result()

    def robot_torque_enable(self, cmd_type: str, name: str, enable: bool) -> None:
        future = self.srv_torque.call_async(xs_msgs.TorqueEnable.Request(cmd_type=cmd_type, name=name, enable=enable))
        self.get_node().wait_until_future_complete(future)

    def robot_reboot_motors(self, cmd_type: str, name: str, enable: bool, smart_reboot: bool = False):
        future = self.srv_reboot.call_async(xs_msgs.Reboot.Request(cmd_type=cmd_type, name=name, enable=enable,
                                                                   smart_reboot=smart_reboot))
        self.get_node().wait_until_future_complete(future)

    def robot_write_commands(self, group_name: str, commands: List[float]) -> None:
        self.pub_group.publish(xs_msgs.JointGroupCommand(name=group_name, cmd=commands))

    def robot_write_joint_command(self, joint_name: str, command: float) -> None:
        self.pub_single.publish(xs_msgs.JointSingleCommand(name=joint_name, cmd=command))

    def robot_write_trajectory(self, cmd_type: str, name: str, traj_type: str, raw_traj) -> None:
        raise NotImplementedError("the WidowX twin does not play joint trajectories (docs/widowx_twin.md)")

    def robot_get_joint_states(self) -> JointState:
        with self.js_mutex:
            return copy.deepcopy(self.joint_states)

    def robot_get_single_joint_state(self, name: str) -> Dict[str, List[float]]:
        with self.js_mutex:
            joint_states = copy.deepcopy(self.joint_states)
        i = joint_states.name.index(name)
        return {"position": joint_states.position[i], "velocity": joint_states.velocity[i],
                "effort": joint_states.effort[i]}

    def _joint_state_cb(self, sample: JointStateSample) -> None:
        msg = JointState()
        seconds = int(sample.stamp_s)
        msg.header.stamp.sec, msg.header.stamp.nanosec = seconds, int((sample.stamp_s - seconds) * 1e9)
        msg.name = list(sample.name)
        msg.position = list(sample.position)
        msg.velocity = list(sample.velocity)
        msg.effort = list(sample.effort)
        with self.js_mutex:
            self.joint_states = msg
