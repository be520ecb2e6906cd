"""Start commands sent again until the orchestrator answers them (no rclpy here: the callers own the timer).

DDS does not promise that a subscriber has matched a publisher that already sees it, so the first
message of a client that just joined the graph can be lost (measured: a start published within a
second of a client's start-up, never received). The orchestrator takes a repeat of a start it has
accepted as the same request (it answers "already started"), so a start is sent again every
``START_RESEND_S`` until its reply arrives or the episode status names it as running. The episode
client (``ladder-ros run``, the tests) and the operator panel both use it.
"""

from __future__ import annotations

from ladder_ros.messages import START, EpisodeCommand

START_RESEND_S = 1.0  # project choice: well above a reply's round trip on a loaded machine (tens of ms)


class StartResends:
    """The start commands still unanswered, each with when it was last sent."""

    def __init__(self, period_s: float = START_RESEND_S):
        self.period_s = float(period_s)
        self._unanswered: dict[str, tuple[EpisodeCommand, float]] = {}

    def sent(self, command: EpisodeCommand, now: float) -> None:
        """``command`` went out at ``now``; a start that names its episode is kept until answered."""
        if command.command == START and command.episode_id:
            self._unanswered[command.episode_id] = (command, now)

    def answered(self, episode_id: str) -> None:
        """The orchestrator replied to the start of ``episode_id``, or its status names it."""
        self._unanswered.pop(episode_id, None)

    def due(self, now: float) -> list[EpisodeCommand]:
        """The starts last sent a full period ago or longer; each counts as sent again at ``now``."""
        again = []
        for episode_id, (command, sent) in list(self._unanswered.items()):
            if now - sent >= self.period_s:
                self._unanswered[episode_id] = (command, now)
                again.append(command)
        return again

    def __contains__(self, episode_id: str) -> bool:
        return episode_id in self._unanswered
