"""The orchestrator's side of ``policy/status``: episodes start on a ready policy, and records get its report.

* **Starts.** A start command that passed the orchestrator's own checks goes ahead when the policy
  is ready. While the policy warms up (a model loads, a JAX server compiles on its first
  inference) the start is deferred, for at most ``policy_ready_wait_s``, and goes ahead the moment
  the policy says ready; when the policy reports a server error, or the wait runs out, it is
  refused with the policy's status line as the reason in the command reply. A newer start replaces
  a deferred one (which is refused, saying so); a stop or abort cancels it. A graph without a
  policy node (no publisher of ``policy/status``) has nothing to wait for.
* **Stall watchdog.** While the policy reports it is warming up, the episode's steps do not count
  as stalled, and they count from zero once it is ready: compile time never counts against an
  episode.
* **Records.** The policy's report of each episode (held steps and refused chunks by reason,
  inference latency, seam jumps, out-of-distribution counts) goes into the episode's record; the
  record waits for the report marked final, as it waits for the simulator's score (at most
  ``score_timeout_s``), whenever the policy is reporting on that episode.
"""

from __future__ import annotations

import time
from typing import Callable

from rclpy.node import Node
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.messages import EpisodeCommand
from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, received_document, subscription
from ladder_ros.policies.status import SERVER_ERROR, WARMING_UP, PolicyStatusDoc

REPORTS_KEPT = 8  # episodes whose latest policy report is kept


class PolicyGate:
    """Start gating, stall holding and report collection for the orchestrator (see the module docstring)."""

    def __init__(self, node: Node, *, wait_s: float, start: Callable[[EpisodeCommand], None],
                 refuse: Callable[[EpisodeCommand, str], None], on_change: Callable[[], None]):
        self._node = node
        self.wait_s = wait_s
        self._start = start
        self._refuse = refuse
        self._on_change = on_change
        self.status: PolicyStatusDoc | None = None
        self.deferred: tuple[EpisodeCommand, float] | None = None
        self._reports: dict[str, PolicyStatusDoc] = {}
        self._topic = node.resolve_topic_name(topics.POLICY_STATUS.name)
        subscription(node, message_class(topics.POLICY_STATUS), topics.POLICY_STATUS, self._on_status)

    # ------------------------------------------------------------------ starts
    def _reporting(self) -> bool:
        """Whether a policy node reports here (its status came, or its publisher is known)."""
        return self.status is not None or self._node.count_publishers(self._topic) > 0

    def admit(self, command: EpisodeCommand) -> bool:
        """True when ``command`` may start now; else it was deferred or refused here."""
        status = self.status
        if not self._reporting() or (status is not None and status.ready):
            if self.deferred is not None and self.deferred[0] is command:
                self.deferred = None
            return True
        if status is not None and status.state == SERVER_ERROR:
            self._drop(command)
            self._refuse(command, f"the policy is not ready: {status.line}")
            return False
        if self.deferred is not None and self.deferred[0] is not command:
            older, _ = self.deferred
            self.deferred = None
            self._refuse(older, "replaced by a newer start command while the policy warmed up")
        if self.wait_s <= 0:
            self._refuse(command, f"the policy is not ready: {self._line()}")
            return False
        if self.deferred is None:
            self.deferred = (command, time.monotonic())
            self._node.get_logger().warning(f"start of {command.task_id or 'an episode'} deferred until the policy "
                                            f"is ready (at most {self.wait_s:g} s): {self._line()}")
        return False

    def is_repeat_of_deferred(self, command: EpisodeCommand) -> bool:
        """``command`` (a message just received) repeats the deferred start: it changes nothing."""
        return self.deferred is not None and self.deferred[0] == command

    def cancel(self, reason: str) -> bool:
        """Refuse a deferred start (a stop or abort came); True when there was one."""
        if self.deferred is None:
            return False
        command, _ = self.deferred
        self.deferred = None
        self._refuse(command, f"cancelled before it started: {reason}")
        return True

    def check_deadline(self, now: float) -> None:
        """Refuse a deferred start that waited ``wait_s`` for the policy (the orchestrator's watchdog)."""
        if self.deferred is not None and now - self.deferred[1] >= self.wait_s:
            command, _ = self.deferred
            self.deferred = None
            self._refuse(command, f"the policy was not ready within {self.wait_s:g} s: {self._line()}")

    def _drop(self, command: EpisodeCommand) -> None:
        if self.deferred is not None and self.deferred[0] is command:
            self.deferred = None

    def _line(self) -> str:
        return self.status.line if self.status is not None else "no status from the policy node yet"

    # ------------------------------------------------------------------ status
    def _on_status(self, msg: interfaces.PolicyStatus) -> None:
        doc = received_document(self._node, msg, PolicyStatusDoc, "policy status")
        if doc is None:
            return
        was_ready = self.status is not None and self.status.ready
        self.status = doc
        if doc.episode_id:
            self._reports.pop(doc.episode_id, None)
            self._reports[doc.episode_id] = doc
            while len(self._reports) > REPORTS_KEPT:
                self._reports.pop(next(iter(self._reports)))
        if doc.ready and not was_ready:
            self._node.get_logger().info(f"the policy {doc.policy} is ready"
                                         + (f" (warm-up {doc.warm_up_s:.1f} s)" if doc.warm_up_s else ""))
        if self.deferred is not None and doc.state != WARMING_UP:
            command, _ = self.deferred
            self._start(command)  # admitted now (ready) or refused with the policy's error
        self._on_change()

    @property
    def warming_up(self) -> bool:
        """The policy reports it is warming up: the episode's steps are not stalled meanwhile."""
        return self.status is not None and self.status.state == WARMING_UP

    # ------------------------------------------------------------------ records
    def report_for(self, episode_id: str) -> dict | None:
        """The policy's latest report of ``episode_id`` (None: none came)."""
        doc = self._reports.get(episode_id)
        if doc is None:
            return None
        return {**doc.report, "final": doc.final} if doc.report else None

    def final_report_in(self, episode_id: str) -> bool:
        """Whether the record of ``episode_id`` has nothing more to wait for from the policy: its final report
        came, or the policy is not reporting on that episode (none reports here, or it restarted and never
        joined it)."""
        status = self.status
        if status is None or status.episode_id != episode_id:
            return True
        return status.final
