"""Reset episodes through the graph, in lockstep simulation: the real nodes and an episode client in one executor.

A task episode on the built-in tabletop, then its reset (the orchestrator counts the start regions with the
verifier, plans, runs and confirms it), then the next task episode from the scene the reset left: the objects
are where the reset put them, not where the layout has them. A reset the verifier cannot confirm says what is
out of place; a task whose scene has no start regions is refused in one line.
"""

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the built-in tabletop needs MuJoCo (requirements/core.txt)")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.core.errors import LadderError  # noqa: E402
from ladder_ros.core.reset import COUNT_REASON  # noqa: E402
from ladder_ros.core.verification import VerificationResult  # noqa: E402
from ladder_ros.interface_conversions import document_from_msg  # noqa: E402
from ladder_ros.messages import PrivilegedStateDoc  # noqa: E402
from ladder_ros.nodes.episode_recorder.node import EpisodeRecorderNode  # noqa: E402
from ladder_ros.nodes.gripper_trigger import GripperTriggerNode  # noqa: E402
from ladder_ros.nodes.orchestrator.node import OrchestratorNode  # noqa: E402
from ladder_ros.nodes.policy.node import PolicyNode  # noqa: E402
from ladder_ros.nodes.sim_bridge.node import SimBridgeNode  # noqa: E402
from ladder_ros.nodes.vlm_verifier import VerifierNode  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, subscription  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from tests.fakes import OracleCounter  # noqa: E402
from tests.inprocess_graph import InProcessGraph as Graph  # noqa: E402
from tests.test_graph_inprocess import TOY_SUITE  # noqa: E402

pytestmark = pytest.mark.ros

TASK = "kitchen_single_2"  # carrot and spoon onto the plate; start regions on the right of the table


class RegionCounter(OracleCounter):
    """The oracle's counts; with ``blind`` set, every start region reads empty (a verifier that cannot see them)."""

    blind = False

    def verify(self, request, observation):
        if self.blind and request.reason == COUNT_REASON:
            return VerificationResult(request_id=request.request_id, count=0, source=self.name)
        return super().verify(request, observation)


class SceneProbe(Node):
    """Every episode's privileged states as they come: where each object is at each step."""

    def __init__(self, namespace):
        super().__init__("scene_probe", namespace=namespace)
        self.states: dict[str, list[PrivilegedStateDoc]] = {}
        subscription(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED, self._on_state)

    def _on_state(self, msg):
        doc = document_from_msg(msg, PrivilegedStateDoc)
        self.states.setdefault(doc.episode_id, []).append(doc)

    def positions(self, episode_id, index):
        doc = sorted(self.states[episode_id], key=lambda d: d.step)[index]
        return {name: np.array(o["position"]) for name, o in doc.objects.items()}, doc


@pytest.fixture(scope="module")
def graph(ros, tmp_path_factory):
    ns = "resets"
    recordings = tmp_path_factory.mktemp("reset_recordings")
    verifier, probe = RegionCounter(), SceneProbe(ns)
    nodes = [
        SimBridgeNode(namespace=ns, parameter_overrides=[Parameter("render", value=False)]),
        GripperTriggerNode(namespace=ns), OrchestratorNode(namespace=ns),
        PolicyNode(namespace=ns, parameter_overrides=[Parameter("noise", value="off")]),
        VerifierNode(verifier=verifier, reads_pixels=False, namespace=ns),
        EpisodeRecorderNode(namespace=ns, parameter_overrides=[Parameter("output_dir", value=str(recordings))]),
        probe,
    ]
    g = Graph(ns, nodes)
    g.verifier, g.probe, g.recordings = verifier, probe, recordings
    yield g
    g.close()


def run(graph, task_id=TASK, *, layout=0, seed=0, **start):
    return graph.client.run_episode(graph.executor, task_id, variant="proprio_verifier", layout=layout, seed=seed,
                                    timeout_s=180, **start)


