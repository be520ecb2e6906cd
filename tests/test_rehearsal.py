"""The dress rehearsal end to end: the WidowX robot graph on the wall clock against the twin, as `rehearse` runs it.

One graph (the shipped description's ``twin`` mode, every node its own process) serves the module: a
whole episode with the lab's policy config through the rehearsal's openpi server, then a stalled
joint and a motor error injected into the twin's motors, each of which the driver must notice, so the
episode ends with the driver's reason and the arm is recovered before the next. Waits end on events
(a record, a fault in the driver's safety state, a recording closed); their bounds are reached only
when something is broken.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the twin's scene is the built-in MuJoCo tabletop")

from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.evaluation.rehearsal import Rehearsal, plan_rehearsal  # noqa: E402
from tests.rehearsal_checks import check_policy_timing_and_recording  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]
TASK = "kitchen_single_1"
EPISODE_TIMEOUT_S = 120.0  # the task's budget is 100 steps (20 s at 5 Hz)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    out = tmp_path_factory.mktemp("rehearsal")
    # The twin's joint states come from a Python process that shares this machine's CPUs with the graph and
    # the rest of the suite; a loaded CI machine can delay them past the driver's 0.5 s (a vendor_timeout fault,
    # which the driver is right to raise). This module checks the graph end to end and the stall and motor
    # error faults, not the machine's latency: the driver tolerates 2 s here (the rehearsal itself keeps 0.5 s).
    plan = plan_rehearsal("widowx", out, overrides=['rehearsal_server.noise="off"',
                                                    "widowx_driver.max_state_age_s=2.0"])
    session = GraphSession(plan.graph, plan.launches, out / "logs", startup_timeout_s=180.0)
    with session:
        operator = Rehearsal(session, plan.params, plan.namespace)
        operator.prepare()
        yield out, operator


def inject(operator: Rehearsal, fault: str, joint: str) -> None:
    from std_msgs.msg import String

    from ladder_ros.messages import encode
    from ladder_ros.instruments.widowx_twin import xs_wire

    node = operator.observer
    if not hasattr(node, "_test_fault_pub"):
        node._test_fault_pub = node.create_publisher(String, xs_wire.topic("wx250s", xs_wire.FAULT_TOPIC), 10)
    node._test_fault_pub.publish(String(data=encode(xs_wire.TwinFault(fault=fault, joint=joint))))


def test_a_rehearsal_episode_runs_the_robot_graph_end_to_end(rehearsal):
    out, operator = rehearsal
    record = operator.episode(TASK, variant="proprio_verifier", layout=0, seed=0, timeout_s=EPISODE_TIMEOUT_S)
    assert not record["finish_reason"].startswith("aborted"), record["finish_reason"]
    # The twin scored it (the simulator's score), beside the oracle verifier's answers on the wall clock.
    assert record["scored"] and record["simulator"] == "widowx_twin"
    answers = [e for e in record["events"] if e["kind"] == "verification_answered"]
    assert answers and all(e.get("count") is not None for e in answers), answers
    assert record["success"] == (record["subgoals_done"] == 1)
    # The noise-free expert's episode succeeds on the twin as in the lockstep loop: the chunk executor, the
    # motors and the twin's slow fingers do not lose the grasp (a look-ahead on deltas and lifting before the
    # fingers shut once did, in every episode).
    assert record["success"], (record["finish_reason"], [e for e in record["events"] if e["kind"] != "step"][:12])
    # The lab's policy config, through its openpi client and chunk executor.
    check_policy_timing_and_recording(record, out, "bridge_pi0_server", 10, "widowx", (
        "camera/image_raw", "joint_states", "policy/action", "robot/joint_command", "sim/privileged_state"))


def _fault_episode(operator: Rehearsal, fault: str, joint: str, release: bool) -> dict:
    observer = operator.observer
    state = {"injected_at": None, "released": False}

    def during(episode_id: str) -> None:
        started = len(observer.tags.get(episode_id, []))
        if state["injected_at"] is None and started >= 8:  # the arm is following the policy's chunks
            inject(operator, fault, joint)
            state["injected_at"] = time.monotonic()
        if release and observer.fault and not state["released"]:
            inject(operator, "release_stall", joint)  # the obstacle is taken away; the recovery can then hold
            state["released"] = True

    record = operator.episode(TASK, variant="proprio_verifier", layout=1, seed=1, timeout_s=EPISODE_TIMEOUT_S,
                              during=during)
    assert state["injected_at"] is not None, "the episode ended before the fault could be injected"
    return record


def test_a_stalled_joint_is_noticed_and_ends_the_episode_with_the_drivers_reason(rehearsal):
    out, operator = rehearsal
    record = _fault_episode(operator, "stall", "shoulder", release=True)
    assert record["finish_reason"].startswith("aborted: robot fault: stall"), record["finish_reason"]
    assert record["safety"]["counts"]["stall"] >= 1
    assert "recovery" in record and operator.observer.safety.get("armed") == "true"  # recovered, armed again


def test_a_motor_error_is_noticed_and_ends_the_episode_with_the_drivers_reason(rehearsal):
    out, operator = rehearsal
    record = _fault_episode(operator, "motor_error", "wrist_angle", release=False)
    # The motor turns its torque off: whichever the driver sees first, the error register (its health poll, once a
    # second) or the joint no longer following its command (every control period), names the joint.
    reason = record["finish_reason"]
    assert reason.startswith(("aborted: robot fault: motor_error", "aborted: robot fault: stall")), reason
    assert "wrist_angle" in reason and "rebooted" in record["recovery"]
    assert operator.observer.safety.get("armed") == "true"
    assert Path(out / "logs" / "widowx_twin.log").read_text().count("twin fault injected") >= 2
