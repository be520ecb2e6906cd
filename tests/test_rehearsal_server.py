"""The rehearsal's policy server: the scripted expert answering as the Bridge policy config, over openpi's protocol.

The server's chunk must mean, once the policy node has converted it back, what the expert would do in
simulation from the same observation: the request's state is read back by the config's layout (its
``sxyz`` orientation relative to the top-down pose), the actions go out in the config's convention
(``sxyz_axis_angle``, an open fraction). The websocket test uses the project's own openpi client.
"""

import socket
from dataclasses import replace

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.suite import load_suite
from ladder_ros.paths import resolve_share_file
from ladder_ros.policies.actions import ActionProcessor
from ladder_ros.policies.factory import load_policy
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder
from ladder_ros.instruments.rehearsal.chunker import ExpertChunker, hold_chunk, observation_from_request, predict
from ladder_ros.instruments.rehearsal.server import NO_PRIVILEGED, InferenceLatency, RehearsalPolicy, serve
from ladder_ros.instruments.expert.noise import ExpertNoise
from ladder_ros.instruments.expert.scripted import ScriptedExpert
from ladder_ros.instruments.expert.steering import WIDOWX_STEERING, stroke_steps, with_finger_stroke
from ladder_ros.policies.warmup import WARM_UP_PROMPT

CONFIG = load_policy("bridge_pi0_server")


@pytest.fixture(scope="module")
def episode():
    pytest.importorskip("mujoco", reason="the observations come from the built-in MuJoCo tabletop")
    from ladder_ros.sim.mujoco_tabletop import MujocoTabletop

    suite = load_suite(resolve_share_file("config/suites/tabletop.yaml"))
    task = suite.task("kitchen_single_2")
    with MujocoTabletop(suite, render=True, image_size=64) as sim:
        yield task, sim.reset(task, 3, 0)


def request_of(observation, instruction):
    """What the policy node sends for ``observation`` (its encoder, the robot path's state)."""
    robot_view = replace(observation, privileged=None, target_position=None)
    return ObservationEncoder(CONFIG).openpi_request(ObservationBundle(robot_view, 0), instruction)


def test_a_chunk_means_what_the_expert_does_from_the_same_observation(episode):
    task, observation = episode
    instruction = task.subgoals[0].text
    request = request_of(observation, instruction)
    read = observation_from_request(request, CONFIG, observation.privileged, observation.target_position)
    assert np.allclose(read.ee_position, observation.ee_position, atol=1e-6)
    assert np.allclose(read.ee_euler, observation.ee_euler, atol=1e-5) and read.aperture == observation.aperture
    chunk = ExpertChunker(task, 7, ExpertNoise.off(), CONFIG).chunk(read, instruction)
    assert chunk.shape == (CONFIG.chunk_length, 7) and chunk.dtype == np.float32
    processor = ActionProcessor(CONFIG)
    commands = [processor.command(a) for a in processor.check_chunk(chunk, CONFIG.chunk_length)]
    assert len(commands) == CONFIG.chunk_length  # the whole chunk is the expert's (realtime runs into its tail)
    # The same expert, stepped on the same observation and the predicted ones, in the action contract.
    expert, obs = ScriptedExpert(task, 7, ExpertNoise.off()), observation
    for command in commands:
        expected = expert.act(obs, instruction)
        assert np.allclose(command, expected, atol=1e-5), (command, expected)
        obs = predict(obs, expected)


def test_the_expert_goes_through_exactly_the_steps_that_ran(episode):
    """The expert counts control steps (a stroke's wait, a hover): after a chunk of which only ``ran`` commands were
    handed out, the next chunk is what an expert stepped through exactly those would give, whatever it looked ahead."""
    task, observation = episode
    instruction = task.subgoals[0].text
    chunker = ExpertChunker(task, 5, ExpertNoise.bridge_like(), CONFIG, 1.214)
    obs = observation
    fed = []  # what a reference expert is stepped through: the observations of the commands that ran
    for ran in (None, 2, 0, 5, 1, 3):
        chunk = chunker.chunk(obs, instruction, ran)
        look_ahead, o = [], obs
        for action in ActionProcessor(CONFIG).check_chunk(chunk, CONFIG.chunk_length):
            look_ahead.append(o)
            o = predict(o, ActionProcessor(CONFIG).command(action), chunker.aperture_step)
        fed_before = list(fed)
        reference = ExpertChunker(task, 5, ExpertNoise.bridge_like(), CONFIG, 1.214)
        for step in fed_before:
            reference.expert.act(step, instruction)
        np.testing.assert_allclose(chunk, reference.chunk(obs, instruction), atol=1e-6)
        next_ran = {None: 2, 2: 0, 0: 5, 5: 1, 1: 3, 3: 3}[ran]
        fed += look_ahead[:next_ran]
        obs = look_ahead[next_ran] if next_ran < len(look_ahead) else o
    assert chunker.replays >= 4 and chunker.chunks == 6


