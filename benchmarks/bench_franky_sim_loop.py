"""How closely franky-sim's 1 kHz loop keeps the wall clock: the vendor's loop beside the twin's, idle and loaded.

    .venv/bin/python benchmarks/bench_franky_sim_loop.py [--seconds S] [--burners 0,3]

For each number of CPU burners (processes spinning in a loop, started here, stopped after each
measurement) it runs franky-sim for ``--seconds`` three ways, one after the other, in this process:

* ``vendor``: franky-sim's own ``run_async(realtime=True)`` (sleep 1 ms less the tick's time);
* ``paced``: :class:`ladder_ros.instruments.franka_twin.franky_sim_server.FrankySimServer` with its loop paced on
  absolute deadlines, at the process's priority (``loop_nice`` None);
* ``paced nice -10``: the same at the twin's default niceness (where the system allows it).

Printed: the real-time factor (simulated over wall time), how far simulated time fell behind, the
time dropped (not made up), the loop process's CPU per wall second and the load average. No client
connects (the tick's cost with the driver streaming is a little higher). Nothing leaves the loopback
interface. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ladder_ros.instruments.franka_twin.franky_sim_server import TICK_S, FrankySimServer  # noqa: E402


def _burn(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def _measure(server: FrankySimServer, start, seconds: float) -> dict:
    cpu0, t0 = time.process_time(), time.monotonic()
    start()
    ticks0 = server.ticks
    time.sleep(seconds)
    wall = time.monotonic() - t0
    simulated = (server.ticks - ticks0) * TICK_S
    return {"rtf": simulated / wall, "behind_s": wall - simulated, "cpu": (time.process_time() - cpu0) / wall,
            "load": os.getloadavg()[0]}


def run_one(way: str, seconds: float) -> dict:
    nice = -10 if way == "paced nice -10" else None
    server = FrankySimServer("127.0.0.1", loop_nice=nice)
    try:
        if way == "vendor":
            result = _measure(server, lambda: server.server.run_async(realtime=True), seconds)
            server.server.running = False
            server.server.async_thread.join()
            result.update(dropped_s=None, priority="the process's")
        else:
            result = _measure(server, server.start, seconds)
            stats = server.stats()
            result.update(dropped_s=stats["dropped_s"], priority=stats["loop_priority"])
    finally:
        server.stop()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--burners", default="0,3", help="comma-separated numbers of CPU burners")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; {args.seconds:g} s per row", flush=True)
    print("| burners | loop | real-time factor | behind (s) | dropped (s) | CPU (cores) | load | priority |")
    print("|---|---|---|---|---|---|---|---|")
    for burners in (int(b) for b in args.burners.split(",")):
        for way in ("vendor", "paced", "paced nice -10"):
            stop_at = time.monotonic() + args.seconds + 5.0
            procs = [multiprocessing.Process(target=_burn, args=(stop_at,), daemon=True) for _ in range(burners)]
            for p in procs:
                p.start()
            try:
                r = run_one(way, args.seconds)
            finally:
                for p in procs:
                    p.terminate()
                    p.join()
            dropped = "-" if r["dropped_s"] is None else f"{r['dropped_s']:.2f}"
            print(f"| {burners} | {way} | {r['rtf']:.2f} | {r['behind_s']:.2f} | {dropped} | {r['cpu']:.2f} | "
                  f"{r['load']:.1f} | {r['priority']} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
