"""The orchestrator's side of ``policy/status``: episodes start on a ready policy, and records get its report.

* **Starts.** A start command names the policy it runs under (``EpisodeCommand.policy``; empty:
  the policy node's default). A name the policy node does not serve (``policy/status`` lists its
  policies) is refused at once with the list of names, before anything moves. A start that passed
  the orchestrator's own checks goes ahead when its policy is ready. While that policy warms up (a
  model loads, a JAX server compiles on its first inference) the start is deferred, for at most
  ``policy_ready_wait_s``, and goes ahead the moment the policy says ready. When the policy cannot
  act (a server error, or its server gone: unavailable) the start is refused with the policy's
  status line as the reason (``unavailable_policy: refuse``), or deferred like a warm-up until that
  policy is ready again (``wait``); a start whose wait runs out is refused with the line. Another
  policy is never put in its place. A newer start replaces a deferred one (which is refused, saying
  so); a stop or abort cancels it. A graph without a policy node (no publisher of ``policy/status``)
  has nothing to wait for. The episode's status carries the policy's name and config hash
  (:meth:`PolicyGate.chosen`), and so does its record.
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
from ladder_ros.policies.status import CANNOT_ACT, WARMING_UP, PolicyEntry, PolicyStatusDoc

REPORTS_KEPT = 8  # episodes whose latest policy report is kept
REFUSE, WAIT = "refuse", "wait"  # unavailable_policy: what a start naming a policy that cannot act gets


class PolicyGate:
    """Start gating, stall holding and report collection for the orchestrator (see the module docstring)."""

    def __init__(self, node: Node, *, wait_s: float, start: Callable[[EpisodeCommand], None],
                 refuse: Callable[[EpisodeCommand, str], None], on_change: Callable[[], None],
                 unavailable: str = REFUSE):
        self._node = node
        self.wait_s = wait_s
        self.unavailable = unavailable
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

    def _entry(self, command: EpisodeCommand) -> PolicyEntry | None:
        """The policy ``command`` names, as the policy node last said (None: no status yet, or a name it does not
        serve)."""
        if self.status is None:
            return None
        return self.status.entries().get(command.policy or self.status.default_name)

    def chosen(self, command: EpisodeCommand) -> tuple[str, str]:
        """The name and config hash of the policy an admitted ``command`` runs under ("": no policy node reports
        here; the name asked for, with no hash, when the node's status is not in yet)."""
        entry = self._entry(command)
        return (entry.name, entry.config_hash) if entry is not None else (command.policy, "")

    @staticmethod
    def _which(command: EpisodeCommand) -> str:
        return f"the policy {command.policy!r}" if command.policy else "the policy"

    def admit(self, command: EpisodeCommand) -> bool:
        """True when ``command`` may start now; else it was deferred or refused here."""
        status = self.status
        entry = self._entry(command)
        if not self._reporting() or (entry is not None and entry.ready):
            self._drop(command)
            return True
        if status is not None and entry is None:
            self._drop(command)
            self._refuse(command, f"unknown policy {command.policy!r}: the policy node serves "
                                  f"{', '.join(status.entries())}")
            return False
        if entry is not None and entry.state in CANNOT_ACT and self.unavailable == REFUSE:
            self._drop(command)
            self._refuse(command, f"{self._which(command)} is not ready: {entry.line}")
            return False
        if self.deferred is not None and self.deferred[0] is not command:
            older, _ = self.deferred
            self.deferred = None
            self._refuse(older, "replaced by a newer start command while the policy warmed up")
        if self.wait_s <= 0:
            self._refuse(command, f"{self._which(command)} is not ready: {self._line(command)}")
            return False
        if self.deferred is None:
            self.deferred = (command, time.monotonic())
            self._node.get_logger().warning(f"start of {command.task_id or 'an episode'} deferred until "
                                            f"{self._which(command)} is ready (at most {self.wait_s:g} s): "
                                            f"{self._line(command)}")
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
            self._refuse(command, f"{self._which(command)} was not ready within {self.wait_s:g} s: "
                                  f"{self._line(command)}")

    def _drop(self, command: EpisodeCommand) -> None:
        if self.deferred is not None and self.deferred[0] is command:
            self.deferred = None

    def _line(self, command: EpisodeCommand) -> str:
        entry = self._entry(command)
        return entry.line if entry is not None else "no status from the policy node yet"

    # ------------------------------------------------------------------ status
    def _on_status(self, msg: interfaces.PolicyStatus) -> None:
        doc = received_document(self._node, msg, PolicyStatusDoc, "policy status")
        if doc is None:
            return
        before = self.status.entries() if self.status is not None else {}
        self.status = doc
        if doc.episode_id:
            self._reports.pop(doc.episode_id, None)
            self._reports[doc.episode_id] = doc
            while len(self._reports) > REPORTS_KEPT:
                self._reports.pop(next(iter(self._reports)))
        for name, entry in doc.entries().items():
            if name in before and before[name].state == entry.state:
                continue
            if entry.ready:
                self._node.get_logger().info(f"the policy {name} is ready"
                                             + (f" (warm-up {entry.warm_up_s:.1f} s)" if entry.warm_up_s else ""))
            elif entry.state in CANNOT_ACT:
                self._node.get_logger().warning(f"the policy {name} cannot act: {entry.line}")
        if self.deferred is not None:
            command, _ = self.deferred
            entry = self._entry(command)
            if entry is None or entry.ready or (entry.state in CANNOT_ACT and self.unavailable == REFUSE):
                self._start(command)  # admitted now (ready) or refused (an unknown name, the policy's error)
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
