"""Chunk execution without ROS: validation, the synchronous chunked policy, and the wall-clock executor's
schedule on simulated time (no idle while latency < k periods, re-infer at once on a subgoal switch,
stale observations refused, invalid chunks held)."""

import dataclasses
import logging
import math
import os
import threading
import time
from collections import deque

import numpy as np
import pytest

from ladder_ros.core.errors import InvalidInputError, LadderError
from ladder_ros.policies.actions import ActionProcessor, InvalidActionError
from ladder_ros.policies.chunked import ChunkedPolicy, PerStepSource, RawChunk, ReasonLog, noise_seed
from ladder_ros.policies.config import Normalization, Statistics
from ladder_ros.policies.control_loop import ControlLoop
from ladder_ros.policies.executor import ChunkExecutor, PolicyNotReady, error_kind, percentile
from ladder_ros.policies.openpi_remote import PolicyServerError, PolicyUnavailable
from ladder_ros.policies.openpi_wire import WireFormatError
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder, resize_image
from ladder_ros.core.rotations import axis_angle_to_euler_xyz
from tests.policy_fixtures import ExecutorSimulation, ScriptedSource, bundle, observation
from tests.policy_fixtures import make_config as any_config


def make_config(**changes):
    """The test config under the synchronous rule, which the wall-clock tests of this module pin (the realtime
    mode has its own tests: tests/test_policy_realtime.py)."""
    return any_config(**{"execution": "synchronous", **changes})


# ------------------------------------------------------------------------------ validation and conversion
def test_a_chunk_is_refused_naming_what_is_wrong():
    processor = ActionProcessor(make_config())
    good = np.zeros((5, 7))
    assert processor.check_chunk(good).shape == (4, 7)  # the first k = 4 of 5
    with pytest.raises(InvalidActionError, match="wrong action dimension: 6 numbers per action, the config "
                                                 "expects 7 \\(ee_dx"):
        processor.check_chunk(np.zeros((5, 6)))
    with pytest.raises(InvalidActionError, match="shorter than the execution horizon"):
        processor.check_chunk(np.zeros((3, 7)))
    nan = good.copy()
    nan[2, 4] = np.nan
    with pytest.raises(InvalidActionError, match="action 2, axis ee_dpitch is nan"):
        processor.check_chunk(nan)
    far = good.copy()
    far[1, 0] = 0.3
    with pytest.raises(InvalidActionError, match=r"action 1, axis ee_dx = 0.3 m is outside the config's bounds "
                                                 r"\[-0.1, 0.1\]"):
        processor.check_chunk(far)
    late = good.copy()
    late[4, 0] = 9.0  # beyond the execution horizon: never executed, not checked
    processor.check_chunk(late)
    with pytest.raises(InvalidActionError, match="dtype"):
        processor.check_chunk(np.array([["a"] * 7] * 5))
    with pytest.raises(InvalidActionError, match="shape"):
        processor.check_chunk(np.zeros(7))


def test_commands_follow_the_configs_conventions():
    open_fraction = ActionProcessor(make_config())
    command = open_fraction.command(np.array([0.01, 0.0, -0.02, 0.1, 0.2, 0.3, 0.7]))
    np.testing.assert_allclose(command, [0.01, 0.0, -0.02, 0.1, 0.2, 0.3, 1.0])  # open > 0.5: +1
    assert open_fraction.command(np.array([0, 0, 0, 0, 0, 0, 0.2]))[6] == -1.0
    action = dict(make_config().raw["action"], rotation="axis_angle", gripper="signed")
    axis_angle = ActionProcessor(make_config(action=action))
    rotvec = np.array([0.3, 0.2, 0.25])
    np.testing.assert_allclose(axis_angle.command(np.r_[0, 0, 0, rotvec, -1.0])[3:6], axis_angle_to_euler_xyz(rotvec))
    hold = open_fraction.hold_command(observation(aperture=0.1))
    np.testing.assert_array_equal(hold, [0, 0, 0, 0, 0, 0, -1.0])  # no motion, the gripper stays closed


def test_joint_position_actions_pass_through_and_hold_in_place():
    axes = [{"name": f"joint{i}", "unit": "rad", "low": -3.0, "high": 3.0} for i in range(2)]
    axes.append({"name": "gripper_position", "unit": "0 open", "low": 0.0, "high": 1.0})
    processor = ActionProcessor(make_config(action={"key": "actions", "kind": "joint_position", "axes": axes}))
    np.testing.assert_array_equal(processor.command(np.array([0.5, -0.5, 1.0])), [0.5, -0.5, 1.0])
    np.testing.assert_array_equal(processor.hold_command(observation(aperture=1.0)), [0.0, 0.0, 0.0])
    single = np.array([0.1, -0.2, 1.0], dtype=np.float32)  # a model's float32 output
    command = processor.command(single)
    assert command.dtype == np.float64 and command.tolist() == single.astype(np.float64).tolist()
    command[0] = 9.0  # a copy: the chunk it came from is unchanged
    assert single[0] == np.float32(0.1)


def test_observation_encoding_resizes_with_padding_and_builds_the_request():
    wide = np.full((48, 96, 3), 200, dtype=np.uint8)
    padded = resize_image(wide, 32, 32, "resize_with_pad")
    assert padded.shape == (32, 32, 3)
    assert padded[0].max() == 0 and padded[-1].max() == 0 and padded[16, 16, 0] == 200  # black bars top and bottom
    assert resize_image(wide, 32, 32, "resize").min() == 200
    assert resize_image(wide, 32, 32, "none").shape == (48, 96, 3)
    encoder = ObservationEncoder(make_config())
    request = encoder.openpi_request(ObservationBundle(observation(aperture=0.25), 0), "put the carrot on the plate")
    assert sorted(request) == ["observation/image", "observation/state", "prompt"]
    assert request["observation/image"].shape == (32, 32, 3)
    np.testing.assert_array_equal(request["observation/state"], [0.3, 0.0, 0.1, 0.0, 0.0, 0.0, 0.25])
    assert request["prompt"] == "put the carrot on the plate"


# ------------------------------------------------------------------------------ the synchronous policy
def test_chunked_policy_executes_the_first_k_and_drops_the_rest_on_a_switch():
    source = ScriptedSource()
    policy = ChunkedPolicy(source, make_config(), seed=3)
    policy.reset("put the carrot on the plate")
    taken = [policy.act_tagged(bundle(step), "put the carrot on the plate") for step in range(6)]
    assert [(a.chunk_id, a.index) for a in taken] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
    assert [a.observation_stamp_ns for a in taken] == [0, 0, 0, 0, 4, 4]  # each chunk from the step it was asked
    policy.reset("put the spoon on the cloth")  # a switch: the rest of chunk 1 is dropped
    switched = policy.act_tagged(bundle(6), "put the spoon on the cloth")
    assert (switched.chunk_id, switched.index, switched.subgoal) == (2, 0, "put the spoon on the cloth")
    assert [seed for _, _, seed in source.calls] == [noise_seed(3, i) for i in range(3)]
    assert len({noise_seed(3, i) for i in range(100)} | {noise_seed(4, 0)}) == 101


