"""Recorded episodes of a folder, gathered from everything that records them, one entry per episode.

``ladder-ros report`` and ``ladder-ros export`` read a folder of runs, in any mix of:

* ``episodes.jsonl`` (``sim-eval``, ``ladder-ros run``): one episode record per line;
* the operator panel's record files (``episodes/<episode id>.json``): record, labels, VLM verdicts, the
  evaluation-plan entry (and, in a blind A/B session, the pair and arm);
* episode recordings (rosbag2 MCAP bags): the final ``episode/status`` (the record), the newest
  ``operator/labels``, the verifier's and planner's answers (VLM usage) and camera frames; recordings
  made before the typed interfaces (each document as JSON in a ``std_msgs/String``) read the same.

Entries are merged by episode id (a sim-eval record, which has none, is named by task, variant,
layout and seed), so an episode recorded three ways is counted once. Nothing here imports rclpy:
bags are read with ``rosbags``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from ladder_ros.core.errors import ConfigError
from ladder_ros.interface_conversions import recorded_document
from ladder_ros.messages import EpisodeLabels, EpisodeStatus, PlanResultDoc, SchemaError, VerificationResultDoc

STATUS_SUFFIX = "/episode/status"
LABELS_SUFFIX = "/operator/labels"
VERIFY_SUFFIX = "/verifier/result"
PLAN_SUFFIX = "/planner/result"
IMAGE_SUFFIX = "/camera/image_raw"


@dataclass
class RecordedEpisode:
    episode_id: str
    record: dict | None = None  # the episode record (EpisodeRecord.to_dict form)
    labels: EpisodeLabels | None = None
    vlm_calls: list = field(default_factory=list)  # {"purpose", "usage", "latency_ms", "error"} per call
    bag: Path | None = None
    sources: list = field(default_factory=list)
    plan_entry: dict | None = None  # the evaluation-plan entry the panel ran it for
    void: bool = False  # aborted by the operator or interrupted: its plan entry ran again

    @property
    def blind(self) -> dict | None:
        """``{"session", "pair", "arm"}`` for an episode of a blind A/B session, else None."""
        ab = (self.plan_entry or {}).get("ab")
        if not ab:
            return None
        return {"session": str(self.plan_entry.get("plan", "")), "pair": int(ab["pair"]), "arm": str(ab["arm"])}

    def add_labels(self, labels: EpisodeLabels | None) -> None:
        if labels is not None and (self.labels is None or labels.revision > self.labels.revision):
            self.labels = labels


def record_id(record: dict) -> str:
    """The episode id of a record; sim-eval records are named by task, variant, layout and seed."""
    return str(record.get("episode_id") or f"{record['task_id']}/{record['variant']}/l{record['layout']}/"
               f"s{record['seed']}")


def _warn(text: str) -> None:
    print(f"ladder-ros: {text}", file=sys.stderr, flush=True)


def _jsonl_records(path: Path) -> Iterator[dict]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            _warn(f"{path}:{n}: unreadable line skipped (a run cut short?)")
            continue
        if isinstance(record, dict) and "task_id" in record and "variant" in record:
            yield record


def is_bag(path: Path) -> bool:
    return path.is_dir() and (path / "metadata.yaml").is_file() and any(path.glob("*.mcap"))


def read_bag_episode(path: Path) -> RecordedEpisode | None:
    """The episode a bag holds: its final record, newest labels and VLM calls (None: no episode status)."""
    from rosbags.highlevel import AnyReader

    from ladder_ros.recording.bag import typestore

    status: EpisodeStatus | None = None
    episode = RecordedEpisode(episode_id="", bag=path, sources=[str(path)])
    with AnyReader([path], default_typestore=typestore()) as reader:
        suffixes = (STATUS_SUFFIX, LABELS_SUFFIX, VERIFY_SUFFIX, PLAN_SUFFIX)
        wanted = [c for c in reader.connections if c.topic.endswith(suffixes)]
        for connection, _, raw in reader.messages(connections=wanted) if wanted else ():
            msg = reader.deserialize(raw, connection.msgtype)
            try:
                if connection.topic.endswith(STATUS_SUFFIX):
                    doc = recorded_document(msg, EpisodeStatus)
                    if doc.result is not None or status is None or status.result is None:
                        status = doc if doc.episode_id else status
                elif connection.topic.endswith(LABELS_SUFFIX):
                    episode.add_labels(recorded_document(msg, EpisodeLabels))
                elif connection.topic.endswith(VERIFY_SUFFIX):
                    result = recorded_document(msg, VerificationResultDoc).result
                    episode.vlm_calls.append({"purpose": "verify", "usage": result.get("usage") or {},
                                              "latency_ms": result.get("latency_ms"), "error": result.get("error"),
                                              "request_id": result.get("request_id"),
                                              "raw_reply": result.get("raw_reply")})
                else:
                    plan = recorded_document(msg, PlanResultDoc)
                    episode.vlm_calls.append({"purpose": "plan", "usage": plan.usage, "latency_ms": plan.latency_ms,
                                              "error": plan.error})
            except SchemaError as exc:
                _warn(f"{path}: {connection.topic}: skipping a malformed message ({exc})")
    if status is None:
        return None
    episode.episode_id = status.episode_id
    if status.result is not None:
        episode.record = dict(status.result)
    if episode.labels is not None and episode.labels.episode_id != episode.episode_id:
        episode.labels = None
    # a query resent to the verifier is answered again: one call per request
    seen, calls = set(), []
    for call in episode.vlm_calls:
        key = (call["purpose"], call.get("request_id"))
        if call["purpose"] == "verify" and key in seen:
            continue
        seen.add(key)
        calls.append(call)
    episode.vlm_calls = calls
    return episode


def episode_record(path: str | Path) -> dict | None:
    """The episode record a bag holds: the result of its final episode status, or, for an episode that
    could not end by its rules, the record its recorder wrote into ``custom_data`` (marked interrupted)."""
    from ladder_ros.recording.bag import bag_custom_data, read_bag

    custom = bag_custom_data(Path(path))
    if "episode_record" in custom:
        return json.loads(custom["episode_record"])
    summary, _ = read_bag(path)
    status_topics = [t for t in summary.topics if t.endswith(STATUS_SUFFIX)]
    _, decoded = read_bag(path, status_topics)
    for topic in status_topics:
        for msg in reversed(decoded[topic]):
            try:
                status = recorded_document(msg, EpisodeStatus)
            except SchemaError:
                continue
            if status.result is not None and status.episode_id == custom.get("episode_id", status.episode_id):
                return status.result
    return None


def load_episodes(root: str | Path) -> list[RecordedEpisode]:
    """Every episode under ``root``, in the order first seen."""
    from ladder_ros.panel.records import read_record

    root = Path(root)
    if not root.exists():
        raise ConfigError("folder not found", source=str(root))
    episodes: dict[str, RecordedEpisode] = {}

    def entry(episode_id: str) -> RecordedEpisode:
        return episodes.setdefault(episode_id, RecordedEpisode(episode_id=episode_id))

    paths = [root] if root.is_file() else sorted(root.rglob("*"))
    for path in paths:
        if path.name == "episodes.jsonl" and path.is_file():
            for record in _jsonl_records(path):
                e = entry(record_id(record))
                e.record = e.record or record
                e.sources.append(str(path))
        elif path.suffix == ".json" and path.parent.name == "episodes" and path.is_file():
            try:
                f = read_record(path)
            except ConfigError as exc:
                _warn(f"skipping {exc}")
                continue
            e = entry(f.episode_id)
            e.record = e.record or f.result
            e.plan_entry = e.plan_entry or f.plan_entry
            e.void = e.void or f.void
            e.add_labels(f.labels)
            e.sources.append(str(path))
            if not e.vlm_calls:
                e.vlm_calls = [{"purpose": "verify", "usage": v.get("usage") or {}, "latency_ms": v.get("latency_ms"),
                                "error": v.get("error"), "request_id": v.get("request_id"),
                                "raw_reply": v.get("raw_reply")} for v in f.verdicts]
        elif is_bag(path):
            try:
                bag = read_bag_episode(path)
            except Exception as exc:  # rosbags raises its own types for a damaged bag
                _warn(f"skipping recording {path}: {exc} (if its recorder was killed: ladder-ros recording "
                      f"recover {path})")
                continue
            if bag is None:
                continue
            e = entry(bag.episode_id)
            e.record = e.record or bag.record
            e.add_labels(bag.labels)
            e.bag = path
            e.vlm_calls = bag.vlm_calls or e.vlm_calls
            e.sources.append(str(path))
    return list(episodes.values())


def with_records(episodes: Iterable[RecordedEpisode]) -> list[RecordedEpisode]:
    """The episodes that are over (have a record); the others are still running or were cut short."""
    return [e for e in episodes if e.record is not None]


def _ab_files(root: str | Path, pattern: str, read) -> Iterator[tuple[Path, object]]:
    """``read(path)`` of every file matching ``pattern`` in a blind session's folder (``ab/<session>/``) under
    ``root``; an unreadable one is reported and skipped."""
    from ladder_ros.panel.ab_session import AB_FOLDER

    root = Path(root)
    for path in sorted(root.rglob(pattern)) if root.is_dir() else []:
        if path.parent.parent.name != AB_FOLDER:
            continue
        try:
            yield path, read(path)
        except ConfigError as exc:
            _warn(f"skipping {exc}")


def ab_keys(root: str | Path) -> dict[str, dict]:
    """The sealed keys of the closed blind A/B sessions under ``root``: session name -> key."""
    from ladder_ros.panel.ab_session import KEY_FILE, read_key

    return {str(key.get("session") or path.parent.name): {**key, "path": str(path)}
            for path, key in _ab_files(root, KEY_FILE, read_key)}


def ab_pairs(root: str | Path) -> dict[str, dict[int, dict]]:
    """The pair files of the blind A/B sessions under ``root``: session -> pair -> pair file (as a dict)."""
    from ladder_ros.panel.ab_session import read_pair

    out: dict[str, dict[int, dict]] = {}
    for _, pair in _ab_files(root, "pair-*.json", read_pair):
        out.setdefault(pair.session, {})[pair.pair] = pair.to_dict()
    return out
