"""The orchestrator variants, step by step, against the rules of Appendix B."""

import math

import pytest

from ladder_ros.core import events as ev
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.orchestrator import StepInput, Variant, make_orchestrator
from ladder_ros.core.presets import FRANKA, WIDOWX, get_preset
from ladder_ros.core.task import Subgoal, TaskCategory
from ladder_ros.core.triggers import GripperMonitor
from ladder_ros.core.verification import VerificationResult

CARROT = Subgoal("carrot", "plate", "put the carrot on the plate")
SPOON = Subgoal("spoon", "plate", "put the spoon on the plate")
CORN = Subgoal("corn", "cloth", "put the corn on the cloth")
O, C = 1.0, 0.0


def orch(variant, plan, preset=WIDOWX, budget=None, category=TaskCategory.SINGLE_DESTINATION):
    return make_orchestrator(variant, preset, plan, instruction="do everything",
                             budget_steps=budget or preset.budget.steps_for(len(plan)), category=category)


def kinds(events):
    return [e.kind for e in events]


def run(o, apertures, answer=None, goal_states=None, zs=None):
    """Drive ``o`` through a trace; ``answer(request)`` gives the count. Returns decisions."""
    decisions = []
    monitor = GripperMonitor.for_preset(o.preset)
    for step, a in enumerate(apertures):
        gripper = monitor.update(step, a, None if zs is None else zs[step])
        d = o.observe(StepInput(step=step, gripper=gripper,
                                goal_states=None if goal_states is None else goal_states(step, o)))
        if d.request is not None:
            d = o.resolve(VerificationResult(request_id=d.request.request_id, count=answer(d.request),
                                             source="test"))
        decisions.append(d)
        if d.finished:
            break
    return decisions


def test_low_level_policy_sends_the_full_instruction_until_the_budget():
    o = orch("low_level_policy", [CARROT, SPOON])
    ds = run(o, [O] * 300)
    assert all(d.instruction == "do everything" for d in ds[:-1])
    assert ds[-1].finished and ds[-1].finish_reason == "budget_exhausted"
    assert ds[-1].step == 200  # 100 steps per subgoal (Section 3)


def test_periodic_trigger_advances_every_27_steps_and_stays_on_the_last():
    o = orch("periodic_trigger", [CARROT, SPOON, CORN])
    ds = run(o, [O] * 400)
    switches = [(d.step, d.instruction) for prev, d in zip(ds, ds[1:]) if d.instruction != prev.instruction]
    assert switches[:2] == [(27, SPOON.text), (54, CORN.text)]
    assert ds[100].instruction == CORN.text
    assert ds[-1].step == 300 and ds[-1].finish_reason == "budget_exhausted"
    assert o.queue.advanced == [0, 1]


def test_proprio_trigger_advances_without_verifying_and_ends_after_the_last():
    o = orch("proprio_trigger", [CARROT, SPOON], preset=WIDOWX.with_options({"after_last_subgoal": "end"}))
    trace = [O, C, C, C, O] + [O] * 10 + [C, C, C, O] + [O] * 50
    ds = run(o, trace)
    assert ds[3].instruction == CARROT.text
    assert ds[4].instruction == SPOON.text  # release at 4 -> advance at once
    assert ds[-1].step == 18 and ds[-1].finish_reason == "plan_exhausted"
    assert o.queue.advanced == [0, 1] and o.queue.completed == []


def test_proprio_trigger_cooldown_blocks_a_quick_second_release():
    o = orch("proprio_trigger", [CARROT, SPOON, CORN])
    trace = [O, C, C, C, O, C, C, C, O] + [O] * 20
    ds = run(o, trace)
    assert ds[8].instruction == SPOON.text  # release at 8 is 4 steps after 4: suppressed
    assert ev.RELEASE_SUPPRESSED in kinds(ds[8].events)


def test_franka_proprio_trigger_restarts_the_plan_after_the_last_subgoal():
    o = orch("proprio_trigger", [CARROT, SPOON], preset=FRANKA)
    ds = run(o, [O] * 1400, zs=[0.3] * 1400)
    starts = [(e.step, e.data["plan_index"]) for e in o.events if e.kind == ev.SUBGOAL_STARTED]
    assert starts[:4] == [(0, 0), (300, 1), (600, 0), (900, 1)]
    assert any(e.kind == ev.QUEUE_CHANGED and e.data["reason"] == "restart" for e in o.events)
    assert ds[-1].finish_reason == "budget_exhausted" and ds[-1].step == 1350  # 2 subgoals (Appendix D)


