"""Head-noun matching of (object, destination) goals, with multiplicity.

One rule serves the offline benchmark and the mapping of a VLM plan onto a task's subgoals, so the
two never disagree. The benchmark card: "Goal matching for decomposition and next_subtask is on
(object, destination) head nouns with multiplicity, so wording differences don't count as errors;
a genuine synonym still scores as wrong". The planner is told to name objects by colour and kind
("the yellow lemon"), so the head noun is the kind: the last word before any prepositional phrase,
in the singular ("the yellow lemon" -> "lemon", "the plate on the left" -> "plate",
"both corn cobs" -> "cob").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

# A noun phrase's head comes before any prepositional phrase that modifies it.
_PREPOSITIONS = frozenset({
    "of", "on", "in", "into", "onto", "at", "with", "from", "to", "near", "beside", "by", "under",
    "behind", "next", "inside", "above", "below", "that", "which",
})
# Words that can end a phrase without being its noun ("the red one", "the bowl itself"), and
# determiners, which a truncated phrase ("the") can end with.
_TRAILING_NON_NOUNS = frozenset({"one", "ones", "itself", "please", "the", "a", "an", "both", "all", "each",
                                 "every", "some", "this", "that", "these", "those", "its", "their"})
_IRREGULAR_PLURALS = {
    "knives": "knife", "leaves": "leaf", "loaves": "loaf", "halves": "half", "shelves": "shelf",
    "mice": "mouse", "geese": "goose", "teeth": "tooth", "feet": "foot", "children": "child",
    "people": "person", "cookies": "cookie", "pies": "pie", "ties": "tie", "movies": "movie",
}
# Singular words that look plural.
_INVARIANT = frozenset({"glass", "grass", "bus", "citrus", "asparagus", "hummus", "couscous", "lens",
                        "cactus", "octopus", "series", "species", "dice", "chess", "lettuce"})


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


def head_noun(phrase: str) -> str:
    """The head noun of a short noun phrase, lower-case and singular; '' when there is none."""
    words = re.findall(r"[a-z]+", phrase.lower().replace("'s", ""))
    for index, word in enumerate(words):
        if index > 0 and word in _PREPOSITIONS:
            words = words[:index]
            break
    while words and words[-1] in _TRAILING_NON_NOUNS:
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
