"""The policies, verifiers and planners sim-eval can put in the loop, by name.

Policies are the configs under ``policies/`` (or a path to one), built by
:mod:`ladder_ros.policies.factory`: the scripted expert (a simulator instrument that reads
privileged state), a local transformers model or an openpi server; a rotation convention chosen by
the user replaces the one a config declares. The only verifier offered here is the oracle, which
counts from simulator state through the real verifier component (deployed prompt assembly, reply
parsing, count rule) — so results carry the label "oracle", never "VLM". Plans come from the
task's reference subgoals or from a VLM planner (``gemini``, ``local`` or ``replay`` backend; the
oracle cannot plan), and every result says which.
"""

from __future__ import annotations

import math

from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import TaskSuite
from ladder_ros.core.verification import CountVerifier
from ladder_ros.policies.factory import (
    NOISE_DEFAULT,
    check_policy,
    make_policy,
    policy_action_convention,
    policy_names,
    provider_for,
)
from ladder_ros.sim.registry import check_action_kind

POLICIES = tuple(policy_names())
VERIFIERS = ("oracle",)
PLANNERS = ("gemini", "local", "replay")
_LABELS = {"oracle": "oracle verifier (simulator state, not a VLM)"}
# The <robot> of the planning prompt (Appendix C), per embodiment preset.
ROBOT_NAMES = {"widowx": "WidowX 250 robot arm", "widowx_robotarena": "WidowX 250 robot arm",
               "franka": "Franka Panda robot arm"}
# The scripted expert that drives each embodiment's tabletop stand-in (policies/*.yaml), the default policy.
SCRIPTED_EXPERTS = {"franka": "scripted_expert_franka"}
__all__ = ["NOISE_DEFAULT", "PLANNERS", "POLICIES", "VERIFIERS", "check_policy", "check_policy_for_suite",
           "default_policy", "make_planner", "make_policy", "make_verifier", "planner_label", "planner_settings",
           "policy_action_convention", "verifier_label"]


def default_policy(suite: TaskSuite) -> str:
    """The scripted expert of the suite's embodiment: ``scripted_expert`` (WidowX, 5 Hz) or
    ``scripted_expert_franka`` (Franka Hand, 15 Hz)."""
    return SCRIPTED_EXPERTS.get(suite.embodiment, "scripted_expert")


def check_policy_for_suite(name: str, suite: TaskSuite, simulator: str, rotation_convention: str | None = None) -> None:
    """Refuse, naming both, a policy that runs at another rate than the suite's preset, or whose actions
    the simulator cannot take (a joint-position policy on the tabletop)."""
    config = provider_for(name, NOISE_DEFAULT, rotation_convention).config
    preset = get_preset(suite.embodiment)
    if not math.isclose(config.control_rate_hz, preset.control_rate_hz):
        raise ConfigError(f"policy {config.name} runs at {config.control_rate_hz:g} Hz ({config.embodiment}), but "
                          f"suite {suite.name} is a {suite.embodiment} suite at {preset.control_rate_hz:g} Hz (paper "
                          f"Appendix A); its scripted expert is {default_policy(suite)}", source=suite.source)
    check_action_kind(simulator, suite, config.action.kind, config.name)


def make_verifier(name: str) -> CountVerifier:
    if name not in VERIFIERS:
        raise unknown_name("verifier", name, list(VERIFIERS))
    from ladder_ros.vlm.config import VLMConfig
    from ladder_ros.vlm.factory import make_verifier as make_vlm_verifier

    return make_vlm_verifier(VLMConfig(backend="oracle"))


def verifier_label(name: str) -> str:
    return _LABELS.get(name, name)


def planner_settings(backend: str, model: str | None = None, replay_path: str | None = None) -> dict:
    """The planner's configuration as results record it; checked, naming a bad value."""
    if backend not in PLANNERS:
        raise ConfigError(f"unknown planner backend {backend!r}; valid: {', '.join(PLANNERS)} "
                          "(the oracle counts only and cannot plan)")
    from ladder_ros.vlm.config import VLMConfig

    config = VLMConfig(backend=backend, model=model or None, replay_path=replay_path or None)
    return {"backend": backend, "model": config.model_name, "replay_path": config.replay_path}


def make_planner(settings: dict, preset: str):
    """A VLM planner (``ladder_ros.vlm.components.Planner``) from :func:`planner_settings`."""
    from ladder_ros.vlm.config import VLMConfig
    from ladder_ros.vlm.factory import make_planner as make_vlm_planner

    model = settings["model"] if settings["backend"] != "replay" else None
    config = VLMConfig(backend=settings["backend"], model=model, replay_path=settings["replay_path"],
                       robot=ROBOT_NAMES.get(preset, "robot arm"))
    return make_vlm_planner(config)


def planner_label(plan_source: str, settings: dict | None) -> str:
    """How results name where plans came from."""
    if plan_source != "planner" or not settings:
        return "reference plans (the task's ground-truth subgoals)"
    return f"VLM planner ({settings['backend']}, {settings['model'] or 'default model'}) from the first frame"
