"""Per-category predicates (Section 3, Appendix D) and the failure causes of Section 5.2."""

import pytest

from ladder_ros.core import metrics
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.goals import GoalState, GoalTracker
from ladder_ros.core.task import Subgoal, Task, TaskCategory


def task(category, *subgoals, distractors=()):
    return Task(task_id="t", scene="s", category=TaskCategory(category), instruction="do it",
                subgoals=tuple(Subgoal(o, d, f"put the {o} on the {d}") for o, d in subgoals),
                distractors=tuple(distractors))


def state(*resting, held=()):
    counts = {}
    for kind, dest in resting:
        counts[(kind, dest)] = counts.get((kind, dest), 0) + 1
    return GoalState(resting=counts, held=frozenset(held))


def feed(tracker, *states):
    out = None
    for step, s in enumerate(states):
        out = tracker.update(s, step)
    return out


def test_single_destination_needs_every_object_at_the_end():
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    assert feed(tr, state(), state(("carrot", "plate"))) == (True, False)
    assert feed(tr, state(("carrot", "plate"), ("spoon", "plate"))) == (True, True)
    assert tr.success


def test_duplicates_count_instances():
    t = task("duplicates", ("corn", "cloth"), ("corn", "cloth"))
    tr = GoalTracker(t)
    assert feed(tr, state(("corn", "cloth"))) == (True, False)
    assert feed(tr, state(("corn", "cloth"), ("corn", "cloth"))) == (True, True)


def test_relay_later_leg_counts_only_after_the_earlier_one():
    t = task("relay", ("carrot", "plate"), ("carrot", "towel"))
    direct = GoalTracker(t)
    assert feed(direct, state(), state(("carrot", "towel"))) == (False, False)
    assert not direct.success
    relay = GoalTracker(t)
    out = feed(relay, state(), state(("carrot", "plate")), state(held=["carrot"]), state(("carrot", "towel")))
    assert out == (True, True)  # the plate leg stays done while the carrot moves on
    assert relay.success


def test_revisit_legs_chain_and_need_one_object():
    t = task("revisit", ("spoon", "cloth"), ("spoon", "pot"), ("spoon", "cloth"))
    tr = GoalTracker(t)
    assert feed(tr, state(("spoon", "cloth"))) == (True, False, False)  # last leg needs the pot first
    assert feed(tr, state(("spoon", "pot"))) == (True, True, False)
    assert feed(tr, state(("spoon", "cloth"))) == (True, True, True)
    assert tr.success


def test_ordered_task_fails_when_placed_out_of_order():
    t = task("ordered", ("banana", "bin"), ("orange", "bin"))
    tr = GoalTracker(t)
    feed(tr, state(("orange", "bin")), state(("orange", "bin"), ("banana", "bin")))
    assert tr.order_violations == [(0, 1)]
    assert not tr.success
    in_order = GoalTracker(t)
    feed(in_order, state(("banana", "bin")), state(("orange", "bin"), ("banana", "bin")))
    assert in_order.success and not in_order.order_violations


def test_exclusion_fails_when_a_distractor_ends_on_the_destination():
    t = task("exclusion", ("carrot", "plate"), distractors=["eggplant"])
    tr = GoalTracker(t)
    feed(tr, state(("carrot", "plate"), ("eggplant", "plate")))
    assert tr.achieved == (True,) and not tr.success
    assert tr.distractors_placed() == ["eggplant"]
    ok = GoalTracker(t)
    feed(ok, state(("carrot", "plate")))
    assert ok.success


def test_exclusion_task_must_name_distractors():
    with pytest.raises(ConfigError, match="distractors"):
        task("exclusion", ("carrot", "plate"))


def summary(variant, plan_len, completed=(), advanced=(), pending=(), ever_current=()):
    return {"variant": variant, "plan": [], "completed": list(completed), "advanced": list(advanced),
            "pending": list(pending), "ever_current": list(ever_current)}


