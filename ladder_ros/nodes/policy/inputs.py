"""The policy node's inputs: their names, the images its policies read, and on the wall clock the newest message of
each."""

from __future__ import annotations

import time
from typing import Callable, Iterable

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.policies.config import PolicyConfig

JOINTS, POSE, IMAGE, PRIVILEGED, DECISION = "joint_states", "ee_pose", "image", "privileged", "decision"


def image_inputs(config: PolicyConfig, reads: frozenset[str] | None = None) -> list[str]:
    """The image inputs a policy reads (``image:<camera>``), its first camera first. ``reads`` replaces what the
    configs say (tests): without "image" none, with it and no camera configured the default image topic."""
    if reads is not None and IMAGE not in reads:
        return []
    if reads is not None and not config.cameras:
        return [IMAGE]
    return [f"{IMAGE}:{c.name}" for c in config.cameras]


def camera_topics(configs: Iterable[PolicyConfig], reads: frozenset[str] | None = None) -> dict[str, str]:
    """Every image input of the policies a node serves -> its topic ("": the default image topic). One camera
    name read from two topics is refused."""
    topics: dict[str, str] = {}
    if reads is not None and IMAGE not in reads:
        return topics
    for config in configs:
        if reads is not None and not config.cameras:
            topics[IMAGE] = ""
        for camera in config.cameras:
            name = f"{IMAGE}:{camera.name}"
            if topics.setdefault(name, camera.topic) != camera.topic:
                raise ConfigError(f"policy {config.name} reads camera {camera.name} from {camera.topic}, another "
                                  f"policy of the node from {topics[name]}: one camera name, one topic")
    return topics


class LatestInputs:
    """Wall clock: the newest message of each input and when it was observed (monotonic seconds).

    An input's observation time is its arrival, moved back by how old its header stamp already was
    then (a camera that delivers late is caught by the age check, not just a silent one).
    """

    def __init__(self, ros_now_ns: Callable[[], int]):
        self._ros_now_ns = ros_now_ns
        self._latest: dict[str, tuple[float, int, object]] = {}

    def put(self, name: str, stamp_ns: int, msg: object) -> None:
        lag_s = max(0.0, (self._ros_now_ns() - stamp_ns) / 1e9) if stamp_ns > 0 else 0.0
        self._latest[name] = (time.monotonic() - lag_s, stamp_ns, msg)

    def get(self, names: frozenset[str]) -> dict[str, tuple[float, int, object]]:
        latest = dict(self._latest)  # one consistent view (the dict is replaced entry by entry)
        missing = sorted(n for n in names if n not in latest)
        if missing:
            raise InvalidInputError(f"no {', '.join(missing)} received yet")
        return {n: latest[n] for n in names}

    def age(self, names: frozenset[str], now: float) -> float | None:
        try:
            return now - min(observed for observed, _, _ in self.get(names).values())
        except InvalidInputError:
            return None
