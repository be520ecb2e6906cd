"""The wall-clock executor's realtime mode on simulated time: chunks anchored where their observation was taken,
actions whose time has passed dropped by count, no idle period while one request in flight can cover the latency,
the splice measured, blended and guarded, RTC guidance handed to a source that samples itself."""

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from ladder_ros.core.observation import Observation
from ladder_ros.policies.audit import SEAM_JUMP
from ladder_ros.policies.chunked import RawChunk, TaggedAction
from ladder_ros.policies.executor import ChunkExecutor, realtime_request_queue
from ladder_ros.policies.guidance import Guidance
from ladder_ros.policies.observation import ObservationBundle
from ladder_ros.policies.splice import AbsoluteFrame, ChunkPlan, RelativeFrame
from tests.policy_fixtures import make_config

JOINT_AXES = [{"name": f"joint{i}", "unit": "rad", "low": -100.0, "high": 100.0} for i in range(6)] + [
    {"name": "gripper_position", "unit": "0 open", "low": -100.0, "high": 100.0}]


def realtime_config(blend_steps=0, **changes):
    return make_config(execution={"mode": "realtime", "blend_steps": blend_steps}, **changes)


def franka_like(**changes):
    return realtime_config(embodiment="franka", control_rate_hz=15, chunk={"length": 15, "execute": 8},
                           action={"key": "actions", "kind": "joint_position", "axes": JOINT_AXES}, **changes)


class World:
    """The arm's commanded target as a driver keeps it: every handed-out delta added (relative actions), or the
    last target given (absolute ones)."""

    def __init__(self, relative=True):
        self.relative = relative
        self.position = np.zeros(3)
        self.joints = np.zeros(7)
        self.positions = []

    def apply(self, command):
        if self.relative:
            self.position = self.position + command[:3]
        else:
            self.joints = np.asarray(command, dtype=np.float64).copy()
        self.positions.append(self.position.copy())

    def observation(self, step):
        return Observation(step=step, image=np.zeros((8, 8, 3), np.uint8), aperture=1.0,
                           ee_position=self.position.copy(), ee_euler=np.zeros(3), joint_names=("a",) * 6,
                           joint_positions=self.joints[:6].copy(), target_position=self.position.copy())


@dataclass
class GoalSeeker:
    """A policy that steers its target towards ``goal`` (x, metres) in steps of at most ``step`` from what it
    observes, as a Bridge policy's deltas do: chunks of ``length`` deltas."""

    goal: float = 0.2
    step: float = 0.02
    length: int = 5
    name: str = "goal_seeker"
    calls: list = field(default_factory=list)

    def infer(self, bundle, instruction, noise_seed):
        x = float(bundle.observation.target_position[0])
        self.calls.append(x)
        actions = np.zeros((self.length, 7))
        actions[:, 6] = 1.0
        for i in range(self.length):
            dx = float(np.clip(self.goal - x, -self.step, self.step))
            actions[i, 0] = dx
            x += dx
        return RawChunk(actions=actions, latency_s=0.0)

    def close(self):
        pass


class Simulation:
    """A realtime executor on simulated time: ticks every period; each request is taken (its observation and
    anchor) the instant it is due (submitted, or timed for later), and its result posted ``latency(n)`` seconds
    after that."""

    def __init__(self, source, config, latency, world=None):
        self.now = 0.0
        self.source = source
        self.latency = latency if callable(latency) else (lambda n: latency)
        self.world = world or World(config.action.relative)
        self.messages = []
        self.executor = ChunkExecutor(source, config, self._snapshot, lambda now: 0.0, clock=lambda: self.now,
                                      log=self.messages.append)
        self.period = config.period_s
        self.pending = []  # (post time, result)
        self.requests = 0
        self.taken = []  # when each request's observation was taken
        self.given = []

    def _snapshot(self):
        step = len(self.world.positions)
        return ObservationBundle(self.world.observation(step), int(round(self.now * 1e9))), self.now

    def _take_requests(self, until):
        """Serve the waiting request if it is due by ``until``, its observation taken when it is due."""
        executor = self.executor
        while executor._slot is not None and executor._slot.starts_at <= until + 1e-12:
            request, executor._slot = executor._slot, None
            self.now = request.starts_at
            result = executor._infer(request)
            posted = request.starts_at + self.latency(self.requests)
            self.requests += 1
            self.taken.append(request.starts_at)
            self.pending.append((posted, replace(result, posted_at=posted)))

    def start(self, instruction="go"):
        self.executor.set_subgoal(instruction)
        self._take_requests(self.now)

    def run(self, ticks):
        out = []
        for _ in range(ticks):
            t = (len(self.given) + 1) * self.period
            self._take_requests(t - 1e-9)  # a request timed between the ticks sees the commands given before it
            due = [r for posted, r in self.pending if posted <= t]
            self.pending = [(posted, r) for posted, r in self.pending if posted > t]
            self.executor._results.extend(due)
            self.now = t
            action = self.executor.tick(t)
            if action is not None:
                self.world.apply(action.command)
            self._take_requests(t)
            self.given.append(action)
            out.append(action)
        return out


