"""The deployed prompts, read byte for byte from package data, and how a query is assembled.

Which text is "as deployed". The LADDER paper (Appendix C) typesets its prompts with curly quotes,
en-dashes and an ellipsis glyph; the offline benchmark's card (its dataset README)
prints the verification prompt as the Python string literal that is actually sent. Mapping the
paper's typography back to ASCII (curly quotes to ``'`` and ``"``, en-dash to ``--``, ellipsis to
``...``) turns the paper's verification prompt into the card's literal byte for byte, which shows
the paper's glyphs are typesetting of ASCII source. So the card's literal is shipped as
``verification.txt``, and the same mapping gives the shipped container suffix, multi-view suffix
and planning prompt. ``tests/test_vlm_prompts.py`` checks both the card identity and the mapping.

The prompts are not configurable: results are comparable across models only under them (card,
"Rules": prompt tuning against the benchmark measured as pure lexical leakage).

What the paper does not print, and this module therefore decides (each marked where it is done):
how the suffixes are joined to the prompt (a blank line), how views are labelled, and the
next-subtask prompt (``next_subtask.txt``, this project's own).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib import resources
from typing import Sequence

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.vlm.backends.base import ImagePart, PromptPart

PROMPT_FILES = (
    "verification.txt",
    "verification_container_suffix.txt",
    "verification_multiview_suffix.txt",
    "planning.txt",
    "planning_attempted.txt",
    "next_subtask.txt",
)

# The paper does not print how a suffix is appended; a blank line keeps the paragraphs apart.
SUFFIX_JOINER = "\n\n"


@lru_cache(maxsize=None)
def load_prompt(file_name: str) -> str:
    """The shipped prompt ``file_name`` exactly as stored (UTF-8, no trailing newline added)."""
    if file_name not in PROMPT_FILES:
        raise InvalidInputError(f"unknown prompt file {file_name!r}; shipped: {', '.join(PROMPT_FILES)}")
    data = resources.files("ladder_ros").joinpath("data", "prompts", file_name).read_bytes()
    return data.decode("utf-8")


def prompts_digest() -> str:
    """A hash of every shipped prompt, recorded with benchmark runs so results name their prompts."""
    h = hashlib.sha256()
    for name in PROMPT_FILES:
        h.update(name.encode() + b"\x00" + load_prompt(name).encode("utf-8") + b"\x00")
    return h.hexdigest()


def _fill(template: str, **values: str) -> str:
    """Replace each ``<name>`` placeholder in one pass, so filled-in text is never re-scanned.

    A placeholder missing from the template is a bug in the caller and raises.
    """
    for name in values:
        if f"<{name}>" not in template:
            raise InvalidInputError(f"placeholder <{name}> not in the template")
    pattern = re.compile("|".join(re.escape(f"<{name}>") for name in values))
    return pattern.sub(lambda match: values[match.group(0)[1:-1]], template)


def view_label(name: str) -> str:
    """The text placed before each view when several are sent (the paper says only 'each labelled')."""
    return f"Camera view '{name}':"


def verification_parts(subtask_text: str, views: Sequence[ImagePart]) -> tuple[PromptPart, ...]:
    """The verification query: prompt and suffixes, the subtask line, then the views.

    The order follows the card's reference call ``my_vlm(PROMPT, f"Subtask: {subtask}", images)``.
    The container suffix is appended to every query and the multi-view suffix when more than one
    view is sent (Appendix C); with several views each is preceded by its label.
    """
    if not subtask_text.strip():
        raise InvalidInputError("the subtask text of a verification query is empty")
    text = load_prompt("verification.txt") + SUFFIX_JOINER + load_prompt("verification_container_suffix.txt")
    if len(views) > 1:
        text += SUFFIX_JOINER + load_prompt("verification_multiview_suffix.txt")
    parts: list[PromptPart] = [text, f"Subtask: {subtask_text}"]
    for view in views:
        if len(views) > 1:
            parts.append(view_label(view.name))
        parts.append(view)
    return tuple(parts)


def planning_text(robot: str, task: str, attempted: Sequence[str] = ()) -> str:
    """The PSP-Agent planning prompt (Appendix C) filled in.

    ``attempted`` lists goals already worked on with what was reported; empty at episode start,
    when the ``<attempted>`` slot stays empty. With entries, the attempted-goals block fills it,
    one entry a line, followed by a blank line (the paper prints no layout for ``<lines>``).
    """
    if not robot.strip() or not task.strip():
        raise InvalidInputError("the planning prompt needs a robot description and a task")
    block = ""
    if attempted:
        lines = "\n".join(f"- {entry}" for entry in attempted)
        block = _fill(load_prompt("planning_attempted.txt"), lines="\n" + lines) + "\n\n"
    return _fill(load_prompt("planning.txt"), robot=robot, task=task, attempted=block)


def next_subtask_text(robot: str, task: str) -> str:
    """The next-subtask prompt filled in (this project's own prompt; see ``next_subtask.txt``)."""
    if not robot.strip() or not task.strip():
        raise InvalidInputError("the next-subtask prompt needs a robot description and a task")
    return _fill(load_prompt("next_subtask.txt"), robot=robot, task=task)


def frame_parts(text: str, views: Sequence[ImagePart]) -> tuple[PromptPart, ...]:
    """A single-question prompt with its frame(s): text first, then each view (labelled when several)."""
    parts: list[PromptPart] = [text]
    for view in views:
        if len(views) > 1:
            parts.append(view_label(view.name))
        parts.append(view)
    return tuple(parts)
