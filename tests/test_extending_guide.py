"""The extending guide's examples run as written: docs/extending.md's toy policy backend drives one episode of the
in-process reference loop on the MuJoCo tabletop, and its fixed-reply VLM backend answers the verifier's count.

Each example is the fenced Python block after an ``<!-- example: NAME -->`` comment; it is written to a module of
its own in a temporary folder and imported from there, so the test runs exactly what a reader copies.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from ladder_ros.core.observation import Observation
from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.suite import load_suite
from ladder_ros.core.task import Subgoal
from ladder_ros.core.verification import VerificationRequest
from ladder_ros.evaluation.reference_loop import run_episode
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.vlm import VLMConfig, make_components

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "extending.md"


def example(name: str) -> str:
    """The source of the fenced Python block that follows ``<!-- example: name -->`` in the guide."""
    match = re.search(rf"<!-- example: {re.escape(name)} -->\s*\n```python\n(.*?)\n```", GUIDE.read_text(), re.S)
    assert match, f"docs/extending.md has no python block after <!-- example: {name} -->"
    return match.group(1) + "\n"


def import_example(name: str, tmp_path: Path):
    """The example written to ``tmp_path/<name>.py`` and imported as a module of its own."""
    module_name = "guide_" + name.replace("-", "_")
    path = tmp_path / f"{module_name}.py"
    path.write_text(example(name))
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    return module


class RecordingSimulator:
    """A simulator backend that passes everything through and keeps every action it was asked to apply."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.control_rate_hz = inner.control_rate_hz
        self.actions: list[np.ndarray] = []

    def reset(self, task, layout, seed):
        return self.inner.reset(task, layout, seed)

    def step(self, action):
        self.actions.append(np.array(action, dtype=np.float64))
        return self.inner.step(action)

    def camera_intrinsics(self):
        return self.inner.camera_intrinsics()

    def close(self):
        self.inner.close()


def test_every_example_the_guide_marks_is_a_python_block():
    names = re.findall(r"<!-- example: ([\w-]+) -->", GUIDE.read_text())
    assert {"toy-policy", "fixed-reply-vlm"} <= set(names)
    for name in names:
        compile(example(name), f"docs/extending.md:{name}", "exec")


def test_the_toy_policy_backend_runs_one_episode_of_the_reference_loop_with_its_own_actions(tmp_path):
    pytest.importorskip("mujoco")
    from ladder_ros.sim.registry import make_simulator

    toy = import_example("toy-policy", tmp_path)
    suite = load_suite(REPO / "config" / "suites" / "tabletop.yaml")
    task = suite.task("kitchen_single_1")
    provider = toy.swaying_provider()
    policy = provider.episode_policy(task, 0)
    assert isinstance(policy, LowLevelPolicy)
    simulator = RecordingSimulator(make_simulator("mujoco_tabletop", suite, render=False))
    try:
        record = run_episode(simulator, policy, task, "low_level_policy", WIDOWX, layout=0, seed=0)
    finally:
        simulator.close()

    source = provider.source()
    assert isinstance(source, toy.SwayingSource)
    config = provider.config
    assert (config.chunk_length, config.execute_steps) == (4, 2)
    # Every action the simulator applied is the next of the first two of a chunk the source returned.
    expected = [action for chunk in source.chunks for action in chunk[:config.execute_steps]]
    assert simulator.actions and len(simulator.actions) == len(expected) == record.steps_used
    np.testing.assert_array_equal(np.array(simulator.actions), np.array(expected))
    assert {float(a[1]) for a in simulator.actions} == {0.01, -0.01}
    assert record.policy == "swaying"
    assert record.policy_report["chunks"] == len(source.chunks) == record.steps_used // config.execute_steps
    assert record.policy_report["held_steps"] == 0 and not record.policy_report["rejected_chunks"]


def test_the_fixed_reply_vlm_backend_answers_the_verifiers_count_through_the_deployed_parser(tmp_path):
    guide = import_example("fixed-reply-vlm", tmp_path)
    backend = guide.FixedReplyBackend('One carrot on the plate.\n{"count": 1}')
    components = make_components(VLMConfig(backend="oracle"), backend=backend)
    carrot = Subgoal("carrot", "plate", "put the carrot on the plate")
    request = VerificationRequest(request_id=3, step=10, plan_index=0, subgoal=carrot, required=1,
                                  reason="after_release")
    frame = Observation(step=10, image=np.full((8, 8, 3), 120, np.uint8), aperture=1.0, ee_position=np.zeros(3),
                        ee_euler=np.zeros(3), joint_names=(), joint_positions=np.zeros(0))
    result = components.verifier.verify(request, frame)
    assert (result.request_id, result.count, result.source, result.error) == (3, 1, "fixed", None)
    assert components.verifier.is_complete(result, request)
    assert len(backend.requests) == 1 and backend.requests[0].images[0].image.shape == (8, 8, 3)
