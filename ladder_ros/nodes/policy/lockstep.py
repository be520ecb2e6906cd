"""The policy node in lockstep: one action per simulator step, once its inputs are in.

A part of :class:`~ladder_ros.nodes.policy.node.PolicyNode`, split out by responsibility: it works on the node's
state (``self.episode``, ``self.policy``, ``self.warmup``, the publishers) that the node sets up.
"""

from __future__ import annotations

import time

from ladder_ros.core.errors import LadderError
from ladder_ros.messages import DecisionDoc
from ladder_ros.nodes.policy.inputs import DECISION
from ladder_ros.policies.executor import error_kind

WARMING_UP_HOLD = "policy warming up"


class LockstepActing:
    """Lockstep: act on each step whose observation and decision are in, in order; a step whose policy call
    failed is tried again (the simulator waits)."""

    def _act_on_ready(self) -> None:
        self._backlog.extend(self.aligner.pop_ready())
        self._drain()

    def _drain(self) -> None:
        while self._backlog:
            step, inputs = self._backlog[0]
            decision: DecisionDoc = inputs[DECISION]
            if not decision.finished and self.episode is not None and decision.episode_id == self.episode.episode_id:
                if not self._act_lockstep(step, decision.instruction, inputs):
                    return  # tried again by the retry timer; the simulator waits for this step
            self._backlog.popleft()

    def _act_lockstep(self, step: int, instruction: str, inputs: dict) -> bool:
        if self.policy is None:
            if self._policy_begun:
                return True  # the policy could not be built: the orchestrator ends the episode
            state, detail, waited = self.warmup.snapshot()
            self.reasons.report(WARMING_UP_HOLD, f"{state}: {detail} ({waited:.0f} s)")
            return False  # the simulator waits; tried again by the retry timer
        stamp_ns = self.episode.step_stamp_ns(step)
        try:
            if instruction != self.instruction:
                self.instruction = instruction
                self.policy.reset(instruction)
            started = time.perf_counter()
            tagged = self.policy.act_tagged(self._bundle(step, inputs, stamp_ns), instruction)
            self.act_s += time.perf_counter() - started
        except LadderError as exc:
            self.reasons.report(error_kind(exc), f"step {step}: {exc}", key=str(getattr(exc, "signature", "")))
            self._give_up_if_failing(self.episode)
            return False
        self.reasons.clear()
        if tagged.index == 0 and not tagged.held:
            self._latency_ms.append(tagged.inference_ms)
        self._publish(tagged, stamp_ns)
        return True
