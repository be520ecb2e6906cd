"""The episode recorder node: every topic of an episode into one rosbag2 MCAP bag (see the package docstring)."""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path
from typing import Any, Sequence

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.serialization import deserialize_message

from ladder_ros.core.record import graph_record, interrupted_reason
from ladder_ros.messages import (
    ABORTED,
    FINISHED,
    RUNNING,
    START,
    EpisodeCommand,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeStatus,
    SchemaError,
    episode_id_problem,
)
from ladder_ros.interface_conversions import document_from_msg
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import EPISODE_RECORDER
from ladder_ros.nodes.episode_recorder.graph_state import GraphStateMessages
from ladder_ros.nodes.episode_recorder.qos import OfferedQos
from ladder_ros.runtime.endpoints import message_class, publisher, subscription
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node, spin_for
from ladder_ros.ros_conversions import diagnostics_to_msg
from ladder_ros.recording.bag import EpisodeBag, config_custom_data, warm_up

FLUSH_PERIOD_S = 1.0  # at most this much of an episode is lost when the recorder is killed (SIGKILL)
# On Ctrl-C or SIGTERM the messages already received are written before the bag closes, for at most
# this long (s): a recorder that lags behind the graph keeps what was sent before the stop. Below the
# 5 s after which ros2 launch escalates to SIGTERM.
STOP_DRAIN_S = 3.0
# On a stop: how long to wait for the orchestrator's final status of an open episode. Its last word takes
# up to 2 s for the bridge's score and 2 s to be acknowledged (nodes/orchestrator/ending.py, LAST_WORD_S), and
# launch escalates to SIGKILL 10 s after the Ctrl-C, so drain and wait stay under that.
FINAL_STATUS_WAIT_S = 5.0
FINAL_STATES = (FINISHED, ABORTED)
# Messages received this long before an episode's status are kept for it: topics arrive in any
# order, and a recorder that just (re)started may be matched by the status publisher last.
IDLE_BUFFER_S = 5.0
RECORDER_DEPTH = 1000  # messages queued per topic, so a slow disk does not lose reliable messages
# Latched topics that describe the graph rather than an episode: sent once when their node starts, so each
# distinct message is kept and written into every episode's bag when it opens (a bag replays on its own).
GRAPH_STATE_TOPICS = (topics.TF_STATIC,)
WATCH_PERIOD_S = 0.5  # how often an open episode's orchestrator is looked for in the graph
DIAGNOSTICS_PERIOD_S = 1.0  # the 1 Hz of the graph's /diagnostics (ladder_ros/specs/topics.py)


