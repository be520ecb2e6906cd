"""Every field of a policy config, one rule at a time: defaults, bounds on both sides, types, and the exact error.

The config is what stands between a lab's YAML and the chunk executor in front of the arm: a field
left out must take its documented default, a value one past a bound must be refused and one at it
accepted, and each refusal names the file and the dotted key (``test.yaml: server.port: ...``).
The tables below go over every such field; the shipped configs are in tests/test_policy_config.py.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.policies.config import ServerSettings, load_policy_config, parse_policy_config
from tests.policy_fixtures import config_data, write_config

SOURCE = "test.yaml"


def transformers_data(**model) -> dict:
    """The test config as a local-model (transformers) policy: a model section instead of a server."""
    return config_data(backend="transformers", server=None, model={"path": "weights", **model})


def with_value(data: dict, path: tuple, value) -> dict:
    """``data`` with the field at ``path`` (keys and list indices) set to ``value`` (``...`` removes it)."""
    data = copy.deepcopy(data)
    node = data
    for part in path[:-1]:
        if isinstance(part, str) and part not in node:
            node[part] = {}
        node = node[part]
    if value is ...:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return data


def read_back(config, path: tuple):
    """The parsed value of the field at ``path`` (sections are attributes, lists are tuples)."""
    names = {"chunk": {"length": "chunk_length", "execute": "execute_steps"}}
    node = config
    if path[0] in names:
        return getattr(config, names[path[0]][path[1]])
    for part in path:
        node = node[part] if isinstance(part, int) else getattr(node, part)
    return node


def refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as refused:
        parse_policy_config(data, source=SOURCE)
    return str(refused.value)


def dotted(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


# (base config, field path, low, high): integers, inclusive bounds
INTEGER_FIELDS = [
    (config_data, ("server", "port"), 1, 65535),
    (config_data, ("server", "max_consecutive_errors"), 0, 1000),
    (config_data, ("cameras", 0, "height"), 8, 4096),
    (config_data, ("cameras", 0, "width"), 8, 4096),
    (lambda: with_value(config_data(), ("chunk", "execute"), 1), ("chunk", "length"), 1, 1000),
    (lambda: config_data(state=[{"key": "s", "source": "joint_positions", "size": 7}]), ("state", 0, "size"), 1, 64),
    (lambda: config_data(state=[{"key": "s", "source": "zeros", "size": 1}]), ("state", 0, "size"), 1, 64),
    (transformers_data, ("model", "num_inference_steps"), 1, 1000),
    (transformers_data, ("model", "threads"), 0, 1024),
]


@pytest.mark.parametrize("base, path, low, high", INTEGER_FIELDS, ids=lambda v: dotted(v) if isinstance(v, tuple)
                         else None)
def test_an_integer_field_takes_both_its_bounds_and_refuses_one_past_either(base, path, low, high):
    key = dotted(path)
    for value in (low, high, (low + high) // 2):
        assert read_back(parse_policy_config(with_value(base(), path, value), source=SOURCE), path) == value
    assert refusal(with_value(base(), path, low - 1)) == f"{SOURCE}: {key}: must be >= {low}, got {low - 1}"
    assert refusal(with_value(base(), path, high + 1)) == f"{SOURCE}: {key}: must be <= {high}, got {high + 1}"
    for wrong in (True, 2.0, "8", [8]):
        assert refusal(with_value(base(), path, wrong)) == f"{SOURCE}: {key}: must be an integer, got {wrong!r}"


def test_the_chunk_executes_at_most_its_length():
    for length in (1, 5, 15):
        data = with_value(with_value(config_data(), ("chunk", "length"), length), ("chunk", "execute"), length)
        config = parse_policy_config(data, source=SOURCE)
        assert (config.chunk_length, config.execute_steps) == (length, length)
        assert refusal(with_value(data, ("chunk", "execute"), length + 1)) == \
            f"{SOURCE}: chunk.execute: must be <= {length}, got {length + 1}"
    assert refusal(with_value(config_data(), ("chunk", "execute"), 0)) == \
        f"{SOURCE}: chunk.execute: must be >= 1, got 0"


# (base config, field path): finite numbers that must be positive
POSITIVE_FIELDS = [
    (config_data, ("server", "connect_timeout_s")),
    (config_data, ("server", "request_timeout_s")),
    (config_data, ("server", "backoff_initial_s")),
    (config_data, ("server", "backoff_max_s")),
    (config_data, ("server", "max_message_mb")),
    (config_data, ("max_observation_age_s",)),
    (config_data, ("ood_sigmas",)),
    (config_data, ("seam", "max_translation_m")),
    (config_data, ("seam", "max_rotation_rad")),
]


@pytest.mark.parametrize("base, path", POSITIVE_FIELDS, ids=lambda v: dotted(v) if isinstance(v, tuple) else None)
def test_a_positive_number_field_refuses_zero_negatives_and_non_numbers(base, path):
    key = dotted(path)
    for value in (0.75, 1, 0.25):  # each lies between the test server's backoff_initial_s (0.2) and backoff_max_s (1.0)
        parsed = read_back(parse_policy_config(with_value(base(), path, value), source=SOURCE), path)
        assert parsed == value and isinstance(parsed, float)
    for value in (0, 0.0, -1, -0.5):
        assert refusal(with_value(base(), path, value)) == f"{SOURCE}: {key}: must be positive, got {value}"
    for value in (math.nan, math.inf, -math.inf, True, "1", None, [1.0]):
        assert refusal(with_value(base(), path, value)) == f"{SOURCE}: {key}: must be a finite number, got {value!r}"


def test_the_control_rate_is_a_positive_number_and_the_embodiments():
    assert refusal(config_data(control_rate_hz=0)) == f"{SOURCE}: control_rate_hz: must be positive, got 0"
    assert refusal(config_data(control_rate_hz=math.nan)) == \
        f"{SOURCE}: control_rate_hz: must be a finite number, got nan"
    assert refusal(config_data(control_rate_hz=5.5)) == \
        f"{SOURCE}: control_rate_hz: the widowx preset runs at 5 Hz (paper Appendix A), got 5.5"
    assert parse_policy_config(config_data(control_rate_hz=5.0), source=SOURCE).control_rate_hz == 5.0


def test_the_backoff_may_not_shrink():
    data = with_value(with_value(config_data(), ("server", "backoff_initial_s"), 1.0), ("server", "backoff_max_s"), 1.0)
    assert parse_policy_config(data, source=SOURCE).server.backoff_max_s == 1.0
    assert refusal(with_value(data, ("server", "backoff_max_s"), 0.5)) == \
        f"{SOURCE}: server.backoff_max_s: must be >= backoff_initial_s (1.0), got 0.5"


def test_every_server_field_left_out_takes_the_documented_default():
    documented = {"host": "127.0.0.1", "port": 8000, "api_key_env": "", "connect_timeout_s": 5.0,
                  "request_timeout_s": 5.0, "backoff_initial_s": 0.5, "backoff_max_s": 8.0, "max_message_mb": 64.0,
                  "max_consecutive_errors": 5}
    for server in ({}, ...):  # an empty section, and no section at all
        config = parse_policy_config(with_value(config_data(), ("server",), server), source=SOURCE)
        assert {name: getattr(config.server, name) for name in documented} == documented
        assert config.server == ServerSettings()


def test_every_optional_field_left_out_takes_its_default():
    data = config_data(prompt_key=None, max_observation_age_s=None)
    del data["cameras"][0]["topic"], data["cameras"][0]["resize"], data["action"]["key"]
    for entry in data["state"]:
        entry.pop("unit")
    config = parse_policy_config(data, source=SOURCE)
    assert (config.prompt_key, config.max_observation_age_s, config.ood_sigmas, config.description) == \
        ("prompt", 0.5, 4.0, "")
    assert (config.cameras[0].topic, config.cameras[0].resize, config.action.key) == \
        ("camera/image_raw", "resize_with_pad", "actions")
    assert [s.unit for s in config.state] == ["", "", ""] and not config.simulation_only
    model = parse_policy_config(transformers_data(), source=SOURCE).model
    assert (model.device, model.dtype, model.num_inference_steps, model.threads) == ("auto", "auto", None, 0)
    assert parse_policy_config(transformers_data(num_inference_steps=None), source=SOURCE).model.num_inference_steps \
        is None  # the model's own number of steps


# (base config, field path, default when left out or None for required, may be empty)
STRING_FIELDS = [
    (config_data, ("name",), None, False),
    (config_data, ("prompt_key",), "prompt", False),
    (config_data, ("description",), "", True),
    (config_data, ("server", "host"), "127.0.0.1", False),
    (config_data, ("server", "api_key_env"), "", True),
    (config_data, ("cameras", 0, "name"), None, False),
    (config_data, ("cameras", 0, "topic"), "camera/image_raw", False),
    (config_data, ("cameras", 0, "key"), None, False),
    (config_data, ("state", 0, "key"), None, False),
    (config_data, ("state", 0, "unit"), "", True),
    (config_data, ("action", "key"), "actions", False),
    (config_data, ("action", "axes", 0, "name"), None, False),
    (config_data, ("action", "axes", 0, "unit"), None, False),
    (transformers_data, ("model", "path"), None, False),
]


@pytest.mark.parametrize("base, path, default, empty", STRING_FIELDS,
                         ids=lambda v: dotted(v) if isinstance(v, tuple) else None)
def test_a_string_field_has_its_default_or_is_required_and_refuses_null_and_blanks(base, path, default, empty):
    key = dotted(path)
    left_out = with_value(base(), path, ...)
    if default is None:
        assert refusal(left_out) == f"{SOURCE}: {key}: missing required field"
    else:
        assert read_back(parse_policy_config(left_out, source=SOURCE), path) == default
    kind = "a string" if empty else "a non-empty string"
    for wrong in (None, 5, True, ["x"]):  # null is refused, not read as the default
        assert refusal(with_value(base(), path, wrong)) == f"{SOURCE}: {key}: must be {kind}, got {wrong!r}"
    for blank in ("", "   "):
        if empty:
            assert read_back(parse_policy_config(with_value(base(), path, blank), source=SOURCE), path) == blank
        else:
            assert refusal(with_value(base(), path, blank)) == f"{SOURCE}: {key}: must be {kind}, got {blank!r}"


@pytest.mark.parametrize("base, path, choices", [
    (transformers_data, ("model", "device"), ("auto", "cpu", "cuda")),
    (transformers_data, ("model", "dtype"), ("auto", "float32", "bfloat16", "float16")),
    (config_data, ("cameras", 0, "resize"), ("resize_with_pad", "resize", "none")),
], ids=lambda v: dotted(v) if isinstance(v, tuple) and isinstance(v[0], str) else None)
def test_a_choice_field_takes_each_choice_and_refuses_others_listing_them(base, path, choices):
    for choice in choices:
        assert read_back(parse_policy_config(with_value(base(), path, choice), source=SOURCE), path) == choice
    for wrong in ("CPU", "gpu", "auto "):
        assert refusal(with_value(base(), path, wrong)) == \
            f"{SOURCE}: {dotted(path)}: must be one of {', '.join(choices)}, got {wrong!r}"


def test_a_boolean_field_takes_only_true_or_false():
    assert parse_policy_config(config_data(simulation_only=True), source=SOURCE).simulation_only
    assert not parse_policy_config(config_data(simulation_only=False), source=SOURCE).simulation_only
    for wrong in (1, "true", None):
        assert refusal(with_value(config_data(), ("simulation_only",), wrong)) == \
            f"{SOURCE}: simulation_only: must be true or false, got {wrong!r}"


def test_a_section_or_list_of_the_wrong_shape_is_named():
    assert refusal(config_data(server=[1])) == f"{SOURCE}: server: expected a mapping, got list"
    assert refusal(config_data(cameras={"name": "a"})) == f"{SOURCE}: cameras: must be a list, got dict"
    assert refusal(config_data(cameras=["a"])) == f"{SOURCE}: cameras[0]: expected a mapping, got str"
    assert refusal(with_value(config_data(), ("action", "axes"), [])) == \
        f"{SOURCE}: action.axes: needs at least one axis"
    with pytest.raises(ConfigError) as not_a_mapping:
        parse_policy_config([1], source=SOURCE)
    assert str(not_a_mapping.value) == f"{SOURCE}: expected a mapping, got list"


def test_an_unknown_field_is_named_at_any_depth():
    for path in (("nmae",), ("server", "hots"), ("cameras", 0, "heigth"), ("state", 1, "angle"),
                 ("action", "axes", 2, "lo"), ("chunk", "lenght")):
        assert refusal(with_value(config_data(), path, 1)) == f"{SOURCE}: {dotted(path)}: unknown field"
    assert refusal(with_value(transformers_data(), ("model", "revision"), "main")) == \
        f"{SOURCE}: model.revision: unknown field"


def test_a_model_path_is_read_from_the_config_files_folder_or_the_home_folder(tmp_path):
    base = tmp_path / "configs"
    elsewhere = "elsewhere/test.yaml"  # the source names another folder: the base is the one that counts
    relative = parse_policy_config(transformers_data(path="models/pi0"), source=elsewhere, base=base).model
    assert relative.path == str((base / "models" / "pi0").resolve())
    home = parse_policy_config(transformers_data(path="~/models/pi0"), source=elsewhere, base=base).model
    assert home.path == str(Path("~/models/pi0").expanduser()) and not home.path.startswith("~")
    absolute = parse_policy_config(transformers_data(path="/opt/pi0"), source=elsewhere, base=base).model
    assert absolute.path == "/opt/pi0"
    loaded = load_policy_config(write_config(base.mkdir() or base / "local.yaml", transformers_data(path="m")))
    assert loaded.model.path == str((base / "m").resolve()) and loaded.source == str(base / "local.yaml")


def test_loading_names_the_file_when_it_is_missing_or_not_yaml(tmp_path):
    with pytest.raises(ConfigError) as missing:
        load_policy_config(tmp_path / "none.yaml")
    assert str(missing.value) == f"{tmp_path / 'none.yaml'}: policy config not found"
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError) as bad:
        load_policy_config(broken)
    assert str(bad.value) == f"{broken}: line 2, column 1: invalid YAML: expected ',' or ']', but got '<stream end>'"


CAMERA = {"name": "primary", "topic": "camera/image_raw", "key": "observation/image", "height": 32, "width": 32}
ZEROS, ONES = [0.0] * 7, [1.0] * 7


def quantiles(state_q99=ONES, action_q99=ONES) -> dict:
    return {"mode": "quantile", "state": {"q01": ZEROS, "q99": state_q99}, "action": {"q01": ZEROS, "q99": action_q99}}


# Rules between fields: each broken one is refused with its exact message, naming the field to change.
CROSS_FIELD_REFUSALS = [
    (lambda: config_data(backend="scripted_expert", server=None, simulation_only=False),
     "simulation_only: the scripted expert reads the simulator's privileged state: it must be simulation_only: true"),
    (lambda: config_data(cameras=[CAMERA, {**CAMERA, "key": "other"}]),
     "cameras: camera names and keys must be unique, 'primary' appears twice"),
    (lambda: config_data(cameras=[CAMERA, {**CAMERA, "name": "other"}]),
     "cameras: camera names and keys must be unique, 'observation/image' appears twice"),
    (lambda: config_data(backend="transformers", model={"path": "m"}),
     "server: only the openpi backend talks to a server (backend is transformers)"),
    (lambda: config_data(model={"path": "m"}),
     "model: only the transformers backend loads a local model (backend is openpi)"),
    (lambda: with_value(transformers_data(), ("cameras",), ...),
     "cameras: a transformers policy needs at least one camera"),
    (lambda: config_data(cameras=None, state=None), "state: a learned policy needs cameras or state entries to read"),
    (lambda: with_value(transformers_data(), ("normalization",), "zscore"),
     "normalization: must be none, processor or a mapping (mode, state, action), got 'zscore'"),
    (lambda: config_data(normalization="processor"),
     "normalization: only a local model is normalised here (a server normalises itself): use normalization: none"),
    (lambda: {**transformers_data(), "normalization": "processor", "statistics": quantiles()},
     "statistics: the normalization statistics are the guard's already; give statistics only when the server "
     "normalises (normalization: none)"),
    (lambda: config_data(statistics=quantiles(action_q99=[0.0, *ONES[1:]])),
     "statistics.action.q99: entry 0 must be greater than q01 (0.0), got 0.0"),
    (lambda: config_data(statistics=quantiles(state_q99=ONES[:6])),
     "statistics.state.q99: must have 7 entries (one per dimension), got 6"),
    (lambda: config_data(statistics={"mode": "mean_std", "state": {"mean": ZEROS, "std": [*ONES[:6], math.nan]},
                                     "action": {"mean": ZEROS, "std": ONES}}),
     "statistics.state.std: must be a list of finite numbers, got [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, nan]"),
    (lambda: with_value(config_data(), ("action", "gripper"), "binary"),
     "action.gripper: must be one of open_fraction, signed, got 'binary'"),
    (lambda: with_value(with_value(config_data(), ("action", "kind"), "joint_position"), ("action", "gripper"), ...),
     "action.rotation: only ee_delta actions have a rotation convention"),
    (lambda: with_value(config_data(), ("action", "axes", 1, "name"), "ee_dx"),
     "action.axes: axis names must be unique, 'ee_dx' appears twice"),
    (lambda: with_value(config_data(), ("action", "axes", 0, "high"), -0.1),
     "action.axes[0].high: must be greater than low (-0.1), got -0.1"),
    (lambda: with_value(config_data(), ("action", "axes"), config_data()["action"]["axes"][:6]),
     "action.axes: an ee_delta action has 7 axes (dx, dy, dz in m, three rotation numbers in rad, gripper), got 6"),
    (lambda: config_data(schema_version="1"), "schema_version: unsupported '1'; this version reads 1"),
]


@pytest.mark.parametrize("build, message", CROSS_FIELD_REFUSALS, ids=lambda v: v.split(":")[0] if isinstance(v, str)
                         else None)
def test_a_broken_rule_between_fields_is_refused_naming_the_field_to_change(build, message):
    assert refusal(build()) == f"{SOURCE}: {message}"


def test_the_rules_between_fields_accept_what_they_allow():
    assert parse_policy_config(config_data(state=None), source=SOURCE).cameras  # cameras alone are inputs enough
    assert parse_policy_config(config_data(cameras=None), source=SOURCE).state  # and so is state alone
    below = {"mean": [5.0] * 7, "std": ONES}
    statistics = {"mode": "mean_std", "state": below, "action": below}
    parsed = parse_policy_config(config_data(statistics=statistics), source=SOURCE).statistics
    assert parsed.mode == "mean_std" and parsed.state.second == tuple(ONES)  # a deviation below the mean is fine
    parsed = parse_policy_config(config_data(statistics=quantiles()), source=SOURCE).statistics
    assert parsed.action.first == tuple(ZEROS) and parsed.action.second == tuple(ONES)
    expert = parse_policy_config(config_data(backend="scripted_expert", server=None), source=SOURCE)
    assert expert.simulation_only and expert.server is None
