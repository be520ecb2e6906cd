"""``ladder-ros report`` and ``ladder-ros export --format lerobot`` on recorded simulated episodes.

The graph (all nodes in one executor, the built-in tabletop, rendering on) records a few episodes into
the lab folder's layout (``recordings/`` beside the panel's ``episodes/``); the report over those
recordings must give sim-eval's numbers for the same episodes (the reference loop), and over the whole
lab folder the operator's labels with thumbnails; the LeRobot export of the lab folder must load back
with the real ``lerobot`` reader (its own Python 3.12 environment, built by scripts/setup.sh) with its
default arguments: frames decoded by its default video backend (torchcodec on the system's FFmpeg),
the MCAP's frame counts, actions and subgoals, and per-episode statistics that upstream's own dataset
tools combine.
"""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402

from ladder_ros.interface_conversions import recorded_document  # noqa: E402

from ladder_ros.bringup.client import EpisodeClient  # noqa: E402
from ladder_ros.recording.bag import read_bag  # noqa: E402
from ladder_ros.evaluation.lerobot_export import export_lerobot  # noqa: E402
from ladder_ros.evaluation.recorded_episodes import load_episodes  # noqa: E402
from ladder_ros.evaluation.report_render import write_report  # noqa: E402
from ladder_ros.evaluation.report_statistics import build_report  # noqa: E402
from ladder_ros.evaluation.sim_eval import EvalConfig, evaluate  # noqa: E402
from ladder_ros.messages import DecisionDoc  # noqa: E402
from ladder_ros.panel import labels as label_ops  # noqa: E402
from ladder_ros.panel.records import EpisodeFile, EpisodeRecordStore  # noqa: E402
from ladder_ros.paths import share_path  # noqa: E402
from tests.recording_graph import close_graph, recording_graph_nodes  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
TASKS = ("kitchen_single_2", "sorting_split_3")
VARIANTS = ("proprio_verifier", "periodic_trigger")
EPISODES = 1  # per task and variant; episode k: layout k mod layouts, seed k (sim-eval's rule)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Recordings of TASKS x VARIANTS x EPISODES through the graph, and one episode labelled by an operator."""
    out = tmp_path_factory.mktemp("recorded")
    rclpy.init()
    ns = "rec"
    nodes = recording_graph_nodes(ns, out / "recordings", image_size=64)
    client = EpisodeClient(namespace=ns)
    executor = SingleThreadedExecutor()
    for node in [*nodes, client]:
        executor.add_node(node)
    try:
        client.wait_for_graph(executor, timeout_s=30)
        outcomes = []
        for task_id in TASKS:
            layouts = nodes[0].suite.task(task_id).layouts
            for k in range(EPISODES):
                for variant in VARIANTS:
                    outcomes.append(client.run_episode(executor, task_id, variant=variant, layout=k % layouts,
                                                       seed=k, timeout_s=300))
        recorder = nodes[-1]
        client.spin_until(executor, lambda: len(recorder.closed) == len(outcomes), 30, "the recordings to close")
    finally:
        close_graph(executor, [*nodes, client])
    # an operator labelled the first episode (the panel's record file, as the panel writes it, in the same
    # lab folder as the recordings: the defaults of the panel and the recorder)
    first = outcomes[0]
    record = EpisodeFile.new(first.episode_id)
    labels = label_ops.label_subgoal(record.labels, 0, "done", 1.0)
    labels = label_ops.label_subgoal(labels, 1, "not_done", 2.0)
    record.labels = label_ops.label_episode(labels, "partial", 3.0)
    record.result = first.result
    EpisodeRecordStore(out).save(record)
    return out, outcomes


def test_the_lab_folder_defaults_meet():
    """The recorder's default folder is the panel's default folder's ``recordings``, in the code and in the
    params files, so report and export of the panel's folder find the recordings."""
    import yaml

    from ladder_ros.specs.parameters import EPISODE_RECORDER
    from ladder_ros.panel.app import DEFAULT_OUT

    recorder = next(p for p in EPISODE_RECORDER if p.name == "output_dir")
    assert recorder.default == f"{DEFAULT_OUT}/recordings"
    for params in ("widowx_params.yaml", "franka_params.yaml"):
        data = yaml.safe_load((REPO / "config" / params).read_text())
        assert data["/**/episode_recorder"]["ros__parameters"]["output_dir"] == recorder.default, params


