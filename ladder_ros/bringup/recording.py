"""``ladder-ros recording info|recover``: inspect an episode recording, or recover one cut short.

The bags themselves (writing, reading, recovery) are :mod:`ladder_ros.recording.bag`; the names
below stay importable from here.
"""

from __future__ import annotations

from pathlib import Path

from ladder_ros.core.errors import ConfigError
from ladder_ros.recording.bag import BagSummary, read_bag, recover_bag


def register(subparsers) -> None:
    """``ladder-ros recording``: inspect a bag, or recover one whose recorder was killed."""
    parser = subparsers.add_parser("recording", help="inspect or recover an episode recording (rosbag2 MCAP)",
                                   description=register.__doc__)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    info = sub.add_parser("info", help="topics, message counts and metadata of a recording")
    info.add_argument("bag", help="the episode's bag folder")
    info.set_defaults(func=_run_info)
    recover = sub.add_parser("recover", help="rewrite what a killed recorder left into a complete bag")
    recover.add_argument("bag", help="the broken bag folder (or its .mcap file)")
    recover.add_argument("--output", default=None, help="where to write (default: BAG.recovered)")
    recover.set_defaults(func=_run_recover)


def _print_summary(summary: BagSummary) -> None:
    print(f"{summary.path}: {summary.messages} messages, "
          f"{(summary.end_ns - summary.start_ns) / 1e9:.1f} s")
    for topic, count in sorted(summary.topics.items()):
        print(f"  {topic}: {count}")
    for key in ("episode_id", "graph", "task_id", "variant", "interrupted", "continues", "versions"):
        if key in summary.custom_data:
            print(f"  {key}: {summary.custom_data[key]}")


def _run_info(args) -> int:
    path = Path(args.bag)
    if not path.exists():
        raise ConfigError("recording not found", source=str(path))
    try:
        summary, _ = read_bag(path)
    except Exception as exc:  # rosbags raises its own error types for unreadable bags
        raise ConfigError(f"cannot read the recording ({exc}); if its recorder was killed, run "
                          f"'ladder-ros recording recover {path}'", source=str(path)) from None
    _print_summary(summary)
    return 0


def _run_recover(args) -> int:
    summary = recover_bag(args.bag, args.output)
    print(f"recovered {summary.messages} messages into {summary.path}")
    _print_summary(read_bag(summary.path)[0])
    return 0
