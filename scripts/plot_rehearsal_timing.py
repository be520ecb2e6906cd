#!/usr/bin/env python3
"""Plot a rehearsal's timing from its recordings: the control periods and the observation-to-action ages.

    .venv/bin/ladder-ros rehearse widowx --episodes 2 --out runs/rehearsal
    .venv/bin/python scripts/plot_rehearsal_timing.py runs/rehearsal --out docs/images/rehearsal_timing.png

Reads every episode bag under ``DIR/recordings``: the stamps of ``robot/joint_command`` (one per action the driver
applied, stamped when it applied it) and of ``policy/action_tag`` (each action's stamp and the stamp of the
observation its chunk was computed from), the same inputs as the ``timing`` object of a rehearsal record
(``ladder_ros.evaluation.rehearsal_timing``). Left: the time between two applied actions, against the nominal
period; right: for each applied action, how old the camera frame it was computed from was when the driver
applied it, over the episode.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ladder_ros.evaluation.rehearsal_timing import TaggedAction, observation_ages
from ladder_ros.recording.bag import read_bag


def _ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def episode_series(bag: Path, period_ms: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(periods ms, applied times s from the first, observation-to-action ages ms) of one episode bag: the commands
    from the episode's first tagged action to one period after its last (not the homing after it)."""
    summary, _ = read_bag(bag)
    _, decoded = read_bag(bag, [t for t in summary.topics if t.endswith(("robot/joint_command", "policy/action_tag"))])
    tags = sorted((TaggedAction(_ns(m.stamp), _ns(m.observation_stamp), 0, 0, 0.0) for topic, msgs in decoded.items()
                   if topic.endswith("policy/action_tag") for m in msgs if not m.held), key=lambda t: t.stamp_ns)
    if not tags:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    last = tags[-1].stamp_ns + int(period_ms * 1e6)
    commands = sorted(s for topic, msgs in decoded.items() if topic.endswith("robot/joint_command")
                      for s in (_ns(m.header.stamp) for m in msgs) if tags[0].stamp_ns <= s <= last)
    matched = observation_ages(commands, tags)
    times = np.asarray([(command - commands[0]) / 1e9 for command, _ in matched])
    periods = np.diff(commands) / 1e6 if len(commands) > 1 else np.zeros(0)
    return periods, times, np.asarray([age for _, age in matched])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a rehearsal's --out folder (its recordings/ are read)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--period-ms", type=float, default=200.0, help="the nominal control period (WidowX: 200)")
    args = parser.parse_args(argv)
    bags = sorted(p.parent for p in (args.dir / "recordings").glob("*/metadata.yaml"))
    if not bags:
        print(f"no episode recordings under {args.dir / 'recordings'}", file=sys.stderr)
        return 1
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(8.0, 3.0), dpi=90)
    all_periods = []
    for number, bag in enumerate(bags, start=1):
        periods, times, ages = episode_series(bag, args.period_ms)
        all_periods.append(periods)
        right.plot(times, ages, ".", markersize=3, label=f"episode {number}")
    periods = np.concatenate(all_periods) if all_periods else np.zeros(0)
    left.hist(periods, bins=np.arange(0, max(2.5 * args.period_ms, float(periods.max(initial=0)) + 20), 10),
              color="tab:blue")
    left.axvline(args.period_ms, color="k", linestyle="--", linewidth=1, label=f"nominal {args.period_ms:g} ms")
    left.set(xlabel="time between applied actions (ms)", ylabel="actions", title="control period")
    left.legend(fontsize=8)
    right.set(xlabel="time in the episode (s)", ylabel="age (ms)", title="observation to action")
    right.legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"{args.out}: {len(bags)} episodes, {len(periods)} periods, median {np.median(periods):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
