"""What every ladder_ros node shares: QoS profiles, parameter declaration, the episode it serves, main().

* :func:`qos` turns a topic's QoS kind (:mod:`ladder_ros.nodes.topics`) into a ``QoSProfile``.
* :func:`declare_parameters` declares a node's parameters from :mod:`ladder_ros.nodes.parameters`
  with descriptors (description, range, read-only) and checks every value, so a bad value stops the
  node at startup with one line naming it.
* :class:`EpisodeFollower` subscribes to the latched episode status and tells the node when a new
  episode starts and when it ends; every node that keeps per-episode state uses it. A node whose
  per-episode state cannot be rebuilt and that comes up while an episode is already stepping (it
  was restarted) does not join it: it asks the orchestrator to end it, with the reason.
* :func:`run_node` is the body of every node's ``main()``: init, build, spin, and shut down cleanly
  on Ctrl-C, SIGTERM or an external shutdown (ros2/demos talker anatomy), giving the node a last
  word (``on_shutdown``) and closing it while it can still publish and log; it exits 2 with one
  error line when the node cannot start. Started by ``ladder-ros up`` it also dies with its
  supervisor (:func:`die_with_supervisor`).

Only rclpy APIs that ROS 2 Humble has are used here and in the nodes.
"""

from __future__ import annotations

