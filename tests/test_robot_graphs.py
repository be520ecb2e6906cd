"""Whole robot graphs on the wall clock: each driver against its test target, a tiny random policy, a full episode.

The graph is the shipped description's real mode (``config/graphs/<robot>.yaml``, its params
file), nodes as processes, with one change: the policy node is ``tests/random_policy.py``, a
stand-in publishing random actions in the robot's layout (the learned policy needs weights). The
WidowX driver drives the WidowX twin (``interbotix_api: twin``: the vendor API's surface over simulated motors),
the Franka driver franky-sim on a loopback address; the camera node runs its fake
backend. The test arms the robot, runs one episode with
the proprioceptive trigger (no verifier calls), checks it ended by the paper's trigger rule, and
reads the episode's recording for the driver topics. The Franka test then kills the policy
process and checks that the arm holds.
"""

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from ladder_ros.bringup.graph import NodeLaunch  # noqa: E402
from ladder_ros.recording.bag import read_bag  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.bringup.up import prepare  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
TASK = "kitchen_single_1"
DRIVER_TOPICS = ("joint_states", "ee_pose", "policy/action", "robot/safety_state", "robot/joint_command",
                 "gripper/events")


@dataclass(frozen=True)
class StandInPolicy(NodeLaunch):
    """The graph's policy node, replaced by the random stand-in (same name, namespace and parameters)."""

    def command(self, python: str = sys.executable) -> list[str]:
        return [python, "-m", "tests.random_policy", "--ros-args", *self.ros_args]


def bring_up(robot: str, tmp_path: Path, overrides: list[str]) -> tuple:
    # No camera here: the graph's camera node runs its fake backend (the real ones are tested on recordings), at
    # 160x120: the recorder keeps every frame, and a minute of 640x480 colour and two float depth images at 30 Hz
    # is 6 GB of disk.
    graph, launches = prepare(robot, "real", None, [f"episode_recorder.output_dir={tmp_path / 'rec'}",
                                                    "camera.backend=fake", "camera.width=160", "camera.height=120",
                                                    *overrides],
                              None, work_dir=tmp_path / "work")
    launches = [StandInPolicy(**vars(launch)) if launch.name == "policy" else launch for launch in launches]
    return graph, GraphSession(graph, launches, tmp_path / "logs", startup_timeout_s=180.0)


class Operator:
    """The operator's side: the driver's services and its streams, on the episode client's node."""

    def __init__(self, session):
        from sensor_msgs.msg import JointState
        from std_srvs.srv import SetBool, Trigger

        from ladder_ros.specs import topics
        from ladder_ros.runtime.endpoints import qos
        from ladder_ros.ros_conversions import joint_state_from_msg

        self.session, self.client = session, session.client
        self.arm_client = self.client.create_client(SetBool, topics.ARM_SERVICE)
        self.home_client = self.client.create_client(Trigger, topics.HOME_SERVICE)
        self.joints: list[tuple[float, np.ndarray]] = []
        self.client.create_subscription(
            JointState, topics.JOINT_STATES.name,
            lambda m: self.joints.append((time.monotonic(), joint_state_from_msg(m, "gripper_aperture")[1])),
            qos(topics.STREAM))
        self.request_types = (SetBool.Request, Trigger.Request)

    def spin_until(self, condition, timeout_s, what):
        self.client.spin_until(self.session.executor, condition, timeout_s, what)

    def call(self, client, request):
        self.spin_until(client.service_is_ready, 60, f"service {client.srv_name}")
        future = client.call_async(request)
        self.spin_until(future.done, 30, f"a reply from {client.srv_name}")
        return future.result()

    def arm_and_home(self, home_joints, tolerance):
        deadline = time.monotonic() + 60
        while True:  # the driver refuses to arm until it has checked the arm (the WidowX's motion profile)
            reply = self.call(self.arm_client, self.request_types[0](data=True))
            if reply.success or "checking" not in reply.message or time.monotonic() > deadline:
                break
            wake = time.monotonic() + 0.2
            self.spin_until(lambda: time.monotonic() > wake, 5, "a moment before asking again")
        assert reply.success, reply.message
        reply = self.call(self.home_client, self.request_types[1]())
        assert reply.success, reply.message
        self.spin_until(lambda: self.joints and np.allclose(self.joints[-1][1], home_joints, atol=tolerance), 120,
                        "the arm home")


def still_for(joints: list[tuple[float, np.ndarray]], seconds: float, tolerance: float) -> bool:
    """Whether the readings of the last ``seconds`` (at least three, the first of them ``seconds`` old) all lie
    within ``tolerance`` of the newest."""
    if not joints or joints[-1][0] - joints[0][0] < seconds:
        return False
    newest_t, newest = joints[-1]
    recent = [q for t, q in joints if t >= newest_t - seconds]
    return len(recent) >= 3 and all(np.allclose(q, newest, atol=tolerance) for q in recent)


