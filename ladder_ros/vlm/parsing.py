"""Reply parsing as deployed: the last strict JSON object in the reply, read within fixed limits.

The deployed prompts ask for visible reasoning first ("First write one short line ...") and STRICT
JSON last, and models often wrap the JSON in a code fence or echo an example object in their
reasoning. So the parser takes the last top-level JSON object in the text, wherever it sits, and
reads it with a strict decoder (no NaN, no Infinity, no trailing commas, no single quotes).

Everything a model can send is read within :data:`LIMITS`, the one place the bounds live: the
reply's length, the nesting depth of any JSON in it, the length of a number, of a goal's text and
of a plan, and the work spent looking for objects. A degenerate reply (kilobytes of nested
brackets, a runaway plan) is a parse failure with a reason, never a ``RecursionError``, and takes
time linear in its length.

Anything that does not parse gives a result whose value is None and whose ``error`` says why; the
caller records the raw reply and the failure. Nothing here retries, guesses or raises.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.verification import check_count


@dataclass(frozen=True)
class ParseLimits:
    """The bounds of reply parsing (project choices; each far above what a deployed prompt asks for).

    ``max_reply_chars``: 8192 output tokens (the largest cap, the card's planning default) are at
    most some 40k characters of real text. ``max_depth``: the deployed formats nest three deep
    (``{"goals": [{...}]}``). ``max_number_chars``: a count needs a few digits. ``max_field_chars``:
    a goal sentence is one line. ``max_goals``: the paper's longest tasks have ten subgoals
    (Appendix D). ``scan_budget``: characters examined while looking for objects, as a multiple of
    the reply's length, so hostile text cannot make the search quadratic.
    """

    max_reply_chars: int = 65_536
    max_depth: int = 16
    max_number_chars: int = 32
    max_field_chars: int = 512
    max_goals: int = 100
    scan_budget: int = 32


LIMITS = ParseLimits()


class _Rejected(ValueError):
    """A candidate object broke a limit; the whole reply is then degenerate."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _bounded_int(text: str) -> int:
    if len(text) > LIMITS.max_number_chars:
        raise _Rejected(f"a number of {len(text)} digits (more than {LIMITS.max_number_chars})")
    return int(text)


def _finite_float(text: str) -> float:
    if len(text) > LIMITS.max_number_chars:
        raise _Rejected(f"a number of {len(text)} characters (more than {LIMITS.max_number_chars})")
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"a number out of range ({text})")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_bounded_int, parse_float=_finite_float,
                            strict=True)
_STRUCTURE = re.compile(r'[{}\[\]"]')  # what changes nesting, outside strings
_IN_STRING = re.compile(r'["\\\x00-\x1f]')  # what ends or escapes a string, or cannot be in one (strict)
_CLOSER = {"{": "}", "[": "]"}


@dataclass(frozen=True)
class _Candidate:
    end: int | None  # one past the closing brace, when the brackets balance
    scanned: int  # characters examined
    rejected: str | None = None  # a limit this candidate broke


def _balanced_end(text: str, start: int, limits: ParseLimits) -> _Candidate:
    """Where the object opening at ``text[start] == '{'`` closes, reading strings as JSON does.

    Only brackets and strings are looked at (the decoder checks the grammar afterwards), so the
    cost is the distance to the closing brace or to the first sign that there is none.
    """
    stack: list[str] = []
    pos = start
    while True:
        match = _STRUCTURE.search(text, pos)
        if match is None:
            return _Candidate(None, len(text) - start)
        char, pos = match.group(), match.end()
        if char == '"':
            while True:
                inner = _IN_STRING.search(text, pos)
                if inner is None or inner.group() not in '"\\':
                    return _Candidate(None, (len(text) if inner is None else inner.end()) - start)
                pos = inner.end() + (1 if inner.group() == "\\" else 0)
                if inner.group() == '"':
                    break
        elif char in _CLOSER:
            stack.append(_CLOSER[char])
            if len(stack) > limits.max_depth:
                return _Candidate(None, pos - start, f"JSON nested deeper than {limits.max_depth} levels "
                                                     f"(at character {pos - 1})")
        elif not stack or stack.pop() != char:
            return _Candidate(None, pos - start)
        elif not stack:
            return _Candidate(pos, pos - start)


@dataclass(frozen=True)
class ObjectScan:
    """The top-level JSON objects of a reply, or why the reply is degenerate."""

    objects: tuple[dict, ...]
    error: str | None = None


