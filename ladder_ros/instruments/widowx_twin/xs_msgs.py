"""The interbotix_xs_msgs messages and services the Interbotix Python API exchanges with xs_sdk, as plain classes.

Same names and fields as the ROS 2 definitions (Interbotix/interbotix_ros_core, branch rolling,
commit bf127b474e0554b93ef18b51becba38da9cbc255, ``interbotix_ros_xseries/interbotix_xs_msgs``:
``msg/JointGroupCommand.msg``, ``msg/JointSingleCommand.msg``, ``srv/RobotInfo.srv``,
``srv/RegisterValues.srv``, ``srv/Reboot.srv``, ``srv/TorqueEnable.srv``, ``srv/OperatingModes.srv``,
``srv/MotorGains.srv``), so the twin's API reads like the vendor's. ``float32[]`` fields hold
float32-rounded values, as a ROS message would deliver them: the API's joint-limit check compares
against those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

import numpy as np


def float32_list(values) -> List[float]:
    """Values as a ``float32[]`` field delivers them to Python."""
    return [float(v) for v in np.asarray(values, dtype=np.float32)]


@dataclass
class JointGroupCommand:
    name: str = ""
    cmd: List[float] = field(default_factory=list)


@dataclass
class JointSingleCommand:
    name: str = ""
    cmd: float = 0.0


@dataclass
class JointTrajectoryCommand:
    cmd_type: str = ""
    name: str = ""
    traj: object = None


class RobotInfo:
    @dataclass
    class Request:
        cmd_type: str = ""
        name: str = ""

    @dataclass
    class Response:
        mode: str = ""
        profile_type: str = ""
        joint_names: List[str] = field(default_factory=list)
        joint_ids: List[int] = field(default_factory=list)
        joint_lower_limits: List[float] = field(default_factory=list)
        joint_upper_limits: List[float] = field(default_factory=list)
        joint_velocity_limits: List[float] = field(default_factory=list)
        joint_sleep_positions: List[float] = field(default_factory=list)
        joint_state_indices: List[int] = field(default_factory=list)
        num_joints: int = 0
        name: List[str] = field(default_factory=list)


class RegisterValues:
    @dataclass
    class Request:
        cmd_type: str = ""
        name: str = ""
        reg: str = ""
        value: int = 0

    @dataclass
    class Response:
        values: List[int] = field(default_factory=list)


class Reboot:
    @dataclass
    class Request:
        cmd_type: str = ""
        name: str = ""
        enable: bool = False
        smart_reboot: bool = False

    @dataclass
    class Response:
        pass


class TorqueEnable:
    @dataclass
    class Request:
        cmd_type: str = ""
        name: str = ""
        enable: bool = False

    @dataclass
    class Response:
        pass


class OperatingModes:
    @dataclass
    class Request:
        cmd_type: str = ""
        name: str = ""
        mode: str = ""
        profile_type: str = ""
        profile_velocity: int = 0
        profile_acceleration: int = 0

    @dataclass
    class Response:
        pass


class MotorGains:
    @dataclass
    class Request:
        cmd_type: str = ""
        name: str = ""
        kp_pos: int = 0
        ki_pos: int = 0
        kd_pos: int = 0
        k1: int = 0
        k2: int = 0
        kp_vel: int = 0
        ki_vel: int = 0

    @dataclass
    class Response:
        pass
