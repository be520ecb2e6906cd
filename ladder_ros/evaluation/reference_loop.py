"""The reference loop: one episode of the orchestrator over a simulator, in one process.

This is the loop of the paper's simulator evaluations (Section 3): the simulator pauses while the
orchestrator and its verifier compute, so every query is answered before the step's action. The
ROS graph runs the same core objects across processes in lockstep and must produce the same
events step for step (``ladder-ros parity``).

Per step ``t`` (``t = 0`` is the reset observation):

1. the privileged goal tracker reads the scene (for scoring and the privileged verifier);
2. the orchestrator observes the gripper and, for the privileged verifier, the goal states;
3. a verification query, if any, is answered from the current observation;
4. if the orchestrator finished (plan done, plan exhausted, budget), the episode ends here;
5. the policy acts on the instruction of step ``t`` and the simulator steps.

An episode starts from its layout, or (``start``) from the scene an earlier episode left, on a simulator that
keeps its scene (``keeps_scene``): the reset episode after a task episode, and the next task episode after that
reset (:mod:`ladder_ros.evaluation.auto_reset`). A reset episode is an episode like any other, of the task
:func:`~ladder_ros.core.reset.plan_reset` derives, with the same policy, triggers and verifier; its record says
``kind: reset``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ladder_ros.core.action_conventions import canonical_action, policy_convention
from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.metrics import score_episode
from ladder_ros.core.observation import Observation
from ladder_ros.core.orchestrator import Decision, Orchestrator, StepInput, Variant, make_orchestrator
from ladder_ros.core.presets import EmbodimentPreset
from ladder_ros.core.record import PLANNER, REFERENCE, EpisodeRecord
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.reset import EPISODE_STARTS, START_LAYOUT, episode_kind_of
from ladder_ros.core.task import Subgoal, Task
from ladder_ros.core.triggers import GripperMonitor
from ladder_ros.core.verification import CountVerifier
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.sim.base import SimulatorBackend


class EpisodePlanner(Protocol):
    """What plans an episode from its first frame (``ladder_ros.vlm.components.Planner``)."""

    name: str

    def plan(self, instruction: str, frame: Observation) -> Any:
        """A result with ``subgoals`` (None when there is no plan), ``error`` and ``to_dict()``."""


@dataclass(frozen=True)
class EpisodeStart:
    """Where an episode's scene comes from: its layout, or the scene the episode ``after`` (an id) left."""

    kind: str = START_LAYOUT
    after: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EPISODE_STARTS:
            raise InvalidInputError(f"an episode starts from one of {', '.join(EPISODE_STARTS)}, got {self.kind!r}")
        if (self.kind == START_LAYOUT) != (self.after is None):
            raise InvalidInputError(f"a start {self.kind!r} names the episode it continues from only when it "
                                    f"continues from one, got after={self.after!r}")

    @property
    def keeps_scene(self) -> bool:
        return self.kind != START_LAYOUT


def start_scene(simulator: SimulatorBackend, task: Task, layout: int, seed: int, start: EpisodeStart) -> Observation:
    """The first observation of an episode: ``task``'s layout, or the scene the last episode left."""
    if not start.keeps_scene:
        return simulator.reset(task, layout, seed)
    if not getattr(simulator, "keeps_scene", False):
        raise ConfigError(f"simulator {simulator.name} cannot start an episode from the scene the last one left "
                          "(no keep_scene start); it builds every episode from its layout")
    return simulator.reset(task, layout, seed, keep_scene=True)


def uses_plan(variant: Variant) -> bool:
    """Whether a variant follows a plan a planner may make: the privileged verifier takes the
    ground-truth subgoals and the low-level policy none (Section 4, 'Subgoal planning')."""
    return variant not in (Variant.LOW_LEVEL_POLICY, Variant.PRIVILEGED_VERIFIER)


def step_input(variant: Variant, observation: Observation, monitor: GripperMonitor,
               goal_states: tuple[bool, ...]) -> StepInput:
    """The orchestrator's input for one observation (goal states only where the variant may read them)."""
    gripper = monitor.update(observation.step, observation.aperture, float(observation.ee_position[2]))
    return StepInput(step=observation.step, gripper=gripper,
                     goal_states=goal_states if variant.needs_privileged_state else None)


