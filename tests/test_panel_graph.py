"""The operator panel driven by pytest-qt, offscreen, against a running simulated graph (nodes as processes).

Start an episode from the evaluation plan, see the subgoal switch and the VLM's verdict, label every
subgoal and the episode, finish the labels; start the next one and abort it from the keyboard (void: the
plan entry is offered again); the labels are in the episode's record file and in its MCAP recording, both
in the one lab folder. A panel killed (SIGKILL) in the
middle of an episode loses no label it made, and a new panel shows them. The robot buttons against a
stand-in driver. Screenshots go to ``$LADDER_PANEL_SCREENSHOTS`` (copies under docs/panel/).
"""

import os
import select
import signal
import subprocess
import sys
import threading
import time
from argparse import Namespace
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/ladder-qt-{os.getuid()}")
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
pytest.importorskip("pytestqt", reason="needs pytest-qt and PyQt5 (requirements/operator.txt)")

import rclpy  # noqa: E402
import yaml  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue  # noqa: E402
from python_qt_binding.QtCore import Qt  # noqa: E402
from python_qt_binding.QtWidgets import QToolButton  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from ladder_ros.interface_conversions import recorded_document  # noqa: E402

from ladder_ros.bringup.graph import load_graph  # noqa: E402
from ladder_ros.recording.bag import read_bag  # noqa: E402
from ladder_ros.bringup.session import GraphSession  # noqa: E402
from ladder_ros.messages import EpisodeLabels  # noqa: E402
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.runtime.endpoints import publisher  # noqa: E402
from ladder_ros.panel.app import build_panel  # noqa: E402
from ladder_ros.panel.records import EpisodeRecordStore  # noqa: E402
from ladder_ros.panel.widget import FITS  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
EPISODE_S = 300  # upper bound for one simulated episode on a loaded 2-core machine
TASK = "kitchen_single_2"


