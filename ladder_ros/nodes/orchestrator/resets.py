"""Reset episodes on the graph: the verifier counts the start regions, the reset runs, the verifier counts again.

A start command of kind ``reset`` (``EpisodeCommand.kind``) names the task whose scene is to be put back and the
task episode it follows (``start_after``). Nothing moves until the plan is known (``ladder_ros/core/reset.py``):

1. the verifier is asked, one query per (kind, region), how many of each kind the task moves rest in each of its
   start regions, on the scene that episode left: in lockstep that episode's last step (the simulator has not
   stepped since, and the verifier still holds that observation); on the wall clock the scene as it is now. A
   reply that cannot be read is asked again (``COUNT_ASKS`` asks in all), a query nobody answers is resent every
   ``verifier_retry_s`` and counted unreadable after ``verifier_abort_after_s``: the verifier's usual retries;
2. :func:`~ladder_ros.core.reset.plan_reset` turns the counts into the reset task, the regions where each kind
   started first: the counts that confirmed the reset before that episode, when it followed one; else, for an
   episode built from its layout, the kinds spread over the regions in turn (:func:`spread_start`), as layouts
   spread them, rather than all sent to the scene's first region. A plan that cannot be made (an unreadable
   count, no region with room) refuses the start with the reason; a task whose scene has no start regions is
   refused before anything is asked;
3. the reset task runs as an episode of its own, with the same policy, triggers and verifier and its own budget
   (``kind: reset``, ``start: after_task``), on the scene as it is;
4. once it is over, the verifier counts every start region the plan expects to hold something, on the episode's
   last step (lockstep) or the scene as it is then (wall clock). The record's ``reset`` holds the moves, what was
   expected and counted, ``confirmed`` and what is out of place; an unconfirmed reset's final status says what
   is out of place in one line.

Count queries carry ids from :data:`COUNT_REQUEST_BASE` on, apart from the core orchestrator's (which count
from 1 in each episode), and the reason ``start_regions``. No rclpy here: the node hands in the answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from ladder_ros.core.errors import LadderError
from ladder_ros.core.reset import (
    COUNT_ASKS,
    COUNT_REASON,
    RESET_EPISODE,
    ResetPlan,
    ResetPlanError,
    ResetScene,
    auto_reset_refusal,
    count_queries,
    count_subgoal,
    out_of_place,
    plan_reset,
    retry_order,
)
from ladder_ros.core.suite import TaskSuite
from ladder_ros.core.task import Task
from ladder_ros.core.verification import VerificationRequest
from ladder_ros.messages import (
    ABORTED,
    FINISHED,
    EpisodeCommand,
    EpisodeStatus,
    VerificationRequestDoc,
    VerificationResultDoc,
)

COUNT_REQUEST_BASE = 1_000_000  # count queries' request ids start here (the core's count from 1 per episode)
COUNTS_KEPT = 8  # confirmed counts kept, by reset episode id (the next reset's ``before``)

Counts = dict[tuple[str, str], "int | None"]


def reset_scene_of(suite: TaskSuite, task: Task) -> ResetScene | None:
    """``task``'s start regions as its suite declares them (a tabletop scene); None for a scene that has none or
    is not one the tabletop reads (another simulator's)."""
    from ladder_ros.sim.tabletop_embodiment import embodiment_for
    from ladder_ros.sim.tabletop_scene import parse_scene, reset_scene

    raw = suite.scenes.get(task.scene)
    if not isinstance(raw, Mapping):
        return None
    try:
        return reset_scene(parse_scene(task.scene, raw, embodiment_for(suite.embodiment)), task)
    except LadderError:
        return None


def spread_start(task: Task, scene: ResetScene) -> Counts:
    """Where each kind the task moves is taken to have started when no count says (an episode built from its
    layout): the kinds, in the order the task first names them, each in the next start region that takes it, in
    turn. So a reset spreads the objects over the regions as a layout does, instead of crowding them all into the
    scene's first region, where each lies beside the others for the next episode's grasps."""
    kinds = list(dict.fromkeys(s.object for s in task.subgoals))
    before: Counts = {}
    for index, kind in enumerate(kinds):
        regions = scene.regions_for(kind)
        if regions:
            before[(kind, regions[index % len(regions)].name)] = 1
    return before


def _table(counts: Counts) -> list:
    return [[k, r, n] for (k, r), n in sorted(counts.items())]


@dataclass
class _Ask:
    pair: tuple[str, str]
    doc: VerificationRequestDoc
    asks: int
    first_sent: float
    last_sent: float


class RegionCounts:
    """One round of count queries about ``pairs`` (kind, region) on the observation stamped ``stamp_ns``."""

    def __init__(self, pairs, scene: ResetScene, *, episode_id: str, step: int, stamp_ns: int,
                 next_id: Callable[[], int], expected: Mapping[tuple[str, str], int] | None = None):
        self._regions = {r.name: r for r in scene.regions}
        self._episode_id, self._step, self._stamp_ns = episode_id, int(step), int(stamp_ns)
        self._next_id = next_id
        self._expected = dict(expected or {})
        self._pairs = list(pairs)
        self.counts: Counts = {}
        self._open: dict[int, _Ask] = {}

    @property
    def done(self) -> bool:
        return len(self.counts) == len(self._pairs)

    def _ask(self, index: int, pair: tuple[str, str], asks: int, now: float) -> VerificationRequestDoc:
        kind, region = pair
        request = VerificationRequest(request_id=self._next_id(), step=self._step, plan_index=index,
                                      subgoal=count_subgoal(kind, self._regions[region]),
                                      required=self._expected.get(pair, 1), reason=COUNT_REASON)
        doc = VerificationRequestDoc.of(self._episode_id, self._stamp_ns, request)
        self._open[request.request_id] = _Ask(pair, doc, asks, now, now)
        return doc

    def start(self, now: float) -> list[VerificationRequestDoc]:
        """The first query of every pair, to send now."""
        return [self._ask(i, pair, 1, now) for i, pair in enumerate(self._pairs)]

    def take(self, doc: VerificationResultDoc, now: float) -> tuple[bool, list[VerificationRequestDoc]]:
        """An answer: (whether it was one of this round's, the queries to send because of it)."""
        result = doc.verification_result()
        ask = self._open.get(result.request_id)
        if ask is None or doc.episode_id != self._episode_id:
            return False, []
        del self._open[result.request_id]
        if result.count is None and ask.asks < COUNT_ASKS:
            return True, [self._ask(ask.doc.request["plan_index"], ask.pair, ask.asks + 1, now)]
        self.counts[ask.pair] = result.count
        return True, []

    def due(self, now: float, retry_s: float, give_up_s: float) -> list[VerificationRequestDoc]:
        """Queries to send again (unanswered for ``retry_s``); one unanswered for ``give_up_s`` counts unreadable."""
        resend = []
        for request_id, ask in list(self._open.items()):
            if now - ask.first_sent >= give_up_s:
                del self._open[request_id]
                self.counts[ask.pair] = None
            elif now - ask.last_sent >= retry_s:
                ask.last_sent = now
                resend.append(ask.doc)
        return resend


@dataclass
class _Preparation:
    """A reset start waiting for the counts its plan needs."""

    command: EpisodeCommand
    task: Task
    scene: ResetScene
    counts: RegionCounts
    before: Counts | None
    first: tuple[str, ...] = ()  # a reset that runs again: the kinds it sends back first (retry_order)
    plan: ResetPlan | None = None


@dataclass
class _Running:
    """The reset episode under way: its plan, and the round that confirms it once it is over."""

    episode_id: str
    command: EpisodeCommand
    scene: ResetScene
    plan: ResetPlan
    counted_after_task: Counts
    check: RegionCounts | None = None


class ResetEpisodes:
    """Reset starts counted and planned before they start, reset episodes confirmed once over (module docstring).

    ``send`` publishes a count query; ``start(command)`` starts a reset whose plan is ready (:meth:`planned`),
    ``refuse(command, why)`` refuses one whose plan cannot be made; ``counted()`` runs when the confirming counts
    of the reset episode are in (its record can go out).
    """

    def __init__(self, suite: TaskSuite, *, lockstep: bool, retry_s: float, give_up_s: float,
                 send: Callable[[VerificationRequestDoc], None], start: Callable[[EpisodeCommand], None],
                 refuse: Callable[[EpisodeCommand, str], None], counted: Callable[[], None],
                 now_ns: Callable[[], int], logger):
        self._suite = suite
        self._lockstep = lockstep
        self.retry_s, self.give_up_s = retry_s, give_up_s
        self._send, self._start, self._refuse, self._counted = send, start, refuse, counted
        self._now_ns = now_ns
        self._log = logger
        self._scenes: dict[str, ResetScene | None] = {}
        self._request_id = COUNT_REQUEST_BASE
        self._preparing: _Preparation | None = None
        self._running: _Running | None = None
        self._confirmed_counts: dict[str, Counts] = {}  # reset episode id -> its confirming counts
        self._before: tuple[str, Counts] | None = None  # the last reset's task episode and its start counts

    def _next_id(self) -> int:
        self._request_id += 1
        return self._request_id

    # ------------------------------------------------------------------ before the reset
    def scene(self, task: Task) -> ResetScene:
        """``task``'s start regions; :class:`ResetPlanError` (one line) when it cannot be reset automatically."""
        if task.task_id not in self._scenes:
            self._scenes[task.task_id] = reset_scene_of(self._suite, task)
        scene = self._scenes[task.task_id]
        refusal = auto_reset_refusal(task, scene)
        if refusal:
            raise ResetPlanError(refusal)
        assert scene is not None
        return scene

    @property
    def preparing(self) -> EpisodeCommand | None:
        """The reset start whose counts are awaited, if any."""
        return self._preparing.command if self._preparing is not None else None

    def is_repeat(self, command: EpisodeCommand) -> bool:
        """``command`` repeats the start being counted (its sender sends again until it hears back)."""
        return self._preparing is not None and self._preparing.command == command

    def planned(self, command: EpisodeCommand) -> ResetPlan | None:
        """The plan of ``command`` once its counts are in (None: not counted yet)."""
        p = self._preparing
        return p.plan if p is not None and p.command == command else None

    def prepare(self, command: EpisodeCommand, task: Task, last: EpisodeStatus, last_end_ns: int,
                now: float) -> None:
        """Ask the counts the reset of ``task`` after episode ``command.start_after`` needs; raises
        :class:`LadderError` (one line) when it cannot be reset or its scene cannot be counted."""
        scene = self.scene(task)
        ended = last.state in (FINISHED, ABORTED)
        follows_last = last.episode_id == command.start_after and ended
        # The reset of the same scene again, after one that was not confirmed: it continues that one's scene.
        again = ended and last.kind == RESET_EPISODE and last.start_after == command.start_after
        if self._lockstep:
            if not (follows_last or again):
                raise LadderError(f"cannot count the scene episode {command.start_after} left: the last episode "
                                  f"this orchestrator ran is {last.episode_id or 'none'} ({last.state})")
            step, stamp = max(last.step, 0), last_end_ns
        else:
            step, stamp = max(last.step, 0) if follows_last or again else 0, self._now_ns()
        before = self._confirmed_counts.get(last.start_after) if follows_last and last.start_after else None
        if again and self._before is not None and self._before[0] == command.start_after:
            before = self._before[1]
        if before is None:
            before = spread_start(task, scene)
        self._before = (command.start_after, before)
        counts = RegionCounts(count_queries(task, scene), scene, episode_id=command.start_after, step=step,
                              stamp_ns=stamp, next_id=self._next_id)
        first = retry_order(last.result or {}) if again else ()
        self._preparing = _Preparation(command, task, scene, counts, before, first)
        self._log.info(f"reset of {task.task_id} after episode {command.start_after}: counting "
                       f"{len(count_queries(task, scene))} (kind, start region) pairs before anything moves")
        for doc in counts.start(now):
            self._send(doc)

    def _prepared(self) -> None:
        p = self._preparing
        assert p is not None and p.counts.done
        try:
            p.plan = plan_reset(p.task, p.scene, p.counts.counts, p.before, p.first)
        except ResetPlanError as exc:
            self._preparing = None
            self._refuse(p.command, f"the reset after episode {p.command.start_after} cannot be planned: {exc}")
            return
        self._start(p.command)

    def cancel(self, reason: str) -> bool:
        """Refuse the reset being counted (a stop or abort came); True when there was one."""
        p, self._preparing = self._preparing, None
        if p is None:
            return False
        self._refuse(p.command, f"cancelled before it started: {reason}")
        return True

    def forget(self, command: EpisodeCommand) -> None:
        """``command`` was refused or started: its counts are no longer awaited."""
        if self._preparing is not None and self._preparing.command == command:
            self._preparing = None

    def began(self, episode_id: str, command: EpisodeCommand) -> ResetPlan:
        """The reset ``command`` (counted and planned) runs as ``episode_id``; returns its plan."""
        p = self._preparing
        assert p is not None and p.command == command and p.plan is not None
        self._preparing = None
        self._running = _Running(episode_id, command, p.scene, p.plan, dict(p.counts.counts))
        if p.plan.empty:  # nothing moves: the counts that found nothing to move confirm it
            self._running.check = p.counts
        return p.plan

    # ------------------------------------------------------------------ after the reset
    def awaits_confirmation(self, status: EpisodeStatus, last_step: int, end_ns: int, now: float) -> bool:
        """For a reset episode whose last decision is out: True while its confirming counts are awaited (the
        first call asks them)."""
        run = self._running
        if run is None or run.episode_id != status.episode_id:
            return False
        if run.check is None:
            stamp = end_ns if self._lockstep else self._now_ns()
            run.check = RegionCounts(list(run.plan.expected), run.scene, episode_id=run.episode_id,
                                     step=max(last_step, 0), stamp_ns=stamp, next_id=self._next_id,
                                     expected=run.plan.expected)
            for doc in run.check.start(now):
                self._send(doc)
        return not run.check.done

    @property
    def confirming(self) -> bool:
        """The confirming counts of a reset episode are being asked."""
        run = self._running
        return run is not None and run.check is not None and not run.check.done

    def record_section(self, episode_id: str) -> dict:
        """The record's ``reset`` of the reset episode ``episode_id`` (empty for any other episode) and, when the
        counts fall short, ``reset_reason``: one line naming what is out of place."""
        run = self._running
        if run is None or run.episode_id != episode_id:
            return {}
        counts = run.check.counts if run.check is not None and run.check.done else {}
        shortfalls = out_of_place(counts, run.plan)
        texts = {r.name: r.text for r in run.scene.regions}
        lines = [s.describe(texts) for s in shortfalls]
        section = {**run.plan.to_dict(), "confirmed": not shortfalls, "counted": _table(counts),
                   "counted_after_task": _table(run.counted_after_task), "out_of_place": lines}
        if not shortfalls:
            self._confirmed_counts[episode_id] = dict(counts)
            while len(self._confirmed_counts) > COUNTS_KEPT:
                self._confirmed_counts.pop(next(iter(self._confirmed_counts)))
            return {"reset": section}
        if run.check is None or not run.check.done:
            section["out_of_place"] = lines = ["not counted: the episode's record went out before the verifier's "
                                               "counts"] + lines
        return {"reset": section, "reset_reason": f"the reset after episode {run.command.start_after} left "
                                                  "objects out of place: " + "; ".join(lines)}

    def ended(self, episode_id: str) -> None:
        """The reset episode's record went out."""
        if self._running is not None and self._running.episode_id == episode_id:
            self._running = None

    # ------------------------------------------------------------------ answers and timers
    def take_result(self, doc: VerificationResultDoc, now: float) -> bool:
        """A ``verifier/result``: True when it answered one of the count queries (nobody else wants it)."""
        for counts, done in ((self._preparing.counts if self._preparing is not None else None, self._prepared),
                             (self._running.check if self._running is not None else None, self._counted)):
            if counts is None or counts.done:
                continue
            taken, again = counts.take(doc, now)
            if taken:
                for request in again:
                    self._send(request)
                if counts.done:
                    done()
                return True
        return False

    def check(self, now: float) -> None:
        """The watchdog's tick: resend unanswered count queries, give up on those nobody answers."""
        for counts, done in ((self._preparing.counts if self._preparing is not None else None, self._prepared),
                             (self._running.check if self._running is not None else None, self._counted)):
            if counts is None or counts.done:
                continue
            for request in counts.due(now, self.retry_s, self.give_up_s):
                self._send(request)
            if counts.done:
                done()
