"""A probe that plays the policy and the operator against a robot driver node, in the same executor.

It is named ``policy`` (the driver's ``action_source``), publishes actions stamped now, records what
the driver publishes (joint states, end-effector poses, joint commands, interventions, safety states)
and calls the driver's services. Waits are bounded by what they wait for (``spin_until``).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ladder_ros.messages import SafetyInterventionDoc
from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, qos
from ladder_ros.interface_conversions import document_from_msg
from ladder_ros.ros_conversions import (
    diagnostic_values,
    joint_state_from_msg,
    ns_to_stamp,
    pose_matrix_from_msg,
)


class DriverProbe(Node):
    def __init__(self, namespace: str, name: str = "policy"):
        super().__init__(name, namespace=namespace)
        self.actions = self.create_publisher(JointTrajectory, topics.ACTION.name, qos(topics.STREAM))
        self.status_pub = self.create_publisher(message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS.name,
                                                qos(topics.LATCHED))
        self.joint_states: list[tuple[float, tuple, np.ndarray, float]] = []
        self.poses: list[tuple[float, np.ndarray]] = []
        self.commands: list[JointState] = []
        self.interventions: list[SafetyInterventionDoc] = []
        self.states: list[DiagnosticStatus] = []
        self.diagnostics: list[dict] = []
        self.create_subscription(JointState, topics.JOINT_STATES.name, self._on_joints, qos(topics.STREAM))
        self.create_subscription(PoseStamped, topics.EE_POSE.name,
                                 lambda m: self.poses.append((time.monotonic(), pose_matrix_from_msg(m))),
                                 qos(topics.STREAM))
        self.create_subscription(JointState, topics.JOINT_COMMAND.name, self.commands.append, qos(topics.STREAM))
        self.create_subscription(message_class(topics.SAFETY), topics.SAFETY.name,
                                 lambda m: self.interventions.append(document_from_msg(m, SafetyInterventionDoc)),
                                 qos(topics.EVENTS))
        self.create_subscription(DiagnosticStatus, topics.SAFETY_STATE.name, self.states.append,
                                 qos(topics.LATCHED))
        self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS.name,
                                 lambda m: self.diagnostics.extend(diagnostic_values(s) for s in m.status),
                                 qos(topics.STREAM))
        self.arm_client = self.create_client(SetBool, topics.ARM_SERVICE)
        self.triggers = {name: self.create_client(Trigger, name) for name in (
            topics.ESTOP_SERVICE, topics.ESTOP_RELEASE_SERVICE, topics.HOME_SERVICE, topics.RECOVER_SERVICE)}

    def _on_joints(self, msg: JointState) -> None:
        names, positions, aperture = joint_state_from_msg(msg, "gripper_aperture")
        self.joint_states.append((time.monotonic(), names, positions, aperture))

    # ------------------------------------------------------------------ acting
    def send(self, names: Sequence[str], values: Sequence[float], age_s: float = 0.0) -> None:
        msg = JointTrajectory()
        msg.header.stamp = ns_to_stamp(self.get_clock().now().nanoseconds - int(age_s * 1e9))
        msg.joint_names = list(names)
        point = JointTrajectoryPoint()
        point.positions = [float(v) for v in values]
        msg.points = [point]
        self.actions.publish(msg)

    # ------------------------------------------------------------------ waiting
    def spin_until(self, executor, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
            executor.spin_once(timeout_sec=0.02)

    def spin_for(self, executor, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.01)

    def call(self, executor, client, request, timeout_s: float = 10.0):
        self.spin_until(executor, lambda: client.service_is_ready(), timeout_s, f"service {client.srv_name}")
        future = client.call_async(request)
        self.spin_until(executor, future.done, timeout_s, f"a reply from {client.srv_name}")
        return future.result()

    def arm(self, executor, on: bool = True):
        return self.call(executor, self.arm_client, SetBool.Request(data=on))

    def trigger(self, executor, name: str):
        return self.call(executor, self.triggers[name], Trigger.Request())

    # ------------------------------------------------------------------ reading
    def state(self) -> dict[str, str]:
        return diagnostic_values(self.states[-1]) if self.states else {}

    def kinds(self) -> list[str]:
        return [doc.kind for doc in self.interventions]

    def latest_joints(self) -> np.ndarray:
        return self.joint_states[-1][2]

    def latest_aperture(self) -> float:
        return self.joint_states[-1][3]