def test_chunked_policy_holds_still_on_an_invalid_chunk_and_says_why_once():
    source = ScriptedSource(chunk=lambda n: np.full((5, 7), np.nan) if n < 3 else np.zeros((5, 7)))
    messages = []
    policy = ChunkedPolicy(source, make_config(), seed=0, log=messages.append)
    held = [policy.act_tagged(bundle(step), "go") for step in range(3)]
    assert all(a.held and a.command[:6].tolist() == [0.0] * 6 for a in held)
    assert policy.holds == 3
    assert messages == ["holding still: invalid action: chunk 0: action 0, axis ee_dx is nan (not a finite number)"]
    ok = policy.act_tagged(bundle(3), "go")
    assert not ok.held and messages[-1] == "acting again"


# ------------------------------------------------------------------------------ the wall-clock executor
JOINT_AXES = [{"name": f"joint{i}", "unit": "rad", "low": -100.0, "high": 100.0} for i in range(6)] + [
    {"name": "gripper_position", "unit": "0 open", "low": -100.0, "high": 100.0}]


def absolute_config(**changes):
    """The test config acting in absolute joint positions (the look-ahead's case)."""
    return make_config(action={"key": "actions", "kind": "joint_position", "axes": JOINT_AXES}, **changes)


@pytest.mark.parametrize("rate_hz, k, length", [(5, 4, 5), (15, 8, 15)])
@pytest.mark.parametrize("latency_s", [0.05, 0.15, 0.4])
def test_no_idle_period_while_latency_is_below_the_execution_window(rate_hz, k, length, latency_s):
    embodiment = "widowx" if rate_hz == 5 else "franka"
    config = absolute_config(embodiment=embodiment, control_rate_hz=rate_hz, chunk={"length": length, "execute": k})
    assert not config.action.relative
    sim = ExecutorSimulation(ScriptedSource(length=length), config, latency_s)
    sim.executor.set_subgoal("put the carrot on the plate")
    actions = sim.run(200)
    first = next(i for i, a in enumerate(actions) if a is not None)
    assert first == next(n for n in range(1, 100) if latency_s <= n * config.period_s) - 1
    assert all(a is not None for a in actions[first:])  # never idle once the first chunk is in
    assert sim.executor.idle == sim.executor.idle_first == first
    chunk_ids = [a.chunk_id for a in actions[first:]]
    assert chunk_ids == sorted(chunk_ids)
    per_chunk = {c: [a.index for a in actions[first:] if a.chunk_id == c] for c in set(chunk_ids) - {chunk_ids[-1]}}
    assert all(indices == list(range(k)) for indices in per_chunk.values())  # first k of each, in order, none skipped
    # The request goes out as late as the latency allows: lead = ceil((L + P/4) / P) periods.
    assert sim.executor.lead_periods() == min(k, math.ceil((latency_s + 0.25 / rate_hz) * rate_hz - 1e-9))


@pytest.mark.parametrize("rate_hz, k, length", [(5, 4, 5), (15, 8, 15)])
@pytest.mark.parametrize("latency_s", [0.05, 0.15, 0.45, 0.95])  # none a whole number of periods
def test_relative_actions_are_requested_once_every_queued_command_is_given(rate_hz, k, length, latency_s):
    """Deltas from an observation taken while commands were still queued would repeat those commands' motion:
    each chunk's observation is taken at or after the tick that gave the previous chunk's last command, and
    the idle periods are what that costs (none per chunk below one period of latency, ceil(L / P) - 1 above)."""
    embodiment = "widowx" if rate_hz == 5 else "franka"
    config = make_config(embodiment=embodiment, control_rate_hz=rate_hz, chunk={"length": length, "execute": k})
    assert config.action.relative
    sim = ExecutorSimulation(ScriptedSource(length=length), config, latency_s)
    sim.executor.set_subgoal("put the carrot on the plate")
    ticks = 40 * k
    actions = sim.run(ticks)
    given = [(n * config.period_s, a) for n, a in enumerate(actions, start=1) if a is not None]
    last_given = {}
    for t, a in given:
        last_given[a.chunk_id] = t
    chunk_ids = sorted(last_given)
    assert len(chunk_ids) >= 5
    for previous, current in zip(chunk_ids, chunk_ids[1:]):
        stamp_s = next(a.observation_stamp_ns for _, a in given if a.chunk_id == current) / 1e9
        assert stamp_s >= last_given[previous] - 1e-9, (previous, current)
    assert all([a.index for _, a in given if a.chunk_id == c] == list(range(k)) for c in chunk_ids[:-1])
    per_chunk = max(0, math.ceil(latency_s / config.period_s - 1e-9) - 1)
    first = sim.executor.idle_first
    assert sim.executor.idle - first == pytest.approx(per_chunk * (len(chunk_ids) - 1), abs=per_chunk)
    assert sim.executor.lead_periods() == 1


def test_latency_beyond_the_window_idles_and_says_so():
    config = make_config()  # 5 Hz, k = 4: 0.8 s window
    sim = ExecutorSimulation(ScriptedSource(), config, 1.0)
    sim.executor.set_subgoal("go")
    sim.run(60)
    stats = sim.executor.stats()
    assert stats["idle"] > stats["idle_first_chunk"] > 0
    assert any("inference slower than the queue" in m for m in sim.messages)


def test_a_subgoal_switch_drops_the_queue_and_reinfers_at_once():
    source = ScriptedSource()
    sim = ExecutorSimulation(source, make_config(), 0.05)
    sim.executor.set_subgoal("put the carrot on the plate")
    sim.run(6)
    assert source.calls[-1][1] == "put the carrot on the plate"
    sim.executor.set_subgoal("put the spoon on the cloth")  # between ticks
    assert sim.executor._slot is not None and sim.executor._slot.instruction == "put the spoon on the cloth"
    nxt = sim.run(3, start_tick=7)
    assert all(a.subgoal == "put the spoon on the cloth" and a.chunk_id == nxt[0].chunk_id for a in nxt)
    assert nxt[0].index == 0


