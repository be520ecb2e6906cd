"""A scripted motion answering as a joint-position policy: the Franka rehearsal's chunks, with no scene to act on.

The Franka's rehearsal (docs/rehearsal_franka.md) runs against franky-sim, which has no objects, so
there is nothing for an expert to pick. What the rehearsal needs from its policy server is a stream
of chunks in the Franka policy's own format (pi0.5-DROID, ``policies/droid_pi05_server.yaml``:
absolute joint positions for the seven joints plus DROID's gripper position, 0 open / 1 closed,
chunks of 15 of which the policy node executes 8) that moves the arm and lets the gripper trigger
see attempts. :class:`SweepChunker` gives one around where the arm stood at the episode's first
request (the ready pose, where the driver homes it):

* joint 1 sweeps ``SWEEP_RAD`` either way, once per ``SWEEP_STEPS`` (a slow, bounded motion the
  driver streams), open loop;
* the hand follows a cycle closed on the gripper the request reports, as a policy watching its
  gripper would: open for ``OPEN_STEPS``, then the close is commanded and the arm waits until a
  request shows the hand closed; then, still closed, the hand rises ``LIFT_M`` and comes back down
  over ``CLOSED_STEPS``; then the open is commanded and the arm waits until a request shows the hand
  open. The Franka Hand takes a second or more to close on a busy machine (its width is a network
  round trip, its moves block: ``ladder_ros/robots/franky_arm.py``), so a fixed timeline would lift
  before the hand closed and the trigger would see no lift. Likewise the arm may run late (actions
  held for their age, a slow simulator): the hand stays at the top until a request shows it
  ``LIFT_SEEN_M`` above where it was seen closed (by the driver's forward kinematics of the request's
  joints), for at most ``TOP_WAIT_STEPS``, then comes down. Each cycle is a close of more than the
  Franka trigger's 21 steps with a lift above its 3 cm, the next after its 57-step cooldown (paper
  Appendix B): one attempt the trigger ends on the release.

The lift is a joint offset found once per episode: the least-squares joint step that raises the hand
(the driver's own forward kinematics, :func:`ladder_ros.robots.franka.forward_kinematics`) by
``LIFT_M`` at the centre. A chunk's rows follow on from the previous chunk's executed ones (the
script advances by the executed length; the rows past it are its prediction), so the seam between
chunks is one step's motion, far below the config's seam limit.

The script cannot see whether its rows were executed. The policy node drops its queue and holds
when an observation is too old, refuses a chunk that fails its checks, and then measures the next
chunk's seam from where the arm is rather than from the last row it queued
(``ladder_ros/policies/executor.py``); a script that only counted chunks would then jump by every row
it lost, and each refused jump would put it further ahead. So each chunk starts from the row the
previous one left off at, unless the request shows the arm further than ``RESYNC_FRACTION`` of the
seam bound from it: then it starts between the two (half way, or as close to the arm as the bound
needs), so its seam passes whichever the node measures from; the rows then move towards the script
by at most ``CATCH_UP_RAD`` a step per joint, twice the script's own fastest, until they are on it
again. The hand's cycle keeps its count (it is closed on what the requests show anyway). Nothing
here imports rclpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.policies.config import JOINT_POSITION, PolicyConfig
from ladder_ros.instruments.rehearsal.chunker import aperture_of
from ladder_ros.robots.franka import forward_kinematics

ARM_JOINTS = 7
OPEN, CLOSED = 0.0, 1.0  # DROID's gripper position (policies/droid_pi05_server.yaml)
SWEEP_RAD = 0.2  # joint 1 either way of the centre: about 7 cm of hand travel at the ready pose (0.36 m out)
LIFT_M = 0.05  # above the Franka trigger's 3 cm lift (Appendix B)
OPEN_STEPS = 60  # open after a release is seen: longer than the trigger's 57-step cooldown (Appendix B)
# Once the hand is seen closed: rise over RISE_STEPS, hold TOP_STEPS, come down in the rest of CLOSED_STEPS; the
# trigger needs 21 closed steps and measures the lift from where it saw the hand close (Appendix B).
RISE_START = 3
RISE_STEPS = 20
TOP_STEPS = 10
CLOSED_STEPS = 48
LIFT_SEEN_M = 0.04  # the top is held until a request shows this lift: above the trigger's 3 cm (Appendix B)
TOP_WAIT_STEPS = 90  # at most this many steps more at the top (6 s at 15 Hz): an arm that never rises still cycles
SWEEP_STEPS = 120  # one sweep of joint 1 every 8 s at 15 Hz
SEEN_CLOSED = 0.5  # DROID's gripper position at or above which the request shows the hand closed (the trigger's
# open threshold, 0.5 of the aperture, Appendix B)
OPENING, CLOSING = "opening", "closing"  # waiting for the request to show the hand open, closed
CATCH_UP_RAD = 0.02  # per joint and step: twice the script's fastest joint motion (joint 1: 0.0105 rad a step)
RESYNC_FRACTION = 0.8  # of the config's seam bound: an arm further than this from the last row has missed rows
JACOBIAN_STEP_RAD = 1e-4
INSIDE = 1e-5  # rows are clipped this far inside the config's bounds, so float32 rounding never crosses one


def _inside_bounds(rows: np.ndarray, config: PolicyConfig) -> np.ndarray:
    """``rows`` clipped into the config's action bounds, as float32 (the wire's dtype)."""
    low, high = np.asarray(config.action.low) + INSIDE, np.asarray(config.action.high) - INSIDE
    return np.clip(rows, low, high).astype(np.float32)


def lift_offset(centre: np.ndarray, lift_m: float = LIFT_M) -> np.ndarray:
    """The joint step (rad, least squares) that raises the hand by ``lift_m`` at ``centre``, keeping x and y."""
    q = np.asarray(centre, dtype=np.float64)
    base = forward_kinematics(q)[:3, 3]
    jacobian = np.empty((3, ARM_JOINTS))
    for j in range(ARM_JOINTS):
        dq = np.zeros(ARM_JOINTS)
        dq[j] = JACOBIAN_STEP_RAD
        jacobian[:, j] = (forward_kinematics(q + dq)[:3, 3] - base) / JACOBIAN_STEP_RAD
    return np.linalg.pinv(jacobian) @ np.array([0.0, 0.0, lift_m])


def _smooth(x: float) -> float:
    """0 -> 1 with zero slope at both ends (a cosine ramp), x clipped to [0, 1]."""
    x = min(max(x, 0.0), 1.0)
    return 0.5 - 0.5 * math.cos(math.pi * x)


def lift_profile(closed_steps: int) -> float:
    """The lift in [0, 1] ``closed_steps`` after the hand was seen closed: up, hold, down to 0 at ``CLOSED_STEPS``."""
    up = _smooth((closed_steps - RISE_START) / RISE_STEPS)
    down_start = RISE_START + RISE_STEPS + TOP_STEPS
    return up - _smooth((closed_steps - down_start) / (CLOSED_STEPS - down_start))


@dataclass(frozen=True)
class HandScript:
    """Where the hand's cycle is: ``phase`` (open, closing, closed, opening) and the steps spent in it; while
    closed, the hand's height when it was seen closed and whether a request has shown it lifted since."""

    phase: str = "open"
    steps: int = 0
    closed_z: float | None = None
    lifted: bool = False
    waited: int = 0  # steps held at the top waiting to see the lift

    def seen(self, gripper: float, z: float | None = None) -> "HandScript":
        """After a request showing DROID's gripper position ``gripper`` and the hand at height ``z`` (m): a wait
        ends once the hand is where asked."""
        if self.phase == CLOSING and gripper >= SEEN_CLOSED:
            return HandScript("closed", closed_z=z)
        if self.phase == "closed" and not self.lifted and z is not None and self.closed_z is not None \
                and z - self.closed_z >= LIFT_SEEN_M:
            return replace(self, lifted=True)
        if self.phase == OPENING and gripper < SEEN_CLOSED:
            return HandScript("open")
        return self

    def step(self) -> tuple["HandScript", float, float]:
        """One control step: the script after it, the lift in [0, 1] and the gripper position commanded."""
        if self.phase == "open":
            after = HandScript(CLOSING) if self.steps + 1 >= OPEN_STEPS else HandScript("open", self.steps + 1)
            return after, 0.0, OPEN
        if self.phase == "closed":
            if self.steps + 1 >= CLOSED_STEPS:
                return HandScript(OPENING), lift_profile(self.steps), CLOSED
            at_top = self.steps + 1 >= RISE_START + RISE_STEPS + TOP_STEPS
            if at_top and not self.lifted and self.waited < TOP_WAIT_STEPS:  # hold the top until seen there
                return replace(self, waited=self.waited + 1), lift_profile(self.steps), CLOSED
            return replace(self, steps=self.steps + 1), lift_profile(self.steps), CLOSED
        return HandScript(self.phase, self.steps + 1), 0.0, CLOSED if self.phase == CLOSING else OPEN


