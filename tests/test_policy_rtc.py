"""Real-time chunking (RTC) guidance: the soft mask and guidance weight against the paper's formulas, the
checks on :class:`Guidance`, and guided sampling on a tiny random PI0 (transformers' own, built by a fixture).

Black, Galliker and Levine 2025 (arXiv 2506.07339): Eq. 2-4 (the guided velocity and its clipped weight) and
Eq. 5 (the soft mask).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.policies.guidance import Guidance, GuidedChunkSource, guidance_weight, soft_mask

E = math.e
INSTRUCTION = "put the carrot on the plate"


def paper_mask(horizon: int, d: int, s: int) -> list[float]:
    """Eq. 5 read literally, with the paper's H (chunk length), d (inference delay), s (execution horizon)."""
    weights = []
    for i in range(horizon):
        if i < d:
            weights.append(1.0)
        elif i < horizon - s:
            c = (horizon - s - i) / (horizon - s - d + 1)
            weights.append(c * (E ** c - 1) / (E - 1))
        else:
            weights.append(0.0)
    return weights


# --- the soft mask (pure numpy) ---------------------------------------------------------------------------

@pytest.mark.parametrize("horizon, d, s", [(50, 4, 25), (50, 0, 25), (50, 10, 10), (8, 3, 0), (6, 2, 3), (6, 0, 6),
                                           (1, 0, 0), (1, 1, 0)])
def test_the_soft_mask_is_the_papers_eq_5(horizon, d, s):
    # The prefix is the previous chunk's H - s actions not yet executed.
    weights = soft_mask(horizon, d, horizon - s)
    assert weights.shape == (horizon,) and weights.dtype == np.float64
    np.testing.assert_allclose(weights, paper_mask(horizon, d, s), rtol=1e-12, atol=0)


def test_the_soft_mask_at_its_boundaries():
    weights = soft_mask(10, 3, 7)
    assert weights[:3].tolist() == [1.0, 1.0, 1.0]  # frozen: the hard mask
    # First decaying step: c = (7 - 3) / (7 - 3 + 1) = 4/5; last: c = 1/5; then nothing.
    assert weights[3] == pytest.approx(0.8 * (math.exp(0.8) - 1) / (E - 1), rel=1e-12)
    assert weights[6] == pytest.approx(0.2 * (math.exp(0.2) - 1) / (E - 1), rel=1e-12)
    assert 0 < weights[6] < weights[5] < weights[4] < weights[3] < 1
    assert weights[7:].tolist() == [0.0, 0.0, 0.0]
    assert soft_mask(10, 4, 4).tolist() == [1.0] * 4 + [0.0] * 6  # everything overlapping is frozen
    assert soft_mask(10, 0, 0).tolist() == [0.0] * 10  # nothing to continue
    assert soft_mask(0, 0, 0).shape == (0,)


