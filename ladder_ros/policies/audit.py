"""What a policy did in one episode, and the checks between a model's chunk and the commands the robot gets.

Both chunk executors (the synchronous :class:`~ladder_ros.policies.chunked.ChunkedPolicy` and the
wall-clock :class:`~ladder_ros.policies.executor.ChunkExecutor`) pass every chunk through one
:class:`ChunkScreen` and count into one :class:`PolicyReport`, so an episode's record says the same
things wherever it ran:

* **Refused chunks, by reason.** ``invalid action`` (wrong shape, NaN, outside the config's
  bounds; :class:`~ladder_ros.policies.actions.ActionProcessor`) and :data:`SEAM_JUMP`: where a new
  chunk takes over, its first command may differ from the last command given by at most the
  config's ``seam`` bounds (:class:`~ladder_ros.policies.config.SeamBounds`). A chunk computed from
  an older observation can start somewhere else than where the arm is going (LeRobot's asynchronous
  inference had real jumps at chunk splices); the largest jump is recorded either way, and above
  the bound the chunk is refused and the robot holds still, like any other unsafe action.
* **Held steps, by reason**: control steps of a subgoal in which the robot was given no motion (a
  hold-still command in lockstep; no action published on the wall clock).
* **Inference latency** (p50, p95) of the episode's chunks.
* **Out of distribution**: with the training data's statistics (the config's ``normalization`` or
  ``statistics``, or a local checkpoint's processor), a state or an action more than
  ``ood_sigmas`` standard deviations from the data's mean is counted, the worst one named, and
  said once per episode. Not refused: a policy far from its data is a symptom to report, not
  necessarily unsafe.

No rclpy here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ladder_ros.core.observation import Observation
from ladder_ros.core.rotations import euler_xyz_to_matrix, rotation_angle_between
from ladder_ros.policies.actions import ActionProcessor, InvalidActionError
from ladder_ros.policies.config import EE_DELTA, Normalization, PolicyConfig

INVALID_ACTION = "invalid action"
SEAM_JUMP = "seam_jump"  # a chunk whose first command jumps from the last one given (refused, counted)


class RejectedChunk(InvalidActionError):
    """A chunk refused as a whole; ``kind`` is :data:`INVALID_ACTION` or :data:`SEAM_JUMP`."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else None


