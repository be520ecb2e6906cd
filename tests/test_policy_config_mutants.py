"""Policy config rules the other config tests leave open: the normalisation arithmetic of both modes, the digest
records carry, the choices of kind, reference and mode, and the conventions only ee_delta actions have.

The field tables are in tests/test_policy_config_fields.py, the shipped configs in tests/test_policy_config.py.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.policies.config import (QUANTILE_SIGMAS, ROTATION_CONVENTIONS, Normalization, Statistics,
                                        parse_policy_config)
from tests.policy_fixtures import config_data

SOURCE = "test.yaml"
# (first, second) statistics with a first entry away from 0 and a spread away from 1 and 2, so that a sign,
# an operator or a swapped operand in the arithmetic shows
STATISTICS = [((2.0, -1.0, 0.5), (4.0, 3.0, 0.25)), ((-3.0, 10.0, 0.0), (0.5, 30.0, 7.0))]


def refusal(data: dict, source: str = SOURCE) -> str:
    with pytest.raises(ConfigError) as refused:
        parse_policy_config(data, source=source)
    return str(refused.value)


def action_data(**changes) -> dict:
    """The test config's action section with fields replaced (``...`` removes one)."""
    action = copy.deepcopy(config_data()["action"])
    for key, value in changes.items():
        if value is ...:
            action.pop(key)
        else:
            action[key] = value
    return action


def joint_action(**changes) -> dict:
    """The action section as a joint_position action (no rotation or gripper convention), fields replaced."""
    return action_data(**{"kind": "joint_position", "rotation": ..., "gripper": ..., **changes})


def test_mean_std_normalisation_reads_a_value_in_standard_deviations_from_the_mean_and_back():
    for mean, std in STATISTICS:
        mean_, std_ = np.array(mean), np.array(std)
        norm = Normalization("mean_std", state=Statistics(mean, std), action=Statistics(mean, std))
        for k in (-2.0, -1.0, 0.0, 0.5, 3.0):
            np.testing.assert_allclose(norm.normalize_state(mean_ + k * std_), np.full(3, k), atol=1e-12)
            np.testing.assert_allclose(norm.unnormalize_action(np.full(3, k)), mean_ + k * std_, atol=1e-12)
            np.testing.assert_allclose(norm.sigmas("state", mean_ + k * std_), np.full(3, abs(k)), atol=1e-12)


def test_quantile_normalisation_maps_q01_and_q99_to_minus_one_and_one_and_back():
    for q01, q99 in STATISTICS:
        low, high = np.minimum(q01, q99), np.maximum(q01, q99)
        norm = Normalization("quantile", state=Statistics(tuple(low), tuple(high)),
                             action=Statistics(tuple(low), tuple(high)))
        for y, x in ((-1.0, low), (1.0, high), (0.0, (low + high) / 2), (0.5, low + 0.75 * (high - low))):
            np.testing.assert_allclose(norm.normalize_state(x), np.full(3, y), atol=1e-12)
            np.testing.assert_allclose(norm.unnormalize_action(np.full(3, y)), x, atol=1e-12)


def test_quantile_statistics_read_q01_and_q99_as_the_normal_distributions_2_326_sigmas():
    norm = Normalization("quantile", state=Statistics((0.0,), (2.0,)), action=Statistics((-4.0,), (4.0,)))
    assert QUANTILE_SIGMAS == 2.326
    for value, sigma in ((2.0, 2.326), (0.0, 2.326), (1.0, 0.0), (1.5, 1.163)):
        assert norm.sigmas("state", np.array([value])).tolist() == pytest.approx([sigma])
    for value, sigma in ((4.0, 2.326), (-4.0, 2.326), (0.0, 0.0), (12.0, 3 * 2.326)):  # action: its own statistics
        assert norm.sigmas("action", np.array([value])).tolist() == pytest.approx([sigma])


def test_a_parsed_mean_std_normalisation_uses_its_statistics_both_ways():
    normalization = {"mode": "mean_std", "state": {"mean": [1.0] * 7, "std": [2.0] * 7},
                     "action": {"mean": [-1.0] * 7, "std": [0.5] * 7}}
    data = config_data(backend="transformers", server=None, model={"path": "/models/x"}, normalization=normalization)
    norm = parse_policy_config(data, source=SOURCE).normalization
    assert norm.mode == "mean_std"
    assert norm.normalize_state(np.full(7, 5.0)).tolist() == [2.0] * 7
    assert norm.unnormalize_action(np.full(7, 4.0)).tolist() == [1.0] * 7


@pytest.mark.parametrize("section", ["normalization", "statistics"])
def test_a_normalisation_mode_is_one_of_mean_std_or_quantile(section):
    stats = {"mode": "zscore", "state": {"q01": [0.0] * 7, "q99": [1.0] * 7},
             "action": {"q01": [0.0] * 7, "q99": [1.0] * 7}}
    base = config_data(backend="transformers", server=None, model={"path": "/models/x"}) \
        if section == "normalization" else config_data()
    for wrong in ("zscore", "Quantile", "mean-std"):
        assert refusal({**base, section: dict(stats, mode=wrong)}) == \
            f"{SOURCE}: {section}.mode: must be one of mean_std, quantile, got {wrong!r}"


