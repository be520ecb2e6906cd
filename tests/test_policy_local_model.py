"""The local transformers backend on a tiny random PI0 checkpoint built by a fixture (transformers' own PI0).

Loading from a local folder only, the device and dtype rules, seeded sampling (the same chunk for the
same seed, wherever it is computed), the normalisation statistics from the processor or the config, and
clear errors for a missing folder, a model that cannot predict actions and a config the model cannot serve.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.policies.chunked import ChunkedPolicy, noise_seed
from ladder_ros.policies.config import parse_policy_config
from ladder_ros.policies.observation import ObservationBundle
from tests.policy_fixtures import observation
from tests.policy_models import ACTIONS_MEAN, ACTIONS_STD, CHUNK_SIZE, STATE_MEAN, STATE_STD, tiny_pi0_policy

torch = pytest.importorskip("torch", reason="needs torch")
pytest.importorskip("transformers", reason="needs transformers (requirements/vlm.txt)")


def source_for(model_dir, **changes):
    from ladder_ros.policies.local_model import TransformersSource

    data = tiny_pi0_policy(model_dir)
    data.update(changes)
    return TransformersSource(parse_policy_config(data, source="tiny.yaml"))


@pytest.fixture(scope="module")
def source(tiny_pi0_model):
    return source_for(tiny_pi0_model)


def infer(source, seed, *, step=0, instruction="put the carrot on the plate"):
    return source.infer(ObservationBundle(observation(step), 0), instruction, seed).actions


def test_loads_locally_on_the_cpu_in_float32_and_warms_up(source):
    assert source.device == "cpu" and source.dtype == torch.float32
    assert type(source.model).__name__ == "PI0ForConditionalGeneration"
    assert source.warm_up_s is not None and source.warm_up_s > 0
    assert source.chunk_size == CHUNK_SIZE


def test_chunks_are_seeded_and_unnormalised_with_the_processors_statistics(source):
    first, again, other = infer(source, 7), infer(source, 7), infer(source, 8)
    assert first.shape == (CHUNK_SIZE, 7) and first.dtype == np.float64
    np.testing.assert_array_equal(first, again)  # same observation, same seed: the same chunk
    assert not np.array_equal(first, other)
    # A random model's outputs are noise of order one in normalised units: back in metres and radians they
    # sit within a few standard deviations of the dataset mean.
    deviation = np.abs(first - np.array(ACTIONS_MEAN)) / np.array(ACTIONS_STD)
    assert deviation.max() < 20 and deviation.mean() > 0.01
    assert not np.array_equal(infer(source, 7, instruction="put the spoon on the cloth"), first)


def test_explicit_statistics_in_the_config_replace_the_processors(tiny_pi0_model, source):
    wider = [s * 2 for s in ACTIONS_STD]
    explicit = source_for(tiny_pi0_model, normalization={
        "mode": "mean_std", "state": {"mean": STATE_MEAN, "std": STATE_STD},
        "action": {"mean": ACTIONS_MEAN, "std": wider}})
    np.testing.assert_allclose(infer(explicit, 3) - ACTIONS_MEAN, 2 * (infer(source, 3) - ACTIONS_MEAN), atol=1e-9)


def test_the_chunked_policy_executes_the_models_chunks(source):
    policy = ChunkedPolicy(source, source.config, seed=11)
    policy.reset("put the carrot on the plate")
    actions = [policy.act_tagged(ObservationBundle(observation(t), t), "put the carrot on the plate")
               for t in range(5)]
    assert [(a.chunk_id, a.index) for a in actions] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert all(a.command[6] in (-1.0, 1.0) and not a.held for a in actions)  # open fraction binarised at 0.5
    raw = infer(source, noise_seed(11, 0))  # the first chunk is the model's output for chunk seed (11, 0)
    np.testing.assert_allclose(actions[0].command[:6], raw[0, :6])


def test_a_missing_folder_and_a_model_without_actions_are_named(tiny_pi0_model, tmp_path):
    with pytest.raises(ConfigError, match=r"tiny.yaml: model.path: cannot load a local model from .*nowhere "
                                          r"\(weights are never downloaded"):
        source_for(tiny_pi0_model, model={"path": str(tmp_path / "nowhere"), "device": "cpu"})
    from tests.vlm_fixtures.tiny_vlm import build_tiny_gemma3

    chat_model = build_tiny_gemma3(tmp_path / "gemma3")
    with pytest.raises(ConfigError, match="model.path: Gemma3ForConditionalGeneration does not predict actions"):
        source_for(chat_model)


def test_a_config_the_model_cannot_serve_is_refused(tiny_pi0_model):
    with pytest.raises(ConfigError, match=r"tiny.yaml: chunk.length: the model at .* has 6 .*the config needs 9"):
        source_for(tiny_pi0_model, chunk={"length": 9, "execute": 4})
    with pytest.raises(ConfigError, match="normalization: the processor's statistics cover 7 state"):
        source_for(tiny_pi0_model, state=[{"key": "s", "source": "ee_position", "unit": "m"}])


def test_a_bad_observation_is_an_error_not_a_crash(source):
    broken = observation()
    broken = type(broken)(**{**broken.__dict__, "ee_position": np.array([np.nan, 0.0, 0.0])})
    with pytest.raises(LadderError, match="state ee_position has non-finite values"):
        source.infer(ObservationBundle(broken, 0), "go", 0)


@pytest.mark.gpu
def test_on_a_gpu_the_model_runs_in_bfloat16_or_float16(tiny_pi0_model):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    gpu = source_for(tiny_pi0_model, model={"path": str(tiny_pi0_model), "device": "auto"})
    assert gpu.device == "cuda" and gpu.dtype in (torch.bfloat16, torch.float16)
    chunk = infer(gpu, 1)
    assert chunk.shape == (CHUNK_SIZE, 7) and np.all(np.isfinite(chunk))


PI0_PEER = Path(__file__).resolve().parent.parent / ".venv-pi0" / "bin" / "python"


@pytest.mark.skipif(not PI0_PEER.exists(), reason="the real PI0ImageProcessor needs torchvision, which PyPI has only "
                    "as a CUDA build that does not import beside the CPU torch; scripts/setup.sh builds .venv-pi0 "
                    "over .venv-lerobot's matched torch/torchvision (requirements/pi0_processor.txt)")
def test_the_real_pi0_image_processor_runs_in_a_tiny_checkpoint_through_the_local_backend(tmp_path):
    """A real PI0 checkpoint carries transformers' PI0ImageProcessor (torchvision backend): the project's local
    backend loads such a checkpoint, its processor turns the camera image into PI0's 224-style padded input (here
    32x32), and the model's chunk comes out seeded and finite."""
    repo = Path(__file__).resolve().parent.parent
    result = subprocess.run([str(PI0_PEER), str(repo / "tests" / "pi0_processor_peer.py"), str(tmp_path / "model")],
                            capture_output=True, text=True, timeout=600, cwd=repo,
                            env={**os.environ, "PYTHONPATH": str(repo)})
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["image_processor"] == "PI0ImageProcessor"
    assert seen["pixel_values"] == [1, 3, 32, 32]  # resized to fit, padded to the configured square
    assert seen["chunk"] == [CHUNK_SIZE, 7] and seen["finite"] and seen["seeded"]
    assert seen["warm_up_s"] > 0
