"""scripts/bench.d/report.py: the bench's table on the terminal and docs/bench.md, both from the
result dictionaries of bench.py (one source, so the two cannot disagree)."""
import os
import platform
import subprocess

import analysis
import pictures

COLS = (("config", 24, "<"), ("layers", 6, ">"), ("TF/s base", 9, ">"), ("SI", 6, ">"),
        ("MFU base", 8, ">"), ("SI", 5, ">"), ("speedup", 7, ">"), ("ideal", 5, ">"),
        ("SI bd", 5, ">"), ("plan", 5, ">"), ("p/m", 6, ">"), ("hidden", 6, ">"), ("+mem", 6, ">"),
        ("MiB meas", 8, ">"), ("plan", 5, ">"), ("ratio", 6, ">"), ("plan s", 6, ">"),
        ("exact", 5, ">"), ("paper", 8, ">"))
# Pipeline-parallel configurations: both schedules, SI on each, and which one to run.
PP_COLS = (("config", 24, "<"), ("layers", 6, ">"), ("1F1B ms", 9, ">"), ("SI", 6, ">"), ("vpp", 3, ">"),
           ("interl. ms", 10, ">"), ("vs 1F1B", 7, ">"), ("+SI ms", 9, ">"), ("SI", 6, ">"), ("exact", 5, ">"),
           ("run this", 0, "<"))


def f(v, fmt, none="-"):
    return none if v is None else fmt % v


def exact_word(r):
    e = r.get("exact")
    return "yes" if e is True else "NO" if e is False else "err"


def paper_word(r):
    p = r.get("paper") or {}
    if "speedup" in p:
        return "%.2f" % p["speedup"]
    if "mfu_gain_points" in p:
        lo, hi = p["mfu_gain_points"]
        return "+%g..%gpt" % (lo, hi)
    return "-"


def row_cells(r):
    if r.get("speedup") is None:
        return [r["name"], "%s/%d" % (r.get("layers", "-"), r["layers_full"])] + ["-"] * 15 + \
            [exact_word(r), paper_word(r)]
    return [r["name"], "%d/%d" % (r["layers"], r["layers_full"]), "%.1f" % r["baseline_tflops"],
            "%.1f" % r["si_tflops"], "%.1f%%" % (100 * r["baseline_mfu"]), "%.1f%%" % (100 * r["si_mfu"]),
            "%.3f" % r["speedup"], f(r.get("ideal_speedup"), "%.2f"), f(r.get("si_bound_speedup"), "%.2f"),
            f(r.get("predicted_speedup"), "%.3f"),
            f(r.get("predicted_vs_measured_speedup"), "%.3f") + ("!" if r.get("time_model_off") else ""),
            f(None if r.get("hidden_comm_fraction") is None else 100 * r["hidden_comm_fraction"], "%.0f%%"),
            "%+.1f%%" % r["extra_mem_pct"], f(r.get("measured_extra_mem_mib"), "%.0f"),
            "%.0f" % r["planned_extra_mem_mib"],
            f(r.get("planned_vs_measured_mem"), "%.2f") + ("!" if r.get("mem_model_off") else ""),
            f(r.get("planning_s"), "%.3f"), exact_word(r), paper_word(r)]


def _line(cells, cols=COLS):
    return "  ".join(c.ljust(w) if a == "<" else c.rjust(w) for c, (_, w, a) in zip(cells, cols)).rstrip()


def pp_cells(r):
    """The pipeline-parallel row: both schedules at the interleaved runs' depth."""
    iv = r.get("interleaved") or {}
    ex = iv.get("exactness") or {}
    return [r["name"], "%s/%d" % (iv.get("layers", "-"), r["layers_full"]),
            f(iv.get("noninterleaved_baseline_ms"), "%.1f"), f(r.get("speedup"), "%.3f"), f(iv.get("vpp"), "%d"),
            f(iv.get("baseline_ms"), "%.1f"), f(iv.get("over_noninterleaved"), "%.3f"), f(iv.get("si_ms"), "%.1f"),
            f(iv.get("speedup"), "%.3f"), exact_word(iv) if ex else "-", (r.get("run_this") or {}).get("text", "-")]


