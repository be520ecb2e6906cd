"""The scripted expert answering as a chunking policy: what the rehearsal's policy server computes per request.

A learned Bridge policy gets one observation and returns a chunk of ``length`` actions, of which the
policy node executes the first ``execute`` open loop under the synchronous rule (Appendix A: 4 of 5 on
the WidowX), or, in realtime mode, those whose time comes before the next chunk takes over. The
scripted expert (:mod:`ladder_ros.instruments.expert.scripted`) acts one step at a time from the
simulator's privileged state; :class:`ExpertChunker` turns it into such a policy: from the request's
observation it asks the expert for ``length`` actions, each time feeding it the observation it would
see if the previous action had been carried out exactly (:func:`predict`: the target moves by the
delta, the hand is where the target is, the fingers move at the hand's speed, an object between
closing pads is held and moves with the hand, opening drops it). A hand whose fingers take
``finger_stroke_s`` to close (the WidowX's PWM gripper) is waited for as a policy trained on it waits:
closed and still for a stroke before lifting, open before going down
(:func:`~.scripted_expert.with_finger_stroke`).

The expert keeps its state across chunks, as across steps in simulation, and that state counts control
steps (a stroke's wait, a hover): it must have gone through exactly the steps the arm went through.
Each request says how many commands of the previous chunk were handed out before it (``ran``); the
expert keeps the observations it was fed for those and forgets the rest of its look-ahead, by stepping
a fresh expert (same task, seed and noise) through everything that ran when the look-ahead went
further (the expert's generators cannot be copied; a step costs about 50 us). A chunk that went
differently from the prediction is corrected by the next request's observation: the open-loop
staleness a real chunking policy has.

Answers are in the configured policy's own action convention (rotation and gripper), so the policy
node converts them back exactly as it converts a learned model's. :func:`observation_from_request`
reads back what the policy node sent (the state vector by the config's layout) and adds the twin's
privileged state, which only the expert may read.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from ladder_ros.core.action_conventions import ActionConvention
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.observation import ObjectPose, Observation, PrivilegedState
from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_euler_xyz, sxyz_to_matrix
from ladder_ros.core.task import Task
from ladder_ros.policies.config import EE_DELTA, PolicyConfig
from ladder_ros.instruments.expert.noise import ExpertNoise
from ladder_ros.instruments.expert.scripted import ScriptedExpert
from ladder_ros.instruments.expert.steering import expert_steering, stroke_steps, with_finger_stroke
from ladder_ros.policies.state import BASE, SXYZ, TOP_DOWN, top_down_pose

# An object is between the pads when its centre is this close to the tool centre (horizontally, vertically):
# the pads reach 35 mm out and are 30 mm tall around it (the tabletop's WidowX gripper stand-in).
GRASP_REACH_XY_M = 0.02
GRASP_REACH_Z_M = 0.02


def hold_action(gripper_open: bool) -> np.ndarray:
    """No motion, the gripper open or closed (the action contract: +1 open, -1 closed)."""
    return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0 if gripper_open else -1.0])


def predict(observation: Observation, action: np.ndarray, aperture_step: float = 1.0) -> Observation:
    """The observation after ``action`` (the contract's: metres, Euler XYZ, +1 open), if carried out exactly;
    the fingers move ``aperture_step`` of their travel per step (1: at once) towards the command."""
    a = np.asarray(action, dtype=np.float64)
    before = observation.target_position if observation.target_position is not None else observation.ee_position
    target = np.asarray(before, dtype=np.float64) + a[:3]
    moved = target - observation.ee_position
    euler = matrix_to_euler_xyz(euler_xyz_to_matrix(a[3:6]) @ euler_xyz_to_matrix(observation.ee_euler))
    gripper_open = a[6] > 0.0
    privileged = observation.privileged
    if privileged is not None:
        objects = dict(privileged.objects)
        grasped = set(privileged.grasped)
        for name in grasped:
            pose = objects[name]
            objects[name] = ObjectPose(pose.kind, pose.position + moved, pose.quaternion)
        if gripper_open:
            grasped.clear()  # released: it stays where it was let go (it falls in the scene)
        else:
            for name, pose in objects.items():
                offset = pose.position - target
                if np.hypot(offset[0], offset[1]) <= GRASP_REACH_XY_M and abs(offset[2]) <= GRASP_REACH_Z_M:
                    grasped.add(name)
        privileged = replace(privileged, objects=objects, grasped=tuple(sorted(grasped)))
    step = aperture_step if gripper_open else -aperture_step
    aperture = min(1.0, max(0.0, float(observation.aperture) + step))
    return replace(observation, step=observation.step + 1, ee_position=target, ee_euler=euler,
                   target_position=target, aperture=aperture, privileged=privileged)


class ExpertChunker:
    """Chunks of the scripted expert for one episode, in ``config``'s action convention (module docstring)."""

    def __init__(self, task: Task, seed: int, noise: ExpertNoise, config: PolicyConfig, finger_stroke_s: float = 0.0):
        if config.action.kind != EE_DELTA or config.action.dim != 7:
            raise ConfigError(f"the rehearsal's expert answers 7-D end-effector deltas; policy {config.name} acts in "
                              f"{config.action.kind} ({config.action.dim} axes)")
        steering = with_finger_stroke(expert_steering(config.embodiment), finger_stroke_s, config.period_s)
        self.aperture_step = 1.0 / max(1, stroke_steps(finger_stroke_s, config.period_s))
        self._new_expert = lambda: ScriptedExpert(task, seed, noise, embodiment=config.embodiment,
                                                  steering=steering)
        self.expert = self._new_expert()
        self.convention = ActionConvention.parse(config.action.rotation, config.action.gripper)
        self.length, self.execute = config.chunk_length, config.execute_steps
        self.chunks = 0
        self.replays = 0  # look-aheads forgotten by stepping a fresh expert through what ran
        self._ran: list[tuple[Observation, str]] = []  # what the expert was fed for the commands that ran
        self._ahead: list[tuple[Observation, str]] = []  # what it was fed for the last chunk

    def chunk(self, observation: Observation, instruction: str, ran: int | None = None) -> np.ndarray:
        """``length`` actions (float32) of the expert's from ``observation``; ``ran``: how many of the previous
        chunk's commands were handed out before it (None: ``execute``, the synchronous rule)."""
        ran = min(self.execute if ran is None else max(0, int(ran)), len(self._ahead))
        self._ran += self._ahead[:ran]
        if ran < len(self._ahead):
            self.expert = self._new_expert()
            for fed, text in self._ran:
                self.expert.act(fed, text)
            self.replays += 1
        self._ahead = []
        actions, obs = [], observation
        for _ in range(self.length):
            action = self.expert.act(obs, instruction)
            self._ahead.append((obs, instruction))
            actions.append(action)
            obs = predict(obs, action, self.aperture_step)
        self.chunks += 1
        return np.array([self.convention.from_canonical(a) for a in actions], dtype=np.float32)


def hold_chunk(config: PolicyConfig, gripper_open: bool = True) -> np.ndarray:
    """A chunk of holds in ``config``'s convention (the warm-up's answer, or nothing to act on yet)."""
    convention = ActionConvention.parse(config.action.rotation, config.action.gripper)
    return np.array([convention.from_canonical(hold_action(gripper_open))] * config.chunk_length, dtype=np.float32)


def aperture_of(state: Mapping[str, np.ndarray]) -> float:
    """The gripper's aperture (0 closed, 1 open) in a request's state read by source; open when it has none."""
    if "gripper_open" in state:
        return float(state["gripper_open"][0])
    if "gripper_closed" in state:
        return 1.0 - float(state["gripper_closed"][0])
    return 1.0


def observation_from_request(request: Mapping[str, Any], config: PolicyConfig, privileged: PrivilegedState | None,
                             target_position: np.ndarray | None,
                             target_euler: np.ndarray | None = None) -> Observation:
    """The :class:`Observation` behind an openpi request, read by the config's state layout, plus the privileged state.

    Only the pose and the gripper are read back (the expert needs nothing else); ``target_position`` is
    where the arm's commanded target is (the twin's motors' goals), the position the deltas add to, and
    ``target_euler`` (when known) its orientation relative to the top-down pose, which the rotation deltas
    turn: given, it is the orientation the expert steers from, as the driver turns the target (a measured
    orientation lags the target while the arm turns, and corrections read from it were added twice).
    """
    vectors: dict[str, np.ndarray] = {}
    offsets: dict[str, int] = {}
    values: dict[str, np.ndarray] = {}
    for entry in config.state:
        if entry.key not in vectors:
            raw = np.asarray(request.get(entry.key), dtype=np.float64).reshape(-1)
            if raw.size == 0 or not np.all(np.isfinite(raw)):
                raise InvalidInputError(f"request key {entry.key!r} holds no finite state vector")
            vectors[entry.key], offsets[entry.key] = raw, 0
        start = offsets[entry.key]
        part = vectors[entry.key][start:start + entry.size]
        if part.size != entry.size:
            raise InvalidInputError(f"request key {entry.key!r} is shorter than the config's state layout")
        offsets[entry.key] = start + entry.size
        values[entry.source] = part
        if entry.source == "ee_euler":
            rotation = sxyz_to_matrix(part) if entry.angles == SXYZ else euler_xyz_to_matrix(part)
            if entry.reference == BASE:
                rotation = rotation @ top_down_pose(config.embodiment).T
            elif entry.reference != TOP_DOWN:
                raise ConfigError(f"unknown orientation reference {entry.reference!r}")
            values["ee_euler"] = matrix_to_euler_xyz(rotation)
    missing = [s for s in ("ee_position", "ee_euler") if s not in values]
    if missing:
        raise ConfigError(f"policy {config.name}'s state has no {', '.join(missing)}: the expert cannot act on it")
    euler = values["ee_euler"] if target_euler is None else np.asarray(target_euler, dtype=np.float64)
    return Observation(step=0, image=None, aperture=aperture_of(values), ee_position=values["ee_position"].copy(),
                       ee_euler=euler, joint_names=(), joint_positions=np.zeros(0),
                       target_position=None if target_position is None else np.asarray(target_position, float),
                       privileged=privileged)
