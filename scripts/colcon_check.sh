#!/usr/bin/env bash
# The lab's build is the tested build. In a fresh colcon workspace (a temporary folder, this checkout copied into
# src/ladder_ros as `git clone` would put it there), run the colcon commands of the bring-up guide's robot build (the
# block of docs/robot_bringup.md between <!-- robot-build:begin --> and <!-- robot-build:end -->, taken from the guide
# itself), source the install space, and run one simulated episode through `ros2 launch ladder_ros sim_orchestrator.launch.py` from it (the
# episode client of `ladder-ros parity --launch`, itself the install's executable; the episode must be identical to
# the in-process reference loop). While the episode runs, every node the launch started is checked: its executable
# is the install's (install/ladder_ros/lib/ladder_ros/), in its environment `ladder_ros`, `ladder_ros_interfaces`
# and the package's share folder resolve to the install space (not to .venv's editable install of this checkout),
# and every ladder_ros_interfaces library mapped into it was built by colcon in the workspace.
#
# .venv (scripts/setup.sh) stands in for the robot's ROS install: its ROS 2 wheels, `ros2 launch`, ament_cmake and
# the rosidl generators, activated as `source /opt/ros/<distro>/setup.bash` would be; colcon
# (colcon-common-extensions, pinned below) is installed into it from PyPI when missing. ROS traffic stays on this
# machine: ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, the install's loopback-only Fast DDS profile, and a ROS domain
# id claimed for this run alone (any exported ROS_DOMAIN_ID is dropped; ladder_ros.ros_env claims a free one).
# Every step has a time limit; any failure exits non-zero and keeps the workspace for a look.
#
# Usage: scripts/colcon_check.sh [--keep]    run the check (3-6 minutes on 2 cores, most of it the build)
#        scripts/colcon_check.sh --install   only install colcon into .venv (needs the package index; CI runs this
#                                            before the check, which then runs without a network)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"
PY="$VENV/bin/python"
KEEP=0
INSTALL_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    --install) INSTALL_ONLY=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "colcon_check.sh: unknown argument '$arg' (valid: --keep, --install)" >&2; exit 2 ;;
  esac
done
say() { echo "[colcon-check] $*"; }
fail() { echo "[colcon-check] FAILED: $*" >&2; exit 1; }
[[ -x "$PY" ]] || fail "no $VENV: run scripts/setup.sh first"

# colcon-common-extensions 0.3.0 and what it resolved to on Python 3.11 (2026-12); colcon-core asks for setuptools<80,
# so pip puts setuptools 79 into .venv beside it (pip check stays clean).
COLCON=(colcon-common-extensions==0.3.0 colcon-core==0.21.3 colcon-ros==0.5.0 colcon-recursive-crawl==0.2.3
  colcon-cmake==0.2.30 colcon-python-setup-py==0.2.9 colcon-library-path==0.2.1 colcon-bash==0.5.0 colcon-zsh==0.5.0
  colcon-powershell==0.5.0 colcon-defaults==0.2.9 colcon-metadata==0.3.1 colcon-package-selection==0.2.10
  colcon-package-information==0.4.1 colcon-parallel-executor==0.4.0 colcon-output==0.2.15
  colcon-notification==0.3.3 colcon-test-result==0.3.8 colcon-argcomplete==0.3.3 colcon-cd==0.1.1
  colcon-devtools==0.3.0 colcon-pkg-config==0.1.0)
if ! "$PY" - "${COLCON[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

def installed(pin: str) -> bool:
    name, wanted = pin.split("==")
    try:
        return version(name) == wanted
    except PackageNotFoundError:
        return False

sys.exit(0 if all(installed(pin) for pin in sys.argv[1:]) else 1)
PY
then
  say "installing colcon (colcon-common-extensions 0.3.0) into $VENV"
  "$PY" -m pip install -q "${COLCON[@]}"
  "$REPO/scripts/pip_check.sh" "$PY"
fi
if [[ $INSTALL_ONLY -eq 1 ]]; then
  say "colcon is installed in $VENV"
  exit 0
fi

