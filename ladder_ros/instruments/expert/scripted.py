"""A scripted pick-and-place expert: a test instrument for simulators, not a robot policy.

It reads ``observation.privileged`` (object poses, container footprints, what is grasped) and so
runs only in simulation. It serves three purposes:

* **Layout validation.** With noise off and one single-subgoal instruction at a time it completes
  every subgoal of every layout (the paper validates each layout with scripted policies, Section 3
  'Scene construction'), so a failing layout is a broken layout.
* **A stand-in low-level policy** for loop tests. Seeded execution noise (:class:`ExpertNoise`)
  makes retries, regressions (a subgoal completed, then undone) and failures happen for real:
  missed grasps (the gripper closes on air above the object, the aperture drops to ~0, it reopens
  and retries), early releases (the object drops in transit), knocking an already placed object off
  its container, and aimless wandering (Section 5.2: policies spend the budget 'moving aimlessly').
* **The no-orchestrator baseline.** Given a task's full compound instruction it fails the way a
  Bridge policy does as the horizon grows (Section 5.1: ~85 % on one subgoal, near zero by five):
  each attempt it attends to one mentioned object at random, so it revisits objects it already
  placed and, with ``take_out_placed``, takes them out onto the table again (it sees that object's
  goal done and moves it on: a completed subgoal undone); it reads the destination from the words
  after the object and confuses destinations with ``destination_confusion``, so it never sees a
  relay's second leg or a revisit's return and mixes up split and transfer targets; it ignores
  'first ... then' order; it does not understand negation, so 'everything except the eggplant'
  makes the eggplant as likely a pick as any other object; and the more objects an instruction
  names, the more often its attention spreads over them (``drift_per_extra_object``): the attempt
  wanders, then closes on air (Section 5.2: long tasks stall, the policy 'moving aimlessly and
  trying to reach the target object'). No success rate is written down anywhere: the rates come
  out of these behaviours, the physics and the step budget.

A *stale* single instruction (its subgoal already holds, e.g. the periodic trigger stays on the
last subgoal) makes it hover, or with ``regrasp_done`` grasp the object again and re-place it
(dropping it on the way with ``early_release``).

Determinism: one ``numpy`` generator seeded at construction and drawn from in a fixed order (the
choices of an attempt when it starts, wander waypoints as they come), so the actions depend only on
the seed and the sequence of observations and instructions. ``reset(instruction)`` ends the
current attempt (as a chunking policy drops the rest of its chunk); an instruction that changes
without a reset is treated as a reset.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Generator, Iterable

import numpy as np

from ladder_ros.core.action_conventions import CANONICAL, ActionConvention
from ladder_ros.core.errors import ConfigError, InvalidInputError, unknown_name
from ladder_ros.core.observation import ContainerInfo, Observation, PrivilegedState
from ladder_ros.core.task import Task

# Motion limits per 5 Hz step. With them a noise-free pick-and-place takes ~25-35 steps, close to
# the 27 steps the privileged verifier needs per subgoal on the WidowX suites (Section 5: the
# periodic interval is set to that median).
MAX_XY_STEP_M = 0.04
MAX_Z_STEP_M = 0.03
MAX_YAW_STEP_RAD = 0.35  # 20 degrees per step: a quarter turn in under 5 steps
TRAVEL_HEIGHT_M = 0.10  # above the table: clears bin walls (<= 0.06 m) with an object in hand
MISSED_GRASP_HEIGHT_M = 0.045  # a premature close this far above the grasp height holds nothing
RELEASE_CLEARANCE_M = 0.02  # the object's underside stops this far above the surface, then drops
TYPICAL_REST_HEIGHT_M = 0.015  # centre height of an object held since before the attempt began
CLOSE_STEPS = 2  # closed and still before lifting; lifting keeps it closed, so a close lasts >= 3 steps
OPEN_STEPS = 2  # open and still, so the object drops clear before the gripper retreats
ARRIVAL_TOLERANCE_M = 0.008  # servo lag accepted on arrival (the target itself must be reached)
MOVE_TIMEOUT_STEPS = 40  # 8 s at 5 Hz: a motion that takes longer is abandoned and the attempt ends
BLOCKED_LAG_M = 0.015  # the gripper trails its target by this much: it is pressing on something
BLOCKED_STEPS = 3  # ... for this many steps in a row
WALLED_CONTAINER_MARGIN_M = 0.045  # a bin: keep the open pads (+-43 mm) off its walls
FLAT_CONTAINER_MARGIN_M = 0.02  # a plate or cloth: the object's centre stays this far inside
SPOT_GRID_M = 0.01  # candidate placement points, 1 cm apart
SEGMENT_HALF_LENGTH_M = 0.045  # about half the length of the longest tabletop objects (carrot, banana)
OBJECT_SEPARATION_M = 0.04  # between two objects' axes: two radii (<= 17 mm) and slack
OPEN_PAD_REACH_M = 0.047  # open pad centre from the grasp axis: 35 mm travel + half an 8 mm pad + slack
PAD_HALF_WIDTH_M = 0.01  # pads are 20 mm wide along the grasp axis
PAD_SEPARATION_M = 0.025  # between an open pad and a neighbour's axis: a radius, half a pad, slack
# A knock starts 7 cm before the placed object and pushes 12 cm past it: off any container here.
KNOCK_LEAD_IN_M = 0.07
KNOCK_FOLLOW_THROUGH_M = 0.12
WANDER_REGION = ((0.18, 0.46), (-0.20, 0.20), (0.05, 0.16))  # inside the tabletop workspace
TAKE_OUT_CLEARANCE_M = 0.06  # a taken-out object lands this far outside the container's footprint
OPEN_BEFORE_DESCENT = 0.95  # the aperture a hand with slow fingers waits for before a grasp descent


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


def _probability(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be a probability in [0, 1], got {value!r}")


def _step_range(name: str, value: tuple[int, int]) -> None:
    ok = (isinstance(value, tuple) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) for v in value) and 1 <= value[0] <= value[1])
    if not ok:
        raise ConfigError(f"{name} must be a pair (low, high) of step counts with 1 <= low <= high, got {value!r}")


@dataclass(frozen=True)
class ExpertNoise:
    """Execution noise and instruction-following failures, as probabilities per attempt.

    All zero (the default, :meth:`off`) gives the noise-free expert that validates layouts.
    """

    missed_grasp: float = 0.0  # closes on air above the object
    early_release: float = 0.0  # opens in transit (also when re-placing on a stale instruction)
    knock_placed: float = 0.0  # sweeps an object resting on a container off it while reaching
    wander: float = 0.0  # moves aimlessly for ``wander_steps`` before the attempt
    destination_confusion: float = 0.0  # compound instruction: heads to another mentioned destination
    # a stale single instruction (its object already rests there): grasp it again and re-place it
    regrasp_done: float = 0.0
    # compound instruction, the attended object already rests where it is headed: take it out onto
    # the table (a completed subgoal undone)
    take_out_placed: float = 0.0
    # compound: per mentioned object beyond the first, the chance that attention spreads over the
    # objects, so the attempt wanders and then closes on air between them
    drift_per_extra_object: float = 0.0
    wander_steps: tuple[int, int] = (6, 18)
    hover_steps: tuple[int, int] = (8, 20)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name.endswith("_steps"):
                _step_range(f.name, getattr(self, f.name))
            else:
                _probability(f.name, getattr(self, f.name))

    @classmethod
    def off(cls) -> "ExpertNoise":
        """No noise: the layout validator."""
        return cls()

    @classmethod
    def bridge_like(cls) -> "ExpertNoise":
        """Noise under which the full-instruction baseline behaves like the paper's Bridge policy.

        Chosen by hand (not fitted) so that, given the task's full instruction, one-subgoal tasks
        succeed in roughly 85 % of episodes and five-subgoal tasks almost never (Section 5.1:
        85.4 % at one subgoal, 26.9 % at two, 0.0 % at five). ``scripts/validate_tabletop_layouts.py
        --noise bridge_like --instruction full`` measures it; with one subgoal instruction at a
        time (``--instruction subgoals``) the same noise leaves long tasks far more reachable than
        the paper's orchestrators found them.
        """
        return cls(missed_grasp=0.4, early_release=0.15, knock_placed=0.1, wander=0.25,
                   destination_confusion=0.25, regrasp_done=0.05, take_out_placed=0.3,
                   drift_per_extra_object=0.15)


def expert_noise(name: str) -> ExpertNoise:
    """A named noise model (``off`` or ``bridge_like``), for command lines and configs."""
    presets = {"off": ExpertNoise.off, "bridge_like": ExpertNoise.bridge_like}
    if name not in presets:
        raise unknown_name("expert noise model", name, list(presets))
    return presets[name]()


@dataclass(frozen=True)
class InstructionReading:
    """What the expert takes from an instruction: objects, destinations and their pairing."""

    objects: tuple[str, ...]  # kinds, in order of mention
    destinations: tuple[str, ...]  # containers it should go to, in order (sources excluded)
    paired: dict = field(default_factory=dict)  # kind -> destination read after (or before) it
    everything: bool = False  # 'everything', 'all the objects' ...

    @property
    def is_single(self) -> bool:
        return len(self.objects) == 1 and len(set(self.destinations)) == 1 and not self.everything


_SOURCE_WORDS = ("from", "off", "out of")
_EVERYTHING = re.compile(r"\b(everything|all (the )?(objects|items|things))\b")


def _phrase_pattern(name: str) -> re.Pattern:
    words = name.lower().replace("_", " ").split()
    return re.compile(r"\b" + r"\s+".join(map(re.escape, words)) + r"(?:e?s)?\b")


def read_instruction(instruction: str, kinds: Iterable[str], containers: Iterable[str]) -> InstructionReading:
    """Find the object kinds and destinations an instruction names, as a language model reads it."""
    text = " ".join(instruction.lower().split())
    mentions: list[tuple[int, int, str, str]] = []  # (start, end, 'object'|'container', name)
    for kind_of, names in (("object", kinds), ("container", containers)):
        for name in sorted(set(names), key=lambda n: -len(n)):
            for m in _phrase_pattern(name).finditer(text):
                if not any(s <= m.start() < e or s < m.end() <= e for s, e, _, _ in mentions):
                    mentions.append((m.start(), m.end(), kind_of, name))
    mentions.sort()
    objects: list[str] = []
    destinations: list[str] = []
    dest_positions: list[tuple[int, str]] = []
    for start, _end, kind_of, name in mentions:
        if kind_of == "object":
            if name not in objects:
                objects.append(name)
            continue
        before = text[:start].rstrip()
        before = re.sub(r"\b(the|a|an)$", "", before).rstrip()
        if any(before.endswith(w) for w in _SOURCE_WORDS):
            continue  # 'from the plate': a source, not a destination
        destinations.append(name)
        dest_positions.append((start, name))
    paired: dict[str, str] = {}
    for start, _end, kind_of, name in mentions:
        if kind_of != "object" or name in paired:
            continue
        after = [d for pos, d in dest_positions if pos > start]
        before = [d for pos, d in dest_positions if pos < start]
        if after:
            paired[name] = after[0]
        elif before:
            paired[name] = before[-1]
    return InstructionReading(objects=tuple(objects), destinations=tuple(destinations), paired=paired,
                              everything=bool(_EVERYTHING.search(text)))


def _yaw_of(quaternion: np.ndarray) -> float:
    w, x, y, z = (float(v) for v in quaternion)
    return math.atan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z))


def _wrap_half(angle: float) -> float:
    """An axis direction's angle in [-pi/2, pi/2): a segment looks the same turned by pi."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


