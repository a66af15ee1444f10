#!/usr/bin/env bash
# tests/si/e2e.sh SCENARIO: one end-to-end Strand Interleaving scenario on the vgpu, the way
# a user runs the product: the Megatron-shaped workload without the shim (the baseline),
# in profile mode, `dhelix plan` on the profiles, then with the plan. What it judges:
#   - exactness: every iteration's loss bit-identical ("loss_hex") to the baseline's;
#   - no data race: every run has VGPU_HAZARD=abort (status 86 at the first hazard);
#   - the plan run interleaved: in DHELIX_STATS, "plan" has paired_groups > 0 and
#     iterations > 0 on every rank;
#   - time: "config X: baseline T0 ms, SI T1 ms, speedup S" (virtual time, mean of the
#     steady iterations); configurations whose communication is exposed require S > 1;
#     the plan's predicted speedup within 3% of S (SI_TIME_MODEL_TOL, the time model).
# Scenarios (2 ranks unless noted):
#   share_mem  tp_sp's model: the plan run reuses captured frees in its own strand and
#       across strands (DHELIX_STATS pool_reuse_*), exact, and holds less device memory
#       than with DHELIX_SHARE_MEM=0, its extra peak device memory within 10% of the plan's
#       extra_mem_bytes; with the test break pool_barrier (the other strand
#       takes a block with no barrier after its free) the vgpu must find the race (status
#       86); stress mode with three seeds reuses and stays exact
#   mem_bound  tp_sp's model under DHELIX_MAX_EXTRA_MEM just above the shim's cuBLAS
#       workspace (strand 1's, of the framework's size): the ranks vote no on the pairs
#       that would pass it (mem_bound_vetoes > 0, the same on every rank), fewer paired groups than without it, extra peak memory
#       within the bound, exact, no hazard
#   tp_sp pp_1f1b pp_tp (4 ranks) cp dp_ogr moe_ep       baseline -> profile -> plan -> SI,
#       and the plan's extra device memory within 10% of the run's (as in share_mem)
#   pp_vpp pp4_vpp pp4_vpp_nooverlap (4 ranks), pp4_tp_vpp pp4_tp_vpp_nooverlap (8 ranks):
#   the interleaved 1F1B (--vpp 2), and pp_tp_l4 pp4_l8 pp4_tp_l8 the same models without
#   it. In CTest: pp_vpp and pp4_tp_vpp (overlap_p2p_comm): the planner moves each
#   backward's gradient posts after the next forward's collectives (scheduler/plan/moves.h),
#   every rank pairs, exact, faster than the interleaved baseline, every section moves,
#   and plan runs with a dispatcher that falls behind at random (2) and stress mode (3
#   seeds) stay exact (scenario_ppmoves); cp_pp_vpp (8 ranks) the same with context
#   parallelism (TP2 x CP2 x PP2: the ring exchange, a group of a send and a receive,
#   matched per peer by the planner's proof); pp4_tp_vpp_nooverlap:
#   exact (its batched exchange is followed by a device synchronisation, so a backward and
#   the next forward never meet: nothing pairs). The others are for measuring
#   moe_ep_dyn (2 ranks, DP=2 x EP=2, 8 iterations) MoE whose iterations differ in op count
#       (experts or regrouping buckets that get no token): planned from the variant that
#       occurs most often; exact; an iteration that differs on any rank runs unpaired on
#       every rank (a desync on one, vetoed on the others), the others pair
#   tp_sp_big (tp_sp, hidden 256, sequence 128; with SI_DEVICE=a40 as well): not in CTest,
#   for diagnosis
#   desync_extra desync_missing desync_shape            WL_INJECT (tests/workloads/README.md)
#       in iteration 2 of the SI run: exact, one desync warning per rank naming the op,
#       "plan" stats: desyncs >= 1, resyncs >= 1, iterations matched after the desync
#   bad_plan_json bad_plan_version bad_plan_model bad_plan_layout bad_plan_world
#   bad_plan_truncated
#       a broken or foreign plan: exit 0, losses equal to the baseline, exactly one line
#       per rank that names the plan file and the problem, nothing interleaved
#   inject_stress
#       WL_INJECT changes no loss (no shim, and DHELIX_MODE=stress) and does inject
#   rotated_plan
#       moe_ep with a plan made from its profile cut at an MoE routing synchronisation
#       (si_json.py cut-profile), so that the planner pairs the last backward with the
#       gradient reduction and the optimizer step: the runtime must find that out (the
#       reduction reads the gradient buffer the backward wrote) and keep the losses exact
#       without a data race; "plan" stats: refuted_phases >= 1, paired_groups > 0
#   jitter (4 ranks: TP=2 x DP=2, distributed optimizer, overlapped gradient reduction)
#       three plan runs whose dispatchers sleep at random (DHELIX_TEST_DISPATCH_JITTER), so
#       each rank falls behind at different points: what is issued, and in what order, must
#       depend on the program alone, or two ranks call one communicator's collectives in
#       different orders (the vgpu reports a mismatch) and the losses differ; the third
#       with DHELIX_MAX_UNISSUED_FREE_BYTES=0, so the program also waits for the dispatcher
#       at every free (lag_waits > 0 on every rank), which must change nothing either
#   fullmem_1m fullmem_64m (4 ranks, TP=2 x DP=2)
#       a device with the baseline's peak plus 1 MiB / 64 MiB: passthrough, stress (3
#       seeds), profile, plan and auto exact, no workspace before pairing, the plan run
#       pairs; fullmem_1m also gives memory back under stress at peak + 64 KiB
#       (tests/si/e2e_fullmem.sh says what each judges)
#   agree_silent
#       a rank stops answering the ranks' agreement: every rank falls back (bounded), exact
#   auto_tp_sp auto_tp_sp_init (set-up before the first iteration, as PyTorch's) auto_cp
#   auto_moe_ep auto_moe_ep_dyn (12 iterations) auto_tpdp (4 ranks) auto_pp_vpp (4 ranks, 12
#   iterations: its profile needs more before the switch)
#   auto_pp4_tp_vpp_nooverlap (8 ranks) auto_cache
#       DHELIX_MODE=auto beside the three-step flow, 8 iterations (scenario_auto): exact,
#       one switch iteration on every rank, the speedup after it within 1% of the three-step
#       run's on the same iterations, kept after rank 0's measurement; auto_cache: a second
#       start reuses DHELIX_PLAN_CACHE and switches at iteration 0; auto_pp_1f1b auto_pp_tp
#       auto_dp_ogr: the plan predicts no gain: not used, passthrough (auto_passthrough)
#   auto_reject auto_measured auto_silent auto_busy (scenario_auto_off): a plan that does
#       not help is not used, and every rank then runs passthrough: auto_reject, tp_sp
#       under DHELIX_AUTO_MIN_GAIN=1000 (rejected by its prediction); auto_measured, tp_sp
#       on a40-div64-interfere.json, where SI loses although the planner predicts a gain
#       (rank 0's measurement takes every rank back at one iteration); auto_silent, a peer
#       that never sends its profile (DHELIX_TEST_AGREE_SILENT, DHELIX_AUTO_TIMEOUT_MS=200:
#       no plan, bounded); auto_busy, the exchange's port held by a listener that never
#       answers (rank 0's "never" takes rank 1 along). Each: exact, one line per rank,
#       mode passthrough with nothing deferred after it, fewer kernels deferred than
#       launched, and the iterations after it exactly as long as the baseline's (virtual
#       time: the shim adds nothing there)
#   diverge_tpdp (4 ranks, TP=2 x DP=2) diverge_pp (2 ranks, PP=2 interleaved)
#       one rank at a time diverges (WL_INJECT KIND@ITER:RANK: query, sync, extra, missing)
#       while its peers follow the plan: exact, no collective mismatch, no vote timed out,
#       paired groups after the last divergent iteration
#   sweep_CFG_MODE_PART (CFG tpdp: llama-tiny TP=2 x DP=2, 4 ranks; vpp: gpt-tiny PP=2
#       interleaved, 2 ranks; MODE plan or auto; PART a: points first start fwd0, b: fwd bwd
#       end): every iteration and point once, one rank diverging (KIND@ITER:RANK/POINT, the
#       rank and kind turning; two per run): each exact, no mismatch, no vote timed out
# Everything goes under $SI_WORK (default $DH_BUILD_DIR/si/SCENARIO, DH_BUILD_DIR default
# build/): per run NAME.cmd (the command), NAME.out (stdout, the JSON summary), NAME.err,
# NAME.rc. On failure it prints which check failed, the paths and the stderr tails.
# The models are the workload's tiny ones with real math (seconds per run on 2 cores), on
# tests/si/a40-div64.json: the a40 with every rate divided by 64, so that their ops last
# like a larger model's and the iteration is device-bound (the file says why).
# Environment: DH_BUILD_DIR, SI_WORK, SI_MPIEXEC (mpirun), SI_RUN_TIMEOUT (s per run, 150),
# SI_DEVICE (VGPU_DEVICE of every run), SI_REQUIRE_SPEEDUP (0/1: overrides the scenario's).
# Exit status: 0 passed, 1 a check failed, 2 usage or a missing build product.
set -uo pipefail

scenario=${1:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DH_BUILD_DIR:-$root/build}
work=${SI_WORK:-$build/si/$scenario}
# A sanitizer build preloads its runtime first (SI_PRELOAD_PREFIX, set by tests/si.cmake).
shim_lib=$build/lib/libdhelix_shim.so
shim=${SI_PRELOAD_PREFIX:+$SI_PRELOAD_PREFIX:}$shim_lib
dhelix=$build/bin/dhelix
wl=$build/tests/workloads/workload
mpiexec=${SI_MPIEXEC:-mpirun}
run_timeout=${SI_RUN_TIMEOUT:-150}
device=${SI_DEVICE:-$root/tests/si/a40-div64.json}
sij() { python3 "$root/tests/si/si_json.py" "$@"; }

# The caller's shim settings must not leak into the runs.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(DHELIX_|WL_INJECT$|LD_PRELOAD$)')
export DH_BUILD_DIR=$build VGPU_HAZARD=abort VGPU_COMM_TIMEOUT=${VGPU_COMM_TIMEOUT:-30}
unset VGPU_TRACE VGPU_TIMING_ONLY

failures=()
fail() {
  failures+=("$1")
  echo "FAIL: $1"
  shift
  local line
  for line in "$@"; do echo "      $line"; done
}
pass() { echo "ok:   $1"; }

# Shows what a run did: its command, status and the end of its stderr (once per run).
declare -A shown=()
diag() {
  local name=$1
  if [ -n "${shown[$name]:-}" ]; then
    echo "      (run $name: command and stderr above)"
    return
  fi
  shown[$name]=1
  echo "      command: $(cat "$work/$name.cmd" 2>/dev/null)"
  echo "      status $(cat "$work/$name.rc" 2>/dev/null); stdout $work/$name.out; stderr $work/$name.err; last lines of stderr:"
  tail -n "${2:-20}" "$work/$name.err" 2>/dev/null | sed 's/^/        | /'
}