def test_failure_causes():
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"), ("cup", "plate"), ("pear", "plate"))
    tr = GoalTracker(t)
    # carrot placed then knocked off; spoon never placed
    feed(tr, state(("carrot", "plate")), state(held=["spoon"]), state())
    s = metrics.score_episode(t, tr, summary("proprio_trigger", 4, advanced=[0, 1], pending=[2, 3],
                                             ever_current=[0, 1, 2]))
    causes = [o.cause for o in s.outcomes]
    assert causes == [metrics.COMPLETED_THEN_UNDONE, metrics.ADVANCED_BEFORE_COMPLETION,
                      metrics.ATTEMPTED_NEVER_COMPLETED, metrics.NEVER_REACHED]
    assert not s.success and s.subgoals_done == 0


def test_low_level_policy_attempt_is_read_from_grasps():
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    feed(tr, state(held=["carrot"]), state())
    s = metrics.score_episode(t, tr, summary("low_level_policy", 2))
    assert [o.cause for o in s.outcomes] == [metrics.ATTEMPTED_NEVER_COMPLETED, metrics.NEVER_REACHED]


def test_plan_mapping_with_multiplicity_and_missing_goals():
    t = task("duplicates", ("corn", "cloth"), ("corn", "cloth"), ("carrot", "cloth"))
    plan = [Subgoal("corn", "cloth", "a"), Subgoal("carrot", "cloth", "b"), Subgoal("corn", "cloth", "c"),
            Subgoal("corn", "cloth", "d")]
    assert metrics.map_plan_to_task(plan, t) == {0: 0, 1: 2, 2: 1, 3: None}
    tr = GoalTracker(t)
    feed(tr, state())
    s = metrics.score_episode(t, tr, {"variant": "proprio_verifier", "plan": [plan[0].to_dict()],
                                      "completed": [], "advanced": [], "pending": [0], "ever_current": [0]})
    assert [o.cause for o in s.outcomes] == [metrics.ATTEMPTED_NEVER_COMPLETED, metrics.NOT_IN_PLAN,
                                             metrics.NOT_IN_PLAN]


def test_wilson_interval_known_values():
    lo, hi = metrics.wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = metrics.wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert metrics.wilson_interval(0, 0) == (0.0, 1.0)


def test_paired_bootstrap_identical_differences_have_no_spread():
    a = {f"t{i}": (8, 10) for i in range(10)}
    b = {f"t{i}": (4, 10) for i in range(10)}
    point, lo, hi = metrics.paired_task_bootstrap(a, b, draws=2000)
    assert point == pytest.approx(40.0) and lo == pytest.approx(40.0) and hi == pytest.approx(40.0)
    # task difficulty varies, the difference does not: a paired test sees no spread
    a = {f"t{i}": (i + 1, 10) for i in range(9)}
    b = {f"t{i}": (i, 10) for i in range(9)}
    point, lo, hi = metrics.paired_task_bootstrap(a, b, draws=2000)
    assert point == pytest.approx(10.0) and lo == pytest.approx(10.0) and hi == pytest.approx(10.0)


def test_paired_bootstrap_resamples_tasks():
    # Two tasks: a beats b by 100 points on t0 and ties on t1 (point estimate 50). Resampling two
    # tasks with replacement gives {t0, t0} (100) a quarter of the time, {t0, t1} (50) half and
    # {t1, t1} (0) a quarter: the 2.5 % and 97.5 % percentiles are 0 and 100.
    a = {"t0": (10, 10), "t1": (5, 10)}
    b = {"t0": (0, 10), "t1": (5, 10)}
    assert metrics.paired_task_bootstrap(a, b, draws=10_000) == (pytest.approx(50.0), 0.0, 100.0)


