"""The orchestrator's stall watchdog and journal, without ROS (ladder_ros/nodes/orchestrator/stall_watch.py,
journal.py)."""

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.nodes.orchestrator.journal import EpisodeJournal, default_state_dir, journal_path
from ladder_ros.nodes.orchestrator.stall_watch import (ABORT, ACTION, GRIPPER_EVENTS, JOINT_STATES, PRIVILEGED, WARN,
                                                       StallWatch)


def test_warns_once_then_aborts_and_progress_clears_the_report():
    watch = StallWatch(2.0, 5.0)
    watch.restart(100.0)
    assert watch.due(101.9) == ""
    assert watch.due(102.0) == WARN and watch.due(103.0) == ""  # once
    assert watch.progressed(103.5) is True  # it had been reported: the report can be cleared
    assert watch.due(105.0) == "" and watch.due(105.6) == WARN and watch.due(108.5) == ABORT
    with pytest.raises(ConfigError, match="warn"):
        StallWatch(5.0, 5.0)


def test_names_the_first_missing_link_of_a_lockstep_step():
    watch = StallWatch(1.0, 2.0)
    watch.restart(0.0)
    assert watch.waiting_for_lockstep(0, privileged=False) == "joint_states of step 0 (from the sim bridge or the " \
                                                              "robot driver)"
    for name in (JOINT_STATES, GRIPPER_EVENTS):
        watch.saw(name, 0, 0.1)
    assert watch.waiting_for_lockstep(1, privileged=False) == "policy/action of step 0 (from the policy)"
    watch.saw(ACTION, 0, 0.2)
    assert watch.waiting_for_lockstep(1, privileged=False).startswith("joint_states of step 1")
    watch.saw(JOINT_STATES, 1, 0.3)
    assert watch.waiting_for_lockstep(1, privileged=True).startswith(f"{PRIVILEGED} of step 1")
    watch.saw(PRIVILEGED, 1, 0.3)
    assert watch.waiting_for_lockstep(1, privileged=True) == "gripper/events of step 1 (from the gripper trigger)"


def test_on_the_wall_clock_it_tells_a_silent_driver_from_a_silent_trigger():
    watch = StallWatch(1.0, 2.0)
    watch.restart(0.0)
    assert watch.waiting_for_wall_clock(5.0, 7, fresh_s=1.0).startswith("joint_states of step 7")
    watch.saw(JOINT_STATES, 0, 4.5)
    assert watch.waiting_for_wall_clock(5.0, 7, fresh_s=1.0).startswith("gripper/events of step 7")


def test_journal_round_trip_and_damage(tmp_path):
    path = journal_path(tmp_path, "/widowx/orchestrator", "42")
    assert path.name == "orchestrator_42_widowx_orchestrator.json"
    journal = EpisodeJournal(path)
    assert journal.read() is None and journal.error is None  # no journal yet: nothing to recover
    assert journal.write({"episode_id": "e", "state": "running"}, [{"kind": "x"}], {"pending": [0]}, 12.5)
    assert journal.read()["status"]["episode_id"] == "e" and journal.read()["events"] == [{"kind": "x"}]
    path.write_text("{not json")
    assert journal.read() is None and "unreadable journal" in journal.error
    blocked = EpisodeJournal(tmp_path / "file" / "j.json")
    (tmp_path / "file").write_text("")
    assert not blocked.write({}, [], {}, 0.0) and blocked.error  # reported, never raised
    assert default_state_dir({"ROS_HOME": "/r"}).as_posix() == "/r/ladder_ros"
