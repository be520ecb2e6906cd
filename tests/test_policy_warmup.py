"""A policy server as a lab meets it, through the robot graph on the wall clock (all nodes in one executor).

* A JAX server compiles on its first request and answers nothing meanwhile (the stand-in server blocks its event
  loop for ``compile_s``, as openpi's does): the policy node warms up before the orchestrator accepts a start, the
  first episode starts after the warm-up, and none of its steps is held for the compile. The compile time is a
  parameter; the slow-marked test runs the real 30 s case.
* A misconfigured server answers every request with a traceback (then closes, code 1011): each distinct error is
  one warning line, the back-off grows past 5 s within a minute (a reconnect does not reset it), and after
  ``max_consecutive_errors`` error replies the episode ends with ``policy server error: ...`` in its record; the
  next start is refused with the policy's status as the reason.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

import rclpy  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from ladder_ros.bringup.client import EpisodeClient  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.runtime.endpoints import qos  # noqa: E402
from ladder_ros.instruments.openpi_fake_server import FakePolicyServer  # noqa: E402
from ladder_ros.policies.factory import PolicyProvider  # noqa: E402
from ladder_ros.ros_conversions import image_to_msg, joint_state_to_msg, pose_to_msg  # noqa: E402
from tests.policy_fixtures import BRIDGE_LIKE, make_config  # noqa: E402

pytestmark = pytest.mark.ros
NS = "lab"
TASK = "kitchen_single_2"


def small_chunk(observation):
    actions = np.zeros((5, 7), dtype=np.float32)
    actions[:, 0] = 0.002
    actions[:, 6] = 1.0
    return {"actions": actions}


class StandInRobot(Node):
    """The robot's driver and camera at 10 Hz; counts the actions it is sent."""

    def __init__(self):
        super().__init__("driver", namespace=NS)
        self.image = self.create_publisher(Image, topics.IMAGE.name, qos(topics.SENSOR))
        self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
        self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
        self.create_subscription(JointTrajectory, topics.ACTION.name, self._on_action, qos(topics.STREAM))
        self.actions: list[float] = []  # when each action came (monotonic s)
        self.frame = np.full((48, 64, 3), 90, dtype=np.uint8)
        self.create_timer(0.1, self._publish)

    def _on_action(self, msg):
        self.actions.append(time.monotonic())

    def _publish(self):
        stamp = self.get_clock().now().nanoseconds
        self.image.publish(image_to_msg(self.frame, stamp, "camera"))
        self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), 1.0, stamp, "gripper_aperture"))
        self.pose.publish(pose_to_msg(np.array([0.3, 0.0, 0.1]), np.array([0.7071068, 0.0, 0.7071068, 0.0]),
                                      stamp, "base_link"))


class LabGraph:
    """Driver stand-in, gripper trigger, orchestrator and the policy node with an openpi config, one executor."""

    def __init__(self, port: int, **server):
        wall = [Parameter("clock_mode", value="wall_clock")]
        self.config = config = make_config(server={**BRIDGE_LIKE["server"], "port": port, **server})
        self.robot = StandInRobot()
        self.orchestrator = OrchestratorNode(namespace=NS, parameter_overrides=wall + [
            Parameter("stall_warn_s", value=5.0), Parameter("stall_abort_s", value=10.0)])
        self.policy = PolicyNode(namespace=NS, parameter_overrides=wall + [Parameter("control_priority", value=0)],
                                 provider=PolicyProvider(config))
        self.nodes = [self.robot, GripperTriggerNode(namespace=NS, parameter_overrides=wall), self.orchestrator,
                      self.policy]
        self.client = EpisodeClient(namespace=NS)
        self.executor = SingleThreadedExecutor()
        for node in [*self.nodes, self.client]:
            self.executor.add_node(node)

    def spin_until(self, condition, cap_s: float, what: str) -> None:
        self.client.spin_until(self.executor, condition, cap_s, what)

    def start_and_wait_for_reply(self, cap_s: float = 30.0):
        """Send a start and spin until the orchestrator answers it; returns (episode id, reply)."""
        episode = self.client.start_episode(TASK, variant="low_level_policy")
        self.spin_until(lambda: episode in self.client.replies, cap_s, "the reply to the start")
        return episode, self.client.replies[episode]

    def close(self):
        for node in [*self.nodes, self.client]:
            getattr(node, "close", lambda: None)()
            node.destroy_node()


