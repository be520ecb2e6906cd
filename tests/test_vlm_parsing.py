"""Reply parsing as deployed: the last strict JSON object, and nothing unreadable becomes a value."""

from __future__ import annotations

import json

import pytest

from ladder_ros.core.verification import MAX_COUNT
from ladder_ros.vlm.parsing import (json_objects, last_json_object, parse_count, parse_next_subtask,
                                    parse_plan)


@pytest.mark.parametrize("reply, count", [
    ('Two carrots rest on the plate.\n{"count": 2}', 2),
    ('```json\n{"count": 1}\n```', 1),
    ('I counted: one banana in the bin.\n```json\n{\n  "count": 1\n}\n```\nDone.', 1),
    ('Example: {"count": 5}. Looking again, only one.\n{"count": 1}', 1),  # the last object wins
    ('{"count": 3.0}', 3),  # an integral float is an integer
    ('{"count": 0}', 0),
    ('{"reasoning": {"seen": ["carrot"]}, "count": 1}', 1),  # nested objects stay inside the top level
])
def test_counts_are_read_from_the_last_json_object(reply, count):
    assert parse_count(reply).count == count
    assert parse_count(reply).error is None


@pytest.mark.parametrize("reply, fragment", [
    ("I see two carrots.", "no JSON object"),
    ("{count: 2}", "no JSON object"),  # not strict JSON
    ("{'count': 2}", "no JSON object"),
    ('{"count": NaN}', "no JSON object"),
    ('{"count": 2,}', "no JSON object"),
    ('{"count": "2"}', "integer"),
    ('{"count": -1}', "non-negative"),
    ('{"count": 1.5}', "integer"),
    ('{"count": true}', "integer"),
    ('{"number": 2}', "no 'count'"),
    ('{"count": 2} and then {"other": 1}', "no 'count'"),  # the LAST object decides
    ("", "no JSON object"),
])
def test_unreadable_counts_are_none_with_a_reason(reply, fragment):
    parsed = parse_count(reply)
    assert parsed.count is None
    assert fragment in parsed.error


def test_no_text_is_no_count():
    assert parse_count(None).count is None


def test_json_objects_skips_broken_openings_and_reports_top_level_only():
    text = 'noise { not json } {"a": {"b": 1}} tail {"c": [1, {"d": 2}]}'
    assert json_objects(text) == [{"a": {"b": 1}}, {"c": [1, {"d": 2}]}]
    assert last_json_object("[1, 2]") is None  # a list is not an object


PLAN = ('Two goals.\n```json\n{"goals": [{"goal": "put the yellow lemon in the blue bin", "object": "the yellow '
        'lemon", "destination": "the blue bin"}, {"goal": "put the carrot on the plate", "object": "the orange '
        'carrot", "destination": "the white plate"}]}\n```')


def test_plan_is_read_with_every_goal():
    parsed = parse_plan(PLAN)
    assert parsed.error is None
    assert [g.object for g in parsed.goals] == ["the yellow lemon", "the orange carrot"]
    assert parsed.goals[1].goal == "put the carrot on the plate"


def test_an_empty_plan_is_a_plan():
    assert parse_plan('{"goals": []}').goals == ()


@pytest.mark.parametrize("reply", [
    '{"goals": [{"goal": "x", "object": "lemon"}]}',  # no destination
    '{"goals": [{"goal": "x", "object": "", "destination": "bin"}]}',
    '{"goals": "put the lemon in the bin"}',
    '{"plan": []}',
    "The plan is to put the lemon in the bin.",
])
def test_a_malformed_plan_is_unreadable_as_a_whole(reply):
    parsed = parse_plan(reply)
    assert parsed.goals is None and parsed.error


