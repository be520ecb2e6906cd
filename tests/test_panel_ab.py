"""A blind A/B session of 2 x 6 episodes in simulation, from the command line, with the panel headless.

``ladder-ros up widowx`` runs the graph on the built-in tabletop (its recorder writing into the lab
folder); the operator panel, built as ``ladder-ros panel --plan ab.yaml --out LAB`` builds it and shown
offscreen, runs a plan that compares two orchestrator variants on two tasks, three pairs each, from the
keyboard: F5, the episode label, Ctrl+Return, and after each pair's B a preference (Alt+A / Alt+B /
Alt+T) with a reason. Until the session closes, nothing the panel shows or writes names a variant (the
recorder's bags, the graph's own log, do); then
the panel writes the sealed key, and ``ladder-ros report LAB`` gives both success rates with Wilson
intervals, the difference paired over tasks and the preferences, which the test computes again by hand
from the records and the key.
"""

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/ladder-qt-{os.getuid()}")
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
pytest.importorskip("pytestqt", reason="needs pytest-qt and PyQt5 (requirements/operator.txt)")

import rclpy  # noqa: E402
import yaml  # noqa: E402
from python_qt_binding.QtCore import Qt  # noqa: E402
from python_qt_binding.QtWidgets import QApplication  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402

from ladder_ros.panel.ab_session import ABSessionStore, read_key  # noqa: E402
from ladder_ros.panel.app import build_panel, parse_plugin_args  # noqa: E402
from ladder_ros.panel.records import EpisodeRecordStore  # noqa: E402
from ladder_ros.panel.widget import FITS  # noqa: E402
from ladder_ros.ros_env import apply_network_safe_environment  # noqa: E402
from tests.processes import process_tree, run_tree  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
LADDER = [sys.executable, "-m", "ladder_ros.cli"]
SYSTEMS = ("proprio_verifier", "low_level_policy")  # different enough on these tasks to give a paired difference
TASKS = ("kitchen_single_2", "sorting_split_3")
PAIRS_PER_TASK = 3
EPISODE_S = 300  # upper bound for one simulated episode on a loaded 2-core machine
Z_95 = 1.959963984540054


def wilson(successes, n):
    """The Wilson score interval, written out again from its formula (Wilson 1927)."""
    p, z2 = successes / n, Z_95 ** 2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z_95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_by_hand(per_task_a, per_task_b, draws=10_000, seed=0):
    """Appendix F, by hand: resample the tasks (one suite) with replacement, both systems on the same draw."""
    tasks = sorted(per_task_a)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(tasks), size=(draws, len(tasks)))
    diffs = []
    for draw in picks:
        chosen = [tasks[i] for i in draw]
        sa = sum(per_task_a[t][0] for t in chosen) / sum(per_task_a[t][1] for t in chosen)
        sb = sum(per_task_b[t][0] for t in chosen) / sum(per_task_b[t][1] for t in chosen)
        diffs.append(100 * (sa - sb))
    point = 100 * (sum(s for s, _ in per_task_a.values()) / sum(n for _, n in per_task_a.values())
                   - sum(s for s, _ in per_task_b.values()) / sum(n for _, n in per_task_b.values()))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return point, lo, hi


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """``ladder-ros up widowx`` on the tabletop, its recordings in the lab folder."""
    folder = tmp_path_factory.mktemp("lab")
    command = [*LADDER, "up", "widowx", "--set", "sim_bridge.render=true", "--set", "sim_bridge.image_size=128",
               "--set", f"episode_recorder.output_dir={folder / 'recordings'}", "--log-dir", str(folder / "logs")]
    env = apply_network_safe_environment(dict(os.environ))
    with process_tree(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env=env) as graph:
        yield folder, graph


