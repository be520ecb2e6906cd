"""The offline benchmark's two configurations, read from a local copy and checked against each other.

Schema, from the benchmark's card (its dataset README); where the card names no
column, the name below is this project's and is marked so:

``decomposition`` (one row per task)
    ``benchmark``, ``scene`` (task identity, card), ``instruction`` (the compound instruction),
    ``subtasks`` (the reference plan, card), ``image_main`` (the reset frame; the card calls it
    "the reset frame a deployed planner would see"), ``objects`` and ``destinations`` (the
    reference goals' object and destination, aligned with ``subtasks``; project names),
    ``category`` (one of the eight task categories, needed for the ordered/relay/revisit rules;
    project name), optional ``robot`` (fills ``<robot>`` in the prompts; project name).
``subtask_states`` (mid-episode frames)
    ``benchmark``, ``scene``, ``subtasks``, ``achieved`` (per-subtask ground truth), ``query_idx``,
    ``label`` (= ``achieved[query_idx]``), ``image_main``, ``image_wrist`` (may be null), ``tag``
    (fresh, in_progress, regressed, cold, terminal), provenance ``arm``, ``source``, ``step``
    (all named by the card), optional ``instruction``.

Read with the ``datasets`` library from a local path laid out like the hub repository (a
``README.md`` whose YAML ``configs`` point at each configuration's data files); nothing is fetched.

Staying in sync (card): the reference scorer "re-validates every sample against the decomposition
config at load time and refuses to score on drift". :func:`validate` does the same and raises
:class:`DatasetDriftError` listing the offending rows.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.task import Subgoal, TaskCategory

DECOMPOSITION = "decomposition"
SUBTASK_STATES = "subtask_states"
DECOMPOSITION_COLUMNS = ("benchmark", "scene", "instruction", "subtasks", "image_main", "objects",
                         "destinations", "category")
SUBTASK_STATE_COLUMNS = ("benchmark", "scene", "subtasks", "achieved", "query_idx", "label", "image_main",
                         "image_wrist", "tag", "arm", "source", "step")
IMAGE_COLUMNS = ("image_main", "image_wrist")
MAX_REPORTED_PROBLEMS = 20


class DatasetDriftError(LadderError):
    """Samples and decomposition disagree (or a row is malformed): scoring is refused."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        shown = "\n  ".join(self.problems[:MAX_REPORTED_PROBLEMS])
        more = len(self.problems) - MAX_REPORTED_PROBLEMS
        tail = f"\n  ... and {more} more" if more > 0 else ""
        super().__init__(f"refusing to score: {len(self.problems)} problem(s) between the configurations:\n"
                         f"  {shown}{tail}")


def decode_image(data: bytes | None) -> np.ndarray | None:
    """An RGB uint8 array from stored image bytes (PNG, JPEG, ...)."""
    if data is None:
        return None
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8)


@dataclass(frozen=True)
class BenchTask:
    """One decomposition row."""

    benchmark: str
    scene: str
    instruction: str
    category: TaskCategory
    subtasks: tuple[str, ...]
    objects: tuple[str, ...]
    destinations: tuple[str, ...]
    image_main: bytes
    robot: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.benchmark, self.scene)

    @property
    def subgoals(self) -> tuple[Subgoal, ...]:
        return tuple(Subgoal(o, d, t) for o, d, t in zip(self.objects, self.destinations, self.subtasks))


@dataclass(frozen=True)
class BenchSample:
    """One subtask_states row; ``frame_id`` is a hash of its image bytes (views that are equal share answers)."""

    index: int
    benchmark: str
    scene: str
    subtasks: tuple[str, ...]
    achieved: tuple[bool, ...]
    query_idx: int
    label: bool
    tag: str
    arm: str
    source: str
    step: int
    image_main: bytes
    image_wrist: bytes | None
    instruction: str | None = None

    @property
    def task_key(self) -> tuple[str, str]:
        return (self.benchmark, self.scene)

    @property
    def sample_id(self) -> str:
        return f"{self.benchmark}|{self.scene}|{self.arm}|{self.source}|{self.step}|{self.query_idx}"

    @property
    def frame_id(self) -> str:
        h = hashlib.sha256(self.image_main)
        h.update(b"\x00wrist\x00" + (self.image_wrist or b""))
        return h.hexdigest()[:20]

    def views(self) -> list[tuple[str, np.ndarray]]:
        """The camera views a deployed verifier would get: main, and wrist when the sample has one."""
        views = [("main", decode_image(self.image_main))]
        if self.image_wrist is not None:
            views.append(("wrist", decode_image(self.image_wrist)))
        return views


@dataclass(frozen=True)
class Benchmark:
    tasks: dict[tuple[str, str], BenchTask]
    samples: list[BenchSample]
    path: str

    def fingerprint(self) -> str:
        """A hash of everything that decides a score, so a resumed run cannot mix two revisions."""
        h = hashlib.sha256()
        for key in sorted(self.tasks):
            t = self.tasks[key]
            h.update(json.dumps([t.benchmark, t.scene, t.instruction, t.category.value, t.subtasks, t.objects,
                                 t.destinations, hashlib.sha256(t.image_main).hexdigest()]).encode())
        for s in self.samples:
            h.update(json.dumps([s.sample_id, s.subtasks, s.achieved, s.query_idx, s.label, s.tag,
                                 s.frame_id]).encode())
        return h.hexdigest()


