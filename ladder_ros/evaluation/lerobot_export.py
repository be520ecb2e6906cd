"""``ladder-ros export DIR --format lerobot``: recorded episodes as a LeRobot dataset (format v3.0).

So the lab can fine-tune its policies on its own rollouts. One frame per control step that has an
action: the camera image of that step (``observation.images.camera``, an H.264 video), the joint
state (``observation.state``: arm joints and the gripper aperture, in the recording's joint order),
the end-effector pose (``observation.ee_pose``: x y z in m, quaternion x y z w), the 7-D action
(``action``: the axes of ``policy/action``), the plan index of the subgoal the policy followed at that
step and the operator's label of it (``subgoal_label``: 1 done, 0 not done, -1 none). The episode's full
instruction is its ``task``; the subgoals are its *subtasks*, written the way current LeRobot reads
them (lerobot 0.6.1, ``src/lerobot/datasets/language.py`` and
``src/lerobot/annotations/steerable_pipeline/writer.py`` at commit 7e241bd630a3719a56157a497ce5d08f244784f1):
every frame's ``language_persistent`` column holds the episode's subtask rows (``style: subtask``,
``role: assistant``, the subgoal's text, and the time it became the instruction the policy followed),
so ``lerobot.datasets.language_render.active_at(t, persistent=..., style="subtask")`` gives the
subgoal of any frame; ``language_events`` is empty. Upstream treats the older ``subtask_index`` /
``meta/subtasks.parquet`` pair as legacy (its annotation writer drops the column), so it is not written.

Per episode (``meta/episodes``): the episode id, variant, outcome, finish reason, the operator's
episode label, subgoal labels and note, and the episode's statistics as upstream writes them
(``stats/<feature>/<min|max|mean|std|count|q01|q10|q50|q90|q99>`` per feature; camera statistics per
channel in [0, 1], shaped (3, 1, 1), over a sample of frames), which its ``aggregate`` and dataset tools
(``dataset_tools.py``: deleting, splitting, merging episodes) combine; ``meta/stats.json`` holds the same
statistics over the whole dataset.

The files follow LeRobot's v3.0 layout (``meta/info.json``, ``meta/stats.json``,
``meta/tasks.parquet``, ``meta/episodes/chunk-000/file-000.parquet``,
``data/chunk-XXX/file-XXX.parquet``, ``videos/<key>/chunk-XXX/file-XXX.mp4``), one data and one
video file per episode, written with pyarrow and PyAV. The LeRobot libraries themselves do not
co-install with this project's pins; the round-trip test loads the result with ``lerobot`` in its own
Python 3.12 environment, with the reader's default video backend (torchcodec, which needs the system's
FFmpeg libraries: ``scripts/setup.sh`` installs them). A step whose camera image or joint state the
recording lacks (a best-effort image dropped) takes the step before it's; the count is in
``meta/ladder_ros.json`` (with the episode ids in dataset order and the source folder).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.evaluation.recorded_episodes import RecordedEpisode, load_episodes
from ladder_ros.interface_conversions import recorded_document
from ladder_ros.messages import DONE, NOT_DONE, DecisionDoc, EpisodeLabels, EpisodeStatus, SchemaError

CODEBASE_VERSION = "v3.0"  # LeRobot dataset format this writer produces
CHUNKS_SIZE = 1000  # files per chunk folder (LeRobot's default)
CAMERA = "observation.images.camera"
ACTION_NAMES = ("ee_dx", "ee_dy", "ee_dz", "ee_droll", "ee_dpitch", "ee_dyaw", "gripper")
POSE_NAMES = ("x", "y", "z", "qx", "qy", "qz", "qw")
VIDEO_CODEC, VIDEO_PIX_FMT, VIDEO_CRF, VIDEO_GOP = "libx264", "yuv420p", 20, 2  # GOP 2: quick random access
# Upstream's statistics (lerobot 0.6.1 src/lerobot/datasets/compute_stats.py: DEFAULT_QUANTILES and the
# q01..q99 keys of get_feature_stats).
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
IMAGE_STATS_FRAMES = 20  # frames an episode's camera statistics are computed over (upstream samples too)
LANGUAGE_PERSISTENT, LANGUAGE_EVENTS = "language_persistent", "language_events"  # upstream's column names
SUBTASK_STYLE, SUBTASK_ROLE = "subtask", "assistant"  # upstream's subtask rows (plan_subtasks_memory.py)


@dataclass
class EpisodeFrames:
    """One episode's frames, read from its recording."""

    episode: RecordedEpisode
    fps: int
    images: list = field(default_factory=list)
    states: list = field(default_factory=list)
    poses: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    instructions: list = field(default_factory=list)
    plan_indices: list = field(default_factory=list)
    joint_names: tuple = ()
    task: str = ""
    filled: int = 0  # steps that took the step before's image or joint state


