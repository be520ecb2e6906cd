"""The rehearsal's policy server: an openpi-protocol server answering as the configured policy, with expert chunks.

On the robot the policy node talks to an openpi server on a GPU machine. In the rehearsal
(docs/rehearsal.md) this server takes its place on 127.0.0.1, at the address the policy config gives,
so the policy node runs its real openpi client and chunk executor on the wall clock, unchanged. It
speaks the protocol of openpi's ``websocket_policy_server.py`` through
:class:`~ladder_ros.instruments.openpi_fake_server.FakePolicyServer` (metadata on connect, ``server_timing`` in
every reply, the request served inside the event loop as openpi serves it) and answers:

* the warm-up request (prompt ``"warm up"``, black images, a zero state:
  :mod:`ladder_ros.policies.warmup`) with a chunk of holds of the configured shape;
* every other request with a chunk of the scripted expert (:class:`~.rehearsal_expert.ExpertChunker`),
  after an inference time drawn from :class:`InferenceLatency` (fixed, normal, or heavy-tailed as a
  server over a network, so the chunk executor's timing meets what a lab's would), computed at the end
  of it from the request's own state (what the policy node observed), the twin's privileged state of
  the current episode (object poses, what is held) and the arm's commanded target *when the request
  was sent*: the policy node composes a chunk onto the target it had commanded when it took the
  observation (its anchor), which includes every command it handed out before the request and none
  after. The policy node's ``policy/action_tag`` says when each command was handed out
  (:meth:`RehearsalPolicy.note_handout`) and the driver's ``robot/joint_command`` where each one put
  the target (:meth:`RehearsalPolicy.set_commanded_target`), so the target is the driver's after the
  last command handed out before the request arrived (a target read before that command landed made
  every chunk overshoot by a step: a grasp descent 3 cm too deep); without any command of the episode
  yet, the twin's (its motors' goals, published once a control period). The handouts between two
  requests are also how many steps of its last look-ahead the expert keeps (``ran``);
* with a chunk of holds when the twin has said nothing about the current episode within ``wait_s``
  (counted by reason);
* with openpi's error (the traceback, then a close with 1011) while an injected ``server_error`` plays
  (:meth:`RehearsalPolicy.fail_for`), and after blocking its event loop for the rest of an injected
  ``server_stall`` (:meth:`RehearsalPolicy.stall_for`): the rehearsal's chaos (:mod:`ladder_ros.instruments.faults`);
* for a joint-position policy (the Franka's pi0.5-DROID, rehearsed against franky-sim, which has no
  scene): every request of an episode with the scripted sweep's next chunk
  (:class:`~.rehearsal_sweep.SweepChunker`), which needs no privileged state; holds when no episode runs.

The ROS side (``ladder_ros/instruments/rehearsal/node.py``) feeds :class:`RehearsalPolicy` the episode
(task, seed) and the twin's privileged state; nothing here imports rclpy.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Mapping

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError, LadderError
from ladder_ros.core.observation import PrivilegedState
from ladder_ros.core.task import Task
from ladder_ros.policies.config import JOINT_POSITION, PolicyConfig
from ladder_ros.instruments.faults import FaultWindow
from ladder_ros.instruments.openpi_fake_server import LOOPBACK, FakePolicyServer
from ladder_ros.instruments.rehearsal.chunker import ExpertChunker, hold_chunk, observation_from_request
from ladder_ros.instruments.rehearsal.sweep import SweepChunker, joint_hold_chunk
from ladder_ros.instruments.expert.noise import ExpertNoise
from ladder_ros.policies.warmup import WARM_UP_PROMPT

NO_EPISODE = "no episode"
FIXED, NORMAL, HEAVY_TAIL = "fixed", "normal", "heavy_tail"
LATENCY_MODELS = (FIXED, NORMAL, HEAVY_TAIL)
# heavy_tail: a lognormal around the delay (its median) with this spread of the logarithm, and now and then a
# spike of 2-3 times, as a policy server across a network answers (project choice: a p95 about 1.5x the
# median; openpi's DROID example quotes 0.5-1 s a chunk from a remote GPU).
HEAVY_TAIL_SIGMA = 0.25
SPIKE_PROBABILITY = 0.05
SPIKE_FACTOR = (2.0, 3.0)
HISTORY = 4096  # handouts and commanded targets kept (minutes of an episode at 5-15 Hz)


class InferenceLatency:
    """How long the rehearsal's server takes per chunk: ``fixed`` (``delay_ms`` exactly), ``normal`` (mean
    ``delay_ms``, standard deviation ``jitter_ms``, never below 0) or ``heavy_tail`` (a lognormal with median
    ``delay_ms`` and log-spread ``sigma``, times 2-3 with probability ``spike_probability``)."""

    def __init__(self, model: str, delay_ms: float, jitter_ms: float = 0.0, *, sigma: float = HEAVY_TAIL_SIGMA,
                 spike_probability: float = SPIKE_PROBABILITY):
        if model not in LATENCY_MODELS:
            raise ConfigError(f"latency model must be one of {', '.join(LATENCY_MODELS)}, got {model!r}")
        for name, value in (("inference delay", delay_ms), ("jitter", jitter_ms), ("latency sigma", sigma)):
            if not np.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0.0 <= spike_probability <= 1.0:
            raise ConfigError(f"spike probability must be in [0, 1], got {spike_probability!r}")
        self.model, self.delay_ms, self.jitter_ms = model, float(delay_ms), float(jitter_ms)
        self.sigma, self.spike_probability = float(sigma), float(spike_probability)

    def sample_ms(self, rng: np.random.Generator) -> float:
        if self.model == FIXED or (self.model == NORMAL and not self.jitter_ms):
            return self.delay_ms
        if self.model == NORMAL:
            return max(0.0, float(rng.normal(self.delay_ms, self.jitter_ms)))
        value = self.delay_ms * float(np.exp(rng.normal(0.0, self.sigma)))
        if rng.random() < self.spike_probability:
            value *= float(rng.uniform(*SPIKE_FACTOR))
        return value

    def describe(self) -> str:
        if self.model == FIXED:
            return f"{self.delay_ms:g} ms"
        if self.model == NORMAL:
            return f"{self.delay_ms:g} ms (normal, sd {self.jitter_ms:g} ms)"
        return (f"median {self.delay_ms:g} ms (lognormal, sigma {self.sigma:g}; {self.spike_probability:.0%} "
                f"spikes of {SPIKE_FACTOR[0]:g}-{SPIKE_FACTOR[1]:g}x)")


NO_PRIVILEGED = "no privileged state of the episode yet"
UNREADABLE = "unreadable request"


class InjectedServerError(LadderError):
    """The failure an injected ``server_error`` answers with (a GPU server out of memory, a crashed worker)."""


class RehearsalPolicy:
    """What the rehearsal's server answers (see the module docstring); thread-safe."""

    def __init__(self, config: PolicyConfig, noise: ExpertNoise, *, delay_ms: float, jitter_ms: float = 0.0,
                 latency: InferenceLatency | None = None, wait_s: float = 2.0, finger_stroke_s: float = 0.0,
                 rng_seed: int = 0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, now_ns: Callable[[], int] = time.time_ns):
        if delay_ms < 0 or jitter_ms < 0:
            raise ConfigError(f"inference delay and jitter must be >= 0 ms, got {delay_ms}, {jitter_ms}")
        self.config, self.noise = config, noise
        self.latency = latency or InferenceLatency(NORMAL, delay_ms, jitter_ms)
        self.delay_ms, self.jitter_ms, self.wait_s = float(delay_ms), float(jitter_ms), float(wait_s)
        self.finger_stroke_s = float(finger_stroke_s)  # the arm's fingers, open to closed (ExpertChunker)
        self._rng = np.random.default_rng(rng_seed)
        self._sleep, self._clock, self._now_ns = sleep, clock, now_ns
        self._cond = threading.Condition()
        self._episode: tuple[str, Task, int] | None = None
        self._privileged: tuple[str, PrivilegedState, np.ndarray | None, float] | None = None  # ..., arrival
        # (applied ns, the driver's target position, its orientation relative to the top-down pose or None)
        self._commanded: deque[tuple[int, np.ndarray, np.ndarray | None]] = deque(maxlen=HISTORY)
        self._handouts: deque[int] = deque(maxlen=HISTORY)  # when the policy node handed out each command (ns)
        self._last_request_ns: int | None = None  # when the episode's previous request arrived
        self._chunker: tuple[str, ExpertChunker | SweepChunker] | None = None
        self.sweeps = config.action.kind == JOINT_POSITION  # no scene: the scripted sweep, not the expert
        self.requests = 0
        self.warm_ups = 0
        self.holds: Counter[str] = Counter()
        self.infer_ms: deque[float] = deque(maxlen=1000)
        self.failing = FaultWindow(clock)  # injected: every request answered with an error
        self.stalling = FaultWindow(clock)  # injected: a request blocks the server until the window ends
        self.injected: Counter[str] = Counter()  # requests an injected fault answered (error) or held (stall)

    # ------------------------------------------------------------------ injected faults
    def fail_for(self, duration_s: float) -> None:
        """Answer every request of the next ``duration_s`` seconds with an error, as openpi answers an exception."""
        self.failing.open(duration_s)

    def stall_for(self, duration_s: float) -> None:
        """Block the server for the next ``duration_s`` seconds: a request that arrives waits until they are over."""
        self.stalling.open(duration_s)

    # ------------------------------------------------------------------ what the twin and the graph say
    def set_episode(self, episode_id: str | None, task: Task | None = None, seed: int = 0) -> None:
        """The current episode (None: none runs)."""
        with self._cond:
            self._episode = None if episode_id is None or task is None else (episode_id, task, int(seed))
            self._commanded.clear()
            self._handouts.clear()
            self._last_request_ns = None
            self._cond.notify_all()

    def note_handout(self, stamp_ns: int) -> None:
        """The policy node handed out a command at ``stamp_ns`` (its ``policy/action_tag``)."""
        with self._cond:
            self._handouts.append(int(stamp_ns))

    def set_privileged(self, episode_id: str, privileged: PrivilegedState, target_position: np.ndarray | None) -> None:
        with self._cond:
            self._privileged = (episode_id, privileged, target_position, self._clock())
            self._cond.notify_all()

    def set_commanded_target(self, position: np.ndarray, applied_ns: int | None = None,
                             euler: np.ndarray | None = None) -> None:
        """Where a command the driver applied at ``applied_ns`` (default: now) puts the end effector (base frame,
        m; ``euler``: its orientation relative to the top-down pose, rad): fresher than the twin's privileged
        state, which comes once a control period."""
        target = np.asarray(position, dtype=np.float64).reshape(-1)
        if target.shape != (3,) or not np.all(np.isfinite(target)):
            raise InvalidInputError(f"a commanded target is 3 finite numbers, got {position!r}")
        turn = None if euler is None else np.asarray(euler, dtype=np.float64).reshape(-1)
        if turn is not None and (turn.shape != (3,) or not np.all(np.isfinite(turn))):
            raise InvalidInputError(f"a commanded orientation is 3 finite angles, got {euler!r}")
        with self._cond:
            self._commanded.append((self._now_ns() if applied_ns is None else int(applied_ns), target, turn))

    def _target_at(self, request_ns: int) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The driver's target (position, orientation) after the last command handed out before ``request_ns``: the
        newest one applied before the next handout (lock held); None without any command of the episode."""
        later = [stamp for stamp in self._handouts if stamp > request_ns]
        cutoff = min(later) if later else None
        eligible = [(target, turn) for applied, target, turn in self._commanded if cutoff is None or applied < cutoff]
        return eligible[-1] if eligible else None

    def _ran_since(self, request_ns: int) -> int | None:
        """Commands handed out between the episode's previous request and this one (None: its first)."""
        if self._last_request_ns is None:
            return None
        return sum(1 for stamp in self._handouts if self._last_request_ns <= stamp < request_ns)

    # ------------------------------------------------------------------ a request
    def respond(self, request: Mapping[str, Any]) -> dict:
        """The reply map (``{action key: chunk}``), after the inference time."""
        started, arrived_ns = self._clock(), self._now_ns()
        self.requests += 1
        stall = self.stalling.remaining_s()
        if stall > 0:
            self.injected["stall"] += 1
            self._sleep(stall)  # inside the event loop, as openpi computes: nothing else is answered meanwhile
        if self.failing.active:
            self.injected["error"] += 1
            raise InjectedServerError("injected fault: the policy server fails every request for "
                                      f"{self.failing.remaining_s():.1f} s more (CUDA out of memory)")
        self._sleep(self.latency.sample_ms(self._rng) / 1000.0)  # the inference time; the chunk at its end
        prompt = request.get(self.config.prompt_key)
        if prompt == WARM_UP_PROMPT:
            self.warm_ups += 1
            actions = joint_hold_chunk(self.config, request) if self.sweeps else hold_chunk(self.config)
        elif self.sweeps:
            actions = self._sweep_chunk(request)
        else:
            actions = self._expert_chunk(request, str(prompt), arrived_ns)
        self.infer_ms.append((self._clock() - started) * 1000.0)
        return {self.config.action.key: actions}

    def _expert_chunk(self, request: Mapping[str, Any], instruction: str, arrived_ns: int) -> np.ndarray:
        deadline = self._clock() + self.wait_s
        with self._cond:
            while True:
                episode, privileged = self._episode, self._privileged
                if episode is not None and privileged is not None and privileged[0] == episode[0]:
                    break
                remaining = deadline - self._clock()
                if remaining <= 0:
                    self.holds[NO_EPISODE if episode is None else NO_PRIVILEGED] += 1
                    return hold_chunk(self.config, self._gripper_open(request))
                self._cond.wait(remaining)
            commanded = self._target_at(arrived_ns)
            target, turn = (privileged[2], None) if commanded is None else commanded
            ran = self._ran_since(arrived_ns)
            self._last_request_ns = arrived_ns
            if self._chunker is None or self._chunker[0] != episode[0]:
                chunker = ExpertChunker(episode[1], episode[2], self.noise, self.config, self.finger_stroke_s)
                self._chunker = (episode[0], chunker)
            chunker = self._chunker[1]
        try:
            observation = observation_from_request(request, self.config, privileged[1], target, turn)
            return chunker.chunk(observation, instruction, ran)
        except LadderError:
            self.holds[UNREADABLE] += 1
            raise  # openpi answers an exception with its traceback; the policy node says why once

    def _sweep_chunk(self, request: Mapping[str, Any]) -> np.ndarray:
        deadline = self._clock() + self.wait_s
        with self._cond:
            while self._episode is None:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    self.holds[NO_EPISODE] += 1
                    return joint_hold_chunk(self.config, request)
                self._cond.wait(remaining)
            episode_id = self._episode[0]
            if self._chunker is None or self._chunker[0] != episode_id:
                self._chunker = (episode_id, SweepChunker(self.config))
            chunker = self._chunker[1]
        try:
            return chunker.chunk(request)
        except LadderError:
            self.holds[UNREADABLE] += 1
            raise

    def _gripper_open(self, request: Mapping[str, Any]) -> bool:
        try:
            observation = observation_from_request(request, self.config, None, None)
        except LadderError:
            return True
        return observation.aperture >= 0.5

    def stats(self) -> dict:
        times = sorted(self.infer_ms)
        return {"requests": self.requests, "warm_ups": self.warm_ups, "holds": dict(self.holds),
                "delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms, "latency": self.latency.describe(),
                "infer_p50_ms": times[len(times) // 2] if times else None,
                "infer_max_ms": times[-1] if times else None,
                "chunks": self._chunker[1].chunks if self._chunker else 0, "injected": dict(self.injected)}


def serve(policy: RehearsalPolicy, *, metadata: Mapping[str, Any] | None = None) -> FakePolicyServer:
    """Start the server at the policy config's address (127.0.0.1 only) and return it."""
    server = policy.config.server
    if server is None:
        raise ConfigError(f"policy {policy.config.name} has no server section: the rehearsal's server stands in "
                          "for an openpi server, so the policy must be one that talks to a server")
    if server.host not in (LOOPBACK, "localhost"):
        raise ConfigError(f"policy {policy.config.name} points at the server {server.host}:{server.port}; the "
                          f"rehearsal's server listens on {LOOPBACK} only: give a copy of the config with "
                          f"server.host {LOOPBACK}")
    info = {"policy": policy.config.name, "rehearsal": True, "server": "ladder_ros rehearsal (scripted expert)",
            **dict(metadata or {})}
    return FakePolicyServer(policy.respond, metadata=info, port=server.port).start()
