"""The policies, verifiers and planners sim-eval can put in the loop, by name.

Only simulator instruments are offered as policies and verifiers: the scripted expert reads
privileged state, and the oracle verifier counts from simulator state through the real verifier
component (deployed prompt assembly, reply parsing, count rule) — so results carry the label
"oracle", never "VLM". Plans come from the task's reference subgoals or from a VLM planner
(``gemini``, ``local`` or ``replay`` backend; the oracle cannot plan), and every result says which.
"""

from __future__ import annotations

from dataclasses import replace

from ladder_ros.core.action_conventions import CANONICAL, ActionConvention, RotationConvention
from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.task import Task
from ladder_ros.core.verification import CountVerifier
from ladder_ros.policies.base import LowLevelPolicy

POLICIES = ("scripted_expert",)
VERIFIERS = ("oracle",)
PLANNERS = ("gemini", "local", "replay")
NOISE_DEFAULT = "bridge_like"
_LABELS = {"oracle": "oracle verifier (simulator state, not a VLM)"}
# The <robot> of the planning prompt (Appendix C), per embodiment preset.
ROBOT_NAMES = {"widowx": "WidowX 250 robot arm", "widowx_robotarena": "WidowX 250 robot arm",
               "franka": "Franka Panda robot arm"}


def rotation_override(name: str | None) -> RotationConvention | None:
    """A rotation convention chosen by the user (CLI, ROS parameter); None or "": the policy's own."""
    return RotationConvention.parse(name) if name else None


def policy_action_convention(name: str, rotation_convention: str | None = None) -> ActionConvention:
    """The convention policy ``name`` acts in: its own, with the rotation replaced when one is chosen."""
    if name not in POLICIES:
        raise unknown_name("policy", name, list(POLICIES))
    own = CANONICAL  # the scripted expert plans in the action contract itself
    rotation = rotation_override(rotation_convention)
    return own if rotation is None else replace(own, rotation=rotation)


def make_policy(name: str, task: Task, seed: int, noise: str, rotation_convention: str | None = None) -> LowLevelPolicy:
    """The policy ``name``; ``rotation_convention`` replaces the rotation convention it declares."""
    convention = policy_action_convention(name, rotation_convention)
    from ladder_ros.policies.scripted_expert import ScriptedExpert, expert_noise

    return ScriptedExpert(task, seed, expert_noise(noise), action_convention=convention)


def check_policy(name: str, noise: str, rotation_convention: str | None = None) -> None:
    """Fail early, naming the value, when a policy, its noise model or a convention does not exist."""
    if name not in POLICIES:
        raise unknown_name("policy", name, list(POLICIES))
    from ladder_ros.policies.scripted_expert import expert_noise

    expert_noise(noise)
    rotation_override(rotation_convention)


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
