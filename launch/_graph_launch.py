"""Shared body of the ladder_ros launch files: one graph description, real versus sim by argument.

Each launch file names its graph; everything else (nodes, parameters, remappings, namespace) comes
from config/graphs/<graph>.yaml and its params file, the same files ``ladder-ros up`` reads.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from ladder_ros.bringup.launch_description import LAUNCH_ARGUMENTS, localhost_environment, node_specs


def _true(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _nodes(context, graph_name: str, default_use_sim: str):
    value = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    actions = []
    if _true(value["localhost_only"]):
        actions += [SetEnvironmentVariable(k, v) for k, v in localhost_environment().items()]
    for spec in node_specs(graph_name, _true(value["use_sim"] or default_use_sim), value["namespace"],
                           value["params_file"], value["output_dir"]):
        actions.append(Node(package="ladder_ros", executable=spec.executable, name=spec.name,
                            namespace=spec.namespace, parameters=spec.parameters, remappings=spec.remappings,
                            output="screen", emulate_tty=True))
    return actions


def graph_launch_description(graph_name: str, default_use_sim: str = "false") -> LaunchDescription:
    arguments = [DeclareLaunchArgument(name, default_value=default_use_sim if name == "use_sim" else default,
                                       description=description)
                 for name, (default, description) in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*arguments, OpaqueFunction(function=_nodes, args=[graph_name, default_use_sim])])
