"""Recorded replies: a recorder that wraps any backend, and a backend that plays a recording back.

A recording is a JSONL file: a header line naming the format and its version, then one line per
call with the prompt's fingerprint, its purpose and the full reply. Playback finds a reply by the
prompt's fingerprint (the same prompt gets its recorded replies in recorded order) or, with
``match="sequence"``, simply in order. A prompt with no recorded reply left gets a reply with
``error`` set (which counts as "not complete"), never an invented answer.

The played-back reply keeps the recorded model and token usage, so the accounting of a replayed
run equals the original's; its latency is the playback's own.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from pathlib import Path

from ladder_ros.core.errors import ConfigError
from ladder_ros.vlm.backends.base import Attempt, FailureKind, GenerationRequest, Reply, VLMBackend

FORMAT = "ladder_ros.vlm.recording"
VERSION = 1


class RecordingBackend:
    """Wraps a backend and appends every call to a recording (behaviour added by wrapping)."""

    def __init__(self, inner: VLMBackend, path: str | Path):
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.reads_pixels = inner.reads_pixels
        self.path = Path(path)
        self._lock = threading.Lock()
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"format": FORMAT, "version": VERSION}) + "\n", encoding="utf-8")
        else:
            _read_header(self.path)

    def generate(self, request: GenerationRequest) -> Reply:
        reply = self.inner.generate(request)
        line = json.dumps({"fingerprint": request.fingerprint(), "purpose": request.purpose.value,
                           "reply": reply.to_dict()})
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
        return reply

    def close(self) -> None:
        self.inner.close()


def _read_header(path: Path) -> None:
    with path.open(encoding="utf-8") as handle:
        first = handle.readline()
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        raise ConfigError("the first line is not a recording header", source=str(path)) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ConfigError(f"not a {FORMAT} file", source=str(path))
    if header.get("version") != VERSION:
        raise ConfigError(f"unsupported recording version {header.get('version')!r}; this build reads {VERSION}",
                          source=str(path))


class ReplayBackend:
    """Plays recorded replies back; see the module docstring."""

    name = "replay"
    reads_pixels = True

    def __init__(self, path: str | Path, match: str = "fingerprint"):
        if match not in ("fingerprint", "sequence"):
            raise ConfigError(f"replay match must be 'fingerprint' or 'sequence', got {match!r}")
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError("no such recording", source=str(path))
        _read_header(self.path)
        self.match = match
        self._by_fingerprint: dict[str, deque] = defaultdict(deque)
        self._in_order: deque = deque()
        models = []
        with self.path.open(encoding="utf-8") as handle:
            next(handle)
            for number, line in enumerate(handle, start=2):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    item = (entry["purpose"], Reply.from_dict(entry["reply"]))
                    fingerprint = str(entry["fingerprint"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise ConfigError(f"malformed recording line: {exc!r}", source=str(path),
                                      key=f"line {number}") from None
                self._by_fingerprint[fingerprint].append(item)
                self._in_order.append(item)
                models.append(item[1].model)
        self.model = models[0] if models and len(set(models)) == 1 else "replay"
        self._lock = threading.Lock()

    def generate(self, request: GenerationRequest) -> Reply:
        started = time.monotonic()
        with self._lock:
            # Each mode consumes its own queue; the two are never mixed in one backend.
            queue = self._by_fingerprint.get(request.fingerprint()) if self.match == "fingerprint" else self._in_order
            item = queue.popleft() if queue else None
        latency_ms = (time.monotonic() - started) * 1000
        if item is None:
            error = ("no recorded reply for this prompt" if self.match == "fingerprint"
                     else "the recording has no replies left")
            return Reply(text=None, backend=self.name, model=self.model, latency_ms=latency_ms, error=error,
                         error_kind=FailureKind.BACKEND, attempts=(Attempt(latency_ms, None, error),))
        purpose, recorded = item
        if purpose != request.purpose.value:
            error = f"the next recorded reply is for {purpose!r}, not {request.purpose.value!r}"
            return Reply(text=None, backend=self.name, model=recorded.model, latency_ms=latency_ms, error=error,
                         error_kind=FailureKind.BACKEND, attempts=(Attempt(latency_ms, None, error),))
        # The recorded finish reason travels with the text: a cut or blocked reply replays as one.
        return Reply(text=recorded.text, backend=self.name, model=recorded.model, latency_ms=latency_ms,
                     usage=recorded.usage, thoughts=recorded.thoughts, finish_reason=recorded.finish_reason,
                     error=recorded.error, error_kind=recorded.error_kind, attempts=recorded.attempts)

    def close(self) -> None:
        pass