def test_a_result_for_the_previous_subgoal_is_discarded():
    sim = ExecutorSimulation(ScriptedSource(), make_config(), 0.3)
    executor = sim.executor
    executor.set_subgoal("first")
    taken, executor._slot = executor._slot, None  # the worker has taken "first" ...
    executor.set_subgoal("second")
    executor._results.append(executor._infer(taken))  # ... and finishes it after the switch
    sim.run(4)
    assert executor.chunks == 1 and all(a is None or a.subgoal == "second" for a in sim.actions)
    assert any(a is not None for a in sim.actions)


def test_stale_observations_are_refused_and_the_queue_dropped():
    age = {"value": 0.0}
    sim = ExecutorSimulation(ScriptedSource(), make_config(), 0.05, observation_age=lambda now: age["value"])
    sim.executor.set_subgoal("go")
    assert all(a is not None for a in sim.run(5)[1:])
    age["value"] = 0.9  # older than max_observation_age_s (0.5 s): the sensors stopped
    assert sim.run(3, start_tick=6) == [None, None, None]
    assert any("no fresh observation: the newest is 0.90 s old" in m for m in sim.messages)
    age["value"] = 0.0
    resumed = sim.run(4, start_tick=9)
    assert resumed[-1] is not None and resumed[-1].chunk_id > sim.actions[4].chunk_id


def test_invalid_chunks_and_a_missing_server_hold_still():
    source = ScriptedSource(chunk=lambda n: np.full((5, 7), 5.0) if n < 2 else np.zeros((5, 7)))
    sim = ExecutorSimulation(source, make_config(), 0.05)
    sim.executor.set_subgoal("go")
    actions = sim.run(8)
    assert actions[:2] == [None, None] and actions[-1] is not None
    assert sim.executor.rejected == 2
    assert sim.messages[0].startswith("holding still: invalid action: chunk 0: action 0, axis ee_dx = 5 m is outside")
    down = ExecutorSimulation(ScriptedSource(fail="no policy server (refused); next attempt in 0.5 s"),
                              make_config(), 0.01)
    down.executor.set_subgoal("go")
    assert down.run(5) == [None] * 5
    assert down.messages == ["holding still: policy error: no policy server (refused); next attempt in 0.5 s"]


def test_the_worker_thread_serves_requests_and_stops():
    executor = ChunkExecutor(ScriptedSource(), make_config(), lambda: (bundle(), 0.0), lambda now: 0.0,
                             clock=lambda: 0.0)
    executor.start()
    try:
        executor.set_subgoal("go")
        deadline = time.monotonic() + 60  # a cap only: it returns as soon as the worker has answered
        while executor.tick(0.0) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert executor.chunks == 1
    finally:
        executor.stop()
    assert executor._worker is None


# ------------------------------------------------------------------------------ the executor on a hand-set clock
class TimedSource(ScriptedSource):
    """The scripted chunks, reporting the given inference latencies (seconds, one per call) and server timing."""

    def __init__(self, latencies=(), server_timing=None, **kwargs):
        super().__init__(**kwargs)
        self.latencies = list(latencies)
        self.server_timing = dict(server_timing or {})

    def infer(self, bundle, instruction, noise_seed):
        raw = super().infer(bundle, instruction, noise_seed)
        n = len(self.calls) - 1
        latency = self.latencies[n] if n < len(self.latencies) else 0.0
        return RawChunk(actions=raw.actions, latency_s=latency, server_timing=dict(self.server_timing))


class FailingSource(ScriptedSource):
    """Raises the given exceptions, one per call, then gives the scripted chunks."""

    def __init__(self, errors, **kwargs):
        super().__init__(**kwargs)
        self.errors = list(errors)

    def infer(self, bundle, instruction, noise_seed):
        if self.errors:
            self.calls.append((bundle.stamp_ns, instruction, noise_seed))
            raise self.errors.pop(0)
        return super().infer(bundle, instruction, noise_seed)


_SCRIPTED = object()


class HandClock:
    """A chunk executor whose clock, observation stamp and observation age the test sets, and whose requests the
    test serves itself (``work_once``) at the instant it chooses: every timing it reports is known exactly."""

    def __init__(self, source=_SCRIPTED, config=None, **kwargs):
        self.now = 0.0
        self.observed_at = None  # None: the observation is taken when the worker asks for it
        self.age = 0.0  # what the observation-age callback answers (None: no observation yet)
        self.ages_asked = []
        self.messages = []
        self.source = ScriptedSource() if source is _SCRIPTED else source
        self.executor = ChunkExecutor(self.source, config or make_config(), self._snapshot, self._age,
                                      clock=lambda: self.now, log=self.messages.append, **kwargs)

    def _snapshot(self):
        taken = self.now if self.observed_at is None else self.observed_at
        return bundle(stamp_ns=int(round(taken * 1e9))), taken

    def _age(self, now):
        self.ages_asked.append(now)
        return self.age

    def serve(self, at):
        self.now = at
        return self.executor.work_once()

    def tick(self, at):
        self.now = at
        return self.executor.tick(at)


STATS_KEYS = {"ticks", "acted", "idle", "idle_first_chunk", "idle_share", "chunks", "rejected_chunks", "lead_periods",
              "inference_ms_last", "inference_ms_p50", "inference_ms_p99", "request_ms_p50", "request_ms_p99",
              "period_error_ms_p50", "period_error_ms_p99", "server_timing", "holding", "holds", "held_steps",
              "rejected_by_reason", "seam_jump_max", "ood", "execution", "request_threshold", "stale_dropped",
              "splice_jump_max", "late_waits"}


def test_percentiles_interpolate_in_double_precision_and_are_none_without_samples():
    assert percentile([], 50) is None and percentile(deque(), 99) is None
    assert percentile([40.0, 10.0, 30.0, 20.0, 0.0], 50) == 20.0
    assert percentile([40.0, 10.0, 30.0, 20.0, 0.0], 99) == pytest.approx(39.6)
    # Latencies a backend reports as float32 are summarised in double precision, like every other sample.
    single = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    assert percentile(single, 50) == float(np.percentile(single.astype(np.float64), 50))
    assert percentile(list(single), 25) == float(np.percentile(single.astype(np.float64), 25))
    assert percentile(single, 25) != float(np.percentile(single, 25))  # what float32 arithmetic would give


