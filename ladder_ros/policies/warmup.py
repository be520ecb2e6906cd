"""Getting a policy ready before the first episode, so that compile time never counts against an episode.

openpi's ``serve_policy.py`` does not warm up: a JAX policy compiles on its first ``infer``, and for
that time (tens of seconds to minutes) its event loop answers nothing (:mod:`ladder_ros.instruments.openpi_fake_server`
reproduces this). A robot whose first episode sent the first request would hold still or give up
(a 2 s request bound, then reconnects that time out while the server is busy). So the policy node
runs :class:`WarmUp` at start, in its own thread, with its own deadline (default 300 s):

1. build the source: a local model loads and runs its warm-up inference
   (:class:`~ladder_ros.policies.local_model.TransformersSource`); an openpi source is created;
2. openpi: connect and read the server's metadata, retrying within the deadline while it is down;
3. openpi: one inference on an observation of the configured shapes (black images of each camera's
   size, a zero state; :meth:`~ladder_ros.policies.observation.ObservationEncoder.dummy_bundle`),
   waiting up to the rest of the deadline for it: the server compiles now, and the reply's chunk
   must have the configured action dimension and at least ``execute`` actions.

Its state (:data:`~ladder_ros.policies.status.WARMING_UP` with what it waits for,
:data:`~ladder_ros.policies.status.READY`, or :data:`~ladder_ros.policies.status.SERVER_ERROR` with
why) is what the node publishes; a failed warm-up (an error reply, the deadline) is tried again every
``retry_s`` while no episode runs, and so is one after the server failed in an episode
(:meth:`WarmUp.failed`). Policies built per episode (the scripted expert) are ready at once.

Once ready, a server policy's server is asked ``GET /healthz`` every ``health_period_s`` while no
episode runs (:meth:`WarmUp.check_server`): a server that stopped answering makes the policy
:data:`~ladder_ros.policies.status.UNAVAILABLE`, saying why, so a start that names it is refused (or
waits) instead of running into a dead server; when it answers again the policy warms up again (a
restarted JAX server compiles again) and is ready after that.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.policies.status import READY, SERVER_ERROR, SERVER_NOT_ANSWERING, UNAVAILABLE, WARMING_UP

LOG = logging.getLogger(__name__)

DEFAULT_DEADLINE_S = 300.0
RETRY_S = 5.0  # project choice: how often a failed warm-up is tried again while no episode runs
HEALTH_PERIOD_S = 1.0  # project choice: how often a ready server policy's server is asked /healthz between episodes
WARM_UP_PROMPT = "warm up"


class WarmUpFailed(LadderError):
    """The warm-up did not finish (deadline, an error reply, a chunk of the wrong shape)."""


class WarmUp:
    """Warms up a :class:`~ladder_ros.policies.factory.PolicyProvider`'s source (see the module docstring)."""

    def __init__(self, provider, *, deadline_s: float = DEFAULT_DEADLINE_S, retry_s: float = RETRY_S,
                 may_attempt: Callable[[], bool] = lambda: True, log: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, health_period_s: float = HEALTH_PERIOD_S,
                 may_probe: Callable[[], bool] = lambda: True, detail: str = "starting"):
        """``may_attempt()``: whether a warm-up may run now; ``may_probe()``: whether the server may be asked
        ``/healthz`` now (0 ``health_period_s``: never); ``detail``: what it says before it starts."""
        self.provider = provider
        self.deadline_s = deadline_s
        self.retry_s = retry_s
        self.health_period_s = health_period_s
        self._may_attempt = may_attempt
        self._may_probe = may_probe
        self._log = log or LOG.info
        self._clock = clock
        self._lock = threading.Lock()
        self._state, self._detail, self._since = WARMING_UP, detail, clock()
        self.warm_up_s: float | None = None
        self.metadata: dict | None = None
        self.attempts = 0
        self._said = ""  # the last failure logged (a retried warm-up says a failure again only when it changes)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ state
    def snapshot(self) -> tuple[str, str, float]:
        """(state, detail, seconds in this state)."""
        with self._lock:
            return self._state, self._detail, self._clock() - self._since

    @property
    def ready(self) -> bool:
        with self._lock:
            return self._state == READY

    def _set(self, state: str, detail: str = "") -> None:
        with self._lock:
            changed = state != self._state
            self._state, self._detail = state, detail
            if changed:
                self._since = self._clock()

    def failed(self, reason: str) -> None:
        """The source failed in an episode (e.g. too many server errors): not ready until a warm-up succeeds."""
        self._set(SERVER_ERROR, reason)
        self._wake.set()

    @property
    def started(self) -> bool:
        """Whether its thread runs (a warm-up put off until an episode names the policy has not started)."""
        return self._thread is not None

    # ------------------------------------------------------------------ the server's health
    def check_server(self) -> None:
        """Ask a ready (or unavailable) server policy's server ``/healthz`` once: one that stopped answering
        makes the policy unavailable, saying why; one that answers again starts a new warm-up."""
        client = getattr(self.provider.built_source, "client", None)
        state = self.snapshot()[0]
        if client is None or state not in (READY, UNAVAILABLE):
            return
        healthy = client.healthy()
        if state == READY and not healthy:
            reason = (f"the policy server at {client.settings.uri} does not answer (GET /healthz) "
                      f"(see {SERVER_NOT_ANSWERING})")
            self._set(UNAVAILABLE, reason)
            self._log(f"{reason}: unavailable until it answers again")
        elif state == UNAVAILABLE and healthy:
            self._log(f"the policy server at {client.settings.uri} answers again: warming up again")
            self._set(WARMING_UP, "the policy server answers again")

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="policy-warm-up", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.snapshot()[0] in (READY, UNAVAILABLE):
                if self.health_period_s > 0 and self._may_probe():
                    self.check_server()
                if self.snapshot()[0] in (READY, UNAVAILABLE):
                    self._wake.wait(self.health_period_s if self.health_period_s > 0 else None)
                    self._wake.clear()
                    continue
            if self._may_attempt():
                self.attempt()
            if not self.ready:
                self._stop.wait(self.retry_s)

    # ------------------------------------------------------------------ one warm-up
    def attempt(self) -> bool:
        """One warm-up within the deadline, in the calling thread; True when the policy is ready."""
        self.attempts += 1
        started = self._clock()
        deadline = started + self.deadline_s
        self._set(WARMING_UP, "loading the policy")
        try:
            if not self.provider.per_episode:
                source = self.provider.source()  # a local model loads and warms up here
                client = getattr(source, "client", None)
                if client is not None:
                    self._first_inference(source, client, deadline)
        except LadderError as exc:  # the deadline, the server's error reply, a model that cannot load
            detail = str(getattr(exc, "signature", "")) or str(exc)
            self._set(SERVER_ERROR, detail)
            if detail != self._said:
                self._said = detail
                self._log(f"warm-up failed: {exc}")
            return False
        self.warm_up_s = self._clock() - started
        self._said = ""
        self._set(READY)
        self._log(f"ready after a warm-up of {self.warm_up_s:.1f} s")
        return True

    def _connect(self, client, deadline: float) -> None:
        from ladder_ros.policies.openpi_remote import PolicyUnavailable

        while True:
            self._set(WARMING_UP, f"connecting to the policy server at {client.settings.uri}")
            try:
                self.metadata = client.connect()
                self._log(f"policy server at {client.settings.uri}, metadata {sorted(map(str, self.metadata))}")
                return
            except PolicyUnavailable as exc:
                left = deadline - self._clock()
                if left <= 0:
                    raise WarmUpFailed(f"no policy server within {self.deadline_s:g} s: {exc}") from None
                self._set(WARMING_UP, f"waiting for the policy server at {client.settings.uri}: {exc}")
                if self._stop.wait(min(max(client.backoff_s, 0.1), left)):
                    raise WarmUpFailed("stopped") from None

    def _first_inference(self, source, client, deadline: float) -> None:
        from ladder_ros.policies.openpi_remote import PolicyUnavailable

        config = source.config
        bundle = source.encoder.dummy_bundle()
        while True:
            self._connect(client, deadline)
            left = deadline - self._clock()
            self._set(WARMING_UP, f"first inference on the server at {client.settings.uri} (a JAX server compiles "
                                  "its model now)")
            try:
                raw = source.infer(bundle, WARM_UP_PROMPT, 0, timeout_s=max(left, 0.1))
                break
            except PolicyUnavailable as exc:
                if deadline - self._clock() <= 0:
                    raise WarmUpFailed(f"the first inference did not finish within {self.deadline_s:g} s: "
                                       f"{exc}") from None
        actions = np.asarray(raw.actions)
        if actions.ndim != 2 or actions.shape[1] != config.action.dim or actions.shape[0] < config.execute_steps:
            raise WarmUpFailed(f"the server's chunk for an observation of the configured shapes has shape "
                               f"{tuple(actions.shape)}; policy {config.name} expects (>= {config.execute_steps}, "
                               f"{config.action.dim}) ({', '.join(config.action.names)})")