# ------------------------------------------------------------------------------ anchoring
@pytest.mark.parametrize("latency_s", [0.05, 0.25, 0.45, 0.85])
def test_a_chunk_of_deltas_computed_while_deltas_were_queued_never_overshoots_its_anchor_plus_its_deltas(latency_s):
    """The rehearsal's 5-7 cm overshoot: deltas computed from an observation taken while commands were queued were
    added after them. Anchored at the observation's target, the arm's target never passes the goal the policy
    steered to, at any latency, and reaches it."""
    source = GoalSeeker(goal=0.2, step=0.02)
    sim = Simulation(source, realtime_config(), latency_s)
    sim.start()
    sim.run(60)
    positions = np.array(sim.world.positions)[:, 0]
    assert positions.max() <= 0.2 + 1e-9, f"overshot to {positions.max():.3f} m"
    assert positions[-1] == pytest.approx(0.2)
    report = sim.executor.episode_report()
    assert report["execution"] == "realtime" and report["chunks"] >= 3
    if latency_s > sim.period:
        assert report["stale_dropped"] > 0  # requests overlapped execution: some of their actions had passed


def test_the_anchor_is_the_target_when_the_observation_is_taken_not_when_the_chunk_arrives():
    # One chunk observed at target 0.0 arrives after two more commands were handed out (0.02 each): its targets
    # are 0.02, 0.04, ..., so the first two are past and the third (0.06) is next: a command of +0.02.
    source = GoalSeeker(goal=1.0, step=0.02)
    sim = Simulation(source, realtime_config(), 0.45)
    sim.start()
    given = sim.run(12)
    first = next(i for i, a in enumerate(given) if a is not None)
    commands = [a.command[0] for a in given[first:] if a is not None]
    assert commands == pytest.approx([0.02] * len(commands))  # steady: never a repeated or a missing step
    assert np.diff(np.array(sim.world.positions)[:, 0]) == pytest.approx(0.02)


def test_the_actions_whose_time_has_passed_are_dropped_by_the_count_handed_out_since_the_observation():
    source = GoalSeeker(goal=10.0, step=0.01)
    sim = Simulation(source, realtime_config(), lambda n: 0.25 if n < 3 else 0.65)  # the latency changes
    sim.start()
    given = sim.run(40)
    by_chunk = {}
    for n, action in enumerate(given, start=1):
        if action is not None:
            by_chunk.setdefault(action.chunk_id, []).append((n, action.index))
    for chunk, uses in list(by_chunk.items())[1:]:
        first_index = uses[0][1]
        assert first_index >= 1  # at least one period passed since every chunk's observation
        assert [i for _, i in uses] == list(range(first_index, first_index + len(uses)))  # in order, none skipped
    stats = sim.executor.stats()
    assert stats["stale_dropped"] == sim.executor.episode_report()["stale_dropped"] > 0