def test_without_a_subgoal_it_holds_quietly_and_measures_every_period():
    hand = HandClock()
    executor = hand.executor
    fresh = executor.stats()
    assert set(fresh) == STATS_KEYS
    assert fresh["idle_share"] == 0.0 and fresh["period_error_ms_p50"] is None and fresh["inference_ms_last"] is None
    # Deviations from the 0.2 s period: 0, +10, -20, +30, -40 ms.
    times = [0.0, 0.2, 0.41, 0.59, 0.82, 0.98]
    assert [hand.tick(t) for t in times[:3]] == [None] * 3
    hand.now = times[3]
    assert executor.tick() is None  # without a time: the executor's clock
    hand.now = 99.0
    assert executor.tick(times[4]) is None  # a given time wins over the clock
    hand.now = times[5]
    assert executor.tick() is None
    stats = executor.stats()
    assert (stats["ticks"], stats["acted"], stats["idle"], stats["idle_first_chunk"]) == (6, 0, 0, 0)
    assert stats["period_error_ms_p50"] == pytest.approx(20.0)
    assert stats["period_error_ms_p99"] == pytest.approx(39.6)
    assert stats["holding"] == "no subgoal" and stats["holds"] == {"no subgoal": 6}
    assert hand.messages == [] and hand.source.calls == [] and hand.ages_asked == []  # an expected state: not said
    assert executor.episode_report()["steps"] == 0 and not executor.work_once()


def test_diagnostics_report_the_counts_and_timing_of_each_chunk():
    latencies = [0.01, 0.02, 0.03, 0.04, 0.05]  # inference: 10 .. 50 ms
    source = TimedSource(latencies, server_timing={"infer_ms": 7.5})
    hand = HandClock(source)
    executor = hand.executor
    for n in range(5):
        t = 10.0 * n
        hand.now = t
        executor.set_subgoal(f"subgoal {n}")
        assert hand.tick(t + 0.05) is None  # its first chunk is on its way
        assert hand.serve(t + 0.1 * (n + 1))  # requested at t, answered 100 .. 500 ms later
        action = hand.tick(t + 0.1 * (n + 1))
        assert (action.subgoal, action.chunk_id, action.index) == (f"subgoal {n}", n, 0)
        assert action.inference_ms == pytest.approx(1000.0 * latencies[n])
    stats = executor.stats()
    assert set(stats) == STATS_KEYS
    assert (stats["ticks"], stats["acted"], stats["idle"], stats["idle_first_chunk"]) == (10, 5, 5, 5)
    assert stats["idle_share"] == 0.5
    assert (stats["chunks"], stats["rejected_chunks"], stats["lead_periods"]) == (5, 0, 1)
    assert stats["inference_ms_last"] == pytest.approx(50.0)
    assert stats["inference_ms_p50"] == pytest.approx(30.0) and stats["inference_ms_p99"] == pytest.approx(49.6)
    assert stats["request_ms_p50"] == pytest.approx(300.0) and stats["request_ms_p99"] == pytest.approx(496.0)
    assert stats["server_timing"] == {"infer_ms": 7.5}
    assert stats["holding"] == ""  # acting
    assert stats["holds"] == {"waiting for the first chunk of this subgoal": 5} and stats["held_steps"] == 5
    assert stats["rejected_by_reason"] == {}
    # Each chunk takes over from standing still; chunk n's first ee_dx is n / 1000 m (ScriptedSource).
    assert stats["seam_jump_max"] == {"translation_m": pytest.approx(0.004), "rotation_rad": 0.0}
    assert stats["ood"] == {"state": 0, "action": 0, "worst_sigma": 0.0, "worst": ""}
    report = executor.episode_report()
    assert (report["chunks"], report["steps"], report["held_steps"]) == (5, 10, 5)
    assert report["inference_ms"]["count"] == 5 and report["inference_ms"]["p50"] == pytest.approx(30.0)
    assert hand.messages == []  # waiting for a first chunk is expected: not said
    assert [seed for _, _, seed in source.calls] == [noise_seed(0, n) for n in range(5)]  # seed 0 by default


def test_the_request_lead_follows_the_worst_of_the_last_eight_latencies():
    hand = HandClock(config=absolute_config())  # 5 Hz, k = 4, absolute: the lead may reach 4 periods
    executor = hand.executor
    assert executor.lead_periods() == 4  # nothing measured: as early as possible
    leads = []
    for n, latency in enumerate([0.7] + [0.05] * 8):
        t = 10.0 * n
        hand.now = t
        executor.set_subgoal(f"subgoal {n}")
        hand.serve(t + latency)
        assert hand.tick(t + latency) is not None
        leads.append(executor.lead_periods())
    # ceil((0.7 + 0.05) / 0.2) = 4 while the 0.7 s request is among the last 8; ceil(0.1 / 0.2) = 1 after.
    assert leads == [4] * 8 + [1]


def test_diagnostics_summarise_the_newest_thousand_samples():
    slow, fast = 20, 1000
    source = TimedSource([1.0] * slow + [0.01] * fast)
    hand = HandClock(source)
    executor = hand.executor
    for n in range(slow + fast):
        t = 10.0 * n
        hand.now = t
        executor.set_subgoal(f"subgoal {n}")
        hand.serve(t + (2.0 if n < slow else 0.02))
        assert hand.tick(t + 5.0) is not None
    stats = executor.stats()
    assert stats["chunks"] == slow + fast
    assert stats["inference_ms_p99"] == pytest.approx(10.0)  # the slow ones are older than the last 1000
    assert stats["request_ms_p99"] == pytest.approx(20.0)
    assert executor.episode_report()["inference_ms"]["count"] == slow + fast  # the episode keeps every one
    ticks = HandClock().executor
    for n in range(slow + 1):
        ticks.tick(1.0 * n)  # 0.8 s late each
    for n in range(1, fast + 1):
        ticks.tick(slow + 0.2 * n)
    assert ticks.stats()["period_error_ms_p99"] == pytest.approx(0.0, abs=1e-6)


def test_an_observation_at_the_age_limit_is_used_and_an_older_one_held_until_a_fresh_one():
    hand = HandClock()
    executor = hand.executor
    hand.age = None  # no observation yet
    executor.set_subgoal("go")
    assert hand.tick(0.2) is None
    hand.age = 0.5  # exactly the config's max_observation_age_s
    assert hand.serve(0.3)
    assert hand.tick(0.4).chunk_id == 0
    hand.age = 0.5001
    assert hand.tick(0.6) is None  # the queue is dropped and the next chunk asked for at once
    assert hand.ages_asked == [0.2, 0.4, 0.6]
    assert hand.messages == ["holding still: no fresh observation: none yet", "acting again",
                             "holding still: no fresh observation: the newest is 0.50 s old (limit 0.5 s)"]
    assert executor.stats()["holding"] == "no fresh observation: the newest is 0.50 s old (limit 0.5 s)"
    hand.age = 0.0
    assert hand.serve(0.7)  # the request the stale tick sent, served once the sensors are back
    resumed = hand.tick(0.8)
    assert (resumed.chunk_id, resumed.index) == (1, 0)
    assert resumed.observation_stamp_ns == 700_000_000
    assert [seed for _, _, seed in hand.source.calls] == [noise_seed(0, 0), noise_seed(0, 1)]
    report = executor.episode_report()
    assert report["held_by_reason"] == {"no fresh observation": 2} and report["steps"] == 4


