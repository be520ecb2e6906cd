"""Bridge scenes of a suite file, validated: which ManiSkill3 env builds each scene and how it is judged.

A scene in ``config/suites/bridge.yaml`` names the ManiSkill3 env that builds it, and for each of its
objects and containers the Bridge model it loads (a folder under
``data/tasks/bridge_v2_real2sim_dataset/custom/models``)::

    carrot_plate:                                # one of SimplerEnv's own envs, unchanged
      env_id: PutCarrotOnPlateInScene-v1
      objects: {carrot: {model_id: bridge_carrot_generated_modified}}
      containers: {plate: {model_id: bridge_plate_objaverse_larger}}
    kitchen:                                     # several objects on the same table
      env_id: LadderBridgeTableInScene-v1
      objects:
        carrot: {model_id: bridge_carrot_generated_modified, spawn_z: 0.887529, yaws_deg: [180, -90]}
      containers:
        plate: {model_id: bridge_plate_objaverse_larger, spawn_z: 0.869532, require_contact: true}

Containers may set ``require_contact`` (the object must press on the container, as in the carrot
env's success check) and ``on_top_tolerance_m``; defaults follow the env's own ``evaluate``.
Nothing here imports ManiSkill, so a suite is checked before any simulator starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path
from typing import Any, Mapping

from ladder_ros.core.errors import ConfigError
from ladder_ros.sim.maniskill_env import BRIDGE_ASSETS, FLAT_TABLE_FILES, ROBOT_FILES

MULTI_OBJECT_ENV_ID = "LadderBridgeTableInScene-v1"

# The 2x2 spawn grid of SimplerEnv's carrot and spoon scenes: centre (-0.16, 0.00) m in the world
# frame, half edge 0.075 m (mani_skill/envs/tasks/digital_twins/bridge_dataset_eval/put_on_in_scene.py).
GRID_CENTER_XY = (-0.16, 0.00)
GRID_HALF_EDGE_XY = (0.075, 0.075)
GRID_CELLS = 4

# The success check of BaseBridgeEnv._evaluate (bridge_dataset_eval/base_env.py):
XY_MARGIN_M = 0.003  # xy offset <= |container half bbox xy| + 0.003
ON_TOP_TOLERANCE_M = 0.02  # z_flag_required_offset default
CONTACT_FORCE_N = 0.05  # "net_forces > 0.05": the object presses on the container


# The sink scene's stage and green-screen photo (base_env.py, scene_setting "sink").
SINK_FILES = (
    BRIDGE_ASSETS / "custom/info_bridge_custom_v0.json",
    BRIDGE_ASSETS / "stages/bridge_table_1_v2.glb",
    BRIDGE_ASSETS / "real_inpainting/bridge_sink.png",
)


@dataclass(frozen=True)
class OriginalEnv:
    """One of SimplerEnv's WidowX envs: its layouts, its files and how its ``evaluate`` judges success."""

    env_id: str
    layouts: int  # len(xyz_configs) * len(quat_configs) in put_on_in_scene.py
    require_contact: bool  # success_require_src_completely_on_target
    on_top_tolerance_m: float  # z_flag_required_offset
    scene_files: tuple[Path, ...] = FLAT_TABLE_FILES
    model_json: str = "info_bridge_custom_v0.json"  # BaseBridgeEnv.MODEL_JSON


# From put_on_in_scene.py (mani-skill 3.0.1). The offline asset folder holds what the carrot and
# spoon envs need; the other two need models and stages it does not have.
ORIGINAL_ENVS: dict[str, OriginalEnv] = {
    env.env_id: env for env in (
        OriginalEnv("PutCarrotOnPlateInScene-v1", layouts=12 * 2, require_contact=True,
                    on_top_tolerance_m=ON_TOP_TOLERANCE_M),
        OriginalEnv("PutSpoonOnTableClothInScene-v1", layouts=12 * 2, require_contact=False,
                    on_top_tolerance_m=ON_TOP_TOLERANCE_M),
        OriginalEnv("StackGreenCubeOnYellowCubeBakedTexInScene-v1", layouts=24 * 1, require_contact=True,
                    on_top_tolerance_m=ON_TOP_TOLERANCE_M,
                    scene_files=FLAT_TABLE_FILES + (BRIDGE_ASSETS / "custom/info_bridge_custom_baked_tex_v0.json",),
                    model_json="info_bridge_custom_baked_tex_v0.json"),
        OriginalEnv("PutEggplantInBasketScene-v1", layouts=8 * 8, require_contact=False,
                    on_top_tolerance_m=0.06, scene_files=SINK_FILES),
    )
}
SUPPORTED_ENV_IDS: tuple[str, ...] = (*ORIGINAL_ENVS, MULTI_OBJECT_ENV_ID)


