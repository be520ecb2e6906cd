"""How the scripted expert reads an instruction: the object kinds and destinations it names, and their pairing.

A keyword reading, no language model: it knows the scene's kinds and containers, skips sources
('from the plate'), pairs each object with the destination named after it, and does not understand
order or negation (the full-instruction baseline fails on those as a Bridge policy does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable


@dataclass(frozen=True)
class InstructionReading:
    """What the expert takes from an instruction: objects, destinations and their pairing."""

    objects: tuple[str, ...]  # kinds, in order of mention
    destinations: tuple[str, ...]  # containers it should go to, in order (sources excluded)
    paired: dict = field(default_factory=dict)  # kind -> destination read after (or before) it
    everything: bool = False  # 'everything', 'all the objects' ...

    @property
    def is_single(self) -> bool:
        return len(self.objects) == 1 and len(set(self.destinations)) == 1 and not self.everything


_SOURCE_WORDS = ("from", "off", "out of")
_EVERYTHING = re.compile(r"\b(everything|all (the )?(objects|items|things))\b")


def _phrase_pattern(name: str) -> re.Pattern:
    words = name.lower().replace("_", " ").split()
    return re.compile(r"\b" + r"\s+".join(map(re.escape, words)) + r"(?:e?s)?\b")


def read_instruction(instruction: str, kinds: Iterable[str], containers: Iterable[str]) -> InstructionReading:
    """Find the object kinds and destinations an instruction names, as a language model reads it."""
    text = " ".join(instruction.lower().split())
    mentions: list[tuple[int, int, str, str]] = []  # (start, end, 'object'|'container', name)
    for kind_of, names in (("object", kinds), ("container", containers)):
        for name in sorted(set(names), key=lambda n: -len(n)):
            for m in _phrase_pattern(name).finditer(text):
                if not any(s <= m.start() < e or s < m.end() <= e for s, e, _, _ in mentions):
                    mentions.append((m.start(), m.end(), kind_of, name))
    mentions.sort()
    objects: list[str] = []
    destinations: list[str] = []
    dest_positions: list[tuple[int, str]] = []
    for start, _end, kind_of, name in mentions:
        if kind_of == "object":
            if name not in objects:
                objects.append(name)
            continue
        before = text[:start].rstrip()
        before = re.sub(r"\b(the|a|an)$", "", before).rstrip()
        if any(before.endswith(w) for w in _SOURCE_WORDS):
            continue  # 'from the plate': a source, not a destination
        destinations.append(name)
        dest_positions.append((start, name))
    paired: dict[str, str] = {}
    for start, _end, kind_of, name in mentions:
        if kind_of != "object" or name in paired:
            continue
        after = [d for pos, d in dest_positions if pos > start]
        before = [d for pos, d in dest_positions if pos < start]
        if after:
            paired[name] = after[0]
        elif before:
            paired[name] = before[-1]
    return InstructionReading(objects=tuple(objects), destinations=tuple(destinations), paired=paired,
                              everything=bool(_EVERYTHING.search(text)))
