"""The operator panel from the keyboard (pytest-qt, offscreen), against a scripted graph: no ROS, no simulator.

Each test replays what went wrong on a keyboard-only evaluation day and checks that a label, a note or a
preference can land only on the episode and subgoal the operator sees: the note typed for one episode
does not leak into the next, Ctrl+D / Ctrl+N never label a row selected in an earlier episode, an aborted
episode is not a finished plan entry and runs again from F5, F5 without an orchestrator warns and sends
nothing, and the panel fits a 1280x720 screen. A blind A/B session never shows or writes the system of
an episode until it closes.
"""

import json
import os
import queue

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/ladder-qt-{os.getuid()}")
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)

pytest.importorskip("pytestqt", reason="needs pytest-qt and PyQt5 (requirements/operator.txt)")

from python_qt_binding.QtCore import Qt  # noqa: E402
from python_qt_binding.QtWidgets import QApplication  # noqa: E402

from ladder_ros.messages import EpisodeStatus  # noqa: E402
from ladder_ros.panel.ab_session import ABSessionStore, read_key  # noqa: E402
from ladder_ros.panel.controller import PanelController  # noqa: E402
from ladder_ros.panel.evaluation_plan import EvaluationPlan, pair_orders  # noqa: E402
from ladder_ros.panel.records import EpisodeRecordStore  # noqa: E402
from ladder_ros.panel.widget import FITS, OperatorPanelWidget  # noqa: E402
from tests.test_panel_logic import FakeOutbox  # noqa: E402

PLAN = [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"},
        {"object": "spoon", "destination": "plate", "text": "put the spoon on the plate"}]
VARIANTS = ("proprio_verifier", "periodic_trigger")


class ScriptedGraph(FakeOutbox):
    """The panel's outbox (no service servers: stop and abort go by the command topic) and bridge in one; the
    test plays the orchestrator."""

    def __init__(self):
        super().__init__()
        self.inbox = queue.SimpleQueue()

    def latest_image(self):
        return None

    def latest_depth(self):
        return None

    # the orchestrator's side
    def status(self, episode_id, state="running", plan_index=0, step=3, finish_reason=None, result=None,
               variant=None):
        start = next((c for c in reversed(self.commands) if c.command == "start" and c.episode_id == episode_id), None)
        return EpisodeStatus(episode_id=episode_id, state=state, task={"task_id": "t2", "instruction": "put both"},
                             variant=variant or (start.variant if start else ""), layout=start.layout if start else 0,
                             seed=start.seed if start else 0, plan=PLAN, budget_steps=200, rate_hz=5.0,
                             step=step, plan_index=plan_index if state == "running" else None,
                             finish_reason=finish_reason, result=result)

    def send(self, widget, status):
        self.inbox.put(("status", status))
        widget.poll()

    def finish(self, widget, episode_id, reason="plan_complete", success=True):
        start = next(c for c in reversed(self.commands) if c.command == "start" and c.episode_id == episode_id)
        result = {"episode_id": episode_id, "task_id": "t2", "variant": start.variant, "success": success,
                  "finish_reason": reason, "scored": True, "horizon": 2, "subgoals_done": 2 if success else 0,
                  "events": [{"step": 0, "kind": "episode_started", "variant": start.variant, "preset": "widowx"}]}
        state = "aborted" if reason.startswith("aborted") else "finished"
        self.send(widget, self.status(episode_id, state=state, step=40, finish_reason=reason, result=result))


@pytest.fixture
def make_panel(qtbot, tmp_path):
    def make(plan=None, operator="ana"):
        graph = ScriptedGraph()
        clock = iter(range(1_800_000_000, 1_800_100_000)).__next__
        controller = PanelController(graph, EpisodeRecordStore(tmp_path / "lab"), plan, operator=operator,
                                     clock=clock)
        widget = OperatorPanelWidget(controller, graph, refresh_ms=3_600_000)  # the test polls, not the timer
        qtbot.addWidget(widget)
        widget.resize(*FITS)
        widget.show()
        qtbot.waitExposed(widget)
        widget.take_keyboard()
        qtbot.waitUntil(lambda: QApplication.focusWidget() is not None)
        graph.send(widget, EpisodeStatus(episode_id="", state="idle"))  # the orchestrator's latched idle status
        return graph, controller, widget
    return make


def two_entry_plan():
    return EvaluationPlan.parse({"schema_version": 1, "name": "lab", "episodes": 2, "seed": 5,
                                 "tasks": [{"task": "t2"}]})


def press(qtbot, widget, key, modifier=Qt.NoModifier):
    """A key as the operator presses it: to whichever widget has the focus (the panel when none)."""
    qtbot.keyClick(QApplication.focusWidget() or widget, key, modifier)


