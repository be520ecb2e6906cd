"""The WidowX 250 6DOF's Dynamixel motors as a model: registers, time-based moves, PWM fingers, faults.

Pure (no threads, no rclpy): every call reads the injected clock, so a test that advances a fake
clock gets the same motion every time. What is modelled, and where the numbers come from:

* The motors and their limits: interbotix_xsarm_control ``config/wx250s.yaml`` (Interbotix/
  interbotix_ros_manipulators, branch rolling, commit 04a3506c6a20474579e27ea75125d1680b256ca0):
  IDs, ``Min/Max_Position_Limit`` in ticks, ``Velocity_Limit`` 131 (x 0.229 rpm = pi rad/s). A goal
  outside a motor's position limits is refused by the motor (the write fails), as the firmware does.
* The start-up profile: ``config/modes.yaml`` of the same package: the arm group in position mode
  with a time-based profile, ``profile_velocity`` 2000 ms and ``profile_acceleration`` 300 ms,
  the gripper in PWM mode, all torqued on; xs_sdk writes these once when it starts.
* Moves: :class:`ladder_ros.robots.dynamixel.TimeProfile` (a trapezoid from the present position and
  velocity, total time and ramp from the two profile registers in force when the goal is written).
* Torque off, a hardware error, a reboot (Dynamixel e-manual): a motor with torque off or in error
  stays where it is (gravity is not modelled) and ignores goals; an error sets
  ``Hardware_Error_Status`` and turns the torque off (Shutdown); a reboot clears the error and
  restores the RAM registers' initial values: torque off, ``Profile_Velocity`` and
  ``Profile_Acceleration`` 0 (no profile: the next goal is a step at the velocity limit). The
  reboot service turns the torque on again when asked (interbotix_xs_driver ``reboot_motors``);
  it never rewrites the profile.
* A stall (:meth:`WidowXMotors.stall`): the joint stops where it is, as against an obstacle,
  while its goal stays; released, it moves on to the goal along a new profile. While a torqued
  joint pushes against the obstacle (its goal elsewhere) its present current saturates: the arm
  group runs in position mode (``modes.yaml``), where the output is bounded by ``PWM_Limit`` (885,
  100 %) rather than by ``Current_Limit``, so a blocked motor draws its stall current at the supply
  voltage (XM430-W350, every arm joint but ``wrist_rotate``: 2.3 A at 12 V, under its
  ``Current_Limit`` 1193 x 2.69 mA = 3.21 A; e-manual specifications and control table; the motors per
  joint: Trossen's wx250s servo table). xs_sdk publishes present current as the joint's effort in mA
  (interbotix_xs_sdk README) and ``Present_Current`` reads it in 2.69 mA units. The XL430-W250 of
  ``wrist_rotate`` has no current sensor (its register 126 is ``Present_Load``): its effort stays 0. Held
  against the obstacle for ``overload_after_s``, the motor sets the overload bit of
  ``Hardware_Error_Status`` and turns its torque off (``Shutdown`` 52 by default includes overload); only a
  reboot clears it. The e-manual says "persistent load", not how long: 5 s is a project choice.
* The gripper: PWM mode; the gripper motor turns at a speed proportional to the PWM (full speed
  at the ``PWM_Limit`` 885 of an X-series motor) until a finger limit or an object between the
  fingers stops it. The fingers' position follows the swing-arm linkage of xs_driver
  ``convert_angular_position_to_linear`` with ``horn_radius`` 0.014 m and ``arm_length`` 0.024 m
  (``config/wx250s.yaml``), and the finger limits are the URDF's 0.015..0.037 m
  (interbotix_xsarm_descriptions ``urdf/wx250s.urdf.xacro``). Held at a stop with its PWM on (an
  object between the fingers: the API switches the PWM off only at the finger limits), the gripper's
  XL430-W250 pushes at that PWM's share of its maximum load; its effort on ``joint_states`` is that
  ``Present_Load`` (0.1 %) x 2.69, the way xs_driver reads register 126 of every motor
  (:data:`ladder_ros.robots.dynamixel.CURRENT_UNIT_MA`). Moving, its effort is not modelled (0).

Not modelled (docs/widowx_twin.md): gravity and loads (a joint with torque off does not fall),
position-loop lag, jerk smoothing, the shadow motors of the shoulder and elbow, temperatures and
voltages (errors appear only when injected), the gripper motor's exact speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots import dynamixel as dxl
from ladder_ros.robots import wx250s
from ladder_ros.instruments.widowx_twin.xs_msgs import RobotInfo, float32_list

Clock = Callable[[], float]

ARM = wx250s.JOINT_NAMES
GRIPPER = "gripper"
GROUPS = {"arm": ARM, "all": (*ARM, GRIPPER)}
JOINT_STATE_NAMES = (*ARM, GRIPPER, "left_finger", "right_finger")  # xs_sdk's joint_states order

# interbotix_xsarm_control config/wx250s.yaml: ID, Min_Position_Limit, Max_Position_Limit (ticks), Velocity_Limit
MOTOR_CONFIG = {
    "waist": (1, 0, 4095, 131),
    "shoulder": (2, 819, 3345, 131),
    "elbow": (4, 648, 3094, 131),
    "forearm_roll": (6, 0, 4095, 131),
    "wrist_angle": (7, 910, 3447, 131),
    "wrist_rotate": (8, 0, 4095, 131),
    "gripper": (9, 0, 4095, 131),
}
SLEEP_POSITIONS = (0.0, -1.80, 1.55, 0.0, 0.8, 0.0, 0.0)  # config/wx250s.yaml sleep_positions (rad)
MODES_PROFILE = dxl.ProfileRegisters(2000, 300)  # config/modes.yaml, group arm
HORN_RADIUS_M = 0.014  # config/wx250s.yaml grippers.gripper
ARM_LENGTH_M = 0.024
# URDF left_finger limits, as the float32 values xs_sdk reports them: the fingers' stops, where the API's timer
# (finger <= lower, >= upper) switches the PWM off
FINGER_LOWER_M, FINGER_UPPER_M = float(np.float32(0.015)), float(np.float32(0.037))
FINGER_VELOCITY_LIMIT = 1.0  # URDF left_finger velocity (m/s)
PWM_LIMIT = 885  # X-series PWM_Limit(36) initial value (e-manual)
# A blocked XM430-W350's current at 12 V (its specification's stall current), capped by its Current_Limit(38)
# 1193 x 2.69 mA; the XL430-W250 (wrist_rotate) reads no current. Present_Current(126) counts 2.69 mA units.
CURRENT_UNIT_MA = 2.69
XM430_W350_STALL_MA = min(2300.0, 1193 * CURRENT_UNIT_MA)
STALL_CURRENT_MA = {"waist": XM430_W350_STALL_MA, "shoulder": XM430_W350_STALL_MA, "elbow": XM430_W350_STALL_MA,
                    "forearm_roll": XM430_W350_STALL_MA, "wrist_angle": XM430_W350_STALL_MA, "wrist_rotate": 0.0}
PRESENT_CURRENT = "Present_Current"
OVERLOAD_AFTER_S = 5.0  # held against an obstacle this long, a motor reports overload and shuts down (see above)
PUSHING_RAD = 2 * math.pi / 4096  # a goal further than one encoder tick from where the blocked joint stands
# Gripper motor speed at full PWM (rad/s): an X-series motor's no-load speed, about 46 rpm at 12 V
# (XM430-W350 datasheet). An assumption: how fast the real fingers close is not modelled exactly.
GRIPPER_FULL_PWM_RAD_S = 4.8


def finger_stroke_s(gripper_pressure: float, pressure_low_pwm: int = 150, pressure_high_pwm: int = 350) -> float:
    """Seconds the twin's fingers take from open to closed at the API's ``gripper_pressure`` (0..1 of its PWM
    range, the vendor's defaults 150-350): 1.2 s at 0.5, what a policy on this arm waits for after a close."""
    if not 0.0 <= gripper_pressure <= 1.0:
        raise ConfigError(f"gripper_pressure must be in [0, 1], got {gripper_pressure!r}")
    pwm = pressure_low_pwm + gripper_pressure * (pressure_high_pwm - pressure_low_pwm)
    travel = abs(finger_angle(FINGER_UPPER_M) - finger_angle(FINGER_LOWER_M))
    return travel / (GRIPPER_FULL_PWM_RAD_S * min(1.0, pwm / PWM_LIMIT))


def finger_position(angle: float) -> float:
    """The left finger's position (m) at a gripper motor angle (rad): xs_driver's swing-arm conversion."""
    a1 = HORN_RADIUS_M * math.sin(angle)
    c = math.sqrt(HORN_RADIUS_M ** 2 - a1 ** 2)
    return a1 + math.sqrt(ARM_LENGTH_M ** 2 - c ** 2)


def finger_angle(position_m: float) -> float:
    """The gripper motor angle (rad) that puts the left finger at ``position_m`` (the inverse of the above)."""
    f = float(position_m)
    return math.asin((f * f + HORN_RADIUS_M ** 2 - ARM_LENGTH_M ** 2) / (2.0 * f * HORN_RADIUS_M))


@dataclass(frozen=True)
class JointStateSample:
    """What xs_sdk publishes on ``joint_states``: names, positions (rad; fingers in m), velocities, efforts."""

    name: tuple[str, ...]
    position: tuple[float, ...]
    velocity: tuple[float, ...]
    effort: tuple[float, ...]
    stamp_s: float = 0.0


@dataclass
class PositionMotor:
    """One arm joint in position control with a time-based profile."""

    name: str
    motor_id: int
    lower: float  # rad, from the motor's position limits
    upper: float
    velocity_limit: float  # rad/s
    position: float
    registers: dict[str, int] = field(default_factory=dict)
    move: dxl.TimeProfile | None = None
    stalled: bool = False
    goal: float | None = None
    refused_goals: int = 0
    pushing_since: float | None = None  # blocked, torqued and driving towards a goal elsewhere since then

    def state(self, now: float) -> tuple[float, float]:
        if self.stalled or self.move is None:
            return self.position, 0.0
        return self.move.state(now)

    def settle(self, now: float) -> None:
        """Freeze the present state into ``position`` (before the motor stops following its move)."""
        self.position = self.state(now)[0]
        self.move = None

    @property
    def driving(self) -> bool:
        return bool(self.registers[dxl.TORQUE_ENABLE]) and not self.registers[dxl.HARDWARE_ERROR_STATUS]

    def write_goal(self, goal: float, now: float) -> bool:
        if not self.lower <= goal <= self.upper:
            self.refused_goals += 1
            return False
        if not self.driving:
            return False
        self.goal = float(goal)
        if self.stalled:
            self.note_pushing(now)
            return True
        position, velocity = self.state(now)
        profile = dxl.ProfileRegisters(self.registers[dxl.PROFILE_VELOCITY], self.registers[dxl.PROFILE_ACCELERATION])
        self.position = position
        self.move = dxl.TimeProfile(now, position, velocity, self.goal, profile, self.velocity_limit)
        return True

    @property
    def pushing(self) -> bool:
        return self.stalled and self.driving and self.goal is not None and abs(self.goal - self.position) > PUSHING_RAD

    def note_pushing(self, now: float) -> None:
        """Start (or stop) the overload clock as the blocked motor starts (or stops) pushing."""
        if not self.pushing:
            self.pushing_since = None
        elif self.pushing_since is None:
            self.pushing_since = now

    def current_ma(self) -> float:
        """Present current (mA, signed towards the goal): the stall current while pushing, else 0 (not modelled)."""
        if not self.pushing or self.goal is None:
            return 0.0
        return math.copysign(STALL_CURRENT_MA.get(self.name, 0.0), self.goal - self.position)


@dataclass
class PwmGripper:
    """The gripper motor in PWM mode: turns at a speed proportional to the PWM until a stop."""

    name: str
    motor_id: int
    angle: float
    registers: dict[str, int] = field(default_factory=dict)
    pwm: float = 0.0
    since: float = 0.0
    object_width_m: float | None = None  # an object between the fingers stops them at this finger position

    def speed(self) -> float:
        if not self.registers[dxl.TORQUE_ENABLE] or self.registers[dxl.HARDWARE_ERROR_STATUS]:
            return 0.0
        return GRIPPER_FULL_PWM_RAD_S * max(-1.0, min(1.0, self.pwm / PWM_LIMIT))

    def stops(self) -> tuple[float, float]:
        low = FINGER_LOWER_M if self.object_width_m is None else max(FINGER_LOWER_M, self.object_width_m)
        return finger_angle(low), finger_angle(FINGER_UPPER_M)

    def state(self, now: float) -> tuple[float, float]:
        low, high = self.stops()
        speed = self.speed()
        angle = self.angle + speed * max(0.0, now - self.since)
        if speed < 0:
            reached = max(angle, min(low, self.angle))  # a stop ahead holds the fingers; none is passed
        elif speed > 0:
            reached = min(angle, max(high, self.angle))
        else:
            reached = self.angle
        return reached, speed if reached == angle and speed != 0.0 else 0.0

    def effort(self, now: float) -> float:
        """xs_sdk's effort for this motor: held at a stop with its PWM on, its load at that PWM x 2.69 (signed as
        the PWM); moving or off, 0 (module docstring)."""
        if self.speed() == 0.0 or self.state(now)[1] != 0.0:
            return 0.0
        return max(-1.0, min(1.0, self.pwm / PWM_LIMIT)) * 1000 * CURRENT_UNIT_MA

    def settle(self, now: float) -> None:
        self.angle = self.state(now)[0]
        self.since = now

    def write_pwm(self, pwm: float, now: float) -> None:
        self.settle(now)
        self.pwm = float(pwm)


def _registers(profile: dxl.ProfileRegisters) -> dict[str, int]:
    return {dxl.TORQUE_ENABLE: 1, dxl.HARDWARE_ERROR_STATUS: 0, dxl.PROFILE_VELOCITY: profile.velocity_ms,
            dxl.PROFILE_ACCELERATION: profile.acceleration_ms}


class WidowXMotors:
    """The seven addressed motors of a wx250s (the two shadows not modelled) behind xs_sdk, on an injected clock.

    The methods mirror what xs_sdk does with each service and command topic
    (interbotix_xs_driver ``src/xs_driver.cpp``, branch ros2-devel, commit
    68e3fda69452fcac22c4fb0ff68793cfcb35af58): group commands write every joint of the group,
    register writes go to every motor of a group, ``get_registers`` returns one value per motor,
    ``reboot`` with ``smart_reboot`` reboots only motors in error and torques the rebooted ones on
    when ``enable``.
    """

    def __init__(self, clock: Clock, *, joints: Sequence[float] = SLEEP_POSITIONS[:6], gripper_open: bool = True,
                 profile: dxl.ProfileRegisters = MODES_PROFILE, overload_after_s: float = OVERLOAD_AFTER_S):
        if len(joints) != len(ARM):
            raise ConfigError(f"a wx250s has {len(ARM)} arm joints, got {len(joints)} start positions")
        if not overload_after_s > 0:
            raise ConfigError(f"overload_after_s must be > 0 s, got {overload_after_s!r}")
        self.clock = clock
        self.overload_after_s = float(overload_after_s)
        self.overloads = 0  # overload errors the blocked motors raised
        self.arm: dict[str, PositionMotor] = {}
        for name, start in zip(ARM, joints):
            motor_id, low, high, velocity = MOTOR_CONFIG[name]
            lower, upper = dxl.ticks_to_rad(low), dxl.ticks_to_rad(high)
            if not lower <= start <= upper:
                raise ConfigError(f"start position of {name} {start} rad is outside its motor limits "
                                  f"[{lower:.4f}, {upper:.4f}]")
            self.arm[name] = PositionMotor(name, motor_id, lower, upper, dxl.velocity_units_to_rad_s(velocity),
                                           float(start), _registers(profile))
        angle = finger_angle(FINGER_UPPER_M if gripper_open else FINGER_LOWER_M)
        self.gripper = PwmGripper(GRIPPER, MOTOR_CONFIG[GRIPPER][0], angle, _registers(dxl.ProfileRegisters(0, 0)),
                                  since=clock())
        self.modes = {"arm": ("position", "time"), GRIPPER: ("pwm", "velocity")}

    # ------------------------------------------------------------------ naming
    def motors(self, cmd_type: str, name: str) -> list[PositionMotor | PwmGripper]:
        if cmd_type == "group" and name in GROUPS:
            return [self.arm[j] if j in self.arm else self.gripper for j in GROUPS[name]]
        if cmd_type == "single" and (name in self.arm or name == GRIPPER):
            return [self.arm[name] if name in self.arm else self.gripper]
        raise KeyError(f"the '{name}' joint/group does not exist (cmd_type {cmd_type!r})")

    # ------------------------------------------------------------------ xs_sdk's side
    def joint_states(self) -> JointStateSample:
        now = self.clock()
        self.check_overloads(now)
        positions, velocities, efforts = [], [], []
        for motor in self.arm.values():
            q, v = motor.state(now)
            positions.append(q)
            velocities.append(v)
            efforts.append(motor.current_ma())
        angle, speed = self.gripper.state(now)
        finger = finger_position(angle)
        return JointStateSample(JOINT_STATE_NAMES, (*positions, angle, finger, -finger), (*velocities, speed, 0.0, 0.0),
                                (*efforts, self.gripper.effort(now), 0.0, 0.0), now)

    def check_overloads(self, now: float | None = None) -> list[str]:
        """The blocked motors that have pushed for ``overload_after_s`` by ``now`` shut down with an overload
        error, as of the moment they reached it; returns their names. Every read of the motors asks this first."""
        now = self.clock() if now is None else now
        tripped = []
        for motor in self.arm.values():
            since = motor.pushing_since
            if since is not None and motor.pushing and now - since >= self.overload_after_s:
                motor.registers[dxl.HARDWARE_ERROR_STATUS] |= dxl.OVERLOAD
                motor.registers[dxl.TORQUE_ENABLE] = 0
                motor.pushing_since = None
                self.overloads += 1
                tripped.append(motor.name)
        return tripped

    def write_group(self, name: str, commands: Sequence[float], now: float | None = None) -> bool:
        joints = GROUPS.get(name)
        if joints is None or len(commands) != len(joints):
            return False  # xs_driver: "Number of commands ... does not match": not executed
        now = self.clock() if now is None else now
        ok = True
        for joint, command in zip(joints, commands):
            ok = self.write_single(joint, command, now) and ok
        return ok

    def write_single(self, name: str, command: float, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        if name == GRIPPER:
            self.gripper.write_pwm(command, now)
            return True
        if name in self.arm:
            return self.arm[name].write_goal(float(command), now)
        return False

    def set_registers(self, cmd_type: str, name: str, reg: str, value: int) -> None:
        now = self.clock()
        for motor in self.motors(cmd_type, name):
            if isinstance(motor, PositionMotor) and reg == dxl.TORQUE_ENABLE:
                self._torque(motor, bool(value), now)
            elif reg == dxl.GOAL_POSITION and isinstance(motor, PositionMotor):
                motor.write_goal(dxl.ticks_to_rad(value), now)
            else:
                motor.registers[reg] = int(value)

    def get_registers(self, cmd_type: str, name: str, reg: str) -> list[int]:
        now = self.clock()
        self.check_overloads(now)
        values = []
        for motor in self.motors(cmd_type, name):
            if reg == PRESENT_CURRENT:
                current = motor.current_ma() if isinstance(motor, PositionMotor) else 0.0
                values.append(int(round(current / CURRENT_UNIT_MA)))
            elif reg == dxl.PRESENT_POSITION:
                values.append(dxl.rad_to_ticks(motor.state(now)[0]))
            elif reg == dxl.GOAL_POSITION and isinstance(motor, PositionMotor):
                values.append(dxl.rad_to_ticks(motor.goal if motor.goal is not None else motor.state(now)[0]))
            elif reg == dxl.VELOCITY_LIMIT:
                values.append(MOTOR_CONFIG[motor.name][3])
            elif reg in motor.registers:
                values.append(int(motor.registers[reg]))
            else:
                return []  # xs_driver: "Could not get '<reg>' Item Info": no values
        return values

    def torque_enable(self, cmd_type: str, name: str, enable: bool) -> None:
        now = self.clock()
        for motor in self.motors(cmd_type, name):
            self._torque(motor, enable, now)

    def _torque(self, motor, enable: bool, now: float) -> None:
        motor.settle(now)
        if enable and motor.registers[dxl.HARDWARE_ERROR_STATUS]:
            return  # a motor in error cannot be torqued on until rebooted
        motor.registers[dxl.TORQUE_ENABLE] = int(bool(enable))
        if isinstance(motor, PositionMotor):
            motor.goal = motor.position  # torqued on, the motor holds where it is
            motor.note_pushing(now)

    def reboot(self, cmd_type: str, name: str, enable: bool, smart_reboot: bool = False) -> list[str]:
        """Reboot the motors (smart: only those in error); returns the names rebooted."""
        now = self.clock()
        rebooted = []
        for motor in self.motors(cmd_type, name):
            if smart_reboot and cmd_type == "group" and not motor.registers[dxl.HARDWARE_ERROR_STATUS]:
                continue
            motor.settle(now)
            motor.registers.update({dxl.TORQUE_ENABLE: 0, dxl.HARDWARE_ERROR_STATUS: 0, dxl.PROFILE_VELOCITY: 0,
                                    dxl.PROFILE_ACCELERATION: 0})
            if isinstance(motor, PwmGripper):
                motor.pwm = 0.0
            else:
                motor.pushing_since = None
            rebooted.append(motor.name)
            if enable:
                self._torque(motor, True, now)
        return rebooted

    def set_operating_modes(self, cmd_type: str, name: str, mode: str, profile_type: str, profile_velocity: int,
                            profile_acceleration: int) -> None:
        now = self.clock()
        for motor in self.motors(cmd_type, name):
            motor.settle(now)
            motor.registers[dxl.TORQUE_ENABLE] = 0  # xs_driver torques the motor off to change its mode
            if mode in ("position", "ext_position", "linear_position"):
                motor.registers[dxl.PROFILE_VELOCITY] = int(profile_velocity)
                motor.registers[dxl.PROFILE_ACCELERATION] = int(profile_acceleration)
        self.modes[name] = (mode, profile_type)

    def robot_info(self, cmd_type: str, name: str) -> RobotInfo.Response:
        """xs_sdk's ``get_robot_info``: joint limits from the URDF (float32), IDs, sleep positions, indices."""
        motors = self.motors(cmd_type, name)
        names, lower, upper, velocity, sleep, indices = [], [], [], [], [], []
        for motor in motors:
            if isinstance(motor, PwmGripper):
                names.append("left_finger")
                lower.append(FINGER_LOWER_M)
                upper.append(FINGER_UPPER_M)
                velocity.append(FINGER_VELOCITY_LIMIT)
                sleep.append(finger_position(0.0))
                indices.append(JOINT_STATE_NAMES.index("left_finger"))
            else:
                i = ARM.index(motor.name)
                names.append(motor.name)
                lower.append(wx250s.LOWER[i])
                upper.append(wx250s.UPPER[i])
                velocity.append(wx250s.VELOCITY_LIMIT_RAD_S)
                sleep.append(SLEEP_POSITIONS[i])
                indices.append(JOINT_STATE_NAMES.index(motor.name))
        mode, profile_type = self.modes.get(name, self.modes["arm"] if name in self.arm else self.modes[GRIPPER])
        return RobotInfo.Response(mode=mode, profile_type=profile_type, joint_names=names,
                                  joint_ids=[m.motor_id for m in motors], joint_lower_limits=float32_list(lower),
                                  joint_upper_limits=float32_list(upper), joint_velocity_limits=float32_list(velocity),
                                  joint_sleep_positions=float32_list(sleep), joint_state_indices=indices,
                                  num_joints=len(names), name=[name])

    # ------------------------------------------------------------------ what the world does to the arm
    def stall(self, joint: str) -> None:
        """The joint stops where it is now, as against an obstacle; its goal stays (and it pushes towards it)."""
        motor = self.arm[joint]
        now = self.clock()
        self.check_overloads(now)
        motor.goal = motor.goal if motor.goal is not None else motor.state(now)[0]
        motor.settle(now)
        motor.stalled = True
        motor.note_pushing(now)

    def release_stall(self, joint: str) -> None:
        motor = self.arm[joint]
        self.check_overloads()
        motor.stalled = False
        motor.pushing_since = None
        if motor.goal is not None and motor.driving:
            motor.write_goal(motor.goal, self.clock())

    def inject_error(self, joint: str, bits: int = dxl.OVERLOAD) -> None:
        """A hardware error on one motor: ``Hardware_Error_Status`` set, torque off (the firmware's Shutdown)."""
        motor = self.gripper if joint == GRIPPER else self.arm[joint]
        motor.settle(self.clock())
        motor.registers[dxl.HARDWARE_ERROR_STATUS] = int(bits)
        motor.registers[dxl.TORQUE_ENABLE] = 0
        if isinstance(motor, PositionMotor):
            motor.pushing_since = None

    def place_object(self, width_m: float | None) -> None:
        """An object between the fingers: closing stops at this left-finger position (None: nothing there)."""
        self.gripper.settle(self.clock())
        self.gripper.object_width_m = width_m

    # ------------------------------------------------------------------ observing
    def arm_state(self) -> tuple[np.ndarray, np.ndarray]:
        now = self.clock()
        self.check_overloads(now)
        states = [m.state(now) for m in self.arm.values()]
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])

    def profile(self) -> dict[str, dxl.ProfileRegisters]:
        return {name: dxl.ProfileRegisters(m.registers[dxl.PROFILE_VELOCITY], m.registers[dxl.PROFILE_ACCELERATION])
                for name, m in self.arm.items()}
