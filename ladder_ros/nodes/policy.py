"""The policy node: the low-level policy acts on (observation t, decision t) pairs only."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from ladder_ros.core.action_conventions import canonical_action
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.task import Task
from ladder_ros.evaluation.components import make_policy
from ladder_ros.messages import LOCKSTEP, DecisionDoc, EpisodeStatus, PrivilegedStateDoc
from ladder_ros.nodes import topics
from ladder_ros.nodes.parameters import POLICY
from ladder_ros.nodes.runtime import (
    EpisodeFollower,
    declare_parameters,
    publisher,
    received_document,
    run_node,
    subscription,
)
from ladder_ros.nodes.step_sync import StepAligner
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.ros_conversions import action_to_msg, observation_from_msgs, stamp_to_ns

JOINTS, POSE, IMAGE, PRIVILEGED, DECISION = "joint_states", "ee_pose", "image", "privileged", "decision"


# What each backend reads besides the joint state and the pose (the scripted expert is a simulator
# test instrument: it reads object poses from the privileged state and never looks at the image).
POLICY_INPUTS = {"scripted_expert": frozenset({PRIVILEGED})}


class PolicyNode(Node):
    """Runs a :class:`~ladder_ros.policies.base.LowLevelPolicy` on the orchestrator's current instruction.

    Lockstep: it acts once per step ``t``, when the observation of ``t`` (joint state, end-effector
    pose, and the image or privileged state the backend reads) and the orchestrator's decision of
    ``t`` are all in, exactly as the reference loop does: ``reset(instruction)`` whenever the
    instruction changes, then ``act``. A finished decision means hold still: no action. If this node
    dies, nothing steps: the simulator waits for the action, and nothing is lost; a restarted node
    picks the episode up from the latched status and the republished step.
    Wall clock: a timer at the control rate acts on the newest observation and instruction, and
    holds still (publishes nothing) when the observation is older than ``max_observation_age_s``.

    Topics: subscribes ``joint_states``, ``ee_pose``, ``camera/image_raw`` (when the backend reads
    images), ``sim/privileged_state`` (simulation-only backends), ``orchestrator/decision``,
    ``episode/status``; publishes ``policy/action`` (trajectory_msgs/JointTrajectory stamped with
    the step it answers), every action converted from the policy's own convention to the contract.
    Parameters: preset, clock_mode, policy, noise, rotation_convention, aperture_joint,
    max_observation_age_s (s).
    """

    def __init__(self, *, policy_factory: Callable[[Task, int], LowLevelPolicy] | None = None,
                 reads: frozenset[str] | None = None, node_name: str = "policy", **node_options):
        """``policy_factory(task, seed)`` and ``reads`` replace the configured backend (tests)."""
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, POLICY)
        self.lockstep = self.params["clock_mode"] == LOCKSTEP
        self.reads = POLICY_INPUTS[self.params["policy"]] if reads is None else frozenset(reads)
        if policy_factory is None and PRIVILEGED in self.reads and not self.lockstep:
            raise ConfigError(f"parameter {self.get_name()}.policy: {self.params['policy']} reads the simulator's "
                              "privileged state and cannot drive a robot (clock_mode wall_clock); real policies "
                              "are not part of this package yet")
        self._factory = policy_factory or (
            lambda task, seed: make_policy(self.params["policy"], task, seed, self.params["noise"],
                                           self.params["rotation_convention"] or None))
        self.aligner = StepAligner({JOINTS, POSE, DECISION} | self.reads)
        self._action_pub = publisher(self, JointTrajectory, topics.ACTION)
        subscription(self, JointState, topics.JOINT_STATES,
                     lambda m: self._on_input(JOINTS, stamp_to_ns(m.header.stamp), m))
        subscription(self, PoseStamped, topics.EE_POSE, lambda m: self._on_input(POSE, stamp_to_ns(m.header.stamp), m))
        if IMAGE in self.reads:
            subscription(self, Image, topics.IMAGE, lambda m: self._on_input(IMAGE, stamp_to_ns(m.header.stamp), m))
        if PRIVILEGED in self.reads:
            subscription(self, String, topics.PRIVILEGED, self._on_privileged)
        subscription(self, String, topics.DECISION, self._on_decision)
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end)
        self.episode: EpisodeStatus | None = None
        self.policy: LowLevelPolicy | None = None
        self.instruction: str | None = None
        self._latest: dict[str, tuple[float, object]] = {}
        self.act_s = 0.0  # time spent in the policy backend (benchmarks)
        if not self.lockstep:
            self.create_timer(1.0 / get_preset(self.params["preset"]).control_rate_hz, self._on_control_tick)

    def _on_episode_start(self, status: EpisodeStatus) -> None:
        try:
            task = Task.from_dict(status.task or {})
            self.policy = self._factory(task, status.seed)
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            self.get_logger().error(f"episode {status.episode_id}: cannot build the policy: {exc}; holding still")
            self.policy = None
            return
        self.episode = status
        self.instruction = None
        if self.lockstep:
            self.aligner.start(status.origin_ns, status.rate_hz, join=self.episodes.joined_late)
            self._act_on_ready()

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        if self.episode is not None and status.episode_id == self.episode.episode_id:
            self.episode = None
            self.policy = None
            self.aligner.stop()

    def _on_input(self, name: str, stamp_ns: int, msg: object) -> None:
        if self.lockstep:
            self.aligner.add(stamp_ns, name, msg)
            self._act_on_ready()
        else:
            self._latest[name] = (time.monotonic(), msg)

    def _on_privileged(self, msg: String) -> None:
        doc = received_document(self, msg, PrivilegedStateDoc, "privileged state")
        if doc is None:
            return
        self._on_input(PRIVILEGED, doc.stamp_ns, doc)

    def _on_decision(self, msg: String) -> None:
        doc = received_document(self, msg, DecisionDoc, "decision")
        if doc is None:
            return
        self._on_input(DECISION, doc.stamp_ns, doc)

    def _act_on_ready(self) -> None:
        for step, inputs in self.aligner.pop_ready():
            decision: DecisionDoc = inputs[DECISION]
            if decision.finished or self.episode is None or decision.episode_id != self.episode.episode_id:
                continue
            self._act(step, decision.instruction, inputs, self.episode.step_stamp_ns(step))

    def _act(self, step: int, instruction: str | None, inputs: dict, stamp_ns: int) -> None:
        if self.policy is None or instruction is None:
            return
        try:
            if instruction != self.instruction:
                self.instruction = instruction
                self.policy.reset(instruction)
            observation = observation_from_msgs(step, inputs[JOINTS], inputs[POSE], self.params["aperture_joint"],
                                                image=inputs.get(IMAGE), privileged=inputs.get(PRIVILEGED))
            started = time.perf_counter()
            action = canonical_action(self.policy, self.policy.act(observation, instruction))
            self.act_s += time.perf_counter() - started
            msg = action_to_msg(action, stamp_ns)
        except LadderError as exc:
            self.get_logger().error(f"step {step}: no action (holding still): {exc}")
            return
        self._action_pub.publish(msg)

    def _on_control_tick(self) -> None:
        """Wall clock: act on the newest observation if every input is fresh, else hold still."""
        if self.episode is None:
            return
        now = time.monotonic()
        max_age = self.params["max_observation_age_s"]
        needed = {JOINTS, POSE, DECISION} | self.reads
        stale = sorted(n for n in needed if n not in self._latest
                       or (n != DECISION and now - self._latest[n][0] > max_age))
        if stale:
            self.get_logger().warning(f"holding still: no fresh {', '.join(stale)}", throttle_duration_sec=2.0)
            return
        inputs = {n: self._latest[n][1] for n in needed}
        decision: DecisionDoc = inputs[DECISION]
        if decision.finished or decision.episode_id != self.episode.episode_id:
            return
        self._act(decision.step, decision.instruction, inputs, self.get_clock().now().nanoseconds)


def main(args: Sequence[str] | None = None) -> int:
    return run_node("policy", PolicyNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
