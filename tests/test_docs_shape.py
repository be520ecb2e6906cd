"""The documentation keeps the shape a reader can follow: a short front page, an index that reaches every page, no
page too long to read (the generated reference excepted), and every ``docs/...md`` the code cites leads somewhere.

A citation in the code is ``docs/PAGE.md``, ``docs/PAGE.md#anchor`` (a GitHub anchor, as tests/test_doc_links.py
computes them) or ``docs/PAGE.md, "Section"`` (a heading of that page that starts with the quoted text).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_doc_links import _prose_lines, anchors, links

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference"
README_MAX_LINES = 150
PAGE_MAX_LINES = 400

# docs/x.md, docs/x.md#anchor, docs/x.md, "Section" / ("Section") / 'Section' -- not a path inside another one
# (emanual.robotis.com/docs/en/...).
_CITATION = re.compile(r"(?<![\w/.-])docs/((?:[\w-]+/)*[\w.-]+\.md)(?:#([\w-]+))?(?:,? \(?[\"']([^\"'\n]{1,80})[\"'])?")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _linked_pages(page: Path) -> set[Path]:
    """The .md files the relative links of ``page`` lead to."""
    found = set()
    for _, target in links(page):
        path = target.partition("#")[0].split("?", 1)[0]
        if path and not re.match(r"^[a-z]+:", path):
            found.add((page.parent / path).resolve())
    return found


def _headings(path: Path) -> list[str]:
    """Every heading's text of ``path`` (code blocks skipped), without inline-code backticks."""
    return [m.group(1).replace("`", "") for line in _prose_lines(path.read_text(encoding="utf-8"))
            if (m := _HEADING.match(line))]


def citations(text: str) -> list[tuple[str, str | None, str | None]]:
    """(page under docs/, anchor or None, quoted section or None) of every docs citation in ``text``. A path into a
    folder that docs/ does not have is another repository's (ROBOTIS's e-manual's docs/en/...), not a citation."""
    found = []
    for m in _CITATION.finditer(text):
        folder = m.group(1).split("/")[0] if "/" in m.group(1) else None
        if folder is None or (DOCS / folder).is_dir():
            found.append((m.group(1), m.group(2), m.group(3)))
    return found


def citation_problem(page: str, anchor: str | None, section: str | None) -> str | None:
    """Why a citation leads nowhere, or None."""
    path = DOCS / page
    if not path.is_file():
        return f"docs/{page}: no such page"
    if anchor and anchor not in anchors(path):
        return f"docs/{page}#{anchor}: no heading with that anchor"
    if section and not any(h.lower().startswith(section.lower()) for h in _headings(path)):
        return f"docs/{page}, {section!r}: no heading starting with that text"
    return None


def _code_files() -> list[Path]:
    files = [*sorted((REPO / "ladder_ros").rglob("*.py")), *sorted((REPO / "scripts").glob("*.py")),
             *sorted((REPO / "benchmarks").glob("*.py")), *sorted((REPO / "tests").glob("*.py"))]
    own = {Path(__file__).resolve(), (REPO / "tests" / "test_doc_links.py").resolve()}  # their examples are fictional
    return [f for f in files if f.resolve() not in own]


def test_the_readme_is_a_front_page():
    lines = _lines(REPO / "README.md")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES}: move the rest to docs/"


def test_no_docs_page_is_too_long_to_read():
    long = {str(p.relative_to(REPO)): n for p in _pages() if REFERENCE not in p.parents
            and (n := _lines(p)) > PAGE_MAX_LINES}
    assert not long, f"pages above {PAGE_MAX_LINES} lines (split them along their sections): {long}"


def test_the_index_reaches_every_page():
    index = DOCS / "index.md"
    linked = _linked_pages(index)
    reference_index = (REFERENCE / "README.md").resolve()
    if reference_index in linked:  # the generated pages are reached through their own index
        linked |= _linked_pages(REFERENCE / "README.md")
    missing = [str(p.relative_to(REPO)) for p in _pages() if p.resolve() not in linked and p != index]
    assert not missing, f"docs/index.md does not link: {missing}"


