"""The operator's episode records on disk: one JSON file per episode, rewritten atomically on every change.

``<root>/episodes/<episode_id>.json`` holds what the panel knows of an episode: the evaluation-plan
entry it ran for, the latest episode status (task, plan, state), the VLM's verdicts with their raw
replies, the operator's labels (:class:`~ladder_ros.messages.EpisodeLabels`, every change in its
history) and, once the episode is over, the orchestrator's episode record. Every write goes to a
temporary file in the same folder, is flushed to disk (``fsync``) and then renamed over the old file
(``os.replace`` is atomic on POSIX), so a crash of the panel at any moment leaves either the previous
or the new file, never a torn one, and every label already written stays written. A restarted panel
reads the files back: the labels so far and the plan's progress. Pure: no Qt, no rclpy.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.messages import EpisodeLabels, SchemaError
from ladder_ros.panel.evaluation_plan import is_void

RECORD_SCHEMA_VERSION = 1
EPISODES_FOLDER = "episodes"
_EPISODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_episode_id(episode_id: str) -> str:
    """An episode id usable as a file name (letters, digits, ``.``, ``_``, ``-``), or an error naming it."""
    if not isinstance(episode_id, str) or not _EPISODE_ID.match(episode_id) or ".." in episode_id:
        raise InvalidInputError(f"episode id {episode_id!r} cannot name a record file: use letters, digits, "
                                "'.', '_' and '-' (at most 200)")
    return episode_id


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves the old file or the new one, never part of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # the rename itself is on disk once the folder is synced
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: Path, data: Any) -> Path:
    """``data`` as JSON at ``path`` (its folder made), atomically (:func:`write_atomic`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")
    return path


@dataclass
class EpisodeFile:
    """What one episode's record file holds."""

    episode_id: str
    labels: EpisodeLabels
    plan_entry: dict | None = None
    status: dict | None = None  # the latest EpisodeStatus, without its result
    result: dict | None = None  # the orchestrator's episode record, once the episode is over
    verdicts: list = field(default_factory=list)  # VLM verdicts in the order they came

    @classmethod
    def new(cls, episode_id: str, plan_entry: dict | None = None) -> "EpisodeFile":
        return cls(episode_id=check_episode_id(episode_id), labels=EpisodeLabels(episode_id=episode_id),
                   plan_entry=plan_entry)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": RECORD_SCHEMA_VERSION, "episode_id": self.episode_id,
                "plan_entry": self.plan_entry, "status": self.status, "result": self.result,
                "verdicts": self.verdicts, "labels": self.labels.to_dict()}

    @classmethod
    def from_dict(cls, data: Any, source: str = "") -> "EpisodeFile":
        if not isinstance(data, dict):
            raise ConfigError("an episode record is a JSON object", source=source)
        if data.get("schema_version") != RECORD_SCHEMA_VERSION:
            raise ConfigError(f"unsupported schema_version {data.get('schema_version')!r}; this version reads "
                              f"{RECORD_SCHEMA_VERSION}", source=source)
        try:
            labels = EpisodeLabels.from_dict(data["labels"])
            episode_id = check_episode_id(data["episode_id"])
        except (KeyError, SchemaError, InvalidInputError) as exc:
            raise ConfigError(f"malformed episode record: {exc}", source=source) from None
        if labels.episode_id != episode_id:
            raise ConfigError(f"labels of episode {labels.episode_id!r} in the record of {episode_id!r}",
                              source=source)
        for name in ("plan_entry", "status", "result"):
            if data.get(name) is not None and not isinstance(data[name], dict):
                raise ConfigError(f"field {name!r} must be an object or null", source=source)
        if not isinstance(data.get("verdicts", []), list):
            raise ConfigError("field 'verdicts' must be a list", source=source)
        return cls(episode_id=episode_id, labels=labels, plan_entry=data.get("plan_entry"),
                   status=data.get("status"), result=data.get("result"), verdicts=list(data.get("verdicts", [])))

    @property
    def over(self) -> bool:
        return self.result is not None or (self.status or {}).get("state") in ("finished", "aborted")

    @property
    def finish_reason(self) -> str | None:
        return (self.result or {}).get("finish_reason") or (self.status or {}).get("finish_reason")

    @property
    def void(self) -> bool:
        """Over, but aborted by the operator or interrupted: it does not count, its plan entry runs again."""
        return self.over and is_void(self.finish_reason)

    @property
    def counts(self) -> bool:
        """Over and not void: the episode its plan entry waited for."""
        return self.over and not self.void


class EpisodeRecordStore:
    """The record files under ``root/episodes/``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.folder = self.root / EPISODES_FOLDER

    def path(self, episode_id: str) -> Path:
        return self.folder / f"{check_episode_id(episode_id)}.json"

    def save(self, record: EpisodeFile) -> Path:
        return write_json(self.path(record.episode_id), record.to_dict())

    def load(self, episode_id: str) -> EpisodeFile | None:
        path = self.path(episode_id)
        if not path.is_file():
            return None
        return read_record(path)

    def records(self) -> Iterator[EpisodeFile]:
        """Every readable record, oldest file first; an unreadable one is reported and skipped."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.json"), key=lambda p: (p.stat().st_mtime, p.name)):
            try:
                yield read_record(path)
            except ConfigError as exc:
                print(f"ladder-ros: skipping {exc}", flush=True)


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document at ``path``, or a :class:`ConfigError` naming the file and what it should hold."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"unreadable {what} ({exc})", source=str(path)) from None


def read_record(path: str | Path) -> EpisodeFile:
    """One record file, or a :class:`ConfigError` naming it."""
    return EpisodeFile.from_dict(read_json(path, "episode record"), source=str(path))
