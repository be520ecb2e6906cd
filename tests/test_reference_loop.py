"""The in-process reference loop on the toy world: ordering, scoring and determinism."""

from ladder_ros.core import events as ev
from ladder_ros.core.presets import WIDOWX
from ladder_ros.core.task import Subgoal, Task, TaskCategory
from ladder_ros.evaluation.reference_loop import run_episode
from tests.fakes import OracleCounter, ToyPolicy, ToyWorld

TASK = Task(task_id="toy2", scene="toy", category=TaskCategory.SINGLE_DESTINATION,
            instruction="put the carrot and the spoon on the plate",
            subgoals=(Subgoal("carrot", "plate", "put the carrot on the plate"),
                      Subgoal("spoon", "plate", "put the spoon on the plate")))


def run(variant, miss_rate=0.0, seed=0):
    return run_episode(ToyWorld(), ToyPolicy(TASK, seed, miss_rate), TASK, variant, WIDOWX, layout=0, seed=seed,
                       verifier=OracleCounter())


def test_proprio_verifier_completes_both_subgoals_and_stops():
    rec = run("proprio_verifier")
    assert rec.success and rec.subgoals_done == 2
    assert rec.finish_reason == "plan_complete"
    # close actions at steps 1..3 are observed closed at 2..4; the open at 5 is the release; query 5 later
    req = [e for e in rec.events if e["kind"] == ev.VERIFICATION_REQUESTED]
    assert req[0]["step"] == 10 and req[0]["reason"] == "after_release"
    assert rec.verification_queries == 2
    assert rec.steps_used == rec.events[-1]["step"]


def test_misses_are_retried_by_the_verifier_but_not_by_the_trigger():
    verified = [run("proprio_verifier", miss_rate=0.5, seed=s) for s in range(6)]
    triggered = [run("proprio_trigger", miss_rate=0.5, seed=s) for s in range(6)]
    assert sum(r.success for r in verified) > sum(r.success for r in triggered)
    causes = {o["cause"] for r in triggered for o in r.subgoals if o["cause"]}
    assert "advanced_before_completion" in causes
    assert any(e["reason"] == "retry_in_place" for r in verified for e in r.events if e["kind"] == ev.QUEUE_CHANGED)


def test_privileged_verifier_uses_the_settle_window():
    rec = run("privileged_verifier")
    done = [e for e in rec.events if e["kind"] == ev.SUBGOAL_COMPLETED]
    # carrot released, observed at step 5 -> predicate and open gripper at 5, 6, 7 -> complete at 7
    assert done[0]["step"] == 7 and done[0]["by"] == "privileged"
    assert rec.success


def test_same_seed_same_events():
    a = run("proprio_verifier", miss_rate=0.3, seed=3)
    b = run("proprio_verifier", miss_rate=0.3, seed=3)
    assert a.events == b.events and a.final_goal == b.final_goal


def test_low_level_policy_runs_the_whole_budget():
    rec = run("low_level_policy")
    assert rec.steps_used == 200 and rec.finish_reason == "budget_exhausted"
    assert rec.verifier is None
