"""The WidowX through Interbotix's Python API (``interbotix_xs_modules``), without its blocking calls.

The API comes with the robot's ROS install (interbotix_ros_toolboxes), not from PyPI, so it is
imported only when a driver starts, with a clear error when it is missing. What the driver avoids:

* ``set_ee_pose_components`` / ``set_ee_pose_matrix`` solve the inverse kinematics from fixed seeds
  and block for the move (0.1-0.6 s): the driver solves the IK itself
  (:mod:`ladder_ros.robots.kinematics`, from the previous target) and sends joints with
  ``arm.set_joint_positions(..., blocking=False)``, which publishes and returns.
* ``moving_time`` / ``accel_time`` passed per call rewrite the motors' profile registers through a
  service call each time: they are set once at start (Bridge: 0.25 s / 0.1 s per 0.2 s step) and
  never passed again.
* ``gripper.grasp()`` / ``release()`` sleep for their ``delay`` (1 s by default): the driver calls
  them with ``delay=0``; the API's own 50 Hz timer stops the PWM at the finger limits.

Recovery: ``core.robot_reboot_motors`` (smart reboot of the arm group, torque back on), then
``arm.capture_joint_positions`` so the API's notion of the commanded joints matches the arm again.
"""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.robots import wx250s
from ladder_ros.robots.gripper import ApertureRange


class BackendUnavailable(LadderError):
    """A vendor API the driver needs is missing or cannot reach its robot."""


MISSING_INTERBOTIX = (
    "the WidowX driver needs Interbotix's Python API (interbotix_xs_modules from interbotix_ros_toolboxes; it is "
    "installed with the robot's Interbotix ROS 2 workspace and is not on PyPI): source that workspace "
    "(install/setup.bash) before starting the driver, and start the arm's xs_sdk node first")


def import_interbotix():
    """(InterbotixManipulatorXS, robot_startup) from the installed API, or :class:`BackendUnavailable`."""
    try:
        arm = importlib.import_module("interbotix_xs_modules.xs_robot.arm")
        robot = importlib.import_module("interbotix_common_modules.common_robot.robot")
    except ImportError as exc:
        raise BackendUnavailable(f"{MISSING_INTERBOTIX} ({exc})") from None
    return arm.InterbotixManipulatorXS, robot.robot_startup


@dataclass
class ArmReading:
    joints: np.ndarray  # rad, in wx250s.JOINT_NAMES order
    finger_m: float  # the left finger's position
    aperture: float  # normalised, 0 closed, 1 open


class InterbotixArm:
    """A connected WidowX: read joints and finger, send joint targets and gripper commands, never blocking."""

    def __init__(self, *, robot_model: str, robot_name: str, moving_time_s: float, accel_time_s: float,
                 gripper_pressure: float, finger_range: ApertureRange, connect_timeout_s: float):
        manipulator, startup = import_interbotix()
        self.finger_range = finger_range
        built: dict = {}

        def connect() -> None:
            try:
                built["bot"] = manipulator(robot_model=robot_model, group_name="arm", gripper_name="gripper",
                                           robot_name=robot_name, moving_time=moving_time_s,
                                           accel_time=accel_time_s, gripper_pressure=gripper_pressure)
                startup()
            except BaseException as exc:  # reported to the caller below; SystemExit from the API included
                built["error"] = exc

        # The API waits without end for the arm's xs_sdk services; the driver gives it a deadline.
        worker = threading.Thread(target=connect, name="interbotix-connect", daemon=True)
        worker.start()
        worker.join(connect_timeout_s)
        if worker.is_alive():
            raise BackendUnavailable(f"no Interbotix arm under /{robot_name} within {connect_timeout_s:g} s: is the "
                                     f"xs_sdk node running (robot_model {robot_model}, robot_name {robot_name})?")
        if "error" in built:
            raise BackendUnavailable(f"Interbotix API failed to start: {built['error']!r}")
        self.bot = built["bot"]
        names = tuple(self.bot.arm.group_info.joint_names)
        if names != wx250s.JOINT_NAMES:
            raise BackendUnavailable(f"arm group joints {list(names)} are not the wx250s joints "
                                     f"{list(wx250s.JOINT_NAMES)}; this driver's kinematics are the wx250s'")
        self._gripper_open: bool | None = None

    @property
    def joint_lower_limits(self) -> tuple[float, ...]:
        return tuple(self.bot.arm.group_info.joint_lower_limits)

    @property
    def joint_upper_limits(self) -> tuple[float, ...]:
        return tuple(self.bot.arm.group_info.joint_upper_limits)

    def read(self) -> ArmReading:
        joints = np.asarray(self.bot.arm.get_joint_positions(), dtype=np.float64)
        finger = float(self.bot.gripper.get_finger_position())
        return ArmReading(joints, finger, self.finger_range.aperture(finger))

    def send_joints(self, joints: np.ndarray) -> bool:
        """Publish a joint target and return at once; False when the API refused it (its own limit check)."""
        return bool(self.bot.arm.set_joint_positions([float(v) for v in joints], blocking=False))

    def send_gripper(self, open_: bool) -> None:
        """Open or close without waiting; repeated commands are not re-sent."""
        if open_ == self._gripper_open:
            return
        if open_:
            self.bot.gripper.release(delay=0.0)
        else:
            self.bot.gripper.grasp(delay=0.0)
        self._gripper_open = open_

    def hold(self) -> np.ndarray:
        """Command the measured joints (the arm stops where it is); returns them."""
        joints = self.read().joints
        self.send_joints(joints)
        return joints

    def recover(self) -> str:
        """Reboot the arm motors that are in an error state, torque on, and re-read the commanded joints."""
        started = time.monotonic()
        self.bot.core.robot_reboot_motors("group", "arm", True, True)
        self.bot.core.robot_torque_enable("group", "arm", True)
        self.bot.arm.capture_joint_positions()
        self._gripper_open = None
        return f"arm motors rebooted and torqued on in {time.monotonic() - started:.2f} s"

    def close(self) -> None:
        """Leave the arm holding where it is (the API's own node goes with the process)."""
        try:
            self.hold()
        except Exception:  # the connection may be gone already; nothing else to do on the way out
            pass