def _chunk(index: int) -> tuple[int, int]:
    return index // CHUNKS_SIZE, index % CHUNKS_SIZE


def read_frames(episode: RecordedEpisode) -> EpisodeFrames | None:
    """Pair each recorded action with its step's image, joint state, pose and instruction by time stamp."""
    from rosbags.highlevel import AnyReader

    from ladder_ros.recording.bag import typestore

    status: EpisodeStatus | None = None
    by_topic: dict[str, dict[int, Any]] = {"image": {}, "joints": {}, "pose": {}, "action": {}}
    decisions: dict[int, DecisionDoc] = {}
    suffixes = {"/camera/image_raw": "image", "/joint_states": "joints", "/ee_pose": "pose",
                "/policy/action": "action"}
    with AnyReader([episode.bag], default_typestore=typestore()) as reader:
        for connection, _, raw in reader.messages():
            topic = connection.topic
            if topic.endswith(("/episode/status", "/orchestrator/decision")):
                msg = reader.deserialize(raw, connection.msgtype)
                try:
                    if topic.endswith("/episode/status"):
                        doc = recorded_document(msg, EpisodeStatus)
                        if doc.episode_id == episode.episode_id and (status is None or doc.rate_hz):
                            status = doc
                    else:
                        d = recorded_document(msg, DecisionDoc)
                        if d.episode_id == episode.episode_id:
                            decisions[d.step] = d
                except SchemaError:
                    continue
                continue
            kind = next((k for s, k in suffixes.items() if topic.endswith(s)), None)
            if kind is None:
                continue
            msg = reader.deserialize(raw, connection.msgtype)
            stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
            by_topic[kind][stamp] = msg
    if status is None or status.rate_hz <= 0:
        return None
    fps = int(round(status.rate_hz))
    frames = EpisodeFrames(episode=episode, fps=fps, task=str((status.task or {}).get("instruction", "")))
    steps = sorted(s for s in (status.step_of_stamp(t) for t in by_topic["action"]) if s is not None)
    last: dict[str, Any] = {}
    for step in steps:
        stamp = status.step_stamp_ns(step)
        action = by_topic["action"][stamp]
        frames.actions.append(np.asarray(action.points[0].positions, dtype=np.float32))
        for kind in ("image", "joints", "pose"):
            msg = by_topic[kind].get(stamp)
            if msg is None:
                earlier = [t for t in by_topic[kind] if t < stamp]
                msg = by_topic[kind][max(earlier)] if earlier else last.get(kind)
                frames.filled += 1
            if msg is None:
                raise ConfigError(f"episode {episode.episode_id}: no {kind} at or before step {step}",
                                  source=str(episode.bag))
            last[kind] = msg
        image, joints, pose = last["image"], last["joints"], last["pose"]
        arr = np.frombuffer(bytes(image.data), dtype=np.uint8).reshape(image.height, image.step)[:, :image.width * 3]
        arr = arr.reshape(image.height, image.width, 3)
        frames.images.append(arr[:, :, ::-1] if image.encoding == "bgr8" else arr)
        frames.joint_names = tuple(joints.name)
        frames.states.append(np.asarray(joints.position, dtype=np.float32))
        p = pose.pose
        frames.poses.append(np.array([p.position.x, p.position.y, p.position.z, p.orientation.x, p.orientation.y,
                                      p.orientation.z, p.orientation.w], dtype=np.float32))
        decision = decisions.get(step)
        frames.instructions.append((decision.instruction if decision else None) or frames.task)
        frames.plan_indices.append(-1 if decision is None or decision.plan_index is None else decision.plan_index)
    return frames if frames.actions else None


