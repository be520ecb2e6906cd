"""The episode client's ROS 2 teardown ends even when the middleware deadlocks in it.

Fast DDS 3.2 can deadlock its event and receive threads while a graph stops (eProsima/Fast-DDS issue 6502):
the client's next teardown call then blocks forever inside the middleware with Python's GIL held. The stand-in
client below blocks the same way (a C ``sleep`` called through ``ctypes.PyDLL``, which keeps the GIL), in a
process of its own, so the watchdog's exit ends that process and not the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import ctypes, sys, time
    from ladder_ros.bringup import session as session_module

    session_module.RELEASE_DEADLINE_S = 1.0
    mode = sys.argv[1]

    class Client:
        def destroy_node(self):
            if mode == "deadlock":
                ctypes.PyDLL(None).sleep(120)  # blocks in C with the GIL held, as the deadlocked teardown does

    session = session_module.GraphSession.__new__(session_module.GraphSession)
    session.processes, session.client, session.executor = None, Client(), None
    print("episode results printed before the teardown", end="")  # no newline: only a flush writes it
    session.__exit__(None, None, None)
    time.sleep(2.0)  # past the deadline: a watchdog left armed would end the process here
    print("; released")
""")


def run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=REPO, capture_output=True, text=True,
                          timeout=90)


def test_a_teardown_that_hangs_holding_the_gil_ends_the_process_with_status_1_and_says_where():
    result = run("deadlock")
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert result.stdout == "episode results printed before the teardown"  # flushed before the watchdog fired
    assert "Timeout (0:00:01)!" in result.stderr
    assert "_release_ros_within_deadline" in result.stderr and "destroy_node" in result.stderr


def test_a_prompt_teardown_disarms_the_watchdog():
    result = run("prompt")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "episode results printed before the teardown; released\n"
    assert "Timeout" not in result.stderr
