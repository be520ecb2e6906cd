"""The command pacer (ladder_ros/robots/pacing.py) and the driver process's scheduling (robots/thread_scheduling.py).

No rclpy. Waits end on the event they wait for; the bound on each only catches a broken pacer. The
pacer's timing is measured in the dress rehearsal (benchmarks/bench_rehearsal.py), not here.
"""

import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.robots.pacing import GRID_GAIN, CommandPacer, ControlGrid

WAIT_S = 10.0  # only a broken pacer gets near it
FAR = 3600.0  # a moment that never comes within a test


MS = 1_000_000  # ns
PERIOD, DELAY = 200 * MS, 20 * MS


def test_the_grid_starts_at_the_first_stamp_plus_the_delay_and_keeps_whole_periods_through_late_work_and_gaps():
    grid = ControlGrid(PERIOD, DELAY)
    assert grid.plan(1000 * MS, 1003 * MS) == 1020 * MS and grid.anchored == 1
    # computed after its moment: sent at once, but the grid stays where it was
    assert grid.plan(1200 * MS, 1235 * MS) == 1235 * MS
    assert grid.plan(1400 * MS, 1404 * MS) == 1420 * MS
    # two periods without an action (an idle period): the next one is two periods on the grid
    assert grid.plan(1800 * MS, 1802 * MS) == 1820 * MS and grid.anchored == 1


