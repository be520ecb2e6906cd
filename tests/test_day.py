"""``ladder-ros day``: the blocked order, the records and resume, budget, disk, summary, bad input, and a day
killed mid-episode (SIGKILL) and started again on its folder.

The pure parts run with a scripted graph in this process; the acceptance test runs the command as a process
on the simulator graph (loopback only, tests/conftest.py), every wait bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ladder_ros.bringup.up import NodeDied
from ladder_ros.cli import main
from ladder_ros.core.metrics import wilson_interval
from ladder_ros.evaluation.day.disk import MB, DiskGuard, RecordingSizes
from ladder_ros.evaluation.day.graph import EpisodeResult
from ladder_ros.evaluation.day.order import blocks_of, check_same_day, day_order, day_plan_document
from ladder_ros.evaluation.day.progress import DayProgress, TimeBudget
from ladder_ros.evaluation.day.records import FINISHED, INTERRUPTED, STARTED, DayRecords, read_events
from ladder_ros.evaluation.day.resources import read_samples, resource_summary, sample_process
from ladder_ros.evaluation.day.runner import Day, DaySettings
from ladder_ros.evaluation.day.summary import build_summary, fault_kind, render_summary
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.panel.evaluation_plan import EvaluationPlan

REPO = Path(__file__).resolve().parent.parent
LADDER = [sys.executable, "-m", "ladder_ros.cli"]


def plan(**changes) -> EvaluationPlan:
    data = {"schema_version": 1, "name": "day_test", "variants": ["proprio_verifier", "periodic_trigger",
                                                                  "proprio_trigger"],
            "episodes": 3, "tasks": [{"task": "kitchen_single_1"}, {"task": "kitchen_single_2"}]}
    data.update(changes)
    return EvaluationPlan.parse(data)


def write_plan(folder: Path, **changes) -> Path:
    import yaml

    data = {"schema_version": 1, "name": "day_small", "variants": ["proprio_verifier", "periodic_trigger"],
            "episodes": 2, "tasks": [{"task": "kitchen_single_1"}]}
    data.update(changes)
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# --- the order --------------------------------------------------------------------------------------------------


def test_the_order_is_blocked_and_every_episode_is_in_it_once():
    p = plan()
    order = day_order(p, seed=11)
    assert sorted(d.key for d in order) == sorted(e.key for e in p.entries)
    assert [d.position for d in order] == list(range(len(order)))
    by_block: dict[int, list] = {}
    for d in order:
        by_block.setdefault(d.block, []).append(d)
    # a block is consecutive: one task and episode index, one of each variant
    assert [d.block for d in order] == sorted(d.block for d in order)
    for block in by_block.values():
        assert len({(d.entry.task_id, d.entry.episode) for d in block}) == 1
        assert sorted(d.entry.variant for d in block) == sorted(p.entries[0:3][i].variant for i in range(3))
    assert len(by_block) == len(blocks_of(p)) == 6


def test_the_order_is_drawn_from_the_seed_and_reproducible():
    p = plan()
    keys = [d.key for d in day_order(p, seed=3)]
    assert keys == [d.key for d in day_order(plan(), seed=3)]
    others = {tuple(d.key for d in day_order(p, seed=s)) for s in range(8)}
    assert len(others) > 1  # the seed decides: not the plan's own order every time
    plan_order = [e.key for e in p.entries]
    assert any(list(o) != plan_order for o in others)
    # both the order of the blocks and the order inside them vary with the seed
    block_orders = {tuple((d.entry.task_id, d.entry.episode) for d in day_order(p, seed=s)[::3]) for s in range(8)}
    inside = {tuple(d.entry.variant for d in day_order(p, seed=s)[:3]) for s in range(8)}
    assert len(block_orders) > 1 and len(inside) > 1


def test_a_blind_pair_keeps_its_a_before_its_b():
    p = EvaluationPlan.parse({"schema_version": 1, "name": "ab", "episodes": 4, "order_seed": 2,
                              "compare": [{"variant": "proprio_verifier"}, {"variant": "periodic_trigger"}],
                              "tasks": [{"task": "kitchen_single_1"}, {"task": "kitchen_single_2"}]})
    order = day_order(p, seed=5)
    assert [d.entry.arm for d in order] == ["A", "B"] * 8
    assert all(order[i].entry.pair == order[i + 1].entry.pair for i in range(0, 16, 2))


def test_a_day_of_another_plan_or_seed_is_refused():
    p = plan()
    stored = day_plan_document(p, 4, day_order(p, 4), mode="sim", graph="widowx", created="now")
    check_same_day(stored, p, 4, mode="sim", graph="widowx", folder="D")
    with pytest.raises(ConfigError, match="with --seed 4, not 5"):
        check_same_day(stored, p, 5, mode="sim", graph="widowx", folder="D")
    with pytest.raises(ConfigError, match="holds the day of another plan"):
        check_same_day(stored, plan(episodes=2), 4, mode="sim", graph="widowx", folder="D")
    with pytest.raises(ConfigError, match="mode 'sim', not 'twin'"):
        check_same_day(stored, p, 4, mode="twin", graph="widowx", folder="D")


# --- records, resume, the runner with a scripted graph ---------------------------------------------------------


class ScriptedLifecycle:
    """The graph's start, restart and stop, counted; the scripted graphs of the day's tests share it."""

    starts = restarts = stops = 0

    def start(self):
        self.starts += 1
        return "scripted"

    def restart(self):
        self.restarts += 1
        return "scripted again"

    def stop(self):
        self.stops += 1

    def pids(self):
        return {}


class ScriptedGraph(ScriptedLifecycle):
    """A graph whose episodes are scripted: ``faults`` maps a call number to an exception to raise there."""

    def __init__(self, recordings: Path, clock=None, episode_s: float = 10.0, faults=None, void=()):
        self.recordings = recordings
        self.clock = clock
        self.episode_s = episode_s
        self.faults = dict(faults or {})
        self.void = set(void)
        self.calls: list[tuple] = []

    def pids(self):
        return {"day": os.getpid()}

    def episode(self, task_id, *, variant, layout, seed, timeout_s):
        self.calls.append((task_id, variant, layout, seed))
        n = len(self.calls)
        if self.clock is not None:
            self.clock.now += self.episode_s
        if n in self.faults:
            raise self.faults[n]
        episode_id = f"ep{n:03d}"
        (self.recordings / episode_id).mkdir(parents=True, exist_ok=True)
        (self.recordings / episode_id / "bag.mcap").write_bytes(b"x" * 1000 * n)
        reason = "aborted: interrupted: the policy restarted" if n in self.void else "plan_complete"
        record = {"episode_id": episode_id, "task_id": task_id, "variant": variant, "success": seed % 2 == 0,
                  "scored": True, "finish_reason": reason, "subgoals_done": 1, "horizon": 1,
                  "safety": {"counts": {"clipped": 1}}}
        return EpisodeResult(episode_id, record, self.episode_s)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_day(out: Path, p: EvaluationPlan, graph, *, seed=0, budget_s=None, floor_mb=0, clock=None, said=None):
    order = day_order(p, seed)
    records = DayRecords(out).open()
    records.begin_run()
    return Day(out, order, records, graph, budget=TimeBudget(budget_s), guard=DiskGuard(floor_mb * MB),
               settings=DaySettings(episode_timeout_s=60.0, max_restarts=2, sample_period_s=60.0),
               meta={"plan": {"name": p.name}}, say=(said.append if said is not None else lambda line: None),
               **({"clock": clock} if clock is not None else {})), records


def finished_keys(out: Path) -> Counter:
    events, _ = read_events(out / "day_records.jsonl")
    return Counter(e["key"] for e in events if e["event"] == FINISHED)


def test_resume_marks_the_episode_under_way_interrupted_and_runs_it_again(tmp_path):
    p = plan(episodes=1, tasks=[{"task": "kitchen_single_1"}])
    order = day_order(p, 0)
    # a first run killed during its second episode: started, never finished, its last line cut short
    with DayRecords(tmp_path) as records:
        records.begin_run()
        records.append(STARTED, key=order[0].key, position=0, attempt=1)
        records.append(FINISHED, key=order[0].key, position=0, attempt=1, episode_id="first", wall_s=5.0,
                       success=True, scored=True, finish_reason="plan_complete", record={"variant": "x"})
        records.append(STARTED, key=order[1].key, position=1, attempt=1)
    with open(tmp_path / "day_records.jsonl", "a") as f:
        f.write('{"event": "finished", "key": "cut sh')
    graph = ScriptedGraph(tmp_path / "recordings")
    day, records = make_day(tmp_path, p, graph)
    assert day.run() == 0
    records.close()
    events, _ = read_events(tmp_path / "day_records.jsonl")
    assert (tmp_path / "day_records.jsonl").read_text().endswith("\n")  # the torn line is gone
    interrupted = [e for e in events if e["event"] == INTERRUPTED]
    assert [(e["key"], e["kind"], e["run"]) for e in interrupted] == [(order[1].key, "killed", 2)]
    assert finished_keys(tmp_path) == Counter({d.key: 1 for d in order})
    rerun = [e for e in events if e["event"] == FINISHED and e["key"] == order[1].key]
    assert rerun[0]["attempt"] == 2 and rerun[0]["run"] == 2
    assert len(graph.calls) == 2  # the finished one did not run again
    summary = json.loads((tmp_path / "day_summary.json").read_text())
    assert summary["finished"] == 3 and summary["interrupted_attempts"] == 1 and summary["interruptions"] == {
        "killed": 1}
    assert len((tmp_path / "episodes.jsonl").read_text().splitlines()) == 3


def test_a_node_that_dies_interrupts_its_episode_the_graph_comes_up_again_and_it_reruns(tmp_path):
    p = plan(episodes=1, tasks=[{"task": "kitchen_single_1"}])
    graph = ScriptedGraph(tmp_path / "recordings", faults={2: NodeDied("node policy exited with code -9")},
                          void={4})
    said: list[str] = []
    day, records = make_day(tmp_path, p, graph, said=said)
    assert day.run() == 0
    records.close()
    events, _ = read_events(tmp_path / "day_records.jsonl")
    interrupted = [e for e in events if e["event"] == INTERRUPTED]
    assert [e["kind"] for e in interrupted] == ["node died", "void"]
    assert interrupted[0]["reason"] == "node policy exited with code -9"
    assert graph.restarts == 1 and graph.calls[1] == graph.calls[2]  # the same episode, after the restart
    assert finished_keys(tmp_path) == Counter({e.key: 1 for e in p.entries})
    assert any("graph up again" in line for line in said)


def test_a_graph_that_keeps_failing_stops_the_day_naming_why(tmp_path):
    p = plan(episodes=1, tasks=[{"task": "kitchen_single_1"}])
    graph = ScriptedGraph(tmp_path / "recordings", faults={n: NodeDied("node sim_bridge exited with code 1")
                                                           for n in range(1, 10)})
    said: list[str] = []
    day, records = make_day(tmp_path, p, graph, said=said)
    assert day.run() == 1
    records.close()
    assert len(graph.calls) == 3  # max_restarts 2: the third failure in a row stops the day
    assert any(line.startswith("stopping: 3 attempts in a row failed") and "sim_bridge" in line for line in said)
    assert json.loads((tmp_path / "day_summary.json").read_text())["stopped"] == "faults"


def test_a_graph_that_does_not_come_up_again_stops_the_day_in_one_line(tmp_path):
    class NoRestart(ScriptedGraph):
        def restart(self):
            self.restarts += 1
            raise LadderError("the graph did not come up within 120 s")

    p = plan(episodes=1, tasks=[{"task": "kitchen_single_1"}])
    graph = NoRestart(tmp_path / "recordings", faults={1: NodeDied("node orchestrator exited with code -11")})
    said: list[str] = []
    day, records = make_day(tmp_path, p, graph, said=said)
    assert day.run() == 1
    records.close()
    assert graph.restarts == 2  # the failure under the episode, then two restarts: three in a row
    assert [line for line in said if line.startswith("stopping")] == [
        "stopping: the graph did not come up 3 times in a row (last: the graph did not come up within 120 s); "
        f"node logs in {tmp_path / 'logs'}"]
    assert graph.stops == 1


def test_the_budget_stops_the_day_between_episodes_when_the_next_would_not_fit(tmp_path):
    p = plan()  # 18 episodes of 10 s
    clock = Clock()
    graph = ScriptedGraph(tmp_path / "recordings", clock=clock, episode_s=10.0)
    said: list[str] = []
    day, records = make_day(tmp_path, p, graph, budget_s=45.0, clock=clock, said=said)
    assert day.run() == 0
    records.close()
    assert len(graph.calls) == 4  # 40 s done; a fifth would end at 50 s
    assert any(line.startswith("stopping: the time budget") and "14 episodes not run" in line for line in said)
    # started again (a fresh budget), the day goes on where it stopped
    day, records = make_day(tmp_path, p, graph, budget_s=45.0, clock=clock)
    day.run()
    records.close()
    assert sum(finished_keys(tmp_path).values()) == 8 and set(finished_keys(tmp_path).values()) == {1}


def test_the_disk_guard_stops_before_an_episode_that_would_not_fit(tmp_path):
    guard = DiskGuard(floor_bytes=500 * MB)
    assert guard.shortfall(600 * MB) is None and "floor" in guard.shortfall(100 * MB)
    guard.saw_episode(400 * MB)
    assert guard.need_bytes == 800 * MB and "twice the largest episode" in guard.shortfall(600 * MB)
    sizes = RecordingSizes(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "bag").write_bytes(b"x" * 3000)
    assert sizes.largest(["a", "missing"]) == 3000
    p = plan(episodes=1, tasks=[{"task": "kitchen_single_1"}])
    said: list[str] = []
    day, records = make_day(tmp_path, p, ScriptedGraph(tmp_path / "recordings"), floor_mb=10 ** 9, said=said)
    assert day.run() == 1
    records.close()
    assert any(line.startswith("stopping: not enough disk") for line in said)
    assert finished_keys(tmp_path) == Counter()


def test_progress_line_and_budget():
    progress = DayProgress(total=12)
    for wall, success in ((20.0, True), (30.0, False), (25.0, True)):
        progress.add(wall, success, scored=True)
    assert progress.line(83.0) == "[ 3/12] 2/3 successes · elapsed 0:01:23 · ETA 0:03:45 (25.0 s an episode)"
    budget = TimeBudget(100.0)
    assert budget.next_fits(70.0, 25.0) and not budget.next_fits(80.0, 25.0) and budget.next_fits(99.0, None)
    with pytest.raises(ValueError):
        TimeBudget(0.0)


# --- summary and resources ---------------------------------------------------------------------------------------


def test_summary_wilson_intervals_interventions_and_faults():
    finished = [{"key": f"k{i}", "wall_s": 10.0, "scored": True, "success": i < 3,
                 "finish_reason": "aborted: robot fault: joint 3 stalled" if i == 4 else "plan_complete",
                 "record": {"variant": "proprio_verifier", "safety": {"counts": {"clipped": 2, "held": 0}}}}
                for i in range(5)]
    finished.append({"key": "s", "wall_s": 5.0, "scored": True, "success": False,
                     "finish_reason": "aborted: operator stop", "record": {"variant": "periodic_trigger"}})
    interrupted = [{"kind": "killed", "reason": "the day stopped"},
                   {"kind": "void", "reason": "aborted: operator abort"}]
    s = build_summary(meta={"plan": {"name": "p"}}, planned=8, finished=finished, interrupted=interrupted,
                      resources={}, disk_bytes=12 * MB)
    v = s["variants"]["proprio_verifier"]
    assert (v["episodes"], v["successes"], v["scored"]) == (5, 3, 5)
    assert v["ci95"] == [round(x, 4) for x in wilson_interval(3, 5)]
    assert s["faults"] == {"robot fault": 1} and s["interruptions"] == {"killed": 1}
    assert s["interventions"]["operator"] == {"stop": 1, "abort": 1} and s["interventions"]["safety"] == {"clipped": 10}
    assert s["remaining"] == 2 and s["disk_bytes"] == 12 * MB
    table = render_summary(s)
    assert "proprio_verifier" in table and "3/5" in table and "robot fault 1" in table
    assert fault_kind("budget_exhausted") is None and fault_kind("aborted: stalled: no action within 60 s") == "stalled"


def test_resources_are_sampled_from_proc_and_growth_counts_after_ten_episodes(tmp_path):
    own = sample_process(os.getpid())
    assert own["rss_kb"] > 0 and own["threads"] >= 1 and own["fds"] >= 3
    assert sample_process(2 ** 22 + 12345) is None
    samples = [{"episodes_done": n, "nodes": {"policy": {"pid": 7, "rss_kb": 1000 + 10 * n, "threads": 5, "fds": 9}}}
               for n in range(0, 16)]
    samples.append({"episodes_done": 16, "nodes": {"policy": {"pid": 8, "rss_kb": 900, "threads": 5, "fds": 9}}})
    policy = resource_summary(samples)["policy"]
    # restarted at episode 16: the growth is the longest-running process's, from its tenth episode
    assert policy["rss_kb"] == {"first": 1000, "last": 900, "max": 1150, "growth": 50, "settled": 1100}
    assert (policy["restarts"], policy["growth_pid"], policy["growth_episodes"]) == (1, 7, 5)
    policy = resource_summary(samples[:-1])["policy"]
    assert policy["rss_kb"]["growth"] == 50 and policy["threads"]["growth"] == 0
    assert resource_summary(samples[:5])["policy"]["rss_kb"]["growth"] is None  # not ten episodes yet
    samples[-1]["run"] = 2  # the day started again: a new process, not a restart
    assert resource_summary(samples)["policy"]["restarts"] == 0
    # A process started at episode 16 settles from its own tenth episode: its start-up is not growth.
    late_rss = [500 + (100 if n > 16 else 0) + 2 * max(0, n - 26) for n in range(16, 46)]
    late = [{"run": 2, "episodes_done": n, "nodes": {"policy": {"pid": 9, "rss_kb": rss, "threads": 5, "fds": 9}}}
            for n, rss in zip(range(16, 46), late_rss)]
    policy = resource_summary(samples[:-1] + late)["policy"]
    assert (policy["growth_pid"], policy["growth_episodes"], policy["rss_kb"]["growth"]) == (9, 19, 38)
    (tmp_path / "r.jsonl").write_text(json.dumps(samples[0]) + "\n" + '{"t": 1, "no')
    assert read_samples(tmp_path / "r.jsonl") == [samples[0]]


# --- bad input: one line, exit 2, nothing written ---------------------------------------------------------------


def day_cli(capsys, *args):
    code = main(["day", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines()


@pytest.mark.parametrize("changes, expected", [
    ({"tasks": [{"task": "kitchen_singel_1"}]}, "unknown task 'kitchen_singel_1'"),
    ({"variants": ["proprio_verifer"]}, "variants"),
    ({"tasks": [{"task": "kitchen_single_1", "layouts": 99}], "episodes": 30}, "has 24 layouts"),
])
def test_a_plan_the_suite_cannot_run_is_one_line_and_writes_nothing(tmp_path, capsys, changes, expected):
    out = tmp_path / "day"
    code, err = day_cli(capsys, write_plan(tmp_path, **changes), "--out", out, "--sim")
    assert code == 2 and len(err) == 1 and err[0].startswith("ladder-ros day: error:") and expected in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("args, expected", [
    (["--budget-min", "0"], "--budget-min must be > 0 minutes, got 0"),
    (["--budget-min", "-5"], "--budget-min must be > 0 minutes, got -5"),
    (["--min-free-mb", str(10 ** 12)], "its disk is full for a day"),
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--auto-reset", "--reset-tries", "0"], "--reset-tries must be >= 1, got 0"),
])
def test_bad_arguments_are_one_line_and_write_nothing(tmp_path, capsys, args, expected):
    out = tmp_path / "day"
    code, err = day_cli(capsys, write_plan(tmp_path), "--out", out, "--sim", *args)
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert not out.exists()


def test_an_out_folder_that_cannot_be_written_or_no_place_to_run_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for out, expected in ((blocker, "is a file, not a folder"), (blocker / "day", "is a file, not a folder")):
        code, err = day_cli(capsys, write_plan(tmp_path), "--out", out, "--sim")
        assert code == 2 and len(err) == 1 and expected in err[0], err
    code, err = day_cli(capsys, write_plan(tmp_path), "--out", tmp_path / "day")
    assert code == 2 and len(err) == 1 and "--sim" in err[0] and "--rehearsal" in err[0]
    assert blocker.read_text() == "not a folder" and not (tmp_path / "day").exists()


def test_resuming_with_another_plan_or_seed_is_refused_and_changes_nothing(tmp_path, capsys):
    out = tmp_path / "day"
    p = EvaluationPlan.load(write_plan(tmp_path))
    out.mkdir()
    (out / "day_plan.json").write_text(json.dumps(day_plan_document(p, 3, day_order(p, 3), mode="sim", graph="widowx",
                                                                    created="now")))
    (out / "day_records.jsonl").write_text('{"event": "run_started", "t": 1, "run": 1}\n')
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    code, err = day_cli(capsys, write_plan(tmp_path), "--out", out, "--sim", "--seed", "4")
    assert code == 2 and len(err) == 1 and "--seed 3, not 4" in err[0], err
    other = tmp_path / "other"
    other.mkdir()
    code, err = day_cli(capsys, write_plan(other, episodes=3), "--out", out, "--sim")
    assert code == 2 and len(err) == 1 and "another plan" in err[0], err
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


# --- acceptance: killed mid-episode, started again, every episode finished exactly once ---------------------------


def _node_pid(root: int, executable: str) -> int | None:
    from ladder_ros.runtime.executables import node_module
    from tests.processes import descendants

    module = node_module(executable).encode()
    for pid in descendants(root):
        with contextlib.suppress(OSError):
            if module in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
    return None


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (a container's first process may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _events(out: Path) -> list[dict]:
    with contextlib.suppress(ConfigError):
        return read_events(out / "day_records.jsonl")[0]
    return []


def _wait(condition, timeout_s: float, what: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process.poll() is None, f"ladder-ros day exited ({process.returncode}) before {what}:\n" + \
            log.read_text()
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s:\n" + log.read_text()
        time.sleep(0.02)


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_day_killed_mid_episode_finishes_every_episode_exactly_once_when_started_again(tmp_path):
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    pytest.importorskip("mujoco", reason="the simulator graph runs the built-in MuJoCo tabletop")
    from tests.processes import descendants, kill_tree

    out = tmp_path / "day"
    plan_file = write_plan(tmp_path)  # kitchen_single_1 x 2 variants x 2 episodes: 4 short episodes
    # The fastest simulator graph: no rendering (the scripted expert and the oracle verifier read the simulator's
    # state); the stall watchdog beyond the test's bounds, so a policy held still below never ends an episode.
    command = [*LADDER, "day", str(plan_file), "--out", str(out), "--sim", "--seed", "7", "--sample-s", "1",
               "--set", "sim_bridge.render=false", "--set", "orchestrator.stall_warn_s=500",
               "--set", "orchestrator.stall_abort_s=600"]
    first_log = tmp_path / "first.log"
    with open(first_log, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    policy, below = None, []
    try:
        _wait(lambda: any(e["event"] == FINISHED for e in _events(out)), 150, "finished episode", process, first_log)
        # From now on no episode can end: the policy is held (SIGSTOP), and in lockstep the simulator waits for
        # its action. The day is killed once its records show an episode started and nothing after it.
        policy = _node_pid(process.pid, "policy")
        assert policy is not None, "no policy process below ladder-ros day"
        os.kill(policy, signal.SIGSTOP)
        seen: list = []

        def started_and_still():
            events = _events(out)
            seen.append(len(events))
            return events[-1]["event"] == STARTED and len(seen) > 25 and len(set(seen[-25:])) == 1
        _wait(started_and_still, 60, "episode started and under way", process, first_log)
        below = descendants(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait()
        os.kill(policy, signal.SIGCONT)  # so that it stops with the rest of the graph (it got SIGTERM)
        deadline = time.monotonic() + 30
        while any(map(_running, below)) and time.monotonic() < deadline:  # the nodes stop as their day died
            time.sleep(0.1)
    finally:
        if policy is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(policy, signal.SIGCONT)
        if process.poll() is None:
            kill_tree(process)
    for pid in filter(_running, below):  # none of the killed day's nodes may run when the day starts again
        os.kill(pid, signal.SIGKILL)
    killed = _events(out)
    assert killed[-1]["event"] == STARTED, killed[-1]
    under_way = killed[-1]["key"]
    done_before = {e["key"] for e in killed if e["event"] == FINISHED}
    assert done_before and under_way not in done_before

    second = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=180)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming (start 2 on this folder)" in second.stdout and under_way in second.stdout
    events = _events(out)
    planned = {d["key"] for d in json.loads((out / "day_plan.json").read_text())["order"]}
    assert len(planned) == 4
    assert finished_keys(out) == Counter({key: 1 for key in planned})  # every planned episode finished exactly once
    interrupted = [e for e in events if e["event"] == INTERRUPTED]
    assert [(e["key"], e["kind"], e["run"]) for e in interrupted] == [(under_way, "killed", 2)]
    rerun = next(e for e in events if e["event"] == FINISHED and e["key"] == under_way)
    assert rerun["attempt"] == 2 and rerun["run"] == 2
    assert all(e["run"] == 1 for e in events if e["event"] == FINISHED and e["key"] in done_before)
    summary = json.loads((out / "day_summary.json").read_text())
    assert summary["finished"] == 4 and summary["remaining"] == 0 and summary["interruptions"] == {"killed": 1}
    assert sum(v["episodes"] for v in summary["variants"].values()) == 4
    assert {"policy", "orchestrator", "sim_bridge", "day"} <= set(summary["resources"])
    assert "95% CI" in second.stdout and "stopped: complete" in second.stdout