def _image_bytes(value: Any) -> bytes | None:
    """Raw bytes of an undecoded ``datasets`` Image value ({'bytes', 'path'})."""
    if value is None:
        return None
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return bytes(value["bytes"])
        if value.get("path"):
            return Path(value["path"]).read_bytes()
    raise ValueError(f"not an image value: {type(value).__name__}")


def _load_config(path: str, config: str, cache_dir: str | None) -> Any:
    # A local directory needs no hub; make sure nothing tries (effective when datasets loads here first).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    try:
        data = datasets.load_dataset(path, config, split="train", cache_dir=cache_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(f"cannot read configuration {config!r}: {exc}", source=path) from None
    for column in IMAGE_COLUMNS:
        if column in data.column_names:
            data = data.cast_column(column, datasets.Image(decode=False))
    return data


def _missing(columns: Sequence[str], have: Sequence[str]) -> list[str]:
    return [c for c in columns if c not in have]


def load_benchmark(path: str | Path, cache_dir: str | None = None) -> Benchmark:
    """Read both configurations from a local dataset directory and :func:`validate` them."""
    path = str(path)
    if not Path(path).is_dir():
        raise ConfigError("the benchmark dataset must be a local directory (nothing is downloaded)", source=path)
    decomposition = _load_config(path, DECOMPOSITION, cache_dir)
    states = _load_config(path, SUBTASK_STATES, cache_dir)
    problems = [f"{DECOMPOSITION}: missing column {c!r}" for c in
                _missing(DECOMPOSITION_COLUMNS, decomposition.column_names)]
    problems += [f"{SUBTASK_STATES}: missing column {c!r}" for c in
                 _missing(SUBTASK_STATE_COLUMNS, states.column_names)]
    if problems:
        raise DatasetDriftError(problems)
    tasks: dict[tuple[str, str], BenchTask] = {}
    for number, row in enumerate(decomposition):
        where = f"{DECOMPOSITION} row {number} ({row.get('benchmark')}/{row.get('scene')})"
        try:
            category = TaskCategory.parse(str(row["category"]))
            task = BenchTask(
                benchmark=str(row["benchmark"]), scene=str(row["scene"]), instruction=str(row["instruction"]),
                category=category, subtasks=tuple(row["subtasks"]), objects=tuple(row["objects"]),
                destinations=tuple(row["destinations"]), image_main=_image_bytes(row["image_main"]),
                robot=row.get("robot") or None)
        except (ConfigError, ValueError, TypeError) as exc:
            problems.append(f"{where}: {exc}")
            continue
        if task.key in tasks:
            problems.append(f"{where}: duplicate task {task.key}")
        tasks[task.key] = task
    samples: list[BenchSample] = []
    for number, row in enumerate(states):
        try:
            samples.append(BenchSample(
                index=number, benchmark=str(row["benchmark"]), scene=str(row["scene"]),
                subtasks=tuple(row["subtasks"]), achieved=tuple(bool(a) for a in row["achieved"]),
                query_idx=int(row["query_idx"]), label=bool(row["label"]), tag=str(row["tag"]),
                arm=str(row["arm"]), source=str(row["source"]), step=int(row["step"]),
                image_main=_image_bytes(row["image_main"]), image_wrist=_image_bytes(row["image_wrist"]),
                instruction=row.get("instruction")))
        except (ValueError, TypeError) as exc:
            problems.append(f"{SUBTASK_STATES} row {number}: {exc}")
    benchmark = Benchmark(tasks=tasks, samples=samples, path=path)
    problems += validate(benchmark)
    if problems:
        raise DatasetDriftError(problems)
    return benchmark


def validate(benchmark: Benchmark) -> list[str]:
    """Every way a sample can disagree with its task, or a row with itself; empty when in sync."""
    problems = []
    for task in benchmark.tasks.values():
        where = f"task {task.benchmark}/{task.scene}"
        if not task.subtasks:
            problems.append(f"{where}: no subtasks")
        if not (len(task.subtasks) == len(task.objects) == len(task.destinations)):
            problems.append(f"{where}: {len(task.subtasks)} subtasks, {len(task.objects)} objects, "
                            f"{len(task.destinations)} destinations")
        if task.image_main is None:
            problems.append(f"{where}: no reset frame")
    seen: set[str] = set()
    for s in benchmark.samples:
        where = f"sample {s.index} ({s.benchmark}/{s.scene}, step {s.step})"
        task = benchmark.tasks.get(s.task_key)
        if task is None:
            problems.append(f"{where}: no such task in {DECOMPOSITION}")
            continue
        if s.subtasks != task.subtasks:
            problems.append(f"{where}: subtasks {list(s.subtasks)} differ from the reference plan "
                            f"{list(task.subtasks)}")
        if len(s.achieved) != len(s.subtasks):
            problems.append(f"{where}: {len(s.achieved)} achieved flags for {len(s.subtasks)} subtasks")
        if not 0 <= s.query_idx < len(s.subtasks):
            problems.append(f"{where}: query_idx {s.query_idx} outside 0..{len(s.subtasks) - 1}")
        elif len(s.achieved) == len(s.subtasks) and s.label != s.achieved[s.query_idx]:
            problems.append(f"{where}: label {s.label} disagrees with achieved[{s.query_idx}]")
        if s.instruction is not None and s.instruction != task.instruction:
            problems.append(f"{where}: instruction {s.instruction!r} differs from {task.instruction!r}")
        if s.image_main is None:
            problems.append(f"{where}: no main image")
        if s.sample_id in seen:
            problems.append(f"{where}: duplicate sample {s.sample_id}")
        seen.add(s.sample_id)
    return problems
