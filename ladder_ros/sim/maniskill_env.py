"""Where ManiSkill3 finds its assets and its software Vulkan driver, for this process or a child.

ManiSkill3 (mani-skill 3.0.1) needs three things from the process environment (docs/dependencies.md,
and the README of the asset folder):

* ``MS_ASSET_DIR``: the folder that holds ``data/robots/widowx`` and
  ``data/tasks/bridge_v2_real2sim_dataset``. ManiSkill reads it once, when ``mani_skill`` is first
  imported (``mani_skill/__init__.py``); a missing asset makes it offer a download from a hub, which
  must never happen here, so the folder is checked before ManiSkill is imported.
* ``VK_ICD_FILENAMES``: the ICD json of Mesa >= 25 lavapipe that ``scripts/install_maniskill.sh``
  unpacks privately (default ``/opt/lvp``). Debian 12's Mesa 22 lavapipe fails in SAPIEN 3 with
  "failed to find a rendering device". The Vulkan loader reads the variable when SAPIEN creates its
  Vulkan instance, so setting it before ``sapien`` is imported is enough.
* the private ``libdrm`` (>= 2.4.121, which the backports lavapipe is built against) ahead of
  Debian 12's. A shell does that with ``LD_LIBRARY_PATH``, which glibc reads only at process start.
  Inside a running process :func:`configure_current_process` instead loads the private libraries by
  absolute path with ``RTLD_GLOBAL`` before the Vulkan loader opens lavapipe: the dynamic linker
  then resolves lavapipe's ``libdrm.so.2`` to the copy already loaded.

So there are two ways to run the backend, and both are supported:

1. **In this process** (what ``make_backend`` does): :func:`configure_current_process` before the
   first ``import mani_skill``. Nothing needs to be exported beforehand.
2. **In a child process** with a complete environment: ``subprocess.run(cmd,
   env=runtime_environment())``; the same dictionary, printed by
   ``python -m ladder_ros.sim.maniskill_env``, is what a shell or CI exports.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ladder_ros.core.errors import ConfigError

ASSET_DIR_VARIABLE = "MS_ASSET_DIR"  # read by mani_skill/__init__.py
LVP_DIR_VARIABLE = "LADDER_LVP_DIR"  # where scripts/install_maniskill.sh unpacked lavapipe
DEFAULT_LVP_DIR = Path("/opt/lvp")  # scripts/install_maniskill.sh default
LVP_LIBRARY_SUBDIR = Path("root/usr/lib/x86_64-linux-gnu")  # dpkg -x layout of the backports debs
LVP_ICD_NAME = "lvp_icd.json"
# Loaded ahead of lavapipe so it links against the backports libdrm (2.4.123), not Debian 12's 2.4.114.
PRIVATE_LIBRARIES = ("libdrm.so.2", "libdrm_amdgpu.so.1")

# Files the WidowX Bridge scenes open (strace list in shared/assets/maniskill_bridge/README.md):
# the robot, and for the flat-table scenes (carrot, spoon, cubes) the model database, the table stage
# and the photo green-screened behind the camera image (bridge_dataset_eval/base_env.py).
BRIDGE_ASSETS = Path("data/tasks/bridge_v2_real2sim_dataset")
ROBOT_FILES = (Path("data/robots/widowx/wx250s.urdf"), Path("data/robots/widowx/wx250s.srdf"))
FLAT_TABLE_FILES = (
    BRIDGE_ASSETS / "custom/info_bridge_custom_v0.json",
    BRIDGE_ASSETS / "stages/bridge_table_1_v1.glb",
    BRIDGE_ASSETS / "real_inpainting/bridge_real_eval_1.png",
)
REQUIRED_ASSET_FILES = ROBOT_FILES + FLAT_TABLE_FILES  # what the carrot and spoon scenes need


class ManiSkillSetupError(ConfigError):
    """ManiSkill, its Vulkan driver or its assets are missing or were set up differently."""


def repository_root() -> Path:
    """The checkout this package lives in (``ladder_ros/sim/`` is two levels down)."""
    return Path(__file__).resolve().parents[2]


def shared_asset_dir() -> Path:
    """The offline asset folder of the development machines and CI, beside the checkout."""
    return repository_root().parent / "shared" / "assets" / "maniskill_bridge"


def model_dir(asset_dir: Path, model_id: str) -> Path:
    """Where ManiSkill's ``BaseBridgeEnv._build_actor_helper`` loads a Bridge object model from."""
    return Path(asset_dir) / BRIDGE_ASSETS / "custom" / "models" / model_id


