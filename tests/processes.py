"""Commands that start a graph die with the test that started them: the whole process tree, always.

``ladder-ros up`` and ``ladder-ros parity`` start every node in a session of its own (so a terminal's
Ctrl-C reaches only the parent, which forwards it in order). A timeout that kills only the parent
would leave the nodes running, so these helpers collect every descendant first and kill them all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Iterator, Sequence


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children first found, then theirs), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the command name in field 2 may hold spaces and parentheses: split after the last ')'
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        below = children.get(frontier.pop(), [])
        found.extend(below)
        frontier.extend(below)
    return found


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL ``process`` and everything below it (collected before the parent dies and they are re-parented)."""
    for pid in [*descendants(process.pid), process.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def process_tree(command: Sequence[str], **popen) -> Iterator[subprocess.Popen]:
    """``Popen(command)``; when the block ends, whatever is still running of its tree is killed."""
    process = subprocess.Popen(list(command), **popen)
    try:
        yield process
    finally:
        if process.poll() is None:
            kill_tree(process)


def run_tree(command: Sequence[str], timeout: float, **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True, timeout=…)`` that kills the whole tree on timeout."""
    with process_tree(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen) as process:
        out, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)
