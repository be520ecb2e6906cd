"""The graph in one process (all nodes in one executor) against the in-process reference loop.

The second tier of the project's tests: the real nodes with parameter overrides and an episode client in one
executor, spun until each episode is over (bounded by a timeout). Every variant on the toy world
of tests/fakes.py, and more tasks of the built-in MuJoCo tabletop with the scripted expert and the
oracle verifier than the process-level parity check runs. Episodes must be identical step for step.
"""

import itertools
import time

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.interface_conversions import recorded_document  # noqa: E402

from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.recording.bag import read_bag  # noqa: E402
from ladder_ros.core.presets import WIDOWX  # noqa: E402
from ladder_ros.core.suite import parse_suite  # noqa: E402
from ladder_ros.evaluation.reference_loop import run_episode  # noqa: E402
from ladder_ros.evaluation.parity import ParityEpisode, ReferenceRunner, compare_records  # noqa: E402
from ladder_ros.messages import EpisodeCommand, EpisodeStatus  # noqa: E402
from ladder_ros.nodes.episode_recorder.node import EpisodeRecorderNode  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.nodes.sim_bridge.node import SimBridgeNode  # noqa: E402
from ladder_ros.nodes.vlm_verifier import VerifierNode  # noqa: E402
from ladder_ros.vlm.components import PlanResult  # noqa: E402
from tests.fakes import OracleCounter, ToyPolicy, ToyWorld  # noqa: E402
from tests.inprocess_graph import InProcessGraph as Graph  # noqa: E402

pytestmark = pytest.mark.ros

TOY_SUITE = parse_suite({
    "schema_version": 1, "suite": "toy", "embodiment": "widowx",
    "scenes": {"toy": {"objects": {"carrot": {}, "spoon": {}}, "containers": {"plate": {}, "bowl": {}}}},
    "tasks": [
        {"id": "toy2", "scene": "toy", "category": "single_destination",
         "instruction": "put the carrot and the spoon on the plate",
         "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
                      {"object": "spoon", "destination": "plate", "text": "put the spoon on the plate"}]},
        {"id": "toy_split", "scene": "toy", "category": "split_destinations",
         "instruction": "put the carrot on the plate and the spoon in the bowl",
         "subgoals": [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
                      {"object": "spoon", "destination": "bowl", "text": "put the spoon in the bowl"}]},
    ]})
MISS_RATE = 0.3


@pytest.fixture(scope="module")
def toy_graph(ros, tmp_path_factory):
    ns = "toy"
    graph = Graph(ns, [
        SimBridgeNode(simulator=ToyWorld(), suite=TOY_SUITE, namespace=ns),
        GripperTriggerNode(namespace=ns),
        OrchestratorNode(suite=TOY_SUITE, namespace=ns),
        PolicyNode(policy_factory=lambda task, seed: ToyPolicy(task, seed, MISS_RATE), reads=frozenset(),
                   namespace=ns),
        VerifierNode(verifier=OracleCounter(), reads_pixels=False, namespace=ns),
        EpisodeRecorderNode(namespace=ns, parameter_overrides=[
            Parameter("output_dir", value=str(tmp_path_factory.mktemp("recordings")))]),
    ])
    yield graph
    graph.close()


VARIANTS = ("low_level_policy", "periodic_trigger", "proprio_trigger", "proprio_verifier", "privileged_verifier")


@pytest.mark.parametrize("task_id,variant,seed", [
    *itertools.product(["toy2"], VARIANTS, [0, 1]),
    *itertools.product(["toy_split"], ["proprio_verifier", "privileged_verifier"], [2]),
])
def test_toy_world_graph_equals_the_reference_loop(toy_graph, task_id, variant, seed):
    task = TOY_SUITE.task(task_id)
    reference = run_episode(ToyWorld(), ToyPolicy(task, seed, MISS_RATE), task, variant, WIDOWX, layout=0,
                            seed=seed, verifier=OracleCounter()).to_dict()
    outcome = toy_graph.run(task_id, variant, seed)
    assert outcome.state == "finished"
    assert compare_records(reference, outcome.result) is None
    assert outcome.result["events"][0]["kind"] == "episode_started"


