"""Chunking policies: where chunks come from, and the synchronous executor the lockstep loop uses.

A :class:`ChunkSource` (an openpi server, a local transformers model, or any per-step policy
wrapped by :class:`PerStepSource`) returns one chunk ``[H, D]`` per request. Two executors run
chunks:

* :class:`ChunkedPolicy` (here) is the synchronous one, a :class:`~ladder_ros.policies.base.LowLevelPolicy`:
  the reference loop and the lockstep graph both call it once per step, it asks for a chunk when
  its queue is empty, executes the first ``k`` actions and drops the rest on a subgoal switch. The
  simulator waits while it computes, as the paper's loop does, so the graph and the in-process
  loop stay identical with a learned model.
* :class:`~ladder_ros.policies.executor.ChunkExecutor` runs the same sources on the wall clock.

Randomness is explicit: the ``i``-th chunk of an episode with seed ``s`` gets the noise seed
:func:`noise_seed` ``(s, i)``, so a flow-matching model samples the same chunk wherever it runs.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from ladder_ros.core.action_conventions import ActionConvention
from ladder_ros.core.observation import Observation
from ladder_ros.policies.audit import ChunkScreen, PolicyReport, RejectedChunk
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.policies.config import Normalization, PolicyConfig
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawChunk:
    """What a source returned: the actions as the model gave them, and how long it took."""

    actions: np.ndarray
    latency_s: float
    server_timing: dict = field(default_factory=dict)


class ChunkSource(Protocol):
    """Anything that turns an observation and an instruction into a chunk of actions."""

    name: str

    def infer(self, bundle: ObservationBundle, instruction: str, noise_seed: int) -> RawChunk:
        """One chunk for ``bundle``; raises a LadderError when it cannot (no server, bad input)."""

    def close(self) -> None:
        ...


def noise_seed(episode_seed: int, chunk_index: int) -> int:
    """The sampling seed of chunk ``chunk_index`` of an episode (a 32-bit value from a SeedSequence)."""
    return int(np.random.SeedSequence([int(episode_seed) & 0xFFFFFFFF, int(chunk_index)]).generate_state(1)[0])


@dataclass(frozen=True)
class TaggedAction:
    """One command with where it came from: the subgoal, the observation's stamp, the chunk and index."""

    command: np.ndarray
    subgoal: str
    observation_stamp_ns: int
    chunk_id: int
    index: int
    inference_ms: float = 0.0
    held: str = ""  # non-empty: a hold-still command, and why


class PerStepSource:
    """A per-step :class:`LowLevelPolicy` as a source of one-action chunks (already in the graph's contract)."""

    def __init__(self, policy: LowLevelPolicy):
        self.policy = policy
        self.name = policy.name
        self._instruction: str | None = None

    def infer(self, bundle: ObservationBundle, instruction: str, noise_seed: int) -> RawChunk:
        import time

        started = time.perf_counter()
        if instruction != self._instruction:
            self._instruction = instruction
            self.policy.reset(instruction)
        action = np.asarray(self.policy.act(bundle.observation, instruction), dtype=np.float64)
        return RawChunk(actions=action[None, :], latency_s=time.perf_counter() - started)

    def close(self) -> None:
        pass


class ReasonLog:
    """Says why once: logs a hold the first time its kind (and ``key``) comes up while holding, and a
    line when acting again.

    ``key`` tells distinct causes of one kind apart (a server's error line): each distinct one is
    logged once per stretch of holding, however the kinds alternate and however the detail around it
    changes (retry times, chunk numbers). ``reason`` is the latest full reason (for diagnostics);
    ``counts`` how often each kind came up. ``quiet`` reports are expected states (no subgoal yet,
    the first chunk of a subgoal on its way): recorded, not logged.
    """

    def __init__(self, log: Callable[[str], None]):
        self._log = log
        self.kind = ""
        self.reason = ""
        self.counts: dict[str, int] = {}
        self._logged = False
        self._said: set[tuple[str, str]] = set()

    def report(self, kind: str, detail: str = "", *, quiet: bool = False, key: str = "") -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.reason = f"{kind}: {detail}" if detail else kind
        self.kind = kind
        if quiet or (kind, key) in self._said:
            return
        self._said.add((kind, key))
        self._logged = True
        self._log(f"holding still: {self.reason}")

    def clear(self) -> None:
        if self._logged:
            self._log("acting again")
        self.kind = self.reason = ""
        self._logged = False
        self._said.clear()


