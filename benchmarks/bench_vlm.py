"""Measure the VLM components' own costs on this machine and print the numbers.

    .venv/bin/python benchmarks/bench_vlm.py [--repeats N]

* verify latency through a tiny Gemma 3 model on the CPU (the full local path: prompt assembly,
  processor, generation, parsing), one and two views;
* verify latency through the real google-genai client against the local fake server (client,
  PNG encoding of a 640x480 frame, HTTP on 127.0.0.1): the overhead this stack adds to a remote call;
* a vlm-bench sweep of a synthetic dataset (scripted answers): loading, validation, answer storage
  and scoring per sample;
* reply parsing: a deployed-format reply next to hostile ones (degenerate nesting, a 64 KiB wall of
  brackets, the worst unbalanced text found), which the parser's limits keep linear.

Nothing leaves 127.0.0.1; no model or dataset is downloaded. Numbers depend on the machine: they
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tests.vlm_fixtures import fake_gemini  # noqa: E402  (also sets the hub-offline variables)
from tests.vlm_fixtures.bench_dataset import solid_image, write_benchmark  # noqa: E402
from tests.vlm_fixtures.scripted import ScriptedBackend  # noqa: E402
from tests.vlm_fixtures.tiny_vlm import build_tiny_gemma3  # noqa: E402

from ladder_ros.core.task import Subgoal  # noqa: E402
from ladder_ros.core.verification import VerificationRequest  # noqa: E402
from ladder_ros.evaluation.vlm_bench import run_bench  # noqa: E402
from ladder_ros.evaluation.vlm_bench_data import load_benchmark  # noqa: E402
from ladder_ros.vlm import GeminiSettings, VLMConfig, make_components  # noqa: E402
from ladder_ros.vlm.backends.base import Purpose  # noqa: E402

REQUEST = VerificationRequest(request_id=0, step=0, plan_index=0,
                              subgoal=Subgoal("carrot", "plate", "put the carrot on the plate"), required=1,
                              reason="after_release")
FRAME = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)  # SimplerEnv's 640x480 camera


def describe(name: str, samples_ms: list[float]) -> None:
    ordered = sorted(samples_ms)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    print(f"{name:58s} n={len(ordered):3d}  p50 {statistics.median(ordered):8.1f} ms  "
          f"p90 {p90:8.1f} ms  mean {statistics.fmean(ordered):8.1f} ms")


def bench_local(repeats: int, workdir: Path) -> None:
    import torch

    path = build_tiny_gemma3(workdir / "tiny", programmed_reply='one carrot on the plate. {"count": 1}')
    components = make_components(VLMConfig.from_mapping({"backend": "local", "model": str(path),
                                                         "local.device": "cpu"}))
    print(f"tiny Gemma 3 on the CPU (torch threads: {torch.get_num_threads()})")
    for views in ([("main", FRAME)], [("main", FRAME), ("wrist", FRAME[:240, :320])]):
        components.verifier.verify(REQUEST, views)  # warm-up
        latencies = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = components.verifier.verify(REQUEST, views)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert result.count == 1, result
        describe(f"  verify, {len(views)} view(s) of up to 640x480", latencies)
    print(f"  prompt tokens per query: {components.ledger.records[-1].input_tokens}")


def bench_gemini(repeats: int) -> None:
    os.environ["LADDER_BENCH_GEMINI_KEY"] = "benchmark-key"
    script = [fake_gemini.text_reply('{"count": 1}')] * (repeats + 1)
    with fake_gemini.FakeGeminiServer(script, max_requests=repeats + 5, lifetime_s=120) as server:
        components = make_components(VLMConfig(backend="gemini", model="gemini-2.5-flash", gemini=GeminiSettings(
            api_key_env="LADDER_BENCH_GEMINI_KEY", base_url=server.url, timeout_s=10)))
        components.verifier.verify(REQUEST, [("main", FRAME)])
        latencies = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = components.verifier.verify(REQUEST, [("main", FRAME)])
            latencies.append((time.perf_counter() - t0) * 1000)
            assert result.count == 1, result
        components.close()
    print("google-genai client against the local fake server")
    describe("  verify, one 640x480 view (PNG), 127.0.0.1 round trip", latencies)
    from ladder_ros.vlm.backends.gemini import encode_png

    encode = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        size = len(encode_png(FRAME))
        encode.append((time.perf_counter() - t0) * 1000)
    describe(f"  of which PNG encoding ({size // 1024} KiB, noise image: worst case)", encode)


def bench_sweep(workdir: Path, tasks_n: int = 60, samples_per_task: int = 4) -> None:
    tasks, samples = [], []
    for t in range(tasks_n):
        subtasks = [f"put the object{t}x{k} on the plate" for k in range(3)]
        task = dict(benchmark="synthetic", scene=f"s{t}", category="single_destination",
                    instruction=f"put objects of scene {t} on the plate", subtasks=subtasks,
                    objects=[f"object{t}x{k}" for k in range(3)], destinations=["plate"] * 3,
                    image_main=solid_image((t % 256, 0, 0), (96, 128)))
        tasks.append(task)
        for s in range(samples_per_task):
            achieved = [k < s for k in range(3)]
            samples.append(dict(benchmark="synthetic", scene=f"s{t}", subtasks=subtasks, achieved=achieved,
                                query_idx=min(s, 2), label=achieved[min(s, 2)],
                                image_main=solid_image((t % 256, s * 40, 7), (96, 128)), image_wrist=None,
                                tag="fresh", arm="oracle", source=f"s{t}.mcap", step=s * 10))
    path = write_benchmark(workdir / "sweep", tasks, samples)

    def respond(request):
        if request.purpose is Purpose.PLAN:
            return '{"goals": []}'
        if request.purpose is Purpose.VERIFY:
            return '{"count": 1}'
        return '{"goal": null, "object": null, "destination": null}'

    t0 = time.perf_counter()
    benchmark = load_benchmark(path, cache_dir=str(workdir / "cache"))
    load_s = time.perf_counter() - t0
    components = make_components(VLMConfig(backend="oracle"), backend=ScriptedBackend(respond))
    t0 = time.perf_counter()
    summary = run_bench(benchmark, components, workdir / "run")
    run_s = time.perf_counter() - t0
    calls = summary["accounting"]["calls"]
    print(f"vlm-bench sweep, scripted answers: {tasks_n} tasks, {len(samples)} samples, {calls} calls")
    print(f"  load + drift check {load_s * 1000:8.1f} ms; run + store + score {run_s * 1000:8.1f} ms "
          f"({run_s * 1000 / calls:.2f} ms per call of overhead)")


def bench_parsing(repeats: int) -> None:
    from ladder_ros.vlm.parsing import LIMITS, parse_count, parse_plan

    replies = {
        "deployed reply (reasoning line + JSON)": 'One carrot rests on the plate.\n{"count": 1}',
        "10-goal plan": '{"goals": [' + ", ".join(
            '{"goal": "put the carrot on the plate", "object": "the carrot", "destination": "the plate"}'
            for _ in range(10)) + "]}",
        "degenerate nesting, 1.5 kB": '{"count": ' + "[" * 1500,
        f"wall of braces, {LIMITS.max_reply_chars // 1024} KiB": "{" * LIMITS.max_reply_chars,
        f"unclosed objects, {LIMITS.max_reply_chars // 1024} KiB": ('x { "a" : [ 1 , 2 ] , ' * 4000)[
            :LIMITS.max_reply_chars],
        f"inner objects in an unclosed one, {LIMITS.max_reply_chars // 1024} KiB": ("{ " + '{"b":1} ' * 8000)[
            :LIMITS.max_reply_chars],
    }
    print("reply parsing (parse_count; parse_plan for the plan)")
    for name, text in replies.items():
        parse = parse_plan if "plan" in name else parse_count
        latencies = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            parse(text)
            latencies.append((time.perf_counter() - t0) * 1000)
        describe(f"  {name}", latencies)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        bench_local(args.repeats, workdir)
        bench_gemini(args.repeats)
        bench_sweep(workdir)
        bench_parsing(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
