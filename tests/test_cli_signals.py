"""Ctrl-C reaches a ``ladder-ros`` command even when it was started as a background job.

A shell starts ``cmd &`` (and ``nohup cmd``) with SIGINT ignored, and Python keeps an ignored SIGINT
ignored, so before this a ``kill -INT`` to ``ladder-ros run`` (a supervisor's stop, a test's Ctrl-C)
did nothing and the run went on to its end. No ROS here: a child process with SIGINT ignored at start.
"""

import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHILD = """
import signal, sys, time
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # as a background job starts
if sys.argv[1] == "interruptible":
    from ladder_ros.cli import interruptible
    interruptible()
try:
    print("ready", flush=True)
    time.sleep(float(sys.argv[2]))
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("slept", flush=True)
"""


def run_child(mode, sleep_s):
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(sleep_s)], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert child.stdout.readline() == "ready\n", child.stderr.read()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    return child.returncode, out, err


def test_sigint_interrupts_a_command_started_with_sigint_ignored():
    code, out, err = run_child("interruptible", 60)  # would sleep a minute if the signal were still ignored
    assert (code, out) == (130, "interrupted\n"), err


def test_without_it_the_ignored_sigint_is_kept_as_the_shell_set_it():
    code, out, err = run_child("plain", 1)  # the control: the signal does nothing, the sleep runs out
    assert (code, out) == (0, "slept\n"), err


def test_a_handler_already_installed_is_left_alone():
    from ladder_ros.cli import interruptible

    previous = signal.getsignal(signal.SIGINT)

    def mine(signum, frame):
        pass
    signal.signal(signal.SIGINT, mine)
    try:
        interruptible()
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)
