"""The Franka Panda orchestrator graph on the robot: `ros2 launch ladder_ros franka_orchestrator.launch.py`.

Policy, gripper trigger, VLM verifier, orchestrator and episode recorder on the wall clock at 15 Hz
(RoboLab-Long parameters), in /franka, with the robot's own driver and camera (not part of this
launch file). There is no Franka simulator in this package, so `use_sim:=true` is refused. The graph
joins this shell's ROS network (`localhost_only:=false`). Nodes, parameters and remappings come from
config/graphs/franka.yaml and config/franka_params.yaml; `-s` describes every argument.
"""

from ladder_ros.bringup.graph_launch import graph_launch_description


def generate_launch_description():
    return graph_launch_description("franka", use_sim=False, localhost_only=False)
