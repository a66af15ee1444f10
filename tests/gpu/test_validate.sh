#!/usr/bin/env bash
# test_validate.sh BUILD_DIR: scripts/gpu-validate's own machinery, in --vgpu rehearsals
# (CTest gpukit.validate_rehearsal). What a session with a GPU relies on and cannot debug
# there: a step past its limit is stopped and reported as a timeout while the steps after
# it still run; a step the budget has no room for is reported, not run; the report says
# whether the run was complete and names every step in the order of value.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: test_validate.sh BUILD_DIR}
[ -f "$build/vgpu/lib/libcudart.so.13" ] || { echo "no vgpu in $build"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# The framework steps' CPU runs need torch; this test is about the script, not them.
export DH_MCORE_PYTHON=/nonexistent/python PYTHONPATH=/nonexistent

field() { # FILE EXPR: a Python expression over the report `r`
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
expect() { # WHAT GOT WANT
  if [ "$2" = "$3" ]; then echo "ok: $1 = $2"; else echo "FAIL: $1 = $2, expected $3"; fail=1; fi
}

# 1. The nccl step gets a 1 s limit: it is stopped, and mcore, torch and workload still run.
DH_GPU_LIMITS=nccl=1 "$here/scripts/gpu-validate" --vgpu --quick --build-dir "$build" --out "$tmp/a" \
  >"$tmp/a.log" 2>&1
expect "exit status with a step past its limit" $? 1
r=$tmp/a/gpu-validate.json
expect "steps, in order" "$(field "$r" '" ".join(s["name"] for s in r["steps"])')" \
  "build ctest nccl mcore torch workload"
expect "statuses" "$(field "$r" '" ".join(s["status"] for s in r["steps"])')" "pass pass timeout skip skip pass"
expect "complete" "$(field "$r" 'r["complete"]')" True
expect "ok" "$(field "$r" 'r["ok"]')" False
expect "failed steps" "$(field "$r" 'r["failed_steps"]')" "['nccl']"
expect "the timeout's summary" "$(field "$r" 'r["steps"][2]["summary"].startswith("stopped at its 1 s limit")')" True
expect "mcore says why it skipped" "$(field "$r" '"Megatron-Core needs CUDA" in r["steps"][3]["summary"]')" True
grep -q '| nccl | TIMEOUT |' "$tmp/a/gpu-validate.md" || { echo "FAIL: the markdown has no nccl TIMEOUT row"; fail=1; }
# Stopped at once, not when its runs would have ended (they take seconds each).
expect "the stopped step's time is under 5 s" "$(field "$r" 'r["steps"][2]["seconds"] < 5')" True

# 2. A budget with no room for the first step: reported as not run, and not a failure.
"$here/scripts/gpu-validate" --vgpu --quick --budget 3 --build-dir "$build" --out "$tmp/b" >"$tmp/b.log" 2>&1
expect "exit status with nothing run for the budget" $? 0
r=$tmp/b/gpu-validate.json
# (with a prebuilt shim in .whl/prebuilt/ the framework steps are tried too, and left out
# alike: every step recorded was left out by the budget, the build first)
expect "build's status" "$(field "$r" 'r["steps"][0]["name"] + " " + r["steps"][0]["status"]')" "build budget"
expect "every step left out by the budget" "$(field "$r" '{s["status"] for s in r["steps"]}')" "{'budget'}"
expect "the list of those left out" "$(field "$r" 'r["not_run_for_budget"] == [s["name"] for s in r["steps"]]')" True
grep -q 'Not run, for want of time in the budget: build' "$tmp/b/gpu-validate.md" ||
  { echo "FAIL: the markdown does not say what the budget left out"; fail=1; }

[ $fail = 0 ] || { echo "--- first run's output"; cat "$tmp/a.log"; }
exit $fail
