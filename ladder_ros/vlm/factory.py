"""Build backends and components from a :class:`VLMConfig`: the API the verifier node calls.

The node builds everything once with :func:`make_components`, so the planner, the verifier and the
next-subtask component share one backend (one Gemini client, one loaded local model) and one
ledger. Heavy imports (google-genai, transformers, torch) happen only for the backend chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder_ros.vlm.accounting import PriceTable, UsageLedger
from ladder_ros.vlm.backends.base import VLMBackend
from ladder_ros.vlm.components import NextSubtask, Planner, Verifier
from ladder_ros.vlm.config import VLMConfig


def make_backend(config: VLMConfig) -> VLMBackend:
    """The configured backend, wrapped in a recorder when ``record_path`` is set."""
    backend: VLMBackend
    if config.backend == "gemini":
        from ladder_ros.vlm.backends.gemini import GeminiBackend

        backend = GeminiBackend(config.model_name, config.gemini, call_deadline_s=config.call_deadline_s)
    elif config.backend == "local":
        from ladder_ros.vlm.backends.local_transformers import LocalTransformersBackend

        backend = LocalTransformersBackend(config.model_name, config.local,
                                           call_deadline_s=config.call_deadline_s)
    elif config.backend == "oracle":
        from ladder_ros.vlm.backends.oracle import OracleBackend

        backend = OracleBackend()
    else:
        from ladder_ros.vlm.backends.replay import ReplayBackend

        backend = ReplayBackend(config.replay_path, config.replay_match)
    if config.record_path is not None:
        from ladder_ros.vlm.backends.replay import RecordingBackend

        backend = RecordingBackend(backend, config.record_path)
    return backend


def make_ledger(config: VLMConfig) -> UsageLedger:
    return UsageLedger(PriceTable.load(config.prices_path))


@dataclass
class VLMComponents:
    """Everything the verifier node (or a benchmark run) needs, sharing one backend and ledger."""

    config: VLMConfig
    backend: VLMBackend
    ledger: UsageLedger
    planner: Planner
    verifier: Verifier
    next_subtask: NextSubtask

    def close(self) -> None:
        self.backend.close()


def make_components(config: VLMConfig, backend: VLMBackend | None = None,
                    ledger: UsageLedger | None = None) -> VLMComponents:
    """Build the three components on one backend (``backend`` overrides the configured one, for tests)."""
    backend = backend if backend is not None else make_backend(config)
    ledger = ledger if ledger is not None else make_ledger(config)
    return VLMComponents(
        config=config, backend=backend, ledger=ledger,
        planner=Planner(backend, ledger, robot=config.robot, max_output_tokens=config.max_output_tokens_plan),
        verifier=Verifier(backend, ledger, max_output_tokens=config.max_output_tokens_verify),
        next_subtask=NextSubtask(backend, ledger, robot=config.robot,
                                 max_output_tokens=config.max_output_tokens_next_subtask))


def make_verifier(config: VLMConfig, ledger: UsageLedger | None = None) -> Verifier:
    """A verifier on its own backend (use :func:`make_components` to share one)."""
    return Verifier(make_backend(config), ledger if ledger is not None else make_ledger(config),
                    max_output_tokens=config.max_output_tokens_verify)


def make_planner(config: VLMConfig, ledger: UsageLedger | None = None) -> Planner:
    """A planner on its own backend (use :func:`make_components` to share one)."""
    return Planner(make_backend(config), ledger if ledger is not None else make_ledger(config),
                   robot=config.robot, max_output_tokens=config.max_output_tokens_plan)


def make_next_subtask(config: VLMConfig, ledger: UsageLedger | None = None) -> NextSubtask:
    """A next-subtask component on its own backend."""
    return NextSubtask(make_backend(config), ledger if ledger is not None else make_ledger(config),
                       robot=config.robot, max_output_tokens=config.max_output_tokens_next_subtask)
