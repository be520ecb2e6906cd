"""The orchestrator's journal: enough of the running episode on disk to end it properly after a crash.

The orchestrator writes its latest episode status, the events so far and the queue's bookkeeping
to one small JSON file while an episode runs (atomically: a temporary file renamed over the old
one), and marks it over when the episode ends. An orchestrator that starts and finds a journal of
a running episode knows it was killed mid-episode: it publishes that episode's final status with
a record marked ``interrupted``, so every node and client sees the episode end instead of waiting
for it forever. No rclpy here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

JOURNAL_VERSION = 1


def default_state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$ROS_HOME/ladder_ros`` (``~/.ros/ladder_ros`` when ROS_HOME is unset), where ROS keeps its own state."""
    home = environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
    return Path(home) / "ladder_ros"


def journal_path(state_dir: str | Path, node_fqn: str, domain_id: str) -> Path:
    """One journal per orchestrator: its fully qualified name and ROS domain (graphs side by side never share)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", node_fqn.strip("/")) or "orchestrator"
    return Path(state_dir) / f"orchestrator_{domain_id or '0'}_{safe}.json"


class EpisodeJournal:
    """Reads and writes one orchestrator's journal; I/O errors are reported, never raised."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.error: str | None = None  # the last write error (the node logs it)

    def write(self, status: Mapping[str, Any], events: list[dict], orchestration: Mapping[str, Any],
              started_wall_s: float, plan: Mapping[str, Any] | None = None) -> bool:
        data = {"journal_version": JOURNAL_VERSION, "status": dict(status), "events": list(events),
                "orchestration": dict(orchestration), "started_wall_s": started_wall_s,
                "plan": dict(plan) if plan is not None else None}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, self.path)
        except (OSError, TypeError, ValueError) as exc:
            self.error = str(exc)
            return False
        self.error = None
        return True

    def read(self) -> dict | None:
        """The journal, or None when there is none or it cannot be read (then ``error`` says why)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.error = f"unreadable journal {self.path}: {exc}"
            return None
        if not isinstance(data, dict) or data.get("journal_version") != JOURNAL_VERSION \
                or not isinstance(data.get("status"), dict):
            self.error = f"journal {self.path} is not a version {JOURNAL_VERSION} journal"
            return None
        return data
