"""Automatic resets: the task that puts a scene back where its episodes start, and the check that it did.

An unattended evaluation day cannot wait for a person between episodes. After an episode the scene is put back
by the loop's own machinery, as a task of its own: the same low-level policy, triggers and verifier move every
object the episode moved back to a *start region* of its scene, and the verifier's counts confirm the result
before the next episode starts from there (nothing is teleported).

A start region (:class:`StartRegion`) is a flat area of the table a scene declares (``start_regions`` in the
suite, ``ladder_ros/sim/tabletop_scene.py``), or a container objects start on (the plate of a transfer scene).
The rule (:func:`plan_reset`), for every object kind the task's subgoals move, the kind moved last first (the
reset undoes the task in reverse: what was put down last is taken away first, freeing what lies beside it;
a reset that runs again after one that was not confirmed starts with what that one did not get to and ends
with what it tried and could not move, :func:`retry_order`: a neighbour that kept the fingers off an object
is taken away first):

* every instance of the kind that rests in none of its start regions gets one subgoal ``kind -> region``; an
  instance already resting in one is left alone, and so is every kind the task does not move;
* the region is the first, in this order, that has room and holds no instance of the kind yet: the regions where
  the kind rested when the episode started (when those counts are given), then the kind's start regions as the
  scene lists them. *Room* is the region's capacity less the moved objects resting there and those the plan
  already sends; a region that holds the kind already is passed over because the count rule (Appendix B) counts
  every instance there, so a returned object could not be told from one that never left;
* the subgoal's text is the region's: ``put the carrot on the left side of the table``.

Nothing to move gives an empty plan: no reset episode. :func:`start_state_confirmed` checks the counts after the
reset against what the plan expects in each start region (:attr:`ResetPlan.expected`); :func:`out_of_place`
names each shortfall. Pure: no simulator, no rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Union

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.goals import GoalState
from ladder_ros.core.task import Subgoal, Task, TaskCategory

TASK_EPISODE, RESET_EPISODE = "task", "reset"  # an episode record's ``kind``
EPISODE_KINDS = (TASK_EPISODE, RESET_EPISODE)
# An episode record's ``start``: built from its layout, or continued from the scene an earlier episode left
# (a task episode after its reset, a reset episode after its task episode; ``start_after`` names that episode).
START_LAYOUT, START_AFTER_RESET, START_AFTER_TASK = "layout", "after_reset", "after_task"
EPISODE_STARTS = (START_LAYOUT, START_AFTER_RESET, START_AFTER_TASK)
RESET_SUFFIX = "/reset"  # the reset task of task ``T`` is ``T/reset``
NOTHING_TO_MOVE = "nothing to move"  # the finish reason of a reset whose task left every object in a start region
COUNT_ASKS = 3  # a count whose reply cannot be read is asked again, this many asks in all
COUNT_REASON = "start_regions"  # the reason of the count queries a reset asks (not a subgoal's verification)

# What the verifier saw: the simulator's goal state, or counts per (kind, region) (None: the count was unreadable).
Counts = Union[GoalState, Mapping[tuple[str, str], Union[int, None]]]


class ResetPlanError(ConfigError):
    """A task whose scene cannot be put back automatically; the message is one line that says why."""


@dataclass(frozen=True)
class StartRegion:
    """Where objects of a scene may start: a flat area of the table or a container.

    ``text`` names it in an instruction and in a verifier's prompt ("the left side of the table");
    ``preposition`` joins it to the verb ("on", or "in" for a bin); ``capacity`` is how many of the objects a
    task moves it holds at once; ``kinds`` are the object kinds that may start there (empty: every kind).
    """

    name: str
    text: str
    capacity: int
    kinds: tuple[str, ...] = ()
    preposition: str = "on"
    is_container: bool = False

    def __post_init__(self) -> None:
        if not self.name or not self.text.strip():
            raise ConfigError(f"a start region needs a name and a text, got {self.name!r} / {self.text!r}")
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1:
            raise ConfigError(f"start region {self.name!r}: capacity must be a positive integer, got {self.capacity!r}")

    def takes(self, kind: str) -> bool:
        return not self.kinds or kind in self.kinds


@dataclass(frozen=True)
class ResetScene:
    """What a reset plan needs of one task's scene: its start regions, in the scene's order, and how many
    instances of each object kind it holds."""

    scene: str
    regions: tuple[StartRegion, ...]
    object_counts: Mapping[str, int]

    def regions_for(self, kind: str) -> tuple[StartRegion, ...]:
        return tuple(r for r in self.regions if r.takes(kind))


@dataclass(frozen=True)
class ResetPlan:
    """The reset of one task episode: its task (None when nothing moves) and the counts it must leave.

    ``expected[(kind, region)]`` is how many instances of ``kind`` rest in ``region`` once the reset is done,
    for every moved kind and start region that should hold one (the ones left alone and the ones sent back).
    """

    task: Task | None
    expected: Mapping[tuple[str, str], int] = field(default_factory=dict)
    reset_of: str = ""

    @property
    def empty(self) -> bool:
        return self.task is None

    @property
    def moves(self) -> tuple[Subgoal, ...]:
        return () if self.task is None else self.task.subgoals

    def to_dict(self) -> dict:
        return {"reset_of": self.reset_of, "moves": [s.to_dict() for s in self.moves],
                "expected": [[k, r, int(n)] for (k, r), n in sorted(self.expected.items())]}


def count_of(counts: Counts, kind: str, region: str) -> int | None:
    """The count of ``kind`` in ``region``: from a goal state, or a mapping (absent: 0; None: unreadable)."""
    if isinstance(counts, GoalState):
        return counts.count(kind, region)
    value = counts.get((kind, region), 0)
    return None if value is None else int(value)


def moved_kinds(task: Task) -> tuple[str, ...]:
    """The object kinds the task's subgoals move, the last moved first: a reset undoes the task in reverse, so
    what was put down last, on top of or beside the rest, is taken away first and frees what lies under or
    beside it (a grasp needs room for the open fingers)."""
    last = {s.object: i for i, s in enumerate(task.subgoals)}
    return tuple(sorted(last, key=lambda kind: -last[kind]))


def retry_order(last_reset: Mapping) -> tuple[str, ...]:
    """The kinds a reset that runs again sends back first, from the record of the reset before it (same scene, not
    confirmed): those it never got to, then those it put back, then those it tried and could not move. Empty when
    the record says nothing of its subgoals."""
    reset = last_reset.get("reset")
    moves = reset.get("moves") if isinstance(reset, Mapping) else None
    outcomes = last_reset.get("subgoals")
    if not isinstance(moves, list) or not isinstance(outcomes, list):
        return ()
    ranked: dict[str, int] = {}
    for move, outcome in zip(moves, outcomes):  # the record's subgoals are the plan's moves, in order
        if not isinstance(move, Mapping) or not isinstance(outcome, Mapping) or not isinstance(move.get("object"), str):
            continue
        if outcome.get("done") is True:
            rank = 1  # put back
        else:
            rank = 0 if outcome.get("cause") == "never_reached" else 2  # never got to it / tried and failed
        ranked[move["object"]] = min(ranked.get(move["object"], 2), rank)
    return tuple(sorted(ranked, key=lambda kind: ranked[kind]))


def count_queries(task: Task, scene: ResetScene) -> tuple[tuple[str, str], ...]:
    """The (kind, region) pairs whose counts a plan for ``task`` reads: each moved kind in each of its regions."""
    return tuple((kind, r.name) for kind in moved_kinds(task) for r in scene.regions_for(kind))


def auto_reset_refusal(task: Task, scene: ResetScene | None) -> str | None:
    """Why ``task`` cannot be reset automatically, in one line, or None when it can."""
    where = f"task {task.task_id} (scene {task.scene}{f' of suite {task.suite}' if task.suite else ''})"
    if scene is None or not scene.regions:
        return (f"{where} cannot be reset automatically: its scene declares no start_regions and no object starts "
                "on a container")
    homeless = [k for k in moved_kinds(task) if not scene.regions_for(k)]
    if homeless:
        return f"{where} cannot be reset automatically: no start region takes the {', '.join(homeless)}"
    missing = [k for k in moved_kinds(task) if k not in scene.object_counts]
    if missing:
        return f"{where} cannot be reset automatically: the scene holds no {', '.join(missing)}"
    return None


def count_subgoal(kind: str, region: StartRegion) -> Subgoal:
    """The subgoal a count query about ``kind`` in ``region`` names: the verifier counts the ``kind`` resting on
    its destination, and a VLM is asked with the region's words."""
    return Subgoal(object=kind, destination=region.name,
                   text=f"put the {kind.replace('_', ' ')} {region.preposition} {region.text}")


