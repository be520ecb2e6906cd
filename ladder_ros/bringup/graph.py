"""Graph descriptions: which nodes a deployment runs, with which parameters, remappings and namespace.

One YAML file per deployment under ``config/graphs/`` is read both by the launch files (on a robot
with ``ros2 launch``) and by ``ladder-ros up`` (wherever ``ros2 launch`` is not installed, as on
CI). Its format (``schema_version: 1``)::

    graph: widowx                      # the name ``ladder-ros up widowx`` finds it by
    description: one line
    namespace: widowx                  # every node and topic lives under /widowx
    params_file: widowx_params.yaml    # ROS params YAML, relative to config/
    nodes:                             # name -> executable (ladder_ros.nodes.<executable>)
      orchestrator: {executable: orchestrator, remappings: {from: to}}
    remappings: {}                     # applied to every node
    modes:                             # real versus simulation: a launch argument, not a code branch
      sim:  {clock_mode: lockstep,   nodes: [sim_bridge, policy, ...]}
      real: {clock_mode: wall_clock, nodes: [policy, ...], requires: [robot driver ...]}
      twin: {clock_mode: wall_clock, nodes: [widowx_twin, ...], parameters: {node: {param: value}}}

A mode's ``parameters`` are that mode's own values for some nodes' parameters, layered over the
params file (and under ``--set``): the rehearsal mode (``twin``) runs the robot graph with what stands
in for the arm, the camera and the policy server switched, and those switches are written in one place.

A mode may name its own ``params_file`` (relative to ``config/``), used instead of the graph's when
no other params file is given: the Franka graph's simulation runs the scripted expert and the oracle
verifier where the robot runs pi0.5-DROID and Gemini, and each deployment keeps one params file.

Every error names the file and the key. The params file is checked against the nodes' parameter
specs (:mod:`ladder_ros.specs.parameters`) before any process starts.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from ladder_ros.core.errors import ConfigError, check_keys, did_you_mean
from ladder_ros.messages import CLOCK_MODES
from ladder_ros.instruments.specs import INSTRUMENT_NODE_PARAMETERS
from ladder_ros.specs.parameters import NODE_PARAMETERS as PRODUCT_NODE_PARAMETERS
from ladder_ros.specs.parameters import check_node_parameters, check_shared_parameters, check_verifier_deadline
from ladder_ros.paths import share_path
from ladder_ros.runtime.executables import node_module

GRAPH_SCHEMA_VERSION = 1
GRAPH_KEYS = ("schema_version", "graph", "description", "namespace", "params_file", "nodes", "remappings", "modes")
MODES = ("sim", "real", "twin")
# Every executable a graph may start: the product's nodes and the instruments' (twins, rehearsal server).
NODE_PARAMETERS = {**PRODUCT_NODE_PARAMETERS, **INSTRUMENT_NODE_PARAMETERS}


@dataclass(frozen=True)
class NodeEntry:
    name: str
    executable: str
    remappings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ModeEntry:
    clock_mode: str
    nodes: tuple[str, ...]
    requires: tuple[str, ...] = ()  # nodes from other packages this mode needs (robot driver, camera)
    params_file: Path | None = None  # this mode's own params file (None: the graph's)
    parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # the mode's own values, per node


@dataclass(frozen=True)
class NodeLaunch:
    """One node of a brought-up graph: its name, module and ``--ros-args``."""

    name: str
    executable: str
    ros_args: tuple[str, ...]

    def command(self, python: str = sys.executable) -> list[str]:
        return [python, "-m", node_module(self.executable), "--ros-args", *self.ros_args]


@dataclass(frozen=True)
class GraphDescription:
    name: str
    source: str
    description: str
    namespace: str
    params_file: Path
    nodes: Mapping[str, NodeEntry]
    modes: Mapping[str, ModeEntry]
    remappings: tuple[tuple[str, str], ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def mode(self, mode: str) -> ModeEntry:
        if mode not in self.modes:
            raise ConfigError(f"graph {self.name!r} has no mode {mode!r}; it has: {', '.join(sorted(self.modes))}",
                              source=self.source)
        return self.modes[mode]

    def params_file_for(self, mode: str) -> Path:
        """The params file ``mode`` runs with when none is given: its own, or the graph's."""
        return self.mode(mode).params_file or self.params_file

    @property
    def has_mode_params_files(self) -> bool:
        return any(entry.params_file is not None for entry in self.modes.values())

    def node_parameters(self, mode: str, params_file: Path | None = None,
                        overrides: Mapping[str, Mapping[str, Any]] | None = None,
                        namespace: str | None = None) -> dict[str, dict[str, Any]]:
        """Each node's checked parameters for ``mode`` (params file, then mode clock, then overrides).

        The params file is checked as the nodes will read it: every section must name a node of this
        graph (or ``/**``), every parameter must be one of that node's, and values must have the exact
        type ROS 2 accepts (an integer for a double is refused, naming file, node and parameter).
        Overrides are this package's own (``--set``), written for the nodes with the right type.
        """
        entry = self.mode(mode)
        params_file = params_file or self.params_file_for(mode)
        sections = read_params_file(params_file)
        ns = (self.namespace if namespace is None else namespace).strip("/")
        self._check_sections(sections, params_file, {ns, self.namespace})
        overrides = overrides or {}
        unknown = sorted(set(overrides) - set(entry.nodes))
        if unknown:
            raise ConfigError(f"no node {unknown[0]!r} in mode {mode} of graph {self.name}"
                              f"{did_you_mean(unknown[0], entry.nodes)}; nodes: {', '.join(entry.nodes)}")
        every = sections.get("/**", {})
        known_anywhere = {s.name for node in self.nodes.values() for s in NODE_PARAMETERS[node.executable]}
        for key in every:
            if key not in known_anywhere and key != "use_sim_time":
                raise ConfigError(f"unknown parameter /**.{key}: no node of graph {self.name} has it"
                                  f"{did_you_mean(key, known_anywhere)}", source=str(params_file))
        result = {}
        for name in entry.nodes:
            node = self.nodes[name]
            known = {s.name for s in NODE_PARAMETERS[node.executable]}
            values: dict[str, Any] = {k: v for k, v in every.items() if k in known}
            for key in _section_keys(name, ns):
                section = sections.get(key)
                if section is not None:
                    values.update(section)
            from_file = set(values)
            values.update(entry.parameters.get(name, {}))
            values["clock_mode"] = entry.clock_mode
            values.update(overrides.get(name, {}))
            strict = from_file - set(overrides.get(name, {})) - set(entry.parameters.get(name, {})) - {"clock_mode"}
            try:
                result[name] = check_node_parameters(node.executable, values, name, strict=strict,
                                                     table=NODE_PARAMETERS)
            except ConfigError as exc:
                raise ConfigError(str(exc), source=str(params_file)) from None
        try:
            check_shared_parameters(result)
        except ConfigError as exc:
            raise ConfigError(str(exc), source=str(params_file)) from None
        by_executable = {self.nodes[name].executable: name for name in entry.nodes}
        if "orchestrator" in by_executable and "vlm_verifier" in by_executable:
            orchestrator, verifier = by_executable["orchestrator"], by_executable["vlm_verifier"]
            try:
                check_verifier_deadline(result[orchestrator], result[verifier], (orchestrator, verifier))
            except ConfigError as exc:
                raise ConfigError(str(exc), source=str(params_file)) from None
        return result

    def _check_sections(self, sections: Mapping[str, Any], params_file: Path, namespaces: set[str]) -> None:
        """Every section of a params file names ``/**`` or a node of this graph; a misspelt one is refused."""
        valid = {"/**"} | {key for name in self.nodes for ns in namespaces for key in _section_keys(name, ns)}
        for key in sections:
            if key not in valid:
                raise ConfigError(f"unknown node section{did_you_mean(key, valid)} (graph {self.name} has the "
                                  f"nodes {', '.join(self.nodes)}; a section is /**, NAME, /NAME, /**/NAME or "
                                  f"/NAMESPACE/NAME)", source=str(params_file), key=key)

    def config_files(self, params_file: Path | None = None, mode: str | None = None) -> list[str]:
        """The files a recording of this graph keeps verbatim: the description and the params file (the
        one given, else ``mode``'s, else the graph's)."""
        default = self.params_file_for(mode) if mode is not None else self.params_file
        return [str(Path(self.source).resolve()), str(Path(params_file or default).resolve())]

    def launches(self, mode: str, params_file: Path | None = None,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None,
                 namespace: str | None = None, work_dir: Path | None = None) -> list[NodeLaunch]:
        """The nodes of ``mode`` as ``--ros-args`` command lines; the parameters are checked first.

        The mode's clock and the overrides go into a second params file written to ``work_dir``
        (default: a new temporary folder), given after the graph's own: of two params files the
        later wins, whereas a ``-p`` override does not beat a node's section in a params file.
        """
        entry = self.mode(mode)
        params_file = params_file or self.params_file_for(mode)
        checked = self.node_parameters(mode, params_file, overrides, namespace)
        ns = (self.namespace if namespace is None else namespace).strip("/")
        work_dir = Path(work_dir) if work_dir is not None else make_work_dir()
        work_dir.mkdir(parents=True, exist_ok=True)
        layer = {"/**": {"ros__parameters": {"clock_mode": entry.clock_mode}}}
        for name in entry.nodes:
            keys = [*entry.parameters.get(name, {}), *(overrides or {}).get(name, {})]
            if keys:  # as checked: `--set x=60` for a decimal parameter is written as 60.0
                layer[f"/**/{name}"] = {"ros__parameters": {key: checked[name][key] for key in keys}}
        layer_file = work_dir / f"{self.name}_{mode}_overrides.yaml"
        layer_file.write_text(yaml.safe_dump(layer, sort_keys=True), encoding="utf-8")
        launches = []
        for name in entry.nodes:
            node = self.nodes[name]
            args = ["-r", f"__node:={name}"]
            if ns:
                args += ["-r", f"__ns:=/{ns}"]
            args += ["--params-file", str(params_file), "--params-file", str(layer_file)]
            for src, dst in (*self.remappings, *node.remappings):
                args += ["-r", f"{src}:={dst}"]
            launches.append(NodeLaunch(name=name, executable=node.executable, ros_args=tuple(args)))
        return launches


