"""The ``ladder-ros`` command: one subcommand per job.

Each subcommand lives in its own module that exposes ``register(subparsers)``; the module is
imported only when its subcommand runs, so ``ladder-ros trigger-replay`` never imports MuJoCo,
rclpy or transformers.

Ctrl-C (SIGINT) always ends a command the same way, a clean stop: a shell starts a background job
(``cmd &``, ``nohup``) with SIGINT ignored and Python then keeps ignoring it, so ``kill -INT`` from a
supervisor or a test would do nothing; :func:`interruptible` gives such a process Python's Ctrl-C
back (``ros2 launch`` installs its SIGINT handler unconditionally too).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

from ladder_ros.core.errors import LadderError

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sim-eval": ("ladder_ros.evaluation.sim_eval", "evaluate orchestrator variants on a simulated task suite"),
    "trigger-replay": ("ladder_ros.evaluation.trigger_replay", "replay a gripper trace through the trigger"),
    "vlm-bench": ("ladder_ros.evaluation.vlm_bench", "score a VLM backend on the offline benchmark"),
    "up": ("ladder_ros.bringup.up", "start a graph's nodes as processes (no ros2 launch needed)"),
    "run": ("ladder_ros.bringup.run", "run episodes on a graph in simulation and print the results"),
    "parity": ("ladder_ros.evaluation.parity", "check that the ROS graph reproduces the in-process loop"),
    "rehearse": ("ladder_ros.evaluation.rehearsal",
                 "run episodes of the robot graph on the wall clock against a simulated robot, timed"),
    "day": ("ladder_ros.evaluation.day.command", "run an evaluation plan unattended, in randomised blocks, resumable"),
    "recording": ("ladder_ros.bringup.recording", "inspect or recover an episode recording (rosbag2 MCAP)"),
    "panel": ("ladder_ros.panel.app", "the operator panel (episodes, labels, robot safety)"),
    "report": ("ladder_ros.evaluation.report_render",
               "the paper's tables over recorded episodes (Markdown, PNG, HTML)"),
    "export": ("ladder_ros.evaluation.lerobot_export", "recorded episodes as a dataset (LeRobot v3.0)"),
    "calibrate": ("ladder_ros.camera.calibrate", "camera calibration: ChArUco intrinsics, eye-to-hand, check"),
}


def _build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="ladder-ros", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in SUBCOMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser, parser.parse_args(argv)


def interruptible() -> None:
    """SIGINT raises ``KeyboardInterrupt`` here even where this process was started with it ignored (a
    background job); a handler someone installed is left alone, and so is a call from another thread."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    interruptible()
    parser, args = _build_parser(argv)
    if not getattr(args, "command", None) or not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except LadderError as exc:
        print(f"ladder-ros {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ladder-ros {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
