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
* its loop in a daemon thread: each tick is the vendor's ``run_once`` (process the client's commands,
  step MuJoCo by 1 ms, send the state) without its sleep, paced here on absolute deadlines
  (:class:`Pacer`). The vendor's ``run_async`` sleeps 1 ms less the tick's own time after every
  tick, so every sleep's overshoot is lost for good: its tick costs about 0.6 ms of Python here and
  its loop ran at 0.71 to 0.83 of real time on an idle machine (``benchmarks/bench_franky_sim_loop.py``,
  docs/rehearsal_franka.md). Paced
  on deadlines, a late tick is made up by the next ones running back to back, up to
  ``MAX_DEBT_S`` behind; a longer stall is dropped, not made up (a burst would move the arm faster
  than it can move). ``loop_nice`` gives the loop's thread a niceness of its own (None, the default:
  the process's). A negative one (-10) keeps the simulated arm on the wall clock beside a busy graph,
  as the real arm's control on its own computer is, but takes that CPU from the graph: with two test
  suites on two cores the driver beside it then missed its control periods (its watchdog held most
  of a fuzzing run's actions in the driver's own test process), so the default leaves it alone and the
  Franka graph's twin mode asks for -10 (``config/graphs/franka.yaml``). Where the system refuses the niceness, the
  loop runs at the process's and :meth:`stats` says so. Simulated time still falls
  behind the wall clock when the machine cannot give the loop its 0.6 ms a tick; the Franka then
  moves slower than commanded in wall-clock terms, as the real arm never would. :meth:`stats`
  reports the lag so a rehearsal on a loaded machine says so.

What franky-sim does not model (docs/rehearsal_franka.md): no objects (the hand closes on nothing),
no reflexes from contact, no real-time kernel, the FR3's dynamics rather than a Panda's.

``python -m ladder_ros.instruments.franka_twin.franky_sim_server [--host H]`` runs one as a process until SIGINT or
SIGTERM and prints the address it bound (``--host auto``: the first free 127.x.y.z, as the vendor's
command does), for tests and benchmarks that need the arm in a process of its own.
"""

from __future__ import annotations

import argparse
import importlib
import os
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
MAX_DEBT_S = 0.1  # project choice: a late loop makes up at most this much simulated time back to back (100 ticks)
DEFAULT_LOOP_NICE = None  # the loop thread keeps the process's niceness unless asked (module docstring)


class Pacer:
    """Paces a loop of period ``period_s`` on absolute deadlines (:meth:`wait` after each tick).

    A tick that ends before its deadline sleeps until it; one that ends late does not sleep, so the
    next ticks run back to back until the loop is on time again. A debt of more than ``max_debt_s``
    is dropped (the deadline moves to now) and counted in :attr:`dropped_s`.
    """

    def __init__(self, period_s: float, max_debt_s: float, clock=time.monotonic, sleep=time.sleep):
        if not (period_s > 0 and max_debt_s >= 0):
            raise ConfigError(f"a pacer needs a positive period and a debt of at least 0, got {period_s}, "
                              f"{max_debt_s}")
        self.period_s, self.max_debt_s = period_s, max_debt_s
        self._clock, self._sleep = clock, sleep
        self.deadline = clock() + period_s
        self.dropped_s = 0.0

    def wait(self) -> None:
        now = self._clock()
        if now < self.deadline:
            self._sleep(self.deadline - now)
        elif now - self.deadline > self.max_debt_s:
            self.dropped_s += now - self.deadline - self.max_debt_s
            self.deadline = now - self.max_debt_s
        self.deadline += self.period_s


def set_thread_nice(nice: int) -> str | None:
    """Give the calling thread niceness ``nice`` (Linux: per thread); None when done, else why not."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return "no per-thread priority on this platform"
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), int(nice))
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


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
                 clock=time.monotonic, loop_nice: int | None = DEFAULT_LOOP_NICE):
        try:
            franky_sim = importlib.import_module("franky_sim")
            mujoco_simulator = importlib.import_module("franky_sim.mujoco_simulator")
        except ImportError as exc:
            raise LadderError(f"{MISSING} ({exc})") from None
        if start_joints is not None and len(start_joints) != 7:
            raise ConfigError(f"start_joints: the FR3 has 7 joints, got {len(start_joints)}")
        if loop_nice is not None and not -20 <= loop_nice <= 19:
            raise ConfigError(f"loop_nice: a niceness is -20 .. 19, got {loop_nice}")
        self._clock = clock
        self.loop_nice = loop_nice
        self.loop_priority = "not started"  # what the loop's thread runs at, once it runs
        self._thread: threading.Thread | None = None
        self._pacer: Pacer | None = None
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
        self._pacer = Pacer(TICK_S, MAX_DEBT_S, clock=self._clock)
        self.server.running = True
        self._thread = threading.Thread(target=self._loop, name="franky-sim loop", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        if self.loop_nice is None:
            self.loop_priority = "the process's"
        else:
            refused = set_thread_nice(self.loop_nice)
            self.loop_priority = f"nice {self.loop_nice}" if refused is None else \
                f"the process's (nice {self.loop_nice} refused: {refused})"
        pacer = self._pacer
        while self.server.running:
            self.server.run_once(realtime=False)  # the vendor's tick without its sleep
            pacer.wait()

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
                "dropped_s": round(self._pacer.dropped_s, 3) if self._pacer else 0.0,
                "loop_priority": self.loop_priority,
                "running": bool(self._thread and self._thread.is_alive())}

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.server.running = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self.server.cleanup()  # closes the sockets
        self.sim.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="franky-sim (MuJoCo, one FR3 with its hand) on a loopback address")
    parser.add_argument("--host", default="127.0.0.1", help=f"address to listen at; {AUTO}: the first free 127.x.y.z")
    parser.add_argument("--nice", type=int, default=DEFAULT_LOOP_NICE,
                        help="the 1 kHz loop thread's niceness (default: the process's)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server = FrankySimServer(args.host, loop_nice=args.nice).start()
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
