"""What every ladder_ros node shares: QoS profiles, parameter declaration, the episode it serves, main().

* :func:`qos` turns a topic's QoS kind (:mod:`ladder_ros.nodes.topics`) into a ``QoSProfile``.
* :func:`declare_parameters` declares a node's parameters from :mod:`ladder_ros.nodes.parameters`
  with descriptors (description, range, read-only) and checks every value, so a bad value stops the
  node at startup with one line naming it.
* :class:`EpisodeFollower` subscribes to the latched episode status and tells the node when a new
  episode starts and when it ends; every node that keeps per-episode state uses it.
* :func:`run_node` is the body of every node's ``main()``: init, build, spin, and shut down cleanly
  on Ctrl-C or an external shutdown (ros2/demos talker anatomy), exiting 2 with one error line when
  the node cannot start.

Only rclpy APIs that ROS 2 Humble has are used here and in the nodes.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.callback_groups import CallbackGroup
from rclpy.executors import ExternalShutdownException, Executor, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
try:  # rclpy 7 (Iron) and newer
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError:  # rclpy 3 (Humble)
    from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import EpisodeStatus, SchemaError
from ladder_ros.nodes import topics
from ladder_ros.nodes.parameters import BOOL, FLOAT, INT, STR, STR_LIST, ParamSpec
from ladder_ros.ros_conversions import document_from_msg

_PARAM_TYPES = {BOOL: ParameterType.PARAMETER_BOOL, INT: ParameterType.PARAMETER_INTEGER,
                FLOAT: ParameterType.PARAMETER_DOUBLE, STR: ParameterType.PARAMETER_STRING,
                STR_LIST: ParameterType.PARAMETER_STRING_ARRAY}


def received_document(node: Node, msg: String, cls: type, what: str):
    """The JSON document in ``msg``, or None after logging why it was ignored.

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
    nodes the QoS is fixed by :mod:`ladder_ros.nodes.topics`, so the warnings stay where a mismatch
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


def _descriptor(spec: ParamSpec) -> ParameterDescriptor:
    text = spec.description + (f" (one of: {', '.join(spec.choices)})" if spec.choices else "")
    descriptor = ParameterDescriptor(name=spec.name, type=_PARAM_TYPES[spec.type], description=text,
                                     read_only=spec.read_only)
    if spec.type == INT and (spec.min is not None or spec.max is not None):
        descriptor.integer_range = [IntegerRange(from_value=int(spec.min if spec.min is not None else -2**62),
                                                 to_value=int(spec.max if spec.max is not None else 2**62), step=0)]
    if spec.type == FLOAT and (spec.min is not None or spec.max is not None):
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=float(spec.min if spec.min is not None else -1e308),
            to_value=float(spec.max if spec.max is not None else 1e308), step=0.0)]
    return descriptor


def declare_parameters(node: Node, specs: Sequence[ParamSpec]) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` with descriptors and return their checked values.

    rclpy rejects a wrong type or an out-of-range value at declaration; choices and the rest are
    checked here. Either way the error names the node and the parameter.
    """
    values: dict[str, Any] = {}
    for spec in specs:
        try:
            # An empty list has no element type, so a string list is declared by its type.
            default = Parameter.Type.STRING_ARRAY if spec.type == STR_LIST and not spec.default else spec.default
            param = node.declare_parameter(spec.name, default, _descriptor(spec))
        except Exception as exc:  # rclpy raises several exception types for a bad override
            raise ParameterError(f"parameter {node.get_name()}.{spec.name}: {exc}") from None
        value = param.value
        if spec.type == STR_LIST and value is None:
            value = []
        if spec.type == STR_LIST:
            value = list(value)
        values[spec.name] = spec.check(value, node.get_name())
    return values


class ParameterError(LadderError):
    """A parameter override that rclpy refused (wrong type, out of range)."""


class EpisodeFollower:
    """Follows the orchestrator's latched episode status for a node.

    ``on_start(status)`` runs once per new episode id in state running; ``on_end(status)`` once when
    that episode's status turns finished or aborted. Malformed documents are logged and ignored.
    """

    def __init__(self, node: Node, on_start: Callable[[EpisodeStatus], None],
                 on_end: Callable[[EpisodeStatus], None] | None = None,
                 callback_group: CallbackGroup | None = None):
        self._node = node
        self._on_start = on_start
        self._on_end = on_end
        self.current: EpisodeStatus | None = None
        self.ended: set[str] = set()
        self.last: EpisodeStatus | None = None
        # True while handling an episode that was already running when this node came up (the
        # first status it ever got, from the latched topic): the node joins it mid-way.
        self.joined_late = False
        subscription(node, String, topics.EPISODE_STATUS, self._on_status, callback_group=callback_group)

    def _on_status(self, msg: String) -> None:
        try:
            status = document_from_msg(msg, EpisodeStatus)
        except SchemaError as exc:
            self._node.get_logger().error(f"ignoring episode status: {exc}")
            return
        first = self.last is None
        self.last = status
        if status.state == "running":
            if self.current is None or status.episode_id != self.current.episode_id:
                if status.episode_id in self.ended:
                    return  # a stale repeat of an episode that is over
                self.current = status
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


def run_node(name: str, build: Callable[[], Node], args: Sequence[str] | None = None,
             executor_factory: Callable[[], Executor] = SingleThreadedExecutor) -> int:
    """Init rclpy, build the node, spin until Ctrl-C or shutdown; exit 2 with one line when it cannot start."""
    rclpy.init(args=list(args) if args is not None else None)
    node: Node | None = None
    try:
        try:
            node = build()
        except LadderError as exc:
            print(f"ladder_ros {name}: error: {exc}", file=sys.stderr, flush=True)
            return 2
        executor = executor_factory()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except _rclpy.RCLError:
        # Ctrl-C shuts the context down from the signal handler; if that lands while the executor
        # builds its wait set, rcl reports an invalid context instead: the same clean stop.
        if rclpy.ok():
            raise
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
