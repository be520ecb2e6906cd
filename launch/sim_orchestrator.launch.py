"""The WidowX graph in simulation: `ros2 launch ladder_ros sim_orchestrator.launch.py`.

The same graph as widowx_orchestrator.launch.py with `use_sim:=true`: the sim bridge (the built-in
MuJoCo tabletop; `params_file:=` selects another simulator) replaces the driver and camera, and the
graph runs in lockstep, event for event like the in-process reference loop. ROS traffic stays on
this machine (`localhost_only:=true`; the exported ROS_DOMAIN_ID, or a free one the launch prints).
Start episodes with an EpisodeCommand on /widowx/episode/command (the operator panel, or
`ladder-ros run widowx --launch sim_orchestrator.launch.py`). `-s` describes every argument.
"""

from ladder_ros.bringup.graph_launch import graph_launch_description


def generate_launch_description():
    return graph_launch_description("widowx", use_sim=True, localhost_only=True)
