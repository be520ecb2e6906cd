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
would be taken for the next one) without waiting on a close handshake the server may be too busy
to answer; a lost server is retried with exponential back-off, and while it is down
:meth:`OpenPIClient.infer` fails at once with :class:`PolicyUnavailable` so the caller holds still
instead of blocking. Nothing from the network is unpickled.

openpi's server runs ``policy.infer`` inside its event loop, so while a JAX model compiles on its
first request (tens of seconds to minutes) nothing else on that port answers: not ``/healthz``, not
a new connection, not a keepalive ping. Hence no keepalive pings here (each request has its own
bound instead), and :meth:`OpenPIClient.infer` takes a longer bound for a warm-up request
(:mod:`ladder_ros.policies.warmup`), so compile time is spent before an episode, never in one.

Error replies (the server's traceback as a text frame, then a close with code 1011, e.g. when its
input transforms miss a key) are not a dead server: each one doubles the back-off, a reconnect
that succeeds does not reset it (only a reply with actions does), the error's last line is kept
as its signature so the caller says each distinct error once, and after
``server.max_consecutive_errors`` of them in a row :meth:`OpenPIClient.give_up_reason` says why
the episode must end.
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
from ladder_ros.policies.status import SERVER_NOT_ANSWERING

LOG = logging.getLogger(__name__)


class PolicyUnavailable(LadderError):
    """No usable server right now (refused, lost, timed out, or in back-off); holding still is right."""


class PolicyServerError(LadderError):
    """The server answered with an error instead of actions (its traceback's last line is kept).

    ``signature`` is that line (the exception the server raised): the same error gives the same
    signature, however often and however the message around it changes (retry times).
    """

    def __init__(self, message: str, signature: str = ""):
        super().__init__(message)
        self.signature = signature or message


@dataclass(frozen=True)
class ServerReply:
    """One reply: the whole decoded map, the round trip measured here and the server's own timing."""

    data: dict
    round_trip_ms: float
    server_timing: dict = field(default_factory=dict)


# Dropping a connection waits at most this long for the server's close frame (websockets' default is 10 s): a
# server busy compiling answers nothing, and a request bound of 2 s must not become 12 s (project choice).
CLOSE_TIMEOUT_S = 0.5


def _connect_function() -> Callable[..., Any]:
    from websockets.sync.client import connect

    return connect


def traceback_signature(text: str) -> str:
    """The line that names the error in a Python traceback: its last non-empty line (the exception raised)."""
    return next((line.strip() for line in reversed(text.strip().splitlines()) if line.strip()), "(empty)")


