#!/usr/bin/env bash
# install.tree: `cmake --install` into a temporary prefix, then the demo's SI step run from
# that prefix alone. Checks that
#   - the shim, dhelix, dhelix-pairs, dhelix_nccl.h, the docs, the vgpu and its launcher are
#     where cmake/Install.cmake says;
#   - no installed program or library has an RPATH/RUNPATH into the source or build tree,
#     no installed script names either, and the shim needs no CUDA library (it must find
#     the program's own through RTLD_NEXT);
#   - `dhelix` from the prefix runs;
#   - the demo's job run from the prefix (an empty environment, another directory) with
#     DHELIX_MODE=auto switches to Strand Interleaving and is bit-identical to the job
#     run from the prefix without the shim.
# Env: DH_SRC (source tree), DH_BUILD_DIR, WORK (scratch directory, in the build tree).
set -euo pipefail
. "$(dirname "$0")/common.sh"
src=$(cd "$DH_SRC" && pwd -P)
build=$(cd "$DH_BUILD_DIR" && pwd -P)
rm -rf "$WORK"
mkdir -p "$WORK/run"
P=$WORK/prefix

cmake --install "$build" --prefix "$P" >"$WORK/install.log" || fail "cmake --install failed: $(tail -n 5 "$WORK/install.log")"

for f in lib/libdhelix_shim.so bin/dhelix bin/dhelix-pairs bin/dhelix-vgpu-run include/dhelix_nccl.h \
         share/doc/dhelix/README.md share/doc/dhelix/docs/megatron.md share/doc/dhelix/docs/configuration.md \
         share/dhelix/vgpu/lib/libcudart.so.13 share/dhelix/vgpu/lib/libnccl.so.2 \
         share/dhelix/vgpu/lib/libvgpu_nvtx.so share/dhelix/vgpu/bin/workload \
         share/dhelix/vgpu/profiles/a40-div64.json; do
  [ -e "$P/$f" ] || fail "not installed: $P/$f"
done
# The vgpu's libraries carry real CUDA sonames: never in P/lib, where they would shadow a
# real installation (cmake/Install.cmake).
if ls "$P/lib" | grep -Eq '^lib(cudart|cuda|cublas|cublasLt|nccl)\.so'; then
  fail "a vgpu library is in $P/lib: $(ls "$P/lib")"
fi

nelf=0
while IFS= read -r f; do
  if head -c 4 "$f" | grep -q 'ELF'; then
    nelf=$((nelf + 1))
    rp=$(readelf -d "$f" | grep -E 'R(UN)?PATH' || true)
    case "$rp" in *"$src"* | *"$build"*) fail "$f has a path into the source or build tree: $rp" ;; esac
  elif grep -Iq . "$f" && grep -qF -e "$src" -e "$build" "$f"; then
    fail "$f names the source or build tree: $(grep -nF -e "$src" -e "$build" "$f" | head -n 2)"
  fi
done < <(find "$P" -type f)
[ "$nelf" -ge 10 ] || fail "only $nelf ELF files installed"
needed=$(readelf -d "$P/lib/libdhelix_shim.so" | grep NEEDED || true)
if grep -Eq 'lib(cudart|cuda|cublas|cublasLt|nccl)\.so' <<<"$needed"; then
  fail "the installed shim links a CUDA library: $needed"
fi
echo "installed: $(find "$P" -type f | wc -l) files, $nelf ELF, none with a path into $src or $build"

"$P/bin/dhelix" --version >"$WORK/version.txt" || fail "$P/bin/dhelix --version failed"
echo "$P/bin/dhelix --version: $(cat "$WORK/version.txt")"

# The job from the prefix only: an empty environment but what a shell has, run elsewhere.
job() {
  (cd "$WORK/run" && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$WORK/run" \
    VGPU_DEVICE="$P/share/dhelix/vgpu/profiles/a40-div64.json" VGPU_HAZARD=abort \
    VGPU_COMM_TIMEOUT=30 OMPI_MCA_btl=self,vader "$@" \
    "$P/bin/dhelix-vgpu-run" mpirun -n 4 "$P/share/dhelix/vgpu/bin/workload" "${WL_ARGS[@]}")
}
job >"$WORK/base.json" 2>"$WORK/base.err" || fail "the job without the shim failed: $(tail -n 5 "$WORK/base.err")"
job DHELIX_MODE=auto LD_PRELOAD="$P/lib/libdhelix_shim.so" >"$WORK/si.json" 2>"$WORK/si.err" ||
  fail "the job with the installed shim failed: $(tail -n 5 "$WORK/si.err")"
switched "$WORK/si.err"
grep -h "auto: switched" "$WORK/si.err" | sed 's/^dhelix\[[^]]*\] /  /'
same_losses "$WORK/base.json" "$WORK/si.json"
echo "PASS"
