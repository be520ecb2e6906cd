"""The operator panel's pure parts: labels, record files, evaluation plans, the model and the controller."""

import json
import os

import pytest

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.messages import (
    EpisodeCommand,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeStatus,
    SchemaError,
    VerificationResultDoc,
    decode,
    encode,
)
from ladder_ros.specs import topics
from ladder_ros.panel import labels as ops
from ladder_ros.panel.controller import PanelController
from ladder_ros.panel.evaluation_plan import EvaluationPlan
from ladder_ros.panel.model import PanelModel, SafetyState
from ladder_ros.panel.records import EpisodeFile, EpisodeRecordStore, check_episode_id, read_record

PLAN = [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
        {"object": "spoon", "destination": "plate", "text": "put the spoon on the plate"}]


def status(episode_id="ep1", state="running", **kw):
    return EpisodeStatus(episode_id=episode_id, state=state, task={"task_id": "t2", "instruction": "put both"},
                         variant="proprio_verifier", plan=PLAN, budget_steps=200, rate_hz=5.0, **kw)


def event(index, kind, step, episode_id="ep1", **data):
    return EpisodeEventDoc(episode_id=episode_id, index=index, event={"step": step, "kind": kind, **data})


# ------------------------------------------------------------------ labels
def test_every_label_is_a_new_revision_with_its_history():
    labels = EpisodeLabels(episode_id="ep1")
    a = ops.label_subgoal(labels, 1, "done", 10.0)
    b = ops.label_subgoal(a, 0, "not_done", 11.0)
    c = ops.label_episode(b, "partial", 12.0)
    d = ops.set_note(c, "  spoon slipped  ", 13.0)
    e = ops.label_subgoal(d, 1, None, 14.0)  # taken back
    assert [x.revision for x in (a, b, c, d, e)] == [1, 2, 3, 4, 5]
    assert e.subgoals == {"0": "not_done"} and e.episode == "partial" and e.note == "spoon slipped"
    assert [h["what"] for h in e.history] == ["subgoal 1", "subgoal 0", "episode", "note", "subgoal 1"]
    assert e.history[0]["value"] == "done" and e.history[-1]["value"] is None
    assert ops.label_episode(e, "partial", 15.0) is e  # no change, no revision
    assert decode(encode(e), EpisodeLabels) == e
    assert ops.newer(a, e) is e and ops.newer(e, a) is e


def test_bad_labels_are_refused_with_the_value():
    labels = EpisodeLabels(episode_id="ep1")
    with pytest.raises(InvalidInputError, match="'maybe'"):
        ops.label_subgoal(labels, 0, "maybe", 1.0)
    with pytest.raises(InvalidInputError, match="-1"):
        ops.label_subgoal(labels, -1, "done", 1.0)
    with pytest.raises(InvalidInputError, match="'great'"):
        ops.label_episode(labels, "great", 1.0)
    with pytest.raises(SchemaError, match="episode label"):
        EpisodeLabels(episode_id="ep", episode="great")
    with pytest.raises(SchemaError, match="plan indices"):
        EpisodeLabels(episode_id="ep", subgoals={"first": "done"})
    with pytest.raises(SchemaError, match="must not be empty"):
        EpisodeLabels(episode_id="")


# ------------------------------------------------------------------ record files
def test_record_files_are_written_atomically_and_read_back(tmp_path):
    store = EpisodeRecordStore(tmp_path)
    record = EpisodeFile.new("ep-1", {"plan": "p", "key": "k"})
    record.labels = ops.label_episode(record.labels, "success", 1.0)
    path = store.save(record)
    assert sorted(os.listdir(path.parent)) == ["ep-1.json"]  # no temporary file left behind
    back = store.load("ep-1")
    assert back.labels == record.labels and back.plan_entry == {"plan": "p", "key": "k"}
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(InvalidInputError):
            check_episode_id(bad)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="unreadable episode record"):
        read_record(path)
    path.write_text(json.dumps({**record.to_dict(), "schema_version": 9}), encoding="utf-8")
    with pytest.raises(ConfigError, match="schema_version 9"):
        read_record(path)
    assert list(store.records()) == []  # the unreadable file is reported and skipped


