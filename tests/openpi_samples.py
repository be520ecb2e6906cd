"""The messages both sides of the wire-format test pack, and a JSON-able description of what a message holds.

Imported by the test (numpy 2) and by the openpi-client peer script (numpy 1.26, its own environment), so it
depends on numpy alone.
"""

import numpy as np


def samples():
    """The objects both sides pack (the test builds the same ones with numpy 2 and compares the bytes)."""
    return [
        {"actions": np.arange(35, dtype=np.float32).reshape(5, 7) / 8.0},
        {"image": np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3), "prompt": "put the carrot on the plate"},
        {"state": np.array([0.25, -1.5, 3.0], dtype=np.float64), "flag": np.bool_(True), "count": np.int64(7)},
        {"mixed": [np.int16(-3), np.float32(0.5), np.zeros((0, 4), dtype=np.int32)], "nested": {"x": 1.5}},
        {"half": np.array([1.0, -2.0], dtype=np.float16), "u16": np.array([65535], dtype=">u2")},
    ]


def describe(value):
    if isinstance(value, np.ndarray):
        return {"ndarray": value.dtype.str, "shape": list(value.shape), "values": value.ravel().tolist()}
    if isinstance(value, np.generic):
        return {"generic": value.dtype.str, "value": value.item()}
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    return value
