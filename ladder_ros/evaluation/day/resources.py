"""What each process of the graph holds over a day: resident memory, threads and open files, sampled.

Every ``period_s`` (and when the graph comes up, and at the end) one line of ``DIR/resources.jsonl`` holds,
for each node process and the day's own process, its pid, resident memory (``VmRSS`` of
``/proc/PID/status``, kB), thread count (``Threads``) and open file descriptors (entries of
``/proc/PID/fd``), with the number of episodes finished so far. A leak shows as growth that goes on after
the first episodes (caches, the first compile, the first bag are in place by then): the summary reports per
node the first, last and largest value and the growth of its longest-running process, from the first sample
after that process had seen ten episodes to its last (a node restarted mid-day, or every node after the day was
started again, settles anew). Linux only (``/proc``); no rclpy here.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

RESOURCES_FILE = "resources.jsonl"
METRICS = ("rss_kb", "threads", "fds")
SETTLED_EPISODES = 10  # growth is measured from a process's first sample after it saw this many episodes


def sample_process(pid: int, proc: Path = Path("/proc")) -> dict[str, int] | None:
    """``{"rss_kb", "threads", "fds"}`` of a live process, or None when it is gone (or not readable)."""
    try:
        status = (proc / str(pid) / "status").read_text()
        fds = len(os.listdir(proc / str(pid) / "fd"))
    except OSError:
        return None
    values = {}
    for line in status.splitlines():
        name, _, rest = line.partition(":")
        if name == "VmRSS":
            values["rss_kb"] = int(rest.split()[0])
        elif name == "Threads":
            values["threads"] = int(rest.split()[0])
    if "threads" not in values:
        return None
    values.setdefault("rss_kb", 0)  # a zombie has no VmRSS
    values["fds"] = fds
    return {k: values[k] for k in METRICS}


class ResourceSampler:
    """Samples the processes ``pids()`` names into a JSONL file: on a thread every ``period_s``, or on request."""

    def __init__(self, path: Path, pids: Callable[[], Mapping[str, int]], episodes_done: Callable[[], int],
                 period_s: float = 10.0, run: int = 1):
        if not period_s > 0:
            raise ValueError(f"the sampling period must be > 0 s, got {period_s}")
        self.path = Path(path)
        self.pids = pids
        self.episodes_done = episodes_done
        self.period_s = period_s
        self.run = run
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # the last write error (sampling goes on)

    def sample(self) -> dict | None:
        """One line now: every named process that is alive."""
        try:
            named = dict(self.pids())
        except RuntimeError:  # the graph was being replaced: the next sample names the new processes
            return None
        nodes = {}
        for name, pid in named.items():
            values = sample_process(pid)
            if values is not None:
                nodes[name] = {"pid": pid, **values}
        line = {"t": round(time.time(), 3), "run": self.run, "episodes_done": int(self.episodes_done()), "nodes": nodes}
        with self._lock:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")
            except OSError as exc:
                self.error = str(exc)
        return line

    def start(self) -> "ResourceSampler":
        self._thread = threading.Thread(target=self._run, name="day-resources", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None


def read_samples(path: Path) -> list[dict]:
    """The samples of a resources file (a line cut short by a kill is left out)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    samples = []
    for line in text.splitlines():
        try:
            sample = json.loads(line)
        except ValueError:
            continue
        if isinstance(sample, dict) and isinstance(sample.get("nodes"), dict):
            samples.append(sample)
    return samples


def resource_summary(samples: Iterable[Mapping], settled_after: int = SETTLED_EPISODES) -> dict[str, dict]:
    """Per process name: samples, pids seen, restarts (a new pid within one run of the day; a day started again
    starts every process anew), and per metric its first, last and largest value, and ``growth``: over the
    process of that name that ran longest, its last value minus its first one sampled once it had seen
    ``settled_after`` episodes itself (a process started late has its own start-up to settle; None while none
    got that far). ``growth_pid`` and ``growth_episodes`` say which process and over how many episodes."""
    series: dict[str, dict[tuple[int, int], list[tuple[int, dict]]]] = {}
    for sample in samples:
        for name, values in sample["nodes"].items():
            process = (int(sample.get("run", 1)), int(values.get("pid", 0)))
            series.setdefault(name, {}).setdefault(process, []).append((int(sample.get("episodes_done", 0)), values))
    out: dict[str, dict] = {}
    for name, processes in series.items():
        points = [v for run in processes.values() for _, v in run]
        settled_by_process = {process: [(done, v) for done, v in run if done - run[0][0] >= settled_after]
                              for process, run in processes.items()}
        longest = max(processes, key=lambda p: (settled_by_process[p][-1][0] - settled_by_process[p][0][0]
                                                if settled_by_process[p] else -1, len(settled_by_process[p])))
        settled = settled_by_process[longest]
        node: dict = {"samples": len(points), "pids": [pid for _, pid in processes],
                      "restarts": len(processes) - len({run for run, _ in processes}),
                      "growth_pid": longest[1] if settled else None,
                      "growth_episodes": settled[-1][0] - settled[0][0] if settled else None}
        for metric in METRICS:
            values = [v[metric] for v in points if metric in v]
            if not values:
                continue
            node[metric] = {"first": values[0], "last": values[-1], "max": max(values),
                            "growth": settled[-1][1][metric] - settled[0][1][metric] if settled else None,
                            "settled": settled[0][1][metric] if settled else None}
        out[name] = node
    return out