def scan_objects(text: str, limits: ParseLimits = LIMITS) -> ObjectScan:
    """Every top-level JSON object in ``text``, in order of appearance, within ``limits``.

    At each ``{`` it finds the balanced end, decodes that span strictly and, on success, continues
    after it, so objects nested inside a found object are not reported separately. A reply longer
    than the limit, or holding JSON nested deeper than the limit or with an absurd number, is
    degenerate: the scan stops and says why.
    """
    if len(text) > limits.max_reply_chars:
        return ObjectScan((), f"the reply is {len(text)} characters, more than the {limits.max_reply_chars} "
                              "a reply is read up to (degenerate)")
    budget = limits.scan_budget * max(len(text), 1)
    found: list[dict] = []
    index = text.find("{")
    while index != -1:
        candidate = _balanced_end(text, index, limits)
        budget -= candidate.scanned
        if candidate.rejected:
            return ObjectScan(tuple(found), f"degenerate reply: {candidate.rejected}")
        if budget < 0:
            return ObjectScan(tuple(found), "degenerate reply: too many unbalanced brackets to read it "
                                            f"within {limits.scan_budget}x its length")
        if candidate.end is None:
            index = text.find("{", index + 1)
            continue
        try:
            value, end = _DECODER.raw_decode(text[:candidate.end], index)
        except _Rejected as exc:
            return ObjectScan(tuple(found), f"degenerate reply: {exc}")
        except (ValueError, RecursionError):  # RecursionError cannot happen within max_depth; belt and braces
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return ObjectScan(tuple(found))


def json_objects(text: str) -> list[dict]:
    """Every top-level JSON object in ``text`` (none when the reply is degenerate)."""
    scan = scan_objects(text)
    return [] if scan.error else list(scan.objects)


def last_json_object(text: str | None) -> dict | None:
    """The last top-level strict JSON object in ``text``, or None when there is none."""
    obj, _ = _last_object(text)
    return obj


def _last_object(text: str | None) -> tuple[dict | None, str | None]:
    """The last top-level object, or None with the reason."""
    if text is None:
        return None, "no reply text"
    scan = scan_objects(text)
    if scan.error:
        return None, scan.error
    if not scan.objects:
        return None, "no JSON object in the reply"
    return scan.objects[-1], None


@dataclass(frozen=True)
class ParsedCount:
    count: int | None
    error: str | None = None


def parse_count(text: str | None) -> ParsedCount:
    """``{"count": <integer>}`` from a verification reply (Appendix C)."""
    obj, error = _last_object(text)
    if obj is None:
        return ParsedCount(None, error)
    if "count" not in obj:
        return ParsedCount(None, f"the last JSON object has no 'count': {_short(obj)}")
    try:
        return ParsedCount(check_count(obj["count"]))
    except InvalidInputError as exc:  # the message names the value
        return ParsedCount(None, str(exc))


@dataclass(frozen=True)
class ParsedGoal:
    """One goal as the model named it: a sentence, the object it moves and where it goes."""

    goal: str
    object: str
    destination: str

    def to_dict(self) -> dict:
        return {"goal": self.goal, "object": self.object, "destination": self.destination}

    @classmethod
    def from_dict(cls, data: dict) -> "ParsedGoal":
        return cls(str(data["goal"]), str(data["object"]), str(data["destination"]))


def _goal_from(obj: Any, where: str) -> ParsedGoal:
    if not isinstance(obj, dict):
        raise InvalidInputError(f"{where} is not an object: {_short(obj)}")
    values = {}
    for key in ("goal", "object", "destination"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise InvalidInputError(f"{where} needs a non-empty string {key!r}, got {_short(value)}")
        if len(value) > LIMITS.max_field_chars:
            raise InvalidInputError(f"{where}: {key!r} is {len(value)} characters, more than "
                                    f"{LIMITS.max_field_chars} (degenerate)")
        values[key] = value.strip()
    return ParsedGoal(**values)


@dataclass(frozen=True)
class ParsedPlan:
    goals: tuple[ParsedGoal, ...] | None
    error: str | None = None


def parse_plan(text: str | None) -> ParsedPlan:
    """``{"goals": [{"goal", "object", "destination"}, ...]}`` from a planning reply (Appendix C).

    An empty list is a valid plan (the prompt asks for one when the task is already done); any
    malformed goal makes the whole plan unreadable rather than silently dropping that goal, and so
    does a plan longer than ``LIMITS.max_goals``.
    """
    obj, error = _last_object(text)
    if obj is None:
        return ParsedPlan(None, error)
    goals = obj.get("goals")
    if not isinstance(goals, list):
        return ParsedPlan(None, f"the last JSON object has no 'goals' list: {_short(obj)}")
    if len(goals) > LIMITS.max_goals:
        return ParsedPlan(None, f"the plan has {len(goals)} goals, more than {LIMITS.max_goals} (degenerate)")
    try:
        return ParsedPlan(tuple(_goal_from(g, f"goal {i + 1}") for i, g in enumerate(goals)))
    except InvalidInputError as exc:
        return ParsedPlan(None, str(exc))


@dataclass(frozen=True)
class ParsedNextSubtask:
    goal: ParsedGoal | None
    task_done: bool = False
    error: str | None = None


def parse_next_subtask(text: str | None) -> ParsedNextSubtask:
    """``{"goal", "object", "destination"}`` from a next-subtask reply; all three null means done."""
    obj, error = _last_object(text)
    if obj is None:
        return ParsedNextSubtask(None, error=error)
    if all(key in obj and obj[key] is None for key in ("goal", "object", "destination")):
        return ParsedNextSubtask(None, task_done=True)
    try:
        return ParsedNextSubtask(_goal_from(obj, "the next subtask"))
    except InvalidInputError as exc:
        return ParsedNextSubtask(None, error=str(exc))


def _short(value: Any, limit: int = 120) -> str:
    """A bounded repr: a hostile value is never rendered whole (nor deeper than the parser reads)."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
