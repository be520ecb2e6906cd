"""Faults with the nodes as processes: a verifier, policy or recorder process dies mid-episode.

(Every node in turn, with measured times: tests/test_fault_matrix.py.)

Bounded: every wait has a timeout, and the graph is stopped at the end whatever happens. Loopback
only (tests/conftest.py). The behaviour tested here is documented in docs/graph_faults.md.
"""

import os
import shutil
import signal
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")

from sensor_msgs.msg import JointState  # noqa: E402

from ladder_ros.interface_conversions import document_from_msg, recorded_document  # noqa: E402

from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.recording.bag import read_bag, recover_bag  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.core.errors import ConfigError  # noqa: E402
from ladder_ros.evaluation.parity import ParityEpisode, ReferenceRunner, compare_records  # noqa: E402
from ladder_ros.messages import DecisionDoc, VerificationRequestDoc  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, qos  # noqa: E402
from ladder_ros.ros_conversions import stamp_to_ns  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

OVERRIDES = {
    "sim_bridge": {"render": True, "image_size": 64, "resend_after_s": 0.5},
    "orchestrator": {"verifier_retry_s": 0.5, "verifier_abort_after_s": 12.0, "decision_resend_s": 0.5},
}
TASK = "kitchen_single_2"


class StepProbe:
    """What the graph does while it waits: decisions, observations and verification requests as they arrive.

    A fault test that asserts "nothing steps" first waits until the graph has shown, by resending,
    that it was running and waiting all along (the sim bridge republishes the held step's observation
    every resend_after_s, the orchestrator its decision every decision_resend_s or its unanswered
    query every verifier_retry_s); a slow machine cannot then pass the check by being slow.
    """

    def __init__(self, client):
        self.decisions: list[DecisionDoc] = []
        self.observation_stamps: list[int] = []
        self.requests: list[tuple[str, int]] = []
        self.first_query_step: dict[str, int] = {}  # episode id -> the step its first verification query is about
        client.create_subscription(message_class(topics.DECISION), topics.DECISION.name, self._on_decision,
                                   qos(topics.STREAM))
        client.create_subscription(JointState, topics.JOINT_STATES.name,
                                   lambda m: self.observation_stamps.append(stamp_to_ns(m.header.stamp)),
                                   qos(topics.STREAM))
        client.create_subscription(message_class(topics.VERIFY_REQUEST), topics.VERIFY_REQUEST.name,
                                   lambda m: self._on_request(document_from_msg(m, VerificationRequestDoc)),
                                   qos(topics.EVENTS))

    def _on_decision(self, msg):
        self.decisions.append(document_from_msg(msg, DecisionDoc))

    def _on_request(self, doc):
        self.requests.append((doc.episode_id, doc.request["request_id"]))
        self.first_query_step.setdefault(doc.episode_id, doc.step)

    def steps(self, episode_id):
        return [d.step for d in self.decisions if d.episode_id == episode_id]

    @property
    def last(self):
        return self.decisions[-1].step if self.decisions else -1

    def resent(self, values, times):
        """True when the newest value of ``values`` came at least ``times`` more times after its first copy."""
        return bool(values) and values.count(values[-1]) > times and values[-1] == max(values)

    def mark(self):
        """Where the lists stand now: :meth:`resent_since` counts only what arrives after this."""
        return len(self.observation_stamps), len(self.decisions)

    def resent_since(self, mark, episode_id, times):
        """The held step's observation and decision each came ``times`` more times after their first copy,
        counting only copies that arrived after ``mark``: copies of a slow step from before a kill say nothing
        of what the graph does after it (an action sent just before the kill still steps the simulator)."""
        stamps = self.observation_stamps[mark[0]:]
        steps = [d.step for d in self.decisions[mark[1]:] if d.episode_id == episode_id]
        return self.resent(stamps, times) and self.resent(steps, times)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults")
    description = load_graph("widowx")
    overrides = {**OVERRIDES, "episode_recorder": {"output_dir": str(out / "recordings")}}
    launches = description.launches("sim", overrides=overrides, work_dir=out)
    params = description.node_parameters("sim", overrides=overrides)
    with GraphSession(description, launches, out / "logs", startup_timeout_s=180.0) as session:
        session.probe = StepProbe(session.client)
        session.params = params
        yield session


