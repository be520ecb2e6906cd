"""The subgoal queue and its recovery moves (Section 4, 'Failure recovery'; Appendix B).

The plan is fixed at the start of an episode; the queue holds plan indices still to do, the
first being the current subgoal. Moves: complete the current one (remove it), advance past it
without verification (remove it, remember it was not verified), retry it in place (nothing moves),
move it to the end (interchangeable duplicates on RoboLab-Long; privileged set-aside), and restart
from the first subgoal after the last (the RoboLab-Long proprioceptive trigger).
"""

from __future__ import annotations

from typing import Sequence

from ladder_ros.core.errors import LadderError
from ladder_ros.core.task import Subgoal


class QueueEmptyError(LadderError):
    """A move needed a current subgoal and there is none."""


class SubgoalQueue:
    """Plan indices still to do, in order; ``current`` is the first."""

    def __init__(self, plan: Sequence[Subgoal]):
        if not plan:
            raise QueueEmptyError("a plan needs at least one subgoal")
        self.plan: tuple[Subgoal, ...] = tuple(plan)
        self.pending: list[int] = list(range(len(self.plan)))
        self.completed: list[int] = []  # verified complete, in order
        self.advanced: list[int] = []  # left without a verified completion, in order
        self.ever_current: set[int] = {0}

    @property
    def current(self) -> int | None:
        return self.pending[0] if self.pending else None

    @property
    def current_subgoal(self) -> Subgoal | None:
        return self.plan[self.pending[0]] if self.pending else None

    def _require_current(self) -> int:
        if not self.pending:
            raise QueueEmptyError("the queue is empty")
        return self.pending[0]

    def _note_current(self) -> None:
        if self.pending:
            self.ever_current.add(self.pending[0])

    def complete_current(self) -> int:
        index = self._require_current()
        self.pending.pop(0)
        self.completed.append(index)
        self._note_current()
        return index

    def advance_current(self) -> int:
        index = self._require_current()
        self.pending.pop(0)
        self.advanced.append(index)
        self._note_current()
        return index

    def move_current_to_end(self) -> int:
        index = self._require_current()
        self.pending.append(self.pending.pop(0))
        self._note_current()
        return index

    def restart(self) -> None:
        """Start over from the first subgoal: every plan index is pending again."""
        self.pending = list(range(len(self.plan)))
        self._note_current()

    def completed_subgoals(self) -> list[Subgoal]:
        return [self.plan[i] for i in self.completed]

    def occurrences(self, index: int) -> int:
        """How many times the subgoal at plan ``index`` (same object and destination) is in the plan."""
        key = self.plan[index].key
        return sum(1 for s in self.plan if s.key == key)
