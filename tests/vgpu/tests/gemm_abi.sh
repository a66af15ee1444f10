#!/bin/sh
# gemm_abi.sh VGPU_LIB REAL_LIB VERSION_NODE [VGPU_LIB REAL_LIB VERSION_NODE ...]
# Every function a vgpu library exports must exist under the same name in the real library
# and be exported in the real library's version node, so that a program linked against the
# real library binds to the vgpu's when it is preloaded. Exits 1 naming each offender.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
while [ $# -ge 3 ]; do
    vgpu=$1 real=$2 node=$3
    shift 3
    nm -D --defined-only "$vgpu" | awk '$2 == "T" { print $3 }' | sort > "$tmp/vgpu"
    nm -D --defined-only "$real" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' | sort -u > "$tmp/real"
    n=$(wc -l < "$tmp/vgpu")
    if [ "$n" -eq 0 ]; then
        echo "$vgpu exports no functions"
        bad=1
        continue
    fi
    while read -r sym; do
        name=${sym%%@*}
        if [ "$sym" != "$name@@$node" ]; then
            echo "$name: exported as $sym, not in version node $node"
            bad=1
        fi
        if ! grep -qx "$name" "$tmp/real"; then
            echo "$name: not exported by $real"
            bad=1
        fi
    done < "$tmp/vgpu"
    echo "$n functions of $vgpu checked against $real"
done
exit "$bad"