class ChunkedPolicy(LowLevelPolicy):
    """Executes the first ``k`` actions of each chunk, one per call; for the reference loop and lockstep.

    A chunk that fails validation or jumps at its seam (:class:`~ladder_ros.policies.audit.ChunkScreen`)
    is replaced by a hold-still command (no motion, the gripper as it is) until the next request,
    so the simulation keeps stepping and both the loop and the graph record the same thing; the
    reason is logged once and counted in :attr:`report`. A source that cannot answer (no server)
    raises: the caller decides whether to wait (the lockstep node retries) or give up. ``name`` is the name
    it runs under (records and reports; None: the config's own name).
    """

    def __init__(self, source: ChunkSource, config: PolicyConfig, seed: int,
                 log: Callable[[str], None] | None = None, statistics: Normalization | None = None,
                 name: str | None = None):
        self.source = source
        self.config = config
        self.name = name or config.name
        self.seed = int(seed)
        log = log or (lambda text: LOG.warning("policy %s: %s", self.name, text))
        self.reasons = ReasonLog(log)
        self.report = PolicyReport.of(config, self.name)
        self.screen = ChunkScreen(config, self.report, statistics=statistics, log=log)
        self.processor = self.screen.processor
        self.encoder = ObservationEncoder(config)
        self._queue: deque[TaggedAction] = deque()
        self._previous: np.ndarray | None = None  # the last command given (the seam's reference)
        self._hold_kind = ""  # why the queued hold-still command is there
        self.chunks = 0  # requests made this episode (the noise seed's index)
        self.holds = 0  # hold-still commands given instead of a rejected chunk's actions

    @property
    def declared_convention(self) -> ActionConvention | None:
        """The convention the model acts in (its config's); what :meth:`act` returns is already the contract."""
        return self.processor.convention

    def policy_report(self) -> dict:
        """This episode's :class:`~ladder_ros.policies.audit.PolicyReport` (the record's ``policy_report``)."""
        return self.report.to_dict()

    def reset(self, instruction: str) -> None:
        self._queue.clear()

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.act_tagged(ObservationBundle(observation, stamp_ns=observation.step), instruction).command

    def act_tagged(self, bundle: ObservationBundle, instruction: str) -> TaggedAction:
        if not self._queue:
            self._request(bundle, instruction)
        action = self._queue.popleft()
        if action.held:
            self.holds += 1
        self.report.step(self._hold_kind if action.held else "")
        self._previous = action.command
        return action

    def _request(self, bundle: ObservationBundle, instruction: str) -> None:
        chunk_id = self.chunks
        if self.config.state:
            self.screen.check_state(self.encoder.state(bundle.observation))
        raw = self.source.infer(bundle, instruction, noise_seed(self.seed, chunk_id))
        self.chunks += 1
        latency_ms = raw.latency_s * 1000.0
        self.report.inference_ms.append(latency_ms)
        try:
            commands = self.screen.commands(raw.actions)
            self.screen.check_seam(commands[0], self._previous, bundle.observation)
        except RejectedChunk as exc:
            self.report.refused(exc.kind)
            self._hold_kind = exc.kind
            self.reasons.report(exc.kind, f"chunk {chunk_id}: {exc}")
            hold = self.processor.hold_command(bundle.observation)
            self._queue.append(TaggedAction(hold, instruction, bundle.stamp_ns, chunk_id, 0, latency_ms,
                                            held=str(exc)))
            return
        self.report.chunks += 1
        self.reasons.clear()
        for index, command in enumerate(commands):
            self._queue.append(TaggedAction(command, instruction, bundle.stamp_ns, chunk_id, index, latency_ms))