def test_predicting_a_grasp_carries_the_object_and_opening_drops_it(episode):
    task, observation = episode
    name, pose = next(iter(observation.privileged.objects.items()))
    at = replace(observation, ee_position=pose.position.copy(), target_position=pose.position.copy())
    closed = predict(at, np.array([0, 0, 0, 0, 0, 0, -1.0]))
    assert name in closed.privileged.grasped and closed.aperture == 0.0
    lifted = predict(closed, np.array([0, 0, 0.03, 0, 0, 0, -1.0]))
    assert lifted.privileged.objects[name].position[2] == pytest.approx(pose.position[2] + 0.03)
    assert predict(lifted, np.array([0, 0, 0, 0, 0, 0, 1.0])).privileged.grasped == ()
    missed = replace(at, ee_position=pose.position + [0, 0, 0.045], target_position=pose.position + [0, 0, 0.045])
    assert predict(missed, np.array([0, 0, 0, 0, 0, 0, -1.0])).privileged.grasped == ()


def test_predicted_fingers_move_at_the_hands_speed(episode):
    _, observation = episode
    obs, apertures = replace(observation, aperture=1.0), []
    for gripper in (-1.0,) * 7 + (1.0,) * 3:
        obs = predict(obs, np.array([0, 0, 0, 0, 0, 0, gripper]), aperture_step=1 / 6)
        apertures.append(obs.aperture)
    assert apertures[:7] == pytest.approx([5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0, 0.0])
    assert apertures[7:] == pytest.approx([1 / 6, 2 / 6, 3 / 6])


def test_a_slow_hands_steering_waits_a_stroke_and_a_fast_ones_is_unchanged():
    assert stroke_steps(1.214, 0.2) == 7 and stroke_steps(1.2, 0.2) == 6 and stroke_steps(0.0, 0.2) == 0
    slow = with_finger_stroke(WIDOWX_STEERING, 1.214, 0.2)
    assert (slow.close_steps, slow.open_wait_steps) == (7, 8)
    assert with_finger_stroke(WIDOWX_STEERING, 0.0, 0.2) is WIDOWX_STEERING
    assert with_finger_stroke(WIDOWX_STEERING, 0.1, 0.2).close_steps == WIDOWX_STEERING.close_steps  # never less
    with pytest.raises(Exception, match="finger stroke"):
        stroke_steps(float("nan"), 0.2)


def chunked_commands(task, observation, stroke_s: float, steps: int):
    """The commands the policy node would give, chunk after chunk, each chunk from the predicted observation."""
    chunker, processor = ExpertChunker(task, 7, ExpertNoise.off(), CONFIG, stroke_s), ActionProcessor(CONFIG)
    instruction, obs, commands = task.subgoals[0].text, observation, []
    while len(commands) < steps:
        request = request_of(obs, instruction)
        read = observation_from_request(request, CONFIG, obs.privileged, obs.target_position)
        read = replace(read, aperture=obs.aperture)
        chunk = processor.check_chunk(chunker.chunk(read, instruction))[:CONFIG.execute_steps]
        for action in chunk:
            command = processor.command(action)
            commands.append(command)
            obs = predict(obs, command, chunker.aperture_step)
    return commands


@pytest.mark.parametrize("stroke_s, still_steps", [(0.0, 2), (1.214, 7)])
def test_the_expert_holds_closed_and_still_for_the_fingers_stroke_before_lifting(episode, stroke_s, still_steps):
    """With a hand that needs 1.2 s to close (the WidowX's, 7 steps at 5 Hz) the expert does not lift before
    the fingers are shut: lifting after the tabletop stand-in's 2 steps closed on air in the rehearsal."""
    task, observation = episode
    commands = chunked_commands(task, observation, stroke_s, 60)
    first_close = next(i for i, c in enumerate(commands) if c[6] < 0)
    lift = next(i for i, c in enumerate(commands) if i > first_close and c[2] > 0)
    assert lift - first_close == still_steps
    assert all(np.allclose(c[:6], 0.0, atol=1e-9) and c[6] < 0 for c in commands[first_close:lift])


