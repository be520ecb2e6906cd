"""The first action of an episode after a policy switch, against one after no switch (robot graph, wall clock).

One policy node serves two openpi-protocol policies by name (``policies: [ckpt_a=…, ckpt_b=…]``, the shipped
Bridge server config pointed at two stand-in servers on 127.0.0.1, each answering after ``--latency`` s), both
warmed up before the first episode. The robot graph runs in one process on the wall clock (a stand-in driver and
camera publishing images, joint states and poses at 30 Hz, the gripper trigger, the orchestrator, the policy node)
and episodes run in the order ``--sequence`` gives (default: a a b b a a b b a a b b a, six switches and six
episodes that keep the policy), each stopped after a few actions. Per episode it prints the policy, whether it
switched, and the first action's delay: from the episode's step 0 (its status' origin) to the first action's
stamp, and from the running status arriving here to the first action arriving here; then per kind (switch, no
switch) the median and largest delay in ms and in control periods, and whether every record and action tag names
the policy the episode asked for.

    python benchmarks/bench_policy_switch.py [--sequence a,b,a,...] [--latency 0.05] [--actions 6]

Prints numbers; asserts nothing (speed is measured here, never in tests). Loopback only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

apply_network_safe_environment(os.environ)

import rclpy  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402

from ladder_ros.instruments.openpi_fake_server import FakePolicyServer  # noqa: E402
from ladder_ros.interface_conversions import document_from_msg  # noqa: E402
from ladder_ros.messages import RUNNING, ActionTagDoc, EpisodeStatus  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.policies.factory import load_policy  # noqa: E402
from ladder_ros.ros_conversions import image_to_msg, joint_state_to_msg, pose_to_msg  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, qos  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from tests.inprocess_graph import InProcessGraph  # noqa: E402

NS = "switch_bench"
TASK = "kitchen_single_2"
NAMES = {"a": "ckpt_a", "b": "ckpt_b"}
PERIOD_S = 0.2  # the WidowX preset's 5 Hz
IDLE_S = 1.2  # between episodes: a new origin is never pushed past now by the last one's end (+1 s)


class StandIn(Node):
    """The robot's driver and camera at 30 Hz, and what the graph answers: action tags, episode statuses."""

    def __init__(self):
        super().__init__("driver", namespace=NS)
        self.image = self.create_publisher(Image, topics.IMAGE.name, qos(topics.SENSOR))
        self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
        self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
        self.create_subscription(message_class(topics.ACTION_TAG), topics.ACTION_TAG.name, self._on_tag,
                                 qos(topics.STREAM))
        self.create_subscription(message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS.name, self._on_status,
                                 qos(topics.EPISODE_STATUS.qos))
        self.frame = np.full((240, 320, 3), 90, dtype=np.uint8)
        self.tags: list[tuple[float, ActionTagDoc]] = []  # (arrival, monotonic s; tag)
        self.running: dict[str, tuple[float, int]] = {}  # episode id -> (arrival of its running status, origin ns)
        self.create_timer(1.0 / 30.0, self._publish)

    def _on_tag(self, msg):
        self.tags.append((time.monotonic(), document_from_msg(msg, ActionTagDoc)))

    def _on_status(self, msg):
        status = document_from_msg(msg, EpisodeStatus)
        if status.state == RUNNING and status.episode_id not in self.running:
            self.running[status.episode_id] = (time.monotonic(), status.origin_ns)

    def _publish(self):
        stamp = self.get_clock().now().nanoseconds
        self.image.publish(image_to_msg(self.frame, stamp, "camera"))
        self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), 1.0, stamp, "gripper_aperture"))
        self.pose.publish(pose_to_msg(np.array([0.3, 0.0, 0.1]), np.array([0.7071068, 0.0, 0.7071068, 0.0]),
                                      stamp, "base_link"))


def chunk(observation):
    actions = np.zeros((5, 7), dtype=np.float32)
    actions[:, 0] = 0.001
    actions[:, 6] = 1.0
    return {"actions": actions}


