"""Dynamixel X-series facts the WidowX driver relies on: the time-based profile, register names, error bits.

Interbotix arms run their joints as Dynamixel X-series motors in position control with a
*time-based* profile (``Drive_Mode`` bit 2 set; interbotix_xs_driver ``src/xs_driver.cpp``
``set_joint_operating_mode``). In that mode (ROBOTIS e-manual, X-series control table,
"Profile Velocity(112)" and "Profile Acceleration(108)"):

* ``Profile_Velocity`` is the whole move's duration in ms and ``Profile_Acceleration`` the time
  spent speeding up and again slowing down, in ms; the acceleration time is at most half the move.
* A new goal is approached along a trapezoid that starts from where the motor is and how fast it
  moves at that moment, and ends at the goal at rest after ``Profile_Velocity`` ms. So a goal sent
  while the joint moves (a *hold* at the measured position, say) first brakes the joint: it passes
  the goal by a little and comes back, at rest when the profile's time is up.
* ``Profile_Velocity`` 0 means "no profile" (a step: the motor moves as fast as it can).
* Both registers live in RAM: a reboot (or power cycle) restores their initial value, 0, and clears
  ``Hardware_Error_Status`` and ``Torque_Enable`` (e-manual, "Initial Value": "Initial Values in
  the RAM area are restored when the DYNAMIXEL is turned on"). ``xs_sdk`` writes the profile only
  when it sets the operating modes at its start (``modes.yaml``: 2000 ms / 300 ms for the arm group,
  interbotix_xsarm_control ``config/modes.yaml``), never after ``reboot_motors``: whoever reboots a
  motor must write the profile again.

:class:`TimeProfile` computes one such move; the WidowX twin's motors move along it and the driver
uses the same arithmetic to predict where its joints should be (a joint that falls behind its
prediction has stalled). What the firmware does beyond this (jerk smoothing, a move whose peak speed
would exceed ``Velocity_Limit``) is not documented; here the peak speed is capped at the velocity
limit and the move simply takes longer. No rclpy here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ladder_ros.core.errors import ConfigError

# Register names as xs_sdk's RegisterValues service takes them (Dynamixel Workbench control-table item names).
PROFILE_VELOCITY = "Profile_Velocity"
PROFILE_ACCELERATION = "Profile_Acceleration"
TORQUE_ENABLE = "Torque_Enable"
HARDWARE_ERROR_STATUS = "Hardware_Error_Status"
GOAL_POSITION = "Goal_Position"
PRESENT_POSITION = "Present_Position"
VELOCITY_LIMIT = "Velocity_Limit"

# Hardware_Error_Status(70) bits (e-manual, X-series): each one also turns the torque off (Shutdown(63) defaults).
HARDWARE_ERRORS = {0: "input voltage", 2: "overheating", 3: "motor encoder", 4: "electrical shock", 5: "overload"}
# What each bit means, in the e-manual's words (ROBOTIS-GIT/emanual, commit 187f56cd218e1f674f4d125cec0ad03307654eec,
# _includes/en/dxl/control_table_shutdown.md, the X-series table). Shutdown(63) is 52 by default (XM430-W350 and
# XL430-W250 control tables): overheating, electrical shock and overload turn the torque off ("REBOOT is the only
# method to reset Torque Enable(64) to 1 after the shutdown"); input voltage and encoder errors only report.
HARDWARE_ERROR_MEANINGS = {
    0: "the input voltage is outside the configured operating range",
    2: "the internal temperature exceeds the configured limit",
    3: "the motor encoder malfunctions",
    4: "an electric shock on the circuit, or too little power to drive the motor",
    5: "a load beyond the motor's maximum output persisted",
}
OVERLOAD = 1 << 5

# Present_Current(126) counts about 2.69 mA (XM430-W350 e-manual, ROBOTIS-GIT/emanual commit
# 07fe860b910b8617dc47c23cf342a2714d6cc748, docs/en/dxl/x/xm430-w350.md). xs_sdk publishes each joint's effort as
# that register times 2.69 in mA (interbotix_xs_sdk README, Interbotix/interbotix_ros_core commit
# 13bfbc03d48080dbeb09c09f3ea9b0c387670b19: "effort is given in milliamps"; interbotix_xs_driver src/xs_driver.cpp,
# commit 68e3fda69452fcac22c4fb0ff68793cfcb35af58: read_joint_states sync-reads one address for every motor, the
# first motor's Present_Current, or Present_Load where it has none, and converts it with convertValue2Current).
# An XL430-W250 has no current sensor: at that address it holds Present_Load, -1000..1000 in 0.1 % of its maximum
# torque (docs/en/dxl/x/xl430-w250.md, commit 00a4b781d5a52e9b62599ea084cabc11e33b3b46), so its "effort" is its
# load x 2.69.
CURRENT_UNIT_MA = 2.69
# The effort xs_sdk reports for a motor that pushes against an obstacle with all it has, at the arm's 12 V supply.
# In position mode a motor's output is its position loop's PWM, bounded by PWM_Limit(36) (885, 100 %) and not by
# Current_Limit(38) (1193 x 2.69 mA = 3.2 A): a blocked XM430-W350 at full PWM draws its stall current, 2.3 A at
# 12 V (its specification: 4.1 N.m at 12.0 V, 2.3 A); a blocked XL430-W250 reads 100 % load. With the default
# Position P Gain(84) 800 the PWM is full once the position error passes about 885 / (800 / 128) = 142 ticks
# (0.22 rad); below that the current grows with the error.
BLOCKED_EFFORT = {"XM430-W350": 2300.0, "XL430-W250": 1000 * CURRENT_UNIT_MA}

TICKS_PER_TURN = 4096  # X-series position resolution: 0..4095 is one turn, 2048 the middle (0 rad)
RPM_PER_VELOCITY_UNIT = 0.229  # Velocity_Limit(44) and Present_Velocity(128) unit (e-manual)


def describe_hardware_error(value: int) -> str:
    """The named bits of a ``Hardware_Error_Status`` value, e.g. ``"overload"``; ``""`` for 0."""
    value = int(value)
    names = [name for bit, name in HARDWARE_ERRORS.items() if value & (1 << bit)]
    unknown = value & ~sum(1 << bit for bit in HARDWARE_ERRORS)
    if unknown:
        names.append(f"unknown bits 0x{unknown:02x}")
    return ", ".join(names)


def explain_hardware_error(value: int) -> str:
    """What the set bits of a ``Hardware_Error_Status`` value mean, e.g. ``"overload: a load beyond the motor's
    maximum output persisted"``; ``""`` for 0."""
    value = int(value)
    parts = [f"{HARDWARE_ERRORS[bit]}: {meaning}" for bit, meaning in HARDWARE_ERROR_MEANINGS.items()
             if value & (1 << bit)]
    unknown = value & ~sum(1 << bit for bit in HARDWARE_ERRORS)
    if unknown:
        parts.append(f"unknown bits 0x{unknown:02x}: not an X-series error")
    return "; ".join(parts)


