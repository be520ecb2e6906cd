"""A day's automatic resets (``ladder-ros day --auto-reset``): the scene put back after every task episode.

After each task episode the day asks the graph for the reset of its scene (an episode of kind ``reset`` after
it: the orchestrator counts, plans, runs and confirms it, :mod:`ladder_ros.nodes.orchestrator.resets`), and the
next task episode starts from the scene the reset left (``start: after_reset``), nothing teleported. Each reset
is written down as a ``reset`` event with its own episode record (``kind: reset``), which also goes into
``episodes.jsonl``. What decides the next start:

* a confirmed reset (or one with nothing to move): the next episode continues from that scene;
* a reset that ends by its own rules (its plan done, its budget spent) and that the verifier cannot confirm: it
  runs again from the scene it left, up to ``--reset-tries`` resets in all (3 by default: a robot's next try
  costs half a minute, a pause can cost an unattended night), each with a seed of its own and starting with what
  the last one did not get to; then, or at once for a reset that cannot be planned (a count that cannot be read,
  no region with room), the day **pauses**, saying what is out of place, and writes ``paused`` with it. Started
  again on its folder (the operator has put the scene right), the day writes the operator's fix as an
  ``intervention`` and goes on, the next episode built from its layout as the operator set it;
* a reset the graph ended before its own rules did (``aborted: ...``: a robot fault, a node restarted under it,
  an operator's abort) and that the counts do not confirm: run again from the scene as it is, without using up a
  try (the graph stopped it, it did not fail); one the graph lost
  altogether (a node died, it never ended): once the graph is up again (a new simulator, a new twin: the scene is
  gone), the next episode starts from its layout;
* a next task set in another scene, or with other objects (the blocks of a plan of several tasks come in a drawn
  order), starts from its layout: its scene is set up anew, as a person changing the table would.

Pure: no rclpy; the day's runner (:mod:`ladder_ros.evaluation.day.runner`) drives the graph.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ladder_ros.core.metrics import wilson_interval
from ladder_ros.core.reset import NOTHING_TO_MOVE, RESET_EPISODE, START_AFTER_RESET, START_AFTER_TASK, START_LAYOUT
from ladder_ros.evaluation.day.records import INTERVENTION, PAUSED, RESET, DayRecords

CONFIRMED, NOT_CONFIRMED = "confirmed", "not confirmed"
NOT_PLANNED, INTERRUPTED = "not planned", "interrupted"
RESET_OUTCOMES = (CONFIRMED, NOTHING_TO_MOVE, NOT_CONFIRMED, NOT_PLANNED, INTERRUPTED)
SCENE_FIXED = "the operator put the scene right"


def ended_from_outside(record: Mapping[str, Any]) -> bool:
    """The reset ended before its own rules did (``aborted: ...``: an operator's abort, a robot fault, a node
    restarted under it, a stall): it did not fail at its task, the graph stopped it."""
    return str(record.get("finish_reason") or "").startswith("aborted: ")


def reset_outcome(record: Mapping[str, Any]) -> tuple[str, str]:
    """(outcome, reason) of a reset episode's record."""
    reset = record.get("reset") or {}
    if record.get("finish_reason") == NOTHING_TO_MOVE:
        return NOTHING_TO_MOVE, ""
    if reset.get("confirmed"):
        return CONFIRMED, ""
    where = "; ".join(reset.get("out_of_place") or []) or "no count came back"
    return NOT_CONFIRMED, (f"the reset after episode {record.get('start_after')} left objects out of place: {where}"
                           + (f" (it ended {record.get('finish_reason')})" if record.get("finish_reason") else ""))


