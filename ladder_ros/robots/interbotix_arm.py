"""The WidowX through Interbotix's Python API (``interbotix_xs_modules``), as it behaves on the real arm.

The API comes with the robot's Interbotix ROS 2 workspace (interbotix_ros_toolboxes), not from
PyPI; :func:`vendor_api` imports it when a driver starts, with a clear error when it is missing.
The WidowX twin (:mod:`ladder_ros.instruments.widowx_twin`) offers the same surface, so this module runs
unchanged on both; the driver picks one with its ``interbotix_api`` parameter. What the API does,
read from its ROS 2 sources (Interbotix/interbotix_ros_toolboxes, branch rolling, commit
4c720477ff36231d6cfc256c6e55b9930537a081, ``xs_robot/arm.py``, ``core.py``, ``gripper.py``,
``common_robot/robot.py``), and what this module does about it:

* **The profile is never written by the constructor.** ``InterbotixArmXSInterface`` stores
  ``moving_time`` / ``accel_time`` before calling ``set_trajectory_time``, which writes only values
  that differ: the motors keep xs_sdk's ``modes.yaml`` profile (2 s / 0.3 s) while the API
  believes the driver's. :meth:`InterbotixArm.verify_profile` writes both registers explicitly and
  reads them back from every arm motor; the driver refuses to arm until they match. A reboot resets
  them (:mod:`ladder_ros.robots.dynamixel`), so :meth:`InterbotixArm.recover` writes and checks
  them again.
* **``set_joint_positions`` refuses** (False, nothing published) a target farther from the API's
  last *commanded* joints than velocity limit x ``moving_time``. A hold that sends the measured
  joints is refused whenever the arm lags its commands by more than that (a slow profile, a
  stalled joint), so :meth:`InterbotixArm.hold` first resets the commanded joints to the measured
  ones (``capture_joint_positions``), checks the result, and tries the measured joints clamped into
  the API's limits before reporting a refusal; the driver then turns the torque off.
* **Service calls wait without a timeout** (``wait_until_future_complete``): ``robot_reboot_motors``,
  ``robot_torque_enable`` and the register calls block their caller for as long as xs_sdk takes, or
  for ever. The methods that make them are marked *blocking*: the driver runs them on its vendor-call
  worker with a deadline, never on its control thread. Each such call also leaves a 20 Hz ``Rate``
  timer behind on the API's node; the blocking methods destroy them once no call is in flight (a
  call given up on may sleep in its Rate for ever: then the leftovers stay).
* **The API's own node** would be a process-global node named ``interbotix_robot_manipulation``,
  which a launch's ``-r __node:=widowx_driver`` renames into the driver's name (two nodes of one
  name, colliding parameter services). The arm is built on a node of its own,
  ``<driver>_interbotix`` in the driver's namespace, that ignores the process's remapping arguments.
* **Effort is the motors' present current** (mA): ``core.robot_get_joint_states()`` hands over xs_sdk's
  ``joint_states`` with position, velocity and effort (``robot_get_single_joint_state``: "Units are rad, rad/s,
  and mA"); :meth:`InterbotixArm.read` takes each arm joint's effort by name, as it takes its position (what the
  motors' registers hold there: :mod:`ladder_ros.robots.dynamixel`). ``robot_get_motor_registers`` reads
  ``Hardware_Error_Status`` and ``Torque_Enable`` per motor (:meth:`InterbotixArm.read_faults`), each error bit
  named and explained (the e-manual's meaning).
* ``set_ee_pose_*`` solve the inverse kinematics from fixed seeds and block for the move, and
  ``grasp()`` / ``release()`` sleep their ``delay``: the driver solves its own IK and calls the
  gripper with ``delay=0``.
"""

from __future__ import annotations

import importlib
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.instrument_registry import load_instrument
from ladder_ros.robots import dynamixel as dxl
from ladder_ros.robots import wx250s
from ladder_ros.robots.gripper import ApertureRange


class BackendUnavailable(LadderError):
    """A vendor API the driver needs is missing or cannot reach its robot."""


class ProfileMismatch(LadderError):
    """The motors' profile registers do not hold what the driver wrote."""


MISSING_INTERBOTIX = (
    "the WidowX driver needs Interbotix's Python API (interbotix_xs_modules from interbotix_ros_toolboxes; it is "
    "installed with the robot's Interbotix ROS 2 workspace and is not on PyPI): source that workspace "
    "(install/setup.bash) before starting the driver, and start the arm's xs_sdk node first; without an arm, "
    "interbotix_api: twin runs the driver against the simulated WidowX "
    "(see docs/robot_bringup.md#no-interbotix-workspace)")


