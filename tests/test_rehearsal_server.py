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

from ladder_ros.core.suite import load_suite
from ladder_ros.paths import resolve_share_file
from ladder_ros.policies.actions import ActionProcessor
from ladder_ros.policies.factory import load_policy
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder
from ladder_ros.policies.rehearsal_expert import ExpertChunker, hold_chunk, observation_from_request, predict
from ladder_ros.policies.rehearsal_server import NO_PRIVILEGED, RehearsalPolicy, serve
from ladder_ros.policies.scripted_expert import (WIDOWX_STEERING, ExpertNoise, ScriptedExpert, stroke_steps,
                                                 with_finger_stroke)
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
    commands = [ActionProcessor(CONFIG).command(a) for a in ActionProcessor(CONFIG).check_chunk(chunk)]
    # The same expert, stepped on the same observation and the predicted ones, in the action contract.
    expert, obs = ScriptedExpert(task, 7, ExpertNoise.off()), observation
    for command in commands:
        expected = expert.act(obs, instruction)
        assert np.allclose(command, expected, atol=1e-5), (command, expected)
        obs = predict(obs, expected)
    assert np.all(chunk[CONFIG.execute_steps:, :6] == 0.0)  # the unexecuted tail holds


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
