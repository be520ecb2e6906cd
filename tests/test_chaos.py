"""Chaos in the rehearsal: the seeded fault schedule, each injector against its instrument, and one graph run.

The schedule is a pure function of the seed and the episode, at the expected rate; each injector does what it
says to the instrument that plays it (the rehearsal server's error and stall, through the project's own openpi
client; the twin's camera, oracle input and blocked joint, whose present current saturates and then overloads
as a blocked Dynamixel's does; the instruments' fault topic over ROS); the runner sees every fault to an end
with fake processes and services (a killed server started again, a respawned driver armed again, an e-stop
released, a watchdog when nothing moves). One short rehearsal with a forced server error ends, with the fault
recorded and counted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.evaluation.chaos import (
    ARM_GIVE_UP_S,
    ENDED,
    ESTOP,
    KILLABLE_NODES,
    KINDS,
    MOTOR_STALL,
    NODE_KILL,
    NOT_REACHED,
    PAUSED,
    SERVER_ERROR,
    SERVER_KILL,
    STALLABLE_JOINTS,
    VLM_TIMEOUT,
    WENT_ON,
    ChaosLog,
    ChaosPlan,
    ChaosRunner,
    ChaosSchedule,
    OperatorNeeded,
    PlannedFault,
    chaos_summary,
    episode_key,
    parse_kinds,
    read_chaos,
)
from ladder_ros.instruments.faults import FaultApplied, FaultWindow, InstrumentFault
from ladder_ros.instruments.widowx_twin import xs_wire
from ladder_ros.instruments.widowx_twin.fault_hooks import TwinFaultHooks
from ladder_ros.instruments.widowx_twin.motors import (
    CURRENT_UNIT_MA,
    PRESENT_CURRENT,
    XM430_W350_STALL_MA,
    WidowXMotors,
)
from ladder_ros.messages import SchemaError, decode, encode
from ladder_ros.robots import dynamixel as dxl
from ladder_ros.robots import wx250s

REPO = Path(__file__).resolve().parent.parent


class FakeClock:
    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


# ---------------------------------------------------------------------------------------------------- schedule
def test_the_schedule_is_seeded_reproducible_and_has_the_expected_rate():
    schedule = ChaosSchedule(0.25, seed=7)
    keys = [episode_key("relay_2", "proprio_verifier", k % 24, k) for k in range(4000)]
    drawn = [schedule.faults_for(key) for key in keys]
    assert drawn == [ChaosSchedule(0.25, seed=7).faults_for(key) for key in keys]  # the same seed, the same faults
    assert drawn != [ChaosSchedule(0.25, seed=8).faults_for(key) for key in keys]
    counts = np.array([len(faults) for faults in drawn])
    assert counts.mean() == pytest.approx(0.25, abs=0.025)  # Poisson(0.25): a fault every four episodes
    assert np.mean(counts > 0) == pytest.approx(1 - np.exp(-0.25), abs=0.025)
    faults = [f for episode in drawn for f in episode]
    assert {f.kind for f in faults} == set(KINDS)  # every kind is drawn
    assert all(3.0 <= f.at_s <= 15.0 for f in faults)
    assert all(f.target in STALLABLE_JOINTS for f in faults if f.kind == MOTOR_STALL)
    assert all(f.target in KILLABLE_NODES for f in faults if f.kind == NODE_KILL)
    assert all(f.target == "rehearsal_server" for f in faults if f.kind == SERVER_KILL)
    # a rerun of an episode (its second attempt) draws again; the episodes' draws are sorted by time
    assert [schedule.faults_for(k, 2) for k in keys[:200]] != drawn[:200]
    assert all(episode == sorted(episode, key=lambda f: f.at_s) for episode in drawn)
    assert ChaosSchedule(0.0, seed=7).faults_for(keys[0]) == []


def test_the_kinds_can_be_chosen_and_bad_values_are_refused_by_name():
    schedule = ChaosSchedule(3.0, seed=1, kinds=parse_kinds("server_error, estop"))
    assert {f.kind for k in range(50) for f in schedule.faults_for(f"e{k}")} == {SERVER_ERROR, ESTOP}
    assert parse_kinds(None) == KINDS and parse_kinds("") == KINDS
    with pytest.raises(ConfigError, match="unknown kind 'meteor'"):
        parse_kinds("estop,meteor")
    for rate in (-0.1, float("nan"), 21.0, True):
        with pytest.raises(ConfigError, match="--faults"):
            ChaosSchedule(rate, seed=0)
    with pytest.raises(ConfigError, match="seed"):
        ChaosSchedule(0.25, seed=-1)
    vlm = ChaosSchedule(5.0, seed=0, kinds=(VLM_TIMEOUT,), durations={VLM_TIMEOUT: 12.5}).faults_for("x")
    assert vlm and all(f.duration_s == 12.5 for f in vlm)


def test_the_summary_counts_faults_by_kind_and_outcome(tmp_path):
    log = ChaosLog(tmp_path / "chaos.jsonl")
    for kind, outcome in ((ESTOP, WENT_ON), (ESTOP, ENDED), (SERVER_ERROR, WENT_ON), (ESTOP, WENT_ON)):
        log.add({"kind": kind, "outcome": outcome})
    summary = chaos_summary(read_chaos(tmp_path / "chaos.jsonl"))
    assert summary == {"faults": 4, "by_outcome": {ENDED: 1, WENT_ON: 3},
                       "by_kind": {ESTOP: {ENDED: 1, WENT_ON: 2}, SERVER_ERROR: {WENT_ON: 1}}}
    assert chaos_summary([])["faults"] == 0


# ---------------------------------------------------------------------------------------------------- documents
def test_instrument_faults_round_trip_and_refuse_what_no_instrument_plays():
    fault = InstrumentFault(fault_id=3, fault="motor_stall", duration_s=7.0, joint="elbow")
    assert decode(encode(fault), InstrumentFault) == fault
    applied = FaultApplied(fault_id=3, fault="motor_stall", instrument="widowx_twin", detail="elbow blocked")
    assert decode(encode(applied), FaultApplied) == applied
    for bad in (dict(fault="meteor", duration_s=1.0), dict(fault="camera_stall", duration_s=0.0),
                dict(fault="camera_stall", duration_s=float("inf")), dict(fault="motor_stall", duration_s=1.0)):
        with pytest.raises(SchemaError):
            InstrumentFault(fault_id=1, **bad)


def test_a_fault_window_plays_for_its_duration_and_is_never_shortened():
    clock = FakeClock()
    window = FaultWindow(clock)
    assert not window.active
    window.open(3.0)
    clock.advance(1.0)
    window.open(1.0)  # a shorter fault inside a longer one changes nothing
    assert window.active and window.remaining_s() == pytest.approx(2.0) and window.opened == 2
    clock.advance(2.0)
    assert not window.active and window.remaining_s() == 0.0


# ---------------------------------------------------------------------------------------------------- the server
def _server_policy(clock=None, sleep=None, port=0):
    from ladder_ros.instruments.expert.noise import ExpertNoise
    from ladder_ros.instruments.rehearsal.server import RehearsalPolicy
    from ladder_ros.policies.factory import load_policy

    config = load_policy("bridge_pi0_server")
    if port:
        config = replace(config, server=replace(config.server, port=port))
    kwargs = {} if clock is None else {"clock": clock}
    return config, RehearsalPolicy(config, ExpertNoise.off(), delay_ms=0.0, wait_s=0.0,
                                   sleep=sleep or (lambda s: None), **kwargs)


def _warm_up(config):
    from ladder_ros.policies.observation import ObservationEncoder
    from ladder_ros.policies.warmup import WARM_UP_PROMPT

    encoder = ObservationEncoder(config)
    return encoder.openpi_request(encoder.dummy_bundle(), WARM_UP_PROMPT)


def test_the_server_answers_errors_while_a_server_error_plays_and_blocks_through_a_stall():
    from ladder_ros.instruments.rehearsal.server import InjectedServerError

    clock, slept = FakeClock(), []

    def sleep(seconds):
        slept.append(seconds)
        clock.advance(seconds)

    config, policy = _server_policy(clock, sleep)
    request = _warm_up(config)
    policy.fail_for(2.0)
    with pytest.raises(InjectedServerError, match="injected fault"):
        policy.respond(request)
    clock.advance(2.5)
    assert policy.respond(request)["actions"].shape == (config.chunk_length, 7)  # over: answers again
    policy.stall_for(4.0)
    clock.advance(1.0)
    slept.clear()
    policy.respond(request)  # arrives 1 s into the stall: held for the 3 s left
    assert slept[0] == pytest.approx(3.0)
    assert policy.stats()["injected"] == {"error": 1, "stall": 1}


def test_the_real_openpi_client_gets_the_injected_error_as_a_failing_server():
    pytest.importorskip("websockets", reason="the openpi protocol runs over websockets (requirements/policy.txt)")
    from ladder_ros.instruments.rehearsal.server import serve
    from ladder_ros.policies.openpi_remote import OpenPIClient

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config, policy = _server_policy(port=port)
    server = serve(policy)
    client = OpenPIClient(config.server)
    try:
        client.connect()
        policy.fail_for(30.0)
        with pytest.raises(LadderError, match="injected fault"):
            client.infer(_warm_up(config))
        assert server.errors >= 1
    finally:
        client.close()
        server.stop()


# ---------------------------------------------------------------------------------------------------- the twin
def _blocked(joint="elbow", overload_after_s=5.0):
    clock = FakeClock()
    motors = WidowXMotors(clock, overload_after_s=overload_after_s)
    motors.set_registers("group", "arm", dxl.PROFILE_VELOCITY, 500)
    motors.set_registers("group", "arm", dxl.PROFILE_ACCELERATION, 100)
    goal = np.array(wx250s.SLEEP_JOINTS, dtype=float)
    goal[wx250s.JOINT_NAMES.index(joint)] -= 0.4  # within every joint's limits from the sleep pose
    motors.write_group("arm", goal)
    clock.advance(0.1)
    motors.stall(joint)
    return clock, motors


def test_a_blocked_joint_draws_its_stall_current_then_overloads_and_shuts_down_until_rebooted():
    clock, motors = _blocked("elbow")
    i = wx250s.JOINT_NAMES.index("elbow")
    efforts = motors.joint_states().effort
    # pushing towards its goal (0.4 rad below): the stall current, signed, under the Current_Limit
    assert efforts[i] == pytest.approx(-XM430_W350_STALL_MA) and XM430_W350_STALL_MA < 1193 * CURRENT_UNIT_MA
    assert all(e == 0.0 for k, e in enumerate(efforts) if k != i)  # the others hold, drawing nothing modelled
    raw = motors.get_registers("single", "elbow", PRESENT_CURRENT)
    assert raw == [-round(XM430_W350_STALL_MA / CURRENT_UNIT_MA)]
    clock.advance(4.9)
    assert motors.get_registers("single", "elbow", dxl.HARDWARE_ERROR_STATUS) == [0]  # still pushing
    clock.advance(0.2)
    assert motors.get_registers("single", "elbow", dxl.HARDWARE_ERROR_STATUS) == [dxl.OVERLOAD]
    assert motors.get_registers("single", "elbow", dxl.TORQUE_ENABLE) == [0] and motors.overloads == 1
    assert motors.joint_states().effort[i] == 0.0  # shut down: no current
    motors.torque_enable("single", "elbow", True)
    assert motors.get_registers("single", "elbow", dxl.TORQUE_ENABLE) == [0]  # only a reboot clears it
    motors.release_stall("elbow")  # the obstacle taken away; the motor still in error
    assert motors.reboot("group", "arm", True, smart_reboot=True) == ["elbow"]
    assert motors.get_registers("single", "elbow", dxl.HARDWARE_ERROR_STATUS) == [0]


def test_a_blocked_joint_at_its_goal_draws_nothing_and_the_wrist_rotate_reads_no_current():
    clock, motors = _blocked("wrist_rotate")
    assert motors.joint_states().effort[wx250s.JOINT_NAMES.index("wrist_rotate")] == 0.0  # XL430: no sensor
    clock = FakeClock()
    motors = WidowXMotors(clock)
    motors.stall("waist")  # blocked where it stands, asked to stay: no push, no overload
    clock.advance(60.0)
    assert motors.joint_states().effort[0] == 0.0 and motors.get_registers("single", "waist",
                                                                           dxl.HARDWARE_ERROR_STATUS) == [0]


class FakeCamera:
    channel = "twin_frames"

    def __init__(self):
        self.stalls = []

    def stall(self, duration_s):
        self.stalls.append(duration_s)


def test_the_twin_stalls_its_camera_holds_the_oracles_input_and_blocks_then_frees_a_joint():
    clock, camera, injected = FakeClock(), FakeCamera(), []
    hooks = TwinFaultHooks(camera, injected.append, clock)
    handlers = hooks.handlers()
    assert "twin_frames" in handlers["camera_stall"](InstrumentFault(fault_id=1, fault="camera_stall",
                                                                     duration_s=3.0))
    assert camera.stalls == [3.0]
    handlers["oracle_hold"](InstrumentFault(fault_id=2, fault="oracle_hold", duration_s=7.0))
    assert hooks.privileged_held() and hooks.held_privileged == 1
    handlers["motor_stall"](InstrumentFault(fault_id=3, fault="motor_stall", duration_s=5.0, joint="shoulder"))
    assert injected == [xs_wire.TwinFault(fault=xs_wire.STALL, joint="shoulder")]
    clock.advance(4.0)
    assert hooks.expire() == [] and hooks.privileged_held()
    clock.advance(3.5)
    assert hooks.expire() == ["shoulder"] and not hooks.privileged_held()
    assert injected[-1] == xs_wire.TwinFault(fault=xs_wire.RELEASE_STALL, joint="shoulder")
    with pytest.raises(KeyError, match="no arm joint 'gripper'"):
        handlers["motor_stall"](InstrumentFault(fault_id=4, fault="motor_stall", duration_s=1.0, joint="gripper"))


def test_an_instrument_hears_its_faults_over_ros_and_says_it_played_them():
    rclpy = pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    from ladder_ros.instruments.fault_inbox import FaultInbox, fault_qos
    from ladder_ros.instruments.faults import APPLIED_TOPIC, FAULT_TOPIC

    rclpy.init()
    try:
        instrument, asker = rclpy.create_node("twin_like"), rclpy.create_node("asker")
        played = []

        def stall(fault):
            if fault.duration_s > 10:
                raise ValueError("too long for this test's camera")
            played.append(fault)
            return "frames stop"

        FaultInbox(instrument, {"camera_stall": stall})
        answers = []
        pub = asker.create_publisher(String, FAULT_TOPIC, fault_qos())
        asker.create_subscription(String, APPLIED_TOPIC, lambda m: answers.append(decode(m.data, FaultApplied)),
                                  fault_qos())
        executor = SingleThreadedExecutor()
        executor.add_node(instrument)
        executor.add_node(asker)

        def spin_until(condition, what):
            for _ in range(400):
                if condition():
                    return
                executor.spin_once(timeout_sec=0.05)
            raise AssertionError(f"no {what}")

        spin_until(lambda: pub.get_subscription_count() == 1 and asker.count_publishers(APPLIED_TOPIC) == 1,
                   "match")
        for fault in (InstrumentFault(fault_id=1, fault="server_error", duration_s=2.0),  # not this node's
                      InstrumentFault(fault_id=2, fault="camera_stall", duration_s=2.0),
                      InstrumentFault(fault_id=3, fault="camera_stall", duration_s=20.0)):
            pub.publish(String(data=encode(fault)))
        spin_until(lambda: len(answers) == 2, "answers")
        assert [f.fault_id for f in played] == [2]
        assert (answers[0].fault_id, answers[0].detail, answers[0].instrument) == (2, "frames stop", "twin_like")
        assert answers[1].fault_id == 3 and "too long" in answers[1].error
    finally:
        rclpy.try_shutdown()


# ---------------------------------------------------------------------------------------------------- the runner
class FakeFuture:
    def __init__(self, result):
        self._result = result

    def done(self):
        return True

    def result(self):
        return self._result


class Reply:
    def __init__(self, success=True, message=""):
        self.success, self.message = success, message


class FakeEndpoints:
    def __init__(self, arms=None):
        self.calls, self.faults, self.applied = [], [], {}
        self.arms = arms  # how the driver answers robot/arm (and whether it is armed then)
        self.armed = False

    def publish_fault(self, fault_id, fault, duration_s, joint=""):
        self.faults.append((fault_id, fault, duration_s, joint))
        self.applied[fault_id] = FaultApplied(fault_id=fault_id, fault=fault, instrument="twin", detail="played")

    def estop(self):
        self.calls.append("estop")
        self.armed = False
        return FakeFuture(Reply(message="e-stop latched"))

    def release(self):
        self.calls.append("release")
        return FakeFuture(Reply(message="e-stop released"))

    def arm(self):
        self.calls.append("arm")
        ok = self.arms(len([c for c in self.calls if c == "arm"])) if self.arms else True
        self.armed = ok
        return FakeFuture(Reply(ok, "armed" if ok else "refused: checking the arm"))


class FakeProcess:
    def __init__(self):
        self.code = None

    def poll(self):
        return self.code


class FakeProcesses:
    def __init__(self, names):
        self.processes = {name: FakeProcess() for name in names}
        self.started = []

    def signal(self, name, sig):
        self.processes[name].code = -sig

    def start_node(self, name):
        self.processes[name] = FakeProcess()
        self.started.append(name)


class FixedSchedule:
    def __init__(self, *faults):
        self.faults = list(faults)

    def faults_for(self, key, attempt=1):
        return list(self.faults) if attempt == 1 else []


def _runner(tmp_path, *faults, arms=None, tags=None, watchdog_s=90.0):
    clock = FakeClock()
    endpoints = FakeEndpoints(arms)
    processes = FakeProcesses(["rehearsal_server", "widowx_driver", "camera"])
    excused, aborted, said = set(), [], []
    counter = {"tags": 0}

    def spin(condition, timeout_s, what):
        for _ in range(int(timeout_s / 0.05) + 2):
            if condition():
                return
            clock.advance(0.05)
        raise LadderError(f"timed out waiting for {what}")

    plan = ChaosPlan(FixedSchedule(*faults), ChaosLog(tmp_path / "chaos.jsonl"), watchdog_s=watchdog_s)
    runner = ChaosRunner(plan, endpoints=endpoints, processes=processes, excused=excused,
                         tags=tags or (lambda episode_id: counter["tags"]),
                         abort=lambda episode_id, why: aborted.append(why), spin=spin,
                         armed=lambda: endpoints.armed, clock=clock, wall=lambda: 1.7e9, say=said.append)
    return runner, clock, endpoints, processes, excused, aborted, counter


def _run(runner, clock, seconds, counter=None):
    for _ in range(int(seconds / 0.1)):
        clock.advance(0.1)
        if counter is not None:
            counter["tags"] += 1  # the policy hands out actions
        runner.during("e1")


def test_an_instrument_fault_is_asked_for_at_its_time_and_its_outcome_follows_the_episode(tmp_path):
    runner, clock, endpoints, *_ = _runner(tmp_path, PlannedFault(SERVER_ERROR, 4.0, 3.0),
                                           PlannedFault(MOTOR_STALL, 30.0, 7.0, "elbow"))
    runner.begin("e1", "k")
    _run(runner, clock, 3.9)
    assert endpoints.faults == []
    _run(runner, clock, 0.3)
    assert [f[1:] for f in endpoints.faults] == [("server_error", 3.0, "")]
    record = {"finish_reason": "plan_complete"}
    runner.end("e1", record)
    error, stall = record["chaos"]
    assert error["outcome"] == WENT_ON and error["played"] == "played"
    assert error["injected_s"] == pytest.approx(4.0, abs=0.11)
    assert stall["outcome"] == NOT_REACHED and stall["target"] == "elbow"
    assert [r["outcome"] for r in read_chaos(tmp_path / "chaos.jsonl")] == [WENT_ON, NOT_REACHED]


def test_a_killed_server_is_excused_then_started_again(tmp_path):
    runner, clock, endpoints, processes, excused, *_ = _runner(
        tmp_path, PlannedFault(SERVER_KILL, 3.0, 3.0, "rehearsal_server"))
    runner.begin("e1", "k")
    _run(runner, clock, 3.5)
    assert processes.processes["rehearsal_server"].poll() is not None and excused == {"rehearsal_server"}
    _run(runner, clock, 3.0)
    assert processes.started == ["rehearsal_server"] and excused == set()
    record = {"finish_reason": "aborted: policy unavailable"}
    runner.end("e1", record)
    assert processes.started == ["rehearsal_server"]  # once
    assert record["chaos"][0]["outcome"] == ENDED and record["chaos"][0]["reason"] == "aborted: policy unavailable"


def test_two_kills_of_the_server_at_once_start_it_once(tmp_path):
    runner, clock, endpoints, processes, excused, *_ = _runner(
        tmp_path, PlannedFault(SERVER_KILL, 3.0, 3.0, "rehearsal_server"),
        PlannedFault(SERVER_KILL, 3.1, 3.0, "rehearsal_server"))
    runner.begin("e1", "k")
    _run(runner, clock, 8.0)
    assert processes.started == ["rehearsal_server"] and excused == set()
    record = {"finish_reason": "plan_complete"}
    runner.end("e1", record)
    assert [f["outcome"] for f in record["chaos"]] == [WENT_ON, WENT_ON]


def test_a_killed_driver_is_respawned_and_armed_again_as_the_operator_does(tmp_path):
    runner, clock, endpoints, processes, *_ = _runner(tmp_path, PlannedFault(NODE_KILL, 3.0, 0.0, "widowx_driver"),
                                                      arms=lambda n: n >= 3)  # it refuses while it checks the arm
    runner.begin("e1", "k")
    _run(runner, clock, 5.0)
    assert processes.started == ["widowx_driver"] and endpoints.calls.count("arm") == 3 and endpoints.armed
    record = {"finish_reason": "budget_exhausted"}
    runner.end("e1", record)
    assert record["chaos"][0]["outcome"] == WENT_ON and record["chaos"][0]["rearmed_s"] > 0


def test_an_estop_is_released_after_its_time_and_the_arm_armed_again(tmp_path):
    runner, clock, endpoints, *_ = _runner(tmp_path, PlannedFault(ESTOP, 3.0, 3.0))
    runner.begin("e1", "k")
    _run(runner, clock, 5.0)
    assert endpoints.calls == ["estop"]
    _run(runner, clock, 2.0)
    assert endpoints.calls == ["estop", "release", "arm"] and endpoints.armed
    record = {"finish_reason": "plan_complete"}
    runner.end("e1", record)
    assert record["chaos"][0]["outcome"] == WENT_ON and record["chaos"][0]["released"] == "e-stop released"


def test_an_estop_still_latched_when_the_episode_ends_is_released_before_the_next(tmp_path):
    runner, clock, endpoints, *_ = _runner(tmp_path, PlannedFault(ESTOP, 3.0, 30.0))
    runner.begin("e1", "k")
    _run(runner, clock, 4.0)
    record = {"finish_reason": "aborted: stall watchdog"}
    runner.end("e1", record)
    assert endpoints.calls == ["estop", "release"]  # arming and homing are the operator's next steps
    assert record["chaos"][0]["outcome"] == ENDED


def test_a_driver_that_never_arms_again_pauses_the_day(tmp_path):
    runner, clock, endpoints, *_ = _runner(tmp_path, PlannedFault(NODE_KILL, 3.0, 0.0, "widowx_driver"),
                                           arms=lambda n: False)
    runner.begin("e1", "k")
    with pytest.raises(OperatorNeeded, match="did not arm again"):
        _run(runner, clock, 3.5 + ARM_GIVE_UP_S + 1.0)
    runner.interrupted("e1", OperatorNeeded("did not arm again"))
    assert read_chaos(tmp_path / "chaos.jsonl")[0]["outcome"] == PAUSED


def test_the_watchdog_aborts_an_episode_in_which_nothing_moves_after_a_fault_and_pauses_if_it_does_not_end(tmp_path):
    runner, clock, _, _, _, aborted, counter = _runner(tmp_path, PlannedFault(SERVER_ERROR, 3.0, 3.0),
                                                       watchdog_s=20.0)
    runner.begin("e1", "k")
    _run(runner, clock, 3.5, counter)  # actions flow until the fault
    _run(runner, clock, 19.0)
    assert aborted == []
    _run(runner, clock, 2.0)
    assert len(aborted) == 1 and "chaos watchdog" in aborted[0] and "server_error" in aborted[0]
    with pytest.raises(OperatorNeeded, match="did not end"):
        _run(runner, clock, 31.0)


# ---------------------------------------------------------------------------------------------------- one graph run
@pytest.mark.ros
@pytest.mark.slow
def test_a_rehearsal_with_a_forced_server_error_ends_with_the_fault_recorded(tmp_path):
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    pytest.importorskip("mujoco", reason="the twin's scene is the built-in MuJoCo tabletop")
    out = tmp_path / "rehearsal"
    # Seed 26 draws one fault for this episode, 4.1 s into it; server_error is the cheap kind to force.
    planned = ChaosSchedule(1.0, 26, (SERVER_ERROR,)).faults_for(episode_key("kitchen_single_1", "", 26 % 24, 26))
    assert [f.kind for f in planned] == [SERVER_ERROR] and planned[0].at_s < 5.0
    command = [sys.executable, "-m", "ladder_ros.cli", "rehearse", "widowx", "--episodes", "1", "--tasks",
               "kitchen_single_1", "--faults", "1", "--fault-kinds", "server_error", "--seed", "26",
               "--episode-timeout", "240", "--out", str(out), "--set", "widowx_driver.max_state_age_s=2.0"]
    done = subprocess.run(command, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (fault,) = read_chaos(out / "chaos.jsonl")
    assert fault["kind"] == SERVER_ERROR and fault["outcome"] in (WENT_ON, ENDED), fault
    assert fault["injected_s"] >= planned[0].at_s and fault["played_by"] == "rehearsal_server", fault
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    assert record["chaos"] == [fault]
    assert fault["reason"] == record["finish_reason"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chaos"] == {"faults": 1, "by_outcome": {fault["outcome"]: 1},
                                "by_kind": {SERVER_ERROR: {fault["outcome"]: 1}}}
    assert "played: server_error" in (out / "logs" / "rehearsal_server.log").read_text()
    assert "chaos: 1 faults" in done.stdout


# ---------------------------------------------------------------------------------------------------- the day
def test_a_fault_the_runner_cannot_undo_pauses_the_day_which_resumes_from_there(tmp_path):
    from ladder_ros.evaluation.day.records import INTERRUPTED, read_events
    from ladder_ros.evaluation.day.runner import PAUSED as DAY_PAUSED
    from tests.test_day import ScriptedGraph, make_day, plan

    p = plan(episodes=1, tasks=[{"task": "kitchen_single_1"}])
    ChaosLog(tmp_path / "chaos.jsonl").add({"kind": ESTOP, "outcome": PAUSED})
    graph = ScriptedGraph(tmp_path / "recordings", faults={2: OperatorNeeded("the driver did not arm again")})
    said = []
    day, records = make_day(tmp_path, p, graph, said=said)
    day.chaos_file = tmp_path / "chaos.jsonl"
    assert day.run() == 1 and len(graph.calls) == 2  # stopped at the second episode, not retried
    records.close()
    events, _ = read_events(tmp_path / "day_records.jsonl")
    (paused,) = [e for e in events if e["event"] == INTERRUPTED]
    assert paused["kind"] == "operator needed" and "did not arm again" in paused["reason"]
    assert any(line.startswith("paused: the operator is needed: the driver did not arm again") for line in said)
    summary = json.loads((tmp_path / "day_summary.json").read_text())
    assert summary["stopped"] == DAY_PAUSED and summary["chaos"]["by_kind"] == {ESTOP: {PAUSED: 1}}
    again, records = make_day(tmp_path, p, ScriptedGraph(tmp_path / "recordings"))  # the operator fixed it
    assert again.run() == 0
    records.close()