@dataclass(frozen=True)
class InterbotixApi:
    """The API the driver talks to: the vendor's modules, or the WidowX twin's with the same surface."""

    name: str
    manipulator: Callable[..., Any]  # InterbotixManipulatorXS
    robot_node: Callable[..., Any]  # InterbotixRobotNode
    robot_startup: Callable[..., None]


def vendor_api() -> InterbotixApi:
    """Interbotix's installed API, or :class:`BackendUnavailable`."""
    try:
        arm = importlib.import_module("interbotix_xs_modules.xs_robot.arm")
        robot = importlib.import_module("interbotix_common_modules.common_robot.robot")
    except ImportError as exc:
        raise BackendUnavailable(f"{MISSING_INTERBOTIX} ({exc})") from None
    return InterbotixApi("vendor", arm.InterbotixManipulatorXS, robot.InterbotixRobotNode, robot.robot_startup)


def load_api(name: str, xs_sdk: str = "in_process", *, robot_name: str = "", node_name: str = "",
             namespace: str = "") -> InterbotixApi:
    """``vendor``: Interbotix's installed API; ``twin``: the simulated WidowX behind the same surface, its
    xs_sdk in this process (``in_process``) or the ``widowx_twin`` node's over ROS (``remote``)."""
    if name == "twin":
        widowx_twin = load_instrument("widowx_twin")
        if xs_sdk == "remote":
            widowx_twin.connect_remote(robot_name, node_name=node_name, namespace=namespace)
        return widowx_twin.api()
    return vendor_api()


@dataclass
class ArmReading:
    joints: np.ndarray  # rad, in wx250s.JOINT_NAMES order
    velocities: np.ndarray  # rad/s
    finger_m: float  # the left finger's position
    aperture: float  # normalised, 0 closed, 1 open
    stamp_ns: int  # when xs_sdk read the motors (the joint state's stamp)
    efforts: np.ndarray | None = None  # xs_sdk's effort per arm joint (present current, mA); None: not published


@dataclass(frozen=True)
class HoldOutcome:
    """What a hold did: ``held`` (the API took it) and how, or why it could not."""

    held: bool
    how: str
    joints: np.ndarray | None = None
    refused: bool = False  # the API refused the first hold (counted, even when the second one held)


@dataclass(frozen=True)
class MotorFaults:
    """Motors in hardware error (name -> description) and motors with torque off, from their registers."""

    errors: dict[str, str]
    torque_off: tuple[str, ...]
    status: dict[str, int] = field(default_factory=dict, compare=False)  # the Hardware_Error_Status read, by motor

    def describe(self) -> str:
        parts = [f"{name}: Hardware_Error_Status {text}" for name, text in self.errors.items()]
        if self.torque_off:
            parts.append(f"torque off: {', '.join(self.torque_off)}")
        return "; ".join(parts)

    def explain(self) -> str:
        """What each motor's error bits mean (the e-manual's words), e.g. ``"elbow overload: a load beyond the
        motor's maximum output persisted"``; ``""`` without errors."""
        return "; ".join(f"{name} {dxl.explain_hardware_error(value)}" for name, value in self.status.items()
                         if int(value))

    def __bool__(self) -> bool:
        return bool(self.errors or self.torque_off)


