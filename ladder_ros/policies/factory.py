"""Policies by name: a config under ``policies/`` (or a path) and what it takes to run it.

``policy: bridge_pi0_server`` in a params file, ``--policy local_pi0`` on the command line and
``--policy path/to/mine.yaml`` all resolve here. A :class:`PolicyProvider` holds one config and
builds its source once (a model is loaded and warmed up once per process, a server connected once),
then hands out each episode's policy. The reference loop, ``sim-eval``, ``parity`` and the policy
node all build policies through it, so a learned model runs the same code everywhere.

A policy runs under a name: ``NAME=CONFIG`` (``ckpt_b=policies/ckpt_b.yaml``, :func:`parse_policy_entry`)
names it, a bare config runs under the config's own name. Records and reports carry that name beside the
config's digest (:meth:`~ladder_ros.policies.config.PolicyConfig.digest`), so one lab's "A" and "B" of one
graph and the same checkpoints in ``sim-eval`` are told apart and pooled alike.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ladder_ros.core.action_conventions import ActionConvention, RotationConvention
from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.instrument_registry import load_instrument
from ladder_ros.core.presets import get_preset
from ladder_ros.core.task import Task
from ladder_ros.paths import share_path
from ladder_ros.policies.audit import guard_statistics
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.policies.chunked import ChunkedPolicy, ChunkSource, PerStepSource
from ladder_ros.policies.config import (
    EE_DELTA,
    OPENPI,
    SCRIPTED_EXPERT,
    TRANSFORMERS,
    ActionAxis,
    ActionSpec,
    PolicyConfig,
    load_policy_config,
)

LOG = logging.getLogger(__name__)

NOISE_DEFAULT = "bridge_like"
PER_STEP = "per_step"  # a per-step policy object given in code (tests, integrations); not a YAML backend
# A policy's name (in records, commands and NAME=CONFIG entries): letters, digits, '_', '.', '-', from a letter or
# a digit, at most 64 characters.
POLICY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def policy_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a policy, or None when it can."""
    if not POLICY_NAME.fullmatch(name):
        return f"policy name {name!r} must be 1-64 characters of [A-Za-z0-9_.-] starting with a letter or a digit"
    return None


def parse_policy_entry(text: str) -> tuple[str | None, str]:
    """``NAME=CONFIG`` as (name, config name or path); a bare config as (None, config): it runs under its own
    name. A path whose folders hold a '=' is a path, not an entry."""
    text = str(text).strip()
    name, sep, config = text.partition("=")
    if not sep or "/" in name:
        return None, text
    problem = policy_name_problem(name.strip())
    if problem:
        raise ConfigError(f"policy entry {text!r}: {problem}")
    if not config.strip():
        raise ConfigError(f"policy entry {text!r} names no config: NAME=CONFIG, CONFIG a name under policies/ "
                          "or a path")
    return name.strip(), config.strip()


def policy_names() -> list[str]:
    """The configs shipped in ``policies/``, by name."""
    try:
        folder = share_path("policies")
    except ConfigError:
        return []
    return sorted(p.stem for p in folder.glob("*.yaml"))


def policy_config_path(name_or_path: str) -> Path:
    """A policy config by name (``policies/<name>.yaml``) or by path; unknown names list the valid ones."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        if not path.is_file():
            raise ConfigError("policy config not found", source=text)
        return path
    names = policy_names()
    if text not in names:
        raise unknown_name("policy", text, names or ["(no configs found)"])
    return share_path("policies", f"{text}.yaml")


def load_policy(name_or_path: str) -> PolicyConfig:
    """The config of a name under ``policies/``, a path, or a ``NAME=CONFIG`` entry."""
    return load_policy_config(policy_config_path(parse_policy_entry(name_or_path)[1]))


def with_rotation(config: PolicyConfig, rotation_convention: str | None) -> PolicyConfig:
    """``config`` with its rotation convention replaced by the user's choice (None or "": its own)."""
    if not rotation_convention:
        return config
    rotation = RotationConvention.parse(rotation_convention)
    if config.action.kind != EE_DELTA:
        raise ConfigError(f"policy {config.name} acts in joint positions: a rotation convention does not apply",
                          source=config.source, key="action.rotation")
    return replace(config, action=replace(config.action, rotation=rotation.value))


def action_convention(config: PolicyConfig) -> ActionConvention | None:
    """The convention an end-effector delta policy acts in (None for joint-position policies)."""
    if config.action.kind != EE_DELTA:
        return None
    return ActionConvention.parse(config.action.rotation, config.action.gripper)


def per_step_config(name: str, embodiment: str) -> PolicyConfig:
    """The config of a per-step policy that already speaks the graph's action contract (chunks of one)."""
    axes = tuple(ActionAxis(n, u, -1e9, 1e9) for n, u in (
        ("ee_dx", "m"), ("ee_dy", "m"), ("ee_dz", "m"), ("ee_droll", "rad"), ("ee_dpitch", "rad"),
        ("ee_dyaw", "rad"), ("gripper", "+1 open, -1 closed")))
    return PolicyConfig(name=name, source=f"<{name}>", backend=PER_STEP, embodiment=embodiment,
                        control_rate_hz=get_preset(embodiment).control_rate_hz, chunk_length=1, execute_steps=1,
                        action=ActionSpec(key="actions", kind=EE_DELTA, axes=axes, rotation="euler_xyz",
                                          gripper="signed"))


