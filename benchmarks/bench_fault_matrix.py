"""Time to detect and to recover when each node of the simulated WidowX graph is killed mid-episode.

Brings the graph up as processes (the same configuration as tests/test_fault_matrix.py), kills each
of the six nodes in turn in the middle of its own episode (SIGKILL), starts it again, and prints the
table of docs/graph_faults.md: the outcome, the time from the kill until the graph reports
the fault and until the episode moves again or has its final status, and the bound the configured
timers give. ``--repeat N`` runs the matrix N times and prints the median and the worst of each.

    python benchmarks/bench_fault_matrix.py [--repeat 3]

Prints numbers; asserts nothing about speed. Loopback only.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402

apply_network_safe_environment(os.environ)

from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.evaluation.fault_matrix import CASES, OVERRIDES, FaultMatrix, markdown_table  # noqa: E402
from ladder_ros.evaluation.parity import ParityEpisode, ReferenceRunner  # noqa: E402
from ladder_ros.paths import resolve_share_file  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="run the matrix this many times")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="ladder_faults_"))
    overrides = copy.deepcopy(OVERRIDES)
    overrides["orchestrator"]["state_dir"] = str(out / "state")
    overrides["episode_recorder"] = {"output_dir": str(out / "recordings")}
    graph = load_graph("widowx")
    params = graph.node_parameters("sim", overrides=overrides)
    reference = ReferenceRunner(params, load_suite(resolve_share_file(params["orchestrator"]["suite"])))
    runs = []
    try:
        with GraphSession(graph, graph.launches("sim", overrides=overrides, work_dir=out), out / "logs") as session:
            matrix = FaultMatrix(session, params, reference=lambda task, variant, layout, seed: reference.run(
                ParityEpisode(task, variant, layout, seed)))
            for r in range(args.repeat):
                outcomes = [matrix.run(case, seed=(len(CASES) * r + i) % 24) for i, case in enumerate(CASES)]
                runs.append(outcomes)
                print(f"run {r + 1}:\n{markdown_table(outcomes)}\n", flush=True)
    finally:
        reference.close()
    if args.repeat > 1:
        print("median (worst) over the runs:")
        for i, case in enumerate(CASES):
            for name in ("detect_s", "recover_s"):
                values = [getattr(run[i], name) for run in runs if getattr(run[i], name) is not None]
                if values:
                    print(f"  {case.node} {name}: {statistics.median(values):.1f} s ({max(values):.1f} s)")
    failed = [o for run in runs for o in run if not o.ok]
    for o in failed:
        print(f"NOT AS DOCUMENTED: {o}")
    print(f"logs: {out / 'logs'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