def print_pp_table(rs):
    rs = [r for r in rs if "interleaved" in r]
    if not rs:
        return
    print()
    print("pipeline parallelism: non-interleaved 1F1B and Megatron's interleaved 1F1B (--vpp), SI on each")
    print(_line([c[0] for c in PP_COLS], PP_COLS))
    for r in rs:
        print(_line(pp_cells(r), PP_COLS))
        if r["interleaved"].get("error"):
            print("    interleaved: " + r["interleaved"]["error"])


def print_header():
    print(_line([c[0] for c in COLS]), flush=True)


def print_row(r):
    print(_line(row_cells(r)), flush=True)
    if r.get("error"):
        print("    " + r["error"], flush=True)


def print_footer(doc):
    o = doc["overhead"]
    print_pp_table(doc["configs"])
    print()
    print("layers: depth of the comparison runs / the model's; TF/s: TFLOP/s per GPU (Megatron's formula);"
          " speedup: baseline / SI iteration time;")
    print("ideal: baseline / max(compute with interference, communication); SI bd: the part of it pairing can"
          " reach (bound.py: only inside backward(i)+forward(i+1) windows);")
    print("plan: the planner's prediction, p/m predicted / measured speedup (! when more than 3% off);"
          " hidden: share of the baseline's")
    print("exposed communication that SI hid; +mem: extra peak device memory, MiB meas the same in MiB, plan the planned MiB, ratio plan/measured (! when more than 10% off); exact: every loss bit-identical"
          " in the small-math run; paper: its speedup (or MFU points)")
    if any("interleaved" in r for r in doc["configs"]):
        print("pipeline parallelism: 1F1B ms the non-interleaved baseline, SI its speedup; interl. ms the interleaved"
              " baseline (vpp virtual stages per rank), vs 1F1B its speedup over the")
        print("non-interleaved; +SI ms SI on the interleaved schedule, SI its speedup against the interleaved"
              " baseline, exact its small-math run; run this: the fastest exact option")
    if o.get("error"):
        print("shim overhead: " + o["error"])
    else:
        print("shim overhead: passthrough %s ns/call added, queued capture %s ns/call, dispatcher %s ops/s"
              % (f(o["passthrough_ns_per_call"], "%.1f"), f(o["queued_ns_per_call"], "%.1f"),
                 f(o["dispatcher_ops_per_s"], "%.3g")))
    for r in doc["configs"]:
        iv = r.get("interleaved") or {}
        for n in r.get("notes", []) + iv.get("notes", []):
            print("note: %s: %s" % (r["name"], n))
        for what, ex in (("exactness run", r.get("exactness", {})),
                         ("interleaved exactness run", iv.get("exactness") or {})):
            if ex.get("error"):
                print("note: %s: %s: %s" % (r["name"], what, ex["error"]))


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        rev, dirty = "", ""
    return {"cpu": cpu, "cores": os.cpu_count(), "os": "%s %s" % (platform.system(), platform.release()),
            "python": platform.python_version(), "git": rev + ("+uncommitted" if dirty else "")}


def _md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _paper_cells(r):
    p = r.get("paper") or {}
    if "speedup" in p:
        return "%.1f" % p["megatron_tflops"], "%.1f" % p["dhelix_tflops"], "%.2fx" % p["speedup"]
    if "mfu_gain_points" in p:
        return "-", "-", "+%g..%g MFU points" % tuple(p["mfu_gain_points"])
    return "-", "-", "-"