@pytest.fixture
def ros_context():
    rclpy.init()
    yield
    rclpy.shutdown()


def free_port() -> int:
    with FakePolicyServer() as probe:
        return probe.port  # free a moment ago, closed again now


def first_episode_after_a_compile(compile_s: float, request_timeout_s: float) -> None:
    # The graph comes up first and the server later, as a lab starts them: the start is sent while the policy
    # still waits for its server, so it is deferred whatever the machine's speed.
    port = free_port()
    graph = LabGraph(port, request_timeout_s=request_timeout_s)
    server = None
    try:
        graph.client.wait_for_graph(graph.executor, timeout_s=30)
        gate = graph.orchestrator.policy_gate
        graph.spin_until(lambda: gate.status is not None and "waiting for the policy server" in gate.status.detail,
                         30, "the policy waiting for its server")
        episode = graph.client.start_episode(TASK, variant="low_level_policy")
        graph.spin_until(lambda: gate.deferred is not None, 30, "the orchestrator deferring the start")
        server = FakePolicyServer(small_chunk, latency_s=0.05, compile_s=compile_s, port=port).start()
        graph.spin_until(lambda: episode in graph.client.replies, compile_s + 60, "the reply to the start")
        started = time.monotonic()
        reply = graph.client.replies[episode]
        assert reply.accepted, reply.reason
        assert server.compiled_at is not None and server.compiled_at <= started  # compiled before the episode
        graph.spin_until(lambda: len(graph.robot.actions) >= 8, 60, "eight actions")
        graph.orchestrator.end_episode("enough actions")
        outcome = graph.client.wait_until_over(graph.executor, episode, timeout_s=30)
    finally:
        graph.close()
        if server is not None:
            server.stop()
    report = outcome.result["policy_report"]
    assert outcome.result["policy"] == "test_bridge" and report["final"] is True
    assert report["config_hash"] == graph.config.digest()
    assert report["warm_up_s"] >= compile_s
    held = report["held_by_reason"]
    # Not one step waited for the compile (compile_s / 0.2 s periods): at most the first chunk's own latency.
    assert set(held) <= {"waiting for the first chunk of this subgoal", "no action ready"}, held
    assert report["held_steps"] <= 3, held
    assert report["rejected_chunks"] == {} and report["chunks"] >= 2
    assert report["inference_ms"]["p50"] is not None and report["inference_ms"]["p95"] < 1000 * compile_s


def test_the_first_episode_starts_after_the_warm_up_and_waits_for_no_compile(ros_context):
    # A 3 s compile against a 1 s request bound: without the warm-up the first requests would time out.
    first_episode_after_a_compile(compile_s=3.0, request_timeout_s=1.0)


@pytest.mark.slow
def test_a_30_s_compile_like_a_real_jax_server(ros_context):
    first_episode_after_a_compile(compile_s=30.0, request_timeout_s=2.0)


def failing_server_replies():
    """The warm-up's request is answered; every later one raises, alternating two errors, as a server whose
    input transforms miss a key of the real observations would."""
    count = {"n": 0}

    def respond(observation):
        count["n"] += 1
        if count["n"] == 1:
            return small_chunk(observation)
        if count["n"] % 2 == 0:
            raise KeyError("observation/wrist_image")
        raise ValueError("state has 7 entries, the model reads 8")

    return respond