@pytest.fixture(autouse=True)
def idle_graph(graph):
    """Each test leaves the graph between episodes, so that the next one (or its rerun) starts on an idle
    orchestrator even when this one failed midway (a restarted node ends the episode it was in)."""
    yield
    client = graph.client
    spin(graph, lambda: client.status is None or client.status.state != "running", 120,
         "the orchestrator to end the test's episode")


def spin(session, condition, timeout_s, what):
    session.client.spin_until(session.executor, condition, timeout_s, what)


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
    # lockstep: the simulator waits for the answer. Wait until the bridge has resent the held step's
    # observation twice and the orchestrator its query twice: the graph ran on, and nothing stepped.
    held_at = graph.probe.last
    spin(graph, lambda: graph.probe.resent(graph.probe.observation_stamps, 2) and graph.probe.resent(
        [r for e, r in graph.probe.requests if e == episode], 2), 60, "the held step's observation and query resent")
    assert graph.probe.last == held_at
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
    probe = graph.probe
    killed = probe.mark()
    try:
        # Actions already on their way may still step the simulator; then it waits for the action.
        # Once the bridge has resent the held step's observation twice and the orchestrator its
        # decision twice after the kill, the graph is known to be waiting; after two more resends of
        # each, nothing may have stepped. (Resends from before the kill do not count: a step the
        # policy was slow to answer is resent too, and its action may arrive after the kill.)
        def resent(times):
            return probe.resent_since(killed, episode, times)
        spin(graph, lambda: resent(2), 60, "the held step's observation and decision resent twice after the kill")
        held_at = probe.last
        spin(graph, lambda: resent(4) or probe.last != held_at, 60, "two more resends of each")
        assert probe.last == held_at  # the simulator waits for the action: nothing steps
        assert client.status.state == "running"
    finally:
        graph.processes.start_node("policy")
    # The new process cannot rebuild the policy's state of this episode: it does not continue a
    # different episode under the same id, it has the orchestrator end it, with the reason.
    outcome = client.wait_until_over(graph.executor, episode, 120)
    assert outcome.state == "aborted"
    assert outcome.result["finish_reason"].startswith("aborted: policy restarted mid-episode")
    assert outcome.result["scored"] is True and outcome.result["steps_used"] == held_at
    last = outcome.result["steps_used"]  # the last decision may still be on its way to the probe
    spin(graph, lambda: last in graph.probe.steps(episode), 60, "the last step's decision")
    steps = graph.probe.steps(episode)
    assert sorted(set(steps)) == list(range(held_at + 1))  # no step skipped, none after the kill
    assert len(steps) > len(set(steps))  # the held step's decision was republished while waiting


def wait_for_recorder(graph):
    """Until a (re)started recorder hears the whole graph: its subscriptions to every recorded topic are in the
    graph, and its own diagnostics say it matched every publisher this client sees (an episode started before
    that could lose its first messages to discovery)."""
    client = graph.client
    names = [client.resolve_topic_name(spec.name) for spec in topics.TOPICS]

    def listening() -> bool:
        return all(any(info.node_name == "episode_recorder"
                       for info in client.get_subscriptions_info_by_topic(name)) for name in names)
    spin(graph, listening, 60, "the recorder's subscriptions to every recorded topic")
    client.wait_for_recorder(graph.executor, 60)


def _episode_bag(graph, episode):
    return graph.params["episode_recorder"]["output_dir"] + "/" + episode


class FlushedBag:
    """What a recovery of a bag's file as it lies on disk right now holds (the recorder flushes every second)."""

    def __init__(self, bag_dir, scratch):
        self.bag_dir, self.scratch, self.tries = Path(bag_dir), Path(scratch), 0
        self.summary = None

    def holds(self, wanted):
        """True once the flushed part holds at least ``wanted[topic]`` messages of each topic."""
        files = sorted(self.bag_dir.glob("*.mcap"))
        if not files:
            return False
        self.tries += 1
        copy = self.scratch / f"copy{self.tries}.mcap"
        shutil.copyfile(files[0], copy)
        try:
            self.summary = recover_bag(copy, self.scratch / f"recovered{self.tries}")
        except ConfigError:
            return False  # not even the file header is on disk yet
        return all(self.summary.topics.get(topic, 0) >= n for topic, n in wanted.items())


