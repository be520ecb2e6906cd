"""``vlm-bench`` on a small dataset in the card's schema, with every expected score worked out by hand.

Four tasks and six samples. A scripted VLM answers by frame colour and question; the comments
under each test derive the expected numbers from those answers and the scoring rules of the card
and Appendix F.
"""

from __future__ import annotations

import json
import re

import pytest

from ladder_ros import cli
from ladder_ros.evaluation.vlm_bench import BenchRunError, run_bench
from ladder_ros.evaluation.vlm_bench_data import DatasetDriftError, load_benchmark
from ladder_ros.vlm import VLMConfig, make_components
from ladder_ros.vlm.accounting import ModelPrice, PriceTable, UsageLedger
from ladder_ros.vlm.backends.base import ImagePart, Purpose
from ladder_ros.vlm.backends.replay import RecordingBackend
from tests.vlm_fixtures.bench_dataset import solid_image, write_benchmark
from tests.vlm_fixtures.scripted import ScriptedBackend

RED, GREEN, BLUE, YELLOW, WHITE, GREY = (200, 0, 0), (0, 200, 0), (0, 0, 200), (200, 200, 0), (255, 255, 255), (90,) * 3
T1 = dict(benchmark="simpler", scene="s1", category="single_destination",
          instruction="put the carrot and the spoon on the plate",
          subtasks=["put the carrot on the plate", "put the spoon on the plate"],
          objects=["carrot", "spoon"], destinations=["plate", "plate"])
T2 = dict(benchmark="simpler", scene="s2", category="duplicates", instruction="put both corn cobs on the cloth",
          subtasks=["put the corn cob on the cloth"] * 2, objects=["corn cob"] * 2, destinations=["cloth"] * 2)
T3 = dict(benchmark="robolab", scene="r1", category="ordered",
          instruction="first put the banana in the bin, then the orange",
          subtasks=["put the banana in the bin", "put the orange in the bin"], objects=["banana", "orange"],
          destinations=["bin", "bin"])
T4 = dict(benchmark="robolab", scene="r2", category="revisit",
          instruction="put the spoon on the cloth, then in the pot, then back on the cloth",
          subtasks=["put the spoon on the cloth", "put the spoon in the pot", "put the spoon on the cloth"],
          objects=["spoon"] * 3, destinations=["cloth", "pot", "cloth"])
TASKS = [T1, T2, T3, T4]
for number, task in enumerate(TASKS):
    task["image_main"] = solid_image((10 * number, 20, 30))  # the reset frame


def sample(task, achieved, query_idx, tag, colour, step, wrist=None):
    return dict(benchmark=task["benchmark"], scene=task["scene"], subtasks=list(task["subtasks"]),
                achieved=achieved, query_idx=query_idx, label=achieved[query_idx], image_main=solid_image(colour),
                image_wrist=None if wrist is None else solid_image(wrist), tag=tag, arm="oracle",
                source=f"{task['scene']}_ep0.mcap", step=step)


SAMPLES = [
    sample(T1, [True, False], 0, "fresh", RED, 30),            # S0
    sample(T1, [True, False], 1, "in_progress", RED, 30),      # S1: the same frame as S0
    sample(T2, [True, False], 1, "in_progress", GREEN, 44),    # S2
    sample(T3, [False, False], 0, "cold", BLUE, 0),            # S3
    sample(T4, [True, True, False], 2, "regressed", YELLOW, 90, wrist=GREY),  # S4: two views
    sample(T1, [True, True], 1, "terminal", WHITE, 70),        # S5: everything achieved
]

