"""The WidowX 250 orchestrator graph on the robot: `ros2 launch ladder_ros widowx_orchestrator.launch.py`.

Policy, gripper trigger, VLM verifier, orchestrator and episode recorder on the wall clock at 5 Hz,
in /widowx, with the robot's own driver and camera (not part of this launch file). `use_sim:=true`
runs the same graph in simulation instead (sim_orchestrator.launch.py). The graph joins this shell's
ROS network (`localhost_only:=false`), where the drivers are. Nodes, parameters and remappings come
from config/graphs/widowx.yaml and config/widowx_params.yaml, the files `ladder-ros up widowx` reads;
`ros2 launch ladder_ros widowx_orchestrator.launch.py -s` describes every argument.
"""

from ladder_ros.bringup.graph_launch import graph_launch_description


def generate_launch_description():
    return graph_launch_description("widowx", use_sim=False, localhost_only=False)
