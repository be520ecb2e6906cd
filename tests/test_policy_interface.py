"""The low-level policy interface declares everything the reference loop reads of a policy, with defaults."""

import ast
from pathlib import Path

import numpy as np

from ladder_ros.core.action_conventions import CANONICAL, ActionConvention, policy_convention
from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.task import Subgoal, Task, TaskCategory
from ladder_ros.evaluation import reference_loop
from ladder_ros.evaluation.reference_loop import run_episode
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.policies.chunked import ChunkedPolicy
from tests.fakes import ToyPolicy, ToyWorld

TASK = Task(task_id="toy1", scene="toy", category=TaskCategory.SINGLE_DESTINATION,
            instruction="put the carrot on the plate",
            subgoals=(Subgoal("carrot", "plate", "put the carrot on the plate"),))


class Minimal(LowLevelPolicy):
    """Says only what a policy must: its name, reset and act."""

    name = "minimal"

    def __init__(self):
        self.resets = 0

    def reset(self, instruction: str) -> None:
        self.resets += 1

    def act(self, observation, instruction: str) -> np.ndarray:
        return np.zeros(7)


def test_the_interface_declares_every_member_the_loop_reads_with_its_default():
    for member in ("name", "reset", "act", "action_convention", "declared_convention", "policy_report"):
        assert member in LowLevelPolicy.__dict__ or member in LowLevelPolicy.__annotations__, member
    policy = Minimal()
    assert isinstance(policy, LowLevelPolicy)
    assert policy.action_convention is CANONICAL and policy_convention(policy) is CANONICAL
    assert policy.declared_convention is None
    assert policy.policy_report() == {}
    for member in ("declared_convention", "policy_report"):
        assert (getattr(LowLevelPolicy, member).__doc__ or "").strip(), member


def test_policies_of_the_package_and_the_toy_derive_from_the_interface():
    assert LowLevelPolicy in ChunkedPolicy.__mro__ and LowLevelPolicy in ToyPolicy.__mro__
    assert "declared_convention" in ChunkedPolicy.__dict__ and "policy_report" in ChunkedPolicy.__dict__


def test_a_policy_with_only_the_required_members_runs_in_the_reference_loop_and_gets_the_defaults_recorded():
    record = run_episode(ToyWorld(), ToyPolicy(TASK, 0), TASK, "proprio_trigger", WIDOWX, layout=0, seed=0)
    assert record.action_convention == CANONICAL.to_dict() and record.policy_report == {}

    class Declaring(ToyPolicy):
        action_convention = ActionConvention.parse("sxyz_axis_angle")

        def policy_report(self) -> dict:
            return {"held_steps": 0}

    record = run_episode(ToyWorld(), Declaring(TASK, 0), TASK, "proprio_trigger", WIDOWX, layout=0, seed=0)
    assert record.action_convention == ActionConvention.parse("sxyz_axis_angle").to_dict()
    assert record.policy_report == {"held_steps": 0}


def test_the_reference_loop_asks_the_policy_plainly():
    source = Path(reference_loop.__file__).read_text()
    probes = [ast.unparse(node) for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Call) and ast.unparse(node.func) in ("getattr", "hasattr")
              and node.args and ast.unparse(node.args[0]) == "policy"]
    assert not probes, probes
