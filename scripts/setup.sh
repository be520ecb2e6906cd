#!/usr/bin/env bash
# Set up everything on a fresh Debian 12 machine (Python 3.10+): a virtual environment in .venv with
# CPU torch, the ROS 2 PyPI wheels, MuJoCo, the VLM clients, Ray, the ManiSkill3 simulator and its software
# Vulkan driver, then this package in editable mode. Idempotent; rerun to repair.
#
# Usage: scripts/setup.sh [--no-maniskill]
#   --no-maniskill   skip the SimplerEnv (ManiSkill3) backend and its Vulkan driver (its tests then skip)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
WITH_MANISKILL=1
for arg in "$@"; do
  case "$arg" in
    --no-maniskill) WITH_MANISKILL=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (valid: --no-maniskill)" >&2; exit 2 ;;
  esac
done

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
echo "[setup] core, ROS 2 wheels, VLM clients, Ray, test tools"
"$PY" -m pip install -q -r requirements/core.txt -r requirements/ros.txt -r requirements/vlm.txt \
  -r requirements/test.txt -r requirements/ray.txt
if [[ $WITH_MANISKILL -eq 1 ]]; then
  echo "[setup] ManiSkill3 and its software Vulkan driver"
  PYTHON="$REPO/$PY" scripts/install_maniskill.sh
fi
echo "[setup] ladder_ros (editable)"
"$PY" -m pip install -q --no-deps -e .
"$PY" -m pip check
echo "[setup] done: activate with '. .venv/bin/activate'; try 'ladder-ros --help'"
