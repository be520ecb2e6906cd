"""franky-sim (a libfranka-protocol Franka simulator, MuJoCo backend) as a subprocess on a loopback address.

Used by the Franka driver tests, the graph's Franka episode test and the benchmarks. The process is
the package's own server (``python -m ladder_ros.instruments.franka_twin.franky_sim_server --host auto``, what the
rehearsal's ``franka_twin`` node runs in-process): it prints the address it bound (127.0.0.1
unless another server holds its ports there); the caller connects franky to it. The process is
stopped by its pid.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

from ladder_ros.instruments.franka_twin.franky_sim_server import AUTO, SERVING

STARTUP_TIMEOUT_S = 180.0  # MuJoCo model load and pinocchio on a loaded 2-core machine


class FrankySim:
    def __init__(self) -> None:
        self.lines: list[str] = []
        server = "ladder_ros.instruments.franka_twin.franky_sim_server"
        self.process = subprocess.Popen([sys.executable, "-m", server, "--host", AUTO],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, "MUJOCO_GL": "egl", "PYTHONUNBUFFERED": "1"})
        self.host = self._wait_for_address()
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_address(self) -> str:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            found = re.search(SERVING + r" '(127\.[\d.]+)'", line)
            if found:
                return found.group(1)
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError("franky-sim did not start: " + " | ".join(self.lines[-20:]))

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
