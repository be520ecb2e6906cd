"""In-process stand-ins for the two arm APIs the drivers call, for fast unit tests of their wrappers.

No ROS graph, no process, no thread of their own: every call is recorded, and each fake answers as
the vendor's API does where the wrapper relies on it.

* :class:`FakeInterbotix` follows Interbotix/interbotix_ros_toolboxes, branch rolling, commit
  4c720477ff36231d6cfc256c6e55b9930537a081, ``interbotix_xs_modules/xs_robot/arm.py`` (the
  ``set_joint_positions`` check: positions truncated to 1 mrad, refused outside the group's limits or
  farther from the last *commanded* joints than velocity limit x ``moving_time``; nothing published
  then; ``capture_joint_positions`` resets the commanded joints to the measured ones), ``core.py``
  (register reads return one value per motor of the group; ``robot_reboot_motors`` clears the RAM
  registers, the profile included; each service wait leaves a 20 Hz ``Rate`` timer on the node) and
  ``gripper.py`` (``release`` opens, ``grasp`` closes, each sleeping its ``delay``).
* :class:`FakeFranky` follows franky-control 2.0.0 (TimSchneider42/franky, ``Robot``, ``Gripper``,
  ``JointWaypointMotion``, ``JointStopMotion``): the limits the connected arm reports, a motion's error
  raised by ``poll_motion``, ``recover_from_errors`` returning whether it worked, the gripper's
  ``width`` read and its blocking ``move`` / ``grasp`` returning whether the hand got there.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from ladder_ros.robots import wx250s
from ladder_ros.robots.interbotix_arm import InterbotixApi

GROUPS = {"arm": wx250s.JOINT_NAMES, "gripper": ("gripper",)}


class FakeTimer:
    def __init__(self, callback):
        self.callback = callback


class FakeNode:
    """The API's node: a name, and the timers left on it."""

    def __init__(self, node_name: str, namespace: str, use_global_arguments: bool = True):
        self.node_name, self.namespace, self.use_global_arguments = node_name, namespace, use_global_arguments
        self.timers: list[FakeTimer] = []
        self.destroyed: list[FakeTimer] = []

    def get_fully_qualified_name(self) -> str:
        return f"{self.namespace.rstrip('/')}/{self.node_name}"

    def leave_rate_timer(self) -> None:
        """What a service wait leaves behind (rclpy ``Rate``: a timer that sets a ``threading.Event``)."""
        self.timers.append(FakeTimer(threading.Event().set))

    def destroy_timer(self, timer: FakeTimer) -> None:
        self.timers.remove(timer)
        self.destroyed.append(timer)


@dataclass
class GroupInfo:
    joint_names: tuple = wx250s.JOINT_NAMES
    mode: str = "position"
    profile_type: str = "time"
    joint_lower_limits: tuple = wx250s.LOWER
    joint_upper_limits: tuple = wx250s.UPPER
    joint_velocity_limits: tuple = (wx250s.VELOCITY_LIMIT_RAD_S,) * 6


class FakeCore:
    """``InterbotixRobotXSCore``: joint states, motor registers by motor, torque and reboot."""

    def __init__(self, node: FakeNode):
        self.node = node
        names = (*wx250s.JOINT_NAMES, "left_finger", "right_finger")
        self.js_index_map = {name: i for i, name in enumerate(names)}
        self.position = [0.0] * len(names)
        self.velocity = [0.0] * len(names)
        self.effort = [0.0] * len(names)  # present current, mA (xs_sdk fills it; empty when a publisher does not)
        self.stamp = (12, 345)
        self.registers: dict[tuple[str, str], int] = {}
        for motor in (*GROUPS["arm"], "gripper"):
            self.registers.update({(motor, "Profile_Velocity"): 2000, (motor, "Profile_Acceleration"): 300,
                                   (motor, "Torque_Enable"): 1, (motor, "Hardware_Error_Status"): 0})
        self.calls: list[tuple] = []
        self.fail: dict[str, BaseException] = {}  # a method name -> what it raises
        self.short_reads: set[str] = set()  # registers read back with a value missing
        self.stuck: set[str] = set()  # motors that ignore register writes (a motor that did not take them)

    def _motors(self, cmd_type: str, name: str) -> tuple[str, ...]:
        assert cmd_type in ("group", "single"), cmd_type
        return GROUPS[name] if cmd_type == "group" else (name,)

    def _call(self, method: str, *args) -> None:
        self.calls.append((method, *args))
        if method in self.fail:
            raise self.fail[method]
        self.node.leave_rate_timer()

    def robot_get_joint_states(self):
        return SimpleNamespace(position=list(self.position), velocity=list(self.velocity), effort=list(self.effort),
                               header=SimpleNamespace(stamp=SimpleNamespace(sec=self.stamp[0], nanosec=self.stamp[1])))

    def robot_set_motor_registers(self, cmd_type: str, name: str, reg: str, value: int) -> None:
        self._call("robot_set_motor_registers", cmd_type, name, reg, value)
        for motor in self._motors(cmd_type, name):
            if motor not in self.stuck:
                self.registers[(motor, reg)] = value

    def robot_get_motor_registers(self, cmd_type: str, name: str, reg: str) -> list[int]:
        self._call("robot_get_motor_registers", cmd_type, name, reg)
        values = [self.registers[(motor, reg)] for motor in self._motors(cmd_type, name)]
        return values[:-1] if reg in self.short_reads else values

    def robot_torque_enable(self, cmd_type: str, name: str, enable: bool) -> None:
        self._call("robot_torque_enable", cmd_type, name, enable)
        for motor in self._motors(cmd_type, name):
            self.registers[(motor, "Torque_Enable")] = int(enable)

    def robot_reboot_motors(self, cmd_type: str, name: str, enable: bool, smart_reboot: bool = False) -> None:
        self._call("robot_reboot_motors", cmd_type, name, enable, smart_reboot)
        for motor in self._motors(cmd_type, name):
            if smart_reboot and not self.registers[(motor, "Hardware_Error_Status")]:
                continue
            self.registers.update({(motor, "Profile_Velocity"): 0, (motor, "Profile_Acceleration"): 0,
                                   (motor, "Hardware_Error_Status"): 0, (motor, "Torque_Enable"): int(enable)})

    def measured(self) -> list[float]:
        return [self.position[self.js_index_map[n]] for n in wx250s.JOINT_NAMES]


