"""Latched messages that describe the graph rather than an episode, kept for every episode's bag.

``/tf_static`` (the camera's calibrated pose) is sent once, when its node starts, and never again; an episode's
bag must replay on its own, so each distinct message of such a topic is kept here and written into every bag
when it opens (:class:`GraphStateMessages`).
"""

from __future__ import annotations

from typing import Iterator

GRAPH_STATE_KEPT = 32  # distinct messages kept per such topic (one per publisher: each camera's pose)


class GraphStateMessages:
    """The distinct messages of the graph-state topics (``types``: resolved topic name -> message type name),
    the oldest dropped beyond ``capacity`` per topic."""

    def __init__(self, types: dict[str, str], capacity: int = GRAPH_STATE_KEPT):
        self._types = dict(types)
        self._capacity = capacity
        self._kept: dict[str, dict[bytes, None]] = {topic: {} for topic in self._types}

    def holds(self, topic: str) -> bool:
        """Whether ``topic`` is a graph-state topic (its messages go through here, not an episode's buffer)."""
        return topic in self._types

    def keep(self, topic: str, data: bytes) -> bool:
        """Keep one message of a graph-state topic; False when the same message is kept already."""
        kept = self._kept[topic]
        if bytes(data) in kept:
            return False
        if len(kept) >= self._capacity:
            kept.pop(next(iter(kept)))
        kept[bytes(data)] = None
        return True

    def messages(self) -> Iterator[tuple[str, str, bytes]]:
        """Every kept message as (topic, type name, CDR bytes), topic by topic in the order received."""
        for topic, kept in self._kept.items():
            for data in kept:
                yield topic, self._types[topic], data

    @property
    def count(self) -> int:
        """How many messages are kept, over all graph-state topics."""
        return sum(len(kept) for kept in self._kept.values())
