# tests/si/e2e_fullmem.sh: the fullmem scenarios of tests/si/e2e.sh (sourced by it; uses its
# helpers). A job sized to fill the device (issue 27, DESIGN.md invariant 11): what runs
# without the shim runs with it.
#
# The workload's demo configuration (scripts/demo: TP=2 with sequence parallelism x DP=2,
# distributed optimizer, overlapped gradient reduction, 4 ranks) runs first on the usual
# device to measure its peak (the busiest rank's, "peak_mem_bytes"); then on the same device
# with mem_gib set to that peak plus HEADROOM bytes (fullmem_1m: 1 MiB, fullmem_64m: 64 MiB):
#   - the baseline there (the device is big enough for the program);
#   - passthrough, stress with three seeds, profile, the plan made from that profile, and
#     auto mode: each finishes, every loss bit-identical to the baseline's, no hazard;
#   - the shim takes no workspace before pairing begins: stress and profile mode (which
#     defer every GEMM and replay it through the dispatcher, but never pair) report
#     workspace_peak_bytes 0 on every rank (before issue 27 the shim took two 64 MiB
#     workspaces at the first GEMM, and these runs failed with out of memory);
#   - the plan run pairs (paired_groups > 0 on every rank); where strand 1's workspace did
#     not fit (workspace_refused > 0), the rank said so in exactly one line, and its
#     workspace, where it fit, has the framework's size (below the 64 MiB it used to be);
#   - fullmem_1m also runs stress and the plan at peak + 64 KiB, where what pairing holds
#     passes the device: the plan run's allocations fail and are retried after the shim
#     gives memory back (mem_givebacks > 0, pairs given up by a "no" vote,
#     mem_device_vetoes > 0, none failed twice, one line per rank at most), exact.

# fullmem_device OUT HEADROOM: the device profile $device with mem_gib = peak + HEADROOM.
fullmem_device() {
  python3 - "$device" "$fullmem_peak" "$2" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["mem_gib"] = (int(sys.argv[2]) + int(sys.argv[3])) / 2.0**30
d["_what"] = "the si device with its memory cut to the baseline's peak plus %s bytes" % sys.argv[3]
json.dump(d, open(sys.argv[4], "w"), indent=1)
PY
}

# fullmem_meta NAME KEY: "rank value" lines of KEY from NAME's DHELIX_STATS files.
fullmem_meta() {
  # shellcheck disable=SC2046
  sij meta "$2" $(stats_files "$1")
}

# fullmem_no_ws NAME: no rank of run NAME held a workspace of the shim.
fullmem_no_ws() {
  local bad
  bad=$(fullmem_meta "$1" workspace_peak_bytes | awk '$2 != 0' | tr '\n' ' ')
  if [ -z "$(fullmem_meta "$1" workspace_peak_bytes)" ]; then
    fail "$1: no workspace_peak_bytes in DHELIX_STATS"
  elif [ -n "$bad" ]; then
    fail "$1: the shim allocated a workspace although nothing pairs (rank bytes: $bad)"
  else
    pass "$1: no workspace of the shim's on any rank (nothing pairs)"
  fi
}

