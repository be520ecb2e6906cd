"""The orchestrator node's timers: deadlines, resends and the stall watchdog.

A part of :class:`~ladder_ros.nodes.orchestrator.node.OrchestratorNode`, split out by responsibility: it works on
the node's state (``self.status``, ``self.orchestrator``, the publishers) that the node sets up.
"""

from __future__ import annotations

import time

from ladder_ros.messages import RUNNING
from ladder_ros.nodes.orchestrator import stall_watch
from ladder_ros.nodes.orchestrator.steps import PRIVILEGED
from ladder_ros.interface_conversions import document_to_msg


class EpisodeTimers:
    """Timers: the planner and verifier deadlines and resends, the stall watchdog, decision resends."""

    def _watchdog(self) -> None:
        now = time.monotonic()
        self.policy_gate.check_deadline(now)
        if self.status.state != RUNNING:
            return
        if self._planning is not None:
            if now - self._planning_since >= self.params["planner_timeout_s"]:
                self._plan_failed(f"no plan within {self.params['planner_timeout_s']} s")
            elif now - self._planning_sent >= self.params["verifier_retry_s"]:
                self._send_plan_request()  # the verifier node may have (re)started since
            return
        if self._finished_decision is not None:
            if now - self._finished_at >= self.params["score_timeout_s"]:
                missing = "the sim bridge's score" if self.lockstep and self._score is None else \
                    "the policy's final report"
                self.get_logger().warning(f"no {missing}; publishing the result without it")
                self._publish_result(self._score)
            elif now - self._decision_sent_at >= self.params["decision_resend_s"]:
                self._republish_last_decision()
            return
        if self.policy_gate.warming_up:
            self.stall.progressed(now)  # compile time never counts against an episode
        if not (self.lockstep and self._awaiting is not None):  # a held query has the verifier's timers
            self._check_stall(now)
            if self.status.state != RUNNING:
                return
        request = self._pending_request_doc()
        if request is not None:
            if now - self._request_first_sent >= self.params["verifier_abort_after_s"]:
                self.get_logger().error(f"no verifier answer for {self.params['verifier_abort_after_s']} s; "
                                        "aborting the episode")
                self.end_episode("verifier unavailable")
                return
            if now - self._request_last_sent >= self.params["verifier_retry_s"]:
                if self.status.verifier_available:
                    self.get_logger().warning(f"query {request.request['request_id']} unanswered for "
                                              f"{self.params['verifier_retry_s']} s: verifier unavailable; "
                                              "the queue is kept, resending")
                    self._publish_status(self._replace_status(verifier_available=False,
                                                              message="verifier unavailable"))
                self._send_request(request, first=False)
        if self.lockstep and self._awaiting is None and self._last_decision is not None \
                and now - self._decision_sent_at >= self.params["decision_resend_s"]:
            self._republish_last_decision()

    def _check_stall(self, now: float) -> None:
        due = self.stall.due(now)
        if not due:
            return
        if self.lockstep:
            what = self.stall.waiting_for_lockstep(self.aligner.next_step, PRIVILEGED in self.aligner.required)
        else:
            last = self.orchestrator.last_step if self.orchestrator is not None else -1
            what = self.stall.waiting_for_wall_clock(now, last + 1, self.params["stall_warn_s"])
        if due == stall_watch.WARN:
            self.get_logger().warning(f"episode {self.status.episode_id}: no step for "
                                      f"{self.stall.idle_s(now):.1f} s, waiting for {what}")
            self._publish_status(self._replace_status(waiting_for=what, message=f"stalled: waiting for {what}"))
        else:
            self.get_logger().error(f"episode {self.status.episode_id}: no step for {self.params['stall_abort_s']} s; "
                                    f"aborting (waiting for {what})")
            self.end_episode(f"stalled: no {what} within {self.params['stall_abort_s']:g} s")

    def _republish_last_decision(self) -> None:
        if self._last_decision is not None:
            self._decision_pub.publish(document_to_msg(self._last_decision))
            self._decision_sent_at = time.monotonic()
