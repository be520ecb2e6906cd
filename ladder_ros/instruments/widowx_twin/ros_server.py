"""The twin's xs_sdk on ROS: the serving end of :mod:`.remote`, over an in-process :class:`~.xs_sdk.SimulatedXsSdk`.

:class:`XsSdkRosServer` puts a :class:`~.xs_sdk.SimulatedXsSdk` (the motors, served one thing at a
time, as xs_sdk serves them) on the topics of :mod:`.xs_wire` under ``/<robot_name>``: joint states
out at xs_sdk's rate, commands in, every service call answered when the simulated xs_sdk answers it
(a hang injected into a service holds the answer back, and everything queued behind it, as a
wedged bus would). An answer waits, at most ``REPLY_MATCH_WAIT_S``, until the reply publisher has
matched as many subscribers as the call subscription has publishers: DDS matches each direction on its
own, so a client whose call arrived may not be matched as a reader of the replies yet, and a reliable,
volatile reply sent before that match is lost for it (the client's half of the rule: :mod:`.remote`).
Faults injected on ``twin/fault`` reach the motors under xs_sdk's motor lock.
It adds publishers and subscriptions to a node it is given (the ``widowx_twin`` node).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import SchemaError, decode, encode
from ladder_ros.instruments.widowx_twin import xs_msgs, xs_wire
from ladder_ros.instruments.widowx_twin.motors import GROUPS
from ladder_ros.instruments.widowx_twin.remote import reliable, sample_to_msg
from ladder_ros.instruments.widowx_twin.xs_sdk import Hang, SimulatedXsSdk

# Project choice: how long an answer waits for its caller's reply subscription to be matched (discovery on one
# machine takes milliseconds; a starved process, seconds); past it the answer goes out anyway, and is logged.
REPLY_MATCH_WAIT_S = 5.0
HELD_REPLIES_PERIOD_S = 0.01  # how often held answers are looked at (only while some are held)


class XsSdkRosServer:
    """Serves ``sdk`` as xs_sdk of ``robot_name`` on ``node`` (see the module docstring)."""

    def __init__(self, node: Node, sdk: SimulatedXsSdk, robot_name: str):
        self.node, self.sdk, self.robot_name = node, sdk, robot_name
        self.calls = 0
        self.faults: list[xs_wire.TwinFault] = []
        self._hangs: dict[str, Hang] = {}
        name = lambda n: xs_wire.topic(robot_name, n)  # noqa: E731
        self._joint_pub = node.create_publisher(JointState, name(xs_wire.JOINT_STATES), reliable(10))
        self._reply_pub = node.create_publisher(String, name(xs_wire.REPLY_TOPIC), reliable(100))
        self._call_sub = node.create_subscription(String, name(xs_wire.CALL_TOPIC), self._on_call, reliable(100))
        self._held: deque[tuple[float, str, String]] = deque()  # (send by, service, reply) in answer order
        self._held_lock = threading.Lock()
        # Runs only while answers are held (a 100 Hz timer that wakes the twin's executor for nothing costs it a few
        # per cent of a core).
        self._held_timer = node.create_timer(HELD_REPLIES_PERIOD_S, self._send_held)
        self._held_timer.cancel()
        for command in xs_wire.COMMAND_TOPICS:
            node.create_subscription(JointState, name(command), lambda m, t=command: self._on_command(t, m),
                                     reliable(50))
        node.create_subscription(String, name(xs_wire.FAULT_TOPIC), self._on_fault, reliable(10))
        sdk.subscribe_joint_states(lambda sample: self._joint_pub.publish(sample_to_msg(sample)))

    def _on_call(self, msg: String) -> None:
        try:
            call = decode(msg.data, xs_wire.XsSdkCall)
            request = call.typed_request()
        except SchemaError as exc:
            self.node.get_logger().error(f"ignoring an xs_sdk call: {exc}")
            return
        self.calls += 1
        future = self.sdk.call(call.service, request)
        future.add_done_callback(lambda done: self._answer(call, done))

    def _answer(self, call: xs_wire.XsSdkCall, done: Any) -> None:
        """Runs on the simulated xs_sdk's thread once the call is served."""
        if done.exception() is not None:  # the simulated xs_sdk answers every valid call; nothing else comes here
            self.node.get_logger().error(f"xs_sdk call {call.service} failed: {done.exception()!r}")
            return
        reply = String(data=encode(xs_wire.XsSdkReply.of(call.call_id, call.service, done.result())))
        with self._held_lock:
            self._held.append((time.monotonic() + REPLY_MATCH_WAIT_S, call.service, reply))
            self._held_timer.reset()
        self._send_held()

    def callers_hear_replies(self) -> bool:
        """Every publisher of calls this server has matched is matched as a subscriber of its replies."""
        return self._reply_pub.get_subscription_count() >= self._call_sub.get_publisher_count()

    def _send_held(self) -> None:
        """Send the held answers, in order, once their callers hear replies (or once they have waited enough)."""
        with self._held_lock:  # held while publishing: the xs_sdk thread and the timer send in answer order
            if not self._held:
                self._held_timer.cancel()
                return
            ready = self.callers_hear_replies()
            now = time.monotonic()
            while self._held and (ready or self._held[0][0] <= now):
                _, service, reply = self._held.popleft()
                if not ready:
                    self.node.get_logger().warning(
                        f"answering xs_sdk call {service} after {REPLY_MATCH_WAIT_S:g} s although a caller is not "
                        "matched as a reader of the replies yet")
                try:
                    self._reply_pub.publish(reply)
                except Exception as exc:  # shutting down: nobody is left to answer
                    self.node.get_logger().warning(f"could not answer xs_sdk call {service}: {exc!r}")
            if not self._held:
                self._held_timer.cancel()

    def _on_command(self, topic: str, msg: JointState) -> None:
        names, values = list(msg.name), list(msg.position)
        stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9
        # When the driver sent it, on the motors' clock: it takes effect then (xs_sdk.SimulatedXsSdk.publish).
        sent_at = time.monotonic() - max(0.0, time.time() - stamp_s) if stamp_s > 0 else None
        if len(names) != len(values) or not names:
            self.node.get_logger().error(f"{topic}: {len(values)} commands for joints {names}: not executed",
                                         throttle_duration_sec=2.0)
            return
        if topic == "commands/joint_single":
            for joint, value in zip(names, values):
                self.sdk.publish(topic, xs_msgs.JointSingleCommand(name=joint, cmd=float(value)), sent_at)
            return
        group = next((g for g, joints in GROUPS.items() if tuple(names) == tuple(joints)), None)
        if group is None:  # xs_driver: "Number of commands ... does not match": not executed
            self.node.get_logger().error(f"{topic}: joints {names} are no group of this arm: not executed",
                                         throttle_duration_sec=2.0)
            return
        self.sdk.publish(topic, xs_msgs.JointGroupCommand(name=group, cmd=[float(v) for v in values]), sent_at)

    def _on_fault(self, msg: String) -> None:
        try:
            fault = decode(msg.data, xs_wire.TwinFault)
            self.inject(fault)
        except (SchemaError, LadderError, KeyError) as exc:
            self.node.get_logger().error(f"ignoring a twin fault: {exc}")

    def inject(self, fault: xs_wire.TwinFault) -> None:
        """Apply one fault to the motors (or to xs_sdk's services), logged at warning level."""
        motors = self.sdk.motors
        with self.sdk.motor_lock:
            if fault.fault == xs_wire.STALL:
                motors.stall(fault.joint)
            elif fault.fault == xs_wire.RELEASE_STALL:
                motors.release_stall(fault.joint)
            elif fault.fault == xs_wire.MOTOR_ERROR:
                if fault.bits:
                    motors.inject_error(fault.joint, fault.bits)
                else:
                    motors.inject_error(fault.joint)
        if fault.fault == xs_wire.HANG:
            self._hangs[fault.service] = self.sdk.hang(fault.service)
        elif fault.fault == xs_wire.RELEASE_HANG:
            hang = self._hangs.pop(fault.service, None)
            if hang is not None:
                hang.release()
        self.faults.append(fault)
        where = fault.joint or fault.service
        self.node.get_logger().warning(f"twin fault injected: {fault.fault} {where}")
