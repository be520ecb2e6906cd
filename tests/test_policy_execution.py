"""Chunk execution without ROS: validation, the synchronous chunked policy, and the wall-clock executor's
schedule on simulated time (no idle while latency < k periods, re-infer at once on a subgoal switch,
stale observations refused, invalid chunks held)."""

import math
import time

import numpy as np
import pytest

from ladder_ros.policies.actions import ActionProcessor, InvalidActionError
from ladder_ros.policies.chunked import ChunkedPolicy, noise_seed
from ladder_ros.policies.executor import ChunkExecutor
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder, resize_image
from ladder_ros.core.rotations import axis_angle_to_euler_xyz
from tests.policy_fixtures import ExecutorSimulation, ScriptedSource, bundle, make_config, observation


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
