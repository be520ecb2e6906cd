"""ament_python package ``ladder_ros``; also installs with pip (``pip install -e .``)."""

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "ladder_ros"
HERE = Path(__file__).parent


def share_files(folder: str) -> list[tuple[str, list[str]]]:
    """Install every file under ``folder`` into share/ladder_ros/<folder>/, keeping subfolders."""
    entries: dict[str, list[str]] = {}
    for path in sorted(glob(f"{folder}/**/*", recursive=True)):
        if Path(path).is_file():
            entries.setdefault(str(Path("share") / PACKAGE / Path(path).parent), []).append(path)
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["tests", "tests.*"]),
    include_package_data=True,
    package_data={PACKAGE: ["data/**/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "plugin.xml"]),
        *share_files("launch"),
        *share_files("config"),
        *share_files("policies"),
        *share_files("calibration"),
    ],
    python_requires=">=3.10",
    install_requires=["numpy", "PyYAML"],
    zip_safe=False,
    maintainer="ladder_ros maintainers",
    maintainer_email="maintainers@ladder-ros.invalid",
    description="LADDER long-horizon orchestrator loop for ROS 2 robots and simulators",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "ladder-ros = ladder_ros.cli:main",
            "sim_bridge = ladder_ros.runtime.entry:sim_bridge",
            "camera = ladder_ros.runtime.entry:camera",
            "depth = ladder_ros.runtime.entry:depth",
            "policy = ladder_ros.runtime.entry:policy",
            "gripper_trigger = ladder_ros.runtime.entry:gripper_trigger",
            "vlm_verifier = ladder_ros.runtime.entry:vlm_verifier",
            "orchestrator = ladder_ros.runtime.entry:orchestrator",
            "episode_recorder = ladder_ros.runtime.entry:episode_recorder",
            "widowx_driver = ladder_ros.runtime.entry:widowx_driver",
            "franka_driver = ladder_ros.runtime.entry:franka_driver",
            "widowx_twin = ladder_ros.runtime.entry:widowx_twin",
            "rehearsal_server = ladder_ros.runtime.entry:rehearsal_server",
            "franka_twin = ladder_ros.runtime.entry:franka_twin",
        ],
    },
)
