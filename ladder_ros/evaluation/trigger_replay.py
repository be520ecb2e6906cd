"""``ladder-ros trigger-replay``: replay a recorded gripper trace through the trigger and the query timing.

The tool a lab uses to tune a trigger on recorded episodes: it reads one row per control step
(CSV with a header, or JSON Lines) with the normalised ``aperture`` in [0, 1] and, for presets
whose trigger needs a lift (Franka), the end-effector height ``z`` (or ``ee_z``) in metres. An
optional ``step`` column must count up by one. It prints the steps at which the proprioceptive
trigger ends attempts and at which the proprioceptive verifier would send its count queries
(Appendix B). Query timing restarts after every query, as it does after a retry in place or the
start of the next subgoal.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from ladder_ros.core.errors import ConfigError, InvalidInputError, read_text
from ladder_ros.core.presets import EmbodimentPreset, PRESETS, get_preset
from ladder_ros.core.triggers import GripperMonitor
from ladder_ros.core.verification import VerificationTiming

Z_COLUMNS = ("z", "ee_z")


@dataclass(frozen=True)
class TraceRow:
    step: int
    aperture: float
    z: float | None


@dataclass(frozen=True)
class ReplayResult:
    attempt_end_steps: list[int]
    attempt_end_reasons: list[str]
    release_steps: list[int]
    suppressed_steps: list[int]
    query_steps: list[int]
    query_reasons: list[str]
    steps: int

    def to_dict(self) -> dict:
        return {"attempt_end_steps": self.attempt_end_steps, "query_steps": self.query_steps,
                "attempt_end_reasons": self.attempt_end_reasons, "query_reasons": self.query_reasons,
                "release_steps": self.release_steps, "suppressed_steps": self.suppressed_steps,
                "steps": self.steps}


def _number(value: object, column: str, where: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{column} must be a number, got {value!r}", key=where) from None
    if math.isnan(number):
        raise ConfigError(f"{column} is NaN", key=where)
    return number


def read_trace(path: str | Path) -> list[TraceRow]:
    """Rows of a CSV (header row) or JSON Lines trace; errors name the file, row and column."""
    path = Path(path)
    source = str(path)
    text = read_text(path, "trace file")
    records: list[dict] = []
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"line {n}: invalid JSON: {exc.msg}", source=source) from None
            if not isinstance(obj, dict):
                raise ConfigError(f"line {n}: expected a JSON object", source=source)
            records.append(obj)
    else:
        reader = csv.DictReader(text.splitlines())
        if reader.fieldnames is None or "aperture" not in [f.strip() for f in reader.fieldnames]:
            raise ConfigError(f"a CSV trace needs a header with an 'aperture' column, got {reader.fieldnames}",
                              source=source)
        records = [{k.strip(): v for k, v in row.items() if k is not None} for row in reader]
    if not records:
        raise ConfigError("the trace has no rows", source=source)
    rows: list[TraceRow] = []
    for i, rec in enumerate(records):
        where = f"row {i + 1}"
        if "aperture" not in rec:
            raise ConfigError(f"{where}: missing column 'aperture'", source=source)
        try:
            aperture = _number(rec["aperture"], "aperture", where)
            z_col = next((c for c in Z_COLUMNS if c in rec and rec[c] not in ("", None)), None)
            z = _number(rec[z_col], z_col, where) if z_col else None
            step = int(_number(rec["step"], "step", where)) if "step" in rec and rec["step"] != "" else i
        except ConfigError as exc:
            raise ConfigError(str(exc), source=source) from None
        if rows and step != rows[-1].step + 1:
            raise ConfigError(f"{where}: steps must count up by one, got {step} after {rows[-1].step}",
                              source=source)
        rows.append(TraceRow(step=step, aperture=aperture, z=z))
    return rows


def replay(rows: list[TraceRow], preset: EmbodimentPreset) -> ReplayResult:
    """Run the preset's trigger, release detector and query timing over ``rows``."""
    monitor = GripperMonitor.for_preset(preset)
    timing = VerificationTiming(preset.verifier_timing)
    timing.restart(rows[0].step)
    ends, end_reasons, releases, suppressed, queries, query_reasons = [], [], [], [], [], []
    for row in rows:
        try:
            events = monitor.update(row.step, row.aperture, row.z)
        except InvalidInputError as exc:
            raise InvalidInputError(f"step {row.step}: {exc}") from None
        if events.attempt_end is not None:
            ends.append(row.step)
            end_reasons.append(events.attempt_end.reason)
        if events.release is not None:
            releases.append(row.step)
        if events.suppressed is not None:
            suppressed.append(row.step)
        reason = timing.update(row.step, events.release is not None)
        if reason is not None:
            queries.append(row.step)
            query_reasons.append(reason)
            timing.restart(row.step)
    return ReplayResult(attempt_end_steps=ends, attempt_end_reasons=end_reasons, release_steps=releases,
                        suppressed_steps=suppressed, query_steps=queries, query_reasons=query_reasons,
                        steps=len(rows))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "trigger-replay", help="replay a gripper trace through the trigger and query timing",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    parser.add_argument("trace", help="CSV (with header) or JSONL file: aperture[, z][, step] per control step")
    parser.add_argument("--preset", required=True, help=f"one of: {', '.join(sorted(PRESETS))}")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    preset = get_preset(args.preset)
    result = replay(read_trace(args.trace), preset)
    if args.json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
        return 0
    rate = preset.control_rate_hz
    print(f"preset {preset.name}: {preset.description}; "
          f"{result.steps} steps ({result.steps / rate:.1f} s at {rate:g} Hz)")
    print(f"trigger: open past {preset.trigger.open_threshold} after >= {preset.trigger.min_close_steps} closed steps"
          + (f" with >= {preset.trigger.min_lift_m * 100:.0f} cm lift" if preset.trigger.min_lift_m else "")
          + f", cooldown {preset.trigger.cooldown_steps}"
          + (f", timeout {preset.trigger.release_timeout_steps}" if preset.trigger.release_timeout_steps else ""))
    print(f"{'step':>6}  {'time_s':>7}  event")
    timeline = ([(s, f"attempt end ({r})") for s, r in zip(result.attempt_end_steps, result.attempt_end_reasons)]
                + [(s, "release inside cooldown (suppressed)") for s in result.suppressed_steps]
                + [(s, f"verification query ({r})") for s, r in zip(result.query_steps, result.query_reasons)])
    for step, what in sorted(timeline):
        print(f"{step:>6}  {step / rate:>7.1f}  {what}")
    print(f"attempt ends: {len(result.attempt_end_steps)}, queries: {len(result.query_steps)}, "
          f"releases (no cooldown): {len(result.release_steps)}")
    return 0
