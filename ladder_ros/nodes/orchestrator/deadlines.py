"""No episode waits forever: what the orchestrator does when an answer it waits for is late.

Checked every 50 ms by the node's watchdog timer, in this order:

* a start deferred for the policy is refused after ``policy_ready_wait_s`` (the policy gate's own deadline);
* a plan awaited from the planner is asked for again every ``verifier_retry_s`` and given up after
  ``planner_timeout_s`` (the episode is aborted);
* a finished episode's record waits at most ``score_timeout_s`` for the sim bridge's score and the
  policy's final report, and its final decision is resent every ``decision_resend_s`` meanwhile (a reset
  episode's record first waits for the counts that confirm it, which have the verifier's timers);
* the stall watchdog (:mod:`~ladder_ros.nodes.orchestrator.stall_watch`) names the missing input after
  ``stall_warn_s`` and aborts after ``stall_abort_s`` (not while the policy warms up, nor while a
  lockstep step holds for the verifier, which has its own timers);
* an unanswered verifier query is resent every ``verifier_retry_s``, the verifier reported
  unavailable (the queue is kept), and the episode aborted with ``verifier unavailable`` after
  ``verifier_abort_after_s``;
* lockstep: the latest decision is resent when the next step did not come for ``decision_resend_s``.

No rclpy here: everything it acts on is handed to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ladder_ros.nodes.orchestrator import stall_watch
from ladder_ros.nodes.orchestrator.episode import Episode
from ladder_ros.nodes.orchestrator.stall_watch import StallWatch
from ladder_ros.nodes.orchestrator.steps import StepDecider

if TYPE_CHECKING:
    from ladder_ros.nodes.orchestrator.policy_gate import PolicyGate


@dataclass(frozen=True)
class DeadlineLimits:
    """The orchestrator's time limits (s), from its parameters of the same names."""

    planner_timeout_s: float
    verifier_retry_s: float
    verifier_abort_after_s: float
    decision_resend_s: float
    score_timeout_s: float
    stall_warn_s: float
    stall_abort_s: float

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "DeadlineLimits":
        return cls(**{name: params[name] for name in cls.__dataclass_fields__})


class Deadlines:
    """Acts on every answer that is late (module docstring); :meth:`check` is the watchdog's tick."""

    def __init__(self, episode: Episode, steps: StepDecider, policy_gate: PolicyGate, stall: StallWatch,
                 limits: DeadlineLimits, *, lockstep: bool, logger,
                 resend_plan_request: Callable[[], None], plan_failed: Callable[[str], None],
                 publish_result: Callable[[dict | None], None], end_episode: Callable[[str], object],
                 confirming: Callable[[], bool] = lambda: False):
        """``resend_plan_request``, ``plan_failed(reason)``, ``publish_result(score)`` and ``end_episode(reason)``
        are what the orchestrator does about a late plan, a late record and a stalled or unanswered episode;
        ``confirming()`` says a reset episode's confirming counts are being asked (its record waits for them)."""
        self._confirming = confirming
        self._episode = episode
        self._steps = steps
        self._policy_gate = policy_gate
        self._stall = stall
        self.limits = limits
        self._lockstep = lockstep
        self._log = logger
        self._resend_plan_request = resend_plan_request
        self._plan_failed = plan_failed
        self._publish_result = publish_result
        self._end_episode = end_episode

    def check(self, now: float) -> None:
        """Act on whatever is overdue at ``now`` (monotonic seconds)."""
        limits, episode, steps = self.limits, self._episode, self._steps
        self._policy_gate.check_deadline(now)
        if not episode.running:
            return
        if episode.planning is not None:
            if now - episode.planning_since >= limits.planner_timeout_s:
                self._plan_failed(f"no plan within {limits.planner_timeout_s} s")
            elif now - episode.planning_sent >= limits.verifier_retry_s:
                self._resend_plan_request()  # the verifier node may have (re)started since
            return
        if episode.finished is not None:
            if self._confirming():
                return  # the counts have the verifier's timers; the score's own wait applies once they are in
            if now - episode.finished_at >= limits.score_timeout_s:
                missing = "the sim bridge's score" if self._lockstep and episode.score is None else \
                    "the policy's final report"
                self._log.warning(f"no {missing}; publishing the result without it")
                self._publish_result(episode.score)
            elif now - steps.decision_sent_at >= limits.decision_resend_s:
                steps.republish_last_decision()
            return
        if self._policy_gate.warming_up:
            self._stall.progressed(now)  # compile time never counts against an episode
        if not (self._lockstep and steps.awaiting is not None):  # a held query has the verifier's timers
            self._check_stall(now)
            if not episode.running:
                return
        request = steps.pending_request()
        if request is not None:
            if now - steps.request_first_sent >= limits.verifier_abort_after_s:
                self._log.error(f"no verifier answer for {limits.verifier_abort_after_s} s; aborting the episode")
                self._end_episode("verifier unavailable")
                return
            if now - steps.request_last_sent >= limits.verifier_retry_s:
                if episode.status.verifier_available:
                    self._log.warning(f"query {request.request['request_id']} unanswered for "
                                      f"{limits.verifier_retry_s} s: verifier unavailable; "
                                      "the queue is kept, resending")
                    episode.update_status(verifier_available=False, message="verifier unavailable")
                steps.resend_request(request)
        if self._lockstep and steps.awaiting is None and steps.last_decision is not None \
                and now - steps.decision_sent_at >= limits.decision_resend_s:
            steps.republish_last_decision()

    def _check_stall(self, now: float) -> None:
        due = self._stall.due(now)
        if not due:
            return
        what = self._steps.missing_input(now, self.limits.stall_warn_s)
        episode_id = self._episode.status.episode_id
        if due == stall_watch.WARN:
            self._log.warning(f"episode {episode_id}: no step for {self._stall.idle_s(now):.1f} s, "
                              f"waiting for {what}")
            self._episode.update_status(waiting_for=what, message=f"stalled: waiting for {what}")
        else:
            self._log.error(f"episode {episode_id}: no step for {self.limits.stall_abort_s} s; "
                            f"aborting (waiting for {what})")
            self._end_episode(f"stalled: no {what} within {self.limits.stall_abort_s:g} s")
