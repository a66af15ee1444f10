#!/usr/bin/env bash
# shim.errors (issue 13): the program of failing calls (errprobe.c) prints, per case, the
# call's status, the stream synchronisation's, cudaGetLastError's and a valid GEMM's
# checksum. Its output must be byte-identical without the shim and with it in every mode
# that defers or records. Environment (tests/shim_coverage.cmake): DH_TEST_ERRPROBE,
# DH_TEST_PRELOAD (shim + vgpu), DH_TEST_VGPU_PRELOAD (vgpu alone), DH_TEST_LIBDIR.
set -uo pipefail
prog=${DH_TEST_ERRPROBE:?} pre=${DH_TEST_PRELOAD:?} vpre=${DH_TEST_VGPU_PRELOAD:?}
lib=${DH_TEST_LIBDIR:?}
# Plan mode: a valid plan of another program (from the plan parser's corpus). The shim
# loads it and captures and defers while it looks for the plan's template, which never
# comes: the error paths of plan mode's capture are what this run checks.
plan=$(cd "$(dirname "$0")/.." && pwd)/fuzz/corpus/plan/edge-long-name.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" VGPU_HAZARD=abort
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^DHELIX_')

run() { # name, preload, env...
  local name=$1 p=$2; shift 2
  if ! env LD_PRELOAD="$p" "$@" "$prog" --nccl >"$out/$name.out" 2>"$out/$name.err"; then
    echo "FAIL: $name: errprobe exited $? (stderr below)"; cat "$out/$name.err"; return 1
  fi
}

fail=0
run base "$vpre" || exit 1
grep -q '^end ' "$out/base.out" || { echo "FAIL: the run without the shim did not finish"; exit 1; }
runs=(passthrough:DHELIX_MODE=passthrough stress1:DHELIX_MODE=stress:DHELIX_SEED=1
      stress2:DHELIX_MODE=stress:DHELIX_SEED=2 stress3:DHELIX_MODE=stress:DHELIX_SEED=3
      strands:DHELIX_MODE=test-strands profile:DHELIX_MODE=profile:DHELIX_PROFILE=$out/prof.json
      "plan:DHELIX_PLAN=$plan")
for spec in "${runs[@]}"; do
  IFS=: read -r -a f <<<"$spec"
  name=${f[0]}
  run "$name" "$pre" DHELIX_STATS=json DHELIX_STATS_FILE="$out/$name.stats" "${f[@]:1}" || { fail=1; continue; }
  if cmp -s "$out/base.out" "$out/$name.out"; then
    echo "ok: $name: output identical to the run without the shim ($(wc -l <"$out/base.out") lines)"
  else
    echo "FAIL: $name: output differs from the run without the shim:"
    diff "$out/base.out" "$out/$name.out" | head -20
    fail=1
  fi
done
# Where the shim defers, calls the library rejects at the call must have been forwarded.
for name in stress1 strands plan; do
  rej=$(grep -o '"call_rejects": *[0-9]*' "$out/$name.stats" | grep -o '[0-9]*$' | head -1)
  if [ -z "$rej" ] || [ "$rej" -lt 5 ]; then
    echo "FAIL: $name: call_rejects is '${rej:-absent}', expected at least 5 (the shim did not validate)"
    fail=1
  else
    echo "ok: $name: $rej calls forwarded for the library to reject at the call"
  fi
done
echo "--- the run without the shim:"
cat "$out/base.out"
exit $fail
