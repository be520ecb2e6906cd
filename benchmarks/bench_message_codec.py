"""What one lockstep step spends converting the graph's own messages: typed interfaces against JSON in String.

Takes the documents of a recorded episode (by default the test fixture recorded in the JSON-in-String format,
tests/fixtures/legacy_json_recording) and times, per document, what a publisher and its subscribers do with
it: the publisher converts the document to its message and rclpy serializes it (CDR); each subscriber node
deserializes it and converts it back. JSON in String: ``encode`` + String; typed: ``document_to_msg``. The
per-step documents (privileged state, gripper events, decision, action tag) are counted once per publisher
and once per subscribing node (``ladder_ros.specs.topics``; the recorder stores the bytes undecoded).

    python benchmarks/bench_message_codec.py [--bag DIR] [--repeat 20]

Prints numbers; asserts nothing about speed. Needs the interface package (scripts/build_interfaces.sh).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from ladder_ros.interface_conversions import (  # noqa: E402
    DOCUMENT_OF_TYPE,
    document_from_msg,
    document_to_msg,
    message_type,
    recorded_document,
)
from ladder_ros.messages import decode, encode  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.recording.bag import read_bag  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "legacy_json_recording"
PER_STEP = (topics.PRIVILEGED, topics.GRIPPER_EVENTS, topics.DECISION, topics.ACTION_TAG)


def node_subscribers(spec: topics.TopicSpec) -> int:
    """Subscribing nodes that decode the topic (the recorder keeps the bytes)."""
    return sum(1 for s in spec.subscribers if s != "episode_recorder")


def per_document_us(documents: list, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median microseconds per document: (json, typed) x (publish side, one subscriber)."""
    cls = type(documents[0])
    typed_cls = message_type(cls)
    out = {}
    for name, publish, receive in (
            ("json", lambda d: serialize_message(String(data=encode(d))),
             lambda b: decode(deserialize_message(b, String).data, cls)),
            ("typed", lambda d: serialize_message(document_to_msg(d)),
             lambda b: document_from_msg(deserialize_message(b, typed_cls), cls))):
        pub_times, sub_times = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            wire = [publish(d) for d in documents]
            pub_times.append((time.perf_counter() - started) / len(documents))
            started = time.perf_counter()
            for b in wire:
                receive(b)
            sub_times.append((time.perf_counter() - started) / len(documents))
        out[name] = (1e6 * statistics.median(pub_times), 1e6 * statistics.median(sub_times))
    return out["json"], out["typed"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bag", type=Path, default=None, help="a recorded episode (default: the test fixture)")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    bag = args.bag or next(p for p in FIXTURE.iterdir() if p.is_dir())
    summary, _ = read_bag(bag)
    specs = {spec.name: spec for spec in topics.TOPICS if spec.type in DOCUMENT_OF_TYPE}
    wanted = {t: specs[name] for t in summary.topics for name in specs if t.endswith("/" + name)}
    _, decoded = read_bag(bag, wanted)
    print(f"{bag.name}: median over {args.repeat} passes, microseconds per message")
    print(f"{'topic':26s} {'n':>4s} {'subs':>4s} {'json pub':>9s} {'json sub':>9s} {'typed pub':>9s} "
          f"{'typed sub':>9s}")
    step_json = step_typed = 0.0
    for topic, spec in sorted(wanted.items(), key=lambda kv: kv[1].name):
        cls = DOCUMENT_OF_TYPE[spec.type]
        documents = [recorded_document(m, cls) for m in decoded[topic]]
        (jp, js), (tp, ts) = per_document_us(documents, args.repeat)
        subs = node_subscribers(spec)
        print(f"{spec.name:26s} {len(documents):4d} {subs:4d} {jp:9.1f} {js:9.1f} {tp:9.1f} {ts:9.1f}")
        if spec in PER_STEP:
            step_json += jp + subs * js
            step_typed += tp + subs * ts
    print(f"per lockstep step (privileged state, gripper events, decision, action tag; each published once and "
          f"converted back by every subscribing node): JSON in String {step_json / 1000:.2f} ms, typed "
          f"{step_typed / 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
