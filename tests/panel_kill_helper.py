"""A panel process for the kill test: it labels the running episode through its own buttons, says so, and
waits to be killed (tests/test_panel_graph.py). Arguments: those of ``ladder-ros panel``."""

import os
import sys
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(argv):
    import rclpy
    from python_qt_binding.QtCore import Qt
    from python_qt_binding.QtTest import QTest
    from python_qt_binding.QtWidgets import QApplication, QToolButton
    from rclpy.executors import SingleThreadedExecutor

    from ladder_ros.panel.app import build_panel, parse_plugin_args

    app = QApplication(["panel_kill_helper"])
    rclpy.init()
    node = rclpy.create_node("operator_panel_to_kill")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    bridge, controller, widget = build_panel(node, parse_plugin_args(argv))
    widget.show()
    deadline = time.monotonic() + 120
    while not (controller.model.running and controller.record is not None and controller.model.plan):
        if time.monotonic() > deadline:
            print("NO RUNNING EPISODE", flush=True)
            return 1
        app.processEvents()
        time.sleep(0.02)
    app.processEvents()
    QTest.mouseClick(widget.table.cellWidget(0, 5).findChild(QToolButton, "label_0_done"), Qt.LeftButton)
    QTest.mouseClick(widget.episode_buttons["partial"], Qt.LeftButton)
    widget.note.setText("gripper slipped once")
    QTest.keyClick(widget.note, Qt.Key_Return)
    labels = controller.record.labels
    print(f"LABELLED {labels.episode_id} {labels.revision}", flush=True)
    while True:  # until killed
        app.processEvents()
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
