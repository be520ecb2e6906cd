"""The rehearsal's policy server: an openpi-protocol server answering as the configured policy, with expert chunks.

On the robot the policy node talks to an openpi server on a GPU machine. In the rehearsal
(docs/rehearsal.md) this server takes its place on 127.0.0.1, at the address the policy config gives,
so the policy node runs its real openpi client and chunk executor on the wall clock, unchanged. It
speaks the protocol of openpi's ``websocket_policy_server.py`` through
:class:`~ladder_ros.policies.fake_server.FakePolicyServer` (metadata on connect, ``server_timing`` in
every reply, the request served inside the event loop as openpi serves it) and answers:

* the warm-up request (prompt ``"warm up"``, black images, a zero state:
  :mod:`ladder_ros.policies.warmup`) with a chunk of holds of the configured shape;
* every other request with a chunk of the scripted expert (:class:`~.rehearsal_expert.ExpertChunker`),
  computed from the request's own state (what the policy node observed) and the twin's privileged
  state of the current episode as it is when the request arrives (object poses, what is held, the
  arm's commanded target), after an inference time of ``delay_ms`` with a normal ``jitter_ms``: a
  GPU server's latency, so the chunk executor's timing meets what a lab's would;
* with a chunk of holds when the twin has said nothing about the current episode within ``wait_s``
  (counted by reason);
* for a joint-position policy (the Franka's pi0.5-DROID, rehearsed against franky-sim, which has no
  scene): every request of an episode with the scripted sweep's next chunk
  (:class:`~.rehearsal_sweep.SweepChunker`), which needs no privileged state; holds when no episode runs.

The ROS side (``ladder_ros/nodes/rehearsal_server.py``) feeds :class:`RehearsalPolicy` the episode
(task, seed) and the twin's privileged state; nothing here imports rclpy.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Mapping

import numpy as np

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.observation import PrivilegedState
from ladder_ros.core.task import Task
from ladder_ros.policies.config import JOINT_POSITION, PolicyConfig
from ladder_ros.policies.fake_server import LOOPBACK, FakePolicyServer
from ladder_ros.policies.rehearsal_expert import ExpertChunker, hold_chunk, observation_from_request
from ladder_ros.policies.rehearsal_sweep import SweepChunker, joint_hold_chunk
from ladder_ros.policies.scripted_expert import ExpertNoise
from ladder_ros.policies.warmup import WARM_UP_PROMPT

NO_EPISODE = "no episode"
NO_PRIVILEGED = "no privileged state of the episode yet"
UNREADABLE = "unreadable request"


class RehearsalPolicy:
    """What the rehearsal's server answers (see the module docstring); thread-safe."""

    def __init__(self, config: PolicyConfig, noise: ExpertNoise, *, delay_ms: float, jitter_ms: float = 0.0,
                 wait_s: float = 2.0, finger_stroke_s: float = 0.0, rng_seed: int = 0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        if delay_ms < 0 or jitter_ms < 0:
            raise ConfigError(f"inference delay and jitter must be >= 0 ms, got {delay_ms}, {jitter_ms}")
        self.config, self.noise = config, noise
        self.delay_ms, self.jitter_ms, self.wait_s = float(delay_ms), float(jitter_ms), float(wait_s)
        self.finger_stroke_s = float(finger_stroke_s)  # the arm's fingers, open to closed (ExpertChunker)
        self._rng = np.random.default_rng(rng_seed)
        self._sleep, self._clock = sleep, clock
        self._cond = threading.Condition()
        self._episode: tuple[str, Task, int] | None = None
        self._privileged: tuple[str, PrivilegedState, np.ndarray | None] | None = None
        self._chunker: tuple[str, ExpertChunker | SweepChunker] | None = None
        self.sweeps = config.action.kind == JOINT_POSITION  # no scene: the scripted sweep, not the expert
        self.requests = 0
        self.warm_ups = 0
        self.holds: Counter[str] = Counter()
        self.infer_ms: deque[float] = deque(maxlen=1000)

    # ------------------------------------------------------------------ what the twin and the graph say
    def set_episode(self, episode_id: str | None, task: Task | None = None, seed: int = 0) -> None:
        """The current episode (None: none runs)."""
        with self._cond:
            self._episode = None if episode_id is None or task is None else (episode_id, task, int(seed))
            self._cond.notify_all()

    def set_privileged(self, episode_id: str, privileged: PrivilegedState, target_position: np.ndarray | None) -> None:
        with self._cond:
            self._privileged = (episode_id, privileged, target_position)
            self._cond.notify_all()

    # ------------------------------------------------------------------ a request
    def respond(self, request: Mapping[str, Any]) -> dict:
        """The reply map (``{action key: chunk}``), after the inference time."""
        started = self._clock()
        self.requests += 1
        prompt = request.get(self.config.prompt_key)
        if prompt == WARM_UP_PROMPT:
            self.warm_ups += 1
            actions = joint_hold_chunk(self.config, request) if self.sweeps else hold_chunk(self.config)
        elif self.sweeps:
            actions = self._sweep_chunk(request)
        else:
            actions = self._expert_chunk(request, str(prompt))
        delay_s = max(0.0, float(self._rng.normal(self.delay_ms, self.jitter_ms)) if self.jitter_ms else
                      self.delay_ms) / 1000.0
        remaining = delay_s - (self._clock() - started)
        if remaining > 0:
            self._sleep(remaining)
        self.infer_ms.append((self._clock() - started) * 1000.0)
        return {self.config.action.key: actions}

    def _expert_chunk(self, request: Mapping[str, Any], instruction: str) -> np.ndarray:
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
            if self._chunker is None or self._chunker[0] != episode[0]:
                chunker = ExpertChunker(episode[1], episode[2], self.noise, self.config, self.finger_stroke_s)
                self._chunker = (episode[0], chunker)
            chunker = self._chunker[1]
        try:
            observation = observation_from_request(request, self.config, privileged[1], privileged[2])
            return chunker.chunk(observation, instruction)
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
                "delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms,
                "infer_p50_ms": times[len(times) // 2] if times else None,
                "infer_max_ms": times[-1] if times else None,
                "chunks": self._chunker[1].chunks if self._chunker else 0}


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