# wl_run NAME RANKS [VAR=VALUE...] -- WORKLOAD_ARGS...: one job on the vgpu (the user's
# command line: VAR=VALUE... scripts/vgpu-run mpirun -n RANKS workload ARGS --json).
wl_run() {
  local name=$1 n=$2 envs=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local cmd=(env VGPU_DEVICE="$device" "${envs[@]}" "$root/scripts/vgpu-run" "$mpiexec" -n "$n" "$wl" "$@" --json)
  printf '%q ' "${cmd[@]}" >"$work/$name.cmd"
  echo >>"$work/$name.cmd"
  local t0=$SECONDS
  (cd "$work" && timeout -k 10 "$run_timeout" "${cmd[@]}" >"$work/$name.out" 2>"$work/$name.err")
  local rc=$?
  echo "$rc" >"$work/$name.rc"
  echo "      ($name: status $rc, $((SECONDS - t0)) s wall)"
  return 0
}

# run_ok NAME [REFERENCE]: the run finished, without a hazard, and (with REFERENCE, a run
# name) with REFERENCE's losses, bit for bit. Returns 1 when a check failed.
run_ok() {
  local name=$1 ref=${2:-} rc
  rc=$(cat "$work/$name.rc")
  if [ "$rc" != 0 ]; then
    local why="exit status $rc"
    [ "$rc" = 86 ] && why="exit status 86: the vgpu found a data race (VGPU_HAZARD=abort)"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="timed out after ${run_timeout} s (hang?)"
    fail "$name: $why"
    diag "$name" 30
    return 1
  fi
  local losses hz
  if ! losses=$(sij losses "$work/$name.out" 2>&1) || [ -z "$losses" ]; then
    fail "$name: no losses in the JSON summary ($losses)"
    diag "$name"
    return 1
  fi
  echo "$losses" >"$work/$name.losses"
  hz=$(sij field "$work/$name.out" hazards)
  if [ -n "$hz" ] && [ "$hz" != 0 ]; then
    fail "$name: the vgpu reports $hz hazards"
    diag "$name"
    return 1
  fi
  if [ -n "$ref" ]; then
    if [ "$losses" != "$(cat "$work/$ref.losses")" ]; then
      fail "$name: losses differ from $ref (left: $ref, right: $name)" \
           "$(paste "$work/$ref.losses" "$work/$name.losses" | awk '{printf "iter %d  %s  %s%s\n", NR-1, $1, $2, ($1 == $2 ? "" : "   <-- differs")}')"
      diag "$name" 10
      return 1
    fi
    pass "$name: exact ($(wc -l <"$work/$name.losses") losses bit-identical to $ref), no hazard"
  else
    pass "$name: ran, no hazard"
  fi
  return 0
}

