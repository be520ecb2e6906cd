"""The operator panel's logic: what every button does, and what is written to disk when (pure).

The widget calls these methods; the ROS side is behind :class:`PanelOutbox` (the bridge in the
panel, a recording fake in tests). Every label is written to the episode's record file first
(atomically, :mod:`ladder_ros.panel.records`) and published on ``operator/labels`` second, so a
crash between the two loses nothing the operator did, and a restarted panel re-publishes the newest
labels it has on disk. No Qt, no rclpy.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Protocol

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.messages import (
    ABORT,
    START,
    STOP,
    EpisodeCommand,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeStatus,
    VerificationResultDoc,
)
from ladder_ros.nodes import topics
from ladder_ros.panel import labels as label_ops
from ladder_ros.panel.evaluation_plan import EvaluationPlan, PlanEntry
from ladder_ros.panel.model import PanelModel, SafetyState
from ladder_ros.panel.records import EpisodeFile, EpisodeRecordStore, check_episode_id


class PanelOutbox(Protocol):
    """What the panel sends into the graph."""

    def send_command(self, command: EpisodeCommand) -> None: ...

    def publish_labels(self, labels: EpisodeLabels) -> None: ...

    def call_trigger(self, service: str) -> bool:
        """Call a std_srvs/Trigger service; False when no server is there."""

    def call_arm(self, arm: bool) -> bool:
        """Call ``robot/arm`` (std_srvs/SetBool); False when no driver offers it."""

    def service_ready(self, service: str) -> bool: ...


class PanelController:
    """Episode control, labels, evaluation-plan progress and the safety buttons of one panel."""

    def __init__(self, outbox: PanelOutbox, store: EpisodeRecordStore, plan: EvaluationPlan | None = None,
                 operator: str = "", clock: Callable[[], float] = time.time):
        self.outbox = outbox
        self.store = store
        self.plan = plan
        self.operator = operator
        self.clock = clock
        self.model = PanelModel()
        self.record: EpisodeFile | None = None
        self.skipped: set[str] = set()
        self.done_keys: set[str] = set()
        self._starting: dict[str, str] = {}  # episode id we asked for -> plan entry key
        self.refresh_progress()

    # ------------------------------------------------------------------ from the graph
    def on_status(self, status: EpisodeStatus) -> None:
        if self.model.apply_status(status):
            self._open_record(status.episode_id)
        if self.record is None or status.episode_id != self.record.episode_id:
            return
        summary = status.to_dict()
        summary.pop("result", None)
        changed = False
        old = self.record.status or {}
        watched = ("state", "plan", "task", "finish_reason", "message", "verifier_available")
        if any(old.get(k) != summary.get(k) for k in watched):
            changed = True
        self.record.status = summary
        if status.result is not None and self.record.result is None:
            self.record.result = status.result
            changed = True
        if changed:
            self.store.save(self.record)
            if self.record.over:
                self.refresh_progress()

    def on_event(self, doc: EpisodeEventDoc) -> None:
        verdict = self.model.apply_event(doc)
        if verdict is not None:
            self._keep_verdicts()

    def on_verification_result(self, doc: VerificationResultDoc) -> None:
        if self.model.apply_verification_result(doc) is not None:
            self._keep_verdicts()

    def on_current_subgoal(self, text: str) -> None:
        self.model.current_subgoal = text

    def on_labels(self, labels: EpisodeLabels) -> None:
        """Labels on the latched topic: newer than the file only when another panel labelled, or this one
        restarted without its record file; the newer revision wins and is written down."""
        if self.record is None or labels.episode_id != self.record.episode_id:
            return
        if labels.revision > self.record.labels.revision:
            self.record.labels = labels
            self.model.labels = labels
            self.store.save(self.record)

    def on_safety(self, state: SafetyState) -> None:
        if state != self.model.safety:
            self.model.log.append(f"robot: {state.text}" + (f" — {state.detail}" if state.detail else ""))
        self.model.safety = state

    def on_service_reply(self, service: str, success: bool, message: str) -> None:
        self.model.log.append(f"{service}: {'ok' if success else 'REFUSED'}" + (f" — {message}" if message else ""))

    def _open_record(self, episode_id: str) -> None:
        try:
            check_episode_id(episode_id)
        except InvalidInputError as exc:
            self.model.log.append(f"cannot keep a record: {exc}")
            self.record = None
            return
        record = self.store.load(episode_id)
        if record is None:
            key = self._starting.pop(episode_id, None)
            entry = None
            if key is not None and self.plan is not None:
                entry = next((self.plan.entry_record(e) for e in self.plan.entries if e.key == key), None)
            record = EpisodeFile.new(episode_id, entry)
            self.store.save(record)
        else:
            self.model.log.append(f"record of {episode_id} found: labels revision {record.labels.revision}")
            self.model.restore(record.labels, record.verdicts)
            if record.labels.revision:
                self.outbox.publish_labels(record.labels)  # the recorder may have missed them
        self.record = record

    def _keep_verdicts(self) -> None:
        if self.record is None:
            return
        self.record.verdicts = [v.to_dict() for v in self.model.verdicts]
        self.store.save(self.record)

    # ------------------------------------------------------------------ labels
    def _relabel(self, change: Callable[[EpisodeLabels, float], EpisodeLabels]) -> bool:
        if self.record is None:
            self.model.log.append("nothing to label: no episode yet")
            return False
        labels = self.record.labels
        new = change(labels, self.clock())
        if new is labels:
            return False  # nothing changed: nothing to write or publish
        if self.operator and not new.operator:
            new = replace(new, operator=self.operator)
        self.record.labels = new
        self.model.labels = new
        self.store.save(self.record)  # on disk first: a crash after this loses nothing
        self.outbox.publish_labels(new)
        return True

    def label_subgoal(self, plan_index: int, label: str | None) -> bool:
        if self.model.plan and not 0 <= plan_index < len(self.model.plan):
            raise InvalidInputError(f"plan index {plan_index} is not in the plan of {len(self.model.plan)}")
        return self._relabel(lambda labels, now: label_ops.label_subgoal(labels, plan_index, label, now))

    def label_episode(self, label: str | None) -> bool:
        return self._relabel(lambda labels, now: label_ops.label_episode(labels, label, now))

    def set_note(self, note: str) -> bool:
        return self._relabel(lambda labels, now: label_ops.set_note(labels, note, now))

    def finish_labels(self, final: bool = True) -> bool:
        return self._relabel(lambda labels, now: label_ops.set_final(labels, final, now))

    # ------------------------------------------------------------------ episodes
    def refresh_progress(self) -> None:
        if self.plan is None:
            return
        self.done_keys = self.plan.done_keys((r.plan_entry, r.over) for r in self.store.records())

    def next_entry(self) -> PlanEntry | None:
        return None if self.plan is None else self.plan.next_entry(self.done_keys, self.skipped)

    def progress(self) -> tuple[int, int]:
        return (len(self.done_keys), len(self.plan.entries)) if self.plan is not None else (0, 0)

    def skip_entry(self) -> PlanEntry | None:
        """Leave the next entry for later in this session; returns the new next entry."""
        entry = self.next_entry()
        if entry is not None:
            self.skipped.add(entry.key)
            self.model.log.append(f"plan entry {entry.index} ({entry.key}) skipped for now")
        return self.next_entry()

    def start(self, task_id: str | None = None, layout: int | None = None, seed: int | None = None,
              variant: str | None = None) -> str | None:
        """Start the plan's next entry, or the given task; returns the episode id asked for."""
        if self.model.running:
            self.model.log.append(f"episode {self.model.episode_id} is still running: stop or abort it first")
            return None
        entry = self.next_entry() if task_id is None else None
        if task_id is None and entry is None:
            self.model.log.append("no task to start: the evaluation plan is complete (or none is loaded)")
            return None
        if entry is not None:
            task_id, layout, seed, variant = entry.task_id, entry.layout, entry.seed, entry.variant
        stamp = datetime.fromtimestamp(self.clock(), timezone.utc).strftime("%Y%m%dT%H%M%S")
        prefix = f"{self.plan.name}-{entry.index:04d}" if entry is not None and self.plan else "panel"
        episode_id = f"{prefix}-{task_id}-{variant or 'default'}-l{layout or 0}-s{seed or 0}-{stamp}"
        command = EpisodeCommand(command=START, episode_id=episode_id, task_id=str(task_id), layout=int(layout or 0),
                                 seed=int(seed or 0), variant=str(variant or ""))
        if entry is not None:
            self._starting[episode_id] = entry.key
        self.outbox.send_command(command)
        self.model.log.append(f"start {task_id} ({variant or 'default'}), layout {layout or 0}, seed {seed or 0}")
        return episode_id

    def stop(self) -> None:
        self._end(topics.STOP_SERVICE, STOP)

    def abort(self) -> None:
        self._end(topics.ABORT_SERVICE, ABORT)

    def _end(self, service: str, command: str) -> None:
        if not self.model.running:
            self.model.log.append(f"{command}: no episode is running")
            return
        if not self.outbox.call_trigger(service):
            # no service server seen (yet): the command topic reaches the same orchestrator
            self.outbox.send_command(EpisodeCommand(command=command, episode_id=self.model.episode_id,
                                                    reason=f"operator {command}"))
        self.model.log.append(f"{command} requested")

    # ------------------------------------------------------------------ robot
    def arm(self, arm: bool) -> bool:
        if not self.outbox.call_arm(arm):
            self.model.log.append("no driver offers robot/arm: nothing to arm")
            return False
        self.model.log.append("arm requested" if arm else "disarm (dry run) requested")
        return True

    def estop(self) -> bool:
        if not self.outbox.call_trigger(topics.ESTOP_SERVICE):
            self.model.log.append("no driver offers robot/estop: use the hardware e-stop")
            return False
        self.model.log.append("E-STOP requested")
        return True

    def release_estop(self) -> bool:
        if not self.outbox.call_trigger(topics.ESTOP_RELEASE_SERVICE):
            self.model.log.append("no driver offers robot/estop_release")
            return False
        self.model.log.append("e-stop release requested")
        return True

    def driver_ready(self) -> bool:
        return all(self.outbox.service_ready(s) for s in (topics.ARM_SERVICE, topics.ESTOP_SERVICE))