def reset_task_id(task_id: str) -> str:
    return f"{task_id}{RESET_SUFFIX}"


def episode_kind_of(task: Task) -> str:
    """``reset`` for a task :func:`plan_reset` made, else ``task``."""
    return RESET_EPISODE if task.extra.get("kind") == RESET_EPISODE else TASK_EPISODE


def _noun(kind: str, scene: ResetScene) -> str:
    article = "a" if scene.object_counts.get(kind, 1) > 1 else "the"
    return f"{article} {kind.replace('_', ' ')}"


def _subgoal(kind: str, region: StartRegion, scene: ResetScene) -> Subgoal:
    return Subgoal(object=kind, destination=region.name,
                   text=f"put {_noun(kind, scene)} {region.preposition} {region.text}")


def _listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _instruction(subgoals: list[Subgoal], regions: Mapping[str, StartRegion], scene: ResetScene) -> str:
    """One sentence for the whole reset, the objects grouped by region in the order they are sent:
    ``put the carrot and the spoon on the plate``."""
    grouped: dict[str, list[str]] = {}
    for s in subgoals:
        noun = _noun(s.object, scene)
        if noun not in grouped.setdefault(s.destination, []):
            grouped[s.destination].append(noun)
    phrases = [f"{_listing(nouns)} {regions[name].preposition} {regions[name].text}" for name, nouns in grouped.items()]
    return "put " + (phrases[0] if len(phrases) == 1 else "; ".join(phrases[:-1]) + "; and " + phrases[-1])


