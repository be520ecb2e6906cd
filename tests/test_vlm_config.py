"""The typed VLM configuration: validated on construction, errors that name the bad value."""

from __future__ import annotations

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.vlm import make_components
from ladder_ros.vlm.config import GeminiSettings, LocalSettings, VLMConfig


def test_defaults_are_the_papers_settings():
    config = VLMConfig()
    assert config.backend == "gemini" and config.model_name == "gemini-3.7-flash"
    assert config.max_output_tokens_verify == 2048 and config.max_output_tokens_plan == 8192
    assert config.gemini.thinking_budget is None


@pytest.mark.parametrize("kwargs, fragment", [
    ({"backend": "openai"}, "unknown backend 'openai'"),
    ({"backend": "local"}, "needs model"),
    ({"backend": "replay"}, "needs replay_path"),
    ({"max_output_tokens_verify": 0}, "max_output_tokens_verify must be a positive integer, got 0"),
    ({"robot": " "}, "robot must be a non-empty string"),
    ({"replay_match": "fuzzy"}, "unknown replay_match 'fuzzy'"),
])
def test_bad_values_are_named(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        VLMConfig(**kwargs)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"timeout_s": 0}, "gemini.timeout_s must be a positive number, got 0"),
    ({"timeout_s": float("nan")}, "gemini.timeout_s"),
    ({"max_attempts": 0}, "gemini.max_attempts"),
    ({"initial_backoff_s": -1}, "gemini.initial_backoff_s"),
    ({"thinking_budget": -2}, "gemini.thinking_budget"),
    ({"thinking_level": "extreme"}, "unknown gemini.thinking_level 'extreme'"),
    ({"base_url": "localhost:8000"}, "gemini.base_url must start with http"),
    ({"include_thoughts": "yes"}, "gemini.include_thoughts"),
])
def test_bad_gemini_settings_are_named(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        GeminiSettings(**kwargs)


def test_bad_local_settings_are_named():
    with pytest.raises(ConfigError, match="unknown local.device 'tpu'"):
        LocalSettings(device="tpu")


def test_from_mapping_takes_nested_and_dotted_keys_and_empty_strings_as_unset():
    config = VLMConfig.from_mapping({"backend": "gemini", "model": "", "gemini.timeout_s": 5.0,
                                     "gemini": {"max_attempts": 2, "base_url": ""}, "local.device": "cpu",
                                     "record_path": ""})
    assert config.model is None and config.record_path is None
    assert config.gemini.timeout_s == 5.0 and config.gemini.max_attempts == 2 and config.gemini.base_url is None
    assert config.local.device == "cpu"


def test_from_mapping_rejects_unknown_keys_listing_valid_ones():
    with pytest.raises(ConfigError, match="unknown VLM config key 'temperature'"):
        VLMConfig.from_mapping({"temperature": 0.7})
    with pytest.raises(ConfigError, match="unknown VLM config key 'gemini.key'.*gemini.api_key_env"):
        VLMConfig.from_mapping({"gemini.key": "abc"})


def test_make_components_shares_one_backend_and_ledger():
    components = make_components(VLMConfig(backend="oracle", robot="Franka Panda robot arm"))
    assert components.verifier.backend is components.planner.backend is components.next_subtask.backend
    assert components.verifier.ledger is components.planner.ledger
    assert components.planner.robot == "Franka Panda robot arm"
    assert components.verifier.name == "oracle"


def test_gemini_without_a_key_fails_naming_the_variable(monkeypatch):
    from ladder_ros.vlm import BackendError

    monkeypatch.delenv("LADDER_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(BackendError, match="LADDER_TEST_NO_SUCH_KEY"):
        make_components(VLMConfig(gemini=GeminiSettings(api_key_env="LADDER_TEST_NO_SUCH_KEY")))


def test_the_call_deadline_is_one_validated_number():
    assert VLMConfig().call_deadline_s == 50.0
    with pytest.raises(ConfigError, match="call_deadline_s must be a positive number, got 0"):
        VLMConfig(call_deadline_s=0)
    with pytest.raises(ConfigError, match="call_deadline_s"):
        VLMConfig.from_mapping({"call_deadline_s": float("inf")})
    assert VLMConfig.from_mapping({"call_deadline_s": 12.5}).call_deadline_s == 12.5


def test_the_orchestrator_must_wait_longer_than_a_vlm_verifier_may_take():
    from ladder_ros.specs.parameters import check_node_parameters, check_verifier_deadline

    orchestrator = check_node_parameters("orchestrator", {})
    verifier = check_node_parameters("vlm_verifier", {"backend": "gemini"})
    # Defaults: 60 s > 5 s (observation) + 50 s (call deadline).
    check_verifier_deadline(orchestrator, verifier)
    slow = check_node_parameters("vlm_verifier", {"backend": "gemini", "call_deadline_s": 58.0})
    with pytest.raises(ConfigError, match=r"orchestrator.verifier_abort_after_s = 60 s must exceed "
                                          r"vlm_verifier.observation_wait_s \+ vlm_verifier.call_deadline_s = 63 s"):
        check_verifier_deadline(orchestrator, slow)
    # The planner's timeout is held to the same bound when the plan comes from the planner.
    planned = check_node_parameters("orchestrator", {"plan_source": "planner", "planner_timeout_s": 50.0})
    with pytest.raises(ConfigError, match="planner_timeout_s = 50 s must exceed"):
        check_verifier_deadline(planned, verifier)
    # The oracle and replay answer at once: nothing to check.
    check_verifier_deadline(check_node_parameters("orchestrator", {"verifier_abort_after_s": 1.0}),
                            check_node_parameters("vlm_verifier", {"backend": "oracle"}))


def test_a_graph_whose_orchestrator_would_give_up_on_its_verifier_does_not_start():
    from ladder_ros.bringup.graph import load_graph

    graph = load_graph("widowx")
    with pytest.raises(ConfigError, match="verifier_abort_after_s = 30 s must exceed"):
        graph.node_parameters("real", overrides={"vlm_verifier": {"backend": "gemini"},
                                                 "orchestrator": {"verifier_abort_after_s": 30.0}})
    params = graph.node_parameters("real", overrides={"vlm_verifier": {"backend": "gemini", "call_deadline_s": 20.0},
                                                      "orchestrator": {"verifier_abort_after_s": 30.0}})
    assert params["vlm_verifier"]["call_deadline_s"] == 20.0
