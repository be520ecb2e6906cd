"""Test double of interbotix_xs_modules.xs_robot.core (InterbotixRobotXSCore) over a simulated bus."""

import copy
import time
from dataclasses import dataclass, field
from threading import Lock
from typing import Dict, List, Optional

from rclpy.logging import LoggingSeverity
from sensor_msgs.msg import JointState

from interbotix_common_modules.common_robot.robot import (
    InterbotixRobotNode,
    create_interbotix_global_node,
    get_interbotix_global_node,
)
from interbotix_xs_modules.xs_robot import _bus

REGISTER_WRITE_S = 0.004  # a RegisterValues service round trip to the xs_sdk (measured order: milliseconds)
JOINT_STATE_PERIOD_S = 0.01  # xs_sdk joint_state_publisher update_rate 100 (interbotix_xsarm_control wx250s.yaml)


@dataclass
class JointGroupCommand:
    """interbotix_xs_msgs/msg/JointGroupCommand."""

    name: str = ""
    cmd: List[float] = field(default_factory=list)


@dataclass
class JointSingleCommand:
    """interbotix_xs_msgs/msg/JointSingleCommand."""

    name: str = ""
    cmd: float = 0.0


class _CommandPublisher:
    """The core's command publishers (commands/joint_group, commands/joint_single), wired to the bus."""

    def __init__(self, core: "InterbotixRobotXSCore", group: bool):
        self.core, self.group = core, group

    def publish(self, msg) -> None:
        if self.group:
            self.core.robot_write_commands(msg.name, list(msg.cmd))
        else:
            self.core.robot_write_joint_command(msg.name, float(msg.cmd))


@dataclass
class RobotInfoResponse:
    """The fields of interbotix_xs_msgs/srv/RobotInfo's response the API reads."""

    joint_names: List[str] = field(default_factory=list)
    joint_ids: List[int] = field(default_factory=list)
    joint_lower_limits: List[float] = field(default_factory=list)
    joint_upper_limits: List[float] = field(default_factory=list)
    joint_velocity_limits: List[float] = field(default_factory=list)
    joint_sleep_positions: List[float] = field(default_factory=list)
    joint_state_indices: List[int] = field(default_factory=list)
    num_joints: int = 0
    name: List[str] = field(default_factory=list)
    mode: str = "position"
    profile_type: str = "time"


