"""The objects the episode recorder composes, without a node: graph-state messages and the offered QoS."""

from types import SimpleNamespace

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ladder_ros.nodes.episode_recorder.graph_state import GraphStateMessages
from ladder_ros.nodes.episode_recorder.qos import OfferedQos, offered_qos
from ladder_ros.specs import topics


def test_each_distinct_graph_state_message_is_kept_once_and_the_oldest_goes_beyond_the_capacity():
    kept = GraphStateMessages({"/tf_static": "tf2_msgs/msg/TFMessage"}, capacity=2)
    assert kept.holds("/tf_static") and not kept.holds("/rec/joint_states") and kept.count == 0
    assert kept.keep("/tf_static", b"a") and not kept.keep("/tf_static", bytearray(b"a"))
    assert kept.keep("/tf_static", b"b") and kept.keep("/tf_static", b"c")
    assert list(kept.messages()) == [("/tf_static", "tf2_msgs/msg/TFMessage", b"b"),
                                     ("/tf_static", "tf2_msgs/msg/TFMessage", b"c")]
    assert kept.count == 2


def test_a_topics_offered_qos_is_looked_up_once_and_a_gone_publisher_gets_the_declared_qos():
    asked = []
    latched = QoSProfile(depth=0, history=HistoryPolicy.UNKNOWN, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)

    def publishers(topic):
        asked.append(topic)
        return [SimpleNamespace(qos_profile=latched)] if topic == "/rec/episode/status" else []

    offered = OfferedQos(publishers, {"/rec/episode/status": topics.EPISODE_STATUS, "/rec/ee_pose": topics.EE_POSE})
    status = offered.of("/rec/episode/status")
    assert status == [offered_qos(latched, topics.EPISODE_STATUS)]
    assert (status[0]["history"], status[0]["depth"], status[0]["durability"]) == ("keep_last", 1, "transient_local")
    assert offered.of("/rec/episode/status") is status and asked == ["/rec/episode/status"]
    pose = offered.of("/rec/ee_pose")  # its publisher left already: the graph's declared QoS
    assert len(pose) == 1 and pose[0]["reliability"] == "reliable" and pose[0]["depth"] == 50
    assert offered.of("/elsewhere") == []
