"""The objects a robot driver node composes, without rclpy: stopping and faults, vendor calls, health, homing,
recovery and the WidowX's paced commands (ladder_ros/nodes/driver/). The drivers themselves, on a twin and on
franky-sim, are test_widowx_driver.py's and test_franka_driver.py's."""

import threading

import numpy as np

from ladder_ros.core.safety import HOLD_REFUSED, MOTOR_ERROR, ROBOT_ERROR, STALL, VENDOR_TIMEOUT, InterventionCounts
from ladder_ros.core.safety_supervisor import SafetySupervisor, SupervisorConfig
from ladder_ros.nodes.driver.faults import ArmStopper, ArmWatch, StopOutcome, VendorCallRouter
from ladder_ros.nodes.driver.homing import Homing
from ladder_ros.nodes.driver.paced import PacedCommands
from ladder_ros.robots.arm_health import RestDetector
from ladder_ros.robots.vendor_calls import DONE, EXPIRED, FAILED, LATE, VendorCall


class Recorder:
    """A stand-in for the node's callables and logger: every call kept, in order."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs))

    def named(self, name):
        return [(args, kwargs) for n, args, kwargs in self.calls if n == name]


class FakeWorker:
    """The vendor-call worker's interface: calls are submitted, and :meth:`poll` returns those the test ended."""

    def __init__(self):
        self.submitted: list[VendorCall] = []
        self.ended: list[VendorCall] = []
        self.busy = False

    def submit(self, name, function, deadline_s):
        call = VendorCall(name, function, deadline_s, submitted_at=0.0)
        self.submitted.append(call)
        return call

    def end(self, call, state, result=None, error=None):
        call.state, call.result, call.error, call.started_at, call.ended_at = state, result, error, 0.0, 0.1
        self.ended.append(call)

    def poll(self):
        ended, self.ended = self.ended, []
        return ended


def supervisor():
    return SafetySupervisor(InterventionCounts(), SupervisorConfig(watchdog_s=1.0))


def router_and_stopper(outcome):
    s, node, worker = supervisor(), Recorder(), FakeWorker()
    router = VendorCallRouter(worker, "the arm's API", node.warn, lambda kind, reason: stopper.fault(kind, reason))
    stopper = ArmStopper(s, outcome, RestDetector(0.03, 0.1), router, 2.0, intervene=node.intervene,
                         cancel_homing=node.cancel_homing, publish_state=node.publish_state, logger=node)
    return s, node, worker, router, stopper


def test_a_held_stop_is_noted_and_a_first_refusal_is_an_uncounted_intervention():
    s, node, worker, _, stopper = router_and_stopper(lambda: StopOutcome(True, "held at the measured joints",
                                                                         refused=True))
    stopper.stop()
    assert s.stop_report == "held at the measured joints" and s.recovery_required is None
    assert node.named("intervene") == [((HOLD_REFUSED, "held at the measured joints"), {})]
    assert worker.submitted == []


def test_a_refused_stop_is_a_fault_and_its_last_resort_runs_on_the_worker_and_says_how_it_went():
    s, node, worker, router, stopper = router_and_stopper(
        lambda: StopOutcome(False, "hold refused", refused=True, last_resort=lambda: "torque off"))
    stopper.stop()
    assert s.recovery_required == f"{HOLD_REFUSED}: hold refused" and s.counts.counts[HOLD_REFUSED] == 1
    assert s.stop_report == "hold refused; stopping it by its last resort"
    assert node.named("intervene") == [((HOLD_REFUSED, "hold refused"), {"counted": True})]
    (call,) = worker.submitted
    assert call.name == "last-resort stop" and call.deadline_s == 2.0
    worker.end(call, DONE, result=call.function())
    router.poll()
    assert s.stop_report == "hold refused; torque off" and node.named("publish_state") == [((), {})]


def test_a_stop_that_raised_without_a_last_resort_says_to_use_the_hardware_e_stop():
    def raising():
        raise RuntimeError("bus down")
    s, node, worker, _, stopper = router_and_stopper(raising)
    stopper.stop()
    assert "NOT STOPPED: use the hardware e-stop" in s.stop_report and worker.submitted == []
    assert s.recovery_required is not None and node.named("intervene")[0][1] == {"counted": True}


def test_a_fault_is_counted_once_disarms_drops_the_way_home_and_stops_the_arm():
    s, node, _, _, stopper = router_and_stopper(lambda: StopOutcome(True, "held"))
    assert s.arm()[0]
    stopper.fault(STALL, "elbow blocked")
    assert not s.armed and s.recovery_required == f"{STALL}: elbow blocked" and s.counts.counts[STALL] == 1
    assert [n for n, _, _ in node.calls] == ["cancel_homing", "intervene"] and s.stop_report == "held"
    assert node.named("intervene") == [((STALL, "elbow blocked"), {"counted": True})]
    assert not s.arm()[0]


