"""How the scripted expert drives a gripper: speeds, waits and reach per embodiment and control rate.

The expert's motions are written once, in 0.2 s WidowX steps; an :class:`ExpertSteering` scales them
to another rate and carries the gripper geometry that placement needs (pad reach, margins, workspace),
so the same expert drives the WidowX stand-in at 5 Hz and the Franka Hand at 15 Hz.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ladder_ros.core.errors import ConfigError, unknown_name

# Motion limits per 5 Hz step. With them a noise-free pick-and-place takes ~25-35 steps, close to
# the 27 steps the privileged verifier needs per subgoal on the WidowX suites (Section 5: the
# periodic interval is set to that median).
MAX_XY_STEP_M = 0.04
MAX_Z_STEP_M = 0.03
MAX_YAW_STEP_RAD = 0.35  # 20 degrees per step: a quarter turn in under 5 steps
TRAVEL_HEIGHT_M = 0.10  # above the table: clears bin walls (<= 0.06 m) with an object in hand
CLOSE_STEPS = 2  # closed and still before lifting; lifting keeps it closed, so a close lasts >= 3 steps
OPEN_STEPS = 2  # open and still, so the object drops clear before the gripper retreats
MOVE_TIMEOUT_STEPS = 40  # 8 s at 5 Hz: a motion that takes longer is abandoned and the attempt ends
BLOCKED_STEPS = 3  # the gripper trails its target (motions.BLOCKED_LAG_M) for this many steps in a row
WALLED_CONTAINER_MARGIN_M = 0.045  # a bin: keep the open pads (+-43 mm) off its walls
OPEN_PAD_REACH_M = 0.047  # open pad centre from the grasp axis: 35 mm travel + half an 8 mm pad + slack
PAD_HALF_WIDTH_M = 0.01  # pads are 20 mm wide along the grasp axis
PAD_SEPARATION_M = 0.025  # between an open pad and a neighbour's axis: a radius, half a pad, slack
WANDER_REGION = ((0.18, 0.46), (-0.20, 0.20), (0.05, 0.16))  # inside the tabletop workspace


@dataclass(frozen=True)
class ExpertSteering:
    """What the expert's motions depend on in the gripper it drives and the rate it runs at.

    ``time_scale`` is the number of control steps in one 0.2 s WidowX step: step counts (closing,
    timeouts, hovering and wandering) are multiplied by it and motion limits per step divided by it,
    so a motion takes the same simulated time at any rate. The geometry is the tabletop stand-in's
    (ladder_ros/sim/tabletop_embodiment.py: finger travel, pad size, workspace).
    """

    name: str
    time_scale: int
    max_xy_step_m: float
    max_z_step_m: float
    max_yaw_step_rad: float
    travel_height_m: float
    close_steps: int
    open_steps: int
    move_timeout_steps: int
    blocked_steps: int
    walled_container_margin_m: float
    open_pad_reach_m: float
    pad_half_width_m: float
    pad_separation_m: float
    wander_region: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
    open_wait_steps: int = 0  # steps it may wait for the hand to open before a grasp (0: it opens at once)


WIDOWX_STEERING = ExpertSteering(
    name="widowx", time_scale=1, max_xy_step_m=MAX_XY_STEP_M, max_z_step_m=MAX_Z_STEP_M,
    max_yaw_step_rad=MAX_YAW_STEP_RAD, travel_height_m=TRAVEL_HEIGHT_M, close_steps=CLOSE_STEPS,
    open_steps=OPEN_STEPS, move_timeout_steps=MOVE_TIMEOUT_STEPS, blocked_steps=BLOCKED_STEPS,
    walled_container_margin_m=WALLED_CONTAINER_MARGIN_M, open_pad_reach_m=OPEN_PAD_REACH_M,
    pad_half_width_m=PAD_HALF_WIDTH_M, pad_separation_m=PAD_SEPARATION_M, wander_region=WANDER_REGION)

# The Franka Hand at 15 Hz (paper Appendix A): three control steps per WidowX step, the same speeds
# (0.2 m/s across, 0.15 m/s up and down), so a pick-and-place takes ~6 s as on the WidowX. The hand
# closes at 0.1 m/s of width: 12 steps (0.8 s) close it from fully open, so it holds before lifting,
# and after a missed grasp it waits for the hand to open again before going down (13 steps at most).
# Its open fingertips reach 55 mm from the grasp axis (40 mm travel + 15.2 mm tip), where the
# WidowX's reach 43 mm: the margins grow by that. Its workspace lies further out (the Panda's).
FRANKA_STEERING = ExpertSteering(
    name="franka", time_scale=3, max_xy_step_m=MAX_XY_STEP_M / 3, max_z_step_m=MAX_Z_STEP_M / 3,
    max_yaw_step_rad=MAX_YAW_STEP_RAD / 3, travel_height_m=0.11, close_steps=12, open_steps=3 * OPEN_STEPS,
    move_timeout_steps=3 * MOVE_TIMEOUT_STEPS, blocked_steps=3 * BLOCKED_STEPS,
    walled_container_margin_m=0.057, open_pad_reach_m=0.056, pad_half_width_m=0.00875, pad_separation_m=0.028,
    wander_region=((0.36, 0.70), (-0.26, 0.26), (0.05, 0.18)), open_wait_steps=13)

STEERING = {"widowx": WIDOWX_STEERING, "widowx_robotarena": WIDOWX_STEERING, "franka": FRANKA_STEERING}


def expert_steering(embodiment: str) -> ExpertSteering:
    """The steering for an embodiment preset's tabletop stand-in; an unknown one lists the valid ones."""
    if embodiment not in STEERING:
        raise unknown_name("scripted expert embodiment", embodiment, list(STEERING))
    return STEERING[embodiment]


def stroke_steps(stroke_s: float, period_s: float) -> int:
    """Control steps a hand whose fingers take ``stroke_s`` from open to closed needs for one stroke."""
    if not (math.isfinite(stroke_s) and stroke_s >= 0.0 and math.isfinite(period_s) and period_s > 0.0):
        raise ConfigError(f"a finger stroke needs a time >= 0 s and a period > 0 s, got {stroke_s!r}, {period_s!r}")
    return math.ceil(stroke_s / period_s - 1e-9)


def with_finger_stroke(steering: ExpertSteering, stroke_s: float, period_s: float) -> ExpertSteering:
    """``steering`` for a hand whose fingers move at a set speed (the WidowX's PWM gripper, ~1.2 s a stroke):
    closed and still for a whole stroke before lifting, and open before a grasp descent (at most a stroke
    and a step). The tabletop stand-in's pads close within a step, so its steering never waits; a policy
    trained on the real hand learned these waits from its demonstrations."""
    steps = stroke_steps(stroke_s, period_s)
    if steps == 0:
        return steering
    return replace(steering, name=f"{steering.name} ({stroke_s:g} s finger stroke)",
                   close_steps=max(steering.close_steps, steps),
                   open_wait_steps=max(steering.open_wait_steps, steps + 1))
