"""Scenes of the built-in tabletop: the schema of a suite's ``scenes:`` entry, and seeded layouts.

This module is pure numpy (no MuJoCo), so the suite tests and the layout sampler run anywhere.

A scene lists object *kinds* and *containers*; a task uses the kinds its subgoals and distractors
name, each with all its instances (``count``), and the containers of the scene::

    scenes:
      kitchen:
        region: {x: [0.15, 0.50], y: [-0.26, 0.26]}   # objects lie inside it (base frame, m)
        container_jitter: 0.02                        # containers move by up to this per layout (m)
        objects:
          carrot: {shape: capsule, size: [0.013, 0.035], rgba: [0.95, 0.45, 0.1, 1]}
          corn:   {shape: capsule, size: [0.015, 0.035], count: 2}
          lemon:  {shape: cylinder, size: [0.017, 0.014], start: plate}
        containers:
          plate:  {type: plate, position: [0.33, 0.10], size: 0.07, size_by_load: {4: 0.10}}
          towel:  {type: cloth, position: [0.30, -0.12], size: [0.07, 0.06]}
          basket: {type: bin, position: [0.40, 0.0], size: [0.07, 0.07], wall_height: 0.035}

Start regions (optional) are named flat areas of the table where the scene's objects start, the places an
automatic reset puts moved objects back (:mod:`ladder_ros.core.reset`)::

    start_regions:
      right_near: {centre: [0.24, -0.165], size: [0.08, 0.085], text: the right side of the table near the robot}
      right_far:  {centre: [0.415, -0.165], size: [0.075, 0.085], text: the far right side of the table,
                   objects: [carrot, spoon], capacity: 3}

``centre`` is the area's centre on the table and ``size`` its half extents ``[hx, hy]`` (as a cloth's), metres in
the base frame; ``text`` names it in an instruction and a verifier's prompt ("put the carrot on <text>");
``objects`` lists the kinds that may start there (default: every kind that starts on the table); ``capacity``
is how many of the objects a task moves it holds at once (default: its area over 0.005 m^2, a 10 x 5 cm patch
per object). An area lies inside the scene's workspace and keeps the gripper's placement gap from every
container at its largest size and furthest jitter, and from every other area. An object that starts on a
container (``start: plate``) has that container as its start region.

Object shapes (sizes in metres): ``box`` ``[hx, hy, hz]`` half extents (the long side is laid
along x), ``cylinder`` ``[radius, half_height]`` standing upright, ``capsule`` ``[radius,
half_length]`` lying along x. ``start`` is ``table`` (default) or a container name: objects that a
task moves *from* a container (transfer tasks) start in it. Container types: ``plate`` (a disc,
``size`` = radius), ``cloth`` (a flat sheet, ``size`` = ``[hx, hy]``) and ``bin`` (a tray with
walls, ``size`` = outer ``[hx, hy]``, ``wall_height``). ``size_by_load`` maps a load (the number
of objects a task sends to or starts in the container) to a larger size: a longer task gets a
larger container while object sizes stay the same (Section 3, 'Scene construction').

A scene is sized for its suite's embodiment (:mod:`ladder_ros.sim.tabletop_embodiment`): the
region defaults to that gripper's patch of the workspace and must lie inside its workspace, object
widths must fit between its fingers and object heights under its palm, and placements keep its open
pads' clearance.

Layouts: :func:`sample_layout` draws layout ``k`` of a task from a generator seeded with the task
id and ``k`` only, so a layout is the same in every process and on every run (SimplerEnv-Long
draws 24 seeded layouts per task, Appendix D). Placements do not overlap, keep a finger's width
of clearance, and lie inside the region, which lies inside the reachable workspace.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.reset import ResetScene, StartRegion
from ladder_ros.core.task import Task
from ladder_ros.sim.tabletop_embodiment import WIDOWX_GRIPPER, TabletopEmbodiment

# The WidowX stand-in's workspace and finger travel (ladder_ros/sim/tabletop_embodiment.py says where
# the numbers come from); a scene of another embodiment reads its own from ``SceneSpec.embodiment``.
WORKSPACE_LOW = np.array(WIDOWX_GRIPPER.workspace_low)
WORKSPACE_HIGH = np.array(WIDOWX_GRIPPER.workspace_high)
DEFAULT_REGION = WIDOWX_GRIPPER.default_region
FINGER_MIN_M = WIDOWX_GRIPPER.finger_min_m
FINGER_MAX_M = WIDOWX_GRIPPER.finger_max_m
MIN_GRASP_WIDTH_M = WIDOWX_GRIPPER.min_grasp_width_m
MAX_GRASP_WIDTH_M = WIDOWX_GRIPPER.max_grasp_width_m

# Container geometry of the stand-in: a 12 mm plate, a 4 mm cloth, a bin with an 8 mm floor and
# 6 mm walls.
PLATE_HALF_HEIGHT_M = 0.006
CLOTH_HALF_THICKNESS_M = 0.002
BIN_FLOOR_HALF_THICKNESS_M = 0.004
BIN_WALL_HALF_THICKNESS_M = 0.003

OBJECT_SHAPES = ("box", "cylinder", "capsule")
CONTAINER_TYPES = ("plate", "cloth", "bin")
PLACEMENT_GAP_M = WIDOWX_GRIPPER.placement_gap_m  # the embodiment's clearance between footprints
CONTAINER_GAP_M = 0.02  # between containers
INSIDE_MARGIN_M = 0.012  # an object that starts in a container stays this far inside its edge
MAX_PLACEMENT_TRIES = 4000  # rejection samples per object before the layout starts over
MAX_LAYOUT_RESTARTS = 40

_OBJECT_KEYS = {"shape", "size", "rgba", "count", "mass", "start"}
_CONTAINER_KEYS = {"type", "position", "size", "size_by_load", "wall_height", "rgba"}
_SCENE_KEYS = {"objects", "containers", "region", "container_jitter", "description", "start_regions"}
_START_REGION_KEYS = {"centre", "size", "text", "objects", "capacity"}
MIN_START_REGION_HALF_M = 0.03  # an object's centre lands 2 cm inside the edge: room for a 2 cm band at least
AREA_PER_OBJECT_M2 = 0.005  # a start region's default capacity: one object per 10 x 5 cm patch


@dataclass(frozen=True)
class ObjectSpec:
    """One object kind of a scene; ``count`` identical instances of it exist."""

    kind: str
    shape: str
    size: tuple[float, ...]
    rgba: tuple[float, float, float, float]
    count: int = 1
    mass: float = 0.05
    start: str = "table"

    @property
    def footprint_half_extents(self) -> tuple[float, float]:
        """Half extents of the rectangle that covers the object from above, in its own frame."""
        if self.shape == "box":
            return self.size[0], self.size[1]
        if self.shape == "cylinder":
            return self.size[0], self.size[0]
        return self.size[0] + self.size[1], self.size[0]  # capsule along x: radius + half length

    @property
    def max_half_extent(self) -> float:
        """The largest distance from the centre to a face, in any orientation the object may lie."""
        if self.shape == "capsule":
            return self.size[0] + self.size[1]
        return max(self.size)

    @property
    def rest_half_height(self) -> float:
        """Height of the centre above its support when it lies as placed."""
        if self.shape == "capsule":
            return self.size[0]
        return self.size[2] if self.shape == "box" else self.size[1]

    @property
    def grasp_width(self) -> float:
        """Width between the pads of a top-down grasp across the short side."""
        if self.shape == "box":
            return 2 * min(self.size[0], self.size[1])
        return 2 * self.size[0]

    def instance_names(self) -> list[str]:
        return [f"{self.kind}_{i}" for i in range(self.count)]


@dataclass(frozen=True)
class ContainerSpec:
    """A destination of a scene; its size may grow with the task's load."""

    name: str
    type: str
    position: tuple[float, float]
    size: tuple[float, ...]
    size_by_load: tuple[tuple[int, tuple[float, ...]], ...] = ()
    wall_height: float = 0.0
    rgba: tuple[float, float, float, float] = (0.9, 0.9, 0.9, 1.0)

    def size_for_load(self, load: int) -> tuple[float, ...]:
        """The size for ``load`` objects: the entry with the largest load not above it."""
        size = self.size
        for threshold, entry in self.size_by_load:
            if load >= threshold:
                size = entry
        return size


