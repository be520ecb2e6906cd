"""Lockstep pairing of one step's messages across topics (pure; no rclpy)."""

from ladder_ros.messages import stamp_of_step
from ladder_ros.runtime.step_sync import StepAligner

RATE = 5.0
ORIGIN = 1_000_000_000_000


def stamp(step, origin=ORIGIN):
    return stamp_of_step(origin, RATE, step)


def test_releases_a_step_only_when_every_input_is_in_and_in_order():
    a = StepAligner({"joints", "decision"})
    a.start(ORIGIN, RATE)
    a.add(stamp(0), "joints", "j0")
    assert a.pop_ready() == []
    a.add(stamp(0), "decision", "d0")
    assert a.pop_ready() == [(0, {"joints": "j0", "decision": "d0"})]
    a.add(stamp(0), "joints", "again")  # a republished step already done: dropped
    assert a.pop_ready() == [] and a.next_step == 1


def test_messages_before_the_episode_status_are_kept_for_it():
    a = StepAligner({"joints"})
    a.add(stamp(0), "joints", "early")
    assert a.pop_ready() == []
    a.start(ORIGIN, RATE)
    assert a.pop_ready() == [(0, {"joints": "early"})]


def test_a_past_episode_never_passes_for_the_current_one():
    a = StepAligner({"joints"})
    a.start(ORIGIN, RATE)
    a.add(stamp(0), "joints", "e1s0")
    assert a.pop_ready()
    a.stop()
    later = stamp(50) + 1_000_000_000
    a.add(stamp(1), "joints", "late message of episode 1")
    a.add(later, "joints", "episode 2 step 0, before its status")
    a.start(later, RATE)
    assert a.pop_ready() == [(0, {"joints": "episode 2 step 0, before its status"})]


def test_a_later_stamp_waits_for_its_episode():
    a = StepAligner({"joints"})
    a.start(ORIGIN, RATE)
    nxt = stamp(10) + 7  # not a step of this episode
    a.add(nxt, "joints", "next episode")
    assert a.pop_ready() == []
    a.stop()
    a.start(nxt, RATE)
    assert a.pop_ready() == [(0, {"joints": "next episode"})]


def test_a_restarted_node_joins_at_the_first_step_it_sees():
    a = StepAligner({"joints"})
    a.start(ORIGIN, RATE, join=True)
    a.add(stamp(42), "joints", "republished")
    assert a.pop_ready() == [(42, {"joints": "republished"})]


def test_a_step_that_arrived_early_is_released_once_its_turn_comes():
    # step 1's joint state comes before step 0's pose (topics are delivered independently)
    a = StepAligner({"joints", "pose"})
    a.start(ORIGIN, RATE)
    a.add(stamp(0), "joints", "j0")
    a.add(stamp(1), "joints", "j1")  # held: step 0 is not complete yet
    assert a.pop_ready() == []
    a.add(stamp(0), "pose", "p0")
    assert a.pop_ready() == [(0, {"joints": "j0", "pose": "p0"})]
    a.add(stamp(1), "pose", "p1")
    assert a.pop_ready() == [(1, {"joints": "j1", "pose": "p1"})]


def test_early_steps_come_out_in_order_in_one_go():
    a = StepAligner({"joints"})
    a.start(ORIGIN, RATE)
    for step in (3, 1, 2):
        a.add(stamp(step), "joints", f"j{step}")
    assert a.pop_ready() == []
    a.add(stamp(0), "joints", "j0")
    assert a.pop_ready() == [(0, {"joints": "j0"}), (1, {"joints": "j1"}), (2, {"joints": "j2"}),
                             (3, {"joints": "j3"})]
