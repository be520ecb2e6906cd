"""The fault matrix: kill each node of a simulated graph in turn mid-episode and see the episode through.

Every node of the WidowX simulation graph is killed (SIGKILL) once, in the middle of its own
episode, and started again the way a supervisor (``ros2 launch`` with respawn, an operator) would.
Each node has one documented outcome (docs/graph_faults.md):

* **resumes identically**: the node keeps no state of the episode that the graph cannot give it
  back (the verifier answers a query about a step the simulator holds; the recorder only listens),
  so the episode goes on and ends exactly as the in-process reference loop's;
* **ends with a reason**: the node's state of the episode is gone (the simulator's scene, the
  policy's attempt, the gripper monitor's counts, the orchestrator's queue); the episode is ended
  at once with a reason naming the node, and its record is kept: in the final episode status and
  in the recording on disk.

No outcome is "still running": whatever happens, the orchestrator's stall watchdog ends an episode
in which no step advanced for ``stall_abort_s``, so every case is bounded by the configured timers.
The harness measures, per node, the time from the kill until the graph reports the fault (a
status naming it, or the episode's end) and until the episode moves again or has ended.
``tests/test_fault_matrix.py`` asserts the outcomes; ``benchmarks/bench_fault_matrix.py`` prints
the table of docs/graph_faults.md.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ladder_ros.core.errors import LadderError

RESUMES = "resumes identically"
ENDS = "ends with a reason and its record"

# What the graph needs for the matrix (besides the caller's recordings folder and state folder): fast
# resends so a restarted node catches up at once, and watchdog bounds a restart fits into.
OVERRIDES: dict[str, dict[str, Any]] = {
    "sim_bridge": {"render": False, "resend_after_s": 0.5},
    "orchestrator": {"verifier_retry_s": 0.5, "verifier_abort_after_s": 40.0, "decision_resend_s": 0.5,
                     "score_timeout_s": 3.0, "stall_warn_s": 3.0, "stall_abort_s": 40.0},
}


@dataclass(frozen=True)
class FaultCase:
    node: str
    expected: str
    reason: str = ""  # the start of the finish reason, for ENDS
    kill_at_step: int = 10


CASES = (
    FaultCase("sim_bridge", ENDS, "aborted: sim_bridge restarted mid-episode"),
    FaultCase("policy", ENDS, "aborted: policy restarted mid-episode"),
    FaultCase("gripper_trigger", ENDS, "aborted: gripper_trigger restarted mid-episode"),
    # Killed before the episode's first query, restarted once the orchestrator reports it unavailable.
    FaultCase("vlm_verifier", RESUMES, kill_at_step=2),
    FaultCase("orchestrator", ENDS, "aborted: interrupted: the orchestrator was killed mid-episode"),
    FaultCase("episode_recorder", RESUMES),
)


@dataclass
class FaultOutcome:
    node: str
    expected: str
    observed: str  # RESUMES, ENDS, or why neither
    finish_reason: str
    detect_s: float | None  # kill -> the graph reports the fault (None: nothing to report)
    recover_s: float | None  # kill -> the episode moves again (resumes) or has its final status (ends)
    bound_s: float
    restart_s: float  # kill -> the new process was started
    record_on_disk: bool
    difference: str | None = None  # first difference from the reference loop (resumes)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.observed == self.expected and self.recover_s is not None and self.recover_s <= self.bound_s


def bound_s(params: dict[str, dict[str, Any]], case: FaultCase) -> float:
    """How long after the kill the episode may take to move again or end: from the configured timers.

    A fault that stops the steps is ended by the stall watchdog (``stall_abort_s``; a held query by
    ``verifier_abort_after_s``), and the final status waits at most ``score_timeout_s`` for the score.
    """
    orchestrator = params["orchestrator"]
    stop = orchestrator["verifier_abort_after_s"] if case.node == "vlm_verifier" else orchestrator["stall_abort_s"]
    return float(stop + orchestrator["score_timeout_s"])


class FaultMatrix:
    """Runs :data:`CASES` on a brought-up graph (a :class:`~ladder_ros.bringup.session.GraphSession`)."""

    def __init__(self, session, params: dict[str, dict[str, Any]], task_id: str = "kitchen_single_2",
                 variant: str = "proprio_verifier", reference: Callable[[str, str, int, int], dict] | None = None):
        from ladder_ros.interface_conversions import document_from_msg
        from ladder_ros.messages import DecisionDoc, EpisodeStatus
        from ladder_ros.specs import topics
        from ladder_ros.runtime.endpoints import message_class, qos

        self.session = session
        self.params = params
        self.task_id = task_id
        self.variant = variant
        self.reference = reference
        self.output_dir = Path(params["episode_recorder"]["output_dir"])
        self._decode, self._decision_cls, self._status_cls = document_from_msg, DecisionDoc, EpisodeStatus
        self.decisions: list[tuple[float, str, int]] = []  # (time, episode id, step)
        self.statuses: list[tuple[float, Any]] = []
        client = session.client
        client.create_subscription(message_class(topics.DECISION), topics.DECISION.name, self._on_decision,
                                   qos(topics.STREAM))
        client.create_subscription(message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS.name, self._on_status,
                                   qos(topics.LATCHED))

    def _on_decision(self, msg) -> None:
        doc = self._decode(msg, self._decision_cls)
        self.decisions.append((time.monotonic(), doc.episode_id, doc.step))

    def _on_status(self, msg) -> None:
        self.statuses.append((time.monotonic(), self._decode(msg, self._status_cls)))

    def _spin_until(self, condition, timeout_s: float, what: str) -> None:
        self.session.client.spin_until(self.session.executor, condition, timeout_s, what)

    def _last_step(self, episode_id: str) -> int:
        return max((step for _, eid, step in self.decisions if eid == episode_id), default=-1)

    def run(self, case: FaultCase, seed: int) -> FaultOutcome:
        """One case; ``seed`` is also the layout (0-23 on the tabletop tasks)."""
        client, processes = self.session.client, self.session.processes
        bound = bound_s(self.params, case)
        episode = client.start_episode(self.task_id, variant=self.variant, layout=seed, seed=seed)

        def started() -> bool:
            reply = client.replies.get(episode)
            if reply is not None and not reply.accepted:
                raise LadderError(f"episode {episode}: {reply.reason}")
            return self._last_step(episode) >= case.kill_at_step

        self._spin_until(started, 120, f"step {case.kill_at_step}")
        if case.node == "episode_recorder":
            # Nothing waits for the recorder; hold the steps (lockstep: the episode stays the same) so
            # the restarted recorder finds the episode still running however long its start takes.
            processes.signal("policy", signal.SIGSTOP)
        processes.signal(case.node, signal.SIGKILL)
        killed_at = time.monotonic()
        processes.processes[case.node].wait(timeout=30)
        if case.node == "vlm_verifier":  # restart only once the orchestrator has noticed
            self._spin_until(lambda: self._fault_reported(episode, killed_at) is not None, bound,
                             "the verifier reported unavailable")
        processes.start_node(case.node)
        restarted_at = time.monotonic()
        held_at = self._last_step(episode)
        recorder_back = None
        if case.node == "episode_recorder":
            try:
                self._spin_until(lambda: (self.output_dir / f"{episode}.part2").is_dir(), bound,
                                 "the restarted recorder's bag")
                recorder_back = time.monotonic()
            finally:
                processes.signal("policy", signal.SIGCONT)
        outcome = client.wait_until_over(self.session.executor, episode, bound + 120)
        final = [t for t, s in self.statuses if s.episode_id == episode and s.result is not None]
        self._spin_until(lambda: final or final.extend(  # this probe hears the status a callback after the client
            t for t, s in self.statuses if s.episode_id == episode and s.result is not None), 10, "the final status")
        ended_at = final[0]
        moved_at = next((t for t, eid, step in self.decisions
                         if eid == episode and step > held_at and t >= restarted_at), None)
        detected_at = None if case.node == "episode_recorder" else self._fault_reported(episode, killed_at)
        record = self._record_on_disk(episode)
        result = outcome.result
        reason = str(result.get("finish_reason"))
        difference = None
        if case.expected == RESUMES:
            observed = RESUMES if outcome.state == "finished" else f"ended: {reason}"
            if self.reference is not None:
                from ladder_ros.evaluation.parity import compare_records

                difference = compare_records(self.reference(self.task_id, self.variant, seed, seed), result)
                if difference is not None:
                    observed = f"resumed but differs: {difference}"
            recover = recorder_back if case.node == "episode_recorder" else moved_at
        else:
            observed = ENDS if outcome.state == "aborted" and reason.startswith(case.reason) and record \
                else f"{outcome.state}: {reason}" + ("" if record else " (no record on disk)")
            recover = ended_at
        return FaultOutcome(
            node=case.node, expected=case.expected, observed=observed, finish_reason=reason,
            detect_s=None if detected_at is None else detected_at - killed_at,
            recover_s=None if recover is None else recover - killed_at, bound_s=bound,
            restart_s=restarted_at - killed_at, record_on_disk=record is not None, difference=difference)

    def _fault_reported(self, episode_id: str, since: float) -> float | None:
        """When a status after ``since`` first named a fault of the episode (or ended it)."""
        for t, status in self.statuses:
            if t >= since and status.episode_id == episode_id and (
                    status.waiting_for or not status.verifier_available or status.result is not None):
                return t
        return None

    def _record_on_disk(self, episode_id: str) -> dict | None:
        """The episode's record in its recording (the last part, when a restarted recorder continued it)."""
        from ladder_ros.evaluation.recorded_episodes import episode_record

        parts = sorted(self.output_dir.glob(f"{episode_id}.part*")) or [self.output_dir / episode_id]
        deadline = time.monotonic() + 15.0  # the recorder closes a bag close_grace_s after the final status
        while not (parts[-1] / "metadata.yaml").is_file() and time.monotonic() < deadline:
            self.session.executor.spin_once(timeout_sec=0.1)
        try:
            return episode_record(parts[-1])
        except Exception:  # an unreadable bag is no record
            return None


def markdown_table(outcomes: list[FaultOutcome]) -> str:
    """The fault-matrix table of docs/graph_faults.md."""
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    rows = ["| node killed (SIGKILL) and restarted | outcome | time to detect | time to recover | bound |",
            "| --- | --- | --- | --- | --- |"]
    for o in outcomes:
        outcome = o.observed if o.observed != ENDS else f"ends: `{o.finish_reason}`"
        rows.append(f"| {o.node} | {outcome} | {seconds(o.detect_s)} | {seconds(o.recover_s)} | "
                    f"{o.bound_s:.0f} s |")
    return "\n".join(rows)