def test_paired_bootstrap_resamples_within_each_suite():
    # The same two tasks in two suites: every draw holds one task of each suite, so the
    # difference is 50 in every draw (Appendix F: tasks are resampled within each suite).
    a = {"t0": (10, 10), "t1": (5, 10)}
    b = {"t0": (0, 10), "t1": (5, 10)}
    point, lo, hi = metrics.paired_task_bootstrap(a, b, suite_of={"t0": "simpler", "t1": "robolab"}, draws=10_000)
    assert (point, lo, hi) == (pytest.approx(50.0), pytest.approx(50.0), pytest.approx(50.0))
    # five tasks per suite, homogeneous within each suite, unequal between them: no spread either
    a = {**{f"x{i}": (8, 10) for i in range(5)}, **{f"y{i}": (5, 10) for i in range(5)}}
    b = {**{f"x{i}": (6, 10) for i in range(5)}, **{f"y{i}": (5, 10) for i in range(5)}}
    suite_of = {t: t[0] for t in a}
    point, lo, hi = metrics.paired_task_bootstrap(a, b, suite_of=suite_of, draws=4000)
    assert (point, lo, hi) == (pytest.approx(10.0), pytest.approx(10.0), pytest.approx(10.0))
    # a mixed difference within a suite has a real interval that contains the point estimate
    a = {"t0": (10, 10), "t1": (0, 10), "t2": (5, 10), "t3": (9, 10)}
    b = {"t0": (0, 10), "t1": (0, 10), "t2": (5, 10), "t3": (1, 10)}
    suite_of = {"t0": "x", "t1": "x", "t2": "y", "t3": "y"}
    point, lo, hi = metrics.paired_task_bootstrap(a, b, draws=4000, suite_of=suite_of)
    assert lo < point < hi and lo >= 0.0


def test_paired_bootstrap_needs_shared_tasks():
    with pytest.raises(ValueError, match="share no task"):
        metrics.paired_task_bootstrap({"t0": (1, 2)}, {"t1": (1, 2)})


def test_summary_by_horizon_and_causes():
    recs = [
        {"variant": "v", "task_id": "a", "category": "relay", "horizon": 1, "success": True, "subgoals_done": 1,
         "steps_used": 10, "subgoals": [{"cause": None}]},
        {"variant": "v", "task_id": "b", "category": "relay", "horizon": 2, "success": False, "subgoals_done": 1,
         "steps_used": 200, "subgoals": [{"cause": None}, {"cause": "never_reached"}]},
    ]
    s = metrics.summarize_episodes(recs)["v"]
    assert s["task_success_rate"] == 0.5
    assert s["subgoal_progress"] == pytest.approx(2 / 3)
    assert s["by_horizon"][1]["n"] == 1 and s["by_horizon"][2]["success_rate"] == 0.0
    assert s["failure_causes"]["never_reached"] == 1


def test_split_destinations_need_each_object_at_its_own_destination():
    t = task("split_destinations", ("lemon", "plate"), ("orange", "bin"))
    tr = GoalTracker(t)
    assert feed(tr, state(("lemon", "bin"), ("orange", "plate"))) == (False, False)
    assert feed(tr, state(("lemon", "plate"), ("orange", "bin"))) == (True, True)
    assert tr.success


def test_transfer_counts_arrival_at_the_new_container():
    t = task("transfer", ("carrot", "towel"), ("spoon", "towel"))
    tr = GoalTracker(t)
    # both start on the plate: nothing is done until they rest on the towel
    assert feed(tr, state(("carrot", "plate"), ("spoon", "plate"))) == (False, False)
    assert feed(tr, state(("carrot", "towel"), ("spoon", "plate"))) == (True, False)
    assert feed(tr, state(("carrot", "towel"), ("spoon", "towel"))) == (True, True)


def test_picking_a_placed_object_back_up_undoes_its_subgoal():
    # The simulator reports a held object as held, never as resting (tests/test_mujoco_tabletop.py);
    # the tracker then sees the subgoal stop holding, and the score calls it completed then undone.
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    assert feed(tr, state(("carrot", "plate"))) == (True, False)
    assert not tr.records[0].object_ever_held
    assert tr.update(state(held=["carrot"]), 1) == (False, False)
    assert tr.records[0].ever_achieved and tr.records[0].first_achieved_step == 0
    assert tr.records[0].object_ever_held and not tr.records[1].object_ever_held
    s = metrics.score_episode(t, tr, summary("proprio_verifier", 2, completed=[0], pending=[1],
                                             ever_current=[0, 1]))
    assert [o.cause for o in s.outcomes] == [metrics.COMPLETED_THEN_UNDONE, metrics.ATTEMPTED_NEVER_COMPLETED]
    assert [o.first_done_step for o in s.outcomes] == [0, None]