@dataclass(frozen=True)
class StartRegionSpec:
    """A flat area of the table where objects of a scene start (and an automatic reset puts them back)."""

    name: str
    centre: tuple[float, float]
    size: tuple[float, float]  # half extents along x and y, metres
    text: str
    objects: tuple[str, ...] = ()  # kinds that may start here; empty: every kind that starts on the table
    capacity: int = 1

    @property
    def position(self) -> np.ndarray:
        return np.array([self.centre[0], self.centre[1], 0.0])

    @property
    def half_extents(self) -> np.ndarray:
        """Footprint half extents and no height: the area is the table itself."""
        return np.array([self.size[0], self.size[1], 0.0])

    def contains_xy(self, xy: "np.ndarray | tuple[float, float]", margin: float = 0.0) -> bool:
        """Whether ``xy`` lies inside the area, at least ``margin`` inside its edge."""
        return (abs(float(xy[0]) - self.centre[0]) <= self.size[0] - margin
                and abs(float(xy[1]) - self.centre[1]) <= self.size[1] - margin)

    def clearance_to_container(self, c: "PlacedContainer") -> float:
        """Distance from the area's edge to ``c``'s outer footprint (negative: they overlap)."""
        ax, ay = abs(float(c.position[0]) - self.centre[0]), abs(float(c.position[1]) - self.centre[1])
        if c.spec.type == "plate":
            return math.hypot(max(ax - self.size[0], 0.0), max(ay - self.size[1], 0.0)) - c.size[0]
        return _rectangle_gap(ax - self.size[0] - c.size[0], ay - self.size[1] - c.size[1])

    def clearance_to_region(self, other: "StartRegionSpec") -> float:
        """Distance between the edges of two areas (negative: they overlap)."""
        return _rectangle_gap(abs(other.centre[0] - self.centre[0]) - self.size[0] - other.size[0],
                              abs(other.centre[1] - self.centre[1]) - self.size[1] - other.size[1])


