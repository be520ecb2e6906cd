"""A Ray cluster of several nodes on this machine, bound to 127.0.0.1, that a test starts and stops.

Each node is a ``ray start --block`` process in a session of its own: every process Ray starts for
that node (GCS, raylet, agents, workers) stays in that session, so stopping the cluster signals
exactly those sessions and never another Ray on the machine (no machine-wide ``ray stop``). The
cluster has a token of its own (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``), its own temp folder
and no usage statistics. Run it only in a loopback-only network namespace (``scripts/test.sh``):
Ray probes an outside address to find its own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTED_LINE = "Ray runtime started."
# A driver that waits until the cluster's resources hold every node's CPUs: "Ray runtime started." says a node runs,
# not that the head schedules onto it yet (a sweep submitted before then ran on the head alone).
ALL_NODES_JOINED = """
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)
wanted, deadline = float(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while ray.cluster_resources().get("CPU", 0.0) < wanted and time.monotonic() < deadline:
    time.sleep(0.2)
print(ray.cluster_resources().get("CPU", 0.0))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _session_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class LocalRayCluster:
    """``nodes`` Ray nodes with ``cpus_per_node`` CPUs each (the first is the head)."""

    def __init__(self, nodes: int = 2, cpus_per_node: int = 1, env: dict[str, str] | None = None,
                 start_timeout_s: float = 240.0):
        self.nodes, self.cpus_per_node, self.start_timeout_s = nodes, cpus_per_node, start_timeout_s
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = Path(tempfile.mkdtemp(prefix="lrray", dir="/tmp"))  # short: Ray's socket paths
        self.env = dict(env or self.new_credentials())
        self.processes: list[subprocess.Popen] = []

    @staticmethod
    def new_credentials() -> dict[str, str]:
        """A token of its own (nothing written under ~/.ray) and no usage statistics; a driver of the
        cluster needs the same in its environment before it imports ray."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}

    def _ray(self) -> str:
        return str(Path(sys.executable).with_name("ray"))

    def _start_node(self, head: bool) -> None:
        n = len(self.processes)
        args = [self._ray(), "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus_per_node}",
                "--num-gpus=0", "--disable-usage-stats", f"--temp-dir={self.temp_dir}",
                "--object-store-memory=100000000"]
        args += (["--head", f"--port={self.port}", "--include-dashboard=false"] if head
                 else [f"--address={self.address}"])
        log = (self.temp_dir / f"node{n}.log").open("w")
        self.processes.append(subprocess.Popen(args, env={**os.environ, **self.env}, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + self.start_timeout_s
        path = self.temp_dir / f"node{n}.log"
        while STARTED_LINE not in path.read_text(errors="replace"):
            if self.processes[-1].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray node {n} did not start:\n{path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def start(self) -> "LocalRayCluster":
        try:
            for n in range(self.nodes):
                self._start_node(head=n == 0)
            self._wait_until_all_nodes_joined()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_all_nodes_joined(self) -> None:
        wanted = self.nodes * self.cpus_per_node
        done = subprocess.run([sys.executable, "-c", ALL_NODES_JOINED, self.address, str(wanted),
                               str(self.start_timeout_s)], env={**os.environ, **self.env}, capture_output=True,
                              text=True, timeout=self.start_timeout_s + 60)
        lines = done.stdout.split()
        if done.returncode != 0 or not lines or float(lines[-1]) < wanted:
            raise RuntimeError(f"the cluster's resources did not reach {wanted} CPUs ({self.nodes} nodes) within "
                               f"{self.start_timeout_s:.0f} s: {done.stdout[-500:]}{done.stderr[-2000:]}")

    def pids(self) -> list[int]:
        """Every live process of this cluster (those in its nodes' sessions)."""
        sessions = {p.pid for p in self.processes}
        return [int(e) for e in os.listdir("/proc") if e.isdigit() and _session_of(int(e)) in sessions]

    def busy_workers(self, function: str) -> list[int]:
        """Worker processes running ``function`` now (Ray titles a busy worker ``ray::<function>``)."""
        return [pid for pid in self.pids() if _cmdline(pid).startswith(f"ray::{function}")]

    def kill_busy_worker(self, function: str) -> int | None:
        """SIGKILL one worker that is inside ``function`` now; its pid, or None when none is.

        The worker is stopped first (SIGSTOP) and its title read again, so it is killed only if it was
        still inside the function when it froze: it cannot have handed its result back.
        """
        for pid in self.busy_workers(function):
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            if _cmdline(pid).startswith(f"ray::{function}"):
                os.kill(pid, signal.SIGKILL)
                return pid
            os.kill(pid, signal.SIGCONT)
        return None

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM each ``ray start`` (it stops its node's processes), then SIGKILL whatever is left in
        the nodes' sessions; removes the temp folder."""
        for p in self.processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.processes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.pids()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if left:
            raise RuntimeError(f"ray processes still alive after SIGKILL: {left}")
