"""Decode every message of an MCAP file with ``mcap_ros2`` alone, as a tool without ladder_ros would.

Run as ``python -I tests/mcap_ros2_peer.py FILE.mcap`` (isolated: no PYTHONPATH, no current folder): it refuses
to import ``ladder_ros`` and the generated ``ladder_ros_interfaces`` module, so every field it prints comes from
the message definitions the recorder wrote into the file. Prints one JSON object: topic -> its schema name
and the list of its messages as plain values (nested messages as objects, ``uint8[]`` as hex).
"""

import importlib.abc
import json
import sys


class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("ladder_ros", "ladder_ros_interfaces"):
            raise ImportError(f"{name} must not be needed to read a recording")
        return None


sys.meta_path.insert(0, _Refuse())

from mcap.reader import make_reader  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402


def plain(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "__slots__") and not isinstance(value, (str, int, float, bool)):
        return {name: plain(getattr(value, name)) for name in value.__slots__}
    if hasattr(value, "tolist"):  # a numpy array
        return plain(value.tolist())
    return value


def main(path: str) -> None:
    out: dict = {}
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for schema, channel, _, decoded in reader.iter_decoded_messages():
            entry = out.setdefault(channel.topic, {"schema": schema.name, "encoding": schema.encoding,
                                                   "messages": []})
            entry["messages"].append(plain(decoded))
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("ladder_ros", "ladder_ros_interfaces"))
    print(json.dumps({"topics": out, "loaded": loaded}, allow_nan=True))


if __name__ == "__main__":
    main(sys.argv[1])