def test_proprio_verifier_queries_5_steps_after_a_release_and_retries_in_place():
    o = orch("proprio_verifier", [CARROT, SPOON])
    trace = [O, O, C, C, C, O] + [O] * 20
    answers = iter([0, 1])
    ds = run(o, trace, answer=lambda r: next(answers))
    requests = [e for e in o.events if e.kind == ev.VERIFICATION_REQUESTED]
    assert requests[0].step == 10 and requests[0].data["reason"] == "after_release"
    retry = [e for e in o.events if e.kind == ev.QUEUE_CHANGED]
    assert retry[0].data["reason"] == "retry_in_place" and retry[0].step == 10
    assert ds[10].instruction == CARROT.text
    # no release after the retry: next query 45 steps later
    o2 = orch("proprio_verifier", [CARROT, SPOON])
    answers2 = iter([0, 1, 1])
    run(o2, trace + [O] * 100, answer=lambda r: next(answers2))
    steps = [(e.step, e.data["reason"]) for e in o2.events if e.kind == ev.VERIFICATION_REQUESTED]
    assert steps[:2] == [(10, "after_release"), (55, "without_release")]


def test_proprio_verifier_queries_after_45_steps_without_a_release():
    o = orch("proprio_verifier", [CARROT])
    ds = run(o, [O] * 100, answer=lambda r: 1)
    req = [e for e in o.events if e.kind == ev.VERIFICATION_REQUESTED]
    assert [(e.step, e.data["reason"]) for e in req] == [(45, "without_release")]
    assert ds[-1].finish_reason == "plan_complete" and ds[-1].step == 45


def test_franka_verifier_offsets_are_35_and_300():
    o = orch("proprio_verifier", [CARROT], preset=FRANKA)
    aps = [O] * 5 + [C] * 21 + [O] * 400
    zs = [0.2] * 5 + [0.2 + 0.04 * i / 20 for i in range(21)] + [0.24] * 400
    run(o, aps, zs=zs, answer=lambda r: 0)
    req = [(e.step, e.data["reason"]) for e in o.events if e.kind == ev.VERIFICATION_REQUESTED]
    assert req == [(26 + 35, "after_release"), (61 + 300, "without_release")]


def test_count_rule_requires_the_occurrences_so_far():
    o = orch("proprio_verifier", [CORN, CORN], category=TaskCategory.DUPLICATES)
    seen = []

    def answer(request):
        seen.append(request.required)
        return 1  # one corn on the cloth
    ds = run(o, [O] * 250, answer=answer)
    # the first corn needs 1, the second needs 2: a count of 1 never completes it
    assert seen[:3] == [1, 2, 2]
    assert o.queue.completed == [0]
    assert ds[-1].finish_reason == "budget_exhausted"


def test_count_rule_is_one_on_revisit_tasks():
    cloth = Subgoal("spoon", "cloth", "put the spoon on the cloth")
    pot = Subgoal("spoon", "pot", "put the spoon in the pot")
    o = orch("proprio_verifier", [cloth, pot, cloth], category=TaskCategory.REVISIT)
    seen = []

    def answer(request):
        seen.append(request.required)
        return 1
    ds = run(o, [O] * 200, answer=answer)
    assert seen == [1, 1, 1]
    assert ds[-1].finish_reason == "plan_complete"


def test_franka_incomplete_duplicate_moves_to_the_end_of_the_queue():
    plan = [CORN, CORN, CARROT]
    o = orch("proprio_verifier", plan, preset=FRANKA, category=TaskCategory.DUPLICATES)
    run(o, [O] * 301, zs=[0.3] * 301, answer=lambda r: 0)
    changes = [e for e in o.events if e.kind == ev.QUEUE_CHANGED]
    assert changes[0].data == {"reason": "moved_to_end", "pending": [1, 2, 0]}
    # not interchangeable (appears once) -> retried in place even on Franka
    o2 = orch("proprio_verifier", [CARROT, SPOON], preset=FRANKA)
    run(o2, [O] * 301, zs=[0.3] * 301, answer=lambda r: 0)
    assert [e.data["reason"] for e in o2.events if e.kind == ev.QUEUE_CHANGED] == ["retry_in_place"]