# ------------------------------------------------------------------ evaluation plans
def test_plan_expands_tasks_by_episodes_by_variants():
    plan = EvaluationPlan.parse({
        "schema_version": 1, "name": "lab", "episodes": 2, "seed": 10, "variants": ["proprio_verifier"],
        "tasks": [{"task": "a", "layouts": 2, "episodes": 3},
                  {"task": "b", "variants": ["proprio_verifier", "periodic_trigger"]}]})
    got = [(e.task_id, e.variant, e.layout, e.seed) for e in plan.entries]
    assert got == [("a", "proprio_verifier", 0, 10), ("a", "proprio_verifier", 1, 11), ("a", "proprio_verifier", 0, 12),
                   ("b", "proprio_verifier", 0, 10), ("b", "periodic_trigger", 0, 10),
                   ("b", "proprio_verifier", 1, 11), ("b", "periodic_trigger", 1, 11)]
    done = plan.done_keys([(plan.entry_record(plan.entries[0]), True), (plan.entry_record(plan.entries[1]), False),
                           ({"plan": "other", "key": plan.entries[2].key}, True)])
    assert done == {plan.entries[0].key}
    assert plan.next_entry(done).index == 1 and plan.next_entry(done, {plan.entries[1].key}).index == 2


def test_a_blind_plan_pairs_the_systems_in_a_counterbalanced_seeded_order():
    data = {"schema_version": 1, "name": "ab", "episodes": 3, "seed": 4, "order_seed": 5,
            "compare": [{"variant": "proprio_verifier"}, "periodic_trigger"], "tasks": [{"task": "a"}, {"task": "b"}]}
    plan = EvaluationPlan.parse(data)
    assert plan.blind and len(plan.entries) == 12 and sorted(plan.pairs) == list(range(6))
    firsts = []
    for number, arms in plan.pairs.items():
        a, b = arms["A"], arms["B"]
        assert (a.task_id, a.layout, a.seed) == (b.task_id, b.layout, b.seed) and a.variant != b.variant
        assert a.index + 1 == b.index and "proprio" not in a.key + b.key and "variant" not in a.to_dict()
        firsts.append(a.variant)
    assert firsts.count("proprio_verifier") == 3  # counterbalanced: each system first in half the pairs
    assert [e.variant for e in EvaluationPlan.parse(data).entries] == [e.variant for e in plan.entries]
    other = EvaluationPlan.parse({**data, "order_seed": 6})
    assert [e.variant for e in other.entries] != [e.variant for e in plan.entries]


def test_void_episodes_leave_their_entry_open():
    from ladder_ros.panel.evaluation_plan import is_void

    assert is_void("aborted: operator abort") and is_void("aborted: interrupted: orchestrator killed")
    assert not is_void("aborted: operator stop") and not is_void("plan_complete") and not is_void(None)
    record = EpisodeFile.new("ep-2")
    record.result = {"finish_reason": "aborted: operator abort"}
    assert record.over and record.void and not record.counts


@pytest.mark.parametrize("data,match", [
    ({"schema_version": 1, "name": "x", "compare": ["proprio_verifier"], "tasks": [{"task": "a"}]}, "exactly two"),
    ({"schema_version": 1, "name": "x", "compare": ["proprio_verifier", "proprio_verifier"],
      "tasks": [{"task": "a"}]}, "the same"),
    ({"schema_version": 1, "name": "x", "compare": [{"policy": "bridge_pi0_server"}, "proprio_verifier"],
      "tasks": [{"task": "a"}]}, "names the policy of both systems"),
    ({"schema_version": 1, "name": "x", "compare": ["proprio_verifier", "periodic_trigger"],
      "variants": ["proprio_verifier"], "tasks": [{"task": "a"}]}, "drop 'variants'"),
    ({"schema_version": 1, "name": "x", "order_seed": 3, "tasks": [{"task": "a"}]}, "add 'compare'"),
    ({"schema_version": 2, "name": "x", "tasks": [{"task": "a"}]}, "schema_version 2"),
    ({"schema_version": 1, "name": "x y", "tasks": [{"task": "a"}]}, "name"),
    ({"schema_version": 1, "name": "x", "tasks": []}, "tasks"),
    ({"schema_version": 1, "name": "x", "tasks": [{"task": "a", "episodes": 0}]}, "tasks\\[0\\].episodes"),
    ({"schema_version": 1, "name": "x", "tasks": [{"task": "a", "variants": ["fastest"]}]}, "fastest"),
    ({"schema_version": 1, "name": "x", "tasks": [{"task": "a"}, {"task": "a"}]}, "listed twice"),
    ({"schema_version": 1, "name": "x", "tasks": [{"task": "a", "layout": 3}]}, "unknown key 'layout'"),
])
def test_bad_plans_name_the_problem(data, match):
    with pytest.raises(ConfigError, match=match):
        EvaluationPlan.parse(data)