PLANS = {
    # T1: both goals in the reverse order -> exact, not in order.
    T1["instruction"]: '{"goals": [{"goal": "put the silver spoon on the pink plate", "object": "the silver spoon", '
                       '"destination": "the pink plate"}, {"goal": "put the orange carrot on the pink plate", '
                       '"object": "the orange carrot", "destination": "the pink plate"}]}',
    # T2: one of two cobs -> missed 1.
    T2["instruction"]: 'Two cobs, one goal.\n{"goals": [{"goal": "put the yellow corn cob on the cloth", '
                       '"object": "the yellow corn cob", "destination": "the blue cloth"}]}',
    # T3: both goals plus an apple twice -> invented 2, degenerate.
    T3["instruction"]: '```json\n{"goals": [{"goal": "b", "object": "the yellow banana", "destination": "the bin"}, '
                       '{"goal": "o", "object": "the orange", "destination": "the bin"}, {"goal": "a", "object": '
                       '"the apple", "destination": "the bin"}, {"goal": "a", "object": "the red apple", '
                       '"destination": "the grey bin"}]}\n```',
    # T4: unreadable -> missed 3.
    T4["instruction"]: "I cannot plan this task.",
}
COUNTS = {
    RED: {"put the carrot on the plate": '{"count": 1}', "put the spoon on the plate": '{"count": 1}'},
    GREEN: {"put the corn cob on the cloth": 'One cob is on the cloth.\n{"count": 1}'},
    BLUE: {"put the banana in the bin": "The bin is closed.", "put the orange in the bin": '{"count": 0}'},
    YELLOW: {"put the spoon on the cloth": '{"count": 1}', "put the spoon in the pot": '{"count": 1}'},
    WHITE: {"put the carrot on the plate": '{"count": 1}', "put the spoon on the plate": '{"count": 1}'},
}
NEXT = {
    RED: '{"goal": "put the spoon on the plate", "object": "the metal spoon", "destination": "the plate"}',
    GREEN: '{"goal": "put the cob on the cloth", "object": "yellow corn cobs", "destination": "the blue cloth"}',
    BLUE: '{"goal": "put the orange in the bin", "object": "the orange", "destination": "the bin"}',
    YELLOW: '{"goal": null, "object": null, "destination": null}',
}
PRICES = PriceTable({"gemini-2.5-flash": ModelPrice(0.30, 2.50)}, source="test", as_of="test")
CALL_COST = (100 * 0.30 + 10 * 2.50) / 1e6  # the scripted backend reports 100 input and 10 output tokens


def respond(request):
    texts = request.text_parts
    image = next(p for p in request.parts if isinstance(p, ImagePart)).image
    colour = tuple(int(v) for v in image[0, 0])
    if request.purpose is Purpose.PLAN:
        return next(reply for instruction, reply in PLANS.items() if f"Task: {instruction}\n" in texts[0])
    if request.purpose is Purpose.VERIFY:
        return COUNTS[colour][texts[1].removeprefix("Subtask: ")]
    return NEXT[colour]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_benchmark(tmp_path_factory.mktemp("bench"), TASKS, SAMPLES)


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "hf_cache")


def scripted_components(backend=None):
    backend = backend or ScriptedBackend(respond)
    return make_components(VLMConfig(backend="oracle"), backend=backend, ledger=UsageLedger(PRICES)), backend


