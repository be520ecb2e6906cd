"""Graph hardening with one graph of six processes (loopback only): freezes, unbounded actions, escapes, lost records.

Each test reproduces a hostile input or fault that used to leave the graph in a state a lab cannot
accept (a silent freeze, an out-of-range action applied, a bag written outside its folder, an
episode without a final record) and checks what happens now. Every wait is bounded by the timers
configured below. The command-line side (``ladder-ros up`` and ``run`` as processes) is in
tests/test_graph_bringup_hardening.py; every node killed in turn in tests/test_fault_matrix.py.
"""

import signal
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")

import rclpy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402


from ladder_ros.interface_conversions import document_from_msg  # noqa: E402


from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.core.safety import DUPLICATE, FOREIGN_PUBLISHER  # noqa: E402
from ladder_ros.messages import DecisionDoc, PrivilegedStateDoc, stamp_of_step  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, publisher, qos  # noqa: E402
from ladder_ros.runtime.process import spin_for  # noqa: E402
from ladder_ros.evaluation.recorded_episodes import episode_record  # noqa: E402
from ladder_ros.recording.bag import bag_custom_data, recover_bag  # noqa: E402
from ladder_ros.ros_conversions import action_to_msg, ns_to_stamp  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

STALL_WARN_S, STALL_ABORT_S, SCORE_TIMEOUT_S = 2.0, 8.0, 3
OVERRIDES = {
    "sim_bridge": {"render": False, "resend_after_s": 0.5},
    # score_timeout_s is a whole number on purpose: written for the node as 3.0, it must not kill it
    "orchestrator": {"verifier_retry_s": 0.5, "decision_resend_s": 0.5, "score_timeout_s": SCORE_TIMEOUT_S,
                     "stall_warn_s": STALL_WARN_S, "stall_abort_s": STALL_ABORT_S},
}
# Bound on a whole episode's wait: an episode ends by itself (its budget, the stall abort), so this only catches a
# graph that is broken outright, and is wide enough for a machine whose cores are busy with other work.
EPISODE_WAIT_S = 300.0
# Fast DDS notices a participant killed without goodbye when its lease runs out (20 s by default).
DDS_LEASE_S = 20.0


class Probe:
    """The decisions and the simulator's controller targets of every step, as the graph publishes them."""

    def __init__(self, client):
        self.decisions: list[DecisionDoc] = []
        self.targets: dict[tuple[str, int], np.ndarray] = {}
        client.create_subscription(message_class(topics.DECISION), topics.DECISION.name, self._on_decision,
                                   qos(topics.STREAM))
        client.create_subscription(message_class(topics.PRIVILEGED), topics.PRIVILEGED.name, self._on_privileged,
                                   qos(topics.STREAM))

    def _on_decision(self, msg):
        self.decisions.append(document_from_msg(msg, DecisionDoc))

    def _on_privileged(self, msg):
        doc = document_from_msg(msg, PrivilegedStateDoc)
        self.targets[(doc.episode_id, doc.step)] = doc.target_position_array()

    def steps(self, episode_id):
        return [d.step for d in self.decisions if d.episode_id == episode_id]

    def last(self, episode_id):
        return max(self.steps(episode_id), default=-1)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("hardening")
    description = load_graph("widowx")
    overrides = {**OVERRIDES, "orchestrator": {**OVERRIDES["orchestrator"], "state_dir": str(out / "state")},
                 "episode_recorder": {"output_dir": str(out / "recordings"),
                                      "config_files": description.config_files()}}
    launches = description.launches("sim", overrides=overrides, work_dir=out)
    with GraphSession(description, launches, out / "logs", startup_timeout_s=180.0) as session:
        session.probe = Probe(session.client)
        session.recordings = out / "recordings"
        yield session


def spin(graph, condition, timeout_s, what):
    """Until ``condition()``, failing after ``timeout_s`` naming ``what``."""
    graph.client.spin_until(graph.executor, condition, timeout_s, what)


def start(graph, task="kitchen_single_2", variant="proprio_verifier", seed=0, until_step=5):
    episode = graph.client.start_episode(task, variant=variant, layout=seed, seed=seed)
    spin(graph, lambda: graph.probe.last(episode) >= until_step, 60, f"step {until_step}")
    return episode


def hold_policy(graph, episode):
    """Freeze the policy process (it stays in the graph): the simulator waits for the held step's action."""
    graph.processes.signal("policy", signal.SIGSTOP)
    spin_for(graph.executor, 1.0)  # take in what was already on its way
    return graph.probe.last(episode)


def release_policy(graph):
    graph.processes.signal("policy", signal.SIGCONT)