def _rectangle_gap(gx: float, gy: float) -> float:
    """The distance between two axis-aligned rectangles from their gaps along x and y (negative: overlap)."""
    if gx > 0 or gy > 0:
        return math.hypot(max(gx, 0.0), max(gy, 0.0))
    return max(gx, gy)


@dataclass(frozen=True)
class SceneSpec:
    """A validated scene: kinds, containers, the placement region and container jitter."""

    name: str
    objects: Mapping[str, ObjectSpec]
    containers: Mapping[str, ContainerSpec]
    region: tuple[tuple[float, float], tuple[float, float]] = DEFAULT_REGION
    container_jitter: float = 0.02
    embodiment: TabletopEmbodiment = WIDOWX_GRIPPER  # whose workspace and fingers the scene is sized for
    start_regions: Mapping[str, StartRegionSpec] = field(default_factory=dict)

    def kinds_for(self, task: Task) -> list[str]:
        """Kinds present in ``task``'s scene: those its subgoals or distractors name, in scene order."""
        named = {s.object for s in task.subgoals} | set(task.distractors)
        missing = sorted(named - set(self.objects))
        if missing:
            raise ConfigError(f"task {task.task_id!r} names objects not in scene {self.name!r}: {missing}")
        return [k for k in self.objects if k in named]

    def container_loads(self, task: Task) -> dict[str, int]:
        """Objects a task sends to, or starts in, each container."""
        loads = {name: 0 for name in self.containers}
        for s in task.subgoals:
            loads[s.destination] = loads.get(s.destination, 0) + 1
        starting = {name: 0 for name in self.containers}
        for kind in self.kinds_for(task):
            spec = self.objects[kind]
            if spec.start != "table":
                starting[spec.start] += spec.count
        return {name: max(loads[name], starting[name]) for name in self.containers}


@dataclass(frozen=True)
class PlacedContainer:
    """A container as built for one task and layout."""

    spec: ContainerSpec
    position: np.ndarray  # centre (x, y, 0), base frame
    size: tuple[float, ...]

    @property
    def surface_z(self) -> float:
        if self.spec.type == "plate":
            return 2 * PLATE_HALF_HEIGHT_M
        if self.spec.type == "cloth":
            return 2 * CLOTH_HALF_THICKNESS_M
        return 2 * BIN_FLOOR_HALF_THICKNESS_M

    @property
    def half_extents(self) -> np.ndarray:
        """Footprint half extents and half height (a plate reports its radius twice)."""
        if self.spec.type == "plate":
            return np.array([self.size[0], self.size[0], PLATE_HALF_HEIGHT_M])
        if self.spec.type == "cloth":
            return np.array([self.size[0], self.size[1], CLOTH_HALF_THICKNESS_M])
        return np.array([self.size[0], self.size[1], self.spec.wall_height / 2])

    def inner_half_extents(self) -> tuple[float, float]:
        """Half extents of the surface an object can rest on (inside a bin's walls)."""
        if self.spec.type == "bin":
            wall = 2 * BIN_WALL_HALF_THICKNESS_M
            return self.size[0] - wall, self.size[1] - wall
        if self.spec.type == "plate":
            return self.size[0], self.size[0]
        return self.size[0], self.size[1]

    def contains_xy(self, xy: "np.ndarray | tuple[float, float]", margin: float = 0.0) -> bool:
        """Whether ``xy`` lies on the resting surface, at least ``margin`` inside its edge."""
        dx, dy = float(xy[0] - self.position[0]), float(xy[1] - self.position[1])
        if self.spec.type == "plate":
            return math.hypot(dx, dy) <= self.size[0] - margin
        hx, hy = self.inner_half_extents()
        return abs(dx) <= hx - margin and abs(dy) <= hy - margin

    def clearance_to(self, xy: np.ndarray) -> float:
        """Distance from ``xy`` to the container's outer footprint (negative inside it)."""
        dx, dy = float(xy[0] - self.position[0]), float(xy[1] - self.position[1])
        if self.spec.type == "plate":
            return math.hypot(dx, dy) - self.size[0]
        qx, qy = abs(dx) - self.size[0], abs(dy) - self.size[1]
        outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
        return outside if outside > 0 else max(qx, qy)


