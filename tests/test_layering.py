"""Imports run one way: a package of ``ladder_ros`` imports only from packages below it.

The layers, lowest first (docs/graph.md, "Files"): the pure core; the backends and documents that need only
the core; the simulators, policies, depth and recordings built on those; the one module where messages
meet core types; the nodes; the tools that start or join graphs; the evaluation that drives graphs and
simulators; the command line. A module may import its own package and any lower layer, never a layer
above or beside it, so the core never learns about ROS and a node never depends on an evaluation tool.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ladder_ros"
LAYERS = [
    {"core"},
    {"paths", "messages", "camera", "robots", "vlm"},
    {"ros_env", "depth", "sim", "policies", "recording"},
    {"ros_conversions", "interface_conversions"},
    {"nodes"},
    {"panel", "bringup"},
    {"evaluation"},
    {"cli", "__init__"},
]
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
