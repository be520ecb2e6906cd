"""Operator labels: changing an :class:`~ladder_ros.messages.EpisodeLabels` document, one label at a time.

Every change makes a new document with the next revision and one more history entry, so the newest
revision always holds the whole set, and the history holds every label ever made (a label taken
back is a change too). A change that changes nothing returns the same document: no new revision,
nothing to write or publish. Pure: no Qt, no rclpy, no files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.messages import EPISODE_LABELS, SUBGOAL_LABELS, EpisodeLabels

NOTE_MAX_CHARS = 10_000  # a note is free text, not a log file


def _changed(labels: EpisodeLabels, unix_s: float, what: str, value: Any, **fields: Any) -> EpisodeLabels:
    revision = labels.revision + 1
    entry = {"revision": revision, "unix_s": float(unix_s), "what": what, "value": value}
    return replace(labels, revision=revision, updated_unix_s=float(unix_s),
                   history=[*labels.history, entry], **fields)


def label_subgoal(labels: EpisodeLabels, plan_index: int, label: str | None, unix_s: float) -> EpisodeLabels:
    """Label the subgoal at ``plan_index`` ``done`` or ``not_done``; None takes the label back."""
    if isinstance(plan_index, bool) or not isinstance(plan_index, int) or plan_index < 0:
        raise InvalidInputError(f"a plan index is a non-negative integer, got {plan_index!r}")
    if label is not None and label not in SUBGOAL_LABELS:
        raise InvalidInputError(f"a subgoal label is one of {', '.join(SUBGOAL_LABELS)} or None, got {label!r}")
    key = str(plan_index)
    if labels.subgoals.get(key) == label:
        return labels
    subgoals = {k: v for k, v in labels.subgoals.items() if k != key}
    if label is not None:
        subgoals[key] = label
    subgoals = dict(sorted(subgoals.items(), key=lambda kv: int(kv[0])))
    return _changed(labels, unix_s, f"subgoal {plan_index}", label, subgoals=subgoals)


def label_episode(labels: EpisodeLabels, label: str | None, unix_s: float) -> EpisodeLabels:
    """Label the episode ``success``, ``failure`` or ``partial``; None takes the label back."""
    if label is not None and label not in EPISODE_LABELS:
        raise InvalidInputError(f"an episode label is one of {', '.join(EPISODE_LABELS)} or None, got {label!r}")
    if labels.episode == label:
        return labels
    return _changed(labels, unix_s, "episode", label, episode=label)


def set_note(labels: EpisodeLabels, note: str, unix_s: float) -> EpisodeLabels:
    """Replace the free-text note (surrounding white space is dropped)."""
    if not isinstance(note, str):
        raise InvalidInputError(f"a note is text, got {type(note).__name__}")
    note = note.strip()
    if len(note) > NOTE_MAX_CHARS:
        raise InvalidInputError(f"a note has at most {NOTE_MAX_CHARS} characters, got {len(note)}")
    if labels.note == note:
        return labels
    return _changed(labels, unix_s, "note", note, note=note)


def set_final(labels: EpisodeLabels, final: bool, unix_s: float) -> EpisodeLabels:
    """Mark the labels complete (or open them again)."""
    if labels.final == bool(final):
        return labels
    return _changed(labels, unix_s, "final", bool(final), final=bool(final))


def newer(a: EpisodeLabels | None, b: EpisodeLabels | None) -> EpisodeLabels | None:
    """Of two label sets of the same episode, the one with the higher revision (``a`` on a tie)."""
    if a is None:
        return b
    if b is None or b.episode_id != a.episode_id:
        return a
    return b if b.revision > a.revision else a
