"""Episodes in sequence, each followed by the reset that puts its scene back, in one process.

An unattended evaluation day runs episode after episode with nobody at the table. After each task episode the
loop asks its verifier what rests in the scene's start regions, derives the reset task
(:func:`~ladder_ros.core.reset.plan_reset`), runs it as an episode of its own with the same policy, triggers
and verifier (``kind: reset``), and asks the verifier again: once every start region holds what the plan
expects, the next task episode starts from that scene (``start: after_reset``), nothing teleported. A reset the
verifier cannot confirm stops the sequence with a reason naming what is out of place; the ROS graph pauses
there and asks the operator.

Counting asks the verifier one (kind, region) pair at a time, as a proprioceptive verifier's query does (the
oracle reads the simulator's goal state; a VLM counts from the image with the region's text). A reply that
cannot be read is asked again, up to :data:`COUNT_ASKS` times in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.observation import Observation
from ladder_ros.core.orchestrator import Decision, Variant
from ladder_ros.core.presets import EmbodimentPreset
from ladder_ros.core.record import EpisodeRecord
from ladder_ros.core.reset import (
    COUNT_ASKS,
    COUNT_REASON,
    START_AFTER_RESET,
    START_AFTER_TASK,
    ResetPlan,
    ResetPlanError,
    ResetScene,
    Shortfall,
    auto_reset_refusal,
    count_queries,
    count_subgoal,
    out_of_place,
    plan_reset,
)
from ladder_ros.core.suite import TaskSuite
from ladder_ros.core.task import Task
from ladder_ros.core.verification import CountVerifier, VerificationRequest
from ladder_ros.evaluation.reference_loop import EpisodeStart, run_episode
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.sim.base import SimulatorBackend

# Simulators that start an episode from the scene the last one left (``keeps_scene``) and know start regions.
SCENE_KEEPING_SIMULATORS = ("mujoco_tabletop",)

PolicyFactory = Callable[[Task, int], LowLevelPolicy]  # (task, seed) -> the policy of one episode


def reset_scene_of(simulator: SimulatorBackend, task: Task) -> ResetScene:
    """``task``'s start regions as ``simulator`` knows them; one line when it cannot reset a scene at all."""
    describe = getattr(simulator, "reset_scene", None)
    if describe is None or not getattr(simulator, "keeps_scene", False):
        raise ResetPlanError(f"task {task.task_id} cannot be reset automatically on simulator {simulator.name}: it "
                             "knows no start regions and builds every episode from its layout")
    return describe(task)


def check_auto_reset(suite: TaskSuite, simulator: str, tasks: Iterable[Task]) -> None:
    """Refuse, in one line, a selection with a task that cannot be reset automatically (before anything runs)."""
    tasks = list(tasks)
    if simulator not in SCENE_KEEPING_SIMULATORS:
        task = tasks[0]
        raise ResetPlanError(f"task {task.task_id} (suite {suite.name}) cannot be reset automatically: simulator "
                             f"{simulator} builds every episode from its layout and knows no start regions; "
                             f"automatic resets run on {', '.join(SCENE_KEEPING_SIMULATORS)}")
    from ladder_ros.sim.tabletop_embodiment import embodiment_for
    from ladder_ros.sim.tabletop_scene import parse_scenes, reset_scene

    scenes = parse_scenes(suite.scenes, embodiment_for(suite.embodiment))
    for task in tasks:
        refusal = auto_reset_refusal(task, reset_scene(scenes[task.scene], task))
        if refusal:
            raise ResetPlanError(refusal)


def ask_counts(verifier: CountVerifier, pairs: Iterable[tuple[str, str]], scene: ResetScene,
               observation: Observation, expected: Mapping[tuple[str, str], int] | None = None
               ) -> dict[tuple[str, str], int | None]:
    """The verifier's count of each (kind, region) now; None where no reply could be read in :data:`COUNT_ASKS`."""
    regions = {r.name: r for r in scene.regions}
    counts: dict[tuple[str, str], int | None] = {}
    for index, (kind, region) in enumerate(pairs):
        subgoal = count_subgoal(kind, regions[region])
        request = VerificationRequest(request_id=index, step=observation.step, plan_index=index, subgoal=subgoal,
                                      required=(expected or {}).get((kind, region), 1), reason=COUNT_REASON)
        count = None
        for _ in range(COUNT_ASKS):
            count = verifier.verify(request, observation).count
            if count is not None:
                break
        counts[(kind, region)] = count
    return counts


@dataclass
class ResetOutcome:
    """One reset: its plan, its episode's record (None when nothing had to move) and what the check found."""

    plan: ResetPlan
    record: EpisodeRecord | None
    shortfalls: tuple[Shortfall, ...] = ()

    @property
    def confirmed(self) -> bool:
        return not self.shortfalls


