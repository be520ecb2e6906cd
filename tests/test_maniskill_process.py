"""The Bridge backend in fresh processes: both process setups work and give identical episodes.

Parity checks compare two processes (the reference loop and the ROS graph) step by step, so an
episode must not depend on how its process was started. Two children run the same scripted
episode, side by side:

* one with the complete environment of :func:`runtime_environment` (``LD_LIBRARY_PATH`` and
  ``VK_ICD_FILENAMES`` exported before start, as a shell or a launch file does);
* one with none of it, so the backend configures its own process (private libdrm loaded by path).

Each prints a digest of every observation (image bytes, joints, end effector, target, predicates)
and the connection attempts its socket guard refused; the digests must match and nothing may be
fetched. Run as ``python -m tests.test_maniskill_process --digest`` to print one digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys

import pytest

from ladder_ros.sim.maniskill_env import missing_prerequisites, repository_root, resolve_asset_dir, runtime_environment

pytestmark = [pytest.mark.maniskill, pytest.mark.slow]

TASK_ID, LAYOUT, SEED, MAX_STEPS = "kitchen_split_2", 2, 11, 24
ENVIRONMENT_VARIABLES = ("MS_ASSET_DIR", "VK_ICD_FILENAMES", "LD_LIBRARY_PATH")


def _episode_digest(asset_dir: str) -> dict:
    """Run the scripted carrot placement for MAX_STEPS steps; hash everything observed."""
    attempts: list[str] = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[1:2]))
        raise OSError("network access refused in a ManiSkill test")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse  # type: ignore[assignment]

    from ladder_ros.core.suite import load_suite
    from ladder_ros.sim.maniskill_scripted import ScriptedPlacement
    from ladder_ros.sim.registry import make_simulator

    suite = load_suite(repository_root() / "config" / "suites" / "bridge.yaml")
    sim = make_simulator("maniskill_bridge", suite, asset_dir=asset_dir)
    obs = sim.reset(suite.task(TASK_ID), LAYOUT, SEED)
    plan = ScriptedPlacement("carrot", "plate").actions(obs)
    digest = hashlib.sha256()
    action = next(plan)
    for _ in range(MAX_STEPS + 1):
        for array in (obs.image, obs.joint_positions, obs.ee_position, obs.ee_euler, obs.target_position):
            digest.update(array.tobytes())
        digest.update(json.dumps(obs.privileged.goal.to_dict(), sort_keys=True).encode())
        if obs.step == MAX_STEPS:
            break
        obs = sim.step(action)
        action = plan.send(obs)
    sim.close()
    return {"digest": digest.hexdigest(), "steps": obs.step, "held": sorted(obs.privileged.goal.held),
            "refused_connections": attempts, "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "")}


def _run_child(env: dict[str, str], asset_dir: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "tests.test_maniskill_process", "--digest", "--asset-dir", asset_dir]
    return subprocess.Popen(command, cwd=repository_root(), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_both_process_setups_give_the_same_episode():
    reason = missing_prerequisites()
    if reason is not None:
        pytest.skip(f"SimplerEnv (ManiSkill3) backend unavailable: {reason}")
    asset_dir = str(resolve_asset_dir())
    exported = runtime_environment(asset_dir)
    bare = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    children = [_run_child(exported, asset_dir), _run_child(bare, asset_dir)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, f"child failed:\n{err[-3000:]}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    with_exports, self_configured = results
    lavapipe_dir = exported["LD_LIBRARY_PATH"].split(os.pathsep)[0]
    assert lavapipe_dir in with_exports["ld_library_path"].split(os.pathsep)
    assert lavapipe_dir not in self_configured["ld_library_path"].split(os.pathsep)
    assert with_exports["steps"] == self_configured["steps"] == MAX_STEPS
    assert with_exports["held"] == ["carrot"], "the scripted motion should hold the carrot by then"
    assert with_exports["digest"] == self_configured["digest"]
    assert with_exports["refused_connections"] == self_configured["refused_connections"] == []


def main() -> int:
    parser = argparse.ArgumentParser(description="print the digest of one scripted Bridge episode")
    parser.add_argument("--digest", action="store_true", required=True)
    parser.add_argument("--asset-dir", required=True)
    args = parser.parse_args()
    print(json.dumps(_episode_digest(args.asset_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
