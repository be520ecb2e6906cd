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

The expert is built from the modules beside this one: ``steering`` (speeds and gripper geometry per
embodiment), ``noise`` (the seeded failure rates), ``instructions`` (reading an instruction),
``scene`` (what rests where), ``placement`` (where an object goes) and ``motions`` (the arm motions
an attempt strings together). This module chooses what each attempt does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generator

import numpy as np

from ladder_ros.core.action_conventions import CANONICAL, ActionConvention
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.observation import Observation, PrivilegedState
from ladder_ros.core.task import Task
from ladder_ros.instruments.expert.instructions import InstructionReading, read_instruction
from ladder_ros.instruments.expert.motions import ArmMotions
from ladder_ros.instruments.expert.noise import ExpertNoise
from ladder_ros.instruments.expert.placement import beside
from ladder_ros.instruments.expert.scene import instance_to_pick, knock_victim, resting_on
from ladder_ros.instruments.expert.steering import ExpertSteering, expert_steering
from ladder_ros.policies.base import LowLevelPolicy

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


class ScriptedExpert(LowLevelPolicy):
    """Pick-and-place from privileged state, with seeded noise; see the module docstring.

    ``table_z`` is the table top's height in the base frame (0 on the built-in tabletop); the
    expert uses it to tell how high an object stands above what it rests on. ``embodiment`` (a
    preset name) chooses its steering (:class:`ExpertSteering`): the WidowX stand-in at 5 Hz or the
    Franka Hand at 15 Hz; ``steering`` replaces it (e.g. ``steering.with_finger_stroke`` for a slow hand).
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
        self._motions = ArmMotions(self.steering, self.table_z, self._rng)
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
        self._motions.forget_fumbles()

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
        return self._motions.hold(observation, gripper_open=True)

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
            return self._motions.wander(obs, self._draw_steps(self.noise.wander_steps))
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
            obs = yield from self._motions.wander(obs, draws.wander_steps)
        if obs.privileged.destination(destination) is None:
            self.last_attempt = f"hover (no {destination} in the scene)"
            yield from self._motions.hover(obs, draws.hover_steps)
            return
        target = self._target_instance(obs, kind, destination, draws)
        if target is None:
            self.last_attempt = f"hover ({kind} already on the {destination})"
            yield from self._motions.hover(obs, draws.hover_steps)
            return
        if draws.knock:  # a clumsy reach on the way sweeps another placed object off its container
            victim = knock_victim(obs.privileged, draws.knock_pick, spare=target[0])
            if victim is not None:
                self.last_attempt = f"knock {victim[0]} off the {victim[1]}"
                obs = yield from self._motions.knock(obs, victim)
                target = self._target_instance(obs, kind, destination, draws)
                if target is None:
                    return
        instance, table_spot, verb = target
        self.last_attempt = (f"{verb} {instance} -> {destination if table_spot is None else 'table'}"
                             f"{' (missed grasp)' if draws.missed else ''}"
                             f"{' (early release)' if draws.release_at is not None else ''}")
        yield from self._motions.pick_and_place(obs, instance, destination, missed=draws.missed,
                                                release_at=draws.release_at, table_spot=table_spot)

    def _target_instance(self, obs: Observation, kind: str, destination: str,
                         draws: "_AttemptDraws") -> tuple[str, np.ndarray | None, str] | None:
        """What the attempt moves, where to (None: the destination), and how to call it; None: hover."""
        priv = obs.privileged
        instance = instance_to_pick(priv, kind, destination, obs.ee_position, self.table_z)
        if instance is not None:
            return instance, None, "pick"
        placed = resting_on(priv, kind, destination)  # a stale goal, or a revisit
        if not placed or not draws.retake:
            return None
        instance = min(placed, key=lambda n: float(np.linalg.norm(priv.objects[n].position[:2] - obs.ee_position[:2])))
        if draws.compound:  # it sees the goal done and moves the object on: takes it out again
            return instance, beside(priv.containers[destination], draws.take_out_turn, self.steering), "take out"
        return instance, None, "re-place"
