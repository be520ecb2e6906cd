"""Every relative link in the README and docs/ leads somewhere: the file exists, and a ``#anchor`` names a heading.

Anchors are GitHub's: the heading's text in lower case, punctuation dropped, spaces turned into hyphens, a
repeated heading numbered ``-1``, ``-2``. Links to the web (http, https) are only checked for their form: the
tests never touch the network. Code blocks and inline code are not links and are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); a target may hold one level of balanced parentheses.
_INLINE_LINK = re.compile(r"\]\(\s*(<[^>]*>|(?:[^()\s]|\([^()\s]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s+(<[^>]*>|\S+)")
_HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.I)
_HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:name|id)=\"([^\"]*)\"", re.I)
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")


def _prose_lines(text: str) -> list[str]:
    """The document's lines with fenced code blocks blanked (their line numbers kept)."""
    lines, fence = [], None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text (without the ``-N`` of a repeat)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link or image: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a link into ``path`` may name: its headings' slugs and its explicit HTML anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    lines = _prose_lines(path.read_text())
    for index, line in enumerate(lines):
        heading = None
        if match := _ATX_HEADING.match(line):
            heading = match.group(2)
        elif index > 0 and lines[index - 1].strip() and re.fullmatch(r" {0,3}(=+|-+)\s*", line) \
                and not lines[index - 1].lstrip().startswith(("|", "-", "*", ">")):
            heading = lines[index - 1].strip()  # a setext heading: text underlined with === or ---
        if heading is not None:
            slug = github_slug(heading)
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(_HTML_ANCHOR.findall(line))
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in ``path`` outside code."""
    found = []
    for number, line in enumerate(_prose_lines(path.read_text()), start=1):
        prose = _INLINE_CODE.sub("", line)
        targets = _INLINE_LINK.findall(prose) + _REFERENCE_DEFINITION.findall(prose) + _HTML_LINK.findall(prose)
        found += [(number, target.strip("<>")) for target in targets]
    return found


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """A line per link of ``path`` that leads nowhere, naming the line, the target and why."""
    problems = []
    for number, target in links(path):
        where = f"{path.relative_to(root)}:{number}: {target}"
        parsed = urlparse(target)
        if parsed.scheme in ("http", "https"):
            if not parsed.netloc:
                problems.append(f"{where}: a web link without a host")
            continue
        if parsed.scheme == "mailto":
            continue
        if parsed.scheme or parsed.netloc:
            problems.append(f"{where}: neither a relative link nor a web link")
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        if file_part:
            linked = (root / file_part.lstrip("/")) if file_part.startswith("/") else (path.parent / file_part)
        else:
            linked = path
        if not linked.exists():
            problems.append(f"{where}: no such file")
        elif anchor and linked.is_file() and linked.suffix == ".md" and unquote(anchor) not in anchors(linked):
            problems.append(f"{where}: no heading with the anchor #{anchor} in {linked.relative_to(root)}")
    return problems


def test_the_checker_finds_what_it_should(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Setup: step 1 (`ros2`)\n\n## Setup: step 1 "
                                                "(`ros2`)\n\nTitle\n=====\n\n<a name=\"here\"></a>\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text("\n".join([
        "# Page", "",
        "[ok](other.md) [ok](other.md#setup-step-1-ros2) [ok](other.md#setup-step-1-ros2-1) [ok](other.md#title)",
        "[ok](other.md#here) [ok](#page) [ok](./other.md \"a title\") ![ok](/docs/other.md) [ok](https://x.org/a_(b))",
        "[missing](nothere.md) [bad anchor](other.md#setup) [bad anchor here](#nope) [no host](https://)",
        "`[code](nothere.md)`", "```", "[fenced](nothere.md)", "```",
        "[ref]: missing_too.md"]))
    problems = broken_links(page, tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "nothere.md: no such file", "other.md#setup: no heading with the anchor #setup in docs/other.md",
        "#nope: no heading with the anchor #nope in docs/page.md", "https://: a web link without a host",
        "missing_too.md: no such file"], problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(document):
    problems = broken_links(document)
    assert not problems, "links that lead nowhere:\n" + "\n".join(problems)