class FakeArmInterface:
    """``InterbotixArmXSInterface``: the commanded joints and the limit check of ``set_joint_positions``."""

    def __init__(self, core: FakeCore, info: GroupInfo, moving_time: float):
        self.core, self.group_info, self.moving_time = core, info, moving_time
        self.joint_commands = core.measured()
        self.published: list[list[float]] = []
        self.refuse_all = False  # the API refuses whatever it is sent (a joint outside its truncated limits)
        self.raise_on_send: BaseException | None = None

    def _check_joint_limits(self, positions) -> bool:
        theta = [int(p * 1000) / 1000.0 for p in positions]
        for x in range(len(theta)):
            if not self.group_info.joint_lower_limits[x] <= theta[x] <= self.group_info.joint_upper_limits[x]:
                return False
            if abs(theta[x] - self.joint_commands[x]) / self.moving_time > self.group_info.joint_velocity_limits[x]:
                return False
        return True

    def set_joint_positions(self, joint_positions, moving_time=None, accel_time=None, blocking=True) -> bool:
        assert blocking is False, "the driver never blocks on a move"
        if self.raise_on_send is not None:
            raise self.raise_on_send
        if self.refuse_all or not self._check_joint_limits(joint_positions):
            return False
        self.joint_commands = list(joint_positions)
        self.published.append(list(joint_positions))
        return True

    def capture_joint_positions(self) -> None:
        self.joint_commands = self.core.measured()

    def get_joint_commands(self) -> list[float]:
        return list(self.joint_commands)


class FakeGripperInterface:
    def __init__(self, core: FakeCore):
        self.left_finger_index = core.js_index_map["left_finger"]
        self.left_finger_lower_limit, self.left_finger_upper_limit = 0.015, 0.037  # wx250s URDF finger joint
        self.calls: list[tuple[str, float]] = []

    def release(self, delay: float = 1.0) -> None:
        self.calls.append(("release", delay))

    def grasp(self, delay: float = 1.0) -> None:
        self.calls.append(("grasp", delay))


@dataclass
class FakeInterbotix:
    """Builds the API the wrapper takes; ``info``, ``hang`` and ``error`` shape what the connection meets."""

    info: GroupInfo = field(default_factory=GroupInfo)
    hang: threading.Event | None = None  # the node waits on it (xs_sdk not running)
    error: BaseException | None = None  # the manipulator raises it
    built: dict = field(default_factory=dict)

    def robot_node(self, node_name: str, namespace: str, use_global_arguments: bool = True) -> FakeNode:
        if self.hang is not None:
            self.hang.wait(30.0)
        node = FakeNode(node_name, namespace, use_global_arguments)
        self.built["node"] = node
        return node

    def manipulator(self, **kwargs) -> Any:
        if self.error is not None:
            raise self.error
        self.built["manipulator"] = kwargs
        core = FakeCore(kwargs["node"])
        bot = SimpleNamespace(core=core, arm=FakeArmInterface(core, self.info, kwargs["moving_time"]),
                              gripper=FakeGripperInterface(core))
        self.built["bot"] = bot
        return bot

    def robot_startup(self, node: FakeNode) -> None:
        self.built["started"] = node

    def api(self) -> InterbotixApi:
        return InterbotixApi("fake", self.manipulator, self.robot_node, self.robot_startup)


