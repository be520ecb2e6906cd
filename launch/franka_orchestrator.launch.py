"""The franka orchestrator graph: `ros2 launch ladder_ros franka_orchestrator.launch.py [use_sim:=true]`.

Nodes, parameters and remappings come from config/graphs/franka.yaml (the file `ladder-ros up franka`
reads). Launch arguments: use_sim, namespace, params_file, output_dir, localhost_only
(`ros2 launch ... --show-args` describes each).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _graph_launch import graph_launch_description  # noqa: E402


def generate_launch_description():
    return graph_launch_description("franka")
