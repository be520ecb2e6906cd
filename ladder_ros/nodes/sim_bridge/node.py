"""The simulator bridge: a simulator backend in place of the camera and the robot driver, in lockstep."""

from __future__ import annotations

import time
from typing import Any, Sequence

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from trajectory_msgs.msg import JointTrajectory
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.observation import Observation
from ladder_ros.core.presets import get_preset
from ladder_ros.core.safety import (
    ACTION_AXES,
    DUPLICATE,
    FOREIGN_PUBLISHER,
    MALFORMED,
    ActionFilter,
    SafetyResult,
    StepActionGate,
)
from ladder_ros.core.suite import TaskSuite, load_suite
from ladder_ros.core.task import Task
from ladder_ros.messages import (
    LOCKSTEP,
    DecisionDoc,
    EpisodeScoreDoc,
    EpisodeStatus,
    PrivilegedStateDoc,
    SafetyInterventionDoc,
)
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import SIM_BRIDGE
from ladder_ros.runtime.endpoints import ActionSource, message_class, publisher, received_document, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.nodes.sim_bridge.scoring import privileged_score
from ladder_ros.paths import resolve_share_file
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import (
    camera_info_to_msg,
    depth_to_msg,
    image_to_msg,
    joint_state_to_msg,
    ns_to_stamp,
    pose_to_msg,
    stamp_to_ns,
)
from ladder_ros.sim.base import SimulatorBackend
from ladder_ros.sim.registry import make_simulator


def simulator_options(params: dict[str, Any]) -> dict[str, Any]:
    """The backend options the bridge's parameters give (the parity check builds its simulator the same way)."""
    depth = {"render_depth": True} if params.get("publish_depth") else {}
    if params["simulator"] == "mujoco_tabletop":
        return {"render": params["render"], "image_size": params["image_size"], **depth}
    return {"render": params["render"], **depth} if params["simulator"] == "maniskill_bridge" else {}


