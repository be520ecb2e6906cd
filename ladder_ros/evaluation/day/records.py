"""The day's records: one JSONL file of events, each appended and on disk (``fsync``) before the day goes on.

Events, one JSON object a line, each with ``event``, ``t`` (Unix time, s) and ``run`` (how many times the day
was started on this folder, counting from 1):

* ``run_started`` / ``run_stopped`` (with ``reason``): a start of ``ladder-ros day`` on the folder and how it
  ended (complete, budget, disk, a node that keeps dying, Ctrl-C); a run killed outright has no ``run_stopped``;
* ``started``: an episode of the plan (``key``, ``position``, ``attempt``) is about to be started on the graph;
* ``finished``: it ended and counts (``episode_id``, ``wall_s``, ``success``, ``scored``, ``finish_reason``
  and ``record``: the orchestrator's episode record);
* ``interrupted``: it ended without counting (``kind`` and ``reason``): a node died under it, the day was
  stopped or killed during it, or it ended void (the operator's abort, the graph's ``interrupted``). It runs again;
* with ``--auto-reset`` (:mod:`ladder_ros.evaluation.day.resets`): ``reset`` after each task episode (``key`` and
  ``after``: the task episode; ``episode_id``, ``outcome``, ``reason``, ``wall_s`` and ``record``: the reset's own
  episode record, ``kind: reset``); ``paused`` when a reset failed (``reason``: what is out of place); and
  ``intervention`` when the day is started again after a pause (the operator put the scene right).

A day started again on the folder reads the file back: an episode ``started`` with neither ``finished`` nor
``interrupted`` after it was under way when the day was killed; it is marked ``interrupted`` (an event
appended, so the history stays whole) and runs again. A last line cut short by the kill is dropped, since its
event was never completely written. Every planned episode is ``finished`` exactly once. Pure: no rclpy.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ladder_ros.core.errors import ConfigError

RECORDS_FILE = "day_records.jsonl"
STARTED, FINISHED, INTERRUPTED = "started", "finished", "interrupted"
RUN_STARTED, RUN_STOPPED = "run_started", "run_stopped"
RESET, PAUSED, INTERVENTION = "reset", "paused", "intervention"
KILLED_REASON = "the day stopped during the episode without its result (killed or crashed)"


def read_events(path: Path) -> tuple[list[dict], int]:
    """The events of a records file and the byte length of its complete lines (a torn last line is left out)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        raise ConfigError(f"cannot read the day's records: {exc.strerror}", source=str(path)) from None
    complete = data.rfind(b"\n") + 1
    events = []
    for number, line in enumerate(data[:complete].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            raise ConfigError(f"line {number} is not JSON: the day's records are damaged", source=str(path)) from None
        if not isinstance(event, dict) or "event" not in event:
            raise ConfigError(f"line {number} is not a day event", source=str(path))
        events.append(event)
    return events, complete


@dataclass
class DayState:
    """What the events say: which episodes count, which were under way when the day stopped, the attempts."""

    finished: dict[str, dict] = field(default_factory=dict)  # key -> its finished event
    open_starts: dict[str, dict] = field(default_factory=dict)  # key -> a started event with no end yet
    attempts: dict[str, int] = field(default_factory=dict)  # key -> started events so far
    interrupted: list[dict] = field(default_factory=list)
    resets: list[dict] = field(default_factory=list)  # the reset events, in order
    paused: list[dict] = field(default_factory=list)
    interventions: list[dict] = field(default_factory=list)
    runs: int = 0

    @classmethod
    def from_events(cls, events: Iterable[dict]) -> "DayState":
        state = cls()
        for event in events:
            state.apply(event)
        return state

    def apply(self, event: dict) -> None:
        kind, key = event.get("event"), event.get("key")
        if kind == RUN_STARTED:
            self.runs = max(self.runs, int(event.get("run", 0)))
        elif kind == STARTED:
            self.attempts[key] = self.attempts.get(key, 0) + 1
            self.open_starts[key] = event
        elif kind == FINISHED:
            self.open_starts.pop(key, None)
            self.finished.setdefault(key, event)
        elif kind == INTERRUPTED:
            self.open_starts.pop(key, None)
            self.interrupted.append(event)
        elif kind == RESET:
            self.resets.append(event)
        elif kind == PAUSED:
            self.paused.append(event)
        elif kind == INTERVENTION:
            self.interventions.append(event)


class DayRecords:
    """The records file of one day folder: read back on open, appended to event by event."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / RECORDS_FILE
        self.events: list[dict] = []
        self.state = DayState()
        self.run = 0
        self._file: Any = None

    def open(self) -> "DayRecords":
        """Read what an earlier run wrote (dropping a torn last line) and open the file for appending."""
        self.events, complete = read_events(self.path)
        if self.path.exists() and self.path.stat().st_size > complete:
            with open(self.path, "r+b") as f:  # the kill cut the last event short: it never happened
                f.truncate(complete)
                os.fsync(f.fileno())
        self.state = DayState.from_events(self.events)
        self._file = open(self.path, "a", encoding="utf-8")
        return self

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def append(self, name: str, /, **fields: Any) -> dict:
        """Write one event (``name``: started, finished, ...) and wait until it is on disk; returns it."""
        assert self._file is not None, "DayRecords.open() first"
        event = {"event": name, "t": round(time.time(), 3), "run": self.run, **fields}
        self._file.write(json.dumps(event) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self.events.append(event)
        self.state.apply(event)
        return event

    def begin_run(self, **fields: Any) -> list[dict]:
        """Count this run, then mark every episode left under way by an earlier run as interrupted; returns those
        interrupted events."""
        self.run = self.state.runs + 1
        self.append(RUN_STARTED, **fields)
        return [self.append(INTERRUPTED, key=key, position=start.get("position"), attempt=start.get("attempt"),
                            kind="killed", reason=KILLED_REASON, of_run=start.get("run"))
                for key, start in list(self.state.open_starts.items())]

    def __enter__(self) -> "DayRecords":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
