"""An episode's end as the graph sees it: the final status with the episode's record.

Once the final decision went out (by the episode's own rules or from outside), the record waits for
what is still to come: in simulation the sim bridge's privileged score, and the policy's report
marked final whenever the policy reports on the episode (:mod:`~ladder_ros.nodes.orchestrator.policy_gate`);
the deadlines publish it without them after ``score_timeout_s``. A reset episode's record also waits for the
verifier's counts that confirm it (:mod:`~ladder_ros.nodes.orchestrator.resets`) and carries them; an
unconfirmed reset's final status names what is out of place. Stopped by a signal, the
orchestrator ends a running episode as interrupted and gets its final status out before it goes.
The journal is written here too (:mod:`~ladder_ros.nodes.orchestrator.journal`): killed instead, the
next orchestrator finds the episode in it and publishes its final status, marked the same way.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from ladder_ros.core.presets import EmbodimentPreset
from ladder_ros.core.record import graph_record, interrupted_reason
from ladder_ros.messages import ABORTED, RUNNING, EpisodeStatus, SchemaError
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.journal import EpisodeJournal

if TYPE_CHECKING:
    from ladder_ros.nodes.orchestrator.outbox import Outbox
    from ladder_ros.nodes.orchestrator.policy_gate import PolicyGate
    from ladder_ros.nodes.orchestrator.resets import ResetEpisodes

LAST_WORD_S = 2.0  # on shutdown: how long the final status of an interrupted episode may take to go out


class EpisodeEnder:
    """Publishes a finished episode's final status and record, and keeps the journal (module docstring)."""

    def __init__(self, episode: Episode, outbox: Outbox, policy_gate: PolicyGate, journal: EpisodeJournal, *,
                 preset: EmbodimentPreset, lockstep: bool, score_timeout_s: float, logger,
                 resets: ResetEpisodes | None = None):
        self._episode = episode
        self._resets = resets
        self._outbox = outbox
        self._policy_gate = policy_gate
        self._journal = journal
        self._preset = preset
        self._lockstep = lockstep
        self._score_timeout_s = score_timeout_s
        self._log = logger

    # ------------------------------------------------------------------ the record
    def score(self, episode_id: str, score: dict) -> None:
        """The sim bridge's score of an episode (``sim/episode_score``)."""
        if self._episode.record_score(episode_id, score):
            self.maybe_publish_result()

    def maybe_publish_result(self) -> None:
        """The record goes out once the simulator's score (lockstep) and the policy's final report are in."""
        episode = self._episode
        if episode.finished is None or not episode.running:
            return
        orchestrator = episode.orchestrator
        if self._resets is not None and orchestrator is not None and self._resets.awaits_confirmation(
                episode.status, orchestrator.last_step, episode.last_end_ns, time.monotonic()):
            return  # a reset episode's record waits for the counts that confirm it
        score_due = self._lockstep and self._score_timeout_s > 0.0 and episode.score is None
        if not score_due and self._policy_gate.final_report_in(episode.status.episode_id):
            self.publish_result(episode.score)

    def publish_result(self, score: dict | None) -> None:
        """The episode's final status, its record with ``score`` (None: none came)."""
        episode = self._episode
        orchestrator, task = episode.orchestrator, episode.task
        assert orchestrator is not None and task is not None
        safety = dict(score["safety"]) if score and "safety" in score else {"counts": dict(episode.safety_counts)}
        episode_id = episode.status.episode_id
        reset = self._resets.record_section(episode_id) if self._resets is not None else {}
        out_of_place = reset.pop("reset_reason", "")
        record = graph_record(
            episode.status.to_dict(), events=[e.to_dict() for e in orchestrator.events],
            orchestration=orchestrator.summary(), finish_reason=orchestrator.finish_reason,
            last_step=orchestrator.last_step, score=score, wall_s=time.monotonic() - episode.started_wall,
            preset=self._preset.name, preset_options=self._preset.options, plan=episode.plan_record,
            policy=self._policy_gate.report_for(episode.status.episode_id),
            extra={"safety": safety, "interrupted": episode.interrupted, **reset})
        episode.update_status(state=episode.end_state, finish_reason=orchestrator.finish_reason, result=record,
                              step=orchestrator.last_step, instruction=None, pending_request=None,
                              **({"message": out_of_place} if out_of_place else {}))
        if self._resets is not None:
            self._resets.ended(episode_id)
        self.write_journal()
        self._log.info(f"episode {episode_id} over: {orchestrator.finish_reason}"
                       + (f", success {record['success']}, {record['subgoals_done']}/{task.horizon} subgoals"
                          if score else " (no privileged score)")
                       + (f"; reset confirmed: {reset['reset']['confirmed']}" if reset else ""))
        if out_of_place:
            self._log.error(out_of_place)

    def on_shutdown(self, end_episode: Callable[[str], object],
                    spin: Callable[[float, Callable[[], bool]], None]) -> None:
        """SIGINT/SIGTERM: end a running episode (with ``end_episode``) as interrupted, its final status out.

        ``spin(seconds, until)`` runs the node's callbacks for up to ``seconds`` or until ``until()`` holds.
        """
        episode = self._episode
        if not episode.running:
            return
        if episode.finished is None:  # else it ended by its own rules and waits for its score
            episode.interrupted = True
            end_episode("interrupted: the orchestrator was stopped")
        wait = min(self._score_timeout_s, LAST_WORD_S) if self._lockstep else 0.0
        spin(wait, lambda: not episode.running)  # the bridge's score, if it is up
        if episode.running and episode.orchestrator is not None:
            self.publish_result(None)
        self._outbox.wait_for_status_acked(LAST_WORD_S)

    # ------------------------------------------------------------------ the journal
    def write_journal(self) -> None:
        self._episode.changed = False
        if not self._journal.write(**self._episode.journal_data()):
            self._log.warning(f"cannot write the journal {self._journal.path}: {self._journal.error}",
                              throttle_duration_sec=60.0)

    def write_journal_if_changed(self) -> None:
        """The journal timer: rewrite the journal of a running episode that changed."""
        if self._episode.changed and self._episode.running:
            self.write_journal()

    def end_journalled_episode(self) -> bool:
        """At start: an episode the journal says was running was cut short by a crash; end it properly.

        Publishes that episode's final status (aborted, record marked ``interrupted``, events and
        queue as last journalled), so the nodes and clients that follow it see it end. True when it did.
        """
        data = self._journal.read()
        if data is None:
            if self._journal.error:
                self._log.warning(self._journal.error)
            return False
        try:
            status = EpisodeStatus.from_dict(data["status"])
        except SchemaError as exc:
            self._log.warning(f"ignoring the journal {self._journal.path}: {exc}")
            return False
        episode = self._episode
        episode.take_id(status.episode_id)
        if status.state != RUNNING:
            return False
        reason = interrupted_reason("the orchestrator was killed mid-episode and restarted")
        record = graph_record(status.to_dict(), events=list(data.get("events") or []),
                              orchestration=dict(data.get("orchestration") or {}), finish_reason=reason,
                              last_step=status.step, score=None,
                              wall_s=max(0.0, time.time() - float(data.get("started_wall_s") or time.time())),
                              preset=self._preset.name, preset_options=self._preset.options,
                              plan=data["plan"] if isinstance(data.get("plan"), dict) else None,
                              extra={"interrupted": True})
        final = EpisodeStatus.from_dict({**status.to_dict(), "state": ABORTED, "seq": status.seq + 1,
                                         "finish_reason": reason, "result": record, "instruction": None,
                                         "pending_request": None, "message": reason})
        self._log.error(f"episode {status.episode_id} was running when this orchestrator's predecessor "
                        f"stopped without ending it; publishing it as {reason}")
        # The journal's step lags the graph; no step of that episode can be stamped after its
        # budget, so the next origin goes past that (step stamps never run backwards, step_sync).
        episode.last_end_ns = status.step_stamp_ns(max(status.step, status.budget_steps + 1))
        episode.publish_status(final)
        self.write_journal()
        return True
