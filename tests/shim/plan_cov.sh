#!/usr/bin/env bash
# shim.plan_coverage (issue 28): the coverage program in plan mode, with pairs. Its two-rank
# variant (coverage --tp2, two processes under mpiexec on the vgpu) runs without the shim,
# in profile mode, through `dhelix plan`, and with the plan. It fails unless:
#   - the profile-mode run and the plan run write, on every rank, output bit-identical to
#     the run without the shim, and no run meets a vgpu hazard (VGPU_HAZARD=abort: exit 86);
#   - the plan pairs phases (a backward beside the next forward), and each of the plan runs
#     (DH_PLANCOV_PLAN_RUNS, 3), on every rank, follows iterations (plan_iterations > 1: the first is the probe), never loses
#     them (plan_desyncs 0), forms paired groups (paired_groups > 0) and drains for the
#     generated wrappers inside the iterations it follows (drains_mid_iteration,
#     UNCAPTURABLE: the gemv, dot, stream memory operations, 3D and symbol copies and the
#     pointer-array batched GEMM that every forward calls);
#   - stress mode (DH_PLANCOV_STRESS_SEEDS seeds, 2) is exact on both ranks too;
#   - with each test break of DH_PLANCOV_BREAKS (scheduler/ops/breaks.h) the plan run is
#     caught: it fails or its output differs. drain_generated: those entry points are
#     forwarded without draining, so the first of them, which ends the paired forward, runs
#     ahead of the kernels that wrote its input; pool_barrier: a block one strand freed is
#     taken by the other without a barrier, which only paired groups can do.
# Environment (tests/shim_coverage.cmake): DH_TEST_COVERAGE, DH_TEST_PRELOAD (shim + vgpu),
# DH_TEST_VGPU_PRELOAD (vgpu alone), DH_TEST_LIBDIR, DH_TEST_DHELIX, DH_TEST_MPIEXEC,
# DH_TEST_DEVICE (the vgpu device file), DH_TEST_WORK (where the files go; kept), and
# DH_COV_ITERS / DH_COV_MBS (4 and 4).
set -uo pipefail
prog=${DH_TEST_COVERAGE:?} pre=${DH_TEST_PRELOAD:?} vpre=${DH_TEST_VGPU_PRELOAD:?}
lib=${DH_TEST_LIBDIR:?} dhelix=${DH_TEST_DHELIX:?} mpiexec=${DH_TEST_MPIEXEC:?}
device=${DH_TEST_DEVICE:?} work=${DH_TEST_WORK:?}
iters=${DH_COV_ITERS:-4} mbs=${DH_COV_MBS:-4}
breaks=${DH_PLANCOV_BREAKS:-drain_generated pool_barrier}
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(DHELIX_|LD_PRELOAD$)')
rm -rf "$work"
mkdir -p "$work/prof" || exit 2

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok:   $*"; }
tail_of() { echo "      stderr ($work/$1.err), last lines:"; tail -n 15 "$work/$1.err" | sed 's/^/        | /'; }

# run NAME PRELOAD [K=V...]: the program on two ranks; NAME.bin.R per rank, NAME.rc.
run() {
  local name=$1 p=$2 xs=() kv
  shift 2
  for kv in LD_LIBRARY_PATH="$lib" VGPU_DEVICE="$device" VGPU_HAZARD=abort LD_PRELOAD="$p" "$@"; do
    xs+=(-x "$kv")
  done
  rm -f "$work/$name".*
  "$mpiexec" -n 2 "${xs[@]}" "$prog" --out "$work/$name.bin" --iters "$iters" --mbs "$mbs" \
    --tp2 "$work/$name.id" --timeout 120 >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
}
rc() { cat "$work/$1.rc"; }

# same NAME: 0 when both ranks' outputs equal the baseline's; says where they differ.
same() {
  local r d=0
  for r in 0 1; do
    if [ ! -s "$work/$1.bin.$r" ]; then
      echo "      rank $r wrote no output"; d=1
    elif ! cmp -s "$work/base.bin.$r" "$work/$1.bin.$r"; then
      echo "      rank $r: $(python3 - "$work/base.bin.$r" "$work/$1.bin.$r" <<'EOF'
import sys
a, b = (open(p, 'rb').read() for p in sys.argv[1:3])
def sections(buf):
    out, i = {}, buf.index(b'\n') + 1
    while i < len(buf) and not buf.startswith(b'checksum', i):
        j = buf.index(b'\n', i)
        name, n = buf[i:j].split()
        out[name.decode()] = buf[j + 1:j + 1 + int(n)]
        i = j + 2 + int(n)
    return out
sa, sb = sections(a), sections(b)
print('sections that differ from the baseline:',
      ', '.join(k for k in sa if sa.get(k) != sb.get(k)) or 'none (header or length)')
EOF
)"
      d=1
    fi
  done
  return $d
}

