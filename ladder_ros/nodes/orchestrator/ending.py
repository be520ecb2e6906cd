"""The orchestrator node's end of an episode: the record, a stop by signal, the journal.

A part of :class:`~ladder_ros.nodes.orchestrator.node.OrchestratorNode`, split out by responsibility: it works on
the node's state (``self.status``, ``self.orchestrator``, the publishers) that the node sets up.
"""

from __future__ import annotations

import time

from rclpy.duration import Duration
from rclpy.executors import Executor
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.orchestrator import Decision
from ladder_ros.core.record import graph_record, interrupted_reason
from ladder_ros.messages import (
    ABORTED,
    RUNNING,
    EpisodeScoreDoc,
    EpisodeStatus,
    SchemaError,
)
from ladder_ros.runtime.endpoints import received_document
from ladder_ros.runtime.process import spin_for

LAST_WORD_S = 2.0  # on shutdown: how long the final status of an interrupted episode may take to go out


class EpisodeEnding:
    """The end of an episode: its record once the simulator's score and the policy's final report are in,
    a stop by signal, and the journal that lets a restarted orchestrator end an episode it was killed in."""

    def _finish(self, decision: Decision) -> None:
        assert self.orchestrator is not None
        step = max(self.orchestrator.last_step, 0)
        stamp = self.status.step_stamp_ns(step)
        self._publish_decision(step, stamp, decision, summary=self.orchestrator.summary())
        self._finished_decision = self._last_decision
        self._finished_at = time.monotonic()
        self._last_end_ns = stamp
        self.aligner.stop()
        self._maybe_publish_result()

    def _on_score(self, msg: interfaces.EpisodeScore) -> None:
        doc = received_document(self, msg, EpisodeScoreDoc, "episode score")
        if doc is None:
            return
        if self._finished_decision is not None and doc.episode_id == self.status.episode_id \
                and self.status.state == RUNNING:
            self._score = doc.score
            self._maybe_publish_result()

    def _maybe_publish_result(self) -> None:
        """The record goes out once the simulator's score (lockstep) and the policy's final report are in."""
        if self._finished_decision is None or self.status.state != RUNNING:
            return
        score_due = self.lockstep and self.params["score_timeout_s"] > 0.0 and self._score is None
        if not score_due and self.policy_gate.final_report_in(self.status.episode_id):
            self._publish_result(self._score)

    def _publish_result(self, score: dict | None) -> None:
        orchestrator, task = self.orchestrator, self.task
        assert orchestrator is not None and task is not None
        safety = dict(score["safety"]) if score and "safety" in score else {"counts": dict(self._safety_counts)}
        record = graph_record(
            self.status.to_dict(), events=[e.to_dict() for e in orchestrator.events],
            orchestration=orchestrator.summary(), finish_reason=orchestrator.finish_reason,
            last_step=orchestrator.last_step, score=score, wall_s=time.monotonic() - self._started_wall,
            preset=self.preset.name, preset_options=self.preset.options, plan=self._plan_record,
            policy=self.policy_gate.report_for(self.status.episode_id),
            extra={"safety": safety, "interrupted": self._interrupted})
        self._publish_status(self._replace_status(state=self._end_state, finish_reason=orchestrator.finish_reason,
                                                  result=record, step=orchestrator.last_step, instruction=None,
                                                  pending_request=None))
        self._write_journal()
        self.get_logger().info(f"episode {self.status.episode_id} over: {orchestrator.finish_reason}"
                               + (f", success {record['success']}, {record['subgoals_done']}/{task.horizon} subgoals"
                                  if score else " (no privileged score)"))

    def on_shutdown(self, executor: Executor) -> None:
        """SIGINT/SIGTERM: end a running episode as interrupted, with its final status and record out."""
        if self.status.state != RUNNING:
            return
        if self._finished_decision is None:  # else it ended by its own rules and waits for its score
            self._interrupted = True
            self.end_episode("interrupted: the orchestrator was stopped")
        wait = min(self.params["score_timeout_s"], LAST_WORD_S) if self.lockstep else 0.0
        spin_for(executor, wait, until=lambda: self.status.state != RUNNING)  # the bridge's score, if it is up
        if self.status.state == RUNNING and self.orchestrator is not None:
            self._publish_result(None)
        self._status_pub.wait_for_all_acked(Duration(seconds=LAST_WORD_S))

    def _journal_data(self) -> dict:
        orchestrator = self.orchestrator
        return {"status": self.status.to_dict(),
                "events": [e.to_dict() for e in orchestrator.events] if orchestrator is not None else [],
                "orchestration": orchestrator.summary() if orchestrator is not None else {},
                "plan": self._plan_record,
                "started_wall_s": time.time() - (time.monotonic() - self._started_wall)}

    def _write_journal(self) -> None:
        self._journal_dirty = False
        if not self.journal.write(**self._journal_data()):
            self.get_logger().warning(f"cannot write the journal {self.journal.path}: {self.journal.error}",
                                      throttle_duration_sec=60.0)

    def _write_journal_if_dirty(self) -> None:
        if self._journal_dirty and self.status.state == RUNNING:
            self._write_journal()

    def _end_journalled_episode(self) -> bool:
        """At start: an episode the journal says was running was cut short by a crash; end it properly.

        Publishes that episode's final status (aborted, record marked ``interrupted``, events and
        queue as last journalled), so the nodes and clients that follow it see it end. True when it did.
        """
        data = self.journal.read()
        if data is None:
            if self.journal.error:
                self.get_logger().warning(self.journal.error)
            return False
        try:
            status = EpisodeStatus.from_dict(data["status"])
        except SchemaError as exc:
            self.get_logger().warning(f"ignoring the journal {self.journal.path}: {exc}")
            return False
        self._used_ids.add(status.episode_id)
        if status.state != RUNNING:
            return False
        reason = interrupted_reason("the orchestrator was killed mid-episode and restarted")
        record = graph_record(status.to_dict(), events=list(data.get("events") or []),
                              orchestration=dict(data.get("orchestration") or {}), finish_reason=reason,
                              last_step=status.step, score=None,
                              wall_s=max(0.0, time.time() - float(data.get("started_wall_s") or time.time())),
                              preset=self.preset.name, preset_options=self.preset.options,
                              plan=data["plan"] if isinstance(data.get("plan"), dict) else None,
                              extra={"interrupted": True})
        final = EpisodeStatus.from_dict({**status.to_dict(), "state": ABORTED, "seq": status.seq + 1,
                                         "finish_reason": reason, "result": record, "instruction": None,
                                         "pending_request": None, "message": reason})
        self.get_logger().error(f"episode {status.episode_id} was running when this orchestrator's predecessor "
                                f"stopped without ending it; publishing it as {reason}")
        # The journal's step lags the graph; no step of that episode can be stamped after its
        # budget, so the next origin goes past that (step stamps never run backwards, step_sync).
        self._last_end_ns = status.step_stamp_ns(max(status.step, status.budget_steps + 1))
        self._publish_status(final)
        self._write_journal()
        return True