def test_an_action_kind_is_one_of_ee_delta_or_joint_position():
    for wrong in ("joint_velocity", "EE_DELTA", "delta"):
        assert refusal(config_data(action=joint_action(kind=wrong))) == \
            f"{SOURCE}: action.kind: must be one of ee_delta, joint_position, got {wrong!r}"
    assert refusal(config_data(action=action_data(kind=...))) == f"{SOURCE}: action.kind: missing required field"


def test_only_ee_delta_actions_have_a_rotation_or_gripper_convention():
    for name, value in (("rotation", "euler_xyz"), ("gripper", "open_fraction"), ("gripper", "signed")):
        assert refusal(config_data(action=joint_action(**{name: value}))) == \
            f"{SOURCE}: action.{name}: only ee_delta actions have a {name} convention"
    action = parse_policy_config(config_data(action=joint_action()), source=SOURCE).action
    assert action.kind == "joint_position" and action.rotation is None and action.gripper is None


def test_an_ee_euler_reference_is_one_of_the_known_references():
    for wrong in ("world", "TOP_DOWN", "camera"):
        state = [{"key": "s", "source": "ee_euler", "reference": wrong, "angles": "sxyz"}]
        assert refusal(config_data(state=state)) == \
            f"{SOURCE}: state[0].reference: must be one of top_down, base, got {wrong!r}"
    for reference in ("top_down", "base"):
        state = [{"key": "s", "source": "ee_euler", "reference": reference, "angles": "euler_xyz"}]
        entry = parse_policy_config(config_data(state=state), source=SOURCE).state[0]
        assert (entry.reference, entry.angles) == (reference, "euler_xyz")


def test_state_entries_other_than_ee_euler_carry_no_angle_convention():
    config = parse_policy_config(config_data(state=[
        {"key": "s", "source": "ee_position"}, {"key": "s", "source": "gripper_open"},
        {"key": "s", "source": "gripper_closed"}, {"key": "s", "source": "zeros", "size": 2},
        {"key": "j", "source": "joint_positions", "size": 6}]), source=SOURCE)
    assert [(e.reference, e.angles) for e in config.state] == [(None, None)] * 5


def test_a_config_parsed_without_a_source_is_named_policy_in_its_errors():
    assert parse_policy_config(config_data()).source == "<policy>"
    with pytest.raises(ConfigError) as refused:
        parse_policy_config(config_data(schema_version=2))
    assert str(refused.value) == "<policy>: schema_version: unsupported 2; this version reads 1"


# A small scripted-expert config, its fields in no particular order, and its canonical text: sorted keys, no spaces.
SMALL = {"name": "x", "schema_version": 1, "embodiment": "widowx", "control_rate_hz": 5, "backend": "scripted_expert",
         "chunk": {"length": 1, "execute": 1},
         "action": {"kind": "joint_position", "axes": [{"name": "j", "unit": "rad", "low": -1, "high": 1}]}}
SMALL_CANONICAL = ('{"action_rotation":%s,"file":{"action":{"axes":[{"high":1,"low":-1,"name":"j","unit":"rad"}],'
                   '"kind":"joint_position"},"backend":"scripted_expert","chunk":{"execute":1,"length":1},'
                   '"control_rate_hz":5,"embodiment":"widowx","name":"x","schema_version":1}}')


def test_the_digest_hashes_the_files_fields_and_the_rotation_in_canonical_json():
    """Records carry the digest (config_hash): its recipe is fixed, so a record matches its config file across
    versions of this package and without it."""
    config = parse_policy_config(SMALL, source=SOURCE)
    assert config.digest() == hashlib.sha256((SMALL_CANONICAL % "null").encode()).hexdigest()[:16]
    for rotation in ROTATION_CONVENTIONS:  # a rotation convention given on the command line replaces the file's
        rotated = replace(config, action=replace(config.action, rotation=rotation))
        assert rotated.digest() == hashlib.sha256((SMALL_CANONICAL % f'"{rotation}"').encode()).hexdigest()[:16]


def test_the_digest_does_not_depend_on_the_order_of_the_fields():
    data = config_data()
    reordered = {key: data[key] for key in reversed(data)}
    reordered["server"] = {key: data["server"][key] for key in reversed(data["server"])}
    reordered["action"]["axes"] = [{key: axis[key] for key in reversed(axis)} for axis in data["action"]["axes"]]
    assert list(reordered) != list(data)
    assert parse_policy_config(reordered, source=SOURCE).digest() == parse_policy_config(data, source=SOURCE).digest()


def test_a_config_with_sections_given_as_other_mappings_has_the_digest_of_the_same_dicts():
    """The parser takes any mapping as a section; the digest reads the fields, not the mapping's type."""
    digests = []
    for port in (8000, 8001):
        data = config_data()
        data["server"] = dict(data["server"], port=port)
        as_dicts = parse_policy_config(data, source=SOURCE).digest()
        data["server"] = MappingProxyType(data["server"])
        assert parse_policy_config(data, source=SOURCE).digest() == as_dicts
        digests.append(as_dicts)
    assert digests[0] != digests[1]  # the section's values count
