"""Writes a benchmark dataset in the card's schema, laid out like the hub repository.

``README.md`` carries the YAML ``configs`` that tell ``datasets.load_dataset(path, name)`` where
each configuration's parquet files are, exactly as on the hub; images are stored as PNG bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

README = """---
configs:
- config_name: decomposition
  data_files:
  - split: train
    path: decomposition/*.parquet
- config_name: subtask_states
  data_files:
  - split: train
    path: subtask_states/*.parquet
---
Synthetic benchmark written by the tests.
"""


def solid_image(rgb: tuple[int, int, int], size: tuple[int, int] = (24, 32)):
    from PIL import Image

    return Image.fromarray(np.full((*size, 3), rgb, dtype=np.uint8))


def write_benchmark(directory: str | Path, tasks: list[dict], samples: list[dict]) -> Path:
    from datasets import Dataset, Features, Image, Value

    directory = Path(directory)
    strings = [Value("string")]
    decomposition = Features({
        "benchmark": Value("string"), "scene": Value("string"), "instruction": Value("string"),
        "subtasks": strings, "image_main": Image(), "objects": strings, "destinations": strings,
        "category": Value("string")})
    states = Features({
        "benchmark": Value("string"), "scene": Value("string"), "subtasks": strings, "achieved": [Value("bool")],
        "query_idx": Value("int32"), "label": Value("bool"), "image_main": Image(), "image_wrist": Image(),
        "tag": Value("string"), "arm": Value("string"), "source": Value("string"), "step": Value("int32")})
    for name, rows, features in (("decomposition", tasks, decomposition), ("subtask_states", samples, states)):
        columns = {key: [row[key] for row in rows] for key in features}
        (directory / name).mkdir(parents=True, exist_ok=True)
        Dataset.from_dict(columns, features=features).to_parquet(str(directory / name / "train-00000.parquet"))
    (directory / "README.md").write_text(README, encoding="utf-8")
    return directory