def test_recorder_interrupted_leaves_a_complete_readable_bag(graph, tmp_path):
    client = graph.client
    wait_for_recorder(graph)
    episode = client.start_episode(TASK, variant="proprio_verifier", layout=3, seed=3)
    # interrupt it once it has demonstrably received 5 steps (they are in its flushed chunks)
    wanted = {"/widowx/camera/image_raw": 5, "/widowx/joint_states": 5}
    flushed = FlushedBag(_episode_bag(graph, episode), tmp_path)
    spin(graph, lambda: flushed.holds(wanted), 120, "five steps in the recorder's flushed chunks")
    kill_and_wait(graph, "episode_recorder", signal.SIGINT)
    code = graph.processes.processes["episode_recorder"].returncode
    graph.processes.start_node("episode_recorder")
    assert code == 0  # a clean shutdown
    summary, _ = read_bag(_episode_bag(graph, episode))  # complete: metadata and MCAP summary
    assert summary.custom_data["episode_id"] == episode
    assert all(summary.topics[topic] >= flushed.summary.topics[topic] for topic in flushed.summary.topics)
    client.wait_until_over(graph.executor, episode, 120)


def test_recorder_killed_its_chunks_are_recovered(graph, tmp_path):
    client = graph.client
    wait_for_recorder(graph)
    # The verifier is stopped (SIGSTOP, its process and subscriptions stay): the episode runs until its first
    # verification query and waits there for the answer (lockstep), so it is still running when the recorder
    # is killed, however fast the machine. The steps before the query are the same on every machine.
    verifier = graph.processes.processes["vlm_verifier"].pid
    decisions = "/widowx/orchestrator/decision"
    os.kill(verifier, signal.SIGSTOP)
    try:
        episode = client.start_episode(TASK, variant="proprio_verifier", layout=4, seed=4)
        spin(graph, lambda: any(e == episode for e, _ in graph.probe.requests), 120,
             "the episode's first verification query")
        # The query says which step it is about; that step's decision waits for the answer (lockstep), every
        # earlier one is out. The last of those may still be on its way to the probe (another topic: no order
        # between them), so the probe's newest decision would not say where the query stands.
        asked_at = graph.probe.first_query_step[episode] - 1  # the last step decided before the query
        spin(graph, lambda: sorted(set(graph.probe.steps(episode))) == list(range(asked_at + 1)), 60,
             f"every decision before the query about step {asked_at + 1}")
        before_query = len(graph.probe.steps(episode))
        # kill it once those decisions are in its flushed chunks (the recorder can lag behind the graph)
        flushed = FlushedBag(_episode_bag(graph, episode), tmp_path)
        spin(graph, lambda: flushed.holds({decisions: before_query}), 120,
             f"{before_query} decisions in the recorder's flushed chunks")
        assert client.status.episode_id == episode and client.status.state == "running"
        kill_and_wait(graph, "episode_recorder", signal.SIGKILL)
    finally:
        os.kill(verifier, signal.SIGCONT)
    graph.processes.start_node("episode_recorder")
    broken = _episode_bag(graph, episode)
    with pytest.raises(Exception):
        read_bag(broken)  # no metadata.yaml, no MCAP summary
    recovered = recover_bag(broken, tmp_path / "recovered")
    summary, decoded = read_bag(recovered.path, [decisions])
    assert summary.messages == recovered.messages >= flushed.summary.messages  # what was on disk survives
    steps = [recorded_document(m, DecisionDoc).step for m in decoded[decisions]]  # a held step's decision may repeat
    assert len(steps) >= before_query and steps == sorted(steps)
    assert sorted(set(steps)) == list(range(asked_at + 1))
    assert summary.custom_data["recovered_from"] == broken
    client.wait_until_over(graph.executor, episode, 120)