def test_scores_match_the_hand_worked_expectations(dataset, cache, tmp_path):
    benchmark = load_benchmark(dataset, cache_dir=cache)
    components, backend = scripted_components()
    summary = run_bench(benchmark, components, tmp_path / "run", max_failed_share=0.2)

    # Decomposition. T1 exact (any order) but not in order; T2 misses a cob; T3 invents two apples
    # (degenerate); T4 unreadable: a failed call, missing its 3 goals. Order-constrained: T3 (ordered), T4 (revisit).
    assert summary["decomposition"] == {
        "tasks": 4, "exact": 1, "exact_rate": 0.25, "exact_in_order": 0, "order_constrained_tasks": 2,
        "order_constrained_exact_in_order": 0, "goals_missed": 1 + 3, "goals_invented": 2, "degenerate": 1,
        "failed": 1, "failed_by_kind": {"unparseable": 1}}

    # Verification, deployed count rule (required: plan-so-far occurrences, 1 on revisit):
    # S0 carrot, need 1, count 1 -> done, label T: TP.   S1 spoon, need 1, count 1 -> done, label F: FP.
    # S2 2nd cob, need 2, count 1 -> not, label F: TN.   S3 banana, unreadable: a failed call, wrong (not a TN).
    # S4 revisit leg 3, need 1, count 1 -> done, label F: FP.   S5 spoon, need 1, count 1, label T: TP.
    # Positives 2 (S0, S5), negatives 4 (S1, S2, S3, S4).
    v = summary["verification"]
    assert (v["tp"], v["fn"], v["tn"], v["fp"], v["failed"]) == (2, 0, 1, 2, 1)
    assert (v["positives"], v["negatives"], v["failed_negatives"]) == (2, 4, 1)
    assert (v["tp_rate"], v["tn_rate"], v["precision"], v["recall"]) == (1.0, 0.25, 0.5, 1.0)
    assert v["accuracy"] == 0.5 and v["failed_by_kind"] == {"unparseable": 1}
    assert v["by_tag"]["in_progress"] == {"samples": 2, "correct": 1, "accuracy": 0.5}
    assert v["by_tag"]["regressed"]["correct"] == 0 and v["by_tag"]["cold"]["correct"] == 0

    # State tracking, one question per distinct subtask:
    # S0, S1 (achieved T,F): carrot right, spoon says done but is not -> wrong.
    # S2: the cob question needs both cobs (2), count 1 -> not done; truth all(T,F) = F -> right.
    # S3: banana failed -> wrong, so the frame is wrong; orange 0 -> F -> right.
    # S4: "spoon on the cloth" (legs 1 and 3) needs 1 on revisit, count 1 -> done, truth F -> wrong.
    # S5: both done and both counted -> right.  Frames right: S2, S5.
    assert summary["state_tracking"] == {"frames": 6, "correct": 2, "rate": round(2 / 6, 6), "questions": 11,
                                         "questions_correct": 7, "question_accuracy": round(7 / 11, 6),
                                         "failed_questions": 1, "failed_frames": 1,
                                         "failed_by_kind": {"unparseable": 1}}

    # Next subtask (S5 excluded: all achieved). S0, S1: spoon is unfinished -> valid (same answer).
    # S2: cob unfinished -> valid. S3: ordered, orange is not the first unfinished -> invalid.
    # S4: claims the task is done -> invalid.
    assert summary["next_subtask"] == {"eligible": 5, "valid": 3, "rate": 0.6, "order_constrained_eligible": 2,
                                       "order_constrained_valid": 0, "task_done_claims": 1, "failed": 0,
                                       "failed_by_kind": {}}

    # The failed calls of the run: the T4 plan and the blue banana count, 2 of 17 questions.
    failures = summary["failures"]
    assert (failures["questions"], failures["failed"], failures["by_kind"]) == (17, 2, {"unparseable": 2})
    assert not failures["exceeded"] and summary["scores_withheld"] is None
    assert failures["examples"]["unparseable"] == ["no JSON object in the reply"]

    # Calls: 4 plans; counts per distinct (frame, subtask): red 2 (shared by S0 and S1), green 1, blue 2,
    # yellow 2, white 2 = 9; next subtask per frame with work left: red, green, blue, yellow = 4.
    assert len(backend.requests) == 17
    accounting = summary["accounting"]
    assert accounting["calls"] == 17 and accounting["cost_usd"] == pytest.approx(17 * CALL_COST)
    assert accounting["calls_by_purpose"] == {"plan": 4, "verify": 9, "next_subtask": 4}

    # The multi-view sample sent both views with the multi-view suffix.
    yellow = [r for r in backend.requests if r.purpose is Purpose.VERIFY and len(r.images) == 2]
    assert len(yellow) == 2 and "Camera view 'wrist':" in yellow[0].text_parts

    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["verification"] == v and written["run"]["dataset_sha256"] == benchmark.fingerprint()
    table = (tmp_path / "run" / "summary.md").read_text()
    assert "| decomposition | 4 | 1 exact (0.250) |" in table


