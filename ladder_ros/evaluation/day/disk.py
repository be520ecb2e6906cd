"""The disk guard: an episode starts only when its folder's filesystem has room for it.

The room an episode needs is twice the largest episode so far (its recording: the bag of every topic the
recorder keeps), and never less than a floor (500 MB by default) before the first episode has shown its size.
A day that runs out of disk in the middle of an episode loses that episode's bag and, with it, what the
lab would look at first; stopping one episode early loses nothing. No rclpy here.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
DEFAULT_FLOOR_MB = 500
# What to do when the disk is short, for the day's lines (tests/test_docs_shape.py checks it resolves).
NOT_ENOUGH_DISK = "docs/operator.md#not-enough-disk"


def folder_bytes(path: Path) -> int:
    """Bytes the files below ``path`` hold (a file that goes away meanwhile counts as nothing)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def free_bytes(path: Path) -> int:
    """Free bytes for this user on the filesystem of ``path`` (or of its nearest existing parent)."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def human(n: int | float) -> str:
    for unit, size in (("GB", 1024 ** 3), ("MB", MB), ("kB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


@dataclass
class DiskGuard:
    """Is there room for the next episode? ``largest_episode_bytes`` grows as episodes finish."""

    floor_bytes: int = DEFAULT_FLOOR_MB * MB
    largest_episode_bytes: int = 0

    def __post_init__(self) -> None:
        if self.floor_bytes < 0:
            raise ValueError(f"the free-space floor must be >= 0 bytes, got {self.floor_bytes}")

    def saw_episode(self, size_bytes: int) -> None:
        self.largest_episode_bytes = max(self.largest_episode_bytes, int(size_bytes))

    @property
    def need_bytes(self) -> int:
        return max(self.floor_bytes, 2 * self.largest_episode_bytes)

    def shortfall(self, free: int) -> str | None:
        """None when ``free`` bytes are enough for the next episode, else what is missing, in words."""
        if free >= self.need_bytes:
            return None
        if 2 * self.largest_episode_bytes > self.floor_bytes:
            why = f"twice the largest episode so far, {human(self.largest_episode_bytes)}"
        else:
            why = f"the floor, --min-free-mb {self.floor_bytes // MB}"
        return f"{human(free)} free, an episode needs {human(self.need_bytes)} ({why})"


class RecordingSizes:
    """The size of each finished episode's recording (``recordings/<episode id>``), measured once it is closed.

    The newest episode's bag may still be closing when the next disk check comes (the recorder keeps
    recording a moment after the end), so it is measured again at every check until a newer one exists.
    """

    def __init__(self, recordings: Path):
        self.recordings = Path(recordings)
        self._sizes: dict[str, int] = {}

    def largest(self, episode_ids: list[str]) -> int:
        for n, episode_id in enumerate(episode_ids):
            if episode_id and (episode_id not in self._sizes or n == len(episode_ids) - 1):
                self._sizes[episode_id] = folder_bytes(self.recordings / episode_id)
        return max((self._sizes.get(e, 0) for e in episode_ids), default=0)
