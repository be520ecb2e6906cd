"""Head-noun matching of (object, destination) goals, with multiplicity.

One rule serves the offline benchmark and the mapping of a VLM plan onto a task's subgoals, so the
two never disagree. The benchmark card: "Goal matching for decomposition and next_subtask is on
(object, destination) head nouns with multiplicity, so wording differences don't count as errors;
a genuine synonym still scores as wrong". The planner is told to name objects by colour and kind
("the yellow lemon"), so the head noun is the kind: the last word before any modifier that follows
the noun, in the singular. What follows the noun and is dropped: a parenthetical or bracketed
remark ("the corn (yellow)"), anything after a comma, semicolon, colon or dash ("the corn, the
yellow one"), a prepositional phrase or relative clause ("the plate on the left", "the cup that is
empty"), a participle ("the bowl located near the sink"), and trailing colour words after a noun
("the corn yellow"). A relational or partitive word before "of" gives way to what follows ("on
top of the plate" -> "plate", "a slice of bread" -> "bread", "both of the spoons" -> "spoon").
Quantities, articles, case, hyphens and plurals are wording too ("both corn cobs" -> "cob"). A
different noun is never rewritten: "dish" does not match "plate".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

# A noun phrase's head comes before any prepositional phrase or clause that modifies it.
_PREPOSITIONS = frozenset({
    "of", "on", "in", "into", "onto", "at", "with", "from", "to", "near", "beside", "by", "under",
    "behind", "next", "inside", "above", "below", "that", "which", "who", "where", "for", "over",
    "beneath", "underneath", "toward", "towards", "around", "between", "atop", "within", "upon",
    "without", "against", "across", "along", "beyond", "among", "opposite", "outside",
})
# Participles that introduce a modifier after the noun ("the bowl located near the sink").
_POST_MODIFIERS = frozenset({"located", "sitting", "lying", "resting", "placed", "standing", "positioned",
                             "kept", "found", "shown", "seen", "currently", "closest", "nearest", "farthest",
                             "furthest"})
# Nouns that name a part or an amount of what follows "of": "on top of the plate", "a slice of bread".
_RELATIONAL = frozenset({"top", "front", "middle", "center", "centre", "inside", "interior", "surface",
                         "piece", "slice", "bunch", "pair", "chunk", "stick", "bit", "half", "sheet", "handful"})
# Words that can end a phrase without being its noun ("the red one", "the bowl itself"), and
# determiners, which a truncated phrase ("the") can end with.
_TRAILING_NON_NOUNS = frozenset({"one", "ones", "itself", "please", "the", "a", "an", "both", "all", "each",
                                 "every", "some", "this", "that", "these", "those", "its", "their"})
_DETERMINERS = frozenset({"the", "a", "an", "both", "all", "each", "every", "some", "this", "that", "these",
                          "those", "its", "their", "two", "three", "four", "five", "one", "another", "other"})
# Colour words that may trail a noun ("the corn yellow"); dropped only when a noun comes before them,
# so "the orange" stays an orange.
_COLOURS = frozenset({"red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white",
                      "grey", "gray", "silver", "gold", "golden", "beige", "violet", "cyan", "magenta", "dark",
                      "light", "colored", "coloured"})
_IRREGULAR_PLURALS = {
    "knives": "knife", "leaves": "leaf", "loaves": "loaf", "halves": "half", "shelves": "shelf",
    "mice": "mouse", "geese": "goose", "teeth": "tooth", "feet": "foot", "children": "child",
    "people": "person", "cookies": "cookie", "pies": "pie", "ties": "tie", "movies": "movie",
    "shoes": "shoe", "toes": "toe", "canoes": "canoe", "hoes": "hoe", "oboes": "oboe", "lenses": "lens",
    "buses": "bus",
}
# Singular words that look plural.
_INVARIANT = frozenset({"glass", "grass", "bus", "citrus", "asparagus", "hummus", "couscous", "lens",
                        "cactus", "octopus", "series", "species", "dice", "chess", "lettuce"})
_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}")
_CLAUSE_BREAK = re.compile(r"[,;:(\[{]|\s[-\u2013\u2014]+\s|[\u2013\u2014]")
_WORD = re.compile(r"[^\W\d_]+")
MAX_PHRASE_CHARS = 512  # a phrase is read up to this long (reply parsing bounds goal fields the same way)


def singular(word: str) -> str:
    """The singular of a lower-case English noun, by the common suffix rules."""
    if word in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[word]
    if word in _INVARIANT or len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "zes", "sses", "oes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def _first_clause(phrase: str) -> str:
    """The phrase without bracketed remarks and without what follows a comma, colon or dash."""
    text = phrase.lower()
    if len(text) > MAX_PHRASE_CHARS:
        text = text[:MAX_PHRASE_CHARS].rsplit(None, 1)[0]  # whole words only
    for _ in range(8):  # nested brackets, innermost first; bounded
        stripped = _BRACKETED.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    for part in _CLAUSE_BREAK.split(text):
        if _WORD.search(part):
            return part
    return ""


def head_noun(phrase: str) -> str:
    """The head noun of a short noun phrase, lower-case and singular; '' when there is none."""
    words = _WORD.findall(_first_clause(phrase).replace("'s", "").replace("\u2019s", ""))
    # "on top of the plate", "a slice of bread", "both of the spoons": the head is what follows "of".
    for index in range(len(words) - 1):
        if (words[index] in _RELATIONAL or words[index] in _DETERMINERS) and words[index + 1] == "of" and \
                all(w in _DETERMINERS or w in _PREPOSITIONS for w in words[:index]):
            words = words[index + 2:]
            break
    while words and words[0] in _PREPOSITIONS:  # a destination given as "into the pot"
        words = words[1:]
    for index, word in enumerate(words):
        if index > 0 and (word in _PREPOSITIONS or word in _POST_MODIFIERS):
            words = words[:index]
            break
    while words and words[-1] in _TRAILING_NON_NOUNS:
        words.pop()
    while len(words) > 1 and words[-1] in _COLOURS and any(
            w not in _COLOURS and w not in _DETERMINERS for w in words[:-1]):
        words.pop()
    return singular(words[-1]) if words else ""


GoalKey = tuple[str, str]


def goal_key(object_phrase: str, destination_phrase: str) -> GoalKey:
    """The (object, destination) head nouns a goal is matched on."""
    return (head_noun(object_phrase), head_noun(destination_phrase))


@dataclass(frozen=True)
class GoalMatch:
    """How a predicted goal list compares with a reference, as multisets of goal keys.

    ``exact``: the same keys with the same multiplicity, in any order (card; Appendix F).
    ``in_order``: also the same order. ``missed``: reference goals not predicted; ``invented``:
    predicted goals not in the reference (the card reads ``invented > 1`` as degeneration).
    """

    exact: bool
    in_order: bool
    missed: int
    invented: int

    def to_dict(self) -> dict:
        return {"exact": self.exact, "in_order": self.in_order, "missed": self.missed, "invented": self.invented}


def match_goals(predicted: Sequence[GoalKey], reference: Sequence[GoalKey]) -> GoalMatch:
    """Compare goal keys with multiplicity: ``missed`` and ``invented`` are multiset differences."""
    want, got = Counter(reference), Counter(predicted)
    missed = sum((want - got).values())
    invented = sum((got - want).values())
    exact = missed == 0 and invented == 0
    return GoalMatch(exact=exact, in_order=exact and list(predicted) == list(reference),
                     missed=missed, invented=invented)


def unfinished_keys(reference: Sequence[GoalKey], achieved: Sequence[bool]) -> list[GoalKey]:
    """Reference goal keys not yet achieved, in plan order."""
    if len(reference) != len(achieved):
        raise ValueError(f"{len(reference)} goals but {len(achieved)} achieved flags")
    return [key for key, done in zip(reference, achieved) if not done]


def is_valid_next(predicted: GoalKey, reference: Sequence[GoalKey], achieved: Sequence[bool],
                  *, order_constrained: bool) -> bool:
    """A next subtask is valid when it names an unfinished goal; on ordered, relay and revisit
    tasks it must name the first unfinished one (Appendix F, "Offline VLM benchmark")."""
    pending = unfinished_keys(reference, achieved)
    if not pending:
        return False
    if order_constrained:
        return predicted == pending[0]
    return predicted in pending


def keys_of(pairs: Iterable[tuple[str, str]]) -> list[GoalKey]:
    """Goal keys of (object, destination) phrase pairs."""
    return [goal_key(obj, dest) for obj, dest in pairs]