import functools
import importlib
import signal
import sys
import time
from typing import Any, Callable, Sequence

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.callback_groups import CallbackGroup
from rclpy.executors import (
    Executor,
    ExternalShutdownException,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
try:  # rclpy 7 (Iron) and newer
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError:  # rclpy 3 (Humble)
    from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import ABORT, RUNNING, WALL_CLOCK, EpisodeCommand, EpisodeStatus, SchemaError
from ladder_ros.nodes import topics
from ladder_ros.nodes.param_spec import BOOL, FLOAT, FLOAT_LIST, INT, STR, STR_LIST, ParamSpec
from ladder_ros.nodes.process_exit import exit_past_native_threads
from ladder_ros.nodes.supervision import die_with_supervisor
from ladder_ros.interface_conversions import document_from_msg, document_to_msg

_PARAM_TYPES = {BOOL: ParameterType.PARAMETER_BOOL, INT: ParameterType.PARAMETER_INTEGER,
                FLOAT: ParameterType.PARAMETER_DOUBLE, STR: ParameterType.PARAMETER_STRING,
                STR_LIST: ParameterType.PARAMETER_STRING_ARRAY, FLOAT_LIST: ParameterType.PARAMETER_DOUBLE_ARRAY}


def message_class(topic: topics.TopicSpec | str):
    """The rclpy message class of a topic (its :class:`~ladder_ros.nodes.topics.TopicSpec`) or of a type
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
        if spec.type in (STR_LIST, FLOAT_LIST):
            value = list(value)
        values[spec.name] = spec.check(value, node.get_name())
    return values


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


class ParameterError(LadderError):
    """A parameter override that rclpy refused (wrong type, out of range)."""


class EpisodeFollower:
    """Follows the orchestrator's latched episode status for a node.

    ``on_start(status)`` runs once per new episode id in state running; ``on_end(status)`` once when
    that episode's status turns finished or aborted. Malformed documents are logged and ignored.

    ``lost_on_restart``: what this node keeps per episode that a restart loses (e.g. "the simulator's
    state"). Given, a node that comes up while an episode has executed a step already (the first
    status it ever gets is a running one with ``step >= 1``: every stateful node took part in that
    step, so this one is a restart) does not join that episode: :meth:`request_abort` asks the
    orchestrator to end it with the reason, and the episode ends at once instead of continuing as a
    different episode. An episode still at its first step is joined as usual (a node that came up
    late, or one restarted before anything of it was executed), and so is, on the wall clock, an
    episode that began after this node came up (it only heard of it late: :meth:`_came_up_after`).
    """

    ABORT_RESEND_S = 0.5  # the command publisher may not be matched yet right after a (re)start

    def __init__(self, node: Node, on_start: Callable[[EpisodeStatus], None],
                 on_end: Callable[[EpisodeStatus], None] | None = None,
                 callback_group: CallbackGroup | None = None, *, lost_on_restart: str | None = None):
        self._node = node
        self._on_start = on_start
        self._on_end = on_end
        self._lost_on_restart = lost_on_restart
        self.current: EpisodeStatus | None = None
        self.ended: set[str] = set()
        self.last: EpisodeStatus | None = None
        # True while handling an episode that was already running when this node came up (the
        # first status it ever got, from the latched topic): the node joins it mid-way.
        self.joined_late = False
        self._abort: tuple[str, str] | None = None  # (episode id, reason) asked for until it ends
        self._created_ns = time.time_ns()  # the wall clock, as the orchestrator stamps step 0 on the wall clock
        self._command_pub = publisher(node, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND)
        subscription(node, message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS, self._on_status,
                     callback_group=callback_group)
        node.create_timer(self.ABORT_RESEND_S, self._resend_abort, callback_group=callback_group)

    def _came_up_after(self, status: EpisodeStatus) -> bool:
        """Whether this node came up after ``status``'s episode began. On the wall clock step 0 is
        stamped with the orchestrator's time at the start, so a node that was up before it only
        heard of the episode late (discovery can take a moment on a busy machine) and joins it; in
        lockstep the step stamps are simulated time, and a step can only have been executed with
        every stateful node taking part."""
        if status.clock == WALL_CLOCK:
            return self._created_ns > status.origin_ns
        return True

    def request_abort(self, episode_id: str, reason: str) -> None:
        """Ask the orchestrator to end ``episode_id`` with ``reason`` (resent until its status says it ended)."""
        if self._abort is None or self._abort[0] != episode_id:
            self._node.get_logger().error(f"episode {episode_id}: asking the orchestrator to end it: {reason}")
        self._abort = (episode_id, reason)
        self._resend_abort()

    def _resend_abort(self) -> None:
        if self._abort is None:
            return
        episode_id, reason = self._abort
        if episode_id in self.ended or (self.last is not None and self.last.episode_id != episode_id):
            self._abort = None
            return
        self._command_pub.publish(document_to_msg(EpisodeCommand(command=ABORT, episode_id=episode_id,
                                                                 reason=reason)))

    def _on_status(self, msg: Any) -> None:
        try:
            status = document_from_msg(msg, EpisodeStatus)
        except SchemaError as exc:
            self._node.get_logger().error(f"ignoring episode status: {exc}")
            return
        first = self.last is None
        self.last = status
        if status.state == RUNNING:
            if self.current is None or status.episode_id != self.current.episode_id:
                if status.episode_id in self.ended:
                    return  # a stale repeat of an episode that is over
                self.current = status
                if first and status.step >= 1 and self._lost_on_restart is not None and self._came_up_after(status):
                    self.request_abort(status.episode_id, f"{self._node.get_name()} restarted mid-episode: "
                                       f"{self._lost_on_restart} is lost")
                    return
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


# How often a spinning node checks for a stop request (s): the longest a Ctrl-C waits for an idle node.
STOP_CHECK_PERIOD_S = 0.1
STOP_DEADLINE_S = 20.0  # after a stop signal, a node that has not exited by then is killed (SIGALRM)


class _StopRequest:
    """SIGINT and SIGTERM handler of a node process: the first signal asks the node to stop, later ones are ignored.

    rclpy's own handlers shut the context down the moment a signal arrives, so a node could no longer
    publish or log while it closes (the orchestrator's last word, the final status of an interrupted
    episode, needs it still up), and under ``ros2 launch`` a Ctrl-C reaches a node twice, from the
    terminal (the whole process group) and from launch, the second raising ``KeyboardInterrupt`` in
    the middle of the cleanup. Here the first signal interrupts a node that is still starting
    (building it can take long) and otherwise ends the spin loop between two callbacks; the last word
    and ``close()`` then run with the context alive. A node that has not exited ``STOP_DEADLINE_S``
    after the first signal is ended by SIGALRM; SIGKILL (launch sends it when a node has not exited
    10 s after the stop) stays the last resort.
    """

    def __init__(self) -> None:
        self.requested = False
        self.interrupt = True  # raise KeyboardInterrupt: the node is starting, not spinning

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested:
            return
        self.requested = True
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(STOP_DEADLINE_S))
        if self.interrupt:
            raise KeyboardInterrupt


def _drain(executor: Executor, seconds: float) -> None:
    """Run the callbacks whose input has already arrived, without waiting for more, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    handled = False  # since the last wait
    while time.monotonic() < deadline:
        try:
            handler, _, _ = executor.wait_for_ready_callbacks(timeout_sec=0.0)
        except TimeoutException:  # a zero-timeout wait ends with this, also after yielding work
            if not handled:
                return
            handled = False
            continue
        except ShutdownException:
            return
        handler()
        if handler.exception() is not None:
            raise handler.exception()
        handled = True


def run_node(name: str, build: Callable[[], Node], args: Sequence[str] | None = None,
             executor_factory: Callable[[], Executor] = SingleThreadedExecutor) -> int:
    """Init rclpy, build the node, spin until Ctrl-C or shutdown; exit 2 with one line when it cannot start.

    Exit status 0 after Ctrl-C, SIGTERM or an external shutdown: a stop on request is a clean end
    (``ros2 launch`` reports "process has finished cleanly"). On a stop signal the node's
    ``on_shutdown(executor)`` (if it has one) runs while the node can still publish, then its
    ``close()``; then the node is destroyed and rclpy shut down. A node with a ``drain_on_stop_s``
    attribute (the recorder) first handles the messages that had already arrived when the stop came,
    for at most that long, so what was sent before the stop is kept.
    Threads of the node still in native code after all that end the process at once
    (:mod:`ladder_ros.nodes.process_exit`).
    """
    code = _serve_node(name, build, args, executor_factory)
    exit_past_native_threads(name, code)
    return code


def _serve_node(name: str, build: Callable[[], Node], args: Sequence[str] | None,
                executor_factory: Callable[[], Executor]) -> int:
    die_with_supervisor()
    stop = _StopRequest()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    try:
        rclpy.init(args=list(args) if args is not None else None, signal_handler_options=SignalHandlerOptions.NO)
    except KeyboardInterrupt:
        return 0
    node: Node | None = None
    try:
        try:
            node = build()
        except LadderError as exc:
            print(f"ladder_ros {name}: error: {exc}", file=sys.stderr, flush=True)
            return 2
        executor = executor_factory()
        executor.add_node(node)
        stop.interrupt = False
        while not stop.requested and rclpy.ok():
            executor.spin_once(timeout_sec=STOP_CHECK_PERIOD_S)
        if stop.requested and rclpy.ok():
            drain_s = getattr(node, "drain_on_stop_s", 0.0)
            if drain_s > 0:
                _drain(executor, drain_s)
            last_word = getattr(node, "on_shutdown", None)
            if callable(last_word):
                last_word(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except _rclpy.RCLError:
        # An external shutdown that lands while the executor builds its wait set makes rcl report
        # an invalid context: the same clean stop.
        if rclpy.ok():
            raise
    finally:
        # From here on a stop signal (launch's SIGINT after a node that failed to start, a second Ctrl-C) only
        # marks the stop: raising in the middle of destroying the node would leave a traceback, not a stop.
        stop.interrupt = False
        try:
            if node is not None:
                close = getattr(node, "close", None)
                if callable(close):
                    close()
                node.destroy_node()
            rclpy.try_shutdown()
        finally:
            signal.alarm(0)
            # While Python exits it resets a signal with a Python handler to the default action, so a
            # late second Ctrl-C would end the process by signal after all; ignored signals stay ignored.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
    return 0


def spin_for(executor: Executor, seconds: float, until: Callable[[], bool] = lambda: False) -> None:
    """Spin ``executor`` for up to ``seconds`` or until ``until()`` holds (a node's last word on shutdown)."""
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline and rclpy.ok():
        executor.spin_once(timeout_sec=min(0.05, max(0.0, deadline - time.monotonic())))