@dataclass(frozen=True)
class PlacedObject:
    """One object instance as placed for a layout: centre position and yaw (rad)."""

    name: str
    spec: ObjectSpec
    position: np.ndarray
    yaw: float


@dataclass(frozen=True)
class Layout:
    """Everything needed to build one task's scene in one layout."""

    task_id: str
    index: int
    containers: tuple[PlacedContainer, ...]
    objects: tuple[PlacedObject, ...]


# ----------------------------------------------------------------------------- parsing


def _fail(scene: str, key: str, message: str) -> ConfigError:
    return ConfigError(message, key=f"scenes.{scene}.{key}")


def _number_list(scene: str, key: str, value: Any, length: int | tuple[int, ...]) -> tuple[float, ...]:
    lengths = (length,) if isinstance(length, int) else length
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 in lengths:
        value = [value]
    if not isinstance(value, (list, tuple)) or len(value) not in lengths:
        raise _fail(scene, key, f"expected a list of {' or '.join(map(str, lengths))} numbers, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _fail(scene, key, f"expected finite numbers, got {value!r}")
        out.append(float(v))
    return tuple(out)


def _positive(scene: str, key: str, values: tuple[float, ...]) -> tuple[float, ...]:
    if any(v <= 0 for v in values):
        raise _fail(scene, key, f"sizes must be positive, got {list(values)!r}")
    return values


def _rgba(scene: str, key: str, value: Any, default: tuple[float, ...]) -> tuple[float, float, float, float]:
    if value is None:
        return tuple(default)  # type: ignore[return-value]
    rgba = _number_list(scene, key, value, (3, 4))
    if len(rgba) == 3:
        rgba = rgba + (1.0,)
    if any(not 0.0 <= c <= 1.0 for c in rgba):
        raise _fail(scene, key, f"colour components must be in [0, 1], got {list(rgba)!r}")
    return rgba  # type: ignore[return-value]


def _check_keys(scene: str, where: str, raw: Mapping, allowed: set[str]) -> None:
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise _fail(scene, f"{where}.{unknown[0]}" if where else unknown[0],
                    f"unknown key; valid: {', '.join(sorted(allowed))}")


def _parse_object(scene: str, kind: str, raw: Any, containers: Mapping[str, Any],
                  embodiment: TabletopEmbodiment) -> ObjectSpec:
    where = f"objects.{kind}"
    if not isinstance(raw, Mapping):
        raise _fail(scene, where, f"expected a mapping, got {type(raw).__name__}")
    _check_keys(scene, where, raw, _OBJECT_KEYS)
    shape = raw.get("shape")
    if shape not in OBJECT_SHAPES:
        raise _fail(scene, f"{where}.shape", f"unknown shape {shape!r}; valid: {', '.join(OBJECT_SHAPES)}")
    size = _positive(scene, f"{where}.size", _number_list(
        scene, f"{where}.size", raw.get("size"), 3 if shape == "box" else 2))
    if shape == "box" and size[1] > size[0]:
        size = (size[1], size[0], size[2])  # lay the long side along x, where grasps expect it
    count = raw.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise _fail(scene, f"{where}.count", f"count must be a positive integer, got {count!r}")
    mass = raw.get("mass", 0.05)
    if isinstance(mass, bool) or not isinstance(mass, (int, float)) or not (0 < mass <= 1.0):
        raise _fail(scene, f"{where}.mass", f"mass must be in (0, 1] kg, got {mass!r}")
    start = str(raw.get("start", "table"))
    if start != "table" and start not in containers:
        raise _fail(scene, f"{where}.start", f"unknown start {start!r}; valid: table, {', '.join(containers)}")
    spec = ObjectSpec(kind=kind, shape=shape, size=size, rgba=_rgba(scene, f"{where}.rgba", raw.get("rgba"),
                      (0.6, 0.6, 0.6, 1.0)), count=count, mass=float(mass), start=start)
    low, high = embodiment.min_grasp_width_m, embodiment.max_grasp_width_m
    if not low <= spec.grasp_width <= high:
        raise _fail(scene, f"{where}.size", f"grasp width {spec.grasp_width:.3f} m is outside what the "
                    f"{embodiment.name} fingers hold ({low:.3f}-{high:.3f} m)")
    tallest = embodiment.max_object_half_height_m
    if spec.rest_half_height > tallest:
        raise _fail(scene, f"{where}.size", f"objects stand at most {2 * tallest:.3f} m tall under the "
                    f"{embodiment.name} gripper, got {2 * spec.rest_half_height:.3f}")
    return spec


def _parse_container_size(scene: str, key: str, ctype: str, value: Any) -> tuple[float, ...]:
    return _positive(scene, key, _number_list(scene, key, value, 1 if ctype == "plate" else 2))


def _parse_container(scene: str, name: str, raw: Any) -> ContainerSpec:
    where = f"containers.{name}"
    if not isinstance(raw, Mapping):
        raise _fail(scene, where, f"expected a mapping, got {type(raw).__name__}")
    _check_keys(scene, where, raw, _CONTAINER_KEYS)
    ctype = raw.get("type")
    if ctype not in CONTAINER_TYPES:
        raise _fail(scene, f"{where}.type", f"unknown container type {ctype!r}; valid: {', '.join(CONTAINER_TYPES)}")
    position = _number_list(scene, f"{where}.position", raw.get("position"), 2)
    if "size" not in raw:
        raise _fail(scene, f"{where}.size", "missing required key")
    size = _parse_container_size(scene, f"{where}.size", ctype, raw["size"])
    by_load_raw = raw.get("size_by_load", {}) or {}
    if not isinstance(by_load_raw, Mapping):
        raise _fail(scene, f"{where}.size_by_load", "expected a mapping from load to size")
    by_load = []
    for load, entry in by_load_raw.items():
        if isinstance(load, bool) or not isinstance(load, int) or load < 1:
            raise _fail(scene, f"{where}.size_by_load", f"loads are positive integers, got {load!r}")
        by_load.append((load, _parse_container_size(scene, f"{where}.size_by_load.{load}", ctype, entry)))
    wall = 0.0
    if ctype == "bin":
        wall = raw.get("wall_height", 0.035)
        if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not 0.015 <= wall <= 0.06:
            raise _fail(scene, f"{where}.wall_height", f"wall_height must be in [0.015, 0.06] m, got {wall!r}")
    elif "wall_height" in raw:
        raise _fail(scene, f"{where}.wall_height", f"only a bin has walls, not a {ctype}")
    default_rgba = {"plate": (0.93, 0.93, 0.9, 1.0), "cloth": (0.25, 0.45, 0.8, 1.0), "bin": (0.55, 0.4, 0.25, 1.0)}
    return ContainerSpec(name=name, type=ctype, position=position, size=size,
                         size_by_load=tuple(sorted(by_load)), wall_height=float(wall),
                         rgba=_rgba(scene, f"{where}.rgba", raw.get("rgba"), default_rgba[ctype]))


def largest_footprint(spec: ContainerSpec, jitter: float) -> "PlacedContainer":
    """``spec`` at its nominal position with its largest size, grown by how far the jitter can move it: every
    footprint a layout can give the container lies inside this one."""
    sizes = [spec.size] + [entry for _, entry in spec.size_by_load]
    largest = tuple(max(s[i] for s in sizes) for i in range(len(spec.size)))
    grown = (largest[0] + jitter * math.sqrt(2),) if spec.type == "plate" else tuple(v + jitter for v in largest)
    return PlacedContainer(spec=spec, position=np.array([spec.position[0], spec.position[1], 0.0]), size=grown)


def _parse_start_region(scene: str, name: str, raw: Any, objects: Mapping[str, ObjectSpec],
                        containers: Mapping[str, ContainerSpec], jitter: float,
                        embodiment: TabletopEmbodiment) -> StartRegionSpec:
    where = f"start_regions.{name}"
    if not isinstance(raw, Mapping):
        raise _fail(scene, where, f"expected a mapping with centre, size and text, got {type(raw).__name__}")
    _check_keys(scene, where, raw, _START_REGION_KEYS)
    for key in ("centre", "size", "text"):
        if key not in raw:
            raise _fail(scene, f"{where}.{key}", "missing required key")
    if name == "table" or name in containers or name in objects:
        raise _fail(scene, where, "a start region needs a name of its own, not 'table', a container's or an object's")
    centre = _number_list(scene, f"{where}.centre", raw["centre"], 2)
    size = _positive(scene, f"{where}.size", _number_list(scene, f"{where}.size", raw["size"], 2))
    if min(size) < MIN_START_REGION_HALF_M:
        raise _fail(scene, f"{where}.size", f"half extents of at least {MIN_START_REGION_HALF_M} m fit an object, "
                    f"got {list(size)!r}")
    text = raw["text"]
    if not isinstance(text, str) or not text.strip():
        raise _fail(scene, f"{where}.text", f"expected the area's name in words, got {text!r}")
    kinds = raw.get("objects", [])
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise _fail(scene, f"{where}.objects", f"expected a list of object kinds, got {kinds!r}")
    for kind in kinds:
        if kind not in objects:
            raise _fail(scene, f"{where}.objects", f"unknown object {kind!r}; valid: {', '.join(objects)}")
        if objects[kind].start != "table":
            raise _fail(scene, f"{where}.objects", f"the {kind} starts on the {objects[kind].start}, not the table")
    area = 4 * size[0] * size[1]
    capacity = raw.get("capacity", max(1, int(area / AREA_PER_OBJECT_M2)))
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise _fail(scene, f"{where}.capacity", f"capacity must be a positive integer, got {capacity!r}")
    region = StartRegionSpec(name=name, centre=(centre[0], centre[1]), size=(size[0], size[1]), text=text.strip(),
                             objects=tuple(kinds), capacity=capacity)
    low, high = embodiment.workspace_low, embodiment.workspace_high
    for i, axis in enumerate("xy"):
        lo, hi = centre[i] - size[i], centre[i] + size[i]
        if not (low[i] <= lo and hi <= high[i]):
            raise _fail(scene, where, f"reaches {axis} = [{lo:.3f}, {hi:.3f}], outside the {embodiment.name} "
                        f"workspace [{low[i]}, {high[i]}]")
    gap = embodiment.placement_gap_m
    for cname, c in containers.items():
        clearance = region.clearance_to_container(largest_footprint(c, jitter))
        if clearance < gap:
            raise _fail(scene, where, f"comes within {clearance:.3f} m of container {cname!r} (at its largest "
                        f"size and jitter); keep {gap} m clear")
    return region


def parse_scene(name: str, raw: Any, embodiment: TabletopEmbodiment = WIDOWX_GRIPPER) -> SceneSpec:
    """Validate one entry of a suite's ``scenes:`` mapping for ``embodiment``'s gripper and workspace;
    errors name the scene and the key."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping, got {type(raw).__name__}", key=f"scenes.{name}")
    _check_keys(name, "", raw, _SCENE_KEYS)
    containers_raw = raw.get("containers")
    objects_raw = raw.get("objects")
    if not isinstance(containers_raw, Mapping) or not containers_raw:
        raise _fail(name, "containers", "expected a non-empty mapping of containers")
    if not isinstance(objects_raw, Mapping) or not objects_raw:
        raise _fail(name, "objects", "expected a non-empty mapping of objects")
    containers = {str(k): _parse_container(name, str(k), v) for k, v in containers_raw.items()}
    objects = {str(k): _parse_object(name, str(k), v, containers, embodiment) for k, v in objects_raw.items()}
    both = sorted(set(containers) & set(objects))
    if both:
        raise _fail(name, "objects", f"names used for both an object and a container: {both}")
    region = embodiment.default_region
    low, high = embodiment.workspace_low, embodiment.workspace_high
    if "region" in raw:
        reg = raw["region"]
        if not isinstance(reg, Mapping) or set(reg) != {"x", "y"}:
            raise _fail(name, "region", f"expected {{x: [lo, hi], y: [lo, hi]}}, got {reg!r}")
        rx = _number_list(name, "region.x", reg["x"], 2)
        ry = _number_list(name, "region.y", reg["y"], 2)
        for axis, (lo, hi), i in (("x", rx, 0), ("y", ry, 1)):
            if not (low[i] <= lo < hi <= high[i]):
                raise _fail(name, f"region.{axis}", f"must satisfy {low[i]} <= lo < hi <= "
                            f"{high[i]} (the workspace), got [{lo}, {hi}]")
        region = (rx, ry)  # type: ignore[assignment]
    jitter = raw.get("container_jitter", 0.02)
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0.0 <= jitter <= 0.1:
        raise _fail(name, "container_jitter", f"must be in [0, 0.1] m, got {jitter!r}")
    for cname, c in containers.items():
        for i, axis in enumerate("xy"):
            if not region[i][0] <= c.position[i] <= region[i][1]:
                raise _fail(name, f"containers.{cname}.position",
                            f"{axis}={c.position[i]} lies outside the region {list(region[i])}")
    regions_raw = raw.get("start_regions", {})
    if not isinstance(regions_raw, Mapping):
        raise _fail(name, "start_regions", f"expected a mapping of named areas, got {type(regions_raw).__name__}")
    start_regions: dict[str, StartRegionSpec] = {}
    for rname, rraw in regions_raw.items():
        region_spec = _parse_start_region(name, str(rname), rraw, objects, containers, float(jitter), embodiment)
        for other in start_regions.values():
            if region_spec.clearance_to_region(other) < 0:
                raise _fail(name, f"start_regions.{rname}", f"overlaps start region {other.name!r}")
        start_regions[str(rname)] = region_spec
    return SceneSpec(name=name, objects=objects, containers=containers, region=region,
                     container_jitter=float(jitter), embodiment=embodiment, start_regions=start_regions)


def parse_scenes(scenes: Mapping[str, Any], embodiment: TabletopEmbodiment = WIDOWX_GRIPPER) -> dict[str, SceneSpec]:
    return {str(name): parse_scene(str(name), raw, embodiment) for name, raw in scenes.items()}


# ----------------------------------------------------------------------------- layouts


def layout_seed(task_id: str, layout: int) -> list[int]:
    """Seed material for layout ``layout`` of ``task_id`` (stable across processes, unlike ``hash``)."""
    return [zlib.crc32(task_id.encode("utf-8")), int(layout)]


@dataclass(frozen=True)
class _Footprint:
    """A rectangle seen from above: centre, half extents and heading (plain floats: the sampler
    tests thousands of candidates per layout, where small numpy arrays cost more than they save)."""

    x: float
    y: float
    hx: float
    hy: float
    yaw: float = 0.0

    @property
    def axes(self) -> tuple[tuple[float, float], tuple[float, float]]:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return (c, s), (-s, c)

    @property
    def radius(self) -> float:
        return math.hypot(self.hx, self.hy)

    def corners(self) -> list[tuple[float, float]]:
        (ux, uy), (vx, vy) = self.axes
        return [(self.x + a * self.hx * ux + b * self.hy * vx, self.y + a * self.hx * uy + b * self.hy * vy)
                for a in (1, -1) for b in (1, -1)]

    def extent_along(self, ax: float, ay: float) -> float:
        (ux, uy), (vx, vy) = self.axes
        return self.hx * abs(ux * ax + uy * ay) + self.hy * abs(vx * ax + vy * ay)


def _apart(a: _Footprint, b: _Footprint, gap: float) -> bool:
    """Separating-axis test of two rectangles, with at least ``gap`` between them."""
    dx, dy = b.x - a.x, b.y - a.y
    if math.hypot(dx, dy) >= a.radius + b.radius + gap:
        return True
    for ax, ay in (*a.axes, *b.axes):
        if abs(dx * ax + dy * ay) >= a.extent_along(ax, ay) + b.extent_along(ax, ay) + gap:
            return True
    return False


def _object_clear_of_container(f: _Footprint, c: PlacedContainer, gap: float) -> bool:
    if c.spec.type == "plate":
        (ux, uy), (vx, vy) = f.axes
        dx, dy = float(c.position[0]) - f.x, float(c.position[1]) - f.y
        lx, ly = dx * ux + dy * uy, dx * vx + dy * vy
        outside = math.hypot(max(abs(lx) - f.hx, 0.0), max(abs(ly) - f.hy, 0.0))
        return outside >= c.size[0] + gap
    return _apart(f, _Footprint(float(c.position[0]), float(c.position[1]), c.size[0], c.size[1]), gap)


def _try_layout(scene: SceneSpec, task: Task, rng: np.random.Generator) -> Layout | str:
    """A layout, or the name of what could not be placed."""
    loads = scene.container_loads(task)
    (x_lo, x_hi), (y_lo, y_hi) = scene.region
    containers: list[PlacedContainer] = []
    for name, spec in scene.containers.items():
        jitter = rng.uniform(-scene.container_jitter, scene.container_jitter, size=2)
        xy = np.array(spec.position) + jitter
        placed = PlacedContainer(spec=spec, position=np.array([xy[0], xy[1], 0.0]),
                                 size=spec.size_for_load(loads[name]))
        if any(_containers_overlap(placed, other) for other in containers):
            return f"container {name!r} (overlaps another container)"
        if not _inside_region(placed, scene.region, scene.embodiment):
            return f"container {name!r} (leaves the workspace)"
        containers.append(placed)
    by_name = {c.spec.name: c for c in containers}
    objects: list[PlacedObject] = []
    footprints: list[_Footprint] = []
    gap = scene.embodiment.placement_gap_m
    for kind in scene.kinds_for(task):
        spec = scene.objects[kind]
        hx, hy = spec.footprint_half_extents
        for inst in spec.instance_names():
            placed_obj = None
            for _ in range(MAX_PLACEMENT_TRIES):
                yaw = float(rng.uniform(-math.pi, math.pi))
                if spec.start == "table":
                    x, y = float(rng.uniform(x_lo, x_hi)), float(rng.uniform(y_lo, y_hi))
                    f = _Footprint(x, y, hx, hy, yaw)
                    if not all(x_lo <= px <= x_hi and y_lo <= py <= y_hi for px, py in f.corners()):
                        continue
                    # an open pad must not land on a plate's rim or a bin's wall either
                    if not all(_object_clear_of_container(f, c, gap) for c in containers):
                        continue
                    base_z = 0.0
                else:
                    c = by_name[spec.start]
                    ihx, ihy = c.inner_half_extents()
                    x = float(c.position[0] + rng.uniform(-ihx, ihx))
                    y = float(c.position[1] + rng.uniform(-ihy, ihy))
                    f = _Footprint(x, y, hx, hy, yaw)
                    if not all(c.contains_xy(p, margin=INSIDE_MARGIN_M) for p in f.corners()):
                        continue
                    base_z = c.surface_z
                if not all(_apart(f, other, gap) for other in footprints):
                    continue
                position = np.array([x, y, base_z + spec.rest_half_height])
                placed_obj = PlacedObject(name=inst, spec=spec, position=position, yaw=yaw)
                break
            if placed_obj is None:
                return f"object {inst!r}"
            objects.append(placed_obj)
            footprints.append(f)
    return Layout(task_id=task.task_id, index=-1, containers=tuple(containers), objects=tuple(objects))


def _inside_region(c: PlacedContainer, region: tuple[tuple[float, float], tuple[float, float]],
                   embodiment: TabletopEmbodiment) -> bool:
    """A container's footprint stays inside the workspace (its centre inside the region)."""
    hx, hy = c.half_extents[0], c.half_extents[1]
    x, y = c.position[0], c.position[1]
    low, high = embodiment.workspace_low, embodiment.workspace_high
    return bool(low[0] <= x - hx and x + hx <= high[0]
                and low[1] <= y - hy and y + hy <= high[1]
                and region[0][0] <= x <= region[0][1] and region[1][0] <= y <= region[1][1])


def _containers_overlap(a: PlacedContainer, b: PlacedContainer) -> bool:
    gap = CONTAINER_GAP_M
    if a.spec.type == "plate" and b.spec.type == "plate":
        return np.linalg.norm(a.position[:2] - b.position[:2]) < a.size[0] + b.size[0] + gap
    if a.spec.type == "plate" or b.spec.type == "plate":
        plate, other = (a, b) if a.spec.type == "plate" else (b, a)
        return other.clearance_to(plate.position[:2]) < plate.size[0] + gap
    ax, ay = a.size[0], a.size[1]
    bx, by = b.size[0], b.size[1]
    d = np.abs(a.position[:2] - b.position[:2])
    return bool(d[0] < ax + bx + gap and d[1] < ay + by + gap)


def check_layout_index(task: Task, layout: Any) -> int:
    """``layout`` as an int, or an error naming it when it is not one of the task's layouts."""
    if isinstance(layout, bool) or not isinstance(layout, (int, np.integer)) or not 0 <= layout < task.layouts:
        raise ConfigError(f"layout must be an integer in [0, {task.layouts - 1}] for task {task.task_id!r}, "
                          f"got {layout!r}")
    return int(layout)


def sample_layout(scene: SceneSpec, task: Task, layout: int) -> Layout:
    """Layout ``layout`` (0-based) of ``task``: deterministic, non-overlapping, inside the region."""
    check_layout_index(task, layout)
    rng = np.random.default_rng(layout_seed(task.task_id, int(layout)))
    failed = ""
    for _ in range(MAX_LAYOUT_RESTARTS):
        placed = _try_layout(scene, task, rng)
        if isinstance(placed, Layout):
            return Layout(task_id=task.task_id, index=int(layout), containers=placed.containers,
                          objects=placed.objects)
        failed = placed
    raise ConfigError(f"cannot place the objects of task {task.task_id!r} without overlap in scene "
                      f"{scene.name!r} (layout {layout}; last failure: {failed}); enlarge the region "
                      "or move or shrink the containers", key=f"scenes.{scene.name}")


# ----------------------------------------------------------------------------- automatic resets


def reset_scene(scene: SceneSpec, task: Task) -> ResetScene:
    """What :func:`ladder_ros.core.reset.plan_reset` needs of ``task``'s scene: the declared start regions (each
    taking the kinds it lists, else every kind that starts on the table), then every container a kind of the
    task starts on (taking those kinds, as many as start there), and the instances of each kind."""
    kinds = scene.kinds_for(task)
    on_table = tuple(k for k in scene.objects if scene.objects[k].start == "table")
    regions = [StartRegion(name=r.name, text=r.text, capacity=r.capacity, kinds=r.objects or on_table)
               for r in scene.start_regions.values()]
    for cname, c in scene.containers.items():
        starting = tuple(k for k in kinds if scene.objects[k].start == cname)
        if starting:
            regions.append(StartRegion(name=cname, text=f"the {cname.replace('_', ' ')}", is_container=True,
                                       capacity=sum(scene.objects[k].count for k in starting), kinds=starting,
                                       preposition="in" if c.type == "bin" else "on"))
    return ResetScene(scene=scene.name, regions=tuple(regions),
                      object_counts={k: scene.objects[k].count for k in kinds})
