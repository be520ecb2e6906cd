"""The Bridge suite, its scenes, the predicate rule and the process setup, without a simulator."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.suite import load_suite
from ladder_ros.core.task import TaskCategory
from ladder_ros.sim.maniskill_bridge import aperture_from_fingers, make_backend, object_on_container
from ladder_ros.sim.maniskill_env import (
    REQUIRED_ASSET_FILES,
    ManiSkillSetupError,
    missing_asset_files,
    resolve_asset_dir,
    resolve_vulkan_driver,
    runtime_environment,
)
from ladder_ros.sim.maniskill_scenes import (
    MULTI_OBJECT_ENV_ID,
    SUPPORTED_ENV_IDS,
    BridgeItem,
    grid_placements,
    parse_scene,
    parse_scenes,
)

REPO = Path(__file__).resolve().parents[1]
SUITE_FILE = REPO / "config" / "suites" / "bridge.yaml"


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE_FILE)


def test_bridge_suite_has_the_required_tasks(suite):
    assert (suite.name, suite.embodiment) == ("bridge", "widowx")
    by_id = {t.task_id: t for t in suite.tasks}
    carrot = by_id["carrot_on_plate_1"]
    assert [(s.object, s.destination) for s in carrot.subgoals] == [("carrot", "plate")]
    assert [(s.object, s.destination) for s in by_id["spoon_on_cloth_1"].subgoals] == [("spoon", "cloth")]
    split = by_id["kitchen_split_2"]
    assert split.category is TaskCategory.SPLIT_DESTINATIONS
    assert {s.destination for s in split.subgoals} == {"plate", "cloth"}
    relay = by_id["kitchen_relay_2"]
    assert relay.category is TaskCategory.RELAY
    assert [(s.object, s.destination) for s in relay.subgoals] == [("carrot", "plate"), ("carrot", "cloth")]
    assert all(t.layouts == 24 for t in suite.tasks)


def test_scenes_parse_with_24_layouts_each(suite):
    scenes = parse_scenes(suite.scenes, suite.source)
    assert scenes["carrot_plate"].env_id == "PutCarrotOnPlateInScene-v1"
    assert scenes["spoon_cloth"].env_id == "PutSpoonOnTableClothInScene-v1"
    kitchen = scenes["kitchen"]
    assert kitchen.env_id == MULTI_OBJECT_ENV_ID
    assert [i.name for i in kitchen.items] == ["carrot", "spoon", "plate", "cloth"]
    assert {s.name: s.layout_count for s in scenes.values()} == {"carrot_plate": 24, "spoon_cloth": 24, "kitchen": 24}
    # the env's own success checks: contact needed on the plate, not on the cloth (put_on_in_scene.py)
    assert kitchen.item("plate").require_contact and not kitchen.item("cloth").require_contact
    assert scenes["carrot_plate"].item("plate").require_contact
    assert not scenes["spoon_cloth"].item("cloth").require_contact
    kwargs = kitchen.env_kwargs()
    assert kwargs["model_ids"][0] == "bridge_carrot_generated_modified"
    assert kwargs["yaws_rad"][0] == pytest.approx([np.pi, -np.pi / 2])


def test_grid_placements_are_distinct_cells():
    for count, layouts in ((2, 12), (3, 24), (4, 24)):
        placements = grid_placements(count)
        assert len(placements) == layouts == len(set(placements))
        assert all(len(set(p)) == count for p in placements)
    with pytest.raises(ConfigError, match="1 to 4"):
        grid_placements(5)


def _kitchen(suite) -> dict:
    return copy.deepcopy(dict(suite.scenes["kitchen"]))


def test_unknown_env_id_lists_the_valid_ones(suite):
    raw = _kitchen(suite)
    raw["env_id"] = "PutCarrotOnPlate-v9"
    with pytest.raises(ConfigError) as err:
        parse_scene("kitchen", raw, "bridge.yaml")
    message = str(err.value)
    assert "scenes.kitchen.env_id" in message and "PutCarrotOnPlate-v9" in message
    for env_id in SUPPORTED_ENV_IDS:
        assert env_id in message


@pytest.mark.parametrize("mutate,match", [
    (lambda r: r["objects"]["carrot"].pop("spawn_z"), "objects.carrot.spawn_z"),
    (lambda r: r["objects"]["spoon"].update(model_id="bridge_carrot_generated_modified"), "own model"),
    (lambda r: r["containers"]["plate"].update(require_contact="yes"), "require_contact"),
    (lambda r: r["objects"]["carrot"].update(colour="orange"), "unknown keys"),
    (lambda r: r["objects"]["carrot"].update(yaws_deg=[]), "yaws_deg"),
    (lambda r: r["containers"].update(bowl={"model_id": "b", "spawn_z": 0.9}), "1 to 4"),
])
def test_bad_scene_entries_name_the_key(suite, mutate, match):
    raw = _kitchen(suite)
    mutate(raw)
    with pytest.raises(ConfigError, match=match):
        parse_scene("kitchen", raw, "bridge.yaml")


def test_original_envs_place_their_own_objects(suite):
    raw = copy.deepcopy(dict(suite.scenes["carrot_plate"]))
    raw["objects"]["carrot"]["spawn_z"] = 0.9
    with pytest.raises(ConfigError, match="places its objects itself"):
        parse_scene("carrot_plate", raw)
    raw = copy.deepcopy(dict(suite.scenes["carrot_plate"]))
    raw["objects"]["spoon"] = {"model_id": "bridge_spoon_generated_modified"}
    with pytest.raises(ConfigError, match="exactly one object and one container"):
        parse_scene("carrot_plate", raw)


PLATE = BridgeItem("plate", "bridge_plate_objaverse_larger", True, require_contact=True)
CLOTH = BridgeItem("cloth", "table_cloth_generated_shorter", True, require_contact=False)
PLATE_HALF = np.array([0.055, 0.055, 0.003])  # info_bridge_custom_v0.json bbox / 2
CARROT_HALF_Z = 0.019


def test_on_container_rule_follows_the_env_success_check():
    plate_at = np.array([0.3, 0.1, 0.0])
    lying = plate_at + np.array([0.02, -0.01, 0.024])
    assert object_on_container(lying, plate_at, CARROT_HALF_Z, PLATE_HALF, 0.4, PLATE)
    # no contact force on the plate (held just above it): not on it
    assert not object_on_container(lying, plate_at, CARROT_HALF_Z, PLATE_HALF, 0.0, PLATE)
    # xy limit: |half diagonal| + 3 mm (base_env.py)
    edge = float(np.linalg.norm(PLATE_HALF[:2])) + 0.003
    assert object_on_container(plate_at + [edge - 1e-4, 0, 0.024], plate_at, CARROT_HALF_Z, PLATE_HALF, 1.0, PLATE)
    assert not object_on_container(plate_at + [edge + 1e-4, 0, 0.024], plate_at, CARROT_HALF_Z, PLATE_HALF, 1.0, PLATE)
    # z: above the container, at most half heights + 2 cm
    top = PLATE_HALF[2] + CARROT_HALF_Z + 0.02
    assert object_on_container(plate_at + [0, 0, top - 1e-4], plate_at, CARROT_HALF_Z, PLATE_HALF, 1.0, PLATE)
    assert not object_on_container(plate_at + [0, 0, top + 1e-4], plate_at, CARROT_HALF_Z, PLATE_HALF, 1.0, PLATE)
    assert not object_on_container(plate_at - [0, 0, 0.001], plate_at, CARROT_HALF_Z, PLATE_HALF, 1.0, PLATE)
    # the cloth needs no contact ("allows spoons to be partially on the table cloth")
    assert object_on_container(lying, plate_at, CARROT_HALF_Z, PLATE_HALF, 0.0, CLOTH)


def test_aperture_spans_the_finger_travel():
    assert aperture_from_fingers(np.array([0.037, 0.037])) == 1.0
    assert aperture_from_fingers(np.array([0.015, 0.015])) == 0.0
    assert aperture_from_fingers(np.array([0.026, 0.026])) == pytest.approx(0.5)
    assert aperture_from_fingers(np.array([0.040, 0.040])) == 1.0  # clipped


def test_missing_assets_name_the_folder(tmp_path):
    with pytest.raises(ManiSkillSetupError, match=str(tmp_path / "nowhere")):
        resolve_asset_dir(tmp_path / "nowhere")
    (tmp_path / "assets").mkdir()
    with pytest.raises(ManiSkillSetupError) as err:
        resolve_asset_dir(tmp_path / "assets", model_ids=("bridge_carrot_generated_modified",))
    assert str(tmp_path / "assets") in str(err.value) and "wx250s.urdf" in str(err.value)
    assert len(missing_asset_files(tmp_path / "assets", ("bridge_carrot_generated_modified",))) == \
        len(REQUIRED_ASSET_FILES) + 2


def test_asset_dir_variable_is_used_and_checked(tmp_path):
    with pytest.raises(ManiSkillSetupError, match=r"\$MS_ASSET_DIR"):
        resolve_asset_dir(None, environ={"MS_ASSET_DIR": str(tmp_path)})


def _fake_lavapipe(root: Path) -> None:
    libdir = root / "root/usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (libdir / "libvulkan_lvp.so").write_bytes(b"")
    (root / "lvp_icd.json").write_text(json.dumps({"ICD": {"library_path": str(libdir / "libvulkan_lvp.so")}}))


def test_missing_vulkan_driver_says_how_to_install(tmp_path):
    with pytest.raises(ManiSkillSetupError, match="install_maniskill.sh"):
        resolve_vulkan_driver(tmp_path, environ={})


def test_runtime_environment_for_a_child_process(tmp_path):
    lvp = tmp_path / "lvp"
    _fake_lavapipe(lvp)
    assets = tmp_path / "assets"
    for rel in REQUIRED_ASSET_FILES:
        (assets / rel).parent.mkdir(parents=True, exist_ok=True)
        (assets / rel).write_bytes(b"")
    try:
        env = runtime_environment(assets, lvp, base={"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    except ManiSkillSetupError as exc:  # only when libvulkan1 itself is absent
        pytest.skip(f"Vulkan loader not installed: {exc}")
    assert env["MS_ASSET_DIR"] == str(assets.resolve())
    assert env["VK_ICD_FILENAMES"] == str(lvp / "lvp_icd.json")
    assert env["LD_LIBRARY_PATH"] == f"{lvp / 'root/usr/lib/x86_64-linux-gnu'}:/x"
    assert env["PATH"] == "/usr/bin"


def test_make_backend_rejects_unknown_options(suite):
    with pytest.raises(ConfigError, match="render"):
        make_backend(suite, renders=False)


def test_suite_file_is_plain_yaml_with_schema_version():
    data = yaml.safe_load(SUITE_FILE.read_text())
    assert data["schema_version"] == 1 and data["suite"] == "bridge"


def test_a_scene_whose_assets_are_not_shipped_names_the_folder_and_files(tmp_path):
    from ladder_ros.core.suite import parse_suite

    try:
        assets = resolve_asset_dir()
    except ManiSkillSetupError as exc:
        pytest.skip(f"offline Bridge assets not found: {exc}")
    stack = parse_suite({
        "schema_version": 1, "suite": "cubes", "embodiment": "widowx",
        "scenes": {"cubes": {"env_id": "StackGreenCubeOnYellowCubeBakedTexInScene-v1",
                             "objects": {"green cube": {"model_id": "baked_green_cube_3cm"}},
                             "containers": {"yellow cube": {"model_id": "baked_yellow_cube_3cm"}}}},
        "tasks": [{"id": "stack_1", "scene": "cubes", "category": "single_destination", "instruction": "stack",
                   "subgoals": [{"object": "green cube", "destination": "yellow cube", "text": "stack"}]}],
    })
    with pytest.raises(ManiSkillSetupError) as err:
        make_backend(stack, asset_dir=assets, lvp_dir=tmp_path)
    message = str(err.value)
    assert str(assets) in message
    assert "baked_green_cube_3cm" in message and "info_bridge_custom_baked_tex_v0.json" in message


def test_a_second_backend_in_the_process_keeps_the_asset_folder_mani_skill_was_imported_with(tmp_path, monkeypatch):
    # mani_skill keeps $MS_ASSET_DIR/data as its ASSET_DIR: the same folder again is fine, another is refused.
    import sys
    import types

    from ladder_ros.sim.maniskill_env import ManiSkillSetupError, VulkanDriver, configure_current_process

    icd = tmp_path / "icd.json"
    icd.write_text('{"ICD": {"library_path": "liblvp.so"}}')
    driver = VulkanDriver(icd_file=icd, library_dir=tmp_path)
    monkeypatch.setitem(sys.modules, "mani_skill", types.SimpleNamespace(ASSET_DIR=tmp_path / "assets" / "data"))
    monkeypatch.delitem(sys.modules, "sapien", raising=False)
    monkeypatch.setenv("MS_ASSET_DIR", str(tmp_path / "assets"))
    monkeypatch.setenv("VK_ICD_FILENAMES", str(icd))
    configure_current_process(tmp_path / "assets", driver)
    with pytest.raises(ManiSkillSetupError, match="already imported with asset folder"):
        configure_current_process(tmp_path / "other", driver)
