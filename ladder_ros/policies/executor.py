"""Chunk execution on the wall clock: no idle period while inference keeps up (absolute actions: within the
execution window; relative ones: within a control period).

:class:`ChunkExecutor` hands out one command per control period (its :meth:`~ChunkExecutor.tick`),
from a queue holding the first ``k`` actions of each chunk, and asks an inference worker thread for
the next chunk *before* the queue runs dry: with ``q`` actions left after a tick, the next chunk is
needed at the tick ``q + 1`` periods later, so it requests once ``q + 1`` periods no longer cover
the recent worst inference latency plus a quarter period of margin. Before any latency is known it
requests as early as possible (right after a chunk arrives), which never idles while the latency
stays under ``k`` periods; with a latency estimate it requests as late as is safe, so the actions
it executes come from observations as fresh as the latency allows.

That look-ahead is for absolute actions (joint positions) only. A chunk of relative actions (Bridge's
end-effector deltas, :attr:`~ladder_ros.policies.config.ActionSpec.relative`) moves the target from
where the arm is in its observation; requested while ``q`` commands are still queued, it would be
carried out after them and repeat their motion (``q`` steps of overshoot: measured in the dress
rehearsal, docs/rehearsal.md). So for relative actions the next chunk is requested at the tick that
hands out the last queued command, as the Bridge and openpi evaluation loops request it: no idle
period while the latency stays under a period, one period per period of latency beyond that. Each chunk's first ``k``
actions are executed in order, none skipped (the rule of the paper's policies, Appendix A: 4 of 5
on the WidowX, 8 of 15 on the Franka).

Every chunk passes the same :class:`~ladder_ros.policies.audit.ChunkScreen` as in lockstep (its
seam is checked against the last command queued before it, where it takes over), and every control
period of a subgoal counts as acted or held, with the reason, in the episode's
:class:`~ladder_ros.policies.audit.PolicyReport`.

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
import os
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
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder

LOG = logging.getLogger(__name__)

LATENCY_WINDOW = 8  # chunks whose latency sets the request lead (the worst of them)
STATS_WINDOW = 1000  # samples kept for the percentiles on diagnostics
LEAD_MARGIN_PERIODS = 0.25  # project choice: a quarter period for tick jitter and result hand-over
# The control thread shares the interpreter lock with the inference thread (image resizing, message packing):
# with CPython's default 5 ms switch interval a waking control thread can wait that long for the lock, a
# 7.5 % error at 15 Hz. 1 ms bounds it (project choice; set by the policy node on the wall clock).
CONTROL_SWITCH_INTERVAL_S = 0.001


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


@dataclass
class _Request:
    generation: int
    instruction: str
    chunk_id: int
    submitted_at: float


@dataclass
class _Result:
    request: _Request
    posted_at: float
    actions: list[TaggedAction] = field(default_factory=list)
    kind: str = ""  # why it failed, for saying so once: invalid action, no policy server, ...
    error: str = ""
    key: str = ""  # tells distinct errors of one kind apart (a server's error line)
    infer_ms: float | None = None
    server_timing: dict = field(default_factory=dict)
    observation: object = None  # the Observation the chunk was computed from (the seam's reference when none)


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
                 clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] | None = None):
        self.source = source
        self.config = config
        self._log = log or (lambda text: LOG.warning("policy %s: %s", config.name, text))
        self.report = PolicyReport.of(config)
        self.screen = ChunkScreen(config, self.report, log=self._log)
        self.encoder = ObservationEncoder(config)
        self.k = config.execute_steps
        self.max_lead = 1 if config.action.relative else self.k  # see the module docstring
        self.period_s = config.period_s
        self.max_age_s = config.max_observation_age_s
        self.seed = seed
        self._snapshot = snapshot
        self._observation_age = observation_age
        self._clock = clock
        self.reasons = ReasonLog(self._log)
        self._lock = threading.Condition()
        self._queue: deque[TaggedAction] = deque()
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
            self.report = PolicyReport.of(self.config)
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
            self._queue.clear()
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
            self._collect()
            if self._instruction is None:
                self._queue.clear()
                self.reasons.report("no subgoal", quiet=True)
                return None
            age = self._observation_age(now)
            if age is None or age > self.max_age_s:
                self._queue.clear()
                self._previous = None  # holding: the next chunk takes over from standing still
                how = "none yet" if age is None else f"the newest is {age:.2f} s old (limit {self.max_age_s:g} s)"
                self.reasons.report("no fresh observation", how)
                self.report.step("no fresh observation")
                if not self._awaiting:
                    self._submit(now)  # the worker refuses it if still stale; it starts at once when fresh
                return None
            action = self._queue.popleft() if self._queue else None
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
            if not self._awaiting and len(self._queue) < self.lead_periods():
                self._submit(now)
            return action

    def lead_periods(self) -> int:
        """How many queued periods must remain when the next request goes out (1 .. k; 1 for relative actions)."""
        if not self._recent_latency_s:
            return self.max_lead
        periods = (max(self._recent_latency_s) + LEAD_MARGIN_PERIODS * self.period_s) / self.period_s
        needed = math.ceil(periods - 1e-9)  # 1e-9: a latency of exactly n periods plus margin needs n, not n + 1
        return max(1, min(self.max_lead, needed))

    def _submit(self, now: float) -> None:
        self._slot = _Request(self._generation, self._instruction, self._next_chunk_id, now)
        self._next_chunk_id += 1
        self._awaiting = True
        self._lock.notify_all()

    def _collect(self) -> None:
        while self._results:
            result = self._results.popleft()
            if result.request.generation != self._generation:
                continue  # computed for a subgoal that is no longer current
            self._awaiting = False
            self._recent_latency_s.append(result.posted_at - result.request.submitted_at)
            self.request_latency_ms.append((result.posted_at - result.request.submitted_at) * 1000.0)
            if result.infer_ms is not None:
                self.inference_ms.append(result.infer_ms)
                self.report.inference_ms.append(result.infer_ms)
            if result.server_timing:
                self.server_timing = dict(result.server_timing)
            if not result.error:
                # The seam: where this chunk takes over, after the last command queued (or given) before it.
                try:
                    previous = self._queue[-1].command if self._queue else self._previous
                    self.screen.check_seam(result.actions[0].command, previous, result.observation)
                except RejectedChunk as exc:
                    result.kind, result.error = exc.kind, f"chunk {result.request.chunk_id}: {exc}"
            if result.error:
                if result.kind in (INVALID_ACTION, SEAM_JUMP):
                    self.rejected += 1
                    self.report.refused(result.kind)
                self._last_error = (result.kind, result.error, result.key)
                continue
            self._last_error = None
            self.chunks += 1
            self.report.chunks += 1
            self._queue.extend(result.actions)

    # ------------------------------------------------------------------ inference worker
    def _work(self) -> None:
        while True:
            with self._lock:
                while self._slot is None and not self._stopping:
                    self._lock.wait()
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
        return True

    def _infer(self, request: _Request) -> _Result:
        infer_ms = None
        try:
            bundle, observed_at = self._snapshot()
            age = self._clock() - observed_at
            if age > self.max_age_s:
                raise StaleObservation(f"the newest is {age:.2f} s old (limit {self.max_age_s:g} s)")
            source, seed = self.source, self.seed
            if source is None:
                raise PolicyNotReady("the policy is not ready yet (its warm-up runs)")
            state = self.encoder.state(bundle.observation) if self.config.state else None
            raw = source.infer(bundle, request.instruction, noise_seed(seed, request.chunk_id))
            infer_ms = raw.latency_s * 1000.0
            with self._lock:  # the screen counts into the episode's report, which tick reads
                if state is not None:
                    self.screen.check_state(state)
                commands = self.screen.commands(raw.actions)
            actions = [TaggedAction(command, request.instruction, bundle.stamp_ns, request.chunk_id, index, infer_ms)
                       for index, command in enumerate(commands)]
            return _Result(request, self._clock(), actions=actions, infer_ms=infer_ms,
                           server_timing=raw.server_timing, observation=bundle.observation)
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
                "inference_ms_last": self.inference_ms[-1] if self.inference_ms else None,
                "inference_ms_p50": percentile(self.inference_ms, 50),
                "inference_ms_p99": percentile(self.inference_ms, 99),
                "request_ms_p50": percentile(self.request_latency_ms, 50),
                "request_ms_p99": percentile(self.request_latency_ms, 99),
                "period_error_ms_p50": percentile(errors, 50), "period_error_ms_p99": percentile(errors, 99),
                "server_timing": dict(self.server_timing), "holding": self.reasons.reason if self.reasons.kind else "",
                "holds": dict(self.reasons.counts), "held_steps": self.report.held_steps,
                "rejected_by_reason": dict(self.report.rejected), "seam_jump_max": dict(self.report.seam_max),
                "ood": dict(self.report.ood),
            }


class ControlLoop:
    """Calls ``on_tick(now)`` every ``period_s`` on absolute deadlines, in its own thread.

    Deadlines are ``start + n * period`` (no drift from the time ``on_tick`` takes); a tick that
    comes more than a period late skips the deadlines it missed (counted in ``missed``) rather
    than firing a burst. With ``priority`` 1-99 the thread asks for real-time scheduling
    (``SCHED_FIFO``, as ros2_control's control thread does where the system grants it, e.g. an
    ``rtprio`` limit for the user); refused, it runs at normal priority and says so in
    ``scheduling``. It sleeps between ticks, so it takes the CPU only for the tick itself.
    """

    def __init__(self, period_s: float, on_tick: Callable[[float], None], *,
                 clock: Callable[[], float] = time.monotonic, name: str = "control-loop", priority: int = 0):
        self.period_s = period_s
        self._on_tick = on_tick
        self._clock = clock
        self.priority = priority
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._scheduled = threading.Event()
        self.scheduling = "normal"
        self.missed = 0

    def start(self) -> None:
        """Start the thread; returns once its scheduling is settled (see ``scheduling``)."""
        self.thread.start()
        self._scheduled.wait(5.0)

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout_s)

    def _set_scheduling(self) -> None:
        if self.priority > 0:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))  # this thread only
                self.scheduling = f"SCHED_FIFO priority {self.priority}"
            except (AttributeError, OSError) as exc:  # not Linux, or no permission (no rtprio for this user)
                self.scheduling = f"normal (real-time priority {self.priority} refused: {exc})"
        self._scheduled.set()

    def _run(self) -> None:
        self._set_scheduling()
        deadline = self._clock() + self.period_s
        while True:
            # A late tick does not wait; a stop asked for meanwhile still comes before it.
            if self._stop.wait(max(deadline - self._clock(), 0.0)):
                return
            now = self._clock()
            try:
                self._on_tick(now)
            except Exception:  # the loop must keep its rhythm; the callback reports its own errors
                LOG.exception("control tick failed")
            deadline += self.period_s
            now = self._clock()
            while deadline < now:  # a tick that ends on the next deadline is followed by that tick, none missed
                deadline += self.period_s
                self.missed += 1