def test_item1_a_joint_state_without_the_aperture_does_not_use_up_the_next_step(graph):
    client = graph.client
    episode = start(graph)
    held = hold_policy(graph, episode)
    try:
        status = client.status
        bad = JointState(name=["joint_1"], position=[0.0])  # no gripper_aperture entry
        bad.header.stamp = ns_to_stamp(stamp_of_step(status.origin_ns, status.rate_hz, held + 1))
        client.create_publisher(JointState, topics.JOINT_STATES.name, qos(topics.STREAM)).publish(bad)
        spin_for(graph.executor, 0.5)
    finally:
        release_policy(graph)
    outcome = client.wait_until_over(graph.executor, episode, EPISODE_WAIT_S)
    assert outcome.state == "finished", outcome.result["finish_reason"]  # used to freeze at step held + 1
    spin_for(graph.executor, 0.3)
    assert sorted(set(graph.probe.steps(episode))) == list(range(outcome.result["steps_used"] + 1))


def test_item1_a_stalled_episode_says_what_it_waits_for_then_ends_with_that_reason_and_its_record(graph):
    client = graph.client
    episode = start(graph, seed=1)
    held = hold_policy(graph, episode)
    try:
        spin(graph, lambda: client.status.waiting_for, STALL_WARN_S + 10, "the stall report")
        assert client.status.state == "running"
        assert client.status.waiting_for == f"policy/action of step {held} (from the policy)"
        assert client.status.message == f"stalled: waiting for {client.status.waiting_for}"
        outcome = client.wait_until_over(graph.executor, episode, EPISODE_WAIT_S)
    finally:
        release_policy(graph)
    assert outcome.state == "aborted"
    assert outcome.result["finish_reason"] == (f"aborted: stalled: no policy/action of step {held} (from the policy) "
                                               f"within {STALL_ABORT_S:g} s")
    assert outcome.result["scored"] and outcome.result["events"]  # the record is kept


def test_item1_and_item7_bad_starts_are_refused_with_a_reply_and_leave_the_status_alone(graph):
    client = graph.client
    done = client.run_episode(graph.executor, "kitchen_single_1", variant="periodic_trigger", seed=2,
                              timeout_s=EPISODE_WAIT_S)
    before = client.status
    refused = {
        "reused": dict(episode_id=done.episode_id, task_id="kitchen_single_1"),  # used to freeze
        "seed-1": dict(episode_id="seed-1", task_id="kitchen_single_1", seed=-1),  # used to freeze
        "layout": dict(episode_id="layout", task_id="kitchen_single_1", layout=99),
        "task": dict(episode_id="task", task_id="no_such_task"),
    }
    for key, command in refused.items():
        client.send_start(command.pop("episode_id"), command.pop("task_id"), **command)
    ids = [done.episode_id, "seed-1", "layout", "task"]
    spin(graph, lambda: all(i in client.replies for i in ids), 20, "the replies")
    reasons = {i: client.replies[i].reason for i in ids}
    assert not any(client.replies[i].accepted for i in ids)
    assert "was used before" in reasons[done.episode_id] and "seed must be >= 0, got -1" in reasons["seed-1"]
    assert "layout 99 is out of range" in reasons["layout"] and "unknown task 'no_such_task'" in reasons["task"]
    # A start refused while another episode runs leaves no trace in that episode's status.
    running = client.start_episode("kitchen_single_2", variant="periodic_trigger", seed=3)
    spin(graph, lambda: client.status.episode_id == running, 20, "the second episode")
    client.send_start("intruder", "kitchen_single_1")
    spin(graph, lambda: "intruder" in client.replies, 20, "the reply")
    assert client.replies["intruder"].reason == f"start refused: episode {running} is running"
    outcome = client.wait_until_over(graph.executor, running, EPISODE_WAIT_S)
    assert client.status.seq > before.seq and "refused" not in client.status.message
    assert outcome.state == "finished"


def test_item2_a_foreign_publisher_and_a_second_action_are_never_applied_and_are_counted(graph):
    client = graph.client
    episode = start(graph, variant="periodic_trigger", seed=4)
    held = hold_policy(graph, episode)
    rogue = rclpy.create_node("rogue", namespace=graph.client.get_namespace())
    graph.executor.add_node(rogue)
    try:
        pub = publisher(rogue, JointTrajectory, topics.ACTION)
        spin(graph, lambda: pub.get_subscription_count() >= 3, 20, "the bridge hearing the rogue")
        huge = np.array([1e6, 1e6, 1e6, 0.0, 0.0, 0.0, 1.0])  # finite, stamped for the held step
        pub.publish(action_to_msg(huge, client.status.step_stamp_ns(held)))
        spin(graph, lambda: graph.probe.last(episode) > held, 20, "the held step to be executed")
        release_policy(graph)  # its own action of the held step comes late now: a second action
        spin(graph, lambda: graph.probe.last(episode) > held + 3, 20, "three more steps")
    finally:
        release_policy(graph)
        graph.executor.remove_node(rogue)
        rogue.destroy_node()
    outcome = client.wait_until_over(graph.executor, episode, EPISODE_WAIT_S)
    steps = [s for s in range(outcome.result["steps_used"] + 1) if (episode, s) in graph.probe.targets]
    assert np.array_equal(graph.probe.targets[(episode, held + 1)], graph.probe.targets[(episode, held)])
    for a, b in zip(steps, steps[1:]):  # no step moved beyond the bound (a step the probe missed counts twice)
        move = np.abs(graph.probe.targets[(episode, b)] - graph.probe.targets[(episode, a)]).max()
        assert move <= 0.05 * (b - a) + 1e-12, (a, b, move)
    counts = outcome.result["safety"]["counts"]
    assert counts[FOREIGN_PUBLISHER] >= 1 and counts[DUPLICATE] >= 1
    assert outcome.result["safety"]["applied"] > 0  # the policy's own actions applied again once the rogue left


