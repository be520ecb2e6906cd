"""The full verify path on a tiny randomly initialised transformers VLM, on the CPU, offline.

The models are built by a fixture from configs (``tests/vlm_fixtures/tiny_vlm.py``) and saved like a
real checkpoint; the backend loads them through ``AutoProcessor`` / ``AutoModelForImageTextToText``
with ``local_files_only``. One model's output head is programmed to answer with a fixed count, so
the count travels from generation through parsing to the count rule; the other is left random and
babbles, which must come out as "not complete" with the babble recorded.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from ladder_ros.core.observation import Observation  # noqa: E402
from ladder_ros.core.task import Subgoal  # noqa: E402
from ladder_ros.core.verification import VerificationRequest  # noqa: E402
from ladder_ros.vlm import BackendError, VLMConfig, Verifier, make_components  # noqa: E402
from tests.vlm_fixtures.tiny_vlm import build_tiny_gemma3  # noqa: E402

REPLY = 'one carrot on the plate. {"count": 1}'
CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")


@pytest.fixture(scope="module")
def programmed_model(tmp_path_factory):
    return build_tiny_gemma3(tmp_path_factory.mktemp("tiny_programmed"), programmed_reply=REPLY)


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    return build_tiny_gemma3(tmp_path_factory.mktemp("tiny_random"), seed=3)


def local_components(path, **overrides):
    config = VLMConfig.from_mapping({"backend": "local", "model": str(path), "local.device": "cpu", **overrides})
    return make_components(config)


def camera_observation(image: np.ndarray) -> Observation:
    return Observation(step=12, image=image, aperture=0.9, ee_position=np.zeros(3), ee_euler=np.zeros(3),
                       joint_names=(), joint_positions=np.zeros(0))


def request(required: int) -> VerificationRequest:
    return VerificationRequest(request_id=1, step=12, plan_index=0, subgoal=CARROT, required=required,
                               reason="after_release")


def test_programmed_tiny_vlm_counts_through_the_full_verify_path(programmed_model):
    components = local_components(programmed_model)
    assert components.backend.device == "cpu"
    image = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    result = components.verifier.verify(request(1), camera_observation(image))
    assert result.raw_reply == REPLY and result.count == 1 and result.error is None
    assert Verifier.is_complete(result, request(1)) and not Verifier.is_complete(result, request(2))
    record = components.ledger.records[0]
    assert record.backend == "local" and record.finish_reason == "STOP"
    assert record.input_tokens > 100  # the deployed prompt, the subtask line and the image tokens
    assert record.output_tokens > 0 and record.cost_usd is None  # a local model has no listed price
    components.close()


@pytest.mark.gpu
def test_on_a_gpu_the_local_vlm_runs_in_half_precision_and_counts(programmed_model):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    components = local_components(programmed_model, **{"local.device": "auto"})
    assert components.backend.device == "cuda" and components.backend.dtype in (torch.bfloat16, torch.float16)
    image = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    result = components.verifier.verify(request(1), camera_observation(image))
    assert result.raw_reply == REPLY and result.count == 1 and result.error is None
    components.close()


def test_two_views_go_through_the_processor(programmed_model):
    components = local_components(programmed_model)
    main = np.zeros((40, 40, 3), np.uint8)
    wrist = np.full((30, 50, 3), 200, np.uint8)
    result = components.verifier.verify(request(1), [("main", main), ("wrist", wrist)])
    assert result.count == 1
    assert components.ledger.records[0].input_tokens > 100


def test_random_tiny_vlm_babbles_and_is_never_complete(random_model):
    components = local_components(random_model, max_output_tokens_verify=12)
    result = components.verifier.verify(request(1), camera_observation(np.zeros((32, 32, 3), np.uint8)))
    assert result.count is None and not Verifier.is_complete(result, request(1))
    assert result.raw_reply is not None and result.error
    record = components.ledger.records[0]
    assert record.raw_reply == result.raw_reply and record.failure_kind in ("truncated", "unparseable")
    assert record.output_tokens <= 12


def test_a_reply_cut_at_the_token_cap_is_truncated_even_with_the_whole_answer_in_it(programmed_model):
    from transformers import AutoTokenizer

    reply_tokens = len(AutoTokenizer.from_pretrained(programmed_model).encode(REPLY, add_special_tokens=False))
    image = np.zeros((32, 32, 3), np.uint8)
    # Exactly the reply's tokens: the whole answer is there, but the model never stopped by itself.
    cut = local_components(programmed_model, max_output_tokens_verify=reply_tokens)
    result = cut.verifier.verify(request(1), camera_observation(image))
    assert result.raw_reply == REPLY and result.count is None and result.error.startswith("truncated: ")
    assert cut.ledger.records[0].finish_reason == "MAX_TOKENS"
    # One token more and the model ends with its end-of-sequence token: STOP, an answer.
    whole = local_components(programmed_model, max_output_tokens_verify=reply_tokens + 1)
    assert whole.verifier.verify(request(1), camera_observation(image)).count == 1


def test_the_call_deadline_stops_a_local_generation(programmed_model):
    components = local_components(programmed_model, call_deadline_s=1e-4)
    result = components.verifier.verify(request(1), camera_observation(np.zeros((32, 32, 3), np.uint8)))
    assert result.count is None and result.error.startswith("timeout: ")
    assert components.ledger.records[0].finish_reason == "DEADLINE"


def test_missing_local_model_is_a_clear_error(tmp_path):
    with pytest.raises(BackendError, match="never downloaded"):
        local_components(tmp_path / "no_model_here")
