"""Typed errors raised inside the project; nodes turn them into structured failures at the boundary."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterable, Mapping


class LadderError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(LadderError, ValueError):
    """A configuration file or value is malformed; the message names the file and the key."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        where = ""
        if source and key:
            where = f"{source}: {key}: "
        elif source:
            where = f"{source}: "
        elif key:
            where = f"{key}: "
        super().__init__(f"{where}{message}")


class InvalidInputError(LadderError, ValueError):
    """A run-time input (sensor value, action, reply) is out of range or not a number."""


# Where tasks, variants and the other names a plan or a command gives are explained (tests/test_docs_shape.py checks
# that it resolves).
UNKNOWN_NAME_GUIDE = "docs/operator.md#an-unknown-task-or-variant"


def unknown_name(kind: str, name: str, valid: "list[str] | tuple[str, ...]", see: str = "") -> ConfigError:
    """The error for a name that is not one of a fixed set: it lists the valid names, and ``see`` (a docs section,
    empty: none) says where the names are explained."""
    return ConfigError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(valid))}" + (f" (see {see})" if see else ""))


def did_you_mean(name: str, valid: "Iterable[str]") -> str:
    """``"; did you mean 'x'?"`` for the valid name closest to a misspelt one, or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_keys(mapping: "Mapping[str, object]", valid: "Iterable[str]", *, source: str | None, where: str = "") -> None:
    """Refuse keys of ``mapping`` that are not in ``valid``, naming the file, the key and the nearest valid key.

    A misspelt key is never silently ignored: it would leave its setting at the default.
    """
    allowed = list(valid)
    for key in mapping:
        if key not in allowed:
            path = f"{where}.{key}" if where else str(key)
            raise ConfigError(f"unknown key{did_you_mean(str(key), allowed)} (valid: {', '.join(sorted(allowed))})",
                              source=source, key=path)


def read_text(path: "str | Path", what: str) -> str:
    """The UTF-8 text of a file, or a :class:`ConfigError` naming the file and what it was for."""
    source = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} not found", source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text: {exc.reason}", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", source=source) from None


def read_yaml(path: "str | Path", what: str) -> Any:
    """The parsed YAML of a file; a missing file or bad YAML is a :class:`ConfigError` naming the file and line."""
    import yaml

    text = read_text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}invalid YAML: {problem}", source=str(path)) from None
