"""The run key: everything that changes an episode of an evaluation run, so a rerun resumes only its own.

An evaluation writes its episodes into one output folder and a rerun into the same folder skips
the episodes already there. That is only sound when the rerun would have produced the same
episodes, so the folder is claimed by a key (``run_key.json``) holding everything that changes an
episode: the suite and a digest of its file, the simulator and its options, the policy, its noise
and its action convention, the verifier, where plans come from and the planner's backend, the
embodiment preset with every number and option, and the versions of this package and of the
simulator. Which tasks, variants, episodes and seeds are run is not part of it: those identify
episodes inside a run (``episode_key``), so a rerun may add more of them.

A rerun whose key differs is refused with one line naming each field that differs; a folder with
episodes but no key (written before keys existed) is refused too, since nothing says what made them.

Interface (also for other executors of the same runs)::

    key = run_key(suite_path=..., simulator=..., ...)   # a plain JSON-able dict
    claim_output(out_dir, key)                          # raises RunKeyMismatch, or writes the key
    episode_key(record)                                 # (task_id, variant, layout, seed)
    key_differences(a, b)                               # the fields that differ, one phrase each
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from ladder_ros import __version__
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.presets import EmbodimentPreset

RUN_KEY_FILE = "run_key.json"
EPISODES_FILE = "episodes.jsonl"
KEY_VERSION = 1

# The Python packages whose version can change what a simulator backend computes.
SIMULATOR_PACKAGES = {"mujoco_tabletop": ("mujoco",), "maniskill_bridge": ("mani-skill", "sapien")}


class RunKeyMismatch(ConfigError):
    """The output folder holds episodes of another configuration."""


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (the suite a run read)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _plain(value: Any) -> Any:
    """A JSON-able copy: dataclasses and enums as plain data, tuples as lists, keys as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and isinstance(getattr(value, "value"), (str, int)):
        return value.value
    return value


def run_key(*, suite_path: str | Path, suite_name: str, simulator: str, simulator_options: Mapping[str, Any],
            policy: str, noise: str, action_convention: Mapping[str, str], verifier: Mapping[str, Any] | None,
            plan_source: str, planner: Mapping[str, Any] | None, preset: EmbodimentPreset) -> dict:
    """The key of one run configuration (a dict with sorted, JSON-able values)."""
    key = {
        "key_version": KEY_VERSION,
        "suite": suite_name,
        "suite_sha256": file_digest(suite_path),
        "simulator": simulator,
        "simulator_options": dict(simulator_options),
        "policy": policy,
        "noise": noise,
        "action_convention": dict(action_convention),
        "verifier": dict(verifier) if verifier else None,
        "plan_source": plan_source,
        "planner": dict(planner) if planner else None,
        "preset": {k: v for k, v in dataclasses.asdict(preset).items() if k != "description"},
        "versions": {"ladder_ros": __version__, **package_versions(SIMULATOR_PACKAGES.get(simulator, ()))},
    }
    return _plain(key)


def key_digest(key: Mapping[str, Any]) -> str:
    """A short, stable digest of a key (stored with every episode it made)."""
    return hashlib.sha256(json.dumps(_plain(key), sort_keys=True).encode()).hexdigest()[:16]


def key_differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """One phrase per field that differs between two keys: ``name "old" there, "new" now``."""
    diffs = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            diffs += key_differences(a, b, f"{prefix}{name}.")
        else:
            diffs.append(f"{prefix}{name} {json.dumps(a)} there, {json.dumps(b)} now")
    return diffs


def claim_output(out: str | Path, key: Mapping[str, Any]) -> None:
    """Make ``out`` the folder of the run ``key``, or raise :class:`RunKeyMismatch` in one line.

    A new or empty folder gets the key; a folder with the same key is resumed; anything else is
    refused, naming what differs, and nothing in it is touched.
    """
    out = Path(out)
    key = _plain(key)
    key_file, episodes = out / RUN_KEY_FILE, out / EPISODES_FILE
    if key_file.exists():
        try:
            old = json.loads(key_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RunKeyMismatch(f"{key_file} is unreadable ({exc}); use another output folder") from None
        if old != key:
            diffs = key_differences(old, key) if isinstance(old, Mapping) else ["the whole key"]
            raise RunKeyMismatch(f"{out} holds episodes of another configuration ({'; '.join(diffs)}); "
                                 "use another output folder")
        return
    if episodes.exists() and episodes.stat().st_size > 0:
        raise RunKeyMismatch(f"{out} holds episodes but no {RUN_KEY_FILE} saying what made them; "
                             "use another output folder")
    out.mkdir(parents=True, exist_ok=True)
    key_file.write_text(json.dumps(key, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def episode_key(record: Mapping[str, Any]) -> tuple[str, str, int, int]:
    """What identifies an episode inside a run: (task id, variant, layout, seed)."""
    return (str(record["task_id"]), str(record["variant"]), int(record["layout"]), int(record["seed"]))
