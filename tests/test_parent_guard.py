"""A graph started by ``ladder-ros`` stops when the program that started it is killed outright (SIGKILL).

The graph runs in a process group of its own (so a terminal's Ctrl-C reaches the program first); without
the guard a killed program left it running, nodes and simulator included.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ladder_ros.bringup.parent_guard import guarded, main

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

CHILD = '''
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def stop(signum, frame):
    out.write_text(f"stopped by {signal.Signals(signum).name}")
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
out.with_suffix(".ready").write_text("ready")
while True:
    time.sleep(0.05)
'''

PARENT = '''
import subprocess, sys, time
from ladder_ros.bringup.parent_guard import guarded
child = subprocess.Popen(guarded([sys.executable, sys.argv[1], sys.argv[2]]), start_new_session=True)
print(child.pid, flush=True)
while True:
    time.sleep(1)
'''


def wait_for(condition, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_a_killed_parent_stops_its_graph_with_sigint(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "parent.py").write_text(PARENT)
    out = tmp_path / "child.out"
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(tmp_path / "child.py"), str(out)],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    try:
        child_pid = int(parent.stdout.readline())
        wait_for(lambda: out.with_suffix(".ready").exists(), "the child's ready file")
        assert os.getpgid(child_pid) == child_pid  # the guard exec'd into the command: same pid, own group
        parent.kill()
        parent.wait(30)
        wait_for(lambda: out.exists(), "the child's SIGINT handler after its parent was killed")
        assert out.read_text() == "stopped by SIGINT"
        wait_for(lambda: not alive(child_pid), "the child to exit")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_command_is_not_started_when_its_parent_is_already_gone(tmp_path):
    marker = tmp_path / "ran"
    gone = 1  # the guard's parent is this test's process, so pid 1 stands for a parent that died and left it to init
    result = subprocess.run([sys.executable, "-m", "ladder_ros.bringup.parent_guard", str(gone),
                             str(int(signal.SIGINT)), "--", "touch", str(marker)],
                            capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 1 and not marker.exists()
    assert f"the process that started touch (pid {gone}) is gone; not starting it" in result.stderr


def test_the_launched_graph_is_started_guarded(tmp_path, monkeypatch):
    from ladder_ros.bringup import session

    started = []

    class Started:
        def __init__(self, command, **options):
            started.append((command, options))

    monkeypatch.setattr(session.subprocess, "Popen", Started)
    monkeypatch.setattr(session, "ros2_executable", lambda: "ros2")
    graph = session.LaunchedGraph("sim_orchestrator.launch.py", ["use_sim:=true"], {}, tmp_path)
    graph.start()
    command, options = started[0]
    assert command == guarded(["ros2", "launch", "ladder_ros", "sim_orchestrator.launch.py", "use_sim:=true"])
    assert options["start_new_session"] is True


def test_usage_errors_and_the_command_line():
    assert main(["1", "2", "touch"]) == 2 and main([]) == 2
    command = guarded(["ros2", "launch", "ladder_ros", "x.launch.py"], signal.SIGINT)
    assert command[:3] == [sys.executable, "-m", "ladder_ros.bringup.parent_guard"]
    assert command[3:] == [str(os.getpid()), str(int(signal.SIGINT)), "--", "ros2", "launch", "ladder_ros",
                           "x.launch.py"]
