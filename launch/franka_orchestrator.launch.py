"""The Franka Panda orchestrator graph: `ros2 launch ladder_ros franka_orchestrator.launch.py`.

On the robot (the default): policy, gripper trigger, VLM verifier, orchestrator and episode recorder on
the wall clock at 15 Hz (RoboLab-Long parameters), in /franka, with the robot's own driver and camera;
the graph joins this shell's ROS network (`localhost_only:=false`). `use_sim:=true` runs the same graph
in simulation instead: the sim bridge (the built-in MuJoCo tabletop's Franka Hand) replaces the driver
and the camera, the graph runs in lockstep, event for event like the in-process reference loop, with
the simulation's own params file (config/franka_sim_params.yaml: the Franka suite, the scripted
expert, the oracle verifier); add `localhost_only:=true` to keep its traffic on this machine. Nodes,
parameters and remappings come from config/graphs/franka.yaml and the mode's params file; `-s`
describes every argument.
"""

from ladder_ros.bringup.graph_launch import graph_launch_description


def generate_launch_description():
    return graph_launch_description("franka", use_sim=False, localhost_only=False)