def test_widowx_incomplete_duplicate_is_retried_in_place():
    o = orch("proprio_verifier", [CORN, CORN], category=TaskCategory.DUPLICATES)
    run(o, [O] * 50, answer=lambda r: 0)
    assert [e.data["reason"] for e in o.events if e.kind == ev.QUEUE_CHANGED] == ["retry_in_place"]


def test_unparseable_count_is_never_complete():
    o = orch("proprio_verifier", [CARROT])
    ds = run(o, [O] * 50, answer=lambda r: None)
    answered = [e for e in o.events if e.kind == ev.VERIFICATION_ANSWERED]
    assert answered[0].data["complete"] is False
    assert not ds[-1].finished


def test_privileged_verifier_needs_the_predicate_for_the_settle_window_with_the_gripper_open():
    o = orch("privileged_verifier", [CARROT, SPOON])
    # predicate true from step 10; gripper closed until 11 -> settle counts 12, 13, 14
    aps = [O] * 10 + [C, C] + [O] * 50
    ds = run(o, aps, goal_states=lambda s, _: (s >= 10, False))
    completed = [e for e in o.events if e.kind == ev.SUBGOAL_COMPLETED]
    assert [(e.step, e.data["plan_index"]) for e in completed] == [(14, 0)]
    assert ds[14].instruction == SPOON.text


def test_privileged_settle_window_restarts_when_the_predicate_flickers():
    o = orch("privileged_verifier", [CARROT])
    pattern = {10: True, 11: True, 12: False, 13: True, 14: True, 15: True}
    ds = run(o, [O] * 40, goal_states=lambda s, _: (pattern.get(s, False),))
    assert ds[-1].step == 15 and ds[-1].finish_reason == "plan_complete"


def test_widowx_privileged_verifier_retries_until_the_budget_ends():
    o = orch("privileged_verifier", [CARROT, SPOON])
    ds = run(o, [O] * 300, goal_states=lambda s, _: (False, True))
    assert ds[-1].finish_reason == "budget_exhausted"
    assert {d.instruction for d in ds[:-1]} == {CARROT.text}


def test_franka_privileged_sets_a_subgoal_aside_after_600_steps_except_on_ordered_tasks():
    o = orch("privileged_verifier", [CARROT, SPOON], preset=FRANKA)
    run(o, [O] * 700, zs=[0.3] * 700, goal_states=lambda s, _: (False, False))
    assert [(e.step, e.data["reason"]) for e in o.events if e.kind == ev.QUEUE_CHANGED] == [(600, "set_aside")]
    o2 = orch("privileged_verifier", [CARROT, SPOON], preset=FRANKA, category=TaskCategory.ORDERED)
    run(o2, [O] * 700, zs=[0.3] * 700, goal_states=lambda s, _: (False, False))
    assert [e for e in o2.events if e.kind == ev.QUEUE_CHANGED] == []


def g(step, aperture=O):
    return GripperMonitor.for_preset(WIDOWX).update(step, aperture)


def test_bad_input_raises_and_changes_nothing():
    o = orch("proprio_trigger", [CARROT, SPOON])
    monitor = GripperMonitor.for_preset(WIDOWX)
    o.observe(StepInput(step=0, gripper=monitor.update(0, O)))
    with pytest.raises(InvalidInputError, match="aperture"):
        monitor.update(1, math.nan)
    assert monitor.last_step == 0 and monitor.trigger.closed_run == 0
    with pytest.raises(InvalidInputError, match="steps must increase"):
        o.observe(StepInput(step=0, gripper=g(0)))
    with pytest.raises(InvalidInputError, match="gripper events must be those of step 1"):
        o.observe(StepInput(step=1, gripper=g(2)))
    assert o.last_step == 0
    d = o.observe(StepInput(step=1, gripper=monitor.update(1, O)))
    assert d.instruction == CARROT.text


def test_privileged_needs_goal_states():
    o = orch("privileged_verifier", [CARROT])
    with pytest.raises(InvalidInputError, match="goal states"):
        o.observe(StepInput(step=0, gripper=g(0)))


def test_stale_answer_is_recorded_and_ignored():
    o = orch("proprio_verifier", [CARROT])
    o.observe(StepInput(step=0, gripper=g(0)))
    d = o.resolve(VerificationResult(request_id=99, count=5, source="late"))
    assert kinds(d.events) == [ev.VERIFICATION_IGNORED]
    assert not d.finished and d.instruction == CARROT.text