# profile NAME RANKS [VAR=VALUE...] -- ARGS: a profile-mode run; the profiles are
# $work/NAME.prof/prof.R.json (R: the global rank).
profile() {
  local name=$1 n=$2
  shift 2
  mkdir -p "$work/$name.prof"
  wl_run "$name" "$n" DHELIX_MODE=profile "DHELIX_PROFILE=$work/$name.prof/prof.%r.json" \
    LD_PRELOAD="$shim" "$@"
  local missing=() r
  for ((r = 0; r < n; r++)); do [ -s "$work/$name.prof/prof.$r.json" ] || missing+=("prof.$r.json"); done
  if [ ${#missing[@]} -gt 0 ]; then
    fail "$name: profile mode wrote no profile for some ranks: ${missing[*]} (in $work/$name.prof)" \
         "files there: $(ls "$work/$name.prof" | tr '\n' ' ')"
    diag "$name"
    return 1
  fi
  pass "$name: one profile per rank ($n)"
  return 0
}

# make_plan NAME: dhelix plan on NAME's profiles -> $work/plan.json.
make_plan() {
  local name=$1 profs
  profs=$(ls "$work/$name.prof" | grep -E '^prof\.[0-9]+\.json$' | sed "s|^|$work/$name.prof/|")
  # shellcheck disable=SC2086
  printf '%q ' "$dhelix" plan $profs -o "$work/plan.json" >"$work/plan.cmd"
  # shellcheck disable=SC2086
  "$dhelix" plan $profs -o "$work/plan.json" >"$work/plan.out" 2>"$work/plan.err"
  local rc=$?
  if [ $rc != 0 ] || [ ! -s "$work/plan.json" ]; then
    fail "dhelix plan on $name's profiles: exit status $rc" "command: $(cat "$work/plan.cmd")"
    sed 's/^/        | /' "$work/plan.err" | tail -n 20
    return 1
  fi
  pass "dhelix plan: $work/plan.json ($(sij plan-summary "$work/plan.json" 2>&1))"
  sed 's/^/      | /' "$work/plan.out"
  return 0
}

stats_files() { ls "$work/$1".stats.*.json 2>/dev/null; }

# pairing_check PLAN SITE FILES...: every rank's "pairing" object (DHELIX_STATS=json) counts
# the template's two-strand groups (from PLAN) for every iteration followed, formed groups
# as paired_groups and their share; one probe iteration; the divergent iteration unpaired
# for a desync (or a peer's "no"), the desync naming its call site (SITE in it, when given);
# of a rank whose plan section pairs nothing, only the counts.
# Prints one line per rank; exit status 1 on a mismatch (the reasons printed).
pairing_check() {
  python3 - "$@" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
site = sys.argv[2]
bad, said = [], []
for f in sys.argv[3:]:
    d = json.load(open(f))
    m = d["meta"]
    if not str(m.get("rank", "-")).isdigit():
        continue
    r = int(m["rank"])
    p = d.get("pairing")
    if not p:
        bad.append("rank %d: no pairing object" % r)
        continue
    pm = p["meta"]
    rows = {(x["kind"], x["cause"]): x for x in p["rows"]}
    un = {c: x["count"] for (k, c), x in rows.items() if k == "unpaired_iterations"}
    sec = ([s for s in plan["sections"] if r in s.get("ranks", [])] or plan["sections"][:1])[0]
    g = sum(b.get("repeat", 1) * sum(1 for x in b["groups"] if x["a"][1] > 0 and x["b"][1] > 0)
            for b in sec.get("blocks", [sec]))
    iters = pm["iterations_paired"] + pm["iterations_unpaired"]
    share = round(min(1.0, pm["formed_groups"] / pm["planned_groups"]), 3) if pm["planned_groups"] else 0
    checks = [
        (sum(un.values()) == pm["iterations_unpaired"], "unpaired rows sum to iterations_unpaired"),
        (pm["planned_groups"] == g * iters, "planned_groups %s == %d x %d iterations" % (pm["planned_groups"], g, iters)),
        (pm["formed_groups"] == m["paired_groups"], "formed_groups %s == paired_groups %s" % (pm["formed_groups"], m["paired_groups"])),
        (abs(pm["formed_share"] - share) < 1e-9, "formed_share %s == %s" % (pm["formed_share"], share)),
    ]
    # A rank whose section pairs nothing has nothing to hold back.
    checks += [] if g == 0 else [
        (un.get("probe") == 1, "one probe iteration (got %s)" % un.get("probe")),
        (un.get("desync", 0) + un.get("vetoed", 0) >= 1, "the divergent iteration unpaired for a desync or a veto (got %s)" % un),
        (pm["iterations_paired"] >= 1, "an iteration paired after it"),
        (pm["agree_rounds"] == m["agree_rounds"], "agree_rounds as in meta"),
    ]
    if ("unpaired_iterations", "desync") in rows:
        det = rows[("unpaired_iterations", "desync")]["detail"]
        checks.append(("called from" in det and "unknown" not in det and site in det,
                       "the desync names its call site%s: %s" % (" (%s)" % site if site else "", det)))
    for ok, what in checks:
        if not ok:
            bad.append("rank %d: %s" % (r, what))
    said.append("rank %d: %s/%s groups (%.0f%%), unpaired %s" % (
        r, pm["formed_groups"], pm["planned_groups"], 100 * pm["formed_share"], un))
print("; ".join(bad) if bad else "; ".join(said))
sys.exit(1 if bad or not said else 0)
PY
}

# plan_stats NAME N: prints the "plan" statistics per rank; fails when a rank has none.
plan_stats() {
  local name=$1 n=$2 files
  files=$(stats_files "$name")
  if [ -z "$files" ]; then
    fail "$name: no DHELIX_STATS file ($work/$name.stats.PID.json)"
    diag "$name"
    return 1
  fi
  # shellcheck disable=SC2086
  sij plan-stats $files >"$work/$name.planstats" || { fail "$name: cannot read the stats files"; return 1; }
  sed 's/^/      rank /' "$work/$name.planstats"
  local ranks
  ranks=$(wc -l <"$work/$name.planstats")
  if [ "$ranks" != "$n" ]; then
    fail "$name: statistics from $ranks ranks, expected $n" "$(ls $files)"
    return 1
  fi
  if grep -q noplan "$work/$name.planstats"; then
    fail "$name: a rank's DHELIX_STATS has no \"plan\" object" "$(grep noplan "$work/$name.planstats")"
    return 1
  fi
  return 0
}

# stat_check NAME KEY OP VALUE: every rank's plan.KEY OP VALUE (OP: -gt, -ge, -eq).
stat_check() {
  local name=$1 key=$2 op=$3 want=$4 bad=() line r v
  while read -r line; do
    r=${line%% *}
    v=$(grep -o "\b$key=[-0-9]*" <<<"$line" | head -1 | cut -d= -f2)
    if [ -z "$v" ] || ! [ "$v" "$op" "$want" ]; then bad+=("rank $r: $key=${v:-absent}"); fi
  done <"$work/$name.planstats"
  if [ ${#bad[@]} -gt 0 ]; then
    fail "$name: plan.$key $op $want does not hold: ${bad[*]}"
    return 1
  fi
  pass "$name: plan.$key $op $want on every rank"
}

# rank_lines FILE RANK REGEX: the lines of FILE that rank RANK's shim logged matching REGEX.
rank_lines() { grep -E "^dhelix\[$2[] ]" "$1" | grep -Ei -- "$3"; }

# plan_pairs_match PLAN PLANSTATS: every rank whose plan section pairs operations (a group
# with ops on both strands) ran paired groups, and every rank whose section pairs nothing
# ran none. Prints what it found.
plan_pairs_match() {
  python3 - "$1" "$2" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
def pairs(sec):
    return any(g["a"][1] > 0 and g["b"][1] > 0 for b in sec.get("blocks", [sec]) for _ in range(b.get("repeat", 1)) for g in b["groups"])
ok, said = True, []
for line in open(sys.argv[2]):
    rank = int(line.split()[0])
    m = re.search(r"\bpaired_groups=(\d+)", line)
    ran = int(m.group(1)) if m else -1
    secs = [s for s in plan["sections"] if rank in s.get("ranks", [])] or plan["sections"][:1]
    want = pairs(secs[0])
    good = (ran > 0) if want else (ran == 0)
    ok &= good
    said.append("rank %d: plan %s, ran %d paired groups%s" % (
        rank, "pairs" if want else "pairs nothing (no predicted gain)", ran, "" if good else " (WRONG)"))
print("; ".join(said))
sys.exit(0 if ok else 1)
PY
}

# held_match PLAN PLANSTATS: what each rank held back for pairing at most (max_held_back in
# DHELIX_STATS, program order alone decides it) is what the planner computed for its section
# (held_ops), within the quarter the runtime allows past it before it flushes; a section
# that pairs nothing holds nothing back (its groups of one strand go out op by op).
held_match() {
  python3 - "$1" "$2" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
ok, said = True, []
for line in open(sys.argv[2]):
    rank = int(line.split()[0])
    m = re.search(r"\bmax_held_back=(\d+)", line)
    ran = int(m.group(1)) if m else -1
    sec = ([s for s in plan["sections"] if rank in s.get("ranks", [])] or plan["sections"][:1])[0]
    planned = int(sec.get("held_ops", 0))
    # Pairs that wait for the ranks' vote are held whole: the shim says how much that is.
    d = re.search(r"\bplan_held_design=(\d+)", line)
    planned = max(planned, int(d.group(1))) if d else planned
    pairs = any(g["a"][1] > 0 and g["b"][1] > 0 for b in sec.get("blocks", [sec]) for _ in range(b.get("repeat", 1)) for g in b["groups"])
    good = 0 <= ran <= planned + planned // 4 + 1 and (pairs or ran <= 1)
    ok &= good
    said.append("rank %d: held back %d ops at most, planned %d%s" % (rank, ran, planned, "" if good else " (WRONG)"))
print("; ".join(said))
sys.exit(0 if ok else 1)
PY
}

# mem_model NAME: the plan's extra device memory (memsim.h) is within 10% of what run NAME
# measured over the baseline (peak device memory, the vgpu's accounting).
mem_model() {
  local why
  if why=$(sij mem-model "$work/base.out" "$work/$1.out" "$work/plan.json"); then
    pass "$1: extra memory: ${why#ok }"
  else
    fail "$1: the plan's extra memory is more than 10% off the run's: ${why#off }"
  fi
}

si_env() { # the plan run's shim settings
  echo "DHELIX_PLAN=$1" "LD_PRELOAD=$shim" DHELIX_STATS=json "DHELIX_STATS_FILE=$work/$2.stats.%p.json"
}

need() { [ -e "$1" ] || { echo "e2e: $1 not found: build first (cmake --build ${build})" >&2; exit 2; }; }

# ---- scenarios ----

# A configuration through the whole pipeline.
# profile_compact DIR PLAN: every profile in DIR is a compact one (version 2) that stopped
# recording once an iteration repeated: at most 3 iterations of its rank's template of the
# 5 the program ran, and fewer distinct ops than a tenth of those recorded. A program with
# set-up before its first iteration (tp_sp_init) records the set-up too and stops once two
# iterations past it are alike (profile_rec.c dh__stop_setup; its first two differ): its
# profile is checked for version 2 only.
profile_compact() {
  python3 - "$1" "$2" <<'PY'
import glob, json, os, sys
plan = json.load(open(sys.argv[2]))
tmpl = max(s.get("nops", 0) for s in plan["sections"])
ok, said = True, []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "prof.[0-9]*.json"))):
    if f.endswith(".trace.json"):
        continue
    p = json.load(open(f))
    n, d = p.get("nops", 0), len(p.get("ops", []))
    full = os.environ.get("SI_PROFILE_FULL") == "1"
    varies = os.environ.get("SI_PROFILE_VARIES") == "1"
    if varies:  # shapes vary per iteration (more distinct ops); stopped once a variant recurred
        good = p.get("version") == 2 and 0 < n <= 6 * tmpl
    else:
        good = p.get("version") == 2 and 0 < n and (full or (n <= 3 * tmpl and d * 10 <= n))
    ok &= good
    said.append("%s: version %s, %d ops recorded (template %d), %d distinct%s" % (
        os.path.basename(f), p.get("version"), n, tmpl, d, "" if good else " (NOT compact or not stopped)"))
print("; ".join(said))
sys.exit(0 if ok else 1)
PY
}

scenario_si() {
  local n=$1 want_speedup=$2
  shift 2
  local args=("$@")
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  run_ok prof base
  make_plan prof || return
  local why
  if why=$(profile_compact "$work/prof.prof" "$work/plan.json"); then
    pass "profile: $why"
  else
    fail "profile: $why"
  fi
  # shellcheck disable=SC2046
  wl_run si "$n" $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  local serial
  serial=$(python3 -c 'import json,sys
p=json.load(open(sys.argv[1]))
print(0 if any(g["a"][1] > 0 and g["b"][1] > 0 for s in p["sections"] for b in s.get("blocks", [s]) for g in b["groups"]) else 1)' "$work/plan.json")
  if [ "$serial" = 1 ]; then
    # A plan that pairs nothing on any rank only defers: every rank runs passthrough and
    # says so once (tracker.c).
    local said
    said=$(grep -c "the plan pairs nothing on any rank" "$work/si.err")
    if [ "$said" = "$n" ]; then
      pass "si: the plan pairs nothing: every rank ($n) said so and ran passthrough"
    else
      fail "si: the plan pairs nothing, but $said of $n ranks said they run passthrough"
    fi
  elif plan_stats si "$n"; then
    # A plan pairs only where the planner predicts a gain (a pipeline stage's backward and
    # forward are chained by their point-to-point transfers, a data-parallel reduction has
    # no forward after it): where it paired nothing, the run must not either.
    local why
    if why=$(plan_pairs_match "$work/plan.json" "$work/si.planstats"); then
      pass "si: $why"
    else
      fail "si: $why"
    fi
    stat_check si iterations -gt 0
    if why=$(held_match "$work/plan.json" "$work/si.planstats"); then
      pass "si: $why"
    else
      fail "si: $why"
    fi
  fi
  mem_model si
  local t0 t1 s
  t0=$(sij ms "$work/base.out") && t1=$(sij ms "$work/si.out") || { fail "no iteration times"; return; }
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
  echo "config $scenario: baseline $t0 ms, SI $t1 ms, speedup $s"
  echo "$scenario $t0 $t1 $s" >"$work/speedup"
  if [ "${SI_REQUIRE_SPEEDUP:-$want_speedup}" = 1 ]; then
    if awk -v s="$s" 'BEGIN { exit !(s > 1.0) }'; then
      pass "speedup $s > 1"
    else
      fail "speedup $s is not > 1 (baseline $t0 ms, SI $t1 ms; virtual, mean of iterations 2..)" \
           "baseline $work/base.out, SI $work/si.out, plan $work/plan.json"
    fi
  else
    echo "      (speedup reported, not required for $scenario)"
  fi
  time_model "$s"
}

# time_model S: the plan's predicted speedup (its slowest section's baseline over its slowest
# section's SI time, as scripts/bench reads it) within SI_TIME_MODEL_TOL (3%) of the measured
# speedup S: the DP chooses pairs by that model, and auto mode accepts plans by it.
time_model() {
  local r
  r=$(python3 -c 'import json,sys
p=json.load(open(sys.argv[1])); s=float(sys.argv[2]); tol=float(sys.argv[3])
secs=p["sections"]
b=max(x.get("baseline_us",0) for x in secs); t=max(x.get("si_us",0) for x in secs)
pr=b/t if t>0 else 1.0
print("%s predicted %.3fx, measured %.3fx (predicted/measured %.3f, tolerance %g)" % (
    "ok" if s > 0 and abs(pr/s-1) <= tol else "FAIL", pr, s, pr/s if s > 0 else 0, tol))' \
      "$work/plan.json" "$1" "${SI_TIME_MODEL_TOL:-0.03}")
  if [ "${r%% *}" = ok ]; then
    pass "time model: ${r#ok }"
  else
    fail "time model: ${r#FAIL }" "plan $work/plan.json (dhelix show), baseline $work/base.out, SI $work/si.out"
  fi
}

# moe_ep_dyn: MoE whose iterations differ in op count (an expert or a regrouping bucket
# that gets no token skips its kernels): the planner takes the iteration variant that occurs
# most often (plan/phases.c), the recorder stops once one recurred (profile_rec.c); in the SI
# run an iteration that differs from the template on any rank runs unpaired on every rank
# (that rank desyncs and says no; its peers are vetoed), the others pair: at least one
# desync, the same number of groups formed on every rank, paired iterations on every rank.
scenario_dyn() {
  SI_PROFILE_VARIES=1 scenario_si "$@"
  local why
  if why=$(python3 - "$work" <<'PY'
import glob, json, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/si.stats.*.json")):
    d = json.load(open(f))
    p = d.get("pairing")
    if not p:
        continue
    m = p["meta"]
    why = {r["cause"]: r["count"] for r in p["rows"] if r["kind"] == "unpaired_iterations"}
    rows.append((d["meta"].get("rank"), m["formed_groups"], m["iterations_paired"], why))
ok = (len(rows) >= 2 and any(w.get("desync", 0) > 0 for _, _, _, w in rows)
      and len({g for _, g, _, _ in rows}) == 1 and all(g > 0 and i > 0 for _, g, i, _ in rows))
print("; ".join("rank %s: %d groups formed, %d iterations paired, unpaired %s" % r for r in rows))
sys.exit(0 if ok else 1)
PY
  ); then
    pass "si: iterations that differ run unpaired on every rank, the others pair: $why"
  else
    fail "si: expected a desync, the same groups formed on every rank and paired iterations: $why"
  fi
}

# meta_check NAME KEY OP VALUE: every rank's DHELIX_STATS meta KEY OP VALUE.
meta_check() {
  local name=$1 key=$2 op=$3 want=$4 bad=() r v
  while read -r r v; do
    if ! [[ $v =~ ^[0-9]+$ ]] || ! [ "$v" "$op" "$want" ]; then bad+=("rank $r: $key=$v"); fi
  done < <(sij meta "$key" $(stats_files "$name"))
  if [ -z "$(stats_files "$name")" ] || [ ${#bad[@]} -gt 0 ]; then
    fail "$name: $key $op $want does not hold: ${bad[*]:-no stats files}"
    return 1
  fi
  pass "$name: $key $op $want on every rank ($(sij meta "$key" $(stats_files "$name") | tr '\n' ' '))"
}

# Strands share memory (scheduler/mem/mempool.h; see the file comment).
scenario_share_mem() {
  local n=2 k rc
  local args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5)
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  make_plan prof || return
  # shellcheck disable=SC2046
  wl_run si "$n" $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  meta_check si pool_reuse_same_strand -gt 0
  meta_check si pool_reuse_cross_strand -gt 0
  mem_model si
  # shellcheck disable=SC2046
  wl_run nopool "$n" DHELIX_SHARE_MEM=0 $(si_env "$work/plan.json" nopool) -- "${args[@]}"
  run_ok nopool base || return
  meta_check nopool pool_reuse_same_strand -eq 0
  local m0 m1 m2
  m0=$(sij field "$work/base.out" peak_mem_gib)
  m1=$(sij field "$work/si.out" peak_mem_gib)
  m2=$(sij field "$work/nopool.out" peak_mem_gib)
  if awk -v a="$m1" -v b="$m2" 'BEGIN { exit !(a < b) }'; then
    pass "peak device memory: baseline $m0 GiB, SI $m1 GiB, SI without sharing $m2 GiB"
  else
    fail "peak device memory: SI $m1 GiB is not below SI without sharing ($m2 GiB; baseline $m0 GiB)"
  fi
  # The ordering rule is load-bearing: without the barrier the vgpu finds the race.
  # shellcheck disable=SC2046
  wl_run broken "$n" DHELIX_TEST_BREAK=pool_barrier $(si_env "$work/plan.json" broken) -- "${args[@]}"
  rc=$(cat "$work/broken.rc")
  if [ "$rc" = 86 ]; then
    pass "broken: with the test break pool_barrier the vgpu found a data race (status 86)"
  else
    fail "broken: with the test break pool_barrier the run ended with status $rc, expected 86 (a race)"
    diag broken
  fi
  for k in 1 2 3; do
    wl_run stress$k "$n" DHELIX_MODE=stress DHELIX_SEED=$k LD_PRELOAD="$shim" DHELIX_STATS=json \
      "DHELIX_STATS_FILE=$work/stress$k.stats.%p.json" -- "${args[@]}"
    run_ok stress$k base && meta_check stress$k pool_reuse_same_strand -gt 0
  done
}

# The extra-memory bound (DHELIX_MAX_EXTRA_MEM; sched.c "memory bound"; see the file comment).
scenario_mem_bound() {
  local n=2
  local args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5)
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  make_plan prof || return
  # The shim's cuBLAS workspace (strand 1's, of the framework's size, which the profile
  # records) counts against the bound; this model's pairs hold under 100 KiB on top of it:
  # 16 KiB more lets no pair through.
  local ws bound
  ws=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["blas_workspace_bytes"])' "$work/prof.prof/prof.0.json") ||
    { fail "prof: no blas_workspace_bytes in $work/prof.prof/prof.0.json"; return; }
  bound=$((ws + 16384))
  # shellcheck disable=SC2046
  wl_run free "$n" $(si_env "$work/plan.json" free) -- "${args[@]}"
  run_ok free base || return
  plan_stats free "$n" && stat_check free paired_groups -gt 0
  # shellcheck disable=SC2046
  wl_run tight "$n" DHELIX_MAX_EXTRA_MEM=$bound $(si_env "$work/plan.json" tight) -- "${args[@]}"
  run_ok tight base || return
  meta_check tight mem_bound_vetoes -gt 0
  local v
  v=$(sij meta mem_bound_vetoes $(stats_files tight) | awk '{print $2}' | sort -u | wc -l)
  if [ "$v" = 1 ]; then
    pass "tight: every rank cast the same number of memory vetoes (program order decides them)"
  else
    fail "tight: the ranks cast different numbers of memory vetoes: $(sij meta mem_bound_vetoes $(stats_files tight) | tr '\n' ' ')"
  fi
  local p0 p1
  p0=$(sij meta paired_groups $(stats_files free) | awk '{s += $2} END {print s + 0}')
  p1=$(sij meta paired_groups $(stats_files tight) | awk '{s += $2} END {print s + 0}')
  if [ "$p1" -lt "$p0" ]; then
    pass "tight: fewer paired groups under the bound ($p1, without it $p0)"
  else
    fail "tight: paired groups $p1 under the bound, $p0 without it: the bound changed nothing"
  fi
  local m0 m1
  m0=$(sij field "$work/base.out" peak_mem_gib)
  m1=$(sij field "$work/tight.out" peak_mem_gib)
  if awk -v a="$m0" -v b="$m1" -v l="$bound" 'BEGIN { exit !((b - a) * 1073741824 <= l) }'; then
    pass "tight: extra peak memory $m1 - $m0 GiB is within the bound ($bound bytes)"
  else
    fail "tight: extra peak memory $m1 - $m0 GiB is past the bound ($bound bytes)"
  fi
}

# Plan runs with a dispatcher that falls behind at random points (see the file comment).
scenario_jitter() {
  local n=4 k
  local args=(--model llama-tiny --tp 2 --dp 2 --mbs 1 --gbs 8 --iters 4 --dist-opt --overlap-grad-reduce)
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  make_plan prof || return
  local wait
  for k in 1 2 3; do
    wait=()
    [ $k = 3 ] && wait=(DHELIX_MAX_UNISSUED_FREE_BYTES=0)
    # shellcheck disable=SC2046
    wl_run si$k "$n" DHELIX_TEST_DISPATCH_JITTER=300 "${wait[@]}" $(si_env "$work/plan.json" si$k) -- "${args[@]}"
    run_ok si$k base || continue
    plan_stats si$k "$n" && stat_check si$k paired_groups -gt 0
    [ $k = 3 ] && stat_check si$k lag_waits -gt 0
  done
}

# Megatron's interleaved 1F1B with overlap_p2p_comm (pp_vpp, pp4_tp_vpp): scenario_si, and
# the moves the planner made across communicators (scheduler/plan/moves.h): every section of
# the plan moves posts (its "moves" > 0) and none was refused; two plan runs whose
# dispatchers fall behind at random (DHELIX_TEST_DISPATCH_JITTER: the order across
# communicators must be the plan's on every rank whatever the timing, or the vgpu reports a
# collective mismatch or a hang, and the losses differ); three stress runs (DHELIX_MODE=stress
# with seeds 1..3: the NCCL chain outside plans, program order, exact).
scenario_ppmoves() {
  local n=$1 k
  scenario_si "$@" || return
  shift 2
  local args=("$@") why
  if why=$(python3 - "$work/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
rows = [(s.get("ranks"), s.get("moves", 0), s.get("moves_refused", 0)) for s in p["sections"]]
ok = all(m > 0 and r == 0 for _, m, r in rows)
print(("" if ok else "not ") + "every section moves: " +
      ", ".join("ranks %s %d moved, %d refused" % x for x in rows))
sys.exit(0 if ok else 1)
PY
  ); then
    pass "plan: $why"
  else
    fail "plan: $why"
  fi
  for k in 1 2; do
    # shellcheck disable=SC2046
    wl_run jitter$k "$n" DHELIX_TEST_DISPATCH_JITTER=300 $(si_env "$work/plan.json" jitter$k) -- "${args[@]}"
    run_ok jitter$k base && plan_stats jitter$k "$n" && stat_check jitter$k paired_groups -gt 0
  done
  for k in 1 2 3; do
    wl_run stress$k "$n" DHELIX_MODE=stress DHELIX_SEED=$k LD_PRELOAD="$shim" -- "${args[@]}"
    run_ok stress$k base
  done
}

# An SI run whose program diverges from the plan's template in iteration 2.
scenario_desync() {
  local kind=$1 n=2 at=2
  local args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 6)
  wl_run base "$n" WL_INJECT="$kind@$at" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" WL_INJECT=none -- "${args[@]}" || return
  run_ok prof base # WL_INJECT changes no loss
  make_plan prof || return
  # shellcheck disable=SC2046
  wl_run si "$n" WL_INJECT="$kind@$at" $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  local r lines k opre='MEMSET'
  [ "$kind" = missing ] && opre='KERNEL|CU_KERNEL|MEMCPY|MEMSET|HOST_FUNC|GEMM|LT_MATMUL|NCCL|NCCL_GROUP|EVENT_RECORD|EVENT_WAIT|FREE_ASYNC'
  for ((r = 0; r < n; r++)); do
    lines=$(rank_lines "$work/si.err" "$r" desync)
    k=$(grep -c . <<<"$lines")
    if [ "$k" != 1 ]; then
      fail "si: rank $r logged $k lines with \"desync\", expected exactly 1 (WL_INJECT=$kind@$at)" "$lines"
      diag si
    elif ! grep -Eiq -- "$opre" <<<"$lines"; then
      fail "si: rank $r's desync line names no op kind ($opre)" "$lines"
    else
      pass "si: rank $r: one desync line naming the op: $lines"
    fi
  done
  if plan_stats si "$n"; then
    stat_check si desyncs -ge 1
    stat_check si resyncs -ge 1
    # Iterations 0..at-1 are all that can match before the desync: more means it
    # interleaved again after it.
    stat_check si iterations -ge $((at + 1))
    stat_check si paired_groups -gt 0
  fi
  # The exit summary's "pairing" object says what held pairing back.
  local site=''
  [ "$kind" = extra ] && site=wl_inject_point
  if why=$(pairing_check "$work/plan.json" "$site" $(stats_files si)); then
    pass "si: the pairing summary: $why"
  else
    fail "si: the pairing summary" "$why"
  fi
}

# A plan run with a plan that must be refused.
scenario_bad_plan() {
  local what=$1 n=2 args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5) plan=$work/bad.plan.json problem
  case $what in
    json) problem='json|pars|syntax|malformed|invalid|unexpected|expected' ;;
    version) problem='version' ;;
    model) problem='another program|other program|not match|mismatch|fingerprint|model|template' ;;
    layout) problem='layout|parallel|tp=|dp=|role' ;;
    world) problem='world|ranks|layout' ;;
    truncated) problem='truncat|json|pars|unexpected|end of|premature|malformed|invalid' ;;
  esac
  case $what in
    layout) args=(--model gpt-tiny --dp 2 --gbs 4 --mbs 1 --iters 5) ;;
    world) n=4 args=(--model gpt-tiny --tp 2 --dp 2 --gbs 4 --mbs 1 --iters 5) ;;
  esac
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  case $what in
    json)
      printf '{"format": "dhelix-plan", "version": 1, "world": 2, "layout": "tp=2",\n "sections": [{"ranks": [0, 1] "ops": [}\n' >"$plan" ;;
    version | truncated | layout)
      profile prof 2 -- --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 || return
      make_plan prof || return
      if [ "$what" = version ]; then
        sij set "$work/plan.json" "$plan" version 99 || { fail "cannot edit the plan"; return; }
      elif [ "$what" = truncated ]; then
        head -c $(($(wc -c <"$work/plan.json") / 2)) "$work/plan.json" >"$plan"
      else
        cp "$work/plan.json" "$plan"
      fi ;;
    model)
      profile prof 2 -- --model llama-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 || return
      make_plan prof || return
      cp "$work/plan.json" "$plan" ;;
    world)
      profile prof 2 -- --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 || return
      make_plan prof || return
      cp "$work/plan.json" "$plan" ;;
  esac
  echo "      bad plan ($what): $plan"
  # shellcheck disable=SC2046
  wl_run si "$n" $(si_env "$plan" si) -- "${args[@]}"
  run_ok si base || return
  local r lines k
  for ((r = 0; r < n; r++)); do
    lines=$(rank_lines "$work/si.err" "$r" "$plan")
    k=$(grep -c . <<<"$lines")
    if [ "$k" != 1 ]; then
      fail "si: rank $r logged $k lines naming $plan, expected exactly 1" "${lines:-(none)}"
      diag si
    elif ! grep -Eiq -- "$problem" <<<"${lines//"$plan"/}"; then
      fail "si: rank $r's line does not say the problem (/$problem/, outside the file name)" "$lines"
    else
      pass "si: rank $r: $lines"
    fi
  done
  local other
  other=$(grep -F -- "$plan" "$work/si.err" | grep -Ev '^dhelix\[[0-9]+[] ]')
  if [ -n "$other" ]; then
    fail "si: lines naming the plan from processes that are not ranks (the launcher?): stderr must have exactly one per rank" \
         "$(head -n 5 <<<"$other")"
  fi
  local files
  files=$(stats_files si)
  if [ -n "$files" ]; then
    # shellcheck disable=SC2086
    sij plan-stats $files >"$work/si.planstats"
    if grep -q 'paired_groups=[1-9]' "$work/si.planstats"; then
      fail "si: interleaved with a plan it should have refused" "$(cat "$work/si.planstats")"
    else
      pass "si: nothing interleaved"
    fi
  fi
}