def _section_keys(name: str, ns: str) -> tuple[str, ...]:
    """The params-file sections that address node ``name`` in namespace ``ns``, in the order they apply."""
    keys = (f"/**/{name}", name, f"/{name}")
    return keys + ((f"/{ns}/{name}", f"{ns}/{name}") if ns else ())


WORK_DIR_PREFIX = "ladder_graph_"


def make_work_dir() -> Path:
    """A temporary folder for a bringup's generated params file, named after this process.

    The bringup removes it when it stops; folders of processes that died without cleaning up (a
    SIGKILL) are removed by the next bringup (:func:`remove_stale_work_dirs`).
    """
    remove_stale_work_dirs()
    return Path(tempfile.mkdtemp(prefix=f"{WORK_DIR_PREFIX}{os.getpid()}_"))


def remove_stale_work_dirs() -> None:
    """Remove this user's bringup folders whose process is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{WORK_DIR_PREFIX}*"):
        pid = folder.name[len(WORK_DIR_PREFIX):].split("_", 1)[0]
        try:
            if not pid.isdigit() or folder.stat().st_uid != os.getuid() or _alive(int(pid)):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _load_yaml(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} not found", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", source=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"{where}invalid YAML: {getattr(exc, 'problem', None) or exc}", source=str(path)) from None


def read_params_file(path: Path) -> dict[str, dict[str, Any]]:
    """A ROS params file as {node key: {parameter: value}}; malformed files are named errors."""
    data = _load_yaml(Path(path), "params file")
    if not isinstance(data, dict):
        raise ConfigError("a params file maps node names to {ros__parameters: {...}}", source=str(path))
    sections = {}
    for key, body in data.items():
        if not isinstance(body, dict) or "ros__parameters" not in body or not isinstance(body["ros__parameters"], dict):
            raise ConfigError("expected a mapping with a 'ros__parameters' mapping", source=str(path), key=str(key))
        sections[str(key)] = _flatten(body["ros__parameters"])
    return sections


def _flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def graph_names() -> list[str]:
    try:
        folder = share_path("config", "graphs")
    except ConfigError:
        return []
    return sorted(p.stem for p in folder.glob("*.yaml"))


def find_graph(name_or_path: str) -> Path:
    """A graph by name (``config/graphs/<name>.yaml``) or by path; unknown names list the valid ones."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise ConfigError("graph description not found", source=str(path))
        return path
    names = graph_names()
    if name_or_path not in names:
        raise ConfigError(f"unknown graph {name_or_path!r}; valid: {', '.join(names) or '(none found)'}")
    return share_path("config", "graphs", f"{name_or_path}.yaml")


