"""scripts/bench.d/tracestat.py: where the communication time of a run goes, from a vgpu trace
(VGPU_TRACE, one Chrome trace per rank): per parallel group, the time its collectives and
point-to-point operations keep the device busy and the part of it that no compute kernel
runs beside (exposed)."""
import json

ROLES = (("TENSOR", "tp"), ("CONTEXT", "cp"), ("DATA", "dp"), ("PIPELINE", "pp"),
         ("EXPERT", "ep"), ("EMBEDDING", "pp"), ("POSITION", "pp"))


def _role(name):
    for prefix, role in ROLES:
        if name.upper().startswith(prefix):
            return role
    return name or "other"


def _union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _length(iv):
    return sum(b - a for a, b in iv)


def _intersect(x, y):
    i = j = 0
    total = 0.0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a:
            total += b - a
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


def comm_breakdown(path, iters):
    """{role: {"busy_ms", "exposed_ms"}} per iteration (the run's totals divided by iters),
    and "compute_ms": the compute busy time per iteration."""
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    compute = _union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "compute"])
    groups = {}
    for e in ev:
        if e.get("cat") == "comm":
            groups.setdefault(_role(e.get("args", {}).get("comm", "")), []).append((e["ts"], e["ts"] + e["dur"]))
    out = {"compute_ms": _length(compute) / 1000.0 / iters}
    for role, iv in sorted(groups.items()):
        u = _union(iv)
        busy = _length(u)
        out[role] = {"busy_ms": busy / 1000.0 / iters, "exposed_ms": (busy - _intersect(u, compute)) / 1000.0 / iters}
    return out
