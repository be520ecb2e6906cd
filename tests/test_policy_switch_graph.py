"""Two checkpoints in one graph (all nodes in one executor, lockstep on the toy world): which policy each episode ran.

The policy node serves two openpi-protocol policies by name, each config pointing at its own stand-in server on
127.0.0.1 whose chunks are told apart by the sign of ``ee_dz``. Episodes alternate calm, brisk, calm (and one that
names none: the default); each record names its policy and config hash, the policy node's report says the same,
every action tag names it and every action has its server's sign, and each server answered only its own episodes.
A name the node does not serve is refused with the list before anything moves. A server killed between episodes
makes its policy unavailable on ``policy/status``: a start naming it is refused with the reason (refuse mode) or
waits and then is refused (wait mode), no action is published meanwhile, and once the server is back the policy
warms up again and a start naming it runs under it. The in-process reference loop (what ``sim-eval --policy
NAME=CONFIG`` runs) gives the same policy identity, so the graph's and sim-eval's records rank as one system.
With ``warm_up: on_first_use`` the second policy is warmed up only when a start first names it, and that start
waits for it. On the wall clock (a stand-in robot, each policy with its own chunk executor) each policy acts only
in the episodes that name it.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from ladder_ros.core.presets import WIDOWX  # noqa: E402
from ladder_ros.core.suite import parse_suite  # noqa: E402
from ladder_ros.evaluation.ranking import identity_of, system_name  # noqa: E402
from ladder_ros.evaluation.reference_loop import run_episode  # noqa: E402
from ladder_ros.instruments.openpi_fake_server import FakePolicyServer  # noqa: E402
from ladder_ros.interface_conversions import document_from_msg  # noqa: E402
from ladder_ros.messages import ActionTagDoc  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.nodes.policy.roster import WAITS_FOR_A_START  # noqa: E402
from ladder_ros.nodes.sim_bridge.node import SimBridgeNode  # noqa: E402
from ladder_ros.policies.factory import load_policy, make_policy  # noqa: E402
from ladder_ros.policies.status import READY, UNAVAILABLE  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, qos  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from tests.fakes import ToyWorld  # noqa: E402
from tests.inprocess_graph import InProcessGraph  # noqa: E402
from tests.policy_fixtures import config_data, write_config  # noqa: E402

pytestmark = pytest.mark.ros
NS = "lab_ab"
TASK = "toy1"
SUITE = parse_suite({
    "schema_version": 1, "suite": "toy_ab", "embodiment": "widowx",
    "scenes": {"toy": {"objects": {"carrot": {}}, "containers": {"plate": {}}}},
    "tasks": [{"id": TASK, "scene": "toy", "category": "single_destination",
               "instruction": "put the carrot on the plate",
               "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"}]}]})
DZ = {"calm": 0.004, "brisk": -0.004}  # each server's ee_dz: which one an action came from


def responder(dz: float):
    def respond(observation):
        actions = np.zeros((5, 7), dtype=np.float32)
        actions[:, 2] = dz
        actions[:, 6] = 1.0  # open: the toy world never grasps, the episode runs its budget
        return {"actions": actions}
    return respond


class Probe(Node):
    """Every action (its stamp and ee_dz) and action tag the policy node publishes."""

    def __init__(self, namespace: str = NS):
        super().__init__("probe", namespace=namespace)
        self.actions: dict[int, float] = {}
        self.tags: list[ActionTagDoc] = []
        self.create_subscription(JointTrajectory, topics.ACTION.name, self._on_action, qos(topics.STREAM))
        self.create_subscription(message_class(topics.ACTION_TAG), topics.ACTION_TAG.name,
                                 lambda m: self.tags.append(document_from_msg(m, ActionTagDoc)), qos(topics.STREAM))

    def _on_action(self, msg):
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.actions[stamp] = msg.points[0].positions[list(msg.joint_names).index("ee_dz")]


class TwoPolicyGraph(InProcessGraph):
    def __init__(self, tmp_path, namespace: str = NS, warm_up: str = "at_start"):
        self.servers = {name: FakePolicyServer(responder(dz)).start() for name, dz in DZ.items()}
        self.ports = {name: server.port for name, server in self.servers.items()}
        self.configs = {}
        for name, port in self.ports.items():
            data = config_data(name=f"checkpoint_{name}", cameras=None, server={
                "host": "127.0.0.1", "port": port, "connect_timeout_s": 1.0, "request_timeout_s": 2.0,
                "backoff_initial_s": 0.2, "backoff_max_s": 0.4})
            self.configs[name] = write_config(tmp_path / f"{name}.yaml", data)
        self.entries = [f"{name}={path}" for name, path in self.configs.items()]
        self.orchestrator = OrchestratorNode(suite=SUITE, namespace=namespace)
        self.policy = PolicyNode(namespace=namespace, parameter_overrides=[
            Parameter("policies", value=self.entries), Parameter("warm_up_timeout_s", value=30.0),
            Parameter("warm_up", value=warm_up)])
        self.probe = Probe(namespace)
        super().__init__(namespace, [SimBridgeNode(simulator=ToyWorld(), suite=SUITE, namespace=namespace),
                                     GripperTriggerNode(namespace=namespace), self.orchestrator, self.policy,
                                     self.probe], wait_s=30)
        self.wait_for("calm", READY)
        if warm_up == "at_start":
            self.wait_for("brisk", READY)

    @property
    def gate(self):
        return self.orchestrator.policy_gate

    def state(self, name: str) -> str:
        status = self.gate.status
        return status.entries()[name].state if status is not None and name in status.entries() else ""

    def wait_for(self, name: str, state: str, cap_s: float = 60.0) -> None:
        self.client.spin_until(self.executor, lambda: self.state(name) == state, cap_s, f"policy {name} {state}")

    def run(self, policy: str = ""):
        return super().run(TASK, "low_level_policy", policy=policy)

    def refused(self, policy: str, cap_s: float = 30.0):
        """Send a start naming ``policy`` and spin until it is answered; the reply, which must be a refusal."""
        episode = self.client.start_episode(TASK, variant="low_level_policy", policy=policy)
        self.client.spin_until(self.executor, lambda: episode in self.client.replies, cap_s, "the reply")
        reply = self.client.replies[episode]
        assert not reply.accepted, reply
        return reply

    def requests(self) -> dict[str, int]:
        return {name: server.requests for name, server in self.servers.items()}

    def close(self):
        super().close()
        for server in self.servers.values():
            server.stop()


@pytest.fixture(scope="module")
def graph(ros, tmp_path_factory):
    graph = TwoPolicyGraph(tmp_path_factory.mktemp("two_policies"))
    yield graph
    graph.close()


def check_episode(graph: TwoPolicyGraph, outcome, name: str, before: dict[str, int]) -> None:
    """The record, the policy node's report, the tags and the actions of one episode all name ``name``."""
    record = outcome.result
    digest = load_policy(str(graph.configs[name])).digest()
    report = record["policy_report"]
    assert (record["policy"], record["policy_config_hash"]) == (name, digest)
    assert (report["policy"], report["config"], report["config_hash"]) == (name, f"checkpoint_{name}", digest)
    assert report["final"] and report["chunks"] > 0
    tags = [t for t in graph.probe.tags if t.episode_id == outcome.episode_id]
    assert tags and {t.policy for t in tags} == {name}
    dz = {graph.probe.actions[t.stamp_ns] for t in tags if t.stamp_ns in graph.probe.actions}
    assert len(dz) == 1 and np.isclose(dz.pop(), DZ[name]), "an action of another policy's server"
    after = graph.requests()
    other = next(n for n in DZ if n != name)
    assert after[name] > before[name] and after[other] == before[other]