def _pairs(value: Any, source: str, key: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError("expected a mapping from topic to topic", source=source, key=key)
    return tuple(value.items())


def _config_path(graph_file: Path, name: str) -> Path:
    """A params file named in a graph description: absolute, or relative to config/."""
    params = Path(name)
    return params if params.is_absolute() else graph_file.parent.parent / params


def load_graph(name_or_path: str) -> GraphDescription:
    """Read and validate a graph description."""
    path = find_graph(name_or_path)
    source = str(path)
    data = _load_yaml(path, "graph description")
    if not isinstance(data, dict):
        raise ConfigError("a graph description is a mapping", source=source)
    check_keys(data, GRAPH_KEYS, source=source)
    if data.get("schema_version") != GRAPH_SCHEMA_VERSION:
        raise ConfigError(f"unsupported schema_version {data.get('schema_version')!r}; this version reads "
                          f"{GRAPH_SCHEMA_VERSION}", source=source, key="schema_version")
    for key in ("graph", "params_file"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ConfigError("missing or not a string", source=source, key=key)
    namespace = data.get("namespace", "")
    if not isinstance(namespace, str):
        raise ConfigError("must be a string", source=source, key="namespace")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, dict) or not raw_nodes:
        raise ConfigError("expected a mapping of node name to {executable: ...}", source=source, key="nodes")
    nodes = {}
    for name, body in raw_nodes.items():
        where = f"nodes.{name}"
        if not isinstance(body, dict) or not isinstance(body.get("executable"), str):
            raise ConfigError("expected {executable: NAME}", source=source, key=where)
        check_keys(body, ("executable", "remappings"), source=source, where=where)
        if body["executable"] not in NODE_PARAMETERS:
            raise ConfigError(f"unknown executable {body['executable']!r}; valid: {', '.join(sorted(NODE_PARAMETERS))}",
                              source=source, key=f"{where}.executable")
        nodes[str(name)] = NodeEntry(name=str(name), executable=body["executable"],
                                     remappings=_pairs(body.get("remappings"), source, f"{where}.remappings"))
    raw_modes = data.get("modes")
    if not isinstance(raw_modes, dict) or not raw_modes:
        raise ConfigError("expected a mapping with sim and/or real", source=source, key="modes")
    modes = {}
    for mode, body in raw_modes.items():
        where = f"modes.{mode}"
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}", source=source, key=where)
        if not isinstance(body, dict) or body.get("clock_mode") not in CLOCK_MODES:
            raise ConfigError(f"clock_mode must be one of {', '.join(CLOCK_MODES)}", source=source,
                              key=f"{where}.clock_mode")
        check_keys(body, ("clock_mode", "nodes", "requires", "params_file", "parameters"), source=source,
                   where=where)
        listed = body.get("nodes")
        if not isinstance(listed, list) or not listed:
            raise ConfigError("expected a list of node names", source=source, key=f"{where}.nodes")
        for n in listed:
            if n not in nodes:
                raise ConfigError(f"unknown node {n!r}; the graph has: {', '.join(nodes)}", source=source,
                                  key=f"{where}.nodes")
        requires = body.get("requires", [])
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
            raise ConfigError("expected a list of strings", source=source, key=f"{where}.requires")
        mode_params = body.get("params_file")
        if mode_params is not None and (not isinstance(mode_params, str) or not mode_params):
            raise ConfigError("must be a params file name (relative to config/)", source=source,
                              key=f"{where}.params_file")
        parameters = body.get("parameters", {})
        if not isinstance(parameters, dict) or not all(
                isinstance(node, str) and isinstance(values, dict) for node, values in parameters.items()):
            raise ConfigError("expected a mapping of node name to {parameter: value}", source=source,
                              key=f"{where}.parameters")
        for node in parameters:
            if node not in listed:
                raise ConfigError(f"node {node!r} is not in this mode{did_you_mean(node, listed)}", source=source,
                                  key=f"{where}.parameters")
        modes[mode] = ModeEntry(clock_mode=body["clock_mode"], nodes=tuple(listed), requires=tuple(requires),
                                params_file=_config_path(path, mode_params) if mode_params else None,
                                parameters={node: dict(values) for node, values in parameters.items()})
    params = _config_path(path, data["params_file"])
    return GraphDescription(name=data["graph"], source=source, description=str(data.get("description", "")),
                            namespace=namespace.strip("/"), params_file=params, nodes=nodes, modes=modes,
                            remappings=_pairs(data.get("remappings"), source, "remappings"), raw=data)


