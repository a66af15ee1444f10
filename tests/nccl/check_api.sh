#!/usr/bin/env bash
# check_api.sh SHIM CUDA_ROOT
#
# nccl.api: the shim wraps the whole NCCL API of the toolkit's nccl.h (every function the
# header declares, but the deprecated ncclResetDebugInit, which the header itself says is
# not part of the API), and every NCCL name it exports exists in the real libnccl.so.2 both
# as ncclX and as the pncclX it forwards to. Prints every offending name; exits 1 on any.
set -euo pipefail
export LC_ALL=C
shim=${1:?usage: check_api.sh SHIM CUDA_ROOT}
cuda=${2:?usage: check_api.sh SHIM CUDA_ROOT}
header="$cuda/include/nccl.h"
real="$cuda/lib64/libnccl.so.2"

declared=$(grep -oE '^[a-zA-Z_][a-zA-Z_ ]*[ *]+nccl[A-Za-z0-9_]+\(' "$header" |
  grep -oE 'nccl[A-Za-z0-9_]+\($' | tr -d '(' | grep -v '^ncclResetDebugInit$' | sort -u)
# The device API's host functions (nccl_device/*.h, NCCL_EXTERN_C __host__) may be wrapped
# too: ncclDevCommCreate/Destroy are, as drains (nccl_wrap/nccl_dev.h); the others compute
# on the host and are classified in preload/entries/host_only.txt (shim.entry_points).
host_dev=""
if [ -d "$cuda/include/nccl_device" ]; then
  host_dev=$(grep -hoE 'NCCL_EXTERN_C +__host__ +[a-zA-Z_]+[ *]+nccl[A-Za-z0-9_]+\(' \
    "$cuda"/include/nccl_device/*.h | grep -oE 'nccl[A-Za-z0-9_]+\($' | tr -d '(' | sort -u || true)
fi
wrapped=$(nm -D --defined-only "$shim" | awk '{print $3}' | sed 's/@.*//' | grep '^nccl' | sort -u)
real_syms=$(nm -D --defined-only "$real" | awk '{print $3}' | sed 's/@.*//' | sort -u)

status=0
ndecl=$(echo "$declared" | wc -l)
if [ "$ndecl" -lt 30 ]; then
  echo "only $ndecl functions found in $header: the header parse is broken"
  exit 1
fi
for n in $(comm -23 <(echo "$declared") <(echo "$wrapped")); do
  echo "declared in nccl.h but not wrapped: $n"
  status=1
done
for n in $(comm -13 <(printf '%s\n%s\n' "$declared" "$host_dev" | grep . | sort -u) <(echo "$wrapped")); do
  echo "wrapped but declared in neither nccl.h nor nccl_device/: $n"
  status=1
done
for n in $wrapped; do
  for sym in "$n" "p$n"; do
    if ! grep -qx "$sym" <<<"$real_syms"; then
      echo "$sym is not defined by $real"
      status=1
    fi
  done
done
echo "$ndecl functions declared, $(echo "$wrapped" | wc -l) wrapped"
exit $status
