"""Episode recordings: one rosbag2 bag (``metadata.yaml`` + one MCAP file) per episode.

The bag is written with ``rosbags`` (MCAP storage, rosbag2 format version 9), so ``rosbags``,
``ros2 bag info/play`` and Foxglove read it; messages are stored as the CDR bytes the recorder
received (no decoding on the hot path). The episode id, the graph configuration (the files
verbatim) and the software versions are the bag's ``custom_data`` (in ``metadata.yaml`` and in the
MCAP file's ``rosbag2`` metadata record).

Each topic's offered QoS (what its publishers offered, as the recorder saw them in the graph) is
in ``metadata.yaml`` and in the MCAP channel, so ``ros2 bag play`` replays latched topics (episode
status, current subgoal) latched.

A recorder stopped with SIGINT/SIGTERM closes the bag: the MCAP file gets its summary and the
``metadata.yaml`` is written. After SIGKILL the MCAP file lacks its summary and the bag lacks
``metadata.yaml``; every chunk written before the kill is intact (the writer closes a chunk each
MiB, and :meth:`EpisodeBag.flush` every second), so at most the last second is lost, and the custom
data waits in ``custom_data.json`` beside the MCAP file (written when the bag opens, removed when
it closes). :func:`recover_bag` reads those chunks back and writes a complete bag beside the
broken one, with the original time stamps, QoS and custom data (``ladder-ros recording recover
DIR``). This module does not import rclpy.
"""

from __future__ import annotations

import functools
import json
import platform
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ladder_ros import __version__
from ladder_ros.core.errors import ConfigError
from ladder_ros.paths import SOURCE_ROOT

BAG_VERSION = 9  # rosbag2 metadata version rosbags writes (ROS 2 Jazzy and newer read it)
CUSTOM_DATA_FILE = "custom_data.json"  # the custom data of a bag still being written (for recover_bag)
_MAGIC = b"\x89MCAP0\r\n"
_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK = 0x03, 0x04, 0x05, 0x06  # MCAP spec opcodes


INTERFACES = "ladder_ros_interfaces"  # the graph's own message package (interfaces/ladder_ros_interfaces)


def interface_definitions_dir() -> Path | None:
    """The ``msg`` folder of the graph's own messages: the installed package's (what the nodes speak), or else
    the source checkout's; None when neither is there."""
    candidates = []
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory(INTERFACES)) / "msg")
    except Exception:  # not in an ament index, or ament_index_python missing
        pass
    candidates.append(Path(sys.prefix) / "share" / INTERFACES / "msg")  # a virtual environment, not on the prefix path
    candidates.append(SOURCE_ROOT / "interfaces" / INTERFACES / "msg")
    return next((c for c in candidates if any(c.glob("*.msg"))), None)