class EpisodeRecorderNode(Node):
    """Records every topic of the graph (:data:`ladder_ros.specs.topics.TOPICS`) per episode.

    It subscribes with the publishers' QoS (a deeper queue, so a slow disk does not lose reliable
    messages) and in raw mode: the CDR bytes go to disk without decoding, each topic with the QoS its
    publishers offered. A bag opens when the episode status announces a new episode (messages
    received just before it are kept: topics arrive in any order) and closes ``close_grace_s`` after
    the episode's final status (sooner when the next episode's start command comes first, so its
    messages go to its own bag), or when the node shuts down (Ctrl-C, SIGTERM; it first takes in for
    ``close_grace_s`` what has already arrived): the bag is then complete. Every second the data so
    far is written out as a complete MCAP chunk, so after a SIGKILL all but the last second is
    recoverable (``ladder-ros recording recover``). Each
    episode's bag is ``<output_dir>/<episode_id>/`` with its ``metadata.yaml`` and MCAP file (an id
    that is not a safe folder name is never recorded); a recorder restarted mid-episode continues in
    ``<episode_id>.part2/`` (custom data ``continues``). Its custom data holds the episode id, the
    task, variant, layout and seed, the graph name, the configuration files verbatim and the software
    versions, and at the end the finish reason.

    Nothing is lost when the episode cannot end by its rules: when the orchestrator disappears from
    the graph during an episode, or this node is stopped first, the bag is closed with custom data
    ``interrupted`` (the reason) and ``episode_record``, a record built from the last status and every
    event recorded, marked ``interrupted``.

    Operator labels (``operator/labels``) usually come after the episode is over, so while an
    operator panel publishes them the bag stays open after the final status until the labels are
    marked final, the next episode starts, or ``labels_grace_s`` has passed; labels made later are
    still in the panel's episode record file (the labels' primary copy).

    ``/tf_static`` (the camera's calibrated pose) is sent once when the camera starts: every distinct
    message of it is kept and written into each episode's bag when it opens. A topic whose message
    type is not installed (``tf2_msgs`` outside a ROS install, before ``scripts/setup.sh``) is not
    recorded, with one warning.

    Topics: subscribes to all graph topics (see the table in docs/interfaces.md), ``/clock`` included; publishes its
    health on ``/diagnostics`` at 1 Hz: the open episode, and the topics whose publishers it has not
    matched yet (warn: their messages would be missing from a bag), so a test or an operator can wait
    until it hears the whole graph before starting an episode.
    Parameters: preset, clock_mode, output_dir, graph, config_files, close_grace_s (s),
    labels_grace_s (s).
    """

    drain_on_stop_s = STOP_DRAIN_S  # read by run_node

    def __init__(self, *, node_name: str = "episode_recorder", **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, EPISODE_RECORDER)
        self.output_dir = Path(self.params["output_dir"]).expanduser()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        warm_up()
        self.bag: EpisodeBag | None = None
        self.episode_id = ""
        self.status: EpisodeStatus | None = None  # the open episode's latest status
        self._events: list[dict] = []  # the open episode's events, for a record of an interrupted episode
        self._final = False  # the open episode's final status is in
        self._opened_at = 0.0
        self._close_at: float | None = None
        self._finished_at: float | None = None
        self._labels_final: set[str] = set()  # episodes whose operator labels are final
        self._labels_topic = self.resolve_topic_name(topics.LABELS.name)
        self._idle: deque[tuple[float, str, str, int, bytes]] = deque(maxlen=2000)
        self._offered = OfferedQos(self.get_publishers_info_by_topic,
                                   {self.resolve_topic_name(spec.name): spec for spec in topics.TOPICS})
        self._status_topic = self.resolve_topic_name(topics.EPISODE_STATUS.name)
        self._command_topic = self.resolve_topic_name(topics.EPISODE_COMMAND.name)
        self._events_topic = self.resolve_topic_name(topics.EVENTS_TOPIC.name)
        self.closed: list[str] = []  # bag folders finished by this node
        self.graph_state = GraphStateMessages({self.resolve_topic_name(spec.name): spec.type
                                               for spec in GRAPH_STATE_TOPICS})
        self._topic_subscriptions: dict[str, Any] = {}
        for spec in topics.TOPICS:
            try:
                kind = message_class(spec.type)
            except ImportError as exc:
                self.get_logger().warning(f"not recording {spec.name}: its type {spec.type} is not installed ({exc})")
                continue
            topic = self.resolve_topic_name(spec.name)
            # Latched topics too keep a queue: a reset with nothing to move publishes its final status and the
            # next episode its running one within milliseconds, and each must reach its bag.
            self._topic_subscriptions[topic] = subscription(
                self, kind, spec, self._make_callback(topic, spec.type), depth=RECORDER_DEPTH, raw=True)
        self.create_timer(0.1, self._close_when_due)
        self.create_timer(FLUSH_PERIOD_S, self._flush)
        self.create_timer(WATCH_PERIOD_S, self._watch_orchestrator)
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)

    def _make_callback(self, topic: str, type_name: str):
        def on_message(data: bytes) -> None:
            now_ns = self.get_clock().now().nanoseconds
            if topic == self._status_topic:
                self._on_status(data)
            elif topic == self._labels_topic:
                self._on_labels(data)
            elif topic == self._command_topic and self._close_at is not None:
                self._on_command_after_end(data)
            self._record(topic, type_name, now_ns, data)
        return on_message

    @staticmethod
    def _document(data: bytes, spec: topics.TopicSpec, cls: type):
        """The document in the CDR bytes of a message of ``spec``'s topic (received raw)."""
        return document_from_msg(deserialize_message(data, message_class(spec)), cls)

    def _on_command_after_end(self, data: bytes) -> None:
        """A start command while the last episode's bag waits out its grace: that episode is over,
        and what follows (the command, the plan request) belongs to the next episode's bag."""
        try:
            command = self._document(data, topics.EPISODE_COMMAND, EpisodeCommand)
        except SchemaError:
            return  # recorded as it is; the orchestrator reports it
        if command.command == START:
            self._close()

    def _on_status(self, data: bytes) -> None:
        try:
            status = self._document(data, topics.EPISODE_STATUS, EpisodeStatus)
        except SchemaError as exc:
            self.get_logger().error(f"ignoring episode status: {exc}")
            return
        if status.episode_id and status.episode_id != self.episode_id and (
                status.state == RUNNING or (status.state in FINAL_STATES and self._never_recorded(status.episode_id))):
            # A sub-second episode's running status can be overwritten (latched, depth 1) before this node reads
            # it: its final status opens the bag, which then holds the buffered messages and the result.
            self._open(status)
        if status.episode_id == self.episode_id and self.bag is not None:
            self.status = status
            if status.state in FINAL_STATES and not self._final:
                self._final = True
                result = status.result or {}
                self.bag.set_custom_data({"finish_reason": str(status.finish_reason),
                                          "interrupted": "true" if result.get("interrupted") else "false"})
                self._finished_at = time.monotonic()
                self._close_at = self._finished_at + self.params["close_grace_s"]

    def _on_labels(self, data: bytes) -> None:
        labels = self._labels_of(data)
        if labels is not None and labels.final:
            self._labels_final.add(labels.episode_id)

    def _labels_of(self, data: bytes) -> EpisodeLabels | None:
        try:
            return self._document(data, topics.LABELS, EpisodeLabels)
        except SchemaError as exc:
            self.get_logger().error(f"ignoring operator labels: {exc}")
            return None

    def _waiting_for_labels(self, now: float) -> bool:
        """An operator panel is up and has not finished labelling the episode that just ended."""
        return (self._finished_at is not None and now - self._finished_at < self.params["labels_grace_s"]
                and self.episode_id not in self._labels_final
                and self.count_publishers(self._labels_topic) > 0)

    def _never_recorded(self, episode_id: str) -> bool:
        """No bag of the episode in the output folder (a restarted recorder reads the last final status again)."""
        return episode_id_problem(episode_id) is not None or not (self.output_dir / episode_id).exists()

    def _bag_path(self, episode_id: str) -> tuple[Path, str]:
        """``<output_dir>/<id>``, or ``<id>.partN`` when a recorder before this one already began it."""
        path, part = self.output_dir / episode_id, 1
        while path.exists():
            part += 1
            path = self.output_dir / f"{episode_id}.part{part}"
        return path, "" if part == 1 else episode_id

    def _open(self, status: EpisodeStatus) -> None:
        self._close()
        problem = episode_id_problem(status.episode_id)
        if problem:
            self.get_logger().error(f"not recording: {problem}")
            return
        task = status.task or {}
        path, continues = self._bag_path(status.episode_id)
        if path.resolve().parent != self.output_dir.resolve():
            self.get_logger().error(f"not recording episode {status.episode_id!r}: {path} is outside {self.output_dir}")
            return
        custom = config_custom_data(status.episode_id, self.params["graph"], self.params["config_files"], {
            "task_id": task.get("task_id", ""), "variant": status.variant, "layout": str(status.layout),
            "seed": str(status.seed), "preset": status.preset, "clock": status.clock,
            "plan": json.dumps(status.plan), **({"continues": continues} if continues else {})})
        try:
            self.bag = EpisodeBag(path, custom)
        except Exception as exc:  # rosbags raises its own errors (path exists, disk); keep the node up
            self.get_logger().error(f"cannot record episode {status.episode_id} at {path}: {exc} "
                                    "(see docs/operator.md#not-enough-disk)")
            self.bag = None
            return
        self.episode_id, self.status, self._events, self._final = status.episode_id, status, [], False
        self._opened_at = time.monotonic()
        opened_ns = self.get_clock().now().nanoseconds
        for topic, type_name, data in self.graph_state.messages():
            self._write(topic, type_name, opened_ns, data)
        now = time.monotonic()
        for received, topic, type_name, stamp, data in self._idle:
            if topic == self._labels_topic:
                labels = self._labels_of(data)
                if labels is None or labels.episode_id != status.episode_id:
                    continue  # labels of an earlier episode, published after its bag closed
            if now - received <= IDLE_BUFFER_S:
                self._write(topic, type_name, stamp, data)
        self._idle.clear()
        self.get_logger().info(f"recording episode {status.episode_id} to {path}"
                               + (f" (continuing {continues})" if continues else ""))
        unmatched = self._unmatched()
        if unmatched:
            self.get_logger().warning(f"episode {status.episode_id}: not yet matched to the publishers of "
                                      f"{', '.join(unmatched)} (discovery still under way): their first messages "
                                      "may be missing from the bag")

    def _unmatched(self) -> list[str]:
        """Topics with a publisher in the graph that this node's subscription has not matched yet."""
        return sorted(topic for topic, sub in self._topic_subscriptions.items()
                      if sub.get_publisher_count() < self.count_publishers(topic))

    def diagnostics(self) -> tuple[str, str, dict[str, Any]]:
        """Level, message and values of this node's health: what it records and whom it does not hear yet."""
        unmatched = self._unmatched()
        values = {"episode": self.episode_id if self.bag is not None else "",
                  "messages_written": self.bag.messages if self.bag is not None else 0,
                  "bags_closed": len(self.closed), "unmatched_topics": " ".join(unmatched),
                  "publishers": sum(self.count_publishers(topic) for topic in self._topic_subscriptions)}
        if unmatched:
            return "warn", f"not yet matched to every publisher of {len(unmatched)} topic(s)", values
        what = f"recording episode {self.episode_id}" if self.bag is not None else "idle"
        return "ok", f"{what}; matched to every publisher of the recorded topics", values

    def _publish_diagnostics(self) -> None:
        level, message, values = self.diagnostics()
        self._diagnostics_pub.publish(diagnostics_to_msg(
            f"{self.get_fully_qualified_name()}: recorder", str(self.output_dir), level, message, values,
            self.get_clock().now().nanoseconds))

    def _record(self, topic: str, type_name: str, stamp_ns: int, data: bytes) -> None:
        if self.graph_state.holds(topic):
            if self.graph_state.keep(topic, data) and self.bag is not None:
                self._write(topic, type_name, stamp_ns, data)
            return  # written into each bag when it opens, not through the idle buffer
        if self.bag is None:
            self._idle.append((time.monotonic(), topic, type_name, stamp_ns, bytes(data)))
            return
        self._write(topic, type_name, stamp_ns, data)

    def _write(self, topic: str, type_name: str, stamp_ns: int, data: bytes) -> None:
        assert self.bag is not None
        if topic == self._events_topic:
            self._keep_event(data)
        self.bag.write(topic, type_name, stamp_ns, data, qos=self._offered.of(topic))

    def _keep_event(self, data: bytes) -> None:
        try:
            doc = self._document(data, topics.EVENTS_TOPIC, EpisodeEventDoc)
        except SchemaError:
            return
        if doc.episode_id == self.episode_id:
            self._events.append(doc.event)

    def _flush(self) -> None:
        if self.bag is not None:
            self.bag.flush()

    def _watch_orchestrator(self) -> None:
        """An open episode whose orchestrator left the graph without a final status is over: keep what is known."""
        if self.bag is None or self._final:
            return
        if self.count_publishers(self._status_topic) == 0:
            self._interrupt("the orchestrator left the graph without ending the episode")

    def _interrupt(self, reason: str) -> None:
        """Close the open bag with a record of the episode marked interrupted."""
        assert self.bag is not None and self.status is not None
        record = graph_record(self.status.to_dict(), events=self._events, orchestration={},
                              finish_reason=interrupted_reason(reason), last_step=self.status.step, score=None,
                              wall_s=time.monotonic() - self._opened_at, extra={"interrupted": True})
        self.bag.set_custom_data({"interrupted": reason, "finish_reason": record["finish_reason"],
                                  "episode_record": json.dumps(record, sort_keys=True)})
        self.get_logger().error(f"episode {self.episode_id}: {reason}; closing its recording with the record "
                                "marked interrupted")
        self._final = True
        self._close()

    def _close_when_due(self) -> None:
        now = time.monotonic()
        if self._close_at is not None and now >= self._close_at and not self._waiting_for_labels(now):
            self._close()

    def _close(self) -> None:
        self._close_at = None
        self._finished_at = None
        if self.bag is not None:
            bag, self.bag = self.bag, None
            bag.close()
            self.closed.append(str(bag.path))
            self.get_logger().info(f"recording closed: {bag.path} ({bag.messages} messages)")

    def on_shutdown(self, executor) -> None:
        """SIGINT/SIGTERM: wait for the open episode's final status, then take in what has already arrived.

        A stop of the whole graph (Ctrl-C of ``ros2 launch`` or ``up``) reaches the orchestrator at
        the same time; its last word, the final status of the interrupted episode, then comes within
        ``FINAL_STATUS_WAIT_S`` while it is still in the graph.
        """
        if self.bag is None:
            return
        spin_for(executor, FINAL_STATUS_WAIT_S,
                 until=lambda: self._final or self.count_publishers(self._status_topic) == 0)
        spin_for(executor, self.params["close_grace_s"])

    def close(self) -> None:
        """Shutdown: finish the open bag so the MCAP file is complete and readable."""
        if self.bag is not None and not self._final and self.status is not None:
            self._interrupt("the recorder was stopped before the episode's final status")
        self._close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("episode_recorder", EpisodeRecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
