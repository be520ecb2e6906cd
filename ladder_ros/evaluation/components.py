"""The policies and verifiers sim-eval can put in the loop, by name.

Policies are the configs under ``policies/`` (or a path to one), built by
:mod:`ladder_ros.policies.factory`: the scripted expert (a simulator instrument that reads
privileged state), a local transformers model or an openpi server. The only verifier offered here
is the oracle, which counts from simulator state through the real verifier component (deployed
prompt assembly, reply parsing, count rule) — so results carry the label "oracle", never "VLM".
"""

from __future__ import annotations

from ladder_ros.core.errors import unknown_name
from ladder_ros.core.verification import CountVerifier
from ladder_ros.policies.factory import NOISE_DEFAULT, check_policy, make_policy, policy_names

POLICIES = tuple(policy_names())
VERIFIERS = ("oracle",)
_LABELS = {"oracle": "oracle verifier (simulator state, not a VLM)"}
__all__ = ["NOISE_DEFAULT", "POLICIES", "VERIFIERS", "check_policy", "make_policy", "make_verifier",
           "verifier_label"]


def make_verifier(name: str) -> CountVerifier:
    if name not in VERIFIERS:
        raise unknown_name("verifier", name, list(VERIFIERS))
    from ladder_ros.vlm.config import VLMConfig
    from ladder_ros.vlm.factory import make_verifier as make_vlm_verifier

    return make_vlm_verifier(VLMConfig(backend="oracle"))


def verifier_label(name: str) -> str:
    return _LABELS.get(name, name)
