"""Where the package's shared files (config/, launch/, policies/, calibration/) are.

Installed by colcon or pip, they live in ``<prefix>/share/ladder_ros``; in a source checkout (an
editable install, the tests) they are next to the package. The first place that has the file wins.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ladder_ros.core.errors import ConfigError

PACKAGE = "ladder_ros"
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def share_dirs() -> list[Path]:
    """Candidate share directories, most specific first."""
    dirs = [SOURCE_ROOT]
    try:
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory(PACKAGE)))
    except Exception:  # not in an ament index (plain pip install) or ament_index_python missing
        pass
    for prefix in (sys.prefix, *os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        if prefix:
            dirs.append(Path(prefix) / "share" / PACKAGE)
    return dirs


def share_path(*parts: str) -> Path:
    """The path of a shared file, e.g. ``share_path("config", "suites", "tabletop.yaml")``."""
    for base in share_dirs():
        candidate = base.joinpath(*parts)
        if candidate.exists():
            return candidate
    raise ConfigError(f"{'/'.join(parts)} not found in {', '.join(str(d) for d in share_dirs())}")


def resolve_share_file(path: str | Path) -> Path:
    """An absolute or existing path as given; a relative one looked up in the share folders."""
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return share_path(*candidate.parts)
