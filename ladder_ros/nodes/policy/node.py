"""The policy node: the low-level policy acts on the orchestrator's current instruction.

Lockstep (simulation): the same synchronous :class:`~ladder_ros.policies.chunked.ChunkedPolicy` the
reference loop runs, once per step, so parity holds with a learned model. Wall clock (robot): a
:class:`~ladder_ros.policies.executor.ChunkExecutor` with its inference thread and a control thread
on absolute deadlines. Before either acts, :class:`~ladder_ros.policies.warmup.WarmUp` gets the
policy ready (``policy/status``, :mod:`ladder_ros.nodes.policy.status`), so compile time is spent
before the first episode.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Callable, Sequence

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from trajectory_msgs.msg import JointTrajectory
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.errors import ConfigError, InvalidInputError, LadderError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.task import Task
from ladder_ros.messages import LOCKSTEP, ActionTagDoc, DecisionDoc, EpisodeStatus, PrivilegedStateDoc
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import POLICY
from ladder_ros.nodes.policy.diagnostics import PolicyDiagnostics
from ladder_ros.nodes.policy.inputs import DECISION, IMAGE, JOINTS, POSE, PRIVILEGED, LatestInputs
from ladder_ros.nodes.policy.lockstep import LockstepActor
from ladder_ros.nodes.policy.reporting import EpisodeReporter
from ladder_ros.nodes.policy.status import PolicyStatusPublisher
from ladder_ros.runtime.endpoints import message_class, publisher, received_document, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.policies.audit import guard_statistics
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.policies.chunked import ReasonLog, TaggedAction
from ladder_ros.policies.config import EE_DELTA
from ladder_ros.policies.config import with_execution
from ladder_ros.policies.control_loop import CONTROL_SWITCH_INTERVAL_S, ControlLoop
from ladder_ros.policies.executor import LATE_WAIT_PERIODS, ChunkExecutor
from ladder_ros.policies.factory import PolicyProvider
from ladder_ros.policies.observation import ObservationBundle
from ladder_ros.policies.warmup import WarmUp
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import ACTION_AXES, action_to_msg, image_from_msg, observation_from_msgs, stamp_to_ns

RETRY_PERIOD_S = 0.5  # lockstep: how often a step whose policy call failed (no server) is tried again
DIAGNOSTICS_PERIOD_S = 1.0
STATUS_PERIOD_S = 0.1  # how often readiness, the episode report and the server's error run are looked at


class PolicyNode(Node):
    """Runs the configured low-level policy on the orchestrator's current instruction.

    Lockstep: it acts once per step ``t``, when the observation of ``t`` (joint state, end-effector
    pose, the images the policy's cameras give, and in simulation the privileged state, read for the
    simulator's exact pose and, by the scripted expert only, for object poses) and the
    orchestrator's decision of ``t`` are in: ``reset(instruction)`` on a change, then one action of
    the current chunk (a new chunk is computed while the simulator waits). A finished decision means
    no action. When the policy cannot answer (no server) the step is retried every 0.5 s and the
    simulator waits; a rejected chunk becomes hold-still commands, the same as in the reference loop.
    A restarted node cannot rebuild the backend's state of an episode (attempt, chunk, random state),
    so it asks the orchestrator to end that episode with that reason instead of continuing a different one.
    Wall clock: the chunk executor publishes one action per control period from the newest fresh
    observation and holds still (publishes nothing) without a fresh observation, without a server
    or when a chunk fails validation, saying why once.

    At start it warms the policy up (its own deadline, ``warm_up_timeout_s``) and publishes whether it
    is ready on ``policy/status``; the orchestrator starts episodes only then. An episode that
    starts anyway waits (lockstep: the simulator waits) or holds (wall clock) until it is. After
    ``server.max_consecutive_errors`` error replies in a row it asks the orchestrator to end the
    episode with ``policy server error: <the server's error>`` and is not ready until a new warm-up
    succeeds. Each episode's report (held steps and refused chunks by reason, inference latency,
    seam jumps, out-of-distribution counts) goes out on ``policy/status``, final when the episode
    is over for the policy, for the episode's record.

    Topics: subscribes ``joint_states``, ``ee_pose``, each camera topic of the policy config
    (``camera/image_raw``), ``sim/privileged_state`` (lockstep), ``orchestrator/decision``,
    ``episode/status``; publishes ``policy/action`` (trajectory_msgs/JointTrajectory), its
    ``policy/action_tag``, ``policy/status`` (latched) and ``/diagnostics`` (1 Hz).
    Every end-effector action is converted from the policy's own convention (its config's, or
    ``rotation_convention`` when set) to the graph's contract.
    Parameters: preset, clock_mode, policy (config name or path), noise (scripted expert),
    rotation_convention, execution (wall clock: realtime or synchronous; empty: the config's), aperture_joint,
    control_priority (SCHED_FIFO priority of the control thread, 0 normal),
    max_observation_age_s (s), warm_up_timeout_s (s).
    """

    def __init__(self, *, policy_factory: Callable[[Task, int], LowLevelPolicy] | None = None,
                 reads: frozenset[str] | None = None, provider: PolicyProvider | None = None,
                 node_name: str = "policy", **node_options):
        """``policy_factory(task, seed)`` (a per-step policy in the graph's action contract) and ``reads``
        ({"image", "privileged"}) replace the configured policy (tests); ``provider`` replaces its loading."""
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, POLICY)
        self.lockstep = self.params["clock_mode"] == LOCKSTEP
        preset = get_preset(self.params["preset"])
        if policy_factory is not None:
            self.provider = PolicyProvider.from_factory(policy_factory, preset.name,
                                                        rotation_convention=self.params["rotation_convention"])
        else:
            self.provider = provider or PolicyProvider.load(self.params["policy"], self.params["noise"],
                                                            self.params["rotation_convention"])
        self.config = self.provider.config
        self._check_config(preset)
        config = self.config
        # The status publisher first: the orchestrator discovers that a policy reports before anything else of it.
        self.warmup = WarmUp(self.provider, deadline_s=self.params["warm_up_timeout_s"],
                             may_attempt=lambda: self.episode is None,
                             log=lambda text: self.get_logger().info(f"policy {config.name}: {text}"))
        self.status = PolicyStatusPublisher(self, config, self.warmup)
        # The graph's 7-D contract for end-effector policies; a joint-position policy's own axes.
        self.axes = ACTION_AXES if config.action.kind == EE_DELTA else config.action.names
        self.cameras = config.cameras if reads is None or IMAGE in reads else config.cameras[:0]
        self.image_inputs = {c.name: f"{IMAGE}:{c.name}" for c in self.cameras}
        if reads is not None and IMAGE in reads and not self.cameras:
            self.image_inputs = {"camera": IMAGE}
        privileged = self.lockstep if reads is None else PRIVILEGED in reads
        self.observed = frozenset({JOINTS, POSE, *self.image_inputs.values()})
        self.reasons = ReasonLog(lambda text: self.get_logger().warning(text))
        self._action_pub = publisher(self, JointTrajectory, topics.ACTION)
        self._tag_pub = publisher(self, message_class(topics.ACTION_TAG), topics.ACTION_TAG)
        subscription(self, JointState, topics.JOINT_STATES, lambda m: self._on_input(JOINTS, m.header.stamp, m))
        subscription(self, PoseStamped, topics.EE_POSE, lambda m: self._on_input(POSE, m.header.stamp, m))
        for camera in self.cameras or ([None] if self.image_inputs else []):
            name = self.image_inputs[camera.name if camera else "camera"]
            spec = replace(topics.IMAGE, name=camera.topic) if camera else topics.IMAGE
            subscription(self, Image, spec, lambda m, n=name: self._on_input(n, m.header.stamp, m))
        if privileged:
            subscription(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED, self._on_privileged)
        subscription(self, message_class(topics.DECISION), topics.DECISION, self._on_decision)
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end,
                                        lost_on_restart="the policy's state (its attempt, chunk and random state)")
        self.episode: EpisodeStatus | None = None
        self._task: Task | None = None
        self._policy_begun = False  # this episode's policy is built (the warm-up is over)
        self.latest = LatestInputs(lambda: self.get_clock().now().nanoseconds)
        self._decision_step = 0
        self.stepper: LockstepActor | None = None
        self.runner: ChunkExecutor | None = None
        self.control: ControlLoop | None = None
        self.reports = EpisodeReporter(source=lambda: self.provider.built_source, report=self._executor_report,
                                       warmup=self.warmup, status=self.status,
                                       request_abort=self.episodes.request_abort)
        if self.lockstep:
            self.stepper = LockstepActor({DECISION} | self.observed | ({PRIVILEGED} if privileged else set()),
                                         episode=lambda: self.episode, observe=self._bundle, publish=self._publish,
                                         reasons=self.reasons, warmup=self.warmup,
                                         on_error=self.reports.give_up_if_failing)
            self.create_timer(RETRY_PERIOD_S, self.stepper.retry)
        else:
            sys.setswitchinterval(CONTROL_SWITCH_INTERVAL_S)
            self.runner = ChunkExecutor(None, config, self._snapshot,
                                        lambda now: self.latest.age(self.observed, now),
                                        log=lambda text: self.get_logger().warning(text),
                                        late_wait_s=LATE_WAIT_PERIODS * config.period_s)
            self.runner.start()
            self.control = ControlLoop(config.period_s, self._on_control_tick,
                                       priority=self.params["control_priority"])
            self.control.start()
            self.get_logger().info(f"control thread at {config.control_rate_hz:g} Hz, {self.control.scheduling}")
        self.diagnostics = PolicyDiagnostics(self, config.name, self.warmup, self._executor_stats)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self.diagnostics.publish)
        self.create_timer(STATUS_PERIOD_S, self._on_status_timer)
        # A model loads and warms up now, a server is reached and runs its first inference (a JAX server
        # compiles on it): in a thread, while this node already answers and says it is warming up. A policy
        # built per episode (the scripted expert) has nothing to warm up: ready before the first status goes out.
        if self.provider.per_episode:
            self.warmup.attempt()
        self.status.tick()
        self.warmup.start()

    def _check_config(self, preset) -> None:
        config, name = self.config, f"parameter {self.get_name()}.policy"
        if config.simulation_only and not self.lockstep:
            raise ConfigError(f"{name}: {config.name} reads the simulator's privileged state and cannot drive a "
                              "robot (clock_mode wall_clock); give a learned policy config, e.g. --set "
                              "policy.policy=bridge_pi0_server (an openpi server) or a local model's config")
        if abs(config.control_rate_hz - preset.control_rate_hz) > 1e-9:
            raise ConfigError(f"{name}: {config.name} runs at {config.control_rate_hz:g} Hz ({config.embodiment}) "
                              f"but the graph's preset {preset.name} runs at {preset.control_rate_hz:g} Hz")
        config_limit = config.max_observation_age_s
        if self.params["max_observation_age_s"] < config_limit:
            self.config = replace(config, max_observation_age_s=self.params["max_observation_age_s"])
        self.config = with_execution(self.config, self.params["execution"])

    def _on_episode_start(self, status: EpisodeStatus) -> None:
        self.episode = None
        self._policy_begun = False
        if self.stepper is not None:
            self.stepper.new_episode()
        try:
            self._task = Task.from_dict(status.task or {})
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            self.episodes.request_abort(status.episode_id, f"the policy cannot act in this episode: {exc}")
            return
        self.episode = status
        if self.runner is not None:
            self.runner.start_episode(None, status.seed)  # its report starts; it acts once the policy is ready
        self._begin_policy()  # now if the policy is ready, else as soon as it is
        if self.stepper is not None:
            self.stepper.start(status, join_late=self.episodes.joined_late)

    def _begin_policy(self) -> None:
        """Build this episode's policy once the warm-up is over (an episode that began before waits for it)."""
        status = self.episode
        if status is None or self._policy_begun or not self.warmup.ready:
            return
        self._policy_begun = True
        try:
            if self.stepper is not None:
                self.stepper.use(self.provider.episode_policy(self._task, status.seed, log=self.get_logger().warning))
            else:
                source = self.provider.episode_source(self._task, status.seed)
                self.runner.set_source(source, guard_statistics(self.config, source))
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            # Holding still forever would freeze the episode: say why and let the orchestrator end it.
            if self.stepper is not None:
                self.stepper.use(None)
            self.episodes.request_abort(status.episode_id, f"the policy cannot act in this episode: {exc}")
            return
        self.reports.begin()

    def _on_episode_end(self, status: EpisodeStatus) -> None:
        if self.episode is not None and status.episode_id == self.episode.episode_id:
            self._final_report(status.episode_id)
            self.episode = None
            if self.stepper is not None:
                self.stepper.end()
            if self.runner is not None:
                self.runner.set_subgoal(None)

    def _on_input(self, name: str, stamp, msg: object) -> None:
        stamp_ns = stamp if isinstance(stamp, int) else stamp_to_ns(stamp)
        if self.stepper is not None:
            self.stepper.add(stamp_ns, name, msg)
        else:
            self.latest.put(name, stamp_ns, msg)

    def _on_privileged(self, msg: interfaces.PrivilegedState) -> None:
        doc = received_document(self, msg, PrivilegedStateDoc, "privileged state")
        if doc is not None:
            self._on_input(PRIVILEGED, doc.stamp_ns, doc)

    def _on_decision(self, msg: interfaces.Decision) -> None:
        doc = received_document(self, msg, DecisionDoc, "decision")
        if doc is None:
            return
        if doc.finished:
            self._final_report(doc.episode_id)
        if self.lockstep:
            self._on_input(DECISION, doc.stamp_ns, doc)
        elif self.episode is not None and doc.episode_id == self.episode.episode_id:
            self._decision_step = doc.step
            self.runner.set_subgoal(None if doc.finished else doc.instruction)

    def _final_report(self, episode_id: str) -> None:
        """The episode is over for the policy (its last decision came): its final report goes out now."""
        if self.episode is None or self.episode.episode_id != episode_id:
            return
        if self.runner is not None:
            self.runner.set_subgoal(None)  # no further control period counts
        self.reports.send(episode_id, final=True)

    def _on_status_timer(self) -> None:
        self._begin_policy()
        episode = self.episode
        if episode is not None:
            self.reports.send(episode.episode_id)
            if self._policy_begun:
                self.reports.give_up_if_failing(episode.episode_id)
        self.status.tick()

    def _executor_report(self) -> dict:
        """The acting executor's report of the episode so far."""
        return self.stepper.episode_report() if self.stepper is not None else self.runner.episode_report()

    def _executor_stats(self) -> tuple[dict, str]:
        """The acting executor's diagnostics values, and why it holds ("": it acts)."""
        if self.stepper is not None:
            return self.stepper.stats()
        stats = self.runner.stats()
        return stats, stats["holding"]

    def _bundle(self, step: int, inputs: dict, stamp_ns: int) -> ObservationBundle:
        names = list(self.image_inputs.values())
        first = inputs.get(names[0]) if names else None
        observation = observation_from_msgs(step, inputs[JOINTS], inputs[POSE], self.params["aperture_joint"],
                                            image=first, privileged=inputs.get(PRIVILEGED),
                                            embodiment=self.params["preset"])
        if not self.provider.reads_privileged and observation.privileged is not None:
            # Read for the simulator's exact pose only: a learned policy never sees privileged facts.
            observation = replace(observation, privileged=None)
        images = {camera: image_from_msg(inputs[name]) for camera, name in list(self.image_inputs.items())[1:]}
        return ObservationBundle(observation, stamp_ns, images)

    def _snapshot(self) -> tuple[ObservationBundle, float]:
        """The newest observation (inference thread): messages converted here, off the callback thread."""
        entries = self.latest.get(self.observed)
        observed_at = min(e[0] for e in entries.values())
        names = list(self.image_inputs.values())
        stamp_ns = entries[names[0] if names else JOINTS][1]
        return self._bundle(self._decision_step, {n: e[2] for n, e in entries.items()}, stamp_ns), observed_at

    def _on_control_tick(self, now: float) -> None:
        tagged = self.runner.tick(now)
        if tagged is not None and self.episode is not None:
            self._publish(tagged, self.get_clock().now().nanoseconds)

    def _publish(self, tagged: TaggedAction, stamp_ns: int) -> None:
        try:
            msg = action_to_msg(tagged.command, stamp_ns, self.axes)
        except InvalidInputError as exc:
            self.reasons.report("unpublishable action", str(exc))
            return
        self._action_pub.publish(msg)
        self._tag_pub.publish(document_to_msg(ActionTagDoc(
            episode_id=self.episode.episode_id if self.episode else "", stamp_ns=int(stamp_ns),
            observation_stamp_ns=int(tagged.observation_stamp_ns), subgoal=tagged.subgoal,
            chunk_id=tagged.chunk_id, index=tagged.index, policy=self.config.name,
            inference_ms=float(tagged.inference_ms), held=tagged.held)))

    def destroy_node(self) -> None:
        self.close()  # its threads never outlive the node, however it is taken down (close is idempotent)
        super().destroy_node()

    def close(self) -> None:
        self.warmup.stop()
        if self.control is not None:
            self.control.stop()
        if self.runner is not None:
            self.runner.stop()
        self.provider.close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("policy", PolicyNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
