"""Learned policies through the graph.

* Lockstep: a tiny random PI0 model (transformers' own implementation, built by a fixture) drives the
  MuJoCo tabletop and the ManiSkill3 Bridge scene through the graph (nodes as processes), and
  ``ladder-ros parity`` reports every episode identical to the in-process reference loop.
* Wall clock: ``ladder-ros up widowx --mode real`` with an openpi-server policy config starts against a
  stand-in driver and camera, publishes tagged actions at the control rate with diagnostics, and holds still
  once the server is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.policy_fixtures import config_data, write_config
from tests.policy_models import tiny_pi0_policy

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("transformers", reason="needs transformers (requirements/vlm.txt)")

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])  # an end-effector orientation (w, x, y, z)

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny_policy(tiny_pi0_model, tmp_path_factory):
    return write_config(tmp_path_factory.mktemp("tiny_policy") / "tiny_pi0.yaml", tiny_pi0_policy(tiny_pi0_model))


def parity(*args, out: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ladder_ros.cli", "parity", "widowx", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_tiny_model_parity_on_the_mujoco_tabletop(tiny_policy, tmp_path):
    pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
    result = parity("--tasks", "kitchen_single_1", "--variants", "proprio_verifier", "--seeds", "0",
                    "--set", f"policy.policy={tiny_policy}", "--set", "sim_bridge.image_size=64", out=tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "parity: 1/1 episodes identical" in result.stdout
    records = json.loads((tmp_path / "parity.json").read_text())
    assert records[0]["steps"] > 20  # the learned policy really drove the episode (budget: 100 steps)


def test_tiny_model_parity_on_the_maniskill_bridge_scene(tiny_policy, tmp_path):
    from ladder_ros.sim.maniskill_env import missing_prerequisites

    reason = missing_prerequisites()
    if reason is not None:
        pytest.skip(f"SimplerEnv (ManiSkill3) backend unavailable: {reason}")
    params = yaml.safe_load((REPO / "config" / "widowx_params.yaml").read_text())
    sections = {k.rsplit("/", 1)[-1]: v["ros__parameters"] for k, v in params.items()}
    sections["sim_bridge"].update(simulator="maniskill_bridge", suite="config/suites/bridge.yaml", render=True)
    sections["orchestrator"]["suite"] = "config/suites/bridge.yaml"
    params_file = tmp_path / "bridge_params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    result = parity("--params-file", str(params_file), "--tasks", "carrot_on_plate_1", "--variants",
                    "periodic_trigger", "--seeds", "0", "--set", f"policy.policy={tiny_policy}", out=tmp_path / "out")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "parity: 1/1 episodes identical" in result.stdout


# ------------------------------------------------------------------------------ wall clock, robot mode
def test_up_real_mode_acts_on_the_wall_clock_and_holds_without_a_server(tmp_path):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState
    from trajectory_msgs.msg import JointTrajectory

    from ladder_ros.bringup.client import EpisodeClient, EpisodeTimeout
    from ladder_ros.interface_conversions import document_from_msg
    from ladder_ros.messages import ActionTagDoc
    from ladder_ros.specs import topics
    from ladder_ros.runtime.endpoints import message_class, qos
    from ladder_ros.instruments.openpi_fake_server import FakePolicyServer
    from ladder_ros.ros_conversions import image_to_msg, joint_state_to_msg, pose_to_msg

    def chunk(observation):
        actions = np.zeros((5, 7), dtype=np.float32)
        actions[:, 0] = 0.001 * np.arange(5)
        actions[:, 6] = 1.0
        return {"actions": actions}

    server = FakePolicyServer(chunk, latency_s=0.05).start()
    policy = write_config(tmp_path / "bridge.yaml", config_data(
        server={"host": "127.0.0.1", "port": server.port, "request_timeout_s": 2.0, "backoff_initial_s": 0.2,
                "backoff_max_s": 0.4},
        # the synchronous rule, so each chunk's first k actions run whole (the real-time executor's splices are
        # tested in tests/test_policy_realtime.py and by the rehearsal)
        execution={"mode": "synchronous"}))
    # The stand-in below is the robot's driver and camera: the graph's own are not started (--skip).
    process = subprocess.Popen([sys.executable, "-m", "ladder_ros.cli", "up", "widowx", "--mode", "real",
                                "--skip", "widowx_driver", "--skip", "camera", "--set",
                                f"policy.policy={policy}", "--set", f"episode_recorder.output_dir={tmp_path / 'rec'}",
                                "--log-dir", str(tmp_path / "logs")], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    rclpy.init()
    actions, tags, diagnostics = [], [], []

    class StandInDriver(Node):
        """The robot's driver and camera: images, joint states and poses at 10 Hz; counts what it is sent."""

        def __init__(self):
            super().__init__("stand_in_driver", namespace="widowx")
            self.image = self.create_publisher(Image, topics.IMAGE.name, qos(topics.SENSOR))
            self.joints = self.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM))
            self.pose = self.create_publisher(PoseStamped, topics.EE_POSE.name, qos(topics.STREAM))
            self.create_subscription(JointTrajectory, topics.ACTION.name, actions.append, qos(topics.STREAM))
            self.create_subscription(message_class(topics.ACTION_TAG), topics.ACTION_TAG.name,
                                     lambda m: tags.append(document_from_msg(m, ActionTagDoc)), qos(topics.STREAM))
            self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS.name, diagnostics.append, qos(topics.STREAM))
            self.frame = np.full((48, 64, 3), 90, dtype=np.uint8)
            self.create_timer(0.1, self.publish)

        def publish(self):
            stamp = self.get_clock().now().nanoseconds
            self.image.publish(image_to_msg(self.frame, stamp, "camera"))
            self.joints.publish(joint_state_to_msg(("waist",), np.zeros(1), 1.0, stamp, "gripper_aperture"))
            self.pose.publish(pose_to_msg(np.array([0.3, 0.0, 0.1]), IDENTITY, stamp, "base_link"))

    try:
        driver, client = StandInDriver(), EpisodeClient(namespace="widowx")
        executor = SingleThreadedExecutor()
        executor.add_node(driver)
        executor.add_node(client)

        def alive():
            if process.poll() is not None:
                raise AssertionError(f"ladder-ros up exited: {process.stderr.read()}")

        client.spin_until(executor, lambda: client.status is not None, 120, "the orchestrator", check=alive)
        # every node `up` started: a policy node still starting when the episode began would end it
        started = ("policy", "gripper_trigger", "vlm_verifier", "episode_recorder")
        client.wait_for_graph(executor, timeout_s=120, nodes=started)
        client.start_episode("kitchen_single_2", variant="low_level_policy")
        try:
            client.spin_until(executor, lambda: len(tags) >= 10, 120, "ten tagged actions", check=alive)
        except EpisodeTimeout as exc:
            logs = {p.name: p.read_text()[-2000:] for p in sorted((tmp_path / "logs").glob("*.log"))}
            raise AssertionError(f"{exc}; {len(tags)} tags; status {client.status}; node logs: {logs}") from None
        assert len(actions) >= len(tags) - 1
        instruction = tags[0].subgoal
        assert instruction and all(t.subgoal == instruction and t.policy == "test_bridge" for t in tags)
        by_chunk: dict[int, list[int]] = {}
        for tag in tags:
            by_chunk.setdefault(tag.chunk_id, []).append(tag.index)
        middle = sorted(by_chunk)[1:-1]
        assert middle and all(by_chunk[c] == [0, 1, 2, 3] for c in middle), by_chunk  # the first k = 4 of 5
        assert all(t.stamp_ns > t.observation_stamp_ns > 0 for t in tags)
        np.testing.assert_allclose(actions[-1].points[0].positions[6], 1.0)  # open fraction 1.0 -> +1 (open)
        client.spin_until(executor, lambda: any(_value(d, "inference_ms_p50") for d in diagnostics), 30,
                          "diagnostics with inference latency")
        server.stop()  # the policy server goes away: the robot must hold still once its queue is spent
        client.spin_until(executor, lambda: any("no policy server" in d.status[0].message for d in diagnostics),
                          60, "diagnostics saying the server is gone")
        count = len(actions)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        assert len(actions) == count  # nothing published while holding
        driver.destroy_node()
        client.destroy_node()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # `up` stops every node it started
        try:
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            rclpy.shutdown()
            server.stop()
    assert process.returncode == 0, out + err
    log = (tmp_path / "logs" / "policy.log").read_text()
    assert "holding still: no policy server" in log


def _value(diagnostic, key: str) -> str:
    return next((kv.value for kv in diagnostic.status[0].values if kv.key == key), "")
