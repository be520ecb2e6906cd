"""The policy node's episode report, and ending an episode whose policy server keeps failing.

The orchestrator and the episode's record learn how the policy fared from the report that goes out on
``policy/status`` (:class:`~ladder_ros.nodes.policy.status.PolicyStatusPublisher`): held steps and refused
chunks by reason, inference latency, seam jumps, out-of-distribution counts, the warm-up time and the server's
error replies during the episode. :class:`EpisodeReporter` assembles that report from whichever executor acts
(lockstep or wall clock), and when the server has answered with errors too often in a row it marks the policy
not ready and asks the orchestrator to end the episode with the server's error, since holding still forever
would freeze it.
"""

from __future__ import annotations

from typing import Callable

from ladder_ros.nodes.policy.status import PolicyStatusPublisher
from ladder_ros.policies.warmup import WarmUp


class EpisodeReporter:
    """Sends each episode's policy report and ends the episode when the policy server keeps failing.

    ``source()`` is the policy's shared chunk source once built (None before, and for a policy built per
    episode): its client counts the server's error replies and its ``give_up_reason()`` says when to stop
    trying. ``report()`` is the acting executor's episode report so far; ``request_abort(episode_id, reason)``
    asks the orchestrator to end an episode.
    """

    def __init__(self, *, source: Callable[[], object | None], report: Callable[[], dict], warmup: WarmUp,
                 status: PolicyStatusPublisher, request_abort: Callable[[str, str], None]):
        self._source = source
        self._report = report
        self._warmup = warmup
        self._status = status
        self._request_abort = request_abort
        self._errors_at_start = 0

    def begin(self) -> None:
        """The episode's policy is built: the server's error replies count from here."""
        self._errors_at_start = self._server_errors()

    def episode_report(self) -> dict:
        """The report so far, with the warm-up time and the server's error replies in this episode."""
        report = self._report()
        if report:
            report["warm_up_s"] = self._warmup.warm_up_s
            report["server_errors"] = self._server_errors() - self._errors_at_start
        return report

    def send(self, episode_id: str, *, final: bool = False) -> None:
        """The report on ``policy/status`` (``final``: the episode is over for the policy: it goes out now)."""
        self._status.report(episode_id, self.episode_report(), final=final)

    def give_up_if_failing(self, episode_id: str) -> None:
        """After too many error replies in a row the episode ends with the server's error as the reason."""
        give_up = getattr(self._source(), "give_up_reason", None)
        reason = give_up() if give_up is not None else None
        if reason is not None:
            self._warmup.failed(reason)
            self._request_abort(episode_id, reason)

    def _server_errors(self) -> int:
        client = getattr(self._source(), "client", None)
        return int(getattr(client, "server_errors", 0))
