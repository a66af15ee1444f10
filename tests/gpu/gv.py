#!/usr/bin/env python3
"""gv.py: the JSON side of scripts/gpu-validate (the script runs things; this reads what
they wrote, compares, computes and reports). Standard library only.

    gv.py same wl|torch REF OTHER...      bit-identical losses (workload: loss_hex of every
                                          iteration; torch: losses_hex and param_sha256)
    gv.py wl-time FILE [--skip K]         median iteration time (ms) after the first K
    gv.py calibrate COMP.json COMP.err --sms S --ratio R
                                          an emulation SMS:US whose time per iteration is R
                                          x the solo compute time of COMP
    gv.py stats FILE [--mode M] [--deferred] [--barriers] [--paired] [--api PREFIX]...
                                          checks a DHELIX_STATS=json report
    gv.py wl-numbers OUT --comp C.json --base B.json... [--si S.json...] --base-err E
                     --sms S --sm-count N [--passthrough P.json] [--strands T.json] [--skip K]
                                          speedup against the ideal bound
    gv.py torch-numbers OUT BASE.json NAME=FILE...   step-time ratios
    gv.py report WORK OUTDIR             gpu-validate.md and gpu-validate.json
Exit status: 0 when the check holds, 1 when it does not, 2 on bad input.
"""
import glob
import json
import os
import re
import statistics
import sys


def objects(path):
    """Every JSON object in a file, in order (stats files are appended to by every process
    that loaded the shim; outputs may have lines around the JSON)."""
    with open(path) as f:
        text = f.read()
    # C's printf writes a NaN loss as nan or -nan, which JSON does not have.
    text = re.sub(r'(?<=[:\[,] )(-?)(nan|inf)\b', lambda m: "NaN" if m.group(2) == "nan" else m.group(1) + "Infinity",
                  text)
    dec, objs, i = json.JSONDecoder(), [], 0
    while True:
        i = text.find("{", i)
        if i < 0:
            break
        try:
            obj, end = dec.raw_decode(text, i)
            objs.append(obj)
            i = end
        except ValueError:
            i += 1
    if not objs:
        raise ValueError("%s: no JSON object" % path)
    return objs


def load(path):
    """The last JSON object in a file."""
    return objects(path)[-1]


def load_stats(path):
    """The DHELIX_STATS report of the process that made the most calls: the program, not a
    helper that inherited LD_PRELOAD (an MPI singleton's daemon, a wrapper)."""
    reps = [o for o in objects(path) if isinstance(o.get("rows"), list)]
    if not reps:
        raise ValueError("%s: no DHELIX_STATS report" % path)
    return max(reps, key=lambda o: sum(r.get("calls", 0) for r in o["rows"]))


def emu_line(path):
    """The workload's 'emulated communication {...}' summary from its stderr."""
    try:
        with open(path) as f:
            for line in f:
                if "workload: emulated communication {" in line:
                    return json.loads(line[line.index("{"):])
    except OSError:
        pass
    return {}


def wl_losses(j):
    return [it.get("loss_hex", repr(it.get("loss"))) for it in j.get("iterations", [])]


def wl_times(j, skip):
    t = [it["time_ms"] for it in j.get("iterations", [])]
    return t[skip:] if len(t) > skip else t


def cmd_same(a):
    kind, ref, others = a[0], a[1], a[2:]
    r = load(ref)
    bad = 0
    for o in others:
        j = load(o)
        if kind == "wl":
            x, y = wl_losses(r), wl_losses(j)
            ok = bool(x) and x == y
            what = "losses %s" % (" ".join(y[:3]) + (" ..." if len(y) > 3 else ""))
        else:
            ok = bool(r.get("losses_hex")) and r.get("losses_hex") == j.get("losses_hex") \
                and r.get("param_sha256") == j.get("param_sha256")
            what = "losses and parameter SHA-256 %s" % j.get("param_sha256", "?")[:16]
        print("%s %s: %s" % ("identical:" if ok else "DIFFERENT:", os.path.basename(o), what))
        if not ok:
            if kind == "wl":
                print("  reference %s: %s" % (os.path.basename(ref), " ".join(wl_losses(r))))
                print("  this run  %s: %s" % (os.path.basename(o), " ".join(wl_losses(j))))
            else:
                print("  reference: %s %s" % (r.get("losses_hex"), r.get("param_sha256")))
                print("  this run:  %s %s" % (j.get("losses_hex"), j.get("param_sha256")))
            bad += 1
    return 1 if bad else 0


