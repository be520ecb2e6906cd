"""The shipped prompts are the deployed ones, byte for byte, and queries are assembled as deployed."""

from __future__ import annotations

import ast
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.vlm import prompts
from ladder_ros.vlm.backends.base import ImagePart

# The benchmark card's PROMPT literal, copied verbatim from seed 000_e75bb1a009522329.txt.
CARD_PROMPT = (
    "You are checking the CURRENT state of a robot tabletop scene from its camera views. The subtask "
    "below moves ONE object to a goal location, and the scene may hold SEVERAL interchangeable "
    "objects of that same kind. Count how many DISTINCT objects of the kind the subtask names are in "
    "the subtask's END STATE RIGHT NOW -- at the goal location the subtask asks for, regardless of "
    "how they got there. An object counts as placed when any part of it rests on the goal location, "
    "INCLUDING when partially hidden by the robot arm or other objects. An object the gripper is "
    "still holding does NOT count, however close to the goal location it is held: the release is not "
    "yet a placement and it is the release that most often fails. An object away from the goal "
    "location, or lifted well above it, is not counted. Count each "
    "physical object at most once, however many views show it. First write one short line listing "
    'what you counted, then output STRICT JSON: {"count": <integer>}.'
)

# Appendix C of the paper as typeset (curly quotes, en-dashes, ellipsis glyphs).
PAPER_VERIFICATION = (
    "You are checking the CURRENT state of a robot tabletop scene from its camera views. The subtask below moves "
    "ONE object to a goal location, and the scene may hold SEVERAL interchangeable objects of that same kind. "
    "Count how many DISTINCT objects of the kind the subtask names are in the subtask\u2019s END STATE RIGHT NOW "
    "\u2013 at the goal location the subtask asks for, regardless of how they got there. An object counts as "
    "placed when any part of it rests on the goal location, INCLUDING when partially hidden by the robot arm or "
    "other objects. An object the gripper is still holding does NOT count, however close to the goal location "
    "it is held: the release is not yet a placement and it is the release that most often fails. An object away "
    "from the goal location, or lifted well above it, is not counted. Count each physical object at most once, "
    "however many views show it. First write one short line listing what you counted, then output STRICT JSON: "
    "{\u201ccount\u201d: <integer>}.")
PAPER_CONTAINER_SUFFIX = (
    "When a goal location is a container whose interior you cannot see into, do not look for the object inside "
    "it. Instead account for every object of that kind in the scene: if an object of that kind is no longer "
    "resting anywhere else in the scene, and the gripper is not holding it, it is in the container and counts "
    "as placed. Objects still resting elsewhere do not count.")
PAPER_MULTIVIEW_SUFFIX = (
    "Several camera views of the SAME scene at the SAME instant are provided, each labelled. They do not show "
    "different moments. A view may not contain the goal location at all \u2013 judge from whichever view shows "
    "it, and treat evidence from a close-up view as authoritative over a distant one where the goal location "
    "is small or occluded.")
PAPER_PLANNING = (
    "You are planning for a <robot> working on a tabletop, seen from its camera. Task: <task>\n\n<attempted>Break "
    "the task into the smallest goals that each move ONE object to ONE destination. Name every object by its "
    "colour and kind as it LOOKS in the image (\u201cthe yellow lemon\u201d, \u201cthe blue bin\u201d), never by a "
    "role or a bare noun, because those names are what will be pointed at in the image later and several "
    "objects may be of the same kind. Only include goals the task actually asks for. An object the task does "
    "not mention must be left where it is, even when it sits among the ones that move. When the task states an "
    "order (\u201cfirst \u2026 then \u2026\u201d), keep the goals in the order the task gives them, and list a "
    "goal TWICE if the task asks for the same object to be moved twice. Otherwise order the goals so that "
    "anything placed on an open surface, where a later reach could knock it off, comes after anything dropped "
    "into a container. Leave out any goal the image shows is already met, and return an empty list of goals "
    "when the whole task is done. Give each goal as a sentence, plus the object it moves and where that object "
    "goes, named the same way. Output STRICT JSON and nothing else: {\u201cgoals\u201d: [{\u201cgoal\u201d: "
    "\u201c\u2026\u201d, \u201cobject\u201d: \u201c\u2026\u201d, \u201cdestination\u201d: \u201c\u2026\u201d}]}")
PAPER_ATTEMPTED = (
    "Already worked on, with what the executor reported. The image is the evidence of what actually happened, "
    "so ask for one of these again ONLY if the picture shows it did not take \u2013 repeating a goal that took "
    "sends the arm back over it and knocks it over: <lines>")

# The project's own next-subtask prompt (the paper prints none), pinned byte for byte so that a
# change to its meaning is a deliberate edit of this test too.
NEXT_SUBTASK_PROMPT = (
    "You are directing a <robot> working on a tabletop, seen from its camera. Task: <task>\n\nLook at the image "
    "and name the ONE goal to work on next: a goal that moves ONE object to ONE destination, that the task asks "
    "for, and that the image shows is NOT met yet. An object counts as placed only when it rests on its "
    "destination and the gripper has let go of it. When the task states an order (\"first ... then ...\"), name "
    "the first goal in that order that is not met yet. Name the object and the destination by colour and kind as "
    "they LOOK in the image (\"the yellow lemon\", \"the blue bin\"). If every goal of the task is already met, "
    "give null for all three fields. First write one short line saying which goals the image shows are met, then "
    "output STRICT JSON: {\"goal\": \"...\", \"object\": \"...\", \"destination\": \"...\"}")

