"""Policy configs: the shipped ones load, and every mistake is one error naming the file and the field."""

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.policies.config import ROTATION_CONVENTIONS, load_policy_config
from ladder_ros.policies.factory import PolicyProvider, check_policy, load_policy, policy_config_path, policy_names
from tests.policy_fixtures import AXES, config_data, make_config, write_config


def test_the_shipped_configs_load_with_the_papers_numbers():
    assert {"bridge_pi0_server", "droid_pi05_server", "local_pi0", "scripted_expert"} <= set(policy_names())
    bridge, droid = load_policy("bridge_pi0_server"), load_policy("droid_pi05_server")
    # Appendix A: WidowX chunk 5, first 4 executed, 5 Hz; Franka chunk 15, 8 executed, 15 Hz.
    assert (bridge.chunk_length, bridge.execute_steps, bridge.control_rate_hz) == (5, 4, 5.0)
    assert (droid.chunk_length, droid.execute_steps, droid.control_rate_hz) == (15, 8, 15.0)
    assert bridge.action.rotation == "sxyz_axis_angle" and bridge.action.gripper == "open_fraction"
    assert droid.action.kind == "joint_position" and droid.action.dim == 8 and droid.state_dim == 8
    assert droid.server.port == 8000 and bridge.server.uri == "ws://127.0.0.1:8000"
    assert [c.key for c in droid.cameras] == ["observation/exterior_image_1_left", "observation/wrist_image_left"]
    assert load_policy("scripted_expert").simulation_only
    local = load_policy("local_pi0")
    assert local.backend == "transformers" and local.statistics_from_processor
    assert ROTATION_CONVENTIONS == ("euler_xyz", "sxyz_axis_angle", "axis_angle")


def test_names_and_paths_resolve_and_unknown_names_list_the_valid_ones(tmp_path):
    path = write_config(tmp_path / "mine.yaml", config_data(name="mine"))
    assert load_policy(str(path)).name == "mine" and policy_config_path(str(path)) == path
    with pytest.raises(ConfigError, match="unknown policy 'bridge_pi0'; valid: bridge_pi0_server, "):
        load_policy("bridge_pi0")
    with pytest.raises(ConfigError, match="missing.yaml: policy config not found"):
        load_policy(str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="unknown expert noise"):
        check_policy("scripted_expert", noise="loud")


@pytest.mark.parametrize("changes, where, why", [
    ({"chunk": {"length": 5, "execute": 6}}, "chunk.execute", "must be <= 5"),
    ({"control_rate_hz": 15}, "control_rate_hz", "the widowx preset runs at 5 Hz"),
    ({"embodiment": "ur5"}, "embodiment", "must be one of franka, widowx"),
    ({"backend": "grpc"}, "backend", "must be one of openpi, transformers, scripted_expert"),
    ({"schema_version": 2}, "schema_version", "unsupported 2"),
    ({"cameras": [{"name": "a", "key": "k", "height": 32, "width": 32, "resize": "crop"}]}, "cameras[0].resize",
     "must be one of resize_with_pad, resize, none"),
    ({"state": [{"key": "s", "source": "joint_positions"}]}, "state[0].size", "missing required field"),
    ({"state": [{"key": "s", "source": "ee_euler", "size": 4}]}, "state[0].size", "ee_euler has 3 entries"),
    ({"state": [{"key": "s", "source": "ee_euler"}]}, "state[0].reference", "missing required field"),
    ({"state": [{"key": "s", "source": "ee_euler", "reference": "top_down", "angles": "rpy"}]}, "state[0].angles",
     "must be one of sxyz, euler_xyz"),
    ({"seam": {"max_joint_rad": 0.1}}, "seam.max_joint_rad", "seam bounds are max_translation_m, max_rotation_rad"),
    ({"statistics": {"mode": "mean_std", "state": {"mean": [0] * 7, "std": [1] * 7},
                     "action": {"mean": [0] * 7, "std": [0] * 7}}}, "statistics.action.std", "must be positive"),
    ({"state": [{"key": "s", "source": "torque"}]}, "state[0].source", "must be one of joint_positions"),
    ({"normalization": {"mode": "mean_std", "state": {"mean": [0] * 7, "std": [1] * 7},
                        "action": {"mean": [0] * 7, "std": [1] * 7}}},
     "normalization", "only a local model is normalised here"),
    ({"server": {"port": 70000}}, "server.port", "must be <= 65535"),
    ({"server": {"prot": 8000}}, "server.prot", "unknown field"),
    ({"extra": 1}, "extra", "unknown field"),
    ({"max_observation_age_s": 0}, "max_observation_age_s", "must be positive"),
    ({"model": {"path": "/models/x"}}, "model", "only the transformers backend loads a local model"),
    ({"simulation_only": "yes"}, "simulation_only", "must be true or false"),
])
def test_a_bad_field_is_one_error_naming_file_and_field(tmp_path, changes, where, why):
    path = write_config(tmp_path / "bad.yaml", config_data(**changes))
    with pytest.raises(ConfigError) as caught:
        load_policy_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {where}: ") and why in message, message


