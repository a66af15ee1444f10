#!/usr/bin/env python3
"""tests/si/si_json.py: the JSON queries of tests/si/e2e.sh (the driver stays in bash).

  si_json.py losses RUN.out          one loss per line, every bit ("loss_hex", C's %a)
  si_json.py ms RUN.out              virtual iteration time, ms: the mean of the steady
                                     iterations (all but the first two; the last when
                                     there are fewer than four)
  si_json.py field RUN.out KEY       a top-level field of the summary ("hazards", ...)
  si_json.py plan-stats FILE...      one line per rank found among the DHELIX_STATS files:
                                     "RANK key=value ..." with the keys of the "plan" object
                                     (or of the flat meta keys plan_*, with paired_groups;
                                     "RANK noplan" when neither); launchers (rank "-") skipped
  si_json.py meta KEY FILE...        "RANK VALUE" per rank among the DHELIX_STATS files: the
                                     flat meta key KEY (absent: "RANK -"); launchers skipped
  si_json.py set PLAN OUT KEY VALUE  a copy of PLAN with a top-level key set (VALUE is JSON)
  si_json.py plan-summary PLAN       one line: sections, ops, groups, predicted times
  si_json.py mem-model BASE.out SI.out PLAN
                                     the plan's extra memory (its largest section's
                                     extra_mem_bytes) against the run's (SI's peak device
                                     memory less the baseline's, peak_mem_bytes): "ok ..."
                                     within 10% of the measured, else "off ..." (exit 1)
  si_json.py cut-profile PROF OUT MB the profile PROF (MB micro-batches per iteration) from
                                     the synchronisation before the first iteration's last
                                     backward on (inside an iteration: an MoE forward's
                                     routing step), without "dep": `dhelix plan` then starts
                                     its iteration there; prints the cut

RUN.out is the workload's stdout with --json (one object, possibly after other lines).
Exit status 2 with one line on stderr when a file cannot be read or parsed.
"""
import json
import sys


def die(msg):
    print("si_json: " + msg, file=sys.stderr)
    sys.exit(2)


def load_run(path):
    try:
        text = open(path).read()
    except OSError as e:
        die("%s: %s" % (path, e.strerror))
    start = text.find("{")
    if start < 0:
        die("%s: no JSON summary in the workload's output" % path)
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError as e:
        die("%s: bad JSON summary: %s" % (path, e))


def find_plan(d):
    """The "plan" statistics object, wherever the report puts it."""
    if isinstance(d.get("plan"), dict):
        return d["plan"]
    meta = d.get("meta", {})
    if isinstance(meta.get("plan"), dict):
        return meta["plan"]
    # Flat form: meta keys "plan_iterations", ... (or "plan.iterations"), and
    # "paired_groups" beside them.
    flat = {k[5:]: v for k, v in meta.items() if k.startswith("plan.") or k.startswith("plan_")}
    if flat and "paired_groups" in meta:
        flat.setdefault("paired_groups", meta["paired_groups"])
    return flat or None


