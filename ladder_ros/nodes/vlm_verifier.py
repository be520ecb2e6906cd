"""The verifier node: answers count queries and plans episodes from one step's observation, off the callback thread."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from ladder_ros_interfaces import msg as interfaces

from ladder_ros.core.verification import VerificationRequest, VerificationResult
from ladder_ros.messages import (
    WALL_CLOCK,
    PlanRequestDoc,
    PlanResultDoc,
    PrivilegedStateDoc,
    VerificationRequestDoc,
    VerificationResultDoc,
)
from ladder_ros.specs import topics
from ladder_ros.specs.parameters import VLM_VERIFIER
from ladder_ros.runtime.endpoints import message_class, publisher, received_document, subscription
from ladder_ros.runtime.parameters import declare_parameters
from ladder_ros.runtime.process import run_node
from ladder_ros.interface_conversions import document_to_msg
from ladder_ros.ros_conversions import observation_from_msgs, stamp_to_ns

JOINTS, POSE, IMAGE, PRIVILEGED = "joint_states", "ee_pose", "image", "privileged"
OBSERVATIONS_KEPT = 64  # stamps of recent steps kept for queries (lockstep needs one; wall clock a few)
ANSWERS_KEPT = 64  # recent answers kept, so a resent query is answered again without a second paid call


class VerifierNode(Node):
    """Answers ``verifier/request`` queries with the configured count backend, and plans.

    A query names the step it is about; the node answers from that step's observation (the oracle reads
    its privileged goal state, a VLM its camera image), waiting up to ``observation_wait_s`` for it to
    arrive. In lockstep every input of a step carries the step's stamp; on the wall clock each source
    stamps its own messages, so the observation of a query is each input's first message stamped at or
    after the query's stamp (the scene as it is once asked). The backend runs in a worker thread, so a
    slow model never blocks the subscriptions; answers go out on ``verifier/result``. A VLM call ends
    within ``call_deadline_s`` (every attempt and back-off included), so a query is answered within
    ``observation_wait_s + call_deadline_s`` of its arrival; the orchestrator's
    ``verifier_abort_after_s`` must exceed that (checked when a graph's parameters are). A repeated
    query (the orchestrator resends unanswered ones) is not asked twice: while it is being answered the
    repeat is dropped, and once answered the same answer is published again. Every failure of the
    worker, whatever it raises, is published as a result with its reason (count None).

    At the start of an episode whose plan comes from the planner, a plan request names
    the first step; the planner component (same backend and ledger) plans from that step's camera
    image and the answer goes out on ``planner/result`` with its raw reply, or with the reason
    there is no plan (the oracle backend counts only; it cannot plan).

    Topics: subscribes ``verifier/request``, ``planner/request``, ``joint_states``, ``ee_pose``,
    ``camera/image_raw`` (sensor QoS), ``sim/privileged_state``; publishes ``verifier/result`` and
    ``planner/result`` (ladder_ros_interfaces/VerificationResult and PlanResult).
    Parameters: preset, clock_mode, backend (oracle, gemini, local, replay), model, robot,
    replay_path, record_path, aperture_joint, observation_wait_s (s), call_deadline_s (s).
    """

    def __init__(self, *, verifier=None, planner=None, reads_pixels: bool | None = None,
                 node_name: str = "vlm_verifier", **node_options):
        """``verifier`` (a CountVerifier), ``planner`` and ``reads_pixels`` replace the configured backend (tests)."""
        super().__init__(node_name, **node_options)
        self.params = declare_parameters(self, VLM_VERIFIER)
        self._components = None
        if verifier is None:
            from ladder_ros.vlm.config import VLMConfig
            from ladder_ros.vlm.factory import make_components

            config = VLMConfig.from_mapping({
                "backend": self.params["backend"], "model": self.params["model"], "robot": self.params["robot"],
                "replay_path": self.params["replay_path"], "record_path": self.params["record_path"],
                "call_deadline_s": self.params["call_deadline_s"]})
            self._components = make_components(config)
            self.get_logger().info(
                f"{config.backend} backend: every VLM call ends within call_deadline_s = {config.call_deadline_s:g} s "
                "(attempts and back-off included)")
            verifier = self._components.verifier
            planner = planner or self._components.planner
        self.verifier = verifier
        self.planner = planner
        if reads_pixels is None:
            reads_pixels = bool(getattr(getattr(verifier, "backend", None), "reads_pixels", True))
        self.needs = {JOINTS, POSE} | ({IMAGE} if reads_pixels else {PRIVILEGED})
        self.wall_clock = self.params["clock_mode"] == WALL_CLOCK
        self._observations: dict[int, dict[str, object]] = {}  # stamp -> inputs
        self._pending: dict[tuple[str, int], tuple[VerificationRequestDoc, float]] = {}
        self._plans_pending: dict[str, tuple[PlanRequestDoc, float]] = {}  # episode id -> request
        self._answers_lock = threading.Lock()  # the worker answers while the callbacks look up
        self._in_flight: set[tuple[str, int]] = set()  # queries handed to the worker, not yet answered
        self._answers: OrderedDict[tuple[str, int], VerificationResultDoc] = OrderedDict()  # recent answers
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verifier")
        self._result_pub = publisher(self, message_class(topics.VERIFY_RESULT), topics.VERIFY_RESULT)
        self._plan_pub = publisher(self, message_class(topics.PLAN_RESULT), topics.PLAN_RESULT)
        subscription(self, message_class(topics.VERIFY_REQUEST), topics.VERIFY_REQUEST, self._on_request)
        subscription(self, message_class(topics.PLAN_REQUEST), topics.PLAN_REQUEST, self._on_plan_request)
        subscription(self, JointState, topics.JOINT_STATES,
                     lambda m: self._on_input(JOINTS, stamp_to_ns(m.header.stamp), m))
        subscription(self, PoseStamped, topics.EE_POSE,
                     lambda m: self._on_input(POSE, stamp_to_ns(m.header.stamp), m))
        if IMAGE in self.needs:
            subscription(self, Image, topics.IMAGE,
                         lambda m: self._on_input(IMAGE, stamp_to_ns(m.header.stamp), m))
        subscription(self, message_class(topics.PRIVILEGED), topics.PRIVILEGED, self._on_privileged)
        self.create_timer(0.1, self._expire_waiting)
        self.answered = 0

    def _on_privileged(self, msg: interfaces.PrivilegedState) -> None:
        doc = received_document(self, msg, PrivilegedStateDoc, "privileged state")
        if doc is None:
            return
        self._on_input(PRIVILEGED, doc.stamp_ns, doc)

    def _on_input(self, name: str, stamp_ns: int, msg: object) -> None:
        self._observations.setdefault(stamp_ns, {})[name] = msg
        while len(self._observations) > OBSERVATIONS_KEPT:
            del self._observations[min(self._observations)]
        self._dispatch_ready()

    def _on_request(self, msg: interfaces.VerificationRequest) -> None:
        doc = received_document(self, msg, VerificationRequestDoc, "verification request")
        if doc is None:
            return
        request = doc.verification_request()
        key = (doc.episode_id, request.request_id)
        with self._answers_lock:
            in_flight, answered = key in self._in_flight, self._answers.get(key)
        if in_flight:
            return  # a resend while the answer is being computed: one call per query
        if answered is not None:  # the answer was lost on the way: the same answer again, no second call
            self._result_pub.publish(document_to_msg(answered))
            return
        # A resend of a query still waiting for its observation keeps its first arrival: the wait is bounded by
        # observation_wait_s from then, however often the orchestrator resends it.
        first = self._pending.get(key)
        self._pending[key] = (doc, time.monotonic() if first is None else first[1])
        self._dispatch_ready()

    def _on_plan_request(self, msg: interfaces.PlanRequest) -> None:
        doc = received_document(self, msg, PlanRequestDoc, "plan request")
        if doc is None:
            return
        first = self._plans_pending.get(doc.episode_id)  # a resend keeps its first arrival, as a query's does
        self._plans_pending[doc.episode_id] = (doc, time.monotonic() if first is None else first[1])
        self._dispatch_ready()

    def _inputs_of(self, stamp_ns: int) -> dict[str, object]:
        """The observation of a query's stamp: that stamp's inputs (lockstep), or each input's first at or after it."""
        if not self.wall_clock:
            return self._observations.get(stamp_ns, {})
        found: dict[str, object] = {}
        for stamp in sorted(s for s in self._observations if s >= stamp_ns):
            for name, msg in self._observations[stamp].items():
                found.setdefault(name, msg)
        return found

    def _dispatch_ready(self) -> None:
        for key, (doc, _) in list(self._pending.items()):
            inputs = self._inputs_of(doc.stamp_ns)
            if self.needs.issubset(inputs):
                del self._pending[key]
                with self._answers_lock:
                    self._in_flight.add(key)
                self._worker.submit(self._answer, doc, dict(inputs))
        for episode_id, (plan_doc, _) in list(self._plans_pending.items()):
            inputs = self._inputs_of(plan_doc.stamp_ns)
            if self.needs.issubset(inputs):
                del self._plans_pending[episode_id]
                self._worker.submit(self._plan, plan_doc, dict(inputs))

    def _expire_waiting(self) -> None:
        now = time.monotonic()
        for key, (doc, since) in list(self._pending.items()):
            if now - since >= self.params["observation_wait_s"]:
                del self._pending[key]
                request = doc.verification_request()
                missing = sorted(self.needs - set(self._inputs_of(doc.stamp_ns)))
                self.get_logger().error(f"query {request.request_id} of step {doc.step}: no {', '.join(missing)} "
                                        f"after {self.params['observation_wait_s']} s; answering with an error")
                self._publish(doc, VerificationResult(request_id=request.request_id, count=None, source=self.name,
                                                      error=f"no observation of step {doc.step}: missing "
                                                            f"{', '.join(missing)}"))
        for episode_id, (plan_doc, since) in list(self._plans_pending.items()):
            if now - since >= self.params["observation_wait_s"]:
                del self._plans_pending[episode_id]
                missing = sorted(self.needs - set(self._inputs_of(plan_doc.stamp_ns)))
                self._plan_pub.publish(document_to_msg(PlanResultDoc(
                    episode_id=episode_id, subgoals=None, source=self.name,
                    error=f"no observation of step {plan_doc.step}: missing {', '.join(missing)}")))

    @property
    def name(self) -> str:
        return str(getattr(self.verifier, "name", "verifier"))

    def _observation(self, step: int, inputs: dict):
        return observation_from_msgs(step, inputs[JOINTS], inputs[POSE], self.params["aperture_joint"],
                                     image=inputs.get(IMAGE), privileged=inputs.get(PRIVILEGED),
                                     embodiment=self.params["preset"])

    def _answer(self, doc: VerificationRequestDoc, inputs: dict) -> None:
        """Worker thread: build the step's observation and ask the verifier; any exception becomes a failed result."""
        request: VerificationRequest = doc.verification_request()
        try:
            result = self.verifier.verify(request, self._observation(doc.step, inputs))
        except Exception as exc:  # the worker's boundary: never lose a query to an exception
            self.get_logger().error(f"query {request.request_id} of step {doc.step} failed: "
                                    f"{type(exc).__name__}: {exc}")
            result = VerificationResult(request_id=request.request_id, count=None, source=self.name,
                                        error=f"verifier failed: {type(exc).__name__}: {exc}")
        self._publish(doc, result)

    def _plan(self, doc: PlanRequestDoc, inputs: dict) -> None:
        """Worker thread: plan from the step's observation; every failure becomes a result with its reason."""
        try:
            if self.planner is None:
                result = PlanResultDoc(episode_id=doc.episode_id, subgoals=None, source=self.name,
                                       error="this verifier node has no planner")
            else:
                plan = self.planner.plan(doc.instruction, self._observation(doc.step, inputs))
                result = PlanResultDoc(
                    episode_id=doc.episode_id, source=self.name,
                    subgoals=None if plan.subgoals is None else [s.to_dict() for s in plan.subgoals],
                    error=plan.error, raw_reply=plan.raw_reply, latency_ms=float(plan.latency_ms),
                    usage=dict(plan.usage))
        except Exception as exc:  # the worker's boundary: the orchestrator always gets a plan or a reason
            self.get_logger().error(f"planning episode {doc.episode_id} failed: {type(exc).__name__}: {exc}")
            result = PlanResultDoc(episode_id=doc.episode_id, subgoals=None, source=self.name,
                                   error=f"planner failed: {type(exc).__name__}: {exc}")
        try:
            self._plan_pub.publish(document_to_msg(result))
        except Exception as exc:  # shutting down: nothing left to tell
            self.get_logger().error(f"could not publish the plan of episode {doc.episode_id}: {exc}")

    def _publish(self, doc: VerificationRequestDoc, result: VerificationResult) -> None:
        key = (doc.episode_id, result.request_id)
        try:
            answer = VerificationResultDoc.of(doc.episode_id, doc.step, result)
            with self._answers_lock:
                self._answers[key] = answer
                while len(self._answers) > ANSWERS_KEPT:
                    self._answers.popitem(last=False)
            self._result_pub.publish(document_to_msg(answer))
            self.answered += 1
        except Exception as exc:  # shutting down, or a result no document can carry: say so, never raise
            self.get_logger().error(f"could not publish the answer to query {result.request_id}: "
                                    f"{type(exc).__name__}: {exc}")
        finally:
            with self._answers_lock:
                self._in_flight.discard(key)

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        if self._components is not None:
            self._components.close()


def main(args: Sequence[str] | None = None) -> int:
    # One executor thread: the callbacks only file inputs and hand queries to the worker thread. rclpy's
    # MultiThreadedExecutor kept a core busy in this node on the wall clock (93 % of a core in the Franka
    # graph against 3 % with this executor, measured from /proc in the same test).
    return run_node("vlm_verifier", VerifierNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