def test_contiguous_commands_are_the_chunks_own_deltas_bit_for_bit():
    def chunk(n):
        actions = np.zeros((5, 7))
        actions[:, 0] = np.array([0.011, 0.013, 0.017, 0.019, 0.023]) * (n + 1)
        actions[:, 5] = 0.1
        actions[:, 6] = 1.0
        return actions

    @dataclass
    class Fixed:
        name: str = "fixed"

        def infer(self, bundle, instruction, noise_seed):
            return RawChunk(actions=chunk(0), latency_s=0.0)

        def close(self):
            pass

    sim = Simulation(Fixed(), realtime_config(), 0.05)
    sim.start()
    given = [a for a in sim.run(8) if a is not None]
    assert [a.index for a in given] == [0, 1] * 4  # 50 ms: half the execution horizon of each chunk
    assert all(np.array_equal(a.command, chunk(0)[a.index]) for a in given)  # no rounding through the targets


# ------------------------------------------------------------------------------ no idle while it can be avoided
@pytest.mark.parametrize("rate_hz, k, length, latencies", [(5, 4, 5, [0.05, 0.15, 0.38, 0.42]),
                                                           (15, 8, 15, [0.05, 0.15, 0.4, 0.45])])
def test_no_idle_period_but_the_first_chunk_while_one_request_in_flight_covers_the_latency(
        rate_hz, k, length, latencies):
    for latency_s in latencies:
        ell = latency_s * rate_hz
        d = math.floor(ell) + 1  # ticks from a request to the first it can serve
        assert length >= 2 * d - 1, "the parameters must allow zero idle"
        if rate_hz == 5:
            config = realtime_config()
        else:
            config = franka_like()
        sim = Simulation(GoalSeeker(goal=100.0, step=0.01, length=length) if rate_hz == 5 else JointSweep(length),
                         config, latency_s)
        sim.start()
        actions = sim.run(200)
        first = next(i for i, a in enumerate(actions) if a is not None)
        assert all(a is not None for a in actions[first:]), latency_s
        assert sim.executor.idle == sim.executor.idle_first == first


@dataclass
class JointSweep:
    """Absolute joint targets: joint 0 moves 0.01 rad per period along one line (the chunk from where the arm is)."""

    length: int = 15
    name: str = "joint_sweep"

    def infer(self, bundle, instruction, noise_seed):
        start = float(bundle.observation.joint_positions[0])
        actions = np.zeros((self.length, 7))
        actions[:, 0] = start + 0.01 * np.arange(1, self.length + 1)
        return RawChunk(actions=actions, latency_s=0.0)

    def close(self):
        pass


def idle_bound(length: int, ell: float) -> float:
    """The least idle share of any schedule with one request in flight at ``ell`` periods of latency: requests go
    out at ticks, so a chunk serves from ``d = floor(ell) + 1`` ticks on; ``x`` commands queued at the request run
    while it is computed, the rest of its chunk after it (the executor's rule, module docstring)."""
    d = math.floor(ell) + 1
    if length >= 2 * d - 1:
        return 0.0
    x = (length - 1) // 2
    return (d - 1 - x) / (d - 1 + length - 2 * x)


@pytest.mark.parametrize("latency_s", [0.62, 0.81, 1.0])
def test_beyond_the_bound_the_idle_share_is_the_least_one_request_in_flight_allows(latency_s):
    sim = Simulation(GoalSeeker(goal=100.0, step=0.01), realtime_config(), latency_s)
    sim.start()
    sim.run(400)
    stats = sim.executor.stats()
    idle = (stats["idle"] - stats["idle_first_chunk"]) / (stats["acted"] + stats["idle"] - stats["idle_first_chunk"])
    bound = idle_bound(5, latency_s * 5)
    assert bound > 0
    assert idle <= bound + 0.01  # the schedule reaches the bound (to its first chunk's share)
    assert any("inference slower than the queue" in m for m in sim.messages)


def test_the_request_rule_runs_about_k_actions_of_each_chunk_when_the_latency_allows():
    assert realtime_request_queue(5, 4, 1) == 1  # 80 ms at 5 Hz: the request goes with one action left, as k = 4
    assert realtime_request_queue(5, 4, 3) == 2  # 400 ms: two run while it computes
    assert realtime_request_queue(5, 4, 5) == 2  # 800 ms: no schedule avoids idling; the least idle split
    assert realtime_request_queue(15, 8, 2) == 8  # 80 ms at 15 Hz
    assert realtime_request_queue(15, 8, 7) == 8  # 400 ms at 15 Hz
    assert realtime_request_queue(50, 5, 3) == 47  # a long chunk still runs about k of each


