"""A client for openpi's websocket policy protocol, as an unmodified ``scripts/serve_policy.py`` speaks it.

The protocol (openpi ``src/openpi/serving/websocket_policy_server.py``): the client opens a
websocket (no compression) and the server first sends its metadata (a msgpack map); then each
binary message from the client is one observation and the server answers with one binary message,
the policy's output (``actions``, a chunk ``[H, D]``) plus ``server_timing`` (``infer_ms``, and
``prev_total_ms`` from the second request on). When inference fails the server sends the traceback
as a *text* frame and closes the connection. ``GET /healthz`` on the same port answers ``OK``.
Messages use openpi's msgpack-numpy encoding (:mod:`ladder_ros.policies.openpi_wire`).

What this client adds for a robot: every wait is bounded (connect, metadata, each reply); a reply
that does not come in time drops the connection (the protocol has no request ids, so a late reply
would be taken for the next one); a lost server is retried with exponential back-off, and while it
is down :meth:`OpenPIClient.infer` fails at once with :class:`PolicyUnavailable` so the caller
holds still instead of blocking. Nothing from the network is unpickled.
"""

from __future__ import annotations

import http.client
import inspect
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.policies.chunked import RawChunk
from ladder_ros.policies.config import PolicyConfig, ServerSettings
from ladder_ros.policies.observation import ObservationBundle, ObservationEncoder
from ladder_ros.policies.openpi_wire import WireFormatError, packb, unpackb

LOG = logging.getLogger(__name__)


class PolicyUnavailable(LadderError):
    """No usable server right now (refused, lost, timed out, or in back-off); holding still is right."""


class PolicyServerError(LadderError):
    """The server answered with an error instead of actions (its traceback's last line is kept)."""


@dataclass(frozen=True)
class ServerReply:
    """One reply: the whole decoded map, the round trip measured here and the server's own timing."""

    data: dict
    round_trip_ms: float
    server_timing: dict = field(default_factory=dict)


def _connect_function() -> Callable[..., Any]:
    from websockets.sync.client import connect

    return connect


