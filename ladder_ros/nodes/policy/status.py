"""The policy node's ``policy/status``: its policies' warm-ups and readiness, and the current episode's report.

Kept apart from :mod:`ladder_ros.nodes.policy.node` (which acts) because it only tells: it publishes
every named policy's state (:class:`~ladder_ros.nodes.policy.roster.PolicyRoster`) on every change, the
policy in use at the top, and once a second while a policy warms up with how long it has waited (a line
in the log every ``PROGRESS_LOG_S``), and the episode's :class:`~ladder_ros.policies.audit.PolicyReport`
when it changed (at most every ``REPORT_PERIOD_S``) and, marked final, when the episode is over for the
policy.
"""

from __future__ import annotations

import time

from rclpy.node import Node

from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, publisher
from ladder_ros.nodes.policy.roster import PolicyRoster
from ladder_ros.policies.status import WARMING_UP, PolicyStatusDoc
from ladder_ros.interface_conversions import document_to_msg

PROGRESS_LOG_S = 10.0  # project choice: a warm-up of minutes says where it is this often
REPORT_PERIOD_S = 0.25  # project choice: the episode report goes out at most this often before its final one


class PolicyStatusPublisher:
    """Publishes ``policy/status`` for one node (see the module docstring)."""

    def __init__(self, node: Node, roster: PolicyRoster):
        self._node = node
        self._roster = roster
        self._pub = publisher(node, message_class(topics.POLICY_STATUS), topics.POLICY_STATUS)
        self._last: tuple | None = None
        self._last_sent = 0.0
        self._last_progress_log = time.monotonic()
        self._episode_id = ""
        self._report: dict = {}
        self._final = False
        self._report_dirty = False
        self.doc: PolicyStatusDoc | None = None

    def tick(self) -> None:
        """Publish what changed: called by a timer of the node (several times a second)."""
        now = time.monotonic()
        warming = []
        for policy in self._roster.policies.values():
            state, detail, elapsed = policy.warmup.snapshot()
            if state == WARMING_UP and policy.warmup.started:
                warming.append((policy.name, elapsed, policy.warmup.deadline_s, detail))
        if warming and now - self._last_progress_log >= PROGRESS_LOG_S:
            self._last_progress_log = now
            for name, elapsed, deadline_s, detail in warming:
                self._node.get_logger().info(f"policy {name} warming up for {elapsed:.0f} s of {deadline_s:g} s: "
                                             f"{detail}")
        changed = self._states() != self._last
        due = bool(warming) and now - self._last_sent >= 1.0
        report_due = self._report_dirty and now - self._last_sent >= REPORT_PERIOD_S
        if changed or due or report_due:
            self._publish()

    def report(self, episode_id: str, report: dict, *, final: bool = False) -> None:
        """The episode's report so far (``final``: the episode is over for the policy: sent at once)."""
        if episode_id == self._episode_id and self._final and not final:
            return  # the final report of this episode is out: nothing after it
        if (episode_id, report, final) == (self._episode_id, self._report, self._final):
            return
        self._episode_id, self._report, self._final = episode_id, report, final
        self._report_dirty = True
        if final:
            self._publish()

    def _states(self) -> tuple:
        """What a change of is published at once: the policy in use and every policy's state and detail."""
        return (self._roster.active.name,) + tuple(p.warmup.snapshot()[:2] for p in self._roster.policies.values())

    def _publish(self) -> None:
        self._last = self._states()
        self._last_sent = time.monotonic()
        self._report_dirty = False
        active = self._roster.active
        state, detail, elapsed = active.warmup.snapshot()
        self.doc = PolicyStatusDoc(
            policy=active.name, state=state, detail=detail, config_hash=active.config.digest(),
            warm_up_s=active.warmup.warm_up_s, elapsed_s=round(elapsed, 3), deadline_s=active.warmup.deadline_s,
            episode_id=self._episode_id, report=self._report, final=self._final, default_policy=self._roster.default,
            policies=self._roster.entries())
        self._pub.publish(document_to_msg(self.doc))