# ------------------------------------------------------------------------------ the splice
def test_a_jump_between_chunks_is_measured_blended_and_recorded():
    # Chunk 0 steers from 0 in +0.01 steps; chunk 1 (observed at x) plans from x + 0.05: a 5 cm offset.
    @dataclass
    class Offset:
        name: str = "offset"
        calls: int = 0

        def infer(self, bundle, instruction, noise_seed):
            x = float(bundle.observation.target_position[0]) + (0.05 if self.calls == 1 else 0.0)
            self.calls += 1
            actions = np.zeros((5, 7))
            actions[:, 0] = 0.01
            actions[0, 0] += x - float(bundle.observation.target_position[0])
            actions[:, 6] = 1.0
            return RawChunk(actions=actions, latency_s=0.0)

        def close(self):
            pass

    plain = Simulation(Offset(), realtime_config(blend_steps=0, seam={"max_translation_m": 0.1}), 0.25)
    plain.start()
    plain.run(12)
    blended = Simulation(Offset(), realtime_config(blend_steps=3, seam={"max_translation_m": 0.1}), 0.25)
    blended.start()
    blended.run(12)
    for sim in (plain, blended):
        report = sim.executor.episode_report()
        assert report["splice_jump_max"]["translation_m"] == pytest.approx(0.05)
    steps_plain = np.diff(np.array(plain.world.positions)[:, 0])
    steps_blend = np.diff(np.array(blended.world.positions)[:, 0])
    assert steps_plain.max() == pytest.approx(0.06)  # the whole offset in one command
    assert steps_blend.max() < 0.03  # spread over the blend's commands
    assert blended.executor.episode_report()["blended"] >= 3 and blended.executor.episode_report()["blend_steps"] == 3


def test_a_splice_above_the_seam_guard_is_refused_and_the_old_plan_goes_on():
    @dataclass
    class Jumpy:
        name: str = "jumpy"
        calls: int = 0

        def infer(self, bundle, instruction, noise_seed):
            self.calls += 1
            actions = np.zeros((5, 7))
            actions[:, 0] = 0.01 if self.calls == 1 else -0.04  # the second chunk reverses hard
            actions[:, 6] = 1.0
            return RawChunk(actions=actions, latency_s=0.0)

        def close(self):
            pass

    sim = Simulation(Jumpy(), realtime_config(seam={"max_translation_m": 0.03}), 0.25)
    sim.start()
    given = sim.run(6)
    report = sim.executor.episode_report()
    assert report["rejected_chunks"].get(SEAM_JUMP, 0) >= 1
    acted = [a for a in given if a is not None]
    assert acted and all(a.chunk_id == 0 for a in acted[:3])  # the old plan kept running meanwhile


def test_every_action_of_a_chunk_whose_time_has_passed_is_dropped_and_nothing_moves():
    plan = ChunkPlan(RelativeFrame())
    anchor = plan.anchor()
    tags = [TaggedAction(np.zeros(7), "go", 0, 0, i) for i in range(3)]
    planned = plan.plan(anchor, [np.full(7, 0.01)] * 3, [np.zeros(7)] * 3, tags)
    plan.handed = 5  # five commands since that observation
    splice = plan.splice(anchor, planned)
    assert splice.queue == () and splice.stale == 3


def test_absolute_targets_shift_linearly_and_their_jump_ignores_the_gripper():
    frame = AbsoluteFrame([f"joint{i}" for i in range(7)] + ["gripper_position"])
    old, new = np.zeros(8), np.array([0.1] * 7 + [1.0])
    assert frame.jump(old, new) == {"joint_rad": pytest.approx(0.1)}
    assert frame.shift(new + 0.5, old, new, 0.75) == pytest.approx(np.array([0.525] * 7 + [0.75]))