def opt(a, name, default=None, many=False):
    vals = [a[i + 1] for i in range(len(a) - 1) if a[i] == name]
    if many:
        return vals
    return vals[-1] if vals else default


def cmd_wl_time(a):
    print("%.4f" % statistics.median(wl_times(load(a[0]), int(opt(a, "--skip", 2)))))
    return 0


def cmd_calibrate(a):
    comp, err = load(a[0]), emu_line(a[1])
    sms, ratio = int(opt(a, "--sms", 16)), float(opt(a, "--ratio", 0.5))
    iters = len(comp.get("iterations", [])) or 1
    per_iter = err.get("collectives", 0) / iters
    t = statistics.median(wl_times(comp, 2))
    if per_iter <= 0:
        print("calibrate: no emulated collectives in %s" % a[1], file=sys.stderr)
        return 2
    us = ratio * t * 1e3 / per_iter
    print("%d:%.1f" % (sms, us))
    return 0


def cmd_stats(a):
    try:
        s = load_stats(a[0])
    except (OSError, ValueError) as e:
        print("stats: %s" % e)
        return 1
    meta, rows = s.get("meta", {}), s.get("rows", [])
    calls = {r.get("api"): r.get("calls", 0) for r in rows}
    deferred = sum(v for k, v in meta.items() if k.startswith("deferred_") and isinstance(v, (int, float)))
    barriers = meta.get("cross_strand_barriers", 0)
    paired = meta.get("paired_groups", 0)
    nccl_rows = (s.get("nccl") or {}).get("rows", [])
    interleaved = sum(r.get("interleaved", 0) for r in nccl_rows)
    fails = []
    mode = opt(a, "--mode")
    if mode and meta.get("mode") != mode:
        fails.append("mode %s, expected %s (requested %s)" % (meta.get("mode"), mode, meta.get("requested_mode")))
    if "--deferred" in a and not deferred > 0:
        fails.append("no operation deferred: the shim passed everything through")
    if "--barriers" in a and not barriers > 0:
        fails.append("no cross-strand barrier: the strands were never interleaved")
    if "--paired" in a and not paired > 0:
        fails.append("no paired group: no two strands' operations were co-issued")
    seen = []
    for prefix in opt(a, "--api", many=True):
        n = sum(v for k, v in calls.items() if k and k.startswith(prefix))
        seen.append("%s* %d" % (prefix, n))
        if n <= 0:
            fails.append("no %s* call seen by the shim" % prefix)
    plan = ""
    if "plan_iterations" in meta:
        plan = ", %s plan iterations (%s desyncs)" % (meta.get("plan_iterations"), meta.get("plan_desyncs", 0))
    ncalls = sum(v for k, v in calls.items() if k and k.startswith("nccl"))
    print("mode %s, %s calls (%d NCCL), %d deferred, %d paired groups, %d cross-strand barriers, %d NCCL ops "
          "interleaved%s; %s" % (meta.get("mode"), sum(calls.values()), ncalls, deferred, paired, barriers,
                                 interleaved, plan, ", ".join(seen)))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


