"""Chaos in the rehearsal: the faults a lab day meets, injected at seeded random times, each seen to an end.

``ladder-ros rehearse widowx --faults RATE --seed S`` and ``ladder-ros day PLAN --rehearsal --faults RATE``
draw, for every episode, a number of faults from a Poisson law of mean ``RATE`` (0.25: about one episode in
five gets one, a fault every four episodes on average), each of a kind drawn uniformly from ``--fault-kinds``
(default: all of :data:`KINDS`) at a time drawn uniformly in the episode's first seconds
(:class:`ChaosSchedule`; the draw depends only on the seed, the episode's task, variant, layout and seed, and
the attempt, so a run is reproduced by its seed). The kinds, and what plays each:

=================  ====================================================================================
``server_kill``    the rehearsal's policy server process is killed (SIGKILL) and started again after
                   ``duration_s``, as a lab's GPU machine whose server crashed and was restarted
``server_error``   the server answers every request with openpi's error for ``duration_s``
``server_stall``   the server blocks its event loop for ``duration_s`` (openpi's compile, a swapping host)
``camera_stall``   the twin's frame channel stops updating for ``duration_s``
``vlm_timeout``    the verifier's model does not answer in time: the twin holds back the oracle's input for
                   the verifier's ``observation_wait_s`` and 2 s more, so a query asked then is answered with
                   the verifier's error and no count when its wait runs out, as a timed-out VLM call is
``motor_stall``    an arm joint of the twin is blocked for ``duration_s`` (its present current saturates,
                   an overload error follows after 5 s), then the obstacle is taken away
``estop``          the driver's e-stop (``robot/estop``), released after ``duration_s``, the arm armed again,
                   as the operator does
``node_kill``      one node of the robot graph is killed (SIGKILL) and started again at once, as
                   ``ros2 launch`` respawns it
=================  ====================================================================================

The instrument-side faults are asked for on ``instruments/fault`` (:mod:`ladder_ros.instruments.faults`); the
e-stop through the driver's own services; the kills through the graph's processes. Nothing in the product
changes for them. Every fault is recorded, in the episode's record (``chaos``) and in ``OUT/chaos.jsonl``:
when it was planned and injected (seconds after the episode's start, and the wall time), its kind and target,
whether the instrument said it played it, and how it ended:

* ``went on``: the episode ended by its own rules (the plan done, the budget spent);
* ``ended``: the episode ended with a reason (``aborted: ...``) and the day went on (after the driver's
  recovery, a graph brought up again, or the episode rerun when it was void);
* ``paused``: the graph could not be got back without the operator (a killed node that did not come back, an
  arm the driver would not arm again): :class:`OperatorNeeded` stops the day, naming what to do;
* ``not reached``: the episode ended before the fault's time.

Never a hang: besides the episode timeout, the runner's watchdog aborts an episode in which no action was
handed out for ``watchdog_s`` after a fault, and pauses the day when even that does not end it.
:func:`chaos_summary` counts the faults by kind and outcome. The schedule and the summary are pure; the
runner (:class:`ChaosRunner`) drives the graph through small endpoints (:class:`ChaosEndpoints` on ROS).
"""

from __future__ import annotations

import hashlib
import json
import math
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError, LadderError

SERVER_KILL, SERVER_ERROR, SERVER_STALL = "server_kill", "server_error", "server_stall"
CAMERA_STALL, VLM_TIMEOUT, MOTOR_STALL = "camera_stall", "vlm_timeout", "motor_stall"
ESTOP, NODE_KILL = "estop", "node_kill"
KINDS = (SERVER_KILL, SERVER_ERROR, SERVER_STALL, CAMERA_STALL, VLM_TIMEOUT, MOTOR_STALL, ESTOP, NODE_KILL)
# The instrument fault (ladder_ros/instruments/faults.py) each kind asks for, where an instrument plays it.
INSTRUMENT_FAULT = {SERVER_ERROR: "server_error", SERVER_STALL: "server_stall", CAMERA_STALL: "camera_stall",
                    VLM_TIMEOUT: "oracle_hold", MOTOR_STALL: "motor_stall"}
