"""The simulated xs_sdk behind the test double: a wx250s's Dynamixel bus, advanced at 100 Hz.

Only the double uses it (the real API talks to the xs_sdk node instead). Arm joints follow the
time-based profile the real motors run (Drive_Mode time-based, the ``Profile_Velocity`` register =
moving time, ``Profile_Acceleration`` = acceleration time: a trapezoid from the position at the
command to the command). The gripper runs under PWM: the fingers move at a speed proportional to
the effort until a finger limit or an object stops them. A faulted motor holds its position and
ignores commands until rebooted.
"""

import math
import threading
import time

import numpy as np

ARM = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")
LOWER = [-math.pi + 1e-5, math.radians(-108), math.radians(-123), -math.pi + 1e-5, math.radians(-100),
         -math.pi + 1e-5]
UPPER = [math.pi - 1e-5, math.radians(114), math.radians(92), math.pi - 1e-5, math.radians(123), math.pi - 1e-5]
VELOCITY = [math.pi] * 6
SLEEP = [0.0, -1.80, 1.55, 0.0, 0.8, 0.0]
FINGER_LOWER, FINGER_UPPER = 0.015, 0.037  # URDF finger joint range (m)
FINGER_SPEED_M_S = 0.06  # full-PWM finger speed (m/s): about 0.4 s from open to closed
PWM_FULL = 885.0  # Dynamixel XM430 PWM limit


class Bus:
    """Motor state and every API call; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple] = []
        self.call_times: list[float] = []  # monotonic time of each call (benchmarks)
        self.positions = np.array(SLEEP, dtype=np.float64)
        self.velocities = np.zeros(6)
        self.finger = FINGER_UPPER
        self.finger_velocity = 0.0
        self.gripper_effort = 0.0
        self.object_width: float | None = None  # an object between the fingers stops them at this finger position
        self.faulted: set[str] = set()
        self.torque = True
        self.moving_time = 2.0
        self.accel_time = 0.3
        self._moves: dict[int, tuple[float, float, float, float, float]] = {}  # joint -> (t0, q0, q1, T, Ta)
        self._last = time.monotonic()

    def record(self, *call) -> None:
        with self.lock:
            self.calls.append(call)
            self.call_times.append(time.monotonic())

    def command(self, joints) -> None:
        now = time.monotonic()
        with self.lock:
            self._advance(now)
            for i, q in enumerate(joints):
                if ARM[i] in self.faulted or not self.torque:
                    continue
                self._moves[i] = (now, float(self.positions[i]), float(q), self.moving_time, self.accel_time)

    def place_object(self, width_m: float | None) -> None:
        with self.lock:
            self.object_width = width_m

    def fault(self, joint: str) -> None:
        with self.lock:
            self._advance(time.monotonic())
            self.faulted.add(joint)
            self._moves.pop(ARM.index(joint), None)

    def reboot(self, names, enable: bool) -> None:
        with self.lock:
            self._advance(time.monotonic())
            for name in names:
                self.faulted.discard(name)
                self._moves.pop(ARM.index(name), None) if name in ARM else None
            self.torque = enable or self.torque

    def step(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        now = time.monotonic()
        with self.lock:
            self._advance(now)
            return self.positions.copy(), self.velocities.copy(), self.finger, self.finger_velocity

    def _advance(self, now: float) -> None:
        dt = max(0.0, now - self._last)
        self._last = now
        previous = self.positions.copy()
        for i, (t0, q0, q1, total, accel) in list(self._moves.items()):
            s = _profile(now - t0, max(total, 1e-3), min(accel, total / 2))
            self.positions[i] = q0 + (q1 - q0) * s
            if s >= 1.0:
                del self._moves[i]
        self.velocities = (self.positions - previous) / dt if dt > 0 else np.zeros(6)
        speed = FINGER_SPEED_M_S * float(np.clip(self.gripper_effort / PWM_FULL * 2.0, -1.0, 1.0))
        stop_low = FINGER_LOWER if self.object_width is None else max(FINGER_LOWER, self.object_width)
        finger = min(FINGER_UPPER, max(stop_low, self.finger + speed * dt))
        self.finger_velocity = (finger - self.finger) / dt if dt > 0 else 0.0
        self.finger = finger


def _profile(t: float, total: float, accel: float) -> float:
    """Fraction of the move done at time t of a trapezoidal velocity profile (Dynamixel time-based profile)."""
    if t >= total:
        return 1.0
    if t <= 0:
        return 0.0
    if accel <= 0:
        return t / total
    v = 1.0 / (total - accel)  # peak speed, in fractions of the move per second
    if t < accel:
        return 0.5 * v / accel * t * t
    if t < total - accel:
        return 0.5 * v * accel + v * (t - accel)
    rest = total - t
    return 1.0 - 0.5 * v / accel * rest * rest


BUS = Bus()  # one simulated robot per process, like one xs_sdk per robot_name


def reset() -> Bus:
    """A fresh bus (tests)."""
    global BUS
    BUS = Bus()
    return BUS
