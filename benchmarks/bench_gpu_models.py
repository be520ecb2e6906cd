"""The learned models the graph runs locally, on the CPU and on a CUDA GPU: inference latency and memory.

    python benchmarks/bench_gpu_models.py [--parts policy,depth] [--repeats 30] [--paper-size]

* policy: the local transformers backend (``ladder_ros.policies.local_model.TransformersSource``, the
  policy node's path: processor, state normalisation, seeded noise, ``sample_actions``, unnormalisation)
  on a tiny random PI0 (tests/policy_models.py) on the CPU and on the GPU, and with ``--paper-size`` on
  pi0's architecture at its published size (random weights, built on the GPU; tests/policy_models.py)
  with a 224x224 camera, in the dtype the backend picks there (bfloat16). Per model: load time, warm-up,
  latency of one chunk (p50, p95, max) and the GPU's peak memory.
* depth: MoGe-2 and Depth Anything V2 through the depth node's estimators
  (``ladder_ros.depth.registry.make_estimator``) on a 640x480 frame: the tiny random models of the real
  classes (tests/depth_fixtures.py) on the CPU and the GPU, and Depth Anything V2 Small's architecture
  (random weights) on both.

Random weights make the outputs noise: these numbers time the pipeline and the architecture, never the
accuracy. Nothing is downloaded; nothing leaves the machine. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def timing_line(label: str, latencies_ms: list[float], extra: str = "") -> str:
    return (f"  {label:<44} p50 {pct(latencies_ms, .5):8.1f} ms  p95 {pct(latencies_ms, .95):8.1f} ms  "
            f"max {max(latencies_ms):8.1f} ms{extra}")


def gpu_peak(torch, device: str) -> str:
    if device != "cuda":
        return ""
    return f"  peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"


def bench_policy(model_dir: Path, label: str, device: str, repeats: int, image_size: int) -> None:
    import torch

    from ladder_ros.policies.config import parse_policy_config
    from ladder_ros.policies.local_model import TransformersSource
    from ladder_ros.policies.observation import ObservationBundle
    from tests.policy_fixtures import observation
    from tests.policy_models import tiny_pi0_policy

    data = tiny_pi0_policy(model_dir, image_size=image_size)
    data["model"].update({"device": device, "threads": 0})  # 0: torch's default threads
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    source = TransformersSource(parse_policy_config(data, source=f"{label}.yaml"))
    warm_s = source.warm_up_s
    load_s = time.perf_counter() - started - warm_s
    latencies = []
    for i in range(repeats):
        bundle = ObservationBundle(observation(i, image_size=480), i)
        latencies.append(source.infer(bundle, "put the carrot on the plate", i).latency_s * 1000)
    chunk = source.infer(ObservationBundle(observation(0, image_size=480), 0), "put the carrot on the plate", 7)
    print(f"{label} on {source.device} ({str(source.dtype).replace('torch.', '')}): load {load_s:.1f} s, warm-up "
          f"{warm_s:.2f} s, {source.chunk_size}-step chunks, {source.num_steps or 'default'} denoising steps, "
          f"finite: {bool(np.all(np.isfinite(chunk.actions)))}")
    print(timing_line("one chunk (observation in, actions out)", latencies, gpu_peak(torch, source.device)))
    source.close()


def bench_depth(name: str, path: Path, label: str, device: str, repeats: int) -> None:
    import torch

    from ladder_ros.camera.model import CameraIntrinsics
    from ladder_ros.depth.registry import make_estimator

    rng = np.random.default_rng(0)
    frame = (np.linspace(0, 255, 640)[None, :, None] * np.ones((480, 1, 3))).astype(np.uint8)
    frame = np.clip(frame.astype(int) + rng.integers(-20, 20, frame.shape), 0, 255).astype(np.uint8)
    intrinsics = CameraIntrinsics.from_vertical_fov(45.0, 640, 480)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    estimator = make_estimator(name, str(path), device, fp16=None) if name == "moge2" else \
        make_estimator(name, str(path), device)
    load_s = time.perf_counter() - started
    estimator.estimate(frame, intrinsics)  # warm-up
    latencies = [estimator.estimate(frame, intrinsics).inference_s * 1000 for _ in range(repeats)]
    print(f"{label} on {device}: load {load_s:.1f} s")
    print(timing_line("one 640x480 frame (depth in metres out)", latencies, gpu_peak(torch, device)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="policy,depth", help="comma-separated: policy, depth")
    parser.add_argument("--repeats", type=int, default=30, help="timed inferences per model and device")
    parser.add_argument("--paper-size", action="store_true", help="also pi0 at its published size (GPU only)")
    parser.add_argument("--cpu-repeats", type=int, default=5, help="timed inferences of the larger models on the CPU")
    args = parser.parse_args()

    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, devices: {devices}"
          + (f" ({torch.cuda.get_device_name(0)})" if "cuda" in devices else ""))
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "policy" in parts:
            from tests.policy_models import build_pi0_paper_size, build_tiny_pi0

            print("\n== low-level policy: the local transformers backend")
            tiny = build_tiny_pi0(tmp / "tiny_pi0")
            for device in devices:
                bench_policy(tiny, "tiny PI0", device, args.repeats, 32)
            if args.paper_size and "cuda" in devices:
                try:
                    started = time.perf_counter()
                    paper = build_pi0_paper_size(tmp / "pi0_paper_size")
                    print(f"(pi0 at its published size built and saved in {time.perf_counter() - started:.1f} s)")
                    bench_policy(paper, "PI0, published size (random weights)", "cuda", args.repeats, 224)
                except Exception as exc:  # a benchmark reports what failed and goes on with the rest
                    failures += 1
                    print(f"PI0 at its published size failed: {type(exc).__name__}: {exc}")
        if "depth" in parts:
            from tests.depth_fixtures import save_depth_anything_small, save_tiny_depth_anything, save_tiny_moge

            print("\n== depth estimators")
            models = [("moge2", save_tiny_moge(tmp / "moge" / "model.pt"), "tiny MoGe-2 (ViT-S backbone)"),
                      ("depth_anything_v2", save_tiny_depth_anything(tmp / "da_tiny"), "tiny Depth Anything V2"),
                      ("depth_anything_v2", save_depth_anything_small(tmp / "da_small"),
                       "Depth Anything V2 Small (random weights)")]
            for name, path, label in models:
                for device in devices:
                    small = "Small" in label and device == "cpu"
                    try:
                        bench_depth(name, path, label, device, args.cpu_repeats if small else args.repeats)
                    except Exception as exc:
                        failures += 1
                        print(f"{label} on {device} failed: {type(exc).__name__}: {exc}")
    print(f"\n{failures} part(s) failed" if failures else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