def missing_asset_files(asset_dir: Path, model_ids: tuple[str, ...] = (),
                        files: tuple[Path, ...] = REQUIRED_ASSET_FILES) -> list[str]:
    """Relative paths under ``asset_dir`` that scenes with ``model_ids`` and ``files`` need and lack."""
    root = Path(asset_dir)
    missing = [str(rel) for rel in dict.fromkeys(files) if not (root / rel).is_file()]
    for model_id in model_ids:
        folder = model_dir(root, model_id)
        if not (folder / "collision.obj").is_file():
            missing.append(str((folder / "collision.obj").relative_to(root)))
        if not any((folder / name).is_file() for name in ("textured.obj", "textured.dae", "textured.glb")):
            missing.append(str((folder / "textured.{obj,dae,glb}").relative_to(root)))
    return missing


def resolve_asset_dir(asset_dir: str | os.PathLike | None = None, model_ids: tuple[str, ...] = (),
                      environ: Mapping[str, str] | None = None,
                      files: tuple[Path, ...] = REQUIRED_ASSET_FILES) -> Path:
    """The asset folder to use: ``asset_dir``, else ``$MS_ASSET_DIR``, else ``../shared/assets/maniskill_bridge``.

    A folder that was named explicitly (argument or variable) must be complete; the error names the
    folder and the files missing there, since ManiSkill would otherwise try to download them.
    """
    env = os.environ if environ is None else environ
    if asset_dir is not None:
        candidate, origin = Path(asset_dir), "the asset_dir option"
    elif env.get(ASSET_DIR_VARIABLE):
        candidate, origin = Path(env[ASSET_DIR_VARIABLE]), f"${ASSET_DIR_VARIABLE}"
    else:
        candidate, origin = shared_asset_dir(), "the default (no asset_dir option, no $MS_ASSET_DIR)"
    candidate = candidate.expanduser().resolve()
    if not candidate.is_dir():
        raise ManiSkillSetupError(
            f"ManiSkill asset folder {candidate} (from {origin}) does not exist; point the backend at the "
            f"folder that contains data/ with asset_dir=... or ${ASSET_DIR_VARIABLE}")
    missing = missing_asset_files(candidate, model_ids, files)
    if missing:
        raise ManiSkillSetupError(
            f"ManiSkill asset folder {candidate} (from {origin}) lacks {len(missing)} file(s) the Bridge "
            f"scenes need: {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")
    return candidate


@dataclass(frozen=True)
class VulkanDriver:
    """A software Vulkan driver: its ICD json and the folder with its private libraries."""

    icd_file: Path
    library_dir: Path

    @property
    def library(self) -> Path:
        return Path(json.loads(self.icd_file.read_text())["ICD"]["library_path"])