class DayResets:
    """What the next task episode starts from, and the ``reset``, ``paused`` and ``intervention`` events."""

    def __init__(self, records: DayRecords, say: Callable[[str], None] = print,
                 scene_of: Callable[[str], Any] = lambda task_id: None):
        """``scene_of(task_id)``: what a task's scene holds (its name and objects); a task continues the scene the
        last reset left only when it holds the same."""
        self.records = records
        self.say = say
        self.scene_of = scene_of
        self.after: str | None = None  # the reset episode whose scene the next task episode continues
        self._scene: Any = None  # what the scene the last reset left holds

    def resume(self) -> None:
        """A start of the day on its folder: the graph comes up fresh, so the next episode is built from its layout;
        a pause for a reset that no intervention followed yet is the operator's fix, written down now."""
        self.after = None
        state = self.records.state
        if state.paused and (not state.interventions or state.interventions[-1]["t"] < state.paused[-1]["t"]):
            pause = state.paused[-1]
            self.records.append(INTERVENTION, kind=SCENE_FIXED, reason=pause.get("reason"), key=pause.get("key"),
                                after=pause.get("after"), paused_run=pause.get("run"))
            self.say(f"the day was paused for the operator ({pause.get('reason')}); {SCENE_FIXED}, recorded as an "
                     "intervention; the next episode is built from its layout")

    def start_fields(self, task_id: str) -> dict[str, str]:
        """The next task episode's start: after the last confirmed reset, or (empty) from its layout (none yet, or
        ``task_id`` is set in another scene)."""
        if not self.after:
            return {}
        if self.scene_of(task_id) != self._scene:
            self.say(f"    {task_id} is set in another scene than the one the last reset left: built from its layout")
            return {}
        return {"start": START_AFTER_RESET, "start_after": self.after}

    @staticmethod
    def reset_fields(task_episode_id: str) -> dict[str, str]:
        return {"kind": RESET_EPISODE, "start": START_AFTER_TASK, "start_after": task_episode_id}

    def scene_lost(self) -> None:
        """The graph was brought up again: the scene is built anew, the next episode from its layout."""
        self.after = None

    def write(self, key: str, after: str, outcome: str, *, reason: str = "", episode_id: str = "",
              wall_s: float = 0.0, record: dict | None = None, task_id: str = "") -> dict:
        """Write one ``reset`` event (of a task ``task_id``); a confirmed reset (or nothing to move) is what the next
        episode continues."""
        event = self.records.append(RESET, key=key, after=after, outcome=outcome, reason=reason,
                                    episode_id=episode_id, wall_s=round(wall_s, 3), record=record or {})
        self.after = episode_id if outcome in (CONFIRMED, NOTHING_TO_MOVE) else None
        self._scene = self.scene_of(task_id) if self.after else None
        return event

    def pause(self, key: str, after: str, reason: str) -> None:
        self.after = None
        self.records.append(PAUSED, key=key, after=after, reason=reason)

    def mean_reset_s(self) -> float:
        walls = [float(e.get("wall_s") or 0.0) for e in self.records.state.resets]
        return sum(walls) / len(walls) if walls else 0.0


def _rate(successes: int, scored: int) -> dict:
    low, high = wilson_interval(successes, scored)
    return {"successes": successes, "scored": scored, "success_rate": successes / scored if scored else None,
            "ci95": [round(low, 4), round(high, 4)]}


def auto_reset_summary(finished: list[Mapping], resets: list[Mapping], paused: list[Mapping],
                       interventions: list[Mapping]) -> dict:
    """The summary's ``auto_reset``: resets by outcome, the task episodes by where their scene came from (success
    with the Wilson 95 % interval), and the operator's interventions with why."""
    outcomes = {name: 0 for name in RESET_OUTCOMES}
    for event in resets:
        outcomes[str(event.get("outcome"))] = outcomes.get(str(event.get("outcome")), 0) + 1
    by_start: dict[str, list[int]] = {}
    for event in finished:
        record = event.get("record") or {}
        counts = by_start.setdefault(str(record.get("start") or START_LAYOUT), [0, 0, 0])
        counts[0] += 1
        if event.get("scored"):
            counts[1] += 1
            counts[2] += int(bool(event.get("success")))
    walls = [float(e.get("wall_s") or 0.0) for e in resets if e.get("episode_id")]
    return {"resets_attempted": len(resets), "resets_succeeded": outcomes[CONFIRMED] + outcomes[NOTHING_TO_MOVE],
            "outcomes": outcomes, "mean_reset_s": round(sum(walls) / len(walls), 2) if walls else None,
            "task_episodes_by_start": {start: {"episodes": n, **_rate(ok, scored)}
                                       for start, (n, scored, ok) in sorted(by_start.items())},
            "pauses": [{"reason": e.get("reason"), "after": e.get("after"), "run": e.get("run")} for e in paused],
            "operator_interventions": len(interventions),
            "interventions": [{"kind": e.get("kind"), "reason": e.get("reason"), "run": e.get("run")}
                              for e in interventions]}


def render_auto_reset(summary: Mapping[str, Any]) -> str:
    """One line for the day's table."""
    o = summary["outcomes"]
    starts = "; ".join(f"{start}: {v['successes']}/{v['scored']}" for start, v in
                       summary["task_episodes_by_start"].items()) or "none"
    return (f"auto-reset: {summary['resets_succeeded']}/{summary['resets_attempted']} resets succeeded "
            f"({o[CONFIRMED]} confirmed, {o[NOTHING_TO_MOVE]} nothing to move, {o[NOT_CONFIRMED]} not confirmed, "
            f"{o[NOT_PLANNED]} not planned, {o[INTERRUPTED]} interrupted); successes by start: {starts}; "
            f"operator interventions: {summary['operator_interventions']}")