class SimBridgeNode(Node):
    """Runs a simulator backend in lockstep with the graph, replacing the camera and the robot driver.

    Per step ``t`` it publishes ``/clock`` (the step's simulated time), the observation (image,
    joint state with the gripper aperture, end-effector pose) and the privileged state (goal tracker
    predicates, object poses: what the privileged verifier, the oracle verifier, the scripted expert
    and scoring read), all stamped ``origin + t / rate``. It steps the simulator only when both the
    orchestrator's decision of step ``t`` and an action stamped ``t`` are in, so simulated time
    excludes computation (paper Section 3). When the decision says the episode is over it scores the
    episode from its goal tracker and publishes the score. An episode whose status continues an earlier one's
    scene (``start``: ``after_reset`` or ``after_task``, a reset episode among them) starts from the scene as
    the last episode left it (``reset(..., keep_scene=True)``): nothing is teleported; a simulator that builds
    every episode from its layout cannot, and the episode is ended at once with the reason.

    Every action passes the safety filter the robot drivers use (:mod:`ladder_ros.core.safety`,
    bounds from the preset): one action per step, only while the configured policy
    (``action_source``) is the only publisher of ``policy/action``, within the preset's bounds;
    anything else is refused, the simulator holds still for that step, the intervention is published
    on ``safety/interventions`` and counted in the episode's score. A bridge that comes up while an
    episode is already stepping cannot rebuild the simulator's state: it asks the orchestrator to
    end that episode at once.

    Topics (relative to the graph namespace):
      publishes ``/clock`` (rosgraph_msgs/Clock), ``camera/image_raw`` (sensor_msgs/Image, sensor
      data QoS), ``camera/camera_info`` (sensor_msgs/CameraInfo: the simulator camera's own
      intrinsics, with every image), ``joint_states`` (sensor_msgs/JointState: arm joints in rad/m
      plus ``gripper_aperture`` in [0, 1]), ``ee_pose`` (geometry_msgs/PoseStamped: position (m) and
      true orientation in the base frame), ``sim/privileged_state``, ``sim/episode_score``,
      ``safety/interventions`` (ladder_ros_interfaces/SafetyIntervention) and ``episode/command``
      (only to end an episode it cannot serve), and with ``publish_depth`` the simulator's exact depth on
      ``camera/aligned_depth_to_color/image_raw`` (32FC1, m), where a camera's measured depth goes on
      a robot, so estimated depth can be scored against the truth.
      subscribes ``policy/action`` (trajectory_msgs/JointTrajectory, the 7-D action),
      ``orchestrator/decision``, ``episode/status``.
    Parameters: see ``SIM_BRIDGE`` in :mod:`ladder_ros.specs.parameters` (simulator, suite, render,
    image_size (px), base_frame, camera_frame, aperture_joint, resend_after_s (s), action_source,
    publish_depth,
    preset, clock_mode).
    """

    def __init__(self, *, simulator: SimulatorBackend | None = None, suite: TaskSuite | None = None,
                 node_name: str = "sim_bridge", **node_options):
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, SIM_BRIDGE)
        if self.params["clock_mode"] != LOCKSTEP:
            raise ConfigError(f"parameter {self.get_name()}.clock_mode: the sim bridge runs in lockstep only, "
                              f"got {self.params['clock_mode']!r}")
        self.preset = get_preset(self.params["preset"])
        self.suite = suite if suite is not None else load_suite(resolve_share_file(self.params["suite"]))
        self._owns_simulator = simulator is None
        self.simulator = simulator if simulator is not None else make_simulator(
            self.params["simulator"], self.suite, **simulator_options(self.params))
        rate = float(self.simulator.control_rate_hz)
        if abs(rate - self.preset.control_rate_hz) > 1e-9:
            raise ConfigError(f"simulator {self.simulator.name} runs at {rate} Hz but preset "
                              f"{self.preset.name} expects {self.preset.control_rate_hz} Hz")
        if self.preset.action_limits is None:
            raise ConfigError(f"preset {self.preset.name} has no action limits; the sim bridge applies no action "
                              "without them")
        self.safety = ActionFilter(self.preset.action_limits)
        self.gate = StepActionGate()
        self._clock_pub = publisher(self, Clock, topics.CLOCK)
        self._image_pub = publisher(self, Image, topics.IMAGE)
        self._depth_pub = publisher(self, Image, topics.SENSOR_DEPTH) if self.params["publish_depth"] else None
        self._camera_info_pub = publisher(self, CameraInfo, topics.CAMERA_INFO)
        self._intrinsics = None  # the simulator camera's, read at each episode's reset
        self._joint_pub = publisher(self, JointState, topics.JOINT_STATES)
        self._pose_pub = publisher(self, PoseStamped, topics.EE_POSE)
        self._privileged_pub = publisher(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED)
        self._score_pub = publisher(self, message_class(topics.SCORE), topics.SCORE)
        self._safety_pub = publisher(self, message_class(topics.SAFETY), topics.SAFETY)
        subscription(self, JointTrajectory, topics.ACTION, self._on_action)
        subscription(self, message_class(topics.DECISION), topics.DECISION, self._on_decision)
        self.action_source = ActionSource(self, self.params["action_source"])
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end,
                                        lost_on_restart="the simulator's state")
        self.create_timer(min(0.25, self.params["resend_after_s"] / 2), self._resend_if_stalled)
        self.episode: EpisodeStatus | None = None
        self.task: Task | None = None
        self.tracker: GoalTracker | None = None
        self.observation: Observation | None = None
        self._decision: DecisionDoc | None = None
        self._published_at = 0.0
        self._done = True
        self.steps_taken = 0
        # Where a lockstep step's time goes (benchmarks): simulating, publishing, then waiting from the
        # observation's publication until the step's decision and until its action arrive.
        self.timing = {"sim_s": 0.0, "publish_s": 0.0, "until_decision_s": 0.0, "until_action_s": 0.0}

    # ------------------------------------------------------------------ episode
    def _on_episode_start(self, status: EpisodeStatus) -> None:
        try:
            task = Task.from_dict(status.task or {})
            started = time.perf_counter()
            if status.keeps_scene:  # the scene an earlier episode left, as it is: nothing is teleported
                if not getattr(self.simulator, "keeps_scene", False):
                    raise ConfigError(f"simulator {self.simulator.name} builds every episode from its layout; it "
                                      f"cannot continue the scene of episode {status.start_after}")
                observation = self.simulator.reset(task, status.layout, status.seed, keep_scene=True)
            else:
                observation = self.simulator.reset(task, status.layout, status.seed)
            self.timing["sim_s"] += time.perf_counter() - started
            self._intrinsics = self.simulator.camera_intrinsics() if observation.image is not None else None
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            self._done = True
            self.episodes.request_abort(status.episode_id, f"sim_bridge cannot reset the simulator: {exc}")
            return
        self.episode, self.task, self.tracker = status, task, GoalTracker(task)
        self._done = False
        self._decision = None
        self.timing = dict.fromkeys(self.timing, 0.0)
        self.steps_taken = 0
        self.safety.reset()
        self.gate.reset()
        self._publish(observation)
        self.get_logger().info(f"episode {status.episode_id}: {task.task_id} "
                               + (f"on the scene {status.start_after} left" if status.keeps_scene
                                  else f"layout {status.layout}") + f" seed {status.seed} ({status.variant})")

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        if self.episode is not None and status.episode_id == self.episode.episode_id:
            self._done = True

    # ------------------------------------------------------------------ lockstep
    def _on_action(self, msg: JointTrajectory) -> None:
        if self._done or self.episode is None or self.observation is None:
            return
        step = self.episode.step_of_stamp(stamp_to_ns(msg.header.stamp))
        if step is None:
            return  # not a step of this episode (a past episode, a bad stamp)
        outcome = self.gate.offer(step, msg)
        if outcome == DUPLICATE:
            still_open = step == self.gate.step and self.gate.conflicted
            self._report(step, self.safety.refuse(DUPLICATE, f"a second action for step {step}: one action per "
                                                  "step is applied" + ("; the step holds still" if still_open else "")))
            self._step_when_ready()
        elif outcome == "accepted":
            self.timing["until_action_s"] += time.monotonic() - self._published_at
            self._step_when_ready()

    def _checked(self, step: int, msg: JointTrajectory) -> SafetyResult:
        """The safety filter's verdict on the step's action message."""
        foreign = self.action_source.foreign_publishers()
        if foreign:
            result = self.safety.refuse(FOREIGN_PUBLISHER, (
                f"policy/action has publishers besides the configured policy {self.action_source.name}: "
                f"{', '.join(foreign)}; no action is trusted while they publish"))
        elif tuple(msg.joint_names) != ACTION_AXES or len(msg.points) != 1:
            result = self.safety.refuse(MALFORMED, f"an action is one trajectory point over {list(ACTION_AXES)}, "
                                                   f"got {len(msg.points)} points over {list(msg.joint_names)}")
        else:
            result = self.safety.check(msg.points[0].positions)
        if not result.applied:
            self._report(step, result)
        return result

    def _report(self, step: int, result: SafetyResult) -> None:
        """Log and publish one intervention of the safety filter."""
        assert self.episode is not None
        self.get_logger().error(f"step {step}: action refused ({result.kind}), holding still: {result.reason}",
                                throttle_duration_sec=1.0)
        self._safety_pub.publish(document_to_msg(SafetyInterventionDoc(
            episode_id=self.episode.episode_id, step=step, source=self.get_fully_qualified_name(),
            kind=str(result.kind), reason=result.reason, axis=result.axis, value=result.value, limit=result.limit,
            counts=dict(self.safety.counts))))

    def _on_decision(self, msg: interfaces.Decision) -> None:
        if self._done or self.episode is None or self.observation is None:
            return
        doc = received_document(self, msg, DecisionDoc, "decision")
        if doc is None:
            return
        if doc.episode_id != self.episode.episode_id:
            return
        if doc.finished and doc.step <= self.observation.step:
            # The last decision, or an abort that came while this step's decision was still open.
            self._finish(doc)
        elif doc.step == self.observation.step:
            if self._decision is None:
                self.timing["until_decision_s"] += time.monotonic() - self._published_at
            self._decision = doc
            self._step_when_ready()

    def _step_when_ready(self) -> None:
        if not self.gate.ready or self._decision is None or self.observation is None:
            return
        self._decision = None
        step = self.observation.step
        offered = self.gate.take()
        # Two actions for this step (counted as a duplicate when the second came in): hold still.
        action = self.safety.hold_action() if offered is None else self._checked(step, offered).action
        started = time.perf_counter()
        try:
            observation = self.simulator.step(action)
        except LadderError as exc:
            # The filter passed it, so the backend's own checks disagree: hold still instead.
            self.get_logger().error(f"step {step}: the simulator refused the action: {exc}; holding still")
            observation = self.simulator.step(self.safety.hold_action())
        self.timing["sim_s"] += time.perf_counter() - started
        self.steps_taken += 1
        self._publish(observation)

    def _publish(self, observation: Observation) -> None:
        started = time.perf_counter()
        assert self.episode is not None and self.tracker is not None
        if observation.privileged is None:
            raise ConfigError(f"simulator {self.simulator.name} returned no privileged state")
        self.observation = observation
        goal_states = self.tracker.update(observation.privileged.goal, observation.step)
        self._privileged_doc = PrivilegedStateDoc.of(
            self.episode.episode_id, observation.step, self.episode.step_stamp_ns(observation.step),
            observation.privileged, goal_states, ee_euler=observation.ee_euler,
            target_position=observation.target_position)
        self.gate.begin(observation.step)
        self._send_observation()
        self.timing["publish_s"] += time.perf_counter() - started

    def _send_observation(self) -> None:
        observation, episode = self.observation, self.episode
        assert observation is not None and episode is not None
        stamp = episode.step_stamp_ns(observation.step)
        self._published_at = time.monotonic()
        self._clock_pub.publish(Clock(clock=ns_to_stamp(stamp)))  # simulated time, for recordings and sim-time nodes
        # The gripper trigger needs only the joint state: it goes first, so the step's chain of
        # decisions starts while the rest is still being published.
        self._joint_pub.publish(joint_state_to_msg(observation.joint_names, observation.joint_positions,
                                                   observation.aperture, stamp, self.params["aperture_joint"]))
        self._privileged_pub.publish(document_to_msg(self._privileged_doc))
        self._pose_pub.publish(pose_to_msg(observation.ee_position, observation.base_orientation(), stamp,
                                           self.params["base_frame"]))
        if observation.image is not None:
            self._image_pub.publish(image_to_msg(observation.image, stamp, self.params["camera_frame"]))
            if self._intrinsics is not None:
                self._camera_info_pub.publish(camera_info_to_msg(self._intrinsics, stamp, self.params["camera_frame"]))
        if self._depth_pub is not None and observation.depth is not None:
            self._depth_pub.publish(depth_to_msg(observation.depth, stamp, self.params["camera_frame"]))

    def _resend_if_stalled(self) -> None:
        """Republish the current step when nothing came back for a while (a node restarted)."""
        if self._done or self.observation is None:
            return
        if time.monotonic() - self._published_at >= self.params["resend_after_s"]:
            self.get_logger().warning(f"step {self.observation.step}: no decision and action for "
                                      f"{self.params['resend_after_s']} s; republishing the observation")
            self._send_observation()

    def _finish(self, decision: DecisionDoc) -> None:
        assert self.task is not None and self.tracker is not None and self.observation is not None
        self._done = True
        summary = decision.summary or {}
        privileged = self.observation.privileged
        try:
            score = privileged_score(self.task, self.tracker, summary, privileged, steps_used=self.observation.step,
                                     simulator=self.simulator.name)
        except LadderError as exc:
            self.get_logger().error(f"episode {decision.episode_id}: cannot score it: {exc}")
            return
        doc = EpisodeScoreDoc(episode_id=decision.episode_id, step=self.observation.step, score={
            **score, "bridge_timing_s": dict(self.timing), "steps_taken": self.steps_taken,
            "safety": self.safety.summary(),
        })
        self._score_pub.publish(document_to_msg(doc))

    def close(self) -> None:
        if self._owns_simulator:
            self.simulator.close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("sim_bridge", SimBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
