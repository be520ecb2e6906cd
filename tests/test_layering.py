"""Imports run one way: a package of ``ladder_ros`` imports only from packages below it.

The layers, lowest first (docs/graph.md, "Layers"): the pure core; the paths and the instruments' names; the
backends and documents that need only the core; the simulators, policies, depth and recordings built on those;
where messages meet core types and the graph's specs (topics, parameters); the process runtime of a node; the
nodes; the instruments that stand in for the world (twins, experts, fake servers); the tools that start or join
graphs; the evaluation that drives graphs and simulators; the command line. A module may import its own
package and any lower layer, never a layer above or beside it, so the core never learns about ROS and a node
never depends on an evaluation tool.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ladder_ros"
LAYERS = [
    {"core"},
    {"paths", "instrument_registry"},
    {"messages", "camera", "robots", "vlm"},
    {"ros_env", "depth", "sim", "policies", "recording"},
    {"ros_conversions", "interface_conversions", "specs"},
    {"runtime"},
    {"nodes"},
    {"instruments"},
    {"panel", "bringup"},
    {"evaluation"},
    {"cli", "__init__"},
]
# The packages that may import the simulation and rehearsal instruments; the product reaches them by name
# (ladder_ros/instrument_registry.py, ladder_ros/runtime/executables.py), never by an import.
INSTRUMENT_USERS = {"instruments", "bringup", "evaluation", "cli", "__init__"}
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def _imported_packages(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ladder_ros."):
            yield node.lineno, node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ladder_ros."):
                    yield node.lineno, alias.name.split(".")[1]


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def test_every_package_has_a_layer():
    packages = {_package_of(p) for p in PACKAGE.rglob("*.py")}
    assert packages <= set(LEVEL), f"packages without a layer in this test: {sorted(packages - set(LEVEL))}"


def test_imports_only_run_downward():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _package_of(path)
        for line, target in _imported_packages(path):
            if target != source and LEVEL.get(target, -1) >= LEVEL[source]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports {target}")
    assert not upward, "imports that run upward or sideways:\n" + "\n".join(upward)


def test_the_product_never_imports_an_instrument():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line}"
                 for path in sorted(PACKAGE.rglob("*.py")) if _package_of(path) not in INSTRUMENT_USERS
                 for line, target in _imported_packages(path) if target == "instruments"]
    assert not offenders, "product modules that import ladder_ros.instruments:\n" + "\n".join(offenders)


def test_node_classes_compose_rather_than_inherit_mixins():
    """A node's class derives from rclpy's Node (or another node of the package), never from a mixin."""
    allowed = {"Node", "RobotDriverNode", "Protocol", "Exception", "RuntimeError", "ValueError", "Enum", "str",
               "NamedTuple", "object", "Generic"}
    mixed = []
    for path in sorted((PACKAGE / "nodes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases}
                if bases - allowed:
                    mixed.append(f"{path.relative_to(PACKAGE.parent)}: {node.name}({', '.join(sorted(bases))})")
    assert not mixed, "classes in nodes/ with a base other than Node or a pure interface:\n" + "\n".join(mixed)


def test_no_node_file_outgrows_a_few_screens():
    long = [f"{path.relative_to(PACKAGE.parent)}: {n} lines" for path in sorted((PACKAGE / "nodes").rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > 400]
    assert not long, "files in nodes/ above 400 lines (split the node into objects it composes):\n" + "\n".join(long)


def _architecture():
    import importlib.util

    path = PACKAGE.parent / "scripts" / "draw_architecture.py"
    spec = importlib.util.spec_from_file_location("draw_architecture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_drawing_of_the_imports_has_no_circle_and_nothing_running_up():
    _, facts = _architecture().architecture()
    assert facts["upward"] == 0
    assert facts["cycles"] == [], f"import circles between modules: {facts['cycles']}"


def test_the_architecture_picture_in_docs_graph_md_is_current():
    drawing = _architecture()
    block, _ = drawing.architecture()
    assert drawing.current_block(drawing.DOC.read_text()) == block, \
        "docs/graph.md's architecture picture is out of date: run scripts/draw_architecture.py"