@dataclass
class PolicyReport:
    """One episode's account of the policy (what ``policy_report`` of an episode record holds).

    ``policy`` is the name the episode ran the policy under (the config's own name unless one was given),
    ``config`` the config's own name and ``config_hash`` its digest, the identity a ranking pools by.
    """

    policy: str
    config_hash: str
    chunks: int = 0  # chunks accepted
    rejected: dict[str, int] = field(default_factory=dict)  # chunks refused, by reason
    steps: int = 0  # control steps of a subgoal (acted or held)
    held: dict[str, int] = field(default_factory=dict)  # held steps, by reason
    inference_ms: list[float] = field(default_factory=list)
    seam_max: dict[str, float] = field(default_factory=dict)
    ood: dict = field(default_factory=lambda: {"state": 0, "action": 0, "worst_sigma": 0.0, "worst": ""})
    server_errors: int = 0
    warm_up_s: float | None = None
    execution: str = "lockstep"  # how chunks ran: lockstep, or the wall clock's synchronous or realtime mode
    blend_steps: int = 0  # realtime: the configured blend (commands)
    stale_dropped: int = 0  # realtime: actions dropped because their time had passed when their chunk came
    splice_max: dict[str, float] = field(default_factory=dict)  # realtime: the largest jump where a chunk took over
    splices: int = 0  # realtime: chunks that replaced queued actions
    blended: int = 0  # realtime: commands blended from an old plan into a new one
    reanchored: int = 0  # realtime: chunks taken from where the target was, their offset dropped
    guided_chunks: int = 0  # chunks sampled with RTC guidance
    config: str = ""  # the config's own name

    @classmethod
    def of(cls, config: PolicyConfig, name: str | None = None) -> "PolicyReport":
        """An empty report of ``config`` run under ``name`` (None: the config's own name)."""
        return cls(policy=name or config.name, config_hash=config.digest(), config=config.name)

    @property
    def held_steps(self) -> int:
        return sum(self.held.values())

    def step(self, held: str = "") -> None:
        """One control step of a subgoal: acted (``held`` empty) or held, and why."""
        self.steps += 1
        if held:
            self.held[held] = self.held.get(held, 0) + 1

    def refused(self, kind: str) -> None:
        self.rejected[kind] = self.rejected.get(kind, 0) + 1

    def spliced(self, splice) -> None:
        """A chunk taken over on the wall clock (a :class:`~ladder_ros.policies.splice.Splice`)."""
        self.stale_dropped += splice.stale
        self.blended += splice.blended
        self.reanchored += int(splice.reanchored)
        if splice.spliced and splice.queue:
            self.splices += 1
            for name, value in splice.jump.items():
                self.splice_max[name] = max(self.splice_max.get(name, 0.0), value)

    def to_dict(self, *, final: bool = True) -> dict:
        return {
            "policy": self.policy, "config": self.config, "config_hash": self.config_hash, "final": final,
            "chunks": self.chunks, "rejected_chunks": dict(self.rejected),
            "all_chunks_rejected": bool(self.rejected) and self.chunks == 0,
            "steps": self.steps, "held_steps": self.held_steps, "held_by_reason": dict(self.held),
            "inference_ms": {"p50": _percentile(self.inference_ms, 50), "p95": _percentile(self.inference_ms, 95),
                             "count": len(self.inference_ms)},
            "seam_jump_max": dict(self.seam_max), "ood": dict(self.ood), "server_errors": self.server_errors,
            "warm_up_s": self.warm_up_s, "execution": self.execution, "blend_steps": self.blend_steps,
            "stale_dropped": self.stale_dropped, "splice_jump_max": dict(self.splice_max), "splices": self.splices,
            "blended": self.blended, "reanchored": self.reanchored, "guided_chunks": self.guided_chunks,
        }