@pytest.mark.parametrize("args, message", [
    ((10, 5, 4), "0 <= frozen <= prefix_length <= chunk_length, got frozen=5, prefix_length=4"),
    ((10, -1, 4), "got frozen=-1"),
    ((3, 0, 4), "prefix_length=4, chunk_length=3"),
    ((10, 1.5, 4), "soft_mask frozen must be an integer, got 1.5"),
    ((10, True, 4), "soft_mask frozen must be an integer, got True"),
])
def test_the_soft_mask_refuses_inconsistent_lengths(args, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(")):
        soft_mask(*args)


def test_the_guidance_weight_is_eq_2_and_4_clipped_at_beta():
    def unclipped(tau):  # (1 - tau) / (tau r^2), r^2 = (1 - tau)^2 / (tau^2 + (1 - tau)^2)
        r2 = (1 - tau) ** 2 / (tau ** 2 + (1 - tau) ** 2)
        return (1 - tau) / (tau * r2)

    for tau in (0.2, 0.3, 0.5, 0.7, 0.8):
        assert guidance_weight(tau, 100.0) == pytest.approx(unclipped(tau), rel=1e-12)
    assert guidance_weight(0.5, 5.0) == pytest.approx(2.0)  # its smallest value
    assert guidance_weight(0.0, 5.0) == 5.0 and guidance_weight(1.0, 5.0) == 5.0  # unbounded there: beta
    assert guidance_weight(0.1, 5.0) == 5.0 and guidance_weight(0.9, 5.0) == 5.0  # 9.1 > beta
    assert guidance_weight(0.3, 0.0) == 0.0


# --- Guidance's checks --------------------------------------------------------------------------------------

def test_guidance_keeps_a_read_only_float64_copy():
    prefix = np.ones((3, 7), dtype=np.float32)
    guidance = Guidance(prefix, 2)
    prefix[0, 0] = 5.0
    assert guidance.prefix.dtype == np.float64 and guidance.prefix[0, 0] == 1.0
    assert guidance.length == 3 and guidance.frozen == 2 and guidance.max_weight == 5.0
    with pytest.raises(ValueError):
        guidance.prefix[0, 0] = 2.0
    np.testing.assert_array_equal(guidance.mask(6), soft_mask(6, 2, 3))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"prefix": [[0.0, np.nan], [0.0, 0.0]], "frozen": 1}, InvalidInputError,
     r"guidance prefix has 1 non-finite values \(first: nan at step 0, axis 1\)"),
    ({"prefix": [[0.0, 0.0], [np.inf, 0.0]], "frozen": 1}, InvalidInputError, "first: inf at step 1, axis 0"),
    ({"prefix": np.zeros((2, 3)), "frozen": 3}, InvalidInputError,
     r"guidance frozen must be in \[0, 2\] \(the prefix's length\), got 3"),
    ({"prefix": np.zeros((2, 3)), "frozen": -1}, InvalidInputError, r"must be in \[0, 2\].*got -1"),
    ({"prefix": np.zeros((2, 3)), "frozen": 1.0}, InvalidInputError, "frozen must be an integer .*got 1.0"),
    ({"prefix": np.zeros(3), "frozen": 0}, InvalidInputError, r"must be \(P, D\) actions, got shape \(3,\)"),
    ({"prefix": [["a"]], "frozen": 0}, InvalidInputError, "not an array of numbers"),
    ({"prefix": np.zeros((2, 3)), "frozen": 1, "max_weight": -1.0}, ConfigError,
     "max_weight must be finite and >= 0, got -1.0"),
    ({"prefix": np.zeros((2, 3)), "frozen": 1, "max_weight": float("nan")}, ConfigError, "got nan"),
])
def test_guidance_refuses_bad_values_naming_them(kwargs, error, message):
    with pytest.raises(error, match=message):
        Guidance(**kwargs)


def test_guidance_checks_the_chunk_length_and_the_action_axes():
    Guidance(np.zeros((6, 7)), 2).check(6, 7)
    Guidance(np.zeros((0, 3)), 0).check(6, 7)  # an empty prefix fits any policy
    with pytest.raises(InvalidInputError, match="guidance prefix has 7 actions, more than the chunk length 6"):
        Guidance(np.zeros((7, 7)), 2).check(6, 7)
    with pytest.raises(InvalidInputError, match="guidance prefix has 6 action axes, the policy 7"):
        Guidance(np.zeros((4, 6)), 2).check(6, 7)


# --- guided sampling on the tiny PI0 ------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="needs torch")
pytest.importorskip("transformers", reason="needs transformers (requirements/vlm.txt)")

from ladder_ros.policies.config import parse_policy_config  # noqa: E402
from ladder_ros.policies.observation import ObservationBundle  # noqa: E402
from tests.policy_fixtures import observation  # noqa: E402
from tests.policy_models import ACTIONS_MEAN, ACTIONS_STD, CHUNK_SIZE, tiny_pi0_policy  # noqa: E402

# Within this many dataset standard deviations (the model's normalised units) a guided chunk's frozen actions
# match the prefix. Measured on this tiny PI0 (random weights, 2 to 10 flow steps, prefixes of 3-6 actions
# with 2 or 3 frozen): at most 0.009 with its 2 steps, 0.035 with 10; the residue is the Jacobian of the
# model's one-step estimate differing from the identity and the soft-masked tail pulling on the same noise.
# Unguided, the same actions lie 1.2-3 standard deviations from the prefix (a random model's chunks are noise
# of order one in normalised units), so the bound tells the two apart by a factor of 20 or more.
FROZEN_TOLERANCE_SD = 0.05
UNGUIDED_AT_LEAST_SD = 0.5


def source_for(model_dir, **changes):
    from ladder_ros.policies.local_model import TransformersSource

    data = tiny_pi0_policy(model_dir)
    data.update(changes)
    return TransformersSource(parse_policy_config(data, source="tiny.yaml"))


