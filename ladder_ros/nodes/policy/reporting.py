"""The policy node's readiness, reports and diagnostics.

A part of :class:`~ladder_ros.nodes.policy.node.PolicyNode`, split out by responsibility: it works on the node's
state (``self.episode``, ``self.policy``, ``self.warmup``, the publishers) that the node sets up.
"""

from __future__ import annotations

from ladder_ros.messages import EpisodeStatus
from ladder_ros.policies.executor import percentile
from ladder_ros.ros_conversions import diagnostics_to_msg


class PolicyReporting:
    """Readiness and reports: each episode's policy report on ``policy/status``, giving up on a failing server,
    and the node's diagnostics."""

    def _server_errors(self) -> int:
        client = getattr(self.provider.built_source, "client", None)
        return int(getattr(client, "server_errors", 0))

    def _episode_report(self) -> dict:
        if self.lockstep:
            report = self.policy.policy_report() if self.policy is not None else {}
        else:
            report = self.runner.episode_report()
        if report:
            report["warm_up_s"] = self.warmup.warm_up_s
            report["server_errors"] = self._server_errors() - self._errors_at_start
        return report

    def _final_report(self, episode_id: str) -> None:
        """The episode is over for the policy (its last decision came): its final report goes out now."""
        if self.episode is None or self.episode.episode_id != episode_id:
            return
        if self.runner is not None:
            self.runner.set_subgoal(None)  # no further control period counts
        self.status.report(episode_id, self._episode_report(), final=True)

    def _on_status_timer(self) -> None:
        self._begin_policy()
        episode = self.episode
        if episode is not None:
            self.status.report(episode.episode_id, self._episode_report())
            if self._policy_begun:
                self._give_up_if_failing(episode)
        self.status.tick()

    def _give_up_if_failing(self, episode: EpisodeStatus) -> None:
        """After too many error replies in a row the episode ends with the server's error as the reason."""
        give_up = getattr(self.provider.built_source, "give_up_reason", None)
        reason = give_up() if give_up is not None else None
        if reason is not None:
            self.warmup.failed(reason)
            self.episodes.request_abort(episode.episode_id, reason)

    def _publish_diagnostics(self) -> None:
        if self.runner is not None:
            stats = self.runner.stats()
            holding = stats["holding"]
        else:
            report = self.policy.report if self.policy else None
            stats = {"inference_ms_last": self._latency_ms[-1] if self._latency_ms else None,
                     "inference_ms_p50": percentile(self._latency_ms, 50),
                     "inference_ms_p99": percentile(self._latency_ms, 99),
                     "chunks": self.policy.chunks if self.policy else 0,
                     "held_actions": self.policy.holds if self.policy else 0,
                     "rejected_by_reason": dict(report.rejected) if report else {},
                     "seam_jump_max": dict(report.seam_max) if report else {},
                     "ood": dict(report.ood) if report else {}}
            holding = self.reasons.reason if self.reasons.kind else ""
        state, detail, _ = self.warmup.snapshot()
        stats["readiness"] = f"{state}: {detail}" if detail else state
        level = "warn" if holding or not self.warmup.ready else "ok"
        message = holding or ("acting" if self.warmup.ready else stats["readiness"])
        self._diagnostics_pub.publish(diagnostics_to_msg(
            f"{self.get_fully_qualified_name()}: {self.config.name}", self.config.name, level, message, stats,
            self.get_clock().now().nanoseconds))