def cmd_wl_numbers(a):
    out, skip = a[0], int(opt(a, "--skip", 2))
    comp = load(opt(a, "--comp"))
    base = [load(p) for p in opt(a, "--base", many=True)]
    si = [load(p) for p in opt(a, "--si", many=True)]
    emu = emu_line(opt(a, "--base-err"))
    sms, sm_count = int(opt(a, "--sms")), int(opt(a, "--sm-count"))
    iters = len(base[0].get("iterations", [])) or 1
    t_comp = statistics.median(wl_times(comp, skip))
    t_base = statistics.median([t for j in base for t in wl_times(j, skip)])
    t_si = statistics.median([t for j in si for t in wl_times(j, skip)]) if si else None
    t_comm = emu.get("device_us", 0) / 1e3 / iters
    share = min(1.0, sms / sm_count) if sm_count else 0.0
    t_comp_i = t_comp + min(t_comp, t_comm) * share
    ideal = max(t_comp_i, t_comm)
    n = {
        "iteration_ms": {"baseline": t_base, "si": t_si, "solo_compute": t_comp, "solo_comm": t_comm,
                         "compute_with_interference": t_comp_i, "ideal": ideal},
        "speedup": t_base / t_si if t_si else None,
        "ideal_speedup": t_base / ideal if ideal > 0 else None,
        "fraction_of_ideal_gain": (t_base - t_si) / (t_base - ideal) if t_base > ideal else None,
        "emulation": emu,
        "runs": {"baseline": len(base), "si": len(si)},
        "method": "median CUDA-event iteration time (iterations after the first %d) over runs alternating "
                  "baseline and SI; solo compute: the same run with zero-time emulated collectives; "
                  "solo comm: the emulated kernels' own device time per iteration in the baseline; "
                  "compute with interference: solo compute plus the co-running part (at most "
                  "min(compute, comm)) slowed by the emulation's SM share (%d of %d SMs); ideal = "
                  "max(compute with interference, comm)" % (skip, sms, sm_count),
    }
    # Peak device memory (issue 15): the default pool's high-water mark of memory in use
    # (cudaMemPoolAttrUsedMemHigh) and what cudaMemGetInfo says is in use at the end (the
    # shim's own buffers included), the largest over the runs; None when not reported.
    def most(runs, key):
        v = [j.get(key) for j in runs if isinstance(j.get(key), (int, float)) and j.get(key) >= 0]
        return max(v) if v else None
    mem = {}
    for key in ("pool_used_high_mib", "device_used_mib"):
        b, s_ = most(base, key), most(si, key) if si else None
        mem[key] = {"baseline": b, "si": s_,
                    "extra_fraction": (s_ - b) / b if b and s_ is not None else None}
    n["peak_memory_mib"] = mem
    for key in ("passthrough", "strands"):
        path = opt(a, "--" + key)
        if path and os.path.exists(path) and os.path.getsize(path):
            n["iteration_ms"][key] = statistics.median(wl_times(load(path), skip))
    if n["iteration_ms"].get("strands"):
        n["speedup_strands_mode"] = t_base / n["iteration_ms"]["strands"]
    with open(out, "w") as f:
        json.dump(n, f, indent=1)
    si_text = "SI %.3f ms: speedup %.3fx" % (t_si, n["speedup"]) if t_si else "no SI run"
    pm = mem["pool_used_high_mib"]
    if pm["baseline"] is not None and pm["si"] is not None:
        si_text += " (peak pool memory in use %.1f -> %.1f MiB, %+.1f%%)" % (
            pm["baseline"], pm["si"], 100 * (pm["extra_fraction"] or 0))
    print("baseline %.3f ms, %s; ideal %.3f ms (compute %.3f, with interference %.3f, comm %.3f): ideal "
          "speedup %.3fx%s" % (t_base, si_text, ideal, t_comp, t_comp_i, t_comm, n["ideal_speedup"] or 0,
                               "; strands mode %.3fx" % n["speedup_strands_mode"] if "speedup_strands_mode" in n
                               else ""))
    return 0


def cmd_torch_numbers(a):
    out, base = a[0], load(a[1])
    n = {"mean_step_ms": {"no_shim": base.get("mean_step_ms")}, "ratio_to_no_shim": {},
         "torch": base.get("torch"), "torch_cuda": base.get("torch_cuda"), "params": base.get("params"),
         "steps": base.get("steps"), "nccl": base.get("nccl")}
    for k in ("framework", "megatron_core", "optimizer", "micro_batches", "device"):
        if k in base:
            n[k] = base[k]
    for spec in a[2:]:
        name, path = spec.split("=", 1)
        j = load(path)
        n["mean_step_ms"][name] = j.get("mean_step_ms")
        if base.get("mean_step_ms"):
            n["ratio_to_no_shim"][name] = j.get("mean_step_ms") / base["mean_step_ms"]
    with open(out, "w") as f:
        json.dump(n, f, indent=1)
    print("step time: " + ", ".join("%s %.3f ms" % (k, v) for k, v in n["mean_step_ms"].items() if v) +
          "; ratio to no shim: " + ", ".join("%s %.3f" % kv for kv in n["ratio_to_no_shim"].items()))
    return 0


# ---- report ----

def read_steps(work):
    steps = []
    try:
        with open(os.path.join(work, "steps.tsv")) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 5:
                    steps.append({"name": p[0], "status": p[1], "seconds": float(p[2]), "description": p[3],
                                  "summary": p[4]})
    except OSError:
        pass
    return steps


