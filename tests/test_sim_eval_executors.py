"""sim-eval's executors without Ray: the retry loop, error records in the denominator, settings, the
output file after a killed run, and local worker processes that die mid-episode.

The Ray executor on a real two-node cluster is tested in ``test_sim_eval_ray.py``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import wait

import pytest

from ladder_ros.cli import main
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.metrics import EPISODE_ERROR
from ladder_ros.evaluation.executors import (
    ExecutorSettings,
    Finished,
    InProcessExecutor,
    Lost,
    LocalProcessExecutor,
    WorkerSetupError,
    WorkSpec,
    drive,
    parse_env_vars,
)

from tests.sim_eval_helpers import SWEEP, raw_records, records_of

pytest.importorskip("mujoco")


class FlakyExecutor(InProcessExecutor):
    """Runs jobs in this process, but the first ``losses`` attempts of ``victim`` are lost."""

    def __init__(self, victim: tuple, losses: int):
        super().__init__()
        self.victim, self.losses = victim, losses
        self.attempts: Counter = Counter()

    def next_outcome(self):
        job = self._queue[0]
        self.attempts[job.key] += 1
        if job.key == self.victim and self.attempts[job.key] <= self.losses:
            self._queue.popleft()
            return Lost(job, "WorkerCrashedError: the worker died unexpectedly (simulated)")
        return super().next_outcome()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The sweep run in this process, as it was before executors existed (``--jobs 1``)."""
    out = tmp_path_factory.mktemp("reference")
    assert main(["sim-eval", *SWEEP, "--jobs", "1", "--out", str(out)]) == 0
    return records_of(out)


def sweep_config(jobs: int = 1):
    """The EvalConfig the CLI builds from SWEEP."""
    from ladder_ros.evaluation import sim_eval

    return sim_eval.EvalConfig(
        suite_path=str(sim_eval.share_path("config", "suites", "tabletop.yaml")), simulator="mujoco_tabletop",
        variants=("proprio_verifier", "privileged_verifier"), task_ids=("kitchen_single_1", "sorting_split_2"),
        episodes=2, base_seed=0, policy="scripted_expert", noise="bridge_like", verifier="oracle", render=False,
        jobs=jobs)


def _evaluate(out, executor, max_retries):
    from ladder_ros.evaluation import sim_eval

    settings = ExecutorSettings(max_retries=max_retries)
    return sim_eval.evaluate(sweep_config(), out, progress=False, settings=settings, executor=executor)


def test_a_lost_episode_is_rerun_and_says_so(tmp_path, reference):
    victim = ("sorting_split_2", "proprio_verifier", 1, 1)
    result = _evaluate(tmp_path, FlakyExecutor(victim, losses=2), max_retries=2)
    records = records_of(tmp_path)
    assert records == reference  # the rerun episode is the same episode
    raw = {(r["task_id"], r["variant"], r["layout"], r["seed"]): r for r in raw_records(tmp_path)}
    assert raw[victim]["execution"]["attempts"] == 3
    assert raw[victim]["execution"]["lost"] == ["WorkerCrashedError: the worker died unexpectedly (simulated)"] * 2
    assert all(r["execution"]["attempts"] == 1 for k, r in raw.items() if k != victim)
    assert result["summary"]["proprio_verifier"]["errors"] == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["execution"]["retries"] == 2 and summary["errors"] == 0


def test_an_episode_lost_past_its_retries_stays_in_the_denominator(tmp_path, reference, capsys):
    victim = ("sorting_split_2", "proprio_verifier", 1, 1)
    result = _evaluate(tmp_path, FlakyExecutor(victim, losses=2), max_retries=1)
    assert "recorded as an error" in capsys.readouterr().err
    records = records_of(tmp_path)
    assert set(records) == set(reference)
    error = records[victim]
    assert error["success"] is False and error["finish_reason"] == "error"
    assert error["error"] == {"kind": "worker_lost",
                              "message": "WorkerCrashedError: the worker died unexpectedly (simulated)"}
    assert [s["cause"] for s in error["subgoals"]] == [EPISODE_ERROR] * error["horizon"]
    assert error["run_key"] == reference[victim]["run_key"]
    block = result["summary"]["proprio_verifier"]
    assert block["episodes"] == 4 and block["errors"] == 1  # counted, as a failure
    wins = sum(r["success"] for k, r in reference.items() if k[1] == "proprio_verifier" and k != victim)
    assert block["task_success_rate"] == wins / 4
    assert block["failure_causes"][EPISODE_ERROR] == error["horizon"]
    assert "errors: 1 episode(s) produced no result" in result["text"]
    # a rerun keeps the error: it is a result of this run, not something to retry silently
    _evaluate(tmp_path, InProcessExecutor(), max_retries=1)
    assert records_of(tmp_path)[victim]["error"]["kind"] == "worker_lost"