# ------------------------------------------------------------------ model
def test_model_follows_subgoals_verdicts_and_replies():
    model = PanelModel()
    assert model.apply_status(status(plan_index=0))
    model.apply_event(event(0, "episode_started", 0))
    model.apply_event(event(1, "subgoal_started", 0, plan_index=0, text=PLAN[0]["text"]))
    model.apply_event(event(2, "attempt_ended", 12, reason="release", close_steps=4))
    model.apply_event(event(3, "verification_requested", 17, request_id=0, plan_index=0, text="x", required=1,
                            reason="after_release"))
    # the verifier's answer arrives before the orchestrator's event about it
    model.apply_verification_result(VerificationResultDoc(episode_id="ep1", step=17, result={
        "request_id": 0, "count": 1, "source": "gemini", "raw_reply": '{"count": 1}', "latency_ms": 800.0,
        "usage": {"input_tokens": 1200, "output_tokens": 30}}))
    model.apply_event(event(4, "verification_answered", 17, request_id=0, plan_index=0, count=1, required=1,
                            complete=True, source="gemini", error=None))
    model.apply_event(event(4, "verification_answered", 17, request_id=0, plan_index=0, count=1, required=1,
                            complete=True, source="gemini", error=None))  # a repeat changes nothing
    model.apply_event(event(5, "subgoal_completed", 17, plan_index=0, by="verifier"))
    model.apply_event(event(6, "subgoal_started", 17, plan_index=1, text=PLAN[1]["text"]))
    model.apply_status(status(plan_index=1))
    model.apply_event(event(0, "subgoal_started", 0, episode_id="old", plan_index=0))  # another episode: ignored
    rows = model.rows()
    assert [r.state for r in rows] == ["completed", "current"]
    assert rows[0].attempts == 1 and rows[0].verdict.text == "1/1 complete"
    assert rows[0].verdict.raw_reply == '{"count": 1}' and rows[0].verdict.latency_ms == 800.0
    assert "1 queries, 1 verdicts (1 complete), 1230 tokens" == model.vlm_summary()
    assert any("VLM verdict on subgoal 0: 1/1 complete [gemini]" in line for line in model.log)


def test_a_restarted_model_rebuilds_an_episode_that_is_over_from_its_record():
    result = {"events": [{"step": 0, "kind": "subgoal_started", "plan_index": 0, "text": "a"},
                         {"step": 9, "kind": "verification_answered", "request_id": 0, "plan_index": 0,
                          "count": 0, "required": 1, "complete": False, "source": "oracle", "error": None},
                         {"step": 30, "kind": "episode_finished", "reason": "budget_exhausted", "completed": [],
                          "advanced": [], "pending": [0, 1]}]}
    model = PanelModel()
    model.apply_status(status(state="finished", result=result, finish_reason="budget_exhausted"))
    assert model.over and model.rows()[0].verdict.text == "0/1 not complete"
    assert [r.state for r in model.rows()] == ["pending", "pending"]


def test_safety_state_from_driver_values():
    assert SafetyState().text == "no driver"
    state = SafetyState.from_values({"armed": "true", "estop": "false", "interventions": "3"})
    assert state.armed and not state.estop and state.text == "ARMED, 3 safety interventions"
    assert SafetyState.from_values({"estop": "true", "interventions": "junk"}).text == "E-STOP latched"


# ------------------------------------------------------------------ controller
class FakeOutbox:
    def __init__(self, services=()):
        self.commands, self.labels, self.calls = [], [], []
        self.services = set(services)

    def send_command(self, command):
        self.commands.append(command)

    def publish_labels(self, labels):
        self.labels.append(labels)

    def call_trigger(self, service):
        self.calls.append(service)
        return service in self.services

    def call_arm(self, arm):
        self.calls.append(("arm", arm))
        return topics.ARM_SERVICE in self.services

    def service_ready(self, service):
        return service in self.services


