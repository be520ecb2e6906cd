"""An instrument node's ear for faults: ``instruments/fault`` in, ``instruments/fault_applied`` out.

:class:`FaultInbox` adds the subscription and the answer publisher to an instrument's node
(:mod:`ladder_ros.instruments.faults` describes the documents). Each fault whose kind the node plays goes to its
handler, which returns what it did in words; a fault of another kind is not this node's and is ignored, a
handler that raises is answered with its error. Both topics are reliable with a little history, so a fault asked
for while a callback runs is not lost.
"""

from __future__ import annotations

from typing import Callable, Mapping

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ladder_ros.core.errors import LadderError
from ladder_ros.instruments.faults import APPLIED_TOPIC, FAULT_TOPIC, FaultApplied, InstrumentFault
from ladder_ros.messages import SchemaError, decode, encode

Handler = Callable[[InstrumentFault], str]


def fault_qos() -> QoSProfile:
    return QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class FaultInbox:
    """Plays the faults ``handlers`` knows (kind -> handler returning what it did) on ``node``."""

    def __init__(self, node: Node, handlers: Mapping[str, Handler]):
        self.node = node
        self.handlers = dict(handlers)
        self.played: list[InstrumentFault] = []
        self._applied_pub = node.create_publisher(String, APPLIED_TOPIC, fault_qos())
        node.create_subscription(String, FAULT_TOPIC, self._on_fault, fault_qos())

    def _on_fault(self, msg: String) -> None:
        try:
            fault = decode(msg.data, InstrumentFault)
        except SchemaError as exc:
            self.node.get_logger().error(f"ignoring an instrument fault: {exc}")
            return
        handler = self.handlers.get(fault.fault)
        if handler is None:
            return  # another instrument's fault
        detail, error = "", ""
        try:
            detail = handler(fault)
            self.played.append(fault)
            self.node.get_logger().warning(f"fault {fault.fault_id} played: {fault.fault} for "
                                           f"{fault.duration_s:g} s: {detail}")
        except (LadderError, KeyError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.node.get_logger().error(f"fault {fault.fault_id} ({fault.fault}) not played: {error}")
        self._applied_pub.publish(String(data=encode(FaultApplied(
            fault_id=fault.fault_id, fault=fault.fault, instrument=self.node.get_name(), detail=detail, error=error))))
