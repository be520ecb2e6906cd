"""docs/reference/ is what the code gives: regenerating the pages changes nothing, and they cover everything.

The pages (parameters, topics, messages, the command line) are rendered from the specs, the interface files and
the argparse parsers by scripts/generate_reference.py; a change to any of those without running it fails here.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from ladder_ros.bringup.graph import NODE_PARAMETERS
from ladder_ros.bringup.reference import parse_interface
from ladder_ros.cli import SUBCOMMANDS
from ladder_ros.specs import topics

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "generate_reference.py"
INTERFACE_DIR = REPO / "interfaces" / topics.INTERFACES


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("generate_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages(generator):
    return {path.name: text for path, text in generator.generate().items()}


def test_the_committed_pages_are_what_the_code_gives(generator):
    pages = generator.generate()
    stale = generator.stale_pages(pages)
    names = ", ".join(str(path.relative_to(REPO)) for path in stale)
    assert not stale, ("docs/reference/ is out of date with the code: run .venv/bin/python "
                       f"scripts/generate_reference.py and commit the result. Stale: {names}")


def test_the_pages_do_not_depend_on_the_terminal(generator, pages, monkeypatch):
    monkeypatch.setenv("COLUMNS", "37")
    again = {path.name: text for path, text in generator.generate().items()}
    assert again == pages


def test_every_node_and_parameter_has_a_row(pages):
    page = pages["parameters.md"]
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    assert list(sections) == list(NODE_PARAMETERS)
    for node, specs in NODE_PARAMETERS.items():
        rows = re.findall(r"^\| `([^`]+)` \|", sections[node], re.M)
        assert rows == [spec.name for spec in specs], node
    # a range and a choice list as a reader sees them
    depth = sections["depth"]
    assert re.search(r"^\| `resolution_level` \| int \| `9` \| \[0, 9\] \|", depth, re.M)
    assert re.search(r"^\| `fp16` \| str \| `\"auto\"` \| `auto`, `on`, `off` \|", depth, re.M)


def test_every_topic_and_service_is_listed(pages):
    page = pages["topics.md"]
    listed = re.findall(r"^\| \[`([^`]+)`\]\(#", page, re.M)
    assert listed == [spec.name for spec in topics.TOPICS]
    for spec in topics.TOPICS:
        assert f"- publishers: {spec.publisher.replace('<', '&lt;')}\n" in page, spec.name
    services = re.findall(r"^\| `([^`]+)` \| `std_srvs", page, re.M)
    assert services == [name for name, *_ in topics.SERVICES]


def test_every_message_and_field_is_listed(pages):
    page = pages["messages.md"]
    files = sorted(INTERFACE_DIR.glob("msg/*.msg")) + sorted(INTERFACE_DIR.glob("srv/*.srv"))
    assert files, f"no interface files under {INTERFACE_DIR}"
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    assert list(sections) == [f.stem for f in files]
    for path in files:
        declared = [line.split()[1].split("=")[0] for line in path.read_text().splitlines()
                    if line.strip() and not line.startswith("#") and line.strip() != "---"]
        rows = re.findall(r"^\| `([^`]+)` \|", sections[path.stem], re.M)
        assert sorted(rows) == sorted(declared), path.name


def test_interface_comments_go_to_the_file_and_to_the_element_below_them(tmp_path):
    path = tmp_path / "Example.srv"
    path.write_text("# What the service does.\n# Second line.\nuint8 MODE_A=1  # the first mode\n\n"
                    "# The goal's name.\nstring name\nint32[] values\n---\n# Whether it worked.\nbool ok true\n")
    parsed = parse_interface(path)
    assert (parsed.name, parsed.kind) == ("Example", "srv")
    assert parsed.comment == ["What the service does.", "Second line."]
    request, response = parsed.parts
    assert [(e.type, e.name, e.value, e.comment) for e in request] == [
        ("uint8", "MODE_A", "1", ["the first mode"]), ("string", "name", None, ["The goal's name."]),
        ("int32[]", "values", None, [])]
    assert [(e.type, e.name, e.value, e.comment) for e in response] == [
        ("bool", "ok", None, ["Whether it worked.", "default: true"])]


def test_every_command_and_subcommand_has_its_help(pages):
    page = pages["cli.md"]
    headings = re.findall(r"^##+ (ladder-ros.*)$", page, re.M)
    assert headings[0] == "ladder-ros"
    assert [h.split()[1] for h in headings[1:] if len(h.split()) == 2] == list(SUBCOMMANDS)
    assert "ladder-ros recording info" in headings and "ladder-ros calibrate intrinsics" in headings
    for command in SUBCOMMANDS:
        assert f"usage: ladder-ros {command} " in page, command
