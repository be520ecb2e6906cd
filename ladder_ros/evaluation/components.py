"""The policies and verifiers sim-eval can put in the loop, by name.

Only simulator instruments are offered here: the scripted expert reads privileged state, and the
oracle verifier counts from simulator state through the real verifier component (deployed prompt
assembly, reply parsing, count rule) — so results carry the label "oracle", never "VLM".
"""

from __future__ import annotations

from ladder_ros.core.errors import unknown_name
from ladder_ros.core.task import Task
from ladder_ros.core.verification import CountVerifier
from ladder_ros.policies.base import LowLevelPolicy

POLICIES = ("scripted_expert",)
VERIFIERS = ("oracle",)
NOISE_DEFAULT = "bridge_like"
_LABELS = {"oracle": "oracle verifier (simulator state, not a VLM)"}


def make_policy(name: str, task: Task, seed: int, noise: str) -> LowLevelPolicy:
    if name not in POLICIES:
        raise unknown_name("policy", name, list(POLICIES))
    from ladder_ros.policies.scripted_expert import ScriptedExpert, expert_noise

    return ScriptedExpert(task, seed, expert_noise(noise))


def check_policy(name: str, noise: str) -> None:
    """Fail early, naming the value, when a policy or its noise model does not exist."""
    if name not in POLICIES:
        raise unknown_name("policy", name, list(POLICIES))
    from ladder_ros.policies.scripted_expert import expert_noise

    expert_noise(noise)


def make_verifier(name: str) -> CountVerifier:
    if name not in VERIFIERS:
        raise unknown_name("verifier", name, list(VERIFIERS))
    from ladder_ros.vlm.config import VLMConfig
    from ladder_ros.vlm.factory import make_verifier as make_vlm_verifier

    return make_vlm_verifier(VLMConfig(backend="oracle"))


def verifier_label(name: str) -> str:
    return _LABELS.get(name, name)