# A plan that pairs work with the backward it depends on (see the file comment).
scenario_rotated_plan() {
  local n=2 mb=4 args=(--model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 5) r
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  # Every iteration recorded: the cut keeps what follows the first iteration's last backward,
  # and the planner needs two whole (rotated) iterations after it.
  profile prof "$n" DHELIX_PROFILE_STOP=0 -- "${args[@]}" || return
  mkdir -p "$work/cut.prof"
  for ((r = 0; r < n; r++)); do
    sij cut-profile "$work/prof.prof/prof.$r.json" "$work/cut.prof/prof.$r.json" "$mb" >/dev/null ||
      { fail "cannot cut prof.$r.json"; return; }
  done
  make_plan cut || return
  # The scenario tests something only while the plan does pair the reduction.
  local paired
  paired=$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["sections"][0]
ops = [o for b in s.get("blocks", [s]) for o in b.get("ops", [])]  # version 2: blocks
print(sum(1 for o in ops if o.get("strand") == 1 and "AllReduce" in o.get("name", "")))' "$work/plan.json")
  if [ "${paired:-0}" -gt 0 ]; then
    pass "the plan pairs $paired gradient reductions (strand b) with a backward"
  else
    fail "the plan made from the cut profile pairs no AllReduce: the scenario tests nothing" \
         "plan $work/plan.json"
    return
  fi
  # shellcheck disable=SC2046
  wl_run si "$n" $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  if plan_stats si "$n"; then
    stat_check si refuted_phases -ge 1
    stat_check si paired_groups -gt 0
  fi
}