def test_relative_targets_compose_and_difference_back_to_the_same_commands():
    frame = RelativeFrame()
    rng = np.random.default_rng(0)
    commands = [np.concatenate([rng.normal(0, 0.02, 3), rng.normal(0, 0.2, 3), [1.0]]) for _ in range(6)]
    targets = frame.targets(frame.start(), commands)
    before = frame.start()
    for command, target in zip(commands, targets):
        assert frame.command(before, target, command) == pytest.approx(command, abs=1e-12)
        before = target
    half = frame.shift(targets[1], targets[0], targets[1], 0.5)  # half of the way back from 1 to 0
    assert frame.jump(targets[0], half)["rotation_rad"] == pytest.approx(
        frame.jump(targets[0], targets[1])["rotation_rad"] / 2)
    assert frame.jump(targets[0], frame.shift(targets[1], targets[0], targets[1], 1.0))["translation_m"] == \
        pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------ guidance
@dataclass
class GuidedSeeker(GoalSeeker):
    guidance: list = field(default_factory=list)

    def infer_guided(self, bundle, instruction, noise_seed, guidance: Guidance):
        self.guidance.append(guidance)
        raw = self.infer(bundle, instruction, noise_seed)
        return raw


def test_a_source_that_samples_itself_is_guided_by_the_queued_actions_it_continues():
    source = GuidedSeeker(goal=100.0, step=0.01)
    sim = Simulation(source, realtime_config(), 0.45)
    sim.start()
    sim.run(30)
    assert source.guidance, "the guided call was never made"
    first = source.guidance[0]
    assert first.prefix.shape[1] == 7 and 1 <= len(first.prefix) <= 5
    assert all(g.frozen == min(len(g.prefix), 2) for g in source.guidance[1:])  # 0.45 s: two ticks before it lands
    in_flight = len(sim.pending)  # guided requests whose chunk has not come yet
    assert sim.executor.episode_report()["guided_chunks"] == len(source.guidance) - in_flight
    unguided = Simulation(GuidedSeeker(goal=100.0, step=0.01),
                          make_config(execution={"mode": "realtime", "guidance": False}), 0.45)
    unguided.start()
    unguided.run(30)
    assert unguided.source.guidance == [] and unguided.executor.episode_report()["guided_chunks"] == 0


# ------------------------------------------------------------------------------ freshness
@pytest.mark.parametrize("latency_s", [0.08, 0.25, 0.42])
def test_a_timed_request_arrives_just_before_its_chunk_is_due_so_actions_are_as_fresh_as_the_latency_allows(
        latency_s):
    """Each chunk runs as few commands as one request in flight allows, and its observation is taken as late as
    the latency allows: an action is given at most about the latency plus 1.5 periods after its observation (the
    median), against about the latency plus 2 periods or more under the synchronous rule."""
    sim = Simulation(GoalSeeker(goal=100.0, step=0.01), realtime_config(), latency_s)
    sim.start()
    given = sim.run(200)
    ages = [n * sim.period - a.observation_stamp_ns / 1e9 for n, a in enumerate(given, start=1) if a is not None]
    assert sim.executor.idle == sim.executor.idle_first  # and never idle for it
    assert float(np.median(ages)) <= latency_s + 1.5 * sim.period
    horizon = sim.executor.realtime_horizon()
    assert horizon == max(math.ceil((latency_s + 0.1 * sim.period) / sim.period - 1e-9), 2)
    by_chunk = {}
    for a in given:
        if a is not None:
            by_chunk[a.chunk_id] = by_chunk.get(a.chunk_id, 0) + 1
    assert sorted(set(list(by_chunk.values())[1:-1])) == [horizon]  # every chunk runs the horizon, then the next


