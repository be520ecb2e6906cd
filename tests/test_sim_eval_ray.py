"""sim-eval on a real Ray cluster: two nodes on this machine, one worker process each, bound to 127.0.0.1.

The cluster is started once for the module (``ray start`` twice, as on two machines) and stopped by
the module itself, by its own process sessions (tests/ray_cluster.py). Small sweeps on the MuJoCo
tabletop and on the ManiSkill Bridge scene must give the same records as the local run, whatever
order they finish in; a worker killed mid-episode costs a rerun, written in the record; a driver
killed mid-sweep resumes from its output folder; a node without the assets is named in one line.
Ray looks for its own address by probing an outside one, so these tests run only in a network
namespace that has nothing but loopback (``scripts/test.sh`` as root, as CI runs).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ladder_ros.cli import main
from ladder_ros.sim.maniskill_env import missing_prerequisites, repository_root
from tests.ray_cluster import LocalRayCluster
from tests.sim_eval_helpers import SWEEP, SWEEP_EPISODES, raw_records, records_of

if importlib.util.find_spec("ray") is None:
    pytest.skip("ray is not installed (requirements/ray.txt)", allow_module_level=True)
pytest.importorskip("mujoco")
if [name for _, name in socket.if_nameindex()] != ["lo"]:
    pytest.skip("Ray probes an outside address to find its own: run in a loopback-only network namespace "
                "(scripts/test.sh as root)", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
EPISODE_FUNCTION = "run_in_worker"  # what a busy Ray worker is titled after (ray::run_in_worker)
BRIDGE_SUITE = str(repository_root() / "config" / "suites" / "bridge.yaml")
BRIDGE_SWEEP = ["--simulator", "maniskill_bridge", "--suite", BRIDGE_SUITE,
                "--tasks", "carrot_on_plate_1", "--episodes", "2", "--variants", "privileged_verifier",
                "--noise", "off", "--no-progress"]


# The drivers these tests run, in this process and in subprocesses, hold the cluster's token. Ray reads
# its authentication mode once, when it is first imported, so the token is in the environment before
# anything here imports ray, and stays for the session.
CLUSTER_ENV = LocalRayCluster.new_credentials()
os.environ.update(CLUSTER_ENV)


@pytest.fixture(scope="module")
def cluster():
    ray_cluster = LocalRayCluster(nodes=2, cpus_per_node=1, env=CLUSTER_ENV).start()
    try:
        yield ray_cluster
    finally:
        ray_cluster.stop()


@pytest.fixture(scope="module")
def local_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    assert main(["sim-eval", *SWEEP, "--jobs", "1", "--out", str(out)]) == 0
    return records_of(out)


def on_ray(cluster, *extra: str) -> list[str]:
    return ["--executor", "ray", "--ray-address", cluster.address, *extra]


def test_a_tabletop_sweep_on_two_nodes_matches_the_local_run(cluster, local_records, tmp_path):
    assert main(["sim-eval", *SWEEP, *on_ray(cluster), "--out", str(tmp_path)]) == 0
    assert records_of(tmp_path) == local_records
    runs = [r["execution"] for r in raw_records(tmp_path)]
    assert {r["executor"] for r in runs} == {"ray"} and all(r["attempts"] == 1 for r in runs)
    assert len({r["node_id"] for r in runs}) == 2, "both nodes ran episodes"
    assert len({(r["node_id"], r["pid"]) for r in runs}) >= 2


def test_a_worker_killed_mid_episode_costs_a_rerun_that_the_record_shows(cluster, local_records, tmp_path):
    driver = subprocess.Popen([sys.executable, "-m", "ladder_ros.cli", "sim-eval", *SWEEP, *on_ray(cluster),
                               "--max-retries", "2", "--out", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    try:
        while killed is None and driver.poll() is None:
            if raw_records(tmp_path):  # the sweep is under way: a worker is in an episode now
                killed = cluster.kill_busy_worker(EPISODE_FUNCTION)
            time.sleep(0.05)
        output, _ = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert killed is not None, f"no busy worker was found to kill:\n{output[-3000:]}"
    assert driver.returncode == 0, output[-3000:]
    assert records_of(tmp_path) == local_records  # complete, and the rerun episode is the same episode
    reruns = [r for r in raw_records(tmp_path) if r["execution"]["attempts"] > 1]
    assert len(reruns) == 1, output[-3000:]
    assert reruns[0]["execution"]["lost"][0].startswith("WorkerCrashedError")
    assert "finished on attempt 2" in output


def test_a_driver_killed_mid_sweep_resumes_from_its_output_folder(cluster, local_records, tmp_path):
    driver = subprocess.Popen([sys.executable, "-m", "ladder_ros.cli", "sim-eval", *SWEEP, *on_ray(cluster),
                               "--out", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while driver.poll() is None and len(raw_records(tmp_path)) < 2:
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait(timeout=60)
    done_before = len(raw_records(tmp_path))
    assert 2 <= done_before < SWEEP_EPISODES
    assert main(["sim-eval", *SWEEP, *on_ray(cluster), "--out", str(tmp_path)]) == 0
    assert records_of(tmp_path) == local_records  # nothing twice, nothing missing


@pytest.mark.parametrize("variable, value, message", [
    ("MS_ASSET_DIR", "/nonexistent/maniskill_assets", "ManiSkill asset folder /nonexistent/maniskill_assets"),
    ("LADDER_LVP_DIR", "/nonexistent/lvp", "no software Vulkan driver in /nonexistent/lvp"),
])
def test_a_worker_without_assets_or_vulkan_driver_is_named_in_one_line(cluster, tmp_path, capsys,
                                                                       variable, value, message):
    if variable == "LADDER_LVP_DIR" and missing_prerequisites() is not None:
        pytest.skip(f"the Vulkan check comes after the assets, which are missing here: {missing_prerequisites()}")
    code = main(["sim-eval", *BRIDGE_SWEEP, *on_ray(cluster, "--ray-env", f"{variable}={value}"),
                 "--out", str(tmp_path)])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert error.startswith("ladder-ros sim-eval: error: worker ") and "Ray node 127.0.0.1" in error
    assert message in error
    assert not raw_records(tmp_path)


def test_an_episode_that_no_node_can_hold_is_refused(cluster, tmp_path, capsys):
    assert main(["sim-eval", *SWEEP, *on_ray(cluster, "--gpus-per-episode", "0.25"), "--out", str(tmp_path)]) == 2
    assert "no node of the Ray cluster has 1.0 CPU(s) and 0.25 GPU(s) for an episode" in capsys.readouterr().err


def _ray_children() -> list[str]:
    """Ray's own processes (GCS, raylet) that this test process started."""
    me, names = os.getpid(), []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if parent == me and command.rsplit("/", 1)[-1] in ("gcs_server", "raylet"):
            names.append(command)
    return names