class OpenPIClient:
    """Talks to one openpi policy server; used from one thread at a time (the inference worker)."""

    def __init__(self, settings: ServerSettings, *, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self._conn: Any = None
        self.metadata: dict | None = None
        self._backoff_s = settings.backoff_initial_s  # the next failure's back-off
        self.backoff_s = 0.0  # the back-off of the latest failure (s)
        self._retry_at = 0.0
        self.last_error = ""
        self.connects = 0  # successful connections (the first plus every reconnect)
        self.failures = 0  # failed connects and lost connections
        self.server_errors = 0  # error replies (a traceback instead of actions), in all
        self.consecutive_errors = 0  # error replies since the last reply with actions
        self.last_server_error = ""  # the signature of the latest error reply
        self.error_backoff = False  # the current back-off follows an error reply (the server is up but failing)

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
                                   "additional_headers": self._headers(),
                                   # openpi's server cannot answer pings while it computes (see the module
                                   # docstring); every request is bounded instead
                                   "ping_interval": None, "close_timeout": CLOSE_TIMEOUT_S}
        parameters = inspect.signature(connect).parameters
        if "proxy" in parameters:
            options["proxy"] = None  # never through a proxy from the environment: the server is addressed directly
        if "legacy" in parameters:
            options["legacy"] = True  # websockets >= 17: a connection held across calls, not a context manager
        try:
            conn = connect(self.settings.uri, **options)
        except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
            raise self._failed(f"cannot connect to the policy server at {self.settings.uri}: {_describe(exc)} "
                               f"(see {SERVER_NOT_ANSWERING})")
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
        # The back-off is not reset here: a server that accepts connections and then fails every request
        # keeps backing off (a reply with actions resets it). A pending retry is over, though: once its owner
        # closes this connection, the next request reconnects at once (the server was just there).
        self._retry_at = self._clock()
        self.last_error = ""
        LOG.info("connected to the policy server at %s (metadata keys: %s)", self.settings.uri,
                 ", ".join(map(str, metadata)) or "none")
        return metadata

    def _failed(self, message: str) -> PolicyUnavailable:
        """Record a failure and schedule the next attempt (exponential back-off)."""
        self.failures += 1
        self.error_backoff = False
        return PolicyUnavailable(f"{self._back_off(message)}; retrying in {self.backoff_s:.1f} s")

    def _back_off(self, message: str) -> str:
        """Schedule the next attempt after the current back-off and double it; returns ``message``."""
        self._retry_at = self._clock() + self._backoff_s
        self.backoff_s = self._backoff_s
        self.last_error = message
        self._backoff_s = min(self._backoff_s * 2.0, self.settings.backoff_max_s)
        return message

    def give_up_reason(self) -> str | None:
        """Why an episode must end: ``max_consecutive_errors`` error replies in a row (None: keep trying)."""
        limit = self.settings.max_consecutive_errors
        if limit and self.consecutive_errors >= limit:
            return f"policy server error: {self.last_server_error} ({self.consecutive_errors} error replies in a row)"
        return None

    def ensure_connected(self) -> None:
        """Connect if not connected and the back-off has passed; else fail at once (no blocking)."""
        if self._conn is not None:
            return
        wait = self._retry_at - self._clock()
        if wait > 0:
            if self.error_backoff:  # the server is up but failing: the same error, not a missing server
                raise PolicyServerError(f"the policy server failed: {self.last_server_error}; next attempt in "
                                        f"{wait:.1f} s", self.last_server_error)
            # A retry is only pending after a failure (a connection clears it), so last_error says which.
            raise PolicyUnavailable(f"not connected ({self.last_error}); next attempt in {wait:.1f} s")
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
    def infer(self, observation: dict, timeout_s: float | None = None) -> ServerReply:
        """Send one observation and wait for the server's reply map, at most ``timeout_s`` (default: the
        settings' ``request_timeout_s``; a warm-up gives the compile time)."""
        import websockets

        self.ensure_connected()
        payload = packb(observation)
        bound = self.settings.request_timeout_s if timeout_s is None else timeout_s
        started = time.perf_counter()
        try:
            self._conn.send(payload)
            reply = self._conn.recv(timeout=bound)
        except TimeoutError:
            self.close()
            # Reconnect at once next time: a slow reply is not a dead server.
            self._retry_at = self._clock()
            self.last_error = f"no reply within {bound:g} s"
            raise PolicyUnavailable(f"the policy server sent no reply within {bound:g} s; the connection is "
                                    "dropped (a late reply would be read as the next one)")
        except (OSError, websockets.exceptions.ConnectionClosed) as exc:
            self.close()
            raise self._failed(f"lost the policy server at {self.settings.uri}: {_describe(exc)}")
        round_trip_ms = (time.perf_counter() - started) * 1000.0
        if isinstance(reply, str):  # openpi's error path: the traceback as text, then the server closes
            self.close()
            signature = traceback_signature(reply)
            self.server_errors += 1
            self.consecutive_errors += 1
            self.last_server_error = signature
            self._back_off(f"the policy server failed: {signature}")  # kept across reconnects
            self.error_backoff = True
            raise PolicyServerError(f"the policy server failed: {signature}; next attempt in "
                                    f"{self.backoff_s:.1f} s", signature)
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
        # A reply with a result: the server works, so the back-off and the error run start over.
        self._backoff_s = self.settings.backoff_initial_s
        self.consecutive_errors = 0
        self.error_backoff = False
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

    def infer(self, bundle: ObservationBundle, instruction: str, noise_seed: int,
              timeout_s: float | None = None) -> RawChunk:
        request = self.encoder.openpi_request(bundle, instruction)
        started = time.perf_counter()
        reply = self.client.infer(request, timeout_s)
        key = self.config.action.key
        actions = reply.data.get(key)
        if not isinstance(actions, np.ndarray):
            found = ", ".join(sorted(map(str, reply.data))) or "none"
            raise PolicyServerError(f"the policy server's reply has no {key!r} array (keys: {found})")
        return RawChunk(actions=actions, latency_s=time.perf_counter() - started, server_timing=reply.server_timing)

    def give_up_reason(self) -> str | None:
        """Why the episode must end (the server failed too often in a row), or None."""
        return self.client.give_up_reason()

    def close(self) -> None:
        self.client.close()