# How long each plays (s; project choices: a few control periods to a few seconds, what a lab meets most).
DURATIONS_S = {SERVER_KILL: 3.0, SERVER_ERROR: 3.0, SERVER_STALL: 4.0, CAMERA_STALL: 3.0, VLM_TIMEOUT: 7.0,
               MOTOR_STALL: 7.0, ESTOP: 3.0, NODE_KILL: 0.0}
VLM_MARGIN_S = 2.0  # an oracle hold outlasts the verifier's observation_wait_s by this much
SERVER_NODE = "rehearsal_server"
# The robot graph's own nodes a node_kill picks from (the instruments are the world, not the graph).
KILLABLE_NODES = ("widowx_driver", "camera", "depth", "policy", "gripper_trigger", "vlm_verifier", "orchestrator",
                  "episode_recorder")
DRIVER_NODE = "widowx_driver"
# Joints whose motor (XM430-W350) reads its current; wrist_rotate's XL430-W250 has no current sensor.
STALLABLE_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle")
FIRST_S, LAST_S = 3.0, 15.0  # a fault falls this long after its episode's start (an episode takes 20-40 s)
MAX_RATE = 20.0
WATCHDOG_S = 90.0  # no action handed out for this long after a fault: the runner aborts the episode
ABORT_GRACE_S = 30.0  # an episode the watchdog aborted that has not ended this much later pauses the day
KILL_WAIT_S = 10.0  # a killed process is gone within this long
ARM_RETRY_S = 0.5
ARM_GIVE_UP_S = 60.0  # the driver refuses to arm this long after a release or a respawn: the operator is needed

WENT_ON, ENDED, PAUSED, NOT_REACHED = "went on", "ended", "paused", "not reached"
OUTCOMES = (WENT_ON, ENDED, PAUSED, NOT_REACHED)
CHAOS_FILE = "chaos.jsonl"


class OperatorNeeded(LadderError):
    """The chaos runner could not get the graph back by itself: the day pauses, saying what the operator must do."""


# ---------------------------------------------------------------------------------------------------- the schedule
@dataclass(frozen=True)
class PlannedFault:
    """One fault of an episode: its kind, when (s after the episode's start), for how long, and on what."""

    kind: str
    at_s: float
    duration_s: float
    target: str = ""  # the node a node_kill kills, the joint a motor_stall blocks


def parse_kinds(text: str | None) -> tuple[str, ...]:
    """``--fault-kinds`` (comma-separated; empty or None: every kind), checked."""
    if not text:
        return KINDS
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ConfigError(f"--fault-kinds: unknown kind {unknown[0] if unknown else text!r} (kinds: "
                          f"{', '.join(KINDS)})")
    return kinds


def episode_key(task_id: str, variant: str, layout: int, seed: int) -> str:
    """What names an episode for the schedule: the same episode gets the same faults in every run."""
    return f"{task_id}/{variant or 'default'}/layout{int(layout)}/seed{int(seed)}"