def test_the_worker_refuses_an_observation_older_than_the_limit_when_it_starts():
    hand = HandClock()
    executor = hand.executor
    hand.now = 10.0
    executor.set_subgoal("go")
    hand.observed_at = 8.0  # the newest image is 2 s old, though the age callback saw a fresh one
    assert hand.serve(10.1)
    assert hand.tick(10.2) is None
    assert hand.source.calls == []  # never sent to the policy
    assert hand.messages == ["holding still: no fresh observation: the newest is 2.10 s old (limit 0.5 s)"]
    stats = executor.stats()
    assert stats["inference_ms_last"] is None and stats["inference_ms_p50"] is None
    assert stats["request_ms_p50"] == pytest.approx(100.0)
    assert stats["holds"] == {"no fresh observation": 1} and stats["chunks"] == 0
    assert executor.episode_report()["held_by_reason"] == {"no fresh observation": 1}
    hand.observed_at = 10.0
    assert hand.serve(10.5)  # asked again at 10.2; exactly 0.5 s old now: used
    assert hand.tick(10.6).observation_stamp_ns == 10_000_000_000
    assert hand.messages[-1] == "acting again"


@pytest.mark.parametrize("exc, kind", [
    (PolicyUnavailable("refused"), "no policy server"), (PolicyServerError("failed"), "policy server error"),
    (InvalidInputError("no image"), "unusable observation"), (WireFormatError("not msgpack"), "unreadable reply"),
    (PolicyNotReady("warming up"), "policy warming up"), (LadderError("other"), "policy error"),
    (RuntimeError("bug"), "policy error")])
def test_each_failed_request_has_the_words_of_its_kind(exc, kind):
    assert error_kind(exc) == kind


def test_each_distinct_server_error_is_said_once_however_its_message_changes():
    errors = [PolicyServerError("the policy server failed: KeyError; next attempt in 0.2 s", "KeyError: 'state'"),
              PolicyServerError("the policy server failed: KeyError; next attempt in 0.4 s", "KeyError: 'state'"),
              PolicyServerError("the policy server failed: ValueError; next attempt in 0.8 s", "ValueError: shape"),
              PolicyServerError("the policy server failed: KeyError; next attempt in 1.0 s", "KeyError: 'state'")]
    hand = HandClock(FailingSource(errors))
    executor = hand.executor
    executor.set_subgoal("go")
    for n in range(4):
        assert hand.serve(0.2 * n + 0.1)
        assert hand.tick(0.2 * n + 0.2) is None
    assert hand.messages == ["holding still: policy server error: the policy server failed: KeyError; next "
                             "attempt in 0.2 s",
                             "holding still: policy server error: the policy server failed: ValueError; next "
                             "attempt in 0.8 s"]
    assert executor.stats()["holding"] == ("policy server error: the policy server failed: KeyError; next attempt "
                                           "in 1.0 s")
    assert hand.serve(0.9)
    assert hand.tick(1.0) is not None
    assert hand.messages[-1] == "acting again"
    assert executor.episode_report()["held_by_reason"] == {"policy server error": 4}


def test_until_the_policy_is_ready_its_steps_are_held_and_said():
    hand = HandClock(source=None)
    executor = hand.executor
    executor.set_subgoal("go")
    assert hand.serve(0.1) and hand.tick(0.2) is None
    assert hand.messages == ["holding still: policy warming up: the policy is not ready yet (its warm-up runs)"]
    source = ScriptedSource()
    executor.set_source(source)
    assert hand.serve(0.3)  # asked again by the held tick
    assert hand.tick(0.4).chunk_id == 1 and len(source.calls) == 1
    assert executor.episode_report()["held_by_reason"] == {"policy warming up": 1}


def test_a_backend_bug_holds_says_which_exception_and_logs_its_traceback(caplog):
    hand = HandClock(FailingSource([ValueError("boom")]))
    hand.executor.set_subgoal("go")
    with caplog.at_level(logging.ERROR, logger="ladder_ros.policies.executor"):
        assert hand.serve(0.1)
    records = [r for r in caplog.records if r.name == "ladder_ros.policies.executor"]
    assert [r.getMessage() for r in records] == ["policy test_bridge: inference failed"]
    assert records[0].exc_info[0] is ValueError
    assert hand.tick(0.2) is None
    assert hand.messages == ["holding still: inference failed: ValueError: boom"]
    assert hand.serve(0.3) and hand.tick(0.4) is not None  # the worker lives on


def test_statistics_of_another_robot_fail_each_request_and_its_inference_time_is_still_kept():
    other = Normalization(mode="mean_std", state=Statistics((0.0,) * 3, (1.0,) * 3),
                          action=Statistics((0.0,) * 7, (1.0,) * 7))
    hand = HandClock(TimedSource([0.04]))
    executor = hand.executor
    executor.start_episode(hand.source, seed=0, statistics=other)  # 3 state statistics; the state has 7 values
    executor.set_subgoal("go")
    assert hand.serve(0.1) and hand.tick(0.2) is None
    assert hand.messages[0].startswith("holding still: inference failed: ValueError: operands could not be broadcast")
    assert executor.stats()["inference_ms_last"] == pytest.approx(40.0)


def test_without_a_log_the_hold_reasons_go_to_the_modules_logger(caplog):
    executor = ChunkExecutor(ScriptedSource(), make_config(), lambda: (bundle(), 0.0), lambda now: None,
                             clock=lambda: 0.0)
    with caplog.at_level(logging.WARNING, logger="ladder_ros.policies.executor"):
        executor.set_subgoal("go")
        executor.tick(0.0)
    assert [r.getMessage() for r in caplog.records if r.name == "ladder_ros.policies.executor"] == [
        "policy test_bridge: holding still: no fresh observation: none yet"]


NAN_CHUNK = np.zeros((5, 7))
NAN_CHUNK[2, 4] = np.nan


@pytest.mark.parametrize("chunk, reason", [
    (NAN_CHUNK, "chunk 0: action 2, axis ee_dpitch is nan"),
    (np.zeros((5, 6)), "chunk 0: wrong action dimension: 6 numbers per action, the config expects 7"),
    (np.zeros((3, 7)), "shorter than the execution horizon"),
    (np.zeros(7), "shape")])
