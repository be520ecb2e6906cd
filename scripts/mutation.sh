#!/usr/bin/env bash
# Mutation testing of the rules (slow: not in CI). Installs the pinned mutmut (requirements/mutation.txt)
# into .venv when it is missing, then mutates ladder_ros/core/, ladder_ros/vlm/parsing.py and
# ladder_ros/ros_conversions.py (setup.cfg [mutmut]) one module at a time, each mutant checked by the
# fast unit tests listed there, and prints the kill rate per module. Work happens in ./mutants (git-ignored);
# results are kept there, so a second run only checks what changed.
#
# Usage: scripts/mutation.sh [MODULE ...]     e.g. scripts/mutation.sh ladder_ros.core.triggers
#        scripts/mutation.sh --report          only print the kill rates of the last run
# Survivors: .venv/bin/mutmut results; one mutant's diff: .venv/bin/mutmut show NAME
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY=.venv/bin/python
MUTMUT=.venv/bin/mutmut
pinned="$(grep -E '^mutmut==' requirements/mutation.txt)"
if [[ "$("$PY" -m pip show mutmut 2>/dev/null | sed -n 's/^Version: //p')" != "${pinned#mutmut==}" ]]; then
  echo "[mutation] installing $pinned into .venv"
  "$PY" -m pip install -q -r requirements/mutation.txt
fi

MODULES=(ladder_ros.core.errors ladder_ros.core.events ladder_ros.core.goals ladder_ros.core.metrics
         ladder_ros.core.orchestrator ladder_ros.core.presets ladder_ros.core.queue ladder_ros.core.suite
         ladder_ros.core.task ladder_ros.core.triggers ladder_ros.core.verification
         ladder_ros.vlm.parsing ladder_ros.ros_conversions)
report_only=0
if [[ "${1:-}" == "--report" ]]; then report_only=1; shift; fi
if [[ $# -gt 0 ]]; then MODULES=("$@"); fi

run() {  # the tests import the ROS message wheels: keep them on loopback as scripts/test.sh does
  if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    unshare -n bash -c 'ip link set lo up && exec "$@"' bash "$@"
  else
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$@"
  fi
}

if [[ $report_only -eq 0 ]]; then
  for module in "${MODULES[@]}"; do
    echo "[mutation] $module"
    run nice -n 10 "$MUTMUT" run "${module}.*" >/dev/null || true  # results are read below either way
  done
fi

"$MUTMUT" results --all true | "$PY" scripts/mutation_report.py
