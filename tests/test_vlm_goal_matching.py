"""Head-noun goal matching with multiplicity: one rule for the benchmark and for plan mapping."""

from __future__ import annotations

import pytest

from ladder_ros.vlm.goal_matching import goal_key, head_noun, is_valid_next, match_goals, singular


@pytest.mark.parametrize("phrase, noun", [
    ("the yellow lemon", "lemon"),
    ("lemon", "lemon"),
    ("The Blue Bin", "bin"),
    ("both corn cobs", "cob"),
    ("corn cob", "cob"),
    ("the plate on the left", "plate"),
    ("the left plate", "plate"),
    ("the bowl of fruit", "bowl"),
    ("the cup next to the bowl", "cup"),
    ("the red one", "red"),
    ("the robot's towel", "towel"),
    ("two tomatoes", "tomato"),
    ("the strawberries", "strawberry"),
    ("boxes", "box"),
    ("the glass", "glass"),
    ("knives", "knife"),
    ("eggplant", "eggplant"),
    ("the cookies", "cookie"),
    ("", ""),
    ("the", ""),  # a truncated phrase has no noun
])
def test_head_noun(phrase, noun):
    assert head_noun(phrase) == noun


def test_singular_keeps_words_that_only_look_plural():
    assert singular("citrus") == "citrus"
    assert singular("bus") == "bus"
    assert singular("cubes") == "cube"
    assert singular("dishes") == "dish"


def test_goal_key_uses_both_head_nouns():
    assert goal_key("the orange carrot", "the pink plate") == ("carrot", "plate")


def test_exact_match_is_any_order_with_multiplicity():
    reference = [("cob", "cloth"), ("cob", "cloth"), ("carrot", "plate")]
    m = match_goals([("carrot", "plate"), ("cob", "cloth"), ("cob", "cloth")], reference)
    assert m.exact and not m.in_order and m.missed == 0 and m.invented == 0
    m = match_goals(reference, reference)
    assert m.exact and m.in_order


def test_multiplicity_counts_missed_and_invented():
    reference = [("cob", "cloth"), ("cob", "cloth")]
    assert match_goals([("cob", "cloth")], reference).to_dict() == {
        "exact": False, "in_order": False, "missed": 1, "invented": 0}
    m = match_goals([("cob", "cloth")] * 3 + [("lemon", "bin")], reference)
    assert (m.exact, m.missed, m.invented) == (False, 0, 2)
    m = match_goals([("towel", "cloth")], [("cloth", "towel")])  # a synonym or swap is wrong
    assert (m.missed, m.invented) == (1, 1)


def test_next_subtask_validity():
    reference = [("banana", "bin"), ("orange", "bin"), ("lemon", "plate")]
    achieved = [True, False, False]
    assert is_valid_next(("lemon", "plate"), reference, achieved, order_constrained=False)
    assert not is_valid_next(("lemon", "plate"), reference, achieved, order_constrained=True)
    assert is_valid_next(("orange", "bin"), reference, achieved, order_constrained=True)
    assert not is_valid_next(("banana", "bin"), reference, achieved, order_constrained=False)  # already done
    assert not is_valid_next(("banana", "bin"), reference, [True] * 3, order_constrained=False)
    with pytest.raises(ValueError):
        is_valid_next(("banana", "bin"), reference, [True], order_constrained=False)