def test_next_subtask_reads_a_goal_or_done():
    parsed = parse_next_subtask('The lemon is done.\n{"goal": "put the orange in the bin", "object": "the orange", '
                                '"destination": "the bin"}')
    assert parsed.goal.object == "the orange" and not parsed.task_done
    done = parse_next_subtask('All done. {"goal": null, "object": null, "destination": null}')
    assert done.goal is None and done.task_done and done.error is None
    partial = parse_next_subtask('{"goal": null, "object": "the orange", "destination": null}')
    assert partial.goal is None and not partial.task_done and partial.error


# Hostile replies: each is a parse failure with a reason, never an exception, and takes time linear in
# its length (the bounds live in parsing.LIMITS).
HOSTILE = [
    ("nested brackets after a key", '{"count": ' + "[" * 1500, "nested deeper than 16"),
    ("balanced deep nesting", '{"count": ' + "[" * 1500 + "]" * 1500 + "}", "nested deeper than 16"),
    ("nested objects", '{"a":' * 5000 + "1" + "}" * 5000, "nested deeper than 16"),
    ("a wall of braces", "{" * 60_000, "nested deeper than 16"),
    ("unclosed objects repeated", '{"count": 1, ' * 5000, "nested deeper than 16"),
    ("interleaved openers", "{[" * 30_000, "nested deeper than 16"),
    ("quotes and braces", '{"' * 30_000, "nested deeper than 16"),
    ("longer than a reply is read", "carrot " * 10_000 + '{"count": 1}', "more than the 65536"),
    ("an overflowing number", '{"count": 1e999}', "out of range"),
    ("a number of thousands of digits", '{"count": ' + "9" * 5000 + "}", "5000 digits"),
    ("a degenerate tail after an answer", '{"count": 1} and then ' + "[{" * 40, "nested deeper"),
]