def test_episodes_alternate_between_two_policies_each_recorded_under_its_name(graph):
    for name in ("calm", "brisk", "calm", "brisk"):
        before = graph.requests()
        check_episode(graph, graph.run(name), name, before)
    before = graph.requests()
    check_episode(graph, graph.run(), "calm", before)  # a start that names none: the default, the first entry


def test_an_unknown_name_is_refused_with_the_names_before_anything_moves(graph):
    status, requests, actions = graph.client.status, graph.requests(), len(graph.probe.actions)
    reply = graph.refused("ckpt_c")
    assert reply.reason == "start refused: unknown policy 'ckpt_c': the policy node serves calm, brisk"
    assert graph.client.status == status and graph.requests() == requests and len(graph.probe.actions) == actions


def test_a_policy_whose_server_is_killed_between_episodes_is_refused_or_waited_for_never_replaced(graph):
    port = graph.ports["brisk"]
    graph.servers["brisk"].stop()
    graph.wait_for("brisk", UNAVAILABLE, cap_s=30)
    why = (f"unavailable: the policy server at ws://127.0.0.1:{port} does not answer (GET /healthz) "
           "(see docs/robot_bringup.md#a-policy-server-that-does-not-answer)")
    status, requests, actions = graph.client.status, graph.requests(), len(graph.probe.actions)
    reply = graph.refused("brisk")
    assert reply.reason == f"start refused: the policy 'brisk' is not ready: {why}"
    gate = graph.gate
    gate.unavailable, gate.wait_s = "wait", 1.5  # the orchestrator's unavailable_policy and policy_ready_wait_s
    try:
        reply = graph.refused("brisk")
        assert reply.reason == f"start refused: the policy 'brisk' was not ready within 1.5 s: {why}"
        assert graph.client.status == status and graph.requests() == requests
        assert len(graph.probe.actions) == actions  # nothing moved, and no other policy acted in its place
        before = graph.requests()
        check_episode(graph, graph.run("calm"), "calm", before)  # the other policy is untouched
        # The server comes back: the policy warms up again, and a start that waits for it runs under it.
        gate.wait_s = 60.0
        graph.servers["brisk"] = FakePolicyServer(responder(DZ["brisk"]), port=port).start()
        before = graph.requests()
        check_episode(graph, graph.run("brisk"), "brisk", before)
    finally:
        gate.unavailable, gate.wait_s = "refuse", 330.0


