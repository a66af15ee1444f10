#!/usr/bin/env bash
# tests/shim/alloc_retry.sh: every allocation entry point the shim wraps gives memory back
# before the program's allocation fails, and returns the library's own error when even
# that cannot help (DESIGN.md invariant 11, issue 27; scheduler/dispatch/giveback.c).
# For each API of tests/shim/alloc_retry.c, on the vgpu:
#   - big (1 TiB, more than the device): without the shim and under it (stress mode) the
#     same status and the same cudaGetLastError() after it; under it, DHELIX_STATS counts
#     the give-back that did not help (mem_giveback_failed 1);
#   - fit (40 MiB on a 64 MiB device after 48 MiB went out with cudaFreeAsync): under the
#     shim in stress mode, which holds that free, the call succeeds, none failed; where the
#     wrapper does not drain first (all but the two stream-ordered ones from a pool), the
#     first attempt failed deterministically and the shim gave memory back (mem_givebacks
#     >= 1). A wrapper without the retry fails both checks (cuMemCreate's retry taken out
#     by hand: "fit rc=2", mem_giveback_failed 0).
# Environment (tests/shim.cmake): DH_TEST_PROG, DH_TEST_PRELOAD (the shim first, then the
# vgpu libraries), DH_TEST_LIBDIR. Exit status 0 passed, 1 failed.
set -uo pipefail
prog=${DH_TEST_PROG:?} pre=${DH_TEST_PRELOAD:?} libdir=${DH_TEST_LIBDIR:?}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo '{"base": "a40", "mem_gib": 0.0625, "_what": "64 MiB"}' >"$dir/dev.json"
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(DHELIX_|LD_PRELOAD$|VGPU_)')
export LD_LIBRARY_PATH=$libdir VGPU_DEVICE=$dir/dev.json
apis=(cudaMalloc cudaMallocAsync cudaMallocPitch cudaMalloc3D cudaMallocManaged
      cudaMallocFromPoolAsync cuMemAlloc cuMemAllocPitch cuMemAllocManaged cuMemAllocAsync cuMemCreate)
bad=0
stat() { # FILE KEY
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["meta"].get(sys.argv[2], "-"))' "$1" "$2" 2>/dev/null || echo "-"
}
for api in "${apis[@]}"; do
  plain=$("$prog" "$api" big 2>"$dir/err")
  shim=$(env LD_PRELOAD="$pre" DHELIX_MODE=stress DHELIX_STATS=json \
    DHELIX_STATS_FILE="$dir/big.$api.json" "$prog" "$api" big 2>>"$dir/err")
  failed=$(stat "$dir/big.$api.json" mem_giveback_failed)
  case "$api" in cudaMallocFromPoolAsync | cuMemAllocAsync) drains=1 ;; *) drains=0 ;; esac
  if [ -z "$plain" ] || [ "$plain" != "$shim" ] || [ "$plain" = "$api big rc=0 last=0" ]; then
    echo "FAIL: $api big: without the shim '$plain', with it '$shim' (expected the same out-of-memory status)"
    sed 's/^/  | /' "$dir/err" | tail -5
    bad=1
  elif [ "$failed" != 1 ]; then
    echo "FAIL: $api big: mem_giveback_failed $failed (expected 1: the shim tried and the failure is the program's)"
    bad=1
  else
    echo "ok:   $api big: '$shim' with and without the shim; the give-back did not help and said so (mem_giveback_failed 1)"
  fi
  out=$(env LD_PRELOAD="$pre" DHELIX_MODE=stress DHELIX_STATS=json \
    DHELIX_STATS_FILE="$dir/fit.$api.json" "$prog" "$api" fit 2>"$dir/err")
  gb=$(stat "$dir/fit.$api.json" mem_givebacks)
  failed=$(stat "$dir/fit.$api.json" mem_giveback_failed)
  if [ "$out" != "$api fit rc=0" ] || [ "$failed" != 0 ] || { [ "$drains" = 0 ] && [ "$gb" = 0 ]; } ||
     [ "$gb" = - ]; then
    echo "FAIL: $api fit: '$out' (expected rc=0), mem_givebacks $gb (expected >= 1 unless it drains), mem_giveback_failed $failed (expected 0)"
    sed 's/^/  | /' "$dir/err" | tail -5
    bad=1
  else
    echo "ok:   $api fit: succeeded under the shim after $gb give-backs (the free it held went back)"
  fi
done
[ "$bad" = 0 ] && echo "alloc_retry: passed (${#apis[@]} entry points)" || echo "alloc_retry: FAILED"
exit "$bad"