def test_an_invalid_chunk_is_refused_counted_and_its_inference_time_kept(chunk, reason):
    chunks = iter([chunk])
    source = TimedSource([0.03, 0.01], chunk=lambda n: next(chunks, np.zeros((5, 7))))
    hand = HandClock(source)
    executor = hand.executor
    executor.set_subgoal("go")
    assert hand.serve(0.1) and hand.tick(0.2) is None
    assert hand.messages[0].startswith("holding still: invalid action: ") and reason in hand.messages[0]
    stats = executor.stats()
    assert (stats["rejected_chunks"], stats["chunks"]) == (1, 0)
    assert stats["rejected_by_reason"] == {"invalid action": 1} and stats["inference_ms_last"] == pytest.approx(30.0)
    assert hand.serve(0.3) and hand.tick(0.4) is not None
    assert executor.episode_report()["rejected_chunks"] == {"invalid action": 1}


def joint_chunks(*starts_and_steps):
    """Absolute joint chunks: chunk n moves joint 0 from ``start`` by ``step`` per action (the rest stay 0)."""
    chunks = []
    for start, step in starts_and_steps:
        chunk = np.zeros((5, 7))
        chunk[:, 0] = start + step * np.arange(5)
        chunks.append(chunk)
    return lambda n: chunks[n]


def test_a_chunk_takes_over_after_the_last_queued_command_and_its_first_action_is_measured():
    # Chunk 0 from 0.0 by 0.05 rad; chunk 1 from 0.2 (0.05 after chunk 0's last queued 0.15), then a 0.25 step.
    config = absolute_config(seam={"max_joint_rad": 0.1})
    hand = HandClock(ScriptedSource(chunk=joint_chunks((0.0, 0.05), (0.2, 0.25))), config)
    executor = hand.executor
    executor.set_subgoal("go")
    assert hand.serve(0.65)  # 0.65 s: the lead is 4 periods
    assert hand.tick(0.8).command[0] == 0.0  # 3 queued < 4: the next chunk is asked for now
    assert hand.serve(0.85)
    given = [hand.tick(0.2 * n) for n in range(5, 9)]
    assert [a.command[0] for a in given] == pytest.approx([0.05, 0.1, 0.15, 0.2])
    stats = executor.stats()
    assert (stats["chunks"], stats["rejected_chunks"]) == (2, 0)
    assert stats["seam_jump_max"] == {"joint_rad": pytest.approx(0.05)}


def test_the_first_chunk_of_joint_targets_is_measured_from_the_joints_observed():
    config = absolute_config(seam={"max_joint_rad": 0.1})
    hand = HandClock(ScriptedSource(chunk=joint_chunks((0.3, 0.0), (0.05, 0.0))), config)
    executor = hand.executor
    executor.set_subgoal("go")
    assert hand.serve(0.1) and hand.tick(0.2) is None  # the observed joints are at 0
    assert "jumps 0.3 rad from the last one given (seam bound 0.1)" in hand.messages[0]
    assert executor.stats()["rejected_by_reason"] == {"seam_jump": 1}
    assert hand.serve(0.3) and hand.tick(0.4).command[0] == pytest.approx(0.05)


def test_a_result_for_an_old_subgoal_is_dropped_and_the_current_one_behind_it_used():
    hand = HandClock()
    executor = hand.executor
    executor.set_subgoal("first")
    assert hand.serve(0.1)  # done for "first" ...
    executor.set_subgoal("second")  # ... which is no longer current
    assert hand.serve(0.2)
    action = hand.tick(0.2)
    assert action.subgoal == "second" and executor.chunks == 1
    assert executor.stats()["request_ms_p50"] == pytest.approx(100.0)  # the dropped one is not measured


def test_work_once_serves_only_a_waiting_request():
    hand = HandClock()
    executor = hand.executor
    assert executor.work_once() is False
    executor.set_subgoal("go")
    assert executor.work_once() is True
    assert executor.work_once() is False
    executor.set_subgoal("other")
    executor.set_subgoal(None)  # no subgoal: the waiting request is dropped
    assert executor.work_once() is False
    assert len(hand.source.calls) == 1


def test_each_episode_has_its_seed_chunk_numbers_report_and_statistics():
    first = ScriptedSource()
    hand = HandClock(first)
    executor = hand.executor
    executor.set_subgoal("go")
    assert hand.serve(0.1) and hand.tick(0.2).chunk_id == 0
    assert first.calls[0][2] == noise_seed(0, 0)
    statistics = Normalization(mode="mean_std", state=Statistics((0.0,) * 7, (0.01,) * 7),
                               action=Statistics((0.0,) * 7, (0.01,) * 7))
    second = ScriptedSource()
    executor.start_episode(second, seed=7, statistics=statistics)
    assert hand.tick(0.4) is None and executor.stats()["holding"] == "no subgoal"
    assert executor.episode_report()["steps"] == 0 and executor.episode_report()["chunks"] == 0
    executor.set_subgoal("go")
    assert hand.serve(0.5)
    action = hand.tick(0.6)  # taken over from standing still, not from the last episode's command
    assert action.chunk_id == 0 and second.calls[0][2] == noise_seed(7, 0)
    report = executor.episode_report()
    assert (report["chunks"], report["steps"]) == (1, 1)
    assert report["ood"]["state"] == 1 and report["ood"]["action"] == 1
    assert sum("out of the training data's distribution" in m for m in hand.messages) == 2
    assert report["seam_jump_max"] == {"translation_m": 0.0, "rotation_rad": 0.0}


