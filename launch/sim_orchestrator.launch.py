"""The WidowX graph in simulation: `ros2 launch ladder_ros sim_orchestrator.launch.py`.

The same graph as widowx_orchestrator.launch.py with use_sim defaulting to true: the sim bridge
(built-in MuJoCo tabletop; `params_file:=` selects another simulator) replaces the driver and camera,
in lockstep. Start episodes from the operator panel or by publishing an EpisodeCommand on
/widowx/episode/command.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _graph_launch import graph_launch_description  # noqa: E402


def generate_launch_description():
    return graph_launch_description("widowx", default_use_sim="true")
