"""Reply-parsing rules the other parsing tests leave open (found by mutation testing).

Each test calls the function it pins directly, in its own thread: mutmut runs, for each mutant, only the
tests that called the mutated function while it traced them.
"""

from __future__ import annotations

import numpy as np

from ladder_ros.vlm.parsing import ParseLimits, _balanced_end, last_json_object, scan_objects
from tests.test_vlm_parsing import _reference_end


# ------------------------------------------------------------------ the bracket scanner away from the reply's start
def test_a_too_deep_object_is_refused_with_the_characters_examined_from_its_own_opening_brace():
    for offset in range(0, 40, 3):
        for depth in range(1, 6):
            text = "x" * offset + "{" + "[" * depth + " tail"
            got = _balanced_end(text, offset, ParseLimits(max_depth=depth))
            expected = (None, depth + 1, f"JSON nested deeper than {depth} levels (at character {offset + depth})")
            assert (got.end, got.scanned, got.rejected) == expected, (offset, depth)


def test_the_bracket_scanner_matches_its_reference_from_every_opening_brace_of_random_text():
    rng = np.random.default_rng(13)
    alphabet = list('{}[]"\\a \x01')
    refusals_past_the_start = 0
    for _ in range(1500):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(1, 30))))
        depth = int(rng.integers(1, 5))
        for start in (i for i, c in enumerate(text) if c == "{"):
            got = _balanced_end(text, start, ParseLimits(max_depth=depth))
            assert (got.end, got.scanned, got.rejected) == _reference_end(text, start, depth), (text, start, depth)
            refusals_past_the_start += bool(start and got.rejected)
    assert refusals_past_the_start > 100  # the draw does reach refusals that start inside the text


# ------------------------------------------------------------------ a degenerate reply after objects were found
def test_a_refused_number_keeps_the_objects_found_before_it_as_a_refused_depth_does():
    digits = "1" * 33
    by_number = scan_objects('{"a": 1} text {"b": [2]} then {"c": %s}' % digits)
    assert by_number.objects == ({"a": 1}, {"b": [2]})
    assert by_number.error == "degenerate reply: a number of 33 digits (more than 32)"
    by_fraction = scan_objects('{"a": 1} {"c": 1.%s}' % digits)
    assert by_fraction.objects == ({"a": 1},)
    assert by_fraction.error == "degenerate reply: a number of 35 characters (more than 32)"
    by_depth = scan_objects('{"a": 1} text {"b": [2]} then {"c": ' + "[" * 16)
    assert by_depth.objects == ({"a": 1}, {"b": [2]})
    assert by_depth.error == "degenerate reply: JSON nested deeper than 16 levels (at character 51)"  # the last bracket


# ------------------------------------------------------------------ last_json_object
def test_the_last_json_object_is_the_last_top_level_object_of_the_reply():
    assert last_json_object('{"count": 1}') == {"count": 1}
    assert last_json_object('Example: {"count": 5}. Looking again:\n```json\n{"count": 1, "why": {"a": [2]}}\n```') == {
        "count": 1, "why": {"a": [2]}}
    assert last_json_object('{"a": 1} {broken') == {"a": 1}


def test_no_text_no_object_or_a_degenerate_reply_has_no_last_json_object():
    for text in (None, "", "two carrots", "[1, 2]", '{"count": NaN}', '{"a": 1} {"b": ' + "9" * 33 + "}",
                 '{"a": 1} ' + "[{" * 20, "x" * 70_000 + '{"a": 1}'):
        assert last_json_object(text) is None, text
