"""A start command reaches the orchestrator once discovery lets it, and never starts two episodes.

DDS does not promise that a message published as soon as a publisher sees a subscriber is delivered
(the subscriber may not have matched back yet), and a message published before any subscriber is
gone. The episode client sends its start again until it is answered; the orchestrator answers a
repeat of a start it took as the same request.
"""

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.bringup.client import START_RESEND_S, EpisodeClient  # noqa: E402
from ladder_ros.nodes.orchestrator import OrchestratorNode  # noqa: E402

pytestmark = pytest.mark.ros
NS = "repeats"


def test_a_start_sent_before_the_orchestrator_listens_is_repeated_until_answered_and_runs_once(tmp_path):
    rclpy.init()
    nodes = []
    try:
        client = EpisodeClient(namespace=NS)
        executor = SingleThreadedExecutor()
        executor.add_node(client)
        nodes.append(client)
        # Nobody listens yet: this first message is lost, as one published during discovery can be.
        episode = client.start_episode("kitchen_single_2", variant="proprio_trigger", seed=4)
        assert client._command_pub.get_subscription_count() == 0
        orchestrator = OrchestratorNode(namespace=NS, parameter_overrides=[
            Parameter("clock_mode", value="wall_clock"), Parameter("state_dir", value=str(tmp_path))])
        executor.add_node(orchestrator)
        nodes.append(orchestrator)
        client.spin_until(executor, lambda: episode in client.replies, 30 + START_RESEND_S, "the start's reply")
        first = client.replies[episode]
        assert first.accepted and first.assigned_id == episode and first.reason == ""
        client.spin_until(executor, lambda: client.status is not None and client.status.episode_id == episode, 30,
                          "the episode's status")
        seq = client.status.seq

        # The same start again (a repeat still in flight): answered as taken, no second episode.
        client.send_start(episode, "kitchen_single_2", variant="proprio_trigger", seed=4)
        client.spin_until(executor, lambda: episode in client.replies, 30, "the repeat's reply")
        repeat = client.replies[episode]
        assert repeat.accepted and repeat.assigned_id == episode and repeat.reason == "already started"
        assert orchestrator._episode_count == 1 and client.status.episode_id == episode
        assert client.status.seq == seq and client.status.state == "running"

        # The same id with other fields is not a repeat: refused, and the running episode is untouched.
        client.send_start(episode, "kitchen_single_2", variant="proprio_trigger", seed=5)
        client.spin_until(executor, lambda: episode in client.replies, 30, "the reused id's reply")
        refused = client.replies[episode]
        assert not refused.accepted and refused.reason == f"start refused: episode {episode} is running"
        assert orchestrator._episode_count == 1 and client.status.seq == seq
        # answered: not sent again
        assert not client._unanswered
    finally:
        for node in nodes:
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.shutdown()