# WL_INJECT without a plan: losses never change, and the divergence does happen.
scenario_inject_stress() {
  local n=2 last=3 args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 4) kind
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  wl_run none "$n" WL_INJECT=none -- "${args[@]}"
  run_ok none base
  for kind in extra missing shape; do
    local extra=()
    [ "$kind" = shape ] && extra=("VGPU_TRACE=$work/$kind.trace.%r.json")
    wl_run "$kind" "$n" WL_INJECT="$kind@$last" "${extra[@]}" -- "${args[@]}"
    run_ok "$kind" base
    wl_run "stress_$kind" "$n" WL_INJECT="$kind@$last" DHELIX_MODE=stress LD_PRELOAD="$shim" -- "${args[@]}"
    run_ok "stress_$kind" base
  done
  # device_ops counts the last iteration's device operations, summed over ranks.
  local d0 dx dm
  d0=$(sij field "$work/none.out" device_ops)
  dx=$(sij field "$work/extra.out" device_ops)
  dm=$(sij field "$work/missing.out" device_ops)
  if [ "$dx" = $((d0 + n)) ] && [ "$dm" = $((d0 - n)) ]; then
    pass "WL_INJECT: last iteration's device ops: none $d0, extra $dx, missing $dm"
  else
    fail "WL_INJECT did not inject: last iteration's device ops: none $d0, extra $dx (want $((d0 + n))), missing $dm (want $((d0 - n)))"
  fi
  if grep -q '"memset 2048B"' "$work"/shape.trace.0.json 2>/dev/null; then
    pass "WL_INJECT=shape: a 2048-byte memset in the trace"
  else
    fail "WL_INJECT=shape: no 2048-byte memset in $work/shape.trace.0.json"
  fi
}

# A peer that stops answering the ranks' agreement (DHELIX_TEST_AGREE_SILENT): every rank
# falls back to program order within the timeout, no hang, exact; the channel reports it.
scenario_agree_silent() {
  local n=2 args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 6)
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  make_plan prof || return
  # shellcheck disable=SC2046
  wl_run si "$n" DHELIX_TEST_AGREE_SILENT=1 DHELIX_AGREE_TIMEOUT_MS=500 $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  local files
  files=$(stats_files si)
  # shellcheck disable=SC2086
  if python3 - $files <<'PY'
import json, sys
bad = []
for f in sys.argv[1:]:
    m = json.load(open(f))["meta"]
    if not str(m.get("rank", "-")).isdigit():
        continue
    print("      rank %s: agree_rounds=%s agree_no=%s agree_broken=%s plan_vetoed_rounds=%s" % (
        m["rank"], m.get("agree_rounds"), m.get("agree_no"), m.get("agree_broken"), m.get("plan_vetoed_rounds")))
    if m.get("agree_broken") != 1 or m.get("agree_no", 0) < 1:
        bad.append(m["rank"])
sys.exit(1 if bad else 0)
PY
  then pass "si: every rank gave up on the silent peer and ran program order"
  else fail "si: a rank did not report the broken agreement"
  fi
}

# One rank diverges (WL_INJECT KIND@ITER:RANK, several kinds, iterations and ranks) while
# its peers follow the plan: the ranks agree per pair of micro-batches (agree.h), so every
# run is exact, nothing hangs, the vgpu sees no collective called out of order, no vote
# times out, and pairing resumes after the last divergent iteration (paired groups of at
# least the two iterations after it, where the plan pairs anything).
scenario_diverge() {
  local cfg=$1 n inject args
  case $cfg in
    tpdp) n=4 inject="query@2:0,sync@3:3,extra@4:1,missing@4:2"
          args=(--model gpt-tiny --tp 2 --dp 2 --gbs 8 --mbs 1 --iters 7) ;;
    pp) n=2 inject="query@2:1,extra@3:0,sync@4:1"
        args=(--model gpt-tiny --layers 4 --pp 2 --vpp 2 --gbs 4 --mbs 1 --iters 7) ;;
  esac
  wl_run base "$n" WL_INJECT="$inject" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" WL_INJECT=none -- "${args[@]}" || return
  make_plan prof || return
  # shellcheck disable=SC2046
  wl_run si "$n" WL_INJECT="$inject" DHELIX_AGREE_TIMEOUT_MS=20000 $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  if grep -qi "mismatch on communicator" "$work/si.err"; then
    fail "si: the vgpu saw a collective out of order" "$(grep -i mismatch "$work/si.err" | head -3)"
  else
    pass "si: no collective mismatch"
  fi
  local files
  files=$(stats_files si)
  # shellcheck disable=SC2086
  if python3 - "$work/plan.json" $files <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
bad = []
for f in sys.argv[2:]:
    m = json.load(open(f))["meta"]
    if not str(m.get("rank", "-")).isdigit():
        continue
    r = int(m["rank"])
    sec = ([s for s in plan["sections"] if r in s.get("ranks", [])] or plan["sections"][:1])[0]
    g = sum(b.get("repeat", 1) * sum(1 for x in b["groups"] if x["a"][1] > 0 and x["b"][1] > 0)
            for b in sec.get("blocks", [sec]))
    it = max(1, m.get("plan_iterations", 0))
    print("      rank %d: paired_groups=%s (plan: %d per iteration) iterations=%s desyncs=%s "
          "agree: rounds=%s no=%s waits=%s mean=%s us max=%s us, %d us per iteration; "
          "vetoed_rounds=%s timeouts=%s broken=%s" % (
              r, m.get("paired_groups"), g, m.get("plan_iterations"), m.get("plan_desyncs"),
              m.get("agree_rounds"), m.get("agree_no"), m.get("agree_waits"),
              m.get("agree_mean_us"), m.get("agree_max_us"), m.get("agree_wait_us", 0) // it,
              m.get("plan_vetoed_rounds"), m.get("agree_timeouts"), m.get("agree_broken")))
    if m.get("agree_timeouts") or m.get("agree_broken"):
        bad.append("rank %d: a vote timed out or the channel broke" % r)
    if g and m.get("paired_groups", 0) < 2 * g:
        bad.append("rank %d: %s paired groups, want >= %d (pairing resumed)" % (r, m.get("paired_groups"), 2 * g))
for b in bad:
    print("      " + b)
sys.exit(1 if bad else 0)
PY
  then pass "si: votes decided every divergence (no timeout) and pairing resumed"
  else fail "si: see the per-rank agreement above"
  fi
  # The pairing summary: every rank ran the divergent iterations unpaired; in tpdp, rank 3's
  # synchronisation (sync@3:3) is a drain mid-pair whose first call site is the injection.
  # shellcheck disable=SC2086
  if why=$(pairing_check "$work/plan.json" '' $files); then
    pass "si: the pairing summary: $why"
  else
    fail "si: the pairing summary" "$why"
  fi
  # shellcheck disable=SC2086
  [ "$cfg" = tpdp ] && if why=$(python3 - $files <<'PY'
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    if str(d["meta"].get("rank")) != "3":
        continue
    rows = {(x["kind"], x["cause"]): x for x in d["pairing"]["rows"]}
    drain = rows.get(("unpaired_iterations", "drain"), {}).get("count", 0)
    sync = rows.get(("drains_mid_iteration", "STREAM_SYNC"), {}).get("detail", "")
    print("rank 3: %d iteration(s) unpaired for a drain mid-pair; STREAM_SYNC %s" % (drain, sync))
    sys.exit(0 if drain >= 1 and "wl_inject_point" in sync else 1)
sys.exit(1)
PY
  ); then
    pass "si: $why"
  else
    fail "si: rank 3's drain mid-pair is not in its pairing summary" "$why"
  fi
}


