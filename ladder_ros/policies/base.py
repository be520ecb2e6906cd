"""The interface of a low-level policy: observation and instruction in, one 7-D action out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ladder_ros.core.observation import Observation


@runtime_checkable
class LowLevelPolicy(Protocol):
    """Maps the current observation and a language instruction to the next action.

    ``reset`` is called at the start of an episode and whenever the instruction changes, so a
    chunking policy drops the rest of a chunk that was planned for the previous instruction.
    """

    name: str

    def reset(self, instruction: str) -> None:
        ...

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        ...
