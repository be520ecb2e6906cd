"""Test-session setup: every ROS 2 participant any test creates stays on this machine.

Before any test module can import rclpy, the session environment gets
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, ``ROS_LOCALHOST_ONLY=1``, a ``ROS_DOMAIN_ID`` claimed
for this test process alone (two test runs side by side never see each other), and the loopback-only
Fast DDS profile ``config/fastdds_localhost.xml`` (docs/dependencies.md, "Network safety"). Graph processes that tests
start inherit this environment. See :mod:`ladder_ros.ros_env`.
"""

from __future__ import annotations

import os
import sys

import pytest

from ladder_ros.ros_env import apply_network_safe_environment

# Set at import time, not in a fixture: pytest imports conftest.py before collecting any test
# module, and a module that imports rclpy at the top would otherwise load it first.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
if os.environ.get("LADDER_ROS_NETWORK_SAFE") != "1":
    # A domain id the user exported is for their own graphs (ladder-ros up keeps it); a test run
    # claims one of its own, so two runs side by side never see each other.
    os.environ.pop("ROS_DOMAIN_ID", None)
apply_network_safe_environment(os.environ)


@pytest.fixture(scope="session")
def tiny_pi0_model(tmp_path_factory):
    """A tiny random transformers PI0 checkpoint (tests/policy_models.py), built once per test session."""
    pytest.importorskip("transformers", reason="needs transformers (requirements/vlm.txt)")
    from tests.policy_models import build_tiny_pi0

    return build_tiny_pi0(tmp_path_factory.mktemp("tiny_pi0") / "model")


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # Every result is reported by now. What is left is the interpreter's teardown of the rclpy objects
    # tests left to the garbage collector: with the PyPI ROS 2 wheels that teardown can crash (a
    # segfault after "cannot use Destroyable because destruction was requested") and turn a green run
    # into exit 139. The run's own status is the answer, so the process ends here with it.
    if _EXIT_STATUS and "rclpy" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
