"""An xs_sdk in another process, reached over ROS: what the twin's API talks to when the twin node owns the arm.

:class:`RemoteXsSdk` implements :class:`~ladder_ros.instruments.widowx_twin.xs_sdk.XsSdk` on the topics of
:mod:`.xs_wire` under ``/<robot_name>``, the way Interbotix's API reaches the real xs_sdk under the
same names: with ``interbotix_api: twin`` and ``twin_xs_sdk: remote`` the WidowX driver's API stands
in front of the ``widowx_twin`` node (``ladder_ros/instruments/widowx_twin/node.py``), whose motors move the
arm of a physics simulation on the wall clock, instead of motors in the driver's own process.

It keeps the API's semantics: ``call`` returns a future that is answered when the twin answers,
and never otherwise (a call to an xs_sdk that hangs, or is gone, waits for ever, and the API's
service methods with it); a call made before the twin listens goes out once it does, as a ROS
service client's request waits for its server. "Listens" is rmw_fastrtps's rule for a server being
there (ros2/rmw_fastrtps, ``rmw_fastrtps_shared_cpp/src/rmw_service_server_is_available.cpp`` at
03fde2bf): the request writer has matched a reader *and* the response reader a writer. A call sent
while only the first had matched lost its answer on a loaded machine. Commands are fire and forget;
joint states arrive as xs_sdk publishes them. It has its own rclpy node (``<driver>_xs_sdk``, no
remapping from the process's arguments) spun on its own thread, as the API's node is.
"""

from __future__ import annotations

import itertools
import random
import threading
from concurrent.futures import Future
from typing import Any, Callable

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ladder_ros.messages import SchemaError, decode, encode
from ladder_ros.instruments.widowx_twin import xs_msgs, xs_wire
from ladder_ros.instruments.widowx_twin.motors import JointStateSample

FLUSH_PERIOD_S = 0.01  # how often calls waiting for the twin to listen are looked at (only while some wait)


