"""The policy node's ``policy/status``: its warm-up and readiness, and the current episode's report.

Kept apart from :mod:`ladder_ros.nodes.policy.node` (which acts) because it only tells: it publishes the
:class:`~ladder_ros.policies.warmup.WarmUp`'s state on every change, and once a second while the
policy warms up with how long it has waited (a line in the log every ``PROGRESS_LOG_S``), and the
episode's :class:`~ladder_ros.policies.audit.PolicyReport` when it changed (at most every
``REPORT_PERIOD_S``) and, marked final, when the episode is over for the policy.
"""

from __future__ import annotations

import time

from rclpy.node import Node

from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, publisher
from ladder_ros.policies.config import PolicyConfig
from ladder_ros.policies.status import WARMING_UP, PolicyStatusDoc
from ladder_ros.policies.warmup import WarmUp
from ladder_ros.interface_conversions import document_to_msg

PROGRESS_LOG_S = 10.0  # project choice: a warm-up of minutes says where it is this often
REPORT_PERIOD_S = 0.25  # project choice: the episode report goes out at most this often before its final one


class PolicyStatusPublisher:
    """Publishes ``policy/status`` for one node (see the module docstring)."""

    def __init__(self, node: Node, config: PolicyConfig, warmup: WarmUp):
        self._node = node
        self._config = config
        self._warmup = warmup
        self._pub = publisher(node, message_class(topics.POLICY_STATUS), topics.POLICY_STATUS)
        self._last: tuple[str, str] | None = None
        self._last_sent = 0.0
        self._last_progress_log = time.monotonic()
        self._episode_id = ""
        self._report: dict = {}
        self._final = False
        self._report_dirty = False
        self.doc: PolicyStatusDoc | None = None

    def tick(self) -> None:
        """Publish what changed: called by a timer of the node (several times a second)."""
        state, detail, elapsed = self._warmup.snapshot()
        now = time.monotonic()
        changed = (state, detail) != self._last
        if state == WARMING_UP and now - self._last_progress_log >= PROGRESS_LOG_S:
            self._last_progress_log = now
            self._node.get_logger().info(f"policy {self._config.name} warming up for {elapsed:.0f} s of "
                                         f"{self._warmup.deadline_s:g} s: {detail}")
        due = state == WARMING_UP and now - self._last_sent >= 1.0
        report_due = self._report_dirty and now - self._last_sent >= REPORT_PERIOD_S
        if changed or due or report_due:
            self._publish(state, detail, elapsed)

    def report(self, episode_id: str, report: dict, *, final: bool = False) -> None:
        """The episode's report so far (``final``: the episode is over for the policy: sent at once)."""
        if episode_id == self._episode_id and self._final and not final:
            return  # the final report of this episode is out: nothing after it
        if (episode_id, report, final) == (self._episode_id, self._report, self._final):
            return
        self._episode_id, self._report, self._final = episode_id, report, final
        self._report_dirty = True
        if final:
            state, detail, elapsed = self._warmup.snapshot()
            self._publish(state, detail, elapsed)

    def _publish(self, state: str, detail: str, elapsed: float) -> None:
        self._last = (state, detail)
        self._last_sent = time.monotonic()
        self._report_dirty = False
        self.doc = PolicyStatusDoc(
            policy=self._config.name, state=state, detail=detail, config_hash=self._config.digest(),
            warm_up_s=self._warmup.warm_up_s, elapsed_s=round(elapsed, 3), deadline_s=self._warmup.deadline_s,
            episode_id=self._episode_id, report=self._report, final=self._final)
        self._pub.publish(document_to_msg(self.doc))
