"""The rehearsal's operator and stopwatch: what a lab's operator does and sees, on one node beside the graph.

:class:`RehearsalObserver` joins the graph as the operator panel does: it arms the driver through
``robot/arm`` (the driver starts disarmed), sends the arm home, recovers a fault through
``robot/recover``, and it listens to what the graph publishes about each episode: the driver's
applied commands (``robot/joint_command``), the policy's action tags, the twin's score, the driver's
safety state, the arm's joint states and franky-sim's report of its own lag (``/diagnostics``), the inputs of
:func:`~ladder_ros.evaluation.rehearsal_timing.episode_timing`. It never calls into a node.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import Executor
from rclpy.node import Node
from ladder_ros_interfaces import msg as interfaces
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from ladder_ros.core.errors import LadderError
from ladder_ros.evaluation.rehearsal_timing import TaggedAction
from ladder_ros.messages import ABORT, ActionTagDoc, EpisodeCommand, EpisodeScoreDoc, SchemaError
from ladder_ros.specs import topics
from ladder_ros.interface_conversions import document_from_msg, document_to_msg
from ladder_ros.runtime.endpoints import message_class, publisher, subscription
from ladder_ros.ros_conversions import joint_state_from_msg, stamp_to_ns

SERVICE_WAIT_S = 60.0  # a service of the graph answers within this long unless something is broken
SIMULATOR_REPORTS = ("franky_sim",)  # hardware ids of a simulated robot's diagnostics kept (the Franka twin's)


class RehearsalObserver(Node):
    """The operator's services and the streams the timing is measured from (see the module docstring)."""

    def __init__(self, *, namespace: str, aperture_joint: str = "gripper_aperture"):
        super().__init__("rehearsal_operator", namespace=namespace)
        self.aperture_joint = aperture_joint
        self.command_stamps_ns: list[int] = []
        self.tags: dict[str, list[TaggedAction]] = {}
        self.scores: dict[str, dict] = {}
        self.safety: dict[str, str] = {}
        self.joints: np.ndarray | None = None
        self.simulator: dict[str, str] = {}
        subscription(self, JointState, topics.JOINT_COMMAND, self._on_command)
        subscription(self, message_class(topics.ACTION_TAG), topics.ACTION_TAG, self._on_tag)
        subscription(self, message_class(topics.SCORE), topics.SCORE, self._on_score)
        subscription(self, DiagnosticStatus, topics.SAFETY_STATE, self._on_safety)
        subscription(self, JointState, topics.JOINT_STATES, self._on_joints)
        subscription(self, DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics)
        self._command_pub = publisher(self, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND)
        self._arm = self.create_client(SetBool, topics.ARM_SERVICE)
        self._home = self.create_client(Trigger, topics.HOME_SERVICE)
        self._recover = self.create_client(Trigger, topics.RECOVER_SERVICE)
        self._estop = self.create_client(Trigger, topics.ESTOP_SERVICE)
        self._release = self.create_client(Trigger, topics.ESTOP_RELEASE_SERVICE)

    # ------------------------------------------------------------------ streams
    def _on_command(self, msg: JointState) -> None:
        self.command_stamps_ns.append(stamp_to_ns(msg.header.stamp))

    def _on_tag(self, msg: interfaces.ActionTag) -> None:
        try:
            doc = document_from_msg(msg, ActionTagDoc)
        except SchemaError:
            return
        self.tags.setdefault(doc.episode_id, []).append(TaggedAction(
            doc.stamp_ns, doc.observation_stamp_ns, doc.chunk_id, doc.index, doc.inference_ms, doc.held,
            doc.subgoal))

    def _on_score(self, msg: interfaces.EpisodeScore) -> None:
        try:
            doc = document_from_msg(msg, EpisodeScoreDoc)
        except SchemaError:
            return
        self.scores[doc.episode_id] = doc.score

    def _on_safety(self, msg: DiagnosticStatus) -> None:
        self.safety = {kv.key: kv.value for kv in msg.values}

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.hardware_id in SIMULATOR_REPORTS:
                self.simulator = {"message": str(status.message), **{kv.key: kv.value for kv in status.values}}

    def _on_joints(self, msg: JointState) -> None:
        try:
            self.joints = joint_state_from_msg(msg, self.aperture_joint)[1]
        except LadderError:
            pass

    def commands_between(self, start_ns: int, end_ns: int) -> list[int]:
        return [s for s in self.command_stamps_ns if start_ns <= s <= end_ns]

    @property
    def fault(self) -> str:
        """The fault the driver holds the arm for ('' when none)."""
        return self.safety.get("recovery_required", "")

    # ------------------------------------------------------------------ the operator's services
    def _call(self, executor: Executor, client, request, spin_until: Callable) -> object:
        spin_until(executor, client.service_is_ready, SERVICE_WAIT_S, f"the service {client.srv_name}")
        future = client.call_async(request)
        spin_until(executor, future.done, SERVICE_WAIT_S, f"a reply from {client.srv_name}")
        return future.result()

    def arm(self, executor: Executor, spin_until: Callable, timeout_s: float = 120.0) -> str:
        """Arm the driver as an operator does; it refuses while it checks the arm (the WidowX's profile): ask again."""
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._call(executor, self._arm, SetBool.Request(data=True), spin_until)
            if reply.success or time.monotonic() > deadline:
                break
            wake = time.monotonic() + 0.5
            spin_until(executor, lambda: time.monotonic() > wake, 5.0, "a moment before asking again")
        if not reply.success:
            raise LadderError(f"the driver refused to arm: {reply.message}")
        return reply.message

    def home(self, executor: Executor, spin_until: Callable, home_joints: np.ndarray, tolerance: float = 0.01,
             timeout_s: float = 120.0) -> None:
        reply = self._call(executor, self._home, Trigger.Request(), spin_until)
        if not reply.success:
            raise LadderError(f"the driver did not go home: {reply.message}")

        def at_home() -> bool:
            return self.joints is not None and bool(np.allclose(self.joints, home_joints, atol=tolerance))

        spin_until(executor, at_home, timeout_s, "the arm at home")

    def recover(self, executor: Executor, spin_until: Callable) -> str:
        reply = self._call(executor, self._recover, Trigger.Request(), spin_until)
        if not reply.success:
            raise LadderError(f"the driver's recovery failed: {reply.message}")
        spin_until(executor, lambda: not self.fault, 60.0, "the fault to clear")
        return self.safety.get("detail") or reply.message  # the recovery's outcome, as the safety state says it

    def estop(self, executor: Executor, spin_until: Callable, release: bool = False) -> str:
        """Press the driver's e-stop (``release``: release a latched one; the driver then stays disarmed)."""
        reply = self._call(executor, self._release if release else self._estop, Trigger.Request(), spin_until)
        if not reply.success:
            raise LadderError(f"the driver refused {'the e-stop release' if release else 'the e-stop'}: "
                              f"{reply.message}")
        return reply.message

    def abort(self, episode_id: str, reason: str) -> None:
        self._command_pub.publish(document_to_msg(EpisodeCommand(command=ABORT, episode_id=episode_id, reason=reason)))