def check_referenced_files(params: Mapping[str, Mapping[str, Any]]) -> None:
    """Load the files the nodes will read (task suites) now, so a bad one stops the bringup before any start.

    ``params`` is :meth:`GraphDescription.node_parameters`' result; errors name the node parameter
    and the file. In simulation the policy's actions must be ones the simulator takes: a
    joint-position policy on the tabletop is refused here, with the reason, not step by step.
    """
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import resolve_share_file

    suites = {}
    for node, values in params.items():
        if values.get("suite"):
            try:
                suites[node] = load_suite(resolve_share_file(values["suite"]))
            except ConfigError as exc:
                raise ConfigError(f"parameter {node}.suite: {exc}") from None
    bridge, policy = params.get("sim_bridge"), params.get("policy")
    if bridge is not None and policy is not None and "sim_bridge" in suites:
        from ladder_ros.policies.factory import load_policy
        from ladder_ros.sim.registry import check_action_kind

        entries = [(f"policy.policies[{i}]", entry) for i, entry in enumerate(policy.get("policies") or [])]
        for name, entry in entries or [("policy.policy", policy["policy"])]:  # every policy the node serves
            try:
                config = load_policy(entry)
                check_action_kind(bridge["simulator"], suites["sim_bridge"], config.action.kind, config.name)
            except ConfigError as exc:
                raise ConfigError(f"parameter {name}: {exc}") from None


def parse_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    """``node.param=value`` strings (values read as YAML) into {node: {param: value}}."""
    result: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, text = item.partition("=")
        node, dot, param = target.partition(".")
        if not sep or not dot or not node or not param:
            raise ConfigError(f"--set expects NODE.PARAM=VALUE, got {item!r}")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        result.setdefault(node, {})[param] = value
    return result