def hand_height(joints: np.ndarray) -> float:
    """The hand's height (m, base frame) at ``joints``, by the driver's forward kinematics."""
    return float(forward_kinematics(joints)[2, 3])


def joints_from_request(request: Mapping[str, Any], config: PolicyConfig) -> tuple[np.ndarray, float]:
    """The arm's joints (rad) and DROID's gripper position in an openpi request, by the config's state layout."""
    values: dict[str, np.ndarray] = {}
    for entry in config.state:
        raw = np.asarray(request.get(entry.key), dtype=np.float64).reshape(-1)
        if raw.size != entry.size or not np.all(np.isfinite(raw)):
            raise InvalidInputError(f"request key {entry.key!r} holds no finite state of {entry.size} numbers")
        values[entry.source] = raw
    if "joint_positions" not in values or values["joint_positions"].size != ARM_JOINTS:
        raise ConfigError(f"policy {config.name}'s state has no {ARM_JOINTS} joint positions: the sweep cannot act")
    return values["joint_positions"], CLOSED - aperture_of(values)  # DROID's 1 closed from the aperture's 1 open


def _check_config(config: PolicyConfig) -> None:
    if config.action.kind != JOINT_POSITION or config.action.dim != ARM_JOINTS + 1:
        raise ConfigError(f"the rehearsal's sweep answers {ARM_JOINTS} joint positions and a gripper; policy "
                          f"{config.name} acts in {config.action.kind} ({config.action.dim} axes)")


