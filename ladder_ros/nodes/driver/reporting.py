"""What a robot driver publishes about itself: the arm's state, its commands, interventions, safety state, diagnostics.

The driver node decides; :class:`DriverReporter` only tells, on the node's publishers: joint states and the
end-effector pose of each reading, the joint commands (sent or, in dry run, computed), one
``safety/interventions`` document per intervention with the episode's counts, the latched
``robot/safety_state`` (republished when a value changes), and ``/diagnostics`` once a second.

Logging of interventions: the first intervention of each kind in an episode is logged at once, at
error level, whatever came before it (a flood of ``stale`` actions never hides a ``robot_error``);
later ones of the same kind at most once a second, each line saying how many were not logged.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState

from ladder_ros.core.errors import LadderError
from ladder_ros.core.safety_supervisor import SafetySupervisor
from ladder_ros.messages import SafetyInterventionDoc
from ladder_ros.specs import topics
from ladder_ros.runtime.endpoints import message_class, publisher
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import diagnostic_status, diagnostics_to_msg, joint_state_to_msg, pose_matrix_to_msg

LEVELS = {0: "ok", 1: "warn", 2: "error"}  # the supervisor's level as a diagnostic level
LOG_EVERY_S = 1.0  # later interventions of one kind: at most one log line per second


class InterventionLog:
    """First occurrence of each kind logged at once; later ones at most every ``every_s`` with a count (pure)."""

    def __init__(self, every_s: float = LOG_EVERY_S):
        self.every_s = every_s
        self._seen: dict[str, tuple[float, int]] = {}  # kind -> (last logged at, not logged since)

    def reset(self) -> None:
        self._seen.clear()

    def line(self, kind: str, reason: str, now: float) -> str | None:
        """The line to log for this intervention now, or None (counted as not logged)."""
        if kind not in self._seen:
            self._seen[kind] = (now, 0)
            return f"safety: {kind} (first this episode): {reason}"
        last, quiet = self._seen[kind]
        if now - last < self.every_s:
            self._seen[kind] = (last, quiet + 1)
            return None
        self._seen[kind] = (now, 0)
        return f"safety: {kind}: {reason}" + (f" ({quiet} more {kind} not logged)" if quiet else "")


class DriverReporter:
    """The driver's publishers and how it logs (module docstring)."""

    def __init__(self, node: Node, aperture_joint: str, base_frame: str, clock: Callable[[], float]):
        self.node = node
        self.aperture_joint = aperture_joint
        self.base_frame = base_frame
        self.clock = clock
        self.log = InterventionLog()
        self._state_values: dict[str, str] = {}
        self._joints = publisher(node, JointState, topics.JOINT_STATES)
        self._pose = publisher(node, PoseStamped, topics.EE_POSE)
        self._command = publisher(node, JointState, topics.JOINT_COMMAND)
        self._safety = publisher(node, message_class(topics.SAFETY), topics.SAFETY)
        self._state = publisher(node, DiagnosticStatus, topics.SAFETY_STATE)
        self._diagnostics = publisher(node, DiagnosticArray, topics.DIAGNOSTICS)

    def now_ns(self) -> int:
        return self.node.get_clock().now().nanoseconds

    def arm_state(self, names: Sequence[str], joints: np.ndarray, aperture: float, pose: np.ndarray,
                  velocities: np.ndarray | None) -> None:
        stamp = self.now_ns()
        try:
            msg = joint_state_to_msg(names, joints, aperture, stamp, self.aperture_joint)
            if velocities is not None:
                msg.velocity = [*map(float, velocities), 0.0]
            self._joints.publish(msg)
            self._pose.publish(pose_matrix_to_msg(pose, stamp, self.base_frame))
        except LadderError as exc:
            self.node.get_logger().error(f"not publishing the arm's state: {exc}", throttle_duration_sec=1.0)

    def command(self, names: Sequence[str], joints: np.ndarray, aperture: float,
                velocities: np.ndarray | None = None, stamp_ns: int | None = None) -> None:
        stamp = self.now_ns() if stamp_ns is None else stamp_ns
        msg = joint_state_to_msg(names, joints, aperture, stamp, self.aperture_joint)
        if velocities is not None:
            msg.velocity = [*map(float, velocities), 0.0]
        self._command.publish(msg)

    def intervention(self, kind: str, reason: str, counts: dict[str, int], episode_id: str, step: int, *,
                     axis: str | None = None, value: float | None = None, limit: float | None = None) -> None:
        line = self.log.line(kind, reason, self.clock())
        if line is not None:
            self.node.get_logger().error(line)
        self._safety.publish(document_to_msg(SafetyInterventionDoc(
            episode_id=episode_id, step=step, source=self.node.get_fully_qualified_name(), kind=kind, reason=reason,
            axis=axis, value=None if value is None else float(value), limit=None if limit is None else float(limit),
            counts=dict(counts))))

    def safety_state(self, supervisor: SafetySupervisor, hardware_id: str, force: bool = False) -> None:
        values = supervisor.values()
        if not force and values == self._state_values:
            return
        self._state_values = values
        level = supervisor.level
        if supervisor.estopped:
            message = "E-STOP latched"
        elif supervisor.recovery_required is not None:
            message = "FAULT: recovery required"
        else:
            message = "ARMED" if supervisor.armed else "DRY RUN (disarmed)"
        self._state.publish(diagnostic_status(f"{self.node.get_fully_qualified_name()}: safety", hardware_id,
                                              LEVELS[level], message, values))

    def diagnostics(self, supervisor: SafetySupervisor, hardware_id: str, values: dict[str, Any]) -> None:
        if supervisor.estopped:
            problem = "e-stop latched"
        elif supervisor.recovery_required is not None:
            problem = f"fault: {supervisor.recovery_required}"
        else:
            problem = "" if supervisor.armed else "dry run"
        status_name = f"{self.node.get_fully_qualified_name()}: driver"
        self._diagnostics.publish(diagnostics_to_msg(status_name, hardware_id, LEVELS[supervisor.level],
                                                     problem or "armed", values, self.now_ns()))
