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
  si_json.py set PLAN OUT KEY VALUE  a copy of PLAN with a top-level key set (VALUE is JSON)
  si_json.py plan-summary PLAN       one line: sections, ops, groups, predicted times
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
                     "max_held_back") if k in meta]
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
                i, s.get("ranks"), len(s.get("ops", [])), len(s.get("groups", [])),
                s.get("baseline_us", -1), s.get("si_us", -1)))
        print("; ".join(parts) or "no sections")
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


if __name__ == "__main__":
    main(sys.argv)