# The divergence swept over the run (sweep_CFG_MODE_PART): every (iteration, point) once, one
# rank diverging there (WL_INJECT KIND@ITER:RANK/POINT, tests/workloads/src/inject.h), two
# of them per run half the run apart,
# the rank and the kind turning with the iteration and the point, so that every point sees
# every rank over the run and every iteration sees several kinds and ranks: before the plan
# is followed, in the probe iteration (plan mode's first followed one, auto mode's switch
# iteration), in the pairs, at the iteration's edges. Each run: exit 0, losses bit-identical
# to the baseline's, no hazard, no collective called out of order (the vgpu), no vote timed
# out and the channel never broke (DHELIX_STATS), every rank's switch at one iteration (auto).
#   CFG: tpdp (llama-tiny TP=2 x DP=2, 4 ranks: the issue's job) or vpp (gpt-tiny PP=2
#   interleaved, --vpp 2, 2 ranks); MODE: plan (6 iterations) or auto (8: it switches at 4);
#   PART: a (points first start fwd0) or b (fwd bwd end).
scenario_sweep() {
  local cfg=$1 mode=$2 part=$3 n iters args points kinds=(query sync extra missing shape)
  case $cfg in
    tpdp) n=4 args=(--model llama-tiny --tp 2 --dp 2 --gbs 8 --mbs 1) ;;
    vpp) n=2 args=(--model gpt-tiny --layers 4 --pp 2 --vpp 2 --gbs 4 --mbs 1) ;;
  esac
  case $mode in plan) iters=6 ;; auto) iters=8 ;; esac
  case $part in a) points=(first start fwd0) ;; b) points=(fwd bwd end) ;; esac
  args+=(--iters "$iters")
  wl_run base "$n" WL_INJECT=none -- "${args[@]}"
  run_ok base || return
  local envs=()
  if [ "$mode" = plan ]; then
    profile prof "$n" WL_INJECT=none -- "${args[@]}" || return
    make_plan prof || return
    envs=("DHELIX_PLAN=$work/plan.json")
  else
    envs=(DHELIX_MODE=auto)
  fi
  # Two divergences per run, half the run apart (iterations i and i + iters/2, the same
  # point, other ranks and kinds): pairing resumes between them, and the sweep takes half
  # the runs.
  local i p h=$((iters / 2)) bad=0 runs=0
  for ((i = 0; i < h; i++)); do
    for p in "${!points[@]}"; do
      local pt=${points[$p]} spec="" j
      for j in "$i" "$((i + h))"; do
        local r=$(((j + p) % n)) kind=${kinds[$(((2 * j + p) % 5))]}
        [ "$pt" = first ] && [ "$kind" = missing ] && kind=extra # nothing to leave out there
        spec+="${spec:+,}$kind@$j:$r/$pt"
      done
      local name="d$i.$pt"
      wl_run "$name" "$n" WL_INJECT="$spec" DHELIX_AGREE_TIMEOUT_MS=20000 "LD_PRELOAD=$shim" \
        DHELIX_STATS=json "DHELIX_STATS_FILE=$work/$name.stats.%p.json" "${envs[@]}" -- "${args[@]}" >/dev/null
      runs=$((runs + 1))
      local why=""
      if ! run_ok "$name" base >/dev/null; then
        why="not exact or failed (status $(cat "$work/$name.rc"))"
      elif grep -qi "mismatch on communicator" "$work/$name.err"; then
        why="the vgpu saw a collective out of order: $(grep -i -m1 mismatch "$work/$name.err")"
      else
        # shellcheck disable=SC2046
        why=$(python3 - "$mode" "$n" $(stats_files "$name") <<'PY'
import json, sys
mode, n, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ms = {}
for f in files:
    m = json.load(open(f))["meta"]
    if str(m.get("rank", "-")).isdigit():
        ms[int(m["rank"])] = m
bad = []
if len(ms) != n:
    bad.append("statistics from %d of %d ranks" % (len(ms), n))
for r, m in sorted(ms.items()):
    if m.get("agree_timeouts") or m.get("agree_broken"):
        bad.append("rank %d: agree_timeouts %s, agree_broken %s" % (r, m.get("agree_timeouts"), m.get("agree_broken")))
sw = {m.get("auto_switch_iteration") for m in ms.values()}
if mode == "auto" and len(sw) != 1:
    bad.append("switch iterations %s" % sorted(sw, key=str))
pi = ",".join("%s" % ms[r].get("plan_iterations", 0) for r in sorted(ms))
print("; ".join(bad) if bad else "ok (iterations followed per rank %s%s)" % (
    pi, ", switch at %s" % sw.pop() if mode == "auto" else ""))
PY
)
        [ "${why%% *}" = ok ] && { echo "      $spec: ${why}"; why=""; }
      fi
      if [ -n "$why" ]; then
        bad=$((bad + 1))
        fail "$spec: $why"
        diag "$name" 8
      fi
    done
  done
  [ "$bad" = 0 ] && pass "sweep: $runs runs ($cfg, $mode mode, points ${points[*]}): every one exact, no mismatch, no vote timed out"
}


# DHELIX_MODE=auto beside the three-step flow (profile, dhelix plan, plan run) on one
# configuration, 8 iterations: exact; every rank switched at the same iteration; and, on the
# iterations after the switch and the tracker's checking iteration, the speedup over the
# baseline within 1% of the three-step run's on the same iterations (where the planner
# predicts no gain, the plan is not used and the log says so). With cache=1 a second start
# with DHELIX_PLAN_CACHE must find the plan and switch at iteration 0.
scenario_auto() {
  local n=$1 cache=$2
  shift 2
  local args=("$@")
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  make_plan prof || return
  # shellcheck disable=SC2046
  wl_run si "$n" $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  local envs=(DHELIX_MODE=auto "LD_PRELOAD=$shim" DHELIX_STATS=json)
  [ "$cache" = 1 ] && envs+=("DHELIX_PLAN_CACHE=$work/cache")
  wl_run auto "$n" "${envs[@]}" "DHELIX_STATS_FILE=$work/auto.stats.%p.json" -- "${args[@]}"
  run_ok auto base || return
  auto_judge auto "$n" || return
  if [ "$cache" = 1 ]; then
    local f
    f=$(ls "$work/cache" 2>/dev/null | head -1)
    [ -n "$f" ] && pass "cache: $work/cache/$f" || { fail "auto: nothing in DHELIX_PLAN_CACHE ($work/cache)"; return; }
    wl_run auto2 "$n" "${envs[@]}" "DHELIX_STATS_FILE=$work/auto2.stats.%p.json" -- "${args[@]}"
    run_ok auto2 base || return
    local c
    c=$(sij meta auto_cache $(stats_files auto2) | awk '{print $2}' | sort -u | tr '\n' ' ')
    [ "$c" = "hit " ] && pass "auto2: every rank found the plan in the cache" || fail "auto2: auto_cache per rank: $c (expected hit)"
    auto_judge auto2 "$n" 0
  fi
}

# auto_judge NAME RANKS [WANT_SWITCH]: the switch line, the same switch iteration on every
# rank (WANT_SWITCH when given), and the speedup after the switch vs the three-step run's.
auto_judge() {
  local name=$1 n=$2 want=${3:-}
  local sw
  sw=$(sij meta auto_switch_iteration $(stats_files "$name") | awk '{print $2}' | sort -u)
  local line
  line=$(grep -h "auto: switched to Strand Interleaving" "$work/$name.err" | head -1)
  if grep -q "auto: the plan predicts a speedup" "$work/$name.err" && [ "$sw" = -1 ]; then
    pass "$name: plan not used, the log says why: $(grep -h -m1 -o 'the plan predicts a speedup.*' "$work/$name.err")"
    auto_passthrough "$name" "$n" "the plan predicts a speedup" 0 0
    return
  fi
  if [ "$(wc -w <<<"$sw")" != 1 ] || [ "$sw" = -1 ] || [ -z "$line" ]; then
    fail "$name: did not switch on every rank at one iteration (auto_switch_iteration per rank: $(sij meta auto_switch_iteration $(stats_files "$name") | tr '\n' ' '))"
    diag "$name"
    return 1
  fi
  pass "$name: ${line#*] }"
  # The switch boundary (auto.c): the boundary after the one where the last rank's recording
  # stopped, however fast the host planned (a switch later than it fails here, not only
  # when it leaves too few iterations to measure).
  local due
  due=$(sij meta auto_switch_due $(stats_files "$name") | awk '{print $2}' | sort -n | tail -1)
  if [ "$sw" != 0 ] && [ "$sw" != "$due" ]; then
    fail "$name: switched at iteration $sw, not at the switch boundary $due (auto_switch_due per rank: $(sij meta auto_switch_due $(stats_files "$name") | tr '\n' ' '); waits for the plan: $(sij meta auto_switch_wait_ms $(stats_files "$name") | tr '\n' ' ') ms)"
  elif [ "$sw" != 0 ]; then
    pass "$name: switched at the switch boundary $due (waits for the plan there: $(sij meta auto_switch_wait_ms $(stats_files "$name") | awk '{printf "%s%s ms", (NR > 1 ? ", " : ""), $2}'))"
  fi
  if [ -n "$want" ] && [ "$sw" != "$want" ]; then
    fail "$name: switched at iteration $sw, expected $want"
  fi
  # Kept after rank 0's measurement (none after a switch at iteration 0: a cached plan), or
  # left by every rank at one iteration when it measured no gain: then the three-step run
  # must not have gained either (the plan predicted a little, it did not come true).
  local pt ms
  pt=$(sij meta auto_passthrough_iteration $(stats_files "$name") | awk '{print $2}' | sort -u)
  ms=$(sij meta auto_measured_speedup $(stats_files "$name") | awk '$1 == 0 {print $2}')
  if [ "$pt" != -1 ] && awk -v s="$ms" 'BEGIN { exit !(s > 0 && s <= 1.01) }'; then
    # The three-step run measured as rank 0 measures (auto.c): the two program-order
    # iterations before the switch against the two SI iterations after its checking one.
    # (Where iterations differ with the data, moe_ep_dyn, the steady means would compare
    # other iterations than rank 0 did, and the switch iteration is fixed now.)
    local t0 t1
    read -r t0 t1 < <(python3 - "$work/base.out" "$work/si.out" "$sw" <<'PY'
import json, sys
def its(path):
    t = open(path).read()
    return [i["time_ms"] for i in json.JSONDecoder().raw_decode(t[t.find("{"):])[0]["iterations"]]
b, s, sw = its(sys.argv[1]), its(sys.argv[2]), int(sys.argv[3])
pre = [b[i] for i in range(max(1, sw - 2), sw)] or [b[sw]]
post = [s[i] for i in range(sw + 1, min(sw + 3, len(s)))]
print("%.6f %.6f" % (sum(pre) / len(pre), sum(post) / len(post) if post else 0))
PY
)
    if awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b > 0 && a / b <= 1.02) }'; then
      pass "$name: rank 0 measured ${ms}x: not used after the switch; the three-step run gained no more on those iterations ($t0 ms -> $t1 ms)"
    else
      fail "$name: rank 0 measured ${ms}x and switched back, but the three-step run went $t0 ms -> $t1 ms on those iterations"
    fi
    auto_passthrough "$name" "$n" "Strand Interleaving" 1 0
    return
  elif [ "$pt" != -1 ]; then
    fail "$name: a rank went passthrough after the switch (auto_passthrough_iteration: $pt; rank 0 measured ${ms}x)"
  elif [ "$sw" != 0 ] && ! awk -v s="$ms" 'BEGIN { exit !(s > 1.01) }'; then
    fail "$name: rank 0's measured speedup is ${ms:-absent}, expected above 1.01 (kept)"
  else
    pass "$name: kept after the switch (rank 0 measured ${ms}x)"
  fi
  local r
  r=$(python3 - "$work" "$name" "$sw" <<'PY'
import json, sys
work, name, sw = sys.argv[1], sys.argv[2], int(sys.argv[3])
def its(run):
    t = open("%s/%s.out" % (work, run)).read()
    return [i["time_ms"] for i in json.JSONDecoder().raw_decode(t[t.find("{"):])[0]["iterations"]]
b, s, a = its("base"), its("si"), its(name)
first = max(sw + 1, 2)  # the switch iteration itself is the tracker's check (program order)
if first >= len(b):
    print("FAIL no iteration after the switch (%d of %d)" % (sw, len(b))); sys.exit()
m = lambda x: sum(x[first:]) / len(x[first:])
sa, ss = m(b) / m(a), m(b) / m(s)
ok = abs(sa - ss) <= 0.01 * ss
print("%s iterations %d-%d: baseline %.3f ms, three-step SI %.3f ms (speedup %.3f), auto %.3f ms (speedup %.3f)" % (
    "ok" if ok else "FAIL", first, len(b) - 1, m(b), m(s), ss, m(a), sa))
PY
)
  echo "$scenario auto: $r" >"$work/auto_speedup"
  if [ "${r%% *}" = ok ]; then pass "$name: ${r#ok }"; else fail "$name: speedup not within 1% of the three-step flow's: ${r#FAIL }"; fi
}

