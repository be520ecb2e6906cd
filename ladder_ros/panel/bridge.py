"""The operator panel's ROS side: subscriptions, publishers and service clients on one node, nothing more.

:class:`PanelBridge` puts what arrives into a thread-safe inbox (the node may spin in another thread:
rqt spins its node in its own thread) and the panel's Qt timer drains it into the controller, so
every piece of logic runs in the GUI thread. Camera frames are not queued: only the newest one is
kept. Service calls are asynchronous (``call_async``), their answers come back through the inbox;
nothing here ever blocks. Topic names are resolved under the graph's namespace, so the same bridge
works on rqt's own node (which has no namespace) and on the standalone panel's.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_srvs.srv import SetBool, Trigger

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.messages import (
    RUNNING,
    START,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeStatus,
    SchemaError,
    VerificationResultDoc,
)
from ladder_ros.policies.status import PolicyStatusDoc
from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, publisher, subscription
from ladder_ros.runtime.start_resends import StartResends
from ladder_ros.panel.model import SafetyState
from ladder_ros.interface_conversions import document_from_msg, document_to_msg
from ladder_ros.ros_conversions import depth_from_msg, image_from_msg, stamp_to_ns

DEPTH_TOPIC = "camera/depth/image_raw"  # sensor_msgs/Image, 16UC1 (mm) or 32FC1 (m), when a depth camera publishes
DEPTH = topics.TopicSpec(DEPTH_TOPIC, "sensor_msgs/msg/Image", topics.SENSOR, "camera rate", "depth camera",
                         ("operator panel",), "Depth image", external=True)
TRIGGER_SERVICES = (topics.STOP_SERVICE, topics.ABORT_SERVICE, topics.ESTOP_SERVICE, topics.ESTOP_RELEASE_SERVICE)


def _under(namespace: str, name: str) -> str:
    namespace = "/" + namespace.strip("/") if namespace.strip("/") else ""
    return f"{namespace}/{name}"


class PanelBridge:
    """Everything the panel exchanges with the graph, on ``node`` under ``namespace``.

    Subscribes ``episode/status``, ``orchestrator/events``, ``orchestrator/current_subgoal``,
    ``verifier/result``, ``operator/labels``, ``robot/safety_state``, ``episode/command_reply``,
    ``policy/status`` (the policies the graph serves), ``camera/image_raw`` and the depth image; publishes
    ``episode/command`` and ``operator/labels``;
    calls ``episode/stop``, ``episode/abort``, ``robot/arm``, ``robot/estop``, ``robot/estop_release``.
    A start is sent again every second until the orchestrator answers it or its status names the
    episode running (:mod:`ladder_ros.runtime.start_resends`); a refused start's reason reaches the log.
    """

    def __init__(self, node: Node, namespace: str = "", depth_topic: str = DEPTH_TOPIC):
        self.node = node
        self.namespace = namespace
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._image: tuple[int, np.ndarray] | None = None
        self._depth: tuple[int, np.ndarray] | None = None
        self.frames = 0
        self._resends = StartResends()

        def spec(s: topics.TopicSpec) -> topics.TopicSpec:
            return replace(s, name=_under(namespace, s.name))

        def typed(s: topics.TopicSpec) -> tuple[Any, topics.TopicSpec]:  # its message class, and it under the namespace
            return message_class(s), spec(s)

        self._command_pub = publisher(node, *typed(topics.EPISODE_COMMAND))
        self._labels_pub = publisher(node, *typed(topics.LABELS))
        self._subscriptions = [
            subscription(node, *typed(topics.EPISODE_STATUS), self._on_status),
            subscription(node, *typed(topics.COMMAND_REPLY), self._on_reply),
            subscription(node, *typed(topics.EVENTS_TOPIC), self._document(EpisodeEventDoc, "event")),
            subscription(node, *typed(topics.VERIFY_RESULT), self._document(VerificationResultDoc, "verdict")),
            subscription(node, *typed(topics.LABELS), self._document(EpisodeLabels, "labels")),
            subscription(node, *typed(topics.POLICY_STATUS), self._document(PolicyStatusDoc, "policy_status")),
            subscription(node, *typed(topics.CURRENT_SUBGOAL),
                         lambda msg: self.inbox.put(("current_subgoal", msg.data))),
            subscription(node, DiagnosticStatus, spec(topics.SAFETY_STATE), self._on_safety),
            subscription(node, Image, spec(topics.IMAGE), self._on_image),
            subscription(node, Image, replace(DEPTH, name=_under(namespace, depth_topic)), self._on_depth),
        ]
        self._triggers = {name: node.create_client(Trigger, _under(namespace, name)) for name in TRIGGER_SERVICES}
        self._arm = node.create_client(SetBool, _under(namespace, topics.ARM_SERVICE))
        self._resend_timer = node.create_timer(self._resends.period_s / 4, self._resend_unanswered)

    # ------------------------------------------------------------------ inbound (any thread)
    def _decoded(self, msg: Any, cls, kind: str):
        """The document in ``msg``, or None with the reason in the inbox."""
        try:
            return document_from_msg(msg, cls)
        except SchemaError as exc:
            self.inbox.put(("error", f"ignoring a malformed {kind}: {exc}"))
            return None

    def _document(self, cls, kind: str):
        def on_message(msg: Any) -> None:
            doc = self._decoded(msg, cls, kind)
            if doc is not None:
                self.inbox.put((kind, doc))
        return on_message

    def _on_status(self, msg: Any) -> None:
        status = self._decoded(msg, EpisodeStatus, "status")
        if status is None:
            return
        if status.state == RUNNING:  # the start arrived, even if its reply did not
            with self._lock:
                self._resends.answered(status.episode_id)
        self.inbox.put(("status", status))

    def _on_reply(self, msg: Any) -> None:
        reply = self._decoded(msg, EpisodeCommandReply, "command reply")
        if reply is None:
            return
        with self._lock:
            mine = reply.command == START and reply.episode_id in self._resends
            self._resends.answered(reply.episode_id)
        if mine:  # the answer to this panel's own start (another client's is theirs)
            self.inbox.put(("reply", reply))

    def _resend_unanswered(self) -> None:
        with self._lock:
            again = self._resends.due(time.monotonic())
        for command in again:
            self._command_pub.publish(document_to_msg(command))

    def _on_safety(self, msg: DiagnosticStatus) -> None:
        values = {kv.key: kv.value for kv in msg.values}
        self.inbox.put(("safety", SafetyState.from_values(values, msg.message)))

    def _on_image(self, msg: Image) -> None:
        self._keep_latest("image", msg, image_from_msg)

    def _on_depth(self, msg: Image) -> None:
        self._keep_latest("depth", msg, depth_from_msg)

    def _keep_latest(self, which: str, msg: Image, convert) -> None:
        """Convert a camera frame and keep it as the newest one (frames are never queued)."""
        try:
            frame = (stamp_to_ns(msg.header.stamp), convert(msg))
        except InvalidInputError as exc:
            self.inbox.put(("error", f"{which} image: {exc}"))
            return
        with self._lock:
            if which == "image":
                self._image = frame
                self.frames += 1
            else:
                self._depth = frame

    def latest_image(self) -> tuple[int, np.ndarray] | None:
        with self._lock:
            return self._image

    def latest_depth(self) -> tuple[int, np.ndarray] | None:
        with self._lock:
            return self._depth

    # ------------------------------------------------------------------ outbound (PanelOutbox)
    def send_command(self, command: EpisodeCommand) -> None:
        with self._lock:
            self._resends.sent(command, time.monotonic())
        self._command_pub.publish(document_to_msg(command))

    def publish_labels(self, labels: EpisodeLabels) -> None:
        self._labels_pub.publish(document_to_msg(labels))

    def service_ready(self, service: str) -> bool:
        client = self._arm if service == topics.ARM_SERVICE else self._triggers.get(service)
        return client is not None and client.service_is_ready()

    def call_trigger(self, service: str) -> bool:
        client = self._triggers[service]
        if not client.service_is_ready():
            return False
        client.call_async(Trigger.Request()).add_done_callback(lambda f: self._reply(service, f))
        return True

    def call_arm(self, arm: bool) -> bool:
        if not self._arm.service_is_ready():
            return False
        self._arm.call_async(SetBool.Request(data=bool(arm))).add_done_callback(
            lambda f: self._reply(topics.ARM_SERVICE, f))
        return True

    def _reply(self, service: str, future) -> None:
        try:
            response = future.result()
        except Exception as exc:  # a service that went away mid-call
            self.inbox.put(("service", (service, False, f"no answer: {exc}")))
            return
        self.inbox.put(("service", (service, bool(response.success), str(response.message))))

    def close(self) -> None:
        self.node.destroy_timer(self._resend_timer)
        for sub in self._subscriptions:
            self.node.destroy_subscription(sub)
        for client in [*self._triggers.values(), self._arm]:
            self.node.destroy_client(client)
        self.node.destroy_publisher(self._command_pub)
        self.node.destroy_publisher(self._labels_pub)


def dispatch(controller, kind: str, payload: Any) -> None:
    """Hand one inbox item to the controller (GUI thread)."""
    if kind == "status":
        controller.on_status(payload)
    elif kind == "event":
        controller.on_event(payload)
    elif kind == "verdict":
        controller.on_verification_result(payload)
    elif kind == "labels":
        controller.on_labels(payload)
    elif kind == "current_subgoal":
        controller.on_current_subgoal(payload)
    elif kind == "safety":
        controller.on_safety(payload)
    elif kind == "service":
        controller.on_service_reply(*payload)
    elif kind == "reply":
        controller.on_command_reply(payload)
    elif kind == "policy_status":
        controller.on_policy_status(payload)
    elif kind == "error":
        controller.model.log.append(payload)
