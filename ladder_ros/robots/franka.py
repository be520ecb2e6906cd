"""Franka arms (Panda, FR3): limits, kinematics, the workspace, and how a 15 Hz joint-target stream moves the arm.

**Limits.** Joint position limits are the Franka Control Interface's "Robot and interface
specifications" for the Panda and the FR3 (:data:`MODELS`), narrowed to the URDF the connected
arm reports where that is narrower. Velocity, acceleration and jerk limits are *what franky
reports for the connected arm* (``Robot.joint_velocity_limit`` / ``joint_acceleration_limit`` /
``joint_jerk_limit``: franky-control 2.0.0 reports 2.175 rad/s for joints 1-4 and 2.61 rad/s for
joints 5-7 with franky-sim's FR3, although the FR3 datasheet allows up to 5.26 rad/s): franky's
trajectory generator (Ruckig) refuses a waypoint faster than these ("error -100", an invalid
input), so a driver that streamed the datasheet's speeds would fail mid-episode.
:class:`StreamLimits` holds them, scaled by the relative dynamics factor franky applies.

**Kinematics.** :func:`forward_kinematics`: the arm's modified Denavit-Hartenberg parameters
(Franka Control Interface documentation, "Denavit-Hartenberg parameters"; the same for Panda and
FR3), the flange 0.107 m past joint 7, and the Franka Hand's end effector 0.1034 m further,
turned -45 deg about z (libfranka's default ``F_T_EE``). :func:`clip_step_into_box` keeps the end
effector inside a :class:`~ladder_ros.core.safety.WorkspaceBox`: a joint step that would leave it
is shortened along its own line so the hand stops at the wall.

**Smooth streaming without overshoot.** A fresh motion to each 15 Hz target that ends at rest
brakes and re-accelerates the arm every 67 ms: jerky. So each target becomes two waypoints
(:func:`stream_waypoints`): a *via* point short of the target, passed with the velocity of the
last step, and the target itself at rest. The via point lies exactly as far short of the target as
the arm needs to brake from that velocity (jerk-limited, :func:`stopping_distance`, with a margin),
so when the stream stops the arm comes to rest *on* the last target, never past it; while targets
keep coming, each new motion takes over from the arm's current state and the arm never stops. The
via velocity is capped by the velocity limit and by the room between the arm and the target: from
its measured position and speed the arm must be able to reach the via speed and then brake onto
the target (:func:`speed_change_distance`).

**No plan from floating-point residue.** franky plans every waypoint with Ruckig,
time-synchronising the joints, and it plans again whenever a waypoint is reached: towards the
next waypoint, or, for the last one, towards the same target without the minimum time (franky
drops a waypoint's minimum time once it is reached). A plan that starts where the arm already
stands at the target, off it only by floating-point residue (about 1e-14 rad, 1e-15 rad/s,
1e-14 rad/s^2), has a synchronised duration of zero, and Ruckig's step 2 then finds no profile
for some joint: franky's "Motion planner failed with error code -111"
(``ErrorSynchronizationCalculation``), a disarmed arm (Ruckig 0.17.3, franky-control 2.0.0's,
and 0.19.4 alike). The old stream made such plans whenever every joint's via velocity was zero
(a policy holding still, a step every joint must first undo, the last homing step): the via point
was then the target itself, and once the arm reached it before the next target took over (a
stream a millisecond late: the via's minimum time is the period rounded up to whole
milliseconds), the rest segment was planned from residue. Replaying franky's waypoint logic on
Ruckig's code, 22,000 fuzzed motions failed only where that segment lasted 0.2 ms or less, and a
last waypoint with a minimum time failed in 5 % of the motions that reached it. So every motion
:func:`stream_motion` makes ends in a rest segment that lasts :data:`REST_SEGMENT_MIN_S` or more,
towards an end waypoint without a minimum time (reaching it plans nothing). Where the stream's
own rest segment would be shorter (every via speed under a few mrad/s, the via within about a
micro-radian of the target), a target the running motion already comes to rest on is not sent
again (the policy holds still: the arm rests there as planned), and any other target is reached
at rest no sooner than the period with the last joint :data:`SETTLE_S` of jerk-limited travel
(2e-5 rad at franky's jerk limit) short of it, which it then covers, at rest at the target again.
(Out of the stream's reach: franky itself plans again when it misses a control cycle in the 10 ms
it keeps planning after a motion's end, extrapolating from the robot's desired state.)

The ready pose is DROID's reset joints (droid ``robot_env``: ``[0, -pi/5, 0, -4 pi/5, 0, 3 pi/5,
0]``), where pi0.5-DROID's episodes begin.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.safety import JointLimits, WorkspaceBox

JOINT_NAMES = tuple(f"panda_joint{i}" for i in range(1, 8))
READY_JOINTS = (0.0, -math.pi / 5, 0.0, -4 * math.pi / 5, 0.0, 3 * math.pi / 5, 0.0)
HAND_MAX_WIDTH_M = 0.08  # Franka Hand stroke (Franka product manual)
CONTROL_PERIOD_S = 1.0 / 15.0  # 15 Hz (paper Appendix A)
# What franky-control 2.0.0 reports for a connected arm (measured with franky-sim 1.0.4's FR3; the Panda's FCI limits).
FRANKY_VELOCITY_LIMITS = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)  # rad/s
FRANKY_ACCELERATION_LIMITS = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)  # rad/s^2
FRANKY_JERK_LIMITS = (7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0)  # rad/s^3
BRAKE_MARGIN = 1.25  # the via point sits this many stopping distances short of the target (room for time sync)
# Project choice: a rest segment shorter than two of franky's 1 kHz control cycles is not sent (module docstring:
# Ruckig's step 2 failed on rest segments of up to 0.2 ms, never on one of 1 ms or more).
REST_SEGMENT_MIN_S = 0.002
SETTLE_S = 2 * REST_SEGMENT_MIN_S  # project choice: the made-up rest segment's length, twice the shortest one sent

# Modified DH (a m, d m, alpha rad) of joints 1-7, then the flange (FCI documentation, Panda and FR3 alike).
DH = ((0.0, 0.333, 0.0), (0.0, 0.0, -math.pi / 2), (0.0, 0.316, math.pi / 2), (0.0825, 0.0, math.pi / 2),
      (-0.0825, 0.384, -math.pi / 2), (0.0, 0.0, math.pi / 2), (0.088, 0.0, math.pi / 2))
FLANGE_D_M = 0.107
HAND_EE_Z_M = 0.1034  # libfranka's default F_T_EE for the Franka Hand: 0.1034 m along z, -45 deg about z


@dataclass(frozen=True)
class FrankaModel:
    """A Franka arm's joint position limits (rad) and its datasheet velocity and acceleration limits."""

    name: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_velocity: tuple[float, ...]  # rad/s, datasheet (franky's own limits govern streaming: StreamLimits)
    max_acceleration: tuple[float, ...]  # rad/s^2, datasheet


