"""Faults with the nodes as processes: a verifier, policy or recorder process dies mid-episode.

(Every node in turn, with measured times: tests/test_fault_matrix.py.)

Bounded: every wait has a timeout, and the graph is stopped at the end whatever happens. Loopback
only (tests/conftest.py). The behaviour tested here is documented in docs/graph.md ("Faults").
"""

import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")

from std_msgs.msg import String  # noqa: E402

from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.bringup.recording import read_bag, recover_bag  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.evaluation.parity import ParityEpisode, ReferenceRunner, compare_records  # noqa: E402
from ladder_ros.messages import DecisionDoc, decode  # noqa: E402
from ladder_ros.nodes import topics  # noqa: E402
from ladder_ros.nodes.runtime import qos  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

OVERRIDES = {
    "sim_bridge": {"render": True, "image_size": 64, "resend_after_s": 0.5},
    "orchestrator": {"verifier_retry_s": 0.5, "verifier_abort_after_s": 12.0, "decision_resend_s": 0.5},
}
TASK = "kitchen_single_2"


class StepProbe:
    """The newest step the orchestrator decided (decisions arrive once per step)."""

    def __init__(self, client):
        self.decisions: list[DecisionDoc] = []
        client.create_subscription(String, topics.DECISION.name, self._on_decision, qos(topics.STREAM))

    def _on_decision(self, msg):
        self.decisions.append(decode(msg.data, DecisionDoc))

    def steps(self, episode_id):
        return [d.step for d in self.decisions if d.episode_id == episode_id]

    @property
    def last(self):
        return self.decisions[-1].step if self.decisions else -1


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults")
    description = load_graph("widowx")
    overrides = {**OVERRIDES, "episode_recorder": {"output_dir": str(out / "recordings")}}
    launches = description.launches("sim", overrides=overrides, work_dir=out)
    params = description.node_parameters("sim", overrides=overrides)
    with GraphSession(description, launches, out / "logs") as session:
        session.probe = StepProbe(session.client)
        session.params = params
        yield session


def spin(session, condition, timeout_s, what):
    session.client.spin_until(session.executor, condition, timeout_s, what)