class InterbotixArm:
    """A connected WidowX. Plain methods never block; those marked *blocking* go to the driver's worker."""

    def __init__(self, api: InterbotixApi, *, robot_model: str, robot_name: str, moving_time_s: float,
                 accel_time_s: float, gripper_pressure: float, finger_range: ApertureRange, connect_timeout_s: float,
                 node_name: str, namespace: str):
        self.api = api
        self.finger_range = finger_range
        self.profile = dxl.ProfileRegisters.from_times(moving_time_s, accel_time_s)
        built: dict = {}

        def connect() -> None:
            try:
                node = api.robot_node(node_name=node_name, namespace=namespace, use_global_arguments=False)
                built["node"] = node
                built["bot"] = api.manipulator(robot_model=robot_model, group_name="arm", gripper_name="gripper",
                                               robot_name=robot_name, moving_time=moving_time_s,
                                               accel_time=accel_time_s, gripper_pressure=gripper_pressure, node=node)
                api.robot_startup(node)
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
        self.node = built["node"]
        self.bot = built["bot"]
        info = self.bot.arm.group_info
        names = tuple(info.joint_names)
        if names != wx250s.JOINT_NAMES:
            raise BackendUnavailable(f"arm group joints {list(names)} are not the wx250s joints "
                                     f"{list(wx250s.JOINT_NAMES)}; this driver's kinematics are the wx250s'")
        if info.mode != "position" or info.profile_type != "time":
            raise BackendUnavailable(f"the arm group runs mode {info.mode!r} with a {info.profile_type!r} profile; the "
                                     "driver needs position mode with a time-based profile (modes.yaml of the "
                                     "Interbotix launch)")
        self.lower = np.array(info.joint_lower_limits, dtype=np.float64)
        self.upper = np.array(info.joint_upper_limits, dtype=np.float64)
        self.velocity_limits = np.array(info.joint_velocity_limits, dtype=np.float64)
        self._gripper_open: bool | None = None
        self._in_flight = 0  # blocking calls under way (on the driver's worker threads)
        self._in_flight_lock = threading.Lock()

    @property
    def node_name(self) -> str:
        return self.node.get_fully_qualified_name()

    @property
    def finger_limits(self) -> tuple[float, float]:
        """The left finger's lower and upper limit (m) the API stops the PWM at (the URDF's)."""
        gripper = self.bot.gripper
        return float(gripper.left_finger_lower_limit), float(gripper.left_finger_upper_limit)

    # ------------------------------------------------------------------ never blocking
    def read(self) -> ArmReading:
        state = self.bot.core.robot_get_joint_states()
        index = self.bot.core.js_index_map
        joints = np.array([state.position[index[n]] for n in wx250s.JOINT_NAMES], dtype=np.float64)
        velocities = np.array([state.velocity[index[n]] for n in wx250s.JOINT_NAMES], dtype=np.float64)
        efforts = None
        if len(state.effort) == len(state.position):  # xs_sdk fills it; a publisher may leave it empty
            efforts = np.array([state.effort[index[n]] for n in wx250s.JOINT_NAMES], dtype=np.float64)
        finger = float(state.position[self.bot.gripper.left_finger_index])
        stamp = state.header.stamp.sec * 1_000_000_000 + state.header.stamp.nanosec
        return ArmReading(joints, velocities, finger, self.finger_range.aperture(finger), stamp, efforts)

    def commanded(self) -> np.ndarray:
        """The joints the API believes it commanded last (its limit check measures from these)."""
        return np.array(self.bot.arm.get_joint_commands(), dtype=np.float64)

    def send_joints(self, joints: np.ndarray) -> bool:
        """Publish a joint target and return at once; False when the API refused it (its own limit check)."""
        return bool(self.bot.arm.set_joint_positions([float(v) for v in joints], blocking=False))

    def send_gripper(self, open_: bool) -> bool:
        """Open or close without waiting; True when a new command went out (repeated ones are not re-sent)."""
        if open_ == self._gripper_open:
            return False
        if open_:
            self.bot.gripper.release(delay=0.0)
        else:
            self.bot.gripper.grasp(delay=0.0)
        self._gripper_open = open_
        return True

    def hold(self) -> HoldOutcome:
        """Stop the arm where it is: a hold the API cannot refuse for lagging its commands (module docstring)."""
        try:
            measured = self.read().joints
            self.bot.arm.capture_joint_positions()
            if self.send_joints(measured):
                return HoldOutcome(True, "held at the measured joints", measured)
            # Refused although the commanded joints are the measured ones: a joint is outside the API's
            # limits (a sag past a limit, the API's truncation to 1 mrad). Hold it just inside them.
            clamped = np.clip(measured, self.lower + 2e-3, self.upper - 2e-3)
            if self.send_joints(clamped):
                return HoldOutcome(True, "held at the measured joints clamped into the API's joint limits", clamped,
                                   refused=True)
            return HoldOutcome(False, "the Interbotix API refused the hold at the measured joints and clamped into "
                                      "its limits", measured, refused=True)
        except Exception as exc:  # the API raised: report it, the driver escalates
            return HoldOutcome(False, f"the hold raised {exc!r}", None, refused=True)

    # ------------------------------------------------------------------ blocking (the driver's worker only)
    @contextmanager
    def _service_calls(self) -> Iterator[None]:
        """Destroy the 20 Hz Rate timers the API's service waits create and never destroy.

        Only once no blocking call is in flight (a call given up on may still be waiting in its
        Rate): then every Rate timer on the API's node is left over from a finished wait.
        """
        with self._in_flight_lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    for timer in list(self.node.timers):
                        callback = getattr(timer, "callback", None)
                        if isinstance(getattr(callback, "__self__", None), threading.Event):  # a Rate's timer
                            self.node.destroy_timer(timer)

    def write_profile(self) -> None:
        """*Blocking.* Write Profile_Velocity and Profile_Acceleration to every arm motor."""
        with self._service_calls():
            core = self.bot.core
            core.robot_set_motor_registers("group", "arm", dxl.PROFILE_VELOCITY, self.profile.velocity_ms)
            core.robot_set_motor_registers("group", "arm", dxl.PROFILE_ACCELERATION, self.profile.acceleration_ms)

    def read_profile(self) -> dict[str, dxl.ProfileRegisters]:
        """*Blocking.* The profile registers of every arm motor, read back."""
        with self._service_calls():
            core = self.bot.core
            velocity = list(core.robot_get_motor_registers("group", "arm", dxl.PROFILE_VELOCITY))
            acceleration = list(core.robot_get_motor_registers("group", "arm", dxl.PROFILE_ACCELERATION))
        if len(velocity) != len(wx250s.JOINT_NAMES) or len(acceleration) != len(wx250s.JOINT_NAMES):
            raise ProfileMismatch(f"xs_sdk returned {len(velocity)} Profile_Velocity and {len(acceleration)} "
                                  f"Profile_Acceleration values for the {len(wx250s.JOINT_NAMES)} arm motors")
        return {name: dxl.ProfileRegisters(int(v), int(a))
                for name, v, a in zip(wx250s.JOINT_NAMES, velocity, acceleration)}

    def verify_profile(self) -> str:
        """*Blocking.* Write the profile, read it back; :class:`ProfileMismatch` naming each motor that differs."""
        self.write_profile()
        found = self.read_profile()
        wrong = {name: p for name, p in found.items() if p != self.profile}
        if wrong:
            listed = ", ".join(f"{n} {p.velocity_ms}/{p.acceleration_ms} ms" for n, p in wrong.items())
            raise ProfileMismatch(f"the motors' profile reads back as {listed}, not the "
                                  f"{self.profile.velocity_ms}/{self.profile.acceleration_ms} ms written")
        return f"profile {self.profile.velocity_ms}/{self.profile.acceleration_ms} ms written and read back"

    def read_faults(self) -> MotorFaults:
        """*Blocking.* Hardware_Error_Status and Torque_Enable of the arm motors and the gripper.

        A motor whose error shut it down between the two reads (an overload that trips then) reads no error and
        its torque off: where a motor reads so, its error register is read once more, so that the error is
        reported with the torque it turned off, not a poll later."""
        with self._service_calls():
            core = self.bot.core
            read = core.robot_get_motor_registers
            arm_errors = list(read("group", "arm", dxl.HARDWARE_ERROR_STATUS))
            arm_torque = list(read("group", "arm", dxl.TORQUE_ENABLE))
            if any(not int(t) and not int(e) for t, e in zip(arm_torque, arm_errors)):
                arm_errors = list(read("group", "arm", dxl.HARDWARE_ERROR_STATUS))
            gripper_errors = list(read("single", "gripper", dxl.HARDWARE_ERROR_STATUS))
            gripper_torque = list(read("single", "gripper", dxl.TORQUE_ENABLE))
            if any(not int(t) and not int(e) for t, e in zip(gripper_torque, gripper_errors)):
                gripper_errors = list(read("single", "gripper", dxl.HARDWARE_ERROR_STATUS))
        names = (*wx250s.JOINT_NAMES, "gripper")
        errors_read, torque_read = arm_errors + gripper_errors, arm_torque + gripper_torque
        if len(errors_read) != len(names) or len(torque_read) != len(names):
            raise BackendUnavailable(f"xs_sdk returned {len(errors_read)} error and {len(torque_read)} torque values "
                                     f"for the {len(names)} motors")
        errors = {n: dxl.describe_hardware_error(v) for n, v in zip(names, errors_read) if int(v)}
        torque_off = tuple(n for n, v in zip(names, torque_read) if not int(v))
        return MotorFaults(errors, torque_off, {n: int(v) for n, v in zip(names, errors_read) if int(v)})

    def torque_off(self) -> str:
        """*Blocking.* Torque off the arm group (the last resort when a hold cannot be sent)."""
        with self._service_calls():
            self.bot.core.robot_torque_enable("group", "arm", False)
        return "arm motors torqued off"

    def recover(self) -> str:
        """*Blocking.* Reboot the motors in error, torque on, re-read the commanded joints, rewrite the profile."""
        started = time.monotonic()
        with self._service_calls():
            core = self.bot.core
            core.robot_reboot_motors("group", "arm", True, True)
            gripper_error = list(core.robot_get_motor_registers("single", "gripper", dxl.HARDWARE_ERROR_STATUS))
            if any(int(v) for v in gripper_error):
                core.robot_reboot_motors("single", "gripper", True, False)
            core.robot_torque_enable("group", "arm", True)
            core.robot_torque_enable("single", "gripper", True)
        self.bot.arm.capture_joint_positions()
        self._gripper_open = None
        checked = self.verify_profile()  # the reboot reset the profile registers to 0
        return f"arm motors rebooted and torqued on, {checked}, in {time.monotonic() - started:.2f} s"

    def close(self) -> None:
        """Leave the arm holding where it is (the API's own node goes with the process)."""
        try:
            self.hold()
        except Exception:  # the connection may be gone already; nothing else to do on the way out
            pass