def test_wall_clock_keeps_stepping_while_a_query_is_in_flight():
    o = orch("proprio_verifier", [CARROT, SPOON])
    pending = None
    for step in range(60):
        d = o.observe(StepInput(step=step, gripper=g(step)))
        if d.request is not None and pending is None:
            pending = d.request
        assert d.instruction == CARROT.text
    assert pending.step == 45
    assert sum(1 for e in o.events if e.kind == ev.VERIFICATION_REQUESTED) == 1  # one in flight at a time
    d = o.resolve(VerificationResult(request_id=pending.request_id, count=1, source="slow"))
    assert d.instruction == SPOON.text


def test_abort_keeps_the_queue():
    o = orch("proprio_verifier", [CARROT, SPOON])
    o.observe(StepInput(step=0, gripper=g(0)))
    d = o.abort("operator")
    assert d.finished and d.finish_reason == "aborted: operator"
    assert o.summary()["pending"] == [0, 1]


def test_unknown_variant_lists_the_valid_names():
    with pytest.raises(ConfigError, match="privileged_verifier.*proprio_trigger"):
        Variant.parse("magic")


def queue_changes(o):
    return [(e.step, e.data["reason"], e.data["pending"]) for e in o.events if e.kind == ev.QUEUE_CHANGED]


def test_a_count_above_the_need_completes_the_subgoal():
    # both corns already lie on the cloth when the first corn is checked: 2 reaches the need of 1
    o = orch("proprio_verifier", [CORN, CORN], category=TaskCategory.DUPLICATES)
    ds = run(o, [O] * 100, answer=lambda r: 2)
    answered = [(e.step, e.data["required"], e.data["complete"]) for e in o.events
                if e.kind == ev.VERIFICATION_ANSWERED]
    assert answered == [(45, 1, True), (90, 2, True)]
    assert ds[-1].finish_reason == "plan_complete" and o.queue.completed == [0, 1]


def test_franka_last_pending_duplicate_is_retried_in_place():
    # corn 1 is done; corn 2 (the only subgoal left) is not: nothing to move it behind
    o = orch("proprio_verifier", [CORN, CORN], preset=FRANKA, category=TaskCategory.DUPLICATES)
    run(o, [O] * 700, zs=[0.3] * 700, answer=lambda r: 1)
    assert queue_changes(o) == [(600, "retry_in_place", [1])]
    starts = [(e.step, e.data["plan_index"]) for e in o.events if e.kind == ev.SUBGOAL_STARTED]
    assert starts == [(0, 0), (300, 1)]  # the retried subgoal does not start over


def test_franka_ordered_copies_of_a_subgoal_are_not_interchangeable():
    # revisit: the spoon goes back to the cloth; its second cloth leg is not a copy of the first
    cloth = Subgoal("spoon", "cloth", "put the spoon on the cloth")
    pot = Subgoal("spoon", "pot", "put the spoon in the pot")
    for category in (TaskCategory.REVISIT, TaskCategory.ORDERED, TaskCategory.RELAY):
        o = orch("proprio_verifier", [cloth, pot, cloth], preset=FRANKA, category=category)
        run(o, [O] * 301, zs=[0.3] * 301, answer=lambda r: 0)
        assert queue_changes(o) == [(300, "retry_in_place", [0, 1, 2])], category
    o = orch("proprio_verifier", [cloth, pot, cloth], preset=FRANKA, category=TaskCategory.DUPLICATES)
    run(o, [O] * 301, zs=[0.3] * 301, answer=lambda r: 0)
    assert queue_changes(o) == [(300, "moved_to_end", [1, 2, 0])]


def test_wall_clock_a_release_during_an_open_query_schedules_the_next_one():
    # query at 45 (no release) is in flight; the gripper releases at 51; the answer comes at 53:
    # not complete, so the next query is 5 steps after that release (56), not 45 after the answer
    o = orch("proprio_verifier", [CARROT, SPOON])
    monitor = GripperMonitor.for_preset(WIDOWX)
    trace = [O] * 47 + [C, C, C, C] + [O] * 60
    requests = []
    for step, a in enumerate(trace):
        d = o.observe(StepInput(step=step, gripper=monitor.update(step, a)))
        if d.request is not None and d.request.request_id not in {r.request_id for r in requests}:
            requests.append(d.request)
        if step == 53:
            d = o.resolve(VerificationResult(request_id=requests[0].request_id, count=0, source="slow"))
            assert d.instruction == CARROT.text
    assert [(r.step, r.reason) for r in requests] == [(45, "without_release"), (56, "after_release")]


