#!/usr/bin/env bash
# check_abi.sh VGPU_LIBDIR CUDA_ROOT
#
# The vgpu stands in for the real libraries, so it may only define symbols the real ones
# define (an extra name would let a program link against something that does not exist
# on a GPU machine), and where the real library versions its symbols (cudart, cuBLAS,
# cuBLASLt) the vgpu must use the same version node, or programs built against the real
# library would not bind to it. vgpu_* names (the vgpu's own API) are exempt.
# Prints every offending name and exits 1 on any mismatch.
set -euo pipefail
export LC_ALL=C
libdir=${1:?usage: check_abi.sh VGPU_LIBDIR CUDA_ROOT}
cuda=${2:?usage: check_abi.sh VGPU_LIBDIR CUDA_ROOT}

real_of() {
  case $1 in
    libcuda.so.1) echo "$cuda/lib64/stubs/libcuda.so" ;;
    *) echo "$cuda/lib64/$1" ;;
  esac
}

is_versioned() {
  case $1 in libcudart.so.13|libcublas.so.13|libcublasLt.so.13) return 0 ;; *) return 1 ;; esac
}

# Defined dynamic symbols, without version suffixes and vgpu_* names.
defined() {
  nm -D --defined-only "$1" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | { grep -v '^vgpu_' || true; } |
    sort -u
}

# "name version" for each defined dynamic symbol (objdump -T: ... size version name).
versions() {
  objdump -T "$1" | awk '/ DF | DO / && $0 !~ /\*UND\*/ && NF >= 7 {
      v = $(NF-1); gsub(/[()]/, "", v); print $NF, v }' | sort -u
}

status=0
for lib in libcudart.so.13 libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  vg="$libdir/$lib"
  real=$(real_of "$lib")
  ok=1
  for f in "$vg" "$real"; do
    if [ ! -e "$f" ]; then echo "$lib: $f is missing"; status=1; continue 2; fi
  done
  extra=$(comm -23 <(defined "$vg") <(defined "$real"))
  if [ -n "$extra" ]; then
    echo "$lib: defined by the vgpu but not by $real:"
    echo "$extra" | sed 's/^/  /'
    ok=0
  fi
  if is_versioned "$lib"; then
    bad=$(join <(versions "$vg") <(versions "$real") |
          awk '$2 != $3 {print "  " $1 ": vgpu " $2 ", real " $3}')
    if [ -n "$bad" ]; then
      echo "$lib: version nodes differ:"
      echo "$bad"
      ok=0
    fi
  fi
  if [ $ok -eq 1 ]; then
    echo "ok: $lib ($(defined "$vg" | wc -l) symbols)"
  else
    status=1
  fi
done
exit $status
