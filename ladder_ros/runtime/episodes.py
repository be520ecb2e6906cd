"""The episode a node serves: :class:`EpisodeFollower` follows the orchestrator's latched episode status.

Every node that keeps per-episode state uses it: it tells the node when a new episode starts and when it
ends. A node whose per-episode state cannot be rebuilt and that comes up while an episode is already
stepping (it was restarted) does not join it: it asks the orchestrator to end it, with the reason.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from ladder_ros.interface_conversions import document_from_msg, document_to_msg
from ladder_ros.messages import ABORT, RUNNING, WALL_CLOCK, EpisodeCommand, EpisodeStatus, SchemaError
from ladder_ros.runtime.endpoints import message_class, publisher, subscription
from ladder_ros.specs import topics


class EpisodeFollower:
    """Follows the orchestrator's latched episode status for a node.

    ``on_start(status)`` runs once per new episode id in state running; ``on_end(status)`` once when
    that episode's status turns finished or aborted. Malformed documents are logged and ignored.

    ``lost_on_restart``: what this node keeps per episode that a restart loses (e.g. "the simulator's
    state"). Given, a node that comes up while an episode has executed a step already (the first
    status it ever gets is a running one with ``step >= 1``: every stateful node took part in that
    step, so this one is a restart) does not join that episode: :meth:`request_abort` asks the
    orchestrator to end it with the reason, and the episode ends at once instead of continuing as a
    different episode. An episode still at its first step is joined as usual (a node that came up
    late, or one restarted before anything of it was executed), and so is, on the wall clock, an
    episode that began after this node came up (it only heard of it late: :meth:`_came_up_after`).
    """

    ABORT_RESEND_S = 0.5  # the command publisher may not be matched yet right after a (re)start

    def __init__(self, node: Node, on_start: Callable[[EpisodeStatus], None],
                 on_end: Callable[[EpisodeStatus], None] | None = None,
                 callback_group: CallbackGroup | None = None, *, lost_on_restart: str | None = None):
        self._node = node
        self._on_start = on_start
        self._on_end = on_end
        self._lost_on_restart = lost_on_restart
        self.current: EpisodeStatus | None = None
        self.ended: set[str] = set()
        self.last: EpisodeStatus | None = None
        # True while handling an episode that was already running when this node came up (the
        # first status it ever got, from the latched topic): the node joins it mid-way.
        self.joined_late = False
        self._abort: tuple[str, str] | None = None  # (episode id, reason) asked for until it ends
        self._created_ns = time.time_ns()  # the wall clock, as the orchestrator stamps step 0 on the wall clock
        self._command_pub = publisher(node, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND)
        subscription(node, message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS, self._on_status,
                     callback_group=callback_group)
        node.create_timer(self.ABORT_RESEND_S, self._resend_abort, callback_group=callback_group)

    def _came_up_after(self, status: EpisodeStatus) -> bool:
        """Whether this node came up after ``status``'s episode began. On the wall clock step 0 is
        stamped with the orchestrator's time at the start, so a node that was up before it only
        heard of the episode late (discovery can take a moment on a busy machine) and joins it; in
        lockstep the step stamps are simulated time, and a step can only have been executed with
        every stateful node taking part."""
        if status.clock == WALL_CLOCK:
            return self._created_ns > status.origin_ns
        return True

    def request_abort(self, episode_id: str, reason: str) -> None:
        """Ask the orchestrator to end ``episode_id`` with ``reason`` (resent until its status says it ended)."""
        if self._abort is None or self._abort[0] != episode_id:
            self._node.get_logger().error(f"episode {episode_id}: asking the orchestrator to end it: {reason}")
        self._abort = (episode_id, reason)
        self._resend_abort()

    def _resend_abort(self) -> None:
        if self._abort is None:
            return
        episode_id, reason = self._abort
        if episode_id in self.ended or (self.last is not None and self.last.episode_id != episode_id):
            self._abort = None
            return
        self._command_pub.publish(document_to_msg(EpisodeCommand(command=ABORT, episode_id=episode_id,
                                                                 reason=reason)))

    def _on_status(self, msg: Any) -> None:
        try:
            status = document_from_msg(msg, EpisodeStatus)
        except SchemaError as exc:
            self._node.get_logger().error(f"ignoring episode status: {exc}")
            return
        first = self.last is None
        self.last = status
        if status.state == RUNNING:
            if self.current is None or status.episode_id != self.current.episode_id:
                if status.episode_id in self.ended:
                    return  # a stale repeat of an episode that is over
                self.current = status
                if first and status.step >= 1 and self._lost_on_restart is not None and self._came_up_after(status):
                    self.request_abort(status.episode_id, f"{self._node.get_name()} restarted mid-episode: "
                                       f"{self._lost_on_restart} is lost")
                    return
                self.joined_late = first
                try:
                    self._on_start(status)
                finally:
                    self.joined_late = False
            else:
                self.current = status
        elif status.state in ("finished", "aborted"):
            if status.episode_id in self.ended:
                return
            if self.current is None or status.episode_id != self.current.episode_id:
                self.ended.add(status.episode_id)
                return
            self.ended.add(status.episode_id)
            if self._on_end is not None:
                self._on_end(status)
