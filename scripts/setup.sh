#!/usr/bin/env bash
# Set up everything on a fresh Debian 12 machine (Python 3.10+): a virtual environment in .venv with
# CPU torch, the ROS 2 PyPI wheels, MuJoCo, the VLM clients, Ray, the camera, calibration and depth
# stack (OpenCV, pyrealsense2, MoGe-2), the operator panel (Qt), the ManiSkill3 simulator and its
# software Vulkan driver, `ros2 launch` (from ../shared/vendor/ros2_launch when it is there), tf2_msgs
# (from ../shared/vendor/ros2_interfaces when it is there), the graph's own messages (ladder_ros_interfaces), then this
# package in editable mode, registered in the venv's ament index. Idempotent; rerun to repair.
#
# Usage: scripts/setup.sh [--no-maniskill] [--no-lerobot]
#   --no-maniskill   skip the SimplerEnv (ManiSkill3) backend and its Vulkan driver (its tests then skip)
#   --no-lerobot     skip the Python 3.12 venv (.venv-lerobot) with the LeRobot dataset reader that the
#                    export's round-trip test loads datasets with (that test then skips, saying so)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
WITH_MANISKILL=1
WITH_LEROBOT=1
for arg in "$@"; do
  case "$arg" in
    --no-maniskill) WITH_MANISKILL=0 ;;
    --no-lerobot) WITH_LEROBOT=0 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (valid: --no-maniskill, --no-lerobot)" >&2; exit 2 ;;
  esac
done

# Disk: .venv takes about 4 GB and .venv-lerobot about 8 GB (PyPI's CUDA torch for Python 3.12), plus about 4 GB of
# downloads while pip installs; the tests write up to 2 GB more to the temporary folder. Said up front, so that a
# setup that will run out of space says why before it fails half-way ("No space left on device").
need_gb=$(( WITH_LEROBOT == 1 ? 16 : 6 ))
free_gb=$(( $(df -Pk . | awk 'NR == 2 {print $4}') / 1024 / 1024 ))
echo "[setup] ${free_gb} GB free for $REPO; this setup needs about ${need_gb} GB"
if [[ $free_gb -lt $need_gb ]]; then
  echo "[setup] warning: less free disk than the setup needs; free some, or skip the LeRobot reader (--no-lerobot)" >&2
fi

# Shared libraries the Python wheels load: libusb for pyrealsense2, libGL and GLib for OpenCV. Installed
# from Debian only when missing (CI runs as root on Debian 12).
system_libs=(libusb-1.0-0 libgl1 libglib2.0-0)
# FFmpeg's shared libraries for torchcodec, the LeRobot reader's default video backend in .venv-lerobot (without
# them it cannot load and only video_backend="pyav" decodes): Debian 12's FFmpeg 5.1, one of the FFmpeg 4-8 that
# torchcodec 0.10 ships builds for.
if [[ $WITH_LEROBOT -eq 1 ]]; then
  system_libs+=(libavutil57 libavcodec59 libavformat59 libavdevice59 libavfilter8 libswscale6 libswresample4)