@pytest.fixture(scope="module")
def tabletop_graph(ros, tmp_path_factory):
    pytest.importorskip("mujoco", reason="the built-in tabletop needs MuJoCo (requirements/core.txt)")
    graph = load_graph("widowx")
    overrides = {"sim_bridge": {"render": False}}
    params = graph.node_parameters("sim", overrides=overrides)
    ns = "tabletop"
    nodes = [
        SimBridgeNode(namespace=ns, parameter_overrides=[Parameter("render", value=False)]),
        GripperTriggerNode(namespace=ns), OrchestratorNode(namespace=ns), PolicyNode(namespace=ns),
        VerifierNode(namespace=ns),
        EpisodeRecorderNode(namespace=ns, parameter_overrides=[
            Parameter("output_dir", value=str(tmp_path_factory.mktemp("tabletop_recordings")))]),
    ]
    reference = ReferenceRunner(params, nodes[0].suite)
    yield Graph(ns, nodes), reference
    reference.close()


# Tasks of every category the in-process test covers beyond the process-level parity check.
TABLETOP_EPISODES = [
    ("transfer_2", "privileged_verifier", 0), ("relay_2", "proprio_verifier", 1),
    ("revisit_3", "proprio_trigger", 2), ("exclusion_2", "proprio_verifier", 3),
    ("ordered_2", "privileged_verifier", 4), ("duplicates_2", "proprio_verifier", 5),
    ("sorting_split_2", "low_level_policy", 6),
]


@pytest.mark.parametrize("task_id,variant,seed", TABLETOP_EPISODES)
def test_tabletop_graph_equals_the_reference_loop(tabletop_graph, task_id, variant, seed):
    graph, reference_runner = tabletop_graph
    layout = seed % reference_runner.suite.task(task_id).layouts
    reference = reference_runner.run(ParityEpisode(task_id, variant, layout, seed))
    outcome = graph.run(task_id, variant, seed, layout)
    assert compare_records(reference, outcome.result) is None


class ScriptedPlanner:
    """Stands where the VLM planner stands: answers each plan request with the next scripted result."""

    def __init__(self, results):
        self.results = list(results)
        self.instructions = []

    def plan(self, instruction, observation):
        self.instructions.append(instruction)
        return self.results.pop(0)


@pytest.fixture(scope="module")
def planned_toy_graph(ros, tmp_path_factory):
    ns = "planned"
    task = TOY_SUITE.task("toy2")
    reversed_plan = tuple(reversed(task.subgoals))
    planner = ScriptedPlanner([
        PlanResult(goals=None, subgoals=reversed_plan, raw_reply='{"goals": [...]}', error=None, latency_ms=12.0),
        PlanResult(goals=None, subgoals=None, raw_reply="I cannot see a robot here.",
                   error="no JSON object in the reply", latency_ms=9.0),
        PlanResult(goals=None, subgoals=task.subgoals, raw_reply='{"goals": [...]}', error=None, latency_ms=10.0),
    ])
    recorder = EpisodeRecorderNode(namespace=ns, parameter_overrides=[
        Parameter("output_dir", value=str(tmp_path_factory.mktemp("planned_recordings")))])
    graph = Graph(ns, [
        SimBridgeNode(simulator=ToyWorld(image_px=8), suite=TOY_SUITE, namespace=ns),
        GripperTriggerNode(namespace=ns),
        OrchestratorNode(suite=TOY_SUITE, namespace=ns,
                         parameter_overrides=[Parameter("plan_source", value="planner")]),
        PolicyNode(policy_factory=lambda task, seed: ToyPolicy(task, seed, MISS_RATE), reads=frozenset(),
                   namespace=ns),
        VerifierNode(verifier=OracleCounter(), planner=planner, reads_pixels=False, namespace=ns),
        recorder,
    ])
    graph.recorder = recorder
    yield graph, planner, list(reversed_plan)
    graph.close()


def test_the_planners_plan_drives_the_episode(planned_toy_graph):
    graph, planner, plan = planned_toy_graph
    task = TOY_SUITE.task("toy2")
    reference = run_episode(ToyWorld(), ToyPolicy(task, 7, MISS_RATE), task, "proprio_verifier", WIDOWX, layout=0,
                            seed=7, verifier=OracleCounter(), plan=plan).to_dict()
    outcome = graph.run("toy2", "proprio_verifier", 7)
    assert planner.instructions == [task.instruction]
    assert outcome.state == "finished"
    assert outcome.result["orchestration"]["plan"] == [s.to_dict() for s in plan]
    assert outcome.result["plan"]["source"] == "planner" and outcome.result["plan"]["latency_ms"] == 12.0
    assert compare_records(reference, outcome.result) is None  # the same episode as the loop with that plan