run base "$vpre"
if [ "$(rc base)" != 0 ] || [ ! -s "$work/base.bin.0" ] || [ ! -s "$work/base.bin.1" ]; then
  fail "the run without the shim: exit $(rc base)"; tail_of base; exit 1
fi
ok "without the shim: two ranks, $iters iterations of $mbs micro-batches"

run prof "$pre" DHELIX_MODE=profile "DHELIX_PROFILE=$work/prof/p.%r.json"
if [ "$(rc prof)" != 0 ]; then
  fail "profile mode: exit $(rc prof)"; tail_of prof; exit 1
fi
same prof && ok "profile mode: exact on both ranks" || fail "profile mode: output differs"
"$dhelix" plan "$work/prof/p.0.json" "$work/prof/p.1.json" -o "$work/plan.json" \
  >"$work/plan.out" 2>"$work/plan.err" || { fail "dhelix plan: exit $?"; cat "$work/plan.err"; exit 1; }
pairs=$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
print(sum(1 for s in p["sections"] for b in s["blocks"] for ph in b["phases"]
          if ph["kind"] == "B" and ph["paired_with"] >= 0))' "$work/plan.json")
sed 's/^/      | /' "$work/plan.out"
[ "${pairs:-0}" -gt 0 ] && ok "dhelix plan: $pairs paired phases" ||
  fail "dhelix plan pairs nothing ($work/plan.out)"

# Several plan runs: a race between the dispatcher and the program shows in some runs only
# (before the drain waited for its flush's barrier, 3 of 16 runs differed).
for ((n = 1; n <= ${DH_PLANCOV_PLAN_RUNS:-3}; n++)); do
  name=planrun$n
  run $name "$pre" "DHELIX_PLAN=$work/plan.json" DHELIX_STATS=json \
    "DHELIX_STATS_FILE=$work/$name.stats.%r.json"
  case $(rc $name) in
    0) ok "plan run $n: exit 0, no vgpu hazard" ;;
    86) fail "plan run $n: the vgpu found a data race (exit 86)"; tail_of $name ;;
    *) fail "plan run $n: exit $(rc $name)"; tail_of $name ;;
  esac
  same $name && ok "plan run $n: bit-identical to the run without the shim on both ranks" ||
    fail "plan run $n: output differs from the run without the shim"
  for r in 0 1; do
    verdict=$(python3 - "$work/$name.stats.$r.json" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print('BAD no DHELIX_STATS report (%s)' % e); sys.exit()
m = j.get('meta', {})
gen = sum(r.get('count', 0) for r in j.get('pairing', {}).get('rows', [])
          if r.get('kind') == 'drains_mid_iteration' and r.get('cause') == 'UNCAPTURABLE')
got = dict(paired_groups=m.get('paired_groups', 0), plan_iterations=m.get('plan_iterations', 0),
           plan_desyncs=m.get('plan_desyncs', -1), generated_drains_mid_iteration=gen)
bad = (got['paired_groups'] <= 0 or got['plan_iterations'] <= 1 or got['plan_desyncs'] != 0
       or gen <= 0)
print(('BAD ' if bad else 'OK ') + ', '.join('%s %s' % kv for kv in got.items()))
EOF
)
    case $verdict in
      OK*) ok "plan run $n, rank $r: ${verdict#OK }" ;;
      *) fail "plan run $n, rank $r: ${verdict#BAD } (want paired_groups > 0," \
              "plan_iterations > 1, plan_desyncs 0, generated_drains_mid_iteration > 0)" ;;
    esac
  done
done

# Stress mode on the same two-rank program: deferral and seeded reordering change nothing.
for ((seed = 1; seed <= ${DH_PLANCOV_STRESS_SEEDS:-2}; seed++)); do
  run "stress$seed" "$pre" DHELIX_MODE=stress "DHELIX_SEED=$seed"
  if [ "$(rc "stress$seed")" != 0 ]; then
    fail "stress mode, seed $seed: exit $(rc "stress$seed")"; tail_of "stress$seed"
  else
    same "stress$seed" && ok "stress mode, seed $seed: exact on both ranks" ||
      fail "stress mode, seed $seed: output differs"
  fi
done

for b in $breaks; do
  run "break_$b" "$pre" "DHELIX_PLAN=$work/plan.json" "DHELIX_TEST_BREAK=$b"
  if [ "$(rc "break_$b")" != 0 ]; then
    ok "break $b: the plan run is caught: exit $(rc "break_$b"): $(grep -m1 -E '^(vgpu|coverage):' "$work/break_$b.err" | cut -c1-160)"
  elif ! same "break_$b" >/dev/null; then
    ok "break $b: the plan run is caught: its output differs"
  else
    fail "break $b: the plan run is exact and exits 0: the test cannot see this break"
    tail_of "break_$b"
  fi
done

[ $fails = 0 ] && echo "PASS (files in $work)" || echo "FAILED: $fails check(s) (files in $work)"
[ $fails = 0 ]