@pytest.fixture(scope="module")
def source(tiny_pi0_model):
    return source_for(tiny_pi0_model)


def bundle():
    return ObservationBundle(observation(0), 0)


def previous_prefix(source, executed: int, seed: int = 3) -> np.ndarray:
    """The previous chunk (another seed) less its first ``executed`` actions: what had not run yet."""
    return source.infer(bundle(), INSTRUCTION, seed).actions[executed:]


def frozen_error_sd(actions: np.ndarray, guidance: Guidance) -> float:
    d = guidance.frozen
    return float(np.max(np.abs(actions[:d] - guidance.prefix[:d]) / np.asarray(ACTIONS_STD)))


def test_the_source_is_a_guided_chunk_source(source):
    assert isinstance(source, GuidedChunkSource)


def test_an_empty_prefix_gives_inferred_chunk(source):
    for seed in (0, 7):
        plain = source.infer(bundle(), INSTRUCTION, seed).actions
        guided = source.infer_guided(bundle(), INSTRUCTION, seed, Guidance(np.zeros((0, 7)), 0))
        assert guided.actions.shape == (CHUNK_SIZE, 7) and guided.actions.dtype == np.float64
        assert guided.latency_s > 0
        np.testing.assert_allclose(guided.actions, plain, rtol=0, atol=1e-9)


def test_a_zero_weight_runs_the_gradient_path_and_changes_nothing(source):
    plain = source.infer(bundle(), INSTRUCTION, 7).actions
    guided = source.infer_guided(bundle(), INSTRUCTION, 7, Guidance(previous_prefix(source, 1), 2, max_weight=0.0))
    np.testing.assert_allclose(guided.actions, plain, rtol=0, atol=1e-9)


@pytest.mark.parametrize("executed, frozen", [(1, 2), (2, 1), (0, 3), (3, 3)])
def test_guided_chunks_continue_the_frozen_prefix_and_unguided_ones_do_not(source, executed, frozen):
    guidance = Guidance(previous_prefix(source, executed), frozen)
    plain = source.infer(bundle(), INSTRUCTION, 7).actions
    guided = source.infer_guided(bundle(), INSTRUCTION, 7, guidance).actions
    assert frozen_error_sd(guided, guidance) < FROZEN_TOLERANCE_SD
    assert frozen_error_sd(plain, guidance) > UNGUIDED_AT_LEAST_SD
    # The soft-masked steps are pulled towards the prefix too, if less: closer than the unguided chunk.
    p = guidance.length
    if p > frozen:
        tail = slice(frozen, p)
        assert np.abs(guided[tail] - guidance.prefix[tail]).sum() < np.abs(plain[tail] - guidance.prefix[tail]).sum()
    # After the prefix nothing is asked of the chunk; it stays an action chunk of the model's scale.
    assert np.max(np.abs(guided - ACTIONS_MEAN) / ACTIONS_STD) < 20


def test_the_prefix_is_normalised_with_the_sources_statistics(tiny_pi0_model):
    # Quantile statistics whose q01..q99 span 2 standard deviations of the processor's around its mean: the
    # prefix must be taken to the model's space with these, or its target is off by orders of magnitude.
    mean, std = np.array(ACTIONS_MEAN), np.array(ACTIONS_STD)
    quantile = source_for(tiny_pi0_model, normalization={
        "mode": "quantile", "state": {"q01": [-1.0] * 7, "q99": [1.0] * 7},
        "action": {"q01": (mean - std).tolist(), "q99": (mean + std).tolist()}})
    guidance = Guidance(previous_prefix(quantile, 1), 2)
    guided = quantile.infer_guided(bundle(), INSTRUCTION, 7, guidance).actions
    assert frozen_error_sd(guided, guidance) < FROZEN_TOLERANCE_SD


def test_a_prefix_the_source_cannot_continue_is_refused(source):
    with pytest.raises(InvalidInputError, match=f"more than the chunk length {CHUNK_SIZE}"):
        source.infer_guided(bundle(), INSTRUCTION, 0, Guidance(np.zeros((CHUNK_SIZE + 1, 7)), 1))
    with pytest.raises(InvalidInputError, match="guidance prefix has 6 action axes, the policy 7"):
        source.infer_guided(bundle(), INSTRUCTION, 0, Guidance(np.zeros((3, 6)), 1))