def ticks_to_rad(ticks: int) -> float:
    """A position register value (0..4095, 2048 = 0 rad) in radians."""
    return (int(ticks) - TICKS_PER_TURN // 2) * 2.0 * math.pi / TICKS_PER_TURN


def rad_to_ticks(rad: float) -> int:
    return int(round(float(rad) * TICKS_PER_TURN / (2.0 * math.pi))) + TICKS_PER_TURN // 2


def velocity_units_to_rad_s(units: int) -> float:
    """A ``Velocity_Limit`` value (0.229 rpm units) in rad/s."""
    return int(units) * RPM_PER_VELOCITY_UNIT * 2.0 * math.pi / 60.0


@dataclass(frozen=True)
class ProfileRegisters:
    """The time-based profile as its two registers hold it (ms), and as the Interbotix API computes them."""

    velocity_ms: int
    acceleration_ms: int

    def __post_init__(self) -> None:
        for name, value in (("Profile_Velocity", self.velocity_ms), ("Profile_Acceleration", self.acceleration_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a whole number of ms >= 0, got {value!r}")

    @classmethod
    def from_times(cls, moving_time_s: float, accel_time_s: float) -> "ProfileRegisters":
        """What ``set_trajectory_time`` writes for these times: ``int(seconds * 1000)`` (interbotix_xs_modules)."""
        return cls(int(moving_time_s * 1000), int(accel_time_s * 1000))

    @property
    def total_s(self) -> float:
        return self.velocity_ms / 1000.0

    @property
    def ramp_s(self) -> float:
        """The acceleration time the motor uses: at most half the move (e-manual)."""
        return min(self.acceleration_ms, self.velocity_ms // 2) / 1000.0


@dataclass(frozen=True)
class TimeProfile:
    """One move of one joint under a time-based profile: from ``q0`` moving at ``v0`` at ``t0`` to ``q1`` at rest.

    ``registers`` is the profile in force when the goal was written; ``max_velocity`` (rad/s) the
    motor's velocity limit. The move is a trapezoid in velocity: a ramp from ``v0`` to the cruise
    speed, the cruise, a ramp down to rest at ``q1``; the cruise speed makes the distance come out
    right: ``q1 - q0 = v0 * ramp / 2 + cruise * (total - ramp)``.
    """

    t0: float
    q0: float
    v0: float
    q1: float
    registers: ProfileRegisters
    max_velocity: float

    def __post_init__(self) -> None:
        if not self.max_velocity > 0:
            raise ConfigError(f"max_velocity must be positive, got {self.max_velocity!r}")
        distance = self.q1 - self.q0
        if self.registers.velocity_ms == 0:  # no profile: a step at the velocity limit
            total = abs(distance) / self.max_velocity
            ramp, cruise = 0.0, math.copysign(self.max_velocity, distance) if distance else 0.0
        else:
            total, ramp = self.registers.total_s, self.registers.ramp_s
            cruise = (distance - self.v0 * ramp / 2.0) / (total - ramp)
            if abs(cruise) > self.max_velocity:  # the motor cannot go faster: the move takes longer
                cruise = math.copysign(self.max_velocity, cruise)
                total = ramp + (distance - self.v0 * ramp / 2.0) / cruise
        object.__setattr__(self, "_total", total)
        object.__setattr__(self, "_ramp", ramp)
        object.__setattr__(self, "_cruise", cruise)

    @property
    def duration(self) -> float:
        """Seconds from ``t0`` until the joint is at rest at ``q1``."""
        return self._total  # type: ignore[attr-defined]

    @property
    def end_time(self) -> float:
        return self.t0 + self.duration

    @property
    def cruise_velocity(self) -> float:
        return self._cruise  # type: ignore[attr-defined]

    def state(self, t: float) -> tuple[float, float]:
        """(position rad, velocity rad/s) at time ``t``."""
        tau = t - self.t0
        total, ramp, cruise = self._total, self._ramp, self._cruise  # type: ignore[attr-defined]
        if tau <= 0.0:
            return self.q0, self.v0
        if tau >= total:
            return self.q1, 0.0
        if tau < ramp:
            velocity = self.v0 + (cruise - self.v0) * tau / ramp
            return self.q0 + self.v0 * tau + (cruise - self.v0) * tau * tau / (2.0 * ramp), velocity
        if tau <= total - ramp:
            return self.q0 + (self.v0 + cruise) / 2.0 * ramp + cruise * (tau - ramp), cruise
        left = total - tau
        return self.q1 - cruise * left * left / (2.0 * ramp), cruise * left / ramp

    def position(self, t: float) -> float:
        return self.state(t)[0]

    def velocity(self, t: float) -> float:
        return self.state(t)[1]
