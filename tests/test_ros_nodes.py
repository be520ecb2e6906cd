"""Single nodes in one process against hand-made message streams: QoS, what the recorder hears, the Franka trigger."""

import re
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from ladder_ros.interface_conversions import document_from_msg, document_to_msg  # noqa: E402

from ladder_ros.messages import EpisodeStatus, GripperEventsDoc, stamp_of_step  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.nodes.episode_recorder.node import EpisodeRecorderNode  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, qos  # noqa: E402
from ladder_ros.ros_conversions import joint_state_to_msg, pose_to_msg  # noqa: E402

pytestmark = pytest.mark.ros

TOPICS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "interfaces.md"
RELIABLE, BEST_EFFORT = ReliabilityPolicy.RELIABLE, ReliabilityPolicy.BEST_EFFORT
VOLATILE, TRANSIENT_LOCAL = DurabilityPolicy.VOLATILE, DurabilityPolicy.TRANSIENT_LOCAL


def table_topics():
    """(topic, QoS text, rate) of every row of docs/interfaces.md's topic table (services excluded)."""
    graph = TOPICS_PAGE.read_text().split("<!-- graph:begin -->")[1].split("<!-- graph:end -->")[0]
    return re.findall(r"^\| `([^`]+)` \| [^|]+ \| ([^|]+) \| ([^|]+) \|", graph, re.M)


def spin_until(executor, condition, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        executor.spin_once(timeout_sec=0.05)


def test_each_kind_of_topic_has_the_qos_of_the_design():
    # Images: best effort sensor data; per-step streams, events and commands: reliable (a lost step
    # would stall lockstep); latched state: reliable, transient local, depth 1.
    expected = {topics.SENSOR: (BEST_EFFORT, VOLATILE, 5), topics.STREAM: (RELIABLE, VOLATILE, 50),
                topics.EVENTS: (RELIABLE, VOLATILE, 200), topics.LATCHED: (RELIABLE, TRANSIENT_LOCAL, 1)}
    for kind, (reliability, durability, depth) in expected.items():
        profile = qos(kind)
        assert (profile.reliability, profile.durability, profile.depth) == (reliability, durability, depth), kind


def test_the_topic_table_states_each_topics_qos():
    rows = {name: (text, rate) for name, text, rate in table_topics()}
    assert set(rows) == {spec.name for spec in topics.TOPICS} and len(rows) == len(topics.TOPICS)
    reliability = {RELIABLE: "reliable", BEST_EFFORT: "best effort"}
    durability = {VOLATILE: "volatile", TRANSIENT_LOCAL: "transient local"}
    for spec in topics.TOPICS:
        profile = qos(spec.qos)
        stated = f"{reliability[profile.reliability]}, {durability[profile.durability]}, depth {profile.depth}"
        assert rows[spec.name][0] == stated, spec.name
    # one message per control step: everything but the camera image is reliable
    per_step = {name for name, (_, rate) in rows.items() if rate == "control rate"}
    assert per_step == {"camera/image_raw", "joint_states", "ee_pose", "sim/privileged_state", "gripper/events",
                        "orchestrator/decision", "policy/action", "policy/action_tag", "/clock"}
    assert {name for name in per_step if not rows[name][0].startswith("reliable")} == {"camera/image_raw"}


def test_the_recorder_listens_to_every_topic_of_the_table_with_its_qos(ros, tmp_path):
    recorder = EpisodeRecorderNode(namespace="rec", parameter_overrides=[Parameter("output_dir", value=str(tmp_path))])
    try:
        heard = {s.topic_name: s.qos_profile for s in recorder.subscriptions}
        for name, text, _ in table_topics():
            profile = heard.get(name if name.startswith("/") else f"/rec/{name}")
            assert profile is not None, f"the recorder does not record {name}"
            assert (profile.reliability == RELIABLE) == text.startswith("reliable"), name
            assert (profile.durability == TRANSIENT_LOCAL) == ("transient local" in text), name
        assert len(heard) == len(table_topics())
    finally:
        recorder.close()
        recorder.destroy_node()


FRANKA_RATE_HZ = 15.0  # Appendix A
ORIGIN_NS = 2_000_000_000_000


class FrankaDriverProbe(Node):
    """Plays the Franka driver and the orchestrator's status for one episode; collects gripper events."""

    def __init__(self, ns):
        super().__init__("probe", namespace=ns)
        self.status = self.create_publisher(message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS.name,
                                            qos(topics.LATCHED))
        self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
        self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
        self.events: list[GripperEventsDoc] = []
        self.create_subscription(message_class(topics.GRIPPER_EVENTS), topics.GRIPPER_EVENTS.name,
                                 lambda m: self.events.append(document_from_msg(m, GripperEventsDoc)),
                                 qos(topics.STREAM))

    def publish_step(self, step, aperture, z):
        stamp = stamp_of_step(ORIGIN_NS, FRANKA_RATE_HZ, step)
        self.joints.publish(joint_state_to_msg(("j1",), np.zeros(1), aperture, stamp, "gripper_aperture"))
        self.pose.publish(pose_to_msg(np.array([0.4, 0.0, z]), np.array([1.0, 0.0, 0.0, 0.0]), stamp, "base"))


def test_franka_trigger_node_ends_an_attempt_on_a_21_step_close_with_a_3cm_lift(ros):
    # Appendix B (RoboLab-Long): open past 0.5 after a close of at least 21 steps with a lift of 3 cm.
    # Hand-made trace: open for 5 steps, closed for 21 steps while the hand rises 3 cm, then open.
    ns = "franka_trigger"
    trigger = GripperTriggerNode(namespace=ns, parameter_overrides=[Parameter("preset", value="franka")])
    probe = FrankaDriverProbe(ns)
    executor = SingleThreadedExecutor()
    executor.add_node(trigger)
    executor.add_node(probe)
    try:
        probe.status.publish(document_to_msg(EpisodeStatus(
            episode_id="e1", state="running", preset="franka", rate_hz=FRANKA_RATE_HZ, origin_ns=ORIGIN_NS)))
        spin_until(executor, lambda: trigger.episode is not None and probe.joints.get_subscription_count() >= 1
                   and probe.pose.get_subscription_count() >= 1, 60,
                   "the trigger to start the episode and to listen to the joint states and the end-effector pose")
        apertures = [1.0] * 5 + [0.0] * 21 + [1.0] * 3
        zs = [0.20] * 5 + [0.20 + 0.03 * i / 20 for i in range(21)] + [0.23] * 3
        for step, (aperture, z) in enumerate(zip(apertures, zs)):
            probe.publish_step(step, aperture, z)
        spin_until(executor, lambda: len(probe.events) == len(apertures), 60, "one gripper event per step")
        assert [doc.step for doc in probe.events] == list(range(len(apertures)))
        ends = [(doc.step, doc.events["attempt_end"]) for doc in probe.events if doc.events["attempt_end"]]
        assert ends == [(26, {"reason": "release", "close_steps": 21, "lift_m": pytest.approx(0.03)})]
        releases = [doc.step for doc in probe.events if doc.events["release"]]
        assert releases == [26]
    finally:
        for node in (trigger, probe):
            executor.remove_node(node)
            node.destroy_node()