class PolicyProvider:
    """One policy config with its (lazily built, then kept) chunk source, run under ``name`` (None: the
    config's own name)."""

    def __init__(self, config: PolicyConfig, *, noise: str = NOISE_DEFAULT,
                 source: ChunkSource | None = None,
                 per_step: Callable[[Task, int], LowLevelPolicy] | None = None, name: str | None = None):
        self.config = config
        self.name = name or config.name
        self.noise = noise
        self._source = source
        self._per_step = per_step
        if config.backend == SCRIPTED_EXPERT:
            load_instrument("expert_noise")(noise)  # an unknown noise preset fails here, naming it

    @classmethod
    def load(cls, name_or_path: str, noise: str = NOISE_DEFAULT,
             rotation_convention: str | None = None, name: str | None = None) -> "PolicyProvider":
        """The provider of a config (or a ``NAME=CONFIG`` entry); ``rotation_convention`` (None or "": the
        config's) replaces its rotation; ``name`` (None: the entry's, else the config's own) is the name it
        runs under."""
        entry_name, config = parse_policy_entry(name_or_path)
        return cls(with_rotation(load_policy(config), rotation_convention), noise=noise, name=name or entry_name)

    @classmethod
    def from_factory(cls, factory: Callable[[Task, int], LowLevelPolicy], embodiment: str,
                     name: str = "per_step_policy", rotation_convention: str | None = None) -> "PolicyProvider":
        """A provider around a per-step policy factory (tests): chunks of one, in the graph's contract
        unless a rotation convention is named."""
        return cls(with_rotation(per_step_config(name, embodiment), rotation_convention), per_step=factory)

    @property
    def config_hash(self) -> str:
        """The config's digest: what records and reports carry as the policy's identity."""
        return self.config.digest()

    @property
    def reads_privileged(self) -> bool:
        """The scripted expert reads the simulator's privileged state (simulation only)."""
        return self.config.backend == SCRIPTED_EXPERT

    @property
    def per_episode(self) -> bool:
        """Whether each episode builds its own policy object (the scripted expert, a factory) rather than
        sharing the loaded source."""
        return self.config.backend in (SCRIPTED_EXPERT, PER_STEP)

    @property
    def built_source(self) -> ChunkSource | None:
        """The shared source if it has been built (None before, and for per-episode policies)."""
        return self._source

    def source(self) -> ChunkSource:
        """The learned source, built on first use (a model loads and warms up; a server connects lazily)."""
        if self._source is None:
            if self.config.backend == OPENPI:
                from ladder_ros.policies.openpi_remote import OpenPISource

                self._source = OpenPISource(self.config)
            elif self.config.backend == TRANSFORMERS:
                from ladder_ros.policies.local_model import TransformersSource

                self._source = TransformersSource(self.config)
            else:
                raise ConfigError(f"policy {self.config.name} ({self.config.backend}) has no shared source; "
                                  "it builds one policy per episode", source=self.config.source)
        return self._source

    def per_step_source(self, task: Task, seed: int) -> ChunkSource:
        """A one-action-chunk source around this episode's per-step policy (scripted expert, factory)."""
        if self._per_step is not None:
            return PerStepSource(self._per_step(task, seed))
        expert, expert_noise = load_instrument("scripted_expert"), load_instrument("expert_noise")
        # The expert acts in the config's convention, which the chunk's action processor converts back.
        return PerStepSource(expert(task, seed, expert_noise(self.noise),
                                    action_convention=action_convention(self.config),
                                    embodiment=self.config.embodiment))

    def episode_source(self, task: Task, seed: int) -> ChunkSource:
        return self.per_step_source(task, seed) if self.per_episode else self.source()

    def episode_policy(self, task: Task, seed: int, log: Callable[[str], None] | None = None) -> ChunkedPolicy:
        """This episode's synchronous policy (reference loop, lockstep graph), with the out-of-distribution
        guard on the training data's statistics when they are known."""
        source = self.episode_source(task, seed)
        return ChunkedPolicy(source, self.config, seed, log=log, statistics=guard_statistics(self.config, source),
                             name=self.name)

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None


_PROVIDERS: dict[tuple[str, float, str, str, str], PolicyProvider] = {}


def provider_for(name_or_path: str, noise: str = NOISE_DEFAULT,
                 rotation_convention: str | None = None) -> PolicyProvider:
    """The process's provider for a config or a ``NAME=CONFIG`` entry (cached: a model is loaded once per
    process); a rotation convention, when given, replaces the config's."""
    name, config = parse_policy_entry(name_or_path)
    path = policy_config_path(config).resolve()
    key = (str(path), path.stat().st_mtime, noise, rotation_convention or "", name or "")
    if key not in _PROVIDERS:
        _PROVIDERS[key] = PolicyProvider(with_rotation(load_policy_config(path), rotation_convention), noise=noise,
                                         name=name)
    return _PROVIDERS[key]


def make_policy(name: str, task: Task, seed: int, noise: str = NOISE_DEFAULT,
                rotation_convention: str | None = None) -> LowLevelPolicy:
    """The policy of one episode (the reference loop, ``sim-eval``, ``parity``)."""
    return provider_for(name, noise, rotation_convention).episode_policy(task, seed)


def check_policy(name: str, noise: str = NOISE_DEFAULT, rotation_convention: str | None = None) -> None:
    """Fail early, naming the file and field or the value, when a policy config, its noise model or a
    rotation convention is bad."""
    provider_for(name, noise, rotation_convention)


def policy_action_convention(name: str, rotation_convention: str | None = None) -> dict:
    """The convention policy ``name`` acts in, as results record it ({} for joint-position policies)."""
    convention = action_convention(provider_for(name, NOISE_DEFAULT, rotation_convention).config)
    return {} if convention is None else convention.to_dict()