def reliable(depth: int) -> QoSProfile:
    """Reliable, volatile, keep last ``depth``: ROS 2's default QoS, which xs_sdk's topics and services use."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def sample_from_msg(msg: JointState) -> JointStateSample:
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9
    return JointStateSample(tuple(msg.name), tuple(msg.position), tuple(msg.velocity), tuple(msg.effort), stamp)


def sample_to_msg(sample: JointStateSample) -> JointState:
    msg = JointState()
    seconds = int(sample.stamp_s)
    msg.header.stamp.sec, msg.header.stamp.nanosec = seconds, int((sample.stamp_s - seconds) * 1e9)
    msg.name = list(sample.name)
    msg.position = [float(v) for v in sample.position]
    msg.velocity = [float(v) for v in sample.velocity]
    msg.effort = [float(v) for v in sample.effort]
    return msg


class RemoteXsSdk:
    """xs_sdk of ``robot_name`` served by another process (the module docstring)."""

    def __init__(self, robot_name: str, *, node_name: str = "xs_sdk_client", namespace: str = ""):
        self.robot_name = robot_name
        self.node = Node(node_name, namespace=namespace or None, use_global_arguments=False)
        self._lock = threading.Lock()
        self._ids = itertools.count(random.getrandbits(40) << 12)  # unique among the twin's clients
        self._pending: dict[int, Future] = {}
        self._unsent: list[str] = []  # encoded calls waiting for the twin to listen
        self._group_joints: dict[str, list[str]] = {}  # from get_robot_info answers about groups
        self._subscribers: list[Callable[[JointStateSample], None]] = []
        self.latest: JointStateSample | None = None
        name = lambda n: xs_wire.topic(robot_name, n)  # noqa: E731
        self._call_pub = self.node.create_publisher(String, name(xs_wire.CALL_TOPIC), reliable(100))
        self._command_pubs = {t: self.node.create_publisher(JointState, name(t), reliable(50))
                              for t in xs_wire.COMMAND_TOPICS}
        self._reply_sub = self.node.create_subscription(String, name(xs_wire.REPLY_TOPIC), self._on_reply,
                                                        reliable(100))
        self.node.create_subscription(JointState, name(xs_wire.JOINT_STATES), self._on_joint_state, reliable(10))
        # Runs only while calls wait (a 100 Hz timer that wakes the client's executor for nothing costs the driver's
        # process a few per cent of a core and the GIL every 10 ms).
        self._flush_timer = self.node.create_timer(FLUSH_PERIOD_S, self._flush)
        self._flush_timer.cancel()
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"xs_sdk-client-{robot_name}", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except Exception:  # the context went down with the process
            pass

    # ------------------------------------------------------------------ the XsSdk interface
    def call(self, service: str, request: Any) -> Future:
        future: Future = Future()
        if service not in xs_wire.SERVICE_TYPES:
            future.set_exception(KeyError(f"xs_sdk has no service {service!r}"))
            return future
        call_id = next(self._ids)
        text = encode(xs_wire.XsSdkCall.of(call_id, service, request))
        with self._lock:
            self._pending[call_id] = future
            self._unsent.append(text)
            self._flush_timer.reset()
        self._flush()
        return future

    def publish(self, topic: str, message: Any) -> None:
        if topic == "commands/joint_group":
            joints = self._group_joints.get(message.name)
            if joints is None:
                raise KeyError(f"xs_sdk group {message.name!r} is not known here (ask get_robot_info first)")
            names, values = joints, list(message.cmd)
        elif topic == "commands/joint_single":
            names, values = [message.name], [message.cmd]
        else:
            raise KeyError(f"xs_sdk subscribes to no topic {topic!r} here")
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = list(names)
        msg.position = [float(v) for v in values]
        self._command_pubs[topic].publish(msg)

    def subscribe_joint_states(self, callback: Callable[[JointStateSample], None]) -> None:
        with self._lock:
            self._subscribers.append(callback)
            latest = self.latest
        if latest is not None:
            callback(latest)

    # ------------------------------------------------------------------ the twin's side
    @property
    def connected(self) -> bool:
        """The twin listens to calls, can be heard answering them, and has been heard (joint states)."""
        return self.server_is_available() and self.latest is not None

    def server_is_available(self) -> bool:
        """A call sent now is heard, and its answer can be: the call publisher has matched a subscriber and the
        reply subscription a publisher (rmw_fastrtps's rule, the module docstring; it also wants as many of each,
        which plain topics cannot promise: anyone may listen to the calls)."""
        return self._call_pub.get_subscription_count() > 0 and self._reply_sub.get_publisher_count() > 0

    def _flush(self) -> None:
        """Send the calls made before the twin listened (a service request waits for its server); the timer that
        looks again runs until none waits."""
        with self._lock:
            if self._unsent and not self.server_is_available():
                return
            unsent, self._unsent = self._unsent, []
            self._flush_timer.cancel()
        for text in unsent:
            self._call_pub.publish(String(data=text))

    def _on_reply(self, msg: String) -> None:
        try:
            reply = decode(msg.data, xs_wire.XsSdkReply)
            response = reply.typed_response()
        except SchemaError as exc:
            self.node.get_logger().error(f"ignoring an xs_sdk reply: {exc}")
            return
        with self._lock:
            future = self._pending.pop(reply.call_id, None)
        if future is None:
            return  # another client's call, or a repeat
        if isinstance(response, xs_msgs.RobotInfo.Response) and response.name and response.joint_names:
            self._group_joints[response.name[0]] = list(response.joint_names)
        future.set_result(response)

    def _on_joint_state(self, msg: JointState) -> None:
        sample = sample_from_msg(msg)
        with self._lock:
            self.latest = sample
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(sample)

    def pending(self) -> int:
        """Calls not answered yet."""
        with self._lock:
            return len(self._pending)

    def stop(self) -> None:
        self._executor.shutdown(timeout_sec=1.0)
        try:
            self.node.destroy_node()
        except Exception:  # already gone with the context
            pass
        if rclpy.ok():
            self._thread.join(timeout=2.0)
