"""Task model: an instruction, its ordered pick-and-place subgoals and its category.

The eight categories and their scoring rules are those of the LADDER paper (Section 3 and
Appendix D): a later leg of an object on relay and revisit tasks counts only once its earlier
legs are done, an ordered task fails when its objects are placed out of order, and exclusion
distractors must stay where they are.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ladder_ros.core.errors import ConfigError, unknown_name


# How an episode's task success is decided (Section 3; docs/decisions.md, "Stock SimplerEnv tasks").
LADDER_RULE = "ladder"  # every subgoal's predicate holds at the end, objects released, no constraint broken
SIMPLERENV_RULE = "simplerenv"  # the stock env's own env.evaluate()["success"] at the end of the episode
SUCCESS_RULES = (LADDER_RULE, SIMPLERENV_RULE)


class TaskCategory(str, enum.Enum):
    """The eight spatial and logical task structures of Section 3."""

    SINGLE_DESTINATION = "single_destination"
    SPLIT_DESTINATIONS = "split_destinations"
    TRANSFER = "transfer"
    RELAY = "relay"
    REVISIT = "revisit"
    EXCLUSION = "exclusion"
    ORDERED = "ordered"
    DUPLICATES = "duplicates"

    @classmethod
    def parse(cls, name: str) -> "TaskCategory":
        try:
            return cls(name)
        except ValueError:
            raise unknown_name("task category", name, [c.value for c in cls]) from None

    @property
    def chains_legs_per_object(self) -> bool:
        """Relay and revisit: an object's later leg counts only once its earlier legs are done."""
        return self in (TaskCategory.RELAY, TaskCategory.REVISIT)

    @property
    def is_order_constrained(self) -> bool:
        """Tasks whose subgoals must be done in the listed order (ordered, relay, revisit)."""
        return self in (TaskCategory.ORDERED, TaskCategory.RELAY, TaskCategory.REVISIT)


@dataclass(frozen=True)
class Subgoal:
    """One pick-and-place: move one ``object`` (a kind, e.g. ``carrot``) to one ``destination``.

    ``object`` and ``destination`` are the head nouns the count verifier and the scorer match on;
    ``text`` is the single-subgoal instruction sent to the low-level policy.
    """

    object: str
    destination: str
    text: str

    def __post_init__(self) -> None:
        for name in ("object", "destination", "text"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"subgoal {name} must be a non-empty string, got {value!r}")

    @property
    def key(self) -> tuple[str, str]:
        return (self.object, self.destination)

    def to_dict(self) -> dict:
        return {"object": self.object, "destination": self.destination, "text": self.text}

    @classmethod
    def from_dict(cls, data: dict) -> "Subgoal":
        return cls(object=data["object"], destination=data["destination"], text=data["text"])


@dataclass(frozen=True)
class Task:
    """A long-horizon task: one instruction, its reference subgoals, and how they are scored."""

    task_id: str
    scene: str
    category: TaskCategory
    instruction: str
    subgoals: tuple[Subgoal, ...]
    distractors: tuple[str, ...] = ()
    suite: str = ""
    ladder: str = ""
    layouts: int = 24  # SimplerEnv-Long draws 24 seeded layouts per task (Appendix D)
    success_rule: str = LADDER_RULE
    budget_steps: int | None = None  # None: the preset's budget for the horizon (Section 3, Appendix D)
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.subgoals:
            raise ConfigError("a task needs at least one subgoal", key=f"{self.task_id}.subgoals")
        if isinstance(self.layouts, bool) or not isinstance(self.layouts, int) or self.layouts < 1:
            raise ConfigError(f"layouts must be a positive integer, got {self.layouts!r}",
                              key=f"{self.task_id}.layouts")
        if self.success_rule not in SUCCESS_RULES:
            raise ConfigError(f"unknown success_rule {self.success_rule!r}; valid: {', '.join(SUCCESS_RULES)}",
                              key=f"{self.task_id}.success_rule")
        if self.success_rule == SIMPLERENV_RULE and len(self.subgoals) != 1:
            raise ConfigError("success_rule simplerenv scores SimplerEnv's single-subgoal envs only; this task has "
                              f"{len(self.subgoals)} subgoals", key=f"{self.task_id}.success_rule")
        if self.budget_steps is not None and (isinstance(self.budget_steps, bool)
                                              or not isinstance(self.budget_steps, int) or self.budget_steps < 1):
            raise ConfigError(f"budget_steps must be a positive integer or absent, got {self.budget_steps!r}",
                              key=f"{self.task_id}.budget_steps")
        if self.category is TaskCategory.EXCLUSION and not self.distractors:
            raise ConfigError("an exclusion task names its distractors", key=f"{self.task_id}.distractors")
        moved = {s.object for s in self.subgoals}
        both = moved.intersection(self.distractors)
        if both:
            raise ConfigError(f"objects are both moved and distractors: {sorted(both)}",
                              key=f"{self.task_id}.distractors")

    @property
    def horizon(self) -> int:
        """The number of subgoals (Section 3, 'Task horizon')."""
        return len(self.subgoals)

    def prerequisites(self, index: int) -> tuple[int, ...]:
        """Subgoals that must be done before subgoal ``index`` counts.

        Ordered: every earlier subgoal. Relay and revisit: the earlier legs of the same object.
        """
        if self.category is TaskCategory.ORDERED:
            return tuple(range(index))
        if self.category.chains_legs_per_object:
            obj = self.subgoals[index].object
            return tuple(j for j in range(index) if self.subgoals[j].object == obj)
        return ()

    def has_later_leg(self, index: int) -> bool:
        """True when the same object must move on after this subgoal (relay, revisit)."""
        if not self.category.chains_legs_per_object:
            return False
        obj = self.subgoals[index].object
        return any(s.object == obj for s in self.subgoals[index + 1:])

    def to_dict(self) -> dict:
        return {
            "task_id": self.task_id,
            "scene": self.scene,
            "category": self.category.value,
            "instruction": self.instruction,
            "subgoals": [s.to_dict() for s in self.subgoals],
            "distractors": list(self.distractors),
            "suite": self.suite,
            "ladder": self.ladder,
            "layouts": self.layouts,
            "success_rule": self.success_rule,
            "budget_steps": self.budget_steps,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Task":
        return cls(
            task_id=data["task_id"],
            scene=data["scene"],
            category=TaskCategory.parse(data["category"]),
            instruction=data["instruction"],
            subgoals=tuple(Subgoal.from_dict(s) for s in data["subgoals"]),
            distractors=tuple(data.get("distractors", ())),
            suite=data.get("suite", ""),
            ladder=data.get("ladder", ""),
            layouts=data.get("layouts", 24),  # checked as given: 2.7 or "3" is refused, not cut or converted
            success_rule=data.get("success_rule", LADDER_RULE),
            budget_steps=data.get("budget_steps"),
        )
