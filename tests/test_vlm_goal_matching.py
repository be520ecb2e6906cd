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


# The card: matching is on head nouns "so wording differences don't count as errors; a genuine synonym
# still scores as wrong". Each row is a wording of a goal's object or destination and the noun it must
# match; the rules, not single cases: remarks in brackets, clauses after punctuation, post-modifiers,
# relational nouns, trailing colours, quantities, case, hyphens, plurals, accents.
WORDING = [
    # parenthetical and bracketed remarks
    ("the corn (yellow)", "corn"), ("corn cob (the yellow one)", "cob"), ("the plate [left]", "plate"),
    ("(yellow) corn", "corn"), ("the corn (yellow", "corn"), ("the bowl (blue (dark))", "bowl"),
    ("the lemon {citrus}", "lemon"),
    # a second clause after a comma, semicolon, colon or dash
    ("the corn, the yellow one", "corn"), ("the blue bowl; left", "bowl"), ("the bowl: blue", "bowl"),
    ("the bowl - blue", "bowl"), ("the bowl \u2014 the blue one", "bowl"), ("the sponge \u2013 green", "sponge"),
    # prepositional phrases, relative clauses and participles after the noun
    ("the plate that is on the left", "plate"), ("the cup which is empty", "cup"),
    ("the bowl located near the sink", "bowl"), ("the towel lying on the table", "towel"),
    ("the bowl closest to the robot", "bowl"), ("the mug for coffee", "mug"), ("the pot over there", "pot"),
    # destinations given with their preposition, and relational or partitive nouns
    ("into the pot", "pot"), ("on top of the plate", "plate"), ("in front of the bowl", "bowl"),
    ("the middle of the cloth", "cloth"), ("a slice of bread", "bread"), ("the inside of the basket", "basket"),
    # trailing colours after a noun; a colour that is the only noun stays
    ("the corn yellow", "corn"), ("the plate white", "plate"), ("the orange", "orange"),
    ("the red orange", "orange"), ("the light green sponge", "sponge"),
    # quantities, articles, case, punctuation, hyphens, plurals, accents
    ("2 carrots", "carrot"), ("THE CARROT.", "carrot"), ("the yellow-green bowl", "bowl"),
    ("both of the spoons", "spoon"), ("shoes", "shoe"), ("the lenses", "lens"), ("the jalape\u00f1os", "jalape\u00f1o"),
    ("the robot\u2019s towel", "towel"),
]


@pytest.mark.parametrize("phrase, noun", WORDING)
def test_wording_differences_keep_the_head_noun(phrase, noun):
    assert head_noun(phrase) == noun


@pytest.mark.parametrize("predicted, reference", [
    (("the corn (yellow)", "the cloth"), ("corn", "cloth")),
    (("yellow corn, the big one", "on top of the blue cloth"), ("corn", "cloth")),
    (("The Carrot (orange)", "into the pot"), ("carrot", "pot")),
])
def test_a_reworded_goal_matches_its_reference(predicted, reference):
    assert goal_key(*predicted) == goal_key(*reference)
    assert match_goals([goal_key(*predicted)], [goal_key(*reference)]).exact


@pytest.mark.parametrize("predicted, reference", [
    ("the dish", "plate"), ("the cob", "corn"), ("the towel", "cloth"), ("the mug", "cup"),
])
def test_a_genuine_synonym_still_scores_as_wrong(predicted, reference):
    assert head_noun(predicted) != head_noun(reference)


def test_a_runaway_phrase_is_read_within_bounds():
    assert head_noun("the " + "very " * 100_000 + "long corn") == "very"  # read up to 512 characters, whole words
    assert head_noun("(" * 10_000 + "corn") == ""