def joint_hold_chunk(config: PolicyConfig, request: Mapping[str, Any]) -> np.ndarray:
    """A chunk that keeps the arm and the hand where the request says they are (clipped into the config's bounds).

    The warm-up's answer (its zero state is clipped into the joint limits) and the answer when no
    episode runs.
    """
    _check_config(config)
    try:
        joints, gripper = joints_from_request(request, config)
    except InvalidInputError:
        joints, gripper = np.zeros(ARM_JOINTS), OPEN
    return _inside_bounds(np.tile(np.append(joints, gripper), (config.chunk_length, 1)), config)


class SweepChunker:
    """Chunks of the scripted sweep for one episode, in ``config``'s joint-position format (module docstring)."""

    def __init__(self, config: PolicyConfig):
        _check_config(config)
        self.config = config
        self.length, self.execute = config.chunk_length, config.execute_steps
        self.centre: np.ndarray | None = None
        self.lift: np.ndarray | None = None
        self.step = 0
        self.hand = HandScript()
        self.chunks = 0
        self.last: np.ndarray | None = None  # the arm's joints in the previous chunk's last executed row
        self.resyncs = 0  # chunks that started between that row and the arm (module docstring)

    def chunk(self, request: Mapping[str, Any]) -> np.ndarray:
        """``length`` rows (float32) from the episode's next step on; the first request fixes the centre."""
        joints, gripper = joints_from_request(request, self.config)
        if self.centre is None:
            self.centre = joints.copy()
            self.lift = lift_offset(self.centre)
        hand = self.hand.seen(gripper, hand_height(joints))
        at = self._start(joints)
        rows = []
        for k in range(self.step, self.step + self.length):
            if k == self.step + self.execute:
                self.hand = hand  # where the executed rows leave the script; the rest is its prediction
            hand, lift, command = hand.step()
            q = self.centre + lift * self.lift
            q[0] += SWEEP_RAD * math.sin(2.0 * math.pi * k / SWEEP_STEPS)
            at = at + np.clip(q - at, -CATCH_UP_RAD, CATCH_UP_RAD)
            rows.append(np.append(at, command))
        if self.execute >= self.length:
            self.hand = hand
        self.step += self.execute
        self.chunks += 1
        out = _inside_bounds(np.array(rows), self.config)
        self.last = out[min(self.execute, self.length) - 1, :ARM_JOINTS].astype(np.float64)
        return out

    def _start(self, joints: np.ndarray) -> np.ndarray:
        """Where this chunk's rows start from: the previous chunk's last executed row, or a point between it and
        the arm when the arm is too far from it for the node's seam check (module docstring)."""
        if self.last is None:
            return joints.copy()
        bound = self.config.seam.max_joint_rad
        gap = self.last - joints
        distance = float(np.max(np.abs(gap)))
        reach = None if bound is None else RESYNC_FRACTION * bound
        if reach is None or distance <= reach:
            return self.last.copy()
        self.resyncs += 1
        return joints + gap * min(0.5, max(0.0, reach - CATCH_UP_RAD) / distance)
