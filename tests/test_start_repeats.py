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
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402

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
        assert orchestrator.control.episode_count == 1 and client.status.episode_id == episode
        assert client.status.seq == seq and client.status.state == "running"

        # The same id with other fields is not a repeat: refused, and the running episode is untouched.
        client.send_start(episode, "kitchen_single_2", variant="proprio_trigger", seed=5)
        client.spin_until(executor, lambda: episode in client.replies, 30, "the reused id's reply")
        refused = client.replies[episode]
        assert not refused.accepted and refused.reason == f"start refused: episode {episode} is running"
        assert orchestrator.control.episode_count == 1 and client.status.seq == seq
        # answered: not sent again
        assert episode not in client._resends
    finally:
        for node in nodes:
            getattr(node, "close", lambda: None)()
            node.destroy_node()
        rclpy.shutdown()


def test_the_panel_sends_its_start_again_until_answered_and_shows_a_refusal(tmp_path):
    from ladder_ros.messages import START, EpisodeCommand
    from ladder_ros.panel.bridge import PanelBridge

    rclpy.init()
    nodes = []
    try:
        node = rclpy.create_node("operator_panel_repeats")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        nodes.append(node)
        bridge = PanelBridge(node, namespace=NS)
        episode = "panel-kitchen_single_2-default-l0-s4-20261202T000000"
        # Nobody listens yet: the first start is lost, as one published during discovery can be.
        bridge.send_command(EpisodeCommand(command=START, episode_id=episode, task_id="kitchen_single_2", seed=4,
                                           variant="proprio_trigger"))
        orchestrator = OrchestratorNode(namespace=NS, parameter_overrides=[
            Parameter("clock_mode", value="wall_clock"), Parameter("state_dir", value=str(tmp_path))])
        executor.add_node(orchestrator)
        nodes.append(orchestrator)
        inbox = []

        def drained(kind, check=lambda payload: True):
            while not bridge.inbox.empty():
                inbox.append(bridge.inbox.get())
            return any(k == kind and check(p) for k, p in inbox)
        client = EpisodeClient(namespace=NS)  # only to spin with a deadline
        nodes.append(client)
        client.spin_until(executor, lambda: drained("status", lambda s: s.episode_id == episode and
                                                    s.state == "running"), 30 + START_RESEND_S,
                          "the panel's start to run")
        assert orchestrator.control.episode_count == 1 and episode not in bridge._resends
        # A start the orchestrator refuses (an episode runs): its reason reaches the panel's inbox.
        other = episode.replace("s4", "s5")
        bridge.send_command(EpisodeCommand(command=START, episode_id=other, task_id="kitchen_single_2", seed=5))
        client.spin_until(executor, lambda: drained("reply", lambda r: r.episode_id == other), 30,
                          "the refusal of the second start")
        reply = next(p for k, p in inbox if k == "reply" and p.episode_id == other)
        assert not reply.accepted and "is running" in reply.reason and other not in bridge._resends
        assert orchestrator.control.episode_count == 1
        bridge.close()
    finally:
        for n in nodes:
            getattr(n, "close", lambda: None)()
            n.destroy_node()
        rclpy.shutdown()