def test_without_an_address_a_private_ray_instance_runs_the_sweep_and_is_stopped(local_records, tmp_path):
    assert main(["sim-eval", *SWEEP, "--executor", "ray", "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert records_of(tmp_path) == local_records
    assert {r["execution"]["node_ip"] for r in raw_records(tmp_path)} == {"127.0.0.1"}
    assert not _ray_children(), "the Ray instance sim-eval started is still running"


def test_a_bridge_sweep_on_two_nodes_matches_the_local_run(cluster, tmp_path):
    reason = missing_prerequisites()
    if reason is not None:
        pytest.skip(f"SimplerEnv (ManiSkill3) backend unavailable: {reason}")
    local, ray = tmp_path / "local", tmp_path / "ray"
    assert main(["sim-eval", *BRIDGE_SWEEP, "--jobs", "1", "--out", str(local)]) == 0
    assert main(["sim-eval", *BRIDGE_SWEEP, *on_ray(cluster), "--out", str(ray)]) == 0
    expected = records_of(local)
    assert len(expected) == 2 and records_of(ray) == expected
    assert [r["execution"]["executor"] for r in raw_records(ray)] == ["ray", "ray"]
    assert all(r["success_rule"] == "simplerenv" and r["simulator"] == "maniskill_bridge" for r in expected.values())
