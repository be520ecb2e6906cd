"""``ladder-ros panel``: the operator panel as a window of its own (the rqt plugin shows the same widget).

It joins the graph under ``--namespace`` (``/widowx`` by default) in the network-safe environment
(loopback only unless ``--allow-network``), keeps one record file per episode in ``--out``
(``runs/lab/episodes/<episode id>.json``) and runs the episodes of ``--plan`` in order, resuming
where a previous panel on the same ``--out`` stopped. ``runs/lab`` is the lab's one folder: the episode
recorder writes its bags to ``runs/lab/recordings`` by default, so ``ladder-ros report runs/lab`` and
``ladder-ros export runs/lab --format lerobot`` find the labels and the recordings together.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import Sequence

from ladder_ros.core.errors import ConfigError

DEFAULT_OUT = "runs/lab"  # the recorder's default output_dir is DEFAULT_OUT/recordings (nodes/parameters.py)


def add_panel_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="/widowx", help="the graph's namespace (default /widowx)")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"folder of the episode records (default {DEFAULT_OUT}); reuse it to resume a plan")
    parser.add_argument("--plan", default=None, help="evaluation plan YAML (tasks x episodes) to run in order")
    parser.add_argument("--operator", default=os.environ.get("USER", ""), help="who labels (kept with the labels)")
    parser.add_argument("--depth-topic", default="camera/depth/image_raw",
                        help="depth image topic under the namespace (shown when published)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("panel", help="the operator panel (episodes, labels, robot safety)",
                              description=__doc__.split("\n\n")[0])
    add_panel_arguments(p)
    p.add_argument("--allow-network", action="store_true",
                   help="join a graph on other machines (default: loopback only, like ladder-ros up)")
    p.set_defaults(func=run)


def build_panel(node, args: argparse.Namespace):
    """The bridge, controller and widget of one panel on ``node`` (rqt's node or the standalone one)."""
    from ladder_ros.panel.bridge import PanelBridge
    from ladder_ros.panel.controller import PanelController
    from ladder_ros.panel.evaluation_plan import EvaluationPlan
    from ladder_ros.panel.records import EpisodeRecordStore
    from ladder_ros.panel.widget import OperatorPanelWidget

    plan = EvaluationPlan.load(args.plan) if args.plan else None
    bridge = PanelBridge(node, args.namespace, args.depth_topic)
    controller = PanelController(bridge, EpisodeRecordStore(Path(args.out)), plan, operator=args.operator)
    return bridge, controller, OperatorPanelWidget(controller, bridge)


def startup_line(args: argparse.Namespace, controller) -> str:
    """What the standalone panel prints when it starts (a sealed blind session's secrets redacted)."""
    return controller.shown_text(f"ladder-ros panel: graph {args.namespace}, records in {Path(args.out) / 'episodes'}"
                                 + (f", plan {args.plan}" if args.plan else ""))


def parse_plugin_args(argv: Sequence[str]) -> argparse.Namespace:
    """The rqt plugin's arguments (``rqt --standalone ... --args --namespace /franka --plan eval.yaml``)."""
    parser = argparse.ArgumentParser(prog="ladder_ros operator panel")
    add_panel_arguments(parser)
    return parser.parse_args(list(argv))


def run(args: argparse.Namespace) -> int:
    if args.plan and not Path(args.plan).is_file():
        raise ConfigError("evaluation plan not found", source=args.plan)
    from ladder_ros.ros_env import apply_network_safe_environment

    if not args.allow_network:
        apply_network_safe_environment(os.environ)
    import rclpy
    from python_qt_binding.QtWidgets import QApplication
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from ladder_ros.panel.widget import FITS

    app = QApplication.instance() or QApplication(["ladder-ros panel"])
    rclpy.init()
    node = rclpy.create_node("operator_panel")
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        try:
            executor.spin()
        except (ExternalShutdownException, KeyboardInterrupt):
            pass

    try:
        bridge, controller, widget = build_panel(node, args)
        widget.resize(*FITS)
        widget.show()
        widget.take_keyboard()
        thread = threading.Thread(target=spin, name="panel-ros", daemon=True)
        thread.start()
        print(startup_line(args, controller), flush=True)
        code = app.exec_()
        widget.close_panel()
        bridge.close()
        return int(code)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
