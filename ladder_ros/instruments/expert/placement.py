"""Where the scripted expert puts an object down: a free spot on a container or in a start region, or the table
beside a container.

The expert knows poses, not shapes: each object counts as a short segment along its own x axis, and the
open pads count too. Plain functions of the privileged state and the steering's gripper geometry, plus
the planar angle helpers the motions share.
"""

from __future__ import annotations

import math

import numpy as np

from ladder_ros.core.observation import ContainerInfo, PrivilegedState
from ladder_ros.instruments.expert.steering import ExpertSteering

FLAT_CONTAINER_MARGIN_M = 0.02  # a plate or cloth: the object's centre stays this far inside
SPOT_GRID_M = 0.01  # candidate placement points, 1 cm apart
SEGMENT_HALF_LENGTH_M = 0.045  # about half the length of the longest tabletop objects (carrot, banana)
OBJECT_SEPARATION_M = 0.04  # between two objects' axes: two radii (<= 17 mm) and slack
TAKE_OUT_CLEARANCE_M = 0.06  # a taken-out object lands this far outside the container's footprint


def yaw_of(quaternion: np.ndarray) -> float:
    """The heading of a (w, x, y, z) orientation: the angle of its x axis in the table plane."""
    w, x, y, z = (float(v) for v in quaternion)
    return math.atan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z))


def wrap_half_turn(angle: float) -> float:
    """An axis direction's angle in [-pi/2, pi/2): a segment looks the same turned by pi."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


def wrap_angle(angle: float) -> float:
    """``angle`` in [-pi, pi)."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


def axis(yaw: float) -> np.ndarray:
    """The unit vector in the table plane at heading ``yaw``."""
    return np.array([math.cos(yaw), math.sin(yaw)])


def clearance(points: np.ndarray, shape: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Smallest distance from ``shape`` placed at each point to any of ``others``."""
    placed = points[:, None, :] + shape[None, :, :]
    return np.linalg.norm(placed[:, :, None, :] - others[None, None, :, :], axis=3).min(axis=(1, 2))


def beside(c: ContainerInfo, turn: float, steering: ExpertSteering) -> np.ndarray:
    """A point on the table just outside ``c``, on the side facing the middle of the workspace."""
    (x_lo, x_hi), (y_lo, y_hi), _ = steering.wander_region
    middle = np.array([(x_lo + x_hi) / 2, (y_lo + y_hi) / 2])
    away = middle - c.position[:2]
    angle = math.atan2(away[1], away[0]) + turn
    point = c.position[:2] + (max(c.half_extents[:2]) + TAKE_OUT_CLEARANCE_M) * np.array(
        [math.cos(angle), math.sin(angle)])
    return np.clip(point, [x_lo, y_lo], [x_hi, y_hi])


def _candidate_points(c: ContainerInfo, steering: ExpertSteering) -> tuple[np.ndarray, np.ndarray]:
    """Grid points inside ``c``'s usable ellipse and their distances from its centre."""
    walled = c.half_extents[2] * 2 > c.surface_z + 0.01
    margin = steering.walled_container_margin_m if walled else FLAT_CONTAINER_MARGIN_M
    ax = max(float(c.half_extents[0]) - margin, 0.0)
    ay = max(float(c.half_extents[1]) - margin, 0.0)
    xs = np.arange(-ax, ax + 1e-9, SPOT_GRID_M) if ax > 0 else np.zeros(1)
    ys = np.arange(-ay, ay + 1e-9, SPOT_GRID_M) if ay > 0 else np.zeros(1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    offsets = np.stack([gx.ravel(), gy.ravel()], axis=1)
    inside = (offsets[:, 0] / max(ax, 1e-6)) ** 2 + (offsets[:, 1] / max(ay, 1e-6)) ** 2 <= 1.0 + 1e-9
    offsets = offsets[inside] if inside.any() else np.zeros((1, 2))
    return c.position[:2] + offsets, np.linalg.norm(offsets, axis=1)


def free_spot(priv: PrivilegedState, destination: str, holding: str,
              steering: ExpertSteering) -> tuple[np.ndarray, float]:
    """Where on the container, and turned by how much, the held object lands clear of the rest.

    The expert knows poses, not shapes, so every object counts as a segment of
    ``SEGMENT_HALF_LENGTH_M`` along its own x axis (the long side of elongated objects), and
    the pads, which open across the held object's axis, count too. Turning the held object
    parallel or across a neighbour lets elongated objects lie side by side or end to end, and
    keeps a release from pushing a neighbour away. Returns the point and the yaw change.
    """
    c = priv.destination(destination)
    assert c is not None, destination
    points, centre_distance = _candidate_points(c, steering)
    near = [p for n, p in sorted(priv.objects.items())
            if n != holding and n not in priv.grasped
            and abs(p.position[0] - c.position[0]) < c.half_extents[0] + 0.08
            and abs(p.position[1] - c.position[1]) < c.half_extents[1] + 0.08]
    if not near:
        return points[int(np.argmin(centre_distance))], 0.0
    ts = np.linspace(-SEGMENT_HALF_LENGTH_M, SEGMENT_HALF_LENGTH_M, 7)
    others = np.concatenate([p.position[:2] + ts[:, None] * axis(yaw_of(p.quaternion)) for p in near])
    held_yaw = yaw_of(priv.objects[holding].quaternion)
    turns = [0.0]
    for p in near:
        for extra in (0.0, math.pi / 2):
            turn = wrap_half_turn(yaw_of(p.quaternion) + extra - held_yaw)
            if all(abs(turn - t) > 0.05 for t in turns):
                turns.append(turn)
    best: tuple | None = None
    for turn in turns:
        along = axis(held_yaw + turn)
        across = np.array([-along[1], along[0]])
        body = ts[:, None] * along
        pads = np.array([side * steering.open_pad_reach_m * across + w * along
                         for side in (-1.0, 1.0)
                         for w in (-steering.pad_half_width_m, 0.0, steering.pad_half_width_m)])
        score = np.minimum(clearance(points, body, others) - OBJECT_SEPARATION_M,
                           clearance(points, pads, others) - steering.pad_separation_m)
        score = np.round(np.minimum(score, 0.0), 4)  # clear enough everywhere: the centre is best
        k = int(np.lexsort((centre_distance, -score))[0])
        key = (-score[k], abs(turn) > 0, centre_distance[k])
        if best is None or key < best[0]:
            best = (key, points[k], turn)
    return best[1], best[2]