def _against_paper(rs):
    rows = []
    for r in rs:
        meg, dh, ps = _paper_cells(r)
        p = r.get("paper") or {}
        full = r.get("baseline_full_tflops")
        ratio = f(full / p["megatron_tflops"] if full and p.get("megatron_tflops") else None, "%.2f")
        sp = r.get("speedup")
        if sp and p.get("speedup"):
            cmp_ = "%.2f" % ((sp - 1) / (p["speedup"] - 1)) if p["speedup"] > 1 else "-"
            ours = "%.3fx" % sp
        elif sp and r.get("mfu_gain_points") is not None:
            ours, cmp_ = "%.3fx (%+.1f MFU points)" % (sp, r["mfu_gain_points"]), "-"
        else:
            ours, cmp_ = f(sp, "%.3fx"), "-"
        lay = r["layout"]
        gpu = r["name"].rsplit("-", 1)[-1]
        rows.append([r["name"], "%d x %s" % (r["gpus"], gpu.upper()) +
                     ("" if gpu == r["device"] else " (%s profile)" % r["device"]),
                     "%d,%d,%d,%d" % (lay["dp"], lay["tp"], lay["pp"], lay["cp"]), meg, dh, ps,
                     f(full, "%.1f"), ratio, ours, f(r.get("ideal_speedup"), "%.2fx"), cmp_])
    return _md_table(["configuration", "GPUs", "dp,tp,pp,cp", "paper Megatron TFLOP/s", "paper DHelix TFLOP/s",
                      "paper speedup", "our Megatron TFLOP/s (all layers)", "ours / paper Megatron",
                      "our SI speedup", "our ideal bound", "our gain / paper gain"], rows)


def _what_si_did(rs):
    rows = []
    for r in rs:
        if r.get("speedup") is None:
            rows.append([r["name"], f(r.get("layers"), "%d")] + ["-"] * 9 +
                        [exact_word(r) + " (%s)" % r.get("exactness", {}).get("layout", "?")])
            continue
        rows.append([r["name"], "%d of %d" % (r["layers"], r["layers_full"]),
                     "%.1f -> %.1f" % (r["baseline_ms"], r["si_ms"]),
                     "%.1f -> %.1f" % (r["baseline_tflops"], r["si_tflops"]),
                     "%.1f -> %.1f%%" % (100 * r["baseline_mfu"], 100 * r["si_mfu"]),
                     "%.3fx" % r["speedup"],
                     "%s (SI: %s)" % (f(r.get("ideal_speedup"), "%.2fx"), f(r.get("si_bound_speedup"), "%.3fx")),
                     "%s (%s)" % (f(r.get("predicted_speedup"), "%.3fx"),
                                  f(r.get("predicted_vs_measured_speedup"), "%.3f of measured")),
                     "%s (plan: %s)" % (f(_pct(r.get("hidden_comm_fraction")), "%.0f%%"),
                                        f(_pct(r.get("planned_hidden_comm_fraction")), "%.0f%%")),
                     "%+.1f%%, +%.0f MiB (plan: +%.0f MiB, %s%s)" % (
                         r["extra_mem_pct"], r.get("measured_extra_mem_mib", 0), r["planned_extra_mem_mib"],
                         f(r.get("planned_vs_measured_mem"), "%.2fx"), " OFF >10%" if r.get("mem_model_off") else ""),
                     "%.3f" % r["planning_s"] if r.get("planning_s") is not None else "-",
                     "%s (%s)" % (exact_word(r), r["exactness"].get("layout", "?"))])
    return _md_table(["configuration", "layers", "iteration ms", "TFLOP/s per GPU", "MFU", "speedup",
                      "ideal bound (SI-reachable)", "plan's prediction", "exposed comm hidden", "extra peak memory",
                      "planning s", "exact (small-math layout)"], rows)