def test_a_vendor_call_past_its_deadline_is_a_vendor_timeout_fault_and_its_handler_still_hears_of_it():
    s, node, worker, router, _ = router_and_stopper(lambda: StopOutcome(True, "held"))
    ended = []
    late, expired = router.run("read", lambda: 1, 1.0, ended.append), router.run("write", lambda: 1, 1.0, ended.append)
    worker.end(late, LATE)
    worker.end(expired, EXPIRED)
    router.poll()
    assert ended == [expired] and s.recovery_required.startswith(f"{VENDOR_TIMEOUT}: the arm's API did not answer")
    assert node.named("warn")[0][0][0].startswith("the arm's API: read: answered")


def test_stale_states_are_a_fault_except_while_a_recovery_runs_and_a_health_finding_is_reported_once():
    s, node = supervisor(), Recorder()
    faults, recovering, now_ns = [], [False], [int(10e9)]
    watch = ArmWatch(s, "the arm's API", 0.5, 1.0, fault=lambda *f: faults.append(f), intervene=node.intervene,
                     recovering=lambda: recovering[0], clock_ns=lambda: now_ns[0])
    assert watch.stale(None) == [] and watch.stale(int(9.6e9)) == []
    (kind, reason), = watch.stale(int(9e9))
    assert kind == VENDOR_TIMEOUT and "1.00 s old" in reason
    recovering[0] = True
    assert watch.stale(int(9e9)) == []
    assert watch.health_due(0.0) and not watch.health_due(0.5) and watch.health_due(1.0)
    poll = VendorCall("health poll", lambda: None, 1.0, 0.0, state=DONE, result=[(MOTOR_ERROR, "elbow: overload")])
    watch.on_health(poll)
    watch.on_health(poll)  # the same finding again: not a second fault
    assert faults == [(MOTOR_ERROR, "elbow: overload")]
    s.fault(MOTOR_ERROR, "elbow: overload")
    watch.forget_reported()
    watch.on_health(poll)  # a fault is pending: reported beside it
    assert node.named("intervene") == [((MOTOR_ERROR, "while a fault is pending: elbow: overload"), {})]
    s.recovered("rebooted")
    watch.on_health(VendorCall("health poll", lambda: None, 1.0, 0.0, state=FAILED, error=OSError("bus")))
    assert faults[-1] == (ROBOT_ERROR, "the health poll failed: OSError('bus')")


def test_homing_is_refused_unless_armed_steps_once_per_tick_and_stops_when_disarmed():
    s, node, sent = supervisor(), Recorder(), []
    homing = Homing(s, 0.2, start=lambda: (np.zeros(2), np.array([0.4, 0.0]), np.array([0.2, 0.2])),
                    send_step=lambda joints, last: sent.append((joints.tolist(), last)), arrived=node.arrived,
                    logger=node)
    ok, message = homing.go()
    assert not ok and "arm the robot first" in message and not homing.active
    s.arm()
    ok, message = homing.go()
    assert ok and message == "homing in 4 steps of 200 ms" and homing.active
    homing.step()
    assert sent == [([0.1, 0.0], False)] and node.named("arrived") == []
    for _ in range(3):
        homing.step()
    assert sent[-1] == ([0.4, 0.0], True) and not homing.active and node.named("arrived") == [((), {})]
    assert homing.go()[0]
    s.disarm()
    homing.step()
    assert not homing.active and len(sent) == 4


class FakeArm:
    def __init__(self, takes_joints=True):
        self.takes_joints = takes_joints
        self.sent: list[list[float]] = []

    def send_joints(self, joints):
        self.sent.append(list(joints))
        return self.takes_joints

    def send_gripper(self, open_):
        return True


def paced_commands(arm, may_move):
    woken = threading.Semaphore(0)
    paced = PacedCommands("test-commands", int(0.2e9), int(0.02e9), arm, may_move, lambda: 0, woken.release)
    return paced, woken


def test_paced_commands_hand_the_node_what_was_sent_and_what_failed_in_order():
    arm, armed = FakeArm(), [True]
    paced, woken = paced_commands(arm, lambda: armed[0])
    try:
        assert paced.plan(0, 0) == int(0.02e9)
        for joints, move in (([0.1], True), ([0.2], False)):
            paced.send(np.array(joints), True, move)
            assert woken.acquire(timeout=10)
        armed[0] = False
        paced.send(np.array([0.3]), True, True)  # disarmed by its moment: skipped, not a failure
        assert woken.acquire(timeout=10)
        arm.takes_joints, armed[0] = False, True
        paced.send(np.array([0.4]), True, True)  # refused by the API: a failure (None)
        assert woken.acquire(timeout=10)
        accounted = []
        failed = paced.drain(accounted.append)
        assert [(c.joints.tolist(), c.sent, c.move) for c in accounted] == [([0.1], True, True), ([0.2], False, False)]
        assert failed == [None] and arm.sent == [[0.1], [0.4]]
        assert paced.stats()["apply_delay_ms"] == 20.0 and paced.stats()["paced_commands"] == 4
    finally:
        paced.close()


def test_holding_the_pacer_drops_the_commands_not_sent_yet():
    arm = FakeArm()
    paced, _ = paced_commands(arm, lambda: True)
    try:
        paced.plan(int(60e9), 0)  # its moment is a minute away
        paced.send(np.array([0.1]), True, True)
        assert paced.pacer.pending == 1
        with paced.held():
            assert paced.pacer.pending == 0
        assert paced.drain(lambda c: None) == [] and arm.sent == []
    finally:
        paced.close()
