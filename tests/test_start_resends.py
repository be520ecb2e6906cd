"""Which start commands go out again, and when (no ROS): a start is repeated a full period after its last send
until it is answered; other commands, and a start that names no episode, are sent once."""

from ladder_ros.messages import ABORT, START, EpisodeCommand
from ladder_ros.runtime.start_resends import START_RESEND_S, StartResends


def start(episode_id, seed=0):
    return EpisodeCommand(command=START, episode_id=episode_id, task_id="kitchen_single_2", seed=seed)


def test_a_start_goes_out_again_each_full_period_until_it_is_answered():
    resends = StartResends(period_s=1.0)
    resends.sent(start("a"), 10.0)
    assert "a" in resends
    assert resends.due(10.0) == [] and resends.due(10.999) == []
    assert resends.due(11.0) == [start("a")]  # exactly one period after the send
    assert resends.due(11.5) == [] and resends.due(12.0) == [start("a")]  # counted from the last send
    resends.sent(start("b", seed=1), 12.2)
    assert resends.due(13.0) == [start("a")] and resends.due(13.2) == [start("b", seed=1)]
    resends.answered("a")
    assert "a" not in resends and resends.due(20.0) == [start("b", seed=1)]
    resends.answered("b")
    resends.answered("never sent")  # an answer to another client's start: nothing to forget
    assert resends.due(100.0) == []


def test_only_a_start_that_names_its_episode_is_repeated_and_the_latest_send_wins():
    resends = StartResends()
    assert resends.period_s == START_RESEND_S == 1.0
    resends.sent(EpisodeCommand(command=ABORT, episode_id="a"), 0.0)
    resends.sent(start(""), 0.0)  # the orchestrator names it: nothing to match a reply with
    assert resends.due(10.0) == []
    resends.sent(start("a", seed=1), 0.0)
    resends.sent(start("a", seed=2), 0.5)  # sent again under the same id: that one is repeated
    assert resends.due(1.0) == [] and resends.due(1.5) == [start("a", seed=2)]