def _pipeline(rs):
    rows = []
    for r in rs:
        iv = r["interleaved"]
        ex = iv.get("exactness") or {}
        vpp = "--vpp %d" % iv["vpp"] if iv.get("vpp") else "--vpp preset"
        rows.append([r["name"], "%s of %d" % (iv.get("layers", "-"), r["layers_full"]),
                     f(iv.get("noninterleaved_baseline_ms"), "%.1f"),
                     "%s (%s)" % (f(r.get("si_ms"), "%.1f"), f(r.get("speedup"), "%.3fx")),
                     "%s (%s)" % (f(iv.get("baseline_ms"), "%.1f"), vpp),
                     f(iv.get("over_noninterleaved"), "%.3fx"), f(iv.get("si_ms"), "%.1f"),
                     f(iv.get("speedup"), "%.3fx"), _pairing(iv),
                     "%s (%s)" % (exact_word(iv), ex.get("layout", "?")) if ex else "-",
                     (r.get("run_this") or {}).get("text", "-") +
                     (" (error: %s)" % iv["error"] if iv.get("error") else "")])
    return _md_table(["configuration", "layers", "non-interleaved baseline ms", "SI on it ms (speedup)",
                      "interleaved baseline ms", "interleaved vs non-interleaved", "SI on interleaved ms",
                      "SI vs interleaved baseline", "paired groups per iteration on interleaved, done/planned",
                      "exact, interleaved (small-math layout)", "run this"], rows)