def main(argv):
    if len(argv) < 2:
        die("usage: see the header of this file")
    cmd, args = argv[1], argv[2:]
    if cmd == "losses":
        for it in load_run(args[0]).get("iterations", []):
            print(it.get("loss_hex", repr(it.get("loss"))))
    elif cmd == "ms":
        its = [it["time_ms"] for it in load_run(args[0]).get("iterations", [])]
        if not its:
            die("%s: no iterations" % args[0])
        steady = its[2:] if len(its) >= 4 else its[-1:]
        print("%.6f" % (sum(steady) / len(steady)))
    elif cmd == "field":
        v = load_run(args[0]).get(args[1])
        print("" if v is None else v)
    elif cmd == "meta":
        rows = {}
        for path in args[1:]:
            try:
                meta = json.load(open(path)).get("meta", {})
            except (OSError, ValueError) as e:
                die("%s: %s" % (path, e))
            rank = str(meta.get("rank", "-"))
            if rank.isdigit():
                rows[int(rank)] = meta.get(args[0], "-")
        for r in sorted(rows):
            print(r, rows[r])
    elif cmd == "plan-stats":
        rows = {}
        for path in args:
            try:
                d = json.load(open(path))
            except (OSError, ValueError) as e:
                die("%s: %s" % (path, e))
            rank = str(d.get("meta", {}).get("rank", "-"))
            if not rank.isdigit():
                continue
            p = find_plan(d)
            meta = d.get("meta", {})
            cells = ["%s=%s" % (k, meta[k]) for k in ("cross_strand_barriers",
                     "dependency_moves", "order_fallbacks", "replay_errors", "lag_waits",
                     "max_held_back", "plan_held_design") if k in meta]
            if p is None:
                rows[int(rank)] = "%s noplan %s" % (rank, " ".join(cells))
            else:
                kv = ["%s=%s" % (k, v) for k, v in p.items() if not isinstance(v, (dict, list))]
                rows[int(rank)] = "%s %s %s" % (rank, " ".join(kv), " ".join(cells))
        for r in sorted(rows):
            print(rows[r])
    elif cmd == "set":
        try:
            d = json.load(open(args[0]))
        except (OSError, ValueError) as e:
            die("%s: %s" % (args[0], e))
        d[args[2]] = json.loads(args[3])
        with open(args[1], "w") as f:
            json.dump(d, f, indent=1)
    elif cmd == "plan-summary":
        try:
            d = json.load(open(args[0]))
        except (OSError, ValueError) as e:
            die("%s: %s" % (args[0], e))
        parts = []
        for i, s in enumerate(d.get("sections", [])):
            parts.append("section %d ranks %s: %d ops, %d groups, predicted %.1f -> %.1f us" % (
                i, s.get("ranks"), s.get("nops", len(s.get("ops", []))),
                sum(len(b.get("groups", [])) * b.get("repeat", 1) for b in s.get("blocks", [s])),
                s.get("baseline_us", -1), s.get("si_us", -1)))
        print("; ".join(parts) or "no sections")
    elif cmd == "mem-model":
        peak = lambda r: r.get("peak_mem_bytes", r.get("peak_mem_gib", 0) * 2**30)  # noqa: E731
        meas = peak(load_run(args[1])) - peak(load_run(args[0]))
        try:
            plan = max((x.get("extra_mem_bytes", 0) for x in json.load(open(args[2]))["sections"]),
                       default=0)
        except (OSError, ValueError, KeyError) as e:
            die("%s: %s" % (args[2], e))
        ok = abs(plan - meas) <= 0.10 * meas if meas > 0 else plan <= 0
        print("%s measured %.2f MiB, planned %.2f MiB (%s)" % (
            "ok" if ok else "off", meas / 2**20, plan / 2**20,
            "%.3fx" % (plan / meas) if meas > 0 else "nothing measured"))
        sys.exit(0 if ok else 1)
    elif cmd == "cut-profile":
        # What a profile whose first iteration differs from the others does to the planner
        # (calls forwarded that profile mode did not record): the iteration it finds starts
        # at a synchronisation in the middle of one, and the phase after the last backward,
        # the gradient reduction and the optimizer step, is taken for the next micro-batch's
        # forward and paired with that backward. Kept: from the synchronisation before the
        # first iteration's last backward on, without the dependencies profile mode found
        # ("dep", which would keep the planner from some of those pairs).
        try:
            d = json.load(open(args[0]))
            mb = int(args[2])
        except (OSError, ValueError, IndexError) as e:
            die("%s: %s" % (args[0], e))
        if d.get("version") == 2:
            d = expand_v2(d)
        ops = d.get("ops", [])
        main_t = ops[0].get("t") if ops else None
        bstarts = [i for i in range(1, len(ops))
                   if ops[i].get("t") != main_t and ops[i - 1].get("t") == main_t]

        def cut_before(k):
            # The last synchronisation before backward run k: the tail of the forward before
            # it, the one place where following the template can start and go on matching.
            if k >= len(bstarts):
                die("%s: %d backward runs, %d needed" % (args[0], len(bstarts), k + 1))
            return max((i for i in range(bstarts[k]) if ops[i].get("sync")), default=None)

        lo = cut_before(mb - 1)
        if lo is None:
            die("%s: no synchronisation before backward run %d" % (args[0], mb - 1))
        kept = ops[lo:]
        for o in kept:
            o.pop("dep", None)
        d["ops"] = kept
        d["sync_at_end"] = 0  # the planner then counts iterations from the first op
        with open(args[1], "w") as f:
            json.dump(d, f)
        print("ops %d.. of %d" % (lo, len(ops)))
    else:
        die("unknown command %s" % cmd)


def expand_v2(d):
    """A version-2 (compact) profile as the version-1 one it stands for (docs/plan-format.md:
    op k of an occurrence of phase p is ops[phases[p].ops[k]] with that position's mem, dep,
    mean us and start_us = start + at[k]; sync on the occurrence's first op)."""
    ops, phases, flat = d["ops"], d["phases"], []
    for p, sync, start in d["seq"]:
        ph = phases[p]
        n = len(ph["ops"])
        col = lambda key, dflt: ph.get(key) or [dflt] * n
        mem, dep, us, at = col("mem", 0), col("dep", 0), col("us", None), col("at", None)
        for k, oi in enumerate(ph["ops"]):
            o = dict(ops[oi])
            o["mem"] = mem[k]
            o["us"] = -1 if us[k] is None else us[k]
            o["start_us"] = -1 if at[k] is None or start < 0 else start + at[k]
            o["sync"] = int(sync) if k == 0 else 0
            if dep[k]:
                o["dep"] = len(flat) - dep[k]
            flat.append(o)
    out = {k: v for k, v in d.items() if k not in ("phases", "seq", "nops", "ops")}
    out["version"] = 1
    out["ops"] = flat
    return out


if __name__ == "__main__":
    main(sys.argv)