def start_next(qtbot, graph, widget):
    before = len(graph.commands)
    press(qtbot, widget, Qt.Key_F5)
    assert len(graph.commands) == before + 1, f"F5 sent no start: {list(widget.controller.model.log)[-2:]}"
    return graph.commands[-1].episode_id


def test_a_note_stays_with_the_episode_it_was_typed_for(make_panel, qtbot, tmp_path):
    graph, ctl, widget = make_panel(two_entry_plan())
    first = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(first))
    press(qtbot, widget, Qt.Key_L, Qt.ControlModifier)
    assert QApplication.focusWidget() is widget.note
    qtbot.keyClicks(widget.note, "note for episode one")
    press(qtbot, widget, Qt.Key_Return)
    assert QApplication.focusWidget() is not widget.note  # Enter saved it and left the field
    graph.finish(widget, first)
    press(qtbot, widget, Qt.Key_Return, Qt.ControlModifier)  # labels done
    second = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(second))
    graph.finish(widget, second)
    press(qtbot, widget, Qt.Key_Return, Qt.ControlModifier)
    store = EpisodeRecordStore(tmp_path / "lab")
    assert store.load(first).labels.note == "note for episode one" and store.load(first).labels.final
    assert store.load(second).labels.note == "" and store.load(second).labels.final
    assert widget.note.text() == ""

    # typed but never entered when the next episode arrives: it stays with the episode it was typed for
    third = ctl.start("t2", layout=0, seed=9, variant="proprio_verifier")
    graph.send(widget, graph.status(third))
    press(qtbot, widget, Qt.Key_L, Qt.ControlModifier)
    qtbot.keyClicks(widget.note, "typed during three")
    graph.send(widget, graph.status(third, state="aborted", finish_reason="aborted: operator stop"))
    fourth = ctl.start("t2", layout=0, seed=9, variant="proprio_verifier")  # ended elsewhere, a new one began
    graph.send(widget, graph.status(fourth))
    press(qtbot, widget, Qt.Key_Return, Qt.ControlModifier)
    assert store.load(third).labels.note == "typed during three"
    assert store.load(fourth).labels.note == "" and widget.note.text() == ""


def test_ctrl_d_labels_the_current_subgoal_never_an_old_selection(make_panel, qtbot, tmp_path):
    graph, ctl, widget = make_panel(two_entry_plan())
    first = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(first, plan_index=1, step=30))
    graph.finish(widget, first)
    press(qtbot, widget, Qt.Key_D, Qt.ControlModifier)  # over, nothing selected: nothing is labelled
    assert ctl.record.labels.subgoals == {}
    assert "select the subgoal" in list(ctl.model.log)[-1]
    widget.table.selectRow(1)
    press(qtbot, widget, Qt.Key_D, Qt.ControlModifier)
    assert ctl.record.labels.subgoals == {"1": "done"}

    # the next episode, at step 1, subgoal 0 current; the old selection was on row 1
    second = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(second, plan_index=0, step=1))
    assert not widget.table.selectionModel().selectedRows()
    widget.table.selectRow(1)  # even a row selected now: while running, the keys label the current subgoal
    press(qtbot, widget, Qt.Key_N, Qt.ControlModifier)
    store = EpisodeRecordStore(tmp_path / "lab")
    assert store.load(second).labels.subgoals == {"0": "not_done"}
    assert store.load(first).labels.subgoals == {"1": "done"}

    # a label for an episode the panel has left is refused, not moved to the one on screen
    assert not ctl.label_subgoal(0, "done", episode_id=first)
    assert store.load(second).labels.subgoals == {"0": "not_done"}


def test_an_aborted_episode_runs_again_and_is_not_a_finished_entry(make_panel, qtbot, tmp_path):
    graph, ctl, widget = make_panel(two_entry_plan())
    first = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(first, step=2))
    press(qtbot, widget, Qt.Key_F7)
    assert graph.commands[-1].command == "abort"  # no abort service: the command topic
    graph.finish(widget, first, reason="aborted: operator abort", success=False)
    assert widget.progress.text() == "lab: 0/2 done" and widget.start_button.isEnabled()
    again = start_next(qtbot, graph, widget)
    a, b = (next(c for c in graph.commands if c.episode_id == x) for x in (first, again))
    assert (a.task_id, a.layout, a.seed) == (b.task_id, b.layout, b.seed) == ("t2", 0, 5)
    graph.send(widget, graph.status(again))
    graph.finish(widget, again)
    assert widget.progress.text() == "lab: 1/2 done" and widget.seed_spin.value() == 6
    # an operator stop (F6) ends an episode that counts
    third = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(third))
    press(qtbot, widget, Qt.Key_F6)
    graph.finish(widget, third, reason="aborted: operator stop", success=False)
    assert widget.progress.text() == "lab: 2/2 done — complete" and not widget.start_button.isEnabled()
    store = EpisodeRecordStore(tmp_path / "lab")
    assert store.load(first).void and not store.load(again).void and store.load(third).counts


