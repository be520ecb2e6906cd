"""Realistic bugs that once passed the whole suite: each must now make its tests fail.

Each entry is one small change to one file (a rule of the paper, a field of a message, a check of
the parity comparison) and the tests that must catch it. The script copies the working tree to a
scratch folder, applies one bug at a time there (never here), runs those tests through
scripts/test.sh and reports which bugs no test noticed. Slow-ish (a minute or two); not in CI.
A bug whose text no longer matches the code is reported as stale: update or drop the entry.

Usage: .venv/bin/python scripts/check_known_bugs.py [NAME ...]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (name, file, text, replacement, tests)
BUGS = [
    ('triggers_lift_abs', 'ladder_ros/core/triggers.py',
     'self._max_lift = max(self._max_lift, z - self._close_start_z)',
     'self._max_lift = max(self._max_lift, abs(z - self._close_start_z))',
     ['tests/test_triggers.py']),
    ('triggers_suppressed_not_consumed', 'ladder_ros/core/triggers.py',
     '            self.closed_run = 0\n            self._close_start_z = None',
     '            if self.last_suppressed is None:\n'
     '                self.closed_run = 0\n            self._close_start_z = None',
     ['tests/test_triggers.py']),
    ('verification_flag_never_set', 'ladder_ros/core/verification.py',
     '        self.released_since_anchor = True\n        if self.scheduled_step is None:',
     '        if self.scheduled_step is None:',
     ['tests/test_verification.py']),
    ('verification_count_equal', 'ladder_ros/core/verification.py',
     'return count is not None and count >= required',
     'return count is not None and count == required',
     ['tests/test_verification.py', 'tests/test_orchestrator.py']),
    ('verification_error_dropped', 'ladder_ros/core/verification.py',
     '"raw_reply": self.raw_reply, "error": self.error, "latency_ms"',
     '"raw_reply": self.raw_reply, "latency_ms"',
     ['tests/test_verification.py']),
    ('orchestrator_one_element_queue', 'ladder_ros/core/orchestrator.py',
     'self._interchangeable(index)\n                and len(self.queue.pending) > 1):',
     'self._interchangeable(index)):',
     ['tests/test_orchestrator.py']),
    ('orchestrator_ordered_interchangeable', 'ladder_ros/core/orchestrator.py',
     'return self.queue.occurrences(index) > 1 and not ordered',
     'return self.queue.occurrences(index) > 1',
     ['tests/test_orchestrator.py']),
    ('orchestrator_release_in_flight_dropped', 'ladder_ros/core/orchestrator.py',
     '                self._release_in_flight = inp.step\n            return',
     '                pass\n            return',
     ['tests/test_orchestrator.py']),
    ('goals_relay_needs_one', 'ladder_ros/core/goals.py',
     'if self.task.category.chains_legs_per_object:\n            return 1',
     'if self.task.category is TaskCategory.REVISIT:\n            return 1',
     ['tests/test_goals_and_scoring.py']),
    ('goals_distractor_any_destination', 'ladder_ros/core/goals.py',
     'else {s.destination for s in self.task.subgoals}',
     'else {d for (_, d) in self.last_state.resting}',
     ['tests/test_goals_and_scoring.py']),
    ('metrics_exclusion_ignored', 'ladder_ros/core/metrics.py',
     '    if tracker.distractors_placed():\n        violations.append(DISTRACTOR_MOVED)',
     '    if tracker.distractors_placed():\n        pass',
     ['tests/test_goals_and_scoring.py']),
    ('metrics_order_ignored', 'ladder_ros/core/metrics.py',
     '    if tracker.order_violations:\n        violations.append(ORDER_VIOLATED)',
     '    if tracker.order_violations:\n        pass',
     ['tests/test_goals_and_scoring.py']),
    ('metrics_bootstrap_pooled', 'ladder_ros/core/metrics.py',
     'by_suite[suite_of.get(t, "")].append(i)',
     'by_suite[""].append(i)',
     ['tests/test_goals_and_scoring.py']),
    ('parsing_not_stripped', 'ladder_ros/vlm/parsing.py',
     'values[key] = value.strip()',
     'values[key] = value',
     ['tests/test_vlm_parsing.py']),
    ('prompt_inverted', 'ladder_ros/data/prompts/next_subtask.txt',
     'is NOT met yet',
     'is met yet',
     ['tests/test_vlm_prompts.py']),
    ('image_step_padding', 'ladder_ros/ros_conversions.py',
     'rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :row]\n'
     '    arr = rows.reshape(msg.height, msg.width, 3)',
     'rows = np.frombuffer(bytes(msg.data), dtype=np.uint8)[:msg.height * row].reshape(msg.height, row)\n'
     '    arr = rows.reshape(msg.height, msg.width, 3)',
     ['tests/test_ros_conversions.py']),
    ('aperture_last_joint', 'ladder_ros/ros_conversions.py',
     '    i = names.index(aperture_joint)',
     '    i = len(names) - 1',
     ['tests/test_ros_conversions.py']),
    ('stream_best_effort', 'ladder_ros/runtime/endpoints.py',
     '    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,\n'
     '                      durability=DurabilityPolicy.VOLATILE)',
     '    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,\n'
     '                      reliability=ReliabilityPolicy.BEST_EFFORT if kind == topics.STREAM\n'
     '                      else ReliabilityPolicy.RELIABLE,\n'
     '                      durability=DurabilityPolicy.VOLATILE)',
     ['tests/test_ros_nodes.py']),
    ('recorder_no_gripper_events', 'ladder_ros/nodes/episode_recorder/node.py',
     '        for spec in topics.TOPICS:\n            try:',
     '        for spec in [t for t in topics.TOPICS if t is not topics.GRIPPER_EVENTS]:\n            try:',
     ['tests/test_graph_inprocess.py::test_the_recording_holds_every_topic_of_the_episode']),
    ('trigger_node_no_pose', 'ladder_ros/nodes/gripper_trigger.py',
     '            subscription(self, PoseStamped, topics.EE_POSE, self._on_pose)',
     '            pass',
     ['tests/test_ros_nodes.py']),
    ('step_sync_no_replay', 'ladder_ros/runtime/step_sync.py',
     '            self.next_step += 1\n            self._replay_held()',
     '            self.next_step += 1',
     ['tests/test_ros_step_sync.py']),
    ('parity_no_final_goal', 'ladder_ros/evaluation/parity.py',
     'COMPARED_FIELDS = ("events", "final_goal", ',
     'COMPARED_FIELDS = ("events", ',
     ['tests/test_parity_processes.py', '-m', 'not slow']),
    ('parity_no_orchestration', 'ladder_ros/evaluation/parity.py',
     '"verification_queries", "orchestration")',
     '"verification_queries")',
     ['tests/test_parity_processes.py', '-m', 'not slow']),
]


def scratch_copy(target: Path) -> None:
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", "runs", "out", "mutants", "*.egg-info")
    shutil.copytree(REPO, target, ignore=ignore)
    (target / ".venv").symlink_to(REPO / ".venv")


def main(names: list[str]) -> int:
    unknown = set(names) - {bug[0] for bug in BUGS}
    if unknown:
        print(f"unknown bug names: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    missed = []
    for name, path, text, replacement, tests in BUGS:
        if names and name not in names:
            continue
        with tempfile.TemporaryDirectory(prefix="ladder_bug_") as folder:
            scratch = Path(folder) / "repo"
            scratch_copy(scratch)
            source = scratch / path
            code = source.read_text()
            if code.count(text) != 1:
                print(f"{name}: STALE (the text to change is not in {path} exactly once)")
                missed.append(name)
                continue
            source.write_text(code.replace(text, replacement))
            result = subprocess.run(["scripts/test.sh", "-q", "-x", *tests], cwd=scratch, capture_output=True,
                                    text=True, timeout=900)
        caught = result.returncode != 0
        print(f"{name}: {'caught' if caught else 'MISSED'}", flush=True)
        if not caught:
            missed.append(name)
    print(f"{len(missed)} bug(s) missed or stale" if missed else "every bug is caught")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
