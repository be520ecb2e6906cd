"""Chunk execution on the wall clock, in one of two modes (the policy config's ``execution``).

:class:`ChunkExecutor` hands out one command per control period (its :meth:`~ChunkExecutor.tick`)
and asks an inference worker thread for chunks. Every chunk becomes absolute targets anchored where
its observation was taken (:mod:`ladder_ros.policies.splice`): the executor records the commanded
target when the worker takes an observation, and composes the chunk onto it when it arrives, so a
chunk of deltas can never repeat motion that was queued before it.

* **synchronous** (the paper's rule, Appendix A: the first ``k`` of each chunk, in order, none
  skipped; 4 of 5 on the WidowX, 8 of 15 on the Franka). A chunk of relative actions (Bridge's
  deltas) is requested at the tick that hands out the last queued command, as Bridge's and openpi's
  evaluation loops request it: no idle period while the latency stays under a period, one period per
  period of latency beyond that. Absolute actions look ahead: with ``q`` actions left after a tick the
  next chunk is needed ``q + 1`` periods later, so it is requested once ``q + 1`` periods no longer
  cover the recent worst latency plus a quarter period, and queued after the last queued action.
* **realtime**. Requests overlap execution for both kinds: the next observation goes out while the
  queue still covers the expected latency, and the whole chunk (``length`` actions) is kept. When it
  arrives, the actions for the periods that passed since its observation are dropped, by the count
  of commands actually handed out meanwhile (never by a latency estimate), and the rest take over at
  the next tick, blended in over ``blend_steps`` commands where they differ from the old plan. The
  request goes out when ``q`` (queued after this tick) is at most
  ``min(length - k + lead - 1, max(length - lead, floor((length - 1) / 2)))``: late enough that about
  ``k`` actions of each chunk run (the paper's open-loop horizon) while the latency allows it, early
  enough that the queue covers the latency (``lead`` periods, as above), and, when no schedule can
  cover it with one request in flight (``length - d < L / P``), at the split that idles least. A
  source that samples its own chunks (a local flow-matching model, :mod:`ladder_ros.policies.guidance`)
  is guided to continue the queued actions that run while it computes (RTC).

Every chunk passes the same :class:`~ladder_ros.policies.audit.ChunkScreen` as in lockstep; its seam
is checked where it takes over (synchronous: its first command against the last one queued or given;
realtime: the jump of the target from the old plan's, per command of the blend), and every control period of a
subgoal counts as acted or held, with the reason, in the episode's
:class:`~ladder_ros.policies.audit.PolicyReport`, with the mode, the actions dropped as stale, the
largest splice jump and the commands blended.

On a subgoal switch the queue is dropped and a new chunk is requested at once; a chunk still being
computed for the old subgoal is discarded when it arrives. The worker always takes the newest
observation when it starts and refuses one older than the config's ``max_observation_age_s``;
:meth:`~ChunkExecutor.tick` also holds (and drops the queue) whenever the newest observation is
that old, so a robot whose sensors stop stops moving within one period.

Timing is data: every inference's latency, every control period's deviation from the nominal
period, the idle periods and the reasons for holding are kept for the diagnostics topic and the
benchmark. No rclpy here; the node supplies the observation and publishes what ``tick`` returns.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.policies.audit import INVALID_ACTION, SEAM_JUMP, ChunkScreen, PolicyReport, RejectedChunk
from ladder_ros.policies.chunked import ChunkSource, ReasonLog, TaggedAction, noise_seed
from ladder_ros.policies.config import Normalization, PolicyConfig
from ladder_ros.policies.guidance import Guidance, GuidedChunkSource
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder
from ladder_ros.policies.splice import Anchor, ChunkPlan, frame_for

LOG = logging.getLogger(__name__)

LATENCY_WINDOW = 8  # chunks whose latency sets the request lead (the worst of them)
STATS_WINDOW = 1000  # samples kept for the percentiles on diagnostics
LEAD_MARGIN_PERIODS = 0.25  # project choice: a quarter period for tick jitter and result hand-over
# Realtime: a request timed to arrive just before its chunk is due keeps this much of a period in hand (tick
# jitter, the hand-over to the control thread); the latency it plans with is already the worst of the last
# eight. Project choice: with 15 ms of server jitter no chunk came late in the rehearsal.
TIMED_MARGIN_PERIODS = 0.05
# Realtime: a tick that finds the queue empty while the next chunk is being computed waits up to this much of a
# period for it before it counts an idle period (project choice: a chunk a few milliseconds late then costs a
# few milliseconds, not a period; the WidowX driver's control grid absorbs a quarter period of late stamps).
LATE_WAIT_PERIODS = 0.2


class StaleObservation(LadderError):
    """The newest observation is older than the config allows."""


class PolicyNotReady(LadderError):
    """The episode began before the policy was ready (its warm-up runs): it holds until it is."""


# Kinds of failed requests by error class (named, not imported: the backends load lazily).
_ERROR_KINDS = {"PolicyUnavailable": "no policy server", "PolicyServerError": "policy server error",
                "InvalidInputError": "unusable observation", "WireFormatError": "unreadable reply",
                "PolicyNotReady": "policy warming up"}


def error_kind(exc: BaseException) -> str:
    """The hold reason of a failed request (the same words on the wall clock and in lockstep)."""
    return _ERROR_KINDS.get(type(exc).__name__, "policy error")


def realtime_request_queue(length: int, execute: int, lead: int) -> int:
    """Realtime: the most commands still queued after a tick at which the next chunk is requested (module
    docstring); ``lead`` is the latency in periods, rounded up, with its margin."""
    covering = max(length - lead, (length - 1) // 2)
    return max(0, min(length - execute + lead - 1, covering))


@dataclass
class _Request:
    generation: int
    instruction: str
    chunk_id: int
    submitted_at: float
    not_before: float = 0.0  # realtime: the observation is taken no earlier than this (clock time)

    @property
    def starts_at(self) -> float:
        """When its observation is taken at the earliest: its latency counts from then."""
        return max(self.submitted_at, self.not_before)


@dataclass
class _Result:
    request: _Request
    posted_at: float
    actions: list[TaggedAction] = field(default_factory=list)
    raw: np.ndarray | None = None  # the model's own actions of ``actions`` (RTC's prefix later)
    anchor: Anchor | None = None  # the commanded target when its observation was taken
    kind: str = ""  # why it failed, for saying so once: invalid action, no policy server, ...
    error: str = ""
    key: str = ""  # tells distinct errors of one kind apart (a server's error line)
    infer_ms: float | None = None
    server_timing: dict = field(default_factory=dict)
    observation: object = None  # the Observation the chunk was computed from (the seam's reference when none)
    guided: bool = False


def percentile(values, q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


class ChunkExecutor:
    """Runs a :class:`~ladder_ros.policies.chunked.ChunkSource` on the wall clock (see the module docstring).

    ``snapshot()`` returns the newest observation and when it was taken, on ``clock``'s time line
    (it may raise a LadderError, e.g. no image yet); ``observation_age(now)`` is the age of the
    newest observation in seconds, or None when there is none.
    """

    def __init__(self, source: ChunkSource | None, config: PolicyConfig,
                 snapshot: Callable[[], tuple[ObservationBundle, float]],
                 observation_age: Callable[[float], float | None], *, seed: int = 0,
                 clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] | None = None,
                 late_wait_s: float = 0.0, name: str | None = None):
        """``late_wait_s``: realtime, how long (s, real time) a tick with nothing queued waits for a chunk being
        computed before it counts an idle period (the policy node: ``LATE_WAIT_PERIODS`` of a period); ``name``:
        the name the policy runs under, for its reports (None: the config's own name)."""
        self.name = name or config.name
        self.source = source
        self.late_wait_s = float(late_wait_s)
        self.config = config
        self._log = log or (lambda text: LOG.warning("policy %s: %s", config.name, text))
        self.execution = config.execution
        self.realtime = config.execution.realtime
        self.report = self._new_report()
        self.screen = ChunkScreen(config, self.report, log=self._log)
        self.encoder = ObservationEncoder(config)
        self.k = config.execute_steps
        self.length = config.chunk_length if self.realtime else self.k  # actions kept of each chunk
        self.max_lead = 1 if config.action.relative else self.k  # synchronous: see the module docstring
        self.period_s = config.period_s
        self.max_age_s = config.max_observation_age_s
        self.seed = seed
        self._snapshot = snapshot
        self._observation_age = observation_age
        self._clock = clock
        self.reasons = ReasonLog(self._log)
        self._lock = threading.Condition()
        self.plan = ChunkPlan(frame_for(config.action.relative, config.action.names),
                              config.execution.blend_steps if self.realtime else 0)
        self._previous: np.ndarray | None = None  # the last command given (the seam's reference)
        self._instruction: str | None = None
        self._generation = 0
        self._slot: _Request | None = None
        self._awaiting = False
        self._results: deque[_Result] = deque()
        self._recent_latency_s: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._next_chunk_id = 0
        self._executed_this_subgoal = False
        self._last_error: tuple[str, str, str] | None = None  # (kind, detail, key) of the last failed request
        self._last_tick: float | None = None
        self._stopping = False
        self._worker: threading.Thread | None = None
        # timing and counts (diagnostics, benchmark)
        self.inference_ms: deque[float] = deque(maxlen=STATS_WINDOW)
        self.request_latency_ms: deque[float] = deque(maxlen=STATS_WINDOW)
        self.period_error_ms: deque[float] = deque(maxlen=STATS_WINDOW)
        self.server_timing: dict = {}
        self.ticks = 0
        self.acted = 0
        self.idle = 0  # periods with a subgoal and a fresh observation but no action ready
        self.idle_first = 0  # of those, periods waiting for the first chunk of a subgoal
        self.chunks = 0
        self.rejected = 0
        self.stale_dropped = 0
        self.late_waits = 0  # ticks that waited for a chunk a little late (and got it)

    def _new_report(self) -> PolicyReport:
        report = PolicyReport.of(self.config, self.name)
        report.execution = self.execution.mode
        report.blend_steps = self.execution.blend_steps if self.realtime else 0
        return report

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._worker is None:
            self._stopping = False
            self._worker = threading.Thread(target=self._work, name=f"inference-{self.config.name}", daemon=True)
            self._worker.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._worker is not None:
            self._worker.join(timeout_s)
            self._worker = None

    def start_episode(self, source: ChunkSource | None, seed: int, statistics: Normalization | None = None) -> None:
        """A new episode: its source (a per-episode policy, or the shared model; None: not ready yet, see
        :meth:`set_source`), noise seed and the training data's statistics (the out-of-distribution
        guard); no subgoal yet. Its report starts empty."""
        self.set_subgoal(None)
        with self._lock:
            self.seed = int(seed)
            self._next_chunk_id = 0
            self._previous = None
            self.report = self._new_report()
        self.set_source(source, statistics)

    def set_source(self, source: ChunkSource | None, statistics: Normalization | None = None) -> None:
        """The episode's source once the policy is ready (its steps until then are held and counted)."""
        with self._lock:
            self.source = source
            self.screen = ChunkScreen(self.config, self.report, statistics=statistics, log=self._log)

    def episode_report(self) -> dict:
        """The current episode's :class:`~ladder_ros.policies.audit.PolicyReport` as a dict."""
        with self._lock:
            return self.report.to_dict()

    # ------------------------------------------------------------------ inputs
    def set_subgoal(self, instruction: str | None) -> None:
        """The orchestrator's current instruction (None: hold still). A change drops the queue and re-infers."""
        with self._lock:
            if instruction == self._instruction:
                return
            self._instruction = instruction
            self._generation += 1
            self.plan.clear()
            self._awaiting = False
            self._slot = None
            self._executed_this_subgoal = False
            self._last_error = None
            if instruction is not None:
                self._submit(self._clock())

    # ------------------------------------------------------------------ control period
    def tick(self, now: float | None = None) -> TaggedAction | None:
        """The command for this control period, or None (hold still; the reason is logged once)."""
        now = self._clock() if now is None else now
        with self._lock:
            if self._last_tick is not None:
                self.period_error_ms.append((now - self._last_tick - self.period_s) * 1000.0)
            self._last_tick = now
            self.ticks += 1
            self._collect(now)
            if self._instruction is None:
                self.plan.clear()
                self.reasons.report("no subgoal", quiet=True)
                return None
            age = self._observation_age(now)
            if age is None or age > self.max_age_s:
                self.plan.clear()
                self._previous = None  # holding: the next chunk takes over from standing still
                how = "none yet" if age is None else f"the newest is {age:.2f} s old (limit {self.max_age_s:g} s)"
                self.reasons.report("no fresh observation", how)
                self.report.step("no fresh observation")
                if not self._awaiting:
                    self._submit(now)  # the worker refuses it if still stale; it starts at once when fresh
                return None
            if not self.plan and self._in_flight() and self.late_wait_s > 0:
                self._wait_for_result()
                self._collect(now)
            action = self.plan.pop()
            if action is None:
                # No command this period: the arm's target stands still, so the next chunk's seam is measured from
                # standing still (a refused chunk would otherwise be measured against a command long gone).
                self._previous = None
                self.idle += 1
                if not self._executed_this_subgoal:
                    self.idle_first += 1
                if self._last_error:
                    kind, detail, key = self._last_error
                    self.reasons.report(kind, detail, key=key)
                elif self._executed_this_subgoal:
                    self.reasons.report("no action ready", "inference slower than the queue")
                else:
                    self.reasons.report("waiting for the first chunk of this subgoal", quiet=True)
                self.report.step(self.reasons.kind)
            else:
                self.acted += 1
                self._executed_this_subgoal = True
                self._previous = action.command
                self.reasons.clear()
                self.report.step()
            if not self._awaiting and len(self.plan) < self.request_threshold():
                self._submit(now)
            return action

    def _in_flight(self) -> bool:
        """Realtime: a request's observation was taken and its chunk has not come yet (lock held)."""
        return self.realtime and self._awaiting and self._slot is None and not self._results

    def _wait_for_result(self) -> None:
        """Wait (lock held, released meanwhile) up to ``late_wait_s`` of real time for the chunk in flight."""
        deadline = time.monotonic() + self.late_wait_s
        while not self._results and not self._stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._lock.wait(remaining)
        self.late_waits += 1 if self._results else 0

    def lead_periods(self) -> int:
        """Synchronous: how many queued periods must remain when the next request goes out (1 .. k; 1 for
        relative actions)."""
        return max(1, min(self.max_lead, self.latency_periods()))

    def latency_periods(self, margin: float = LEAD_MARGIN_PERIODS) -> int:
        """The recent worst latency plus ``margin`` periods, in periods rounded up (``length`` before any is
        known)."""
        if not self._recent_latency_s:
            return self.length
        periods = (max(self._recent_latency_s) + margin * self.period_s) / self.period_s
        return max(1, math.ceil(periods - 1e-9))  # 1e-9: a latency of exactly n periods plus margin needs n

    def request_threshold(self) -> int:
        """The next request goes out once fewer than this many commands are queued after a tick."""
        if not self.realtime:
            return self.lead_periods()
        return realtime_request_queue(self.length, self.k, self.latency_periods()) + 1

    def _submit(self, now: float, not_before: float | None = None) -> None:
        self._slot = _Request(self._generation, self._instruction, self._next_chunk_id, now,
                              now if not_before is None else max(now, not_before))
        self._next_chunk_id += 1
        self._awaiting = True
        self._lock.notify_all()

    def realtime_horizon(self) -> int:
        """Realtime: how many commands each chunk gives before the next takes over: as few as one request in
        flight allows (the latency in periods, so its actions are as fresh as they can be), at least half the
        execution horizon ``k`` (project choice: a fast server is not asked every period, and consecutive
        chunks overlap by half the paper's open-loop horizon)."""
        return max(self.latency_periods(TIMED_MARGIN_PERIODS), math.ceil(self.k / 2))

    def _schedule_next(self, now: float) -> None:
        """Realtime, once a chunk has taken over at the tick at ``now``: ask for the next one so that it arrives
        just before it is due, ``realtime_horizon()`` commands from now (its observation as late as the latency
        allows). When the chunk cannot cover the latency, the queue rule (:meth:`request_threshold`) asks instead."""
        lead = self.latency_periods(TIMED_MARGIN_PERIODS)
        if not self._recent_latency_s or lead > len(self.plan):
            return
        due = now + min(self.realtime_horizon(), len(self.plan)) * self.period_s
        self._submit(now, due - max(self._recent_latency_s) - TIMED_MARGIN_PERIODS * self.period_s)

    def _collect(self, now: float) -> None:
        while self._results:
            result = self._results.popleft()
            if result.request.generation != self._generation:
                continue  # computed for a subgoal that is no longer current
            self._awaiting = False
            self._recent_latency_s.append(result.posted_at - result.request.starts_at)
            self.request_latency_ms.append((result.posted_at - result.request.starts_at) * 1000.0)
            if result.infer_ms is not None:
                self.inference_ms.append(result.infer_ms)
                self.report.inference_ms.append(result.infer_ms)
            if result.server_timing:
                self.server_timing = dict(result.server_timing)
            if not result.error:
                try:
                    self._take(result)
                    if self.realtime and not self._awaiting:
                        self._schedule_next(now)
                    continue
                except RejectedChunk as exc:
                    result.kind, result.error = exc.kind, f"chunk {result.request.chunk_id}: {exc}"
            if result.kind in (INVALID_ACTION, SEAM_JUMP):
                self.rejected += 1
                self.report.refused(result.kind)
            self._last_error = (result.kind, result.error, result.key)

    def _take(self, result: _Result) -> None:
        """Plan a checked chunk from its anchor and queue it by the mode's rule; RejectedChunk at its seam."""
        plan = self.plan
        planned = plan.plan(result.anchor, [a.command for a in result.actions], list(result.raw), result.actions)
        if self.realtime:
            splice = plan.splice(result.anchor, planned, fits=self.screen.splice_fits)
            if splice.queue:
                if splice.steps:  # the seam: no command of its blend beyond one step's bound
                    try:
                        self.screen.check_splice(splice)
                    except RejectedChunk:
                        if plan.queue:
                            raise  # the old plan goes on; the next chunk comes soon
                        splice = plan.reanchored(splice)  # nothing left to give: its own steps from here
                        self.screen.check_seam(splice.queue[0].command, None, result.observation)
                if plan.current is None:  # joint targets before any was given: from the joints observed
                    self.screen.check_seam(splice.queue[0].command, None, result.observation)
                plan.commit(splice)
                self.report.spliced(splice)
            else:
                self.report.spliced(splice)  # every action's time had passed: none is queued
            self.stale_dropped += splice.stale
        else:
            # The seam: where this chunk takes over, after the last command queued (or given) before it.
            previous = plan.queue[-1].command if plan.queue else self._previous
            first = planned[0].command if plan.queue else plan.command_for(planned[0])
            self.screen.check_seam(first, previous, result.observation)
            plan.append(planned)
        self._last_error = None
        self.chunks += 1
        self.report.chunks += 1
        if result.guided:
            self.report.guided_chunks += 1

    # ------------------------------------------------------------------ inference worker
    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._stopping:
                    if self._slot is None:
                        self._lock.wait()
                        continue
                    wait_s = self._slot.not_before - self._clock()
                    if wait_s <= 0:
                        break
                    self._lock.wait(wait_s)  # a timed request: its observation is taken when it is due
                if self._stopping:
                    return
            self.work_once()

    def work_once(self) -> bool:
        """Serve the waiting request, if any, in the calling thread (the worker's body; tests drive it)."""
        with self._lock:
            request, self._slot = self._slot, None
        if request is None:
            return False
        result = self._infer(request)
        with self._lock:
            self._results.append(result)
            self._lock.notify_all()  # a tick may be waiting for it
        return True

    def _guidance(self) -> Guidance | None:
        """Realtime, for a source that samples its own chunks: the queued actions it should continue, of which
        those handed out while it computes are frozen (RTC). Called with the lock held."""
        if not (self.realtime and self.execution.guidance and isinstance(self.source, GuidedChunkSource)):
            return None
        prefix = self.plan.pending_raw()[:self.config.chunk_length]
        if not prefix:
            return None
        latency = max(self._recent_latency_s) if self._recent_latency_s else 0.0
        frozen = min(len(prefix), int(latency / self.period_s))  # the ticks that come before it arrives
        return Guidance(prefix=np.asarray(prefix, dtype=np.float64), frozen=frozen)

    def _infer(self, request: _Request) -> _Result:
        infer_ms = None
        try:
            with self._lock:  # the commanded target as the observation is taken (its chunk's anchor)
                anchor = self.plan.anchor()
                source, seed, guidance = self.source, self.seed, self._guidance()
            bundle, observed_at = self._snapshot()
            age = self._clock() - observed_at
            if age > self.max_age_s:
                raise StaleObservation(f"the newest is {age:.2f} s old (limit {self.max_age_s:g} s)")
            if source is None:
                raise PolicyNotReady("the policy is not ready yet (its warm-up runs)")
            state = self.encoder.state(bundle.observation) if self.config.state else None
            sample_seed = noise_seed(seed, request.chunk_id)
            if guidance is not None:
                raw = source.infer_guided(bundle, request.instruction, sample_seed, guidance)
            else:
                raw = source.infer(bundle, request.instruction, sample_seed)
            infer_ms = raw.latency_s * 1000.0
            with self._lock:  # the screen counts into the episode's report, which tick reads
                if state is not None:
                    self.screen.check_state(state)
                commands = self.screen.commands(raw.actions, self.length)
            actions = [TaggedAction(command, request.instruction, bundle.stamp_ns, request.chunk_id, index, infer_ms)
                       for index, command in enumerate(commands)]
            return _Result(request, self._clock(), actions=actions, infer_ms=infer_ms,
                           raw=np.asarray(raw.actions, dtype=np.float64)[:len(commands)], anchor=anchor,
                           server_timing=raw.server_timing, observation=bundle.observation,
                           guided=guidance is not None)
        except RejectedChunk as exc:
            return _Result(request, self._clock(), kind=exc.kind, error=f"chunk {request.chunk_id}: {exc}",
                           infer_ms=infer_ms)
        except StaleObservation as exc:
            return _Result(request, self._clock(), kind="no fresh observation", error=str(exc), infer_ms=infer_ms)
        except LadderError as exc:
            return _Result(request, self._clock(), kind=error_kind(exc), error=str(exc), infer_ms=infer_ms,
                           key=str(getattr(exc, "signature", "")))
        except Exception as exc:  # a backend bug must not kill the worker: hold and say why
            LOG.exception("policy %s: inference failed", self.config.name)
            return _Result(request, self._clock(), kind="inference failed", error=f"{type(exc).__name__}: {exc}",
                           infer_ms=infer_ms)

    # ------------------------------------------------------------------ reporting
    def stats(self) -> dict:
        """Counts and timing for diagnostics (milliseconds; percentiles over the recent window)."""
        with self._lock:
            errors = [abs(e) for e in self.period_error_ms]
            active = self.acted + self.idle
            return {
                "ticks": self.ticks, "acted": self.acted, "idle": self.idle, "idle_first_chunk": self.idle_first,
                "idle_share": self.idle / active if active else 0.0,
                "chunks": self.chunks, "rejected_chunks": self.rejected, "lead_periods": self.lead_periods(),
                "execution": self.execution.mode, "request_threshold": self.request_threshold(),
                "stale_dropped": self.stale_dropped, "late_waits": self.late_waits,
                "inference_ms_last": self.inference_ms[-1] if self.inference_ms else None,
                "inference_ms_p50": percentile(self.inference_ms, 50),
                "inference_ms_p99": percentile(self.inference_ms, 99),
                "request_ms_p50": percentile(self.request_latency_ms, 50),
                "request_ms_p99": percentile(self.request_latency_ms, 99),
                "period_error_ms_p50": percentile(errors, 50), "period_error_ms_p99": percentile(errors, 99),
                "server_timing": dict(self.server_timing), "holding": self.reasons.reason if self.reasons.kind else "",
                "holds": dict(self.reasons.counts), "held_steps": self.report.held_steps,
                "rejected_by_reason": dict(self.report.rejected), "seam_jump_max": dict(self.report.seam_max),
                "splice_jump_max": dict(self.report.splice_max), "ood": dict(self.report.ood),
            }
