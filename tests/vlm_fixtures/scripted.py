"""A scripted VLM backend: answers each request with text chosen by a test's function.

It implements the backend interface for real (usage, latency, model name) so components,
accounting and the benchmark runner are exercised exactly as with a remote model.
"""

from __future__ import annotations

from typing import Callable, Union

from ladder_ros.vlm.backends.base import Attempt, FailureKind, GenerationRequest, Reply, TokenUsage

# What a test's function may answer: text (a complete reply), None (a backend failure), a
# (text, finish_reason) pair, or a whole Reply.
Scripted = Union[str, None, tuple, Reply]


class ScriptedBackend:
    name = "scripted"
    reads_pixels = True

    def __init__(self, respond: Callable[[GenerationRequest], Scripted], model: str = "gemini-2.5-flash",
                 input_tokens: int = 100, output_tokens: int = 10):
        self.respond = respond
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Reply:
        self.requests.append(request)
        answer = self.respond(request)
        if isinstance(answer, Reply):
            return answer
        text, finish_reason = answer if isinstance(answer, tuple) else (answer, "STOP")
        error = None if text is not None else "scripted failure"
        return Reply(text=text, backend=self.name, model=self.model, latency_ms=1.0,
                     usage=TokenUsage(self.input_tokens, self.output_tokens, 0), error=error,
                     error_kind=None if error is None else FailureKind.BACKEND,
                     finish_reason=finish_reason, attempts=(Attempt(1.0, 200, None),))

    def close(self) -> None:
        pass
