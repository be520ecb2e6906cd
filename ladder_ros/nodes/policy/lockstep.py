"""The policy node's lockstep acting: one action per simulator step, once that step's inputs are in.

In simulation the bridge steps only when the step's action has arrived, so the policy paces the simulator.
:class:`LockstepActor` is where that happens: it lines each step's observation up with the orchestrator's
decision of the same step (:class:`~ladder_ros.runtime.step_sync.StepAligner`), acts on complete steps in
order with the episode's synchronous :class:`~ladder_ros.policies.chunked.ChunkedPolicy` (the same one the
reference loop runs), and keeps a step whose policy call failed until it succeeds: the simulator waits.
It owns the episode's policy, the instruction it was last reset to and the inference latencies it saw;
the node owns the episode and the endpoints and hands in what it needs as callables.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Iterable

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import DecisionDoc, EpisodeStatus
from ladder_ros.nodes.policy.inputs import DECISION
from ladder_ros.policies.chunked import ChunkedPolicy, ReasonLog, TaggedAction
from ladder_ros.policies.executor import error_kind, percentile
from ladder_ros.policies.observation import ObservationBundle
from ladder_ros.policies.warmup import WarmUp
from ladder_ros.runtime.step_sync import StepAligner

WARMING_UP_HOLD = "policy warming up"
LATENCIES_KEPT = 1000  # inference latencies the diagnostics' percentiles are taken over


class LockstepActor:
    """Acts on each step whose observation and decision are in, in order; a step whose policy call failed
    is tried again (:meth:`retry`, the node's timer) while the simulator waits.

    ``episode()`` is the node's current episode (None between episodes); ``observe(step, inputs, stamp_ns)``
    builds the step's observation from its messages; ``publish(tagged, stamp_ns)`` sends an action;
    ``reasons`` says why it holds; ``warmup`` tells how the warm-up goes while no policy is there yet;
    ``on_error(episode_id)`` runs after a failed policy call (the node ends an episode whose server keeps
    failing).
    """

    def __init__(self, inputs: Iterable[str], *, episode: Callable[[], EpisodeStatus | None],
                 observe: Callable[[int, dict, int], ObservationBundle],
                 publish: Callable[[TaggedAction, int], None], reasons: ReasonLog, warmup: WarmUp,
                 on_error: Callable[[str], None]):
        self._aligner = StepAligner(inputs)
        self._backlog: deque[tuple[int, dict]] = deque()
        self._episode = episode
        self._observe = observe
        self._publish = publish
        self._reasons = reasons
        self._warmup = warmup
        self._on_error = on_error
        self.policy: ChunkedPolicy | None = None  # this episode's policy, once built
        self._decided = False  # this episode's policy was built, or failed to be (the warm-up is over)
        self._instruction: str | None = None
        self._latency_ms: deque[float] = deque(maxlen=LATENCIES_KEPT)
        self.act_s = 0.0  # time spent in the policy backend (benchmarks)

    def new_episode(self) -> None:
        """An episode is announced: its policy is not decided yet, and it has followed no instruction."""
        self.policy = None
        self._decided = False
        self._instruction = None

    def use(self, policy: ChunkedPolicy | None) -> None:
        """This episode's policy, or None when it could not be built: its steps then pass without an action
        (the orchestrator ends the episode)."""
        self.policy = policy
        self._decided = True

    def start(self, status: EpisodeStatus, *, join_late: bool) -> None:
        """The episode's steps start counting (``join_late``: this node came up while it was under way);
        what has already arrived for them is acted on."""
        self._backlog.clear()
        self._aligner.start(status.origin_ns, status.rate_hz, join=join_late)
        self._act_on_ready()

    def end(self) -> None:
        """The episode is over: its policy and its steps not acted on yet are dropped."""
        self.policy = None
        self._backlog.clear()
        self._aligner.stop()

    def add(self, stamp_ns: int, name: str, msg: object) -> None:
        """One input message (an observation's part or a decision), placed at its step by its stamp."""
        self._aligner.add(stamp_ns, name, msg)
        self._act_on_ready()

    def retry(self) -> None:
        """Try the step that waits for the policy again (the node's retry timer)."""
        self._drain()

    def episode_report(self) -> dict:
        """The episode's policy report so far (empty before its policy is built)."""
        return self.policy.policy_report() if self.policy is not None else {}

    def stats(self) -> tuple[dict, str]:
        """The diagnostics' values (latency, chunks, held actions, refused chunks) and why it holds ("": it acts)."""
        report = self.policy.report if self.policy else None
        stats = {"inference_ms_last": self._latency_ms[-1] if self._latency_ms else None,
                 "inference_ms_p50": percentile(self._latency_ms, 50),
                 "inference_ms_p99": percentile(self._latency_ms, 99),
                 "chunks": self.policy.chunks if self.policy else 0,
                 "held_actions": self.policy.holds if self.policy else 0,
                 "rejected_by_reason": dict(report.rejected) if report else {},
                 "seam_jump_max": dict(report.seam_max) if report else {},
                 "ood": dict(report.ood) if report else {}}
        return stats, self._reasons.reason if self._reasons.kind else ""

    def _act_on_ready(self) -> None:
        self._backlog.extend(self._aligner.pop_ready())
        self._drain()

    def _drain(self) -> None:
        while self._backlog:
            step, inputs = self._backlog[0]
            decision: DecisionDoc = inputs[DECISION]
            episode = self._episode()
            if not decision.finished and episode is not None and decision.episode_id == episode.episode_id:
                if not self._act(episode, step, decision.instruction, inputs):
                    return  # tried again by the retry timer; the simulator waits for this step
            self._backlog.popleft()

    def _act(self, episode: EpisodeStatus, step: int, instruction: str, inputs: dict) -> bool:
        if self.policy is None:
            if self._decided:
                return True  # the policy could not be built: the orchestrator ends the episode
            state, detail, waited = self._warmup.snapshot()
            self._reasons.report(WARMING_UP_HOLD, f"{state}: {detail} ({waited:.0f} s)")
            return False  # the simulator waits; tried again by the retry timer
        stamp_ns = episode.step_stamp_ns(step)
        try:
            if instruction != self._instruction:
                self._instruction = instruction
                self.policy.reset(instruction)
            started = time.perf_counter()
            tagged = self.policy.act_tagged(self._observe(step, inputs, stamp_ns), instruction)
            self.act_s += time.perf_counter() - started
        except LadderError as exc:
            self._reasons.report(error_kind(exc), f"step {step}: {exc}", key=str(getattr(exc, "signature", "")))
            self._on_error(episode.episode_id)
            return False
        self._reasons.clear()
        if tagged.index == 0 and not tagged.held:
            self._latency_ms.append(tagged.inference_ms)
        self._publish(tagged, stamp_ns)
        return True
