"""What the launch files need from a graph description, without importing ``launch``.

The launch files under ``launch/`` are three lines each: they call
:func:`ladder_ros.bringup.graph_launch.graph_launch_description`, which turns the graph description
(``config/graphs/<graph>.yaml``, the file ``ladder-ros up`` reads) into launch arguments and one
``launch_ros`` Node per graph node. The decisions behind it are plain Python and live here, so they
are tested where ``launch`` is not installed: the arguments with their defaults, descriptions and
choices (:func:`launch_arguments`), and the check of the values given on the command line, which
refuses a bad value with one line before any node starts (:func:`plan_launch`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from ladder_ros.bringup.graph import GraphDescription
from ladder_ros.core.errors import ConfigError
from ladder_ros.ros_env import network_safe_environment

TRUE_FALSE = ("true", "false")
ROBOTS = ("arm", "twin")  # robot:= on a graph with a twin mode: the lab's arm, or the dress rehearsal's twin
# Nodes the robot graph cannot run without: when one exits while the graph runs (it refused to start, or died),
# the launch ends the whole graph with that node's reason instead of leaving the others running without it.
ESSENTIAL = ("widowx_driver", "franka_driver", "policy", "camera", "widowx_twin", "rehearsal_server",
             "franka_twin")
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")  # rcutils severities (ros2 run --log-level)
# A ROS namespace: tokens of letters, digits and underscores, not starting with a digit, joined by "/"
# (ROS 2 design, "Topic and Service name mapping to DDS").
_NAMESPACE = re.compile(r"^/?([A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*)?/?$")


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str
    choices: tuple[str, ...] | None = None


def launch_arguments(graph: GraphDescription, *, use_sim: bool, localhost_only: bool) -> tuple[LaunchArgument, ...]:
    """The arguments of a graph's launch file; ``use_sim`` and ``localhost_only`` are that file's defaults.

    A robot's launch file defaults to ``localhost_only:=false``: the graph joins the user's own ROS
    network, where the drivers and cameras are. The simulation file defaults to true: nothing it
    runs needs another machine.
    """
    robot = () if "twin" not in graph.modes else (
        LaunchArgument("robot", "arm", "With use_sim:=false: arm, the lab's arm, camera and policy server; twin, the "
                       "dress rehearsal: the same graph against the simulated robot (the WidowX twin with its rendered "
                       "camera; franky-sim for the Franka) and the rehearsal's policy server on this machine, "
                       "loopback only (docs/rehearsal.md)", ROBOTS),)
    return (
        LaunchArgument("use_sim", _text(use_sim),
                       "true: simulation, the sim bridge replaces the robot driver and camera and the graph runs in "
                       "lockstep; false: the robot's own drivers and camera, on the wall clock", TRUE_FALSE),
        *robot,
        LaunchArgument("namespace", graph.namespace, "Namespace of every node and topic of the graph"),
        LaunchArgument("params_file", "" if graph.has_mode_params_files else str(graph.params_file),
                       "ROS params YAML of the graph's nodes; every value is checked before any node starts"
                       + (f"; empty: the mode's own ({_mode_params_files(graph)})" if graph.has_mode_params_files
                          else "")),
        LaunchArgument("output_dir", "", "Folder of the episode recordings (one rosbag2 MCAP bag per episode); "
                                         "empty: episode_recorder.output_dir of the params file"),
        LaunchArgument("localhost_only", _text(localhost_only),
                       "true: ROS traffic stays on this machine (discovery range LOCALHOST, the loopback-only Fast "
                       "DDS profile, the exported ROS_DOMAIN_ID or a free one); false: this shell's ROS network "
                       "settings, as a robot's drivers and cameras need", TRUE_FALSE),
        LaunchArgument("log_level", "info", "Logging level of every node", LOG_LEVELS),
    )


@dataclass(frozen=True)
class LaunchPlan:
    """What a graph's launch file starts, once its arguments are checked."""

    graph: str
    mode: str
    clock_mode: str
    namespace: str
    nodes: tuple[str, ...]
    recording_dir: str
    localhost_only: bool
    domain_id: str
    params_file: str = ""  # the params file the nodes read (the argument's, or the mode's own)
    environment: dict[str, str] = field(default_factory=dict)  # variables to change ("": unset)
    requires: tuple[str, ...] = ()
    mode_parameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # the mode's own values, checked

    def summary(self) -> str:
        network = "loopback only" if self.localhost_only else "this shell's ROS network settings"
        text = (f"ladder_ros: graph {self.graph} ({self.mode}, {self.clock_mode}) in /{self.namespace}: "
                f"{', '.join(self.nodes)}; {network}, ROS_DOMAIN_ID {self.domain_id}; "
                f"recordings in {self.recording_dir}")
        if self.requires:
            text += f"; this mode also needs: {'; '.join(self.requires)}"
        return text


