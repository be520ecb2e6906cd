"""The episode client: starts episodes on a running graph and collects their results.

``ladder-ros run``, ``ladder-ros parity``, the benchmarks and the graph tests drive a graph
through this client, the same way the operator panel does: an :class:`EpisodeCommand` on
``episode/command`` and the latched ``episode/status`` back. It never calls into a node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rclpy.executors import Executor
from rclpy.node import Node
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import (
    ABORTED,
    FINISHED,
    RUNNING,
    START,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeStatus,
    SchemaError,
)
from ladder_ros.nodes import topics
from ladder_ros.nodes.runtime import message_class, publisher, subscription
from ladder_ros.nodes.start_resends import START_RESEND_S, StartResends
from ladder_ros.interface_conversions import document_from_msg, document_to_msg


class EpisodeTimeout(LadderError):
    """An episode did not end within its time limit."""


@dataclass(frozen=True)
class EpisodeOutcome:
    episode_id: str
    state: str  # finished or aborted
    result: dict
    wall_s: float


class EpisodeClient(Node):
    """Starts one episode at a time and waits for its final status."""

    def __init__(self, *, node_name: str = "episode_client", namespace: str = ""):
        super().__init__(node_name, namespace=namespace)
        self._command_pub = publisher(self, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND)
        subscription(self, message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS, self._on_status)
        subscription(self, message_class(topics.COMMAND_REPLY), topics.COMMAND_REPLY, self._on_reply)
        self.status: EpisodeStatus | None = None
        self.replies: dict[str, EpisodeCommandReply] = {}  # episode id -> the orchestrator's reply to our start
        self._count = 0
        self._started: dict[str, float] = {}
        self.current: str | None = None  # the episode this client started last
        self._resends = StartResends()  # starts sent again until answered
        self.create_timer(START_RESEND_S / 4, self._resend_unanswered)

    def _on_status(self, msg: interfaces.EpisodeStatus) -> None:
        try:
            self.status = document_from_msg(msg, EpisodeStatus)
        except SchemaError as exc:
            self.get_logger().error(f"ignoring episode status: {exc}")
            return
        if self.status.state == RUNNING:  # it arrived, even if its reply did not
            self._resends.answered(self.status.episode_id)

    def _on_reply(self, msg: interfaces.EpisodeCommandReply) -> None:
        try:
            reply = document_from_msg(msg, EpisodeCommandReply)
        except SchemaError as exc:
            self.get_logger().error(f"ignoring a command reply: {exc}")
            return
        if reply.command == START and reply.episode_id in self._started:
            self._resends.answered(reply.episode_id)
            self.replies[reply.episode_id] = reply  # a repeat of an accepted start is accepted again

    def _resend_unanswered(self) -> None:
        for command in self._resends.due(time.monotonic()):
            self._command_pub.publish(document_to_msg(command))

    def spin_until(self, executor: Executor, condition, timeout_s: float, what: str, check=None) -> None:
        """Spin until ``condition()``; ``check()`` runs each turn and may raise (a node died)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if check is not None:
                check()
            if time.monotonic() > deadline:
                raise EpisodeTimeout(f"timed out after {timeout_s:.0f} s waiting for {what}")
            executor.spin_once(timeout_sec=0.05)

    def wait_for_graph(self, executor: Executor, timeout_s: float = 30.0) -> None:
        """Until the orchestrator's status is here and every node listens (discovery is done)."""
        listeners = ("orchestrator",)
        self.spin_until(executor, lambda: self.status is not None
                        and self._command_pub.get_subscription_count() >= len(listeners),
                        timeout_s, "the orchestrator")

    def start_episode(self, task_id: str, *, variant: str = "", layout: int = 0, seed: int = 0) -> str:
        """Ask the orchestrator to start an episode; returns its id (the orchestrator refuses a second one)."""
        self._count += 1
        episode_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{self._count:03d}-{task_id}-{variant or 'default'}-s{seed}"
        self.send_start(episode_id, task_id, variant=variant, layout=layout, seed=seed)
        return episode_id

    def send_start(self, episode_id: str, task_id: str, *, variant: str = "", layout: int = 0, seed: int = 0) -> None:
        """Publish a start command as given (the orchestrator checks it and replies).

        Sent again every ``START_RESEND_S`` while it is spun until the orchestrator answers or names the
        episode in its status (it takes a repeat as the same request). A start without an id is sent once.
        """
        self._started[episode_id] = time.monotonic()
        self.current = episode_id
        self.replies.pop(episode_id, None)  # the answer to this start, not to an earlier one with the same id
        command = EpisodeCommand(command=START, episode_id=episode_id, task_id=task_id, layout=layout, seed=seed,
                                 variant=variant)
        self._resends.sent(command, time.monotonic())
        self._command_pub.publish(document_to_msg(command))

    def wait_until_over(self, executor: Executor, episode_id: str, timeout_s: float = 600.0,
                        check=None) -> EpisodeOutcome:
        """Spin until the episode's final status (with its result) is in."""
        def over() -> bool:
            reply = self.replies.get(episode_id)
            if reply is not None and not reply.accepted:
                raise LadderError(f"episode {episode_id}: {reply.reason}")
            s = self.status
            return s is not None and s.episode_id == episode_id and s.state in (FINISHED, ABORTED) \
                and s.result is not None

        self.spin_until(executor, over, timeout_s, f"episode {episode_id}", check)
        assert self.status is not None and self.status.result is not None
        return EpisodeOutcome(episode_id=episode_id, state=self.status.state, result=self.status.result,
                              wall_s=time.monotonic() - self._started.get(episode_id, time.monotonic()))

    def run_episode(self, executor: Executor, task_id: str, *, variant: str = "", layout: int = 0, seed: int = 0,
                    timeout_s: float = 600.0, check=None) -> EpisodeOutcome:
        """Start an episode and spin until it is over; returns its final status and result."""
        episode_id = self.start_episode(task_id, variant=variant, layout=layout, seed=seed)
        return self.wait_until_over(executor, episode_id, timeout_s, check)