# auto_passthrough NAME RANKS WHY [SAME [AFTER]]: every rank of auto run NAME went
# passthrough (DHELIX_STATS: mode, auto_passthrough_iteration K, nothing deferred after it,
# fewer kernels deferred than launched: those after K were forwarded), at one K on every
# rank when SAME=1; said so in exactly one line per rank, with WHY and K in it; and every
# iteration after the latest K took exactly the baseline's virtual time (run "base"), of
# which there must be one unless AFTER=0.
auto_passthrough() {
  local name=$1 n=$2 why=$3 same=${4:-0} after=${5:-1} files
  files=$(stats_files "$name")
  # shellcheck disable=SC2086
  if python3 - "$work/base.out" "$work/$name.out" "$work/$name.err" "$why" "$same" "$n" "$after" $files <<'PY'
import json, re, sys
base_out, run_out, err, why, same, n, need_after = sys.argv[1:8]
def its(path):
    t = open(path).read()
    return [i["time_ms"] for i in json.JSONDecoder().raw_decode(t[t.find("{"):])[0]["iterations"]]
bad, ks = [], {}
lines = open(err, errors="replace").read().splitlines()
b, a = its(base_out), its(run_out)
for f in sys.argv[8:]:
    d = json.load(open(f))
    m = d["meta"]
    if not str(m.get("rank", "-")).isdigit():
        continue
    r = int(m["rank"])
    k = m.get("auto_passthrough_iteration", -1)
    ks[r] = k
    launches = sum(x["calls"] for x in d["rows"] if x["api"] == "cudaLaunchKernel")
    said = [l for l in lines if l.startswith("dhelix[%d " % r) and "auto:" in l
            and "switched to Strand Interleaving" not in l]
    print("      rank %d: mode %s, passthrough from iteration %s, deferred after it %s, "
          "kernels deferred %s of %s launched; %s" % (r, m.get("mode"), k,
          m.get("auto_deferred_after_passthrough"), m.get("deferred_KERNEL"), launches,
          m.get("auto_status")))
    if m.get("mode") != "passthrough":
        bad.append("rank %d: mode %s, not passthrough" % (r, m.get("mode")))
    if not isinstance(k, int) or k < 0:
        bad.append("rank %d: auto_passthrough_iteration %s" % (r, k))
    if m.get("auto_deferred_after_passthrough") != 0:
        bad.append("rank %d: %s ops deferred after it" % (r, m.get("auto_deferred_after_passthrough")))
    # From iteration k on kernels are forwarded (k may be the boundary after the last one).
    if isinstance(k, int) and 0 <= k < len(a) and not m.get("deferred_KERNEL", 0) < launches:
        bad.append("rank %d: every kernel deferred (%s of %s)" % (r, m.get("deferred_KERNEL"), launches))
    want = "running passthrough from iteration %s," % k
    if len(said) != 1 or why not in said[0] or want not in said[0]:
        bad.append("rank %d: %d auto lines, expected one with '%s' and '%s': %s" % (r, len(said), why, want, said))
if len(ks) != int(n):
    bad.append("statistics from %d ranks, expected %s" % (len(ks), n))
if same == "1" and len(set(ks.values())) != 1:
    bad.append("passthrough at different iterations: %s" % ks)
last = max(list(ks.values()) + [0])
after = list(range(last + 1, len(a)))
diff = [(i, b[i], a[i]) for i in after if abs(a[i] - b[i]) > 5e-7]
print("      iterations %s: %s" % ("%d-%d" % (after[0], after[-1]) if after else "none after it",
      "as long as the baseline's (%.6f ms)" % b[after[0]] if after and not diff else diff))
if not after and need_after == "1":
    bad.append("no iteration after passthrough started")
if diff:
    bad.append("iterations after passthrough differ in time from the baseline's: %s" % diff)
for x in bad:
    print("      " + x)
sys.exit(1 if bad else 0)
PY
  then pass "$name: every rank runs passthrough after the decision, nothing deferred, one line each"
  else fail "$name: passthrough after the decision (see above)"
  fi
}

# A plan that does not help is not used (auto.h): every rank goes passthrough.
#   reject    tp_sp, 10 iterations, DHELIX_AUTO_MIN_GAIN=1000: its predicted gain (about 6%)
#             is not enough
#   measured  tp_sp, 12 iterations, on a40-div64-interfere.json (the file says why): the
#             plan predicts a gain, is switched to, and measures slower on rank 0; every
#             rank switches back at the boundary DHELIX_AUTO_MEASURE_ITERS (2) + 1 after
#             the switch, and the iterations it ran with SI were slower than the baseline's
#   silent    tp_sp, 20 iterations: rank 1 never sends its profile (DHELIX_TEST_AGREE_SILENT)
#             and rank 0 gives up after DHELIX_AUTO_TIMEOUT_MS=200: no plan on any rank
#   busy      tp_sp, 12 iterations: the exchange's port (DHELIX_AGREE_ADDR's + 1) is held by
#             a listener that never answers: rank 0 cannot plan, rank 1 waits for an answer
#             (DHELIX_AUTO_TIMEOUT_MS, a minute) that never comes; rank 0's "never" vote
#             must take rank 1 to passthrough long before
scenario_auto_off() {
  local kind=$1 n=2 args=(--model gpt-tiny --tp 2 --gbs 4 --mbs 1) envs why same=0
  case $kind in
    reject) args+=(--iters 10); envs=(DHELIX_AUTO_MIN_GAIN=1000); why="the plan predicts a speedup" ;;
    measured) args+=(--iters 12); envs=(); why="Strand Interleaving"; same=1 ;;
    silent) args+=(--iters 20); envs=(DHELIX_TEST_AGREE_SILENT=1 DHELIX_AUTO_TIMEOUT_MS=200)
            why="" ;;
    busy) args+=(--iters 12); why="" ;;
  esac
  local holder=""
  if [ "$kind" = busy ]; then
    # A free pair of ports below the ephemeral range; the listener holds the second.
    local port
    port=$(python3 -c 'import random, socket
for _ in range(200):
    p = random.randrange(21000, 31000, 2)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("0.0.0.0", q)); s.close()
        print(p); break
    except OSError:
        pass')
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
held = []
while True:
    held.append(s.accept()[0])' $((port + 1)) &
    holder=$!
    envs=("DHELIX_AGREE_ADDR=127.0.0.1:$port")
    sleep 0.3
  fi
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  wl_run auto "$n" DHELIX_MODE=auto "LD_PRELOAD=$shim" DHELIX_STATS=json \
    "DHELIX_STATS_FILE=$work/auto.stats.%p.json" "${envs[@]}" -- "${args[@]}"
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  run_ok auto base || return
  auto_passthrough auto "$n" "$why" "$same"
  local files
  files=$(stats_files auto)
  case $kind in
    reject)
      # The plan would have been used under the default gain: the rejection is the gain's.
      local sp
      sp=$(sij meta auto_predicted_speedup $files | awk '{print $2}' | sort -u)
      if [ "$(wc -w <<<"$sp")" = 1 ] && awk -v s="$sp" 'BEGIN { exit !(s > 1.01 && s <= 11) }'; then
        pass "auto: predicted speedup ${sp}x on every rank: above 1.01x, not above 11x"
      else
        fail "auto: predicted speedup per rank: $sp (expected one value in (1.01, 11])"
      fi ;;
    measured)
      # shellcheck disable=SC2086
      if why=$(python3 - "$work/base.out" "$work/auto.out" $files <<'PY'
import json, sys
def its(path):
    t = open(path).read()
    return [i["time_ms"] for i in json.JSONDecoder().raw_decode(t[t.find("{"):])[0]["iterations"]]
b, a = its(sys.argv[1]), its(sys.argv[2])
ms, bad = {}, []
for f in sys.argv[3:]:
    m = json.load(open(f))["meta"]
    if str(m.get("rank", "-")).isdigit():
        ms[int(m["rank"])] = m
sw = {m["auto_switch_iteration"] for m in ms.values()}
pt = {m["auto_passthrough_iteration"] for m in ms.values()}
r0 = ms.get(0, {})
if len(sw) != 1 or min(sw) < 1:
    bad.append("switch iterations %s (expected one, at least 1)" % sorted(sw))
elif pt != {min(sw) + 3}:
    bad.append("switched back at %s, expected %d (switch + DHELIX_AUTO_MEASURE_ITERS + 1)" % (sorted(pt), min(sw) + 3))
if not all(m.get("paired_groups", 0) > 0 and m.get("plan_iterations", 0) > 0 for m in ms.values()):
    bad.append("a rank ran no paired group before switching back")
if not (r0.get("auto_predicted_speedup", 0) > 1.01 and 0 < r0.get("auto_measured_speedup", 0) <= 1.01):
    bad.append("rank 0: predicted %s, measured %s (expected above 1.01 and not above)" % (
        r0.get("auto_predicted_speedup"), r0.get("auto_measured_speedup")))
s = min(sw)
si = list(range(s + 1, s + 3))
slower = all(i < len(a) and a[i] > b[i] for i in si)
if not slower:
    bad.append("the SI iterations %s were not slower than the baseline's" % si)
print("switched at %s, back at %s on every rank; rank 0 predicted %.3fx, measured %.3fx "
      "(%.3f ms SI, %.3f ms program order); the workload's iterations %s: %s ms, baseline %.3f ms%s" % (
      sorted(sw), sorted(pt), r0.get("auto_predicted_speedup", 0), r0.get("auto_measured_speedup", 0),
      r0.get("auto_measured_si_ms", 0), r0.get("auto_measured_program_order_ms", 0), si,
      [round(a[i], 3) for i in si if i < len(a)], b[0], "; " + "; ".join(bad) if bad else ""))
sys.exit(1 if bad else 0)
PY
      ); then
        pass "auto: $why"
      else
        fail "auto: measured rejection: $why"
      fi ;;
    silent)
      local st
      st=$(sij meta auto_status $files | grep -c "no plan")
      if [ "$st" = "$n" ]; then pass "auto: auto_status says 'no plan' on every rank ($n)"
      else fail "auto: auto_status says 'no plan' on $st of $n ranks"; fi
      if grep -qi "mismatch on communicator" "$work/auto.err"; then
        fail "auto: the vgpu saw a collective out of order"
      fi ;;
    busy)
      local s0 s1
      s0=$(sij meta auto_status $files | awk '$1 == 0' | grep -c "cannot listen")
      s1=$(sij meta auto_status $files | awk '$1 == 1' | grep -c "another rank will hold no plan")
      if [ "$s0" = 1 ] && [ "$s1" = 1 ]; then
        pass "auto: rank 0 could not plan, rank 1 gave up on its word (auto_status)"
      else
        fail "auto: auto_status: $(sij meta auto_status $files | tr '\n' ' ')"
      fi ;;
  esac
}