def _per_stage(rs):
    """One row per plan section of SI on the interleaved schedule: a pipeline stage (or the
    stages that share a plan), its pairing per rank, its moves and its own prediction, beside
    the job's measured speedup (every stage runs the same iteration, so one measurement)."""
    rows = []
    for r in rs:
        iv = r["interleaved"]
        pairing = iv.get("pairing") or {}
        cp = r["layout"]["cp"]
        for s in iv.get("sections") or []:
            stages = sorted({k // cp for k in s["ranks"]})
            done = ", ".join("r%d %d/%d" % (k, round(pairing[str(k)]["done_per_iter"]),
                                            pairing[str(k)]["planned_per_iter"])
                             for k in s["ranks"] if str(k) in pairing) or "-"
            rows.append([r["name"], ", ".join(map(str, stages)), ", ".join(map(str, s["ranks"])), done,
                         "%s (%s refused)" % (f(s.get("moves"), "%d"), f(s.get("moves_refused"), "%d")),
                         f(s.get("predicted_speedup"), "%.3fx"), f(iv.get("predicted_speedup"), "%.3fx"),
                         f(iv.get("speedup"), "%.3fx")])
    return _md_table(["configuration", "stage", "processes", "paired groups per iteration, done/planned",
                      "moves made", "plan's prediction, this stage", "plan's prediction, job",
                      "measured, job"], rows)


def _pairing(iv):
    cells = ["r%s %d/%d" % (rank, round(p["done_per_iter"]), p["planned_per_iter"])
             for rank, p in sorted((iv.get("pairing") or {}).items(), key=lambda x: int(x[0]))]
    return ", ".join(cells) or "-"


def _pct(v):
    return None if v is None else 100 * v


def _overhead(o):
    if o.get("error"):
        return "scripts/bench-shim failed: %s" % o["error"]
    rows = [[k, "%+.1f ns" % o["passthrough_added_ns"][k], "%.1f ns" % o["queued_capture_ns"].get(k, float("nan"))]
            for k in o["passthrough_added_ns"]]
    t = _md_table(["entry point", "passthrough: added per call", "stress (queued): capture per call"], rows)
    return t + ("\n\nMedians: passthrough %+.1f ns per call (target < 50 ns), queued capture %.1f ns per call "
                "(target < 300 ns); dispatcher %.2f M operations/s (%.0f ns per operation; target < 1 us)."
                % (o["passthrough_ns_per_call"], o["queued_ns_per_call"], o["dispatcher_ops_per_s"] / 1e6,
                   o.get("dispatcher_ns_per_op") or float("nan")))


def write_docs(doc, root):
    img = os.path.join(root, "docs/img")
    names = pictures.publish(doc.get("pictures", {}), img)
    rs = doc["configs"]
    m = doc["machine"]
    text = [
        "# Strand Interleaving on the paper's configurations (vgpu benchmark)",
        "",
        "<!-- Generated by scripts/bench (scripts/bench.d/); do not edit: rerun it. -->",
        "",
        "Measured %s with `%s` (%.0f s wall), commit %s, on %s (%d cores), %s. Everything ran on "
        "the vgpu (virtual time from its device profiles, `tests/vgpu/src/core/profile.c`); no GPU."
        % (doc["date"], doc["command"].strip(), doc["wall_s"], m["git"] or "?", m["cpu"], m["cores"], m["os"]),
        "",
        "## Against the paper",
        "",
        _against_paper(rs),
        "",
        "*Our Megatron TFLOP/s* is the preset with every layer, baseline only (as `scripts/workload --paper`). "
        "*Our gain / paper gain* is (our speedup - 1) / (paper speedup - 1). The Hopper rows have no TFLOP/s "
        "in the authors' report, only MFU points gained; ours are in the speedup column.",
        "",
        "![speedups](img/speedups.svg)" if "speedups.svg" in names else "",
        "",
        "## What SI did",
        "",
        _what_si_did(rs),
        "",
    ]
    pp = [r for r in rs if "interleaved" in r]
    if pp:
        text += ["## Pipeline parallelism: which schedule to run", "", _pipeline(pp), "",
                 analysis.pipeline_findings(pp), "",
                 "### Per stage: SI on the interleaved schedule", "", _per_stage(pp), "",
                 "*Moves made*: point-to-point posts the planner issues before an earlier operation of "
                 "another communicator, each proven free of a cycle of waits over every rank's plan "
                 "([planner.md](planner.md#moves-across-communicators-pipeline-parallelism)); *refused* ones could not be proven. "
                 "*This stage* is the section's own baseline / SI time; the job runs as fast as its slowest "
                 "stage, so the job's prediction is the slowest section's, measured against one iteration "
                 "time that every stage shares.", ""]
    text += [
        analysis.definitions(),
        "",
        "## One layer, baseline and SI",
        "",
    ]
    tl = doc.get("pictures", {}).get("timeline")
    if tl:
        text += ["![timeline](img/timeline.svg)", "",
                 "From the vgpu traces (`VGPU_TRACE`, one Chrome/Perfetto JSON per rank) of %s with one layer, "
                 "rank 0: one steady micro-batch cycle, the backward of micro-batch *i* and the forward of *i+1* "
                 "(with the embedding, the output layer and the loss). Strand a runs on the framework's streams, "
                 "strand b on the streams the shim creates. Baseline cycle %.2f ms, SI cycle %.2f ms. PNG: "
                 "[img/timeline.png](img/timeline.png)."
                 % (doc["pictures"].get("timeline_config"), tl["baseline_cycle_ms"], tl["si_cycle_ms"]), ""]
    else:
        text += ["(not drawn in this run: %s)" % doc.get("pictures", {}).get("timeline_error", "skipped"), ""]
    mem = doc.get("pictures", {}).get("memory")
    text += ["## Device memory over one iteration", ""]
    if mem:
        text += ["![memory](img/memory.svg)", "",
                 "From the same vgpu traces as the table (%s, every layer, rank 0): the device memory in use "
                 "after every allocation and free over one steady iteration, baseline against SI. Peaks: "
                 "baseline %.1f MiB, SI %.1f MiB (%+.2f%%). PNG: [img/memory.png](img/memory.png)."
                 % (doc["pictures"].get("memory_config"), mem["baseline_peak_mib"], mem["si_peak_mib"],
                    100.0 * (mem["si_peak_mib"] / mem["baseline_peak_mib"] - 1) if mem["baseline_peak_mib"] else 0),
                 ""]
    else:
        text += ["(not drawn in this run: %s)" % doc.get("pictures", {}).get("memory_error", "skipped"), ""]
    text += ["## What the shim costs", "", _overhead(doc["overhead"]), "",
             analysis.how_measured(doc), "", analysis.discussion(doc), ""]
    with open(os.path.join(root, "docs/bench.md"), "w") as fh:
        fh.write("\n".join(text).replace("\n\n\n", "\n\n"))