def spin_for(session, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        session.executor.spin_once(timeout_sec=0.05)


def kill_and_wait(session, name, sig):
    session.processes.signal(name, sig)
    session.processes.processes[name].wait(timeout=20)


def test_verifier_killed_mid_episode_reports_unavailable_keeps_the_queue_and_resumes(graph):
    client, processes = graph.client, graph.processes
    kill_and_wait(graph, "vlm_verifier", signal.SIGKILL)
    episode = client.start_episode(TASK, variant="proprio_verifier", layout=0, seed=0)
    spin(graph, lambda: client.status.episode_id == episode and not client.status.verifier_available, 120,
         "the verifier reported unavailable")
    assert client.status.state == "running" and client.status.pending_request is not None
    assert client.status.message == "verifier unavailable"
    held_at = graph.probe.last
    spin_for(graph, 1.0)
    assert graph.probe.last == held_at  # lockstep: the simulator waits for the answer
    processes.start_node("vlm_verifier")
    outcome = client.wait_until_over(graph.executor, episode, 120)
    assert outcome.state == "finished" and outcome.result["finish_reason"] == "plan_complete"
    # The oracle is stateless and the query was answered about the same step: the episode is the
    # very episode the reference loop runs.
    reference = ReferenceRunner(graph.params, load_suite_of(graph))
    try:
        expected = reference.run(ParityEpisode(TASK, "proprio_verifier", 0, 0))
    finally:
        reference.close()
    assert compare_records(expected, outcome.result) is None


def load_suite_of(session):
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import resolve_share_file

    return load_suite(resolve_share_file(session.params["orchestrator"]["suite"]))


def test_verifier_gone_for_good_aborts_the_episode_with_that_reason(graph):
    client = graph.client
    kill_and_wait(graph, "vlm_verifier", signal.SIGKILL)
    try:
        outcome = client.run_episode(graph.executor, TASK, variant="proprio_verifier", layout=1, seed=1,
                                     timeout_s=90)
    finally:
        graph.processes.start_node("vlm_verifier")
    assert outcome.state == "aborted"
    assert outcome.result["finish_reason"] == "aborted: verifier unavailable"
    assert outcome.result["orchestration"]["pending"]  # the queue is kept in the record
    assert outcome.result["scored"] is True  # the sim bridge still scored what was done


def test_policy_killed_nothing_steps_and_a_restart_ends_the_episode_with_its_record(graph):
    client = graph.client
    episode = client.start_episode(TASK, variant="periodic_trigger", layout=2, seed=2)
    spin(graph, lambda: max(graph.probe.steps(episode), default=-1) >= 10, 120, "ten steps")
    kill_and_wait(graph, "policy", signal.SIGKILL)
    try:
        spin_for(graph, 1.0)  # take in what was already on its way
        held_at = graph.probe.last
        spin_for(graph, 2.0)
        assert graph.probe.last == held_at  # the simulator waits for the action: nothing steps
        assert client.status.state == "running"
    finally:
        graph.processes.start_node("policy")
    # The new process cannot rebuild the policy's state of this episode: it does not continue a
    # different episode under the same id, it has the orchestrator end it, with the reason.
    outcome = client.wait_until_over(graph.executor, episode, 120)
    assert outcome.state == "aborted"
    assert outcome.result["finish_reason"].startswith("aborted: policy restarted mid-episode")
    assert outcome.result["scored"] is True and outcome.result["steps_used"] == held_at
    spin_for(graph, 0.5)  # the last decision may still be on its way to the probe
    steps = graph.probe.steps(episode)
    assert sorted(set(steps)) == list(range(held_at + 1))  # no step skipped, none after the kill
    assert len(steps) > len(set(steps))  # the held step's decision was republished while waiting


def wait_for_recorder(graph):
    """Until a (re)started recorder listens to the episode status (its last subscription) and to commands."""
    status = graph.client.resolve_topic_name(topics.EPISODE_STATUS.name)
    command = graph.client.resolve_topic_name(topics.EPISODE_COMMAND.name)
    spin(graph, lambda: graph.client.count_subscribers(status) >= 5 and graph.client.count_subscribers(command) >= 2,
         60, "the recorder")
    spin_for(graph, 2.0)  # the publishers' side of discovery may lag behind what the client sees


def _episode_bag(graph, episode):
    return graph.params["episode_recorder"]["output_dir"] + "/" + episode


def test_recorder_interrupted_leaves_a_complete_readable_bag(graph):
    client = graph.client
    wait_for_recorder(graph)
    episode = client.start_episode(TASK, variant="proprio_verifier", layout=3, seed=3)
    spin(graph, lambda: max(graph.probe.steps(episode), default=-1) >= 10, 120, "ten steps")
    kill_and_wait(graph, "episode_recorder", signal.SIGINT)
    code = graph.processes.processes["episode_recorder"].returncode
    graph.processes.start_node("episode_recorder")
    assert code == 0  # a clean shutdown
    summary, _ = read_bag(_episode_bag(graph, episode))
    assert summary.custom_data["episode_id"] == episode
    assert summary.topics["/widowx/camera/image_raw"] >= 5 and summary.topics["/widowx/joint_states"] >= 5
    client.wait_until_over(graph.executor, episode, 120)


def test_recorder_killed_its_chunks_are_recovered(graph, tmp_path):
    client = graph.client
    wait_for_recorder(graph)
    episode = client.start_episode(TASK, variant="periodic_trigger", layout=4, seed=4)
    spin(graph, lambda: max(graph.probe.steps(episode), default=-1) >= 150, 90, "150 steps")
    # on a loaded machine the recorder can lag behind the graph: kill it only once its file has chunks on disk
    bag_dir = Path(_episode_bag(graph, episode))
    spin(graph, lambda: any(f.stat().st_size > 100_000 for f in bag_dir.glob("*.mcap")), 120,
         "the recorder's first flushed chunks")
    kill_and_wait(graph, "episode_recorder", signal.SIGKILL)
    graph.processes.start_node("episode_recorder")
    broken = _episode_bag(graph, episode)
    with pytest.raises(Exception):
        read_bag(broken)  # no metadata.yaml, no MCAP summary
    recovered = recover_bag(broken, tmp_path / "recovered")
    summary, decoded = read_bag(recovered.path, ["/widowx/orchestrator/decision"])
    assert summary.messages == recovered.messages > 300
    steps = [decode(m.data, DecisionDoc).step for m in decoded["/widowx/orchestrator/decision"]]
    assert steps[:20] == list(range(20))
    assert summary.custom_data["recovered_from"] == broken
    client.wait_until_over(graph.executor, episode, 120)
