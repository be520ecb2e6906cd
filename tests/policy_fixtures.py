"""Policy configs, a scripted chunk source and a discrete-time driver for the chunk executor (pure tests)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ladder_ros.core.errors import LadderError
from ladder_ros.core.observation import Observation
from ladder_ros.policies.chunked import RawChunk
from ladder_ros.policies.config import parse_policy_config
from ladder_ros.policies.executor import ChunkExecutor
from ladder_ros.policies.observation import ObservationBundle

AXES = [{"name": n, "unit": u, "low": lo, "high": hi} for n, u, lo, hi in (
    ("ee_dx", "m", -0.1, 0.1), ("ee_dy", "m", -0.1, 0.1), ("ee_dz", "m", -0.1, 0.1),
    ("ee_droll", "rad", -1.6, 1.6), ("ee_dpitch", "rad", -1.6, 1.6), ("ee_dyaw", "rad", -1.6, 1.6),
    ("gripper", "open fraction", -0.5, 1.5))]

BRIDGE_LIKE = {
    "schema_version": 1, "name": "test_bridge", "embodiment": "widowx", "backend": "openpi",
    "server": {"host": "127.0.0.1", "port": 8000, "connect_timeout_s": 2.0, "request_timeout_s": 2.0,
               "backoff_initial_s": 0.2, "backoff_max_s": 1.0},
    "control_rate_hz": 5, "chunk": {"length": 5, "execute": 4}, "max_observation_age_s": 0.5,
    "cameras": [{"name": "primary", "topic": "camera/image_raw", "key": "observation/image", "height": 32,
                 "width": 32, "resize": "resize_with_pad"}],
    "state": [{"key": "observation/state", "source": "ee_position", "unit": "m"},
              {"key": "observation/state", "source": "ee_euler", "reference": "top_down", "angles": "sxyz",
               "unit": "rad"},
              {"key": "observation/state", "source": "gripper_open", "unit": "1 open"}],
    "prompt_key": "prompt",
    "action": {"key": "actions", "kind": "ee_delta", "rotation": "euler_xyz", "gripper": "open_fraction",
               "axes": AXES},
    "normalization": "none",
}


def config_data(**changes) -> dict:
    """The Bridge-like test config as a dict, with top-level keys replaced (``None`` removes one)."""
    data = copy.deepcopy(BRIDGE_LIKE)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def make_config(**changes):
    return parse_policy_config(config_data(**changes), source="test.yaml")


def write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def observation(step: int = 0, aperture: float = 1.0, image_size: int = 48) -> Observation:
    image = np.full((image_size, image_size, 3), 120, dtype=np.uint8)
    return Observation(step=step, image=image, aperture=aperture, ee_position=np.array([0.3, 0.0, 0.1]),
                       ee_euler=np.zeros(3), joint_names=("a", "b"), joint_positions=np.zeros(2))


def bundle(step: int = 0, stamp_ns: int | None = None) -> ObservationBundle:
    return ObservationBundle(observation(step), step if stamp_ns is None else stamp_ns)


@dataclass
class ScriptedSource:
    """Returns chunks whose action ``i`` has ``ee_dx = (chunk number) + i / 100`` (or what ``chunk`` gives)."""

    length: int = 5
    dim: int = 7
    name: str = "scripted_source"
    chunk: object = None  # callable(n) -> array, to misbehave
    fail: str = ""  # raise a LadderError with this text
    calls: list = field(default_factory=list)

    def infer(self, bundle, instruction, noise_seed):
        self.calls.append((bundle.stamp_ns, instruction, noise_seed))
        if self.fail:
            raise LadderError(self.fail)
        n = len(self.calls) - 1
        if self.chunk is not None:
            actions = np.asarray(self.chunk(n))
        else:
            actions = np.zeros((self.length, self.dim))
            actions[:, 0] = (n % 50) / 1000.0 + np.arange(self.length) / 10000.0
            actions[:, 6] = 1.0
        return RawChunk(actions=actions, latency_s=0.0)

    def close(self):
        pass


class ExecutorSimulation:
    """Drives a :class:`ChunkExecutor` on simulated time: control ticks every period; each request is served
    at the instant it was submitted (the observation is taken then) and its result posted ``latency_s`` later
    (the worker runs inline)."""

    def __init__(self, source, config, latency_s: float, *, observation_age=lambda now: 0.0):
        self.now = 0.0
        self.latency_s = latency_s
        self.source = source
        self.messages: list[str] = []
        self.executor = ChunkExecutor(self, config, self._snapshot, observation_age, clock=lambda: self.now,
                                      log=self.messages.append)
        self.period = config.period_s
        self.actions = []
        self.name = source.name

    def _snapshot(self):
        return bundle(stamp_ns=int(round(self.now * 1e9))), self.now

    def infer(self, bundle, instruction, noise_seed):
        raw = self.source.infer(bundle, instruction, noise_seed)
        self.now += self.latency_s
        return raw

    def close(self):
        pass

    def serve_until(self, t: float) -> None:
        slot = self.executor._slot
        while slot is not None and slot.submitted_at + self.latency_s <= t:
            self.now = slot.submitted_at
            self.executor.work_once()
            slot = self.executor._slot

    def run(self, ticks: int, start_tick: int = 1):
        """Ticks ``start_tick .. start_tick + ticks - 1``; returns what they gave (also kept in ``actions``)."""
        given = []
        for n in range(start_tick, start_tick + ticks):
            t = n * self.period
            self.serve_until(t)
            self.now = t
            given.append(self.executor.tick(t))
        self.actions.extend(given)
        return given
