"""What the orchestrator says to the graph: one method per topic it publishes.

The objects that start, step and end an episode publish through this and never hold a publisher,
so each of them can run in a test against a stand-in that records what it was told to send.
"""

from __future__ import annotations

from rclpy.duration import Duration
from rclpy.node import Node
from std_msgs.msg import String

from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.messages import (
    DecisionDoc,
    EpisodeCommandReply,
    EpisodeEventDoc,
    EpisodeStatus,
    PlanRequestDoc,
    VerificationRequestDoc,
)
from ladder_ros.runtime.endpoints import message_class, publisher
from ladder_ros.specs import topics


class Outbox:
    """The orchestrator's publishers, created on ``node``."""

    def __init__(self, node: Node):
        self._status = publisher(node, message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS)
        self._subgoal = publisher(node, message_class(topics.CURRENT_SUBGOAL), topics.CURRENT_SUBGOAL)
        self._decision = publisher(node, message_class(topics.DECISION), topics.DECISION)
        self._events = publisher(node, message_class(topics.EVENTS_TOPIC), topics.EVENTS_TOPIC)
        self._request = publisher(node, message_class(topics.VERIFY_REQUEST), topics.VERIFY_REQUEST)
        self._plan_request = publisher(node, message_class(topics.PLAN_REQUEST), topics.PLAN_REQUEST)
        self._reply = publisher(node, message_class(topics.COMMAND_REPLY), topics.COMMAND_REPLY)

    def status(self, status: EpisodeStatus) -> None:
        """``episode/status`` (latched)."""
        self._status.publish(document_to_msg(status))

    def subgoal(self, instruction: str) -> None:
        """``orchestrator/current_subgoal`` (latched)."""
        self._subgoal.publish(String(data=instruction))

    def decision(self, doc: DecisionDoc) -> None:
        self._decision.publish(document_to_msg(doc))

    def event(self, doc: EpisodeEventDoc) -> None:
        self._events.publish(document_to_msg(doc))

    def verification_request(self, doc: VerificationRequestDoc) -> None:
        self._request.publish(document_to_msg(doc))

    def plan_request(self, doc: PlanRequestDoc) -> None:
        self._plan_request.publish(document_to_msg(doc))

    def command_reply(self, reply: EpisodeCommandReply) -> None:
        self._reply.publish(document_to_msg(reply))

    def wait_for_status_acked(self, seconds: float) -> None:
        """Until every subscriber of ``episode/status`` acknowledged the latest one, at most ``seconds``."""
        self._status.wait_for_all_acked(Duration(seconds=seconds))
