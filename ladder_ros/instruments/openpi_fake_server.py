"""A stand-in openpi policy server on 127.0.0.1, for tests, benchmarks and dry runs without a GPU.

It speaks the protocol of openpi's ``websocket_policy_server.py`` (Physical-Intelligence/openpi
``src/openpi/serving/websocket_policy_server.py``, commit 15a9616a) with the project's own encoding
(:mod:`ladder_ros.policies.openpi_wire`): metadata first on every connection, one reply per request
with ``server_timing`` (``infer_ms``, then ``prev_total_ms``), an error as the traceback in a text
frame followed by a close with code 1011, and ``GET /healthz``. Like openpi's, it calls the policy
inside its event loop, so while it computes it answers nothing else, ``/healthz`` and new
connections included; the first request also takes ``compile_s`` (a JAX model is compiled on its
first ``infer``: openpi's ``Policy`` jits ``sample_actions`` and ``serve_policy.py`` does not warm
up). What it answers is programmable: ``respond(observation)`` returns the reply map, a string (the
error text), :data:`DISCONNECT` (close without answering), ``bytes`` (sent as they are: a message
openpi's encoding did not make), or raises, which is answered with the traceback as openpi does.
``metadata`` may likewise be ``bytes`` or a ``str`` (sent as they are) or :data:`SILENT` (none is
sent: a server that accepted the connection and then says nothing). ``latency_s`` (a number, or a
function of the request count) is each inference's time. It only ever binds the loopback interface.
"""

from __future__ import annotations

import asyncio
import http
import threading
import time
import traceback
from typing import Any, Callable

import numpy as np

from ladder_ros.policies.openpi_wire import packb, unpackb

DISCONNECT = object()
SILENT = object()
LOOPBACK = "127.0.0.1"


def zero_chunk(length: int = 5, dim: int = 7) -> Callable[[dict], dict]:
    """A responder returning an all-zero ``[length, dim]`` float32 chunk."""
    return lambda observation: {"actions": np.zeros((length, dim), dtype=np.float32)}


class FakePolicyServer:
    """A programmable openpi-protocol server in a background thread (see the module docstring)."""

    def __init__(self, respond: Callable[[dict], Any] | None = None, *,
                 latency_s: float | Callable[[int], float] = 0.0, metadata: dict | None = None, port: int = 0,
                 compile_s: float = 0.0):
        self.respond = respond or zero_chunk()
        self.latency_s = latency_s
        self.compile_s = compile_s
        self.metadata = {"fake": True} if metadata is None else metadata
        self.port = port
        self.requests = 0
        self.connections = 0
        self.errors = 0  # requests answered with an error text
        self.closed = 0  # connections that ended (closed by either side)
        self.headers: list[Any] = []  # each connection's HTTP request headers (case-insensitive lookup)
        self.request_times: list[float] = []  # time.monotonic() at each request's arrival
        self.compiled_at: float | None = None  # when the first request's compile ended
        self.observations: list[dict] = []  # the last few requests, decoded
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 10.0) -> "FakePolicyServer":
        self._thread = threading.Thread(target=self._run, name="fake-policy-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s) or self._error is not None:
            raise RuntimeError(f"the fake policy server did not start: {self._error}")
        return self

    def stop(self) -> None:
        """Close the server and every connection (idempotent)."""
        loop, server, self._loop, self._server = self._loop, self._server, None, None
        if loop is not None and server is not None and not loop.is_closed():
            loop.call_soon_threadsafe(server.close)
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    def __enter__(self) -> "FakePolicyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start(); the thread ends
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        from websockets.asyncio.server import serve

        self._loop = asyncio.get_running_loop()
        async with serve(self._handle, LOOPBACK, self.port, compression=None, max_size=None,
                         process_request=_health_check) as server:
            self._server = server
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await server.wait_closed()

    # ------------------------------------------------------------------ one connection
    async def _handle(self, websocket: Any) -> None:
        self.connections += 1
        self.headers.append(websocket.request.headers)
        try:
            await self._converse(websocket)
        finally:
            self.closed += 1

    async def _converse(self, websocket: Any) -> None:
        import websockets

        if self.metadata is not SILENT:
            metadata = self.metadata
            await websocket.send(metadata if isinstance(metadata, (bytes, str)) else packb(metadata))
        previous_total = None
        while True:
            try:
                message = await websocket.recv()
            except websockets.ConnectionClosed:
                return
            started = time.monotonic()
            self.requests += 1
            self.request_times.append(started)
            observation = unpackb(message)
            self.observations = (self.observations + [observation])[-8:]
            reply = self._infer(observation)  # blocks the event loop, as openpi's policy.infer does
            if reply is DISCONNECT:
                await websocket.close()
                return
            if isinstance(reply, bytes):
                try:
                    await websocket.send(reply)
                except websockets.ConnectionClosed:
                    return
                continue
            if isinstance(reply, str):
                self.errors += 1
                await websocket.send(reply)
                await websocket.close(code=1011, reason="Internal server error. Traceback included in previous frame.")
                return
            reply = dict(reply)
            reply["server_timing"] = {"infer_ms": (time.monotonic() - started) * 1000.0}
            if previous_total is not None:
                reply["server_timing"]["prev_total_ms"] = previous_total * 1000.0
            try:
                await websocket.send(packb(reply))
            except websockets.ConnectionClosed:
                return
            previous_total = time.monotonic() - started

    def _infer(self, observation: dict) -> Any:
        """The policy's answer, computed in the event loop's thread (nothing else is served meanwhile)."""
        if self.compiled_at is None:
            time.sleep(self.compile_s)
            self.compiled_at = time.monotonic()
        latency = self.latency_s(self.requests) if callable(self.latency_s) else self.latency_s
        if latency > 0:
            time.sleep(latency)
        try:
            return self.respond(observation)
        except Exception:  # openpi answers any exception of the policy with its traceback
            return traceback.format_exc()


def error_traceback(exception: BaseException) -> str:
    """The traceback text openpi's server would send for ``exception`` raised inside its policy."""
    try:
        raise exception
    except BaseException:
        return traceback.format_exc()


def _health_check(connection: Any, request: Any) -> Any:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None