def test_f5_without_an_orchestrator_warns_and_sends_nothing(qtbot, tmp_path):
    graph = ScriptedGraph()
    ctl = PanelController(graph, EpisodeRecordStore(tmp_path), two_entry_plan())
    widget = OperatorPanelWidget(ctl, graph, refresh_ms=3_600_000)
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    widget.take_keyboard()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not None)
    assert widget.headline.text().startswith("NO ORCHESTRATOR")
    press(qtbot, widget, Qt.Key_F5)
    assert graph.commands == [] and "START NOT SENT" in widget.log.toPlainText()
    graph.send(widget, EpisodeStatus(episode_id="", state="idle"))
    assert widget.headline.text().startswith("orchestrator ready")
    press(qtbot, widget, Qt.Key_F5)
    assert len(graph.commands) == 1


def test_the_panel_fits_a_1280_by_720_screen(make_panel, qtbot):
    graph, ctl, widget = make_panel(EvaluationPlan.parse({
        "schema_version": 1, "name": "ab", "episodes": 1, "compare": list(VARIANTS), "tasks": [{"task": "t2"}]}))
    episode = start_next(qtbot, graph, widget)
    graph.send(widget, graph.status(episode, plan_index=1))
    hint = widget.minimumSizeHint()
    assert hint.width() <= FITS[0] and hint.height() <= FITS[1], hint
    widget.resize(*FITS)
    qtbot.waitUntil(lambda: widget.scroll.viewport().width() > 0)
    assert not widget.scroll.horizontalScrollBar().isVisible(), widget.content.minimumSizeHint()


def test_a_blind_session_shows_and_writes_only_a_and_b_until_it_closes(make_panel, qtbot, tmp_path):
    plan = EvaluationPlan.parse({"schema_version": 1, "name": "ab", "episodes": 2, "seed": 3, "order_seed": 11,
                                 "compare": [{"variant": v} for v in VARIANTS], "tasks": [{"task": "t2"}]})
    graph, ctl, widget = make_panel(plan)
    lab = tmp_path / "lab"

    def nothing_names_a_system():
        shown = "\n".join([widget.log.toPlainText(), widget.headline.text(), widget.next_system.text(),
                           widget.ab_state.text()])
        written = "\n".join(p.read_text() for p in lab.rglob("*.json"))
        return not any(v in shown or v in written for v in VARIANTS)

    orders = pair_orders(11, 2)
    sent = []
    for pair in range(2):
        for arm in ("A", "B"):
            assert widget.next_system.text() == f"{arm} (pair {pair})" and not widget.variant_combo.isVisible()
            episode = start_next(qtbot, graph, widget)
            sent.append(graph.commands[-1].variant)
            assert sent[-1] == VARIANTS[orders[pair]["AB".index(arm)]]
            graph.send(widget, graph.status(episode))
            assert f"system {arm}" in widget.headline.text()
            graph.finish(widget, episode, success=(arm == "A"))
            press(qtbot, widget, Qt.Key_1 if arm == "A" else Qt.Key_2, Qt.ControlModifier)
            assert nothing_names_a_system()
        # the next pair waits for the preference
        if pair == 0:
            before = len(graph.commands)
            press(qtbot, widget, Qt.Key_F5)
            assert len(graph.commands) == before and "preference" in list(ctl.model.log)[-1]
        press(qtbot, widget, Qt.Key_R, Qt.AltModifier)
        qtbot.keyClicks(widget.reason, "A placed the spoon gently")
        press(qtbot, widget, Qt.Key_A, Qt.AltModifier)
        assert widget.preference_buttons["A"].isChecked()
        if pair == 0:
            assert nothing_names_a_system() and not ABSessionStore(lab, "ab").closed
    store = ABSessionStore(lab, "ab")
    assert store.closed and not widget.start_button.isEnabled()
    key = read_key(store.key_path)
    for pair in range(2):
        p = key["pairs"][str(pair)]
        assert [p["A"]["variant"], p["B"]["variant"]] == [VARIANTS[i] for i in orders[pair]]
        assert p["preference"] == "A" and p["complete"]
        assert store.load_pair(pair).reason == "A placed the spoon gently"
    assert key["order_seed"] == 11 and key["systems"] == [{"variant": v} for v in VARIANTS]
    assert "pair 1: A = " in widget.log.toPlainText()  # revealed once closed
    for record in EpisodeRecordStore(lab).records():
        assert record.plan_entry["ab"]["arm"] in ("A", "B") and "variant" not in record.plan_entry
        assert record.result["variant"] in ("A", "B") and record.status["variant"] in ("A", "B")
    assert json.loads(store.pair_path(0).read_text())["episodes"].keys() == {"A", "B"}