class ChunkScreen:
    """The checks every chunk passes before its commands are queued (see the module docstring)."""

    def __init__(self, config: PolicyConfig, report: PolicyReport, *, statistics: Normalization | None = None,
                 log: Callable[[str], None] | None = None):
        self.config = config
        self.report = report
        self.processor = ActionProcessor(config)
        self.statistics = statistics
        self._log = log or (lambda text: None)
        self._said_ood: set[str] = set()

    def commands(self, actions: object, steps: int | None = None) -> list[np.ndarray]:
        """The first ``steps`` (default ``k``) actions as commands; :class:`RejectedChunk` (invalid action) when
        the chunk is bad. Actions far from the training data are counted (never refused)."""
        try:
            rows = self.processor.check_chunk(actions, steps)
        except InvalidActionError as exc:
            raise RejectedChunk(INVALID_ACTION, str(exc)) from None
        self._check_distribution("action", rows)
        return [self.processor.command(row) for row in rows]

    def check_state(self, state: np.ndarray) -> None:
        """Count a state vector far from the training data's (said once per episode)."""
        if state.size:
            self._check_distribution("state", state[None, :])

    def check_seam(self, first: np.ndarray, previous: np.ndarray | None, observation: Observation | None) -> None:
        """Measure the jump from ``previous`` (the last command given; None: none yet) to a chunk's ``first``
        command; :class:`RejectedChunk` (seam_jump) when it exceeds the config's bound."""
        bounds = self.config.seam
        if self.config.action.kind == EE_DELTA:
            before = np.zeros(7) if previous is None else previous  # none yet: from standing still
            # Per axis, as the safety filter bounds a step (a diagonal step at full speed is no jump).
            jumps = {"translation_m": float(np.max(np.abs(first[:3] - before[:3]))),
                     "rotation_rad": rotation_angle_between(euler_xyz_to_matrix(before[3:6]),
                                                            euler_xyz_to_matrix(first[3:6]))}
            limits = {"translation_m": bounds.max_translation_m, "rotation_rad": bounds.max_rotation_rad}
        else:
            arm = first.size  # the arm's axes: all but a trailing gripper (DROID: 7 joints, then the gripper)
            measured = None if observation is None else np.asarray(observation.joint_positions, dtype=np.float64)
            if measured is not None and 0 < measured.size < first.size:
                arm = measured.size
            if previous is not None:
                before = previous[:arm]
            elif measured is not None and measured.size >= arm:
                before = measured[:arm]  # none given yet: from where the arm is
            else:
                return
            jumps = {"joint_rad": float(np.max(np.abs(first[:arm] - before)))}
            limits = {"joint_rad": bounds.max_joint_rad}
        for name, value in jumps.items():
            self.report.seam_max[name] = max(self.report.seam_max.get(name, 0.0), value)
        for name, value in jumps.items():
            limit = limits[name]
            if limit is not None and value > limit:
                raise RejectedChunk(SEAM_JUMP, f"the chunk's first action jumps {value:.4g} "
                                               f"{name.rsplit('_', 1)[1]} from the last one given (seam bound "
                                               f"{limit:g})")

    def check_splice(self, splice) -> None:
        """Realtime: where a chunk takes over (a :class:`~ladder_ros.policies.splice.Splice`), no command of its
        blend may move the target by more than the config's seam bound on any axis, or by more than the chunk's
        own step there where that is larger: the splice adds no command larger than one step's limit.
        :class:`RejectedChunk` (seam_jump) otherwise. The largest command of a blend is kept as the seam jump."""
        for moved, own in splice.steps:
            for name, values in moved.items():
                self.report.seam_max[name] = max(self.report.seam_max.get(name, 0.0), float(np.max(values)))
        for moved, own in splice.steps:
            problem = self.splice_problem(moved, own)
            if problem:
                raise RejectedChunk(SEAM_JUMP, f"the chunk takes over {problem} (the target was "
                                               f"{_jump_text(splice.jump)} from the new plan's)")

    def splice_fits(self, moved: dict, own: dict) -> bool:
        """Whether one command of a blend keeps within the seam bound (see :meth:`check_splice`)."""
        return not self.splice_problem(moved, own)

    def splice_problem(self, moved: dict, own: dict) -> str:
        bounds = self.config.seam
        limits = {"translation_m": bounds.max_translation_m, "rotation_rad": bounds.max_rotation_rad,
                  "joint_rad": bounds.max_joint_rad}
        for name, values in moved.items():
            limit = limits.get(name)
            if limit is None:
                continue
            allowed = np.maximum(limit, own.get(name, 0.0))
            if np.any(np.asarray(values) > allowed + 1e-12):
                unit = name.rsplit("_", 1)[1]
                return (f"with a command of {float(np.max(values)):.4g} {unit} (seam bound {limit:g}, the chunk's "
                        f"own step {float(np.max(own.get(name, 0.0))):.4g})")
        return ""

    def _check_distribution(self, part: str, values: np.ndarray) -> None:
        if self.statistics is None:
            return
        sigmas = self.statistics.sigmas(part, values)
        worst = float(sigmas.max())
        if worst <= self.config.ood_sigmas:
            return
        ood = self.report.ood
        ood[part] += 1
        if worst > ood["worst_sigma"]:
            index = int(np.unravel_index(int(np.argmax(sigmas)), sigmas.shape)[-1])
            names = self._names(part)
            ood["worst_sigma"] = worst
            ood["worst"] = f"{part}[{index}] ({names[index]}) {worst:.1f} standard deviations from the data's mean"
        if part not in self._said_ood:
            self._said_ood.add(part)
            self._log(f"{part} out of the training data's distribution: {ood['worst']} (guard: "
                      f"{self.config.ood_sigmas:g})")

    def _names(self, part: str) -> list[str]:
        if part == "action":
            return list(self.config.action.names)
        names = []
        for entry in self.config.state:
            names += [entry.source] * entry.size
        return names


def _jump_text(jump: dict) -> str:
    return ", ".join(f"{value:.4g} {name.rsplit('_', 1)[1]}" for name, value in jump.items()) or "no way"


def guard_statistics(config: PolicyConfig, source: object | None) -> Normalization | None:
    """The training data's statistics the out-of-distribution guard reads: a local model's own (its
    processor's), the config's normalisation, or the statistics the config gives for a server."""
    return getattr(source, "normalization", None) or config.normalization or config.statistics