def test_blind_ab_session_from_the_command_line(lab, qtbot):
    folder, graph = lab
    plan_path = folder / "ab.yaml"
    plan_path.write_text(yaml.safe_dump({
        "schema_version": 1, "name": "ab_day", "episodes": PAIRS_PER_TASK, "seed": 0, "order_seed": 2026,
        "compare": [{"variant": v} for v in SYSTEMS], "tasks": [{"task": t} for t in TASKS]}))
    if not rclpy.ok():
        rclpy.init()
    node = rclpy.create_node("operator_panel_ab")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    args = parse_plugin_args(["--namespace", "/widowx", "--out", str(folder), "--plan", str(plan_path),
                              "--operator", "tester"])
    bridge, controller, widget = build_panel(node, args)
    qtbot.addWidget(widget)
    widget.resize(*FITS)
    widget.show()
    qtbot.waitExposed(widget)
    widget.take_keyboard()
    model = controller.model
    try:
        qtbot.waitUntil(lambda: model.status is not None and graph.poll() is None, timeout=180_000)

        def key(k, modifier=Qt.NoModifier):
            qtbot.keyClick(QApplication.focusWidget() or widget, k, modifier)

        def nothing_names_a_system():
            shown = "\n".join([widget.log.toPlainText(), widget.headline.text(), widget.next_system.text(),
                               widget.ab_state.text(), widget.progress.text()])
            # the panel's records and pair files (the recordings are the graph's own log: they name it)
            written = "\n".join(p.read_text() for sub in ("episodes", "ab") for p in (folder / sub).rglob("*.json"))
            named = [(v, "shown" if v in shown else "written") for v in SYSTEMS if v in shown or v in written]
            assert not named, (named, shown[-3000:])
            return True

        for pair in range(len(TASKS) * PAIRS_PER_TASK):
            outcome = {}
            for arm in ("A", "B"):
                qtbot.waitUntil(lambda: widget.start_button.isEnabled(), timeout=60_000)
                assert widget.next_system.text() == f"{arm} (pair {pair})"
                key(Qt.Key_F5)
                qtbot.waitUntil(lambda: model.episode_id.startswith(f"ab_day-{2 * pair + 'AB'.index(arm):04d}")
                                and model.over and model.status.result is not None and controller.record is not None
                                and controller.record.result is not None, timeout=EPISODE_S * 1000)
                outcome[arm] = bool(model.status.result["success"])
                key(Qt.Key_1 if outcome[arm] else Qt.Key_2, Qt.ControlModifier)
                key(Qt.Key_Return, Qt.ControlModifier)
                assert controller.record.labels.final
                assert nothing_names_a_system(), f"pair {pair} {arm}: a variant is named before the session closed"
            preference = "tie" if outcome["A"] == outcome["B"] else ("A" if outcome["A"] else "B")
            key(Qt.Key_R, Qt.AltModifier)
            qtbot.keyClicks(widget.reason, f"pair {pair}: judged by the outcome")
            key({"A": Qt.Key_A, "B": Qt.Key_B, "tie": Qt.Key_T}[preference], Qt.AltModifier)
            if pair == 0 and os.environ.get("LADDER_PANEL_SCREENSHOTS"):
                folder_out = Path(os.environ["LADDER_PANEL_SCREENSHOTS"])
                folder_out.mkdir(parents=True, exist_ok=True)
                assert widget.grab().save(str(folder_out / "panel_ab.png"))
            if pair < len(TASKS) * PAIRS_PER_TASK - 1:
                assert nothing_names_a_system() and not ABSessionStore(folder, "ab_day").closed
    finally:
        widget.close_panel()
        bridge.close()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()

    store = ABSessionStore(folder, "ab_day")
    assert store.closed, "the session did not close after its last preference"
    key_doc = read_key(store.key_path)
    assert key_doc["order_seed"] == 2026 and key_doc["complete_pairs"] == 6
    assert "pair 5: A = " in widget.log.toPlainText()

    # the report, from the command line
    result = run_tree([*LADDER, "report", str(folder)], timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((folder / "report" / "summary.json").read_text())
    ab = summary["ab_sessions"]["ab_day"]

    # by hand: each pair's two episodes from the panel's records, their systems from the key
    records = {r.episode_id: r for r in EpisodeRecordStore(folder).records()}
    per_task = {s: {} for s in SYSTEMS}
    wins = {s: [0, 0] for s in SYSTEMS}
    preferred = {s: 0 for s in SYSTEMS} | {"tie": 0}
    for number, p in key_doc["pairs"].items():
        for arm in ("A", "B"):
            system = p[arm]["variant"]
            success = bool(records[p["episodes"][arm]].result["success"])
            counts = per_task[system].setdefault(p["task_id"], [0, 0])
            counts[0] += success
            counts[1] += 1
            wins[system][0] += success
            wins[system][1] += 1
        preferred["tie" if p["preference"] == "tie" else p[p["preference"]]["variant"]] += 1
        assert {p["A"]["variant"], p["B"]["variant"]} == set(SYSTEMS)
    for system in SYSTEMS:
        got = ab["success"][system]
        assert (got["successes"], got["episodes"]) == tuple(wins[system]) and got["episodes"] == 6
        assert got["ci95"] == pytest.approx(wilson(*wins[system]), abs=1e-12)
    point, lo, hi = paired_by_hand({t: tuple(c) for t, c in per_task[SYSTEMS[0]].items()},
                                   {t: tuple(c) for t, c in per_task[SYSTEMS[1]].items()})
    diff = ab["paired_difference"]
    assert (diff["a"], diff["b"], diff["tasks"]) == (SYSTEMS[0], SYSTEMS[1], len(TASKS))
    assert (diff["diff"], diff["lo"], diff["hi"]) == pytest.approx((point, lo, hi), abs=1e-9)
    assert ab["preferences"] == preferred
    assert [r["pair"] for r in ab["revealed"]] == list(range(6)) and all(r["reason"] for r in ab["revealed"])
    md = (folder / "report" / "report.md").read_text()
    assert "## Blind A/B session ab_day" in md and "paired over 2 tasks" in md
    # the session's episodes count in the tables under their systems once it is closed
    assert {v: summary["variants"][v]["episodes"] for v in SYSTEMS} == {v: 6 for v in SYSTEMS}
