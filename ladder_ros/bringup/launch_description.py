"""What the launch files need from a graph description, without importing ``launch``.

The launch files under ``launch/`` are thin: they read the same graph description and params file
as ``ladder-ros up`` through :func:`node_specs` and turn each entry into a ``launch_ros`` Node. This
part is plain Python, so the tests check it where ``launch`` is not installed (PyPI has no
``launch``/``launch_ros``; docs/dependencies.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ladder_ros.bringup.graph import load_graph
from ladder_ros.ros_env import network_safe_environment

LAUNCH_ARGUMENTS = {
    "use_sim": ("false", "true: the sim bridge replaces the robot driver and camera (lockstep); "
                         "false: the real robot's drivers on the wall clock"),
    "namespace": ("", "namespace of every node and topic (empty: the graph description's)"),
    "params_file": ("", "ROS params YAML replacing the graph's own (empty: config/<graph>_params.yaml)"),
    "output_dir": ("", "folder of the episode recordings (empty: the params file's episode_recorder.output_dir)"),
    "localhost_only": ("true", "true: ROS traffic stays on this machine (loopback Fast DDS profile, own domain "
                               "id); false: this shell's ROS network settings (multi-machine setups)"),
}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    executable: str
    namespace: str
    parameters: list  # [params_file, {overrides}]
    remappings: list


def node_specs(graph_name: str, use_sim: bool, namespace: str = "", params_file: str = "",
               output_dir: str = "") -> list[NodeSpec]:
    """The nodes of a graph for ``ros2 launch``, checked like ``ladder-ros up`` checks them."""
    graph = load_graph(graph_name)
    mode = "sim" if use_sim else "real"
    entry = graph.mode(mode)
    params = Path(params_file) if params_file else graph.params_file
    overrides: dict[str, dict[str, Any]] = {}
    if output_dir and "episode_recorder" in entry.nodes:
        overrides["episode_recorder"] = {"output_dir": output_dir}
    graph.node_parameters(mode, params, overrides, namespace or None)  # one error naming a bad value
    ns = (namespace or graph.namespace).strip("/")
    specs = []
    for name in entry.nodes:
        node = graph.nodes[name]
        specs.append(NodeSpec(name=name, executable=node.executable, namespace=ns,
                              parameters=[str(params), {"clock_mode": entry.clock_mode, **overrides.get(name, {})}],
                              remappings=[*graph.remappings, *node.remappings]))
    return specs


def localhost_environment() -> dict[str, str]:
    """The variables ``localhost_only:=true`` sets for the launched nodes."""
    env = network_safe_environment()
    keys = ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY", "ROS_DOMAIN_ID", "FASTDDS_DEFAULT_PROFILES_FILE",
            "FASTRTPS_DEFAULT_PROFILES_FILE", "RMW_IMPLEMENTATION")
    return {k: env[k] for k in keys if k in env}
