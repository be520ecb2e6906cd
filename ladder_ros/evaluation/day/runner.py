"""The day itself: the planned episodes in their order on one graph, each written down before and after it runs.

Before each episode the day checks the time budget and the disk, writes ``started`` and asks the graph for
the episode; its result is written as ``finished``, or, when it does not count, as ``interrupted`` and the
episode runs again: a node that died under it (the graph is brought up again first), an episode that never
ended (the same), an episode that ended void (the operator's abort, the graph's ``interrupted``). A graph that
keeps failing, ``max_restarts`` times in a row without an episode finished in between, stops the day naming
what failed. Ctrl-C (or SIGTERM) during an episode marks it interrupted, writes the summary and ends the
command as a Ctrl-C does. A fault the rehearsal's chaos runner cannot get the graph back from
(:class:`~ladder_ros.evaluation.chaos.OperatorNeeded`) pauses the day: the episode is marked interrupted and the
day stops, saying what the operator must do. Whatever stops the day, the next start on the same folder goes on
from there. With automatic resets (:mod:`ladder_ros.evaluation.day.resets`) each task episode is followed by
the reset of its scene, the next one starts from the scene the reset left, and a reset that fails pauses the
day, naming what is out of place.

The graph is anything with ``start``, ``restart``, ``stop``, ``episode``, ``pids`` and ``recordings``
(:class:`~ladder_ros.evaluation.day.graph.DayGraph` on ROS); this module imports no rclpy.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ladder_ros.core.errors import LadderError
from ladder_ros.evaluation.chaos import OperatorNeeded, chaos_summary, read_chaos, render_chaos
from ladder_ros.evaluation.day.disk import NOT_ENOUGH_DISK, DiskGuard, RecordingSizes, folder_bytes, free_bytes
from ladder_ros.evaluation.day.order import DayEpisode
from ladder_ros.evaluation.day.progress import DayProgress, TimeBudget
from ladder_ros.evaluation.day.records import FINISHED, INTERRUPTED, RESET, RUN_STOPPED, STARTED, DayRecords
from ladder_ros.evaluation.day.resets import (
    INTERRUPTED as RESET_INTERRUPTED,
    NOT_CONFIRMED,
    NOT_PLANNED,
    DayResets,
    auto_reset_summary,
    ended_from_outside,
    render_auto_reset,
    reset_outcome,
)
from ladder_ros.evaluation.day.resources import RESOURCES_FILE, ResourceSampler, read_samples, resource_summary
from ladder_ros.evaluation.day.summary import SUMMARY_FILE, build_summary, render_summary
from ladder_ros.panel.evaluation_plan import is_void
from ladder_ros.panel.records import write_atomic

COMPLETE, BUDGET, DISK, FAULTS, STOPPED = "complete", "budget", "disk", "faults", "interrupted"
PAUSED = "paused for the operator"
EXIT_CODES = {COMPLETE: 0, BUDGET: 0, DISK: 1, FAULTS: 1, PAUSED: 1}


RESET_SEED_STRIDE = 7919  # the seed of a scene's n-th reset is the episode's + (n - 1) x this (a prime)


@dataclass
class DaySettings:
    episode_timeout_s: float = 900.0
    max_restarts: int = 3
    sample_period_s: float = 10.0
    reset_tries: int = 3  # resets of one scene that end by their own rules unconfirmed before the day pauses


class Day:
    """Runs what is left of a day's order on ``graph``, writing every event to ``records``."""

    def __init__(self, out: Path, order: list[DayEpisode], records: DayRecords, graph: Any, *, budget: TimeBudget,
                 guard: DiskGuard, settings: DaySettings, meta: dict, say: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic, chaos_file: Path | None = None,
                 auto_reset: bool = False, scene_of: Callable[[str], Any] = lambda task_id: None):
        self.out = Path(out)
        self.order = order
        self.records = records
        self.graph = graph
        self.budget = budget
        self.guard = guard
        self.settings = settings
        self.meta = meta
        self.say = say
        self.progress = DayProgress(total=len(order))
        for event in records.state.finished.values():
            self.progress.add(float(event.get("wall_s") or 0.0), bool(event.get("success")), bool(event.get("scored")))
        self.sizes = RecordingSizes(graph.recordings)
        self.sampler = ResourceSampler(self.out / RESOURCES_FILE, graph.pids, lambda: self.progress.done,
                                       settings.sample_period_s, run=records.run)
        self.clock = clock
        self._began = clock()
        self._failures = 0  # graph failures since the last finished episode
        self._gave_up = False
        self._paused: str | None = None  # what the operator must do (the chaos runner could not)
        self.chaos_file = chaos_file  # the rehearsal's fault records (--faults), summarised with the day
        self.resets = DayResets(records, say, scene_of) if auto_reset else None  # --auto-reset
        self._last_failure = ""  # why the last attempt failed (a node died, a timeout, a reset the graph lost)

    def elapsed_s(self) -> float:
        return self.clock() - self._began

    def run(self) -> int:
        """Run the rest of the day; returns the command's exit code (Ctrl-C propagates, after the summary)."""
        stopped = STOPPED
        try:
            stopped = self._run()
            return EXIT_CODES[stopped]
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            stopped = f"error: {exc}"
            raise
        finally:
            self.records.append(RUN_STOPPED, reason=stopped, finished=self.progress.done, planned=len(self.order))
            self.write_summary(stopped)

    def _run(self) -> str:
        pending = deque(d for d in self.order if d.key not in self.records.state.finished)
        if not pending:
            self.say("every planned episode has finished already")
            return COMPLETE
        if self.resets is not None:
            self.resets.resume()
        up = self._start_graph()
        if up is None:
            return FAULTS
        self.say(f"graph up: {up}")
        self.sampler.sample()
        self.sampler.start()
        try:
            while pending:
                stop = self._stop_before_next(len(pending))
                if stop is not None:
                    return stop
                if self._episode(pending[0]):
                    pending.popleft()
                if self._paused is not None:
                    self.say(f"paused: the operator is needed: {self._paused}; start the day again on the same "
                             f"--out once done (node logs in {self.out / 'logs'})")
                    return PAUSED
                if self._failures > self.settings.max_restarts:
                    if not self._gave_up:  # the graph did not come up again: said so already
                        self.say(f"stopping: {self._failures} attempts in a row failed without an episode finished "
                                 f"(last: {self._last_failure}); node logs in {self.out / 'logs'}")
                    return FAULTS
            return COMPLETE
        finally:
            self.sampler.stop()
            self.sampler.sample()
            self.graph.stop()

    def _start_graph(self, restart: bool = False) -> str | None:
        """Bring the graph up (again); None once it failed more than ``max_restarts`` times in a row."""
        if restart and self.resets is not None:
            self.resets.scene_lost()  # a new simulator or twin: the scene is built anew
        while True:
            try:
                return self.graph.restart() if restart else self.graph.start()
            except LadderError as exc:
                self._failures += 1
                if self._failures > self.settings.max_restarts:
                    self.say(f"stopping: the graph did not come up {self._failures} times in a row (last: {exc}); "
                             f"node logs in {self.out / 'logs'}")
                    self._gave_up = True
                    return None
                self.say(f"  the graph did not come up ({exc}); trying again")
                restart = True

    def _stop_before_next(self, remaining: int) -> str | None:
        mean = self.progress.mean_episode_s
        if mean is not None and self.resets is not None:
            mean += self.resets.mean_reset_s()  # each episode brings its reset
        if not self.budget.next_fits(self.elapsed_s(), mean):
            self.say(self.budget.stop_line(self.elapsed_s(), mean, remaining))
            return BUDGET
        finished = [e.get("episode_id", "") for e in self.records.state.finished.values()]
        self.guard.saw_episode(self.sizes.largest(finished))
        short = self.guard.shortfall(free_bytes(self.out))
        if short is not None:
            self.say(f"stopping: not enough disk for the next episode on {self.out}'s filesystem: {short}; "
                     f"{remaining} episodes not run (free some space and start the day again on the same --out) "
                     f"(see {NOT_ENOUGH_DISK})")
            return DISK
        return None

    def _episode(self, planned: DayEpisode) -> bool:
        """Run one planned episode; True when it finished (it counts), False when it must run again."""
        e, state = planned.entry, self.records.state
        attempt = state.attempts.get(e.key, 0) + 1
        start = self.resets.start_fields(e.task_id) if self.resets is not None else {}
        self.records.append(STARTED, key=e.key, position=planned.position, block=planned.block, attempt=attempt,
                            task_id=e.task_id, variant=e.variant, layout=e.layout, seed=e.seed, **start)
        try:
            again = f", attempt {attempt}" if attempt > 1 else ""
            scene = f"the scene {start['start_after']} left" if start else f"layout {e.layout}"
            self.say(f"  > {planned.position + 1}/{len(self.order)} {e.task_id} · {e.variant} · {scene} · "
                     f"seed {e.seed} (block {planned.block + 1}{again})")
            result = self.graph.episode(e.task_id, variant=e.variant, layout=e.layout, seed=e.seed,
                                        timeout_s=self.settings.episode_timeout_s, **start)
        except KeyboardInterrupt:
            self.records.append(INTERRUPTED, key=e.key, position=planned.position, attempt=attempt, kind="stopped",
                                reason="the day was stopped during the episode (Ctrl-C or SIGTERM)")
            raise
        except OperatorNeeded as exc:
            self.records.append(INTERRUPTED, key=e.key, position=planned.position, attempt=attempt,
                                kind="operator needed", reason=str(exc))
            self.say(f"  ! {e.task_id}: the operator is needed ({exc})")
            self._paused = str(exc)
            return False
        except LadderError as exc:
            kind = {"NodeDied": "node died", "EpisodeTimeout": "timeout"}.get(type(exc).__name__, "graph error")
            self.records.append(INTERRUPTED, key=e.key, position=planned.position, attempt=attempt, kind=kind,
                                reason=str(exc))
            self._failures += 1
            self._last_failure = str(exc)
            self.say(f"  ! {e.task_id}: interrupted ({exc})")
            if self._failures > self.settings.max_restarts:
                return False
            up = self._start_graph(restart=True)
            if up is not None:
                self.say(f"  graph up again: {up}")
            return False
        record = result.record
        if is_void(record.get("finish_reason")):
            self.records.append(INTERRUPTED, key=e.key, position=planned.position, attempt=attempt, kind="void",
                                reason=str(record.get("finish_reason")), episode_id=result.episode_id)
            if not str(record.get("finish_reason")).startswith("aborted: operator"):
                self._failures += 1  # the graph's own interruption, not the operator's choice
                self._last_failure = str(record.get("finish_reason"))
            self.say(f"  ! {e.task_id}: {record.get('finish_reason')}; it runs again")
            if self.resets is not None:  # what the episode moved goes back before it runs again
                self._reset_after(planned, result.episode_id)
            return False
        self.records.append(FINISHED, key=e.key, position=planned.position, attempt=attempt,
                            episode_id=result.episode_id, wall_s=round(result.wall_s, 3),
                            success=bool(record.get("success")), scored=bool(record.get("scored")),
                            finish_reason=record.get("finish_reason"), record=record)
        self._failures = 0
        self.progress.add(result.wall_s, bool(record.get("success")), bool(record.get("scored")))
        outcome = (("success" if record.get("success") else "failure")
                   + f", {record.get('subgoals_done', 0)}/{record.get('horizon', 0)} subgoals"
                   if record.get("scored") else "unscored")
        self.say(f"    {result.episode_id}: {outcome}, {record.get('finish_reason')}, {result.wall_s:.1f} s")
        if self.resets is not None:
            self._reset_after(planned, result.episode_id)
        self.say(f"  {self.progress.line(self.elapsed_s())}")
        return True

    def _reset_after(self, planned: DayEpisode, task_episode_id: str) -> None:
        """The reset of the scene task episode ``task_episode_id`` left; a failure pauses the day (``_paused``).

        A reset that ends by its own rules (its plan done, its budget spent) unconfirmed runs again from the scene
        as it is, up to ``reset_tries`` resets in all, before the day pauses for the operator: a robot's next try
        is cheaper than a person. A reset the graph ended before its own rules did (a void one, a robot fault, a node
        restarted under it) and that the counts do not confirm runs again too (at most ``max_restarts`` more
        times); one the graph lost altogether is given up once the graph is up again: the next episode is built
        from its layout.
        """
        e, resets = planned.entry, self.resets
        assert resets is not None
        interrupted = tries = 0
        while True:
            attempt = interrupted + tries + 1
            self.say(f"    reset after {task_episode_id}" + (f" (attempt {attempt})" if attempt > 1 else ""))
            try:
                # Each reset of the scene draws anew (a policy's noise, a scripted stand-in's slips): the same seed
                # would replay the try that just failed.
                result = self.graph.episode(e.task_id, variant=e.variant, layout=e.layout,
                                            seed=e.seed + RESET_SEED_STRIDE * (attempt - 1),
                                            timeout_s=self.settings.episode_timeout_s,
                                            **resets.reset_fields(task_episode_id))
            except KeyboardInterrupt:
                resets.write(e.key, task_episode_id, RESET_INTERRUPTED, reason="the day was stopped during the reset")
                raise
            except OperatorNeeded as exc:
                resets.write(e.key, task_episode_id, RESET_INTERRUPTED, reason=str(exc))
                self._pause_for_reset(e.key, task_episode_id, str(exc))
                return
            except LadderError as exc:
                if type(exc).__name__ in ("NodeDied", "EpisodeTimeout"):
                    resets.write(e.key, task_episode_id, RESET_INTERRUPTED, reason=str(exc))
                    self._failures += 1
                    self._last_failure = str(exc)
                    self.say(f"    ! the reset was interrupted ({exc}); the next episode is built from its layout")
                    if self._failures <= self.settings.max_restarts:
                        up = self._start_graph(restart=True)
                        if up is not None:
                            self.say(f"  graph up again: {up}")
                    return
                reason = str(exc)  # refused: the reset cannot be planned (a count unread, no region with room)
                resets.write(e.key, task_episode_id, NOT_PLANNED, reason=reason)
                self._pause_for_reset(e.key, task_episode_id, reason)
                return
            record = result.record
            outcome, reason = reset_outcome(record)
            if outcome == NOT_CONFIRMED and ended_from_outside(record):
                resets.write(e.key, task_episode_id, RESET_INTERRUPTED, reason=str(record.get("finish_reason")),
                             episode_id=result.episode_id, wall_s=result.wall_s, record=record)
                interrupted += 1
                if interrupted > self.settings.max_restarts:
                    reason = f"the reset after episode {task_episode_id} was interrupted {interrupted} times"
                    self._pause_for_reset(e.key, task_episode_id, reason)
                    return
                self.say(f"    ! the reset ended {record.get('finish_reason')}; it runs again")
                continue
            resets.write(e.key, task_episode_id, outcome, reason=reason, episode_id=result.episode_id,
                         wall_s=result.wall_s, record=record, task_id=e.task_id)
            moves = len((record.get("reset") or {}).get("moves") or [])
            self.say(f"    {result.episode_id}: reset {outcome}, {moves} objects moved, {result.wall_s:.1f} s")
            if outcome == NOT_CONFIRMED:
                tries += 1
                if tries < self.settings.reset_tries:
                    self.say(f"    ! {reason}; the reset runs again from the scene as it is "
                             f"(try {tries + 1} of {self.settings.reset_tries})")
                    continue
                self._pause_for_reset(e.key, task_episode_id, reason)
            return

    def _pause_for_reset(self, key: str, task_episode_id: str, reason: str) -> None:
        assert self.resets is not None
        self.resets.pause(key, task_episode_id, reason)
        self._paused = reason

    def write_summary(self, stopped: str) -> dict:
        """``day_summary.json``, ``episodes.jsonl`` (the finished records, as ``ladder-ros run`` writes them) and
        the table on the terminal."""
        state = self.records.state
        finished = sorted(state.finished.values(), key=lambda ev: ev.get("t", 0))
        # The records in the order they were made: each counted task episode and each reset that ran.
        recorded = [e for e in self.records.events if (e.get("event") == FINISHED and state.finished.get(
            e.get("key")) is e) or (e.get("event") == RESET and e.get("record"))]
        summary = build_summary(meta={**self.meta, "runs": self.records.run, "stopped": stopped,
                                      "elapsed_s": round(self.elapsed_s(), 1)},
                                planned=len(self.order), finished=finished, interrupted=state.interrupted,
                                resources=resource_summary(read_samples(self.out / RESOURCES_FILE)),
                                disk_bytes=folder_bytes(self.out))
        if self.chaos_file is not None:
            summary["chaos"] = chaos_summary(read_chaos(self.chaos_file))
        if self.resets is not None or state.resets:
            summary["auto_reset"] = auto_reset_summary(finished, state.resets, state.paused, state.interventions)
        write_atomic(self.out / "episodes.jsonl", "".join(json.dumps(ev.get("record") or {}) + "\n" for ev in recorded))
        write_atomic(self.out / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        self.say(render_summary(summary))
        if "chaos" in summary:
            self.say(f"  {render_chaos(summary['chaos'])}")
        if "auto_reset" in summary:
            self.say(f"  {render_auto_reset(summary['auto_reset'])}")
        return summary