def test_wall_clock_without_a_release_in_flight_the_next_query_waits_45_steps():
    o = orch("proprio_verifier", [CARROT, SPOON])
    requests = []
    for step in range(120):
        d = o.observe(StepInput(step=step, gripper=g(step)))
        if d.request is not None and d.request.request_id not in {r.request_id for r in requests}:
            requests.append(d.request)
        if step == 53:
            o.resolve(VerificationResult(request_id=requests[0].request_id, count=0, source="slow"))
    assert [(r.step, r.reason) for r in requests] == [(45, "without_release"), (98, "without_release")]


def test_events_travel_as_flat_dicts():
    from ladder_ros.core.events import Event

    event = Event(step=47, kind=ev.VERIFICATION_REQUESTED, data={"request_id": 2, "plan_index": 1, "required": 1,
                                                                 "reason": "after_release"})
    flat = event.to_dict()
    assert flat == {"step": 47, "kind": "verification_requested", "request_id": 2, "plan_index": 1, "required": 1,
                    "reason": "after_release"}
    assert Event.from_dict(flat) == event
    assert Event.from_dict({"step": "3", "kind": "episode_finished"}) == Event(step=3, kind="episode_finished")


def event_log(o):
    return [e.to_dict() for e in o.events]


def started(step, index, subgoal):
    return {"step": step, "kind": "subgoal_started", "plan_index": index, "text": subgoal.text,
            "object": subgoal.object, "destination": subgoal.destination}


def opening(variant, budget=200):
    """The first events of an episode on [carrot, spoon] with the WidowX preset."""
    return [{"step": 0, "kind": "episode_started", "variant": variant, "preset": "widowx",
             "instruction": "do everything", "plan": [CARROT.text, SPOON.text], "budget_steps": budget},
            started(0, 0, CARROT)]


def test_proprio_verifier_event_log_of_a_hand_made_episode():
    # WidowX, plan [carrot, spoon]. Close 1-3, open at 4: a release (no cooldown for the verifier);
    # query 5 steps later (9): count 1 of 1 -> carrot complete, spoon starts at 9. No release after
    # that: query 45 steps later (54) answered without a count -> incomplete, retried in place; the
    # next query at 99 reaches the need -> plan complete.
    o = orch("proprio_verifier", [CARROT, SPOON])
    replies = iter([(1, None), (None, "no JSON object in the reply"), (1, None)])
    monitor = GripperMonitor.for_preset(WIDOWX)
    for step, a in enumerate([O, C, C, C, O] + [O] * 200):
        d = o.observe(StepInput(step=step, gripper=monitor.update(step, a)))
        if d.request is not None:
            count, error = next(replies)
            d = o.resolve(VerificationResult(request_id=d.request.request_id, count=count, source="test",
                                             error=error))
        if d.finished:
            break
    assert event_log(o) == [
        *opening("proprio_verifier"),
        {"step": 4, "kind": "attempt_ended", "reason": "release", "close_steps": 3},
        {"step": 9, "kind": "verification_requested", "request_id": 1, "plan_index": 0, "text": CARROT.text,
         "required": 1, "reason": "after_release"},
        {"step": 9, "kind": "verification_answered", "request_id": 1, "plan_index": 0, "count": 1, "required": 1,
         "complete": True, "source": "test", "error": None},
        {"step": 9, "kind": "subgoal_completed", "plan_index": 0, "by": "verifier"},
        started(9, 1, SPOON),
        {"step": 54, "kind": "verification_requested", "request_id": 2, "plan_index": 1, "text": SPOON.text,
         "required": 1, "reason": "without_release"},
        {"step": 54, "kind": "verification_answered", "request_id": 2, "plan_index": 1, "count": None,
         "required": 1, "complete": False, "source": "test", "error": "no JSON object in the reply"},
        {"step": 54, "kind": "queue_changed", "reason": "retry_in_place", "pending": [1]},
        {"step": 99, "kind": "verification_requested", "request_id": 3, "plan_index": 1, "text": SPOON.text,
         "required": 1, "reason": "without_release"},
        {"step": 99, "kind": "verification_answered", "request_id": 3, "plan_index": 1, "count": 1, "required": 1,
         "complete": True, "source": "test", "error": None},
        {"step": 99, "kind": "subgoal_completed", "plan_index": 1, "by": "verifier"},
        {"step": 99, "kind": "episode_finished", "reason": "plan_complete", "completed": [0, 1], "advanced": [],
         "pending": []},
    ]
    assert o.summary() == {"variant": "proprio_verifier", "plan": [CARROT.to_dict(), SPOON.to_dict()],
                           "completed": [0, 1], "advanced": [], "pending": [], "ever_current": [0, 1],
                           "finish_reason": "plan_complete", "finish_step": 99}