MODELS = {
    "panda": FrankaModel("panda",
                         (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
                         (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
                         (2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100),
                         (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)),
    "fr3": FrankaModel("fr3",
                       (-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159),
                       (2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159),
                       (2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
                       (10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0)),
}


def get_model(name: str) -> FrankaModel:
    if name not in MODELS:
        raise unknown_name("Franka model", name, list(MODELS))
    return MODELS[name]


def urdf_joint_limits(urdf: str, count: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the revolute joints ``*joint1`` .. ``*joint<count>`` of a URDF (franky's ``model_urdf``)."""
    found: dict[int, tuple[float, float]] = {}
    for match in re.finditer(r'<joint\s+name="[^"]*?joint(\d+)"\s+type="revolute"\s*>(.*?)</joint>', urdf, re.S):
        limit = re.search(r'<limit\b[^>]*?lower="([^"]+)"[^>]*?upper="([^"]+)"', match.group(2))
        if limit:
            found[int(match.group(1))] = (float(limit.group(1)), float(limit.group(2)))
    missing = [i for i in range(1, count + 1) if i not in found]
    if missing:
        raise ConfigError(f"the arm's URDF has no position limits for joints {missing}")
    return (np.array([found[i][0] for i in range(1, count + 1)]), np.array([found[i][1] for i in range(1, count + 1)]))


@dataclass(frozen=True)
class StreamLimits:
    """The limits a joint stream must respect (rad, rad/s, rad/s^2, rad/s^3), already scaled by the dynamics factor."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]
    velocity: tuple[float, ...]
    acceleration: tuple[float, ...]
    jerk: tuple[float, ...]
    source: str = ""

    def __post_init__(self) -> None:
        sizes = {len(getattr(self, f)) for f in ("lower", "upper", "velocity", "acceleration", "jerk")}
        if len(sizes) != 1:
            raise ConfigError(f"stream limits need one value per joint in every field, got sizes {sorted(sizes)}")
        for field_name in ("velocity", "acceleration", "jerk"):
            values = getattr(self, field_name)
            if not all(math.isfinite(v) and v > 0 for v in values):
                raise ConfigError(f"stream limits: every {field_name} limit must be positive, got {list(values)}")
        if not all(lo < hi for lo, hi in zip(self.lower, self.upper)):
            raise ConfigError(f"stream limits: lower must be below upper, got {list(self.lower)} / {list(self.upper)}")

    @classmethod
    def from_robot(cls, model: FrankaModel, velocity: Sequence[float], acceleration: Sequence[float],
                   jerk: Sequence[float], dynamics_factor: float, urdf_lower: Sequence[float] | None = None,
                   urdf_upper: Sequence[float] | None = None, requested_velocity: Sequence[float] | None = None,
                   source: str = "") -> "StreamLimits":
        """The limits for streaming: franky's reported ones (times the dynamics factor), the model's positions.

        ``requested_velocity`` (the driver's parameter) may lower franky's velocity limits, never raise
        them: a request above franky's is a :class:`ConfigError` naming the joint.
        """
        if not 0.0 < dynamics_factor <= 1.0:
            raise ConfigError(f"dynamics factor must be in (0, 1], got {dynamics_factor!r}")
        reported = np.asarray(velocity, dtype=np.float64)
        v = reported.copy()
        if requested_velocity is not None:
            asked = np.asarray(requested_velocity, dtype=np.float64)
            if asked.shape != reported.shape:
                raise ConfigError(f"max_joint_velocity has {asked.size} values for {reported.size} joints")
            above = [i for i in range(reported.size) if asked[i] > reported[i] + 1e-9]
            if above:
                listed = ", ".join(f"joint {i + 1} {asked[i]:g} > {reported[i]:g}" for i in above)
                raise ConfigError(f"max_joint_velocity asks for more than franky reports for the connected "
                                  f"{model.name} ({listed} rad/s): its planner would refuse such waypoints")
            v = np.minimum(v, asked)
        lower, upper = np.array(model.lower), np.array(model.upper)
        if urdf_lower is not None and urdf_upper is not None:
            lower, upper = np.maximum(lower, urdf_lower), np.minimum(upper, urdf_upper)
        f = float(dynamics_factor)
        return cls(tuple(lower), tuple(upper), tuple(v * f), tuple(np.asarray(acceleration, dtype=np.float64) * f),
                   tuple(np.asarray(jerk, dtype=np.float64) * f), source)

    def joint_limits(self, names: tuple[str, ...] = JOINT_NAMES, period_s: float = CONTROL_PERIOD_S) -> JointLimits:
        """For the safety filter: a joint may move at most its velocity limit times one period per step."""
        return JointLimits(names, self.lower, self.upper, tuple(v * period_s for v in self.velocity),
                           source=self.source or "Franka joint limits; velocity limits over one control period")


def stopping_distance(speed: np.ndarray, acceleration: np.ndarray, jerk: np.ndarray) -> np.ndarray:
    """How far a joint moving at ``speed`` (>= 0) travels while braking to rest at the acceleration and jerk limits.

    Braking from zero acceleration: the deceleration ramps up at the jerk limit, holds at the
    acceleration limit, ramps down; the time is ``v/a + a/j`` and the mean speed ``v/2``. Below
    ``a^2/j`` the acceleration limit is never reached and the distance is ``v * sqrt(v/j)``.
    """
    v, a, j = (np.asarray(x, dtype=np.float64) for x in (speed, acceleration, jerk))
    v = np.abs(v)
    full = v / 2.0 * (v / a + a / j)
    short = v * np.sqrt(v / j)
    return np.where(v >= a * a / j, full, short)


def speed_to_stop_within(distance: np.ndarray, acceleration: np.ndarray, jerk: np.ndarray) -> np.ndarray:
    """The largest speed from which a joint can brake to rest within ``distance`` (>= 0): the inverse of the above."""
    d, a, j = (np.asarray(x, dtype=np.float64) for x in (distance, acceleration, jerk))
    d = np.maximum(d, 0.0)
    full = -a * a / (2.0 * j) + np.sqrt(a ** 4 / (4.0 * j * j) + 2.0 * a * d)
    short = np.cbrt(d * d * j)
    return np.where(full >= a * a / j, full, short)


def speed_change_distance(start: np.ndarray, end: np.ndarray, acceleration: np.ndarray, jerk: np.ndarray) -> np.ndarray:
    """How far a joint travels while its speed changes from ``start`` to ``end`` (both >= 0) at the limits.

    The same jerk-limited ramp as :func:`stopping_distance` (which is the change from ``v`` to 0):
    the time is ``dv/a + a/j`` (or ``2 sqrt(dv/j)`` below ``a^2/j``) at the mean speed of the two.
    """
    u, v, a, j = (np.asarray(x, dtype=np.float64) for x in (start, end, acceleration, jerk))
    u, v = np.abs(u), np.abs(v)
    dv = np.abs(v - u)
    duration = np.where(dv >= a * a / j, dv / a + a / j, 2.0 * np.sqrt(dv / j))
    return (u + v) / 2.0 * duration


def brake_duration(speed: np.ndarray, acceleration: np.ndarray, jerk: np.ndarray) -> np.ndarray:
    """How long braking from ``speed`` to rest takes at the limits (the ramp of :func:`stopping_distance`)."""
    v, a, j = (np.asarray(x, dtype=np.float64) for x in (speed, acceleration, jerk))
    v = np.abs(v)
    return np.where(v >= a * a / j, v / a + a / j, 2.0 * np.sqrt(v / j))


def rest_to_rest_duration(distance: np.ndarray, jerk: np.ndarray) -> np.ndarray:
    """The least time a joint at rest needs to move ``distance`` and rest again, jerk-limited (a lower bound).

    Below the acceleration and velocity limits the fastest such move is four jerk phases of
    ``t/4``, covering ``j t^3 / 32``; any limit reached only makes it longer.
    """
    d, j = np.abs(np.asarray(distance, dtype=np.float64)), np.asarray(jerk, dtype=np.float64)
    return np.cbrt(32.0 * d / j)


@dataclass(frozen=True)
class StreamWaypoint:
    """One waypoint of a streamed motion: a joint state to pass (velocity 0: to rest at) no sooner than a time."""

    position: np.ndarray  # rad
    velocity: np.ndarray  # rad/s
    minimum_time_s: float | None  # None: as fast as the limits allow


def rest_segment_duration(via: np.ndarray, via_velocity: np.ndarray, target: np.ndarray,
                          limits: StreamLimits) -> float:
    """A lower bound on how long the rest segment (from ``via`` at ``via_velocity`` to ``target`` at rest) lasts.

    Each joint needs at least its brake time and at least the time to cover its distance from rest
    to rest; the segment lasts as long as its slowest joint.
    """
    a, j = np.array(limits.acceleration), np.array(limits.jerk)
    gap = np.asarray(target, dtype=np.float64) - np.asarray(via, dtype=np.float64)
    each = np.maximum(brake_duration(via_velocity, a, j), rest_to_rest_duration(gap, j))
    return float(np.max(each)) if each.size else 0.0


def stream_motion(via: np.ndarray, via_velocity: np.ndarray, target: np.ndarray, period_s: float,
                  limits: StreamLimits, resting_at: np.ndarray | None = None) -> tuple[StreamWaypoint, ...]:
    """The waypoints of one streamed motion (module docstring); each ends at rest on ``target``, none from residue.

    * Pass ``via`` at ``via_velocity`` no sooner than ``period_s``, then rest at ``target`` (no minimum
      time), where that rest segment lasts :data:`REST_SEGMENT_MIN_S` or more;
    * else nothing, where ``resting_at`` (the target the running motion comes to rest on; None: no
      motion runs, or it is unknown) is within that reach of ``target``: the arm rests there already;
    * else rest no sooner than ``period_s`` at ``target`` with the last joint :data:`SETTLE_S` of travel
      short of it (below it, above it at its lower limit), then rest at ``target`` (no minimum time).
    """
    if not period_s > 0:
        raise ConfigError(f"period must be positive, got {period_s!r}")
    q_via, v_via, q_target = (np.asarray(x, dtype=np.float64) for x in (via, via_velocity, target))
    rest = np.zeros(len(q_target))
    if rest_segment_duration(q_via, v_via, q_target, limits) >= REST_SEGMENT_MIN_S:
        return (StreamWaypoint(q_via, v_via, float(period_s)), StreamWaypoint(q_target, rest, None))
    if resting_at is not None and rest_segment_duration(resting_at, rest, q_target, limits) < REST_SEGMENT_MIN_S:
        return ()
    short = q_target.copy()
    settle = settle_distance(limits)
    short[-1] += settle if short[-1] - settle < limits.lower[-1] else -settle  # (never past a position limit)
    return (StreamWaypoint(short, rest, float(period_s)), StreamWaypoint(q_target, rest, None))


def settle_distance(limits: StreamLimits) -> float:
    """How far the last joint moves from rest to rest in :data:`SETTLE_S` at its jerk limit (``j t^3 / 32``)."""
    return float(limits.jerk[-1]) * SETTLE_S ** 3 / 32.0


def stream_waypoints(previous: np.ndarray, target: np.ndarray, measured: np.ndarray, period_s: float,
                     limits: StreamLimits,
                     measured_velocity: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(via point, via velocity) for streaming ``target`` one period after ``previous`` (module docstring).

    The arm passes the via point with the last step's average velocity, capped by the velocity
    limit and by the room between the ``measured`` joints and the target: from where it is and how
    fast it moves (``measured_velocity``) it must be able to reach that speed and then brake onto the
    target; it reaches the target at rest unless the next target takes over first.
    """
    if not period_s > 0:
        raise ConfigError(f"period must be positive, got {period_s!r}")
    q0, q1, qm = (np.asarray(x, dtype=np.float64) for x in (previous, target, measured))
    vm = np.zeros(len(q1)) if measured_velocity is None else np.asarray(measured_velocity, dtype=np.float64)
    a, j = np.array(limits.acceleration), np.array(limits.jerk)
    v = np.clip((q1 - q0) / period_s, -np.array(limits.velocity), np.array(limits.velocity))
    direction = np.sign(v)
    along = vm * direction  # the arm's speed towards the target (negative: away from it)
    room = (q1 - qm) * direction - stopping_distance(np.minimum(along, 0.0), a, j)  # first undo a backward motion
    now = np.maximum(along, 0.0)

    def fits(speed: np.ndarray) -> np.ndarray:
        return speed_change_distance(now, speed, a, j) + BRAKE_MARGIN * stopping_distance(speed, a, j) <= room

    low, high = np.zeros(len(q1)), np.abs(v)
    ok = fits(high)
    for _ in range(30):  # bisection for the largest speed that fits, where the full one does not
        middle = (low + high) / 2.0
        good = fits(middle)
        low, high = np.where(good, middle, low), np.where(good, high, middle)
    speed = np.where(ok, np.abs(v), low)
    speed = np.where(room > 0.0, speed, 0.0)
    via = q1 - direction * stopping_distance(speed, a, j) * BRAKE_MARGIN
    return via, direction * speed


def _dh(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
    return np.array([[ct, -st, 0.0, a], [st * ca, ct * ca, -sa, -d * sa], [st * sa, ct * sa, ca, d * ca],
                     [0.0, 0.0, 0.0, 1.0]])


_FLANGE = _dh(0.0, FLANGE_D_M, 0.0, 0.0)
_HAND = np.array([[math.cos(-math.pi / 4), -math.sin(-math.pi / 4), 0.0, 0.0],
                  [math.sin(-math.pi / 4), math.cos(-math.pi / 4), 0.0, 0.0],
                  [0.0, 0.0, 1.0, HAND_EE_Z_M], [0.0, 0.0, 0.0, 1.0]])


def forward_kinematics(joints: Sequence[float]) -> np.ndarray:
    """The Franka Hand's end-effector pose (4x4, base frame) at ``joints`` (module docstring)."""
    q = np.asarray(joints, dtype=np.float64)
    if q.shape != (7,):
        raise ConfigError(f"a Franka has 7 joints, got shape {q.shape}")
    t = np.eye(4)
    for (a, d, alpha), theta in zip(DH, q):
        t = t @ _dh(a, d, alpha, float(theta))
    return t @ _FLANGE @ _HAND


def _outside(box: WorkspaceBox, position: np.ndarray) -> float:
    """How far (m) a position lies outside the box (0 inside)."""
    below = np.maximum(np.array(box.low) - position, 0.0)
    above = np.maximum(position - np.array(box.high), 0.0)
    return float(np.linalg.norm(below + above))


def clip_step_into_box(previous: np.ndarray, target: np.ndarray, box: WorkspaceBox,
                       iterations: int = 12) -> tuple[np.ndarray, list[str]]:
    """The target, or the furthest point towards it along the joint-space step whose hand stays in ``box``.

    Returns (joints, the axes of the wall met; empty when the target is inside). When the hand is
    outside the box already (the box changed, the arm was moved by hand), a step that brings it
    closer is taken as it is and one that does not stays at ``previous``.
    """
    q0 = np.asarray(previous, dtype=np.float64)
    q1 = np.asarray(target, dtype=np.float64)
    end = forward_kinematics(q1)[:3, 3]
    if box.contains(end):
        return q1, []
    axes = box.clip(end)[1]
    start = forward_kinematics(q0)[:3, 3]
    if not box.contains(start):
        return (q1, axes) if _outside(box, end) < _outside(box, start) else (q0, axes)
    inside, outside = 0.0, 1.0
    for _ in range(iterations):
        middle = (inside + outside) / 2.0
        if box.contains(forward_kinematics(q0 + middle * (q1 - q0))[:3, 3]):
            inside = middle
        else:
            outside = middle
    return q0 + inside * (q1 - q0), axes
