"""Typed, validated configuration of the VLM components, as the verifier node and the CLI build it.

Every field is checked on construction and a bad value fails with its name. Nested sections
(``gemini``, ``local``) may also be given as dotted keys (``gemini.timeout_s``), which is how ROS
parameters arrive; empty strings stand for "unset" in optional text fields, since ROS parameters
have no null.

What is not here on purpose: the prompts (deployed text, not configurable) and the temperature
(0, Appendix B: the proprioceptive verifier and PSP-Agent decode at temperature 0.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from ladder_ros.core.errors import ConfigError, unknown_name

BACKENDS = ("gemini", "local", "oracle", "replay")
THINKING_LEVELS = ("minimal", "low", "medium", "high")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
REPLAY_MATCHES = ("fingerprint", "sequence")

DEFAULT_GEMINI_MODEL = "gemini-3.7-flash"  # the paper's visual verifier and planner (Appendix B, "VLM settings")
VERIFY_MAX_OUTPUT_TOKENS = 2048  # "capped at 2048 tokens for verification" (Appendix B)
PLAN_MAX_OUTPUT_TOKENS = 8192  # card: "Decomposition uses 8192 by default" (hidden thinking counts against it)
NEXT_SUBTASK_MAX_OUTPUT_TOKENS = 2048  # project choice: a per-frame judgement like verification
# Project choice: the longest one VLM call may take, every attempt and back-off included. On the robot
# the orchestrator gives up on a query after verifier_abort_after_s (60 s by default), which must exceed
# the verifier's observation_wait_s (5 s) plus this; the graph's configuration check enforces it.
DEFAULT_CALL_DEADLINE_S = 50.0


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _positive_float(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a positive number, got {value!r}")


def _non_empty_str(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")


def _optional_str(name: str, value: Any) -> None:
    if value is not None:
        _non_empty_str(name, value)


def _one_of(name: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise unknown_name(name, str(value), list(valid))


@dataclass(frozen=True)
class GeminiSettings:
    """How the Gemini backend reaches the API.

    The key is read from the environment variable ``api_key_env`` when the client is built and is
    never stored in this object, logged or recorded. ``base_url`` points the real client elsewhere
    (the tests' local fake server, a proxy). Retries cover HTTP 408/429/5xx and transport failures
    (timeouts, refused connections), with exponential back-off and jitter. ``timeout_s`` bounds one
    attempt; the whole call, retries and back-off included, is bounded by
    ``VLMConfig.call_deadline_s``, so an attempt gets the smaller of the two.
    """

    api_key_env: str = "GEMINI_API_KEY"
    base_url: str | None = None
    timeout_s: float = 90.0  # project choice, per attempt: an 8192-token plan with thinking can take a minute
    max_attempts: int = 4  # project choice: the first try plus three retries
    initial_backoff_s: float = 1.0  # the google-genai default first delay
    max_backoff_s: float = 16.0
    thinking_budget: int | None = None  # None: the provider's default (Appendix B: "the provider's default")
    thinking_level: str | None = None
    include_thoughts: bool = False

    def __post_init__(self) -> None:
        _non_empty_str("gemini.api_key_env", self.api_key_env)
        _optional_str("gemini.base_url", self.base_url)
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"gemini.base_url must start with http:// or https://, got {self.base_url!r}")
        _positive_float("gemini.timeout_s", self.timeout_s)
        _positive_int("gemini.max_attempts", self.max_attempts)
        if isinstance(self.initial_backoff_s, bool) or not isinstance(self.initial_backoff_s, (int, float)) \
                or not math.isfinite(self.initial_backoff_s) or self.initial_backoff_s < 0:
            raise ConfigError(f"gemini.initial_backoff_s must be a non-negative number, got {self.initial_backoff_s!r}")
        _positive_float("gemini.max_backoff_s", self.max_backoff_s)
        if self.thinking_budget is not None and (
                isinstance(self.thinking_budget, bool) or not isinstance(self.thinking_budget, int)
                or self.thinking_budget < -1):
            raise ConfigError(f"gemini.thinking_budget must be an integer >= -1 (-1: dynamic) or unset, "
                              f"got {self.thinking_budget!r}")
        if self.thinking_level is not None:
            _one_of("gemini.thinking_level", self.thinking_level, THINKING_LEVELS)
        if not isinstance(self.include_thoughts, bool):
            raise ConfigError(f"gemini.include_thoughts must be true or false, got {self.include_thoughts!r}")


@dataclass(frozen=True)
class LocalSettings:
    """Where a local transformers model runs. ``auto``: the GPU when there is one, else the CPU."""

    device: str = "auto"
    dtype: str = "auto"  # auto: bfloat16 on a GPU, float32 on the CPU

    def __post_init__(self) -> None:
        _one_of("local.device", self.device, DEVICES)
        _one_of("local.dtype", self.dtype, DTYPES)


@dataclass(frozen=True)
class VLMConfig:
    """The VLM components' configuration.

    ``backend``: ``gemini``, ``local`` (a transformers model at the local path ``model``),
    ``oracle`` (simulator state; answers count queries only) or ``replay`` (recorded replies from
    ``replay_path``). ``model``: the Gemini model id (default: the paper's) or the local model path.
    ``call_deadline_s``: the longest one call may take, all attempts and back-off included (Gemini),
    or the generation time (local models, ``max_time``); a call that reaches it is a failed call.
    ``robot`` fills ``<robot>`` in the planning and next-subtask prompts (e.g. "WidowX 250 robot
    arm"). ``record_path``: append every prompt fingerprint and reply to this JSONL file, which a
    ``replay`` backend reads back. ``prices_path``: a price table replacing the packaged one.
    """

    backend: str = "gemini"
    model: str | None = None
    robot: str = "robot arm"
    max_output_tokens_verify: int = VERIFY_MAX_OUTPUT_TOKENS
    max_output_tokens_plan: int = PLAN_MAX_OUTPUT_TOKENS
    max_output_tokens_next_subtask: int = NEXT_SUBTASK_MAX_OUTPUT_TOKENS
    call_deadline_s: float = DEFAULT_CALL_DEADLINE_S
    gemini: GeminiSettings = field(default_factory=GeminiSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    replay_path: str | None = None
    replay_match: str = "fingerprint"
    record_path: str | None = None
    prices_path: str | None = None

    def __post_init__(self) -> None:
        _one_of("backend", self.backend, BACKENDS)
        _optional_str("model", self.model)
        if self.backend == "local" and self.model is None:
            raise ConfigError("backend 'local' needs model: the path of a local transformers model")
        _non_empty_str("robot", self.robot)
        _positive_int("max_output_tokens_verify", self.max_output_tokens_verify)
        _positive_int("max_output_tokens_plan", self.max_output_tokens_plan)
        _positive_int("max_output_tokens_next_subtask", self.max_output_tokens_next_subtask)
        _positive_float("call_deadline_s", self.call_deadline_s)
        if not isinstance(self.gemini, GeminiSettings):
            raise ConfigError(f"gemini must be GeminiSettings, got {type(self.gemini).__name__}")
        if not isinstance(self.local, LocalSettings):
            raise ConfigError(f"local must be LocalSettings, got {type(self.local).__name__}")
        _optional_str("replay_path", self.replay_path)
        if self.backend == "replay" and self.replay_path is None:
            raise ConfigError("backend 'replay' needs replay_path: a JSONL file of recorded replies")
        _one_of("replay_match", self.replay_match, REPLAY_MATCHES)
        _optional_str("record_path", self.record_path)
        _optional_str("prices_path", self.prices_path)

    @property
    def model_name(self) -> str:
        """The model this configuration talks to, with the backend's default filled in."""
        if self.model is not None:
            return self.model
        return {"gemini": DEFAULT_GEMINI_MODEL, "oracle": "oracle", "replay": "replay"}.get(self.backend, "")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "VLMConfig":
        """Build from a dict (YAML, ROS parameters); unknown keys are an error that lists the valid ones."""
        flat: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {"gemini": {}, "local": {}}
        for key, value in data.items():
            section, _, name = str(key).partition(".")
            if section in nested and name:
                nested[section][name] = value
            elif section in nested and isinstance(value, Mapping):
                nested[section].update(value)
            else:
                flat[str(key)] = value
        _check_keys("", flat, cls, skip=("gemini", "local"))
        _check_keys("gemini.", nested["gemini"], GeminiSettings)
        _check_keys("local.", nested["local"], LocalSettings)
        flat = {k: (None if v == "" and _is_optional(cls, k) else v) for k, v in flat.items()}
        gemini = {k: (None if v == "" and _is_optional(GeminiSettings, k) else v) for k, v in nested["gemini"].items()}
        return cls(gemini=GeminiSettings(**gemini), local=LocalSettings(**nested["local"]), **flat)

    def with_overrides(self, **changes: Any) -> "VLMConfig":
        return replace(self, **changes)


def _is_optional(cls: type, name: str) -> bool:
    for f in fields(cls):
        if f.name == name:
            return "None" in str(f.type)
    return False


def _check_keys(prefix: str, given: Mapping[str, Any], cls: type, skip: tuple[str, ...] = ()) -> None:
    valid = [f.name for f in fields(cls) if f.name not in skip]
    for key in given:
        if key not in valid:
            raise unknown_name("VLM config key", prefix + key, [prefix + v for v in valid])
