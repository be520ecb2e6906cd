"""franky-sim's loop as the twin paces it: absolute deadlines, late ticks made up within a bounded debt, a priority
that is applied or said to be refused (ladder_ros/instruments/franka_twin/franky_sim_server.py)."""

from __future__ import annotations

import time

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.instruments.franka_twin import franky_sim_server as fss
from ladder_ros.instruments.franka_twin.franky_sim_server import Pacer, set_thread_nice

PERIOD = 0.001


class FakeTime:
    def __init__(self):
        self.t = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.t += seconds


def run(pacer: Pacer, fake: FakeTime, costs) -> list[float]:
    """Run ticks of the given costs (s); the wall time at which each tick starts."""
    starts = []
    for cost in costs:
        starts.append(fake.t)
        fake.t += cost
        pacer.wait()
    return starts


@pytest.mark.parametrize("cost", [0.0, 0.0002, 0.0006, 0.00099])
def test_ticks_cheaper_than_the_period_start_exactly_on_its_deadlines(cost):
    fake = FakeTime()
    pacer = Pacer(PERIOD, 0.1, clock=fake.clock, sleep=fake.sleep)
    starts = run(pacer, fake, [cost] * 500)
    assert starts == pytest.approx([100.0 + k * PERIOD for k in range(500)], abs=1e-9)
    assert pacer.dropped_s == 0.0


@pytest.mark.parametrize("stall_s", [0.003, 0.02, 0.0999])
def test_a_late_tick_is_made_up_by_the_next_ones_running_back_to_back(stall_s):
    fake = FakeTime()
    pacer = Pacer(PERIOD, 0.1, clock=fake.clock, sleep=fake.sleep)
    cost = 0.0004
    costs = [cost] * 10 + [stall_s] + [cost] * 400
    starts = run(pacer, fake, costs)
    # After the stall, ticks run without sleeping until the loop is back on its deadlines, then keep them.
    catching_up = [k for k in range(11, 411) if starts[k] > 100.0 + k * PERIOD + 1e-9]
    assert catching_up, "the stall put the loop behind"
    assert catching_up == list(range(11, catching_up[-1] + 1))
    for k in catching_up[1:]:
        assert starts[k] - starts[k - 1] == pytest.approx(cost)  # back to back: no sleep
    owed = stall_s + 0.0004 - PERIOD  # how far the stall put the loop behind
    assert len(catching_up) == pytest.approx(owed / (PERIOD - cost), abs=2)
    assert starts[-1] == pytest.approx(100.0 + 410 * PERIOD)  # every tick made up: simulated time = wall time
    assert pacer.dropped_s == 0.0


@pytest.mark.parametrize("stall_s,max_debt_s", [(0.5, 0.1), (2.0, 0.1), (0.05, 0.0), (0.3, 0.02)])
def test_a_debt_beyond_the_bound_is_dropped_and_counted_not_made_up(stall_s, max_debt_s):
    fake = FakeTime()
    pacer = Pacer(PERIOD, max_debt_s, clock=fake.clock, sleep=fake.sleep)
    cost = 0.0004
    starts = run(pacer, fake, [cost] * 10 + [stall_s] + [cost] * 2000)
    late = 100.0 + 11 * PERIOD
    behind = starts[11] - late  # when the stall's tick ended, past its deadline
    assert pacer.dropped_s == pytest.approx(behind - max_debt_s)
    # The loop ends on deadlines shifted by the dropped time: the simulated clock lost exactly that much.
    assert starts[-1] == pytest.approx(100.0 + 2010 * PERIOD + pacer.dropped_s)


def test_the_pacer_refuses_a_period_or_debt_that_cannot_be():
    for period, debt in ((0.0, 0.1), (-0.001, 0.1), (0.001, -0.1), (float("nan"), 0.1), (0.001, float("nan"))):
        with pytest.raises(ConfigError, match="positive period"):
            Pacer(period, debt)


def test_a_refused_priority_is_said_not_raised(monkeypatch):
    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(fss.os, "setpriority", refuse)
    assert set_thread_nice(-10) == "PermissionError: Operation not permitted"


def test_the_twin_loop_runs_at_its_priority_or_says_why_not():
    pytest.importorskip("franky_sim", reason="needs franky-control and franky-sim (requirements/robots.txt)")
    with pytest.raises(ConfigError, match="loop_nice: a niceness is -20 .. 19, got -21"):
        fss.FrankySimServer("127.0.0.1", loop_nice=-21)
    server = fss.FrankySimServer("127.0.0.1", loop_nice=5).start()
    try:
        deadline = time.monotonic() + 30.0
        while server.ticks < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        stats = server.stats()
        assert server.ticks >= 50, f"franky-sim's loop made {server.ticks} ticks in 30 s"
        assert stats["running"] and stats["loop_priority"] == "nice 5"  # raising niceness needs no privilege
    finally:
        server.stop()
    assert not server.stats()["running"]
