"""Blind A/B sessions on disk: the operator's preference per pair, and the sealed key written at the end.

A blind session (an evaluation plan with ``compare``, :mod:`ladder_ros.panel.evaluation_plan`) runs
pairs of episodes: two systems on the same task, layout and seed, in an order drawn per pair. The
operator sees "A" (the pair's first episode) and "B" (its second), labels each episode as usual and
states a preference per pair: ``A``, ``B`` or ``tie``, with an optional reason.

Files under ``<out>/ab/<plan name>/``, each written atomically like the episode records:

* ``pair-0003.json``: the pair's task, layout, seed, its two episode ids by arm, the preference, the
  reason and every change in its history — never the systems;
* ``key.json``, the sealed key: which system was A and which was B in every pair, the order seed and
  the systems. The panel writes it once, when the session closes (every pair run and judged, or
  closed early by the operator); until then no file under ``<out>`` names a system of the session,
  and ``ladder-ros report`` leaves the session's episodes out of its tables. A system is its
  ``variant`` and, where the plan names one, its ``policy`` with that policy's ``config`` and
  ``config_hash`` (the digest of the config the episode ran, so a ranking pools a checkpoint across
  sessions: :mod:`ladder_ros.evaluation.ranking`).

The episode records of a blind session keep the arm where the orchestrator's documents name the system
(:func:`mask_system`); in a session that compares policies they also keep the arm where they name the
policy's config or digest, and no text in them names a compared policy (:mod:`ladder_ros.panel.blind`).
Pure: no Qt, no rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.panel.records import read_json, write_json

AB_FOLDER = "ab"
KEY_FILE = "key.json"
PAIR_SCHEMA_VERSION = 1
KEY_SCHEMA_VERSION = 1
PREFERENCES = ("A", "B", "tie")
REASON_MAX_CHARS = 2_000
SYSTEM_FIELDS = ("variant", "policy")  # what names a system in the orchestrator's documents


def mask_system(doc: Any, arm: str) -> Any:
    """A copy of ``doc`` in which every ``variant`` and ``policy`` field says ``arm`` instead."""
    if isinstance(doc, dict):
        return {k: (arm if k in SYSTEM_FIELDS and isinstance(v, str) else mask_system(v, arm))
                for k, v in doc.items()}
    if isinstance(doc, list):
        return [mask_system(v, arm) for v in doc]
    return doc


def system_label(system: dict) -> str:
    """A system of a key in a few words: its variant, or ``policy/variant`` when it names a policy."""
    variant = str(system.get("variant", ""))
    return f"{system['policy']}/{variant}" if system.get("policy") else variant


@dataclass
class PairFile:
    """One pair of a blind session: what the operator judged, never which system ran."""

    session: str
    pair: int
    task_id: str
    layout: int
    seed: int
    episodes: dict = field(default_factory=dict)  # arm -> episode id (the latest counted one)
    preference: str | None = None
    reason: str = ""
    operator: str = ""
    revision: int = 0
    history: list = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": PAIR_SCHEMA_VERSION, **self.__dict__}

    @classmethod
    def from_dict(cls, data: Any, source: str = "") -> "PairFile":
        if not isinstance(data, dict) or data.get("schema_version") != PAIR_SCHEMA_VERSION:
            raise ConfigError(f"not a pair file of schema_version {PAIR_SCHEMA_VERSION}", source=source)
        try:
            pair = cls(session=str(data["session"]), pair=int(data["pair"]), task_id=str(data["task_id"]),
                       layout=int(data["layout"]), seed=int(data["seed"]), episodes=dict(data.get("episodes") or {}),
                       preference=data.get("preference"), reason=str(data.get("reason") or ""),
                       operator=str(data.get("operator") or ""), revision=int(data.get("revision", 0)),
                       history=list(data.get("history") or []))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"malformed pair file: {exc}", source=source) from None
        if pair.preference is not None and pair.preference not in PREFERENCES:
            raise ConfigError(f"preference {pair.preference!r} is not one of {', '.join(PREFERENCES)}", source=source)
        return pair

    def changed(self, unix_s: float, what: str, value: Any) -> None:
        self.revision += 1
        self.history.append({"revision": self.revision, "unix_s": float(unix_s), "what": what, "value": value})


def check_preference(preference: str | None) -> str | None:
    if preference is not None and preference not in PREFERENCES:
        raise InvalidInputError(f"a preference is one of {', '.join(PREFERENCES)} or None, got {preference!r}")
    return preference


def check_reason(reason: str) -> str:
    if not isinstance(reason, str):
        raise InvalidInputError(f"a reason is text, got {type(reason).__name__}")
    reason = reason.strip()
    if len(reason) > REASON_MAX_CHARS:
        raise InvalidInputError(f"a reason has at most {REASON_MAX_CHARS} characters, got {len(reason)}")
    return reason


class ABSessionStore:
    """The files of one blind session under ``root/ab/<session>/``."""

    def __init__(self, root: str | Path, session: str):
        self.session = session
        self.folder = Path(root) / AB_FOLDER / session

    def pair_path(self, pair: int) -> Path:
        return self.folder / f"pair-{int(pair):04d}.json"

    @property
    def key_path(self) -> Path:
        return self.folder / KEY_FILE

    def save_pair(self, pair: PairFile) -> Path:
        return write_json(self.pair_path(pair.pair), pair.to_dict())

    def load_pair(self, pair: int) -> PairFile | None:
        path = self.pair_path(pair)
        return read_pair(path) if path.is_file() else None

    def pairs(self) -> Iterator[PairFile]:
        for path in sorted(self.folder.glob("pair-*.json")):
            yield read_pair(path)

    @property
    def closed(self) -> bool:
        return self.key_path.is_file()

    def write_key(self, key: dict[str, Any]) -> Path:
        return write_json(self.key_path, {"schema_version": KEY_SCHEMA_VERSION, **key})


def read_pair(path: str | Path) -> PairFile:
    return PairFile.from_dict(read_json(path, "pair file"), source=str(path))


def read_key(path: str | Path) -> dict[str, Any]:
    """A session's sealed key, checked: ``pairs`` maps each pair to ``{"A": system, "B": system}``."""
    data = read_json(path, "A/B key")
    if not isinstance(data, dict) or data.get("schema_version") != KEY_SCHEMA_VERSION:
        raise ConfigError(f"not an A/B key of schema_version {KEY_SCHEMA_VERSION}", source=str(path))
    pairs = data.get("pairs")
    if not isinstance(pairs, dict) or not all(isinstance(v, dict) and set(v) >= {"A", "B"} for v in pairs.values()):
        raise ConfigError("an A/B key maps every pair to its systems A and B", source=str(path))
    return data