def make_plan():
    return EvaluationPlan.parse({"schema_version": 1, "name": "lab", "episodes": 2, "tasks": [{"task": "t2"}]})


def test_controller_runs_the_plan_and_writes_labels_before_publishing(tmp_path):
    store, outbox = EpisodeRecordStore(tmp_path), FakeOutbox({topics.STOP_SERVICE})
    clock = iter(range(1_800_000_000, 1_800_001_000)).__next__
    ctl = PanelController(outbox, store, make_plan(), operator="ana", clock=clock)
    assert ctl.progress() == (0, 2) and ctl.next_entry().seed == 0
    assert ctl.start() is None and not outbox.commands  # no orchestrator heard yet: nothing is sent
    ctl.on_status(EpisodeStatus(episode_id="", state="idle"))
    episode_id = ctl.start()
    command = outbox.commands[-1]
    assert isinstance(command, EpisodeCommand) and command.episode_id == episode_id
    assert (command.task_id, command.layout, command.seed, command.variant) == ("t2", 0, 0, "proprio_verifier")
    ctl.on_status(status(episode_id, plan_index=0))
    assert ctl.start() is None  # one episode at a time
    assert ctl.label_subgoal(0, "done") and not ctl.label_subgoal(0, "done")
    on_disk = store.load(episode_id)
    assert on_disk.labels.subgoals == {"0": "done"} and on_disk.labels.operator == "ana"
    assert outbox.labels[-1] == on_disk.labels  # published what was written
    with pytest.raises(InvalidInputError, match="plan index 5"):
        ctl.label_subgoal(5, "done")
    ctl.stop()
    assert outbox.calls[-1] == topics.STOP_SERVICE
    ctl.on_status(status(episode_id, state="aborted", result={"events": []}, finish_reason="aborted: operator stop"))
    ctl.label_episode("failure")
    ctl.set_note("knocked the plate")
    assert ctl.progress() == (1, 2) and ctl.next_entry().seed == 1
    assert store.load(episode_id).result == {"events": []}

    # a new panel on the same folder: the progress and the labels so far
    outbox2 = FakeOutbox()
    ctl2 = PanelController(outbox2, store, make_plan(), clock=clock)
    assert ctl2.progress() == (1, 2)
    ctl2.on_status(status(episode_id, state="aborted", result={"events": []}, finish_reason="aborted: operator stop"))
    assert ctl2.model.labels.episode == "failure" and ctl2.model.labels.note == "knocked the plate"
    assert outbox2.labels[-1].revision == 3  # re-published for a recorder that may have missed them


def test_controller_without_driver_or_stop_service(tmp_path):
    outbox = FakeOutbox()
    ctl = PanelController(outbox, EpisodeRecordStore(tmp_path))
    ctl.on_status(EpisodeStatus(episode_id="", state="idle"))
    assert not ctl.driver_ready() and not ctl.estop() and not ctl.arm(True)
    assert ctl.start() is None  # no plan and no task given
    ctl.start("t2", layout=1, seed=4, variant="periodic_trigger")
    ctl.on_status(status(outbox.commands[-1].episode_id))
    ctl.abort()  # no abort service seen: the command topic instead
    assert outbox.commands[-1].command == "abort"
    assert not ctl.label_episode(None)  # nothing to take back


def test_a_refused_start_says_why_in_the_log_and_the_plan_entry_stays_open(tmp_path):
    from ladder_ros.messages import EpisodeCommandReply

    outbox = FakeOutbox()
    ctl = PanelController(outbox, EpisodeRecordStore(tmp_path), make_plan())
    ctl.on_status(EpisodeStatus(episode_id="", state="idle"))
    episode_id = ctl.start()
    ctl.on_command_reply(EpisodeCommandReply(command="start", episode_id=episode_id, accepted=True,
                                             assigned_id=episode_id))
    assert not any("REFUSED" in line for line in ctl.model.log)  # an accepted start: the status says the rest
    ctl.on_command_reply(EpisodeCommandReply(command="start", episode_id=episode_id, accepted=False,
                                             reason="start refused: the policy is not ready (warming up)"))
    assert ctl.model.log.lines[-1] == (f"START REFUSED ({episode_id}): start refused: the policy is not ready "
                                       "(warming up)")
    assert ctl.progress() == (0, 2) and ctl.next_entry().seed == 0  # nothing ran: the entry is offered again


