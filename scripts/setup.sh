#!/usr/bin/env bash
# Set up everything on a fresh Debian 12 machine (Python 3.10+): a virtual environment in .venv with
# CPU torch, the ROS 2 PyPI wheels, MuJoCo, the VLM clients, the camera, calibration and depth stack
# (OpenCV, pyrealsense2, MoGe-2), the ManiSkill3 simulator and its software Vulkan driver, then this
# package in editable mode. Idempotent; rerun to repair.
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

# Shared libraries the Python wheels load: libusb for pyrealsense2, libGL and GLib for OpenCV. Installed
# from Debian only when missing (CI runs as root on Debian 12).
missing_libs=()
for pkg in libusb-1.0-0 libgl1 libglib2.0-0; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing_libs+=("$pkg")
done
if [[ ${#missing_libs[@]} -gt 0 ]] && command -v apt-get >/dev/null; then
  echo "[setup] installing ${missing_libs[*]} from Debian"
  as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_libs[@]}"
fi

PYTHON_BIN="${PYTHON_BIN:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv with $($PYTHON_BIN --version)"
  "$PYTHON_BIN" -m venv .venv
fi
PY=.venv/bin/python
"$PY" -m pip install -q --upgrade pip

# CPU torch first: later requirements ask for an unpinned torch and would otherwise pull a CUDA build
# of several GB (DESIGN.md §4).
echo "[setup] torch (CPU)"
"$PY" -m pip install -q torch==2.13.0
echo "[setup] core, ROS 2 wheels, VLM clients, cameras, operator panel (Qt), test tools"
"$PY" -m pip install -q -r requirements/core.txt -r requirements/ros.txt -r requirements/vlm.txt \
  -r requirements/camera.txt -r requirements/operator.txt -r requirements/test.txt
echo "[setup] MoGe-2 (--no-deps: see requirements/moge.txt)"
"$PY" -m pip install -q --no-deps -r requirements/moge.txt
if [[ $WITH_MANISKILL -eq 1 ]]; then
  echo "[setup] ManiSkill3 and its software Vulkan driver"
  PYTHON="$REPO/$PY" scripts/install_maniskill.sh
fi
echo "[setup] ladder_ros (editable)"
"$PY" -m pip install -q --no-deps -e .
# MoGe's packages declare what its demo, training and mesh export need; inference needs none of it
# (requirements/moge.txt). Those lines, and only those, are allowed in pip check's report.
if ! report="$("$PY" -m pip check 2>&1)"; then
  unexpected="$(grep -v -E '^dlr-(moge|utils3d) [0-9.]+ requires (gradio|torchvision|moderngl|dlr-pipeline), which is not installed\.$' <<<"$report" || true)"
  if [[ -n "$unexpected" ]]; then
    echo "$report" >&2
    exit 1
  fi
  echo "[setup] pip check: only MoGe's demo/training requirements are absent, on purpose"
fi
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
echo "[setup] done: activate with '. .venv/bin/activate'; try 'ladder-ros --help'"
