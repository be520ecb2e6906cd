"""The fault matrix: each of the six nodes killed in turn mid-episode (nodes as processes, loopback only).

For each node one documented outcome (docs/graph_faults.md), within a bound derived from the
configured timers: the episode resumes and is identical to the in-process reference loop's, or it
ends at once with a reason naming the node and its record in the final status and on disk. Never
"still running". One graph is brought up for all six cases. Run with ``-s`` to see the measured
times to detect and to recover (``benchmarks/bench_fault_matrix.py`` prints the docs' table).
"""

import copy

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")

from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.evaluation.fault_matrix import CASES, ENDS, OVERRIDES, FaultMatrix, markdown_table  # noqa: E402
from ladder_ros.evaluation.parity import ParityEpisode, ReferenceRunner  # noqa: E402
from ladder_ros.paths import resolve_share_file  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

OUTCOMES = []


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    out = tmp_path_factory.mktemp("fault_matrix")
    overrides = copy.deepcopy(OVERRIDES)
    overrides["orchestrator"]["state_dir"] = str(out / "state")
    overrides["episode_recorder"] = {"output_dir": str(out / "recordings")}
    description = load_graph("widowx")
    params = description.node_parameters("sim", overrides=overrides)
    launches = description.launches("sim", overrides=overrides, work_dir=out)
    reference = ReferenceRunner(params, load_suite(resolve_share_file(params["orchestrator"]["suite"])))
    try:
        with GraphSession(description, launches, out / "logs", startup_timeout_s=180.0) as session:
            yield FaultMatrix(session, params, reference=lambda task, variant, layout, seed: reference.run(
                ParityEpisode(task, variant, layout, seed)))
    finally:
        reference.close()
        if OUTCOMES:
            print("\n" + markdown_table(OUTCOMES))


@pytest.mark.parametrize("case", CASES, ids=[c.node for c in CASES])
def test_a_node_killed_mid_episode_has_its_documented_outcome_within_the_bound(matrix, case):
    outcome = matrix.run(case, seed=CASES.index(case))
    OUTCOMES.append(outcome)
    assert outcome.observed == case.expected, outcome
    assert outcome.recover_s is not None and outcome.recover_s <= outcome.bound_s, outcome
    assert outcome.record_on_disk, outcome
    if case.expected == ENDS:
        assert outcome.detect_s is not None and outcome.detect_s <= outcome.recover_s, outcome
