"""What every rehearsal episode's record must carry, whichever robot: the policy's report, the timing, the recording."""

from __future__ import annotations

import time
from pathlib import Path

from ladder_ros.recording.bag import read_bag

TIMING_FIELDS = {"control_period_ms", "period_error_p99_pct", "idle_periods", "max_action_gap_ms",
                 "obs_to_action_age_ms", "inference_ms"}


def check_policy_timing_and_recording(record: dict, out: Path, policy: str, min_actions: int, namespace: str,
                                      topics: tuple[str, ...]) -> None:
    """The lab's policy config ran through its openpi client and chunk executor (no server errors); the record's
    ``timing`` is complete and measured; the episode's recording closed with messages on each of ``topics``."""
    report = record["policy_report"]
    assert report["policy"] == policy and report["chunks"] > 0 and report["server_errors"] == 0, report
    timing = record["timing"]
    assert timing["applied_actions"] > min_actions and timing["chunks"] > 1, timing
    assert set(timing) >= TIMING_FIELDS
    assert timing["obs_to_action_age_ms"]["p50"] > 0 and timing["inference_ms"]["p50"] > 0
    bag = out / "recordings" / record["episode_id"]
    deadline = time.monotonic() + 60
    while not (bag / "metadata.yaml").exists():  # the recorder closes the bag after the final status
        assert time.monotonic() < deadline, f"no closed recording at {bag}"
        time.sleep(0.2)
    summary, _ = read_bag(bag)
    for topic in topics:
        assert summary.topics.get(f"/{namespace}/{topic}", 0) > 0, (topic, summary.topics)