def encode_video(images: list[np.ndarray], fps: int, path: Path) -> dict[str, Any]:
    """H.264 (yuv420p) video of ``images`` at ``fps``, frame i at time i / fps; returns LeRobot's video info."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = images[0].shape[:2]
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(VIDEO_CODEC, rate=fps)
        stream.width, stream.height = w - w % 2, h - h % 2  # yuv420p needs even sizes
        stream.pix_fmt = VIDEO_PIX_FMT
        stream.options = {"crf": str(VIDEO_CRF), "g": str(VIDEO_GOP)}
        for image in images:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:stream.height, :stream.width]),
                                               format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return {"video.height": h - h % 2, "video.width": w - w % 2, "video.codec": "h264",
            "video.pix_fmt": VIDEO_PIX_FMT, "video.is_depth_map": False, "video.fps": fps, "video.channels": 3,
            "has_audio": False}


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Upstream's statistics of one feature over frames (rows): per component min, max, mean, std and
    the quantiles, and the frame count; a scalar feature keeps a trailing axis of 1."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    out = {"min": values.min(axis=0), "max": values.max(axis=0), "mean": values.mean(axis=0),
           "std": values.std(axis=0), "count": np.array([len(values)])}
    for key, q in QUANTILES.items():
        out[key] = np.quantile(values, q, axis=0)
    return out


def image_stats(images: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-channel statistics of a sample of RGB frames in [0, 1], shaped (3, 1, 1) like upstream's;
    ``count`` is the number of frames sampled."""
    step = max(1, len(images) // IMAGE_STATS_FRAMES)
    sample = np.stack(images[::step])
    pixels = sample.reshape(-1, 3).astype(np.float64) / 255.0
    stats = feature_stats(pixels)
    out = {k: v.reshape(3, 1, 1) for k, v in stats.items() if k != "count"}
    out["count"] = np.array([len(sample)])
    return out


def subtask_rows(instructions: list[str], fps: int) -> list[dict[str, Any]]:
    """The episode's subtasks as upstream's persistent language rows: one per change of instruction,
    stamped with the time of its first frame."""
    rows = []
    for i, text in enumerate(instructions):
        if i == 0 or text != instructions[i - 1]:
            rows.append({"role": SUBTASK_ROLE, "content": text, "style": SUBTASK_STYLE,
                         "timestamp": float(np.float32(i / fps)), "camera": None, "tool_calls": None})
    return rows


def _flat_stats(stats: dict[str, dict[str, np.ndarray]]) -> dict[str, list]:
    """``stats/<feature>/<stat>`` columns of one episode row (upstream's flatten_dict of {"stats": ...})."""
    return {f"stats/{feature}/{name}": value.tolist() for feature, per in stats.items() for name, value in per.items()}


def combined_stats(per_episode: list[dict[str, np.ndarray]]) -> dict[str, list]:
    """Dataset statistics from the episodes' (the camera's, whose frames are sampled): min of the minima,
    max of the maxima, the pooled mean and variance and the frame-weighted quantiles, as upstream's
    ``aggregate_stats`` combines them."""
    counts = np.array([float(p["count"][0]) for p in per_episode])
    w = counts / counts.sum()
    means = np.stack([p["mean"] for p in per_episode])
    mean = np.tensordot(w, means, axes=1)
    var = np.tensordot(w, np.stack([p["std"] ** 2 for p in per_episode]) + (means - mean) ** 2, axes=1)
    out = {"min": np.min([p["min"] for p in per_episode], axis=0),
           "max": np.max([p["max"] for p in per_episode], axis=0), "mean": mean, "std": np.sqrt(var),
           "count": np.array([int(counts.sum())])}
    for key in QUANTILES:
        out[key] = np.tensordot(w, np.stack([p[key] for p in per_episode]), axes=1)
    return {k: v.tolist() for k, v in out.items()}


def export_lerobot(root: Path, out: Path, repo_id: str = "ladder_ros/episodes", overwrite: bool = False) -> dict:
    """Write every recorded episode under ``root`` that has frames as a LeRobot v3.0 dataset at ``out``."""
    writer = DatasetWriter(out)  # imports the writers' libraries before the output folder is touched
    _clear_output(out, overwrite)
    episodes = _episodes_with_frames(root)
    _check_alike(episodes, root)
    for ep_index, frames in enumerate(episodes):
        writer.add_episode(ep_index, frames)
    return writer.finish(_features(episodes[0]), episodes, root, repo_id)


def _clear_output(out: Path, overwrite: bool) -> None:
    if out.exists():
        if not overwrite:
            raise ConfigError("the output folder exists (use --overwrite to replace it)", source=str(out))
        shutil.rmtree(out)


def _episodes_with_frames(root: Path) -> list[EpisodeFrames]:
    """The frames of every recorded episode under ``root`` with a recording, a record and actions."""
    candidates = [e for e in load_episodes(root) if e.bag is not None and e.record is not None]
    episodes: list[EpisodeFrames] = []
    for e in candidates:
        frames = read_frames(e)
        if frames is None:
            print(f"ladder-ros export: {e.episode_id}: no steps with actions, skipped", file=sys.stderr)
            continue
        episodes.append(frames)
    if not episodes:
        raise ConfigError("no recorded episode with frames (recordings of finished episodes)", source=str(root))
    return episodes


def _check_alike(episodes: list[EpisodeFrames], root: Path) -> None:
    """One dataset has one control rate, one joint order and one image size."""
    first = episodes[0]
    for f in episodes[1:]:
        if f.fps != first.fps or f.joint_names != first.joint_names or f.images[0].shape != first.images[0].shape:
            raise ConfigError(f"episode {f.episode.episode_id} does not match {first.episode.episode_id} (control "
                              "rate, joint names or image size): export them separately", source=str(root))


def _features(first: EpisodeFrames) -> dict[str, dict]:
    """The dataset's features (``meta/info.json``), shaped by its first episode."""
    n_state = len(first.joint_names)
    return {
        CAMERA: {"dtype": "video", "shape": list(first.images[0].shape), "names": ["height", "width", "channels"]},
        "observation.state": {"dtype": "float32", "shape": [n_state], "names": list(first.joint_names)},
        "observation.ee_pose": {"dtype": "float32", "shape": [7], "names": list(POSE_NAMES)},
        "action": {"dtype": "float32", "shape": [7], "names": list(ACTION_NAMES)},
        "plan_index": {"dtype": "int64", "shape": [1], "names": None},
        "subgoal_label": {"dtype": "int64", "shape": [1], "names": None},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
        # upstream's language columns (language.py: language_feature_info)
        LANGUAGE_PERSISTENT: {"dtype": "language", "shape": [1], "names": None},
        LANGUAGE_EVENTS: {"dtype": "language", "shape": [1], "names": None},
    }


def _label_code(labels: EpisodeLabels | None, plan_index: int) -> int:
    """The operator's label of a subgoal as a number: 1 done, 0 not done, -1 none (or no subgoal followed)."""
    label = labels.subgoal_label(plan_index) if labels is not None and plan_index >= 0 else None
    return {DONE: 1, NOT_DONE: 0}.get(label, -1)


def _frame_values(f: EpisodeFrames, ep_index: int, task_index: int, start: int) -> dict[str, np.ndarray]:
    """The numeric columns of one episode's frames; ``start`` is the dataset index of its first frame."""
    n = len(f.actions)
    labels = f.episode.labels
    return {
        "observation.state": np.stack(f.states), "observation.ee_pose": np.stack(f.poses),
        "action": np.stack(f.actions),
        "plan_index": np.asarray(f.plan_indices, dtype=np.int64),
        "subgoal_label": np.asarray([_label_code(labels, i) for i in f.plan_indices], dtype=np.int64),
        "timestamp": np.arange(n, dtype=np.float32) / np.float32(f.fps),
        "frame_index": np.arange(n, dtype=np.int64), "episode_index": np.full(n, ep_index, dtype=np.int64),
        "index": np.arange(start, start + n, dtype=np.int64), "task_index": np.full(n, task_index, dtype=np.int64),
    }


def _episode_row(f: EpisodeFrames, ep_index: int, start: int, stats: dict[str, dict[str, np.ndarray]]) -> dict:
    """One episode's row of ``meta/episodes``: where its frames are, what the episode was, its statistics."""
    n = len(f.actions)
    chunk, file = _chunk(ep_index)
    record = f.episode.record or {}
    labels = f.episode.labels
    return {
        "episode_index": ep_index, "tasks": [f.task], "length": n,
        "data/chunk_index": chunk, "data/file_index": file,
        "dataset_from_index": start, "dataset_to_index": start + n,
        f"videos/{CAMERA}/chunk_index": chunk, f"videos/{CAMERA}/file_index": file,
        f"videos/{CAMERA}/from_timestamp": 0.0, f"videos/{CAMERA}/to_timestamp": n / f.fps,
        "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
        "ladder/episode_id": f.episode.episode_id, "ladder/task_id": str(record.get("task_id", "")),
        "ladder/variant": str(record.get("variant", "")), "ladder/success": bool(record.get("success", False)),
        "ladder/finish_reason": str(record.get("finish_reason") or ""),
        "ladder/operator_label": (labels.episode if labels is not None else None) or "",
        "ladder/subgoal_labels": json.dumps(labels.subgoals if labels is not None else {}),
        "ladder/note": labels.note if labels is not None else "",
        "ladder/filled_steps": f.filled,
        **_flat_stats(stats),
    }


def _robot_type(episodes: list[EpisodeFrames]) -> str:
    """The preset of the first episode that names one (empty: none does)."""
    preset = ""
    for f in episodes:
        events = (f.episode.record or {}).get("events", [])
        started = next((e for e in events if e.get("kind") == "episode_started"), {})
        preset = preset or str(started.get("preset", ""))
    return preset


class DatasetWriter:
    """The files of one dataset at ``out``, written episode by episode, then its ``meta/`` folder."""

    def __init__(self, out: Path):
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pd, self.pa, self.pq = pd, pa, pq
        self.out = out
        self.tasks: dict[str, int] = {}  # task text -> task index, in the order the episodes meet them
        self.episode_rows: list[dict[str, Any]] = []
        self.columns: dict[str, list[np.ndarray]] = {}  # numeric column -> its values per episode
        self.camera_stats: list[dict[str, np.ndarray]] = []
        self.frames = 0  # frames written so far: the dataset index of the next one
        self.video_info: dict[str, Any] = {}

    def add_episode(self, ep_index: int, f: EpisodeFrames) -> None:
        """The episode's data file and video, and what ``meta/`` needs of it."""
        task_index = self.tasks.setdefault(f.task, len(self.tasks))
        values = _frame_values(f, ep_index, task_index, self.frames)
        chunk, file = _chunk(ep_index)
        data_path = self.out / f"data/chunk-{chunk:03d}/file-{file:03d}.parquet"
        self._write_data(values, subtask_rows(f.instructions, f.fps), len(f.actions), data_path)
        video_path = self.out / f"videos/{CAMERA}/chunk-{chunk:03d}/file-{file:03d}.mp4"
        self.video_info = encode_video(f.images, f.fps, video_path)
        stats = {k: feature_stats(v) for k, v in values.items()}
        stats[CAMERA] = image_stats(f.images)
        self.camera_stats.append(stats[CAMERA])
        for k, v in values.items():
            self.columns.setdefault(k, []).append(v)
        self.episode_rows.append(_episode_row(f, ep_index, self.frames, stats))
        self.frames += len(f.actions)

    def _write_data(self, values: dict[str, np.ndarray], subtasks: list[dict[str, Any]], n: int, path: Path) -> None:
        """The episode's ``n`` frames as one data file: the numeric columns and the language columns."""
        pa = self.pa
        table = pa.table({
            **{k: (pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), v.shape[1]) if v.ndim == 2
                   else pa.array(v)) for k, v in values.items()},
            # every frame carries the episode's subtask rows (upstream broadcasts the persistent slice)
            LANGUAGE_PERSISTENT: pa.array([subtasks] * n),
            LANGUAGE_EVENTS: pa.array([[] for _ in range(n)], pa.list_(pa.null())),
        })
        path.parent.mkdir(parents=True, exist_ok=True)
        self.pq.write_table(table, path)

    def finish(self, features: dict[str, dict], episodes: list[EpisodeFrames], root: Path, repo_id: str) -> dict:
        """``meta/``: the episodes, the tasks, the statistics, ``info.json`` and the exporter's own notes;
        returns the info (with those notes under ``ladder_ros``)."""
        features[CAMERA]["info"] = self.video_info
        meta = self.out / "meta"
        (meta / "episodes/chunk-000").mkdir(parents=True, exist_ok=True)
        self.pq.write_table(self.pa.Table.from_pylist(self.episode_rows), meta / "episodes/chunk-000/file-000.parquet")
        self.pd.DataFrame({"task_index": list(self.tasks.values())},
                          index=self.pd.Index(list(self.tasks), name="task")).to_parquet(meta / "tasks.parquet")
        (meta / "stats.json").write_text(json.dumps(self._dataset_stats(), indent=1) + "\n", encoding="utf-8")
        info = self._info(features, episodes)
        (meta / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        # the exporter's own notes in a file of their own: upstream's DatasetInfo warns about unknown fields
        ours = {"repo_id": repo_id, "source": str(root), "filled_steps": sum(f.filled for f in episodes),
                "episode_ids": [f.episode.episode_id for f in episodes]}
        (meta / "ladder_ros.json").write_text(json.dumps(ours, indent=2) + "\n", encoding="utf-8")
        info["ladder_ros"] = ours
        return info

    def _dataset_stats(self) -> dict[str, Any]:
        stats = {k: {name: v.tolist() for name, v in feature_stats(np.concatenate(v)).items()}
                 for k, v in self.columns.items()}  # exact over every frame
        stats[CAMERA] = combined_stats(self.camera_stats)
        return stats

    def _info(self, features: dict[str, dict], episodes: list[EpisodeFrames]) -> dict[str, Any]:
        return {
            "codebase_version": CODEBASE_VERSION, "robot_type": _robot_type(episodes) or None,
            "total_episodes": len(episodes), "total_frames": self.frames, "total_tasks": len(self.tasks),
            "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
            "fps": episodes[0].fps, "splits": {"train": f"0:{len(episodes)}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
            "features": features,
        }


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="recorded episodes as a dataset (LeRobot v3.0)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="folder with episode recordings (rosbag2 MCAP bags), searched deeply")
    p.add_argument("--format", choices=["lerobot"], required=True, help="dataset format")
    p.add_argument("--out", default=None, help="dataset folder (default DIR/lerobot)")
    p.add_argument("--repo-id", default="ladder_ros/episodes", help="the dataset's name, kept in meta/info.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    out = Path(args.out) if args.out else root / "lerobot"
    info = export_lerobot(root, out, args.repo_id, args.overwrite)
    print(f"wrote {out}: {info['total_episodes']} episodes, {info['total_frames']} frames at {info['fps']} fps, "
          f"{info['total_tasks']} tasks (LeRobot {CODEBASE_VERSION})")
    return 0