def test_the_expert_adds_its_deltas_to_the_target_of_the_commands_handed_out_before_the_request(episode):
    """The policy node composes a chunk onto the target it had commanded when it took the observation: every command
    handed out before the request, none after. The driver's target after the last of those is where the expert's
    deltas start, however late the driver reported it, and never one that a later command moved."""
    task, observation = episode
    instruction = task.subgoals[0].text
    clock = {"ns": 0}

    def at(ns):
        clock["ns"] = ns

    def policy_with_request_at(request_ns, *, after=None):
        """A policy whose request arrives at ``request_ns``; ``after(policy)`` runs during its inference."""
        policy = RehearsalPolicy(CONFIG, ExpertNoise.off(), delay_ms=0.0, wait_s=0.0, now_ns=lambda: clock["ns"],
                                 sleep=lambda s: after(policy) if after else None)
        policy.set_episode("e1", task, 0)
        policy.set_privileged("e1", observation.privileged, twin_target)
        at(request_ns)
        return policy

    request = request_of(observation, instruction)

    def expected(target):
        read = observation_from_request(request, CONFIG, observation.privileged, target)
        return ExpertChunker(task, 0, ExpertNoise.off(), CONFIG).chunk(read, instruction)

    twin_target = np.asarray(observation.target_position, dtype=float)
    first = twin_target + [0.0, 0.0, -0.03]  # a descent step handed out at 1.0 s, applied at 1.02 s
    second = twin_target + [0.0, 0.0, -0.06]  # the next one, handed out at 1.2 s (after the request)

    def during_inference(policy):  # the driver reports the first command late, then the policy hands out the next
        policy.set_commanded_target(first, 1_020_000_000)
        policy.note_handout(1_200_000_000)
        policy.set_commanded_target(second, 1_210_000_000)

    policy = policy_with_request_at(1_005_000_000, after=during_inference)
    policy.note_handout(1_000_000_000)
    np.testing.assert_allclose(policy.respond(request)["actions"], expected(first), atol=1e-6)
    untouched = policy_with_request_at(500_000_000)  # no command of the episode yet: the twin's target
    np.testing.assert_allclose(untouched.respond(request)["actions"], expected(twin_target), atol=1e-6)
    assert not np.allclose(expected(twin_target), expected(first))
    with pytest.raises(InvalidInputError, match="commanded target"):
        untouched.set_commanded_target([np.nan, 0.0, 0.0])


def test_the_inference_time_is_fixed_normal_or_heavy_tailed():
    rng = np.random.default_rng(0)
    assert InferenceLatency("fixed", 400.0, 50.0).sample_ms(rng) == 400.0
    normal = np.array([InferenceLatency("normal", 400.0, 20.0).sample_ms(rng) for _ in range(4000)])
    assert normal.mean() == pytest.approx(400.0, abs=2.0) and normal.std() == pytest.approx(20.0, rel=0.1)
    assert min(InferenceLatency("normal", 10.0, 50.0).sample_ms(rng) for _ in range(200)) == 0.0  # never below 0
    heavy = np.array([InferenceLatency("heavy_tail", 400.0).sample_ms(rng) for _ in range(20000)])
    assert np.median(heavy) == pytest.approx(400.0 * 1.02, rel=0.03)  # the lognormal's median, a few spikes above
    assert np.mean(heavy > 400.0 * 2.0) == pytest.approx(0.05 * 0.98, abs=0.01)  # the spikes (and a far tail)
    assert heavy.max() > 2.5 * 400.0 and heavy.min() > 0
    assert "spikes of 2-3x" in InferenceLatency("heavy_tail", 400.0).describe()
    for bad in (dict(model="gamma", delay_ms=1.0), dict(model="fixed", delay_ms=-1.0),
                dict(model="normal", delay_ms=1.0, jitter_ms=float("nan")),
                dict(model="heavy_tail", delay_ms=1.0, spike_probability=1.5)):
        with pytest.raises(ConfigError):
            InferenceLatency(**bad)


