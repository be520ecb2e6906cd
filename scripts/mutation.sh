#!/usr/bin/env bash
# Mutation testing of everything between a policy's output and a motor command and between a VLM reply and a
# verdict (slow: not in CI). Installs the pinned mutmut (requirements/mutation.txt) into .venv when it is
# missing, then mutates the modules listed in setup.cfg [mutmut] one module at a time, niced, and prints the
# kill rate per module. Each mutant is checked by the fast unit tests that call the function it changes:
# setup.cfg selects every fast unit test of these modules, mutmut runs them once with tracing to learn which
# test calls which function, then runs only those tests per mutant. Work happens in ./mutants (git-ignored);
# the results stay there, so --report and --survivors read the last run of each module.
#
# Usage: scripts/mutation.sh [MODULE ...]      every module, or the ones named (ladder_ros.core.safety)
#        scripts/mutation.sh --survivors MODULE ...   only the mutants of MODULE that survived last time or no test reached
#        scripts/mutation.sh --report          the kill rates of the last run, per module, and every survivor
#                                              not listed as equivalent in scripts/mutation_equivalents.txt
#        scripts/mutation.sh --readme          the same, written into docs/testing.md's mutation table
# One mutant's diff: .venv/bin/mutmut show NAME; the survivors of a module with their changed lines:
# .venv/bin/python scripts/mutation_report.py --survivors ladder_ros.core.safety
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
# mutmut forks a child per mutant from a process that has already run the tests: Mesa llvmpipe's render threads
# (MuJoCo's offscreen renderer) do not survive a fork, and a forked child that renders waits for them forever.
# Single-threaded llvmpipe has no such threads.
export LP_NUM_THREADS=0
# Interface packages without a wheel keep their typesupport libraries in .venv/lib (as in scripts/test.sh).
case ":${LD_LIBRARY_PATH:-}:" in *":$REPO/.venv/lib:"*) ;; *) export LD_LIBRARY_PATH="$REPO/.venv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac

mode=run
case "${1:-}" in
  --report) mode=report; shift ;;
  --readme) mode=readme; shift ;;
  --survivors) mode=survivors; shift ;;
esac
if [[ $# -gt 0 ]]; then
  MODULES=("$@")
else  # every module setup.cfg mutates, safety first
  mapfile -t MODULES < <("$PY" scripts/mutation_report.py --modules)
fi

run() {  # the tests import the ROS message wheels: keep them on loopback as scripts/test.sh does
  if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    unshare -n bash -c 'ip link set lo up && exec "$@"' bash "$@"
  else
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$@"
  fi
}

# mutmut traces the selected tests once to learn which test calls which function, and traces a test again only
# when its name is new: a test edited to call another function is then never run against that function's mutants
# (they read as survivors although the test fails against them). Every run therefore traces again; a run of every
# module starts from a fresh ./mutants (mutmut does not refresh the files there it does not mutate).
if [[ $mode == run || $mode == survivors ]]; then
  if [[ $mode == run && $# -eq 0 ]]; then rm -rf mutants; else rm -f mutants/mutmut-stats.json; fi
fi

case $mode in
  run)
    for module in "${MODULES[@]}"; do
      echo "[mutation] $module"
      run nice -n 10 "$MUTMUT" run "${module}.*" >/dev/null || true  # results are read below either way
    done ;;
  survivors)
    for module in "${MODULES[@]}"; do
      mapfile -t names < <("$PY" scripts/mutation_report.py --survivor-names "$module")
      echo "[mutation] $module: ${#names[@]} survivor(s) again"
      if [[ ${#names[@]} -gt 0 ]]; then run nice -n 10 "$MUTMUT" run "${names[@]}" >/dev/null || true; fi
    done ;;
esac

if [[ $mode == readme ]]; then
  "$PY" scripts/mutation_report.py --readme docs/testing.md
else
  "$PY" scripts/mutation_report.py
fi
