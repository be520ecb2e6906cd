"""VLM planner, verifier and next-subtask components, their backends and accounting (the offline benchmark of
these components is an evaluation tool: :mod:`ladder_ros.evaluation.vlm_bench`).

Public API (importing this package loads neither google-genai nor transformers):

* :class:`VLMConfig` and :func:`make_components` / :func:`make_verifier` / :func:`make_planner` /
  :func:`make_next_subtask`: what the verifier node builds from its parameters;
* :class:`Verifier` (a ``core.verification.CountVerifier``), :class:`Planner`, :class:`NextSubtask`;
* :class:`Reply` (one typed reply per call, with its finish reason) and :class:`CallFailure` /
  :class:`FailureKind`: why a call gave no answer;
* :class:`UsageLedger`: per-call and per-episode calls, tokens, latency and estimated :class:`Cost`;
* :func:`head_noun`, :func:`goal_key`, :func:`match_goals`: the one goal-matching rule.
"""

from ladder_ros.vlm.accounting import CallRecord, Cost, PriceTable, UsageLedger
from ladder_ros.vlm.backends.base import (BackendError, CallFailure, FailureKind, GenerationRequest, ImagePart,
                                          Purpose, Reply, TokenUsage, VLMBackend)
from ladder_ros.vlm.components import (NextSubtask, NextSubtaskResult, Planner, PlanResult, Verifier,
                                       subgoal_from, to_views)
from ladder_ros.vlm.config import GeminiSettings, LocalSettings, VLMConfig
from ladder_ros.vlm.factory import (VLMComponents, make_backend, make_components, make_next_subtask,
                                    make_planner, make_verifier)
from ladder_ros.vlm.goal_matching import GoalMatch, goal_key, head_noun, match_goals

__all__ = [
    "BackendError", "CallFailure", "CallRecord", "Cost", "FailureKind", "GeminiSettings", "GenerationRequest",
    "GoalMatch", "ImagePart", "LocalSettings", "NextSubtask", "NextSubtaskResult", "PlanResult", "Planner",
    "PriceTable", "Purpose", "Reply", "TokenUsage", "UsageLedger", "VLMBackend", "VLMComponents", "VLMConfig",
    "Verifier", "goal_key", "head_noun", "make_backend", "make_components", "make_next_subtask", "make_planner",
    "make_verifier", "match_goals", "subgoal_from", "to_views",
]
