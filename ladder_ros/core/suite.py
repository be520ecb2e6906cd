"""Task suites: scenes and ladders of tasks, read from a YAML file under ``config/suites/``.

A suite file looks like this (the scene part is the simulator's; the core checks only that every
object and destination a task names exists in its scene)::

    schema_version: 1
    suite: tabletop
    embodiment: widowx            # a preset name (ladder_ros.core.presets)
    scenes:
      kitchen:
        objects: {carrot: {...}, spoon: {...}}
        containers: {plate: {...}, cloth: {...}}
    tasks:
      - id: kitchen_single_1
        scene: kitchen
        category: single_destination
        ladder: kitchen_single
        instruction: put the carrot on the plate
        subgoals:
          - {object: carrot, destination: plate, text: put the carrot on the plate}
        # optional: success_rule (ladder | simplerenv), budget_steps (replaces the preset's budget)

Every error names the file and the key path (``tasks[3].subgoals[1].destination``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from ladder_ros.core.errors import UNKNOWN_NAME_GUIDE, ConfigError, check_keys, read_yaml, unknown_name
from ladder_ros.core.presets import PRESETS
from ladder_ros.core.task import LADDER_RULE, SUCCESS_RULES, Subgoal, Task, TaskCategory

SUITE_SCHEMA_VERSION = 1
SUITE_KEYS = ("schema_version", "suite", "description", "embodiment", "scenes", "tasks")
TASK_KEYS = ("id", "scene", "category", "ladder", "instruction", "subgoals", "distractors", "layouts",
             "success_rule", "budget_steps")
SUBGOAL_KEYS = ("object", "destination", "text")


@dataclass(frozen=True)
class TaskSuite:
    """A validated suite: its scenes (simulator-specific mappings) and its tasks."""

    name: str
    source: str
    embodiment: str
    scenes: Mapping[str, Mapping[str, Any]]
    tasks: tuple[Task, ...]
    description: str = ""

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise unknown_name("task", task_id, [t.task_id for t in self.tasks], see=UNKNOWN_NAME_GUIDE)

    def select(self, task_ids: list[str] | None = None, max_horizon: int | None = None) -> list[Task]:
        """Tasks by id (in the given order) or all, optionally up to a horizon."""
        tasks = [self.task(t) for t in task_ids] if task_ids else list(self.tasks)
        if max_horizon is not None:
            tasks = [t for t in tasks if t.horizon <= max_horizon]
        return tasks


def _require(mapping: Any, key: str, where: str, source: str, kind: type = object) -> Any:
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"expected a mapping, got {type(mapping).__name__}", source=source, key=where)
    if key not in mapping:
        raise ConfigError("missing required key", source=source, key=f"{where}.{key}" if where else key)
    value = mapping[key]
    if kind is not object and not isinstance(value, kind):
        raise ConfigError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}",
                          source=source, key=f"{where}.{key}" if where else key)
    return value


def _scene_names(scene: Mapping, part: str, where: str, source: str) -> list[str]:
    entries = _require(scene, part, where, source, Mapping)
    return [str(k) for k in entries]


def parse_suite(data: Any, source: str = "<suite>") -> TaskSuite:
    """Validate a suite document (already loaded from YAML)."""
    if not isinstance(data, Mapping):
        raise ConfigError("a suite file is a mapping at the top level", source=source)
    check_keys(data, SUITE_KEYS, source=source)
    version = _require(data, "schema_version", "", source, int)
    if version != SUITE_SCHEMA_VERSION:
        raise ConfigError(f"unsupported schema_version {version}; this version reads {SUITE_SCHEMA_VERSION}",
                          source=source, key="schema_version")
    name = str(_require(data, "suite", "", source, str))
    embodiment = str(data.get("embodiment", "widowx"))
    if embodiment not in PRESETS:
        raise ConfigError(f"unknown preset {embodiment!r}; valid: {', '.join(sorted(PRESETS))}",
                          source=source, key="embodiment")
    scenes = _require(data, "scenes", "", source, Mapping)
    scene_parts: dict[str, tuple[list[str], list[str]]] = {}
    for scene_name, scene in scenes.items():
        where = f"scenes.{scene_name}"
        scene_parts[str(scene_name)] = (_scene_names(scene, "objects", where, source),
                                        _scene_names(scene, "containers", where, source))
    raw_tasks = _require(data, "tasks", "", source, list)
    tasks: list[Task] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_tasks):
        where = f"tasks[{i}]"
        task_id = str(_require(raw, "id", where, source, str))
        where = f"tasks[{i}] ({task_id})"
        check_keys(raw, TASK_KEYS, source=source, where=where)
        if task_id in seen:
            raise ConfigError("duplicate task id", source=source, key=f"{where}.id")
        seen.add(task_id)
        scene = str(_require(raw, "scene", where, source, str))
        if scene not in scene_parts:
            raise ConfigError(f"unknown scene {scene!r}; valid: {', '.join(sorted(scene_parts))}",
                              source=source, key=f"{where}.scene")
        objects, containers = scene_parts[scene]
        category_name = str(_require(raw, "category", where, source, str))
        try:
            category = TaskCategory.parse(category_name)
        except ConfigError as exc:
            raise ConfigError(str(exc), source=source, key=f"{where}.category") from None
        subgoals = []
        for j, sg in enumerate(_require(raw, "subgoals", where, source, list)):
            sw = f"{where}.subgoals[{j}]"
            obj = str(_require(sg, "object", sw, source, str))
            check_keys(sg, SUBGOAL_KEYS, source=source, where=sw)
            dest = str(_require(sg, "destination", sw, source, str))
            text = str(_require(sg, "text", sw, source, str))
            if obj not in objects:
                raise ConfigError(f"unknown object {obj!r} in scene {scene!r}; valid: {', '.join(sorted(objects))}",
                                  source=source, key=f"{sw}.object")
            if dest not in containers:
                raise ConfigError(f"unknown destination {dest!r} in scene {scene!r}; "
                                  f"valid: {', '.join(sorted(containers))}", source=source, key=f"{sw}.destination")
            subgoals.append(Subgoal(object=obj, destination=dest, text=text))
        distractors = raw.get("distractors", []) if isinstance(raw, Mapping) else []
        if not isinstance(distractors, list):
            raise ConfigError("expected a list", source=source, key=f"{where}.distractors")
        for d in distractors:
            if d not in objects:
                raise ConfigError(f"unknown distractor {d!r} in scene {scene!r}", source=source,
                                  key=f"{where}.distractors")
        layouts = raw.get("layouts", 24)
        if isinstance(layouts, bool) or not isinstance(layouts, int) or layouts < 1:
            raise ConfigError(f"layouts must be a positive integer, got {layouts!r}", source=source,
                              key=f"{where}.layouts")
        instruction = str(_require(raw, "instruction", where, source, str))
        budget_steps = raw.get("budget_steps")
        if budget_steps is not None and (isinstance(budget_steps, bool) or not isinstance(budget_steps, int)
                                         or budget_steps < 1):
            raise ConfigError(f"budget_steps must be a positive integer, got {budget_steps!r}", source=source,
                              key=f"{where}.budget_steps")
        success_rule = raw.get("success_rule", LADDER_RULE)
        if success_rule not in SUCCESS_RULES:
            raise ConfigError(f"unknown success_rule {success_rule!r}; valid: {', '.join(SUCCESS_RULES)}",
                              source=source, key=f"{where}.success_rule")
        try:
            tasks.append(Task(
                task_id=task_id, scene=scene, category=category, instruction=instruction,
                subgoals=tuple(subgoals), distractors=tuple(str(d) for d in distractors),
                suite=name, ladder=str(raw.get("ladder", f"{scene}/{category.value}")), layouts=layouts,
                success_rule=success_rule, budget_steps=budget_steps,
            ))
        except ConfigError as exc:
            raise ConfigError(str(exc), source=source) from None
    if not tasks:
        raise ConfigError("a suite needs at least one task", source=source, key="tasks")
    return TaskSuite(name=name, source=source, embodiment=embodiment, scenes=dict(scenes),
                     tasks=tuple(tasks), description=str(data.get("description", "")))


def load_suite(path: str | Path) -> TaskSuite:
    """Read and validate a suite YAML file; errors name the file and the key."""
    return parse_suite(read_yaml(path, "suite file"), source=str(path))
