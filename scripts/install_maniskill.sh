#!/usr/bin/env bash
# Install what the SimplerEnv (ManiSkill3) Bridge backend needs on Debian 12, without a system upgrade:
#
#   1. libvulkan1 (the Vulkan loader) from Debian's own archive, if it is missing;
#   2. a software Vulkan driver: Mesa 25 lavapipe from bookworm-backports, unpacked privately into
#      $LADDER_LVP_DIR (default /opt/lvp) with its ICD json. Debian 12's own Mesa 22.3.6 lavapipe
#      fails in SAPIEN 3 with "failed to find a rendering device" (docs/dependencies.md);
#   3. the Python dependencies from requirements/maniskill.txt, after torch==2.13.0 (CPU): installed
#      later, pytorch_kinematics would pull a multi-GB CUDA torch.
#
# Idempotent: each step is skipped when its result is already there. Safe to run in CI.
#
# Usage:  scripts/install_maniskill.sh [--python PATH] [--skip-python] [--skip-driver]
# Env:    LADDER_LVP_DIR   where lavapipe is unpacked (default /opt/lvp)
#         PYTHON           the interpreter whose environment gets the packages (default: the repo's
#                          .venv/bin/python when it exists, else python3)
#
# Afterwards the backend finds the driver by itself (ladder_ros.sim.maniskill_env); a shell that runs
# ManiSkill directly needs:
#   export VK_ICD_FILENAMES=$LADDER_LVP_DIR/lvp_icd.json
#   export LD_LIBRARY_PATH=$LADDER_LVP_DIR/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
#   export MS_ASSET_DIR=/path/to/maniskill_assets     # the folder that contains data/
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LVP_DIR="${LADDER_LVP_DIR:-/opt/lvp}"
if [[ -x "$REPO/.venv/bin/python" ]]; then DEFAULT_PYTHON="$REPO/.venv/bin/python"; else DEFAULT_PYTHON=python3; fi
PYTHON="${PYTHON:-$DEFAULT_PYTHON}"
DO_PYTHON=1
DO_DRIVER=1

# Versions in bookworm-backports that were verified with SAPIEN 3.0.3
# (shared/assets/maniskill_bridge/README.md, "Prerequisites").
MESA_VERSION="25.0.7-2~bpo12+1"
LIBDRM_VERSION="2.4.123-1~bpo12+1"
LVP_API_VERSION="1.4.305"  # Vulkan API version Mesa 25.0.7 lavapipe reports
TORCH_VERSION="2.13.0"     # docs/dependencies.md: CPU torch, installed before mani-skill

while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) PYTHON="$2"; shift 2 ;;
    --skip-python) DO_PYTHON=0; shift ;;
    --skip-driver) DO_DRIVER=0; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "install_maniskill.sh: unknown argument '$1' (valid: --python PATH, --skip-python, --skip-driver)" >&2; exit 2 ;;
  esac
done

log() { echo "[install_maniskill] $*"; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

install_vulkan_loader() {
  if dpkg-query -W -f='${Status}' libvulkan1 2>/dev/null | grep -q "install ok installed"; then
    log "libvulkan1 already installed"
    return
  fi
  log "installing libvulkan1 (the Vulkan loader) from Debian 12"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libvulkan1
}

# The backports driver's other dependencies (LLVM 15, xcb, wayland, zstd, ...) are the ones Debian 12
# itself ships; install from the stable archive those that are missing. libdrm comes privately.
install_lavapipe_runtime_deps() {
  local deb="$1" missing=() pkg
  for pkg in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -e 's/([^)]*)//g' -e 's/|.*//' -e 's/[[:space:]]//g'); do
    case "$pkg" in libdrm2|libdrm-amdgpu1|libc6|"") continue ;; esac
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing lavapipe's runtime libraries from Debian 12: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

