"""What the scripted expert reads from the simulator's privileged state: which instances rest where.

The simulator's goal state counts the objects of each kind resting on each container; these functions
name them (nearest the container's centre first), choose what an attempt picks, and find what a clumsy
reach could knock off.
"""

from __future__ import annotations

import numpy as np

from ladder_ros.core.observation import ContainerInfo, PrivilegedState


def normalised_distance(pos: np.ndarray, c: ContainerInfo) -> float:
    """How far ``pos`` lies from ``c``'s centre, in units of its half extents (1: on its rim)."""
    d = (pos[:2] - c.position[:2]) / np.maximum(c.half_extents[:2], 1e-6)
    return float(np.hypot(d[0], d[1]))


def resting_on(priv: PrivilegedState, kind: str, container: str) -> list[str]:
    """Instances of ``kind`` resting on ``container`` (or in a start region of that name): the simulator's count,
    nearest the centre."""
    n = priv.goal.count(kind, container)
    c = priv.destination(container)
    if n <= 0 or c is None:
        return []
    names = [name for name, pose in priv.objects.items() if pose.kind == kind and name not in priv.grasped]
    names.sort(key=lambda name: (normalised_distance(priv.objects[name].position, c), name))
    return names[:n]


def instance_to_pick(priv: PrivilegedState, kind: str, destination: str, ee: np.ndarray,
                     table_z: float) -> str | None:
    """One instance of ``kind`` not resting on ``destination`` (a held one first), nearest the gripper.

    Sent to a start region, it leaves the instances already resting in another start region where they are
    while any other is left (a reset puts each object back once)."""
    done = set(resting_on(priv, kind, destination))
    candidates = [name for name, pose in priv.objects.items()
                  if pose.kind == kind and name not in done and pose.position[2] > table_z - 0.05]
    if not candidates:
        return None
    held = [n for n in candidates if n in priv.grasped]
    if held:
        return held[0]
    if destination in priv.regions:
        home = {n for region in priv.regions if region != destination for n in resting_on(priv, kind, region)}
        candidates = [n for n in candidates if n not in home] or candidates
    return min(candidates, key=lambda n: (float(np.linalg.norm(priv.objects[n].position[:2] - ee[:2])), n))


def support_z(priv: PrivilegedState, instance: str, table_z: float) -> float:
    """The height of the surface ``instance`` rests on: its container's, else the table's."""
    kind = priv.objects[instance].kind
    for name in priv.containers:
        if instance in resting_on(priv, kind, name):
            return float(priv.containers[name].surface_z)
    return table_z


def knock_victim(priv: PrivilegedState, pick: float, spare: str) -> tuple[str, str] | None:
    """An object resting on a container, other than ``spare`` (``pick`` in [0, 1) chooses)."""
    placed = []
    for (kind, container), n in sorted(priv.goal.resting.items()):
        if n > 0 and container in priv.containers:
            placed += [(name, container) for name in resting_on(priv, kind, container) if name != spare]
    if not placed:
        return None
    return placed[min(int(pick * len(placed)), len(placed) - 1)]