def plan_reset(task: Task, scene: ResetScene, after: Counts, before: Counts | None = None,
               first: tuple[str, ...] = ()) -> ResetPlan:
    """The reset of an episode of ``task`` that ended with the counts ``after`` (the module docstring's rule).

    ``before`` (optional) are the counts when the episode started: a kind goes back to a region it started in
    when there is room. ``first`` (a reset that runs again: :func:`retry_order`) are kinds sent back before the
    others, in that order. Raises :class:`ResetPlanError` (one line) when the task cannot be reset automatically,
    when a count the plan needs could not be read, or when no start region has room for an object.
    """
    refusal = auto_reset_refusal(task, scene)
    if refusal:
        raise ResetPlanError(refusal)
    by_name = {r.name: r for r in scene.regions}
    order = {r.name: i for i, r in enumerate(scene.regions)}

    def read(counts: Counts, kind: str, region: str, when: str) -> int:
        value = count_of(counts, kind, region)
        if value is None:
            raise ResetPlanError(f"task {task.task_id}: cannot plan its reset, the count of the "
                                 f"{kind.replace('_', ' ')} on {by_name[region].text} {when} could not be read")
        return value

    moved = moved_kinds(task)
    kinds = tuple(dict.fromkeys([*(k for k in first if k in moved), *moved]))
    now = {(k, r.name): read(after, k, r.name, "after the episode") for k in kinds for r in scene.regions_for(k)}
    used = {r.name: sum(n for (_, name), n in now.items() if name == r.name) for r in scene.regions}
    expected = {key: n for key, n in now.items() if n > 0}
    subgoals: list[Subgoal] = []
    for kind in kinds:
        regions = scene.regions_for(kind)
        missing = scene.object_counts[kind] - sum(now[(kind, r.name)] for r in regions)
        started = set()
        if before is not None:
            started = {r.name for r in regions if (count_of(before, kind, r.name) or 0) > 0}  # unreadable: not there
        ranked = sorted(regions, key=lambda r: (r.name not in started, order[r.name]))
        for _ in range(max(missing, 0)):
            region = next((r for r in ranked if now[(kind, r.name)] == 0 and used[r.name] < r.capacity), None)
            if region is None:
                full = ", ".join(f"{r.text} holds {used[r.name]} of {r.capacity}"
                                 + (f" and a {kind.replace('_', ' ')} already" if now[(kind, r.name)] else "")
                                 for r in regions)
                raise ResetPlanError(f"task {task.task_id}: no start region has room for the "
                                     f"{kind.replace('_', ' ')} ({full})")
            used[region.name] += 1
            expected[(kind, region.name)] = expected.get((kind, region.name), 0) + 1
            subgoals.append(_subgoal(kind, region, scene))
    if not subgoals:
        return ResetPlan(task=None, expected=expected, reset_of=task.task_id)
    single = len({s.destination for s in subgoals}) == 1
    reset = Task(task_id=reset_task_id(task.task_id), scene=task.scene,
                 category=TaskCategory.SINGLE_DESTINATION if single else TaskCategory.SPLIT_DESTINATIONS,
                 instruction=_instruction(subgoals, by_name, scene), subgoals=tuple(subgoals), suite=task.suite,
                 ladder=f"{task.ladder or task.scene}{RESET_SUFFIX}", layouts=task.layouts,
                 extra={"kind": RESET_EPISODE, "reset_of": task.task_id})
    return ResetPlan(task=reset, expected=expected, reset_of=task.task_id)


@dataclass(frozen=True)
class Shortfall:
    """One start region that does not hold what the plan expects of one kind."""

    kind: str
    region: str
    expected: int
    counted: int | None  # None: the verifier's count could not be read

    def describe(self, regions: Mapping[str, str] | None = None) -> str:
        where = (regions or {}).get(self.region, self.region)
        seen = "an unreadable count" if self.counted is None else str(self.counted)
        return f"{self.kind.replace('_', ' ')} on {where}: {seen} of {self.expected}"


def out_of_place(counts: Counts, plan: ResetPlan) -> tuple[Shortfall, ...]:
    """Every (kind, start region) whose count falls short of what ``plan`` expects there."""
    short = []
    for (kind, region), n in sorted(plan.expected.items()):
        counted = count_of(counts, kind, region)
        if counted is None or counted < n:
            short.append(Shortfall(kind, region, n, counted))
    return tuple(short)


def start_state_confirmed(counts: Counts, plan: ResetPlan) -> bool:
    """Whether the counts show every start region holding what the plan expects (the count rule: at least)."""
    return not out_of_place(counts, plan)