def run_episode(simulator: SimulatorBackend, policy: LowLevelPolicy, task: Task, variant: "str | Variant",
                preset: EmbodimentPreset, *, layout: int, seed: int, verifier: CountVerifier | None = None,
                plan: list[Subgoal] | None = None, planner: EpisodePlanner | None = None,
                on_step: Callable[[Observation, Decision], None] | None = None,
                start: EpisodeStart = EpisodeStart(), episode_id: str | None = None) -> EpisodeRecord:
    """Run one episode in lockstep and score it.

    The plan is the task's reference subgoals (the paper's cached plans) unless ``plan`` is given,
    or ``planner`` plans it from the reset frame, as the graph's ``plan_source: planner`` does; the
    privileged verifier always takes the reference and the low-level policy follows none. A
    planner that gives no plan ends the episode at once (``aborted: planner failed: …``) with its
    reply in the record. ``verifier`` answers count queries (``proprio_verifier`` only). Each of
    the policy's actions is converted from its own convention to the action contract. ``start`` says where
    the scene comes from (default: the layout); ``episode_id``, when given, is written into the record. A task
    that :func:`~ladder_ros.core.reset.plan_reset` made is recorded as a reset episode.
    """
    variant = Variant.parse(variant)
    if variant.needs_verifier and verifier is None:
        raise InvalidInputError(f"variant {variant.value} needs a verifier")
    if not uses_plan(variant) or plan is None:
        plan = list(task.subgoals)
    convention = policy_convention(policy)
    budget = preset.budget_for(task)
    tracker = GoalTracker(task)
    monitor = GripperMonitor.for_preset(preset)
    started = time.perf_counter()
    observation = start_scene(simulator, task, layout, seed, start)
    plan_record: dict = {"source": REFERENCE}
    plan_error = None
    if planner is not None and uses_plan(variant):
        result = planner.plan(task.instruction, observation)
        plan_record = {"source": PLANNER, "planner": planner.name, **result.to_dict()}
        if result.subgoals:
            plan = list(result.subgoals)
        else:
            plan_error = result.error or "the planner returned an empty plan"
    orchestrator: Orchestrator = make_orchestrator(variant, preset, plan, instruction=task.instruction,
                                                   budget_steps=budget, category=task.category)
    instruction: str | None = None
    queries = 0
    while True:
        if observation.privileged is None:
            raise InvalidInputError(f"simulator {simulator.name} returned no privileged state")
        goal_states = tracker.update(observation.privileged.goal, observation.step)
        if plan_error is not None:  # nothing to follow: the episode ends before the first action
            decision = orchestrator.abort(f"planner failed: {plan_error}")
        else:
            decision = orchestrator.observe(step_input(variant, observation, monitor, goal_states))
        if decision.request is not None:
            queries += 1
            decision = orchestrator.resolve(verifier.verify(decision.request, observation))
        if on_step is not None:
            on_step(observation, decision)
        if decision.finished:
            break
        if decision.instruction != instruction:
            instruction = decision.instruction
            policy.reset(instruction)
        observation = simulator.step(canonical_action(policy, policy.act(observation, instruction)))
    score = score_episode(task, tracker, orchestrator.summary(), observation.privileged.env_success)
    record = EpisodeRecord(
        task_id=task.task_id, suite=task.suite, category=task.category.value, horizon=task.horizon,
        variant=variant.value, layout=layout, seed=seed, success=score.success,
        subgoals_done=score.subgoals_done, steps_used=observation.step, budget_steps=budget,
        finish_reason=orchestrator.finish_reason, subgoals=[o.to_dict() for o in score.outcomes],
        violations=list(score.violations), events=[e.to_dict() for e in orchestrator.events],
        verification_queries=queries, verifier=getattr(verifier, "name", None) if variant.needs_verifier else None,
        policy=policy.name, simulator=simulator.name, final_goal=observation.privileged.goal.to_dict(),
        orchestration=orchestrator.summary(), wall_s=time.perf_counter() - started,
        success_rule=task.success_rule, preset=preset.name, preset_options=preset.options, plan=plan_record,
        action_convention=(policy.declared_convention or convention).to_dict(),
        policy_report=policy.policy_report(),
        kind=episode_kind_of(task),
        start=start.kind, start_after=start.after,
    )
    if episode_id is not None:
        record.extra["episode_id"] = episode_id
    return record
