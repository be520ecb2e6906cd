"""``ladder-ros day --auto-reset``: a reset after every task episode, the next one from the scene it left, a failed
reset pausing the day and a restart recording the operator's fix.

The day's logic runs with a scripted graph in this process; the acceptance test runs the command as a process on
the simulator graph (loopback only, tests/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ladder_ros.bringup.up import NodeDied
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.evaluation.day.disk import DiskGuard
from ladder_ros.evaluation.day.graph import EpisodeResult
from ladder_ros.evaluation.day.order import check_same_day, day_order, day_plan_document
from ladder_ros.evaluation.day.progress import TimeBudget
from ladder_ros.evaluation.day.records import (
    FINISHED,
    INTERVENTION,
    PAUSED,
    RESET,
    STARTED,
    DayRecords,
    read_events,
)
from ladder_ros.evaluation.day.runner import Day, DaySettings
from ladder_ros.panel.evaluation_plan import EvaluationPlan
from tests.test_day import ScriptedLifecycle, write_plan

REPO = Path(__file__).resolve().parent.parent
LADDER = [sys.executable, "-m", "ladder_ros.cli"]
OUT_OF_PLACE = "spoon on the far right side of the table: 0 of 1"


def two_episodes() -> EvaluationPlan:
    return EvaluationPlan.parse({"schema_version": 1, "name": "resets", "variants": ["proprio_verifier"],
                                 "episodes": 2, "tasks": [{"task": "kitchen_single_2"}]})


class ResettingGraph(ScriptedLifecycle):
    """A scripted graph that runs resets too: ``unconfirmed``/``refused``/``dies`` name the resets (1-based) that
    are not confirmed, refused by the orchestrator, or interrupted by a node that died."""

    def __init__(self, recordings: Path, unconfirmed=(), refused=(), dies=(), aborted=()):
        self.recordings = recordings
        self.unconfirmed, self.refused, self.dies = set(unconfirmed), set(refused), set(dies)
        self.aborted = set(aborted)  # resets a node restart ends before their own rules (not confirmed)
        self.calls: list[dict] = []
        self.resets = 0

    def episode(self, task_id, *, variant, layout, seed, timeout_s, **start):
        self.calls.append({"task_id": task_id, "seed": seed, **start})
        n = len(self.calls)
        episode_id = f"ep{n:03d}"
        record = {"episode_id": episode_id, "task_id": task_id, "variant": variant, "success": True, "scored": True,
                  "finish_reason": "plan_complete", "subgoals_done": 2, "horizon": 2, "kind": "task",
                  "start": start.get("start", "layout"), "start_after": start.get("start_after")}
        if start.get("kind") == "reset":
            self.resets += 1
            if self.resets in self.dies:
                raise NodeDied("node sim_bridge exited with code -9")
            if self.resets in self.refused:
                raise LadderError(f"episode {episode_id}: start refused: the reset after episode "
                                  f"{start['start_after']} cannot be planned: the count could not be read")
            confirmed = self.resets not in self.unconfirmed | self.aborted
            if self.resets in self.aborted:
                record["finish_reason"] = "aborted: policy restarted mid-episode: the policy's state is lost"
            record.update(task_id=f"{task_id}/reset", kind="reset", reset={
                "moves": [{"object": "spoon", "destination": "right_far", "text": "put the spoon on ..."}],
                "confirmed": confirmed, "out_of_place": [] if confirmed else [OUT_OF_PLACE]})
        return EpisodeResult(episode_id, record, 5.0)


def make_auto_day(out: Path, graph, said: list[str], p: EvaluationPlan | None = None, scene_of=lambda t: None,
                  reset_tries: int = 2):
    out.mkdir(parents=True, exist_ok=True)
    p = p or two_episodes()
    records = DayRecords(out).open()
    records.begin_run()
    day = Day(out, day_order(p, 0), records, graph, budget=TimeBudget(None), guard=DiskGuard(0),
              settings=DaySettings(episode_timeout_s=60.0, max_restarts=2, sample_period_s=60.0,
                                   reset_tries=reset_tries),
              meta={"plan": {"name": p.name}}, say=said.append, auto_reset=True, scene_of=scene_of)
    return day, records


def events_of(out: Path, kind: str) -> list[dict]:
    return [e for e in read_events(out / "day_records.jsonl")[0] if e["event"] == kind]


def test_each_task_episode_is_followed_by_its_reset_and_the_next_starts_from_that_scene(tmp_path):
    graph = ResettingGraph(tmp_path / "recordings")
    said: list[str] = []
    day, records = make_auto_day(tmp_path, graph, said)
    assert day.run() == 0
    records.close()
    kinds = [(c.get("kind", "task"), c.get("start", "layout"), c.get("start_after")) for c in graph.calls]
    assert kinds == [("task", "layout", None), ("reset", "after_task", "ep001"), ("task", "after_reset", "ep002"),
                     ("reset", "after_task", "ep003")]
    resets = events_of(tmp_path, RESET)
    assert [(e["after"], e["episode_id"], e["outcome"]) for e in resets] == [
        ("ep001", "ep002", "confirmed"), ("ep003", "ep004", "confirmed")]
    assert [e.get("start_after") for e in events_of(tmp_path, STARTED)] == [None, "ep002"]
    lines = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in lines] == ["task", "reset", "task", "reset"]
    summary = json.loads((tmp_path / "day_summary.json").read_text())
    auto = summary["auto_reset"]
    assert (auto["resets_attempted"], auto["resets_succeeded"], auto["operator_interventions"]) == (2, 2, 0)
    assert auto["task_episodes_by_start"] == {
        "after_reset": {"episodes": 1, "successes": 1, "scored": 1, "success_rate": 1.0, "ci95": [0.2065, 1.0]},
        "layout": {"episodes": 1, "successes": 1, "scored": 1, "success_rate": 1.0, "ci95": [0.2065, 1.0]}}
    assert summary["finished"] == 2  # resets count in no task's rate
    assert any(line.startswith("  auto-reset: 2/2 resets succeeded") for line in said)


def test_an_unconfirmed_reset_runs_again_from_the_scene_it_left_before_the_day_pauses(tmp_path):
    graph = ResettingGraph(tmp_path / "recordings", unconfirmed={1})
    said: list[str] = []
    day, records = make_auto_day(tmp_path, graph, said)
    assert day.run() == 0  # the second try put the scene back: nobody was needed
    records.close()
    assert [e["outcome"] for e in events_of(tmp_path, RESET)] == ["not confirmed", "confirmed", "confirmed"]
    assert [c.get("start_after") for c in graph.calls[1:3]] == ["ep001", "ep001"]  # the same reset again
    assert graph.calls[2]["seed"] == graph.calls[1]["seed"] + 7919  # drawn anew, not the failed try replayed
    assert graph.calls[3].get("start_after") == "ep003"  # the next episode continues the second try's scene
    assert events_of(tmp_path, PAUSED) == [] and events_of(tmp_path, INTERVENTION) == []
    assert any("the reset runs again from the scene as it is (try 2 of 2)" in line for line in said)
    auto = json.loads((tmp_path / "day_summary.json").read_text())["auto_reset"]
    assert (auto["resets_attempted"], auto["resets_succeeded"], auto["operator_interventions"]) == (3, 2, 0)


def test_a_failed_reset_pauses_the_day_and_a_restart_records_the_operators_fix(tmp_path):
    graph = ResettingGraph(tmp_path / "recordings", unconfirmed={1, 2})
    said: list[str] = []
    day, records = make_auto_day(tmp_path, graph, said)
    assert day.run() == 1  # paused after both tries
    records.close()
    (paused,) = events_of(tmp_path, PAUSED)
    reason = f"the reset after episode ep001 left objects out of place: {OUT_OF_PLACE}"
    assert paused["reason"].startswith(reason)
    assert any(line.startswith(f"paused: the operator is needed: {reason}") for line in said)
    assert len(events_of(tmp_path, FINISHED)) == 1 and len(graph.calls) == 3
    assert json.loads((tmp_path / "day_summary.json").read_text())["stopped"] == "paused for the operator"

    # The operator put the scene right and starts the day again: the fix is recorded, the day goes on.
    graph = ResettingGraph(tmp_path / "recordings")
    said = []
    day, records = make_auto_day(tmp_path, graph, said)
    assert day.run() == 0
    records.close()
    (intervention,) = events_of(tmp_path, INTERVENTION)
    assert intervention["reason"] == paused["reason"] and intervention["run"] == 2
    assert intervention["kind"] == "the operator put the scene right"
    assert graph.calls[0].get("start") is None  # built from its layout, as the operator set it
    assert len(events_of(tmp_path, FINISHED)) == 2
    auto = json.loads((tmp_path / "day_summary.json").read_text())["auto_reset"]
    assert (auto["resets_attempted"], auto["resets_succeeded"], auto["operator_interventions"]) == (3, 1, 1)
    assert auto["outcomes"]["not confirmed"] == 2 and auto["interventions"][0]["reason"] == paused["reason"]
    assert any("recorded as an intervention" in line for line in said)


def test_a_reset_that_cannot_be_planned_pauses_and_one_the_graph_loses_builds_the_next_from_its_layout(tmp_path):
    graph = ResettingGraph(tmp_path / "a" / "recordings", refused={1})
    said: list[str] = []
    day, records = make_auto_day(tmp_path / "a", graph, said)
    assert day.run() == 1
    records.close()
    (reset,) = events_of(tmp_path / "a", RESET)
    assert reset["outcome"] == "not planned" and "cannot be planned" in events_of(tmp_path / "a", PAUSED)[0]["reason"]

    graph = ResettingGraph(tmp_path / "b" / "recordings", dies={1})
    day, records = make_auto_day(tmp_path / "b", graph, said)
    assert day.run() == 0
    records.close()
    assert graph.restarts == 1 and graph.calls[2].get("start") is None  # a new simulator: the layout again
    assert [e["outcome"] for e in events_of(tmp_path / "b", RESET)] == ["interrupted", "confirmed"]
    assert events_of(tmp_path / "b", PAUSED) == []


def test_a_day_resumed_with_or_without_auto_reset_as_it_began_and_a_plan_without_regions_is_refused(tmp_path):
    p = two_episodes()
    stored = day_plan_document(p, 0, day_order(p, 0), mode="sim", graph="widowx", created="now", auto_reset=True)
    check_same_day(stored, p, 0, mode="sim", graph="widowx", folder="D", auto_reset=True)
    with pytest.raises(ConfigError, match="auto_reset True, not False"):
        check_same_day(stored, p, 0, mode="sim", graph="widowx", folder="D")
    plan_file = write_plan(tmp_path, tasks=[{"task": "carrot_on_plate_1"}], variants=["proprio_verifier"])
    done = subprocess.run([*LADDER, "day", str(plan_file), "--out", str(tmp_path / "day"), "--sim", "--auto-reset",
                           "--set", "orchestrator.suite=config/suites/bridge.yaml",
                           "--set", "sim_bridge.suite=config/suites/bridge.yaml"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    err = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(err) == 1, done.stderr
    assert "--auto-reset: task carrot_on_plate_1" in err[0] and "cannot be reset automatically" in err[0]
    assert not (tmp_path / "day").exists()


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_day_on_the_simulator_graph_resets_after_every_episode(tmp_path):
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    pytest.importorskip("mujoco", reason="the simulator graph runs the built-in MuJoCo tabletop")
    out = tmp_path / "day"
    plan_file = write_plan(tmp_path, tasks=[{"task": "kitchen_single_2"}], variants=["proprio_verifier"])
    done = subprocess.run([*LADDER, "day", str(plan_file), "--out", str(out), "--sim", "--auto-reset", "--seed", "1",
                           "--set", "sim_bridge.render=false", "--set", "policy.noise='off'"],
                          capture_output=True, text=True, cwd=REPO, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records] == ["task", "reset", "task", "reset"]
    first, reset, second, _ = records
    assert first["start"] == "layout" and reset["start_after"] == first["episode_id"]
    assert reset["reset"]["confirmed"] and reset["reset"]["moves"]
    assert (second["start"], second["start_after"]) == ("after_reset", reset["episode_id"])
    auto = json.loads((out / "day_summary.json").read_text())["auto_reset"]
    assert (auto["resets_attempted"], auto["resets_succeeded"], auto["operator_interventions"]) == (2, 2, 0)
    assert "auto-reset: 2/2 resets succeeded" in done.stdout


def test_the_operator_panel_says_what_an_unconfirmed_reset_left_out_of_place(tmp_path):
    from ladder_ros.messages import EpisodeStatus
    from ladder_ros.panel.controller import PanelController
    from ladder_ros.panel.records import EpisodeRecordStore
    from tests.test_panel_logic import FakeOutbox

    ctl = PanelController(FakeOutbox(), EpisodeRecordStore(tmp_path))
    line = f"the reset after episode e1 left objects out of place: {OUT_OF_PLACE}"
    reset = {"kind": "reset", "reset": {"confirmed": False, "out_of_place": [OUT_OF_PLACE]}, "events": []}
    for state, result in (("running", None), ("finished", reset)):
        ctl.on_status(EpisodeStatus(episode_id="r1", state=state, kind="reset", start="after_task", start_after="e1",
                                    result=result, message=line if result else ""))
    assert ctl.model.log.lines[-1] == f"RESET NOT CONFIRMED (r1): {line}; put the scene right before the next episode"


def test_a_task_set_in_another_scene_is_built_from_its_layout(tmp_path):
    p = EvaluationPlan.parse({"schema_version": 1, "name": "two_scenes", "variants": ["proprio_verifier"],
                              "episodes": 2, "tasks": [{"task": "kitchen_single_2"}, {"task": "duplicates_2"}]})
    graph = ResettingGraph(tmp_path / "recordings")
    said: list[str] = []
    day, records = make_auto_day(tmp_path, graph, said, p, scene_of=lambda task_id: task_id.split("_")[0])
    assert day.run() == 0
    records.close()
    tasks = [(c["task_id"], c.get("start", "layout")) for c in graph.calls if c.get("kind") != "reset"]
    assert len(tasks) == 4
    for (previous, _), (task, start) in zip(tasks, tasks[1:]):
        assert start == ("after_reset" if task == previous else "layout"), tasks
    assert any("is set in another scene" in line for line in said)


def test_a_reset_a_node_restart_ended_runs_again_from_the_scene_as_it_is(tmp_path):
    graph = ResettingGraph(tmp_path / "recordings", aborted={1})
    said: list[str] = []
    day, records = make_auto_day(tmp_path, graph, said)
    assert day.run() == 0
    records.close()
    assert [e["outcome"] for e in events_of(tmp_path, RESET)] == ["interrupted", "confirmed", "confirmed"]
    assert [c.get("start_after") for c in graph.calls[1:3]] == ["ep001", "ep001"]  # the same reset again
    assert graph.calls[3].get("start_after") == "ep003" and events_of(tmp_path, PAUSED) == []
