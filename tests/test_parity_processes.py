"""Tier three: `ladder-ros parity` with every node its own process, and the comparison itself."""

import copy
import json
import sys
from pathlib import Path

import pytest

from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.suite import load_suite
from ladder_ros.core.task import Subgoal, Task, TaskCategory
from ladder_ros.evaluation.reference_loop import run_episode
from ladder_ros.evaluation.parity import attempt_ends, compare_records, first_difference, plan_episodes
from tests.fakes import OracleCounter, ToyPolicy, ToyWorld
from tests.processes import run_tree

REPO = Path(__file__).resolve().parent.parent


def test_the_comparison_finds_the_first_difference():
    reference = {"events": [{"step": 0, "kind": "episode_started"}, {"step": 30, "kind": "attempt_ended"}],
                 "final_goal": {"resting": [["carrot", "plate", 1]]}, "steps_used": 30}
    assert compare_records(reference, dict(reference)) is None
    moved = {**reference, "events": [reference["events"][0], {"step": 31, "kind": "attempt_ended"}]}
    assert compare_records(reference, moved) == "events[1].step: reference 30, graph 31"
    shorter = {**reference, "events": reference["events"][:1]}
    assert compare_records(reference, shorter).startswith("events: 2 items in the reference, 1 in the graph")
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ".b: only in the graph: 2"


def toy_record():
    """A real episode record of the reference loop: two subgoals on the toy world, retries included."""
    task = Task(task_id="toy2", scene="toy", category=TaskCategory.SINGLE_DESTINATION,
                instruction="put the carrot and the spoon on the plate",
                subgoals=(Subgoal("carrot", "plate", "put the carrot on the plate"),
                          Subgoal("spoon", "plate", "put the spoon on the plate")))
    return run_episode(ToyWorld(), ToyPolicy(task, 0, 0.3), task, "proprio_verifier", WIDOWX, layout=0, seed=0,
                       verifier=OracleCounter()).to_dict()


def _set(path, value):
    def change(record):
        *parents, last = path
        target = record
        for key in parents:
            target = target[key]
        target[last] = value(target[last])
    return change


# Everything the graph must reproduce, each changed the way a real divergence would change it.
DIVERGENCES = {
    "events": _set(("events", 3, "step"), lambda step: step + 1),
    "final_goal": _set(("final_goal", "resting", 0, 2), lambda n: n + 1),  # one more carrot on the plate
    "finish_reason": _set(("finish_reason",), lambda _: "budget_exhausted"),
    "steps_used": _set(("steps_used",), lambda n: n + 1),
    "success": _set(("success",), lambda ok: not ok),
    "subgoals_done": _set(("subgoals_done",), lambda n: n - 1),
    "subgoals": _set(("subgoals", 1, "cause"), lambda _: "attempted_never_completed"),
    "violations": _set(("violations",), lambda v: [*v, "distractor_moved"]),
    "verification_queries": _set(("verification_queries",), lambda n: n + 1),
    "orchestration": _set(("orchestration", "completed"), lambda done: list(reversed(done))),  # another queue order
    "orchestration.pending": _set(("orchestration", "pending"), lambda pending: [*pending, 1]),
}


@pytest.mark.parametrize("field", sorted(DIVERGENCES))
def test_the_comparison_covers_every_field_the_graph_must_reproduce(field):
    reference = toy_record()
    assert reference["finish_reason"] == "plan_complete" and reference["orchestration"]["completed"] == [0, 1]
    graph = copy.deepcopy(reference)
    DIVERGENCES[field](graph)
    assert compare_records(reference, copy.deepcopy(reference)) is None
    difference = compare_records(reference, graph)
    assert difference is not None and difference.startswith(field), difference


def test_the_comparison_ignores_what_may_differ():
    reference = toy_record()
    graph = {**copy.deepcopy(reference), "wall_s": reference["wall_s"] + 3.0, "verifier": "oracle (graph)",
             "episode_id": "20260101T000000-001-toy2"}
    assert compare_records(reference, graph) is None


def test_default_episodes_cover_three_horizons():
    suite = load_suite(REPO / "config" / "suites" / "tabletop.yaml")
    episodes = plan_episodes(suite, None, ["proprio_verifier", "periodic_trigger"], [0, 1], None)
    horizons = {suite.task(e.task_id).horizon for e in episodes}
    assert len(episodes) == 12 and len(horizons) == 3
    assert plan_episodes(suite, ["relay_2"], ["proprio_trigger"], [5], 1)[0].layout == 5