def _target_of(obs: Observation) -> np.ndarray:
    """The controller target (deltas add to it); the measured pose where a robot reports none."""
    return obs.target_position if obs.target_position is not None else obs.ee_position


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


Plan = Generator[np.ndarray, Observation, None]


@dataclass(frozen=True)
class _AttemptDraws:
    """The random choices of one attempt (drawn together when it starts)."""

    compound: bool
    wander: bool
    wander_steps: int
    knock: bool
    knock_pick: float
    missed: bool
    release_at: float | None  # fraction of the transit after which the gripper opens, or None
    retake: bool  # an object already where it is headed: take it again (else hover)
    hover_steps: int
    take_out_turn: float  # radians: where beside the container a taken-out object goes


class ScriptedExpert:
    """Pick-and-place from privileged state, with seeded noise; see the module docstring.

    ``table_z`` is the table top's height in the base frame (0 on the built-in tabletop); the
    expert uses it to tell how high an object stands above what it rests on. ``embodiment`` (a
    preset name) chooses its steering (:class:`ExpertSteering`): the WidowX stand-in at 5 Hz or the
    Franka Hand at 15 Hz; ``steering`` replaces it (e.g. :func:`with_finger_stroke` for a slow hand).
    """

    name = "scripted_expert"

    def __init__(self, task: Task, seed: int = 0, noise: ExpertNoise | None = None, *, table_z: float = 0.0,
                 action_convention: ActionConvention | None = None, embodiment: str = "widowx",
                 steering: ExpertSteering | None = None):
        if not isinstance(task, Task):
            raise ConfigError(f"task must be a Task, got {type(task).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ConfigError(f"seed must be an integer, got {seed!r}")
        noise = ExpertNoise() if noise is None else noise
        if not isinstance(noise, ExpertNoise):
            raise ConfigError(f"noise must be an ExpertNoise, got {type(noise).__name__}")
        if not math.isfinite(table_z):
            raise ConfigError(f"table_z must be finite, got {table_z!r}")
        if action_convention is not None and not isinstance(action_convention, ActionConvention):
            raise ConfigError(f"action_convention must be an ActionConvention, got {type(action_convention).__name__}")
        self.task = task
        self.seed = int(seed)
        self.noise = noise
        if steering is not None and not isinstance(steering, ExpertSteering):
            raise ConfigError(f"steering must be an ExpertSteering, got {type(steering).__name__}")
        self.steering = expert_steering(embodiment) if steering is None else steering
        # The expert plans in the action contract (Euler XYZ); in another convention it gives the
        # same motions in that convention's numbers, which the loop converts back: a test of each
        # conversion end to end.
        self.action_convention = action_convention if action_convention is not None else CANONICAL
        self.table_z = float(table_z)
        self._rng = np.random.default_rng(self.seed)
        self._instruction: str | None = None
        self._reading: InstructionReading | None = None
        self._plan: Plan | None = None
        self.attempts = 0  # attempts started since construction (for tests and logs)
        self.last_attempt = ""  # what the current attempt does, for logs

    # -- LowLevelPolicy ---------------------------------------------------------------

    def reset(self, instruction: str) -> None:
        """Drop the current attempt; the next ``act`` starts a new one for ``instruction``."""
        if not isinstance(instruction, str) or not instruction.strip():
            raise InvalidInputError(f"instruction must be a non-empty string, got {instruction!r}")
        self._instruction = instruction
        self._reading = None
        self._plan = None

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """The next 7-D action in ``action_convention`` (by default the contract: translation delta,
        Euler XYZ delta, gripper +1 open / -1 closed)."""
        return self.action_convention.from_canonical(self._act(observation, instruction))

    def _act(self, observation: Observation, instruction: str) -> np.ndarray:
        if observation.privileged is None:
            raise InvalidInputError(
                "ScriptedExpert reads the simulator's privileged state (object poses), but the observation "
                "has privileged=None: it is a simulator test instrument, not a robot policy")
        if instruction != self._instruction:
            self.reset(instruction)
        if self._reading is None:
            self._reading = self._read(instruction, observation.privileged)
        for _ in range(4):  # a plan may end at once (nothing to do); start the next one
            if self._plan is None:
                self._plan = self._next_attempt(observation)
                self.attempts += 1
                try:
                    return next(self._plan)
                except StopIteration:
                    self._plan = None
                    continue
            try:
                return self._plan.send(observation)
            except StopIteration:
                self._plan = None
        return self._hold(observation, gripper_open=True)

    # -- choosing what to do -----------------------------------------------------------

    def _read(self, instruction: str, priv: PrivilegedState) -> InstructionReading:
        for sg in self.task.subgoals:
            if instruction.strip() == sg.text.strip():
                return InstructionReading(objects=(sg.object,), destinations=(sg.destination,),
                                          paired={sg.object: sg.destination})
        kinds = {s.object for s in self.task.subgoals} | set(self.task.distractors)
        kinds |= {pose.kind for pose in priv.objects.values()}
        containers = {s.destination for s in self.task.subgoals} | set(priv.containers)
        return read_instruction(instruction, kinds, containers)

    def _next_attempt(self, obs: Observation) -> Plan:
        reading = self._reading
        assert reading is not None
        priv = obs.privileged
        assert priv is not None
        if (not reading.objects and not reading.everything) or not reading.destinations:
            self.last_attempt = "wander (no object or destination understood)"
            return self._wander(obs, self._draw_steps(self.noise.wander_steps))
        if reading.is_single:
            kind, destination = reading.objects[0], reading.destinations[0]
            extra_objects = 0
        else:
            if reading.everything:
                candidates = sorted({p.kind for p in priv.objects.values()})
            else:
                candidates = list(reading.objects)
            kind = candidates[int(self._rng.integers(len(candidates)))]
            destination = reading.paired.get(kind, reading.destinations[0])
            if self._rng.random() < self.noise.destination_confusion:
                options = sorted(set(reading.destinations))
                destination = options[int(self._rng.integers(len(options)))]
            extra_objects = len(candidates) - 1
        # Every random choice of the attempt, drawn now in a fixed order.
        n = self.noise
        diluted = self._rng.random() < 1 - (1 - n.drift_per_extra_object) ** extra_objects
        draws = _AttemptDraws(
            compound=not reading.is_single,
            wander=(self._rng.random() < n.wander) or diluted,
            wander_steps=self._draw_steps(n.wander_steps),
            knock=self._rng.random() < n.knock_placed,
            knock_pick=float(self._rng.random()),
            missed=(self._rng.random() < n.missed_grasp) or diluted,
            release_at=float(self._rng.uniform(0.25, 0.75)) if self._rng.random() < n.early_release else None,
            retake=self._rng.random() < (n.take_out_placed if not reading.is_single else n.regrasp_done),
            hover_steps=self._draw_steps(n.hover_steps),
            take_out_turn=float(self._rng.uniform(-1.0, 1.0)),
        )
        return self._attempt(obs, kind, destination, draws)

    def _draw_steps(self, bounds: tuple[int, int]) -> int:
        """A duration drawn in 0.2 s steps, in this rate's control steps."""
        return int(self._rng.integers(bounds[0], bounds[1] + 1)) * self.steering.time_scale

    def _attempt(self, obs: Observation, kind: str, destination: str, draws: "_AttemptDraws") -> Plan:
        if draws.wander:
            obs = yield from self._wander(obs, draws.wander_steps)
        if destination not in obs.privileged.containers:
            self.last_attempt = f"hover (no {destination} in the scene)"
            yield from self._hover(obs, draws.hover_steps)
            return
        target = self._target_instance(obs, kind, destination, draws)
        if target is None:
            self.last_attempt = f"hover ({kind} already on the {destination})"
            yield from self._hover(obs, draws.hover_steps)
            return
        if draws.knock:  # a clumsy reach on the way sweeps another placed object off its container
            victim = self._knock_victim(obs.privileged, draws.knock_pick, spare=target[0])
            if victim is not None:
                obs = yield from self._knock(obs, victim)
                target = self._target_instance(obs, kind, destination, draws)
                if target is None:
                    return
        instance, table_spot, verb = target
        self.last_attempt = (f"{verb} {instance} -> {destination if table_spot is None else 'table'}"
                             f"{' (missed grasp)' if draws.missed else ''}"
                             f"{' (early release)' if draws.release_at is not None else ''}")
        yield from self._pick_and_place(obs, instance, destination, missed=draws.missed,
                                        release_at=draws.release_at, table_spot=table_spot)

    def _target_instance(self, obs: Observation, kind: str, destination: str,
                         draws: "_AttemptDraws") -> tuple[str, np.ndarray | None, str] | None:
        """What the attempt moves, where to (None: the destination), and how to call it; None: hover."""
        priv = obs.privileged
        instance = self._choose_instance(priv, kind, destination, obs.ee_position)
        if instance is not None:
            return instance, None, "pick"
        placed = self._on_container(priv, kind, destination)  # a stale goal, or a revisit
        if not placed or not draws.retake:
            return None
        instance = min(placed, key=lambda n: float(np.linalg.norm(priv.objects[n].position[:2] - obs.ee_position[:2])))
        if draws.compound:  # it sees the goal done and moves the object on: takes it out again
            return instance, self._beside(priv.containers[destination], draws.take_out_turn), "take out"
        return instance, None, "re-place"

    # -- scene reading -----------------------------------------------------------------

    @staticmethod
    def _normalised_distance(pos: np.ndarray, c: ContainerInfo) -> float:
        d = (pos[:2] - c.position[:2]) / np.maximum(c.half_extents[:2], 1e-6)
        return float(np.hypot(d[0], d[1]))

    def _on_container(self, priv: PrivilegedState, kind: str, container: str) -> list[str]:
        """Instances of ``kind`` resting on ``container``: the simulator's count, nearest the centre."""
        n = priv.goal.count(kind, container)
        if n <= 0 or container not in priv.containers:
            return []
        c = priv.containers[container]
        names = [name for name, pose in priv.objects.items() if pose.kind == kind and name not in priv.grasped]
        names.sort(key=lambda name: (self._normalised_distance(priv.objects[name].position, c), name))
        return names[:n]

    def _choose_instance(self, priv: PrivilegedState, kind: str, destination: str,
                         ee: np.ndarray) -> str | None:
        """One instance of ``kind`` not resting on ``destination`` (a held one first), nearest the gripper."""
        done = set(self._on_container(priv, kind, destination))
        candidates = [name for name, pose in priv.objects.items()
                      if pose.kind == kind and name not in done and pose.position[2] > self.table_z - 0.05]
        if not candidates:
            return None
        held = [n for n in candidates if n in priv.grasped]
        if held:
            return held[0]
        return min(candidates, key=lambda n: (float(np.linalg.norm(priv.objects[n].position[:2] - ee[:2])), n))

    def _support_z(self, priv: PrivilegedState, instance: str) -> float:
        kind = priv.objects[instance].kind
        for name in priv.containers:
            if instance in self._on_container(priv, kind, name):
                return float(priv.containers[name].surface_z)
        return self.table_z

    def _knock_victim(self, priv: PrivilegedState, pick: float, spare: str) -> tuple[str, str] | None:
        """An object resting on a container, other than ``spare`` (``pick`` in [0, 1) chooses)."""
        placed = []
        for (kind, container), n in sorted(priv.goal.resting.items()):
            if n > 0 and container in priv.containers:
                placed += [(name, container) for name in self._on_container(priv, kind, container)
                           if name != spare]
        if not placed:
            return None
        return placed[min(int(pick * len(placed)), len(placed) - 1)]

    def _beside(self, c: ContainerInfo, turn: float) -> np.ndarray:
        """A point on the table just outside ``c``, on the side facing the middle of the workspace."""
        (x_lo, x_hi), (y_lo, y_hi), _ = self.steering.wander_region
        middle = np.array([(x_lo + x_hi) / 2, (y_lo + y_hi) / 2])
        away = middle - c.position[:2]
        angle = math.atan2(away[1], away[0]) + turn
        point = c.position[:2] + (max(c.half_extents[:2]) + TAKE_OUT_CLEARANCE_M) * np.array(
            [math.cos(angle), math.sin(angle)])
        return np.clip(point, [x_lo, y_lo], [x_hi, y_hi])

    def _free_spot(self, priv: PrivilegedState, destination: str, holding: str) -> tuple[np.ndarray, float]:
        """Where on the container, and turned by how much, the held object lands clear of the rest.

        The expert knows poses, not shapes, so every object counts as a segment of
        ``SEGMENT_HALF_LENGTH_M`` along its own x axis (the long side of elongated objects), and
        the pads, which open across the held object's axis, count too. Turning the held object
        parallel or across a neighbour lets elongated objects lie side by side or end to end, and
        keeps a release from pushing a neighbour away. Returns the point and the yaw change.
        """
        c = priv.containers[destination]
        walled = c.half_extents[2] * 2 > c.surface_z + 0.01
        margin = self.steering.walled_container_margin_m if walled else FLAT_CONTAINER_MARGIN_M
        ax = max(float(c.half_extents[0]) - margin, 0.0)
        ay = max(float(c.half_extents[1]) - margin, 0.0)
        xs = np.arange(-ax, ax + 1e-9, SPOT_GRID_M) if ax > 0 else np.zeros(1)
        ys = np.arange(-ay, ay + 1e-9, SPOT_GRID_M) if ay > 0 else np.zeros(1)
        gx, gy = np.meshgrid(xs, ys, indexing="ij")
        offsets = np.stack([gx.ravel(), gy.ravel()], axis=1)
        inside = (offsets[:, 0] / max(ax, 1e-6)) ** 2 + (offsets[:, 1] / max(ay, 1e-6)) ** 2 <= 1.0 + 1e-9
        offsets = offsets[inside] if inside.any() else np.zeros((1, 2))
        points = c.position[:2] + offsets
        centre_distance = np.linalg.norm(offsets, axis=1)
        near = [p for n, p in sorted(priv.objects.items())
                if n != holding and n not in priv.grasped
                and abs(p.position[0] - c.position[0]) < c.half_extents[0] + 0.08
                and abs(p.position[1] - c.position[1]) < c.half_extents[1] + 0.08]
        if not near:
            return points[int(np.argmin(centre_distance))], 0.0
        ts = np.linspace(-SEGMENT_HALF_LENGTH_M, SEGMENT_HALF_LENGTH_M, 7)
        others = np.concatenate([p.position[:2] + ts[:, None] * self._axis(_yaw_of(p.quaternion)) for p in near])
        held_yaw = _yaw_of(priv.objects[holding].quaternion)
        turns = [0.0]
        for p in near:
            for extra in (0.0, math.pi / 2):
                turn = _wrap_half(_yaw_of(p.quaternion) + extra - held_yaw)
                if all(abs(turn - t) > 0.05 for t in turns):
                    turns.append(turn)
        best: tuple | None = None
        for turn in turns:
            along = self._axis(held_yaw + turn)
            across = np.array([-along[1], along[0]])
            body = ts[:, None] * along
            steer = self.steering
            pads = np.array([side * steer.open_pad_reach_m * across + w * along
                             for side in (-1.0, 1.0) for w in (-steer.pad_half_width_m, 0.0, steer.pad_half_width_m)])
            score = np.minimum(self._clearance(points, body, others) - OBJECT_SEPARATION_M,
                               self._clearance(points, pads, others) - steer.pad_separation_m)
            score = np.round(np.minimum(score, 0.0), 4)  # clear enough everywhere: the centre is best
            k = int(np.lexsort((centre_distance, -score))[0])
            key = (-score[k], abs(turn) > 0, centre_distance[k])
            if best is None or key < best[0]:
                best = (key, points[k], turn)
        return best[1], best[2]

    @staticmethod
    def _clearance(points: np.ndarray, shape: np.ndarray, others: np.ndarray) -> np.ndarray:
        """Smallest distance from ``shape`` placed at each point to any of ``others``."""
        placed = points[:, None, :] + shape[None, :, :]
        return np.linalg.norm(placed[:, :, None, :] - others[None, None, :, :], axis=3).min(axis=(1, 2))

    @staticmethod
    def _axis(yaw: float) -> np.ndarray:
        return np.array([math.cos(yaw), math.sin(yaw)])

    # -- motions -------------------------------------------------------------------------

    @staticmethod
    def _hold(obs: Observation, gripper_open: bool) -> np.ndarray:
        return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0 if gripper_open else -1.0])

    def _action(self, obs: Observation, goal: np.ndarray, gripper_open: bool, yaw: float | None) -> np.ndarray:
        delta = np.asarray(goal, dtype=np.float64) - _target_of(obs)
        xy = np.linalg.norm(delta[:2])
        steer = self.steering
        if xy > steer.max_xy_step_m:
            delta[:2] *= steer.max_xy_step_m / xy
        delta[2] = float(np.clip(delta[2], -steer.max_z_step_m, steer.max_z_step_m))
        roll, pitch, current_yaw = (float(v) for v in obs.ee_euler)
        turn = steer.max_yaw_step_rad
        dyaw = 0.0 if yaw is None else float(np.clip(_wrap(yaw - current_yaw), -turn, turn))
        return np.array([delta[0], delta[1], delta[2], -roll, -pitch, dyaw, 1.0 if gripper_open else -1.0])

    def _move(self, obs: Observation, goal_of, gripper_open: bool, yaw_of=None,
              timeout: int | None = None) -> Generator[np.ndarray, Observation, tuple[Observation, bool]]:
        """Servo the target to ``goal_of(obs)`` (re-read every step); True on arrival.

        A goal outside the workspace is reached when the controller stops moving the target
        towards it (the target is clipped to the workspace bounds).
        """
        previous_target: np.ndarray | None = None
        blocked = 0
        for _ in range(self.steering.move_timeout_steps if timeout is None else timeout):
            goal = goal_of(obs)
            if goal is None:
                return obs, False
            yaw = yaw_of(obs) if yaw_of is not None else None
            target = _target_of(obs)
            clipped = previous_target is not None and np.linalg.norm(target - previous_target) < 2e-4
            aligned = yaw is None or abs(_wrap(yaw - float(obs.ee_euler[2]))) < 0.1
            lag = float(np.linalg.norm(target - obs.ee_position))
            if aligned and lag < ARRIVAL_TOLERANCE_M and (np.linalg.norm(goal - target) < 0.002 or clipped):
                return obs, True
            blocked = blocked + 1 if lag > BLOCKED_LAG_M else 0
            if blocked >= self.steering.blocked_steps:
                return obs, False  # something is in the way (a rim, a wall, another object)
            previous_target = target.copy()
            obs = yield self._action(obs, goal, gripper_open, yaw)
        return obs, False

    def _hold_for(self, obs: Observation, steps: int, gripper_open: bool) -> Generator:
        for _ in range(steps):
            obs = yield self._hold(obs, gripper_open)
        return obs

    def _open_before_descent(self, obs: Observation) -> Generator:
        """A hand that moves its fingers at a set speed may still be half shut from a missed grasp:
        hold open until it is open before going down around an object (at most one stroke's time)."""
        for _ in range(self.steering.open_wait_steps):
            if obs.aperture >= OPEN_BEFORE_DESCENT:
                break
            obs = yield self._hold(obs, gripper_open=True)
        return obs

    def _hover(self, obs: Observation, steps: int) -> Generator:
        return (yield from self._hold_for(obs, steps, gripper_open=True))

    def _rise(self, obs: Observation, gripper_open: bool) -> Generator:
        """Straight up to travel height when low, so reaching never drags through objects."""
        travel = self.table_z + self.steering.travel_height_m
        if obs.ee_position[2] < travel - 0.02:
            here = _target_of(obs)
            above = np.array([here[0], here[1], travel])
            obs, _ = yield from self._move(obs, lambda o: above, gripper_open)
        return obs

    def _grasp_yaw(self, obs: Observation, instance: str) -> float | None:
        pose = obs.privileged.objects.get(instance)
        if pose is None:
            return None
        yaw = _yaw_of(pose.quaternion)  # fingers close across the object's x axis (its long side)
        current = float(obs.ee_euler[2])
        options = [yaw + k * math.pi for k in (-2, -1, 0, 1, 2) if abs(yaw + k * math.pi) < math.pi - 0.2]
        return min(options, key=lambda a: abs(a - current)) if options else _wrap(yaw)

    def _pick_and_place(self, obs: Observation, instance: str, destination: str, *,
                        missed: bool, release_at: float | None, table_spot: np.ndarray | None = None) -> Generator:
        """Pick ``instance`` and put it on ``destination`` (or on the table at ``table_spot``)."""
        travel = self.table_z + self.steering.travel_height_m
        already_held = instance in obs.privileged.grasped
        if not already_held:
            start_z = float(obs.privileged.objects[instance].position[2])
            rest_height = max(start_z - self._support_z(obs.privileged, instance), 0.005)
            obs = yield from self._rise(obs, gripper_open=True)

            def above(o: Observation):
                pose = o.privileged.objects.get(instance)
                return None if pose is None else np.array([pose.position[0], pose.position[1], travel])

            def yaw_of(o: Observation) -> float | None:
                return self._grasp_yaw(o, instance)

            obs, ok = yield from self._move(obs, above, True, yaw_of)
            if not ok:
                return
            obs = yield from self._open_before_descent(obs)

            def grasp_point(o: Observation):
                pose = o.privileged.objects.get(instance)
                if pose is None:
                    return None
                z = float(pose.position[2]) + (MISSED_GRASP_HEIGHT_M if missed else 0.0)
                return np.array([pose.position[0], pose.position[1], z])

            obs, ok = yield from self._move(obs, grasp_point, True, yaw_of)
            if not ok:
                return
            obs = yield from self._hold_for(obs, self.steering.close_steps, gripper_open=False)
            lift = _target_of(obs).copy()
            lift[2] = travel
            obs, _ = yield from self._move(obs, lambda o: lift, False)
            if instance not in obs.privileged.grasped:
                return  # missed: the next attempt opens the gripper and tries again
        else:
            rest_height = TYPICAL_REST_HEIGHT_M
        hang = float(obs.privileged.objects[instance].position[2] - obs.ee_position[2])
        if table_spot is None:
            spot, turn = self._free_spot(obs.privileged, destination, instance)
            surface_z = float(obs.privileged.containers[destination].surface_z)
        else:
            spot, turn, surface_z = table_spot, 0.0, self.table_z
        place_yaw = float(obs.ee_euler[2]) + turn
        if abs(place_yaw) > math.pi - 0.2:
            place_yaw = _wrap(place_yaw + math.pi)  # the same placement, with the wrist in range
        over = np.array([spot[0], spot[1], travel])
        begin = obs.ee_position[:2].copy()
        path = float(np.linalg.norm(over[:2] - begin))
        for _ in range(self.steering.move_timeout_steps):
            if instance not in obs.privileged.grasped:
                return  # dropped in transit
            if (np.linalg.norm(over - _target_of(obs)) < 0.002
                    and np.linalg.norm(over - obs.ee_position) < ARRIVAL_TOLERANCE_M
                    and abs(_wrap(place_yaw - float(obs.ee_euler[2]))) < 0.1):
                break
            if release_at is not None and path > 0 and \
                    np.linalg.norm(obs.ee_position[:2] - begin) >= release_at * path:
                obs = yield from self._hold_for(obs, self.steering.open_steps, gripper_open=True)
                return  # early release: the object falls wherever it is
            obs = yield self._action(obs, over, False, place_yaw)
        else:
            return
        release_z = surface_z + rest_height + RELEASE_CLEARANCE_M - hang
        obs, _ = yield from self._move(obs, lambda o: np.array([spot[0], spot[1], release_z]), False,
                                       lambda o: place_yaw)
        obs = yield from self._hold_for(obs, self.steering.open_steps, gripper_open=True)
        yield from self._move(obs, lambda o: np.array([spot[0], spot[1], travel]), True)

    def _knock(self, obs: Observation, victim: tuple[str, str]) -> Generator:
        """Reach low past a placed object and sweep it off its container (a clumsy reach)."""
        name, container = victim
        priv = obs.privileged
        pos = priv.objects[name].position
        centre = priv.containers[container].position
        direction = pos[:2] - centre[:2]
        norm = float(np.linalg.norm(direction))
        direction = direction / norm if norm > 1e-3 else np.array([1.0, 0.0])
        yaw = _wrap(math.atan2(direction[1], direction[0]) - math.pi / 2)  # a pad leads the sweep
        if abs(yaw) > math.pi / 2:
            yaw = _wrap(yaw + math.pi)
        travel = self.table_z + self.steering.travel_height_m
        low = float(pos[2]) + 0.005
        start = pos[:2] - KNOCK_LEAD_IN_M * direction
        end = pos[:2] + KNOCK_FOLLOW_THROUGH_M * direction
        self.last_attempt = f"knock {name} off the {container}"
        obs = yield from self._rise(obs, gripper_open=True)
        obs, ok = yield from self._move(obs, lambda o: np.array([start[0], start[1], travel]), True, lambda o: yaw)
        if not ok:
            return obs
        obs, _ = yield from self._move(obs, lambda o: np.array([start[0], start[1], low]), True, lambda o: yaw)
        obs, _ = yield from self._move(obs, lambda o: np.array([end[0], end[1], low]), True, lambda o: yaw)
        obs, _ = yield from self._move(obs, lambda o: np.array([end[0], end[1], travel]), True)
        return obs

    def _wander(self, obs: Observation, steps: int) -> Generator:
        """Aimless reaching: random waypoints for ``steps`` steps, gripper open."""
        (x_lo, x_hi), (y_lo, y_hi), (z_lo, z_hi) = self.steering.wander_region
        remaining = steps
        while remaining > 0:
            goal = np.array([self._rng.uniform(x_lo, x_hi), self._rng.uniform(y_lo, y_hi),
                             self.table_z + self._rng.uniform(z_lo, z_hi)])
            for _ in range(min(remaining, 6 * self.steering.time_scale)):  # a new waypoint every 1.2 s
                obs = yield self._action(obs, goal, True, None)
                remaining -= 1
        return obs