def test_proprio_trigger_event_log_with_a_suppressed_release():
    # releases at 4 and 8 (8 is within the cooldown of 8 after 4: suppressed) and at 16 (12 after 4); the
    # episode ends after the last subgoal's attempt (the WidowX default stays on it until the budget)
    o = orch("proprio_trigger", [CARROT, SPOON], preset=get_preset("widowx", {"after_last_subgoal": "end"}))
    run(o, [O, C, C, C, O, C, C, C, O, O, O, O, C, C, C, C, O] + [O] * 10)
    assert event_log(o) == [
        *opening("proprio_trigger"),
        {"step": 4, "kind": "attempt_ended", "reason": "release", "close_steps": 3},
        {"step": 4, "kind": "subgoal_advanced", "plan_index": 0, "verified": False},
        started(4, 1, SPOON),
        {"step": 8, "kind": "release_suppressed", "close_steps": 3},
        {"step": 16, "kind": "attempt_ended", "reason": "release", "close_steps": 4},
        {"step": 16, "kind": "subgoal_advanced", "plan_index": 1, "verified": False},
        {"step": 16, "kind": "episode_finished", "reason": "plan_exhausted", "completed": [], "advanced": [0, 1],
         "pending": []},
    ]
    assert o.summary()["ever_current"] == [0, 1] and o.summary()["finish_step"] == 16


def test_periodic_trigger_event_log():
    o = orch("periodic_trigger", [CARROT, SPOON], budget=60)
    run(o, [O] * 100)
    assert event_log(o) == [
        *opening("periodic_trigger", budget=60),
        {"step": 27, "kind": "attempt_ended", "reason": "periodic", "close_steps": 0},
        {"step": 27, "kind": "subgoal_advanced", "plan_index": 0, "verified": False},
        started(27, 1, SPOON),
        {"step": 54, "kind": "attempt_ended", "reason": "periodic", "close_steps": 0},  # stays on the last
        {"step": 60, "kind": "episode_finished", "reason": "budget_exhausted", "completed": [], "advanced": [0],
         "pending": [1]},
    ]


def test_low_level_policy_has_no_subgoals_in_its_summary():
    o = orch("low_level_policy", [CARROT, SPOON], budget=3)
    ds = run(o, [O] * 10)
    assert [d.instruction for d in ds] == ["do everything"] * 3 + [None]
    assert [e["kind"] for e in event_log(o)] == ["episode_started", "episode_finished"]
    assert o.summary()["ever_current"] == [] and o.summary()["pending"] == [0, 1]


def test_variant_properties():
    assert [v for v in Variant if v.needs_verifier] == [Variant.PROPRIO_VERIFIER]
    assert [v for v in Variant if v.needs_privileged_state] == [Variant.PRIVILEGED_VERIFIER]
    assert Variant.parse(Variant.PERIODIC_TRIGGER) is Variant.PERIODIC_TRIGGER
    assert Variant.parse("proprio_trigger") is Variant.PROPRIO_TRIGGER


@pytest.mark.parametrize("budget, instruction, message", [
    (0, "x", "budget_steps must be a positive integer, got 0"),
    (True, "x", "budget_steps must be a positive integer, got True"),
    (10.0, "x", "budget_steps must be a positive integer, got 10.0"),
    (10, "  ", "instruction must be a non-empty string, got '  '"),
    (10, None, "instruction must be a non-empty string, got None"),
])
def test_orchestrator_arguments_are_checked(budget, instruction, message):
    with pytest.raises(InvalidInputError) as error:
        make_orchestrator("proprio_trigger", WIDOWX, [CARROT], instruction=instruction, budget_steps=budget)
    assert str(error.value) == message


