"""The test helper that bounds graph commands kills the whole tree, nodes in their own sessions included."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.processes import descendants, process_tree

# A parent that starts a child in a session of its own (as `ladder-ros up` starts its nodes), prints
# the child's pid and then hangs.
HANGING_PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            return "zombie" not in status.read().lower()
    except FileNotFoundError:
        return False


def test_a_timeout_kills_the_parent_and_the_child_in_its_own_session():
    with pytest.raises(subprocess.TimeoutExpired):
        with process_tree([sys.executable, "-c", HANGING_PARENT], stdout=subprocess.PIPE, text=True) as parent:
            child = int(parent.stdout.readline())  # the child is running
            assert child in descendants(parent.pid)
            parent.communicate(timeout=0.5)  # the parent hangs: the timeout ends the block
    assert parent.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10  # SIGKILL is immediate; this only bounds a failure
    while alive(child):
        assert time.monotonic() < deadline, "the child in its own session survived the timeout"
        time.sleep(0.05)


def test_a_finished_command_leaves_nothing_to_kill():
    with process_tree([sys.executable, "-c", "print('done')"], stdout=subprocess.PIPE, text=True) as process:
        assert process.communicate(timeout=60)[0] == "done\n"
    assert process.returncode == 0 and not os.path.exists(f"/proc/{process.pid}/stat")