TYPOGRAPHY_TO_ASCII = {"\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "--", "\u2026": "..."}
SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"


def to_ascii(text: str) -> str:
    for glyph, ascii_text in TYPOGRAPHY_TO_ASCII.items():
        text = text.replace(glyph, ascii_text)
    return text


def shipped_bytes(name: str) -> bytes:
    return resources.files("ladder_ros").joinpath("data", "prompts", name).read_bytes()


def test_verification_prompt_is_the_cards_literal_byte_for_byte():
    assert shipped_bytes("verification.txt") == CARD_PROMPT.encode("ascii")
    assert prompts.load_prompt("verification.txt") == CARD_PROMPT


def test_the_ascii_mapping_turns_the_papers_prompt_into_the_cards_literal():
    # This is the evidence that the paper's glyphs are typesetting of ASCII source.
    assert to_ascii(PAPER_VERIFICATION) == CARD_PROMPT


@pytest.mark.parametrize("name, paper_text", [
    ("verification_container_suffix.txt", PAPER_CONTAINER_SUFFIX),
    ("verification_multiview_suffix.txt", PAPER_MULTIVIEW_SUFFIX),
    ("planning.txt", PAPER_PLANNING),
    ("planning_attempted.txt", PAPER_ATTEMPTED),
])
def test_paper_prompts_ship_as_their_ascii_source(name, paper_text):
    assert shipped_bytes(name) == to_ascii(paper_text).encode("ascii")


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed documents (../shared/seeds) are not beside this checkout")
def test_prompts_match_the_seed_documents_themselves():
    card = (SEEDS / "000_e75bb1a009522329.txt").read_text("utf-8")
    literal = ast.literal_eval(re.search(r"PROMPT = (\(.*?\n\))", card, re.S).group(1))
    assert shipped_bytes("verification.txt") == literal.encode("ascii")
    paper = (SEEDS / "002_cd030e8d14ba0bdb.txt").read_text("utf-8")
    for name, paper_text in (("verification.txt", PAPER_VERIFICATION),
                             ("verification_container_suffix.txt", PAPER_CONTAINER_SUFFIX),
                             ("verification_multiview_suffix.txt", PAPER_MULTIVIEW_SUFFIX),
                             ("planning.txt", PAPER_PLANNING), ("planning_attempted.txt", PAPER_ATTEMPTED)):
        assert paper_text in paper, f"{name}: the test's copy of the paper text drifted"


def test_verification_parts_single_view_has_container_suffix_and_no_labels():
    view = ImagePart(np.zeros((4, 4, 3), np.uint8), "main")
    parts = prompts.verification_parts("put the carrot on the plate", [view])
    assert parts[0] == CARD_PROMPT + "\n\n" + to_ascii(PAPER_CONTAINER_SUFFIX)
    assert parts[1] == "Subtask: put the carrot on the plate"
    assert parts[2] is view and len(parts) == 3


def test_verification_parts_multi_view_adds_suffix_and_labels_each_view():
    views = [ImagePart(np.zeros((4, 4, 3), np.uint8), "main"), ImagePart(np.ones((4, 4, 3), np.uint8), "wrist")]
    parts = prompts.verification_parts("put the carrot on the plate", views)
    assert parts[0].endswith("\n\n" + to_ascii(PAPER_MULTIVIEW_SUFFIX))
    assert parts[2:] == ("Camera view 'main':", views[0], "Camera view 'wrist':", views[1])


def test_planning_text_fills_placeholders_once_and_leaves_attempted_empty_at_start():
    text = prompts.planning_text("WidowX 250 robot arm", "put the <robot> toy in the bin")
    assert text.startswith("You are planning for a WidowX 250 robot arm working on a tabletop, seen from its "
                           "camera. Task: put the <robot> toy in the bin\n\nBreak the task")
    assert "<attempted>" not in text and "<task>" not in text


def test_planning_text_lists_attempted_goals():
    text = prompts.planning_text("robot arm", "tidy up", ["put the lemon in the bin: reported done"])
    assert "knocks it over: \n- put the lemon in the bin: reported done\n\nBreak the task" in text


def test_next_subtask_prompt_ships_byte_for_byte():
    assert shipped_bytes("next_subtask.txt") == NEXT_SUBTASK_PROMPT.encode("ascii")
    assert prompts.load_prompt("next_subtask.txt") == NEXT_SUBTASK_PROMPT


def test_next_subtask_prompt_is_our_own_and_asks_for_the_planner_fields():
    text = prompts.next_subtask_text("robot arm", "put the lemon in the bin")
    assert text == NEXT_SUBTASK_PROMPT.replace("<robot>", "robot arm").replace("<task>", "put the lemon in the bin")
    assert "that the image shows is NOT met yet" in text
    assert 'STRICT JSON: {"goal": "...", "object": "...", "destination": "..."}' in text
    assert "Task: put the lemon in the bin" in text


def test_empty_inputs_are_rejected():
    with pytest.raises(InvalidInputError):
        prompts.verification_parts("  ", [])
    with pytest.raises(InvalidInputError):
        prompts.planning_text("robot arm", "")
    with pytest.raises(InvalidInputError):
        prompts.load_prompt("other.txt")


def test_prompts_digest_changes_with_the_text(monkeypatch):
    before = prompts.prompts_digest()
    original = prompts.load_prompt

    def patched(name):
        return original(name) + (" " if name == "planning.txt" else "")

    monkeypatch.setattr(prompts, "load_prompt", patched)
    assert prompts.prompts_digest() != before