class ChaosSchedule:
    """The seeded faults of each episode (module docstring): Poisson(``rate``) of them, kinds uniform over
    ``kinds``, times uniform in [``first_s``, ``last_s``]."""

    def __init__(self, rate: float, seed: int, kinds: Sequence[str] = KINDS, *, first_s: float = FIRST_S,
                 last_s: float = LAST_S, durations: Mapping[str, float] | None = None):
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) \
                or not 0.0 <= rate <= MAX_RATE:
            raise ConfigError(f"--faults must be an expected number of faults per episode in [0, {MAX_RATE:g}], "
                              f"got {rate!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"the chaos seed must be a whole number >= 0, got {seed!r}")
        self.kinds = parse_kinds(",".join(kinds))
        if not 0.0 <= first_s < last_s:
            raise ConfigError(f"faults fall between {first_s} and {last_s} s after an episode's start: need "
                              "0 <= first < last")
        self.rate, self.seed, self.first_s, self.last_s = float(rate), int(seed), float(first_s), float(last_s)
        self.durations = {**DURATIONS_S, **dict(durations or {})}
        for kind, value in self.durations.items():
            if not (math.isfinite(value) and value >= 0.0):
                raise ConfigError(f"the duration of {kind} must be >= 0 s, got {value!r}")

    def faults_for(self, key: str, attempt: int = 1) -> list[PlannedFault]:
        """The faults of the episode ``key`` (:func:`episode_key`) at its ``attempt``-th run, by time."""
        digest = hashlib.sha256(f"{self.seed}|{key}|{int(attempt)}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        faults = []
        for _ in range(int(rng.poisson(self.rate))):
            kind = self.kinds[int(rng.integers(len(self.kinds)))]
            at = round(float(rng.uniform(self.first_s, self.last_s)), 3)
            target = ""
            if kind == MOTOR_STALL:
                target = STALLABLE_JOINTS[int(rng.integers(len(STALLABLE_JOINTS)))]
            elif kind == NODE_KILL:
                target = KILLABLE_NODES[int(rng.integers(len(KILLABLE_NODES)))]
            elif kind == SERVER_KILL:
                target = SERVER_NODE
            faults.append(PlannedFault(kind, at, float(self.durations[kind]), target))
        return sorted(faults, key=lambda f: f.at_s)

    def describe(self) -> str:
        return (f"{self.rate:g} faults per episode expected (seed {self.seed}; kinds: {', '.join(self.kinds)}), "
                f"{self.first_s:g}-{self.last_s:g} s into an episode")


# ---------------------------------------------------------------------------------------------------- the records
class ChaosLog:
    """Every fault's record, appended (and flushed) to ``path``, and kept for the summary; the attempts of
    each episode key over the run's graph restarts."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path is not None else None
        self.records: list[dict] = []
        self.attempts: Counter[str] = Counter()

    def add(self, record: dict) -> None:
        self.records.append(record)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()


def read_chaos(path: Path) -> list[dict]:
    """The fault records of ``path`` (a chaos.jsonl; missing: none)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a kill
    return records


def chaos_summary(records: Iterable[Mapping[str, Any]]) -> dict:
    """Faults by kind and outcome (``{"faults": n, "by_outcome": {...}, "by_kind": {kind: {outcome: n}}}``)."""
    by_kind: dict[str, Counter] = {}
    outcomes: Counter = Counter()
    total = 0
    for r in records:
        kind, outcome = str(r.get("kind")), str(r.get("outcome"))
        by_kind.setdefault(kind, Counter())[outcome] += 1
        outcomes[outcome] += 1
        total += 1
    return {"faults": total, "by_outcome": dict(sorted(outcomes.items())),
            "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())}}


def render_chaos(summary: Mapping[str, Any]) -> str:
    if not summary.get("faults"):
        return "chaos: no fault injected"
    kinds = "; ".join(f"{kind}: " + ", ".join(f"{o} {n}" for o, n in outcomes.items())
                      for kind, outcomes in summary["by_kind"].items())
    return f"chaos: {summary['faults']} faults ({kinds})"


@dataclass
class ChaosPlan:
    """What a run's chaos is: the schedule, the log, and the verifier's wait a vlm_timeout outlasts."""

    schedule: ChaosSchedule
    log: ChaosLog
    watchdog_s: float = WATCHDOG_S


def chaos_plan(rate: float, seed: int, kinds_text: str | None, params: Mapping[str, Mapping[str, Any]],
               out: Path) -> ChaosPlan:
    """The plan of ``--faults RATE --seed S --fault-kinds K`` on a graph with ``params``, logging into ``out``."""
    wait = float((params.get("vlm_verifier") or {}).get("observation_wait_s", DURATIONS_S[VLM_TIMEOUT]))
    schedule = ChaosSchedule(rate, seed, parse_kinds(kinds_text), durations={VLM_TIMEOUT: wait + VLM_MARGIN_S})
    return ChaosPlan(schedule, ChaosLog(Path(out) / CHAOS_FILE))


# ---------------------------------------------------------------------------------------------------- the runner
@dataclass
class ActiveFault:
    """A planned fault of the running episode, as it goes: injected, played, over."""

    planned: PlannedFault
    fault_id: int
    due_at: float  # monotonic s
    record: dict
    injected_at: float | None = None
    over_at: float | None = None  # when its effect is meant to be over (monotonic s)
    done: bool = False  # nothing left to do for it (restarted, released, re-armed)
    stage: str = ""
    pending: Any = None  # a service call in flight
    since: float = 0.0  # when the current stage began


@dataclass
class EpisodeChaos:
    episode_id: str
    key: str
    started_at: float
    faults: list[ActiveFault] = field(default_factory=list)
    tags_seen: int = 0
    progress_at: float = 0.0
    aborted_at: float | None = None


class ChaosRunner:
    """Injects each episode's planned faults into a running rehearsal and sees each to an end.

    ``endpoints`` publishes instrument faults and calls the driver's services (:class:`ChaosEndpoints`);
    ``processes`` kills and starts nodes (``signal``, ``start_node``, ``dead``, ``processes``); ``excused`` is the
    operator's set of nodes that may be down now (a server killed on purpose); ``tags(episode_id)`` counts the
    actions handed out in an episode, ``abort(episode_id, reason)`` ends one and ``spin(condition, timeout_s,
    what)`` spins the graph until a condition (raising on timeout).
    """

    def __init__(self, plan: ChaosPlan, *, endpoints: Any, processes: Any, excused: set[str],
                 tags: Callable[[str], int], abort: Callable[[str, str], None],
                 spin: Callable[[Callable[[], bool], float, str], None], armed: Callable[[], bool],
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 say: Callable[[str], None] = print):
        self.plan = plan
        self.endpoints = endpoints
        self.processes = processes
        self.excused = excused
        self.tags = tags
        self.abort = abort
        self.spin = spin
        self.armed = armed
        self.clock = clock
        self.wall = wall
        self.say = say
        self.current: EpisodeChaos | None = None
        self._ids = int(wall() * 1000) % 1_000_000_000  # fault ids unique across graph restarts

    # ------------------------------------------------------------------ an episode
    def begin(self, episode_id: str, key: str) -> list[PlannedFault]:
        log = self.plan.log
        log.attempts[key] += 1
        planned = self.plan.schedule.faults_for(key, log.attempts[key])
        now = self.clock()
        episode = EpisodeChaos(episode_id, key, now, progress_at=now)
        for p in planned:
            self._ids += 1
            episode.faults.append(ActiveFault(p, self._ids, now + p.at_s, {
                "kind": p.kind, "episode_id": episode_id, "episode": key, "attempt": log.attempts[key],
                "fault_id": self._ids, "planned_s": p.at_s, "duration_s": p.duration_s, "target": p.target}))
        self.current = episode
        return planned

    def during(self, episode_id: str) -> None:
        """Every turn of the episode's wait: inject what is due, move each fault on, watch for no progress."""
        episode = self.current
        if episode is None or episode.episode_id != episode_id:
            return
        now = self.clock()
        for fault in episode.faults:
            if fault.injected_at is None and now >= fault.due_at:
                self._inject(episode, fault, now)
            elif fault.injected_at is not None and not fault.done:
                self._advance(fault, now)
        self._watch(episode, now)

    def interrupted(self, episode_id: str, error: BaseException) -> None:
        """The episode's wait ended with an error (a node that died, a timeout, the operator needed): its faults
        end with it: ``paused`` when the operator is needed, else ``ended`` (the graph is brought up again)."""
        episode, self.current = self.current, None
        if episode is None or episode.episode_id != episode_id:
            return
        outcome = PAUSED if isinstance(error, OperatorNeeded) else ENDED
        for fault in episode.faults:
            self._settle(fault)
            self._close(fault, outcome if fault.injected_at is not None else NOT_REACHED, f"interrupted: {error}")

    def end(self, episode_id: str, record: dict) -> None:
        """The episode is over (``record``: its result): finish what each fault left (restart, release, re-arm),
        then record how each ended, in ``record["chaos"]`` too. Raises :class:`OperatorNeeded` when the graph
        cannot be got back."""
        episode, self.current = self.current, None
        if episode is None or episode.episode_id != episode_id:
            return
        reason = str(record.get("finish_reason") or "")
        problem = None
        for fault in episode.faults:
            if fault.injected_at is None:
                self._close(fault, NOT_REACHED, "the episode ended before its time")
                continue
            try:
                self._finish(fault)
            except OperatorNeeded as exc:
                problem = problem or exc
                self._close(fault, PAUSED, str(exc))
                continue
            outcome = ENDED if reason.startswith("aborted") else WENT_ON
            self._close(fault, outcome, reason)
        record["chaos"] = [f.record for f in episode.faults]
        if problem is not None:
            raise problem

    # ------------------------------------------------------------------ injecting
    def _inject(self, episode: EpisodeChaos, fault: ActiveFault, now: float) -> None:
        p = fault.planned
        fault.injected_at = now
        fault.since = now
        fault.record["injected_s"] = round(now - episode.started_at, 3)
        fault.record["time"] = round(self.wall(), 3)
        fault.over_at = now + p.duration_s
        try:
            if p.kind in INSTRUMENT_FAULT:
                self.endpoints.publish_fault(fault.fault_id, INSTRUMENT_FAULT[p.kind], p.duration_s, p.target)
                fault.stage = "playing"
            elif p.kind == ESTOP:
                fault.pending = self.endpoints.estop()
                fault.stage = "pressed"
            elif p.kind in (SERVER_KILL, NODE_KILL):
                self._kill(p.target)
                if p.kind == SERVER_KILL:
                    self.excused.add(p.target)
                    fault.stage = "down"
                else:
                    self._respawn(fault)
        except LadderError as exc:
            fault.record["error"] = str(exc)
            fault.done = True
        self.say(f"  chaos: {p.kind}{' ' + p.target if p.target else ''} at {fault.record['injected_s']:.1f} s"
                 f"{' for ' + format(p.duration_s, 'g') + ' s' if p.duration_s else ''}")

    def _kill(self, name: str) -> None:
        process = self.processes.processes.get(name)
        if process is None:
            raise LadderError(f"the graph runs no node {name}")
        self.processes.signal(name, signal.SIGKILL)
        deadline = self.clock() + KILL_WAIT_S
        while process.poll() is None and self.clock() < deadline:
            time.sleep(0.01)
        if process.poll() is None:
            raise OperatorNeeded(f"node {name} did not exit after SIGKILL within {KILL_WAIT_S:g} s")

    def _respawn(self, fault: ActiveFault) -> None:
        name = fault.planned.target
        process = self.processes.processes.get(name)
        if process is None or process.poll() is not None:  # unless another fault's respawn brought it back
            self.processes.start_node(name)
        self.excused.discard(name)
        fault.record["respawned_s"] = round(self.clock() - (fault.injected_at or self.clock()), 3)
        if name == DRIVER_NODE:  # a new driver starts disarmed: arm it again, as the operator does
            fault.stage, fault.since = "rearm", self.clock()
        else:
            fault.stage, fault.done = "respawned", True

    def _advance(self, fault: ActiveFault, now: float) -> None:
        """Move an injected fault on: a killed server started again, an e-stop released, the arm armed again."""
        kind = fault.planned.kind
        if kind in INSTRUMENT_FAULT:
            applied = self.endpoints.applied.get(fault.fault_id)
            if applied is not None and "played" not in fault.record:
                fault.record["played"] = applied.detail or f"error: {applied.error}"
                fault.record["played_by"] = applied.instrument
            if fault.over_at is not None and now >= fault.over_at:
                fault.done = True
        elif kind == SERVER_KILL and fault.stage == "down" and fault.over_at is not None and now >= fault.over_at:
            self._respawn(fault)
        elif kind == ESTOP:
            self._advance_estop(fault, now)
        elif kind == NODE_KILL and fault.stage == "rearm":
            self._advance_arming(fault, now)

    def _advance_estop(self, fault: ActiveFault, now: float) -> None:
        if fault.stage == "pressed" and fault.pending is not None and fault.pending.done():
            reply = fault.pending.result()
            fault.record["pressed"] = getattr(reply, "message", "")
            fault.pending, fault.stage = None, "latched"
        if fault.stage == "latched" and fault.over_at is not None and now >= fault.over_at:
            fault.pending, fault.stage, fault.since = self.endpoints.release(), "releasing", now
        if fault.stage == "releasing" and fault.pending is not None and fault.pending.done():
            fault.record["released"] = getattr(fault.pending.result(), "message", "")
            fault.pending, fault.stage, fault.since = None, "rearm", now
        if fault.stage == "rearm":
            self._advance_arming(fault, now)

    def _advance_arming(self, fault: ActiveFault, now: float) -> None:
        """Arm the driver (it refuses while it checks the arm after a start: ask again every ARM_RETRY_S)."""
        if self.armed():
            fault.stage, fault.done = "armed", True
            fault.record["rearmed_s"] = round(now - (fault.injected_at or now), 3)
            return
        if fault.pending is None:
            if now - fault.since > ARM_GIVE_UP_S:
                raise OperatorNeeded(f"the driver did not arm again within {ARM_GIVE_UP_S:g} s after the "
                                     f"{fault.planned.kind} (last: {fault.record.get('arm_reply', 'no reply')}); "
                                     "check the arm and arm it from the panel")
            if now >= fault.record.get("_next_arm", 0.0):
                fault.pending = self.endpoints.arm()
        elif fault.pending.done():
            reply = fault.pending.result()
            fault.record["arm_reply"] = getattr(reply, "message", "")
            fault.pending = None
            fault.record["_next_arm"] = now + ARM_RETRY_S

    def _watch(self, episode: EpisodeChaos, now: float) -> None:
        """The watchdog: no action for ``watchdog_s`` after a fault aborts the episode; no end after that pauses."""
        seen = self.tags(episode.episode_id)
        if seen != episode.tags_seen:
            episode.tags_seen, episode.progress_at = seen, now
        injected = [f.injected_at for f in episode.faults if f.injected_at is not None]
        if not injected:
            return
        quiet_since = max(episode.progress_at, max(injected))
        if episode.aborted_at is None and now - quiet_since > self.plan.watchdog_s:
            episode.aborted_at = now
            kinds = ", ".join(f.planned.kind for f in episode.faults if f.injected_at is not None)
            self.say(f"  chaos watchdog: no action for {self.plan.watchdog_s:g} s after {kinds}: aborting the episode")
            self.abort(episode.episode_id, f"chaos watchdog: no action for {self.plan.watchdog_s:g} s after {kinds}")
        elif episode.aborted_at is not None and now - episode.aborted_at > ABORT_GRACE_S:
            raise OperatorNeeded(f"episode {episode.episode_id} did not end {ABORT_GRACE_S:g} s after the chaos "
                                 "watchdog aborted it")

    # ------------------------------------------------------------------ ending
    def _finish(self, fault: ActiveFault) -> None:
        """What the fault left undone, done now that the episode is over, so the next one starts clean: an
        instrument's fault played out, a killed server started again, a latched e-stop released. Arming and
        homing are the operator's next steps (:meth:`~ladder_ros.evaluation.rehearsal.Rehearsal.episode`)."""
        kind = fault.planned.kind
        if kind in INSTRUMENT_FAULT:
            over = fault.over_at if fault.over_at is not None else self.clock()
            # the instruments end the fault themselves (a blocked joint freed, frames again): wait for it
            self.spin(lambda: self.clock() >= over + 0.2, max(0.0, over - self.clock()) + 5.0,
                      f"the end of the {kind}")
            self._advance(fault, self.clock())
        elif kind == SERVER_KILL and fault.stage == "down":
            self._respawn(fault)
        elif kind == ESTOP and fault.stage in ("pressed", "latched", "releasing"):
            if fault.stage == "pressed" and fault.pending is not None:  # the press lands before the release
                self.spin(lambda: fault.pending.done(), 30.0, "the e-stop's reply")
            if fault.stage != "releasing":
                fault.stage, fault.pending = "releasing", self.endpoints.release()
            self.spin(lambda: fault.pending.done(), 30.0, "the e-stop release's reply")
            fault.record["released"] = getattr(fault.pending.result(), "message", "")
            fault.pending, fault.stage = None, "released"
        fault.done = True

    def _settle(self, fault: ActiveFault) -> None:
        """After an interrupted wait: nothing to undo (the graph is brought up again or the run ends)."""
        fault.pending = None
        if fault.planned.kind == SERVER_KILL:
            self.excused.discard(fault.planned.target)

    def _close(self, fault: ActiveFault, outcome: str, reason: str) -> None:
        fault.record.pop("_next_arm", None)
        fault.record["outcome"] = outcome
        fault.record["reason"] = reason
        self.plan.log.add(dict(fault.record))


class ChaosEndpoints:
    """The runner's hands on ROS: ``instruments/fault`` out, ``instruments/fault_applied`` in, and the driver's
    e-stop, release and arm services, on ``node`` (the rehearsal's operator node)."""

    def __init__(self, node: Any):
        from std_msgs.msg import String
        from std_srvs.srv import SetBool, Trigger

        from ladder_ros.instruments.fault_inbox import fault_qos
        from ladder_ros.instruments.faults import APPLIED_TOPIC, FAULT_TOPIC, FaultApplied
        from ladder_ros.messages import SchemaError, decode
        from ladder_ros.specs import topics

        self.node = node
        self._string, self._trigger, self._set_bool = String, Trigger, SetBool
        self.applied: dict[int, Any] = {}

        def on_applied(msg) -> None:
            try:
                doc = decode(msg.data, FaultApplied)
            except SchemaError:
                return
            self.applied[doc.fault_id] = doc

        self._pub = node.create_publisher(String, FAULT_TOPIC, fault_qos())
        node.create_subscription(String, APPLIED_TOPIC, on_applied, fault_qos())
        self._estop = node.create_client(Trigger, topics.ESTOP_SERVICE)
        self._release = node.create_client(Trigger, topics.ESTOP_RELEASE_SERVICE)
        self._arm = node.create_client(SetBool, topics.ARM_SERVICE)

    def listeners(self) -> int:
        """The instruments that hear ``instruments/fault`` now."""
        return self._pub.get_subscription_count()

    def publish_fault(self, fault_id: int, fault: str, duration_s: float, joint: str = "") -> None:
        from ladder_ros.instruments.faults import InstrumentFault
        from ladder_ros.messages import encode

        if self.listeners() == 0:
            raise LadderError(f"no instrument hears {fault} (nothing subscribes to instruments/fault)")
        self._pub.publish(self._string(data=encode(InstrumentFault(
            fault_id=int(fault_id), fault=fault, duration_s=float(duration_s), joint=joint))))

    def _call(self, client, request):
        if not client.service_is_ready():
            raise LadderError(f"the service {client.srv_name} is not available")
        return client.call_async(request)

    def estop(self):
        return self._call(self._estop, self._trigger.Request())

    def release(self):
        return self._call(self._release, self._trigger.Request())

    def arm(self):
        return self._call(self._arm, self._set_bool.Request(data=True))
