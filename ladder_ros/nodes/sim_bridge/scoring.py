"""A simulated episode's privileged score, as the sim bridge and the WidowX twin publish it on ``sim/episode_score``.

Both score an episode the same way once the orchestrator's last decision is in: the goal tracker's
per-subgoal predicates over the episode and the orchestrator's summary
(:func:`ladder_ros.core.metrics.score_episode`), so an episode's record means the same in lockstep and
on the wall clock.
"""

from __future__ import annotations

from typing import Any, Mapping

from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.metrics import score_episode
from ladder_ros.core.observation import PrivilegedState
from ladder_ros.core.task import Task


def privileged_score(task: Task, tracker: GoalTracker, summary: Mapping[str, Any],
                     privileged: PrivilegedState | None, *, steps_used: int, simulator: str) -> dict[str, Any]:
    """The score's fields (success, subgoal outcomes, violations, final goal state, steps, rule); raises LadderError."""
    score = score_episode(task, tracker, summary, privileged.env_success if privileged is not None else None)
    return {"success": score.success, "subgoals_done": score.subgoals_done,
            "subgoals": [o.to_dict() for o in score.outcomes], "violations": list(score.violations),
            "final_goal": privileged.goal.to_dict() if privileged is not None else {},
            "steps_used": int(steps_used), "simulator": simulator, "success_rule": task.success_rule}
