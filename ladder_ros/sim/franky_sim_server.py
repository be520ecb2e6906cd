"""franky-sim served from this process on a loopback address: the simulated Franka the rehearsal's driver reaches.

franky-sim (PyPI ``franky-sim`` 1.0.4, github.com/TimSchneider42/franky-sim, ``franky_sim/run_server.py``
and ``simulation_server.py``) speaks libfranka's network protocol, so the Franka driver's franky
connects to it exactly as to the arm's FCI address: the robot's command server on TCP port 1337
and the Franka Hand's on 1338 (``franka_robot_server.py``, ``franka_gripper_server.py``), the robot
state streamed over UDP each tick. :class:`FrankySimServer` does what the vendor's ``franky-sim``
command does, with the address chosen by the caller:

* a ``MujocoSimulator`` without a viewer, one FR3 with its hand added at ``start_joints``
  (``add_robot(initial_q=...)``; the vendor's default is its own reset pose);
* a ``SimulationServer`` bound to ``host`` only (``hostname_candidates=[host]``; the command
  picks the first free 127.x.y.z instead). A port already taken there is an error naming the
  address, never a silent move to another one the driver would not find;
* its loop (``run_async``: process the client's commands, step MuJoCo by 1 ms, send the state,
  sleep to hold 1 kHz) in a daemon thread. A tick that takes longer than 1 ms is not made up: the
  simulated robot's time (its tick count) then falls behind the wall clock, and the Franka moves
  slower than commanded in wall-clock terms, as the real arm never would. :meth:`stats` reports
  the lag so a rehearsal on a loaded machine says so.

What franky-sim does not model (docs/rehearsal_franka.md): no objects (the hand closes on nothing),
no reflexes from contact, no real-time kernel, the FR3's dynamics rather than a Panda's.

``python -m ladder_ros.sim.franky_sim_server [--host H]`` runs one as a process until SIGINT or
SIGTERM and prints the address it bound (``--host auto``: the first free 127.x.y.z, as the vendor's
command does), for tests and benchmarks that need the arm in a process of its own.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Sequence

from ladder_ros.core.errors import ConfigError, LadderError

TICK_S = 0.001  # franky-sim's tick: MuJoCo's timestep and the loop's 1 kHz (mujoco_simulator.py, simulation_server.py)
AUTO = "auto"
MISSING = ("the Franka twin needs franky-sim (pip install franky-sim==1.0.4, requirements/robots.txt) with its MuJoCo "
           "backend")
SERVING = "franky-sim serving the Franka at"  # the line the process prints once it listens
SAMPLE_TICKS = 10  # the arm's joints are sampled every 10 ticks (100 Hz of simulated time) for reports


@dataclass(frozen=True)
class SimulatedJoints:
    """The simulated arm's joints as franky-sim stepped them: what its robot state reports, sampled."""

    stamp_ns: int  # wall clock (time.time_ns) when sampled
    simulated_s: float  # franky-sim's own time (ticks)
    positions: tuple[float, ...]  # rad
    velocities: tuple[float, ...]  # rad/s


class FrankySimServer:
    """One simulated FR3 with its hand behind libfranka's protocol at ``host`` (module docstring)."""

    def __init__(self, host: str = "127.0.0.1", start_joints: Sequence[float] | None = None,
                 clock=time.monotonic):
        try:
            franky_sim = importlib.import_module("franky_sim")
            mujoco_simulator = importlib.import_module("franky_sim.mujoco_simulator")
        except ImportError as exc:
            raise LadderError(f"{MISSING} ({exc})") from None
        if start_joints is not None and len(start_joints) != 7:
            raise ConfigError(f"start_joints: the FR3 has 7 joints, got {len(start_joints)}")
        self._clock = clock
        self.sim = mujoco_simulator.MujocoSimulator(enable_visualization=False)
        self.sim.init()
        kwargs = {} if start_joints is None else {"initial_q": tuple(float(q) for q in start_joints)}
        self.robot = self.sim.add_robot(**kwargs)
        self.ticks = 0
        self.joints: SimulatedJoints | None = None  # replaced whole by the loop's thread
        self.sim.register_post_step_callback(self._count)
        candidates = {} if host == AUTO else {"hostname_candidates": [host]}
        self.server = franky_sim.SimulationServer(self.sim, **candidates)
        try:
            self.server.init()  # binds 1337 and the hand's 1338, then starts the simulation
        except OSError as exc:
            self.sim.cleanup()
            raise LadderError(f"franky-sim cannot listen at {host} (ports 1337 and 1338): {exc}; is another "
                              "franky-sim or a Franka there?") from None
        self.host: str = self.robot.hostname
        self._started: float | None = None
        self._last_stats: tuple[float, int] = (self._clock(), 0)
        self._stopped = False

    def _count(self, _sim) -> None:
        self.ticks += 1
        if self.ticks % SAMPLE_TICKS == 0:
            state = self.robot.inner_state
            self.joints = SimulatedJoints(time.time_ns(), self.ticks * TICK_S, tuple(state.q), tuple(state.dq))

    def start(self) -> "FrankySimServer":
        self._started = self._clock()
        self._last_stats = (self._started, 0)
        self.ticks = 0
        self.server.run_async(realtime=True)
        return self

    def stats(self) -> dict:
        """Simulated time against the wall clock since :meth:`start` (how far the 1 kHz loop fell behind), and the
        real-time factor since the previous call (``recent_real_time_factor``: what the arm does now)."""
        now, ticks = self._clock(), self.ticks
        wall = 0.0 if self._started is None else now - self._started
        simulated = ticks * TICK_S
        last_now, last_ticks = self._last_stats
        self._last_stats = (now, ticks)
        recent = (ticks - last_ticks) * TICK_S / (now - last_now) if now > last_now else None
        return {"host": self.host, "wall_s": round(wall, 3), "simulated_s": round(simulated, 3),
                "behind_s": round(max(0.0, wall - simulated), 3),
                "real_time_factor": round(simulated / wall, 3) if wall > 0 else None,
                "recent_real_time_factor": None if recent is None else round(recent, 3),
                "running": bool(self.server.async_thread and self.server.async_thread.is_alive())}

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.server.cleanup()  # stops the loop, joins its thread, closes the sockets
        self.sim.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="franky-sim (MuJoCo, one FR3 with its hand) on a loopback address")
    parser.add_argument("--host", default="127.0.0.1", help=f"address to listen at; {AUTO}: the first free 127.x.y.z")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server = FrankySimServer(args.host).start()
    except LadderError as exc:
        print(f"ladder_ros franky-sim: error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"{SERVING} '{server.host}'", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
