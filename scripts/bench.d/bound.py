"""scripts/bench.d/bound.py: the ideal bound split into what Strand Interleaving could hide in
principle and what no pairing can reach, from a rank's profile (its ops' device start and
duration, docs/plan-format.md) and the plan made from it (which ops form which phase).

SI pairs the backward of micro-batch i with the forward of i+1. So only inside such a
window, from the first op of a backward phase to the last op of the forward phase after it,
can one strand's communication run under the other's compute. Per window w, with C, M, O its
compute busy, communication busy and overlap time and B its busy time (the union):

    reachable_w = max(0, B - max(C + s (min(C, M) - O), M))

the time the window would lose if every stretch of communication that can run beside compute
did (paying the interference s on the newly overlapped stretch). What no pairing reaches:
communication outside every window that no compute covers (the data-parallel reduction after
the last backward, the parameter all-gather after the optimizer step, the warm-up forward's
collectives), and the time the device is idle (pipeline bubbles, waits for other ranks, host
time). The SI bound is T / (T - sum of reachable_w), T the profiled iteration.
"""
import json

from tracestat import _intersect, _length, _union  # the trace's interval helpers


def _profile_ops(prof):
    """The profile's ops in program order as (sig, class, start_us or None, us or None)."""
    out = []
    if prof.get("version") == 1:
        for o in prof["ops"]:
            us, st = o.get("us", -1), o.get("start_us", -1)
            out.append((o["sig"], o["c"], st if st is not None and st >= 0 else None,
                        us if us is not None and us >= 0 else None))
        return out
    ops, phases = prof["ops"], prof["phases"]
    for ph, _sync, start in prof["seq"]:
        p = phases[ph]
        at, us = p.get("at") or [None] * len(p["ops"]), p.get("us") or [None] * len(p["ops"])
        for k, oi in enumerate(p["ops"]):
            st = start + at[k] if start is not None and start >= 0 and at[k] is not None else None
            out.append((ops[oi]["sig"], ops[oi]["c"], st, us[k]))
    return out


def _template(section):
    """The section's template: op signatures and phases (kind, first, n), expanded."""
    sigs, phases = [], []
    for b in section.get("blocks", [section]):
        for _ in range(b.get("repeat", 1)):
            base = len(sigs)
            got = []
            for o in b["ops"]:
                if "copy" in o:
                    got.extend(got[-o["copy"]:] * o["times"])
                else:
                    got.append(o["sig"])
            sigs.extend(got)
            for ph in b["phases"]:
                phases.append((ph["kind"], base + ph["first"], ph["n"]))
    return sigs, phases


def _locate(flat, sigs):
    """Where the template's last repetition starts in the profile's ops, or None."""
    n = len(sigs)
    for i in range(len(flat) - n, -1, -1):
        if flat[i][0] == sigs[0] and all(flat[i + k][0] == sigs[k] for k in range(n)):
            return i
    return None


def _busy(ops):
    iv = {"compute": [], "comm": [], "any": []}
    for _sig, c, st, us in ops:
        if st is None or us is None:
            continue
        if c in ("compute", "comm"):
            iv[c].append((st, st + us))
        if c in ("compute", "comm", "copy"):
            iv["any"].append((st, st + us))
    comp, comm, anyb = _union(iv["compute"]), _union(iv["comm"]), _union(iv["any"])
    return comp, comm, anyb


def split(prof_path, plan_path, rank, s):
    """The split for one rank (its profile and its plan section), times in ms; None when the
    profile has no start times or the template is not found in it."""
    prof = json.load(open(prof_path))
    plan = json.load(open(plan_path))
    secs = plan.get("sections") or []
    sec = ([x for x in secs if rank in (x.get("ranks") or [])] or secs[:1] or [None])[0]
    if sec is None:
        return None
    sigs, phases = _template(sec)
    flat = _profile_ops(prof)
    at = _locate(flat, sigs) if sigs else None
    if at is None:
        return None
    tmpl = flat[at:at + len(sigs)]
    comp, comm, anyb = _busy(tmpl)
    if not anyb:
        return None
    t = anyb[-1][1] - anyb[0][0]
    windows, reach = [], 0.0
    for k in range(len(phases) - 1):
        if phases[k][0] == "B" and phases[k + 1][0] == "F":
            ops = tmpl[phases[k][1]:phases[k + 1][1] + phases[k + 1][2]]
            wc, wm, wa = _busy(ops)
            if not wa:
                continue
            windows.append((wa[0][0], wa[-1][1]))
            c, m, o, b = _length(wc), _length(wm), _intersect(wc, wm), _length(wa)
            reach += max(0.0, b - max(c + s * max(0.0, min(c, m) - o), m))
    win = _union(windows)
    exposed = _union([(a, b) for a, b in _subtract(comm, comp)])
    exposed_out = _length(exposed) - _intersect(exposed, win)
    idle = t - _length(anyb)
    return {"iteration_ms": t / 1000.0, "pair_windows": len(windows),
            "si_reachable_ms": reach / 1000.0,
            "si_bound_speedup": t / (t - reach) if t > reach else None,
            "unreachable_exposed_comm_ms": exposed_out / 1000.0,
            "idle_ms": idle / 1000.0}


def _subtract(x, y):
    """Intervals of x not covered by y (both unions)."""
    out, j = [], 0
    for a, b in x:
        cur = a
        while j < len(y) and y[j][1] <= cur:
            j += 1
        k = j
        while k < len(y) and y[k][0] < b:
            if y[k][0] > cur:
                out.append((cur, y[k][0]))
            cur = max(cur, y[k][1])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out
