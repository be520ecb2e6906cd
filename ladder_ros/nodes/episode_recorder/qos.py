"""The QoS each recorded topic's publishers offer, as rosbag2 writes it into a bag's ``metadata.yaml``.

A bag replays a topic with the QoS recorded for it: a latched topic must come back latched, a sensor stream best
effort. :class:`OfferedQos` looks each topic's publishers up in the graph once and keeps what they offered, so
every message written afterwards carries it without asking the graph again.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from rclpy.qos import QoSProfile

from ladder_ros.runtime.endpoints import qos
from ladder_ros.specs import topics

_INFINITE = {"sec": 2147483647, "nsec": 4294967295}  # rosbag2's "infinite" QoS duration


def _duration(nanoseconds: int) -> dict[str, int]:
    if nanoseconds >= 2**63 - 1:
        return dict(_INFINITE)
    return {"sec": nanoseconds // 1_000_000_000, "nsec": nanoseconds % 1_000_000_000}


def offered_qos(profile: QoSProfile, spec: topics.TopicSpec | None) -> dict[str, Any]:
    """One publisher's QoS as rosbag2 writes it into ``metadata.yaml``.

    Discovery does not carry history and depth; for the graph's own topics they come from
    :mod:`ladder_ros.specs.topics`, so a latched topic replays with its depth of 1.
    """
    history, depth = profile.history.name.lower(), int(profile.depth)
    if spec is not None and (history not in ("keep_last", "keep_all") or depth == 0):
        history, depth = "keep_last", topics.QOS_DEPTH[spec.qos]
    return {"history": history, "depth": depth, "reliability": profile.reliability.name.lower(),
            "durability": profile.durability.name.lower(), "deadline": _duration(profile.deadline.nanoseconds),
            "lifespan": _duration(profile.lifespan.nanoseconds), "liveliness": profile.liveliness.name.lower(),
            "liveliness_lease_duration": _duration(profile.liveliness_lease_duration.nanoseconds),
            "avoid_ros_namespace_conventions": bool(profile.avoid_ros_namespace_conventions)}


class OfferedQos:
    """The offered QoS of each topic, looked up in the graph the first time a message of it is written.

    ``publishers_info(topic)`` is the graph's publishers of a topic (``Node.get_publishers_info_by_topic``);
    ``specs`` maps each graph topic's resolved name to its spec. A topic whose publisher is gone already gets the
    QoS the graph declares for it.
    """

    def __init__(self, publishers_info: Callable[[str], Iterable[Any]], specs: dict[str, topics.TopicSpec]):
        self._publishers_info = publishers_info
        self._specs = specs
        self._offered: dict[str, list[dict]] = {}

    def of(self, topic: str) -> list[dict]:
        if topic not in self._offered:
            spec = self._specs.get(topic)
            profiles = [offered_qos(info.qos_profile, spec) for info in self._publishers_info(topic)]
            if not profiles and spec is not None:  # the publisher is gone already: the graph's declared QoS
                profiles = [offered_qos(qos(spec.qos), spec)]
            self._offered[topic] = profiles
        return self._offered[topic]