install_lavapipe() {
  local libdir="$LVP_DIR/root/usr/lib/x86_64-linux-gnu"
  local icd="$LVP_DIR/lvp_icd.json"
  local stamp="$LVP_DIR/.installed-$MESA_VERSION"
  if [[ -f "$stamp" && -f "$libdir/libvulkan_lvp.so" && -f "$icd" ]]; then
    log "lavapipe $MESA_VERSION already unpacked in $LVP_DIR"
    return
  fi
  log "unpacking Mesa $MESA_VERSION lavapipe from bookworm-backports into $LVP_DIR (no system package changes)"
  mkdir -p "$LVP_DIR/apt/lists/partial" "$LVP_DIR/apt/cache/archives/partial" "$LVP_DIR/debs"
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    > "$LVP_DIR/apt/bp.sources"
  # A private apt state: only bookworm-backports is listed, and nothing is installed through dpkg.
  local apt_opts=(
    -oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts="$LVP_DIR/apt"
    -oDir::State::Lists="$LVP_DIR/apt/lists" -oDir::Cache="$LVP_DIR/apt/cache"
    -oAPT::Sandbox::User=root -oDebug::NoLocking=true
  )
  apt-get "${apt_opts[@]}" update -qq
  (cd "$LVP_DIR/debs" && apt-get "${apt_opts[@]}" download \
      "mesa-vulkan-drivers=$MESA_VERSION" "libdrm2=$LIBDRM_VERSION" "libdrm-amdgpu1=$LIBDRM_VERSION")
  rm -rf "$LVP_DIR/root"
  for deb in "$LVP_DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$LVP_DIR/root"; done
  install_lavapipe_runtime_deps "$LVP_DIR"/debs/mesa-vulkan-drivers_*.deb
  printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s/libvulkan_lvp.so", "api_version": "%s"}}\n' \
    "$libdir" "$LVP_API_VERSION" > "$icd"
  # Every library lavapipe links must resolve, with the private libdrm first.
  local missing
  missing=$(LD_LIBRARY_PATH="$libdir" ldd "$libdir/libvulkan_lvp.so" | awk '/not found/ {print $1}' || true)
  if [[ -n "$missing" ]]; then
    echo "install_maniskill.sh: lavapipe needs libraries this system lacks: $missing" >&2
    echo "  install the Debian 12 packages that provide them (apt-file search <lib>) and rerun" >&2
    exit 1
  fi
  rm -rf "$LVP_DIR/apt/cache/archives"/*.deb "$LVP_DIR/debs"
  touch "$stamp"
  log "lavapipe ready: VK_ICD_FILENAMES=$icd"
}

install_python_deps() {
  log "Python: $PYTHON"
  # torch first, from the CPU wheel; never replace an installed torch or numpy (other parts of the
  # project are built against them).
  if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    log "torch $TORCH_VERSION already installed"
  else
    # This machine keeps the 2.13.0+cpu wheel on disk (pip's find-links); a local "+cpu" version sorts
    # above PyPI's plain 2.13.0, so the pin below takes the CPU build.
    "$PYTHON" -m pip install --quiet "torch==$TORCH_VERSION"
  fi
  local numpy_pin=()
  local numpy_version
  if numpy_version=$("$PYTHON" -c "import numpy; print(numpy.__version__)" 2>/dev/null); then
    numpy_pin=("numpy==$numpy_version")
  fi
  "$PYTHON" -m pip install --quiet -r "$REPO/requirements/maniskill.txt" "torch==$TORCH_VERSION" "${numpy_pin[@]}"
  "$REPO/scripts/pip_check.sh" "$PYTHON"
  "$PYTHON" -c "import mani_skill, sapien; print('[install_maniskill] mani-skill', mani_skill.__version__, 'sapien', sapien.__version__)"
}

if [[ $DO_DRIVER -eq 1 ]]; then
  install_vulkan_loader
  install_lavapipe
fi
if [[ $DO_PYTHON -eq 1 ]]; then
  install_python_deps
fi
log "done"
