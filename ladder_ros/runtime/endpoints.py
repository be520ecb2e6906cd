"""How a node meets the graph: message classes by type name, the QoS of each topic kind, publishers and
subscriptions with it, received documents read safely, and who may publish actions.

* :func:`qos` turns a topic's QoS kind (:mod:`ladder_ros.specs.topics`) into a ``QoSProfile``.
* :func:`publisher` / :func:`subscription` create endpoints with their topic's QoS (docs/graph.md, "QoS").
* :func:`received_document` reads one of the graph's typed documents, logging and dropping a malformed one.
* :class:`ActionSource`: the one node whose ``policy/action`` is trusted, and who else publishes there.

Only rclpy APIs that ROS 2 Humble has are used here.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from rclpy.node import Node
try:  # rclpy 7 (Iron) and newer
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError:  # rclpy 3 (Humble)
    from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ladder_ros.interface_conversions import document_from_msg
from ladder_ros.messages import SchemaError
from ladder_ros.specs import topics


def message_class(topic: topics.TopicSpec | str):
    """The rclpy message class of a topic (its :class:`~ladder_ros.specs.topics.TopicSpec`) or of a type
    name such as ``sensor_msgs/msg/Image``; ImportError when its package is not installed."""
    return _message_class(topic if isinstance(topic, str) else topic.type)


@functools.lru_cache(maxsize=None)
def _message_class(type_name: str):
    package, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


def received_document(node: Node, msg: Any, cls: type, what: str):
    """The document in ``msg`` (a typed message of the graph), or None after logging why it was ignored.

    A malformed message never reaches a callback's logic and never takes the node down: it is
    reported with the schema's own reason and dropped (the sender's next message is read as usual).
    """
    try:
        return document_from_msg(msg, cls)
    except SchemaError as exc:
        node.get_logger().error(f"ignoring {what}: {exc}")
        return None


def qos(kind: str) -> QoSProfile:
    """The QoS profile of a topic kind (docs/graph.md, "QoS")."""
    depth = topics.QOS_DEPTH[kind]
    if kind == topics.SENSOR:
        return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT,
                          durability=DurabilityPolicy.VOLATILE)
    if kind == topics.LATCHED:
        return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def _quiet(spec: topics.TopicSpec, callbacks_type):
    """QoS event handlers only on topics a robot's drivers or camera share (see TopicSpec.external).

    rclpy gives every publisher and subscription default event handlers (incompatible QoS and
    type warnings); each is an entity the executor re-adds to its wait set on every wake-up, which
    was half of a lockstep step's cost in the graph's own processes. Between the package's own
    nodes the QoS is fixed by :mod:`ladder_ros.specs.topics`, so the warnings stay where a mismatch
    can happen: on the topics shared with other packages' nodes.
    """
    return None if spec.external else callbacks_type(use_default_callbacks=False)


def publisher(node: Node, msg_type, spec: topics.TopicSpec):
    """A publisher on ``spec``'s topic with its QoS (docs/graph.md, "QoS")."""
    return node.create_publisher(msg_type, spec.name, qos(spec.qos),
                                 event_callbacks=_quiet(spec, PublisherEventCallbacks))


def subscription(node: Node, msg_type, spec: topics.TopicSpec, callback, *, depth: int | None = None,
                 **options):
    """A subscription to ``spec``'s topic with its QoS (``depth`` replaces the queue depth); ``options``
    go to ``create_subscription`` (callback group, raw)."""
    profile = qos(spec.qos)
    if depth is not None:
        profile.depth = depth
    return node.create_subscription(msg_type, spec.name, callback, profile,
                                    event_callbacks=_quiet(spec, SubscriptionEventCallbacks), **options)


class ActionSource:
    """The one node whose ``policy/action`` messages are trusted (``action_source``), and who else publishes there.

    Whoever applies actions (the sim bridge, a robot driver) refuses every action while any other
    node publishes on the topic: two publishers disagree about what the arm should do.
    """

    def __init__(self, node: Node, source: str):
        self._node = node
        self.name = source if source.startswith("/") else f"{node.get_namespace().rstrip('/')}/{source}"
        self.topic = node.resolve_topic_name(topics.ACTION.name)

    def foreign_publishers(self) -> list[str]:
        """Publishers of the action topic other than the configured one (the graph as this node sees it)."""
        names = []
        for info in self._node.get_publishers_info_by_topic(self.topic):
            name = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
            if name != self.name:
                names.append(name)
        return sorted(names)
