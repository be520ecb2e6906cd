"""The operator panel's logic: what every button does, and what is written to disk when (pure).

The widget calls these methods; the ROS side is behind :class:`PanelOutbox` (the bridge in the
panel, a recording fake in tests). Every label is written to the episode's record file first
(atomically, :mod:`ladder_ros.panel.records`) and published on ``operator/labels`` second, so a
crash between the two loses nothing the operator did, and a restarted panel re-publishes the newest
labels it has on disk. A label names the episode the operator saw when pressing the key; one for an
episode the panel has already left is refused, never moved to the next. In a blind A/B session
(:mod:`ladder_ros.panel.ab_session`) the panel shows and writes the arm ("A"/"B") wherever the graph
names the system, keeps a preference per pair, and writes the sealed key when the session closes. When
the session compares policies, every status the panel shows or keeps is masked and every line of its log
redacted (:mod:`ladder_ros.panel.blind`) until the key is written; the policies' configs and digests come
from the graph's ``policy/status`` (and each episode's own status) and go into the key.
No Qt, no rclpy.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Protocol

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.messages import (
    ABORT,
    START,
    STOP,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeStatus,
    VerificationResultDoc,
)
from ladder_ros.policies.status import PolicyEntry, PolicyStatusDoc
from ladder_ros.specs import topics
from ladder_ros.panel import labels as label_ops
from ladder_ros.panel.ab_session import (
    ABSessionStore,
    PairFile,
    check_preference,
    check_reason,
    mask_system,
    system_label,
)
from ladder_ros.panel.blind import SEALED, SessionSecrets
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
        self.ab = ABSessionStore(store.root, plan.name) if plan is not None and plan.blind else None
        self.served: dict[str, PolicyEntry] = {}  # the policies the graph serves (policy/status), by name
        self.ran: dict[str, dict[str, str]] = {}  # blind sessions: episode id -> the policy it ran (name, hash)
        self.secrets: SessionSecrets | None = None
        if self.ab is not None and plan.compares_policies and not self.ab.closed:
            self.secrets = SessionSecrets(plan.compared_policies)
            self.model.log.redact = self.secrets.redact
        self.refresh_progress()

    def shown_text(self, text: str) -> str:
        """``text`` as the operator may see it (a sealed session's secrets redacted): for lines printed."""
        return self.secrets.redact(text) if self.secrets is not None else text

    # ------------------------------------------------------------------ from the graph
    def on_status(self, status: EpisodeStatus) -> None:
        if status.episode_id and status.episode_id != self.model.episode_id:
            self.model.shown_variant = self._blind_arm(status.episode_id)  # before the model logs the episode
        status = self._as_shown(status)
        if self.model.apply_status(status):
            self._open_record(status.episode_id)
        if self.record is None or status.episode_id != self.record.episode_id:
            return
        arm = self.model.shown_variant
        summary = status.to_dict()
        summary.pop("result", None)
        if arm:
            summary = mask_system(summary, arm)
        changed = False
        old = self.record.status or {}
        watched = ("state", "plan", "task", "finish_reason", "message", "verifier_available")
        if any(old.get(k) != summary.get(k) for k in watched):
            changed = True
        self.record.status = summary
        if status.result is not None and self.record.result is None:
            self.record.result = mask_system(status.result, arm) if arm else status.result
            changed = True
            reset = status.result.get("reset") or {}
            if reset and not reset.get("confirmed"):  # the graph's automatic reset left the scene wrong
                self.model.log.append(f"RESET NOT CONFIRMED ({status.episode_id}): {status.message or 'no counts'}; "
                                      "put the scene right before the next episode")
        if changed:
            self.store.save(self.record)
            if self.record.over:
                self.refresh_progress()
                self._episode_over(self.record)

    def _as_shown(self, status: EpisodeStatus) -> EpisodeStatus:
        """What the panel may show and keep of ``status``: in a blind session, the policy it ran is noted (for the
        key) and, while a session that compares policies is sealed, the status masked as its arm."""
        if self.ab is None:
            return status
        if status.episode_id and status.policy:
            ran = self.ran.setdefault(status.episode_id, {})
            ran["policy"] = status.policy
            ran["config_hash"] = status.policy_config_hash or ran.get("config_hash", "")
        if self.secrets is None or not self.secrets.sealed:
            return status
        arm = self.model.shown_variant if status.episode_id else None  # on_status set it for this episode
        return EpisodeStatus.from_dict(self.secrets.mask(status.to_dict(), arm or SEALED))

    def on_policy_status(self, doc: PolicyStatusDoc) -> None:
        """The graph's policies (their configs and digests: a sealed session's secrets, and its key's)."""
        first = not self.served
        self.served = doc.entries()
        if doc.episode_id and doc.config_hash and doc.episode_id in self.ran:
            self.ran[doc.episode_id].setdefault("config_hash", doc.config_hash)
        if self.plan is None or not self.plan.blind:
            return
        if self.secrets is not None:
            for name in self.plan.compared_policies:
                entry = self.served.get(name)
                if entry is not None:
                    self.secrets.learn(name, entry.config, entry.config_hash)
        missing = [p for p in self.plan.policies if p not in self.served]
        if first and missing:  # names redacted while the session is sealed: the orchestrator's refusal says more
            self.model.log.append(f"the graph does not serve {len(missing)} of the {len(self.plan.policies)} "
                                  f"policies of this session ({', '.join(missing)}): their starts will be refused; "
                                  "check the plan's compare against policy/status")

    def _blind_arm(self, episode_id: str) -> str | None:
        """The arm ("A"/"B") under which a blind session's episode is shown; None for any other episode."""
        if self.ab is None:
            return None
        key = self._starting.get(episode_id)
        if key is not None:
            entry = next((e for e in self.plan.entries if e.key == key), None)
            return entry.arm if entry is not None and entry.blind else None
        try:
            record = self.store.load(episode_id)
        except (InvalidInputError, ConfigError):
            return None
        ab = ((record.plan_entry or {}).get("ab") or {}) if record is not None else {}
        same_session = record is not None and (record.plan_entry or {}).get("plan") == self.plan.name
        return str(ab["arm"]) if same_session and ab.get("arm") else None

    def on_event(self, doc: EpisodeEventDoc) -> None:
        verdict = self.model.apply_event(self._sealed(doc))
        if verdict is not None:
            self._keep_verdicts()

    def on_verification_result(self, doc: VerificationResultDoc) -> None:
        if self.model.apply_verification_result(self._sealed(doc)) is not None:
            self._keep_verdicts()

    def _sealed(self, doc):
        """An event or a verifier's answer as a sealed session may show it (unchanged otherwise)."""
        if self.secrets is None or not self.secrets.sealed:
            return doc
        arm = self.model.shown_variant if doc.episode_id == self.model.episode_id else None
        return type(doc).from_dict(self.secrets.mask(doc.to_dict(), arm or SEALED))

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

    def on_command_reply(self, reply: EpisodeCommandReply) -> None:
        """The orchestrator's answer to a start this panel sent: a refusal and its reason go to the log."""
        if not reply.accepted:
            self._starting.pop(reply.episode_id, None)
            self.model.log.append(f"START REFUSED ({reply.episode_id}): {reply.reason}")

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
                if entry is not None and self.secrets is not None:  # the plan file's path may name the policies
                    entry = self.secrets.mask(entry, SEALED)
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
    def _relabel(self, change: Callable[[EpisodeLabels, float], EpisodeLabels], episode_id: str | None) -> bool:
        """Apply ``change`` to the labels of ``episode_id`` (the episode the operator saw; None: the current
        one); refused when the panel has moved on to another episode since."""
        if self.record is None:
            self.model.log.append("nothing to label: no episode yet")
            return False
        if episode_id is not None and episode_id != self.record.episode_id:
            self.model.log.append(f"label for {episode_id or 'no episode'} not saved: the panel now shows "
                                  f"{self.record.episode_id}; look again and press it again")
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

    def label_subgoal(self, plan_index: int, label: str | None, episode_id: str | None = None) -> bool:
        if self.model.plan and not 0 <= plan_index < len(self.model.plan):
            raise InvalidInputError(f"plan index {plan_index} is not in the plan of {len(self.model.plan)}")
        return self._relabel(lambda labels, now: label_ops.label_subgoal(labels, plan_index, label, now), episode_id)

    def label_episode(self, label: str | None, episode_id: str | None = None) -> bool:
        return self._relabel(lambda labels, now: label_ops.label_episode(labels, label, now), episode_id)

    def set_note(self, note: str, episode_id: str | None = None) -> bool:
        return self._relabel(lambda labels, now: label_ops.set_note(labels, note, now), episode_id)

    def finish_labels(self, final: bool = True, episode_id: str | None = None) -> bool:
        return self._relabel(lambda labels, now: label_ops.set_final(labels, final, now), episode_id)

    # ------------------------------------------------------------------ episodes
    def refresh_progress(self) -> None:
        if self.plan is None:
            return
        self.done_keys = self.plan.done_keys((r.plan_entry, r.counts) for r in self.store.records())

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
        if self.model.status is None:
            self.model.log.append("START NOT SENT: no orchestrator has published episode/status under this "
                                  "namespace; is the graph running (ladder-ros up, ros2 launch)?")
            return None
        if self.model.running:
            self.model.log.append(f"episode {self.model.episode_id} is still running: stop or abort it first")
            return None
        if task_id is None and self.ab is not None:
            if self.ab.closed:
                self.model.log.append(f"the A/B session {self.plan.name} is closed")
                return None
            unjudged = self.unjudged_pair()
            if unjudged is not None:
                self.model.log.append(f"pair {unjudged.pair}: state your preference first "
                                      "(Alt+A, Alt+B or Alt+T for a tie)")
                return None
        entry = self.next_entry() if task_id is None else None
        if task_id is None and entry is None:
            self.model.log.append("no task to start: the evaluation plan is complete (or none is loaded)")
            return None
        if entry is not None:
            task_id, layout, seed, variant = entry.task_id, entry.layout, entry.seed, entry.variant
        shown = entry.shown_variant if entry is not None else variant
        stamp = datetime.fromtimestamp(self.clock(), timezone.utc).strftime("%Y%m%dT%H%M%S")
        prefix = f"{self.plan.name}-{entry.index:04d}" if entry is not None and self.plan else "panel"
        name = f"pair{entry.pair}{entry.arm}" if entry is not None and entry.blind else (shown or "default")
        episode_id = f"{prefix}-{task_id}-{name}-l{layout or 0}-s{seed or 0}-{stamp}"
        command = EpisodeCommand(command=START, episode_id=episode_id, task_id=str(task_id), layout=int(layout or 0),
                                 seed=int(seed or 0), variant=str(variant or ""),
                                 policy=entry.policy if entry is not None else "")
        if entry is not None:
            self._starting[episode_id] = entry.key
        self.outbox.send_command(command)
        self.model.log.append(f"start {task_id} ({shown or 'default'}), layout {layout or 0}, seed {seed or 0}")
        return episode_id

    # ------------------------------------------------------------------ blind A/B sessions
    def _episode_over(self, record: EpisodeFile) -> None:
        """A blind session's episode that counts joins its pair's file; the session closes once complete."""
        ab = (record.plan_entry or {}).get("ab")
        if self.ab is None or not ab or (record.plan_entry or {}).get("plan") != self.plan.name:
            return
        if record.void:
            self.model.log.append(f"pair {ab['pair']}, {ab['arm']}: void ({record.finish_reason}); it runs again")
            return
        pair = self.ab.load_pair(int(ab["pair"])) or PairFile(
            session=self.plan.name, pair=int(ab["pair"]), task_id=str(record.plan_entry.get("task_id", "")),
            layout=int(record.plan_entry.get("layout", 0)), seed=int(record.plan_entry.get("seed", 0)))
        if pair.episodes.get(ab["arm"]) != record.episode_id:
            pair.episodes[ab["arm"]] = record.episode_id
            pair.changed(self.clock(), f"episode {ab['arm']}", record.episode_id)
            self.ab.save_pair(pair)
        self._close_if_complete()

    def unjudged_pair(self) -> PairFile | None:
        """A pair of the session whose two episodes ran and that has no preference yet."""
        if self.ab is None:
            return None
        return next((p for p in self.ab.pairs() if {"A", "B"} <= set(p.episodes) and p.preference is None), None)

    def pair_on_screen(self) -> PairFile | None:
        """The pair of the episode the panel shows (None outside a blind session)."""
        ab = ((self.record.plan_entry or {}).get("ab") or {}) if self.record is not None else {}
        if self.ab is None or "pair" not in ab:
            return None
        return self.ab.load_pair(int(ab["pair"])) or PairFile(
            session=self.plan.name, pair=int(ab["pair"]), task_id=str(self.record.plan_entry.get("task_id", "")),
            layout=int(self.record.plan_entry.get("layout", 0)), seed=int(self.record.plan_entry.get("seed", 0)))

    def _judge(self, change: Callable[[PairFile], bool], episode_id: str | None) -> bool:
        if self.ab is None:
            self.model.log.append("no blind A/B session: load a plan with 'compare'")
            return False
        if episode_id is not None and self.record is not None and episode_id != self.record.episode_id:
            self.model.log.append(f"preference not saved: the panel now shows {self.record.episode_id}")
            return False
        if self.ab.closed:
            self.model.log.append(f"the A/B session {self.plan.name} is closed: its key is written")
            return False
        pair = self.pair_on_screen()
        if pair is None:
            self.model.log.append("no pair on screen: a preference is stated after the pair's episode B")
            return False
        missing = [arm for arm in ("A", "B") if arm not in pair.episodes]
        if missing:
            self.model.log.append(f"pair {pair.pair}: {' and '.join(missing)} has not run yet")
            return False
        if not change(pair):
            return False
        if self.operator:
            pair.operator = self.operator
        self.ab.save_pair(pair)
        self._close_if_complete()
        return True

    def prefer(self, preference: str | None, episode_id: str | None = None) -> bool:
        """State the preference of the pair on screen: "A", "B" or "tie" (the same again takes it back)."""
        check_preference(preference)

        def change(pair: PairFile) -> bool:
            new = None if pair.preference == preference else preference
            pair.preference = new
            pair.changed(self.clock(), "preference", new)
            self.model.log.append(f"pair {pair.pair}: preference {new or 'taken back'}")
            return True
        return self._judge(change, episode_id)

    def set_reason(self, reason: str, episode_id: str | None = None) -> bool:
        reason = check_reason(reason)

        def change(pair: PairFile) -> bool:
            if pair.reason == reason:
                return False
            pair.reason = reason
            pair.changed(self.clock(), "reason", reason)
            return True
        return self._judge(change, episode_id)

    def _close_if_complete(self) -> None:
        if self.ab is None or self.ab.closed or not {e.key for e in self.plan.entries} <= self.done_keys:
            return
        pairs = {p.pair: p for p in self.ab.pairs()}
        if set(pairs) >= set(self.plan.pairs) and all(p.preference for p in pairs.values()):
            self.close_session()

    def close_session(self) -> bool:
        """Close the blind session: write the sealed key (which system was A and B in every pair) and show it."""
        if self.ab is None:
            self.model.log.append("no blind A/B session to close")
            return False
        if self.ab.closed:
            return False
        if self.model.running:
            self.model.log.append("an episode is running: stop it before closing the session")
            return False
        judged = {p.pair: p for p in self.ab.pairs()}
        pairs = {}
        for number, arms in sorted(self.plan.pairs.items()):
            pair = judged.get(number)
            episodes = dict(pair.episodes) if pair else {}
            pairs[str(number)] = {
                "A": self._system_of(arms["A"], episodes.get("A")), "B": self._system_of(arms["B"], episodes.get("B")),
                "task_id": arms["A"].task_id, "layout": arms["A"].layout, "seed": arms["A"].seed,
                "episodes": episodes, "preference": pair.preference if pair else None,
                "complete": bool(pair and {"A", "B"} <= set(pair.episodes) and pair.preference)}
        complete = sum(1 for p in pairs.values() if p["complete"])
        path = self.ab.write_key({"session": self.plan.name, "plan_source": self.plan.source,
                                  "systems": [self._system_of(s) for s in self.plan.systems],
                                  "order_seed": self.plan.order_seed, "closed_unix_s": float(self.clock()),
                                  "complete_pairs": complete, "pairs": pairs})
        if self.secrets is not None:
            self.secrets.reveal()  # the key is written: the log may say which system ran as A and as B
        self.model.log.append(f"A/B session {self.plan.name} closed ({complete}/{len(pairs)} pairs complete); "
                              f"key: {path}")
        for number, p in pairs.items():
            self.model.log.append(f"pair {number}: A = {system_label(p['A'])}, B = {system_label(p['B'])}, "
                                  f"preferred {p['preference'] or '—'}")
        return True

    def _system_of(self, system, episode_id: str | None = None) -> dict:
        """A system as the key names it: its variant and, when it names one, its policy with the policy's config
        and digest (as the episode ``episode_id`` ran it, else as the graph serves it now)."""
        if isinstance(system, PlanEntry):
            system = {"variant": system.variant, **({"policy": system.policy} if system.policy else {})}
        out = dict(system)
        policy = out.get("policy")
        if not policy:
            return out
        served = self.served.get(policy)
        ran = self.ran.get(episode_id or "", {})
        config_hash = ran.get("config_hash") if ran.get("policy") == policy else ""
        out["config"] = served.config if served is not None else ""
        out["config_hash"] = config_hash or (served.config_hash if served is not None else "")
        return out

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
