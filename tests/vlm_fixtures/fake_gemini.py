"""A fake Gemini REST endpoint on 127.0.0.1 for driving the real ``google-genai`` client.

It answers ``POST .../models/<model>:generateContent`` from a script of steps, one per request
(or, with ``responder``, from a function of the request body), and records every request (path,
headers, JSON body). Bounded: it binds 127.0.0.1 on an ephemeral port, serves at most
``max_requests``, a hang or a drip lasts at most ``MAX_HANG_S``, and it shuts itself down after
``lifetime_s`` even if a test forgets to stop it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

MAX_HANG_S = 5.0


@dataclass(frozen=True)
class Respond:
    """Answer with ``status`` and ``body`` (a dict sent as JSON, or raw bytes)."""

    status: int
    body: Any


@dataclass(frozen=True)
class Hang:
    """Read the request, then say nothing for ``seconds`` and close the connection."""

    seconds: float


@dataclass(frozen=True)
class Drip:
    """Send a 200 header, then one byte of body every ``interval_s`` for ``seconds``, then close.

    Each byte arrives before a read timeout of more than ``interval_s`` fires, so only a deadline
    over the whole call ends such a request.
    """

    interval_s: float
    seconds: float


@dataclass
class RecordedRequest:
    path: str
    headers: dict
    body: Any


def use_local_endpoint(monkeypatch: Any, key_env: str, key: str) -> None:
    """Set the test key and make sure no proxy sits between the client and 127.0.0.1."""
    monkeypatch.setenv(key_env, key)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def text_reply(text: str | None, *, prompt_tokens: int | None = 1200, output_tokens: int | None = 40,
               thinking_tokens: int | None = None, thought: str | None = None,
               finish_reason: str | None = "STOP") -> Respond:
    """A 200 generateContent response carrying ``text`` (and an optional thought part).

    ``None`` leaves a field out, as the API does: no text part, no finish reason, a usage count missing.
    """
    parts = []
    if thought is not None:
        parts.append({"text": thought, "thought": True})
    if text is not None:
        parts.append({"text": text})
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
             "thoughtsTokenCount": thinking_tokens}
    usage = {k: v for k, v in usage.items() if v is not None}
    usage["totalTokenCount"] = sum(usage.values())
    candidate: dict = {"content": {"role": "model", "parts": parts}}
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    return Respond(200, {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "fake"})


def blocked_reply(reason: str = "SAFETY", prompt_tokens: int = 1200, with_text: str | None = None) -> Respond:
    """A blocked prompt (``promptFeedback.blockReason``); ``with_text`` adds a candidate anyway."""
    body: dict = {"promptFeedback": {"blockReason": reason},
                  "usageMetadata": {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}}
    if with_text is not None:
        body["candidates"] = [{"content": {"role": "model", "parts": [{"text": with_text}]}, "finishReason": "STOP"}]
    return Respond(200, body)


def error_reply(status: int, message: str) -> Respond:
    names = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 400: "INVALID_ARGUMENT",
             401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}
    return Respond(status, {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}})


@dataclass
class FakeGeminiServer:
    script: list
    lifetime_s: float = 30.0
    max_requests: int = 50
    requests: list = field(default_factory=list)
    responder: Callable[[Any], Any] | None = None  # body -> step, for every request (the script is then unused)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._steps = list(self.script)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    if len(server.requests) >= server.max_requests:
                        step = Respond(503, {"error": {"code": 503, "message": "request limit", "status": "X"}})
                    else:
                        server.requests.append(RecordedRequest(self.path, dict(self.headers), body))
                        if server.responder is not None:
                            step = None
                        else:
                            step = server._steps.pop(0) if server._steps else Respond(
                                500, {"error": {"code": 500, "message": "script exhausted", "status": "INTERNAL"}})
                if step is None:
                    step = server.responder(body)
                if isinstance(step, Hang):
                    time.sleep(min(step.seconds, MAX_HANG_S))
                    self.close_connection = True
                    return
                if isinstance(step, Drip):
                    self._drip(step)
                    return
                data = step.body if isinstance(step.body, bytes) else json.dumps(step.body).encode()
                self.send_response(step.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _drip(self, step: Drip) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                ends = time.monotonic() + min(step.seconds, MAX_HANG_S)
                try:
                    while time.monotonic() < ends:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(step.interval_s)
                except OSError:  # the client gave up
                    pass
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._stopped = False

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeGeminiServer":
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "FakeGeminiServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
