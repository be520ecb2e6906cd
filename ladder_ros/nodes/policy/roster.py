"""The policies the policy node serves, by name, and the one the current episode runs under.

A lab asks "is checkpoint B better than A?" in one graph: the node loads several policy configs (the
``policies`` parameter, ``NAME=CONFIG`` entries; empty: the ``policy`` parameter under its config's own
name), each with its own :class:`~ladder_ros.policies.factory.PolicyProvider` (its source built once) and
its own :class:`~ladder_ros.policies.warmup.WarmUp`, so each is warmed up before its first episode and a
switch costs no warm-up inside an episode. Every policy is warmed up at start (``warm_up: at_start``),
or, with ``on_first_use``, the default one at start and another when a start command first names it
(that start waits for it, ``policy_ready_wait_s`` of the orchestrator).

An episode runs under the policy its status names (``EpisodeStatus.policy``; empty: the default), chosen
at its start and kept to its end: :class:`PolicyRoster` never substitutes another, and a name it does not
serve ends the episode with the list of names. :class:`ActiveWarmUp` is the warm-up of the policy in use,
for the objects that follow one policy (the lockstep actor, the reporter, the diagnostics). No rclpy here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.presets import EmbodimentPreset
from ladder_ros.core.task import Task
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.policies.config import PolicyConfig, with_execution
from ladder_ros.policies.factory import PolicyProvider, parse_policy_entry
from ladder_ros.policies.status import PolicyEntry
from ladder_ros.policies.warmup import WarmUp

AT_START, ON_FIRST_USE = "at_start", "on_first_use"  # the warm_up parameter
WAITS_FOR_A_START = "not warmed up yet: warms up when a start names it (warm_up on_first_use)"


def policy_entries(policies: list[str], policy: str, label: str) -> list[tuple[str | None, str]]:
    """The ``policies`` parameter as (name, config) pairs (a name None: the config's own); empty: the ``policy``
    parameter alone. Bad or repeated names fail naming the parameter (``label``: ``node.policies``)."""
    if not policies:
        return [(None, policy)]
    entries: list[tuple[str | None, str]] = []
    for text in policies:
        try:
            name, config = parse_policy_entry(text)
        except ConfigError as exc:
            raise ConfigError(f"parameter {label}: {exc}") from None
        if name is None:
            raise ConfigError(f"parameter {label}: entry {text!r} is not NAME=CONFIG (e.g. ckpt_a=bridge_pi0_server)")
        if any(name == seen for seen, _ in entries):
            raise ConfigError(f"parameter {label}: the name {name!r} is given twice")
        entries.append((name, config))
    return entries


def checked_config(config: PolicyConfig, preset: EmbodimentPreset, *, lockstep: bool, max_observation_age_s: float,
                   execution: str, label: str) -> PolicyConfig:
    """``config`` as the node runs it (the stricter observation age; on the wall clock the execution mode chosen:
    lockstep always runs the paper's rule), refused when it cannot run in this graph: a simulation-only policy on
    the wall clock, another control rate than the preset's."""
    if config.simulation_only and not lockstep:
        raise ConfigError(f"{label}: {config.name} reads the simulator's privileged state and cannot drive a "
                          "robot (clock_mode wall_clock); give a learned policy config, e.g. --set "
                          "policy.policy=bridge_pi0_server (an openpi server) or a local model's config")
    if abs(config.control_rate_hz - preset.control_rate_hz) > 1e-9:
        raise ConfigError(f"{label}: {config.name} runs at {config.control_rate_hz:g} Hz ({config.embodiment}) "
                          f"but the graph's preset {preset.name} runs at {preset.control_rate_hz:g} Hz")
    if max_observation_age_s < config.max_observation_age_s:
        config = replace(config, max_observation_age_s=max_observation_age_s)
    return config if lockstep else with_execution(config, execution)


@dataclass
class NamedPolicy:
    """One policy the node serves: its name, its provider, its config as the node runs it, and its warm-up."""

    name: str
    provider: PolicyProvider
    config: PolicyConfig
    warmup: WarmUp

    def entry(self) -> PolicyEntry:
        """Its line of ``policy/status``."""
        state, detail, _ = self.warmup.snapshot()
        return PolicyEntry(name=self.name, config=self.config.name, config_hash=self.config.digest(), state=state,
                           detail=detail, warm_up_s=self.warmup.warm_up_s)


class PolicyRoster:
    """The node's named policies, the default, and the one in use (see the module docstring)."""

    def __init__(self, policies: Mapping[str, NamedPolicy], default: str = "", *, warm_up: str = AT_START):
        if not policies:
            raise ConfigError("the policy node serves at least one policy")
        self.policies = dict(policies)
        self.default = default or next(iter(self.policies))
        if self.default not in self.policies:
            raise ConfigError(f"default_policy {self.default!r} is not one of the node's policies: "
                              f"{', '.join(self.policies)}")
        if warm_up not in (AT_START, ON_FIRST_USE):
            raise ConfigError(f"warm_up must be {AT_START} or {ON_FIRST_USE}, got {warm_up!r}")
        self.warm_up = warm_up
        self.active = self.policies[self.default]  # the current (or last) episode's; the default before any

    @property
    def names(self) -> list[str]:
        return list(self.policies)

    def resolve(self, name: str) -> NamedPolicy:
        """The policy ``name`` names (empty: the default); a name the node does not serve fails listing them."""
        policy = self.policies.get(name or self.default)
        if policy is None:
            raise LadderError(f"the policy node has no policy {name!r}; its policies: {', '.join(self.policies)}")
        return policy

    def use(self, name: str) -> NamedPolicy:
        """An episode starts under ``name`` (empty: the default): that policy is in use until the next start."""
        self.active = self.resolve(name)
        self.demand(self.active.name)
        return self.active

    def start(self) -> None:
        """Start the warm-ups due at start: every policy's, or with ``on_first_use`` the default's."""
        for policy in self.policies.values():
            if self.warm_up == AT_START or policy.name == self.default:
                self.demand(policy.name)

    def demand(self, name: str) -> None:
        """A start names ``name``: its warm-up starts now if it has not (unknown names are left to the start)."""
        policy = self.policies.get(name or self.default)
        if policy is not None and not policy.warmup.started:
            if policy.provider.per_episode:
                policy.warmup.attempt()  # nothing to load: ready at once
            policy.warmup.start()

    def entries(self) -> list[dict]:
        """Every policy's line of ``policy/status``."""
        return [p.entry().to_dict() for p in self.policies.values()]

    def close(self) -> None:
        for policy in self.policies.values():
            policy.warmup.stop()
        for policy in self.policies.values():
            policy.provider.close()


class ActiveWarmUp:
    """The warm-up of the policy in use (the roster's ``active``), for objects that follow one policy."""

    def __init__(self, roster: PolicyRoster):
        self._roster = roster

    @property
    def _warmup(self) -> WarmUp:
        return self._roster.active.warmup

    def snapshot(self) -> tuple[str, str, float]:
        return self._warmup.snapshot()

    @property
    def ready(self) -> bool:
        return self._warmup.ready

    @property
    def warm_up_s(self) -> float | None:
        return self._warmup.warm_up_s

    @property
    def deadline_s(self) -> float:
        return self._warmup.deadline_s

    def failed(self, reason: str) -> None:
        self._warmup.failed(reason)


def build_roster(entries: list[tuple[str | None, str]], default: str, *, warm_up: str,
                 load: Callable[[str | None, str], PolicyProvider], check: Callable[[PolicyConfig, str], PolicyConfig],
                 make_warmup: Callable[[str, PolicyProvider, bool], WarmUp]) -> PolicyRoster:
    """The roster of ``entries``: ``load(name, config)`` builds a provider, ``check(config, label)`` the config as
    the node runs it, ``make_warmup(name, provider, deferred)`` its warm-up."""
    policies: dict[str, NamedPolicy] = {}
    for name, config_ref in entries:
        provider = load(name, config_ref)
        if provider.name in policies:
            raise ConfigError(f"the policy name {provider.name!r} is given twice")
        default = default or provider.name  # empty: the first
        deferred = warm_up == ON_FIRST_USE and provider.name != default
        policies[provider.name] = NamedPolicy(provider.name, provider, check(provider.config, provider.name),
                                              make_warmup(provider.name, provider, deferred))
    return PolicyRoster(policies, default, warm_up=warm_up)


def load_roster(params: Mapping, preset: EmbodimentPreset, *, lockstep: bool, label: str,
                running: Callable[[], bool], waits_for: Callable[[str], bool], log: Callable[[str], None],
                policy_factory: Callable[[Task, int], LowLevelPolicy] | None = None,
                provider: PolicyProvider | None = None) -> PolicyRoster:
    """The policy node's roster from its parameters (``policy``, ``policies``, ``default_policy``, ``warm_up``,
    ``noise``, ``rotation_convention``, ``execution``, ``max_observation_age_s``, ``warm_up_timeout_s``).

    ``running()`` says whether an episode runs and ``waits_for(name)`` whether it waits for policy ``name`` to be
    ready: a policy warms up between episodes, or while the episode that names it waits for it (not while another
    one acts, nor after its own episode's policy was built); servers are asked /healthz only between episodes.
    ``policy_factory`` or ``provider`` replace the configured policies with one (tests). ``label``:
    ``parameter <node>``, for errors.
    """

    def load(name: str | None, config: str) -> PolicyProvider:
        if policy_factory is not None:
            return PolicyProvider.from_factory(policy_factory, preset.name,
                                               rotation_convention=params["rotation_convention"])
        if provider is not None:
            return provider
        return PolicyProvider.load(config, params["noise"], params["rotation_convention"], name=name)

    def check(config: PolicyConfig, name: str) -> PolicyConfig:
        where = f"{label}.policies ({name})" if params["policies"] else f"{label}.policy"
        return checked_config(config, preset, lockstep=lockstep, label=where, execution=params["execution"],
                              max_observation_age_s=params["max_observation_age_s"])

    def make_warmup(name: str, source: PolicyProvider, deferred: bool) -> WarmUp:
        return WarmUp(source, deadline_s=params["warm_up_timeout_s"],
                      may_attempt=lambda: not running() or waits_for(name),
                      may_probe=lambda: not running(), detail=WAITS_FOR_A_START if deferred else "starting",
                      log=lambda text: log(f"policy {name}: {text}"))
    given = policy_factory is not None or provider is not None
    entries = [(None, "")] if given else policy_entries(list(params["policies"]), params["policy"],
                                                        f"{label}.policies")
    roster = build_roster(entries, params["default_policy"], warm_up=params["warm_up"], load=load, check=check,
                          make_warmup=make_warmup)
    kinds = {(p.config.action.kind, p.config.action.names) for p in roster.policies.values()}
    if len(kinds) > 1:
        spaces = "; ".join(f"{p.name}: {p.config.action.kind} {', '.join(p.config.action.names)}"
                           for p in roster.policies.values())
        raise ConfigError(f"{label}.policies: the policies act in different action spaces ({spaces}); one graph's "
                          "robot takes one")
    return roster