@dataclass
class SequenceResult:
    """The records of a sequence, in the order they ran, and why it stopped early (None: it ran to the end)."""

    records: list[EpisodeRecord] = field(default_factory=list)
    stopped: str | None = None


class _Ends:
    """The first and last observation of an episode, taken from the loop's per-step callback."""

    def __init__(self) -> None:
        self.first: Observation | None = None
        self.last: Observation | None = None

    def __call__(self, observation: Observation, decision: Decision) -> None:
        if self.first is None:
            self.first = observation
        self.last = observation


def run_reset(simulator: SimulatorBackend, policy_for: PolicyFactory, task: Task, variant: "str | Variant",
              preset: EmbodimentPreset, *, layout: int, seed: int, verifier: CountVerifier, scene: ResetScene,
              before: Observation | None, after: Observation, after_episode: str, episode_id: str) -> ResetOutcome:
    """Plan the reset of an episode of ``task`` that ended at ``after`` (and began at ``before``), run it on the
    scene that episode left and check it. Raises :class:`ResetPlanError` when no plan can be made."""
    pairs = count_queries(task, scene)
    start_counts = None if before is None else ask_counts(verifier, pairs, scene, before)
    plan = plan_reset(task, scene, ask_counts(verifier, pairs, scene, after), start_counts)
    if plan.empty:
        return ResetOutcome(plan=plan, record=None)
    ends = _Ends()
    record = run_episode(simulator, policy_for(plan.task, seed), plan.task, variant, preset, layout=layout, seed=seed,
                         verifier=verifier, on_step=ends, start=EpisodeStart(START_AFTER_TASK, after_episode),
                         episode_id=episode_id)
    counts = ask_counts(verifier, list(plan.expected), scene, ends.last, plan.expected)
    shortfalls = out_of_place(counts, plan)
    texts = {r.name: r.text for r in scene.regions}
    record.extra["reset"] = {**plan.to_dict(), "confirmed": not shortfalls,
                             "counted": [[k, r, n] for (k, r), n in sorted(counts.items())],
                             "out_of_place": [s.describe(texts) for s in shortfalls]}
    return ResetOutcome(plan=plan, record=record, shortfalls=shortfalls)


def run_sequence(simulator: SimulatorBackend, policy_for: PolicyFactory, task: Task, variant: "str | Variant",
                 preset: EmbodimentPreset, *, episodes: int, layout: int, base_seed: int, verifier: CountVerifier,
                 sequence_id: str, on_record: Callable[[EpisodeRecord], None] | None = None) -> SequenceResult:
    """``episodes`` episodes of ``task``, the first from ``layout``, each followed by its reset and the next one
    started from the scene the reset left. Episode ``k`` has seed ``base_seed + k`` and the id
    ``<sequence_id>-e<k>``; its reset ``<...>-reset``. Every record is handed to ``on_record`` as it is made.

    The sequence stops early, saying why, when a reset cannot be planned or the verifier cannot confirm it.
    """
    if episodes < 1:
        raise ConfigError(f"episodes must be >= 1, got {episodes}")
    scene = reset_scene_of(simulator, task)
    refusal = auto_reset_refusal(task, scene)
    if refusal:
        raise ResetPlanError(refusal)
    result = SequenceResult()

    def keep(record: EpisodeRecord) -> None:
        result.records.append(record)
        if on_record is not None:
            on_record(record)

    start = EpisodeStart()
    for k in range(episodes):
        seed = base_seed + k
        episode_id = f"{sequence_id}-e{k}"
        ends = _Ends()
        keep(run_episode(simulator, policy_for(task, seed), task, variant, preset, layout=layout, seed=seed,
                         verifier=verifier, on_step=ends, start=start, episode_id=episode_id))
        try:
            outcome = run_reset(simulator, policy_for, task, variant, preset, layout=layout, seed=seed,
                                verifier=verifier, scene=scene, before=ends.first, after=ends.last,
                                after_episode=episode_id, episode_id=f"{episode_id}-reset")
        except ResetPlanError as exc:
            result.stopped = f"after episode {episode_id}: {exc}"
            return result
        if outcome.record is None:  # nothing moved out of its start region: the scene stays as it is
            start = EpisodeStart(START_AFTER_TASK, episode_id)
            continue
        keep(outcome.record)
        if not outcome.confirmed:
            texts = {r.name: r.text for r in scene.regions}
            result.stopped = (f"the reset after episode {episode_id} left objects out of place: "
                              + "; ".join(s.describe(texts) for s in outcome.shortfalls))
            return result
        start = EpisodeStart(START_AFTER_RESET, outcome.record.extra["episode_id"])
    return result