@pytest.mark.parametrize("case, reply, fragment", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_replies_are_parse_failures_never_exceptions(case, reply, fragment):
    for parsed in (parse_count(reply), parse_plan(reply), parse_next_subtask(reply)):
        value = getattr(parsed, "count", None) or getattr(parsed, "goals", None) or getattr(parsed, "goal", None)
        assert value is None and fragment in parsed.error, (case, parsed.error)


def test_depth_within_the_limit_is_read():
    nested = '{"count": 1, "why": ' + '{"a": ' * 10 + "0" + "}" * 10 + "}"
    assert parse_count(nested).count == 1


@pytest.mark.parametrize("field", ["goal", "object", "destination"])
def test_runaway_goal_fields_and_plans_are_degenerate(field):
    goal = {"goal": "put the carrot on the plate", "object": "the carrot", "destination": "the plate"}
    goal[field] = "very " * 200 + "long"
    assert "more than 512" in parse_plan(json.dumps({"goals": [goal]})).error
    assert "more than 512" in parse_next_subtask(json.dumps(goal)).error
    many = {"goals": [{"goal": "g", "object": "carrot", "destination": "plate"}] * 101}
    assert "101 goals, more than 100" in parse_plan(json.dumps(many)).error


def test_next_subtask_fields_are_stripped_of_whitespace():
    parsed = parse_next_subtask('{"goal": "  put the orange in the bin\\n", "object": "\\tthe orange ", '
                                '"destination": " the blue bin"}')
    assert parsed.goal.to_dict() == {"goal": "put the orange in the bin", "object": "the orange",
                                     "destination": "the blue bin"}
    blank = parse_next_subtask('{"goal": "put the orange in the bin", "object": "  ", "destination": "the bin"}')
    assert blank.goal is None and "'object'" in blank.error


def test_plan_goal_fields_are_stripped_of_whitespace():
    parsed = parse_plan('{"goals": [{"goal": " put the lemon in the bin ", "object": "the lemon\\n", '
                        '"destination": "  the bin"}]}')
    assert parsed.goals[0].to_dict() == {"goal": "put the lemon in the bin", "object": "the lemon",
                                         "destination": "the bin"}


def test_a_parsed_goal_travels_as_a_dict():
    from ladder_ros.vlm.parsing import ParsedGoal

    goal = ParsedGoal("put the lemon in the bin", "the yellow lemon", "the blue bin")
    assert goal.to_dict() == {"goal": "put the lemon in the bin", "object": "the yellow lemon",
                              "destination": "the blue bin"}
    assert ParsedGoal.from_dict(goal.to_dict()) == goal


@pytest.mark.parametrize("parse, reply, error", [
    (parse_count, None, "no reply text"),
    (parse_count, "two carrots", "no JSON object in the reply"),
    (parse_count, '{"number": 2}', "the last JSON object has no 'count': {'number': 2}"),
    (parse_count, '{"count": -1}', "count must be a non-negative integer, got -1"),
    (parse_plan, None, "no reply text"),
    (parse_plan, "a plan", "no JSON object in the reply"),
    (parse_plan, '{"plan": []}', "the last JSON object has no 'goals' list: {'plan': []}"),
    (parse_plan, '{"goals": ["put the lemon in the bin"]}', "goal 1 is not an object: 'put the lemon in the bin'"),
    (parse_plan, '{"goals": [{"goal": "a", "object": "b", "destination": "c"}, {"goal": "d", "object": "e"}]}',
     "goal 2 needs a non-empty string 'destination', got None"),
    (parse_next_subtask, None, "no reply text"),
    (parse_next_subtask, "the orange", "no JSON object in the reply"),
    (parse_next_subtask, '{"goal": "x", "object": 3, "destination": "bin"}',
     "the next subtask needs a non-empty string 'object', got 3"),
])
def test_an_unreadable_reply_says_exactly_why(parse, reply, error):
    parsed = parse(reply)
    assert parsed.error == error
    assert getattr(parsed, "count", None) is None and getattr(parsed, "goals", None) is None
    assert getattr(parsed, "goal", None) is None and not getattr(parsed, "task_done", False)


def test_a_long_value_in_an_error_is_shortened():
    parsed = parse_plan('{"plan": "' + "x" * 300 + '"}')
    assert parsed.error.startswith("the last JSON object has no 'goals' list: {'plan': 'xxx")
    assert parsed.error.endswith("...") and len(parsed.error) == len("the last JSON object has no 'goals' list: ") + 120


def test_an_object_right_after_a_broken_opening_is_found():
    assert json_objects('{{"a": 1}') == [{"a": 1}]
    assert json_objects('{ {"a": 1}') == [{"a": 1}]


def test_a_value_of_exactly_the_limit_is_not_shortened():
    from ladder_ros.vlm.parsing import _short

    exact = "x" * 118  # its repr, with the quotes, is 120 characters
    assert _short(exact) == repr(exact)
    assert _short(exact + "y") == repr(exact + "y")[:117] + "..."


# ------------------------------------------------------------------ the bracket scanner against a reference
def _reference_end(text: str, start: int, max_depth: int):
    """Character by character, what the scanner documents: strings read as JSON reads them (an escape skips
    the next character, a raw control character ends the search), brackets matched, the depth bounded;
    (end, characters examined, refusal)."""
    stack: list[str] = []
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while True:
                if i >= len(text):
                    return None, len(text) - start, None
                d = text[i]
                if d == "\\":
                    i += 2
                elif d == '"':
                    i += 1
                    break
                elif ord(d) < 0x20:
                    return None, i + 1 - start, None
                else:
                    i += 1
            continue
        i += 1
        if c in "{[":
            stack.append("}" if c == "{" else "]")
            if len(stack) > max_depth:
                return None, i - start, f"JSON nested deeper than {max_depth} levels (at character {i - 1})"
        elif c in "}]":
            if not stack or stack.pop() != c:
                return None, i - start, None
            if not stack:
                return i, i - start, None
    return None, len(text) - start, None


def test_the_bracket_scanner_matches_a_character_by_character_reading_of_random_text():
    import numpy as np

    from ladder_ros.vlm.parsing import ParseLimits, _balanced_end

    rng = np.random.default_rng(7)
    alphabet = list('{}[]"\\a \x01')
    for _ in range(3000):
        text = "{" + "".join(rng.choice(alphabet, size=int(rng.integers(0, 24))))
        depth = int(rng.integers(1, 5))
        got = _balanced_end(text, 0, ParseLimits(max_depth=depth))
        assert (got.end, got.scanned, got.rejected) == _reference_end(text, 0, depth), (text, depth)


def _reference_scan(text: str, limits):
    """scan_objects as documented: at each '{' the balanced end, decoded strictly; a found object is skipped
    whole; the characters examined are bounded by scan_budget times the reply's length."""
    budget = limits.scan_budget * max(len(text), 1)
    found = []
    index = text.find("{")
    while index != -1:
        end, scanned, rejected = _reference_end(text, index, limits.max_depth)
        budget -= scanned
        if rejected:
            return found, f"degenerate reply: {rejected}"
        if budget < 0:
            return found, ("degenerate reply: too many unbalanced brackets to read it within "
                           f"{limits.scan_budget}x its length")
        if end is None:
            index = text.find("{", index + 1)
            continue
        try:
            value = json.loads(text[index:end])
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = end
        index = text.find("{", index)
    return found, None


def test_the_object_scan_matches_its_reference_on_random_replies_and_budgets():
    import numpy as np

    from ladder_ros.vlm.parsing import ParseLimits, scan_objects

    rng = np.random.default_rng(11)
    pieces = ['{"a": 1}', '{"b": [1, 2]}', "{", "}", "[", "]", '"', "x", " ", '{"c": "}"}', '{"d": {"e": 2}}']
    for _ in range(2000):
        text = "".join(rng.choice(pieces, size=int(rng.integers(0, 10))))
        limits = ParseLimits(max_depth=int(rng.integers(1, 4)), scan_budget=int(rng.integers(1, 4)))
        scan = scan_objects(text, limits)
        assert (list(scan.objects), scan.error) == _reference_scan(text, limits), (text, limits)


def test_each_parsing_limit_is_inclusive_and_refused_one_past_it():
    from ladder_ros.vlm.parsing import LIMITS, _short, scan_objects

    digits = "1" * LIMITS.max_number_chars
    # 32 digits are read as a number (then refused as more objects than any scene holds, not as a degenerate reply)
    assert parse_count('{"count": %s}' % digits).error == f"count must be at most {MAX_COUNT}, got {digits}"
    assert parse_count('{"count": %s1}' % digits).error == "degenerate reply: a number of 33 digits (more than 32)"
    fraction = "1." + "5" * (LIMITS.max_number_chars - 2)  # 32 characters: read, then refused as no integer
    assert parse_count('{"count": %s}' % fraction).error.startswith("count must be an integer, got 1.555")
    too_long = parse_count('{"count": %s5}' % fraction).error
    assert too_long == "degenerate reply: a number of 33 characters (more than 32)"
    assert json_objects('{"a": 1} {"b": %s1}' % digits) == []  # a degenerate reply gives no objects at all
    longest = '{"a": 1}' + " " * (LIMITS.max_reply_chars - 8)
    assert scan_objects(longest).objects == ({"a": 1},) and scan_objects(longest).error is None
    assert scan_objects(longest + " ").error == ("the reply is 65537 characters, more than the 65536 a reply is "
                                                 "read up to (degenerate)")
    assert scan_objects(longest + " ").objects == ()
    goal = {"goal": "g" * LIMITS.max_field_chars, "object": "o", "destination": "d"}
    assert parse_plan(json.dumps({"goals": [goal]})).goals[0].goal == goal["goal"]
    plan = {"goals": [{"goal": "g", "object": "o", "destination": "d"}] * LIMITS.max_goals}
    assert len(parse_plan(json.dumps(plan)).goals) == LIMITS.max_goals
    assert _short(None) == "None" and _short("x" * 200) == repr("x" * 200)[:117] + "..."
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert _short(deep) == "<list>"  # repr of a structure nested past Python's recursion limit