def test_relay_legs_need_one_object_even_when_a_leg_repeats():
    # two corn cobs relayed plate -> towel one after the other: the second cob's plate leg holds with
    # the one cob on the plate (the first has moved on), not two (decisions: relay legs need one)
    t = task("relay", ("corn", "plate"), ("corn", "towel"), ("corn", "plate"), ("corn", "towel"))
    tr = GoalTracker(t)
    out = feed(tr, state(("corn", "plate")), state(("corn", "towel")),
               state(("corn", "towel"), ("corn", "plate")), state(("corn", "towel"), ("corn", "towel")))
    assert out == (True, True, True, True)
    assert [r.first_achieved_step for r in tr.records][:3] == [0, 1, 2]
    assert tr.success


def test_exclusion_ignores_a_distractor_on_a_container_the_task_does_not_use():
    # "everything except the eggplant on the plate": the eggplant on the cloth was not moved onto a destination
    t = task("exclusion", ("carrot", "plate"), distractors=["eggplant"])
    tr = GoalTracker(t)
    feed(tr, state(("carrot", "plate"), ("eggplant", "cloth")))
    assert tr.distractors_placed() == [] and tr.success
    score = metrics.score_episode(t, tr, summary("proprio_verifier", 1, completed=[0], ever_current=[0]))
    assert score.success and score.violations == ()
    assert tr.distractors_placed(["cloth"]) == ["eggplant"]  # when asked about the cloth, it is there


def test_score_of_an_exclusion_task_with_a_moved_distractor_fails_with_the_violation():
    t = task("exclusion", ("carrot", "plate"), ("spoon", "plate"), distractors=["eggplant"])
    tr = GoalTracker(t)
    feed(tr, state(("carrot", "plate"), ("spoon", "plate"), ("eggplant", "plate")))
    s = metrics.score_episode(t, tr, summary("proprio_verifier", 2, completed=[0, 1], ever_current=[0, 1]))
    assert [o.done for o in s.outcomes] == [True, True] and s.subgoals_done == 2
    assert s.violations == (metrics.DISTRACTOR_MOVED,)
    assert s.success is False


def test_score_of_an_ordered_task_placed_out_of_order_fails_with_the_violation():
    # "first the banana, then the orange": the orange lands first; at the end both are in the bin
    t = task("ordered", ("banana", "bin"), ("orange", "bin"))
    tr = GoalTracker(t)
    feed(tr, state(("orange", "bin")), state(("orange", "bin"), ("banana", "bin")))
    s = metrics.score_episode(t, tr, summary("privileged_verifier", 2, completed=[0, 1], ever_current=[0, 1]))
    assert [o.done for o in s.outcomes] == [True, True]
    assert s.violations == (metrics.ORDER_VIOLATED,)
    assert s.success is False
    in_order = GoalTracker(t)
    feed(in_order, state(("banana", "bin")), state(("orange", "bin"), ("banana", "bin")))
    ok = metrics.score_episode(t, in_order, summary("privileged_verifier", 2, completed=[0, 1], ever_current=[0, 1]))
    assert ok.success and ok.violations == ()


def test_per_task_counts_of_one_variant():
    recs = [{"variant": "v", "task_id": "a", "success": True}, {"variant": "v", "task_id": "a", "success": False},
            {"variant": "v", "task_id": "b", "success": 1}, {"variant": "w", "task_id": "a", "success": True}]
    assert metrics.per_task_counts(recs, "v") == {"a": (1, 2), "b": (1, 1)}
    assert metrics.per_task_counts(recs, "w") == {"a": (1, 1)}
    assert metrics.per_task_counts(recs, "x") == {}


