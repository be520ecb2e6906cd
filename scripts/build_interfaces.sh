#!/usr/bin/env bash
# Build the graph's own interface package (interfaces/ladder_ros_interfaces: ament_cmake, .msg files) with the rosidl
# generators of the ROS 2 wheels and install it into a virtual environment, the way colcon installs it into a ROS
# workspace: Python module, typesupport libraries in VENV/lib, definitions in VENV/share/ladder_ros_interfaces/msg
# and the package in VENV's ament index. Idempotent: skipped while the installed build matches the sources (their
# hash is kept in VENV/share/ladder_ros_interfaces/source.sha256). A robot builds the package with colcon instead.
#
# Usage: scripts/build_interfaces.sh [VENV]     (default .venv; needs CMake, a C/C++ compiler, Ninja or Make)
# Processes that use the messages need VENV/lib on LD_LIBRARY_PATH when they start: the venv's activation script,
# the ROS wheels' start-up hook and ladder_ros.ros_env put it there.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(cd "${1:-$REPO/.venv}" && pwd)"
PKG=ladder_ros_interfaces
SRC="$REPO/interfaces/$PKG"
PY="$VENV/bin/python"
hash_sources() { (cd "$SRC" && find . -type f \( -name '*.msg' -o -name '*.srv' -o -name CMakeLists.txt -o -name package.xml \) \
  -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1); }
STAMP="$VENV/share/$PKG/source.sha256"
WANT="$(hash_sources)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] \
   && LD_LIBRARY_PATH="$VENV/lib:${LD_LIBRARY_PATH:-}" "$PY" -c "import $PKG.msg" 2>/dev/null; then
  echo "[interfaces] $PKG is up to date in $VENV"
  exit 0
fi
"$PY" -m pip install -q -r "$REPO/requirements/interfaces.txt"
# The generator wheels' CMake files name the Python and NumPy include folders of the machine that built the wheels
# (/opt/python/cp3XX-...): point them at this venv's, or the Python typesupport fails to compile.
PYINC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
NPINC=$("$PY" -c 'import numpy; print(numpy.get_include())')
{ grep -l /opt/python/cp3 "$VENV"/share/*/cmake/*.cmake 2>/dev/null || true; } | xargs -r sed -i -E \
  -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+t?/include/python3\.[0-9]+t?#$PYINC#g" \
  -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+t?/lib/python3\.[0-9]+t?/site-packages/numpy/_core/include#$NPINC#g"
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
build=$(mktemp -d "${TMPDIR:-/tmp}/${PKG}_build.XXXXXX")
trap 'rm -rf "$build"' EXIT
echo "[interfaces] building $PKG into $VENV"
PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" \
  cmake -S "$SRC" -B "$build" "${GENERATOR[@]}" -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$PY" \
    -DBUILD_TESTING=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
PATH="$VENV/bin:$PATH" cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 \
  || { tail -50 "$build/build.log" >&2; exit 1; }
cmake --install "$build" >/dev/null
echo "$WANT" > "$STAMP"
LD_LIBRARY_PATH="$VENV/lib:${LD_LIBRARY_PATH:-}" "$PY" -c "import $PKG.msg" && echo "[interfaces] $PKG installed in $VENV"