# The generator wheels' CMake files name the Python and NumPy include folders of the machine that built the wheels:
# pointed at .venv's, as scripts/build_interfaces.sh does before it builds (a no-op once done).
PYINC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
NPINC=$("$PY" -c 'import numpy; print(numpy.get_include())')
{ grep -l /opt/python/cp3 "$VENV"/share/*/cmake/*.cmake 2>/dev/null || true; } | xargs -r sed -i -E \
  -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+t?/include/python3\.[0-9]+t?#$PYINC#g" \
  -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+t?/lib/python3\.[0-9]+t?/site-packages/numpy/_core/include#$NPINC#g"

# The bring-up guide's robot build: its colcon commands, run as written.
GUIDE=docs/robot_bringup.md
block="$(sed -n '/<!-- robot-build:begin -->/,/<!-- robot-build:end -->/p' "$REPO/$GUIDE")"
mapfile -t colcon_commands < <(grep -E '^colcon ' <<<"$block" || true)
[[ ${#colcon_commands[@]} -gt 0 ]] || fail "$GUIDE has no colcon command between the robot-build markers"
grep -qx 'source install/setup.bash' <<<"$block" || fail "$GUIDE's robot build does not source install/setup.bash"
grep -qE '^git clone .* src/ladder_ros$' <<<"$block" || fail "$GUIDE's robot build does not clone into src/ladder_ros"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/ladder_colcon_check.XXXXXX")"
WS="$TMP/ws"
finish() {
  local status=$?
  if [[ $status -eq 0 && $KEEP -eq 0 ]]; then
    rm -rf "$TMP"
  else
    say "workspace kept: $WS"
  fi
}
trap finish EXIT

# A fresh workspace with the checkout where `git clone` puts it: the files git tracks or would track (uncommitted
# edits included; ignored build outputs, .venv and runs/ left out). safe.directory: CI runs as root in a checkout
# that may belong to another user. Without git (an unpacked archive), the folder less what .gitignore names.
mkdir -p "$WS/src/ladder_ros"
if git -c safe.directory="$REPO" -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$REPO" && git -c safe.directory="$REPO" ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' file; do if [[ -e "$file" || -L "$file" ]]; then printf '%s\0' "$file"; fi; done \
    | tar -c --null -T - -f -) | tar -x -C "$WS/src/ladder_ros" -f -
else
  tar -c -C "$REPO" --exclude='./.venv*' --exclude=./build --exclude=./install --exclude=./log --exclude=./runs \
    --exclude=./out --exclude=./mutants --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache -f - . \
    | tar -x -C "$WS/src/ladder_ros" -f -
fi
cd "$WS"

# The stand-in ROS install, from a clean slate: nothing of the calling shell's ROS, Python or colcon setup leaks in.
unset PYTHONPATH AMENT_PREFIX_PATH CMAKE_PREFIX_PATH COLCON_PREFIX_PATH LD_LIBRARY_PATH COLCON_DEFAULTS_FILE \
  ROS_DOMAIN_ID ROS_DISTRO VIRTUAL_ENV PYTHONHOME
export COLCON_HOME="$TMP/colcon_home"   # no user defaults or mixins (~/.colcon) change the build
export ROS_LOG_DIR="$TMP/ros_log"
set +u  # activation and colcon's setup scripts read variables that may be unset
# shellcheck disable=SC1091
source "$VENV/bin/activate"
set -u
# What sourcing /opt/ros/<distro>/setup.bash sets: the ament prefix and the library path. The ROS wheels also start
# every Python process twice: a hook re-executes it with their library folders added to LD_LIBRARY_PATH in an
# arbitrary order (a set), unless _ROS_WHEELS_BOOTSTRAP_COMPLETE is set. Sourcing a workspace puts its libraries
# first, and a ROS install keeps that order; so the wheels' folders go on the path here, once, after the venv's lib,
# and the re-execution is switched off.
export AMENT_PREFIX_PATH="$VENV"
LD_LIBRARY_PATH="$VENV/lib"
for libs in "$VENV"/lib/python3.*/site-packages/ros_*.libs; do
  if [[ -d "$libs" ]]; then LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$libs"; fi
done
export LD_LIBRARY_PATH _ROS_WHEELS_BOOTSTRAP_COMPLETE=1

start=$SECONDS
for command in "${colcon_commands[@]}"; do
  say "$command"
  timeout --kill-after=30 1500 bash -c "$command" || fail "'$command' failed (log: $WS/log/latest_build)"
done
say "built in $((SECONDS - start)) s: $(cd "$WS/install" && ls -d -- */ | tr -d / | tr '\n' ' ')"
for package in ladder_ros ladder_ros_interfaces; do
  [[ -d "$WS/install/$package" ]] || fail "the robot build of $GUIDE did not install $package"
done

set +u
# shellcheck disable=SC1091
source install/setup.bash
set -u
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export FASTDDS_DEFAULT_PROFILES_FILE="$WS/install/ladder_ros/share/ladder_ros/config/fastdds_localhost.xml"
[[ -f "$FASTDDS_DEFAULT_PROFILES_FILE" ]] || fail "the install has no $FASTDDS_DEFAULT_PROFILES_FILE"

# One episode, short (one subgoal), through ros2 launch; the launched nodes are examined while they run.
start=$SECONDS
"$PY" - "$WS" "$TMP/episode" 420 <<'PY' || fail "the episode from the install space (see above)"
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ws, out, limit_s = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
install = ws / "install"
executables = install / "ladder_ros" / "lib" / "ladder_ros"
command = [str(executables / "ladder-ros"), "parity", "widowx", "--launch", "sim_orchestrator.launch.py",
           "--tasks", "kitchen_single_1", "--variants", "proprio_verifier", "--seeds", "0",
           "--episode-timeout", "180", "--out", str(out)]
STARTED = re.compile(r"\[INFO\] \[(\w+)-\d+\]: process started with pid \[(\d+)\]")
PROBE = """
import sys
sys.path[0] = sys.argv[1]  # where the node's script is, as for the node itself
import ladder_ros, ladder_ros_interfaces.msg
from ament_index_python.packages import get_package_share_directory
print(ladder_ros.__file__)
print(ladder_ros_interfaces.msg.__file__)
print(get_package_share_directory("ladder_ros"))
"""


def under(path: str, folder: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


nodes: dict[int, dict] = {}


def examine(name: str, pid: int) -> None:
    node = nodes.setdefault(pid, {"name": name, "libraries": set()})
    try:
        if "argv" not in node:
            argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
            env = dict(entry.decode(errors="replace").split("=", 1)
                       for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in entry)
            node.update(env=env, cwd=os.readlink(f"/proc/{pid}/cwd"), argv=argv)
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and "ladder_ros_interfaces" in fields[5]:
                node["libraries"].add(fields[5])
    except (OSError, ValueError):
        pass  # the process has ended


driver = subprocess.Popen(command, stdin=subprocess.DEVNULL)
deadline = time.monotonic() + limit_s
log = out / "logs" / "launch.log"
while driver.poll() is None:
    if time.monotonic() > deadline:
        print(f"[colcon-check] the episode took longer than {limit_s:.0f} s: stopping it", file=sys.stderr)
        driver.send_signal(signal.SIGINT)
        try:
            driver.wait(timeout=60)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()
        sys.exit(1)
    try:
        text = log.read_text(errors="replace")
    except OSError:
        text = ""
    for name, pid in STARTED.findall(text):
        examine(name, int(pid))
    time.sleep(0.5)
if driver.returncode != 0:
    print(f"[colcon-check] ladder-ros parity exited with {driver.returncode} (logs: {out / 'logs'})", file=sys.stderr)
    sys.exit(1)

problems = []
examined = [node for node in nodes.values() if "argv" in node]
if not examined:
    problems.append(f"no node of the launch could be examined ({log})")
for node in examined:
    name, argv = node["name"], node["argv"]
    script = next((a for a in argv[1:] if Path(a).name == name), None)
    if script is None or not under(script, executables):
        problems.append(f"{name} ran {' '.join(argv[:2])}, not the install's {executables / name}")
        continue
    probe = subprocess.run([argv[0], "-c", PROBE, str(Path(script).parent)], env=node["env"], cwd=node["cwd"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        problems.append(f"{name}'s environment cannot import its packages: {probe.stderr.strip()[-500:]}")
        continue
    module, messages, share = probe.stdout.split()
    for what, path, folder in (("ladder_ros", module, install / "ladder_ros"),
                               ("ladder_ros_interfaces", messages, install / "ladder_ros_interfaces"),
                               ("the share folder of ladder_ros", share, install / "ladder_ros")):
        if not under(path, folder):
            problems.append(f"{name} takes {what} from {path}, not from {folder}")
    node["module"] = module
    for library in node["libraries"]:
        if not under(library, install / "ladder_ros_interfaces"):
            problems.append(f"{name} loaded {library}, not the workspace's build")
libraries = set().union(*(node["libraries"] for node in examined)) if examined else set()
if examined and not libraries:
    problems.append("no node had loaded a ladder_ros_interfaces library while it was examined")
if problems:
    print("[colcon-check] " + "\n[colcon-check] ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"[colcon-check] nodes run from {executables}: {', '.join(sorted(n['name'] for n in examined))}")
print(f"[colcon-check] ladder_ros imported from {Path(examined[0]['module']).parent}")
print(f"[colcon-check] {len(libraries)} ladder_ros_interfaces libraries loaded, all from "
      f"{install / 'ladder_ros_interfaces'}")
PY
say "episode from the install space in $((SECONDS - start)) s: passed"