def test_report_on_recordings_matches_sim_eval(recorded, tmp_path):
    out, outcomes = recorded
    report = write_report(out / "recordings", tmp_path / "report")
    assert report["over"] == len(outcomes) and report["outcome_sources"] == {"simulator": len(outcomes)}
    config = EvalConfig(suite_path=str(share_path("config", "suites", "tabletop.yaml")), simulator="mujoco_tabletop",
                        variants=VARIANTS, task_ids=TASKS, episodes=EPISODES, base_seed=0, policy="scripted_expert",
                        noise="bridge_like", verifier="oracle", render=False, jobs=1)
    reference = evaluate(config, tmp_path / "sim_eval", progress=False)["summary"]
    for variant in VARIANTS:
        ours, theirs = report["variants"][variant], reference[variant]
        for key in ("episodes", "task_success_rate", "ci95", "subgoal_progress", "failure_causes",
                    "verification_queries", "mean_steps_used"):
            assert ours[key] == theirs[key], (variant, key)
        assert {int(h): b for h, b in ours["by_horizon"].items()} == theirs["by_horizon"]
        assert ours["by_category"] == theirs["by_category"]
    # the same numbers from sim-eval's own records
    again = build_report(load_episodes(tmp_path / "sim_eval"))["variants"]
    for variant in VARIANTS:
        for key in ("task_success_rate", "ci95", "subgoal_progress", "by_horizon", "by_category", "failure_causes"):
            assert again[variant][key] == reference[variant][key], (variant, key)
    page = (tmp_path / "report" / "report.html").read_text()
    assert "data:image/jpeg;base64," in page and "data:image/png;base64," in page and "src=\"http" not in page
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Wilson" in md and "Appendix G" in md and (tmp_path / "report" / "success_by_horizon.png").is_file()


def test_report_counts_operator_labels_and_agreement(recorded, tmp_path):
    out, outcomes = recorded
    report = write_report(out, tmp_path / "lab_report")  # the whole lab folder: panel records and recordings
    first = next(r for r in report["per_episode"] if r["episode_id"] == outcomes[0].episode_id)
    assert first["labels"]["episode"] == "partial"
    page = (tmp_path / "lab_report" / "report.html").read_text()
    assert page.count('class="t" alt="frame"') == 2 * len(outcomes)  # first and last frame of every episode
    a = report["operator_vs_vlm"]
    assert a["compared"] + a["labelled_without_verdict"] == 2
    verdicts = {e["plan_index"]: e["complete"] for e in outcomes[0].result["events"]
                if e["kind"] == "verification_answered"}
    expect_tp = int(verdicts.get(0) is True)
    assert a["tp"] == expect_tp and a["fp"] == int(verdicts.get(1) is True)
    # every disagreement in the page with the frame the VLM was asked about, cut from the recording
    assert len(a["disagreements"]) == a["fp"] + a["fn"]
    assert page.count('alt="step ') == len(a["disagreements"])
    assert ("what the VLM was shown" in page) == bool(a["disagreements"])
    assert report["operator_vs_vlm_by_session"]["(no plan)"]["compared"] == a["compared"]
    # an episode without a simulator score counts by its operator labels
    record = dict(outcomes[0].result, scored=False, success=False, subgoals_done=0, subgoals=[])
    store = EpisodeRecordStore(tmp_path / "robot")
    f = EpisodeFile.new("robot-ep-1")
    f.result = record
    f.labels = label_ops.label_episode(label_ops.label_subgoal(f.labels, 0, "done", 1.0), "success", 2.0)
    store.save(f)
    unlabelled = EpisodeFile.new("robot-ep-2")
    unlabelled.result = record
    store.save(unlabelled)
    robot = build_report(load_episodes(tmp_path / "robot"))
    variant = robot["variants"][record["variant"]]
    assert variant["episodes"] == 1 and variant["task_success_rate"] == 1.0
    assert robot["unlabelled"] == ["robot-ep-2"] and robot["outcome_sources"] == {"operator": 1}