def test_card_count_rule_differs_only_on_revisit(dataset, cache, tmp_path):
    components, _ = scripted_components()
    summary = run_bench(load_benchmark(dataset, cache_dir=cache), components, tmp_path / "run",
                        tasks=("verification", "state_tracking"), count_rule="card")
    # S4 now needs 2 spoons on the cloth (subtasks[:3].count) -> count 1 -> not done = label F: TN, and
    # its state-tracking frame becomes right.
    v = summary["verification"]
    assert (v["tp"], v["fn"], v["tn"], v["fp"], v["failed"]) == (2, 0, 2, 1, 1)
    assert summary["state_tracking"]["correct"] == 3


def test_task_subset_asks_only_what_it_scores(dataset, cache, tmp_path):
    components, backend = scripted_components()
    summary = run_bench(load_benchmark(dataset, cache_dir=cache), components, tmp_path / "run",
                        tasks=("verification",))
    # One count per distinct (frame, queried subtask): red carrot, red spoon, green cob, blue banana,
    # yellow cloth, white spoon.
    assert len(backend.requests) == 6
    assert set(summary) == {"verification", "failures", "scores_withheld", "accounting", "run"}


def test_limit_then_resume_equals_a_full_run(dataset, cache, tmp_path):
    benchmark = load_benchmark(dataset, cache_dir=cache)
    first, first_backend = scripted_components()
    partial = run_bench(benchmark, first, tmp_path / "run", limit=2)
    # Tasks T1, T2 and samples S0, S1: 2 plans, red carrot and spoon counts, 1 next subtask.
    assert len(first_backend.requests) == 5 and partial["decomposition"]["tasks"] == 2
    with pytest.raises(BenchRunError, match="--resume"):
        run_bench(benchmark, scripted_components()[0], tmp_path / "run")
    second, second_backend = scripted_components()
    resumed = run_bench(benchmark, second, tmp_path / "run", resume=True)
    assert len(second_backend.requests) == 17 - 5 and resumed["run"]["answers_reused"] == 5
    fresh = run_bench(benchmark, scripted_components()[0], tmp_path / "fresh")
    for key in ("decomposition", "verification", "state_tracking", "next_subtask", "accounting"):
        if key == "accounting":
            assert resumed[key]["calls"] == fresh[key]["calls"]
        else:
            assert resumed[key] == fresh[key]


def test_resume_survives_a_truncated_last_line_and_refuses_another_model(dataset, cache, tmp_path):
    benchmark = load_benchmark(dataset, cache_dir=cache)
    run_bench(benchmark, scripted_components()[0], tmp_path / "run", limit=1)
    calls = tmp_path / "run" / "calls.jsonl"
    calls.write_text(calls.read_text() + '{"key": "count|trunc')  # a crash mid-write
    components, backend = scripted_components()
    summary = run_bench(benchmark, components, tmp_path / "run", resume=True)
    assert summary["decomposition"]["tasks"] == 4
    other, _ = scripted_components(ScriptedBackend(respond, model="gemini-2.5-pro"))
    with pytest.raises(BenchRunError, match="differs in: model"):
        run_bench(benchmark, other, tmp_path / "run", resume=True)


def drifted(tmp_path, change):
    samples = [dict(s) for s in SAMPLES]
    change(samples)
    return write_benchmark(tmp_path / "drifted", TASKS, samples)


