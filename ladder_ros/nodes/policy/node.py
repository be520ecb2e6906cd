"""The policy node: the low-level policy acts on the orchestrator's current instruction.

Lockstep (simulation): the same synchronous :class:`~ladder_ros.policies.chunked.ChunkedPolicy` the
reference loop runs, once per step, so parity holds with a learned model. Wall clock (robot): a
:class:`~ladder_ros.policies.executor.ChunkExecutor` with its inference thread and a control thread
on absolute deadlines. Before either acts, :class:`~ladder_ros.policies.warmup.WarmUp` gets the
policy ready (``policy/status``, :mod:`ladder_ros.nodes.policy.status`), so compile time is spent
before the first episode. The node may serve several named policies
(:mod:`ladder_ros.nodes.policy.roster`); each episode runs under the one its status names, chosen at
its start.
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

from ladder_ros.core.errors import InvalidInputError, LadderError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.task import Task
from ladder_ros.messages import LOCKSTEP, START, ActionTagDoc, DecisionDoc, EpisodeCommand, EpisodeStatus, \
    PrivilegedStateDoc
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import POLICY
from ladder_ros.nodes.policy.diagnostics import PolicyDiagnostics
from ladder_ros.nodes.policy.inputs import (
    DECISION, JOINTS, POSE, PRIVILEGED, LatestInputs, camera_topics, image_inputs)
from ladder_ros.nodes.policy.lockstep import LockstepActor
from ladder_ros.nodes.policy.reporting import EpisodeReporter
from ladder_ros.nodes.policy.roster import ON_FIRST_USE, ActiveWarmUp, load_roster
from ladder_ros.nodes.policy.status import PolicyStatusPublisher
from ladder_ros.runtime.endpoints import message_class, publisher, received_document, subscription
from ladder_ros.runtime.episodes import EpisodeFollower
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.policies.audit import guard_statistics
from ladder_ros.policies.base import LowLevelPolicy
from ladder_ros.policies.chunked import ReasonLog, TaggedAction
from ladder_ros.policies.config import EE_DELTA, PolicyConfig
from ladder_ros.policies.control_loop import CONTROL_SWITCH_INTERVAL_S, ControlLoop
from ladder_ros.policies.executor import LATE_WAIT_PERIODS, ChunkExecutor
from ladder_ros.policies.factory import PolicyProvider
from ladder_ros.policies.observation import ObservationBundle
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import ACTION_AXES, action_to_msg, image_from_msg, observation_from_msgs, stamp_to_ns

RETRY_PERIOD_S = 0.5  # lockstep: how often a step whose policy call failed (no server) is tried again
DIAGNOSTICS_PERIOD_S = 1.0
STATUS_PERIOD_S = 0.1  # how often readiness, the episode report and the server's error run are looked at


class PolicyNode(Node):
    """Runs the low-level policy an episode names on the orchestrator's current instruction.

    Lockstep: it acts once per step ``t``, when the observation of ``t`` (joint state, end-effector
    pose, the images the policies' cameras give, and in simulation the privileged state, read for the
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

    It serves one policy or several by name (``policies``, ``NAME=CONFIG``; an episode runs under the one
    its status names, else ``default_policy``, switched only at an episode's start and never replaced by
    another; a name it does not serve ends the episode with the list of names). At start it warms each
    policy up (its own deadline, ``warm_up_timeout_s``; with ``warm_up`` on_first_use only the default,
    another when a start first names it) and publishes whether each is ready on ``policy/status``; the
    orchestrator starts an episode only on a ready policy of its name. An episode that starts anyway waits
    (lockstep: the simulator waits) or holds (wall clock) until it is. Between episodes a server policy's
    server is asked ``/healthz`` once a second: one that stopped answering makes that policy unavailable
    until it answers again and warms up again. After ``server.max_consecutive_errors`` error replies in a
    row it asks the orchestrator to end the episode with ``policy server error: <the server's error>`` and
    that policy is not ready until a new warm-up succeeds. Each episode's report (the policy's name and
    config hash, held steps and refused chunks by reason, inference latency, seam jumps,
    out-of-distribution counts) goes out on ``policy/status``, final when the episode is over for the
    policy, for the episode's record.

    Topics: subscribes ``joint_states``, ``ee_pose``, each camera topic of the policy configs
    (``camera/image_raw``), ``sim/privileged_state`` (lockstep), ``orchestrator/decision``,
    ``episode/status`` and (``warm_up`` on_first_use) ``episode/command``; publishes ``policy/action``
    (trajectory_msgs/JointTrajectory), its ``policy/action_tag`` (naming the policy), ``policy/status``
    (latched) and ``/diagnostics`` (1 Hz).
    Every end-effector action is converted from the policy's own convention (its config's, or
    ``rotation_convention`` when set) to the graph's contract.
    Parameters: preset, clock_mode, policy (config name or path), policies (NAME=CONFIG entries),
    default_policy, warm_up (at_start or on_first_use), noise (scripted expert), rotation_convention,
    execution (wall clock: realtime or synchronous; empty: the config's), aperture_joint, control_priority
    (SCHED_FIFO priority of the control thread, 0 normal), max_observation_age_s (s), warm_up_timeout_s (s).
    """

    def __init__(self, *, policy_factory: Callable[[Task, int], LowLevelPolicy] | None = None,
                 reads: frozenset[str] | None = None, provider: PolicyProvider | None = None,
                 node_name: str = "policy", **node_options):
        """``policy_factory(task, seed)`` (a per-step policy in the graph's action contract) and ``reads``
        ({"image", "privileged"}) replace the configured policies (tests); ``provider`` replaces their loading
        with one policy."""
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, POLICY)
        self.lockstep = self.params["clock_mode"] == LOCKSTEP
        self.episode: EpisodeStatus | None = None
        self._policy_begun = False  # this episode's policy is built (the warm-up is over)
        self.roster = load_roster(self.params, get_preset(self.params["preset"]), lockstep=self.lockstep,
                                  label=f"parameter {self.get_name()}", running=lambda: self.episode is not None,
                                  waits_for=self._waits_for, log=lambda text: self.get_logger().info(text),
                                  policy_factory=policy_factory, provider=provider)
        self.warmup = ActiveWarmUp(self.roster)  # the warm-up of the policy in use
        # The status publisher first: the orchestrator discovers that a policy reports before anything else of it.
        self.status = PolicyStatusPublisher(self, self.roster)
        self._reads = reads
        cameras = camera_topics([p.config for p in self.roster.policies.values()], reads)
        privileged = self.lockstep if reads is None else PRIVILEGED in reads
        self.reasons = ReasonLog(lambda text: self.get_logger().warning(text))
        self._action_pub = publisher(self, JointTrajectory, topics.ACTION)
        self._tag_pub = publisher(self, message_class(topics.ACTION_TAG), topics.ACTION_TAG)
        subscription(self, JointState, topics.JOINT_STATES, lambda m: self._on_input(JOINTS, m.header.stamp, m))
        subscription(self, PoseStamped, topics.EE_POSE, lambda m: self._on_input(POSE, m.header.stamp, m))
        for name, topic in cameras.items():
            spec = replace(topics.IMAGE, name=topic) if topic else topics.IMAGE
            subscription(self, Image, spec, lambda m, n=name: self._on_input(n, m.header.stamp, m))
        if privileged:
            subscription(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED, self._on_privileged)
        subscription(self, message_class(topics.DECISION), topics.DECISION, self._on_decision)
        if self.roster.warm_up == ON_FIRST_USE:
            subscription(self, message_class(topics.EPISODE_COMMAND), topics.EPISODE_COMMAND, self._on_command)
        self.episodes = EpisodeFollower(self, self._on_episode_start, self._on_episode_end,
                                        lost_on_restart="the policy's state (its attempt, chunk and random state)")
        self._task: Task | None = None
        self.latest = LatestInputs(lambda: self.get_clock().now().nanoseconds)
        self._decision_step = 0
        self.stepper: LockstepActor | None = None
        self.runners: dict[str, ChunkExecutor] = {}  # wall clock: each policy's executor
        self.control: ControlLoop | None = None
        self.reports = EpisodeReporter(source=lambda: self.roster.active.provider.built_source,
                                       report=self._executor_report, warmup=self.warmup, status=self.status,
                                       request_abort=self.episodes.request_abort)
        if self.lockstep:
            self.stepper = LockstepActor({DECISION, JOINTS, POSE, *cameras} | ({PRIVILEGED} if privileged else set()),
                                         episode=lambda: self.episode, observe=self._bundle, publish=self._publish,
                                         reasons=self.reasons, warmup=self.warmup,
                                         on_error=self.reports.give_up_if_failing)
            self.create_timer(RETRY_PERIOD_S, self.stepper.retry)
        else:
            sys.setswitchinterval(CONTROL_SWITCH_INTERVAL_S)
            for named in self.roster.policies.values():
                self.runners[named.name] = ChunkExecutor(
                    None, named.config, self._snapshot, lambda now: self.latest.age(self._observed(), now),
                    log=lambda text: self.get_logger().warning(text),
                    late_wait_s=LATE_WAIT_PERIODS * named.config.period_s, name=named.name)
                self.runners[named.name].start()
            period_s = self.roster.active.config.period_s  # every policy runs at the preset's rate (checked)
            self.control = ControlLoop(period_s, self._on_control_tick, priority=self.params["control_priority"])
            self.control.start()
            self.get_logger().info(f"control thread at {1.0 / period_s:g} Hz, {self.control.scheduling}")
        self.diagnostics = PolicyDiagnostics(self, lambda: self.roster.active.name, self.warmup, self._executor_stats)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self.diagnostics.publish)
        self.create_timer(STATUS_PERIOD_S, self._on_status_timer)
        # A model loads and warms up now, a server is reached and runs its first inference (a JAX server
        # compiles on it): in a thread per policy, while this node already answers and says it is warming up. A
        # policy built per episode (the scripted expert) has nothing to warm up: ready before the first status.
        self.roster.start()
        self.status.tick()
        names = ", ".join(f"{p.name} ({p.config.name}, {p.config.digest()[:8]})" for p in self.roster.policies.values())
        self.get_logger().info(f"policies: {names}; default {self.roster.default}")

    # ------------------------------------------------------------------ the policies
    def _observed(self) -> frozenset[str]:
        """What an observation of the policy in use is made of."""
        return frozenset({JOINTS, POSE, *image_inputs(self.config, self._reads)})

    def _waits_for(self, name: str) -> bool:
        """Whether the running episode names policy ``name`` and waits for it to be ready (its warm-up may run)."""
        return self.episode is not None and not self._policy_begun and self.roster.active.name == name

    @property
    def provider(self) -> PolicyProvider:
        """The provider of the policy in use."""
        return self.roster.active.provider

    @property
    def config(self) -> PolicyConfig:
        """The config of the policy in use, as the node runs it."""
        return self.roster.active.config

    @property
    def runner(self) -> ChunkExecutor | None:
        """Wall clock: the executor of the policy in use."""
        return self.runners.get(self.roster.active.name)

    # ------------------------------------------------------------------ episodes
    def _on_command(self, msg: interfaces.EpisodeCommand) -> None:
        """``warm_up`` on_first_use: a start that names a policy not warmed up yet starts its warm-up."""
        command = received_document(self, msg, EpisodeCommand, "episode command")
        if command is not None and command.command == START and self.episode is None:
            self.roster.demand(command.policy)

    def _on_episode_start(self, status: EpisodeStatus) -> None:
        self.episode = None
        self._policy_begun = False
        if self.stepper is not None:
            self.stepper.new_episode()
        try:
            self._task = Task.from_dict(status.task or {})
            named = self.roster.use(status.policy)
            digest = named.config.digest()
            if status.policy_config_hash and status.policy_config_hash != digest:
                raise LadderError(f"the episode names policy {named.name} with config hash "
                                  f"{status.policy_config_hash}, this node's {named.name} has {digest}")
        except (LadderError, KeyError, TypeError, ValueError) as exc:
            self.episodes.request_abort(status.episode_id, f"the policy cannot act in this episode: {exc}")
            return
        self.episode = status
        self.get_logger().info(f"episode {status.episode_id}: policy {named.name} ({named.config.name}, "
                               f"{digest[:8]})")
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
        names = image_inputs(self.config, self._reads)
        first = inputs.get(names[0]) if names else None
        observation = observation_from_msgs(step, inputs[JOINTS], inputs[POSE], self.params["aperture_joint"],
                                            image=first, privileged=inputs.get(PRIVILEGED),
                                            embodiment=self.params["preset"])
        if not self.provider.reads_privileged and observation.privileged is not None:
            # Read for the simulator's exact pose only: a learned policy never sees privileged facts.
            observation = replace(observation, privileged=None)
        images = {name.partition(":")[2]: image_from_msg(inputs[name]) for name in names[1:]}
        return ObservationBundle(observation, stamp_ns, images)

    def _snapshot(self) -> tuple[ObservationBundle, float]:
        """The newest observation (inference thread): messages converted here, off the callback thread."""
        entries = self.latest.get(self._observed())
        observed_at = min(e[0] for e in entries.values())
        names = image_inputs(self.config, self._reads)
        stamp_ns = entries[names[0] if names else JOINTS][1]
        return self._bundle(self._decision_step, {n: e[2] for n, e in entries.items()}, stamp_ns), observed_at

    def _on_control_tick(self, now: float) -> None:
        tagged = self.runner.tick(now)
        if tagged is not None and self.episode is not None:
            self._publish(tagged, self.get_clock().now().nanoseconds)

    def _publish(self, tagged: TaggedAction, stamp_ns: int) -> None:
        try:
            config = self.config  # the graph's 7-D contract for end-effector policies; a joint policy's own axes
            msg = action_to_msg(tagged.command, stamp_ns, ACTION_AXES if config.action.kind == EE_DELTA
                                else config.action.names)
        except InvalidInputError as exc:
            self.reasons.report("unpublishable action", str(exc))
            return
        self._action_pub.publish(msg)
        self._tag_pub.publish(document_to_msg(ActionTagDoc(
            episode_id=self.episode.episode_id if self.episode else "", stamp_ns=int(stamp_ns),
            observation_stamp_ns=int(tagged.observation_stamp_ns), subgoal=tagged.subgoal,
            chunk_id=tagged.chunk_id, index=tagged.index, policy=self.roster.active.name,
            inference_ms=float(tagged.inference_ms), held=tagged.held)))

    def destroy_node(self) -> None:
        self.close()  # its threads never outlive the node, however it is taken down (close is idempotent)
        super().destroy_node()

    def close(self) -> None:
        if self.control is not None:
            self.control.stop()
        for runner in self.runners.values():
            runner.stop()
        self.roster.close()


def main(args: Sequence[str] | None = None) -> int:
    return run_node("policy", PolicyNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