def test_item3_an_episode_id_cannot_name_a_folder_outside_the_recordings(graph):
    client = graph.client
    for bad in ("../../escape", "..", "a/b", ".hidden", ""):
        if bad:
            client.send_start(bad, "kitchen_single_1")
    spin(graph, lambda: all(b in client.replies for b in ("../../escape", "..", "a/b", ".hidden")), 20, "replies")
    for bad in ("../../escape", "..", "a/b", ".hidden"):
        assert not client.replies[bad].accepted and "must be 1-128 characters of [A-Za-z0-9_.-]" in \
            client.replies[bad].reason
    assert not (graph.recordings / ".." / ".." / "escape").exists()
    assert not (graph.recordings.parent / "escape").exists()


def test_item5_a_killed_orchestrator_still_ends_with_a_record_on_disk_and_a_final_status(graph):
    client = graph.client
    episode = start(graph, variant="periodic_trigger", seed=5)
    graph.processes.signal("orchestrator", signal.SIGKILL)
    graph.processes.processes["orchestrator"].wait(timeout=20)
    bag = graph.recordings / episode
    try:
        # The recorder notices the orchestrator is gone (once DDS does) and closes the bag with a record.
        # A SIGKILLed participant leaves the graph when its DDS lease runs out; a loaded machine may
        # check the lease a period late, so the bound is twice the lease plus the recorder's own margin.
        spin(graph, lambda: (bag / "metadata.yaml").is_file(), 2 * DDS_LEASE_S + 15, "the recorder closing the bag")
    finally:
        graph.processes.start_node("orchestrator")
    assert bag_custom_data(bag)["interrupted"] == "the orchestrator left the graph without ending the episode"
    record = episode_record(bag)
    assert record["interrupted"] is True and record["episode_id"] == episode and record["events"]
    assert record["finish_reason"] == "aborted: interrupted: the orchestrator left the graph without ending the episode"
    # The restarted orchestrator finds the episode in its journal and publishes its final status.
    outcome = client.wait_until_over(graph.executor, episode, EPISODE_WAIT_S)
    assert outcome.state == "aborted" and outcome.result["interrupted"] is True
    assert outcome.result["finish_reason"] == "aborted: interrupted: the orchestrator was killed mid-episode and " \
                                              "restarted"
    # The next episode's steps are stamped past every step of the interrupted one, which the sim
    # bridge republished while the orchestrator was gone: none of those is taken for a new step.
    after = client.run_episode(graph.executor, "kitchen_single_1", variant="periodic_trigger", seed=7,
                               timeout_s=EPISODE_WAIT_S)
    assert after.state == "finished", after.result["finish_reason"]


def test_item5_recover_restores_a_killed_recorders_custom_data(graph, tmp_path):
    client = graph.client
    episode = start(graph, task="kitchen_single_4", variant="periodic_trigger", seed=6, until_step=30)
    bag = graph.recordings / episode
    spin(graph, lambda: any(f.stat().st_size > 50_000 for f in bag.glob("*.mcap")), 60, "flushed chunks")
    graph.processes.signal("episode_recorder", signal.SIGKILL)
    graph.processes.processes["episode_recorder"].wait(timeout=20)
    graph.processes.start_node("episode_recorder")
    recovered = recover_bag(bag, tmp_path / "recovered")
    custom = recovered.custom_data
    assert custom["episode_id"] == episode and custom["recovered_from"] == str(bag)
    assert {"widowx.yaml", "widowx_params.yaml"} <= set(__import__("json").loads(custom["config_files"]))
    assert "rclpy" in custom["versions"] and custom["task_id"] == "kitchen_single_4"
    assert bag_custom_data(Path(recovered.path)) == custom  # written into the recovered bag's metadata
    client.wait_until_over(graph.executor, episode, EPISODE_WAIT_S)