@pytest.mark.parametrize("change, fragment", [
    (lambda s: s[0].update(subtasks=["put the carrot on the plate", "put the fork on the plate"]),
     "differ from the reference plan"),
    (lambda s: s[1].update(label=True), "disagrees with achieved[1]"),
    (lambda s: s[2].update(scene="s9"), "no such task"),
    (lambda s: s[3].update(query_idx=5, label=False), "query_idx 5 outside"),
    (lambda s: s[4].update(achieved=[True, False], label=False, query_idx=0), "2 achieved flags for 3 subtasks"),
    (lambda s: s.append(dict(s[0])), "duplicate sample"),
])
def test_drift_between_configurations_is_refused(tmp_path, cache, change, fragment):
    with pytest.raises(DatasetDriftError, match=re.escape(fragment)):
        load_benchmark(drifted(tmp_path, change), cache_dir=cache)


def test_missing_column_is_refused(tmp_path, cache):
    from datasets import Dataset

    path = write_benchmark(tmp_path / "ds", TASKS, SAMPLES)
    Dataset.from_dict({"benchmark": ["x"], "scene": ["y"]}).to_parquet(
        str(path / "decomposition" / "train-00000.parquet"))
    with pytest.raises(DatasetDriftError, match="missing column 'instruction'"):
        load_benchmark(path, cache_dir=cache)


def test_cli_replays_a_recorded_run_to_the_same_scores(dataset, cache, tmp_path, capsys):
    recording = tmp_path / "recording.jsonl"
    recorder = RecordingBackend(ScriptedBackend(respond), recording)
    live, _ = scripted_components(recorder)
    expected = run_bench(load_benchmark(dataset, cache_dir=cache), live, tmp_path / "live", max_failed_share=0.2)
    out = tmp_path / "replayed"
    code = cli.main(["vlm-bench", "--dataset", str(dataset), "--out", str(out), "--backend", "replay",
                     "--replay-path", str(recording), "--cache-dir", cache, "--max-failed-share", "0.2"])
    assert code == 0
    replayed = json.loads((out / "summary.json").read_text())
    for key in ("decomposition", "verification", "state_tracking", "next_subtask"):
        assert replayed[key] == expected[key]
    assert replayed["run"]["backend"] == "replay" and replayed["run"]["model"] == "gemini-2.5-flash"
    assert "| verification | 6 |" in capsys.readouterr().out


def test_cli_reports_drift_as_an_error(tmp_path, cache, capsys):
    path = drifted(tmp_path, lambda s: s[1].update(label=True))
    code = cli.main(["vlm-bench", "--dataset", str(path), "--out", str(tmp_path / "out"), "--backend", "oracle",
                     "--cache-dir", cache])
    assert code == 2 and "refusing to score" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_rejects_bad_options(dataset, tmp_path, cache, capsys):
    code = cli.main(["vlm-bench", "--dataset", str(dataset), "--out", str(tmp_path / "o"), "--backend", "oracle",
                     "--tasks", "verification,spelling", "--cache-dir", cache])
    assert code == 2 and "unknown benchmark task" in capsys.readouterr().err


# --------------------------------------------------------------------------- failed calls

class _GeminiBody:
    """A fake server's view of a request, shaped like a GenerationRequest for ``respond``."""

    def __init__(self, body):
        import base64
        import io

        import numpy as np
        from PIL import Image

        parts = body["contents"][0]["parts"]
        self.parts = []
        for part in parts:
            inline = part.get("inlineData") or part.get("inline_data")
            if inline is not None:
                data = inline["data"]  # base64, URL-safe alphabet and unpadded as the client sends it
                raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
                image = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))
                self.parts.append(ImagePart(image))
            else:
                self.parts.append(part["text"])
        self.text_parts = tuple(p for p in self.parts if isinstance(p, str))
        if any(t.startswith("Subtask: ") for t in self.text_parts):
            self.purpose = Purpose.VERIFY
        elif self.text_parts[0].startswith("You are planning"):
            self.purpose = Purpose.PLAN
        else:
            self.purpose = Purpose.NEXT_SUBTASK


