"""A scripted VLM backend: answers each request with text chosen by a test's function.

It implements the backend interface for real (usage, latency, model name) so components,
accounting and the benchmark runner are exercised exactly as with a remote model.
"""

from __future__ import annotations

from typing import Callable

from ladder_ros.vlm.backends.base import Attempt, GenerationRequest, Reply, TokenUsage


class ScriptedBackend:
    name = "scripted"
    reads_pixels = True

    def __init__(self, respond: Callable[[GenerationRequest], str | None], model: str = "gemini-2.5-flash",
                 input_tokens: int = 100, output_tokens: int = 10):
        self.respond = respond
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Reply:
        self.requests.append(request)
        text = self.respond(request)
        error = None if text is not None else "scripted failure"
        return Reply(text=text, backend=self.name, model=self.model, latency_ms=1.0,
                     usage=TokenUsage(self.input_tokens, self.output_tokens, 0), error=error,
                     finish_reason="STOP", attempts=(Attempt(1.0, 200, None),))

    def close(self) -> None:
        pass
