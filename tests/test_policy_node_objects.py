"""The objects the policy node composes, without rclpy: lockstep acting and the episode report."""

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import DecisionDoc, EpisodeStatus
from ladder_ros.nodes.policy.inputs import DECISION, JOINTS
from ladder_ros.nodes.policy.lockstep import WARMING_UP_HOLD, LockstepActor
from ladder_ros.nodes.policy.reporting import EpisodeReporter
from ladder_ros.policies.chunked import ReasonLog, TaggedAction

RATE_HZ = 5.0
EPISODE = EpisodeStatus(episode_id="e1", state="running", rate_hz=RATE_HZ, origin_ns=10_000_000_000)


class Warming:
    def __init__(self):
        self.ready, self.warm_up_s, self.failures = False, 2.5, []

    def snapshot(self):
        return "warming_up", "loading", 3.0

    def failed(self, reason):
        self.failures.append(reason)


class StepPolicy:
    """Answers one action per call; fails while ``failing``."""

    def __init__(self):
        self.failing, self.resets, self.calls = False, [], []
        self.chunks, self.holds, self.report = 0, 0, None

    def reset(self, instruction):
        self.resets.append(instruction)

    def act_tagged(self, bundle, instruction):
        if self.failing:
            raise LadderError("no policy server")
        self.calls.append(bundle)
        return TaggedAction(np.zeros(7), instruction, 0, chunk_id=len(self.calls), index=0, inference_ms=12.0)

    def policy_report(self):
        return {"held_steps": 0}


class Graph:
    """What the node hands the actor: its episode, the observation builder and the publisher."""

    def __init__(self):
        self.episode = None
        self.published, self.errors, self.logged = [], [], []
        self.reasons = ReasonLog(self.logged.append)
        self.warmup = Warming()
        self.actor = LockstepActor({DECISION, JOINTS}, episode=lambda: self.episode,
                                   observe=lambda step, inputs, stamp: (step, inputs[JOINTS], stamp),
                                   publish=lambda tagged, stamp: self.published.append(stamp),
                                   reasons=self.reasons, warmup=self.warmup, on_error=self.errors.append)

    def start(self):
        self.episode = EPISODE
        self.actor.new_episode()

    def step(self, step, instruction="pick", finished=False):
        stamp = EPISODE.step_stamp_ns(step)
        self.actor.add(stamp, JOINTS, f"joints {step}")
        self.actor.add(stamp, DECISION, DecisionDoc(episode_id="e1", step=step, stamp_ns=stamp,
                                                    instruction=instruction, finished=finished))


def test_a_step_waits_for_the_warm_up_and_is_acted_on_once_the_policy_is_there():
    graph = Graph()
    graph.start()
    graph.actor.start(EPISODE, join_late=False)
    graph.step(0)
    assert graph.published == [] and graph.reasons.kind == WARMING_UP_HOLD
    graph.actor.retry()
    assert graph.published == []  # still warming up: the simulator waits
    policy = StepPolicy()
    graph.actor.use(policy)
    graph.actor.retry()
    assert graph.published == [EPISODE.step_stamp_ns(0)] and policy.resets == ["pick"]
    assert policy.calls == [(0, "joints 0", EPISODE.step_stamp_ns(0))]
    graph.step(1)
    graph.step(2, instruction="place")
    assert graph.published == [EPISODE.step_stamp_ns(s) for s in range(3)] and policy.resets == ["pick", "place"]
    stats, holding = graph.actor.stats()
    assert stats["inference_ms_last"] == 12.0 and holding == ""
    assert graph.actor.episode_report() == {"held_steps": 0}


def test_a_failed_call_is_retried_in_order_and_reported_and_a_finished_decision_gives_no_action():
    graph = Graph()
    graph.start()
    policy = StepPolicy()
    graph.actor.use(policy)
    graph.actor.start(EPISODE, join_late=False)
    policy.failing = True
    graph.step(0)
    graph.step(1)
    # every try of step 0 (once it is complete, and again as each later message comes) failed and was reported
    assert graph.published == [] and graph.errors == ["e1"] * 3
    assert "step 0: no policy server" in graph.actor.stats()[1]
    policy.failing = False
    graph.actor.retry()
    assert graph.published == [EPISODE.step_stamp_ns(0), EPISODE.step_stamp_ns(1)]
    graph.step(2, instruction=None, finished=True)
    assert len(graph.published) == 2


def test_a_policy_that_could_not_be_built_lets_steps_pass_and_an_ended_episode_drops_its_steps():
    graph = Graph()
    graph.start()
    graph.actor.use(None)
    graph.actor.start(EPISODE, join_late=False)
    graph.step(0)
    assert graph.published == [] and graph.reasons.kind == ""  # passed, not held
    graph.actor.use(StepPolicy())
    graph.actor.end()
    graph.episode = None
    graph.step(1)
    assert graph.published == [] and graph.actor.policy is None and graph.actor.episode_report() == {}


class Source:
    def __init__(self):
        self.client = type("Client", (), {"server_errors": 3})()
        self.reason = None

    def give_up_reason(self):
        return self.reason


class Status:
    def __init__(self):
        self.sent = []

    def report(self, episode_id, report, *, final=False):
        self.sent.append((episode_id, report, final))


def test_the_episode_report_counts_the_servers_errors_from_the_episodes_start_and_gives_up_with_its_reason():
    source, status, warmup, aborts = Source(), Status(), Warming(), []
    reporter = EpisodeReporter(source=lambda: source, report=lambda: {"held_steps": 1}, warmup=warmup,
                               status=status, request_abort=lambda *a: aborts.append(a))
    reporter.begin()
    source.client.server_errors = 5
    reporter.send("e1")
    reporter.send("e1", final=True)
    assert status.sent == [("e1", {"held_steps": 1, "warm_up_s": 2.5, "server_errors": 2}, False),
                           ("e1", {"held_steps": 1, "warm_up_s": 2.5, "server_errors": 2}, True)]
    reporter.give_up_if_failing("e1")
    assert aborts == [] and warmup.failures == []
    source.reason = "policy server error: boom"
    reporter.give_up_if_failing("e1")
    assert aborts == [("e1", "policy server error: boom")] and warmup.failures == ["policy server error: boom"]


def test_an_empty_report_stays_empty_and_a_policy_without_a_shared_source_never_gives_up():
    status, aborts = Status(), []
    reporter = EpisodeReporter(source=lambda: None, report=dict, warmup=Warming(), status=status,
                               request_abort=lambda *a: aborts.append(a))
    reporter.begin()
    reporter.send("e2")
    reporter.give_up_if_failing("e2")
    assert status.sent == [("e2", {}, False)] and aborts == []