@pytest.fixture
def gemini_env(monkeypatch):
    from tests.vlm_fixtures.fake_gemini import use_local_endpoint

    use_local_endpoint(monkeypatch, "LADDER_TEST_GEMINI_KEY", "bench-test-key")


def gemini_cli(dataset, out, cache, server, *extra):
    return cli.main(["vlm-bench", "--dataset", str(dataset), "--out", str(out), "--cache-dir", cache,
                     "--backend", "gemini", "--model", "gemini-2.5-flash", "--base-url", server.url,
                     "--api-key-env", "LADDER_TEST_GEMINI_KEY", "--max-attempts", "2", "--timeout-s", "10",
                     "--call-deadline-s", "30", *extra])


def test_all_calls_401_exit_non_zero_publish_no_accuracy_and_resume_asks_them_again(
        dataset, cache, tmp_path, capsys, gemini_env):
    from tests.vlm_fixtures.fake_gemini import FakeGeminiServer, error_reply, text_reply

    out = tmp_path / "run"
    refused = FakeGeminiServer([], responder=lambda body: error_reply(401, "API key not valid."), max_requests=40)
    with refused:
        code = gemini_cli(dataset, out, cache, refused)
    err = capsys.readouterr().err
    assert code == 3 and len(refused.requests) == 17  # one call per question; a 401 is not retried
    assert "scores withheld" in err and "17 of 17 calls failed (100.0 %: http 17)" in err and "--resume" in err
    summary = json.loads((out / "summary.json").read_text())
    v = summary["verification"]
    assert v["accuracy"] is None and v["tn_rate"] is None and v["precision"] is None  # nothing published
    assert (v["tp"], v["tn"], v["fp"], v["fn"], v["failed"]) == (0, 0, 0, 0, 6)  # a failed call is no "not complete"
    assert summary["decomposition"]["exact_rate"] is None and summary["next_subtask"]["task_done_claims"] == 0
    assert summary["failures"]["by_kind"] == {"http": 17} and summary["failures"]["exceeded"]
    assert "HTTP 401" in summary["failures"]["examples"]["http"][0]
    assert "withheld" in (out / "summary.md").read_text()

    # The key is fixed: --resume asks every failed question again, and nothing else.
    working = FakeGeminiServer([], responder=lambda body: text_reply(respond(_GeminiBody(body))), max_requests=40)
    with working:
        code = gemini_cli(dataset, out, cache, working, "--resume", "--max-failed-share", "0.2")
    assert code == 0 and len(working.requests) == 17
    resumed = json.loads((out / "summary.json").read_text())
    assert resumed["run"]["answers_asked_again"] == 17 and resumed["run"]["answers_reused"] == 0
    v = resumed["verification"]
    assert (v["tp"], v["fn"], v["tn"], v["fp"], v["failed"]) == (2, 0, 1, 2, 1)  # the hand-worked scores
    assert resumed["failures"]["by_kind"] == {"unparseable": 2}
    assert resumed["accounting"]["calls"] == 34 and resumed["accounting"]["failed_by_kind"] == {
        "http": 17, "unparseable": 2}  # the refused calls stay in the accounting

    # Resuming again asks only the two questions whose answer is still a failed call.
    again = FakeGeminiServer([], responder=lambda body: text_reply(respond(_GeminiBody(body))), max_requests=40)
    with again:
        code = gemini_cli(dataset, out, cache, again, "--resume", "--max-failed-share", "0.2")
    assert code == 0 and len(again.requests) == 2