def test_stamps_that_jitter_within_the_delay_are_sent_a_period_apart_and_the_grid_follows_them_slowly():
    grid = ControlGrid(PERIOD, DELAY)
    rng = np.random.default_rng(3)
    jitter = rng.uniform(-15 * MS, 15 * MS, 200).astype(np.int64)  # a busy policy's stamps (up to 7.5 % off)
    stamps = 10_000 * MS + np.arange(200) * PERIOD + jitter
    moments = np.array([grid.plan(int(s), int(s)) for s in stamps])
    periods = np.diff(moments)
    assert grid.anchored == 1
    assert np.max(np.abs(periods - PERIOD)) <= 2 * GRID_GAIN * 30 * MS  # against 30 ms between stamps
    assert np.all(moments >= stamps) and np.all(moments <= stamps + DELAY + PERIOD // 4)  # never before its stamp


def test_a_stamp_far_from_its_grid_moment_starts_the_grid_anew_and_so_does_a_reset():
    grid = ControlGrid(PERIOD, DELAY)
    grid.plan(1000 * MS, 1000 * MS)
    assert grid.plan(1260 * MS, 1260 * MS) == 1280 * MS and grid.anchored == 2  # 60 ms off the grid: anew
    grid.reset()
    assert grid.plan(1470 * MS, 1470 * MS) == 1490 * MS and grid.anchored == 3
    with pytest.raises(ConfigError, match="positive period"):
        ControlGrid(0, DELAY)


class Recorder:
    """Jobs that say when they ran, and the pacer's reports of them."""

    def __init__(self):
        self.ran: list[str] = []
        self.reports: list[tuple[object, BaseException | None, bool]] = []
        self.reported = threading.Condition()
        self.pacer: CommandPacer | None = None

    def job(self, name: str, result: object = None, error: BaseException | None = None):
        def run():
            self.ran.append(name)
            if error is not None:
                raise error
            return result if result is not None else name
        return run

    def on_done(self, result, error):
        assert self.pacer is not None
        with self.reported:
            self.reports.append((result, error, self.pacer.lock.locked()))
            self.reported.notify_all()

    def wait_reports(self, count: int) -> None:
        with self.reported:
            assert self.reported.wait_for(lambda: len(self.reports) >= count, WAIT_S), self.reports


@pytest.fixture
def paced():
    recorder = Recorder()
    pacer = CommandPacer("test-commands", recorder.on_done)
    recorder.pacer = pacer
    try:
        yield pacer, recorder
    finally:
        pacer.close()


def test_jobs_run_in_the_order_scheduled_at_once_when_their_moment_has_passed_and_report_under_the_lock(paced):
    pacer, recorder = paced
    now = time.monotonic()
    for i, late_s in enumerate((0.3, 0.1, 0.2)):  # all past: each runs at once, in order, not by moment
        pacer.schedule(now - late_s, recorder.job(f"c{i}"))
    recorder.wait_reports(3)
    assert recorder.ran == ["c0", "c1", "c2"]
    assert [(r, e, locked) for r, e, locked in recorder.reports] == [("c0", None, True), ("c1", None, True),
                                                                     ("c2", None, True)]
    stats = pacer.stats()
    assert stats["paced_commands"] == 3 and stats["paced_late"] == 3 and stats["paced_lateness_max_ms"] >= 100.0


def test_a_job_that_raises_is_reported_with_its_error_and_the_pacer_goes_on(paced):
    pacer, recorder = paced
    pacer.schedule(0.0, recorder.job("bad", error=RuntimeError("the API raised")))
    pacer.schedule(0.0, recorder.job("good"))
    recorder.wait_reports(2)
    (result, error, _), (after, none, _) = recorder.reports
    assert result is None and isinstance(error, RuntimeError) and (after, none) == ("good", None)


def test_a_job_before_its_moment_waits_and_cancel_drops_it(paced):
    pacer, recorder = paced
    pacer.schedule(time.monotonic() + FAR, recorder.job("later"))
    assert pacer.pending == 1
    with pacer.lock:
        assert pacer.cancel() == 1
    pacer.schedule(0.0, recorder.job("now"))
    recorder.wait_reports(1)
    assert recorder.ran == ["now"] and pacer.pending == 0


def test_a_stop_between_a_jobs_moment_and_its_run_drops_it(paced):
    """The pacer's thread took the job at its moment, then found the lock held by a stop that cancelled: not run."""
    pacer, recorder = paced
    with pacer.lock:  # the driver stopping the arm
        pacer.schedule(0.0, recorder.job("computed before the stop"))
        deadline = time.monotonic() + WAIT_S
        while pacer.pending:  # taken off the queue by the pacer's thread, which now waits for the lock
            assert time.monotonic() < deadline, "the pacer never took its job"
            time.sleep(0.001)
        pacer.cancel()
    pacer.schedule(0.0, recorder.job("after the stop"))
    recorder.wait_reports(1)
    assert recorder.ran == ["after the stop"]


def test_a_closed_pacer_runs_nothing_more_and_refuses_new_jobs(paced):
    pacer, recorder = paced
    pacer.schedule(time.monotonic() + FAR, recorder.job("never"))
    pacer.close()
    assert recorder.ran == [] and pacer.pending == 0
    with pytest.raises(ConfigError, match="closed"):
        pacer.schedule(0.0, recorder.job("too late"))
    with pytest.raises(ConfigError, match="number of seconds"):
        CommandPacer("x", recorder.on_done).schedule(float("nan"), recorder.job("nan"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")
def test_favour_lowers_the_niceness_of_the_thread_and_of_the_threads_it_starts_or_says_why_not():
    # In a process of its own: the niceness of this test process stays as it is.
    code = """
        import os, resource, sys, threading
        from ladder_ros.robots import thread_scheduling
        before = os.getpriority(os.PRIO_PROCESS, 0)
        if sys.argv[-1] == "refused":
            if os.geteuid() == 0:
                os.setuid(65534)  # without CAP_SYS_NICE
            resource.setrlimit(resource.RLIMIT_NICE, (0, 0))  # and no RLIMIT_NICE allowing a lower niceness
        favoured = thread_scheduling.favour(-3, 0.001)
        seen = []
        worker = threading.Thread(target=lambda: seen.append(os.getpriority(os.PRIO_PROCESS, 0)))
        worker.start()
        worker.join()
        print(before, favoured.niceness, seen[0], sys.getswitchinterval(), bool(favoured.refused), favoured.describe())
    """
    refused = subprocess.run([sys.executable, "-c", textwrap.dedent(code), "refused"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 0, refused.stderr
    before, niceness, inherited, interval, was_refused, described = refused.stdout.split(" ", 5)
    assert niceness == inherited == before and float(interval) == 0.001 and was_refused == "True"
    assert "niceness -3 refused" in described and "RLIMIT_NICE" in described
    allowed = subprocess.run([sys.executable, "-c", textwrap.dedent(code), "allowed"], capture_output=True,
                             text=True, timeout=60)
    assert allowed.returncode == 0, allowed.stderr
    before, niceness, inherited, interval, was_refused, described = allowed.stdout.split(" ", 5)
    if was_refused == "True":
        pytest.skip(f"this user may not lower its niceness: {described.strip()}")
    assert niceness == inherited == str(min(-3, int(before))) and float(interval) == 0.001
