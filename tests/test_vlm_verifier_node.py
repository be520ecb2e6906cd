"""The verifier node's worker boundary: any exception becomes a published failed result, and one query is one call.

The node is built in-process (no spinning needed): its worker methods are called directly, its
result publishers are replaced by recorders, and its worker pool by one that records submissions.
"""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")


from ladder_ros.core.task import Subgoal  # noqa: E402
from ladder_ros.core.verification import VerificationRequest, VerificationResult  # noqa: E402
from ladder_ros.messages import (PlanRequestDoc, PlanResultDoc, VerificationRequestDoc,  # noqa: E402
                                 VerificationResultDoc)
from ladder_ros.nodes.vlm_verifier import JOINTS, POSE, PRIVILEGED, VerifierNode  # noqa: E402
from ladder_ros.interface_conversions import document_from_msg, document_to_msg  # noqa: E402

STAMP = 1_000_000
REQUEST = VerificationRequest(request_id=4, step=12, plan_index=0, subgoal=Subgoal("carrot", "plate", "put the "
                              "carrot on the plate"), required=1, reason="after_release")


class Recorder:
    def __init__(self):
        self.messages = []

    def publish(self, msg):
        self.messages.append(msg)


class RecordingPool:
    def __init__(self):
        self.submitted = []

    def submit(self, fn, *args):
        self.submitted.append((fn, args))

    def shutdown(self, **kwargs):
        pass


class Raising:
    name = "raising"

    def __init__(self, exc):
        self.exc = exc

    def verify(self, request, observation):
        raise self.exc

    def plan(self, instruction, observation):
        raise self.exc


@pytest.fixture
def make_node(ros):
    made = []

    def make(verifier=None, planner=None):
        node = VerifierNode(verifier=verifier or Raising(RuntimeError("x")), planner=planner, reads_pixels=False,
                            node_name=f"verifier_under_test_{len(made)}")
        node._result_pub, node._plan_pub, node._worker = Recorder(), Recorder(), RecordingPool()
        made.append(node)
        return node

    yield make
    for node in made:
        node.close()
        node.destroy_node()


def request_doc() -> VerificationRequestDoc:
    return VerificationRequestDoc.of("ep1", STAMP, REQUEST)


@pytest.mark.parametrize("exc", [RuntimeError("CUDA out of memory"), RecursionError("maximum recursion depth"),
                                 KeyError("image"), ValueError("cannot reshape array"), MemoryError()])
def test_any_exception_in_the_worker_is_published_as_a_failed_result(make_node, exc):
    node = make_node(verifier=Raising(exc), planner=Raising(exc))
    node._answer(request_doc(), {})  # also: no inputs at all, which fails while building the observation
    node._answer(request_doc(), {JOINTS: object(), POSE: object()})
    for msg in node._result_pub.messages:
        result = document_from_msg(msg, VerificationResultDoc).verification_result()
        assert result.request_id == 4 and result.count is None and result.error.startswith("verifier failed: ")
    assert len(node._result_pub.messages) == 2
    node._plan(PlanRequestDoc(episode_id="ep1", step=0, stamp_ns=STAMP, instruction="put the carrot on the plate"),
               {})
    (plan_msg,) = node._plan_pub.messages
    plan = document_from_msg(plan_msg, PlanResultDoc)
    assert plan.subgoals is None and plan.error.startswith("planner failed: ")


def test_a_resent_query_is_not_asked_twice(make_node):
    node = make_node()
    node._observations[STAMP] = {JOINTS: object(), POSE: object(), PRIVILEGED: object()}
    msg = document_to_msg(request_doc())
    node._on_request(msg)
    assert len(node._worker.submitted) == 1
    node._on_request(msg)  # resent while the call is in flight: dropped
    node._on_request(msg)
    assert len(node._worker.submitted) == 1 and not node._result_pub.messages
    node._publish(request_doc(), VerificationResult(request_id=4, count=1, source="gemini"))
    node._on_request(msg)  # resent after the answer (it was lost): the same answer again, no second call
    assert len(node._worker.submitted) == 1 and len(node._result_pub.messages) == 2
    first, again = (document_from_msg(m, VerificationResultDoc) for m in node._result_pub.messages)
    assert first == again and again.verification_result().count == 1
    other = VerificationRequestDoc.of("ep1", STAMP, VerificationRequest(
        request_id=5, step=12, plan_index=0, subgoal=REQUEST.subgoal, required=1, reason="after_release"))
    node._on_request(document_to_msg(other))  # a new query is asked
    assert len(node._worker.submitted) == 2


def test_a_resent_query_waits_for_its_observation_from_its_first_arrival(make_node, monkeypatch):
    """The orchestrator resends an unanswered query every verifier_retry_s; were each resend a new arrival, a query
    whose observation never comes would wait forever instead of being answered with an error."""
    import ladder_ros.nodes.vlm_verifier as verifier_module

    clock = [100.0]
    monkeypatch.setattr(verifier_module.time, "monotonic", lambda: clock[0])
    node = make_node()
    wait = node.params["observation_wait_s"]
    msg = document_to_msg(request_doc())
    node._on_request(msg)  # no observation of its step
    for _ in range(3):  # resent within the wait, again and again
        clock[0] += 0.4 * wait
        node._on_request(msg)
        node._expire_waiting()
    (answer,) = node._result_pub.messages  # answered once, observation_wait_s after the first arrival
    result = document_from_msg(answer, VerificationResultDoc).verification_result()
    assert result.count is None and result.error.startswith("no observation of step 12")
    assert not node._worker.submitted
    plan = PlanRequestDoc(episode_id="ep2", step=0, stamp_ns=STAMP + 1, instruction="put the carrot on the plate")
    node._on_plan_request(document_to_msg(plan))
    for _ in range(3):
        clock[0] += 0.4 * wait
        node._on_plan_request(document_to_msg(plan))
        node._expire_waiting()
    (refused,) = node._plan_pub.messages
    assert document_from_msg(refused, PlanResultDoc).error.startswith("no observation of step 0")