def test_an_answer_after_the_end_is_recorded_and_ignored():
    o = orch("proprio_verifier", [CARROT])
    d = None
    for step in range(46):
        d = o.observe(StepInput(step=step, gripper=g(step)))
    request = d.request
    o.abort("operator")
    d = o.resolve(VerificationResult(request_id=request.request_id, count=1, source="late"))
    assert [e.to_dict() for e in d.events] == [{"step": 45, "kind": "verification_ignored", "request_id": 1,
                                                "count": 1, "source": "late"}]
    assert d.finished and d.finish_reason == "aborted: operator" and d.instruction is None
    assert o.abort("again").finish_reason == "aborted: operator"  # the first end stands


def test_privileged_settle_window_counts_from_the_first_step_and_restarts_per_subgoal():
    # both predicates already hold with the gripper open: 3 steps each (0-2, then 3-5)
    o = orch("privileged_verifier", [CARROT, SPOON])
    ds = run(o, [O] * 20, goal_states=lambda s, _: (True, True))
    completed = [(e.step, e.data["plan_index"]) for e in o.events if e.kind == ev.SUBGOAL_COMPLETED]
    assert completed == [(2, 0), (5, 1)] and ds[-1].finish_reason == "plan_complete"


def test_franka_privileged_never_sets_aside_the_only_subgoal_left():
    o = orch("privileged_verifier", [CARROT], preset=FRANKA)
    run(o, [O] * 700, zs=[0.3] * 700, goal_states=lambda s, _: (False,))
    assert queue_changes(o) == []


def test_franka_incomplete_duplicate_of_two_moves_behind_its_twin():
    o = orch("proprio_verifier", [CORN, CORN], preset=FRANKA, category=TaskCategory.DUPLICATES)
    run(o, [O] * 301, zs=[0.3] * 301, answer=lambda r: 0)
    assert queue_changes(o) == [(300, "moved_to_end", [1, 0])]
    assert [(e.step, e.data["plan_index"]) for e in o.events if e.kind == ev.SUBGOAL_STARTED] == [(0, 0), (300, 1)]


def test_franka_plan_restart_is_a_queue_change_at_the_last_advance():
    o = orch("proprio_trigger", [CARROT, SPOON], preset=FRANKA)
    run(o, [O] * 700, zs=[0.3] * 700)
    assert queue_changes(o) == [(600, "restart", [0, 1])]


def test_abort_before_the_first_step_ends_at_step_zero():
    o = orch("proprio_verifier", [CARROT])
    d = o.abort("node lost")
    assert (d.finished, d.finish_reason, o.finish_step) == (True, "aborted: node lost", 0)
    assert d.step == -1  # the decision is about no step yet
    assert [e.to_dict() for e in d.events] == [{"step": 0, "kind": "episode_finished", "reason": "aborted: node lost",
                                                "completed": [], "advanced": [], "pending": [0]}]


def test_privileged_goal_states_are_checked_with_a_clear_error():
    o = orch("privileged_verifier", [CARROT, SPOON])
    with pytest.raises(InvalidInputError) as missing:
        o.observe(StepInput(step=0, gripper=g(0)))
    assert str(missing.value) == "the privileged verifier needs the simulator's goal states"
    with pytest.raises(InvalidInputError) as short:
        o.observe(StepInput(step=0, gripper=g(0), goal_states=(True,)))
    assert str(short.value) == "expected 2 goal states (one per subgoal), got 1"


@pytest.mark.parametrize("step", [-1, True, 2.0, "3"])
def test_a_step_must_be_a_non_negative_integer(step):
    o = orch("proprio_trigger", [CARROT])
    with pytest.raises(InvalidInputError) as error:
        o.observe(StepInput(step=step, gripper=g(0)))
    assert str(error.value) == f"step must be a non-negative integer, got {step!r}"


def test_a_running_episode_has_no_finish_yet():
    o = orch("proprio_trigger", [CARROT], budget=1)
    d = o.observe(StepInput(step=0, gripper=g(0)))
    assert (d.finished, d.finish_reason, d.step) == (False, None, 0)
    assert (o.summary()["finish_reason"], o.summary()["finish_step"]) == (None, None)
    d = o.observe(StepInput(step=1, gripper=g(1)))  # a budget of one step ends at step 1
    assert (d.finished, d.finish_reason, o.finish_step) == (True, "budget_exhausted", 1)


def test_an_unknown_variant_names_every_valid_one():
    with pytest.raises(ConfigError) as error:
        Variant.parse("magic")
    assert str(error.value) == ("unknown variant 'magic'; valid: low_level_policy, periodic_trigger, "
                                "privileged_verifier, proprio_trigger, proprio_verifier "
                                "(see docs/operator.md#an-unknown-task-or-variant)")
