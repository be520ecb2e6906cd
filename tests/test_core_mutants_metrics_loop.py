"""Scoring, summaries and the loop's edge rules that the other core tests leave open (found by mutation testing)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ladder_ros.core import errors as errors_module
from ladder_ros.core import events as ev
from ladder_ros.core import metrics
from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.goals import GoalState, GoalTracker
from ladder_ros.core.orchestrator import StepInput, make_orchestrator
from ladder_ros.core.presets import FRANKA, WIDOWX
from ladder_ros.core.task import Subgoal, Task, TaskCategory
from ladder_ros.core.triggers import GripperMonitor, GripperTrigger
from ladder_ros.core.verification import VerificationRequest, VerificationResult

CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
SPOON = Subgoal("spoon", "plate", "put the spoon on the plate")
O, C = 1.0, 0.0  # open, closed


# ------------------------------------------------------------------ scoring a stock SimplerEnv task
def stock_task():
    return Task(task_id="stock", scene="s", category=TaskCategory.SINGLE_DESTINATION,
                instruction="put carrot on plate", subgoals=(CARROT,), success_rule="simplerenv")


def tracked(*states):
    tracker = GoalTracker(stock_task())
    for step, state in enumerate(states):
        tracker.update(state, step)
    return tracker


NOTHING = GoalState(resting={})
ON_PLATE = GoalState(resting={("carrot", "plate"): 1})
HELD = GoalState(resting={}, held=frozenset({"carrot"}))
WORKED_ON = {"variant": "proprio_verifier", "plan": [CARROT.to_dict()], "pending": [0], "ever_current": [0]}
NOT_REACHED = {"variant": "proprio_verifier", "plan": [CARROT.to_dict()], "pending": [0]}


@pytest.mark.parametrize("reported", [None, 1, 0, "True"])
def test_a_simplerenv_task_without_a_yes_or_no_from_its_env_is_refused_by_name(reported):
    with pytest.raises(InvalidInputError, match=r"^task stock is scored by its env's own success check "
                                                r"\(success_rule simplerenv\), but the simulator reported none$"):
        metrics.score_episode(stock_task(), tracked(ON_PLATE), WORKED_ON, env_success=reported)


def test_a_simplerenv_success_keeps_the_subgoal_its_index_text_and_first_done_step():
    score = metrics.score_episode(stock_task(), tracked(NOTHING, HELD, ON_PLATE), WORKED_ON, env_success=True)
    assert [o.to_dict() for o in score.outcomes] == [
        {"index": 0, "text": CARROT.text, "done": True, "cause": None, "first_done_step": 2}]
    assert score.success and score.subgoals_done == 1


def test_a_simplerenv_failure_the_tracker_counts_as_done_is_attempted_never_completed():
    # the carrot rests on the plate by the LADDER predicate, but the env's own check says no
    score = metrics.score_episode(stock_task(), tracked(NOTHING, ON_PLATE), WORKED_ON, env_success=False)
    (outcome,) = score.outcomes
    assert (outcome.index, outcome.text, outcome.done, outcome.cause) == (
        0, CARROT.text, False, metrics.ATTEMPTED_NEVER_COMPLETED)
    assert not score.success and score.subgoals_done == 0


def test_a_simplerenv_failure_keeps_the_trackers_cause():
    cases = [((NOTHING,), NOT_REACHED, metrics.NEVER_REACHED),
             ((NOTHING, HELD), WORKED_ON, metrics.ATTEMPTED_NEVER_COMPLETED),
             ((ON_PLATE, HELD), WORKED_ON, metrics.COMPLETED_THEN_UNDONE)]
    for states, orchestration, cause in cases:
        score = metrics.score_episode(stock_task(), tracked(*states), orchestration, env_success=False)
        assert [(o.done, o.cause) for o in score.outcomes] == [(False, cause)], states


# ------------------------------------------------------------------ summaries of episode records
def record(variant="v", **extra):
    return {"variant": variant, "task_id": "a", "category": "relay", "horizon": 1, "success": False,
            "subgoals_done": 0, "steps_used": 10, "subgoals": [{"cause": "episode_error"}], **extra}


def test_summary_counts_the_episodes_that_ended_in_an_error():
    recs = [record(error="simulator raised: RuntimeError"), record(error="worker died"), record(error=None),
            record(error=""), record(), record("w")]
    summary = metrics.summarize_episodes(recs)
    assert (summary["v"]["episodes"], summary["v"]["errors"]) == (5, 2)
    assert summary["w"]["errors"] == 0


def test_summary_counts_episodes_by_success_rule_and_reads_a_missing_rule_as_ladder():
    recs = [record(success_rule="simplerenv"), record(success_rule="ladder"), record(), record("w")]
    summary = metrics.summarize_episodes(recs)
    assert list(summary["v"]["success_rules"].items()) == [("ladder", 2), ("simplerenv", 1)]
    assert summary["w"]["success_rules"] == {"ladder": 1}


# ------------------------------------------------------------------ the paired bootstrap's suites
def test_paired_bootstrap_puts_a_task_missing_from_suite_of_in_the_unnamed_suite():
    # "" is Task.suite's default: a task of no suite and a task missing from suite_of resample together
    a = {"t0": (2, 2), "t1": (0, 2)}
    b = {"t0": (0, 2), "t1": (0, 2)}
    pooled = metrics.paired_task_bootstrap(a, b, draws=2000)
    assert pooled == (50.0, 0.0, 100.0)
    assert metrics.paired_task_bootstrap(a, b, suite_of={"t0": ""}, draws=2000) == pooled
    assert metrics.paired_task_bootstrap(a, b, suite_of={"t0": "", "t1": ""}, draws=2000) == pooled
    # a named suite is resampled on its own: every draw holds t0 once and t1 once
    assert metrics.paired_task_bootstrap(a, b, suite_of={"t0": "simpler"}, draws=2000) == (50.0, 50.0, 50.0)


# ------------------------------------------------------------------ reading text files
def test_read_text_reads_utf8_under_an_ascii_locale(tmp_path):
    """The encoding is named, not taken from the locale: a UTF-8 file reads the same under LC_ALL=C."""
    path = tmp_path / "suite.yaml"
    path.write_bytes("scene: caf\u00e9\n".encode("utf-8"))
    # here first (mutation testing runs a test for a function only if the test calls it in its own process)
    assert errors_module.read_text(path, "suite file") == "scene: caf\u00e9\n"
    root = Path(errors_module.__file__).resolve().parents[2]
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONPATH": str(root)}
    code = ("import locale, sys; from ladder_ros.core.errors import read_text; "
            "print(locale.getpreferredencoding(False)); print(ascii(read_text(sys.argv[1], 'suite file')))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    locale_encoding, text = done.stdout.splitlines()
    assert locale_encoding.lower().replace("-", "") != "utf8"  # the locale really is not UTF-8
    assert text == ascii("scene: caf\u00e9\n")


# ------------------------------------------------------------------ the gripper trigger's lift tolerance
def lift_fires(start_z, top_z):
    """Whether a Franka close of 25 steps rising from start_z to top_z ends an attempt at its release."""
    trigger = GripperTrigger(FRANKA.trigger)
    zs = [start_z] * 5 + [start_z] + [top_z] * 24 + [top_z]
    apertures = [O] * 5 + [C] * 25 + [O]
    ends = [trigger.update(step, a, z) for step, (a, z) in enumerate(zip(apertures, zs))]
    return [e.reason for e in ends if e is not None] == ["release"]


def test_franka_lift_of_3cm_counts_within_a_picometre_of_float_error():
    assert lift_fires(0.32, 0.35)  # 0.35 - 0.32 is 0.02999999999999997 in floating point
    assert lift_fires(0.0, 0.03 - 1e-12)  # the tolerance's edge counts
    assert not lift_fires(0.0, 0.03 - 2e-12)
    assert not lift_fires(0.32, 0.349)


# ------------------------------------------------------------------ the orchestrator's answers
def orch(variant, plan):
    return make_orchestrator(variant, WIDOWX, plan, instruction="do everything",
                             budget_steps=WIDOWX.budget.steps_for(len(plan)),
                             category=TaskCategory.SINGLE_DESTINATION)


def g(step):
    return GripperMonitor.for_preset(WIDOWX).update(step, O)


def test_an_answer_to_another_query_leaves_the_pending_one_open():
    o = orch("proprio_verifier", [CARROT, SPOON])
    for step in range(46):
        d = o.observe(StepInput(step=step, gripper=g(step)))
    request = d.request
    assert request is not None and request.step == 45  # 45 steps without a release
    d = o.resolve(VerificationResult(request_id=request.request_id + 1, count=1, source="stray"))
    assert [e.kind for e in d.events] == [ev.VERIFICATION_IGNORED]
    assert d.request == request and o.pending_request == request and d.instruction == CARROT.text
    assert o.queue.completed == []
    d = o.resolve(VerificationResult(request_id=request.request_id, count=1, source="test"))
    assert d.request is None and d.instruction == SPOON.text and o.queue.completed == [0]


@pytest.mark.parametrize("variant", ["low_level_policy", "periodic_trigger", "proprio_trigger",
                                     "privileged_verifier"])
def test_a_variant_without_queries_refuses_an_answer_routed_to_it(variant):
    o = orch(variant, [CARROT])
    o.pending_request = VerificationRequest(request_id=1, step=0, plan_index=0, subgoal=CARROT, required=1,
                                            reason="after_release")
    with pytest.raises(InvalidInputError, match=rf"^variant {variant} sends no verification queries$"):
        o.resolve(VerificationResult(request_id=1, count=1, source="test"))
