"""The WidowX twin node: a simulated WidowX, its scene and its camera on the wall clock, in place of the lab's arm.

It plays the part of Interbotix's ``xs_sdk`` node for the rehearsal (docs/rehearsal.md): the WidowX
driver, unchanged, talks to it through the twin's Interbotix API over ROS (``interbotix_api: twin``,
``twin_xs_sdk: remote``), as the real API talks to xs_sdk.
"""

from __future__ import annotations

import time
from typing import Sequence

from diagnostic_msgs.msg import DiagnosticArray
from ladder_ros_interfaces import msg as interfaces
from rclpy.node import Node

from ladder_ros.instruments.cameras.shared_frame import default_channel
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.goals import GoalTracker
from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import load_suite
from ladder_ros.core.task import Task
from ladder_ros.messages import WALL_CLOCK, DecisionDoc, EpisodeScoreDoc, EpisodeStatus, PrivilegedStateDoc
from ladder_ros.specs import topics
from ladder_ros.instruments.specs import WIDOWX_TWIN
from ladder_ros.runtime.endpoints import message_class, publisher, received_document, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.nodes.sim_bridge.scoring import privileged_score
from ladder_ros.paths import resolve_share_file
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import diagnostics_to_msg
from ladder_ros.instruments.fault_inbox import FaultInbox
from ladder_ros.instruments.widowx_twin.fault_hooks import TwinFaultHooks
from ladder_ros.instruments.widowx_twin.motors import WidowXMotors
from ladder_ros.instruments.widowx_twin.ros_server import XsSdkRosServer
from ladder_ros.instruments.widowx_twin.scene_camera import SceneCamera
from ladder_ros.instruments.widowx_twin.world import TwinWorld
from ladder_ros.instruments.widowx_twin.xs_sdk import SimulatedXsSdk

SIMULATOR = "widowx_twin"