fi
missing_libs=()
for pkg in "${system_libs[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing_libs+=("$pkg")
done
if [[ ${#missing_libs[@]} -gt 0 ]] && command -v apt-get >/dev/null; then
  echo "[setup] installing ${missing_libs[*]} from Debian"
  as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_libs[@]}"
fi

# The LeRobot reader's venvs (.venv-lerobot, .venv-pi0) share nothing with .venv: they are built in a background job
# beside .venv's installs (pip is mostly one core; the machine has at least two), their output kept in
# .venv-lerobot.log and printed when the job is waited for at the end; a failure there fails the setup.
lerobot_venvs() {
  if [[ $WITH_LEROBOT -eq 1 ]]; then
    # The LeRobot dataset reader needs Python >= 3.12 and pins that clash with .venv (see requirements/lerobot.txt).
    PY312="$(command -v python3.12 || true)"
    if [[ -z "$PY312" || ! -x "$PY312" ]] || ! "$PY312" --version >/dev/null 2>&1; then
      PY312="$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | tail -1 || true)"
    fi
    if [[ -z "$PY312" ]]; then
      echo "[setup] python3.12 not found: skipping .venv-lerobot (the LeRobot export round-trip test will skip)"
    elif [[ -f .venv-lerobot/.ready ]] && cmp -s requirements/lerobot.txt .venv-lerobot/.ready; then
      echo "[setup] .venv-lerobot is up to date"
    else
      echo "[setup] .venv-lerobot: the LeRobot dataset reader on $("$PY312" --version) (several GB, a few minutes)"
      rm -rf .venv-lerobot
      "$PY312" -m venv .venv-lerobot
      .venv-lerobot/bin/python -m pip install -q --upgrade pip
      .venv-lerobot/bin/python -m pip install -q -r requirements/lerobot.txt
      .venv-lerobot/bin/python -m pip check
      cp requirements/lerobot.txt .venv-lerobot/.ready
    fi
  fi
  if [[ -x .venv-lerobot/bin/python ]]; then
    if [[ -f .venv-pi0/.ready ]] && cmp -s requirements/pi0_processor.txt .venv-pi0/.ready; then
      echo "[setup] .venv-pi0 is up to date"
    else
      echo "[setup] .venv-pi0: transformers over .venv-lerobot's torch and torchvision (the real PI0 image processor)"
      rm -rf .venv-pi0
      "$(.venv-lerobot/bin/python -c 'import sys; print(sys._base_executable)')" -m venv .venv-pi0
      LEROBOT_SITE="$(.venv-lerobot/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
      PI0_SITE="$(.venv-pi0/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
      echo "$LEROBOT_SITE" > "$PI0_SITE/lerobot_torch.pth"
      .venv-pi0/bin/python -m pip install -q --no-deps -r requirements/pi0_processor.txt
      .venv-pi0/bin/python -c "import torchvision, transformers; from transformers import PI0ImageProcessor"
      cp requirements/pi0_processor.txt .venv-pi0/.ready
    fi
  else
    echo "[setup] no .venv-lerobot: skipping .venv-pi0 (the real PI0 image processor test will skip)"
  fi
}
lerobot_venvs > .venv-lerobot.log 2>&1 &
LEROBOT_JOB=$!
# A setup that stops early (a failed install above) stops the background job too, rather than leave it running.
stop_lerobot_job() { if kill -0 "$LEROBOT_JOB" 2>/dev/null; then pkill -P "$LEROBOT_JOB" || true; kill "$LEROBOT_JOB" || true; fi; }
trap stop_lerobot_job EXIT

PYTHON_BIN="${PYTHON_BIN:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv with $($PYTHON_BIN --version)"
  "$PYTHON_BIN" -m venv .venv
fi
PY=.venv/bin/python
"$PY" -m pip install -q --upgrade pip

# CPU torch first: later requirements ask for an unpinned torch and would otherwise pull a CUDA build
# of several GB (docs/dependencies.md).
echo "[setup] torch (CPU)"
"$PY" -m pip install -q torch==2.13.0
echo "[setup] core, ROS 2 wheels, VLM clients, Ray, cameras, operator panel (Qt), test tools"
"$PY" -m pip install -q -r requirements/core.txt -r requirements/ros.txt -r requirements/vlm.txt \
  -r requirements/camera.txt -r requirements/operator.txt -r requirements/policy.txt \
  -r requirements/test.txt -r requirements/ray.txt
echo "[setup] robot drivers: franky and the franky-sim Franka simulator"
"$PY" -m pip install -q -r requirements/robots.txt
if [[ $WITH_MANISKILL -eq 1 ]]; then
  echo "[setup] ManiSkill3 and its software Vulkan driver"
  PYTHON="$REPO/$PY" scripts/install_maniskill.sh
fi
# `ros2 launch` (launch, launch_ros, ros2cli) is not on PyPI: its unmodified sources sit beside the
# checkout in ../shared/vendor/ros2_launch on CI and development machines. A robot has its own ROS install.
VENDOR_LAUNCH="$REPO/../shared/vendor/ros2_launch"
if [[ -x "$VENDOR_LAUNCH/install.sh" ]]; then
  echo "[setup] ros2 launch (launch, launch_ros, ros2cli) from ../shared/vendor/ros2_launch"
  bash "$VENDOR_LAUNCH/install.sh" .venv
  # launch_ros requires ament_index_python by its ROS package name; on PyPI the module comes in the
  # wheel ros-ament-index-python. An empty distribution under the ROS name that requires that wheel
  # tells pip so (pip check stays clean).
  alias_dir=$(mktemp -d)
  index_version=$("$PY" -c "from importlib.metadata import version; print(version('ros-ament-index-python'))")
  cat > "$alias_dir/pyproject.toml" <<TOML
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "ament_index_python"
version = "$index_version"
description = "ament_index_python under its ROS package name; the module is in ros-ament-index-python"
dependencies = ["ros-ament-index-python==$index_version"]

[tool.setuptools]
py-modules = []
TOML
  "$PY" -m pip install -q --no-deps --no-build-isolation "$alias_dir"
  rm -rf "$alias_dir"
else
  echo "[setup] ros2 launch: ../shared/vendor/ros2_launch not found, skipped (a robot's ROS install has it;" \
       "the launch-file tests then skip)"
fi
# tf2_msgs (the type of /tf_static, where the camera node sends its calibrated pose) has no wheel either: its
# unmodified definitions sit in ../shared/vendor/ros2_interfaces, built here with the wheels' rosidl generators
# (after ros2_launch, which installs them). A robot's ROS install has tf2_msgs.
VENDOR_INTERFACES="$REPO/../shared/vendor/ros2_interfaces"
if [[ -x "$VENDOR_INTERFACES/install.sh" && -x "$VENDOR_LAUNCH/install.sh" ]]; then
  echo "[setup] ROS interface packages without a wheel (tf2_msgs) from ../shared/vendor/ros2_interfaces"
  bash "$VENDOR_INTERFACES/install.sh" .venv
else
  echo "[setup] tf2_msgs: ../shared/vendor/ros2_interfaces not found, skipped (the camera node then publishes no" \
       "/tf_static and says so; a robot's ROS install has tf2_msgs)"
fi
# The graph's own messages (interfaces/ladder_ros_interfaces): built here with the wheels' rosidl generators, the
# same route as tf2_msgs; a robot builds the package with colcon beside ladder_ros.
echo "[setup] ladder_ros_interfaces (the graph's messages)"
scripts/build_interfaces.sh .venv
# openpi-client pins numpy<2: it gets its own small environment, used only by the wire-format tests as an
# independent peer (tests/openpi_peer.py); the project itself speaks the protocol on numpy 2.
echo "[setup] openpi-client peer environment (.venv-openpi, numpy<2)"
if [[ ! -x .venv-openpi/bin/python ]]; then
  "$PYTHON_BIN" -m venv .venv-openpi
fi
.venv-openpi/bin/python -m pip install -q -r requirements/openpi_peer.txt
.venv-openpi/bin/python -m pip check
echo "[setup] ladder_ros (editable) and its entry in the venv's ament index"
"$PY" -m pip install -q --no-deps -e .
# What colcon build --symlink-install makes, for the editable install: the ament index marker,
# share/ladder_ros/ with a link to each shared file of the checkout (so edited launch files and config
# are what runs; ros2 launch does not follow linked folders) and each executable in lib/ladder_ros/,
# where launch_ros looks for a node (pip puts them in bin/). Rerun after adding a shared file.
"$PY" - "$REPO" <<'PY'
import shutil
import sys
from importlib.metadata import distribution
from pathlib import Path

repo, prefix = Path(sys.argv[1]), Path(sys.prefix)
index = prefix / "share" / "ament_index" / "resource_index" / "packages"
share, lib = prefix / "share" / "ladder_ros", prefix / "lib" / "ladder_ros"
index.mkdir(parents=True, exist_ok=True)
(index / "ladder_ros").touch()
for folder in (share, lib):
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
for item in ("package.xml", "launch", "config", "policies", "calibration"):  # setup.py's data_files
    source = repo / item
    for path in ([source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)):
        target = share / path.relative_to(repo)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(path)
for entry in distribution("ladder_ros").entry_points:
    if entry.group == "console_scripts":
        (lib / entry.name).symlink_to(Path("..", "..", "bin", entry.name))
PY
# Activating the venv puts it on the ament prefix path, as sourcing a ROS workspace does.
if ! grep -q "ladder_ros: ament prefix" .venv/bin/activate; then
  cat >> .venv/bin/activate <<'SH'
# ladder_ros: ament prefix (ros2 launch and the ament index find the packages installed here)
case ":${AMENT_PREFIX_PATH:-}:" in *":$VIRTUAL_ENV:"*) ;; *) export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;; esac
SH
fi
# ... and its lib folder on the loader's path, where the interface libraries built above live (ROS loads them
# by bare name, with the path the process started with).
if ! grep -q "ladder_ros: library path" .venv/bin/activate; then
  cat >> .venv/bin/activate <<'SH'