def test_resume_asks_again_only_the_failed_calls(dataset, cache, tmp_path):
    from ladder_ros.vlm.backends.base import Attempt, FailureKind, Reply, TokenUsage

    benchmark = load_benchmark(dataset, cache_dir=cache)
    green = tuple(int(v) for v in solid_image(GREEN).getpixel((0, 0)))

    def flaky(request):
        image = next(p for p in request.parts if isinstance(p, ImagePart)).image
        if tuple(int(v) for v in image[0, 0]) == green:  # every question about the green frame fails
            return Reply(text=None, backend="scripted", model="gemini-2.5-flash", latency_ms=5.0,
                         usage=TokenUsage(), error="HTTP 503: overloaded (after 4 attempts)",
                         error_kind=FailureKind.HTTP, attempts=(Attempt(5.0, 503, "overloaded"),) * 4)
        if request.purpose is Purpose.PLAN and f"Task: {T3['instruction']}\n" in request.text_parts[0]:
            return ('{"goals": [{"goal": "b", "object": "the banana", "destination": "the bin"}', "MAX_TOKENS")
        return respond(request)

    first, _ = scripted_components(ScriptedBackend(flaky))
    summary = run_bench(benchmark, first, tmp_path / "run")
    # Green frame: its count (S2) and its next subtask; the T3 plan was cut at the token cap.
    assert summary["failures"]["by_kind"] == {"http": 2, "truncated": 1, "unparseable": 2}
    assert summary["scores_withheld"] and summary["verification"]["accuracy"] is None
    assert summary["verification"]["failed"] == 2  # S2 (green) and S3 (the unreadable banana)

    second, backend = scripted_components()
    resumed = run_bench(benchmark, second, tmp_path / "run", resume=True, max_failed_share=0.2)
    asked = sorted((r.purpose.value, r.text_parts[-1] if r.purpose is Purpose.VERIFY else "") for r in
                   backend.requests)
    # Asked again: the green count and next subtask, the T3 plan, and the two unreadable answers (T4, banana).
    assert len(backend.requests) == 5 and resumed["run"]["answers_asked_again"] == 5
    assert asked == sorted([("verify", "Subtask: put the corn cob on the cloth"), ("next_subtask", ""),
                            ("plan", ""), ("plan", ""), ("verify", "Subtask: put the banana in the bin")])
    fresh = run_bench(benchmark, scripted_components()[0], tmp_path / "fresh", max_failed_share=0.2)
    for key in ("decomposition", "verification", "state_tracking", "next_subtask", "failures"):
        assert resumed[key] == fresh[key]
    assert resumed["accounting"]["calls"] == 17 + 5  # every call made, the failed ones included


def test_a_degenerate_reply_or_a_raising_component_mid_run_costs_one_sample(dataset, cache, tmp_path):
    degenerate = '{"count": ' + "[" * 1500

    def hostile(request):
        if request.purpose is Purpose.VERIFY and request.text_parts[1] == "Subtask: put the corn cob on the cloth":
            return degenerate
        return respond(request)

    components, backend = scripted_components(ScriptedBackend(hostile))
    propose = components.next_subtask.propose
    yellow = tuple(int(v) for v in solid_image(YELLOW).getpixel((0, 0)))

    def raising(instruction, views, robot=None):  # a bug, not a reply: the run must survive it too
        if tuple(int(v) for v in views[0][1][0, 0]) == yellow:
            raise RecursionError("maximum recursion depth exceeded")
        return propose(instruction, views, robot=robot)

    components.next_subtask.propose = raising
    summary = run_bench(load_benchmark(dataset, cache_dir=cache), components, tmp_path / "run",
                        max_failed_share=0.5)
    assert summary["verification"]["failed_by_kind"] == {"unparseable": 2}  # S2 degenerate, S3 unreadable
    assert summary["verification"]["samples"] == 6 and summary["verification"]["tp"] == 2
    assert summary["next_subtask"]["failed_by_kind"] == {"backend": 1} and summary["next_subtask"]["valid"] == 3
    stored = [json.loads(line) for line in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    cob = next(e for e in stored if e["key"].startswith("count|") and e["key"].endswith("corn cob on the cloth"))
    assert "degenerate reply" in cob["failure"]["reason"] and cob["raw_reply"] == degenerate
    assert sum(1 for e in stored if e.get("failure")) == 4  # T4 plan, banana, cob, yellow next subtask
