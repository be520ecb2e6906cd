"""The gripper trigger: the normalised aperture in, the step's attempt ends and releases out."""

from __future__ import annotations

import math
import time
from typing import Sequence

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState

from ladder_ros.core.errors import LadderError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.triggers import GripperMonitor, normalised_aperture
from ladder_ros.messages import LOCKSTEP, EpisodeStatus, GripperEventsDoc
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import GRIPPER_TRIGGER
from ladder_ros.runtime.endpoints import message_class, publisher, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.runtime.step_sync import StepAligner
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import joint_state_from_msg, stamp_to_ns

JOINTS = "joint_states"
POSE = "ee_pose"


class GripperTriggerNode(Node):
    """Runs the preset's :class:`~ladder_ros.core.triggers.GripperMonitor` on the joint-state stream.

    Once per control step it publishes the step's :class:`GripperEvents`: the proprioceptive
    trigger's attempt end (with cooldown, and on Franka the lift and the release timeout), the
    verifier's release detector (the same rule without cooldown) and whether the gripper is open
    (paper Appendix B). The orchestrator consumes these; it never reads the aperture itself.

    Lockstep: step ``t`` is the joint state stamped ``origin + t / rate`` (with the end-effector
    pose of the same stamp when the preset needs the lift). Wall clock: a timer at the control rate
    samples the newest joint state and skips a step when it is older than ``max_state_age_s``.

    Topics: subscribes ``joint_states`` (sensor_msgs/JointState with ``gripper_aperture`` in [0, 1]),
    ``ee_pose`` (geometry_msgs/PoseStamped, m; Franka presets only), ``episode/status``; publishes
    ``gripper/events`` (ladder_ros_interfaces/GripperEvents, reliable).
    Parameters: preset, clock_mode, aperture_joint, max_state_age_s (s).
    """

    def __init__(self, *, node_name: str = "gripper_trigger", **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, GRIPPER_TRIGGER)
        self.preset = get_preset(self.params["preset"])
        self.lockstep = self.params["clock_mode"] == LOCKSTEP
        self.needs_height = self.preset.trigger.min_lift_m is not None
        self.aligner = StepAligner({JOINTS, POSE} if self.needs_height else {JOINTS})
        self.monitor: GripperMonitor | None = None
        self.episode: EpisodeStatus | None = None
        self._events_pub = publisher(self, message_class(topics.GRIPPER_EVENTS), topics.GRIPPER_EVENTS)
        subscription(self, JointState, topics.JOINT_STATES, self._on_joint_state)
        if self.needs_height:
            subscription(self, PoseStamped, topics.EE_POSE, self._on_pose)
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end,
                                        lost_on_restart="the gripper monitor's state (closed steps, cooldown)")
        self._latest: dict[str, tuple[float, object]] = {}
        self._wall_step = 0
        if not self.lockstep:
            self.create_timer(1.0 / self.preset.control_rate_hz, self._on_control_tick)

    def _on_episode_start(self, status: EpisodeStatus) -> None:
        self.episode = status
        self.monitor = GripperMonitor.for_preset(self.preset)
        self._wall_step = 0
        if self.lockstep:
            self.aligner.start(status.origin_ns, status.rate_hz, join=self.episodes.joined_late)
            self._process_ready()

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        if self.episode is not None and status.episode_id == self.episode.episode_id:
            self.episode = None
            self.monitor = None
            self.aligner.stop()

    def _on_joint_state(self, msg: JointState) -> None:
        # Checked at the door: a joint state without a usable aperture must not use up its step in
        # the aligner (the valid one of the same step would then be dropped as a repeat).
        try:
            _, _, aperture = joint_state_from_msg(msg, self.params["aperture_joint"])
            normalised_aperture(aperture)
        except LadderError as exc:
            self.get_logger().error(f"ignoring a joint state stamped {stamp_to_ns(msg.header.stamp)} ns: {exc}",
                                    throttle_duration_sec=1.0)
            return
        if self.lockstep:
            self.aligner.add(stamp_to_ns(msg.header.stamp), JOINTS, msg)
            self._process_ready()
        else:
            self._latest[JOINTS] = (time.monotonic(), msg)

    def _on_pose(self, msg: PoseStamped) -> None:
        if not math.isfinite(msg.pose.position.z):
            self.get_logger().error(f"ignoring a pose stamped {stamp_to_ns(msg.header.stamp)} ns: height "
                                    f"{msg.pose.position.z}", throttle_duration_sec=1.0)
            return
        if self.lockstep:
            self.aligner.add(stamp_to_ns(msg.header.stamp), POSE, msg)
            self._process_ready()
        else:
            self._latest[POSE] = (time.monotonic(), msg)

    def _process_ready(self) -> None:
        for step, inputs in self.aligner.pop_ready():
            self._emit(step, inputs[JOINTS], inputs.get(POSE), stamp_to_ns(inputs[JOINTS].header.stamp))

    def _on_control_tick(self) -> None:
        """Wall clock: one step per control period, on the newest joint state if it is fresh."""
        if self.episode is None or self.monitor is None:
            return
        max_age = self.params["max_state_age_s"]
        now = time.monotonic()
        joints = self._latest.get(JOINTS)
        pose = self._latest.get(POSE)
        step = self._wall_step
        self._wall_step += 1
        stale_pose = self.needs_height and (pose is None or now - pose[0] > max_age)
        if joints is None or now - joints[0] > max_age or stale_pose:
            self.get_logger().warning(f"step {step}: no joint state newer than {max_age} s; step skipped",
                                      throttle_duration_sec=2.0)
            return
        self._emit(step, joints[1], pose[1] if pose is not None else None, self.get_clock().now().nanoseconds)

    def _emit(self, step: int, joints: JointState, pose: PoseStamped | None, stamp_ns: int) -> None:
        if self.episode is None or self.monitor is None:
            return
        try:
            _, _, aperture = joint_state_from_msg(joints, self.params["aperture_joint"])
            ee_z = float(pose.pose.position.z) if pose is not None else None
            events = self.monitor.update(step, aperture, ee_z)
        except LadderError as exc:
            # Hold still: without this step's events the orchestrator decides nothing and, in
            # lockstep, the simulator does not step.
            self.get_logger().error(f"step {step}: bad gripper input, no events: {exc}")
            return
        self._events_pub.publish(document_to_msg(GripperEventsDoc.of(self.episode.episode_id, stamp_ns, events)))


def main(args: Sequence[str] | None = None) -> int:
    return run_node("gripper_trigger", GripperTriggerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
