#!/usr/bin/env bash
# install.wheel: the Python package as a user gets it. Builds the wheel from the source tree
# with pip (pyproject.toml: scikit-build-core driving the project's CMake), installs it into
# a fresh virtual environment, and runs the demo's job on the vgpu through the package's
# console command:
#     dhelix run --auto --cache DIR -- vgpu-run mpirun -n 4 workload ...
# Checks that the command's LD_PRELOAD is the installed package's shim, that the job switches
# to Strand Interleaving and is bit-identical to the job without the shim, that a second run
# finds its plan in the cache, that the C subcommands answer through the Python entry point,
# and that `dhelix run` passes the command's exit status and signals through.
# Skipped (77) where pip cannot reach the build dependencies (scikit-build-core, from PyPI
# or the index pip is configured with). Everything it keeps is under the build tree: pip's
# cache (PIP_CACHE_DIR), the wheel's CMake build directory (reused, so a second run only
# relinks), the wheel and the environment.
# Env: DH_SRC, DH_BUILD_DIR, WORK (scratch, in the build tree).
set -euo pipefail
. "$(dirname "$0")/common.sh"
src=$(cd "$DH_SRC" && pwd -P)
build=$(cd "$DH_BUILD_DIR" && pwd -P)
rm -rf "$WORK/dist" "$WORK/venv" "$WORK/cache" "$WORK/run"
mkdir -p "$WORK/run"
export PIP_CACHE_DIR=$build/wheel/pip-cache PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# A broken network fails fast rather than after pip's default retries.
export PIP_DEFAULT_TIMEOUT=${PIP_DEFAULT_TIMEOUT:-20} PIP_RETRIES=${PIP_RETRIES:-1}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

t0=$SECONDS
if ! python3 -m pip wheel "$src" --no-deps -w "$WORK/dist" \
    --config-settings=build-dir="$build/wheel/cmake" >"$WORK/wheel.log" 2>&1; then
  if grep -Eqi "No matching distribution found for scikit-build-core|Could not find a version that satisfies the requirement scikit-build-core|Failed to establish a new connection|Temporary failure in name resolution|Network is unreachable|ProxyError|Max retries exceeded|No module named pip" "$WORK/wheel.log"; then
    echo "SKIP: pip cannot reach the wheel's build dependency scikit-build-core (offline, or no"
    echo "      index reachable); pip said: $(grep -Ei 'error|could not|failed' "$WORK/wheel.log" | head -n 2 | tr '\n' ' ')"
    exit 77
  fi
  fail "pip wheel failed (log $WORK/wheel.log): $(tail -n 15 "$WORK/wheel.log")"
fi
whl=$(ls "$WORK"/dist/dhelix-*.whl)
echo "built $(basename "$whl") in $((SECONDS - t0)) s"

python3 -m venv "$WORK/venv" || fail "python3 -m venv failed (scripts/setup installs python3-venv)"
"$WORK/venv/bin/python" -m pip install -q --no-index --no-deps "$whl" >"$WORK/install.log" 2>&1 ||
  fail "pip install of the wheel failed: $(tail -n 5 "$WORK/install.log")"
dh=$WORK/venv/bin/dhelix
[ -x "$dh" ] || fail "the wheel installed no console command $dh"

# The package's files, not the build tree's.
site=$("$WORK/venv/bin/python" -c 'import dhelix, os; print(os.path.dirname(dhelix.__file__))')
case "$site" in "$WORK/venv/"*) ;; *) fail "import dhelix found $site, not the environment's package" ;; esac
for f in lib/libdhelix_shim.so bin/dhelix bin/dhelix-pairs include/dhelix_nccl.h; do
  [ -e "$site/$f" ] || fail "the wheel holds no $f"
done
"$dh" run --auto --cache "$WORK/cache" --print-env >"$WORK/env.txt"
grep -qx "LD_PRELOAD=$site/lib/libdhelix_shim.so" "$WORK/env.txt" || fail "dhelix run sets $(grep LD_PRELOAD "$WORK/env.txt"), not $site/lib/libdhelix_shim.so first"
grep -qx "DHELIX_MODE=auto" "$WORK/env.txt" || fail "--auto did not set DHELIX_MODE=auto: $(cat "$WORK/env.txt")"
grep -qx "DHELIX_PLAN_CACHE=$WORK/cache" "$WORK/env.txt" || fail "--cache did not set DHELIX_PLAN_CACHE: $(cat "$WORK/env.txt")"

# The C CLI through the entry point.
"$dh" --version | grep -q "^dhelix " || fail "dhelix --version (the C CLI through the entry point) said: $("$dh" --version 2>&1)"
"$dh" config --text | grep -q "DHELIX_MODE" || fail "dhelix config did not list DHELIX_MODE"

# Exit status and signals pass through (exec: the command replaces the launcher).
set +e
"$dh" run -- sh -c 'exit 3'
rc=$?
sig=$(exec 2>/dev/null; "$dh" run -- sh -c 'kill -TERM $$'; echo $?) # no "Terminated" line
"$dh" run --plan "$WORK/no-such-plan.json" -- true 2>"$WORK/noplan.err"
bad=$?
set -e
[ "$rc" = 3 ] || fail "dhelix run -- sh -c 'exit 3' returned $rc"
[ "$sig" = 143 ] || fail "a command killed by SIGTERM returned $sig through dhelix run (want 143)"
[ "$bad" = 2 ] && grep -q "no such file" "$WORK/noplan.err" || fail "a missing plan file: status $bad, said: $(cat "$WORK/noplan.err")"

job() {
  (cd "$WORK/run" && env -u LD_PRELOAD -u DHELIX_MODE -u DHELIX_PLAN -u DHELIX_PLAN_CACHE -u VGPU_TRACE \
    VGPU_DEVICE="$src/tests/si/a40-div64.json" VGPU_HAZARD=abort VGPU_COMM_TIMEOUT=30 "$@" \
    "$src/scripts/vgpu-run" mpirun -n 4 "$build/tests/workloads/workload" "${WL_ARGS[@]}")
}
job >"$WORK/base.json" 2>"$WORK/base.err" || fail "the job without the shim failed: $(tail -n 5 "$WORK/base.err")"
job "$dh" run --auto --cache "$WORK/cache" -- >"$WORK/si.json" 2>"$WORK/si.err" ||
  fail "dhelix run --auto failed: $(tail -n 5 "$WORK/si.err")"
switched "$WORK/si.err"
grep -h "auto: switched" "$WORK/si.err" | sed 's/^dhelix\[[^]]*\] /  /'
same_losses "$WORK/base.json" "$WORK/si.json"
ls "$WORK"/cache/dhelix-plan-*.json >/dev/null 2>&1 || fail "no plan in the cache $WORK/cache: $(ls "$WORK/cache")"

job "$dh" run --auto --cache "$WORK/cache" -- >"$WORK/si2.json" 2>"$WORK/si2.err" ||
  fail "the second dhelix run --auto failed: $(tail -n 5 "$WORK/si2.err")"
grep -q "with the cached plan" "$WORK/si2.err" || fail "the second run did not use the cached plan: $(grep -h auto: "$WORK/si2.err")"
same_losses "$WORK/base.json" "$WORK/si2.json"
echo "PASS"
