"""A node that fails to start and is sent SIGINT while rclpy cleans up (what ros2 launch does to every process once
one exits) ends with its one error line and status 2, not a KeyboardInterrupt traceback (ladder_ros/runtime/process.py);
a node whose worker is still in C++ code when it stops ends with status 0, not SIGABRT (runtime/process_exit.py)."""

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import os, signal, sys
    import rclpy
    from rclpy.node import Node
    from ladder_ros.core.errors import LadderError
    from ladder_ros.runtime import process as runtime

    class Failing(Node):
        def __init__(self):
            super().__init__("failing_node")
            self.create_service(__import__("std_srvs.srv", fromlist=["Trigger"]).Trigger, "x", lambda r, s: s)
            raise LadderError("the vendor API is missing")

    real = rclpy.try_shutdown
    def interrupted_shutdown(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the launcher's SIGINT lands while the context is cleaned up
        return real(*args, **kwargs)
    {patch}
    sys.exit(runtime.run_node("failing_node", Failing, []))
""")


def run_child(patch: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD.format(patch=patch)], capture_output=True, text=True,
                          timeout=60)


def test_a_sigint_during_cleanup_after_a_failed_start_is_no_traceback():
    done = run_child("runtime.rclpy.try_shutdown = interrupted_shutdown")
    assert done.returncode == 2, done.stderr
    assert "ladder_ros failing_node: error: the vendor API is missing" in done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr


def test_without_the_signal_the_same_failure_is_the_same_line():
    done = run_child("")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "ladder_ros failing_node: error: the vendor API is missing"


BUSY_WORKER = textwrap.dedent("""
    import os, signal, sys, threading
    import torch
    from rclpy.node import Node
    from ladder_ros.runtime import process as runtime

    class Busy(Node):
        '''A node whose worker thread is inside torch (C++, the GIL released) whenever the node stops.'''

        def __init__(self):
            super().__init__("busy_node")
            torch.set_num_threads(1)
            a = torch.rand(600, 600)

            def work():
                while True:
                    a @ a

            threading.Thread(target=work, name="inference", daemon=True).start()
            self.create_timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))  # Ctrl-C, as ros2 launch sends it

        def close(self):
            print("closed", flush=True)  # the worker is told nothing: it is still in a kernel

    sys.exit(runtime.run_node("busy_node", Busy, []))
""")


def test_a_worker_still_in_cpp_code_when_the_node_stops_does_not_abort_the_process():
    # Python's finalization would end the worker with pthread_exit as it leaves the kernel; through C++
    # frames that is std::terminate, SIGABRT, and ros2 launch's "process has died" after a clean stop.
    done = subprocess.run([sys.executable, "-c", BUSY_WORKER], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout == "closed\n"
    assert "terminate called" not in done.stderr
    assert "ladder_ros busy_node: threads still running after the node closed (inference)" in done.stderr
