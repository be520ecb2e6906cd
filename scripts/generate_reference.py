#!/usr/bin/env python3
"""Write the reference pages of docs/reference/ from the code: parameters, topics, messages, the command line.

    .venv/bin/python scripts/generate_reference.py           # write the pages
    .venv/bin/python scripts/generate_reference.py --check   # exit 1, naming them, when a page is out of date

The pages are rendered by :mod:`ladder_ros.bringup.reference`; the ``ladder-ros`` parsers are built here, as
``ladder_ros/cli.py`` builds them, since the command line is the package's top layer. Run it after changing a
parameter, topic, message or command option; tests/test_reference_docs.py fails until the pages match.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ladder_ros import cli  # noqa: E402
from ladder_ros.bringup.reference import reference_pages  # noqa: E402
from ladder_ros.specs.topics import INTERFACES  # noqa: E402

REFERENCE_DIR = REPO / "docs" / "reference"
INTERFACE_DIR = REPO / "interfaces" / INTERFACES


def command_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser ``ladder-ros`` builds when ``chosen`` is its subcommand: that one registered in full, the
    others as one-line stubs (``ladder_ros/cli.py`` ``_build_parser``, without parsing)."""
    parser = argparse.ArgumentParser(prog="ladder-ros", description=cli.__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in cli.SUBCOMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def generate() -> dict[Path, str]:
    """Every reference page's path and the text the code gives now."""
    pages = reference_pages(INTERFACE_DIR, command_parser(None), {name: command_parser(name)
                                                                  for name in cli.SUBCOMMANDS})
    return {REFERENCE_DIR / name: text for name, text in pages.items()}


def stale_pages(pages: dict[Path, str]) -> list[Path]:
    """The pages whose file is missing or differs from ``pages``."""
    return [path for path, text in pages.items() if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is out of date")
    args = parser.parse_args(argv)
    pages = generate()
    stale = stale_pages(pages)
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is out of date: run scripts/generate_reference.py", file=sys.stderr)
        return 1 if stale else 0
    REFERENCE_DIR.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.write_text(pages[path])
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