# ------------------------------------------------------------------ rqt wiring and depth images
def test_rqt_plugin_wiring():
    import ast
    import xml.etree.ElementTree as ET
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    cls = ET.parse(repo / "plugin.xml").getroot().find("class")
    assert cls.get("base_class_type") == "rqt_gui_py::Plugin"
    module, name = cls.get("type").rsplit(".", 1)
    tree = ast.parse((repo / (module.replace(".", "/") + ".py")).read_text())
    plugin = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    assert {f.name for f in plugin.body if isinstance(f, ast.FunctionDef)} >= {"__init__", "shutdown_plugin"}
    export = ET.parse(repo / "package.xml").getroot().find("export/rqt_gui")
    assert export.get("plugin") == "${prefix}/plugin.xml"
    assert '"plugin.xml"' in (repo / "setup.py").read_text()


def test_depth_images_round_trip():
    pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
    import numpy as np

    from ladder_ros.ros_conversions import depth_from_msg, depth_to_msg

    depth = np.array([[0.5, np.nan], [1.25, 2.0]], dtype=np.float32)
    back = depth_from_msg(depth_to_msg(depth, 7, "camera"))
    assert np.array_equal(np.isnan(back), np.isnan(depth)) and np.allclose(back[~np.isnan(back)], [0.5, 1.25, 2.0])
    msg = depth_to_msg(depth, 7, "camera")
    msg.encoding, msg.step = "16UC1", 4
    msg.data = np.array([[500, 0], [1250, 2000]], dtype="<u2").tobytes()
    mm = depth_from_msg(msg)
    assert np.isnan(mm[0, 1]) and np.allclose(mm[1], [1.25, 2.0])
    msg.encoding = "rgb8"
    with pytest.raises(InvalidInputError, match="rgb8"):
        depth_from_msg(msg)


# ------------------------------------------------------------------ operator versus VLM, blind sessions in the report
def _episode(episode_id, verdicts, labels, plan_entry=None, finish_reason="plan_complete", variant="proprio_verifier"):
    """A recorded episode whose VLM said ``verdicts`` (plan index -> complete) and whose operator said ``labels``."""
    from ladder_ros.evaluation.recorded_episodes import RecordedEpisode

    events = []
    for i, (index, complete) in enumerate(verdicts.items()):
        events.append({"step": 10 * i + 5, "kind": "verification_requested", "request_id": i, "plan_index": index})
        events.append({"step": 10 * i + 6, "kind": "verification_answered", "request_id": i, "plan_index": index,
                       "count": int(complete), "required": 1, "complete": complete, "source": "gemini"})
    record = {"episode_id": episode_id, "task_id": "t2", "variant": variant, "events": events, "success": True,
              "scored": True, "horizon": 2, "subgoals_done": 2, "category": "c", "subgoals": [],
              "steps_used": 40, "budget_steps": 200, "finish_reason": finish_reason,
              "orchestration": {"plan": PLAN}}
    lab = EpisodeLabels(episode_id=episode_id)
    for index, label in labels.items():
        lab = ops.label_subgoal(lab, index, label, 1.0)
    e = RecordedEpisode(episode_id=episode_id, record=record, labels=lab, plan_entry=plan_entry)
    e.void = finish_reason.startswith("aborted: operator abort")
    return e


def test_cohen_kappa_by_hand_and_its_bootstrap_over_episodes():
    from ladder_ros.evaluation.agreement import cohen_kappa, kappa_interval

    # p_o = 35/50, p_e = (25*30 + 25*20) / 50^2 = 0.5, kappa = (0.7 - 0.5) / 0.5
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)
    assert cohen_kappa(5, 0, 0, 0) is None and cohen_kappa(0, 0, 0, 0) is None  # chance agreement is total
    assert cohen_kappa(3, 0, 0, 4) == 1.0 and cohen_kappa(0, 3, 3, 0) == pytest.approx(-1.0)
    blocks = [(2, 0, 1, 1), (1, 1, 0, 2), (3, 0, 0, 1), (0, 1, 1, 2), (2, 0, 0, 2)]
    lo, hi = kappa_interval(blocks)
    total = [sum(b[k] for b in blocks) for k in range(4)]
    assert lo < cohen_kappa(*total) < hi and kappa_interval(blocks) == (lo, hi)  # seeded
    assert kappa_interval([(1, 0, 0, 1), (2, 0, 0, 1)]) == (1.0, 1.0)  # agreement in every draw
    assert kappa_interval([(1, 0, 0, 1)]) is None  # one episode: nothing to resample