@pytest.mark.parametrize("action_changes, where, why", [
    ({"rotation": "quaternion"}, "action.rotation", "must be one of euler_xyz, sxyz_axis_angle, axis_angle"),
    ({"gripper": None}, "action.gripper", "missing required field"),
    ({"axes": AXES[:6]}, "action.axes", "an ee_delta action has 7 axes"),
    ({"axes": [dict(AXES[0], low=0.2)] + AXES[1:]}, "action.axes[0].high", "must be greater than low (0.2)"),
    ({"axes": [dict(AXES[0], low="a")] + AXES[1:]}, "action.axes[0].low", "must be a finite number"),
    ({"axes": [AXES[0]] * 7}, "action.axes", "'ee_dx' appears twice"),
    ({"kind": "joint_position"}, "action.rotation", "only ee_delta actions have a rotation convention"),
])
def test_action_fields_are_checked(tmp_path, action_changes, where, why):
    action = dict(config_data()["action"])
    for key, value in action_changes.items():
        if value is None:
            action.pop(key)
        else:
            action[key] = value
    path = write_config(tmp_path / "bad.yaml", config_data(action=action))
    with pytest.raises(ConfigError) as caught:
        load_policy_config(path)
    assert str(caught.value).startswith(f"{path}: {where}: ") and why in str(caught.value), str(caught.value)


def test_a_local_model_config_needs_its_statistics_in_shape(tmp_path):
    local = {"backend": "transformers", "server": None, "model": {"path": "tiny"},
             "normalization": {"mode": "quantile", "state": {"q01": [0] * 7, "q99": [1] * 7},
                               "action": {"q01": [0] * 7, "q99": [1] * 6}}}
    path = write_config(tmp_path / "local.yaml", config_data(**local))
    with pytest.raises(ConfigError, match=r"local.yaml: normalization.action.q99: must have 7 entries"):
        load_policy_config(path)
    local["normalization"]["action"]["q99"] = [1] * 7
    config = load_policy_config(write_config(path, config_data(**local)))
    assert config.model.path == str(tmp_path / "tiny")  # relative to the config file
    normalization = config.normalization
    assert normalization.normalize_state(np.full(7, 0.25)).tolist() == [-0.5] * 7  # q01..q99 -> [-1, 1]
    assert normalization.unnormalize_action(np.full(7, -0.5)).tolist() == [0.25] * 7
    with pytest.raises(ConfigError, match="normalization: must be none, processor or a mapping"):
        load_policy_config(write_config(path, config_data(**dict(local, normalization="auto"))))


def test_yaml_errors_name_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("schema_version: 1\nname: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: line \d+, column \d+: invalid YAML"):
        load_policy_config(path)


def test_a_provider_builds_the_scripted_expert_per_episode_and_refuses_a_source():
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path

    task = load_suite(share_path("config", "suites", "tabletop.yaml")).tasks[0]
    provider = PolicyProvider.load("scripted_expert", noise="off")
    assert provider.reads_privileged and provider.per_episode
    policy = provider.episode_policy(task, seed=1)
    assert policy.name == "scripted_expert" and policy.config.execute_steps == 1
    with pytest.raises(ConfigError, match="builds one policy per episode"):
        provider.source()
    assert make_config().period_s == pytest.approx(0.2)
