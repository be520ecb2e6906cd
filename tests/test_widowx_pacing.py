"""The WidowX driver sends each command at its moment on its control grid, from the pacer's thread.

The rig, helpers and twin are test_widowx_driver.py's. A wrapper around the API's
``set_joint_positions`` records the moment (system time, the node clock's) of every vendor call.
The checks are orderings and lower bounds, never how fast something was: a paced command can only
reach the API at or after its moment (the first of a grid: its stamp plus the delay; every one: never
before its stamp). The period it achieves is measured in the dress rehearsal
(benchmarks/bench_rehearsal.py); the grid's arithmetic in test_command_pacing.py.
"""

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from ladder_ros.core.safety import ACTION_AXES  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.ros_conversions import stamp_to_ns  # noqa: E402
from tests import test_widowx_driver as widowx  # noqa: E402

pytestmark = pytest.mark.ros
rig = widowx.rig  # the fixture
action, home = widowx.action, widowx.home


def record_vendor_calls(driver) -> list[tuple[int, list[float]]]:
    """(system time ns, joints) of every ``set_joint_positions`` call from now on."""
    api_arm = driver.arm.bot.arm
    original = api_arm.set_joint_positions
    calls: list[tuple[int, list[float]]] = []

    def recorded(positions, *args, **kwargs):
        calls.append((time.time_ns(), list(positions)))
        return original(positions, *args, **kwargs)
    api_arm.set_joint_positions = recorded
    return calls


def record_action_stamps(probe) -> list[int]:
    """The stamp (ns) of every action the probe publishes from now on."""
    stamps: list[int] = []
    publish = probe.actions.publish

    def recorded(msg):
        stamps.append(stamp_to_ns(msg.header.stamp))
        publish(msg)
    probe.actions.publish = recorded
    return stamps


def test_a_command_reaches_the_api_at_its_moment_not_on_arrival_and_its_joint_command_carries_that_moment(rig):
    executor, build = rig
    driver, probe, sdk = build()
    delay_ns = driver.paced.grid.delay_ns
    assert delay_ns == pytest.approx(0.1 * driver.period * 1e9)
    stamps = record_action_stamps(probe)
    # Dry run: the command is computed on arrival and recorded at its moment, as it would be sent.
    probe.send(ACTION_AXES, action(dz=0.01), age_s=-0.04)  # stamped 40 ms ahead: it arrives before its stamp
    probe.spin_until(executor, lambda: len(probe.commands) >= 1, 10, "the dry-run command")
    assert stamp_to_ns(probe.commands[-1].header.stamp) >= stamps[-1] + delay_ns
    probe.spin_for(executor, 0.3)
    home(probe, executor, driver)
    calls = record_vendor_calls(driver)
    commands_before = len(probe.commands)
    for _ in range(3):
        probe.send(ACTION_AXES, action(dx=0.01), age_s=-0.04)
        probe.spin_for(executor, 0.2)
    probe.spin_until(executor, lambda: len(probe.commands) >= commands_before + 3 and len(calls) >= 3, 10,
                     "three commands sent and published")
    sent = stamps[-3:]
    published = [stamp_to_ns(c.header.stamp) for c in probe.commands[commands_before:commands_before + 3]]
    # the first starts the grid (homing reset it): its stamp plus the delay; the command says when it was sent
    assert sent[0] + delay_ns <= published[0] <= calls[0][0]
    for stamp, command_stamp, (called_ns, joints) in zip(sent, published, calls):
        assert stamp <= command_stamp <= called_ns  # never on arrival, 40 ms before the stamp
    assert np.allclose(calls[2][1], list(probe.commands[commands_before + 2].position)[:6])
    diagnostics = {}
    probe.spin_until(executor, lambda: diagnostics.update(next(
        (d for d in reversed(probe.diagnostics) if int(d.get("paced_commands") or 0) >= 3), {})) or diagnostics, 5,
                     "the pacer's diagnostics")
    assert float(diagnostics["apply_delay_ms"]) == pytest.approx(delay_ns / 1e6)


def test_a_stop_drops_a_command_computed_before_it_that_was_not_due_yet(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    driver.paced.grid.delay_ns = int(60e9)  # this command's moment never comes within the test
    calls = record_vendor_calls(driver)
    commands_before = len(probe.commands)
    probe.send(ACTION_AXES, action(dx=0.02))
    probe.spin_until(executor, lambda: driver.paced.pacer.pending == 1, 10,
                     "the command computed, waiting for its moment")
    assert calls == []
    reply = probe.trigger(executor, topics.ESTOP_SERVICE)
    assert reply.success and driver.paced.pacer.pending == 0
    probe.spin_until(executor, lambda: probe.state().get("arm_at_rest") == "true", 10, "the arm at rest")
    # the only vendor call was the hold, at the measured joints; the dropped command was never published
    assert len(calls) == 1 and "held at the measured joints" in probe.state()["stop"]
    assert len(probe.commands) == commands_before


def test_actions_stamped_closer_than_three_quarters_of_a_period_reach_the_arm_at_least_that_far_apart(rig):
    executor, build = rig
    driver, probe, sdk = build()
    home(probe, executor, driver)
    calls = record_vendor_calls(driver)
    probe.send(ACTION_AXES, action(dx=0.01))
    probe.spin_for(executor, 0.13)
    probe.send(ACTION_AXES, action(dx=0.01))  # stamped 130 ms after the first: a new step, but too soon
    probe.spin_until(executor, lambda: len(calls) >= 2, 10, "both commands sent")
    # spaced from the moment the first reached the arm (its stamp plus the delay), not from its arrival
    assert calls[1][0] - calls[0][0] >= 0.75 * driver.period * 1e9