def test_agreement_per_session_lists_the_disagreements():
    from ladder_ros.evaluation.agreement import agreement_by_session

    episodes = [_episode("e1", {0: True, 1: True}, {0: "done", 1: "not_done"}, {"plan": "lab", "key": "k"}),
                _episode("e2", {0: False, 1: True}, {0: "done", 1: "done"}, {"plan": "lab", "key": "k2"}),
                _episode("e3", {0: True}, {0: "done", 1: "done"})]
    by_session = agreement_by_session(episodes)
    lab = by_session["lab"]
    assert (lab["tp"], lab["fp"], lab["fn"], lab["tn"]) == (2, 1, 1, 0) and lab["episodes"] == 2
    assert lab["precision"] == pytest.approx(2 / 3) and lab["recall"] == pytest.approx(2 / 3)
    assert [(d["episode_id"], d["plan_index"], d["kind"], d["step"]) for d in lab["disagreements"]] == [
        ("e1", 1, "false positive", 15), ("e2", 0, "false negative", 5)]
    other = by_session["(no plan)"]
    assert other["compared"] == 1 and other["labelled_without_verdict"] == 1 and other["kappa"] is None


def test_report_leaves_out_void_episodes_and_open_blind_sessions(tmp_path):
    from ladder_ros.evaluation.report_statistics import build_report

    blind = {"plan": "ab", "key": "t2/pair0/A/e0/l0/s0", "ab": {"pair": 0, "arm": "A"}}
    episodes = [_episode("ok", {0: True}, {0: "done"}),
                _episode("void", {0: True}, {0: "done"}, finish_reason="aborted: operator abort: bumped"),
                _episode("ab-a", {0: True}, {0: "done"}, blind, variant="A"),
                _episode("ab-b", {0: True}, {0: "done"}, {**blind, "ab": {"pair": 0, "arm": "B"}}, variant="B")]
    report = build_report(episodes)
    assert report["over"] == 1 and report["variants"]["proprio_verifier"]["episodes"] == 1
    assert [v["episode_id"] for v in report["void"]] == ["void"] and report["sealed_sessions"] == {"ab": 2}
    assert "A" not in report["variants"] and report["ab_sessions"] == {}
    key = {"session": "ab", "systems": [{"variant": "proprio_verifier"}, {"variant": "periodic_trigger"}],
           "order_seed": 1, "pairs": {"0": {"A": {"variant": "periodic_trigger"}, "B": {"variant": "proprio_verifier"},
                                            "task_id": "t2", "layout": 0, "seed": 0, "preference": "B",
                                            "complete": True, "episodes": {"A": "ab-a", "B": "ab-b"}}}}
    report = build_report(episodes, {"ab": key})
    assert report["over"] == 3 and report["variants"]["periodic_trigger"]["episodes"] == 1
    ab = report["ab_sessions"]["ab"]
    assert ab["preferences"] == {"proprio_verifier": 1, "periodic_trigger": 0, "tie": 0}
    assert ab["success"]["periodic_trigger"]["successes"] == 1 and ab["paired_difference"]["diff"] == 0.0
    assert ab["revealed"][0]["A"] == "periodic_trigger" and ab["revealed"][0]["preferred"] == "proprio_verifier"


def test_category_plot_takes_a_wilson_bound_a_rounding_error_past_the_rate(tmp_path):
    from ladder_ros.core.metrics import wilson_interval
    from ladder_ros.evaluation.report_render import plot_by_category

    lo, hi = wilson_interval(0, 3)  # 5.6e-17 above the rate 0 on this machine's floats
    summary = {"low_level_policy": {"by_category": {"c": {"success_rate": 0.0, "ci95": [lo, hi], "n": 3}}}}
    assert plot_by_category(summary, tmp_path / "c.png").is_file()