def test_the_readme_sends_each_role_to_its_guide():
    linked = _linked_pages(REPO / "README.md")
    for guide in ("operator.md", "robot_bringup.md", "simulation.md", "extending.md", "index.md"):
        assert (DOCS / guide).resolve() in linked, guide


def test_the_citation_checker_finds_what_it_should():
    text = ('see docs/graph.md, "Layers" and docs/robot_bringup.md#no-camera; docs/graph.md ("QoS"); '
            "docs/nothere.md; docs/graph.md#nothere; docs/graph.md, 'Nothere'; emanual.robotis.com/docs/en/x.md; "
            "ROBOTIS-GIT/emanual docs/en/dxl/x/xm430-w350.md")
    found = citations(text)
    assert found == [("graph.md", None, "Layers"), ("robot_bringup.md", "no-camera", None), ("graph.md", None, "QoS"),
                     ("nothere.md", None, None), ("graph.md", "nothere", None), ("graph.md", None, "Nothere")]
    assert [citation_problem(*c) for c in found] == [
        None, None, None, "docs/nothere.md: no such page", "docs/graph.md#nothere: no heading with that anchor",
        "docs/graph.md, 'Nothere': no heading starting with that text"]


def test_every_docs_page_the_code_cites_leads_somewhere():
    problems = []
    for path in _code_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for citation in citations(line):
                problem = citation_problem(*citation)
                if problem:
                    problems.append(f"{path.relative_to(REPO)}:{number}: {problem}")
    assert not problems, "citations that lead nowhere:\n" + "\n".join(problems)


def test_the_errors_a_newcomer_meets_say_which_guide_section_explains_them(tmp_path):
    import socket

    import pytest

    from ladder_ros.camera.base import CameraError
    from ladder_ros.core.errors import ConfigError
    from ladder_ros.core.orchestrator import Variant
    from ladder_ros.core.suite import load_suite
    from ladder_ros.policies.config import ServerSettings
    from ladder_ros.policies.openpi_remote import OpenPIClient, PolicyUnavailable
    from ladder_ros.robots.franky_arm import MISSING_FRANKY
    from ladder_ros.robots.interbotix_arm import MISSING_INTERBOTIX

    assert MISSING_INTERBOTIX.endswith("(see docs/robot_bringup.md#no-interbotix-workspace)")
    assert MISSING_FRANKY.endswith("(see docs/robot_bringup.md#no-franky)")
    unknown = "(see docs/operator.md#an-unknown-task-or-variant)"
    with pytest.raises(ConfigError) as variant:
        Variant.parse("magic")
    with pytest.raises(ConfigError) as task:
        load_suite(REPO / "config" / "suites" / "tabletop.yaml").task("kitchen_singel_1")
    assert str(variant.value).endswith(unknown) and str(task.value).endswith(unknown)
    opencv = pytest.importorskip("ladder_ros.camera.opencv_camera")
    pytest.importorskip("cv2")
    with pytest.raises(CameraError, match=r"OpenCV cannot open camera .* \(see docs/robot_bringup\.md#no-camera\)$"):
        opencv.OpenCVCamera(str(tmp_path / "no_such_video.mp4")).open()
    with socket.socket() as sock:  # a loopback port nothing listens on: the connection is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(PolicyUnavailable, match=r"\(see docs/robot_bringup\.md#a-policy-server-that-does-not-answer\); "
                                                r"retrying in"):
        OpenPIClient(ServerSettings(port=port)).ensure_connected()
    for cited in ("robot_bringup.md#no-interbotix-workspace", "robot_bringup.md#no-franky",
                  "robot_bringup.md#no-camera", "robot_bringup.md#a-policy-server-that-does-not-answer",
                  "operator.md#not-enough-disk", "operator.md#an-unknown-task-or-variant"):
        assert citation_problem(*cited.split("#"), None) is None, cited