def resolve_vulkan_driver(lvp_dir: str | os.PathLike | None = None,
                          environ: Mapping[str, str] | None = None) -> VulkanDriver:
    """lavapipe from ``lvp_dir``, else ``$LADDER_LVP_DIR``, else an already exported
    ``$VK_ICD_FILENAMES``, else ``/opt/lvp``; the error says how to install it."""
    env = os.environ if environ is None else environ
    if lvp_dir is None and not env.get(LVP_DIR_VARIABLE) and env.get("VK_ICD_FILENAMES"):
        icd = Path(env["VK_ICD_FILENAMES"].split(os.pathsep)[0])
        if icd.is_file():
            try:
                library = Path(json.loads(icd.read_text())["ICD"]["library_path"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ManiSkillSetupError(f"$VK_ICD_FILENAMES names {icd}, which is not an ICD json: {exc}") from None
            return VulkanDriver(icd_file=icd, library_dir=library.parent)
    root = Path(lvp_dir or env.get(LVP_DIR_VARIABLE) or DEFAULT_LVP_DIR)
    driver = VulkanDriver(icd_file=root / LVP_ICD_NAME, library_dir=root / LVP_LIBRARY_SUBDIR)
    if not driver.icd_file.is_file() or not (driver.library_dir / "libvulkan_lvp.so").is_file():
        raise ManiSkillSetupError(
            f"no software Vulkan driver in {root} (looked for {LVP_ICD_NAME} and "
            f"{LVP_LIBRARY_SUBDIR}/libvulkan_lvp.so); run scripts/install_maniskill.sh "
            f"(set ${LVP_DIR_VARIABLE} to install elsewhere)")
    if ctypes.util.find_library("vulkan") is None:
        raise ManiSkillSetupError("the Vulkan loader libvulkan.so.1 is not installed; run "
                                  "scripts/install_maniskill.sh (it installs Debian's libvulkan1)")
    return driver


def runtime_environment(asset_dir: str | os.PathLike | None = None, lvp_dir: str | os.PathLike | None = None,
                        base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A complete environment for a child process that runs ManiSkill: ``base`` (default: this
    process's) plus ``MS_ASSET_DIR``, ``VK_ICD_FILENAMES`` and ``LD_LIBRARY_PATH``."""
    env = dict(os.environ if base is None else base)
    assets = resolve_asset_dir(asset_dir, environ=env)
    driver = resolve_vulkan_driver(lvp_dir, environ=env)
    env[ASSET_DIR_VARIABLE] = str(assets)
    env["VK_ICD_FILENAMES"] = str(driver.icd_file)
    previous = env.get("LD_LIBRARY_PATH", "")
    if str(driver.library_dir) not in previous.split(os.pathsep):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(driver.library_dir), previous) if p)
    return env


def _asset_dir_of_imported_mani_skill() -> Path | None:
    module = sys.modules.get("mani_skill")
    if module is None:
        return None
    # mani_skill reads $MS_ASSET_DIR once, at import, and keeps $MS_ASSET_DIR/data as its ASSET_DIR.
    return Path(getattr(module, "ASSET_DIR")).resolve().parent


def configure_current_process(asset_dir: Path, driver: VulkanDriver) -> None:
    """Point this process's ManiSkill at ``asset_dir`` and ``driver``; call before importing it.

    Calling it again with the same folders is harmless. If ManiSkill or SAPIEN was already imported
    with other settings they cannot be changed any more, and the error says what to export instead.
    """
    asset_dir = Path(asset_dir).resolve()
    imported = _asset_dir_of_imported_mani_skill()
    if imported is not None and imported != asset_dir:
        raise ManiSkillSetupError(
            f"mani_skill was already imported with asset folder {imported}; it cannot switch to {asset_dir} "
            f"in this process. Export {ASSET_DIR_VARIABLE}={asset_dir} before starting the process")
    current_icd = os.environ.get("VK_ICD_FILENAMES")
    if "sapien" in sys.modules and current_icd != str(driver.icd_file):
        raise ManiSkillSetupError(
            f"sapien was imported before the Vulkan driver was chosen (VK_ICD_FILENAMES={current_icd!r}); "
            f"export VK_ICD_FILENAMES={driver.icd_file} before starting the process")
    os.environ[ASSET_DIR_VARIABLE] = str(asset_dir)
    os.environ["VK_ICD_FILENAMES"] = str(driver.icd_file)
    for name in PRIVATE_LIBRARIES:
        path = driver.library_dir / name
        if path.is_file():
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def missing_prerequisites(asset_dir: str | os.PathLike | None = None,
                          lvp_dir: str | os.PathLike | None = None) -> str | None:
    """One line saying why the real Bridge env cannot run here, or None when it can.

    Tests use it to skip; it imports nothing heavy.
    """
    for module in ("mani_skill", "sapien", "gymnasium", "torch"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (run scripts/install_maniskill.sh)"
    try:
        resolve_vulkan_driver(lvp_dir)
        resolve_asset_dir(asset_dir)
    except ManiSkillSetupError as exc:
        return str(exc)
    return None


def main() -> int:
    """Print ``export`` lines for a shell: ``eval "$(python -m ladder_ros.sim.maniskill_env)"``."""
    try:
        env = runtime_environment()
    except ManiSkillSetupError as exc:
        print(f"# {exc}", file=sys.stderr)
        return 2
    for name in (ASSET_DIR_VARIABLE, "VK_ICD_FILENAMES"):
        print(f"export {name}={shlex.quote(env[name])}")
    # Prepend to the shell's own value, not to this process's (imports may have extended it).
    library_dir = shlex.quote(env["LD_LIBRARY_PATH"].split(os.pathsep)[0])
    print(f"export LD_LIBRARY_PATH={library_dir}" + "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
