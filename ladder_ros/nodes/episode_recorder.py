"""The episode recorder: every topic of an episode into one rosbag2 MCAP bag."""

from __future__ import annotations

import importlib
import json
import time
from collections import deque
from pathlib import Path
from typing import Sequence

from rclpy.node import Node
from rclpy.serialization import deserialize_message
from std_msgs.msg import String

from ladder_ros.bringup.recording import EpisodeBag, config_custom_data
from ladder_ros.messages import START, EpisodeCommand, EpisodeStatus, SchemaError, decode
from ladder_ros.nodes import topics
from ladder_ros.nodes.parameters import EPISODE_RECORDER
from ladder_ros.nodes.runtime import declare_parameters, run_node, subscription

FLUSH_PERIOD_S = 1.0  # at most this much of an episode is lost when the recorder is killed (SIGKILL)
# Messages received this long before an episode's status are kept for it: topics arrive in any
# order, and a recorder that just (re)started may be matched by the status publisher last.
IDLE_BUFFER_S = 5.0
RECORDER_DEPTH = 1000  # messages queued per topic, so a slow disk does not lose reliable messages


def message_class(type_name: str):
    """``sensor_msgs/msg/Image`` -> the rclpy message class."""
    package, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


class EpisodeRecorderNode(Node):
    """Records every topic of the graph (:data:`ladder_ros.nodes.topics.TOPICS`) per episode.

    It subscribes with the publishers' QoS (a deeper queue, so a slow disk does not lose reliable
    messages) and in raw mode: the CDR bytes go to disk without decoding. A bag opens when the
    episode status announces a new episode (messages received just before it are kept: topics
    arrive in any order) and closes ``close_grace_s`` after the episode's final status (sooner when the
    next episode's start command comes first, so its messages go to its own bag), or when
    the node shuts down (Ctrl-C, SIGTERM): the bag is then complete. Every second the data so far is
    written out as a complete MCAP chunk, so after a SIGKILL all but the last second is recoverable
    (``ladder-ros recording recover``). Each episode's bag is
    ``<output_dir>/<episode_id>/`` with its ``metadata.yaml`` and MCAP file; its custom data holds
    the episode id, the task, variant, layout and seed, the graph name, the configuration files
    verbatim and the software versions.

    Topics: subscribes to all graph topics (see the README's table). Parameters: preset,
    clock_mode, output_dir, graph, config_files, close_grace_s (s).
    """

    def __init__(self, *, node_name: str = "episode_recorder", **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, EPISODE_RECORDER)
        self.output_dir = Path(self.params["output_dir"]).expanduser()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.bag: EpisodeBag | None = None
        self.episode_id = ""
        self._close_at: float | None = None
        self._idle: deque[tuple[float, str, str, int, bytes]] = deque(maxlen=2000)
        self.closed: list[str] = []  # bag folders finished by this node
        for spec in topics.TOPICS:
            subscription(self, message_class(spec.type), spec,
                         self._make_callback(self.resolve_topic_name(spec.name), spec.type),
                         depth=None if spec.qos == topics.LATCHED else RECORDER_DEPTH, raw=True)
        self.create_timer(0.1, self._close_when_due)
        self.create_timer(FLUSH_PERIOD_S, self._flush)

    def _make_callback(self, topic: str, type_name: str):
        status_topic = self.resolve_topic_name(topics.EPISODE_STATUS.name)
        command_topic = self.resolve_topic_name(topics.EPISODE_COMMAND.name)

        def on_message(data: bytes) -> None:
            now_ns = self.get_clock().now().nanoseconds
            if topic == status_topic:
                self._on_status(data)
            elif topic == command_topic and self._close_at is not None:
                self._on_command_after_end(data)
            self._record(topic, type_name, now_ns, data)
        return on_message

    def _on_command_after_end(self, data: bytes) -> None:
        """A start command while the last episode's bag waits out its grace: that episode is over,
        and what follows (the command, the plan request) belongs to the next episode's bag."""
        try:
            command = decode(deserialize_message(data, String).data, EpisodeCommand)
        except SchemaError:
            return  # recorded as it is; the orchestrator reports it
        if command.command == START:
            self._close()

    def _on_status(self, data: bytes) -> None:
        try:
            status = decode(deserialize_message(data, String).data, EpisodeStatus)
        except SchemaError as exc:
            self.get_logger().error(f"ignoring episode status: {exc}")
            return
        if status.state == "running" and status.episode_id and status.episode_id != self.episode_id:
            self._open(status)
        elif status.state in ("finished", "aborted") and status.episode_id == self.episode_id and self.bag:
            self._close_at = time.monotonic() + self.params["close_grace_s"]

    def _open(self, status: EpisodeStatus) -> None:
        self._close()
        task = status.task or {}
        custom = config_custom_data(status.episode_id, self.params["graph"], self.params["config_files"], {
            "task_id": task.get("task_id", ""), "variant": status.variant, "layout": str(status.layout),
            "seed": str(status.seed), "preset": status.preset, "clock": status.clock,
            "plan": json.dumps(status.plan)})
        path = self.output_dir / status.episode_id
        try:
            self.bag = EpisodeBag(path, custom)
        except Exception as exc:  # rosbags raises its own errors (path exists, disk); keep the node up
            self.get_logger().error(f"cannot record episode {status.episode_id} at {path}: {exc}")
            self.bag = None
            return
        self.episode_id = status.episode_id
        now = time.monotonic()
        for received, topic, type_name, stamp, data in self._idle:
            if now - received <= IDLE_BUFFER_S:
                self.bag.write(topic, type_name, stamp, data)
        self._idle.clear()
        self.get_logger().info(f"recording episode {status.episode_id} to {path}")

    def _record(self, topic: str, type_name: str, stamp_ns: int, data: bytes) -> None:
        if self.bag is None:
            self._idle.append((time.monotonic(), topic, type_name, stamp_ns, bytes(data)))
            return
        self.bag.write(topic, type_name, stamp_ns, data)

    def _flush(self) -> None:
        if self.bag is not None:
            self.bag.flush()

    def _close_when_due(self) -> None:
        if self._close_at is not None and time.monotonic() >= self._close_at:
            self._close()

    def _close(self) -> None:
        self._close_at = None
        if self.bag is not None:
            bag, self.bag = self.bag, None
            bag.close()
            self.closed.append(str(bag.path))
            self.get_logger().info(f"recording closed: {bag.path} ({bag.messages} messages)")

    def close(self) -> None:
        """Shutdown: finish the open bag so the MCAP file is complete and readable."""
        self._close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("episode_recorder", EpisodeRecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