def test_sim_eval_and_the_graph_give_one_policy_the_same_identity(graph):
    outcome = graph.run("calm")
    task = SUITE.task(TASK)
    loop = run_episode(ToyWorld(), make_policy(graph.entries[0], task, 0), task, "low_level_policy", WIDOWX,
                       layout=0, seed=0).to_dict()
    digest = load_policy(str(graph.configs["calm"])).digest()
    assert (loop["policy"], loop["policy_config_hash"], loop["policy_report"]["config_hash"]) == ("calm", digest,
                                                                                                  digest)
    names = {system_name(identity_of({"variant": "low_level_policy"}, r)) for r in (loop, outcome.result)}
    assert names == {f"calm@{digest[:8]}/low_level_policy"}


def test_on_first_use_a_policy_warms_up_when_a_start_first_names_it_and_that_start_waits_for_it(ros, tmp_path):
    graph = TwoPolicyGraph(tmp_path, namespace="lab_ab_lazy", warm_up="on_first_use")
    try:
        assert graph.gate.status.entries()["brisk"].line == f"warming up: {WAITS_FOR_A_START}"
        assert graph.servers["brisk"].requests == 0  # not warmed up: its server has not been asked anything
        before = graph.requests()
        outcome = graph.run("brisk")  # deferred by the orchestrator while the policy node warms it up
        warm_up_request = 1
        check_episode(graph, outcome, "brisk", {**before, "brisk": before["brisk"] + warm_up_request})
        assert outcome.result["policy_report"]["warm_up_s"] is not None
    finally:
        graph.close()