def test_summary_of_episodes_by_hand():
    # three episodes of one variant: a 1-subgoal success, a 2-subgoal success, a 2-subgoal failure
    recs = [
        {"variant": "v", "task_id": "a", "category": "relay", "horizon": 1, "success": True, "subgoals_done": 1,
         "steps_used": 40, "subgoals": [{"cause": None}], "violations": [], "verification_queries": 2},
        {"variant": "v", "task_id": "b", "category": "ordered", "horizon": 2, "success": True, "subgoals_done": 2,
         "steps_used": 110, "subgoals": [{"cause": None}, {"cause": None}], "verification_queries": 3},
        {"variant": "v", "task_id": "b", "category": "ordered", "horizon": 2, "success": False, "subgoals_done": 2,
         "steps_used": 200, "subgoals": [{"cause": None}, {"cause": None}], "violations": ["order_violated"]},
        {"variant": "w", "task_id": "a", "category": "relay", "horizon": 1, "success": False, "subgoals_done": 0,
         "steps_used": 100, "subgoals": [{"cause": "never_reached"}]},
    ]
    summary = metrics.summarize_episodes(recs)
    v = summary["v"]
    assert (v["episodes"], v["task_success_rate"], v["subgoal_progress"]) == (3, pytest.approx(2 / 3), 1.0)
    assert v["ci95"] == pytest.approx([0.2077, 0.9385], abs=1e-4)  # Wilson 2/3
    assert v["by_horizon"] == {1: {"success_rate": 1.0, "ci95": pytest.approx([0.2065, 1.0], abs=1e-4), "n": 1},
                               2: {"success_rate": 0.5, "ci95": pytest.approx([0.0945, 0.9055], abs=1e-4), "n": 2}}
    assert v["by_category"] == {"ordered": {"success_rate": 0.5, "ci95": pytest.approx([0.0945, 0.9055], abs=1e-4),
                                            "n": 2},
                                "relay": {"success_rate": 1.0, "ci95": pytest.approx([0.2065, 1.0], abs=1e-4), "n": 1}}
    assert v["failure_causes"] == {c: 0 for c in metrics.FAILURE_CAUSES}
    assert v["violations"] == {"order_violated": 1}
    assert v["mean_steps_used"] == pytest.approx((40 + 110 + 200) / 3)
    assert v["verification_queries"] == 5
    w = summary["w"]
    assert (w["task_success_rate"], w["subgoal_progress"]) == (0.0, 0.0)
    assert w["ci95"] == [0.0, pytest.approx(0.7935, abs=1e-4)]  # Wilson 0/1
    assert w["failure_causes"] == {**{c: 0 for c in metrics.FAILURE_CAUSES}, "never_reached": 1}
    assert w["violations"] == {} and w["verification_queries"] == 0
    assert metrics.summarize_episodes([]) == {}


def test_wilson_interval_refuses_impossible_counts():
    with pytest.raises(ValueError, match=r"successes must be in \[0, 10\], got 11"):
        metrics.wilson_interval(11, 10)
    with pytest.raises(ValueError, match=r"successes must be in \[0, 10\], got -1"):
        metrics.wilson_interval(-1, 10)
    assert metrics.wilson_interval(10, 10) == (pytest.approx(0.7225, abs=1e-4), pytest.approx(1.0))
    assert metrics.wilson_interval(0, -1) == (0.0, 1.0)


def test_goal_state_round_trip_drops_empty_entries():
    goal = GoalState(resting={("carrot", "plate"): 2, ("spoon", "plate"): 0}, held=frozenset({"corn"}))
    assert goal.to_dict() == {"resting": [["carrot", "plate", 2]], "held": ["corn"]}
    back = GoalState.from_dict(goal.to_dict())
    assert back.resting == {("carrot", "plate"): 2} and back.held == frozenset({"corn"})
    assert (back.count("carrot", "plate"), back.count("spoon", "plate")) == (2, 0)
    empty = GoalState.from_dict({})
    assert empty.resting == {} and empty.held == frozenset()


def test_tracker_before_and_after_its_first_state():
    t = task("exclusion", ("carrot", "plate"), distractors=["eggplant"])
    tr = GoalTracker(t)
    assert (tr.step, tr.last_state, tr.distractors_placed(), tr.achieved) == (-1, None, [], (False,))
    last = GoalState(resting={("carrot", "plate"): 1, ("eggplant", "plate"): 0})
    tr.update(last, 7)
    assert (tr.step, tr.last_state) == (7, last)
    assert tr.distractors_placed() == [] and tr.success  # a zero count is no eggplant on the plate