def plan_launch(graph: GraphDescription, values: Mapping[str, str]) -> LaunchPlan:
    """Check a launch file's argument values as ``ladder-ros up`` checks its options; one error names the value.

    ``values`` maps every name of :func:`launch_arguments` to its text (choices are already
    enforced by ``launch``).
    """
    twin = values.get("robot") == "twin"
    if twin and values["use_sim"] == "true":
        raise ConfigError("launch argument robot:=twin is the wall-clock rehearsal of the robot graph; it does not go "
                          "with use_sim:=true")
    mode = "sim" if values["use_sim"] == "true" else "twin" if twin else "real"
    entry = graph.mode(mode)
    namespace = values["namespace"]
    if not _NAMESPACE.match(namespace):
        raise ConfigError(f"launch argument namespace: {namespace!r} is not a ROS namespace (names of letters, "
                          "digits and underscores, not starting with a digit, separated by '/')")
    params_file = Path(values["params_file"]).expanduser() if values["params_file"] else graph.params_file_for(mode)
    if not params_file.is_file():
        raise ConfigError("params file not found (launch argument params_file)", source=str(params_file))
    overrides = {}
    output_dir = values["output_dir"]
    if output_dir and "episode_recorder" in entry.nodes:
        if Path(output_dir).expanduser().exists() and not Path(output_dir).expanduser().is_dir():
            raise ConfigError(f"launch argument output_dir: {output_dir} is a file, not a folder")
        overrides["episode_recorder"] = {"output_dir": output_dir}
    params = graph.node_parameters(mode, params_file, overrides, namespace)  # one error naming a bad value
    recording_dir = str(params["episode_recorder"]["output_dir"]) if "episode_recorder" in params else ""
    localhost_only = values["localhost_only"] == "true" or twin  # nothing the rehearsal runs needs another machine
    environment = localhost_environment() if localhost_only else {}
    domain_id = environment.get("ROS_DOMAIN_ID") or os.environ.get("ROS_DOMAIN_ID") or "0"
    mode_parameters = {node: {key: params[node][key] for key in keys} for node, keys in entry.parameters.items()}
    return LaunchPlan(graph=graph.name, mode=mode, clock_mode=entry.clock_mode, namespace=namespace.strip("/"),
                      nodes=entry.nodes, recording_dir=recording_dir, localhost_only=localhost_only,
                      domain_id=domain_id, params_file=str(params_file), environment=environment,
                      requires=entry.requires, mode_parameters=mode_parameters)


def mode_parameters_file(plan: LaunchPlan, folder: Path) -> Path:
    """The mode's own parameter values as a params file (given after the graph's: the later file wins)."""
    layer = {"/**": {"ros__parameters": {"clock_mode": plan.clock_mode}}}
    for node, values in plan.mode_parameters.items():
        layer[f"/**/{node}"] = {"ros__parameters": dict(values)}
    path = Path(folder) / f"{plan.graph}_{plan.mode}_mode.yaml"
    path.write_text(yaml.safe_dump(layer, sort_keys=True), encoding="utf-8")
    return path


def localhost_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables ``localhost_only:=true`` changes for the launched nodes ("" means: unset it).

    An exported ``ROS_DOMAIN_ID`` is kept (as ``ladder-ros up`` keeps it), so a client in the same
    shell settings sees the graph; otherwise a free domain id is claimed (:mod:`ladder_ros.ros_env`).
    """
    base = dict(os.environ if base is None else base)
    safe = network_safe_environment(base)
    changes = {key: value for key, value in safe.items() if base.get(key) != value}
    changes.update({key: "" for key in base if key not in safe})
    return changes


def session_launch_arguments(graph: GraphDescription, params_file: Path | None,
                             overrides: Mapping[str, Mapping[str, Any]], namespace: str | None,
                             work_dir: Path, mode: str = "sim") -> list[str]:
    """The ``name:=value`` arguments that start ``graph`` in simulation (or ``mode`` ``twin``, the rehearsal) as
    ``ladder-ros run``/``parity``/``rehearse`` would.

    A launch file takes one params file: node overrides (``--set``) are written into a copy of it in
    ``work_dir``; the recorder's folder becomes ``output_dir:=``. Traffic stays on this machine.
    """
    rest = {node: dict(values) for node, values in overrides.items()}
    recorder = rest.pop("episode_recorder", {})
    output_dir = recorder.pop("output_dir", "")
    recorder.pop("config_files", None)  # the launch file stores its own graph and params files
    if recorder:
        rest["episode_recorder"] = recorder
    params = Path(params_file or graph.params_file_for(mode))
    if rest:
        params = write_params_file(params, rest, (namespace or graph.namespace).strip("/"),
                                   Path(work_dir) / f"{graph.name}_launch_params.yaml")
    chosen = ["use_sim:=true"] if mode == "sim" else ["use_sim:=false", "robot:=twin"]
    arguments = [*chosen, "localhost_only:=true", f"params_file:={params}"]
    if output_dir:
        arguments.append(f"output_dir:={output_dir}")
    if namespace is not None:
        arguments.append(f"namespace:={namespace}")
    return arguments


def write_params_file(params_file: Path, overrides: Mapping[str, Mapping[str, Any]], namespace: str,
                      destination: Path) -> Path:
    """A copy of ``params_file`` with ``overrides`` ({node: {parameter: value}}) in each section of that node."""
    data = yaml.safe_load(Path(params_file).read_text(encoding="utf-8")) or {}
    for node, values in overrides.items():
        names = (f"/**/{node}", node, f"/{node}", f"/{namespace}/{node}", f"{namespace}/{node}")
        for key in [key for key in data if key in names] or [f"/**/{node}"]:
            data.setdefault(key, {"ros__parameters": {}})["ros__parameters"].update(values)
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return destination


def _mode_params_files(graph: GraphDescription) -> str:
    return ", ".join(f"{mode}: {graph.params_file_for(mode).name}" for mode in sorted(graph.modes))


def _text(flag: bool) -> str:
    return "true" if flag else "false"
