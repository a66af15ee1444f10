#!/usr/bin/env bash
# tests/si/e2e.sh SCENARIO: one end-to-end Strand Interleaving scenario on the vgpu, the way
# a user runs the product: the Megatron-shaped workload without the shim (the baseline),
# in profile mode, `dhelix plan` on the profiles, then with the plan. What it judges:
#   - exactness: every iteration's loss bit-identical ("loss_hex") to the baseline's;
#   - no data race: every run has VGPU_HAZARD=abort (status 86 at the first hazard);
#   - the plan run interleaved: in DHELIX_STATS, "plan" has paired_groups > 0 and
#     iterations > 0 on every rank;
#   - time: "config X: baseline T0 ms, SI T1 ms, speedup S" (virtual time, mean of the
#     steady iterations); configurations whose communication is exposed require S > 1.
# Scenarios (2 ranks unless noted):
#   tp_sp pp_1f1b pp_tp (4 ranks) cp dp_ogr moe_ep       baseline -> profile -> plan -> SI
#   moe_ep_dyn (MoE whose iterations differ in op count), tp_sp_big (tp_sp, hidden 256,
#   sequence 128; with SI_DEVICE=a40 as well): not in CTest, for diagnosis
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
    return any(g["a"][1] > 0 and g["b"][1] > 0 for g in sec["groups"])
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
    pairs = any(g["a"][1] > 0 and g["b"][1] > 0 for g in sec["groups"])
    good = 0 <= ran <= planned + planned // 4 + 1 and (pairs or ran <= 1)
    ok &= good
    said.append("rank %d: held back %d ops at most, planned %d%s" % (rank, ran, planned, "" if good else " (WRONG)"))
print("; ".join(said))
sys.exit(0 if ok else 1)
PY
}

si_env() { # the plan run's shim settings
  echo "DHELIX_PLAN=$1" "LD_PRELOAD=$shim" DHELIX_STATS=json "DHELIX_STATS_FILE=$work/$2.stats.%p.json"
}

need() { [ -e "$1" ] || { echo "e2e: $1 not found: build first (cmake --build ${build})" >&2; exit 2; }; }

# ---- scenarios ----

# A configuration through the whole pipeline.
scenario_si() {
  local n=$1 want_speedup=$2
  shift 2
  local args=("$@")
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  profile prof "$n" -- "${args[@]}" || return
  run_ok prof base
  make_plan prof || return
  # shellcheck disable=SC2046
  wl_run si "$n" $(si_env "$work/plan.json" si) -- "${args[@]}"
  run_ok si base || return
  if plan_stats si "$n"; then
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
  profile prof "$n" -- "${args[@]}" || return
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
print(sum(1 for o in s["ops"] if o["strand"] == 1 and "AllReduce" in o["name"]))' "$work/plan.json")
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

# ---- main ----

case $scenario in
  tp_sp) set -- si 2 1 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 ;;
  tp_sp_big) set -- si 2 1 --model gpt-tiny --tp 2 --gbs 4 --mbs 1 --iters 5 --hidden 256 --ffn 1024 --seq 128 ;;
  pp_1f1b) set -- si 2 0 --model gpt-tiny --pp 2 --gbs 4 --mbs 1 --iters 5 ;;
  pp_tp) set -- si 4 0 --model gpt-tiny --tp 2 --pp 2 --gbs 4 --mbs 1 --iters 5 ;;
  cp) set -- si 2 1 --model llama-tiny --cp 2 --gbs 4 --mbs 1 --iters 5 ;;
  # The data-parallel reduction runs in the last backward, which has no next forward to pair
  # with (the optimizer needs its result): nothing for SI to hide; exactness is checked.
  dp_ogr) set -- si 2 0 --model gpt-tiny --dp 2 --overlap-grad-reduce --gbs 8 --mbs 1 --iters 5 ;;
  moe_ep) set -- si 2 0 --model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 5 ;;
  # Larger, top-2 routing: some expert gets no token in some micro-batch and its copies are
  # skipped (as PyTorch skips empty chunks), so iterations differ in op count.
  moe_ep_dyn) set -- si 2 0 --model moe-tiny --dp 2 --ep 2 --gbs 8 --mbs 1 --iters 5 --hidden 256 --ffn 256 --seq 128 ;;
  desync_extra | desync_missing | desync_shape) set -- desync "${scenario#desync_}" ;;
  bad_plan_json | bad_plan_version | bad_plan_model | bad_plan_layout | bad_plan_world | bad_plan_truncated)
    set -- bad_plan "${scenario#bad_plan_}" ;;
  inject_stress) set -- inject_stress ;;
  jitter) set -- jitter ;;
  rotated_plan) set -- rotated_plan ;;
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