class InterbotixRobotXSCore:
    """Class that interfaces with the xs_sdk node ROS interfaces (here: a simulated bus)."""

    def __init__(self, robot_model: str, robot_name: Optional[str] = None, topic_joint_states: str = 'joint_states',
                 logging_level: LoggingSeverity = LoggingSeverity.INFO,
                 node_name: str = 'interbotix_robot_manipulation', node: Optional[InterbotixRobotNode] = None,
                 args=None) -> None:
        self.robot_model = robot_model
        self.robot_name = robot_model if robot_name is None else robot_name
        self.ns = '' if self.robot_name == '' else f'/{self.robot_name}'
        self.node_name = node_name
        if node is None:
            node = get_interbotix_global_node() or create_interbotix_global_node(node_name=node_name)
        self.robot_node = node
        self.topic_joint_states = topic_joint_states
        self.bus = _bus.BUS
        self.js_mutex = Lock()
        self.joint_states: JointState = None
        self._refresh_joint_states()
        self.js_index_map = dict(zip(self.joint_states.name, range(len(self.joint_states.name))))
        self.pub_group = _CommandPublisher(self, group=True)
        self.pub_single = _CommandPublisher(self, group=False)
        # xs_sdk publishes joint states at 100 Hz; the core's subscription keeps the latest.
        self._timer = self.robot_node.create_timer(JOINT_STATE_PERIOD_S, self._refresh_joint_states)

    def _refresh_joint_states(self) -> None:
        positions, velocities, finger, finger_velocity = self.bus.step()
        msg = JointState()
        msg.header.stamp = self.robot_node.get_clock().now().to_msg()
        msg.name = [*_bus.ARM, "gripper", "left_finger", "right_finger"]
        msg.position = [*map(float, positions), finger / 0.0135, finger, -finger]
        msg.velocity = [*map(float, velocities), finger_velocity / 0.0135, finger_velocity, -finger_velocity]
        msg.effort = [0.0] * 9
        with self.js_mutex:
            self.joint_states = msg

    def get_node(self) -> InterbotixRobotNode:
        return self.robot_node

    def robot_set_operating_modes(self, cmd_type: str, name: str, mode: str, profile_type: str = 'velocity',
                                  profile_velocity: int = 0, profile_acceleration: int = 0) -> None:
        self.bus.record("robot_set_operating_modes", cmd_type, name, mode, profile_type)
        time.sleep(REGISTER_WRITE_S)

    def robot_set_motor_pid_gains(self, cmd_type: str, name: str, kp_pos: int, ki_pos: int = 0, kd_pos: int = 0,
                                  k1: int = 0, k2: int = 0, kp_vel: int = 100, ki_vel: int = 1920) -> None:
        self.bus.record("robot_set_motor_pid_gains", cmd_type, name)
        time.sleep(REGISTER_WRITE_S)

    def robot_set_motor_registers(self, cmd_type: str, name: str, reg: str, value: int) -> None:
        self.bus.record("robot_set_motor_registers", cmd_type, name, reg, value)
        if cmd_type == "group" and reg == "Profile_Velocity":
            self.bus.moving_time = value / 1000.0
        elif cmd_type == "group" and reg == "Profile_Acceleration":
            self.bus.accel_time = value / 1000.0
        time.sleep(REGISTER_WRITE_S)

    def robot_get_motor_registers(self, cmd_type: str, name: str, reg: str) -> List[int]:
        self.bus.record("robot_get_motor_registers", cmd_type, name, reg)
        time.sleep(REGISTER_WRITE_S)
        if reg == "Hardware_Error_Status":
            return [32 if joint in self.bus.faulted else 0 for joint in _bus.ARM]
        return [0] * len(_bus.ARM)

    def robot_get_robot_info(self, cmd_type: str, name: str) -> RobotInfoResponse:
        self.bus.record("robot_get_robot_info", cmd_type, name)
        if cmd_type == "group" and name in ("arm", "all"):
            return RobotInfoResponse(joint_names=list(_bus.ARM), joint_ids=[1, 2, 4, 6, 7, 8],
                                     joint_lower_limits=list(_bus.LOWER), joint_upper_limits=list(_bus.UPPER),
                                     joint_velocity_limits=list(_bus.VELOCITY),
                                     joint_sleep_positions=list(_bus.SLEEP), joint_state_indices=list(range(6)),
                                     num_joints=6, name=["arm"], mode="position", profile_type="time")
        if cmd_type == "single" and name == "gripper":
            return RobotInfoResponse(joint_names=["left_finger"], joint_ids=[9],
                                     joint_lower_limits=[_bus.FINGER_LOWER], joint_upper_limits=[_bus.FINGER_UPPER],
                                     joint_velocity_limits=[1.0], joint_sleep_positions=[0.0],
                                     joint_state_indices=[7], num_joints=1, name=["gripper"], mode="pwm",
                                     profile_type="velocity")
        raise ValueError(f"the double knows the 'arm' group and the 'gripper' motor, not {cmd_type} {name!r}")

    def robot_torque_enable(self, cmd_type: str, name: str, enable: bool) -> None:
        self.bus.record("robot_torque_enable", cmd_type, name, enable)
        self.bus.torque = bool(enable)
        time.sleep(REGISTER_WRITE_S)

    def robot_reboot_motors(self, cmd_type: str, name: str, enable: bool, smart_reboot: bool = False):
        self.bus.record("robot_reboot_motors", cmd_type, name, enable, smart_reboot)
        names = list(_bus.ARM) if cmd_type == "group" else [name]
        if smart_reboot:
            names = [n for n in names if n in self.bus.faulted]
        time.sleep(0.05 * max(1, len(names)))  # a reboot takes tens of milliseconds per motor
        self.bus.reboot(names, enable)

    def robot_write_commands(self, group_name: str, commands: List[float]) -> None:
        self.bus.record("robot_write_commands", group_name, list(commands))
        self.bus.command(commands)

    def robot_write_joint_command(self, joint_name: str, command: float) -> None:
        self.bus.record("robot_write_joint_command", joint_name, command)
        if joint_name == "gripper":
            self.bus.gripper_effort = float(command)
        elif joint_name in _bus.ARM:
            targets = list(self.bus.positions)
            targets[_bus.ARM.index(joint_name)] = command
            self.bus.command(targets)

    def robot_write_trajectory(self, cmd_type: str, name: str, traj_type: str, raw_traj) -> None:
        self.bus.record("robot_write_trajectory", cmd_type, name, traj_type)
        raise NotImplementedError("the test double does not play trajectories")

    def robot_get_joint_states(self) -> JointState:
        with self.js_mutex:
            return copy.deepcopy(self.joint_states)

    def robot_get_single_joint_state(self, name: str) -> Dict[str, List[float]]:
        with self.js_mutex:
            joint_states = copy.deepcopy(self.joint_states)
        i = joint_states.name.index(name)
        return {"position": joint_states.position[i], "velocity": joint_states.velocity[i],
                "effort": joint_states.effort[i]}