class OpenPIClient:
    """Talks to one openpi policy server; used from one thread at a time (the inference worker)."""

    def __init__(self, settings: ServerSettings, *, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self._conn: Any = None
        self.metadata: dict | None = None
        self._backoff_s = settings.backoff_initial_s
        self._retry_at = 0.0
        self.last_error = ""
        self.connects = 0  # successful connections (the first plus every reconnect)
        self.failures = 0  # failed connects and lost connections

    # ------------------------------------------------------------------ connection
    @property
    def connected(self) -> bool:
        return self._conn is not None

    def _headers(self) -> dict[str, str] | None:
        if not self.settings.api_key_env:
            return None
        key = os.environ.get(self.settings.api_key_env, "")
        if not key:
            raise PolicyUnavailable(f"the API key variable {self.settings.api_key_env} is not set")
        return {"Authorization": f"Api-Key {key}"}

    def connect(self) -> dict:
        """Open the websocket and read the server's metadata (one attempt); returns the metadata."""
        import websockets

        self.close()
        connect = _connect_function()
        options: dict[str, Any] = {"compression": None, "max_size": int(self.settings.max_message_mb * 2 ** 20),
                                   "open_timeout": self.settings.connect_timeout_s,
                                   "additional_headers": self._headers()}
        parameters = inspect.signature(connect).parameters
        if "proxy" in parameters:
            options["proxy"] = None  # never through a proxy from the environment: the server is addressed directly
        if "legacy" in parameters:
            options["legacy"] = True  # websockets >= 17: a connection held across calls, not a context manager
        try:
            conn = connect(self.settings.uri, **options)
        except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
            raise self._failed(f"cannot connect to the policy server at {self.settings.uri}: {_describe(exc)}")
        try:
            first = conn.recv(timeout=self.settings.connect_timeout_s)
            metadata = unpackb(first) if isinstance(first, bytes) else None
        except (TimeoutError, websockets.exceptions.ConnectionClosed, WireFormatError) as exc:
            conn.close()
            raise self._failed(f"the policy server at {self.settings.uri} sent no readable metadata: "
                               f"{_describe(exc)}")
        if not isinstance(metadata, dict):
            conn.close()
            raise self._failed(f"the policy server at {self.settings.uri} sent metadata that is not a map: "
                               f"{type(first).__name__}")
        self._conn = conn
        self.metadata = metadata
        self.connects += 1
        self._backoff_s = self.settings.backoff_initial_s
        self.last_error = ""
        LOG.info("connected to the policy server at %s (metadata keys: %s)", self.settings.uri,
                 ", ".join(map(str, metadata)) or "none")
        return metadata

    def _failed(self, message: str) -> PolicyUnavailable:
        """Record a failure and schedule the next attempt (exponential back-off)."""
        self.failures += 1
        self._retry_at = self._clock() + self._backoff_s
        self.last_error = message
        message = f"{message}; retrying in {self._backoff_s:.1f} s"
        self._backoff_s = min(self._backoff_s * 2.0, self.settings.backoff_max_s)
        return PolicyUnavailable(message)

    def ensure_connected(self) -> None:
        """Connect if not connected and the back-off has passed; else :class:`PolicyUnavailable` at once."""
        if self._conn is not None:
            return
        wait = self._retry_at - self._clock()
        if wait > 0:
            raise PolicyUnavailable(f"not connected ({self.last_error or 'no attempt yet'}); next attempt in "
                                    f"{wait:.1f} s")
        self.connect()

    def healthy(self, timeout_s: float | None = None) -> bool:
        """Whether ``GET /healthz`` answers 200 (openpi's health check, on the websocket's port)."""
        connection = http.client.HTTPConnection(self.settings.host, self.settings.port,
                                                timeout=timeout_s or self.settings.connect_timeout_s)
        try:
            connection.request("GET", "/healthz")
            return connection.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a broken socket may raise anything; it is gone either way
                pass

    # ------------------------------------------------------------------ requests
    def infer(self, observation: dict) -> ServerReply:
        """Send one observation and wait (bounded) for the server's reply map."""
        import websockets

        self.ensure_connected()
        payload = packb(observation)
        started = time.perf_counter()
        try:
            self._conn.send(payload)
            reply = self._conn.recv(timeout=self.settings.request_timeout_s)
        except TimeoutError:
            self.close()
            # Reconnect at once next time: a slow reply is not a dead server.
            self._retry_at = self._clock()
            self.last_error = f"no reply within {self.settings.request_timeout_s:g} s"
            raise PolicyUnavailable(f"the policy server sent no reply within {self.settings.request_timeout_s:g} s; "
                                    "the connection is dropped (a late reply would be read as the next one)")
        except (OSError, websockets.exceptions.ConnectionClosed) as exc:
            self.close()
            raise self._failed(f"lost the policy server at {self.settings.uri}: {_describe(exc)}")
        round_trip_ms = (time.perf_counter() - started) * 1000.0
        if isinstance(reply, str):  # openpi's error path: the traceback as text, then the server closes
            self.close()
            last = next((line for line in reversed(reply.strip().splitlines()) if line.strip()), "(empty)")
            self._failed("the policy server reported an error")  # back off before reconnecting
            raise PolicyServerError(f"the policy server failed: {last.strip()}")
        try:
            data = unpackb(reply, max_bytes=int(self.settings.max_message_mb * 2 ** 20))
        except WireFormatError as exc:
            self.close()
            raise self._failed(f"unreadable reply from the policy server: {exc}")
        if not isinstance(data, dict):
            raise PolicyServerError(f"the policy server replied with a {type(data).__name__}, not a map")
        timing = data.get("server_timing")
        timing = {str(k): float(v) for k, v in timing.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool)} if isinstance(timing, dict) else {}
        return ServerReply(data=data, round_trip_ms=round_trip_ms, server_timing=timing)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class OpenPISource:
    """A :class:`~ladder_ros.policies.chunked.ChunkSource` backed by an openpi policy server.

    The request carries the config's camera images (resized here, as openpi's own clients do, to
    keep messages small), its state entries and the prompt; the reply's ``actions`` must be a
    numeric ``[H, D]`` array. The server does its own normalisation; the noise seed is not sent
    (openpi's protocol has no field for it), so a server samples with its own randomness.
    """

    def __init__(self, config: PolicyConfig, *, client: OpenPIClient | None = None):
        if config.server is None:
            raise LadderError(f"policy {config.name} has no server settings")
        self.config = config
        self.name = config.name
        self.encoder = ObservationEncoder(config)
        self.client = client or OpenPIClient(config.server)

    def infer(self, bundle: ObservationBundle, instruction: str, noise_seed: int) -> RawChunk:
        request = self.encoder.openpi_request(bundle, instruction)
        started = time.perf_counter()
        reply = self.client.infer(request)
        key = self.config.action.key
        actions = reply.data.get(key)
        if not isinstance(actions, np.ndarray):
            found = ", ".join(sorted(map(str, reply.data))) or "none"
            raise PolicyServerError(f"the policy server's reply has no {key!r} array (keys: {found})")
        return RawChunk(actions=actions, latency_s=time.perf_counter() - started, server_timing=reply.server_timing)

    def close(self) -> None:
        self.client.close()
