"""Reply parsing as deployed: the last strict JSON object in the reply.

The deployed prompts ask for visible reasoning first ("First write one short line ...") and STRICT
JSON last, and models often wrap the JSON in a code fence or echo an example object in their
reasoning. So the parser takes the last top-level JSON object in the text, wherever it sits, and
reads it with a strict decoder (no NaN, no Infinity, no trailing commas, no single quotes).

Anything that does not parse gives a result whose value is None and whose ``error`` says why; the
caller records the raw reply and treats None as "not complete" (``core.verification.is_complete``).
Nothing here retries or guesses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.verification import check_count


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, strict=True)


def json_objects(text: str) -> list[dict]:
    """Every top-level JSON object in ``text``, in order of appearance.

    Scans left to right; at each ``{`` it tries to decode one object and, on success, continues
    after it, so objects nested inside a found object are not reported separately.
    """
    found: list[dict] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = _DECODER.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return found


def last_json_object(text: str | None) -> dict | None:
    """The last top-level strict JSON object in ``text``, or None when there is none."""
    if not text:
        return None
    objects = json_objects(text)
    return objects[-1] if objects else None


@dataclass(frozen=True)
class ParsedCount:
    count: int | None
    error: str | None = None


def parse_count(text: str | None) -> ParsedCount:
    """``{"count": <integer>}`` from a verification reply (Appendix C)."""
    if text is None:
        return ParsedCount(None, "no reply text")
    obj = last_json_object(text)
    if obj is None:
        return ParsedCount(None, "no JSON object in the reply")
    if "count" not in obj:
        return ParsedCount(None, f"the last JSON object has no 'count': {_short(obj)}")
    try:
        return ParsedCount(check_count(obj["count"]))
    except InvalidInputError as exc:
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
        values[key] = value.strip()
    return ParsedGoal(**values)


@dataclass(frozen=True)
class ParsedPlan:
    goals: tuple[ParsedGoal, ...] | None
    error: str | None = None


def parse_plan(text: str | None) -> ParsedPlan:
    """``{"goals": [{"goal", "object", "destination"}, ...]}`` from a planning reply (Appendix C).

    An empty list is a valid plan (the prompt asks for one when the task is already done); any
    malformed goal makes the whole plan unreadable rather than silently dropping that goal.
    """
    if text is None:
        return ParsedPlan(None, "no reply text")
    obj = last_json_object(text)
    if obj is None:
        return ParsedPlan(None, "no JSON object in the reply")
    goals = obj.get("goals")
    if not isinstance(goals, list):
        return ParsedPlan(None, f"the last JSON object has no 'goals' list: {_short(obj)}")
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
    if text is None:
        return ParsedNextSubtask(None, error="no reply text")
    obj = last_json_object(text)
    if obj is None:
        return ParsedNextSubtask(None, error="no JSON object in the reply")
    if all(key in obj and obj[key] is None for key in ("goal", "object", "destination")):
        return ParsedNextSubtask(None, task_done=True)
    try:
        return ParsedNextSubtask(_goal_from(obj, "the next subtask"))
    except InvalidInputError as exc:
        return ParsedNextSubtask(None, error=str(exc))


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