@dataclass(frozen=True)
class BridgeItem:
    """An object or a container of a scene: its name in the suite and the Bridge model it loads."""

    name: str
    model_id: str
    is_container: bool
    spawn_z: float | None = None  # world-frame height at reset (multi-object scenes)
    yaws_deg: tuple[float, ...] = (0.0,)  # layout k uses yaws_deg[k % len]
    require_contact: bool = True
    on_top_tolerance_m: float = ON_TOP_TOLERANCE_M


@dataclass(frozen=True)
class BridgeScene:
    """A validated scene: the env that builds it and its items in spawn order (objects first)."""

    name: str
    env_id: str
    objects: tuple[BridgeItem, ...]
    containers: tuple[BridgeItem, ...]
    grid_center_xy: tuple[float, float] = GRID_CENTER_XY
    grid_half_edge_xy: tuple[float, float] = GRID_HALF_EDGE_XY

    @property
    def items(self) -> tuple[BridgeItem, ...]:
        return self.objects + self.containers

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(item.model_id for item in self.items)

    @property
    def is_original(self) -> bool:
        return self.env_id in ORIGINAL_ENVS

    @property
    def asset_files(self) -> tuple[Path, ...]:
        """Files under the asset folder this scene opens besides its models."""
        scene_files = ORIGINAL_ENVS[self.env_id].scene_files if self.is_original else FLAT_TABLE_FILES
        return ROBOT_FILES + scene_files

    @property
    def model_database(self) -> Path:
        """The JSON with each model's bounding box (BaseBridgeEnv.MODEL_JSON)."""
        name = ORIGINAL_ENVS[self.env_id].model_json if self.is_original else "info_bridge_custom_v0.json"
        return BRIDGE_ASSETS / "custom" / name

    @property
    def layout_count(self) -> int:
        """Distinct reset layouts: the original env's, or the item placements on the 2x2 grid."""
        if self.is_original:
            return ORIGINAL_ENVS[self.env_id].layouts
        return len(grid_placements(len(self.items)))

    def item(self, name: str) -> BridgeItem:
        for item in self.items:
            if item.name == name:
                return item
        raise ConfigError(f"scene {self.name!r} has no object or container {name!r}; "
                          f"valid: {', '.join(i.name for i in self.items)}")

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``gym.make`` beyond the common ones (multi-object scenes only)."""
        if self.is_original:
            return {}
        return {
            "model_ids": list(self.model_ids),
            "spawn_z": [float(item.spawn_z) for item in self.items],
            "yaws_rad": [[math.radians(y) for y in item.yaws_deg] for item in self.items],
            "grid_center_xy": list(self.grid_center_xy),
            "grid_half_edge_xy": list(self.grid_half_edge_xy),
        }


def grid_placements(item_count: int) -> list[tuple[int, ...]]:
    """Layout k puts item i on grid cell ``grid_placements(n)[k][i]``: all ordered choices of
    distinct cells, lexicographic. 3 or 4 items give 24 layouts, the number SimplerEnv-Long draws
    per task (LADDER paper, Appendix D)."""
    if not 1 <= item_count <= GRID_CELLS:
        raise ConfigError(f"a grid scene holds 1 to {GRID_CELLS} items, got {item_count}")
    return list(permutations(range(GRID_CELLS), item_count))


def _number(value: Any, key: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"expected a finite number, got {value!r}", source=source, key=key)
    return float(value)


def _parse_item(name: str, raw: Any, is_container: bool, env_id: str, key: str, source: str) -> BridgeItem:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping with model_id, got {raw!r}", source=source, key=key)
    known = {"model_id", "spawn_z", "yaws_deg", "require_contact", "on_top_tolerance_m"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown keys {unknown}; valid: {', '.join(sorted(known))}", source=source, key=key)
    model_id = raw.get("model_id")
    if not isinstance(model_id, str) or not model_id:
        raise ConfigError(f"model_id must be a non-empty string, got {model_id!r}", source=source,
                          key=f"{key}.model_id")
    original = ORIGINAL_ENVS.get(env_id)
    spawn_z = raw.get("spawn_z")
    if original is None:
        if spawn_z is None:
            raise ConfigError("a multi-object scene needs spawn_z (world-frame height at reset, m)",
                              source=source, key=f"{key}.spawn_z")
        spawn_z = _number(spawn_z, f"{key}.spawn_z", source)
    elif spawn_z is not None or "yaws_deg" in raw:
        raise ConfigError(f"{env_id} places its objects itself; spawn_z and yaws_deg are for "
                          f"{MULTI_OBJECT_ENV_ID} scenes", source=source, key=key)
    yaws = raw.get("yaws_deg", [0.0])
    if not isinstance(yaws, list) or not yaws:
        raise ConfigError(f"yaws_deg must be a non-empty list of degrees, got {yaws!r}", source=source,
                          key=f"{key}.yaws_deg")
    yaws_deg = tuple(_number(y, f"{key}.yaws_deg", source) for y in yaws)
    default_contact = original.require_contact if original else True
    default_tolerance = original.on_top_tolerance_m if original else ON_TOP_TOLERANCE_M
    require_contact = raw.get("require_contact", default_contact)
    if not isinstance(require_contact, bool):
        raise ConfigError(f"require_contact must be true or false, got {require_contact!r}", source=source,
                          key=f"{key}.require_contact")
    tolerance = _number(raw.get("on_top_tolerance_m", default_tolerance), f"{key}.on_top_tolerance_m", source)
    if not 0.0 < tolerance < 0.5:
        raise ConfigError(f"on_top_tolerance_m must be in (0, 0.5) m, got {tolerance}", source=source,
                          key=f"{key}.on_top_tolerance_m")
    if not is_container and ("require_contact" in raw or "on_top_tolerance_m" in raw):
        raise ConfigError("require_contact and on_top_tolerance_m belong to containers", source=source, key=key)
    return BridgeItem(name=name, model_id=model_id, is_container=is_container, spawn_z=spawn_z,
                      yaws_deg=yaws_deg, require_contact=require_contact, on_top_tolerance_m=tolerance)


def parse_scene(name: str, raw: Any, source: str = "<suite>") -> BridgeScene:
    """Validate one ``scenes.<name>`` mapping of a Bridge suite; errors name the key path."""
    key = f"scenes.{name}"
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping", source=source, key=key)
    env_id = raw.get("env_id")
    if env_id not in SUPPORTED_ENV_IDS:
        raise ConfigError(f"unknown ManiSkill env id {env_id!r}; valid: {', '.join(SUPPORTED_ENV_IDS)}",
                          source=source, key=f"{key}.env_id")
    parts: dict[str, tuple[BridgeItem, ...]] = {}
    for part, is_container in (("objects", False), ("containers", True)):
        entries = raw.get(part)
        if not isinstance(entries, Mapping) or not entries:
            raise ConfigError(f"expected a non-empty mapping of {part}", source=source, key=f"{key}.{part}")
        parts[part] = tuple(_parse_item(str(n), v, is_container, env_id, f"{key}.{part}.{n}", source)
                            for n, v in entries.items())
    grid = raw.get("grid", {})
    if not isinstance(grid, Mapping) or set(grid) - {"center_xy", "half_edge_xy"}:
        raise ConfigError("grid takes center_xy and half_edge_xy (world frame, m)", source=source, key=f"{key}.grid")
    center = tuple(_number(v, f"{key}.grid.center_xy", source) for v in grid.get("center_xy", GRID_CENTER_XY))
    half = tuple(_number(v, f"{key}.grid.half_edge_xy", source) for v in grid.get("half_edge_xy", GRID_HALF_EDGE_XY))
    if len(center) != 2 or len(half) != 2 or min(half) <= 0:
        raise ConfigError("grid center_xy and half_edge_xy are two numbers each, half edges positive",
                          source=source, key=f"{key}.grid")
    if grid and env_id in ORIGINAL_ENVS:
        raise ConfigError(f"{env_id} places its objects itself; grid is for {MULTI_OBJECT_ENV_ID} scenes",
                          source=source, key=f"{key}.grid")
    scene = BridgeScene(name=name, env_id=env_id, objects=parts["objects"], containers=parts["containers"],
                        grid_center_xy=center, grid_half_edge_xy=half)  # type: ignore[arg-type]
    models = scene.model_ids
    if len(set(models)) != len(models):
        raise ConfigError(f"each item needs its own model (ManiSkill names actors by model id), got {list(models)}",
                          source=source, key=key)
    names = [item.name for item in scene.items]
    if len(set(names)) != len(names):
        raise ConfigError(f"an object and a container share a name: {names}", source=source, key=key)
    if scene.is_original and (len(scene.objects), len(scene.containers)) != (1, 1):
        raise ConfigError(f"{env_id} has exactly one object and one container", source=source, key=key)
    if not scene.is_original:
        grid_placements(len(scene.items))  # raises for more items than grid cells
    return scene


def parse_scenes(scenes: Mapping[str, Any], source: str = "<suite>") -> dict[str, BridgeScene]:
    """Every scene of a suite, validated."""
    return {str(name): parse_scene(str(name), raw, source) for name, raw in scenes.items()}