def test_the_warm_up_is_answered_in_shape_and_requests_wait_for_the_episode_then_hold(episode):
    task, observation = episode
    slept = []
    policy = RehearsalPolicy(CONFIG, ExpertNoise.off(), delay_ms=80.0, wait_s=0.0, sleep=slept.append)
    warm = ObservationEncoder(CONFIG).openpi_request(ObservationEncoder(CONFIG).dummy_bundle(), WARM_UP_PROMPT)
    reply = policy.respond(warm)
    assert np.array_equal(reply["actions"], hold_chunk(CONFIG)) and policy.warm_ups == 1
    assert slept and slept[0] == pytest.approx(0.08, abs=0.01)  # the inference time, jitter off
    policy.set_episode("e1", task, 0)
    held = policy.respond(request_of(observation, task.subgoals[0].text))["actions"]
    assert policy.holds[NO_PRIVILEGED] == 1 and np.all(held[:, :6] == 0.0)
    policy.set_privileged("e1", observation.privileged, observation.target_position)
    acted = policy.respond(request_of(observation, task.subgoals[0].text))["actions"]
    assert np.any(acted[:CONFIG.execute_steps, :3] != 0.0)


def test_the_real_openpi_client_gets_metadata_timing_and_chunks_over_the_websocket(episode):
    pytest.importorskip("websockets", reason="the openpi protocol runs over websockets (requirements/policy.txt)")
    from ladder_ros.policies.openpi_remote import OpenPIClient

    task, observation = episode
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = replace(CONFIG, server=replace(CONFIG.server, port=port))
    policy = RehearsalPolicy(config, ExpertNoise.off(), delay_ms=30.0, jitter_ms=5.0, wait_s=5.0)
    policy.set_episode("e1", task, 0)
    policy.set_privileged("e1", observation.privileged, observation.target_position)
    server = serve(policy, metadata={"inference_delay_ms": 30.0})
    client = OpenPIClient(config.server)
    try:
        assert client.connect()["policy"] == "bridge_pi0_server"
        reply = client.infer(request_of(observation, task.subgoals[0].text))
        assert np.asarray(reply.data["actions"]).shape == (CONFIG.chunk_length, 7)
        assert reply.server_timing["infer_ms"] >= 20.0
    finally:
        client.close()
        server.stop()
    with pytest.raises(Exception, match="listens on 127.0.0.1 only"):
        serve(RehearsalPolicy(replace(CONFIG, server=replace(CONFIG.server, host="10.0.0.5")), ExpertNoise.off(),
                              delay_ms=0.0))


def test_the_expert_turns_from_the_commanded_orientation_when_the_driver_reports_it(episode):
    """A measured orientation lags the target while the arm turns: read from it, the expert's corrections were added
    to a target that had already turned. With the driver's commanded orientation it steers from the target."""
    task, observation = episode
    instruction = task.subgoals[0].text
    request = request_of(observation, instruction)
    turned = np.array([0.0, 0.0, 0.4])  # the target already turned 0.4 rad in yaw; the measured pose has not
    policy = RehearsalPolicy(CONFIG, ExpertNoise.off(), delay_ms=0.0, wait_s=0.0, now_ns=lambda: 2_000_000_000,
                             sleep=lambda s: None)
    policy.set_episode("e1", task, 0)
    policy.set_privileged("e1", observation.privileged, observation.target_position)
    policy.note_handout(1_000_000_000)
    policy.set_commanded_target(observation.target_position, 1_010_000_000, turned)
    read = observation_from_request(request, CONFIG, observation.privileged, observation.target_position, turned)
    assert np.allclose(read.ee_euler, turned)
    expected = ExpertChunker(task, 0, ExpertNoise.off(), CONFIG).chunk(read, instruction)
    np.testing.assert_allclose(policy.respond(request)["actions"], expected, atol=1e-6)
    measured = observation_from_request(request, CONFIG, observation.privileged, observation.target_position)
    assert not np.allclose(ExpertChunker(task, 0, ExpertNoise.off(), CONFIG).chunk(measured, instruction), expected)
    with pytest.raises(InvalidInputError, match="commanded orientation"):
        policy.set_commanded_target(observation.target_position, 1, [0.0, np.inf, 0.0])