# ------------------------------------------------------------------------------ wall clock
class StandInRobot(Node):
    """The robot's driver and camera at 10 Hz (the wall-clock graph has no simulator)."""

    def __init__(self, namespace: str):
        from geometry_msgs.msg import PoseStamped
        from sensor_msgs.msg import Image, JointState

        super().__init__("driver", namespace=namespace)
        self.image = self.create_publisher(Image, topics.IMAGE.name, qos(topics.SENSOR))
        self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
        self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
        self.frame = np.full((48, 64, 3), 90, dtype=np.uint8)
        self.create_timer(0.1, self._publish)

    def _publish(self):
        from ladder_ros.ros_conversions import image_to_msg, joint_state_to_msg, pose_to_msg

        stamp = self.get_clock().now().nanoseconds
        self.image.publish(image_to_msg(self.frame, stamp, "camera"))
        self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), 1.0, stamp, "gripper_aperture"))
        self.pose.publish(pose_to_msg(np.array([0.3, 0.0, 0.1]), np.array([0.7071068, 0.0, 0.7071068, 0.0]),
                                      stamp, "base_link"))


def test_on_the_wall_clock_each_policy_acts_only_in_the_episodes_that_name_it(ros, tmp_path):
    ns = "lab_ab_wall"
    servers = {name: FakePolicyServer(responder(dz), latency_s=0.02).start() for name, dz in DZ.items()}
    entries = []
    for name, server in servers.items():
        data = config_data(name=f"checkpoint_{name}", server={
            "host": "127.0.0.1", "port": server.port, "connect_timeout_s": 1.0, "request_timeout_s": 2.0,
            "backoff_initial_s": 0.2, "backoff_max_s": 0.4})
        entries.append(f"{name}={write_config(tmp_path / f'{name}.yaml', data)}")
    wall = [Parameter("clock_mode", value="wall_clock")]
    orchestrator = OrchestratorNode(suite=SUITE, namespace=ns, parameter_overrides=wall + [
        Parameter("stall_warn_s", value=5.0), Parameter("stall_abort_s", value=10.0)])
    probe = Probe(ns)
    nodes = [StandInRobot(ns), GripperTriggerNode(namespace=ns, parameter_overrides=wall), orchestrator,
             PolicyNode(namespace=ns, parameter_overrides=wall + [Parameter("control_priority", value=0),
                                                                  Parameter("policies", value=entries)]),
             probe]
    graph = InProcessGraph(ns, nodes, wait_s=30)
    client, executor = graph.client, graph.executor
    outcomes = []
    try:
        graph.wait_for_policies(orchestrator, 2)
        for name in ("brisk", "calm", "brisk"):
            before = {n: s.requests for n, s in servers.items()}
            episode = client.start_episode(TASK, variant="low_level_policy", policy=name)
            client.spin_until(executor, lambda: sum(t.episode_id == episode for t in probe.tags) >= 6, 30,
                              f"six actions of {name}")
            orchestrator.end_episode("enough actions")
            outcomes.append((name, client.wait_until_over(executor, episode, timeout_s=30), before,
                             {n: s.requests for n, s in servers.items()}))
    finally:
        graph.close()
        for server in servers.values():
            server.stop()
    for name, outcome, before, after in outcomes:
        other = next(n for n in DZ if n != name)
        record = outcome.result
        assert (record["policy"], record["policy_report"]["policy"]) == (name, name)
        assert record["policy_report"]["execution"] in ("realtime", "synchronous")
        tags = [t for t in probe.tags if t.episode_id == outcome.episode_id]
        assert {t.policy for t in tags} == {name}
        assert {float(np.sign(probe.actions[t.stamp_ns])) for t in tags if t.stamp_ns in probe.actions} == {
            float(np.sign(DZ[name]))}
        assert after[name] > before[name] and after[other] == before[other]
