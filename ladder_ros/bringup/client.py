"""The episode client: starts episodes on a running graph and collects their results.

``ladder-ros run``, ``ladder-ros parity``, the benchmarks and the graph tests drive a graph
through this client, the same way the operator panel does: an :class:`EpisodeCommand` on
``episode/command`` and the latched ``episode/status`` back. It never calls into a node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import Executor
from rclpy.node import Node
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.errors import LadderError
from ladder_ros.core.reset import RESET_EPISODE, START_LAYOUT, TASK_EPISODE
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
from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, publisher, qos, subscription
from ladder_ros.runtime.start_resends import START_RESEND_S, StartResends
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

    def wait_for_graph(self, executor: Executor, timeout_s: float = 30.0, nodes: Sequence[str] = ()) -> None:
        """Until the orchestrator's status is here, it listens to this client's commands, and each node named
        in ``nodes`` is in the graph under this client's namespace (a policy node that joins after an episode
        started is told it missed the start, and ends it)."""
        listeners = ("orchestrator",)
        namespace = self.get_namespace()

        def present() -> list[str]:
            here = {name for name, ns in self.get_node_names_and_namespaces() if ns == namespace}
            return [name for name in nodes if name not in here]
        self.spin_until(executor, lambda: self.status is not None
                        and self._command_pub.get_subscription_count() >= len(listeners) and not present(),
                        timeout_s, "the orchestrator" + (f" and the nodes {', '.join(nodes)}" if nodes else ""))

    def wait_for_recorder(self, executor: Executor, timeout_s: float = 60.0,
                          recorder: str = "episode_recorder") -> None:
        """Until the recorder hears the whole graph: its diagnostics (1 Hz) say it matched every publisher of the
        topics it records, and it knows as many of them as this client sees (an episode started earlier could
        lose its first messages to discovery). Raises :class:`EpisodeTimeout` after ``timeout_s``."""
        heard: list[DiagnosticStatus] = []
        namespace = self.get_namespace()
        named = f"{namespace.rstrip('/')}/{recorder}: "  # the recorder's status names it fully
        sub = self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS.name, lambda m: heard.extend(
            s for s in m.status if s.name.startswith(named)), qos(topics.DIAGNOSTICS.qos))

        def publishers_seen() -> int:
            total = 0
            for name, _ in self.get_topic_names_and_types():
                if any(i.node_name == recorder and i.node_namespace == namespace
                       for i in self.get_subscriptions_info_by_topic(name)):
                    total += self.count_publishers(name)
            return total

        def hears_all() -> bool:
            if not heard:
                return False
            latest = heard[-1]
            values = {kv.key: kv.value for kv in latest.values}
            return latest.level == DiagnosticStatus.OK and values.get("publishers") == str(publishers_seen())
        try:
            self.spin_until(executor, hears_all, timeout_s, f"the {recorder}'s diagnostics saying it matched every "
                            "publisher of the graph")
        finally:
            self.destroy_subscription(sub)

    def start_episode(self, task_id: str, *, variant: str = "", layout: int = 0, seed: int = 0,
                      policy: str = "", kind: str = TASK_EPISODE, start: str = START_LAYOUT,
                      start_after: str = "") -> str:
        """Ask the orchestrator to start an episode under ``policy`` (one of the names on ``policy/status``;
        empty: the policy node's default); returns its id (the orchestrator refuses a second one). ``kind``,
        ``start`` and ``start_after``: a reset, or an episode that continues an earlier one's scene
        (:class:`~ladder_ros.messages.EpisodeCommand`)."""
        self._count += 1
        what = "reset" if kind == RESET_EPISODE else variant or "default"
        episode_id = (f"{time.strftime('%Y%m%dT%H%M%S')}-{self._count:03d}-{task_id}-{what}"
                      + (f"-{policy}" if policy else "") + f"-s{seed}")
        self.send_start(episode_id, task_id, variant=variant, layout=layout, seed=seed, policy=policy, kind=kind,
                        start=start, start_after=start_after)
        return episode_id

    def send_start(self, episode_id: str, task_id: str, *, variant: str = "", layout: int = 0, seed: int = 0,
                   policy: str = "", kind: str = TASK_EPISODE, start: str = START_LAYOUT,
                   start_after: str = "") -> None:
        """Publish a start command as given (the orchestrator checks it and replies).

        Sent again every ``START_RESEND_S`` while it is spun until the orchestrator answers or names the
        episode in its status (it takes a repeat as the same request). A start without an id is sent once.
        """
        self._started[episode_id] = time.monotonic()
        self.current = episode_id
        self.replies.pop(episode_id, None)  # the answer to this start, not to an earlier one with the same id
        command = EpisodeCommand(command=START, episode_id=episode_id, task_id=task_id, layout=layout, seed=seed,
                                 variant=variant, policy=policy, kind=kind, start=start, start_after=start_after)
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
                    timeout_s: float = 600.0, check=None, policy: str = "", **start: str) -> EpisodeOutcome:
        """Start an episode (under ``policy``; empty: the default; ``start``: its kind, start and start_after) and
        spin until it is over; returns its final status and result."""
        episode_id = self.start_episode(task_id, variant=variant, layout=layout, seed=seed, policy=policy, **start)
        return self.wait_until_over(executor, episode_id, timeout_s, check)