# ------------------------------------------------------------------ franky
class _Limit:
    def __init__(self, values):
        self.values = list(values)

    def get(self):
        return self.values


@dataclass
class FakeFrankyState:
    """What the fake arm reports, and how its calls go."""

    velocity_limits: tuple = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
    acceleration_limits: tuple = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)
    jerk_limits: tuple = (7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0)
    urdf: str = ""
    connect_error: BaseException | None = None
    recover_ok: bool = True
    motion_error: BaseException | None = None
    in_control: bool = True
    stop_error: BaseException | None = None
    width_m: float = 0.08
    width_error: BaseException | None = None
    width_hang: threading.Event | None = None  # a width read waits on it (a connection that went quiet)
    reach: bool = True  # the hand reaches its commands
    # Called in the connecting thread by Robot(): libfranka sets that thread's scheduling there (see
    # ladder_ros/robots/thread_scheduling.py); a test passes what it does.
    on_connect: Any = None
    robots: list = field(default_factory=list)
    grippers: list = field(default_factory=list)


class FakeFranky:
    """The ``franky`` module as the wrapper uses it (names and call shapes of franky-control 2.0.0)."""

    RealtimeConfig = SimpleNamespace(Enforce="enforce", Ignore="ignore")

    def __init__(self, state: FakeFrankyState | None = None):
        self.state = state or FakeFrankyState()
        module = self

        class Robot:
            def __init__(self, host, realtime_config=None):
                if module.state.on_connect is not None:
                    module.state.on_connect()
                if module.state.connect_error is not None:
                    raise module.state.connect_error
                self.host, self.realtime_config = host, realtime_config
                self.relative_dynamics_factor = 1.0
                self.recoveries = 0
                self.moves: list[tuple[Any, bool]] = []
                self.stopped = False
                s = module.state
                self.joint_velocity_limit = _Limit(s.velocity_limits)
                self.joint_acceleration_limit = _Limit(s.acceleration_limits)
                self.joint_jerk_limit = _Limit(s.jerk_limits)
                self.model_urdf = s.urdf
                self.current_joint_state = SimpleNamespace(position=np.arange(7) * 0.1, velocity=np.arange(7) * 0.01)
                pose = SimpleNamespace(quaternion=np.array([0.0, 0.0, 0.0, 1.0]), translation=np.array([0.3, 0.0, 0.5]))
                self.current_cartesian_state = SimpleNamespace(pose=SimpleNamespace(end_effector_pose=pose))
                module.state.robots.append(self)

            def recover_from_errors(self):
                self.recoveries += 1
                return module.state.recover_ok

            @property
            def is_in_control(self):
                return module.state.in_control

            def move(self, motion, asynchronous=False):
                self.moves.append((motion, asynchronous))
                self.move_hook(motion)

            def move_hook(self, motion):  # a test sees each move as it starts (franky's control thread starts here)
                pass

            def poll_motion(self):
                error, module.state.motion_error = module.state.motion_error, None
                if error is not None:
                    raise error

            def stop(self):
                self.stopped = True
                if module.state.stop_error is not None:
                    raise module.state.stop_error

        class Gripper:
            def __init__(self, host):
                self.host = host
                self.calls: list[tuple] = []
                self.sent = threading.Event()  # set when a move or grasp was carried out
                self.reads = 0
                module.state.grippers.append(self)

            @property
            def width(self):
                time.sleep(0.001)  # a network round trip (about 100 ms on the real hand): never a busy loop
                self.reads += 1
                if module.state.width_hang is not None:
                    module.state.width_hang.wait(30.0)
                if module.state.width_error is not None:
                    raise module.state.width_error
                return module.state.width_m

            def move(self, width, speed):
                self.calls.append(("move", width, speed))
                self.sent.set()
                return module.state.reach

            def grasp(self, width, speed, force, epsilon_inner=0.005, epsilon_outer=0.005):
                self.calls.append(("grasp", width, speed, force, epsilon_inner, epsilon_outer))
                self.sent.set()
                return module.state.reach

        self.Robot, self.Gripper = Robot, Gripper

    @staticmethod
    def Duration(milliseconds):  # noqa: N802 (franky's name)
        return ("ms", milliseconds)

    @staticmethod
    def JointState(position, velocity=None):  # noqa: N802
        return SimpleNamespace(position=np.asarray(position),
                               velocity=None if velocity is None else np.asarray(velocity))

    @staticmethod
    def JointWaypoint(target, minimum_time=None):  # noqa: N802
        return SimpleNamespace(target=target, minimum_time=minimum_time)

    @staticmethod
    def JointWaypointMotion(waypoints, return_when_finished=True):  # noqa: N802
        return SimpleNamespace(kind="waypoints", waypoints=list(waypoints), return_when_finished=return_when_finished)

    @staticmethod
    def JointStopMotion():  # noqa: N802
        return SimpleNamespace(kind="stop")
