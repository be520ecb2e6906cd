"""The operator panel widget (python_qt_binding, so the same widget is an rqt plugin and a window).

It shows the instruction, the plan with each subgoal's state, tries and the VLM's verdict beside the
operator's label, the live camera (and depth when published), the event log with the VLM's replies,
the next episode of the evaluation plan, the robot's safety state and, in a blind A/B session, the pair and
the preference. Every button has a keyboard shortcut (:data:`SHORTCUTS`). All logic is in
:class:`~ladder_ros.panel.controller.PanelController`; a timer drains the bridge's inbox into it and
redraws what changed, all in the GUI thread. Every label, note and preference carries the episode the
panel showed when the key was pressed, so it can never land on an episode that arrived since: the note
field and the row selection belong to the episode on screen and are reset when the next one arrives,
and Ctrl+D / Ctrl+N label the current subgoal while an episode runs (the selected row only once it is
over). Everything sits in a scroll area, so the panel fits a 1280×720 screen (:data:`FITS`).
"""

from __future__ import annotations

import queue

import numpy as np
from python_qt_binding.QtCore import Qt, QTimer
from python_qt_binding.QtGui import QColor, QFont, QImage, QKeySequence, QPixmap
from python_qt_binding.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QShortcut,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ladder_ros.core.orchestrator import Variant
from ladder_ros.messages import DONE, FAILURE, NOT_DONE, PARTIAL, SUCCESS
from ladder_ros.panel.bridge import dispatch
from ladder_ros.panel.controller import PanelController

# action -> key sequence; shown on the buttons' tooltips and in docs/operator.md
SHORTCUTS = {
    "start": "F5", "stop": "F6", "abort": "F7", "arm": "F9", "disarm": "F10", "estop": "F12",
    "release": "Shift+F12", "done": "Ctrl+D", "not_done": "Ctrl+N", "success": "Ctrl+1", "failure": "Ctrl+2",
    "partial": "Ctrl+3", "note": "Ctrl+L", "labels_done": "Ctrl+Return", "skip": "Ctrl+K",
    "prefer_a": "Alt+A", "prefer_b": "Alt+B", "prefer_tie": "Alt+T", "reason": "Alt+R",
    "close_session": "Ctrl+Shift+E",
}
FITS = (1280, 720)  # the smallest screen the panel is laid out for (a 768-px laptop less its task bar)
LABEL_COLOURS = {"done": "#2e7d32", "not_done": "#c62828", "success": "#2e7d32", "failure": "#c62828",
                 "partial": "#ef6c00"}
STATE_COLOURS = {"current": "#fff3c4", "completed": "#d7f5d7", "advanced": "#ffe0cc", "pending": "#ffffff"}
COLUMNS = ("#", "subgoal", "state", "tries", "VLM verdict", "operator label")
IMAGE_WIDTH = 320  # px the camera view is scaled to
LOG_MIN_HEIGHT = 90  # px: a few lines of the event log stay visible
TABLE_MIN_HEIGHT = 110  # px: the header and three subgoals


