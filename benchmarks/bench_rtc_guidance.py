"""Real-time chunking guidance on the local transformers backend: what it costs and how well it continues a prefix.

On the tiny random PI0 the tests build (tests/policy_models.py: one layer each, 32-wide, 6-action chunks),
on the CPU in float32 with one thread: the latency of ``TransformersSource.infer`` against ``infer_guided``
(p50 and p90 over ``--runs`` calls each, interleaved, after one warm-up round; the same observation, seed
and noise), for
each flow-step count in ``--steps``. Then the prefix match error: the previous chunk (another seed) less its
first action is the prefix, its first ``--frozen`` actions frozen; the largest distance of the new chunk's
frozen actions from the prefix, in dataset standard deviations (the model's normalised units) and in the
action's own units, with and without guidance, and the mean distance over the soft-masked steps after them.

    python benchmarks/bench_rtc_guidance.py [--runs 20] [--steps 2,10] [--frozen 2]

Prints numbers; asserts nothing (speed is measured here, never in tests). No network.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.policies.config import parse_policy_config  # noqa: E402
from ladder_ros.policies.guidance import Guidance  # noqa: E402
from ladder_ros.policies.observation import ObservationBundle  # noqa: E402
from tests.policy_fixtures import observation  # noqa: E402
from tests.policy_models import ACTIONS_STD, build_tiny_pi0, tiny_pi0_policy  # noqa: E402

INSTRUCTION = "put the carrot on the plate"


def latencies(calls, runs: int) -> list[tuple[float, float]]:
    """p50 and p90 (ms) of each call, the calls interleaved so that a busy machine slows them alike."""
    samples = [[] for _ in calls]
    for run in range(runs + 1):  # the first round warms up
        for call, times in zip(calls, samples):
            started = time.perf_counter()
            call()
            if run:
                times.append(time.perf_counter() - started)
    return [(float(np.percentile(t, 50)) * 1e3, float(np.percentile(t, 90)) * 1e3) for t in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", default="2,10", help="flow-matching steps, comma-separated")
    parser.add_argument("--frozen", type=int, default=2)
    args = parser.parse_args()
    from ladder_ros.policies.local_model import TransformersSource

    std = np.asarray(ACTIONS_STD)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_pi0(Path(tmp) / "tiny_pi0")
        print(f"tiny PI0 on the CPU, float32, 1 thread; {args.runs} runs each; prefix: the previous chunk less its "
              f"first action, {args.frozen} frozen")
        print(f"{'steps':>5}  {'infer p50/p90 ms':>17}  {'guided p50/p90 ms':>18}  {'ratio':>5}  "
              f"{'frozen err sd (unguided)':>24}  {'frozen err, units (unguided)':>29}  {'soft err sd (unguided)':>22}")
        for steps in (int(s) for s in args.steps.split(",")):
            data = tiny_pi0_policy(model_dir)
            data["model"]["num_inference_steps"] = steps
            source = TransformersSource(parse_policy_config(data, source="bench.yaml"))
            bundle = ObservationBundle(observation(0), 0)
            previous = source.infer(bundle, INSTRUCTION, 3).actions
            guidance = Guidance(previous[1:], args.frozen)
            plain_ms, guided_ms = latencies([lambda: source.infer(bundle, INSTRUCTION, 7),
                                             lambda: source.infer_guided(bundle, INSTRUCTION, 7, guidance)],
                                            args.runs)
            plain = source.infer(bundle, INSTRUCTION, 7).actions
            guided = source.infer_guided(bundle, INSTRUCTION, 7, guidance).actions
            d, p = guidance.frozen, guidance.length

            def frozen_error(chunk):
                raw = np.abs(chunk[:d] - guidance.prefix[:d])
                return float(np.max(raw / std)), float(np.max(raw))

            def soft_error(chunk):
                return float(np.mean(np.abs(chunk[d:p] - guidance.prefix[d:p]) / std)) if p > d else 0.0

            (g_sd, g_raw), (u_sd, u_raw) = frozen_error(guided), frozen_error(plain)
            print(f"{steps:>5}  {plain_ms[0]:>8.2f}/{plain_ms[1]:<8.2f}  {guided_ms[0]:>8.2f}/{guided_ms[1]:<9.2f}  "
                  f"{guided_ms[0] / plain_ms[0]:>5.2f}  {g_sd:>10.4f} ({u_sd:>7.3f})      "
                  f"{g_raw:>12.2e} ({u_raw:>9.2e})     {soft_error(guided):>8.3f} ({soft_error(plain):>6.3f})")
            source.close()


if __name__ == "__main__":
    main()