# fullmem_plan_run NAME: the plan run paired on every rank, and said once where its
# workspace did not fit.
fullmem_plan_run() {
  local name=$1 pg ws ref r lines bad=()
  pg=$(fullmem_meta "$name" paired_groups | awk '$2 <= 0' | tr '\n' ' ')
  [ -z "$pg" ] && pass "$name: paired groups on every rank" ||
    fail "$name: a rank paired nothing (rank groups: $pg)"
  while read -r r ref; do
    lines=$(rank_lines "$work/$name.err" "$r" "no room for strand 1's cuBLAS workspace" | wc -l)
    ws=$(fullmem_meta "$name" workspace_peak_bytes | awk -v r="$r" '$1 == r { print $2 }')
    if [ "$ref" -gt 0 ] && [ "$lines" != 1 ]; then
      bad+=("rank $r: workspace refused $ref times, said so in $lines lines (expected 1)")
    elif [ "$ref" = 0 ] && { [ "$ws" -le 0 ] || [ "$ws" -ge $((64 << 20)) ]; }; then
      bad+=("rank $r: workspace $ws bytes (expected the framework's size, 0 < size < 64 MiB)")
    fi
  done < <(fullmem_meta "$name" workspace_refused)
  [ ${#bad[@]} = 0 ] && pass "$name: strand 1's workspace: $(fullmem_meta "$name" workspace_peak_bytes | awk '{printf "rank %s %s B; ", $1, $2}')refused $(fullmem_meta "$name" workspace_refused | awk '{printf "%s ", $2}')" ||
    fail "$name: ${bad[*]}"
}

scenario_fullmem() {
  local head=$1 n=4 tag=$2 seed
  local args=(--model gpt-tiny --tp 2 --dp 2 --dist-opt --overlap-grad-reduce --gbs 8 --mbs 1 --iters 8)
  wl_run base "$n" -- "${args[@]}"
  run_ok base || return
  fullmem_peak=$(sij field "$work/base.out" peak_mem_bytes)
  [ -n "$fullmem_peak" ] || { fail "base: no peak_mem_bytes in its summary"; return; }
  fullmem_device "$work/device.json" "$head"
  echo "      (device: the baseline's peak $fullmem_peak bytes + $head: $work/device.json)"
  device=$work/device.json
  local st=(LD_PRELOAD="$shim" DHELIX_STATS=json)
  wl_run "base_$tag" "$n" -- "${args[@]}"
  run_ok "base_$tag" base || return
  wl_run "pt_$tag" "$n" DHELIX_MODE=passthrough "${st[@]}" "DHELIX_STATS_FILE=$work/pt_$tag.stats.%p.json" -- "${args[@]}"
  run_ok "pt_$tag" base
  for seed in 1 2 3; do
    wl_run "stress${seed}_$tag" "$n" DHELIX_MODE=stress DHELIX_SEED=$seed "${st[@]}" \
      "DHELIX_STATS_FILE=$work/stress${seed}_$tag.stats.%p.json" -- "${args[@]}"
    run_ok "stress${seed}_$tag" base && fullmem_no_ws "stress${seed}_$tag"
  done
  profile "prof_$tag" "$n" DHELIX_STATS=json "DHELIX_STATS_FILE=$work/prof_$tag.stats.%p.json" -- "${args[@]}" || return
  run_ok "prof_$tag" base && fullmem_no_ws "prof_$tag"
  make_plan "prof_$tag" || return
  # shellcheck disable=SC2046
  wl_run "plan_$tag" "$n" $(si_env "$work/plan.json" "plan_$tag") -- "${args[@]}"
  run_ok "plan_$tag" base && fullmem_plan_run "plan_$tag"
  wl_run "auto_$tag" "$n" DHELIX_MODE=auto "${st[@]}" "DHELIX_STATS_FILE=$work/auto_$tag.stats.%p.json" -- "${args[@]}"
  if run_ok "auto_$tag" base; then
    local sw
    sw=$(fullmem_meta "auto_$tag" auto_switch_iteration | awk '{print $2}' | sort -u | tr '\n' ' ')
    echo "      (auto_$tag: switch iteration on the ranks: $sw)"
  fi
  [ "$tag" = 1m ] || return 0
  # Tighter still: what stress holds passes the device, and the shim must give it back.
  fullmem_device "$work/device64k.json" 65536
  device=$work/device64k.json
  wl_run base_64k "$n" -- "${args[@]}"
  run_ok base_64k base || return
  wl_run stress_64k "$n" DHELIX_MODE=stress DHELIX_SEED=1 "${st[@]}" \
    "DHELIX_STATS_FILE=$work/stress_64k.stats.%p.json" -- "${args[@]}"
  run_ok stress_64k base
  # shellcheck disable=SC2046
  wl_run plan_64k "$n" $(si_env "$work/plan.json" plan_64k) -- "${args[@]}"
  run_ok plan_64k base || return
  local gb gf vt said
  gb=$(fullmem_meta plan_64k mem_givebacks | awk '{s += $2} END {print s + 0}')
  gf=$(fullmem_meta plan_64k mem_giveback_failed | awk '{s += $2} END {print s + 0}')
  vt=$(fullmem_meta plan_64k mem_device_vetoes | awk '{s += $2} END {print s + 0}')
  said=$(grep -c "device memory: an allocation of [0-9]* bytes failed with" "$work/plan_64k.err")
  if [ "$gb" -gt 0 ] && [ "$gf" = 0 ] && [ "$vt" -gt 0 ] && [ "$said" -ge 1 ] && [ "$said" -le "$n" ]; then
    pass "plan_64k: $gb failed allocations retried after the shim gave memory back ($vt pairs given up by a no vote), none failed again, said on $said ranks"
  else
    fail "plan_64k: givebacks $gb (expected > 0), failed again $gf (expected 0), no votes $vt (expected > 0), lines $said (expected one per rank that gave back)"
  fi
  # Each round of the give-back (giveback.c) is said once on each rank that needed it.
  fullmem_bench_said plan_64k mem_givebacks "device memory: an allocation of [0-9]* bytes failed with"
  fullmem_bench_said plan_64k mem_giveback_pair "gave up the pairing under way"
}

# fullmem_bench: a bench configuration at full depth on a device its job fills (issue 27).
# gpt-6.7b-a40 (tests/workloads/src/presets.c: TP=4 x DP=16, 32 layers, the preset's global
# batch; timing-only, one representative rank; scripts/bench's configuration of that name),
# 4 iterations, on the preset's device (the vgpu's a40) with its memory cut to the baseline's
# peak plus 1% and plus 0.5% ({"base": "a40", "mem_gib": ...}). The plan pairs the backward
# of micro-batch i with the forward of i + 1, which holds about 80 MiB of frees beyond the
# baseline's peak at each pair's peak (scripts/bench: +0.6%):
#   - at + 1% (139 MB of room) the plan fits: nothing of it is given up (no pair given up
#     at a failed allocation, none by the bound, the workspace kept, none refused), and SI
#     gains: speedup > 1 (SI_FULLMEM_MIN_GAIN), baseline and SI side by side on that device;
#   - at + 0.5% (69.5 MB) it does not: the shim gives pairs up (mem_bound_vetoes,
#     mem_giveback_pair, mem_device_vetoes in DHELIX_STATS: some > 0), says so once per rank
#     and kind, each line with how much memory it lacked, and SI loses at most 0.5% to the
#     baseline on that device (what giving up costs: measured 0.9987x);
#   - every run exits 0 without a hazard, the losses as the baseline's, and the baselines on
#     the cut devices take the time of the a40's (the device file kept its rates).
fullmem_bench_stat() { # NAME KEY: the sum over the ranks
  fullmem_meta "$1" "$2" | awk '{s += $2} END {print s + 0}'
}

fullmem_bench_said() { # NAME KEY PATTERN: every rank whose KEY > 0 said PATTERN exactly once
  local name=$1 key=$2 pat=$3 r v n bad=()
  while read -r r v; do
    n=$(rank_lines "$work/$name.err" "$r" "$pat" | wc -l)
    if [ "$v" -gt 0 ] && [ "$n" != 1 ]; then
      bad+=("rank $r: $key $v, $n lines '$pat' (expected 1)")
    elif [ "$v" = 0 ] && [ "$n" != 0 ]; then
      bad+=("rank $r: $key 0, but $n lines '$pat'")
    elif [ "$v" -gt 0 ] && ! rank_lines "$work/$name.err" "$r" "$pat" | grep -q "lacked [1-9]"; then
      bad+=("rank $r: its line '$pat' does not say how much memory it lacked")
    fi
  done < <(fullmem_meta "$name" "$key")
  if [ ${#bad[@]} = 0 ]; then
    pass "$name: $key $(fullmem_bench_stat "$name" "$key"), said once per rank where > 0"
  else
    fail "$name: ${bad[*]}"
    diag "$name" 8
  fi
}

scenario_fullmem_bench() {
  local args=(--preset gpt-6.7b-a40 --layers 32 --iters 4)
  device=a40
  wl_run base 1 -- "${args[@]}"
  run_ok base || return
  fullmem_peak=$(sij field "$work/base.out" peak_mem_bytes)
  [ -n "$fullmem_peak" ] || { fail "base: no peak_mem_bytes in its summary"; return; }
  local t0 tag pct st=(LD_PRELOAD="$shim" DHELIX_STATS=json)
  t0=$(sij ms "$work/base.out")
  for tag in 1pct 05pct; do
    case $tag in 1pct) pct=1.0 ;; 05pct) pct=0.5 ;; esac
    python3 - "$fullmem_peak" "$pct" "$work/device_$tag.json" <<'PY'
import json, sys
peak, pct = int(sys.argv[1]), float(sys.argv[2])
json.dump({"base": "a40", "mem_gib": peak * (1 + pct / 100) / 2.0**30,
           "_what": "the vgpu's a40 with its memory cut to the baseline's peak + %s%%" % pct},
          open(sys.argv[3], "w"), indent=1)
PY
    device=$work/device_$tag.json
    echo "      (device $device: the baseline's peak $fullmem_peak bytes + $pct%)"
    wl_run "base_$tag" 1 -- "${args[@]}"
    run_ok "base_$tag" base || return
    local tb
    tb=$(sij ms "$work/base_$tag.out")
    if [ "$tb" = "$t0" ]; then
      pass "base_$tag: $tb ms, the a40's time (the device file kept its rates)"
    else
      fail "base_$tag: $tb ms on the cut device, $t0 ms on the a40: its rates changed"
    fi
    profile "prof_$tag" 1 -- "${args[@]}" || return
    run_ok "prof_$tag" base
    make_plan "prof_$tag" || return
    mv "$work/plan.json" "$work/plan_$tag.json"
    wl_run "si_$tag" 1 DHELIX_PLAN="$work/plan_$tag.json" "${st[@]}" \
      "DHELIX_STATS_FILE=$work/si_$tag.stats.%p.json" -- "${args[@]}"
    run_ok "si_$tag" base || return
    local t1 s gave
    t1=$(sij ms "$work/si_$tag.out")
    s=$(awk -v a="$tb" -v b="$t1" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    echo "config gpt-6.7b-a40 at peak + $pct%: baseline $tb ms, SI $t1 ms, speedup $s"
    echo "$tag $tb $t1 $s" >>"$work/speedup"
    gave=$(( $(fullmem_bench_stat "si_$tag" mem_bound_vetoes) + $(fullmem_bench_stat "si_$tag" mem_giveback_pair) + \
             $(fullmem_bench_stat "si_$tag" mem_device_vetoes) + $(fullmem_bench_stat "si_$tag" mem_giveback_ws) + \
             $(fullmem_bench_stat "si_$tag" workspace_refused) ))
    fullmem_bench_said "si_$tag" mem_givebacks "device memory: an allocation of [0-9]* bytes failed with"
    fullmem_bench_said "si_$tag" mem_giveback_pair "gave up the pairing under way"
    fullmem_bench_said "si_$tag" mem_bound_vetoes "device memory: pairing would hold"
    fullmem_bench_said "si_$tag" workspace_refused "no room for strand 1's cuBLAS workspace"
    local failed
    failed=$(fullmem_bench_stat "si_$tag" mem_giveback_failed)
    [ "$failed" = 0 ] && pass "si_$tag: no allocation failed after the give-back" ||
      fail "si_$tag: $failed allocations failed after the give-back (the program's own failure: the baseline had none)"
    if [ "$tag" = 1pct ]; then
      [ "$gave" = 0 ] && pass "si_1pct: the plan fits: nothing of it given up" ||
        fail "si_1pct: $gave pairs or workspaces given up where the plan fits (DHELIX_STATS: mem_bound_vetoes, mem_giveback_pair, mem_device_vetoes, mem_giveback_ws, workspace_refused)"
      if awk -v s="$s" -v m="${SI_FULLMEM_MIN_GAIN:-1.0}" 'BEGIN { exit !(s > m) }'; then
        pass "si_1pct: SI gains where its plan fits: speedup $s > ${SI_FULLMEM_MIN_GAIN:-1.0}"
      else
        fail "si_1pct: speedup $s is not > ${SI_FULLMEM_MIN_GAIN:-1.0} (baseline $tb ms, SI $t1 ms)"
      fi
    else
      [ "$gave" -gt 0 ] && pass "si_05pct: the plan does not fit: $gave pairs or workspaces given up, counted in DHELIX_STATS" ||
        fail "si_05pct: nothing given up, although the plan's pairs hold more than the device's room (expected mem_bound_vetoes, mem_giveback_pair, mem_device_vetoes, mem_giveback_ws or workspace_refused > 0)"
      if awk -v s="$s" 'BEGIN { exit !(s >= 0.995) }'; then
        pass "si_05pct: speedup $s >= 0.995 (what was given up costs at most 0.5%)"
      else
        fail "si_05pct: speedup $s < 0.995 (baseline $tb ms, SI $t1 ms)"
      fi
    fi
  done
}