def test_lerobot_export_round_trip(recorded, tmp_path):
    out, outcomes = recorded
    dataset = tmp_path / "dataset"
    info = export_lerobot(out, dataset)  # the whole lab folder, as `ladder-ros export runs/lab` reads it
    assert info["total_episodes"] == len(outcomes) and info["codebase_version"] == "v3.0"
    # what the MCAP holds, per episode: actions and the instruction of each step
    expected = []
    for episode_id in info["ladder_ros"]["episode_ids"]:
        bag = out / "recordings" / episode_id
        summary, decoded = read_bag(bag, ["/rec/policy/action", "/rec/orchestrator/decision"])
        actions = [list(m.points[0].positions) for m in decoded["/rec/policy/action"]]
        decisions = {}
        for m in decoded["/rec/orchestrator/decision"]:
            d = recorded_document(m, DecisionDoc)
            decisions[d.step] = d.instruction
        expected.append({"frames": len(actions), "actions": actions,
                         "instructions": [decisions[s] for s in range(len(actions))]})
    assert info["total_frames"] == sum(e["frames"] for e in expected)
    if not LEROBOT_PYTHON.is_file():
        pytest.skip("no .venv-lerobot: scripts/setup.sh builds it where python3.12 exists (--no-lerobot skips it)")
    script = r'''
import json, sys
import numpy as np
from lerobot.datasets.compute_stats import aggregate_stats
from lerobot.datasets.dataset_tools import _load_episode_with_stats, delete_episodes
from lerobot.datasets.language_render import active_at
from lerobot.datasets.lerobot_dataset import LeRobotDataset

def nested(value):  # parquet's nested lists come back from pandas as object arrays of arrays
    if isinstance(value, np.ndarray) and value.dtype == object:
        return [nested(v) for v in value]
    return value.tolist() if isinstance(value, np.ndarray) else value

ds = LeRobotDataset("ladder_ros/episodes", root=sys.argv[1])  # the reader's defaults: its video backend too
out = {"backend": ds._video_backend, "frames": len(ds), "episodes": ds.num_episodes, "per_episode": []}
per_episode_stats = []
for ep in range(ds.num_episodes):
    lo = ds.meta.episodes[ep]["dataset_from_index"]; hi = ds.meta.episodes[ep]["dataset_to_index"]
    items = [ds[i] for i in range(lo, hi)]
    row = _load_episode_with_stats(ds, ep)  # how upstream's dataset tools read an episode's statistics
    stats = {}
    for key, value in row.items():
        if key.startswith("stats/"):
            feature, name = key[len("stats/"):].rsplit("/", 1)
            stats.setdefault(feature, {})[name] = np.asarray(nested(value), dtype=np.float64)
    per_episode_stats.append(stats)
    out["per_episode"].append({
        "frames": hi - lo,
        "actions": [it["action"].tolist() for it in items],
        "instructions": [active_at(float(it["timestamp"]), persistent=it["language_persistent"],
                                   style="subtask")["content"] for it in items],
        "task": items[0]["task"],
        "image_shape": list(items[0]["observation.images.camera"].shape),
        "first_image_mean": float(items[0]["observation.images.camera"].mean()),
        "label": ds.meta.episodes[ep]["ladder/operator_label"],
        "subgoal_label": [int(it["subgoal_label"].item()) for it in items],
        "stats_features": sorted(stats),
        "action_mean": stats["action"]["mean"].tolist(), "action_q50": stats["action"]["q50"].tolist(),
        "camera_mean_shape": list(stats["observation.images.camera"]["mean"].shape),
        "count": int(stats["action"]["count"][0]),
    })
combined = aggregate_stats(per_episode_stats)  # upstream combines the episodes' statistics
out["combined_action_mean"] = combined["action"]["mean"].tolist()
out["meta_action_mean"] = np.asarray(ds.meta.stats["action"]["mean"]).tolist()
# a dataset tool that rebuilds the metadata from the per-episode statistics: drop the first episode
smaller = delete_episodes(ds, episode_indices=[0], output_dir=sys.argv[2], repo_id="ladder_ros/smaller")
out["after_delete"] = {"episodes": smaller.num_episodes, "frames": len(smaller),
                       "first_frame_shape": list(smaller[0]["observation.images.camera"].shape)}
print("RESULT" + json.dumps(out))
'''
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
           "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([str(LEROBOT_PYTHON), "-c", script, str(dataset), str(tmp_path / "smaller")],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert result["backend"] == "torchcodec", "the reader fell back from its default backend: " + proc.stderr[-2000:]
    assert result["frames"] == info["total_frames"] and result["episodes"] == len(outcomes)
    for got, want, episode_id in zip(result["per_episode"], expected, info["ladder_ros"]["episode_ids"]):
        assert got["frames"] == want["frames"], episode_id
        actions = np.asarray(want["actions"], dtype=np.float32)
        assert np.allclose(np.asarray(got["actions"]), actions), episode_id
        assert got["instructions"] == want["instructions"], episode_id
        assert got["image_shape"] == [3, 64, 64] and 0.05 < got["first_image_mean"] < 0.95
        assert {"action", "observation.state", "observation.ee_pose", "observation.images.camera",
                "timestamp", "index"} <= set(got["stats_features"]), episode_id
        assert got["count"] == want["frames"] and got["camera_mean_shape"] == [3, 1, 1]
        assert np.allclose(got["action_mean"], actions.astype(np.float64).mean(axis=0), atol=1e-6), episode_id
        assert np.allclose(got["action_q50"], np.quantile(actions.astype(np.float64), 0.5, axis=0), atol=1e-6)
    assert np.allclose(result["combined_action_mean"], result["meta_action_mean"], atol=1e-6)
    assert result["after_delete"]["episodes"] == len(outcomes) - 1
    assert result["after_delete"]["frames"] == info["total_frames"] - expected[0]["frames"]
    assert result["after_delete"]["first_frame_shape"] == [3, 64, 64]
    first = result["per_episode"][info["ladder_ros"]["episode_ids"].index(outcomes[0].episode_id)]
    assert first["label"] == "partial" and first["task"] == outcomes[0].result["events"][0]["instruction"]
    assert set(first["subgoal_label"]) <= {1, 0, -1} and 1 in first["subgoal_label"]