def test_an_episode_that_raises_is_an_error_record_not_a_crash(tmp_path, monkeypatch):
    from ladder_ros.evaluation import sim_eval

    real = sim_eval.run_episode

    def broken(sim, policy, task, variant, *args, **kwargs):
        if task.task_id == "sorting_split_2":
            raise RuntimeError("renderer lost its device")
        return real(sim, policy, task, variant, *args, **kwargs)

    monkeypatch.setattr(sim_eval, "run_episode", broken)
    out = tmp_path / "run"
    assert main(["sim-eval", *SWEEP, "--jobs", "1", "--out", str(out)]) == 0
    records = records_of(out)
    errors = [r for r in records.values() if r.get("error")]
    assert len(records) == 8 and len(errors) == 4
    assert all(r["task_id"] == "sorting_split_2" for r in errors)
    assert errors[0]["error"] == {"kind": "exception", "type": "RuntimeError", "message": "renderer lost its device"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"] == 4 and summary["variants"]["proprio_verifier"]["episodes"] == 4


def test_drive_reruns_at_most_max_attempts_times():
    class AlwaysLost(InProcessExecutor):
        def next_outcome(self):
            return Lost(self._queue.popleft(), "gone")

    given_up = []
    ex = AlwaysLost()
    report = drive(ex, ["a", "b"], max_attempts=3, on_finished=lambda *a: pytest.fail("nothing finishes"),
                   on_given_up=lambda job, lost: given_up.append((job, lost)))
    assert given_up == [("a", ["gone"] * 3), ("b", ["gone"] * 3)]
    assert (report.retries, report.given_up, report.finished) == (4, 2, 0)
    with pytest.raises(ConfigError, match="max_attempts must be >= 1"):
        drive(ex, ["a"], max_attempts=0, on_finished=print, on_given_up=print)


def test_a_worker_that_cannot_set_up_is_named(tmp_path):
    from ladder_ros.evaluation.executors import WorkSpec

    def setup(config):
        raise FileNotFoundError("no assets in /nowhere")

    work = WorkSpec(setup=setup, run=lambda job: {}, config=None, key="k")
    with pytest.raises(WorkerSetupError, match=r"worker .* \(pid \d+\) cannot run episodes: FileNotFoundError: "
                                               r"no assets in /nowhere"):
        InProcessExecutor().start(work)
    from ladder_ros.evaluation.sim_eval import same_run_key

    ours = {"suite": "tabletop", "versions": {"ladder_ros": "1.0", "mujoco": "4.0.0"}}
    theirs = {"suite": "tabletop", "versions": {"ladder_ros": "1.0", "mujoco": "3.9.0"}}
    with pytest.raises(WorkerSetupError, match=r"worker .* computes another run key there "
                                               r'\(versions.mujoco "3.9.0" there, "4.0.0" now'):
        InProcessExecutor().start(WorkSpec(setup=lambda c: {"run_key": theirs}, run=lambda job: {}, config=None,
                                           key="other"), check=same_run_key(ours))
    assert same_run_key(ours)({"run_key": ours}) is None


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "dask"}, "unknown executor 'dask'; valid: local, ray"),
    ({"jobs": 0}, "jobs must be >= 1, got 0"),
    ({"max_retries": -1}, "max-retries must be >= 0, got -1"),
    ({"kind": "ray", "cpus_per_episode": 0}, "cpus-per-episode must be > 0, got 0"),
    ({"kind": "ray", "gpus_per_episode": -0.5}, "gpus-per-episode must be >= 0, got -0.5"),
    ({"kind": "ray", "gpus_per_episode": 1.5}, "gpus-per-episode above 1 must be a whole number, got 1.5"),
    ({"gpus_per_episode": 0.5}, "gpus-per-episode needs --executor ray"),
    ({"ray_address": "10.0.0.1:6379"}, "ray-address needs --executor ray"),
])
def test_executor_settings_name_the_bad_value(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ExecutorSettings(**kwargs)


def test_ray_env_needs_name_and_value(tmp_path, capsys):
    assert parse_env_vars(["MS_ASSET_DIR=/data/ms", "A=b=c"]) == (("MS_ASSET_DIR", "/data/ms"), ("A", "b=c"))
    assert main(["sim-eval", *SWEEP, "--executor", "ray", "--ray-env", "MS_ASSET_DIR", "--out", str(tmp_path)]) == 2
    assert "ray-env needs NAME=VALUE, got 'MS_ASSET_DIR'" in capsys.readouterr().err


def test_a_line_cut_short_by_a_killed_run_loses_no_record(tmp_path, reference):
    out = tmp_path / "run"
    args = ["sim-eval", *SWEEP, "--jobs", "1", "--out", str(out)]
    assert main([*args[:4], "1", *args[5:]]) == 0  # the first episode of every task and variant
    path = out / "episodes.jsonl"
    text = path.read_text()
    path.write_text(text + text.splitlines()[0][:40])  # a record cut short, without its newline
    assert main(args) == 0
    assert records_of(out) == reference


def _children_running_episodes() -> list[int]:
    """PIDs of this process's forked children (the local pool's workers)."""
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if parent == me and b"resource_tracker" not in cmdline:
                pids.append(int(entry))
    return pids


def test_a_local_worker_process_killed_mid_sweep_is_replaced_and_its_episode_rerun(tmp_path, reference):
    from ladder_ros.evaluation import sim_eval

    out = tmp_path / "run"
    killed = []

    def kill_one_worker() -> None:
        path = out / "episodes.jsonl"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            if path.exists() and path.read_text().count("\n") >= 1:
                workers = _children_running_episodes()
                if workers:
                    os.kill(workers[0], signal.SIGKILL)
                    killed.append(workers[0])
                    return
            time.sleep(0.05)

    config = sweep_config(jobs=2)
    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    sim_eval.evaluate(config, out, progress=False, settings=ExecutorSettings(jobs=2, max_retries=2),
                      executor=LocalProcessExecutor(2))
    killer.join(timeout=5)
    assert killed, "no worker process was found to kill"
    assert records_of(out) == reference
    rerun = [r for r in raw_records(out) if r["execution"]["attempts"] > 1]
    assert rerun and all("worker process died" in r["execution"]["lost"][0] for r in rerun)


def _no_setup(config) -> dict:
    return {}


def _die_or_echo(job) -> dict:
    if job == "die":
        os._exit(3)  # a worker process killed mid-episode (out of memory, a crash in a native library)
    return {"job": job}


def test_a_job_submitted_after_a_worker_died_goes_to_a_fresh_pool():
    """A worker can die after the sweep collected an outcome and before it submits the next job: the pool is
    broken when the job arrives. The job goes to a fresh pool, and the episode that was in the broken one comes
    back lost (a submit that raised BrokenProcessPool stopped the sweep)."""
    executor = LocalProcessExecutor(2)
    executor.start(WorkSpec(setup=_no_setup, run=_die_or_echo, config=None, key="k"))
    try:
        executor.submit("die")
        wait(list(executor._futures))  # the worker is gone and the pool broken; no outcome was asked for yet
        executor.submit("next")
        outcomes = [executor.next_outcome(), executor.next_outcome()]
        assert executor.in_flight == 0
        executor.submit("after")  # the fresh pool is not replaced again by the old pool's late news
        assert executor.next_outcome().payload == {"job": "after"}
    finally:
        executor.close(abort=True)
    assert [o.job for o in outcomes if isinstance(o, Lost)] == ["die"]
    assert [o.payload for o in outcomes if isinstance(o, Finished)] == [{"job": "next"}]
