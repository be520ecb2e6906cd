"""Where a chunk's actions go: absolute targets anchored where its observation was taken, and the splice.

A chunk is computed from one observation. Its actions mean something only relative to the arm's
commanded target *when that observation was taken*: Bridge's end-effector deltas move the target
from there (BridgeData v2 collection and SimplerEnv's controllers add each delta to the previous
target), absolute joint positions are targets already. So every chunk becomes a list of absolute
targets as it arrives, composed onto the anchor the executor recorded with its observation
(:class:`Anchor`), never onto whatever is queued by then: a chunk computed while earlier commands
were still queued can then never repeat their motion, whatever the latency (adding its deltas after
them overshot by 5-7 cm in the dress rehearsal).

Relative targets live in the executor's own frame (:class:`RelativeFrame`): the composition of every
delta it handed out, from the identity at start. The driver applies each delta to its own target,
so only differences matter; a command is the delta from the target the last command left to the
next target. Where the next target is the one the chunk's own next delta leads to, that delta is
handed out as the chunk gave it (bit for bit: the synchronous rule's commands are unchanged).

:class:`ChunkPlan` keeps the queue of planned targets and splices a new chunk in:

* the first ``handed - anchor.handed`` of its targets are for control periods that have passed since
  its observation (counted, not estimated from a latency) and are dropped as stale;
* the rest replace the old plan from the next period on. Where the new plan's target for the period
  just given differs from the target the last command left (the splice jump), the new plan is
  shifted by that offset and the offset taken out in equal parts over the next ``blend_steps``
  commands: each of them moves as the new plan moves, plus a share of the offset. The blend is
  lengthened, up to the chunk's end, while a share would make a command larger than the seam bound
  on any axis (or than the chunk's own step there, where that is larger), so a splice adds no
  command the arm's per-step limit refuses. A chunk whose blend cannot fit is refused while the old
  plan still has commands to give; once it has none, the chunk is taken from where the target is,
  its own steps from there and its offset dropped (:meth:`ChunkPlan.reanchored`): what the
  synchronous rule does after the arm stood still, instead of idling.

No rclpy, no threads here: the executor holds the lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol, Sequence

import numpy as np

from typing import Callable

from ladder_ros.core.rotations import (axis_angle_to_matrix, euler_xyz_to_matrix, matrix_to_axis_angle,
                                       matrix_to_euler_xyz, rotation_angle_between)
from ladder_ros.policies.chunked import TaggedAction

Key = tuple  # names one target: ("start",), (the plan's chunk serial, index) or ("blend", n)
START: Key = ("start",)
NOWHERE: Key = ("nowhere",)  # the base of a blended target: its command is always the difference to it


class ActionFrame(Protocol):
    """How targets are formed from commands, and commands from targets, for one kind of action."""

    def start(self) -> object:
        """The target before any command (relative: the identity of the executor's frame)."""

    def targets(self, anchor: object, commands: Sequence[np.ndarray]) -> list[object]:
        """The targets ``commands`` lead to, in order, from ``anchor``."""

    def command(self, before: object, after: object, own: np.ndarray) -> np.ndarray:
        """The command that moves the target from ``before`` to ``after`` (``own``: the chunk's command for
        ``after``, whose gripper it keeps)."""

    def shift(self, target: object, old: object, new: object, remaining: float) -> object:
        """``target`` moved back by ``remaining`` (0..1) of the offset from ``old`` to ``new``."""

    def jump(self, old: object, new: object) -> dict[str, float]:
        """How far apart two targets are, by measure (the splice jump)."""

    def step(self, before: object, after: object) -> dict[str, np.ndarray]:
        """How far one command moves the target from ``before`` to ``after``, per measure and axis."""


class RelativeFrame:
    """End-effector deltas (the graph's contract: metres in the base frame, an Euler XYZ rotation turning
    about the base axes, left-multiplied; the gripper absolute). Targets are 4x4 poses."""

    def start(self) -> np.ndarray:
        return np.eye(4)

    def targets(self, anchor: np.ndarray, commands: Sequence[np.ndarray]) -> list[np.ndarray]:
        out, pose = [], np.asarray(anchor, dtype=np.float64)
        for command in commands:
            nxt = np.eye(4)
            nxt[:3, :3] = euler_xyz_to_matrix(command[3:6]) @ pose[:3, :3]
            nxt[:3, 3] = pose[:3, 3] + command[:3]
            out.append(nxt)
            pose = nxt
        return out

    def command(self, before: np.ndarray, after: np.ndarray, own: np.ndarray) -> np.ndarray:
        turn = matrix_to_euler_xyz(after[:3, :3] @ before[:3, :3].T)
        return np.concatenate([after[:3, 3] - before[:3, 3], turn, np.asarray(own[6:], dtype=np.float64)])

    def shift(self, target: np.ndarray, old: np.ndarray, new: np.ndarray, remaining: float) -> np.ndarray:
        out = np.eye(4)
        out[:3, 3] = target[:3, 3] - remaining * (new[:3, 3] - old[:3, 3])
        back = matrix_to_axis_angle(old[:3, :3] @ new[:3, :3].T)  # the base-frame turn from new back to old
        out[:3, :3] = axis_angle_to_matrix(remaining * back) @ target[:3, :3]
        return out

    def jump(self, old: np.ndarray, new: np.ndarray) -> dict[str, float]:
        # per axis, as the safety filter bounds a step and the seam guard a jump
        return {"translation_m": float(np.max(np.abs(new[:3, 3] - old[:3, 3]))),
                "rotation_rad": rotation_angle_between(old[:3, :3], new[:3, :3])}

    def step(self, before: np.ndarray, after: np.ndarray) -> dict[str, np.ndarray]:
        return {"translation_m": np.abs(after[:3, 3] - before[:3, 3]),
                "rotation_rad": np.array([rotation_angle_between(before[:3, :3], after[:3, :3])])}


class AbsoluteFrame:
    """Absolute targets (joint positions and the gripper): a command is its own target."""

    def __init__(self, axis_names: Sequence[str]):
        # the splice jump is measured on the arm's axes; a gripper's opening is not a joint
        self._arm = np.array([not name.startswith("gripper") for name in axis_names], dtype=bool)

    def start(self) -> None:
        return None

    def targets(self, anchor: object, commands: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(c, dtype=np.float64) for c in commands]

    def command(self, before: object, after: np.ndarray, own: np.ndarray) -> np.ndarray:
        return np.asarray(after, dtype=np.float64).copy()

    def shift(self, target: np.ndarray, old: np.ndarray, new: np.ndarray, remaining: float) -> np.ndarray:
        return np.asarray(target) - remaining * (np.asarray(new) - np.asarray(old))

    def jump(self, old: np.ndarray, new: np.ndarray) -> dict[str, float]:
        return {"joint_rad": float(np.max(self.step(old, new)["joint_rad"], initial=0.0))}

    def step(self, before: np.ndarray | None, after: np.ndarray) -> dict[str, np.ndarray]:
        if before is None:
            return {}
        return {"joint_rad": np.abs(np.asarray(after)[self._arm] - np.asarray(before)[self._arm])}


@dataclass(frozen=True)
class Anchor:
    """The commanded target when an observation was taken: how many commands had been handed out then,
    the target they left (relative actions), and which target that was."""

    handed: int
    target: object
    key: Key


@dataclass(frozen=True)
class Planned:
    """One planned command: its target, the chunk's own command for it, the model's own action (RTC's
    prefix), its tag, the target its own command moves from (``base``) and its own name (``key``)."""

    target: object
    command: np.ndarray
    raw: np.ndarray
    tag: TaggedAction
    base: Key
    key: Key


@dataclass(frozen=True)
class Splice:
    """What taking over did: actions dropped as stale, the jump from the old plan, the targets blended."""

    stale: int
    jump: dict[str, float]  # from the old plan's target (or the last target given) to the first new one
    blended: int
    spliced: bool  # an old plan was replaced (False: the new chunk started from an empty queue)
    queue: tuple[Planned, ...]  # what takes over
    steps: tuple = ()  # (what each command of the blend moves, what the chunk's own step there moves), per measure
    reanchored: bool = False  # taken from where the target is, its offset dropped (:meth:`ChunkPlan.reanchored`)


class ChunkPlan:
    """The queue of planned targets and the commanded target so far (see the module docstring)."""

    def __init__(self, frame: ActionFrame, blend_steps: int = 0):
        if blend_steps < 0:
            raise ValueError(f"blend_steps must be >= 0, got {blend_steps}")
        self.frame = frame
        self.blend_steps = int(blend_steps)
        self.queue: deque[Planned] = deque()
        self.handed = 0  # commands handed out so far
        self.current = frame.start()  # the target the last command left
        self.current_key: Key = START
        self._blends = 0
        self._serial = 0  # chunks planned: keys stay unique across subgoals and episodes

    def __len__(self) -> int:
        return len(self.queue)

    def anchor(self) -> Anchor:
        """The anchor of an observation taken now."""
        return Anchor(self.handed, self.current, self.current_key)

    def plan(self, anchor: Anchor, commands: Sequence[np.ndarray], raws: Sequence[np.ndarray],
             tags: Sequence[TaggedAction]) -> list[Planned]:
        """A chunk's commands as targets from ``anchor`` (its observation's), each keyed by chunk and index."""
        targets = self.frame.targets(anchor.target, commands)
        planned, base = [], anchor.key
        self._serial += 1
        for target, command, raw, tag in zip(targets, commands, raws, tags):
            key = (self._serial, tag.index)
            planned.append(Planned(target, np.asarray(command, dtype=np.float64), np.asarray(raw), tag, base, key))
            base = key
        return planned

    def append(self, planned: Sequence[Planned]) -> None:
        """Queue a chunk after what is queued (the synchronous rule: it was computed for after it)."""
        self.queue.extend(planned)

    def stale_count(self, anchor: Anchor) -> int:
        """Commands handed out since ``anchor``'s observation: that many of its chunk's targets are past."""
        return self.handed - anchor.handed

    def old_target(self, offset: int) -> object:
        """The old plan's target ``offset`` commands from now (past its end: its last target, held)."""
        if offset < len(self.queue):
            return self.queue[offset].target
        return self.queue[-1].target if self.queue else self.current

    def splice(self, anchor: Anchor, planned: Sequence[Planned],
               fits: Callable[[dict, dict], bool] | None = None) -> Splice:
        """What replacing the queue with ``planned`` from the next command on would queue (see the module
        docstring); nothing changes until :meth:`commit`. ``queue`` is empty when every target is past.
        ``fits(moved, own)``: whether a command that moves the target by ``moved`` (per measure and axis) is
        acceptable where the chunk's own step moves it by ``own`` (the seam guard's rule); the blend is
        lengthened until every command of it fits, or to the chunk's end."""
        stale = min(self.stale_count(anchor), len(planned))
        fresh = list(planned[stale:])
        if not fresh:
            return Splice(stale, {}, 0, False, ())
        spliced = bool(self.queue)
        if stale:  # where the last command left the target against the new plan's target for that period
            old, new = self.current, planned[stale - 1].target
        else:  # nothing given since its observation: the new plan starts where the target is
            old = new = None
        jump = self.frame.jump(old, new) if old is not None else {}
        windows = [0]
        if jump and any(value > 0.0 for value in jump.values()) and self.blend_steps:
            windows = list(range(self.blend_steps, max(self.blend_steps, len(fresh) - 1) + 1))
        for window in windows:
            queue = self._shifted(fresh, old, new, window)
            steps = self._steps(queue, planned, stale, window)
            if fits is None or all(fits(moved, own) for moved, own in steps):
                break
        return Splice(stale, jump, min(window, len(fresh)), spliced, tuple(queue), tuple(steps))

    def _shifted(self, fresh: list[Planned], old: object, new: object, window: int) -> list[Planned]:
        """``fresh`` with the offset from ``old`` to ``new`` taken out over its first ``window`` commands."""
        if old is None:
            return list(fresh)
        queue = list(fresh)
        for i in range(min(window, len(fresh))):
            self._blends += 1
            remaining = 1.0 - (i + 1) / (window + 1)
            queue[i] = replace(fresh[i], target=self.frame.shift(fresh[i].target, old, new, remaining), base=NOWHERE,
                               key=("blend", self._blends))
        return queue

    def _steps(self, queue: list[Planned], planned: Sequence[Planned], stale: int, window: int) -> list:
        """(what it moves, what the chunk's own step moves) for each command of the blend and the one after it."""
        steps, before = [], self.current
        for i, entry in enumerate(queue[:window + 1]):
            # the chunk's own step: from its previous target (its first: from the anchor, the target now)
            own_before = planned[stale + i - 1].target if stale + i >= 1 else self.current
            steps.append((self.frame.step(before, entry.target), self.frame.step(own_before, entry.target)
                          if own_before is not None else {}))
            before = entry.target
        return steps

    def reanchored(self, splice: Splice) -> Splice:
        """``splice``'s chunk from the target the last command left, its own steps from here and no offset: what
        the synchronous rule does after the arm stood still. For a chunk whose blend cannot fit when the old plan
        has nothing left to give (the offset is dropped, not corrected)."""
        fresh = list(splice.queue)
        if not fresh:
            return splice
        here = Anchor(self.handed, self.current, self.current_key)
        queue = self.plan(here, [e.command for e in fresh], [e.raw for e in fresh], [e.tag for e in fresh])
        return Splice(splice.stale, splice.jump, 0, splice.spliced, tuple(queue), (), reanchored=True)

    def commit(self, splice: Splice) -> None:
        """Queue what :meth:`splice` planned, replacing the old plan."""
        self.queue = deque(splice.queue)

    def command_for(self, entry: Planned) -> np.ndarray:
        """The command that would hand ``entry`` out next."""
        return self._command(entry)

    def pop(self) -> TaggedAction | None:
        """Hand out the next command (None: nothing queued): its tag with the command that reaches its target."""
        if not self.queue:
            return None
        entry = self.queue.popleft()
        command = self._command(entry)
        self.current, self.current_key = entry.target, entry.key
        self.handed += 1
        return replace(entry.tag, command=command)

    def _command(self, entry: Planned) -> np.ndarray:
        if entry.base == self.current_key:
            return entry.command  # the chunk's own next step: as the model gave it
        return self.frame.command(self.current, entry.target, entry.command)

    def pending_raw(self) -> list[np.ndarray]:
        """The model's own actions of what is queued, in order (RTC's prefix)."""
        return [entry.raw for entry in self.queue]

    def clear(self) -> None:
        self.queue.clear()


def frame_for(relative: bool, axis_names: Sequence[str]) -> ActionFrame:
    return RelativeFrame() if relative else AbsoluteFrame(axis_names)