def test_a_blend_is_lengthened_so_no_command_it_gives_passes_the_seam_bound():
    """Steps of 0.04 m with a 0.038 m offset at the splice: a blend of 2 would give commands of 0.053 m, over the
    0.05 m bound (the arm's per-step limit refuses them); it is lengthened until every command is within it."""
    @dataclass
    class Offset:
        name: str = "offset"
        calls: int = 0

        def infer(self, bundle, instruction, noise_seed):
            base = float(bundle.observation.target_position[0])
            self.calls += 1
            actions = np.zeros((5, 7))
            actions[:, 0] = 0.04
            if self.calls == 3:
                actions[0, 0] += 0.038  # this chunk's plan starts 3.8 cm further than the arm's target
            actions[:, 6] = 1.0
            del base
            return RawChunk(actions=actions, latency_s=0.0)

        def close(self):
            pass

    sim = Simulation(Offset(), realtime_config(blend_steps=2, seam={"max_translation_m": 0.05}), 0.25)
    sim.start()
    sim.run(20)
    steps = np.diff(np.array(sim.world.positions)[:, 0])
    report = sim.executor.episode_report()
    assert report["splice_jump_max"]["translation_m"] == pytest.approx(0.038)
    assert steps.max() <= 0.05 + 1e-9 and report["rejected_chunks"] == {}
    assert report["blended"] >= 4  # 0.038 over at least four commands: 0.04 + 0.0095 each
    assert report["seam_jump_max"]["translation_m"] <= 0.05 + 1e-9


def test_a_tick_with_nothing_queued_waits_for_a_chunk_on_its_way_instead_of_idling():
    """Realtime with the worker thread: a chunk a little late is handed out by the tick that waits for it, up to
    ``late_wait_s``; without the wait that tick is an idle period."""
    import threading
    import time as real_time

    class Gated(GoalSeeker):
        def __init__(self):
            super().__init__(goal=1.0, step=0.01)
            self.entered, self.release = threading.Event(), threading.Event()

        def infer(self, bundle, instruction, noise_seed):
            self.entered.set()
            assert self.release.wait(60)
            return super().infer(bundle, instruction, noise_seed)

    for late_wait_s, expect_action in ((30.0, True), (0.0, False)):
        source = Gated()
        world = World()
        executor = ChunkExecutor(source, realtime_config(), lambda: (ObservationBundle(world.observation(0), 0),
                                                                     real_time.monotonic()),
                                 lambda now: 0.0, late_wait_s=late_wait_s)
        executor.start()
        try:
            executor.set_subgoal("go")
            assert source.entered.wait(60), "the worker never took the request"
            threading.Timer(0.05, source.release.set).start()  # the chunk comes a little after the tick
            action = executor.tick()
            assert (action is not None) == expect_action
            assert executor.stats()["late_waits"] == (1 if expect_action else 0)
        finally:
            source.release.set()
            executor.stop(timeout_s=60)


def test_a_chunk_whose_blend_cannot_fit_is_refused_while_the_old_plan_runs_and_reanchored_once_it_has_run_out():
    """A new plan 20 cm off the arm's target cannot be blended within a 5 cm bound in one chunk: refused while the old
    plan still has commands (it goes on), then, with nothing left to give, taken with its own steps from where the
    target is (the synchronous rule after a hold): no idle period for it."""
    @dataclass
    class FarOff:
        name: str = "far_off"
        calls: int = 0

        def infer(self, bundle, instruction, noise_seed):
            self.calls += 1
            actions = np.zeros((5, 7))
            actions[:, 0] = 0.01
            if self.calls >= 3:
                actions[0, 0] = 0.2  # its plan starts 20 cm further than the arm's target (a step of 0.2)
                actions[1:, 0] = 0.01
            actions[:, 6] = 1.0
            return RawChunk(actions=actions, latency_s=0.0)

        def close(self):
            pass

    sim = Simulation(FarOff(), realtime_config(blend_steps=2, seam={"max_translation_m": 0.05},
                                               action={"key": "actions", "kind": "ee_delta", "rotation": "euler_xyz",
                                                       "gripper": "open_fraction",
                                                       "axes": [{"name": n, "unit": "m", "low": -1.0, "high": 1.0}
                                                                for n in ("ee_dx", "ee_dy", "ee_dz", "ee_droll",
                                                                          "ee_dpitch", "ee_dyaw", "gripper")]}),
                     0.25)
    sim.start()
    given = sim.run(30)
    report = sim.executor.episode_report()
    assert report["reanchored"] >= 1
    first = next(i for i, a in enumerate(given) if a is not None)
    assert all(a is not None for a in given[first:])  # never idle
    steps = np.diff(np.array(sim.world.positions)[:, 0])
    assert steps.max() <= 0.05 + 1e-9  # the 20 cm offset never became a command