def check_episode_and_recording(graph, outcome, tmp_path, finish_reason):
    result = outcome.result
    kinds = [(e["kind"], e.get("reason")) for e in result["events"]]
    assert outcome.state == "finished" and result["finish_reason"] == finish_reason, (result["finish_reason"], kinds)
    assert any(kind == "attempt_ended" for kind, _ in kinds), kinds
    bag = tmp_path / "rec" / outcome.episode_id
    deadline = time.monotonic() + 60
    while not (bag / "metadata.yaml").exists():  # the recorder closes the bag after the final status
        assert time.monotonic() < deadline, f"no closed recording at {bag}"
        time.sleep(0.2)
    summary, _ = read_bag(bag)
    ns = f"/{graph.namespace}"
    for topic in DRIVER_TOPICS:
        assert summary.topics.get(f"{ns}/{topic}", 0) > 0, (topic, summary.topics)
    assert summary.topics.get("/diagnostics", 0) > 0  # the driver's control period and jitter
    return summary


def test_widowx_graph_runs_an_episode_on_the_widowx_twin(tmp_path, monkeypatch):
    from ladder_ros.robots import wx250s

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    # The WidowX trigger stays on the last subgoal until the budget ends (Appendix B); ending the episode
    # after the last subgoal instead keeps the test short.
    graph, session = bring_up("widowx", tmp_path, ["orchestrator.variant=proprio_trigger",
                                                   "orchestrator.preset_options=[after_last_subgoal=end]",
                                                   "widowx_driver.interbotix_api=twin"])
    with session:
        operator = Operator(session)
        operator.arm_and_home(np.array(wx250s.NEUTRAL_JOINTS), 5e-3)
        outcome = session.run_episode(TASK, variant="proprio_trigger", layout=0, seed=0, timeout_s=120)
        check_episode_and_recording(graph, outcome, tmp_path, "plan_exhausted")
        release = [e for e in outcome.result["events"] if e["kind"] == "attempt_ended"]
        assert release and release[0].get("reason") == "release"  # the gripper closed and opened again


def test_franka_graph_runs_an_episode_on_franky_sim_and_holds_when_the_policy_dies(tmp_path, monkeypatch):
    pytest.importorskip("franky", reason="needs franky-control and franky-sim (requirements/robots.txt)")
    pytest.importorskip("franky_sim", reason="needs franky-control and franky-sim (requirements/robots.txt)")
    from tests.franky_sim_server import FrankySim

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    sim = FrankySim()
    try:
        graph, session = bring_up("franka", tmp_path, [
            "orchestrator.variant=proprio_trigger", "vlm_verifier.backend=oracle",  # never asked: no verifier
            f"franka_driver.host={sim.host}", "franka_driver.model=fr3",
            "franka_driver.realtime=false", "franka_driver.max_action_age_s=0.5"])
        with session:
            operator = Operator(session)
            from ladder_ros.robots.franka import READY_JOINTS
            operator.arm_and_home(np.array(READY_JOINTS), 1e-2)
            # RoboLab-Long restarts the plan after its last subgoal (Appendix B): the episode runs to its budget,
            # 900 steps (60 s at 15 Hz) for one subgoal, with the trigger's attempt ends along the way.
            outcome = session.run_episode(TASK, variant="proprio_trigger", layout=0, seed=0, timeout_s=240)
            summary = check_episode_and_recording(graph, outcome, tmp_path, "budget_exhausted")
            ends = [e for e in outcome.result["events"] if e["kind"] == "attempt_ended"]
            print("franka attempt ends:", [(e.get("reason"), e.get("step")) for e in ends])
            assert summary.topics.get(f"/{graph.namespace}/ee_pose", 0) > 0  # the height for the lift rule
            # A second episode; its policy process is killed mid-motion: the driver's watchdog holds the arm.
            episode = session.client.start_episode(TASK, variant="proprio_trigger")
            operator.spin_until(lambda: session.client.status.episode_id == episode, 30, "the second episode")
            moving = len(operator.joints)
            operator.spin_until(lambda: len(operator.joints) > moving + 10, 30, "the arm streaming")
            session.processes.signal("policy", signal.SIGKILL)
            killed_at = time.monotonic()
            # At rest: every reading of the last second within 1e-4 rad (a few equal readings in a row are also
            # what a simulator that stalls mid-brake on a busy machine gives; franky-sim's reported joint
            # velocities are not zero at rest, so they cannot say it).
            operator.spin_until(lambda: time.monotonic() - killed_at > 1.0 and still_for(operator.joints, 1.0, 1e-4),
                                120, "the arm holding still for a second")
            still = operator.joints[-1][1]
            operator.spin_until(lambda: time.monotonic() - killed_at > 3.0, 10, "three seconds")
            assert np.allclose(operator.joints[-1][1], still, atol=1e-3)
    finally:
        sim.stop()