def test_an_unreadable_plan_aborts_the_episode_and_keeps_the_reply(planned_toy_graph):
    graph, planner, _ = planned_toy_graph
    outcome = graph.run("toy2", "proprio_verifier", 8)
    assert outcome.state == "aborted"
    assert outcome.result["finish_reason"].startswith("aborted: planner failed:")
    assert "no JSON object in the reply" in outcome.result["finish_reason"]
    assert outcome.result["plan"]["raw_reply"] == "I cannot see a robot here."
    assert outcome.result["orchestration"]["pending"] == [0, 1]  # nothing was started
    # the privileged verifier plans from the ground truth: the planner is not asked
    asked = len(planner.instructions)
    outcome = graph.run("toy2", "privileged_verifier", 9)
    assert outcome.state == "finished" and len(planner.instructions) == asked


def _closed_bag(graph, episode_id):
    """The folder of ``episode_id``'s bag once the recorder closed it (close_grace_s after its final status)."""
    recorder = graph.recorder
    deadline = time.monotonic() + recorder.params["close_grace_s"] + 30.0  # reached only when it never closes
    while not any(p.endswith(episode_id) for p in recorder.closed):
        assert time.monotonic() < deadline, f"the recorder never closed the bag of {episode_id}"
        graph.executor.spin_once(timeout_sec=0.05)
    return next(p for p in recorder.closed if p.endswith(episode_id))


def test_the_recording_holds_every_topic_of_the_episode(planned_toy_graph):
    graph, _, _ = planned_toy_graph
    # an episode just before, so the next one starts while its bag is still open for late messages
    before = graph.run("toy2", "privileged_verifier", 3)
    outcome = graph.run("toy2", "proprio_verifier", 4)
    reasons = (before.result["finish_reason"], outcome.result["finish_reason"])
    assert before.state == outcome.state == "finished", reasons
    summary, decoded = read_bag(_closed_bag(graph, outcome.episode_id), [
        "/planned/orchestrator/events", "/planned/episode/status", "/planned/camera/image_raw",
        "/planned/episode/command"])
    result = outcome.result
    steps = result["steps_used"]  # steps 0..steps are observed and decided; no action after the last
    started = sum(1 for e in result["events"] if e["kind"] == "subgoal_started")
    expected = {
        "joint_states": steps + 1, "ee_pose": steps + 1, "sim/privileged_state": steps + 1,
        "gripper/events": steps + 1, "orchestrator/decision": steps + 1, "policy/action": steps,
        "policy/action_tag": steps, "orchestrator/events": len(result["events"]),
        "verifier/request": result["verification_queries"], "verifier/result": result["verification_queries"],
        "planner/request": 1, "planner/result": 1, "sim/episode_score": 1,
        "orchestrator/current_subgoal": started + 1,  # each subgoal, then empty (hold still) at the end
    }
    counts = {topic.removeprefix("/planned/"): n for topic, n in summary.topics.items()}
    assert {t: counts.get(t, 0) for t in expected} == expected
    # the start, and its repeats if the client heard back later than a second (loaded machine): all the same start
    commands = {recorded_document(m, EpisodeCommand) for m in decoded["/planned/episode/command"]}
    assert [(c.command, c.episode_id) for c in commands] == [("start", outcome.episode_id)]
    expected["episode/command"] = counts["episode/command"]
    # every topic of the simulated graph; these have no per-step count (best effort, replies, the policy's
    # report as it changes), and /diagnostics (1 Hz) may fall between a short episode's ends
    assert set(counts) - {"/diagnostics"} == {*expected, "camera/image_raw", "camera/camera_info", "episode/status",
                                              "episode/command_reply", "/clock", "policy/status"}
    # images are best effort (sensor data): each one that arrived is its step's (pixels hold the step), in order
    seen = [image.data[0] for image in decoded["/planned/camera/image_raw"]]
    assert seen and seen == sorted(set(seen)) and set(seen) <= set(range(steps + 1))
    statuses = [recorded_document(m, EpisodeStatus) for m in decoded["/planned/episode/status"]]
    mine = [s for s in statuses if s.episode_id == outcome.episode_id]
    assert mine[0].state == "running" and mine[-1].state == "finished"
    assert mine[-1].result["events"] == result["events"]
    assert all(s.state == "idle" for s in statuses if s.episode_id != outcome.episode_id)
    assert len(decoded["/planned/orchestrator/events"]) == len(result["events"])
    assert summary.custom_data["episode_id"] == outcome.episode_id
    assert summary.custom_data["variant"] == "proprio_verifier"
    # the episode before kept its own messages only: its start, no plan request (it plans from the task)
    previous, decoded = read_bag(_closed_bag(graph, before.episode_id), ["/planned/episode/command"])
    assert {recorded_document(m, EpisodeCommand).episode_id for m in decoded["/planned/episode/command"]} == {
        before.episode_id} and "/planned/planner/request" not in previous.topics
    assert previous.topics["/planned/joint_states"] == before.result["steps_used"] + 1


