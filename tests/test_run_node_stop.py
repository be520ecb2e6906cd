"""A node that fails to start and is sent SIGINT while rclpy cleans up (what ros2 launch does to every process once
one exits) ends with its one error line and status 2, not a KeyboardInterrupt traceback (nodes/runtime.py)."""

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import os, signal, sys
    import rclpy
    from rclpy.node import Node
    from ladder_ros.core.errors import LadderError
    from ladder_ros.nodes import runtime

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