# One graph episode may take this long before `parity` gives up on it and stops its graph itself.
# The longest episode here has a budget of 200 steps (sorting_split_2: 100 per subgoal, Section 3)
# and a graph step costs ~20 ms on an idle machine (docs/lockstep.md): 120 s leaves a loaded machine 30x.
EPISODE_TIMEOUT_S = 120
STARTUP_S, STOP_S = 60, 10  # GraphSession's startup bound; `up`'s stop bound before SIGKILL


def parity_processes(tmp_path: Path, graph: str, tasks: str, variants: str, seeds: str, episode_timeout_s: int):
    """``ladder-ros parity GRAPH`` with each node its own process; its result once every episode was identical."""
    pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
    episodes = len(tasks.split(",")) * len(variants.split(",")) * len(seeds.split(","))
    # The reference loop runs each episode too (seconds); a hang anywhere ends in parity's own
    # episode timeout, and this outer bound, reached only if parity itself hangs, kills its whole tree.
    bound = STARTUP_S + episodes * 2 * episode_timeout_s + STOP_S
    result = run_tree(
        [sys.executable, "-m", "ladder_ros.cli", "parity", graph, "--tasks", tasks, "--variants", variants,
         "--seeds", seeds, "--set", "sim_bridge.render=false", "--episode-timeout", str(episode_timeout_s),
         "--out", str(tmp_path)], timeout=bound, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"parity: {episodes}/{episodes} episodes identical" in result.stdout
    return result


@pytest.mark.ros
@pytest.mark.slow
def test_graph_processes_reproduce_the_reference_loop(tmp_path):
    parity_processes(tmp_path, "widowx", "kitchen_single_1,sorting_split_2", "proprio_verifier,periodic_trigger",
                     "3", EPISODE_TIMEOUT_S)
    assert (tmp_path / "parity.json").is_file() and any((tmp_path / "recordings").iterdir())


def test_attempt_ends_are_read_from_the_events():
    record = {"events": [{"step": 0, "kind": "episode_started"},
                         {"step": 88, "kind": "attempt_ended", "reason": "release", "close_steps": 40, "lift_m": 0.09},
                         {"step": 388, "kind": "attempt_ended", "reason": "timeout", "close_steps": 0}]}
    assert attempt_ends(record) == [{"step": 88, "reason": "release", "close_steps": 40, "lift_m": 0.09},
                                    {"step": 388, "reason": "timeout", "close_steps": 0}]


# The Franka graph at 15 Hz: counter_single_1 runs its whole 900-step budget with the proprioceptive trigger
# (the plan restarts after its only subgoal, Appendix B), ~40 ms a graph step on a loaded 2-core machine;
# the verifier's episode ends once its count says done (~130 steps).
FRANKA_EPISODE_TIMEOUT_S = 300


@pytest.mark.ros
@pytest.mark.slow
def test_the_franka_graph_reproduces_the_reference_loop_through_both_paths_of_its_trigger(tmp_path):
    parity_processes(tmp_path, "franka", "counter_single_1", "proprio_trigger,proprio_verifier", "0",
                     FRANKA_EPISODE_TIMEOUT_S)
    results = {r["episode"]["variant"]: r for r in json.loads((tmp_path / "parity.json").read_text())}
    assert results["proprio_trigger"]["steps"] == 900  # the Franka budget of one subgoal (Appendix D)
    ends = results["proprio_trigger"]["attempt_ends"]
    # the lift rule: a release after >= 21 closed steps with >= 3 cm of lift (Appendix B) ...
    assert any(e["reason"] == "release" and e["close_steps"] >= 21 and e["lift_m"] >= 0.03 for e in ends), ends
    # ... and the fallback: 300 steps without a release end an attempt too
    steps = [e["step"] for e in ends]
    since_previous = {e["step"]: e["step"] - previous for previous, e in zip([0] + steps, ends)}
    timeouts = [e["step"] for e in ends if e["reason"] == "timeout"]
    assert timeouts and all(since_previous[step] == 300 for step in timeouts), ends