# ------------------------------------------------------------------------------ the inference thread
class GatedSource(ScriptedSource):
    """Says when it is asked (``entered``) and answers only once ``release`` is set."""

    def __init__(self, released=True, **kwargs):
        super().__init__(**kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()
        if released:
            self.release.set()

    def infer(self, bundle, instruction, noise_seed):
        self.entered.set()
        assert self.release.wait(60), "the test never released the inference"
        return super().infer(bundle, instruction, noise_seed)


def inference_thread():
    return next(t for t in threading.enumerate() if t.name == "inference-test_bridge")


def test_the_worker_serves_a_request_made_before_it_started_and_ends_on_stop():
    source = GatedSource()
    executor = ChunkExecutor(source, make_config(), lambda: (bundle(), 0.0), lambda now: 0.0, clock=lambda: 0.0)
    executor.set_subgoal("go")  # before the worker exists
    executor.start()
    worker = inference_thread()
    try:
        assert worker.daemon  # a hung inference never keeps the process alive
        assert source.entered.wait(60), "the worker never served the request waiting for it"
    finally:
        executor.stop(timeout_s=60)
    assert not worker.is_alive()
    assert executor.tick(0.0) is not None  # the answer it posted before it ended
    executor.start()  # and again
    try:
        assert inference_thread() is not worker
    finally:
        executor.stop(timeout_s=60)


def test_stop_gives_up_on_a_hung_inference_after_five_seconds():
    source = GatedSource(released=False)
    executor = ChunkExecutor(source, make_config(), lambda: (bundle(), 0.0), lambda now: 0.0, clock=lambda: 0.0)
    executor.start()
    worker = inference_thread()
    waits = []
    join = worker.join
    worker.join = lambda timeout=None: waits.append(timeout)  # a hung worker: every wait for it runs out
    try:
        executor.set_subgoal("go")
        assert source.entered.wait(60), "the worker never took the request"
        executor.stop()
        assert waits == [5.0] and executor._worker is None
    finally:
        source.release.set()
        join(60)
    assert not worker.is_alive()  # released, it saw the stop and ended


# ------------------------------------------------------------------------------ the control loop
class SteppedTime:
    """The control loop's clock on simulated time: each wait between ticks moves it on by what was asked, and
    each tick by the duration the test gives it; no real time passes."""

    def __init__(self, durations, stop_after):
        self.t = 0.0
        self.durations = list(durations)
        self.stop_after = stop_after
        self.ticks = []
        self.done = threading.Event()
        self.loop = None

    def clock(self):
        return self.t

    def on_tick(self, now):
        self.ticks.append(now)
        duration = self.durations.pop(0) if self.durations else 0.0
        if duration is None:
            raise RuntimeError("a tick that failed")
        self.t += duration
        if len(self.ticks) == self.stop_after:
            self.loop.stop()  # from its own thread: it cannot wait for itself
            self.done.set()


class SteppingEvent(threading.Event):
    def __init__(self, time):
        super().__init__()
        self.time = time

    def wait(self, timeout=None):
        if timeout is not None and not self.is_set():
            self.time.t += timeout
        return self.is_set()


def test_the_control_loop_ticks_on_absolute_deadlines_and_skips_the_ones_it_missed(caplog):
    # 0.25 s period; the third tick takes 0.875 s (past the deadlines at 1.0, 1.25 and 1.5 s), the fourth exactly
    # one period (it ends on the next deadline), the sixth fails.
    time_ = SteppedTime([0.0, 0.125, 0.875, 0.25, 0.0, None, 0.0], stop_after=7)
    loop = ControlLoop(0.25, time_.on_tick, clock=time_.clock, name="control-test")
    time_.loop = loop
    loop._stop = SteppingEvent(time_)  # its waits advance the simulated clock
    with caplog.at_level(logging.ERROR, logger="ladder_ros.policies.control_loop"):
        loop.start()
        assert time_.done.wait(60), "the control loop never reached its seventh tick"
        loop.stop(timeout_s=60)
    assert time_.ticks == [0.25, 0.5, 0.75, 1.75, 2.0, 2.25, 2.5]  # no drift from the 0.125 s tick, no burst
    assert loop.missed == 3
    assert [r.getMessage() for r in caplog.records if r.name == "ladder_ros.policies.control_loop"] == [
        "control tick failed"]  # and it kept its rhythm
    assert not any(t.name == "control-test" for t in threading.enumerate())


def test_the_control_loop_runs_in_a_named_daemon_thread_until_stopped():
    ticked = threading.Event()
    loop = ControlLoop(0.01, lambda now: ticked.set())
    loop.start()
    thread = loop.thread
    try:
        assert thread.name == "control-loop" and thread in threading.enumerate()
        assert thread.daemon and loop.scheduling == "normal" and loop.period_s == 0.01
        assert ticked.wait(60), "the control loop never ticked"
    finally:
        loop.stop(timeout_s=60)
    assert not thread.is_alive()


def test_the_control_loop_asks_for_real_time_priority_and_says_when_refused(monkeypatch):
    asked = []
    monkeypatch.setattr(os, "sched_setscheduler", lambda pid, policy, param: asked.append(
        (pid, policy, param.sched_priority)))
    granted = ControlLoop(60.0, lambda now: None, priority=10)
    granted.start()  # returns once the scheduling is settled
    assert granted.scheduling == "SCHED_FIFO priority 10"
    granted.stop(timeout_s=60)
    assert asked == [(0, os.SCHED_FIFO, 10)]  # 0: the calling thread only

    def refuse(pid, policy, param):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    refused = ControlLoop(60.0, lambda now: None, priority=10)
    refused.start()
    assert refused.scheduling == "normal (real-time priority 10 refused: [Errno 1] Operation not permitted)"
    refused.stop(timeout_s=60)
    monkeypatch.delattr(os, "sched_setscheduler")  # not Linux
    elsewhere = ControlLoop(60.0, lambda now: None, priority=10)
    elsewhere.start()
    assert elsewhere.scheduling == ("normal (real-time priority 10 refused: module 'os' has no attribute "
                                    "'sched_setscheduler')")
    elsewhere.stop(timeout_s=60)
    monkeypatch.setattr(os, "sched_setscheduler", lambda pid, policy, param: asked.append(
        (pid, policy, param.sched_priority)), raising=False)
    lowest = ControlLoop(60.0, lambda now: None, priority=1)  # SCHED_FIFO's lowest priority is still asked for
    lowest.start()
    assert lowest.scheduling == "SCHED_FIFO priority 1"
    lowest.stop(timeout_s=60)
    plain = ControlLoop(60.0, lambda now: None)
    plain.start()
    assert plain.scheduling == "normal" and plain.priority == 0
    plain.stop(timeout_s=60)
    assert asked == [(0, os.SCHED_FIFO, 10), (0, os.SCHED_FIFO, 1)]  # priority 0 never asks


def test_the_control_loop_gives_up_on_a_scheduling_call_after_five_seconds_and_on_a_hung_tick_after_two(monkeypatch):
    scheduled, ticking, release = threading.Event(), threading.Event(), threading.Event()
    monkeypatch.setattr(os, "sched_setscheduler", lambda pid, policy, param: scheduled.wait(60))  # a call that hangs

    class RecordedWaits(threading.Event):  # every wait for the scheduling runs out at once, and is recorded
        waits = []

        def wait(self, timeout=None):
            self.waits.append(timeout)
            return self.is_set()

    def on_tick(now):
        ticking.set()
        release.wait(60)  # a tick that hangs

    loop = ControlLoop(0.001, on_tick, name="control-hung", priority=10)
    loop._scheduled = RecordedWaits()
    loop.start()
    assert RecordedWaits.waits == [5.0] and loop.scheduling == "normal"  # start() returned while it hangs
    thread = next(t for t in threading.enumerate() if t.name == "control-hung")
    joins = []
    join = thread.join
    thread.join = lambda timeout=None: joins.append(timeout)
    try:
        scheduled.set()  # the scheduling call returns; the first tick then hangs
        assert ticking.wait(60), "the control loop never ticked"
        loop.stop()
        assert joins == [2.0]
    finally:
        scheduled.set()
        release.set()
        join(60)
    assert not thread.is_alive()


def test_without_an_action_ready_after_acting_it_says_inference_is_slower_than_the_queue():
    hand = HandClock()
    executor = hand.executor
    executor.set_subgoal("go")
    assert hand.serve(0.1)
    assert [hand.tick(0.2 * n) is not None for n in range(1, 6)] == [True] * 4 + [False]
    assert hand.messages == ["holding still: no action ready: inference slower than the queue"]
    assert executor.stats()["holds"] == {"no action ready": 1}
    assert executor.episode_report()["held_by_reason"] == {"no action ready": 1}


# ------------------------------------------------------------------ the synchronous policy's tags and seams
def test_every_action_carries_its_chunk_subgoal_stamp_and_the_chunks_inference_time():
    chunks = iter([np.zeros((5, 7)), np.full((5, 7), np.nan), np.zeros((5, 7))])
    source = ScriptedSource(chunk=lambda n: next(chunks))
    source_infer = source.infer
    source.infer = lambda *args: RawChunk(source_infer(*args).actions, latency_s=0.25)
    policy = ChunkedPolicy(source, make_config(), seed=0)
    given = [policy.act_tagged(bundle(step, stamp_ns=1000 + step), "go") for step in range(6)]
    assert [(a.chunk_id, a.index, a.observation_stamp_ns, a.subgoal) for a in given] == [
        (0, 0, 1000, "go"), (0, 1, 1000, "go"), (0, 2, 1000, "go"), (0, 3, 1000, "go"),
        (1, 0, 1004, "go"),  # refused: a hold-still command in its place, tagged as the chunk would be
        (2, 0, 1005, "go")]
    held = given[4]
    assert held.held == "action 0, axis ee_dx is nan (not a finite number)" and held.command[:6].tolist() == [0] * 6
    assert [a.held for a in given] == ["", "", "", "", held.held, ""]
    assert [a.inference_ms for a in given] == [250.0] * 6
    assert policy.report.inference_ms == [250.0] * 3
    assert policy.policy_report()["held_by_reason"] == {"invalid action": 1}


def test_act_tags_the_actions_of_its_chunk_with_the_observations_step():
    policy = ChunkedPolicy(ScriptedSource(), make_config(), seed=0)
    command = policy.act(observation(step=7), "go")
    assert command[0] == 0.0
    assert policy.act_tagged(bundle(8), "go").observation_stamp_ns == 7  # the rest of the chunk asked at step 7


def test_the_seam_is_measured_from_the_last_command_given():
    # Chunks 0 and 1 move +0.04 m per step (ee_dx), chunk 2 -0.04: from standing still each first command is
    # within the 0.05 bound, from the last command given the reversal jumps 0.08.
    config = make_config(seam={"max_translation_m": 0.05})
    chunks = [np.tile([0.04, 0, 0, 0, 0, 0, 1.0], (5, 1)), np.tile([0.04, 0, 0, 0, 0, 0, 1.0], (5, 1)),
              np.tile([-0.04, 0, 0, 0, 0, 0, 1.0], (5, 1))]
    policy = ChunkedPolicy(ScriptedSource(chunk=lambda n: chunks[n]), config, seed=0)
    given = [policy.act_tagged(bundle(step), "go") for step in range(9)]
    assert [a.held for a in given[:8]] == [""] * 8
    assert given[8].held == "the chunk's first action jumps 0.08 m from the last one given (seam bound 0.05)"
    assert policy.report.seam_max["translation_m"] == pytest.approx(0.08)


def test_the_first_joint_chunk_is_measured_from_the_joints_observed():
    config = absolute_config(seam={"max_joint_rad": 0.1})
    policy = ChunkedPolicy(ScriptedSource(chunk=joint_chunks((0.3, 0.0), (0.05, 0.0))), config, seed=0)
    six_joints = dataclasses.replace(observation(), joint_names=tuple("abcdef"), joint_positions=np.zeros(6))
    first = policy.act_tagged(ObservationBundle(six_joints, 0), "go")  # the observed joints are at 0
    assert first.held == "the chunk's first action jumps 0.3 rad from the last one given (seam bound 0.1)"
    assert first.command.tolist() == [0.0] * 6 + [0.0]  # held where the joints are (aperture 1: open)
    assert policy.act_tagged(ObservationBundle(six_joints, 1), "go").command[0] == pytest.approx(0.05)


def test_without_a_log_the_synchronous_policy_says_why_in_the_modules_logger(caplog):
    policy = ChunkedPolicy(ScriptedSource(chunk=lambda n: np.full((5, 7), np.nan)), make_config(), seed=0)
    with caplog.at_level(logging.WARNING, logger="ladder_ros.policies.chunked"):
        policy.act_tagged(bundle(0), "go")
    assert [r.getMessage() for r in caplog.records if r.name == "ladder_ros.policies.chunked"] == [
        "policy test_bridge: holding still: invalid action: chunk 0: action 0, axis ee_dx is nan (not a finite "
        "number)"]


def test_a_reason_log_starts_and_ends_each_stretch_with_no_reason():
    messages = []
    reasons = ReasonLog(messages.append)
    assert (reasons.kind, reasons.reason, reasons.counts) == ("", "", {})
    reasons.clear()
    assert messages == []  # nothing was said: no "acting again" either
    reasons.report("no policy server", "refused")
    reasons.report("no policy server", "refused again", key="")  # no key and an empty key: the same cause
    assert (reasons.kind, reasons.reason) == ("no policy server", "no policy server: refused again")
    reasons.clear()
    assert (reasons.kind, reasons.reason, reasons.counts) == ("", "", {"no policy server": 2})
    assert messages == ["holding still: no policy server: refused", "acting again"]


class CountingPolicy:
    """A per-step policy that records its resets and answers float32 actions, as a torch model would."""

    name = "counting"

    def __init__(self):
        self.resets = []

    def reset(self, instruction: str) -> None:
        self.resets.append(instruction)

    def act(self, observation, instruction):
        return np.full(7, 0.1, dtype=np.float32)


def test_a_per_step_policy_is_reset_on_each_new_instruction_and_gives_one_action_chunks():
    policy = CountingPolicy()
    source = PerStepSource(policy)
    assert source.name == "counting"
    before = time.perf_counter()
    for instruction in ("", "", "go", "go", "stop", ""):  # the first request resets it, even for an empty one
        raw = source.infer(bundle(), instruction, 0)
    after = time.perf_counter()
    assert policy.resets == ["", "go", "stop", ""]
    assert raw.actions.shape == (1, 7) and raw.actions.dtype == np.float64
    assert raw.actions[0].tolist() == [float(np.float32(0.1))] * 7
    assert 0.0 <= raw.latency_s <= after - before  # measured around the policy's call
