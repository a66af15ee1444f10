#!/usr/bin/env bash
# nvtx.trace: what the shim tells a profiler through NVTX, read from the vgpu's Perfetto trace
# (VGPU_TRACE; scripts/vgpu-run loads the vgpu's NVTX injection, tests/vgpu/src/nvtx/inject.c).
# The demo's job under DHELIX_MODE=auto, on every rank:
#   - a stream lane named "...: dhelix strand a" and one named "...: dhelix strand b", each
#     with work on it;
#   - one "dhelix pair G (a N || b M)" range on the "nvtx: dhelix dispatcher" lane per
#     paired group the shim counted (DHELIX_STATS paired_groups; within 10%: a group that a
#     drain splits is one range per part or one for both, one count per part);
#   - auto mode's phases: "dhelix auto: profiling", then the mark "dhelix auto: switch to
#     strand interleaving" and the range "dhelix auto: strand interleaving" after it;
# and the same job without the shim: none of these names (they are the shim's).
# Env: DH_SRC, DH_BUILD_DIR, WORK (scratch, in the build tree).
set -euo pipefail
. "$DH_SRC/tests/install/common.sh"
rm -rf "$WORK"
mkdir -p "$WORK"
job() {
  (cd "$WORK" && env -u LD_PRELOAD -u DHELIX_MODE -u DHELIX_PLAN -u NVTX_INJECTION64_PATH \
    VGPU_DEVICE="$DH_SRC/tests/si/a40-div64.json" VGPU_HAZARD=abort VGPU_COMM_TIMEOUT=30 "$@" \
    "$DH_SRC/scripts/vgpu-run" mpirun -n 4 "$DH_BUILD_DIR/tests/workloads/workload" "${WL_ARGS[@]}")
}
job VGPU_TRACE="$WORK/base.%r.json" >"$WORK/base.json" 2>"$WORK/base.err" ||
  fail "the job without the shim failed: $(tail -n 5 "$WORK/base.err")"
job VGPU_TRACE="$WORK/si.%r.json" DHELIX_MODE=auto LD_PRELOAD="$DH_BUILD_DIR/lib/libdhelix_shim.so" \
  DHELIX_STATS=json DHELIX_STATS_FILE="$WORK/stats.%p.json" >"$WORK/si.json" 2>"$WORK/si.err" ||
  fail "the job with the shim failed: $(tail -n 5 "$WORK/si.err")"
switched "$WORK/si.err"
same_losses "$WORK/base.json" "$WORK/si.json"

python3 - "$WORK" <<'PY'
import glob, json, os, re, sys
work = sys.argv[1]
bad = []
paired = {}
for f in glob.glob(os.path.join(work, "stats.*.json")):
    m = json.load(open(f)).get("meta", {})
    if "rank" in m and str(m["rank"]) not in ("", "-"):
        paired[int(m["rank"])] = int(m.get("paired_groups", 0))

def load(path):
    return json.load(open(path))["traceEvents"]

for r in range(4):
    ev = load(os.path.join(work, "si.%d.json" % r))
    lanes = {e["tid"]: e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    busy = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") != "nvtx":
            busy[e["tid"]] = busy.get(e["tid"], 0) + 1
    for strand in ("a", "b"):
        named = [t for t, n in lanes.items() if n.endswith(": dhelix strand " + strand)]
        if not named:
            bad.append("rank %d: no stream lane named 'dhelix strand %s' (lanes: %s)" % (r, strand, sorted(lanes.values())))
        elif not any(busy.get(t, 0) for t in named):
            bad.append("rank %d: the 'dhelix strand %s' lanes ran nothing" % (r, strand))
    disp = [t for t, n in lanes.items() if n == "nvtx: dhelix dispatcher"]
    if len(disp) != 1:
        bad.append("rank %d: %d lanes named 'nvtx: dhelix dispatcher'" % (r, len(disp)))
        continue
    nv = [e for e in ev if e.get("cat") == "nvtx"]
    if any(e["tid"] != disp[0] for e in nv):
        bad.append("rank %d: NVTX events off the dispatcher's lane" % r)
    pairs = [e for e in nv if e["ph"] == "X" and re.fullmatch(r"dhelix pair \d+ \(a \d+ \|\| b \d+\)", e["name"])]
    want = paired.get(r, -1)
    if want <= 0 or abs(len(pairs) - want) > max(2, want // 10):
        bad.append("rank %d: %d pair ranges, the shim counted %d paired groups" % (r, len(pairs), want))
    if any(e["args"].get("domain") != "dhelix" for e in nv):
        bad.append("rank %d: an NVTX event outside the domain 'dhelix'" % r)
    ph = {e["name"]: e for e in nv}
    for name in ("dhelix auto: profiling", "dhelix auto: strand interleaving",
                 "dhelix auto: switch to strand interleaving"):
        if name not in ph:
            bad.append("rank %d: no '%s'" % (r, name))
    if not bad and not (ph["dhelix auto: profiling"]["ts"] <= ph["dhelix auto: switch to strand interleaving"]["ts"]
                        <= ph["dhelix auto: strand interleaving"]["ts"] <= min(e["ts"] for e in pairs)):
        bad.append("rank %d: the auto phases are out of order, or a pair comes before the switch" % r)
    if r == 0:
        print("rank 0: lanes %s; %d pair ranges (paired groups %d)" % (
            ", ".join(n for n in sorted(lanes.values()) if "dhelix" in n), len(pairs), want))
for r in range(4):
    text = open(os.path.join(work, "base.%d.json" % r)).read()
    if "dhelix" in text:
        bad.append("rank %d: the trace without the shim names dhelix" % r)
if bad:
    print("FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("PASS")
PY