# auto_sync_rec: auto mode on TP=2 x DP=2 llama-tiny, 12 iterations (a rank that diverges
# in iteration 2 stops recording after iteration 5), where one rank adds a
# host synchronisation of its own while auto mode is still recording (WL_INJECT=sync@ITER:
# RANK/POINT; SI_SYNC_SPECS, default the five below, issue 27). Each run must be exact, every
# rank must switch at one iteration, pair after it (paired_groups > 0 on every rank), and no
# vote may time out. Before the fix (profile_rec.c: a segment starts with its first two ops;
# the iterations recorded counted from where the period stops repeating) no rank switched in
# any of the five: the diverging rank stopped recording on a period rotated by one segment
# (the workload's end-of-iteration event record has its start record's signature), so its
# boundaries came one synchronisation before its peers' and the switch round had no decision.
scenario_auto_sync_rec() {
  local args=(--model llama-tiny --tp 2 --dp 2 --gbs 8 --mbs 1 --iters 12)
  local specs=${SI_SYNC_SPECS:-sync@1:1/fwd sync@0:1/bwd sync@1:0/end sync@1:1/start sync@2:1/fwd0}
  wl_run base 4 WL_INJECT=none -- "${args[@]}"
  run_ok base || return
  local spec i=0
  for spec in $specs; do
    i=$((i + 1))
    wl_run auto$i 4 WL_INJECT="$spec" DHELIX_MODE=auto "LD_PRELOAD=$shim" DHELIX_STATS=json \
      "DHELIX_STATS_FILE=$work/auto$i.stats.%p.json" -- "${args[@]}"
    run_ok auto$i base || continue
    local sw to np pg
    sw=$(sij meta auto_switch_iteration $(stats_files auto$i) | awk '$1 != "-" {print $2}' | sort -u | tr '\n' ' ')
    to=$(sij meta agree_timeouts $(stats_files auto$i) | awk '{s += ($2 == "-" ? 0 : $2)} END {print s + 0}')
    np=$(sij meta paired_groups $(stats_files auto$i) | awk '$1 != "-" && $2 > 0 {n++} END {print n + 0}')
    pg=$(sij meta paired_groups $(stats_files auto$i) | awk '$1 != "-" {printf "%s ", $2}')
    if [ "$sw" != "-1 " ] && [ "$(echo "$sw" | wc -w)" = 1 ] && [ "$to" = 0 ] && [ "$np" = 4 ] &&
       ! grep -q "agreement between ranks broke" "$work/auto$i.err"; then
      pass "auto ($spec): exact, every rank switched at iteration $sw and paired (paired_groups $pg), no vote timed out"
    else
      fail "auto ($spec): switch iterations per rank: $sw (expected one, not -1), votes timed out: $to, paired_groups per rank: $pg" \
           "$(sij meta auto_status $(stats_files auto$i) | tr '\n' ';')"
    fi
  done
}

# fullmem_1m fullmem_64m: a job sized to fill the device (tests/si/e2e_fullmem.sh).
# shellcheck source=tests/si/e2e_fullmem.sh
. "$root/tests/si/e2e_fullmem.sh"

# ---- main ----

case $scenario in
  tp_sp) set -- si 2 1 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 ;;
  tp_sp_init) export SI_PROFILE_FULL=1
              set -- si 2 1 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 --init-per-param ;;
  tp_sp_big) set -- si 2 1 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 --hidden 256 --ffn 1024 --seq 128 ;;
  pp_1f1b) set -- si 2 0 --model gpt-tiny --pp 2 --gbs 4 --mbs 1 --iters 5 ;;
  pp_tp) set -- si 4 0 --model gpt-tiny --tp 2 --pp 2 --gbs 4 --mbs 1 --iters 5 ;;
  cp) set -- si 2 1 --model llama-tiny --cp 2 --gbs 4 --mbs 1 --iters 5 ;;
  # Megatron's interleaved 1F1B (--vpp, tests/workloads/src/schedule_vpp.c) and the
  # non-interleaved run of the same model (pp_vpp, pp4_tp_vpp, pp4_tp_vpp_nooverlap in
  # CTest, the rest for measuring).
  pp_tp_l4) set -- si 4 0 --model gpt-tiny --layers 4 --tp 2 --pp 2 --gbs 4 --mbs 1 --iters 5 ;;
  pp_vpp) set -- ppmoves 4 1 --model gpt-tiny --layers 4 --tp 2 --pp 2 --vpp 2 --gbs 4 --mbs 1 --iters 5 ;;
  # Context parallelism under the interleaved schedule: the ring exchange (a group of a send
  # and a receive) matched per peer by the planner's proof, the posts moved (docs/planner.md).
  cp_pp_vpp) set -- ppmoves 8 1 --model llama-tiny --layers 4 --tp 2 --cp 2 --pp 2 --vpp 2 --gbs 4 --mbs 1 --iters 5 ;;
  pp4_l8) set -- si 4 0 --model gpt-tiny --layers 8 --pp 4 --gbs 8 --mbs 1 --iters 5 ;;
  pp4_vpp) set -- si 4 0 --model gpt-tiny --layers 8 --pp 4 --vpp 2 --gbs 8 --mbs 1 --iters 5 ;;
  pp4_vpp_nooverlap)
    set -- si 4 0 --model gpt-tiny --layers 8 --pp 4 --vpp 2 --no-overlap-p2p-communication --gbs 8 --mbs 1 --iters 5 ;;
  pp4_tp_vpp) set -- ppmoves 8 1 --model gpt-tiny --layers 8 --tp 2 --pp 4 --vpp 2 --gbs 8 --mbs 1 --iters 5 ;;
  pp4_tp_vpp_nooverlap)
    set -- si 8 0 --model gpt-tiny --layers 8 --tp 2 --pp 4 --vpp 2 --no-overlap-p2p-communication --gbs 8 --mbs 1 --iters 5 ;;
  pp4_tp_l8) set -- si 8 0 --model gpt-tiny --layers 8 --tp 2 --pp 4 --gbs 8 --mbs 1 --iters 5 ;;
  # The data-parallel reduction runs in the last backward, which has no next forward to pair
  # with (the optimizer needs its result): nothing for SI to hide; exactness is checked.
  dp_ogr) set -- si 2 0 --model gpt-tiny --dp 2 --overlap-grad-reduce --gbs 8 --mbs 1 --iters 5 ;;
  moe_ep) set -- si 2 0 --model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 5 ;;
  # Larger, top-2 routing: some expert gets no token in some micro-batch and its copies are
  # skipped (as PyTorch skips empty chunks), so iterations differ in op count.
  moe_ep_dyn) set -- dyn 2 0 --model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 8 --hidden 256 --ffn 256 --seq 128 ;;
  desync_extra | desync_missing | desync_shape) set -- desync "${scenario#desync_}" ;;
  bad_plan_json | bad_plan_version | bad_plan_model | bad_plan_layout | bad_plan_world | bad_plan_truncated)
    set -- bad_plan "${scenario#bad_plan_}" ;;
  inject_stress) set -- inject_stress ;;
  jitter) set -- jitter ;;
  fullmem_1m) set -- fullmem 1048576 1m ;;
  fullmem_64m) set -- fullmem 67108864 64m ;;
  fullmem_bench) set -- fullmem_bench ;;
  auto_sync_rec) set -- auto_sync_rec ;;
  share_mem) set -- share_mem ;;
  mem_bound) set -- mem_bound ;;
  rotated_plan) set -- rotated_plan ;;
  agree_silent) set -- agree_silent ;;
  diverge_tpdp | diverge_pp) set -- diverge "${scenario#diverge_}" ;;
  sweep_tpdp_plan_a | sweep_tpdp_plan_b | sweep_tpdp_auto_a | sweep_tpdp_auto_b | \
  sweep_vpp_plan_a | sweep_vpp_plan_b | sweep_vpp_auto_a | sweep_vpp_auto_b)
    IFS=_ read -r _ c m p <<<"$scenario"; set -- sweep "$c" "$m" "$p" ;;
  # DHELIX_MODE=auto (scenario_auto): the si configurations with 8 iterations.
  auto_tp_sp) set -- auto 2 0 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 8 ;;
  auto_tp_sp_init) set -- auto 2 0 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 8 --init-per-param ;;
  auto_pp_vpp) set -- auto 4 0 --model gpt-tiny --layers 4 --tp 2 --pp 2 --vpp 2 --gbs 4 --mbs 1 --iters 12 ;;
  auto_pp4_tp_vpp_nooverlap)
    set -- auto 8 0 --model gpt-tiny --layers 8 --tp 2 --pp 4 --vpp 2 --no-overlap-p2p-communication --gbs 8 --mbs 1 --iters 8 ;;
  auto_cp) set -- auto 2 0 --model llama-tiny --cp 2 --gbs 4 --mbs 1 --iters 8 ;;
  auto_moe_ep) set -- auto 2 0 --model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 8 ;;
  auto_moe_ep_dyn) set -- auto 2 0 --model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 12 --hidden 256 --ffn 256 --seq 128 ;;
  auto_tpdp) set -- auto 4 0 --model gpt-tiny --tp 2 --dp 2 --dist-opt --overlap-grad-reduce --gbs 8 --mbs 1 --iters 8 ;;
  auto_cache) set -- auto 2 1 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 8 ;;
  # A plan that does not help (scenario_auto_off).
  auto_reject | auto_silent | auto_busy) set -- auto_off "${scenario#auto_}" ;;
  auto_measured) device=$root/tests/si/a40-div64-interfere.json; set -- auto_off measured ;;
  # Where the plan pairs nothing (pipeline stages, the data-parallel reduction): auto mode
  # does not use it, says why, and stays exact.
  auto_pp_1f1b) set -- auto 2 0 --model gpt-tiny --pp 2 --gbs 4 --mbs 1 --iters 8 ;;
  auto_pp_tp) set -- auto 4 0 --model gpt-tiny --tp 2 --pp 2 --gbs 4 --mbs 1 --iters 8 ;;
  auto_dp_ogr) set -- auto 2 0 --model gpt-tiny --dp 2 --overlap-grad-reduce --gbs 8 --mbs 1 --iters 8 ;;
  *)
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    echo "e2e: unknown scenario '${scenario}'" >&2
    exit 2 ;;
esac
need "$wl"
need "$shim_lib"
need "$build/vgpu/lib/libcudart.so.13"
[ "$1" = inject_stress ] || need "$dhelix"
# Two runs of one scenario (two ctest invocations in one build tree) would share $work:
# the second waits for the first.
mkdir -p "$(dirname "$work")"
exec 9>"$work.lock"
flock 9
rm -rf "$work"
mkdir -p "$work"
echo "si e2e: $scenario (device $device), files in $work"
t_start=$SECONDS
kind=$1
shift
"scenario_$kind" "$@"

echo "si e2e: $scenario: $((SECONDS - t_start)) s wall"
if [ ${#failures[@]} -gt 0 ]; then
  echo "si e2e: $scenario FAILED (${#failures[@]} checks):"
  printf '  - %s\n' "${failures[@]}"
  echo "  files: $work"
  exit 1
fi
echo "si e2e: $scenario passed"