def fmt(v):
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def cmd_report(a):
    work, outdir = a[0], a[1]
    meta = load(os.path.join(work, "meta.json"))
    probe = {}
    if os.path.exists(os.path.join(work, "probe.json")):
        try:
            probe = load(os.path.join(work, "probe.json"))
        except ValueError:
            probe = {}
    steps = read_steps(work)
    numbers = {}
    for p in sorted(glob.glob(os.path.join(work, "num.*.json"))):
        numbers[os.path.basename(p)[4:-5]] = load(p)
    done = {s["name"] for s in steps}
    not_reached = [n for n in meta.get("steps_planned", []) if n not in done]
    complete = meta.get("complete", True)
    # A run stopped before its end (the device's time spent) is not a pass, whatever it did.
    # A step the budget left out ("budget") is not a failure, but the headline names it.
    ok = bool(steps) and complete and all(s["status"] in ("pass", "skip", "budget") for s in steps)
    unbudgeted = [s["name"] for s in steps if s["status"] == "budget"]
    rep = dict(meta)
    rep.update({"skipped": False, "ok": ok, "gpu": probe, "steps": steps, "numbers": numbers,
                "failed_steps": [s["name"] for s in steps if s["status"] in ("fail", "timeout")],
                "not_run_for_budget": unbudgeted,
                "not_reached": not_reached if not complete else []})
    with open(os.path.join(outdir, "gpu-validate.json"), "w") as f:
        json.dump(rep, f, indent=1)
    L = ["# gpu-validate", "",
         "%s on %s, %s: **%s** in %.0f s%s%s" % (
             meta.get("date"), meta.get("host"), probe.get("name", "?"),
             "PASS" if ok else ("FAIL" if complete else "INCOMPLETE"), meta.get("total_s", 0),
             " (--quick)" if meta.get("quick") else "",
             ", budget %s s" % meta["budget_s"] if meta.get("budget_s") else ""),
         ""]
    if unbudgeted:
        L += ["Not run, for want of time in the budget: %s." % ", ".join(unbudgeted), ""]
    if not complete:
        L += ["The run has not finished (or was stopped): this report was written after its last "
              "finished step. Not reached: %s." % (", ".join(not_reached) or "none"), ""]
    if meta.get("rehearsal"):
        L += ["A rehearsal on the vgpu (`--vgpu`): it exercises the script; no GPU was used and "
              "every time is virtual.", ""]
    L += ["| | |", "|---|---|"]
    for k, label in (("name", "GPU"), ("cc", "compute capability"), ("sm_count", "SMs"),
                     ("memory_gib", "memory (GiB)"), ("driver_version", "driver (CUDA version)"),
                     ("runtime_version", "CUDA runtime"), ("nccl_version", "NCCL")):
        L.append("| %s | %s |" % (label, fmt(probe.get(k, "?"))))
    for k in ("nvidia_smi", "torch", "cuda_arch", "commit"):
        if meta.get(k):
            L.append("| %s | %s |" % (k, meta[k]))
    L += ["", "| step | result | time (s) | what | summary |", "|---|---|---|---|---|"]
    for s in steps:
        L.append("| %s | %s | %.1f | %s | %s |" % (s["name"], s["status"].upper() if s["status"] in ("fail", "timeout")
                                                  else s["status"], s["seconds"], s["description"],
                                                  s["summary"].replace("|", "/")))
    for sec, n in numbers.items():
        L += ["", "## %s" % sec, "", "```json", json.dumps(n, indent=1), "```"]
    L += ["", "Logs and every run's output: `%s`." % work, ""]
    with open(os.path.join(outdir, "gpu-validate.md"), "w") as f:
        f.write("\n".join(L))
    print("gpu-validate: report %s/gpu-validate.md and .json: %s" % (
        outdir, "PASS" if ok else ("FAIL" if complete else "INCOMPLETE")))
    return 0 if ok else 1


CMDS = {"same": cmd_same, "wl-time": cmd_wl_time, "calibrate": cmd_calibrate, "stats": cmd_stats,
        "wl-numbers": cmd_wl_numbers, "torch-numbers": cmd_torch_numbers, "report": cmd_report}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CMDS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(CMDS[sys.argv[1]](sys.argv[2:]))
    except (OSError, ValueError, KeyError, ZeroDivisionError, statistics.StatisticsError) as e:
        print("gv.py %s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(2)
