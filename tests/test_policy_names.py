"""Named policies without a graph: the entries, the roster, the orchestrator's gate, the status and the records.

A lab compares checkpoints in one graph: the policy node serves several policies by name (``policies``,
``NAME=CONFIG``), an episode's start names one, and the orchestrator refuses a name the node does not serve, or a
policy that cannot act, before anything moves. sim-eval names its policy the same way, so the records of both carry
the same identity (the name, the config's digest) and rank side by side.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.record import EpisodeRecord, graph_record
from ladder_ros.core.task import Task
from ladder_ros.evaluation.ranking import identity_of, system_name
from ladder_ros.messages import START, EpisodeCommand, EpisodeStatus, SchemaError
from ladder_ros.nodes.policy.roster import (
    ON_FIRST_USE, WAITS_FOR_A_START, ActiveWarmUp, NamedPolicy, PolicyRoster, checked_config, policy_entries)
from ladder_ros.policies.factory import PolicyProvider, load_policy, make_policy, parse_policy_entry
from ladder_ros.policies.status import READY, SERVER_ERROR, UNAVAILABLE, WARMING_UP, PolicyEntry, PolicyStatusDoc
from ladder_ros.policies.warmup import WarmUp
from ladder_ros.specs.parameters import check_node_parameters
from tests.policy_fixtures import make_config

TASK = Task.from_dict({"task_id": "t", "scene": "s", "category": "single_destination", "instruction": "put it there",
                       "subgoals": [{"object": "carrot", "destination": "plate",
                                     "text": "put the carrot on the plate"}]})


# ------------------------------------------------------------------------------ entries and parameters
def test_a_policy_entry_is_name_equals_config_and_a_bare_config_keeps_its_own_name():
    assert parse_policy_entry("ckpt_b=policies/b.yaml") == ("ckpt_b", "policies/b.yaml")
    assert parse_policy_entry("scripted_expert") == (None, "scripted_expert")
    assert parse_policy_entry("runs/a=b/mine.yaml") == (None, "runs/a=b/mine.yaml")  # a folder with '=' is a path
    with pytest.raises(ConfigError, match="names no config"):
        parse_policy_entry("ckpt_b=")
    with pytest.raises(ConfigError, match="policy name 'bad name' must be"):
        parse_policy_entry("bad name=scripted_expert")
    assert policy_entries([], "scripted_expert", "policy.policies") == [(None, "scripted_expert")]
    assert policy_entries(["a=x", "b=y"], "ignored", "policy.policies") == [("a", "x"), ("b", "y")]
    with pytest.raises(ConfigError, match=r"parameter policy.policies: the name 'a' is given twice"):
        policy_entries(["a=x", "a=y"], "", "policy.policies")
    with pytest.raises(ConfigError, match=r"entry 'x' is not NAME=CONFIG"):
        policy_entries(["x"], "", "policy.policies")


@pytest.mark.parametrize("values, named", [
    ({"policies": ["a=x", "a=y"]}, "policy.policies: the name 'a' is given twice"),
    ({"policies": ["just_a_config"]}, "policy.policies: entry 'just_a_config' is not NAME=CONFIG"),
    ({"policies": ["a=x", "b=y"], "default_policy": "c"},
     "policy.default_policy: 'c' is not one of the policies (a, b)"),
    ({"warm_up": "later"}, "must be one of at_start, on_first_use"),
])
def test_bad_policy_parameters_fail_before_the_graph_starts_naming_the_parameter(values, named):
    with pytest.raises(ConfigError) as info:
        check_node_parameters("policy", values)
    assert named in str(info.value)


def test_the_orchestrators_unavailable_policy_is_refuse_or_wait():
    assert check_node_parameters("orchestrator", {})["unavailable_policy"] == "refuse"
    assert check_node_parameters("orchestrator", {"unavailable_policy": "wait"})["unavailable_policy"] == "wait"
    with pytest.raises(ConfigError, match="must be one of refuse, wait"):
        check_node_parameters("orchestrator", {"unavailable_policy": "substitute"})


# ------------------------------------------------------------------------------ the roster
def expert(name: str, *, deferred: bool = False) -> NamedPolicy:
    provider = PolicyProvider.load(f"{name}=scripted_expert")
    return NamedPolicy(name, provider, provider.config,
                       WarmUp(provider, deadline_s=5.0, detail=WAITS_FOR_A_START if deferred else "starting"))


def test_an_episode_runs_under_the_policy_it_names_and_an_unknown_name_lists_the_policies():
    roster = PolicyRoster({"calm": expert("calm"), "brisk": expert("brisk")}, "brisk")
    try:
        assert roster.names == ["calm", "brisk"] and roster.active.name == "brisk"  # the default before any episode
        roster.start()
        assert all(p.warmup.ready for p in roster.policies.values())  # nothing to load: ready at once
        warmup = ActiveWarmUp(roster)
        assert roster.use("calm").name == "calm" and roster.active.name == "calm"
        assert warmup.snapshot()[0] == READY
        roster.active.warmup.failed("gone")
        assert not warmup.ready and roster.policies["brisk"].warmup.ready  # the view follows the one in use
        assert roster.use("").name == "brisk"  # empty: the default
        with pytest.raises(LadderError, match="the policy node has no policy 'c'; its policies: calm, brisk"):
            roster.use("c")
        assert roster.active.name == "brisk"  # an unknown name switches nothing
        entries = {e["name"]: e for e in roster.entries()}
        assert entries["calm"]["state"] == SERVER_ERROR and entries["calm"]["detail"] == "gone"
        assert entries["brisk"]["config"] == "scripted_expert"
        assert entries["brisk"]["config_hash"] == load_policy("scripted_expert").digest()
    finally:
        roster.close()
    with pytest.raises(ConfigError, match="default_policy 'c' is not one of the node's policies: calm"):
        PolicyRoster({"calm": expert("calm")}, "c")


def test_on_first_use_warms_the_default_at_start_and_another_when_a_start_names_it():
    roster = PolicyRoster({"calm": expert("calm"), "brisk": expert("brisk", deferred=True)}, warm_up=ON_FIRST_USE)
    try:
        roster.start()
        assert roster.policies["calm"].warmup.ready
        brisk = roster.policies["brisk"].warmup
        assert not brisk.started and brisk.snapshot()[:2] == (WARMING_UP, WAITS_FOR_A_START)
        roster.demand("nope")  # a name it does not serve: left to the start, which is refused
        roster.demand("brisk")
        assert brisk.started and brisk.ready
    finally:
        roster.close()


def test_a_policy_that_cannot_run_in_the_graph_is_refused_naming_it():
    config = replace(make_config(), control_rate_hz=15.0)  # as a Franka config would run
    with pytest.raises(ConfigError, match=r"policy.policies \(b\): test_bridge runs at 15 Hz .* runs at 5 Hz"):
        checked_config(config, WIDOWX, lockstep=True, max_observation_age_s=0.5, execution="",
                       label="policy.policies (b)")
    expert_config = load_policy("scripted_expert")
    with pytest.raises(ConfigError, match="reads the simulator's privileged state"):
        checked_config(expert_config, WIDOWX, lockstep=False, max_observation_age_s=0.5, execution="", label="x")


# ------------------------------------------------------------------------------ the status
def test_the_status_lists_every_policy_with_its_state_and_an_old_status_lists_its_one_policy():
    entries = [PolicyEntry("calm", "ckpt_a", "aa" * 8, READY).to_dict(),
               PolicyEntry("brisk", "ckpt_b", "bb" * 8, UNAVAILABLE, "the server does not answer").to_dict()]
    doc = PolicyStatusDoc(policy="calm", state=READY, default_policy="calm", policies=entries)
    assert doc.default_name == "calm" and list(doc.entries()) == ["calm", "brisk"]
    assert doc.entries()["brisk"].line == "unavailable: the server does not answer"
    old = PolicyStatusDoc(policy="test_bridge", state=SERVER_ERROR, detail="KeyError", config_hash="cc" * 8)
    assert old.default_name == "test_bridge"
    assert old.entries()["test_bridge"].line == "server error: KeyError"
    with pytest.raises(SchemaError, match="default_policy 'other' is not one of calm, brisk"):
        PolicyStatusDoc(policy="calm", state=READY, default_policy="other", policies=entries)
    with pytest.raises(SchemaError, match="a policy name is listed twice"):
        PolicyStatusDoc(policy="calm", state=READY, default_policy="calm", policies=entries + entries[:1])
    with pytest.raises(SchemaError, match="field 'state' must be one of"):
        PolicyEntry("calm", "c", "h", "napping")


# ------------------------------------------------------------------------------ the orchestrator's gate
class GateNode:
    """What the gate uses of its node: a subscription (its callback kept), publishers counted, a logger."""

    def __init__(self):
        self.callbacks, self.lines = {}, []

    def resolve_topic_name(self, name):
        return f"/lab/{name}"

    def count_publishers(self, topic):
        return 1

    def create_subscription(self, msg_type, topic, callback, qos, **options):
        self.callbacks[topic] = callback

    def get_logger(self):
        return self

    def info(self, text, **kwargs):
        self.lines.append(text)

    warning = error = info


class Gate:
    """A policy gate with the starts and refusals it decides recorded."""

    def __init__(self, unavailable="refuse", wait_s=30.0):
        from ladder_ros.nodes.orchestrator.policy_gate import PolicyGate

        self.node, self.started, self.refused = GateNode(), [], []
        self.gate = PolicyGate(self.node, wait_s=wait_s, start=self.start,
                               refuse=lambda command, why: self.refused.append((command, why)),
                               on_change=lambda: None, unavailable=unavailable)

    def start(self, command):
        if self.gate.admit(command):
            self.started.append(command)

    def status(self, **states):
        from ladder_ros.interface_conversions import document_to_msg

        entries = [PolicyEntry(name, f"ckpt_{name}", name[0] * 16, state, "" if state == READY else "why").to_dict()
                   for name, state in states.items()]
        doc = PolicyStatusDoc(policy=entries[0]["name"], state=entries[0]["state"], default_policy="calm",
                              policies=entries)
        self.node.callbacks["policy/status"](document_to_msg(doc))


def start(policy=""):
    return EpisodeCommand(command=START, episode_id="", task_id="t", policy=policy)


def test_the_gate_refuses_an_unknown_name_with_the_names_and_starts_a_ready_one_under_its_hash():
    pytest.importorskip("rclpy", reason="the gate's messages need the ROS 2 wheels (requirements/ros.txt)")
    gate = Gate()
    gate.status(calm=READY, brisk=WARMING_UP)
    gate.start(start("nope"))
    assert gate.started == [] and gate.refused[0][1] == "unknown policy 'nope': the policy node serves calm, brisk"
    gate.start(start())
    gate.start(start("calm"))
    assert [c.policy for c in gate.started] == ["", "calm"]
    assert gate.gate.chosen(start()) == ("calm", "c" * 16) == gate.gate.chosen(start("calm"))
    gate.start(start("brisk"))  # warming up: deferred, then started the moment it is ready
    assert gate.gate.deferred is not None and len(gate.started) == 2
    gate.status(calm=READY, brisk=READY)
    assert gate.gate.deferred is None and gate.started[-1].policy == "brisk"
    assert gate.gate.chosen(gate.started[-1]) == ("brisk", "b" * 16)


def test_a_policy_that_cannot_act_is_refused_or_waited_for_never_replaced():
    pytest.importorskip("rclpy", reason="the gate's messages need the ROS 2 wheels (requirements/ros.txt)")
    refusing = Gate("refuse")
    refusing.status(calm=READY, brisk=UNAVAILABLE)
    refusing.start(start("brisk"))
    assert refusing.started == [] and refusing.refused[0][1] == "the policy 'brisk' is not ready: unavailable: why"
    waiting = Gate("wait", wait_s=2.0)
    waiting.status(calm=READY, brisk=UNAVAILABLE)
    command = start("brisk")
    waiting.start(command)
    assert waiting.started == [] and waiting.refused == [] and waiting.gate.deferred[0] is command
    waiting.status(calm=READY, brisk=SERVER_ERROR)  # still cannot act: it keeps waiting
    assert waiting.gate.deferred is not None and waiting.started == []
    waiting.gate.check_deadline(waiting.gate.deferred[1] + 2.0)
    assert waiting.started == [] and waiting.refused == [(command, "the policy 'brisk' was not ready within 2 s: "
                                                                   "server error: why")]
    waiting.start(start("brisk"))
    waiting.status(calm=READY, brisk=READY)  # back: the deferred start goes ahead under it
    assert [c.policy for c in waiting.started] == ["brisk"]


# ------------------------------------------------------------------------------ records
def test_the_record_names_the_policy_of_the_status_and_its_config_hash():
    status = EpisodeStatus(episode_id="e", state="running", task=TASK.to_dict(), variant="low_level_policy",
                           policy="brisk", policy_config_hash="b" * 16).to_dict()
    report = {"policy": "brisk", "config": "ckpt_b", "config_hash": "b" * 16, "final": True}
    record = graph_record(status, events=[], orchestration={}, finish_reason="budget", last_step=3, score=None,
                          wall_s=1.0, policy=report)
    assert (record["policy"], record["policy_config_hash"]) == ("brisk", "b" * 16)
    assert record["policy_report"]["config"] == "ckpt_b"
    # No report came (the policy node was gone): the status still says which policy the episode ran under.
    bare = graph_record(status, events=[], orchestration={}, finish_reason="x", last_step=0, score=None, wall_s=0.0)
    assert (bare["policy"], bare["policy_config_hash"], bare["policy_report"]) == ("brisk", "b" * 16, {})
    # An orchestrator that names no policy: the report's name and hash, as before.
    unnamed = dict(status, policy="", policy_config_hash="")
    old = graph_record(unnamed, events=[], orchestration={}, finish_reason="x", last_step=0, score=None, wall_s=0.0,
                       policy=report)
    assert (old["policy"], old["policy_config_hash"]) == ("brisk", "b" * 16)


def test_sim_evals_named_policy_carries_the_identity_a_graphs_record_carries():
    policy = make_policy("calm=scripted_expert", TASK, seed=3)
    report = policy.policy_report()
    digest = load_policy("scripted_expert").digest()
    assert policy.name == "calm"
    assert (report["policy"], report["config"], report["config_hash"]) == ("calm", "scripted_expert", digest)
    bare = make_policy("scripted_expert", TASK, seed=3)
    assert bare.name == "scripted_expert" and bare.policy_report()["policy"] == "scripted_expert"
    record = EpisodeRecord(
        task_id="t", suite="s", category="single_destination", horizon=1, variant="low_level_policy", layout=0,
        seed=3, success=False, subgoals_done=0, steps_used=0, budget_steps=100, finish_reason="budget", subgoals=[],
        violations=[], events=[], verification_queries=0, verifier=None, policy=policy.name, simulator="toy",
        final_goal={}, orchestration={}, policy_report=report).to_dict()
    assert record["policy_config_hash"] == digest  # filled from the report where the loop gives none
    status = EpisodeStatus(episode_id="e", state="running", task=TASK.to_dict(), variant="low_level_policy",
                           policy="calm", policy_config_hash=digest).to_dict()
    graph = graph_record(status, events=[], orchestration={}, finish_reason="budget", last_step=3, score=None,
                         wall_s=1.0, policy=report)
    names = {system_name(identity_of({"variant": "low_level_policy"}, r)) for r in (record, graph)}
    assert names == {f"calm@{digest[:8]}/low_level_policy"}
