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


@pytest.fixture(scope="module")
def ros():
    """rclpy initialised for the tests of one module (in the session's loopback-only environment, set above)."""
    import rclpy

    rclpy.init()
    yield
    rclpy.shutdown()


@pytest.fixture(scope="session")
def tiny_pi0_model(tmp_path_factory):
    """A tiny random transformers PI0 checkpoint (tests/policy_models.py), built once per test session."""
    pytest.importorskip("transformers", reason="needs transformers (requirements/vlm.txt)")
    from tests.policy_models import build_tiny_pi0

    return build_tiny_pi0(tmp_path_factory.mktemp("tiny_pi0") / "model")


# Where every prerequisite is installed (CI sets LADDER_ROS_NO_SKIPS=1 after scripts/setup.sh), a test that skips
# for a missing venv, asset folder or package is a setup that went wrong: it fails, with its reason. Tests
# marked ``gpu`` may still skip on a machine without a CUDA device.
NO_SKIPS = os.environ.get("LADDER_ROS_NO_SKIPS") == "1"


def _as_failure(report, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"skipped where every prerequisite must be present (LADDER_ROS_NO_SKIPS=1): {reason}"


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("gpu") is None:
        _as_failure(report, _skip_reason(report))


_SKIPPED_MODULES: list[str] = []


def pytest_collectreport(report):
    # A module that skips as a whole (allow_module_level) stays a skip, so the other modules still run; the
    # run fails at its end, naming it (pytest_sessionfinish).
    if NO_SKIPS and report.skipped:
        _SKIPPED_MODULES.append(f"{report.nodeid}: {_skip_reason(report)}")


# A test that passes on its rerun (scripts/test.sh: --reruns 1) is listed as RERUN by pytest-rerunfailures,
# without the failure that caused it; the end of each such failure is kept here and printed in the summary,
# so the cause of every rerun is on record, not only its name.
_RERUN_CAUSES: list[tuple[str, str]] = []
RERUN_CAUSE_LINES = 12


def pytest_runtest_logreport(report):
    if report.outcome == "rerun":
        text = report.longreprtext.rstrip().splitlines()
        _RERUN_CAUSES.append((report.nodeid, "\n".join(text[-RERUN_CAUSE_LINES:])))


def pytest_terminal_summary(terminalreporter):
    if _RERUN_CAUSES:
        terminalreporter.section("why each rerun test failed the first time")
        for nodeid, cause in _RERUN_CAUSES:
            terminalreporter.write_line(f"{nodeid}:", yellow=True)
            for line in cause.splitlines():
                terminalreporter.write_line(f"    {line}")
    if _SKIPPED_MODULES:
        terminalreporter.write_line("modules skipped where every prerequisite must be present (LADDER_ROS_NO_SKIPS=1):",
                                    red=True)
        for line in _SKIPPED_MODULES:
            terminalreporter.write_line(f"  {line}", red=True)


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED_MODULES and exitstatus in (0, 5):  # passed, or nothing else was collected
        session.exitstatus = exitstatus = 1
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # Every result is reported by now. What is left is the interpreter's teardown of the rclpy objects
    # tests left to the garbage collector: with the PyPI ROS 2 wheels that teardown can crash (a
    # segfault after "cannot use Destroyable because destruction was requested") and turn a green run
    # into exit 139. The run's own status is the answer, so the process ends here with it. Not under mutmut
    # (scripts/mutation.sh), which runs pytest inside its own process and carries on after the run.
    if _EXIT_STATUS and "rclpy" in sys.modules and "MUTANT_UNDER_TEST" not in os.environ:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
