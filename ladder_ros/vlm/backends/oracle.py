"""The oracle backend: answers count queries from the simulator's privileged goal state.

It stands where a VLM stands, behind the same interface, and writes its answer in the deployed
reply format, so the verifier component runs its real prompt assembly, parsing and count rule on
it. That makes the oracle the reference for the VLM verifiers and lets the ROS graph run the
proprioceptive verifier end to end in simulation without a model: the verifier node gets an
``Observation`` whose ``privileged.goal`` holds the per-destination counts
(``GoalState.count(kind, destination)``), and the oracle reads them.

It answers count queries only: plans come from the task's reference subgoals, and next-subtask
questions need a task the backend does not have.
"""

from __future__ import annotations

import json
import time

from ladder_ros.vlm.backends.base import STOP, Attempt, FailureKind, GenerationRequest, Purpose, Reply, TokenUsage


class OracleBackend:
    name = "oracle"
    model = "oracle"
    reads_pixels = False

    def generate(self, request: GenerationRequest) -> Reply:
        started = time.monotonic()

        def reply(text: str | None, error: str | None = None) -> Reply:
            latency_ms = (time.monotonic() - started) * 1000
            return Reply(text=text, backend=self.name, model=self.model, latency_ms=latency_ms,
                         usage=TokenUsage(0, 0, 0), error=error, finish_reason=STOP if text else None,
                         error_kind=None if error is None else FailureKind.BACKEND,
                         attempts=(Attempt(latency_ms, None, error),))

        if request.purpose is not Purpose.VERIFY:
            return reply(None, f"the oracle answers count queries only, not {request.purpose.value!r}; "
                               "plan from the task's reference subgoals")
        if request.subgoal is None or request.privileged is None:
            return reply(None, "the oracle needs the subgoal and the simulator's privileged state "
                               "(an Observation with privileged.goal)")
        subgoal = request.subgoal
        count = request.privileged.goal.count(subgoal.object, subgoal.destination)
        return reply(f"oracle: {count} {subgoal.object} resting on the {subgoal.destination}\n"
                     + json.dumps({"count": count}))

    def close(self) -> None:
        pass