class WidowXTwinNode(Node):
    """A WidowX 250's motors (:mod:`ladder_ros.instruments.widowx_twin.motors`) served as xs_sdk over ROS,
    coupled to the built-in tabletop's scene on the wall clock (:mod:`ladder_ros.instruments.widowx_twin.world`),
    with a rendered camera.

    * xs_sdk: ``/<robot_name>/joint_states`` (100 Hz), the command topics and the services of
      :mod:`ladder_ros.instruments.widowx_twin.xs_wire`, one thing at a time as xs_sdk does; faults injected on
      ``/<robot_name>/twin/fault`` (a stall, a motor error, a hung service) and, for the rehearsal's chaos,
      the instrument faults of ``instruments/fault`` it plays (a camera stall, the oracle's input held back, a
      blocked joint for a while: :mod:`ladder_ros.instruments.widowx_twin.fault_hooks`).
    * The scene: each episode's task, layout and seed (``episode/status``) rebuild it around the arm where
      it stands, unless the episode continues the scene an earlier one left (``start`` ``after_reset`` or
      ``after_task``, a reset among them): then it stays as it is; the camera renders it at ``camera_fps``
      into the shared-memory channel the camera node's ``twin`` backend reads.
    * As the sim bridge does: ``sim/privileged_state`` once per control period (the goal tracker's
      predicates, object poses and start regions, the arm's commanded target), from the first episode on and
      between episodes too, and ``sim/episode_score`` when the orchestrator's last decision is in, so the
      oracle verifier and scoring work on the wall clock.

    Topics: publishes ``sim/privileged_state``, ``sim/episode_score``, ``/diagnostics`` (physics time skipped,
    camera rate and render time, xs_sdk calls, faults), ``instruments/fault_applied`` and the xs_sdk topics
    above; subscribes ``episode/status``, ``orchestrator/decision``, ``instruments/fault`` and the xs_sdk command
    and call topics.
    Parameters: ``WIDOWX_TWIN`` in :mod:`ladder_ros.instruments.specs` (suite, robot_name, start_joints (rad),
    initial_task, physics_period_s (s), camera_width/camera_height (px), camera_fps (Hz), render_depth,
    camera_name, frame_channel, preset, clock_mode).
    """

    def __init__(self, *, node_name: str = "widowx_twin", **node_options):
        super().__init__(node_name, **node_options)
        p = self.params = declare_parameters(self, WIDOWX_TWIN)
        if p["clock_mode"] != WALL_CLOCK:
            raise ConfigError(f"parameter {self.get_name()}.clock_mode: the twin runs on the wall clock, got "
                              f"{p['clock_mode']!r}")
        self.period_s = 1.0 / get_preset(p["preset"]).control_rate_hz
        self.suite = load_suite(resolve_share_file(p["suite"]))
        initial = self.suite.task(p["initial_task"]) if p["initial_task"] else self.suite.tasks[0]
        self.sdk = SimulatedXsSdk(WidowXMotors(time.monotonic, joints=p["start_joints"]))
        self.world = TwinWorld(self.suite, self.sdk.motors, self.sdk.motor_lock,
                               image_size=max(p["camera_width"], p["camera_height"]),
                               physics_period_s=p["physics_period_s"])
        self.world.reset(initial, 0, 0)
        channel = p["frame_channel"] or default_channel(self.get_namespace(), p["camera_name"])
        self.camera = SceneCamera(self.world, channel, width=p["camera_width"], height=p["camera_height"],
                                  fps=p["camera_fps"], depth=p["render_depth"])
        self.xs = XsSdkRosServer(self, self.sdk, p["robot_name"])
        self.faults = TwinFaultHooks(self.camera, self.xs.inject)
        self.fault_inbox = FaultInbox(self, self.faults.handlers())
        self._privileged_pub = publisher(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED)
        self._score_pub = publisher(self, message_class(topics.SCORE), topics.SCORE)
        self._diagnostics_pub = publisher(self, DiagnosticArray, topics.DIAGNOSTICS)
        subscription(self, message_class(topics.DECISION), topics.DECISION, self._on_decision)
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end,
                                        lost_on_restart="the scene's state")
        self.episode: EpisodeStatus | None = None
        self.task: Task | None = None
        self.tracker: GoalTracker | None = None
        self._step = -1
        self._scored = ""
        self._ended = ""
        self.create_timer(self.period_s, self._publish_privileged)
        self.create_timer(1.0, self._publish_diagnostics)
        self.world.start()
        self.camera.start()
        self.get_logger().info(f"WidowX twin: xs_sdk under /{p['robot_name']}, scene {initial.scene}, camera "
                               f"{p['camera_width']}x{p['camera_height']} at {p['camera_fps']:g} Hz into {channel}")

    # ------------------------------------------------------------------ episodes
    def _on_episode_start(self, status: EpisodeStatus) -> None:
        try:
            task = Task.from_dict(status.task or {})
            self.world.reset(task, status.layout, status.seed, keep_scene=status.keeps_scene)
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            self.episodes.request_abort(status.episode_id, f"widowx_twin cannot build the scene: {exc}")
            return
        self.episode, self.task, self.tracker, self._step = status, task, GoalTracker(task), -1
        self.get_logger().info(f"episode {status.episode_id}: scene of {task.task_id}, "
                               + (f"as episode {status.start_after} left it" if status.keeps_scene
                                  else f"layout {status.layout}"))
        self._publish_privileged()

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        # The episode stays for its score: its final status may be handled before its last decision.
        self._ended = status.episode_id

    def _publish_privileged(self) -> None:
        """Once per control period: the scene's privileged state and the goal tracker's predicates. Between
        episodes too, under the last episode's id: the scene stays in view, as a camera's image does, so the
        verifier can count what an episode left before the reset that follows it starts."""
        self.faults.expire()
        episode, tracker = self.episode, self.tracker
        if episode is None or tracker is None:
            return
        now_ns = self.get_clock().now().nanoseconds
        step = max(0, int((now_ns - episode.origin_ns) / (self.period_s * 1e9)))
        if step <= self._step:
            return
        self._step = step
        if self.faults.privileged_held():
            return
        privileged = self.world.privileged()
        goal_states = tracker.update(privileged.goal, step)
        self._privileged_pub.publish(document_to_msg(PrivilegedStateDoc.of(
            episode.episode_id, step, now_ns, privileged, goal_states, target_position=self.world.target_position())))

    def _on_decision(self, msg: interfaces.Decision) -> None:
        doc = received_document(self, msg, DecisionDoc, "decision")
        episode, task, tracker = self.episode, self.task, self.tracker
        if doc is None or not doc.finished or episode is None or task is None or tracker is None:
            return
        if doc.episode_id != episode.episode_id or doc.episode_id == self._scored:
            return
        self._publish_privileged()  # the scene as the episode ends (unless its final status came first)
        try:
            score = privileged_score(task, tracker, doc.summary or {}, self.world.privileged(), steps_used=doc.step,
                                     simulator=SIMULATOR)
        except LadderError as exc:
            self.get_logger().error(f"episode {doc.episode_id}: cannot score it: {exc}")
            return
        self._scored = doc.episode_id
        score["twin"] = {"physics_skipped_s": round(self.world.skipped_s, 3), "camera": self.camera.stats()}
        self._score_pub.publish(document_to_msg(EpisodeScoreDoc(episode_id=doc.episode_id, step=doc.step,
                                                                score=score)))

    # ------------------------------------------------------------------ reporting
    def _publish_diagnostics(self) -> None:
        camera = self.camera.stats()
        problem = camera["error"] or (f"physics {self.world.skipped_s:.1f} s behind the wall clock"
                                      if self.world.skipped_s > 1.0 else "")
        values = {**{f"camera_{k}": v for k, v in camera.items()}, "physics_skipped_s": self.world.skipped_s,
                  "physics_substeps": self.world.substeps, "fingers_blocked": self.world.blocked_fingers,
                  "gripper_turned_off_arm_s": round(self.world.turned_off_arm_s, 3),
                  "gripper_turned_off_arm_max_rad": round(self.world.turned_off_arm_max_rad, 3),
                  "xs_sdk_calls": self.xs.calls, "faults_injected": len(self.xs.faults),
                  "instrument_faults": len(self.fault_inbox.played), "motor_overloads": self.sdk.motors.overloads,
                  "privileged_held": self.faults.held_privileged, "camera_stalled_frames": self.camera.stalled_frames,
                  "scene": self.world.task.task_id if self.world.task else ""}
        self._diagnostics_pub.publish(diagnostics_to_msg(f"{self.get_fully_qualified_name()}: twin", SIMULATOR,
                                                         "warn" if problem else "ok", problem or "running", values,
                                                         self.get_clock().now().nanoseconds))

    def close(self) -> None:
        self.faults.release_all()
        self.camera.stop()
        self.world.stop()
        self.sdk.stop()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("widowx_twin", WidowXTwinNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