def write_configs(folder: Path, ports: dict[str, int]) -> list[str]:
    """The shipped Bridge server config, once per stand-in server (rotation read as Euler XYZ: zeros are sent)."""
    entries = []
    for key, port in ports.items():
        data = dict(load_policy("bridge_pi0_server").raw)
        data.update(name=f"bridge_{NAMES[key]}", server={**data["server"], "port": port},
                    action={**data["action"], "rotation": "euler_xyz"}, max_observation_age_s=0.5)
        path = folder / f"{NAMES[key]}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        entries.append(f"{NAMES[key]}={path}")
    return entries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequence", default="a,a,b,b,a,a,b,b,a,a,b,b,a",
                        help="the policies of the episodes in order (a, b)")
    parser.add_argument("--latency", type=float, default=0.05, help="each stand-in server's inference time (s)")
    parser.add_argument("--actions", type=int, default=6, help="actions per episode before it is stopped")
    args = parser.parse_args()
    sequence = [s.strip() for s in args.sequence.split(",") if s.strip()]
    if not sequence or set(sequence) - set(NAMES):
        parser.error("--sequence lists a and b")
    servers = {key: FakePolicyServer(chunk, latency_s=args.latency).start() for key in NAMES}
    entries = write_configs(Path(tempfile.mkdtemp(prefix="ladder_switch_")), {k: s.port for k, s in servers.items()})
    rclpy.init()
    wall = [Parameter("clock_mode", value="wall_clock")]
    robot = StandIn()
    orchestrator = OrchestratorNode(namespace=NS, parameter_overrides=wall + [
        Parameter("stall_warn_s", value=5.0), Parameter("stall_abort_s", value=10.0)])
    policy = PolicyNode(namespace=NS, parameter_overrides=wall + [
        Parameter("control_priority", value=0), Parameter("policies", value=entries)])
    nodes = [robot, GripperTriggerNode(namespace=NS, parameter_overrides=wall), orchestrator, policy]
    graph = InProcessGraph(NS, nodes, wait_s=30)
    client, executor, gate = graph.client, graph.executor, orchestrator.policy_gate
    rows = []
    try:
        graph.wait_for_policies(orchestrator, 2, cap_s=120)
        print(f"{len(sequence)} episodes on the wall clock at {1 / PERIOD_S:g} Hz, stand-in servers answering after "
              f"{args.latency * 1000:.0f} ms; policies warmed up: " + ", ".join(
                  f"{e.name} {e.warm_up_s:.2f} s" for e in gate.status.entries().values()), flush=True)
        previous = None
        for key in sequence:
            name = NAMES[key]
            end = time.monotonic() + IDLE_S
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            episode = client.start_episode(TASK, variant="low_level_policy", policy=name)
            mine = lambda: [(t, tag) for t, tag in robot.tags if tag.episode_id == episode]  # noqa: E731
            client.spin_until(executor, lambda: len(mine()) >= args.actions, 30, f"{args.actions} actions of {name}")
            orchestrator.end_episode("benchmark: enough actions")
            outcome = client.wait_until_over(executor, episode, timeout_s=30)
            arrived, origin_ns = robot.running[episode]
            first_at, first = mine()[0]
            rows.append({"policy": name, "switched": previous is not None and previous != name,
                         "from_origin_ms": (first.stamp_ns - origin_ns) / 1e6,
                         "from_status_ms": (first_at - arrived) * 1e3, "record": outcome.result.get("policy"),
                         "tags": sorted({t.policy for _, t in mine()})})
            previous = name
            row = rows[-1]
            print(f"  {name}{' (switch)' if row['switched'] else '         '}: first action "
                  f"{row['from_origin_ms']:7.1f} ms after step 0, {row['from_status_ms']:7.1f} ms after the status "
                  f"arrived; record {row['record']}, tags {', '.join(row['tags'])}", flush=True)
    finally:
        graph.close()
        rclpy.shutdown()
        for server in servers.values():
            server.stop()
    print(f"\nfirst action after the episode's step 0 (control period {PERIOD_S * 1000:.0f} ms):")
    for label, switched in (("after a switch", True), ("after no switch", False)):
        values = [r["from_origin_ms"] for r in rows[1:] if r["switched"] == switched]
        if values:
            print(f"  {label:16s} n={len(values):2d}: median {statistics.median(values):6.1f} ms "
                  f"({statistics.median(values) / (PERIOD_S * 1000):.2f} periods), largest {max(values):6.1f} ms "
                  f"({max(values) / (PERIOD_S * 1000):.2f} periods)")
    switch = [r["from_origin_ms"] for r in rows[1:] if r["switched"]]
    stay = [r["from_origin_ms"] for r in rows[1:] if not r["switched"]]
    if switch and stay:
        difference = statistics.median(switch) - statistics.median(stay)
        print(f"  median difference (switch - no switch): {difference:+.1f} ms")
    named = all(r["record"] == r["policy"] and r["tags"] == [r["policy"]] for r in rows)
    print(f"every record and action tag names the episode's policy: {'yes' if named else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
