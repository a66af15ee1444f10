"""scripts/bench.d/planstat.py: where the plan and the run part, group by group.

The plan mode's dispatcher issues a steady iteration in the plan's order: group after group,
inside a group in its `order` letters. The vgpu trace (VGPU_TRACE) gives each device op its
place in the issue order ("issue"), its host issue time ("issued"), its time alone ("solo"),
start and duration. So the last iteration's device ops, in issue order, are the plan's device
ops in plan order, and each group's measured time is the time from its first op's start to
the next group's. Beside the group's predicted time (its replay, scheduler/plan/timesim.h),
the measured stretch is taken apart by cause:
  - idle, host: the device had nothing to run and the op that ended the wait had not been
    issued yet (launch and host cost, the dispatcher's own time);
  - idle, waiting: nothing ran although the next op was issued (a dependency, an event, one
    hardware queue's head holding the rest, a peer's collective);
  - compute slowed, comm slowed: sum over the group's compute (communication) ops of the
    time beyond their time alone (interference from the other class, sharing with their own).
Whole-run costs that are not a group's: the iterations run before the plan's pairs start (the
probe and the checking iteration), against the steady ones.
"""
import json

TRACED = {"KERNEL": "compute", "CU_KERNEL": "compute", "GEMM": "compute", "LT_MATMUL": "compute",
          "MEMSET": "compute", "NCCL": "comm", "MEMCPY": "copy", "HOST_FUNC": "host"}


def expand(section):
    """The section's ops (kind per op) and groups (dicts with a, b, order, pred_us), expanded."""
    kinds, groups = [], []
    for b in section.get("blocks", [section]):
        for r in range(b.get("repeat", 1)):
            base = len(kinds)
            got = []
            for o in b["ops"]:
                if "copy" in o:
                    got.extend(got[-o["copy"]:] * o["times"])
                else:
                    got.append(o["k"])
            kinds.extend(got)
            for g in b["groups"]:
                groups.append({"a": [base + g["a"][0], g["a"][1]], "b": [base + g["b"][0], g["b"][1]],
                               "order": g["order"], "pred_us": g["pred_us"],
                               "start_us": g["start_us"] + r * b.get("dt_us", 0)})
    return kinds, groups


def device_ops(kinds, groups):
    """Per device op of the plan, in issue order: (group, class)."""
    out = []
    for gi, g in enumerate(groups):
        pa, pb = g["a"][0], g["b"][0]
        for letter in g["order"]:
            if letter == "b":
                k, pb = kinds[pb], pb + 1
            else:
                k, pa = kinds[pa], pa + 1
            if k in TRACED:
                out.append((gi, TRACED[k]))
            elif k == "NCCL_GROUP":
                return None     # its point-to-point ops are several trace records: no match
    return out


def _locate(recs, want):
    """Start of the last run of trace records whose classes are want's, or None."""
    n = len(want)
    for i in range(len(recs) - n, max(-1, len(recs) - 3 * n - 1000), -1):
        if all(recs[i + k]["cat"] == want[k][1] for k in range(n)):
            return i
    return None


def _idle(recs, t0, t1):
    """Idle time in [t0, t1) split into waiting for the host and waiting for anything else."""
    host = other = 0.0
    busy_until = t0
    for e in sorted(recs, key=lambda e: e["ts"]):
        if e["ts"] > busy_until:
            gap = min(e["ts"], t1) - busy_until
            if gap > 0:
                # the device waited for the host when the op ending the gap was issued in it
                late = min(max(e["args"].get("issued", 0) - busy_until, 0), gap)
                host += late
                other += gap - late
        busy_until = max(busy_until, e["ts"] + e["dur"])
    return host, other


def per_group(plan_path, trace_path, rank=0):
    """Rows per group of the last iteration of the trace: predicted and measured us and the
    causes; None when the trace cannot be matched to the plan."""
    plan = json.load(open(plan_path))
    secs = plan.get("sections") or []
    sec = ([s for s in secs if rank in (s.get("ranks") or [])] or secs[:1] or [None])[0]
    if sec is None:
        return None
    kinds, groups = expand(sec)
    want = device_ops(kinds, groups)
    if not want:
        return None
    ev = [e for e in json.load(open(trace_path))["traceEvents"]
          if e.get("ph") == "X" and "issue" in e.get("args", {})]
    ev.sort(key=lambda e: e["args"]["issue"])
    at = _locate(ev, want)
    if at is None:
        return None
    recs = ev[at:at + len(want)]
    by = [[] for _ in groups]
    for (gi, _), e in zip(want, recs):
        by[gi].append(e)
    starts = [min(e["ts"] for e in b) if b else None for b in by]
    end = max(e["ts"] + e["dur"] for e in recs)
    rows = []
    for gi, g in enumerate(groups):
        if not by[gi]:
            continue
        nxt = next((s for s in starts[gi + 1:] if s is not None), end)
        meas = nxt - starts[gi]
        host, wait = _idle(by[gi], starts[gi], nxt)
        slow = {"compute": 0.0, "comm": 0.0}
        for e in by[gi]:
            if e["cat"] in slow:
                slow[e["cat"]] += max(0.0, e["dur"] - e["args"].get("solo", e["dur"]))
        rows.append({"group": gi, "paired": g["a"][1] > 0 and g["b"][1] > 0,
                     "pred_us": g["pred_us"], "meas_us": meas, "idle_host_us": host,
                     "idle_wait_us": wait, "compute_slowed_us": slow["compute"],
                     "comm_slowed_us": slow["comm"]})
    return rows


def summary(plan_path, trace_path, si_run, rank=0):
    """Totals over the last iteration, paired groups and unpaired stretches apart, in ms, and
    the first iterations' cost; None when the trace does not match the plan."""
    rows = per_group(plan_path, trace_path, rank)
    if rows is None:
        return None
    out = {}
    for key, sel in (("paired", True), ("unpaired", False)):
        rs = [r for r in rows if r["paired"] == sel]
        out[key] = {k: sum(r[k] for r in rs) / 1000.0 for k in
                    ("pred_us", "meas_us", "idle_host_us", "idle_wait_us", "compute_slowed_us",
                     "comm_slowed_us")}
        out[key]["groups"] = len(rs)
        out[key]["abs_diff_ms"] = sum(abs(r["meas_us"] - r["pred_us"]) for r in rs) / 1000.0
    worst = sorted(rows, key=lambda r: -abs(r["meas_us"] - r["pred_us"]))[:5]
    out["worst_groups"] = worst
    its = [it["time_ms"] for it in si_run.get("iterations", [])]
    if len(its) >= 3:
        steady = sum(its[2:]) / len(its[2:])
        out["first_iterations_extra_ms"] = sum(its[:2]) - 2 * steady
    return out