# ladder_ros: library path (typesupport libraries of interface packages built into the venv: ladder_ros_interfaces, tf2_msgs)
case ":${LD_LIBRARY_PATH:-}:" in *":$VIRTUAL_ENV/lib:"*) ;; *) export LD_LIBRARY_PATH="$VIRTUAL_ENV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
SH
fi
echo "[setup] MoGe-2 (--no-deps: see requirements/moge.txt)"
"$PY" -m pip install -q --no-deps -r requirements/moge.txt
scripts/pip_check.sh "$PY"
# torchvision for a local PI0 checkpoint's image processor: PyPI's wheel is a CUDA build, so it goes into .venv
# only next to a CUDA torch (a robot's GPU machine); with the CPU torch the tests run the real class in
# .venv-pi0, a small layer over .venv-lerobot's matched torch/torchvision (requirements/pi0_processor.txt).
if "$PY" -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
  echo "[setup] torchvision for the local PI0 processor (CUDA torch)"
  "$PY" -m pip install -q --no-deps -r requirements/policy_gpu.txt
fi
if [[ -n "${LEROBOT_JOB:-}" ]]; then
  lerobot_status=0
  wait "$LEROBOT_JOB" || lerobot_status=$?
  cat .venv-lerobot.log
  if [[ $lerobot_status -ne 0 ]]; then
    echo "[setup] the LeRobot reader's venvs failed (exit $lerobot_status): see the lines above" >&2
    exit "$lerobot_status"
  fi
fi
echo "[setup] done: activate with '. .venv/bin/activate'; try 'ladder-ros --help' or" \
     "'ros2 launch ladder_ros sim_orchestrator.launch.py'"
