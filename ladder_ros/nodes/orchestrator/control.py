"""Episodes started, stopped and aborted from outside the graph, and the plan a started one waits for.

A start command is checked before anything moves (no episode running, known task, layout in
range, seed >= 0, a fresh id of ``[A-Za-z0-9_.-]``, a simulator for the privileged verifier, a policy
name the policy node serves) and then waits for that policy to be ready
(:mod:`~ladder_ros.nodes.orchestrator.policy_gate`); the episode's status names the policy it runs
under. Every command gets a reply on ``episode/command_reply``; a refused start never touches the
episode status, and a start repeated as it was (its sender sends again until it hears back) is
answered again and never starts a second episode. An accepted start gets its id and clock origin
here and, with ``plan_source: planner``, its plan from the VLM planner (asked on ``planner/request``
with the first frame while that step waits; an unreadable, empty or late plan aborts the episode
with the reason and the raw reply in its record). A stop or abort ends the running episode with its
queue kept in the record. A start of kind ``reset`` is counted and planned first
(:mod:`~ladder_ros.nodes.orchestrator.resets`) and then starts the reset task like any episode; one with
nothing to move ends at once, its final status saying so. Every start's kind and start (``layout``, or the
scene an earlier episode left) go into the episode's status and record. No rclpy here: the node hands in the
documents it has read.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from ladder_ros.core.errors import LadderError
from ladder_ros.core.orchestrator import Variant, make_orchestrator
from ladder_ros.core.presets import EmbodimentPreset
from ladder_ros.core.record import PLANNER, REFERENCE, graph_record
from ladder_ros.core.reset import NOTHING_TO_MOVE, RESET_SUFFIX, ResetPlan
from ladder_ros.core.suite import TaskSuite
from ladder_ros.messages import (
    ABORT,
    FINISHED,
    LOCKSTEP,
    RUNNING,
    START,
    STOP,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeStatus,
    PlanRequestDoc,
    PlanResultDoc,
    SchemaError,
    episode_id_problem,
)
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.nodes.orchestrator.steps import StepDecider

if TYPE_CHECKING:
    from ladder_ros.nodes.orchestrator.outbox import Outbox
    from ladder_ros.nodes.orchestrator.policy_gate import PolicyGate
    from ladder_ros.nodes.orchestrator.resets import ResetEpisodes

NS_PER_S = 1_000_000_000
# Accepted starts remembered to answer a repeat of one: a client sends its start again until it hears back, as a
# first message can be lost while DDS discovery completes; a handful covers any repeat still in flight.
ACCEPTED_STARTS_KEPT = 16


class EpisodeControl:
    """Start, stop and abort commands, the start checks, and the planner's plan (module docstring)."""

    def __init__(self, episode: Episode, outbox: Outbox, steps: StepDecider, policy_gate: PolicyGate,
                 stall: StallWatch, *, suite: TaskSuite, preset: EmbodimentPreset, clock_mode: str,
                 default_variant: str, plan_source: str, now_ns: Callable[[], int],
                 write_journal: Callable[[], None], logger, resets: ResetEpisodes | None = None):
        """``now_ns``: the node's clock; ``write_journal`` writes the episode's journal now; ``resets`` counts and
        plans reset starts (set later by the node when it is built after this object)."""
        self.resets = resets
        self._episode = episode
        self._outbox = outbox
        self._steps = steps
        self._policy_gate = policy_gate
        self._stall = stall
        self._suite = suite
        self._preset = preset
        self._clock_mode = clock_mode
        self._lockstep = clock_mode == LOCKSTEP
        self._default_variant = default_variant
        self._plan_source = plan_source
        self._now_ns = now_ns
        self._write_journal = write_journal
        self._log = logger
        self._episode_count = 0
        self._accepted_starts: dict[str, EpisodeCommand] = {}  # the latest accepted starts, by episode id

    @property
    def episode_count(self) -> int:
        """Episodes started since the orchestrator came up."""
        return self._episode_count

    # ------------------------------------------------------------------ commands
    def command(self, command: EpisodeCommand) -> None:
        """An ``episode/command``: start, stop or abort."""
        if command.command == START:
            if not self._repeated_start(command):
                self.start(command)
        elif command.command in (STOP, ABORT):
            current = self._episode.status.episode_id
            if command.episode_id and command.episode_id != current:
                self._log.warning(f"{command.command} for episode {command.episode_id!r} ignored: "
                                  f"the current one is {current!r}")
                self._reply(command, False, f"episode {command.episode_id!r} is not the current one")
                return
            reason = command.reason or ("operator stop" if command.command == STOP else "operator abort")
            self._policy_gate.cancel(reason)
            if self.resets is not None:
                self.resets.cancel(reason)
            accepted, message = self.end_episode(reason)
            self._reply(command, accepted, message)

    def _reply(self, command: EpisodeCommand, accepted: bool, reason: str = "", assigned_id: str = "") -> None:
        self._outbox.command_reply(EpisodeCommandReply(
            command=command.command, episode_id=command.episode_id, accepted=accepted, reason=reason,
            assigned_id=assigned_id))

    def refuse(self, command: EpisodeCommand, why: str) -> None:
        """A refused start: logged and answered on episode/command_reply; the episode status is not touched."""
        if self.resets is not None:
            self.resets.forget(command)
        self._log.error(f"start refused: {why}")
        self._reply(command, False, f"start refused: {why}")

    def _check_start(self, command: EpisodeCommand) -> None:
        """Everything a start must satisfy before anything moves; raises LadderError naming what is wrong."""
        status = self._episode.status
        if status.state == RUNNING:
            raise LadderError(f"episode {status.episode_id} is running")
        preparing = self.resets.preparing if self.resets is not None else None
        if preparing is not None and preparing != command:
            raise LadderError(f"the reset after episode {preparing.start_after} is being counted")
        if command.episode_id:
            problem = episode_id_problem(command.episode_id)
            if problem:
                raise LadderError(problem)
            if command.episode_id in self._episode.used_ids:
                raise LadderError(f"episode id {command.episode_id!r} was used before; every episode needs a fresh "
                                  "id (its recording and record are named after it)")
        if command.seed < 0:
            raise LadderError(f"seed must be >= 0, got {command.seed}")

    def _repeated_start(self, command: EpisodeCommand) -> bool:
        """A start equal to one taken already (accepted, or deferred for the policy): never run twice.

        Its sender repeats a start until it hears back; an accepted one is answered again, a deferred one
        is answered when it starts. A start that reuses an id with other fields is not a repeat (refused as
        a reused id).
        """
        if not command.episode_id:
            return False  # the orchestrator names it: every such start is a new episode
        if self._policy_gate.is_repeat_of_deferred(command) or (self.resets is not None
                                                                and self.resets.is_repeat(command)):
            return True
        if self._accepted_starts.get(command.episode_id) == command:
            self._reply(command, True, "already started", assigned_id=command.episode_id)
            return True
        return False

    # ------------------------------------------------------------------ starting
    def start(self, command: EpisodeCommand) -> None:
        """Start the episode ``command`` asks for, or refuse it (or defer it while the policy warms up)."""
        try:
            self._check_start(command)
            task = self._suite.task(command.task_id)
            variant = Variant.parse(command.variant or self._default_variant)
            if variant.needs_privileged_state and not self._lockstep:
                raise LadderError("the privileged verifier needs a simulator (clock_mode lockstep)")
            if command.layout >= task.layouts:
                raise LadderError(f"layout {command.layout} is out of range: task {task.task_id} has "
                                  f"{task.layouts} layouts")
            reset = None
            if command.is_reset:
                if self.resets is None:
                    raise LadderError("this orchestrator runs no resets")
                reset = self.resets.planned(command)
                if reset is None:  # counted first, then started again (ResetEpisodes)
                    self.resets.prepare(command, task, self._episode.status, self._episode.last_end_ns,
                                        time.monotonic())
                    return
                if reset.empty:
                    self._nothing_to_move(command, task, variant, reset)
                    return
                assert reset.task is not None
                task = reset.task
            budget = self._preset.budget_for(task)
            # The privileged verifier takes the ground-truth subgoals and the low-level policy no plan
            # (Section 4): only the other variants ask the planner. A reset's plan is made from the counts.
            use_planner = self._plan_source == "planner" and reset is None and variant not in (
                Variant.LOW_LEVEL_POLICY, Variant.PRIVILEGED_VERIFIER)
            orchestrator = None if use_planner else make_orchestrator(
                variant, self._preset, list(task.subgoals), instruction=task.instruction, budget_steps=budget,
                category=task.category)
        except LadderError as exc:
            self.refuse(command, str(exc))
            return
        if not self._policy_gate.admit(command):
            return  # deferred until the policy is ready, or refused with its status
        episode = self._episode
        policy, policy_hash = self._policy_gate.chosen(command)
        self._episode_count += 1
        now_ns = self._now_ns()
        # Step stamps never run backwards across episodes, so a late message of a past episode can
        # never pass for a step of this one (ladder_ros.runtime.step_sync).
        origin = max(now_ns, episode.last_end_ns + NS_PER_S)
        episode_id = command.episode_id or self._fresh_id(task.task_id)
        episode.take_id(episode_id)
        if reset is not None:
            assert self.resets is not None
            self.resets.began(episode_id, command)
        started = time.monotonic()
        episode.begin(task, orchestrator, variant, {"source": PLANNER if orchestrator is None else REFERENCE},
                      started)
        self._stall.restart(started)
        self._steps.begin(origin, self._preset.control_rate_hz, variant.needs_privileged_state)
        episode.publish_status(EpisodeStatus(
            episode_id=episode_id, state=RUNNING, seq=episode.status.seq + 1, task=task.to_dict(),
            variant=variant.value, policy=policy, policy_config_hash=policy_hash, preset=self._preset.name,
            layout=command.layout, seed=command.seed,
            plan=[] if orchestrator is None else [s.to_dict() for s in orchestrator.plan], budget_steps=budget,
            clock=self._clock_mode, rate_hz=self._preset.control_rate_hz, origin_ns=origin,
            message="planning" if orchestrator is None else "", kind=command.kind, start=command.start,
            start_after=command.start_after))
        self._write_journal()
        self._reply(command, True, assigned_id=episode_id)
        if command.episode_id:
            self._accepted_starts[command.episode_id] = command
            while len(self._accepted_starts) > ACCEPTED_STARTS_KEPT:
                self._accepted_starts.pop(next(iter(self._accepted_starts)))
        self._log.info(f"episode {episode_id}: {task.task_id} ({variant.value}), layout {command.layout}, "
                       f"seed {command.seed}, budget {budget} steps"
                       + (f", policy {policy} ({policy_hash[:8] or 'hash unknown'})" if policy else "")
                       + (", plan from the planner" if orchestrator is None else "")
                       + (f", continuing the scene of {command.start_after} ({command.start})"
                          if command.start_after else ""))
        if orchestrator is None:
            episode.wait_for_plan(PlanRequestDoc(episode_id=episode_id, step=0, stamp_ns=origin,
                                                 instruction=task.instruction), time.monotonic())
            self.send_plan_request()

    def _nothing_to_move(self, command: EpisodeCommand, task, variant: Variant, reset: ResetPlan) -> None:
        """A reset whose counts show every moved object in a start region: it ends at once, no step taken; its
        final status (and record) say so, and the next episode continues from the scene as it is."""
        assert self.resets is not None
        episode = self._episode
        reset_id = f"{task.task_id}{RESET_SUFFIX}"
        episode_id = command.episode_id or self._fresh_id(reset_id)
        episode.take_id(episode_id)
        self.resets.began(episode_id, command)
        section = self.resets.record_section(episode_id)
        self.resets.ended(episode_id)
        policy, policy_hash = self._policy_gate.chosen(command)
        status = EpisodeStatus(
            episode_id=episode_id, state=FINISHED, seq=episode.status.seq + 1,
            task={"task_id": reset_id, "scene": task.scene, "suite": task.suite, "category": task.category.value,
                  "instruction": "nothing to move", "subgoals": [], "layouts": task.layouts},
            variant=variant.value, policy=policy, policy_config_hash=policy_hash, preset=self._preset.name,
            layout=command.layout, seed=command.seed, clock=self._clock_mode, rate_hz=self._preset.control_rate_hz,
            origin_ns=max(self._now_ns(), episode.last_end_ns + NS_PER_S), finish_reason=NOTHING_TO_MOVE,
            message=f"{NOTHING_TO_MOVE}: every object the task moves rests in a start region",
            kind=command.kind, start=command.start, start_after=command.start_after)
        record = graph_record(status.to_dict(), events=[], orchestration={}, finish_reason=NOTHING_TO_MOVE,
                              last_step=0, score=None, wall_s=0.0, preset=self._preset.name,
                              preset_options=self._preset.options, extra=section)
        self._episode_count += 1
        episode.publish_status(EpisodeStatus.from_dict({**status.to_dict(), "result": record}))
        self._write_journal()
        self._reply(command, True, assigned_id=episode_id)
        self._log.info(f"episode {episode_id}: the reset after {command.start_after} has {NOTHING_TO_MOVE}")

    def _fresh_id(self, task_id: str) -> str:
        name = task_id.replace("/", "-")  # a reset's task is <task>/reset; an id names a folder
        base = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{self._episode_count:03d}-{name}"
        episode_id, n = base, 1
        while episode_id in self._episode.used_ids:
            n += 1
            episode_id = f"{base}.{n}"
        return episode_id

    # ------------------------------------------------------------------ the planner's plan
    def send_plan_request(self) -> None:
        """Ask the planner (again: the verifier node may have (re)started since) for the awaited plan."""
        episode = self._episode
        assert episode.planning is not None
        episode.planning_sent = time.monotonic()
        self._outbox.plan_request(episode.planning)

    def plan_result(self, doc: PlanResultDoc) -> None:
        """A ``planner/result``: the awaited plan starts the episode's steps, an unusable one aborts it."""
        episode = self._episode
        if episode.planning is None or doc.episode_id != episode.planning.episode_id:
            return
        episode.plan_record = {"source": PLANNER, "planner": doc.source, "error": doc.error,
                               "raw_reply": doc.raw_reply, "latency_ms": doc.latency_ms, "usage": doc.usage}
        try:
            plan = doc.plan()
        except SchemaError as exc:
            self.plan_failed(str(exc))
            return
        task = episode.task
        assert task is not None
        try:
            episode.orchestrator = make_orchestrator(episode.variant, self._preset, plan,
                                                     instruction=task.instruction,
                                                     budget_steps=episode.status.budget_steps,
                                                     category=task.category)
        except LadderError as exc:
            self.plan_failed(str(exc))
            return
        episode.planning = None
        self._log.info(f"episode {episode.status.episode_id}: planned {len(plan)} subgoals: "
                       + "; ".join(s.text for s in plan))
        episode.update_status(plan=[s.to_dict() for s in plan], message="")
        self._stall.restart(time.monotonic())  # the steps start now
        self._steps.process_ready()  # the first step has waited for the plan

    def plan_failed(self, reason: str) -> None:
        """No usable plan: the episode ends as aborted, with the reason (and the raw reply) in its record."""
        episode = self._episode
        task = episode.task
        assert task is not None
        self._log.error(f"episode {episode.status.episode_id}: planner failed: {reason}")
        episode.planning = None
        episode.plan_record.setdefault("error", reason)
        # The queue of the record is the task's reference plan, none of it started.
        episode.orchestrator = make_orchestrator(episode.variant, self._preset, list(task.subgoals),
                                                 instruction=task.instruction,
                                                 budget_steps=episode.status.budget_steps, category=task.category)
        self.end_episode(f"planner failed: {reason}")

    # ------------------------------------------------------------------ ending from outside
    def end_episode(self, reason: str) -> tuple[bool, str]:
        """Stop or abort the running episode from outside; the queue is kept in the record."""
        episode = self._episode
        if episode.running and episode.planning is not None:
            self.plan_failed(f"episode ended while planning ({reason})")
            return True, f"episode {episode.status.episode_id} ended while planning: {reason}"
        if not episode.running or episode.orchestrator is None:
            return False, "no episode is running"
        if episode.finished is not None:
            return False, f"episode {episode.status.episode_id} is already over"
        self._steps.abort(reason)
        return True, f"episode {episode.status.episode_id} ended: {reason}"