def test_a_server_that_fails_every_request_backs_off_says_each_error_once_and_ends_the_episode(ros_context, capfd):
    server = FakePolicyServer(failing_server_replies()).start()
    graph = LabGraph(server.port, backoff_initial_s=0.5, backoff_max_s=8.0, max_consecutive_errors=6)
    try:
        graph.client.wait_for_graph(graph.executor, timeout_s=30)
        gate = graph.orchestrator.policy_gate
        graph.spin_until(lambda: gate.status is not None and gate.status.ready, 60, "the policy ready")
        episode = graph.client.start_episode(TASK, variant="low_level_policy")
        # errors at 0, 0.5, 1.5, 3.5, 7.5 and 15.5 s: the sixth ends the episode (a cap of a minute)
        outcome = graph.client.wait_until_over(graph.executor, episode, timeout_s=60)
        # The policy is not ready now: the next start is refused, saying why.
        _, refusal = graph.start_and_wait_for_reply()
    finally:
        graph.close()
        server.stop()
    result = outcome.result
    assert result["finish_reason"].startswith("aborted: policy server error: ")
    assert "error replies in a row" in result["finish_reason"]
    errors = server.request_times[1:7]  # the warm-up's request, then the episode's six
    assert len(errors) == 6
    gaps = np.diff(errors)
    assert gaps.max() >= 5.0 and errors[-1] - errors[0] < 60.0  # back-off past 5 s within a minute
    assert all(later >= earlier * 1.5 for earlier, later in zip(gaps, gaps[1:])), gaps  # it grows, never resets
    report = result["policy_report"]
    assert report["server_errors"] >= 6 and report["held_by_reason"].get("policy server error", 0) > 0
    assert not refusal.accepted and "the policy is not ready: server error: " in refusal.reason
    logged = capfd.readouterr().err.splitlines()
    warnings = [line for line in logged if "[WARN]" in line and f"[{NS}.policy]" in line]
    for signature in ("KeyError: 'observation/wrist_image'", "ValueError: state has 7 entries, the model reads 8"):
        said = [line for line in warnings if signature in line]
        assert len(said) == 1, "\n".join(warnings)
    assert re.search(r"asking the orchestrator to end it: policy server error: ", "\n".join(logged))


def test_a_policy_that_cannot_warm_up_refuses_starts_with_the_servers_error(ros_context):
    def broken(observation):
        raise KeyError("observation/primary_image")

    server = FakePolicyServer(broken).start()
    graph = LabGraph(server.port)
    try:
        graph.client.wait_for_graph(graph.executor, timeout_s=30)
        gate = graph.orchestrator.policy_gate
        graph.spin_until(lambda: gate.status is not None and gate.status.state == "server error", 60,
                         "the policy's warm-up failing")
        _, reply = graph.start_and_wait_for_reply()
    finally:
        graph.close()
        server.stop()
    assert not reply.accepted
    assert reply.reason == "start refused: the policy is not ready: server error: KeyError: 'observation/primary_image'"


def test_the_warm_up_waits_for_a_server_that_comes_late_and_sends_the_configured_shapes():
    from ladder_ros.policies.warmup import WarmUp

    port = free_port()
    config = make_config(server={**BRIDGE_LIKE["server"], "port": port, "backoff_initial_s": 0.1,
                                 "backoff_max_s": 0.2})
    warmup = WarmUp(PolicyProvider(config), deadline_s=30.0)
    warmup.start()
    try:
        deadline = time.monotonic() + 30
        while "waiting for the policy server" not in warmup.snapshot()[1]:
            assert time.monotonic() < deadline, warmup.snapshot()
            time.sleep(0.01)
        with FakePolicyServer(port=port, compile_s=0.5) as server:
            while not warmup.ready:
                assert time.monotonic() < deadline, warmup.snapshot()
                time.sleep(0.01)
            request = server.observations[0]
    finally:
        warmup.stop()
    assert request["observation/image"].shape == (32, 32, 3) and request["observation/image"].max() == 0
    assert request["observation/state"].shape == (7,) and request["prompt"] == "warm up"
    assert warmup.warm_up_s >= 0.5 and warmup.attempts == 1


def test_a_start_that_waits_longer_than_policy_ready_wait_s_is_refused_with_the_policys_status(ros_context):
    server = FakePolicyServer(small_chunk, compile_s=8.0).start()
    graph = LabGraph(server.port, request_timeout_s=1.0)
    graph.orchestrator.policy_gate.wait_s = 1.0  # the orchestrator's policy_ready_wait_s
    try:
        graph.client.wait_for_graph(graph.executor, timeout_s=30)
        gate = graph.orchestrator.policy_gate
        graph.spin_until(lambda: gate.status is not None, 30, "the policy's first status")
        first = graph.client.start_episode(TASK, variant="low_level_policy")
        graph.spin_until(lambda: gate.deferred is not None, 30, "the first start deferred")
        second, _ = graph.start_and_wait_for_reply()  # replaces the first
        replies = graph.client.replies
    finally:
        graph.close()
        server.stop()
    assert not replies[first].accepted
    assert replies[first].reason == "start refused: replaced by a newer start command while the policy warmed up"
    assert not replies[second].accepted
    assert replies[second].reason.startswith("start refused: the policy was not ready within 1 s: warming up: ")