def rgb_to_pixmap(image: np.ndarray, width: int = IMAGE_WIDTH) -> QPixmap:
    arr = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = arr.shape[:2]
    qimage = QImage(arr.data, w, h, 3 * w, QImage.Format_RGB888).copy()  # copy: arr may go away
    # within width x 3/4 width (a 4:3 box), keeping the image's own aspect
    return QPixmap.fromImage(qimage).scaled(width, width * 3 // 4, Qt.KeepAspectRatio, Qt.SmoothTransformation)


def depth_to_rgb(depth_m: np.ndarray) -> np.ndarray:
    """Depth in metres as a grey-to-blue picture: near is bright; no depth is black."""
    valid = np.isfinite(depth_m)
    out = np.zeros(depth_m.shape + (3,), dtype=np.uint8)
    if valid.any():
        lo, hi = np.percentile(depth_m[valid], [2, 98])
        t = np.clip((depth_m - lo) / max(hi - lo, 1e-6), 0.0, 1.0)
        t[~valid] = 1.0
        shade = (255 * (1.0 - t)).astype(np.uint8)
        out[..., 0], out[..., 1], out[..., 2] = shade // 2, shade, np.maximum(shade, 60)
        out[~valid] = 0
    return out


class OperatorPanelWidget(QWidget):
    """The panel; ``controller`` decides, ``bridge`` (a :class:`~ladder_ros.panel.bridge.PanelBridge` or
    anything with ``inbox``, ``latest_image`` and ``latest_depth``) brings the graph's messages."""

    def __init__(self, controller: PanelController, bridge, parent: QWidget | None = None, refresh_ms: int = 50):
        super().__init__(parent)
        self.setObjectName("LadderOperatorPanel")
        self.setWindowTitle("LADDER operator panel")
        self.controller = controller
        self.bridge = bridge
        self._shown_image_stamp: int | None = None
        self._shown_depth_stamp: int | None = None
        self._log_shown = 0
        self._shown_episode = ""  # the episode the panel shows: what every label and note is for
        self._shown_current: int | None = None  # the subgoal drawn as current (None: none)
        self._build()
        self._bind_shortcuts()
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.poll)
        self.timer.start(refresh_ms)
        self.refresh()

    # ------------------------------------------------------------------ layout
    def _button(self, text: str, action: str, slot, style: str = "") -> QPushButton:
        button = QPushButton(f"{text}  [{SHORTCUTS[action]}]" if action in SHORTCUTS else text)
        button.setObjectName(f"button_{action}")
        button.clicked.connect(slot)
        if style:
            button.setStyleSheet(style)
        return button

    def _build(self) -> None:
        """The panel's areas, top to bottom, in a scroll area so that it fits :data:`FITS`."""
        root = self._build_scroll_area()
        self._build_heading(root)
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self._build_views())
        split.addWidget(self._build_plan_and_log())
        split.setStretchFactor(1, 1)
        root.addWidget(split, 1)

        # next episode, episode control and robot safety
        controls = QGridLayout()
        controls.addWidget(self._build_next_episode_box(), 0, 0, 1, 2)
        controls.addWidget(self._build_episode_box(), 1, 0)
        controls.addWidget(self._build_robot_box(), 1, 1)
        root.addLayout(controls)

        # the episode's label next to what the orchestrator (and, in simulation, the score) says; beside it,
        # in a blind session, the pair and the preference
        judge_row = QHBoxLayout()
        judge_row.addWidget(self._build_label_box(), 3)
        judge_row.addWidget(self._build_ab_box(), 2)
        root.addLayout(judge_row)

    def _build_scroll_area(self) -> QVBoxLayout:
        """The scroll area that fills the panel; returns the layout of what scrolls in it."""
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.scroll = QScrollArea()
        self.scroll.setObjectName("panel_scroll")
        self.scroll.setWidgetResizable(True)
        self.content = QWidget()
        self.scroll.setWidget(self.content)
        outer.addWidget(self.scroll)
        root = QVBoxLayout(self.content)
        root.setSpacing(4)
        return root

    def _build_heading(self, root: QVBoxLayout) -> None:
        """The headline, the instruction and the subgoal the policy follows, one above the other."""
        self.headline = QLabel()
        self.headline.setObjectName("headline")
        # one line, clipped at the window's edge (its end is the episode id; the tooltip holds it whole)
        self.headline.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        bold = QFont()
        bold.setBold(True)
        self.headline.setFont(bold)
        self.instruction = QLabel()
        self.instruction.setWordWrap(True)
        self.instruction.setObjectName("instruction")
        self.current = QLabel()
        self.current.setWordWrap(True)
        self.current.setObjectName("current_subgoal")
        root.addWidget(self.headline)
        root.addWidget(self.instruction)
        root.addWidget(self.current)

    def _build_views(self) -> QWidget:
        """The live camera, and the depth image under it once one arrives."""
        views = QWidget()
        vbox = QVBoxLayout(views)
        vbox.setContentsMargins(0, 0, 0, 0)
        self.camera = QLabel("no camera image yet")
        self.camera.setObjectName("camera")
        self.camera.setMinimumSize(IMAGE_WIDTH, IMAGE_WIDTH * 3 // 4)
        self.camera.setAlignment(Qt.AlignCenter)
        self.camera.setStyleSheet("background: #222; color: #aaa;")
        self.depth = QLabel()
        self.depth.setObjectName("depth")
        self.depth.setAlignment(Qt.AlignCenter)
        self.depth.hide()  # shown once a depth image arrives
        vbox.addWidget(self.camera)
        vbox.addWidget(self.depth)
        vbox.addStretch(1)
        return views

    def _build_plan_and_log(self) -> QSplitter:
        """The plan table over the VLM summary and the event log (beside the camera: the log needs no row of
        its own)."""
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("plan_table")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(1, QHeaderView.Stretch)
        for col in (0, 2, 3, 4, 5):
            header.setSectionResizeMode(col, QHeaderView.ResizeToContents)
        right = QSplitter(Qt.Vertical)
        right.addWidget(self.table)
        right.addWidget(self._build_log_box())
        right.setStretchFactor(0, 1)
        right.setStretchFactor(1, 1)
        # the plan and the log take the height that is left, never ask for more (the panel fits FITS)
        self.table.setMinimumHeight(TABLE_MIN_HEIGHT)
        self.table.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Ignored)
        return right

    def _build_log_box(self) -> QWidget:
        """The VLM's latest reply over the event log."""
        self.vlm = QLabel()
        self.vlm.setObjectName("vlm_summary")
        self.vlm.setWordWrap(True)
        log_box = QWidget()
        log_layout = QVBoxLayout(log_box)
        log_layout.setContentsMargins(0, 0, 0, 0)
        log_layout.addWidget(self.vlm)
        self.log = QPlainTextEdit()
        self.log.setObjectName("event_log")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(2000)
        self.log.setMinimumHeight(LOG_MIN_HEIGHT)
        self.log.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Ignored)
        log_layout.addWidget(self.log, 1)
        return log_box

    def _build_next_episode_box(self) -> QGroupBox:
        """The next episode of the plan (task, layout, seed, variant or a blind session's system), its
        progress and the skip button."""
        plan_box = QGroupBox("Next episode")
        plan_row = QHBoxLayout(plan_box)
        self.task_edit = QLineEdit()
        self.task_edit.setObjectName("task")
        self.task_edit.setPlaceholderText("task id")
        self.layout_spin = QSpinBox()
        self.layout_spin.setObjectName("layout")
        self.layout_spin.setRange(0, 9999)
        self.seed_spin = QSpinBox()
        self.seed_spin.setObjectName("seed")
        self.seed_spin.setRange(0, 2**31 - 1)
        self.variant_combo = QComboBox()
        self.variant_combo.setObjectName("variant")
        self.variant_combo.addItems([""] + [v.value for v in Variant])
        self.next_system = QLabel()  # a blind session's arm, in place of the variant
        self.next_system.setObjectName("next_system")
        self.next_system.hide()
        self.progress = QLabel()
        self.progress.setObjectName("plan_progress")
        self.progress.setWordWrap(True)
        for label, widget in (("task", self.task_edit), ("layout", self.layout_spin), ("seed", self.seed_spin),
                              ("variant", self.variant_combo)):
            caption = QLabel(label)
            plan_row.addWidget(caption)
            plan_row.addWidget(widget)
        self.variant_caption = caption  # "system" in a blind session
        plan_row.addWidget(self.next_system)
        plan_row.addWidget(self.progress, 1)
        plan_row.addWidget(self._button("Skip", "skip", self.on_skip))
        return plan_box

    def _build_episode_box(self) -> QGroupBox:
        """Start, stop and abort."""
        episode_box = QGroupBox("Episode")
        episode_row = QHBoxLayout(episode_box)
        self.start_button = self._button("Start", "start", self.on_start, "font-weight: bold;")
        self.stop_button = self._button("Stop", "stop", self.controller.stop)
        self.abort_button = self._button("Abort", "abort", self.controller.abort)
        for b in (self.start_button, self.stop_button, self.abort_button):
            episode_row.addWidget(b)
        return episode_box

    def _build_robot_box(self) -> QGroupBox:
        """The robot's safety state, arming and the e-stop."""
        robot_box = QGroupBox("Robot")
        robot_row = QHBoxLayout(robot_box)
        self.safety = QLabel()
        self.safety.setObjectName("safety_state")
        self.safety.setWordWrap(True)
        self.arm_button = self._button("Arm", "arm", lambda: self.controller.arm(True))
        self.disarm_button = self._button("Disarm (dry run)", "disarm", lambda: self.controller.arm(False))
        self.estop_button = self._button("E-STOP", "estop", self.controller.estop,
                                         "QPushButton:enabled { background: #c00; color: white; font-weight: bold; }")
        self.release_button = self._button("Release e-stop", "release", self.controller.release_estop)
        robot_row.addWidget(self.safety, 1)
        for b in (self.arm_button, self.disarm_button, self.estop_button, self.release_button):
            robot_row.addWidget(b)
        return robot_box

    def _build_label_box(self) -> QGroupBox:
        """The operator's episode label beside the orchestrator's verdict, the note and the label state."""
        label_box = QGroupBox("Operator labels")
        label_grid = QGridLayout(label_box)
        self.verdict = QLabel()
        self.verdict.setObjectName("episode_verdict")
        self.verdict.setWordWrap(True)
        label_grid.addWidget(self.verdict, 0, 0, 1, 4)
        self.episode_buttons: dict[str, QPushButton] = {}
        for col, (label, text) in enumerate(((SUCCESS, "Success"), (FAILURE, "Failure"), (PARTIAL, "Partial"))):
            button = self._button(text, label, lambda _=False, lab=label: self.on_episode_label(lab))
            button.setCheckable(True)
            button.setStyleSheet(f"QPushButton:checked {{ background: {LABEL_COLOURS[label]}; color: white; }}")
            self.episode_buttons[label] = button
            label_grid.addWidget(button, 1, col)
        self.labels_done = self._button("Labels done", "labels_done", self.on_labels_done)
        label_grid.addWidget(self.labels_done, 1, 3)
        self.note = QLineEdit()
        self.note.setObjectName("note")
        self.note.setPlaceholderText(f"note (Enter saves) [{SHORTCUTS['note']}]")
        self.note.returnPressed.connect(self.on_note_entered)
        self.note.editingFinished.connect(self.on_note)
        label_grid.addWidget(self.note, 2, 0, 1, 4)
        self.label_state = QLabel()
        self.label_state.setObjectName("label_state")
        label_grid.addWidget(self.label_state, 3, 0, 1, 4)
        return label_box

    def _build_ab_box(self) -> QGroupBox:
        self.ab_box = QGroupBox("Blind A/B")
        self.ab_box.setObjectName("ab_box")
        grid = QGridLayout(self.ab_box)
        self.ab_state = QLabel()
        self.ab_state.setObjectName("ab_state")
        self.ab_state.setWordWrap(True)
        grid.addWidget(self.ab_state, 0, 0, 1, 3)
        self.preference_buttons: dict[str, QPushButton] = {}
        for col, (preference, text, action) in enumerate((("A", "A better", "prefer_a"), ("B", "B better", "prefer_b"),
                                                          ("tie", "Tie", "prefer_tie"))):
            button = self._button(text, action, lambda _=False, p=preference: self.on_prefer(p))
            button.setCheckable(True)
            button.setStyleSheet("QPushButton:checked { background: #1565c0; color: white; }")
            self.preference_buttons[preference] = button
            grid.addWidget(button, 1, col)
        self.reason = QLineEdit()
        self.reason.setObjectName("reason")
        self.reason.setPlaceholderText(f"why (optional, Enter saves) [{SHORTCUTS['reason']}]")
        self.reason.returnPressed.connect(self.on_reason_entered)
        self.reason.editingFinished.connect(self.on_reason)
        grid.addWidget(self.reason, 2, 0, 1, 3)
        self.close_session_button = self._button("Close session", "close_session", self.on_close_session)
        grid.addWidget(self.close_session_button, 3, 0, 1, 3)
        self._reason_pair: int | None = None
        self.ab_box.setVisible(self.controller.ab is not None)
        return self.ab_box

    def _bind_shortcuts(self) -> None:
        slots = {
            "start": self.on_start, "stop": self.controller.stop, "abort": self.controller.abort,
            "arm": lambda: self.controller.arm(True), "disarm": lambda: self.controller.arm(False),
            "estop": self.controller.estop, "release": self.controller.release_estop,
            "done": lambda: self.on_key_label(DONE), "not_done": lambda: self.on_key_label(NOT_DONE),
            "success": lambda: self.on_episode_label(SUCCESS), "failure": lambda: self.on_episode_label(FAILURE),
            "partial": lambda: self.on_episode_label(PARTIAL), "note": self.note.setFocus,
            "labels_done": self.on_labels_done, "skip": self.on_skip,
            "prefer_a": lambda: self.on_prefer("A"), "prefer_b": lambda: self.on_prefer("B"),
            "prefer_tie": lambda: self.on_prefer("tie"), "reason": self.reason.setFocus,
            "close_session": self.on_close_session,
        }
        self.shortcuts = {}
        for action, keys in SHORTCUTS.items():
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.WidgetWithChildrenShortcut)  # inside rqt too, without stealing others' keys
            shortcut.activated.connect(slots[action])
            self.shortcuts[action] = shortcut
        estop_pause = QShortcut(QKeySequence(Qt.Key_Pause), self)  # a second, hard-to-miss e-stop key
        estop_pause.setContext(Qt.WidgetWithChildrenShortcut)
        estop_pause.activated.connect(self.controller.estop)
        self.shortcuts["estop_pause"] = estop_pause

    def shown_texts(self, log: bool = True) -> list[str]:
        """Every text the panel shows: the window title, its labels', buttons' and fields' texts and placeholders,
        group titles, combo items, every tooltip, the plan table's headers, cells and their tooltips, and (``log``)
        the event log; what a scan for a blind session's secrets reads."""
        texts = [self.windowTitle()]
        for widget in [self, *self.findChildren(QWidget)]:
            texts.append(widget.toolTip())
            if isinstance(widget, (QLabel, QAbstractButton)):
                texts.append(widget.text())
            elif isinstance(widget, QLineEdit):
                texts += [widget.text(), widget.placeholderText()]
            elif isinstance(widget, QGroupBox):
                texts.append(widget.title())
            elif isinstance(widget, QComboBox):
                texts += [widget.itemText(i) for i in range(widget.count())]
            elif isinstance(widget, QPlainTextEdit) and log:
                texts.append(widget.toPlainText())
        for col in range(self.table.columnCount()):
            header = self.table.horizontalHeaderItem(col)
            texts.append(header.text() if header is not None else "")
        for row in range(self.table.rowCount()):
            for col in range(self.table.columnCount()):
                item = self.table.item(row, col)
                if item is not None:
                    texts += [item.text(), item.toolTip()]
        return [t for t in texts if t]

    def take_keyboard(self) -> None:
        """Make the panel's window the active one with the plan table focused, so its keys work at once."""
        self.activateWindow()
        self.raise_()
        self.table.setFocus()

    # ------------------------------------------------------------------ actions
    def on_start(self) -> None:
        if self.controller.plan is not None:
            self.controller.start()
        else:
            task = self.task_edit.text().strip()
            if not task:
                self.controller.model.log.append("name a task to start (or load an evaluation plan)")
            else:
                self.controller.start(task, self.layout_spin.value(), self.seed_spin.value(),
                                      self.variant_combo.currentText())
        self.refresh()

    def on_skip(self) -> None:
        self.controller.skip_entry()
        self.refresh()

    def key_subgoal(self) -> int | None:
        """The subgoal Ctrl+D / Ctrl+N label: while the episode runs, the one drawn as current (whatever row
        is selected); once it is over, the row selected in this episode (the selection is cleared when
        the next episode arrives); None when there is none."""
        if self.controller.model.running:
            return self._shown_current
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def on_key_label(self, label: str) -> None:
        index = self.key_subgoal()
        if index is None:
            self.controller.model.log.append(
                "no subgoal to label: none is current" if self.controller.model.running
                else "the episode is over: select the subgoal to label first (click, or Tab to the plan and Up/Down)")
            self.refresh()
            return
        self.on_subgoal_label(index, label)

    def on_subgoal_label(self, index: int, label: str) -> None:
        labels = self.controller.model.labels
        current = labels.subgoal_label(index) if labels is not None else None
        # a second press takes the label back
        self.controller.label_subgoal(index, None if current == label else label, episode_id=self._shown_episode)
        self.refresh()

    def on_episode_label(self, label: str) -> None:
        labels = self.controller.model.labels
        self.controller.label_episode(None if labels is not None and labels.episode == label else label,
                                      episode_id=self._shown_episode)
        self.refresh()

    def on_note(self) -> None:
        """Save the note for the episode on screen (Enter, or leaving the field)."""
        labels = self.controller.model.labels
        if labels is not None and self.note.text().strip() != labels.note:
            self.controller.set_note(self.note.text(), episode_id=self._shown_episode)
            self.refresh()

    def on_note_entered(self) -> None:
        self.on_note()
        self.table.setFocus()  # Enter leaves the field: the next episode's note starts empty

    def on_labels_done(self) -> None:
        self.on_note()
        self.controller.finish_labels(True, episode_id=self._shown_episode)
        self.refresh()

    def on_prefer(self, preference: str) -> None:
        self.on_reason()  # a reason typed for this pair goes with its preference
        self.controller.prefer(preference, episode_id=self._shown_episode)
        if self.reason.hasFocus():
            self.table.setFocus()
        self.refresh()

    def on_reason(self) -> None:
        pair = self.controller.pair_on_screen()
        if pair is not None and pair.pair == self._reason_pair and self.reason.text().strip() != pair.reason:
            self.controller.set_reason(self.reason.text(), episode_id=self._shown_episode)
            self.refresh()

    def on_reason_entered(self) -> None:
        self.on_reason()
        self.table.setFocus()

    def on_close_session(self) -> None:
        self.controller.close_session()
        self.refresh()

    # ------------------------------------------------------------------ drawing
    def poll(self) -> None:
        """Drain the bridge's inbox into the controller and redraw (GUI thread)."""
        changed = False
        for _ in range(1000):  # bounded: a flood never freezes the GUI
            try:
                kind, payload = self.bridge.inbox.get_nowait()
            except queue.Empty:
                break
            if kind == "status" and payload.episode_id != self.controller.model.episode_id:
                self._keep_typed_text()  # what was typed for the episode on screen stays with it
            dispatch(self.controller, kind, payload)
            changed = True
        self._draw_images()
        if changed:
            self.refresh()
        else:
            self._draw_safety()

    def _draw_images(self) -> None:
        image = self.bridge.latest_image()
        if image is not None and image[0] != self._shown_image_stamp:
            self._shown_image_stamp = image[0]
            self.camera.setPixmap(rgb_to_pixmap(image[1]))
        depth = self.bridge.latest_depth()
        if depth is not None and depth[0] != self._shown_depth_stamp:
            self._shown_depth_stamp = depth[0]
            self.depth.setPixmap(rgb_to_pixmap(depth_to_rgb(depth[1])))
            self.depth.show()

    def _draw_safety(self) -> None:
        model = self.controller.model
        ready = self.controller.driver_ready()
        text = model.safety.text if ready else "no driver"
        if self.safety.text() != text:
            self.safety.setText(text)
            colour = "#c00" if model.safety.estop else ("#070" if model.safety.armed else "#555")
            self.safety.setStyleSheet(f"color: {colour if ready else '#888'}; font-weight: bold;")
        for button in (self.arm_button, self.disarm_button, self.estop_button, self.release_button):
            button.setEnabled(ready)

    def _keep_typed_text(self) -> None:
        """Save a note or reason typed but not yet entered, for the episode (pair) it was typed for."""
        self.on_note()
        if self.controller.ab is not None:
            self.on_reason()

    def _follow_episode(self) -> None:
        """A new episode on screen: the note field, the reason field and the row selection are the previous
        episode's; reset them (and take the focus out of the fields) before anything can be typed for it."""
        model = self.controller.model
        if model.episode_id == self._shown_episode:
            return
        self._shown_episode = model.episode_id
        self.table.clearSelection()
        self.note.setText(model.labels.note if model.labels is not None else "")
        pair = self.controller.pair_on_screen()
        self._reason_pair = pair.pair if pair is not None else None
        self.reason.setText(pair.reason if pair is not None else "")
        if self.note.hasFocus() or self.reason.hasFocus():
            self.table.setFocus()

    def refresh(self) -> None:
        model = self.controller.model
        self._follow_episode()
        self._shown_current = model.status.plan_index if model.running and model.status is not None else None
        self.headline.setText(model.headline())
        self.headline.setToolTip(model.headline())
        self.instruction.setText(f"Instruction: {model.instruction() or '—'}")
        self.current.setText(f"Policy follows: {model.current_subgoal or '— (holding still)'}")
        rows = model.rows()
        if self.table.rowCount() != len(rows):
            self.table.setRowCount(len(rows))
        for row in rows:
            self._set_row(row)
        running = model.running
        self.start_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        self.abort_button.setEnabled(running)
        self._draw_next_episode(running)
        self._draw_labels()
        self._draw_ab()
        self.vlm.setText(f"VLM: {model.vlm_summary()}")
        self._draw_log()
        self._draw_safety()

    def _set_row(self, row) -> None:
        colour = QColor(STATE_COLOURS.get(row.state, "#ffffff"))
        verdict = row.verdict
        verdict_text = "—" if verdict is None else verdict.text
        cells = (str(row.index), row.text, row.state, str(row.attempts), verdict_text)
        for col, text in enumerate(cells):
            item = self.table.item(row.index, col)
            if item is None:
                item = QTableWidgetItem()
                self.table.setItem(row.index, col, item)
            if item.text() != text:
                item.setText(text)
            item.setBackground(colour)
            if col == 4 and verdict is not None:
                item.setToolTip(verdict.raw_reply or verdict.error or "")
        cell = self.table.cellWidget(row.index, 5)
        if cell is None:
            cell = QWidget()
            box = QHBoxLayout(cell)
            box.setContentsMargins(2, 0, 2, 0)
            for label, text in ((DONE, "✓ done"), (NOT_DONE, "✗ not done")):
                button = QToolButton()
                button.setObjectName(f"label_{row.index}_{label}")
                button.setText(text)
                button.setCheckable(True)
                button.setFocusPolicy(Qt.NoFocus)  # keys go to the panel, not to a row's button
                button.setStyleSheet(f"QToolButton:checked {{ background: {LABEL_COLOURS[label]}; color: white; }}")
                button.clicked.connect(lambda _=False, i=row.index, lab=label: self.on_subgoal_label(i, lab))
                box.addWidget(button)
            self.table.setCellWidget(row.index, 5, cell)
        for label in (DONE, NOT_DONE):
            button = cell.findChild(QToolButton, f"label_{row.index}_{label}")
            button.setChecked(row.label == label)
            button.setEnabled(bool(self.controller.record))

    def _draw_next_episode(self, running: bool) -> None:
        ctl = self.controller
        if ctl.plan is None:
            self.progress.setText("no evaluation plan")
            for widget in (self.task_edit, self.layout_spin, self.seed_spin, self.variant_combo):
                widget.setEnabled(not running)
            return
        done, total = ctl.progress()
        entry = ctl.next_entry()
        self.progress.setText(f"{ctl.plan.name}: {done}/{total} done" + ("" if entry else " — complete"))
        for widget in (self.task_edit, self.layout_spin, self.seed_spin, self.variant_combo):
            widget.setEnabled(False)
        self.variant_combo.setVisible(not ctl.plan.blind)  # a blind session never shows the system
        self.next_system.setVisible(ctl.plan.blind)
        self.variant_caption.setText("system" if ctl.plan.blind else "variant")
        if entry is not None:
            self.task_edit.setText(entry.task_id)
            self.layout_spin.setValue(entry.layout)
            self.seed_spin.setValue(entry.seed)
            if entry.blind:
                self.next_system.setText(f"{entry.arm} (pair {entry.pair})")
            else:
                self.variant_combo.setCurrentText(entry.variant)
        else:
            self.task_edit.setText("")
            self.next_system.setText("")
        self.start_button.setEnabled(not running and entry is not None)

    def _draw_labels(self) -> None:
        model = self.controller.model
        labels = model.labels
        result = model.status.result if model.status is not None else None
        if model.status is None or not model.status.episode_id:
            self.verdict.setText("no episode yet")
        elif result is None:
            self.verdict.setText(f"orchestrator: {model.status.state}" + (
                f", on subgoal {model.status.plan_index}" if model.status.plan_index is not None else ""))
        else:
            text = f"orchestrator: {result.get('finish_reason')}"
            if result.get("scored", result.get("simulator")):
                text += (f" · simulator score: {'success' if result.get('success') else 'failure'}, "
                         f"{result.get('subgoals_done')}/{result.get('horizon')} subgoals")
            self.verdict.setText(text)
        for label, button in self.episode_buttons.items():
            button.setChecked(labels is not None and labels.episode == label)
            button.setEnabled(self.controller.record is not None)
        if labels is not None and not self.note.hasFocus() and self.note.text() != labels.note:
            self.note.setText(labels.note)  # another panel's note (the field is not being typed in)
        if labels is None or not labels.revision:
            self.label_state.setText("no labels yet")
        else:
            self.label_state.setText(f"labels saved (revision {labels.revision}"
                                     + (", done" if labels.final else "") + ")")

    def _draw_ab(self) -> None:
        ctl = self.controller
        if ctl.ab is None:
            return
        pair = ctl.pair_on_screen()
        closed = ctl.ab.closed
        if closed:
            text = f"session {ctl.plan.name} closed: the key is written (see the log and the report)"
        elif pair is None:
            text = f"session {ctl.plan.name}: {len(ctl.plan.pairs)} pairs; A runs first, then B"
        else:
            text = (f"pair {pair.pair} of {len(ctl.plan.pairs)} · on screen: {ctl.model.shown_variant or '?'} · "
                    f"preferred: {pair.preference or '—'}")
        self.ab_state.setText(text)
        ready = pair is not None and {"A", "B"} <= set(pair.episodes) and not closed
        for preference, button in self.preference_buttons.items():
            button.setChecked(pair is not None and pair.preference == preference)
            button.setEnabled(ready)
        self.reason.setEnabled(ready)
        self.close_session_button.setEnabled(not closed and not ctl.model.running)

    def _draw_log(self) -> None:
        log = self.controller.model.log
        for line in log.since(self._log_shown):
            self.log.appendPlainText(line)
        self._log_shown = log.total

    def close_panel(self) -> None:
        self.timer.stop()