def screenshot(widget, name, tmp_path):
    folder = Path(os.environ.get("LADDER_PANEL_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    assert widget.grab().save(str(path))
    return path


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    out = tmp_path_factory.mktemp("panel_graph")
    description = load_graph("widowx")
    overrides = {"sim_bridge": {"render": True, "image_size": 192},
                 "episode_recorder": {"output_dir": str(out / "recordings")}}
    launches = description.launches("sim", overrides=overrides, work_dir=out)
    with GraphSession(description, launches, out / "logs", startup_timeout_s=180.0) as session:
        session.out = out
        session.namespace = description.namespace
        plan = out / "plan.yaml"
        plan.write_text(yaml.safe_dump({"schema_version": 1, "name": "lab", "episodes": 2, "seed": 3,
                                        "variants": ["proprio_verifier"], "tasks": [{"task": TASK}]}))
        session.plan = plan
        yield session


class Panel:
    """A panel on its own node, spun in a thread as rqt and ``ladder-ros panel`` do."""

    def __init__(self, qtbot, namespace, out, plan=None):
        self.node = rclpy.create_node(f"operator_panel_{int(time.monotonic() * 1000)}")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        args = Namespace(namespace=namespace, out=str(out), plan=str(plan) if plan else None, operator="tester",
                         depth_topic="camera/depth/image_raw")
        self.bridge, self.controller, self.widget = build_panel(self.node, args)
        qtbot.addWidget(self.widget)
        self.widget.resize(*FITS)
        self.widget.show()
        self.widget.take_keyboard()

    @property
    def model(self):
        return self.controller.model

    def close(self):
        self.widget.close_panel()
        self.bridge.close()
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.fixture
def panel_factory(qtbot):
    panels = []

    def make(namespace, out, plan=None):
        panels.append(Panel(qtbot, namespace, out, plan))
        return panels[-1]
    yield make
    for p in panels:
        p.close()


def label_button(widget, row, label):
    return widget.table.cellWidget(row, 5).findChild(QToolButton, f"label_{row}_{label}")


def bag_labels(bag, namespace):
    topic = f"/{namespace.strip('/')}/operator/labels"
    _, decoded = read_bag(bag, [topic])
    return [recorded_document(m, EpisodeLabels) for m in decoded[topic]]


def wait_closed(qtbot, bag):
    qtbot.waitUntil(lambda: (bag / "metadata.yaml").is_file(), timeout=60_000)


def test_panel_runs_an_episode_labels_it_and_aborts_the_next(graph, panel_factory, qtbot, tmp_path):
    out = graph.out  # the lab folder: the recorder writes out/recordings, the panel out/episodes
    panel = panel_factory(graph.namespace, out, graph.plan)
    widget, model = panel.widget, panel.model
    qtbot.waitUntil(lambda: model.status is not None, timeout=30_000)
    assert widget.task_edit.text() == TASK and widget.seed_spin.value() == 3  # the plan's next episode
    assert widget.progress.text() == "lab: 0/2 done"
    assert widget.safety.text() == "no driver" and not widget.estop_button.isEnabled()

    qtbot.mouseClick(widget.start_button, Qt.LeftButton)
    shots = {}

    def running_with_a_verdict():
        if model.verdicts and model.running and "verdict" not in shots and panel.bridge.frames:
            widget.refresh()
            shots["verdict"] = screenshot(widget, "panel_running.png", tmp_path)
        return model.over and model.episode_id.startswith("lab-0000")
    qtbot.waitUntil(running_with_a_verdict, timeout=EPISODE_S * 1000)
    episode_id = model.episode_id
    log = "\n".join(model.log)
    assert "subgoal 0 started" in log and "subgoal 1 started" in log  # the switch
    assert "VLM verdict on subgoal 0: 1/1 complete [oracle]" in log
    assert widget.table.item(0, 4).text() == "1/1 complete" and widget.table.item(0, 2).text() == "completed"
    assert panel.bridge.frames > 0 and widget.camera.pixmap() is not None
    assert model.status.result["success"] is True

    # label next to the verdict: each subgoal, the episode, a note, then done
    qtbot.mouseClick(label_button(widget, 0, "done"), Qt.LeftButton)
    qtbot.mouseClick(label_button(widget, 1, "done"), Qt.LeftButton)
    qtbot.mouseClick(widget.episode_buttons["success"], Qt.LeftButton)
    widget.note.setText("clean run")
    qtbot.keyClick(widget.note, Qt.Key_Return)
    screenshot(widget, "panel_labelled.png", tmp_path)
    qtbot.mouseClick(widget.labels_done, Qt.LeftButton)
    record = EpisodeRecordStore(out).load(episode_id)
    assert record.labels.subgoals == {"0": "done", "1": "done"} and record.labels.episode == "success"
    assert record.labels.note == "clean run" and record.labels.final and record.labels.operator == "tester"
    assert record.result["success"] is True and record.plan_entry["key"] == "kitchen_single_2/proprio_verifier/e0/l0/s3"
    assert record.verdicts and record.verdicts[0]["count"] == 1

    bag = graph.out / "recordings" / episode_id
    wait_closed(qtbot, bag)  # the recorder closed the bag once the labels were final
    in_bag = bag_labels(bag, graph.namespace)
    assert in_bag and in_bag[-1] == record.labels

    # the next episode of the plan, aborted from the keyboard
    qtbot.waitUntil(lambda: widget.start_button.isEnabled(), timeout=10_000)
    assert widget.progress.text() == "lab: 1/2 done" and widget.seed_spin.value() == 4
    qtbot.keyClick(widget, Qt.Key_F5)
    qtbot.waitUntil(lambda: model.running and model.episode_id.startswith("lab-0001"), timeout=60_000)
    qtbot.keyClick(widget, Qt.Key_F7)
    qtbot.waitUntil(lambda: model.over and model.status.result is not None, timeout=60_000)
    assert model.status.state == "aborted" and model.status.finish_reason == "aborted: operator abort"
    qtbot.keyClick(widget, Qt.Key_2, Qt.ControlModifier)  # failure
    qtbot.keyClick(widget, Qt.Key_Return, Qt.ControlModifier)  # labels done
    second = EpisodeRecordStore(out).load(model.episode_id)
    assert second.labels.episode == "failure" and second.labels.final
    assert second.result["finish_reason"] == "aborted: operator abort" and second.void
    # void: the entry is not done, and F5 would run it again (same task, layout and seed)
    assert widget.progress.text() == "lab: 1/2 done" and widget.start_button.isEnabled()
    assert widget.seed_spin.value() == 4
    screenshot(widget, "panel_aborted.png", tmp_path)
    wait_closed(qtbot, graph.out / "recordings" / model.episode_id)
    assert bag_labels(graph.out / "recordings" / model.episode_id, graph.namespace)[-1].episode == "failure"


def test_killing_the_panel_mid_episode_loses_no_label(graph, panel_factory, qtbot):
    out = graph.out / "panel_killed"
    client = graph.client
    episode_id = client.start_episode(TASK, variant="proprio_verifier", layout=1, seed=11)
    client.spin_until(graph.executor, lambda: client.status.episode_id == episode_id and client.status.step > 5,
                      60, "the episode to run")
    graph.processes.signal("sim_bridge", signal.SIGSTOP)  # hold the episode mid-way (lockstep: nothing steps)
    helper = None
    try:
        helper = subprocess.Popen([sys.executable, str(REPO / "tests" / "panel_kill_helper.py"), "--namespace",
                                   graph.namespace, "--out", str(out), "--operator", "first"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        line, deadline = "", time.monotonic() + 120
        while not line.startswith(("LABELLED", "NO RUNNING")) and time.monotonic() < deadline:
            if select.select([helper.stdout], [], [], 1.0)[0]:
                line = helper.stdout.readline()
                if not line and helper.poll() is not None:
                    break
        assert line.startswith("LABELLED"), f"the panel process did not label: {line!r}"
        _, labelled_id, revision = line.split()
        assert labelled_id == episode_id
        helper.kill()  # SIGKILL: no chance to clean up
        helper.wait(timeout=20)
        assert client.status.state == "running"  # still mid-episode

        on_disk = EpisodeRecordStore(out).load(episode_id)
        assert on_disk.labels.revision == int(revision)
        assert on_disk.labels.subgoals == {"0": "done"} and on_disk.labels.episode == "partial"
        assert on_disk.labels.note == "gripper slipped once"

        # a new panel shows the labels so far, next to the running episode
        panel = panel_factory(graph.namespace, out)
        qtbot.waitUntil(lambda: panel.model.labels is not None and panel.model.labels.revision == int(revision),
                        timeout=30_000)
        qtbot.waitUntil(lambda: label_button(panel.widget, 0, "done") is not None
                        and label_button(panel.widget, 0, "done").isChecked(), timeout=10_000)
        assert panel.widget.episode_buttons["partial"].isChecked()
        assert panel.widget.note.text() == "gripper slipped once"
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
        graph.processes.signal("sim_bridge", signal.SIGCONT)
    client.spin_until(graph.executor, lambda: client.status.episode_id == episode_id
                      and client.status.result is not None, EPISODE_S, "the episode to end")
    qtbot.waitUntil(lambda: panel.model.over, timeout=30_000)
    panel.controller.finish_labels()
    bag = graph.out / "recordings" / episode_id
    wait_closed(qtbot, bag)
    in_bag = bag_labels(bag, graph.namespace)
    assert any(labels.revision == int(revision) and labels.subgoals == {"0": "done"} for labels in in_bag)
    assert in_bag[-1].final


class StandInDriver:
    """The drivers' safety interface, as docs/drivers.md defines it, with nothing behind it."""

    def __init__(self, node):
        self.node, self.armed, self.estop, self.calls = node, False, False, []
        self.state_pub = publisher(node, DiagnosticStatus, topics.SAFETY_STATE)
        node.create_service(SetBool, topics.ARM_SERVICE, self.on_arm)
        node.create_service(Trigger, topics.ESTOP_SERVICE, self.on_estop)
        node.create_service(Trigger, topics.ESTOP_RELEASE_SERVICE, self.on_release)
        self.publish()

    def publish(self):
        level = DiagnosticStatus.ERROR if self.estop else (DiagnosticStatus.OK if self.armed else DiagnosticStatus.WARN)
        self.state_pub.publish(DiagnosticStatus(level=level, name="stand_in_driver", message="", values=[
            KeyValue(key="armed", value=str(self.armed).lower()), KeyValue(key="estop", value=str(self.estop).lower()),
            KeyValue(key="interventions", value="0")]))

    def on_arm(self, request, response):
        self.calls.append(("arm", request.data))
        response.success = not (request.data and self.estop)
        response.message = "e-stop latched: release it first" if not response.success else ""
        if response.success:
            self.armed = request.data
        self.publish()
        return response

    def on_estop(self, request, response):
        self.calls.append("estop")
        self.estop, self.armed = True, False
        response.success = True
        self.publish()
        return response

    def on_release(self, request, response):
        self.calls.append("release")
        self.estop = False
        response.success = True
        self.publish()
        return response


def test_robot_buttons_follow_the_driver(graph, panel_factory, qtbot, tmp_path):
    panel = panel_factory("/standin", tmp_path / "panel")
    widget = panel.widget
    qtbot.wait(300)
    assert widget.safety.text() == "no driver" and not widget.arm_button.isEnabled()
    driver_node = rclpy.create_node("stand_in_driver", namespace="/standin")
    driver = StandInDriver(driver_node)
    executor = SingleThreadedExecutor()
    executor.add_node(driver_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        qtbot.waitUntil(lambda: widget.arm_button.isEnabled(), timeout=30_000)
        qtbot.waitUntil(lambda: widget.safety.text() == "disarmed (dry run)", timeout=10_000)
        qtbot.mouseClick(widget.arm_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: widget.safety.text() == "ARMED", timeout=10_000)
        qtbot.keyClick(widget, Qt.Key_F12)
        qtbot.waitUntil(lambda: widget.safety.text() == "E-STOP latched", timeout=10_000)
        screenshot(widget, "panel_estop.png", tmp_path)
        qtbot.mouseClick(widget.arm_button, Qt.LeftButton)  # refused while latched
        qtbot.waitUntil(lambda: any("robot/arm: REFUSED" in line for line in panel.model.log), timeout=10_000)
        qtbot.mouseClick(widget.release_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: widget.safety.text() == "disarmed (dry run)", timeout=10_000)
        assert driver.calls == [("arm", True), "estop", ("arm", True), "release"]
    finally:
        executor.shutdown()
        driver_node.destroy_node()
    qtbot.waitUntil(lambda: widget.safety.text() == "no driver", timeout=30_000)
    assert not widget.estop_button.isEnabled()


def test_docs_screenshots_exist():
    for name in ("panel_running.png", "panel_labelled.png", "panel_ab.png"):
        assert (REPO / "docs" / "panel" / name).is_file(), f"docs/panel/{name}: copy it from a test run"