@functools.lru_cache(maxsize=1)
def typestore():
    """The rosbags type store of the recordings' messages: ROS 2 Kilted's (what the recorder writes) and the
    graph's own, whose definitions the recorder writes into every bag, so a bag reads without them."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    folder = interface_definitions_dir()
    if folder is not None:
        types = {}
        for path in sorted(folder.glob("*.msg")):
            types.update(get_types_from_msg(path.read_text(encoding="utf-8"), f"{INTERFACES}/msg/{path.stem}"))
        store.register(types)
    return store


def warm_up() -> None:
    """Import the writer and build the type store now (seconds on a busy machine), not when an episode starts."""
    from rosbags.rosbag2 import Writer  # noqa: F401
    from rosbags.rosbag2.metadata import parse_qos  # noqa: F401

    typestore()


def software_versions() -> dict[str, str]:
    versions = {"ladder_ros": __version__, "python": platform.python_version()}
    from importlib import metadata

    for dist in ("rclpy", "rosbags", "mujoco"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


QosProfiles = Sequence[Mapping[str, Any]] | str | None  # rosbag2's QoS dicts, or their YAML text


class EpisodeBag:
    """An open bag for one episode; topics are added as they first appear."""

    def __init__(self, path: Path, custom_data: Mapping[str, str]):
        from rosbags.rosbag2 import StoragePlugin, Writer

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._typestore = typestore()
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self.custom_data: dict[str, str] = {}
        self.set_custom_data(custom_data)
        self._connections: dict[str, object] = {}
        self.messages = 0

    def set_custom_data(self, values: Mapping[str, str]) -> None:
        """Add to the bag's custom data; kept on disk at once, so even a killed recorder's bag has it."""
        for key, value in values.items():
            self._writer.set_custom_data(str(key), str(value))
            self.custom_data[str(key)] = str(value)
        tmp = self.path / (CUSTOM_DATA_FILE + ".tmp")
        tmp.write_text(json.dumps(self.custom_data, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path / CUSTOM_DATA_FILE)

    def write(self, topic: str, msgtype: str, timestamp_ns: int, data: bytes, qos: QosProfiles = None) -> None:
        """One message; ``qos`` (the publishers' offered QoS) is read when the topic first appears."""
        connection = self._connections.get(topic)
        if connection is None:
            from rosbags.rosbag2.metadata import parse_qos

            connection = self._writer.add_connection(topic, msgtype, typestore=self._typestore,
                                                     offered_qos_profiles=parse_qos(qos or []))
            self._connections[topic] = connection
        self._writer.write(connection, int(timestamp_ns), data)
        self.messages += 1

    def flush(self) -> None:
        """Put everything written so far on disk as a complete MCAP chunk.

        rosbags closes a chunk every MiB; the recorder calls this every second too, so a SIGKILL
        loses at most the last second of the episode (see :func:`recover_bag`).
        """
        storage = self._writer.storage
        if storage is None:
            return
        if storage.chunk.bio.tell():
            storage.close_chunk()
        storage.bio.flush()

    def close(self) -> None:
        self._writer.close()  # metadata.yaml now holds the custom data
        _rewrite_custom_data(self.path / "metadata.yaml", self.custom_data)
        (self.path / CUSTOM_DATA_FILE).unlink(missing_ok=True)


def _rewrite_custom_data(meta: Path, custom_data: Mapping[str, str]) -> None:
    """Write ``metadata.yaml`` again with its custom data unfolded.

    rosbags writes the file with ruamel.yaml, which folds long double-quoted strings; a fold that
    lands right after an escaped backslash reads back as a space (a configuration file's newlines,
    JSON-encoded as backslash-n, came back as backslash-space-n). Without folding the values read
    back exactly, with ruamel.yaml (rosbags, ``ros2 bag``) and PyYAML alike.
    """
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.width = 1 << 30  # never fold
    info = yaml.load(meta.read_text(encoding="utf-8"))
    info["rosbag2_bagfile_information"]["custom_data"] = dict(custom_data)
    tmp = meta.with_suffix(".yaml.tmp")
    with open(tmp, "w", encoding="utf-8") as stream:
        yaml.dump(info, stream)
    tmp.replace(meta)


@dataclass(frozen=True)
class BagSummary:
    path: str
    messages: int
    topics: dict[str, int]
    custom_data: dict[str, str]
    start_ns: int
    end_ns: int


def read_bag(path: str | Path, decode_topics: Iterable[str] = ()) -> tuple[BagSummary, dict[str, list]]:
    """Open a bag with ``rosbags``: its summary and the decoded messages of ``decode_topics``."""
    from rosbags.highlevel import AnyReader

    path = Path(path)
    wanted = set(decode_topics)
    decoded: dict[str, list] = {t: [] for t in wanted}
    with AnyReader([path], default_typestore=typestore()) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        custom = bag_custom_data(path)
        connections = [c for c in reader.connections if c.topic in wanted]
        # An empty connection list means "all" to rosbags: read only when something is wanted.
        for connection, timestamp, raw in reader.messages(connections=connections) if connections else ():
            decoded[connection.topic].append(reader.deserialize(raw, connection.msgtype))
        summary = BagSummary(path=str(path), messages=sum(counts.values()), topics=counts,
                             custom_data=dict(custom), start_ns=reader.start_time, end_ns=reader.end_time)
    return summary, decoded


def bag_custom_data(path: Path) -> dict[str, str]:
    """The ``custom_data`` of a bag: its ``metadata.yaml``'s, or while it is written (or after its
    recorder was killed) ``custom_data.json``'s; empty when it has none."""
    import yaml

    meta = Path(path) / "metadata.yaml"
    if meta.is_file():
        info = (yaml.safe_load(meta.read_text(encoding="utf-8")) or {}).get("rosbag2_bagfile_information", {})
        return {str(k): str(v) for k, v in (info.get("custom_data") or {}).items()}
    pending = Path(path) / CUSTOM_DATA_FILE
    try:
        data = json.loads(pending.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


# ------------------------------------------------------------------------------ recovery
def _records(data: bytes, start: int):
    """Yield (opcode, body) of the MCAP records in ``data`` from ``start``; stops at a truncated one."""
    pos = start
    while pos + 9 <= len(data):
        opcode = data[pos]
        (length,) = struct.unpack_from("<Q", data, pos + 1)
        if pos + 9 + length > len(data):
            return  # the record the kill cut short
        yield opcode, data[pos + 9:pos + 9 + length]
        pos += 9 + length


def _string(body: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", body, pos)
    return body[pos + 4:pos + 4 + n].decode(), pos + 4 + n


def _string_map(body: bytes, pos: int) -> dict[str, str]:
    """An MCAP ``Map<string, string>``: its byte length, then key and value strings."""
    (size,) = struct.unpack_from("<I", body, pos)
    end, pos, result = pos + 4 + size, pos + 4, {}
    while pos < end:
        key, pos = _string(body, pos)
        value, pos = _string(body, pos)
        result[key] = value
    return result


def _chunk_records(body: bytes):
    pos = 8 + 8 + 8 + 4  # start, end, uncompressed size, crc
    compression, pos = _string(body, pos)
    (size,) = struct.unpack_from("<Q", body, pos)
    payload = body[pos + 8:pos + 8 + size]
    if compression == "zstd":
        import zstandard

        payload = zstandard.ZstdDecompressor().decompress(payload)
    elif compression == "lz4":
        import lz4.frame

        payload = lz4.frame.decompress(payload)
    elif compression:
        raise ConfigError(f"unsupported MCAP chunk compression {compression!r}")
    yield from _records(payload, 0)


def recover_bag(broken: str | Path, output: str | Path | None = None) -> BagSummary:
    """Rewrite the readable part of a bag whose recorder was killed into a complete bag.

    Reads every complete record of the MCAP file (schemas, channels, messages in whole chunks)
    and writes them with their original time stamps into ``output`` (default: ``<broken>.recovered``).
    """
    broken = Path(broken)
    files = sorted(broken.glob("*.mcap")) if broken.is_dir() else [broken]
    if not files or not files[0].is_file():
        raise ConfigError("no MCAP file to recover", source=str(broken))
    data = files[0].read_bytes()
    if not data.startswith(_MAGIC):
        raise ConfigError("not an MCAP file (bad magic)", source=str(files[0]))
    schemas: dict[int, str] = {}
    channels: dict[int, tuple[str, str, str]] = {}  # id -> topic, type, offered QoS (YAML)
    messages: list[tuple[int, int, bytes]] = []

    def visit(opcode: int, body: bytes) -> None:
        if opcode == _OP_SCHEMA:
            (schema_id,) = struct.unpack_from("<H", body, 0)
            name, _ = _string(body, 2)
            schemas[schema_id] = name
        elif opcode == _OP_CHANNEL:
            channel_id, schema_id = struct.unpack_from("<HH", body, 0)
            topic, pos = _string(body, 4)
            _encoding, pos = _string(body, pos)
            qos = _string_map(body, pos).get("offered_qos_profiles", "") if pos < len(body) else ""
            channels[channel_id] = (topic, schemas.get(schema_id, ""), qos)
        elif opcode == _OP_MESSAGE:
            channel_id, _seq, log_time, _publish = struct.unpack_from("<HIQQ", body, 0)
            messages.append((channel_id, log_time, bytes(body[22:])))
        elif opcode == _OP_CHUNK:
            for inner in _chunk_records(body):
                visit(*inner)

    for opcode, body in _records(data, len(_MAGIC)):
        visit(opcode, body)
    custom = bag_custom_data(broken if broken.is_dir() else broken.parent)
    output = Path(output) if output is not None else broken.with_name(broken.name + ".recovered")
    custom["recovered_from"] = str(broken)
    bag = EpisodeBag(output, custom)
    topics: dict[str, int] = {}
    try:
        for channel_id, log_time, payload in messages:
            if channel_id not in channels:
                continue
            topic, msgtype, qos = channels[channel_id]
            bag.write(topic, msgtype, log_time, payload, qos=qos)
            topics[topic] = topics.get(topic, 0) + 1
    finally:
        bag.close()
    times = [m[1] for m in messages] or [0]
    return BagSummary(path=str(output), messages=sum(topics.values()), topics=topics, custom_data=custom,
                      start_ns=min(times), end_ns=max(times))


def config_custom_data(episode_id: str, graph: str, config_files: Iterable[str], extra: Mapping[str, object]) -> dict:
    """The bag's ``custom_data``: episode id, graph, the configuration files verbatim, versions."""
    data = {"episode_id": episode_id, "graph": graph, "versions": json.dumps(software_versions(), sort_keys=True)}
    files = {}
    for name in config_files:
        path = Path(name)
        try:
            files[path.name] = path.read_text(encoding="utf-8")
        except OSError as exc:
            files[path.name] = f"<unreadable: {exc.strerror}>"
    if files:
        data["config_files"] = json.dumps(files, sort_keys=True)
    for key, value in extra.items():
        data[key] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return data
