"""The launch description of a graph, shared by every launch file under ``launch/``.

One ``launch_ros`` Node per node of the graph description (``config/graphs/<graph>.yaml``), declared
up front so that launch's introspection (``ros2 launch -p``) lists them; a node that belongs to some
modes only carries the condition that selects it (the mode follows from ``use_sim`` and, on a graph
with a rehearsal mode, ``robot``). Before any node starts, one step checks the argument values like
``ladder-ros up`` checks its options (:func:`ladder_ros.bringup.launch_description.plan_launch`): a bad
value ends the launch with one line naming it. The same step sets the loopback-only environment when
``localhost_only:=true`` (and for the rehearsal).

Parameters: the params file, then the mode's own values (a file the checking step writes), then a
layer with the mode's clock (and the recordings folder and the configuration files stored in every
recording), as ``ladder-ros up`` layers them.

A node the graph cannot run without (:data:`~ladder_ros.bringup.launch_description.ESSENTIAL`: the
driver, the camera, the policy, and in the rehearsal the twin and its server) that exits with an error
ends the whole launch, with its name, exit code and last error line as the reason and exit status 1,
instead of leaving the other nodes running without it.

This module imports ``launch`` and ``launch_ros``; everything else lives in
:mod:`ladder_ros.bringup.launch_description`.
"""

from __future__ import annotations

from launch import Condition, LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
    SetLaunchConfiguration,
    UnsetEnvironmentVariable,
)
from launch.event_handlers import OnProcessExit, OnProcessIO
from launch.logging import get_logger
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from ladder_ros.bringup.graph import GraphDescription, load_graph, make_work_dir
from ladder_ros.bringup.launch_description import ESSENTIAL, launch_arguments, mode_parameters_file, plan_launch
from ladder_ros.core.errors import LadderError

PACKAGE = "ladder_ros"
# Set by the checking step for the nodes (not arguments: they follow from the arguments).
CLOCK_MODE = "ladder_ros_clock_mode"
RECORDING_DIR = "ladder_ros_recording_dir"
PARAMS_FILE = "ladder_ros_params_file"  # the params_file argument, or the mode's own when it is empty
MODE = "ladder_ros_mode"
MODE_PARAMETERS = "ladder_ros_mode_parameters"


class EssentialNodeExited(LadderError):
    """A node the graph cannot run without exited: the launch ends, with its reason."""


def graph_launch_description(graph_name: str, *, use_sim: bool, localhost_only: bool) -> LaunchDescription:
    """The launch description of graph ``graph_name``; ``use_sim`` and ``localhost_only`` are the defaults."""
    graph = load_graph(graph_name)
    arguments = launch_arguments(graph, use_sim=use_sim, localhost_only=localhost_only)
    entities = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                                      choices=list(a.choices) if a.choices else None) for a in arguments]
    entities.append(OpaqueFunction(function=_check_arguments, args=[graph, [a.name for a in arguments]]))
    entities += _nodes(graph)
    return LaunchDescription(entities)


def _check_arguments(context: LaunchContext, graph: GraphDescription, names: list[str]):
    values = {name: LaunchConfiguration(name).perform(context) for name in names}
    for name in _unknown_arguments(context.argv, names):
        get_logger("launch.user").warning(f"ignoring launch argument {name!r}: the {graph.name} graph's launch "
                                          f"arguments are {', '.join(names)}")
    plan = plan_launch(graph, values)  # ConfigError: launch prints its one line and starts nothing
    actions = [SetLaunchConfiguration(CLOCK_MODE, plan.clock_mode),
               SetLaunchConfiguration(RECORDING_DIR, plan.recording_dir),
               SetLaunchConfiguration(PARAMS_FILE, plan.params_file), SetLaunchConfiguration(MODE, plan.mode),
               SetLaunchConfiguration(MODE_PARAMETERS, str(mode_parameters_file(plan, make_work_dir())))]
    for key, value in sorted(plan.environment.items()):
        actions.append(SetEnvironmentVariable(key, value) if value else UnsetEnvironmentVariable(key))
    actions.append(LogInfo(msg=plan.summary()))
    return actions


def _unknown_arguments(argv: list[str], names: list[str]) -> list[str]:
    """Names given as ``name:=value`` on the command line that this launch file does not declare.

    Only a warning: a launch file that includes this one may pass arguments of its own.
    """
    given = [arg.split(":=", 1)[0] for arg in argv if ":=" in arg]
    return [name for name in given if name not in names]


def _in_modes(modes: frozenset[str]) -> Condition:
    return Condition(predicate=lambda context: context.launch_configurations.get(MODE) in modes)


def _nodes(graph: GraphDescription) -> list:
    params_file = LaunchConfiguration(PARAMS_FILE)
    entities = []
    for name, node in graph.nodes.items():
        modes = frozenset(mode for mode, entry in graph.modes.items() if name in entry.nodes)
        if not modes:
            continue
        condition = None if modes == set(graph.modes) else _in_modes(modes)
        layer = {"clock_mode": ParameterValue(LaunchConfiguration(CLOCK_MODE), value_type=str)}
        if node.executable == "episode_recorder":
            layer["output_dir"] = ParameterValue(LaunchConfiguration(RECORDING_DIR), value_type=str)
            layer["config_files"] = [[graph.source], [params_file]]
        action = Node(package=PACKAGE, executable=node.executable, name=name,
                      namespace=LaunchConfiguration("namespace"),
                      parameters=[params_file, LaunchConfiguration(MODE_PARAMETERS), layer],
                      remappings=[*graph.remappings, *node.remappings],
                      ros_arguments=["--log-level", LaunchConfiguration("log_level")],
                      output="screen", emulate_tty=True, condition=condition)
        entities.append(action)
        if node.executable in ESSENTIAL:
            entities += _end_graph_without(action, name)
    return entities


def _end_graph_without(action: Node, name: str) -> list:
    """Handlers that end the launch, with the node's reason, when the essential node ``action`` exits with an error."""
    last_error: list[str] = []

    def remember(event) -> None:
        for line in event.text.decode(errors="replace").splitlines():
            if "error" in line.lower():
                last_error[:] = [line.strip()]

    def end(event, context: LaunchContext):
        if event.returncode == 0 or context.is_shutdown:
            return None  # stopped on request (Ctrl-C), or the launch is ending anyway
        why = f": {last_error[0]}" if last_error else ""
        raise EssentialNodeExited(f"{name} exited with code {event.returncode}{why}; the graph cannot run without "
                                  "it, so every node is stopped")

    return [RegisterEventHandler(OnProcessIO(target_action=action, on_stdout=remember, on_stderr=remember)),
            RegisterEventHandler(OnProcessExit(target_action=action, on_exit=end))]
