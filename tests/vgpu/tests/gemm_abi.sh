#!/bin/sh
# gemm_abi.sh [-r REQUIRED] VGPU_LIB REAL_LIB VERSION_NODE [VGPU_LIB REAL_LIB VERSION_NODE ...]
# Every function a vgpu library exports must exist under the same name in the real library
# and be exported in the real library's version node, so that a program linked against the
# real library binds to the vgpu's when it is preloaded. With -r, every "NODE NAME" line of
# REQUIRED (blank lines and # comments skipped) must also be exported by the vgpu library of
# that version node as NAME@@NODE, and by the real one the same way: the entry points the
# shim and the workloads rely on cannot silently disappear from the vgpu. Exits 1 naming
# each offender.
set -eu
required=
if [ "${1:-}" = "-r" ]; then
    required=$2
    shift 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
while [ $# -ge 3 ]; do
    vgpu=$1 real=$2 node=$3
    shift 3
    nm -D --defined-only "$vgpu" | awk '$2 == "T" { print $3 }' | sort > "$tmp/vgpu"
    nm -D --defined-only "$real" | awk '$2 == "T" { print $3 }' | sort -u > "$tmp/real_versioned"
    sed 's/@.*//' "$tmp/real_versioned" | sort -u > "$tmp/real"
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
    if [ -n "$required" ]; then
        m=0
        while read -r rnode rname; do
            case "$rnode" in ''|'#'*) continue ;; esac
            [ "$rnode" = "$node" ] || continue
            m=$((m + 1))
            if ! grep -qx "$rname@@$node" "$tmp/vgpu"; then
                echo "$rname: required, but $vgpu does not export it as $rname@@$node"
                bad=1
            fi
            if ! grep -qx "$rname@@$node" "$tmp/real_versioned"; then
                echo "$rname: required, but $real does not export it as $rname@@$node"
                bad=1
            fi
        done < "$required"
        echo "$m required functions of $node checked"
    fi
done
exit "$bad"
