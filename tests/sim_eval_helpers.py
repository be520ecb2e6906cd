"""What the sim-eval executor tests share: a small tabletop sweep and its records keyed by episode."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ladder_ros.core.record import without_timing

SWEEP = ["--tasks", "kitchen_single_1,sorting_split_2", "--episodes", "2", "--variants",
         "proprio_verifier,privileged_verifier", "--no-progress"]
SWEEP_EPISODES = 8


def raw_records(out: Path) -> list[dict]:
    """The readable records of ``out``, as sim-eval reads them (a line cut short is skipped)."""
    from ladder_ros.evaluation.sim_eval import read_records

    return read_records(Path(out) / "episodes.jsonl")


def records_of(out: Path) -> dict:
    """episode key -> record without its timing fields; an episode recorded twice fails the test."""
    lines = raw_records(out)
    keys = Counter((r["task_id"], r["variant"], r["layout"], r["seed"]) for r in lines)
    assert not keys or max(keys.values()) == 1, f"episodes recorded twice: {[k for k, n in keys.items() if n > 1]}"
    return {(r["task_id"], r["variant"], r["layout"], r["seed"]): without_timing(r) for r in lines}
