"""The interface of a low-level policy: observation and instruction in, one 7-D action out.

Everything the reference loop and the graph read of a policy is declared here, each optional member with the
answer a policy that says nothing gets, so a caller asks plainly and a policy states only where it differs.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ladder_ros.core.action_conventions import CANONICAL, ActionConvention
from ladder_ros.core.observation import Observation


@runtime_checkable
class LowLevelPolicy(Protocol):
    """Maps the current observation and a language instruction to the next action.

    ``reset`` is called at the start of an episode and whenever the instruction changes, so a
    chunking policy drops the rest of a chunk that was planned for the previous instruction.
    A policy that derives from this class inherits the defaults of the optional members below.
    """

    name: str

    #: The convention the numbers :meth:`act` returns are in; the loop converts them to the action contract
    #: (:func:`~ladder_ros.core.action_conventions.canonical_action`). Default: already the contract.
    action_convention: ActionConvention | None = CANONICAL

    def reset(self, instruction: str) -> None:
        ...

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        ...

    @property
    def declared_convention(self) -> ActionConvention | None:
        """The convention the model behind the policy acts in, when :meth:`act` already converts it to the
        contract (a chunked policy's processor does): what an episode's record names. None (the default):
        the record names :attr:`action_convention`."""
        return None

    def policy_report(self) -> dict:
        """This episode's report of the policy (held steps, refused chunks, latency), for the episode's
        record; empty (the default) for a policy that keeps none."""
        return {}
