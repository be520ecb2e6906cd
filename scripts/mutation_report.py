"""Kill rate per module from ``mutmut results --all true`` on standard input (scripts/mutation.sh)."""

from __future__ import annotations

import collections
import sys


def module_of(mutant: str) -> str:
    """``ladder_ros.core.triggers.xǁGripperTriggerǁupdate__mutmut_3`` -> ``ladder_ros.core.triggers``."""
    parts = mutant.split(".")
    while parts and not (parts[-1].startswith("x_") or parts[-1].startswith("x\u01c1")):
        parts.pop()
    return ".".join(parts[:-1]) if parts else mutant


def main() -> int:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in sys.stdin:
        name, _, status = line.strip().rpartition(": ")
        if name:
            counts[module_of(name)][status] += 1
    header = ("module", "mutants", "killed", "timeout", "survived", "no tests", "not checked", "kill rate")
    print("{:30} {:>7} {:>6} {:>7} {:>8} {:>8} {:>11} {:>9}".format(*header))
    groups = sorted(counts.items()) + [("ladder_ros/core (all)", sum(
        (c for m, c in counts.items() if m.startswith("ladder_ros.core.")), collections.Counter()))]
    for module, c in groups:
        total = sum(c.values())
        if not total:
            continue
        caught = c["killed"] + c["timeout"]  # a mutant that makes the tests hang is caught too
        print(f"{module:30} {total:7} {c['killed']:6} {c['timeout']:7} {c['survived']:8} {c['no tests']:8} "
              f"{c['not checked']:11} {100 * caught / total:8.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
