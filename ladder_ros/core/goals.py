"""Privileged per-subgoal predicates, computed from what a simulator knows about the scene.

A simulator reports, each step, how many instances of each object kind rest (released, not held)
on each destination (:class:`GoalState`). :class:`GoalTracker` turns that stream into the
per-subgoal predicates of the paper (Section 3, Appendix D):

* a subgoal holds when enough instances of its object rest on its destination: the k-th
  occurrence of the same (object, destination) needs k of them (duplicates), except on relay and
  revisit tasks, where one object travels and one is enough;
* prerequisites: on relay and revisit tasks a leg counts only once the object's earlier legs are
  done; on ordered tasks a subgoal counts only once every earlier subgoal is done, and placing an
  object before its turn is an order violation that fails the task;
* an intermediate leg that is done stays done while the object moves on (it is latched);
* exclusion distractors resting on any destination at the end fail the task.

The same tracker runs inside the reference loop and inside the sim bridge node, so the privileged
goal states the orchestrator sees are identical in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ladder_ros.core.task import Task, TaskCategory


@dataclass(frozen=True)
class GoalState:
    """Privileged scene facts at one step.

    ``resting[(kind, destination)]`` is the number of instances of ``kind`` resting on
    ``destination`` and not held; ``held`` is the set of kinds in the gripper.
    """

    resting: Mapping[tuple[str, str], int] = field(default_factory=dict)
    held: frozenset[str] = frozenset()

    def count(self, kind: str, destination: str) -> int:
        return int(self.resting.get((kind, destination), 0))

    def to_dict(self) -> dict:
        return {
            "resting": [[k, d, int(n)] for (k, d), n in sorted(self.resting.items()) if n],
            "held": sorted(self.held),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "GoalState":
        return cls(
            resting={(str(k), str(d)): int(n) for k, d, n in data.get("resting", [])},
            held=frozenset(str(h) for h in data.get("held", [])),
        )


@dataclass
class SubgoalRecord:
    """What the tracker learned about one subgoal over the episode."""

    achieved: bool = False
    ever_achieved: bool = False
    first_achieved_step: int | None = None
    object_ever_held: bool = False


class GoalTracker:
    """Per-subgoal predicates over an episode, with the category rules of the paper."""

    def __init__(self, task: Task):
        self.task = task
        n = task.horizon
        self._prereq = [task.prerequisites(i) for i in range(n)]
        self._superseded = [task.has_later_leg(i) for i in range(n)]
        self._need = [self._needed_count(i) for i in range(n)]
        self._latched = [False] * n
        self._holds_prev = [False] * n
        self.records = [SubgoalRecord() for _ in range(n)]
        self.order_violations: list[tuple[int, int]] = []  # (step, subgoal index)
        self.last_state: GoalState | None = None
        self.step = -1

    def _needed_count(self, index: int) -> int:
        if self.task.category.chains_legs_per_object:
            return 1  # one object travels; 'one on revisit tasks' (Appendix B)
        key = self.task.subgoals[index].key
        return 1 + sum(1 for s in self.task.subgoals[:index] if s.key == key)

    def update(self, state: GoalState, step: int) -> tuple[bool, ...]:
        """Feed the scene at ``step``; returns each subgoal's predicate now."""
        self.step = step
        self.last_state = state
        subgoals = self.task.subgoals
        holds = [state.count(s.object, s.destination) >= self._need[i] for i, s in enumerate(subgoals)]
        # Latch in plan order so a chain of legs can complete in one step when its state allows.
        for i in range(len(subgoals)):
            ready = all(self._latched[p] for p in self._prereq[i])
            if holds[i] and not self._holds_prev[i] and not ready and self.task.category is TaskCategory.ORDERED:
                self.order_violations.append((step, i))
            if holds[i] and ready:
                self._latched[i] = True
        for i, s in enumerate(subgoals):
            ready = all(self._latched[p] for p in self._prereq[i])
            now = self._latched[i] if self._superseded[i] else (holds[i] and ready)
            rec = self.records[i]
            rec.achieved = now
            if now and not rec.ever_achieved:
                rec.ever_achieved = True
                rec.first_achieved_step = step
            if s.object in state.held:
                rec.object_ever_held = True
        self._holds_prev = holds
        return self.achieved

    @property
    def achieved(self) -> tuple[bool, ...]:
        return tuple(r.achieved for r in self.records)

    def distractors_placed(self, destinations: Iterable[str] | None = None) -> list[str]:
        """Exclusion distractors now resting on a destination (an exclusion violation)."""
        if self.last_state is None or not self.task.distractors:
            return []
        dests = set(destinations) if destinations is not None else {s.destination for s in self.task.subgoals}
        return sorted({k for (k, d), n in self.last_state.resting.items()
                       if n > 0 and k in self.task.distractors and d in dests})

    @property
    def success(self) -> bool:
        """Every subgoal holds and no constraint is broken (Section 3, Task Success Rate)."""
        return all(self.achieved) and not self.order_violations and not self.distractors_placed()