def test_an_episode_seen_only_in_its_final_status_is_still_recorded(ros, tmp_path):
    """The latched status keeps one message: a sub-second episode's running status can be overwritten before the
    recorder reads it. Its final status opens the bag; a restarted recorder reading that status again adds none."""
    from rclpy.serialization import serialize_message

    from ladder_ros.interface_conversions import document_to_msg

    episode_id = "20261205T114712-006-kitchen_single_2-reset-s11"
    final = serialize_message(document_to_msg(EpisodeStatus(
        episode_id=episode_id, state="finished", task={"task_id": "kitchen_single_2/reset"}, finish_reason="plan_done",
        result={"finish_reason": "plan_done"}, kind="reset", start="after_task", start_after="previous-episode")))
    recorders = []

    def recorder():
        recorders.append(EpisodeRecorderNode(namespace="/final_only", parameter_overrides=[
            Parameter("output_dir", value=str(tmp_path))]))
        return recorders[-1]

    try:
        first = recorder()
        first._on_status(final)
        assert first.bag is not None and first.episode_id == episode_id
        first.close()
        summary, _ = read_bag(tmp_path / episode_id)
        assert summary.custom_data["finish_reason"] == "plan_done"
        restarted = recorder()
        restarted._on_status(final)
        assert restarted.bag is None
        assert sorted(p.name for p in tmp_path.iterdir()) == [episode_id]
    finally:
        for node in recorders:
            node.destroy_node()


def test_two_statuses_published_back_to_back_each_reach_the_recorder(ros, tmp_path):
    """A reset with nothing to move publishes its final status and the next episode its running one within
    milliseconds on the latched status topic: the recorder reads both, so both episodes get their bag."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from ladder_ros.interface_conversions import document_to_msg
    from ladder_ros.runtime.endpoints import publisher
    from ladder_ros.specs import topics

    ns = "/back_to_back"
    recorder = EpisodeRecorderNode(namespace=ns, parameter_overrides=[Parameter("output_dir", value=str(tmp_path))])
    sender = Node("status_sender", namespace=ns)
    executor = SingleThreadedExecutor()
    try:
        pub = publisher(sender, type(document_to_msg(EpisodeStatus(episode_id="x", state="idle"))),
                        topics.EPISODE_STATUS)
        executor.add_node(recorder)
        deadline = time.monotonic() + 20
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        first, second = "20261205T142937-025-kitchen_single_2-reset-s26", "20261205T142937-026-kitchen_single_2-s25"
        pub.publish(document_to_msg(EpisodeStatus(episode_id=first, state="finished", finish_reason="nothing to move",
                                                  kind="reset", start="after_task", start_after="previous")))
        pub.publish(document_to_msg(EpisodeStatus(episode_id=second, state="running")))
        while recorder.episode_id != second and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        assert recorder.episode_id == second
        recorder.close()
        assert sorted(p.name for p in tmp_path.iterdir()) == [first, second]
    finally:
        executor.shutdown()
        recorder.destroy_node()
        sender.destroy_node()
    assert rclpy.ok()
