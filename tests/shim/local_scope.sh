#!/usr/bin/env bash
# shim.local_scope: CUDA libraries loaded outside the global scope (a library dlopened with
# RTLD_LOCAL brings them in, as Python does with PyTorch). The shim, preloaded alone (the
# vgpu is found through LD_LIBRARY_PATH, not preloaded), must find their definitions and
# give the same output as the run without it, in passthrough and in stress mode.
# Environment (tests/shim_coverage.cmake): DH_TEST_PROG, DH_TEST_LIB (liblocal_user.so),
# DH_TEST_SHIM, DH_TEST_SAN (a sanitizer runtime to preload first, or empty), DH_TEST_LIBDIR.
set -uo pipefail
prog=${DH_TEST_PROG:?} lib=${DH_TEST_LIB:?} shim=${DH_TEST_SHIM:?} san=${DH_TEST_SAN:-}
export LD_LIBRARY_PATH="${DH_TEST_LIBDIR:?}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" VGPU_HAZARD=abort
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^DHELIX_')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pre() { echo "${san:+$san:}$*"; }

env ${san:+LD_PRELOAD=$san} "$prog" "$lib" >"$out/base.out" 2>"$out/base.err" ||
  { echo "FAIL: the run without the shim failed:"; cat "$out/base.out" "$out/base.err"; exit 1; }
grep -q '^end 0$' "$out/base.out" || { echo "FAIL: no end line without the shim"; exit 1; }
fail=0
for spec in passthrough:DHELIX_MODE=passthrough stress:DHELIX_MODE=stress:DHELIX_SEED=1 \
            stress2:DHELIX_MODE=stress:DHELIX_SEED=2; do
  IFS=: read -r -a f <<<"$spec"
  name=${f[0]}
  env LD_PRELOAD="$(pre "$shim")" DHELIX_STATS=json DHELIX_STATS_FILE="$out/$name.stats" \
    "${f[@]:1}" "$prog" "$lib" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  if [ $rc != 0 ] || ! cmp -s "$out/base.out" "$out/$name.out"; then
    echo "FAIL: $name (exit $rc): output differs from the run without the shim"
    diff "$out/base.out" "$out/$name.out" | head -20; head -20 "$out/$name.err"; fail=1; continue
  fi
  if grep -q "no definition after" "$out/$name.err"; then
    echo "FAIL: $name: the shim found no definition:"; grep "no definition" "$out/$name.err"; fail=1; continue
  fi
  # The shim saw the calls (they were not bypassed).
  for api in cublasSgemm_v2 cudaMemsetAsync ncclGetVersion; do
    n=$(python3 -c 'import json,sys
rows=json.load(open(sys.argv[1]))["rows"]
print(sum(r["calls"] for r in rows if r["api"]==sys.argv[2]))' "$out/$name.stats" "$api" 2>/dev/null)
    if [ "${n:-0}" -lt 1 ]; then echo "FAIL: $name: the shim saw no $api call"; fail=1; fi
  done
  echo "ok: $name: output identical to the run without the shim; cublasSgemm_v2, cudaMemsetAsync, ncclGetVersion seen"
done
exit $fail