def test_a_reset_puts_the_scene_back_and_the_next_episode_starts_from_it(graph):
    task = run(graph)
    assert task.state == "finished" and task.result["success"], task.result["finish_reason"]
    assert (task.result["kind"], task.result["start"], task.result["start_after"]) == ("task", "layout", None)

    reset = run(graph, kind="reset", start="after_task", start_after=task.episode_id)
    record = reset.result
    assert reset.state == "finished" and record["task_id"] == f"{TASK}/reset"
    assert (record["kind"], record["start"], record["start_after"]) == ("reset", "after_task", task.episode_id)
    moved = record["reset"]["moves"]
    assert sorted(m["object"] for m in moved) == ["carrot", "spoon"]  # both were on the plate
    assert record["reset"]["confirmed"] and record["reset"]["out_of_place"] == []
    assert record["budget_steps"] == 200 and record["success"]  # the reset task's own budget and score
    assert {tuple(c) for c in record["reset"]["counted"]} == {(k, r, n) for k, r, n in record["reset"]["expected"]}
    # The reset's first step is the task's last scene (nothing teleported between them).
    task_end, _ = graph.probe.positions(task.episode_id, -1)
    reset_start, _ = graph.probe.positions(reset.episode_id, 0)
    assert all(np.linalg.norm(task_end[n] - reset_start[n]) < 0.005 for n in task_end)

    after = run(graph, start="after_reset", start_after=reset.episode_id, seed=1)
    assert after.state == "finished"
    assert (after.result["kind"], after.result["start"], after.result["start_after"]) == (
        "task", "after_reset", reset.episode_id)
    # The objects start where the reset left them, in their start regions, not where the layout has them.
    reset_end, _ = graph.probe.positions(reset.episode_id, -1)
    start, doc = graph.probe.positions(after.episode_id, 0)
    layout_start, _ = graph.probe.positions(task.episode_id, 0)
    assert all(np.linalg.norm(reset_end[n] - start[n]) < 0.005 for n in start)
    assert any(np.linalg.norm(layout_start[n] - start[n]) > 0.01 for n in start)  # layout 0 again: not rebuilt
    goal = doc.goal_state()
    assert {(m["object"], m["destination"]) for m in moved} <= {
        (k, r) for k, r, _ in record["reset"]["expected"] if goal.count(k, r) >= 1}
    assert set(doc.regions) == {"right_near", "right_far"}  # the start regions travel with the scene
    # Every episode, the reset included, has its recording.
    bags = {p.parent.name for p in graph.recordings.rglob("*.mcap")}
    assert {task.episode_id, reset.episode_id} <= bags


def test_a_reset_the_verifier_cannot_confirm_says_what_is_out_of_place(graph):
    task = run(graph, layout=1, seed=2)
    assert task.state == "finished"
    graph.verifier.blind = True
    try:
        reset = run(graph, kind="reset", start="after_task", start_after=task.episode_id, layout=1, seed=2)
    finally:
        graph.verifier.blind = False
    reset_section = reset.result["reset"]
    assert not reset_section["confirmed"] and reset_section["out_of_place"]
    status = graph.client.status
    assert status.episode_id == reset.episode_id
    assert status.message.startswith(f"the reset after episode {task.episode_id} left objects out of place: ")
    assert "of 1" in status.message and "\n" not in status.message


def test_a_task_whose_scene_has_no_start_regions_is_refused_in_one_line(ros):
    ns = "resets_toy"
    toy = Graph(ns, [OrchestratorNode(suite=TOY_SUITE, namespace=ns)])
    try:
        with pytest.raises(LadderError) as refused:
            toy.client.run_episode(toy.executor, "toy2", kind="reset", start="after_task", start_after="e0",
                                   timeout_s=30)
    finally:
        toy.close()
    line = str(refused.value)
    assert "\n" not in line and line.endswith(
        "start refused: task toy2 (scene toy of suite toy) cannot be reset automatically: its scene declares no "
        "start_regions and no object starts on a container")
