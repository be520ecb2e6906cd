"""The orchestrator's episode: the one under way (or the last one), held in one place.

Everything the orchestrator knows about its episode lives here: the latched ``episode/status``
(each change published with the next ``seq``), the task, the core orchestrator that runs its
queue, where its plan came from, the plan it still waits for, the latest safety counts, the
simulator's score, and, once its rules or an operator ended it, the final decision. It also keeps
what a new episode must not repeat: the ids taken and the stamp of the last end (step stamps never
run backwards across episodes, ``ladder_ros.runtime.step_sync``). The objects that start, step and
end an episode share this one object instead of each other's attributes. No rclpy here.
"""

from __future__ import annotations

import time
from typing import Callable

from ladder_ros.core.orchestrator import Orchestrator, Variant
from ladder_ros.core.record import REFERENCE
from ladder_ros.core.task import Task
from ladder_ros.messages import FINISHED, RUNNING, DecisionDoc, EpisodeStatus, PlanRequestDoc


class Episode:
    """The current episode's status and run, and the ids and clock a later one must not reuse."""

    def __init__(self, status: EpisodeStatus, publish: Callable[[EpisodeStatus], None]):
        """``status``: the idle status before any episode; ``publish`` sends a status on ``episode/status``."""
        self.status = status
        self._publish = publish
        self.task: Task | None = None
        self.orchestrator: Orchestrator | None = None  # None while the plan is awaited
        self.variant = Variant.PROPRIO_VERIFIER
        self.plan_record: dict = {"source": REFERENCE}  # where the plan came from, for the record
        self.planning: PlanRequestDoc | None = None  # the plan request this episode waits for
        self.planning_since = 0.0  # monotonic: when the plan was first asked for
        self.planning_sent = 0.0  # monotonic: when the plan request last went out
        self.started_wall = 0.0  # monotonic: when the episode started
        self.safety_counts: dict = {}  # the latest counts of the episode's safety interventions
        self.score: dict | None = None  # the sim bridge's score of the finished episode
        self.interrupted = False  # ended by a signal to the orchestrator
        self.end_state = FINISHED  # the state its final status takes (aborted when ended from outside)
        self.finished: DecisionDoc | None = None  # the final decision, once the episode is over
        self.finished_at = 0.0  # monotonic: when the final decision went out
        self.last_end_ns = 0  # the stamp of the last episode's final step
        self.used_ids: set[str] = set()
        self.changed = False  # something the journal keeps changed since it was last written

    # ------------------------------------------------------------------ the status
    @property
    def running(self) -> bool:
        return self.status.state == RUNNING

    def is_current(self, episode_id: str) -> bool:
        return episode_id == self.status.episode_id

    def replace_status(self, **changes) -> EpisodeStatus:
        """The status with ``changes`` and the next ``seq`` (not yet published)."""
        data = self.status.to_dict()
        data.update(changes)
        data["seq"] = self.status.seq + 1
        return EpisodeStatus.from_dict(data)

    def publish_status(self, status: EpisodeStatus) -> None:
        self.status = status
        self._publish(status)
        self.changed = True

    def update_status(self, **changes) -> None:
        """Publish the status with ``changes``."""
        self.publish_status(self.replace_status(**changes))

    def step_stamp_ns(self, step: int) -> int:
        return self.status.step_stamp_ns(step)

    # ------------------------------------------------------------------ the run
    def take_id(self, episode_id: str) -> None:
        """``episode_id`` is used: no later start may take it (its recording and record are named after it)."""
        self.used_ids.add(episode_id)

    def begin(self, task: Task, orchestrator: Orchestrator | None, variant: Variant, plan_record: dict,
              now: float) -> None:
        """A new episode starts at ``now`` (its status follows through :meth:`publish_status`)."""
        self.task, self.orchestrator, self.variant = task, orchestrator, variant
        self.plan_record = plan_record
        self.finished = None
        self.end_state = FINISHED
        self.started_wall = now
        self.safety_counts = {}
        self.score = None
        self.interrupted = False

    def wait_for_plan(self, request: PlanRequestDoc, now: float) -> None:
        self.planning, self.planning_since = request, now

    def record_safety(self, episode_id: str, counts: dict) -> None:
        """The driver's latest intervention counts, kept for the record of the running episode."""
        if self.is_current(episode_id) and self.running:
            self.safety_counts = dict(counts)

    def record_score(self, episode_id: str, score: dict) -> bool:
        """The sim bridge's score of the finished, running episode; True when it was that episode's."""
        if self.finished is not None and self.is_current(episode_id) and self.running:
            self.score = score
            return True
        return False

    def finish(self, decision: DecisionDoc, stamp_ns: int, now: float) -> None:
        """The final decision went out at ``now``; ``stamp_ns`` is its step's stamp."""
        self.finished = decision
        self.finished_at = now
        self.last_end_ns = stamp_ns

    def journal_data(self) -> dict:
        """What the journal keeps of the episode (:class:`~ladder_ros.nodes.orchestrator.journal.EpisodeJournal`)."""
        orchestrator = self.orchestrator
        return {"status": self.status.to_dict(),
                "events": [e.to_dict() for e in orchestrator.events] if orchestrator is not None else [],
                "orchestration": orchestrator.summary() if orchestrator is not None else {},
                "plan": self.plan_record,
                "started_wall_s": time.time() - (time.monotonic() - self.started_wall)}