def test_paired_bootstrap_percentiles_by_hand():
    # Seven tasks, a beats b by 100 points on four of them. A draw of seven tasks holds K winners,
    # K ~ Binomial(7, 4/7), and its difference is 100 K / 7. P(K <= 1) = 2.7 % puts the 2.5 %
    # percentile at K = 1; P(K = 7) = (4/7)^7 = 2.0 % puts the 97.5 % percentile at K = 6.
    a = {f"t{i}": ((10, 10) if i < 4 else (0, 10)) for i in range(7)}
    b = {f"t{i}": (0, 10) for i in range(7)}
    point, lo, hi = metrics.paired_task_bootstrap(a, b)
    assert (point, lo, hi) == (pytest.approx(400 / 7), pytest.approx(100 / 7), pytest.approx(600 / 7))


def test_paired_bootstrap_is_reproducible_with_its_documented_defaults():
    # 10,000 draws and seed 0 (Appendix F: 10,000 bootstrap draws): a report can be recomputed exactly
    a = {f"t{i}": ((7 * i) % 13, 13 + i % 5) for i in range(30)}  # 30 tasks of varied counts
    b = {f"t{i}": ((5 * i) % 11, 11 + i % 3) for i in range(30)}
    default = metrics.paired_task_bootstrap(a, b)
    assert default == metrics.paired_task_bootstrap(a, b)
    assert default == metrics.paired_task_bootstrap(a, b, draws=10_000, seed=0)
    assert default != metrics.paired_task_bootstrap(a, b, seed=1)
    assert default != metrics.paired_task_bootstrap(a, b, draws=10_001)
    with pytest.raises(ValueError, match="^the two systems share no task$"):
        metrics.paired_task_bootstrap({}, {})


def test_score_outcomes_are_plain_records():
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    feed(tr, state(), state(("carrot", "plate")))
    s = metrics.score_episode(t, tr, summary("proprio_verifier", 2, completed=[0], pending=[1], ever_current=[0, 1]))
    assert [o.to_dict() for o in s.outcomes] == [
        {"index": 0, "text": "put the carrot on the plate", "done": True, "cause": None, "first_done_step": 1},
        {"index": 1, "text": "put the spoon on the plate", "done": False, "cause": "attempted_never_completed",
         "first_done_step": None}]


def test_score_reads_a_summary_that_leaves_keys_out():
    # no plan: the task's own subgoals; no queue bookkeeping: nothing was left or reached
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    feed(tr, state())
    s = metrics.score_episode(t, tr, {"variant": "proprio_verifier"})
    assert [o.cause for o in s.outcomes] == [metrics.NEVER_REACHED, metrics.NEVER_REACHED]


def test_a_wrong_complete_verdict_is_advanced_before_completion():
    # the verifier said 'complete' for the carrot, it never held: the orchestrator left it
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    feed(tr, state())
    s = metrics.score_episode(t, tr, {"variant": "proprio_verifier", "completed": [0], "pending": [1],
                                      "ever_current": [0, 1]})
    assert [o.cause for o in s.outcomes] == [metrics.ADVANCED_BEFORE_COMPLETION, metrics.ATTEMPTED_NEVER_COMPLETED]


def test_a_subgoal_pending_again_after_a_restart_was_not_left_for_good():
    # RoboLab-Long proprioceptive trigger: the carrot was advanced past, then the plan restarted and
    # it is pending again at the end: it was worked on and never done, not left behind
    t = task("single_destination", ("carrot", "plate"), ("spoon", "plate"))
    tr = GoalTracker(t)
    feed(tr, state())
    s = metrics.score_episode(t, tr, {"variant": "proprio_trigger", "advanced": [0, 1], "pending": [0, 1],
                                      "ever_current": [0, 1]})
    assert [o.cause for o in s.outcomes] == [metrics.ATTEMPTED_NEVER_COMPLETED, metrics.ATTEMPTED_NEVER_COMPLETED]


def test_wilson_upper_bound_never_passes_one():
    # with 16 of 16 the unclamped formula rounds to just above 1 in floating point
    assert metrics.wilson_interval(16, 16)[1] == 1.0
