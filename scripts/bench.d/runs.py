"""scripts/bench.d/runs.py: running the workload on the vgpu the way a user does, and reading
what it reports. Every run leaves NAME.cmd (the command line), NAME.out (stdout: the
workload's JSON summary), NAME.err and NAME.rc in its directory, as tests/si/e2e.sh does.
"""
import json
import os
import re
import shlex
import subprocess
import time


class Paths:
    """Where the build products are (DH_BUILD_DIR, default build/ under the root)."""

    def __init__(self, root):
        self.root = root
        self.build = os.environ.get("DH_BUILD_DIR") or os.path.join(root, "build")
        self.workload = os.path.join(self.build, "tests/workloads/workload")
        self.shim = os.path.join(self.build, "lib/libdhelix_shim.so")
        self.dhelix = os.path.join(self.build, "bin/dhelix")
        self.vgpu_run = os.path.join(root, "scripts/vgpu-run")
        self.bench_shim = os.path.join(root, "scripts/bench-shim")
        self.small_device = os.path.join(root, "tests/si/a40-div64.json")

    def missing(self):
        return [p for p in (self.workload, self.shim, self.dhelix,
                            os.path.join(self.build, "vgpu/lib/libcudart.so.13"))
                if not os.path.exists(p)]


def clean_env():
    """The caller's shim and vgpu settings must not leak into the runs."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("DHELIX_") or k in ("LD_PRELOAD", "WL_INJECT", "VGPU_TRACE",
                                                   "VGPU_TIMING_ONLY", "VGPU_DEVICE",
                                                   "VGPU_HAZARD"))}
    env.setdefault("VGPU_COMM_TIMEOUT", "30")  # a run whose ranks disagree fails in 30 s, not 60
    return env


class RunError(Exception):
    """A run that did not give a usable result; .kind is 'oom', 'crash', 'hazard', 'order'
    (ranks issued a communicator's collectives in different orders), 'timeout' or 'failed'."""

    def __init__(self, kind, msg):
        super().__init__(msg)
        self.kind = kind


def parse_summary(text):
    """The workload's --json summary: one object, possibly after other lines."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def _why(rc, err):
    if re.search(r"cudaMallocAsync\(.*failed \(2\)|out of memory", err):
        return "oom", "device memory exhausted (cudaMallocAsync: cudaErrorMemoryAllocation)"
    if rc == 86:
        return "hazard", "the vgpu found a data race (VGPU_HAZARD=abort, status 86)"
    if rc in (124, 137):
        return "timeout", "timed out"
    m = re.search(r"Signal: ([A-Za-z ]+) \((\d+)\)", err)
    if m or rc in (134, 139) or rc < 0:
        frame = re.search(r"\[ 1\] (\S+)", err)
        return "crash", "crashed (%s%s)" % (m.group(1) if m else "status %d" % rc,
                                            ", in " + frame.group(1) if frame else "")
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith("-")]
    # The first message of the vgpu, the shim or the program says more than MPI's last one.
    first = [l for l in lines if re.match(r"(vgpu|dhelix|workload)\b", l)
             and re.search(r"mismatch|fail|error|hazard|abort", l, re.I)] or \
        [l for l in lines if re.match(r"workload\[\d+\]: ", l)]  # the program's own fatal message
    why = (first or lines[-1:] or [""])[0][:240]
    kind = "order" if "mismatch" in why else "failed"
    return kind, "exit status %d%s" % (rc, ": " + why if why else "")


def run_workload(paths, d, name, nproc, args, env_add=None, timeout=900):
    """One job: [ENV] scripts/vgpu-run mpirun -n NPROC workload ARGS --json, in directory d.
    Returns (summary dict, wall seconds); raises RunError."""
    env = clean_env()
    env.update(env_add or {})
    cmd = [paths.vgpu_run, "mpirun", "-n", str(nproc), paths.workload] + list(args) + ["--json"]
    shown = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted((env_add or {}).items()))
    with open(os.path.join(d, name + ".cmd"), "w") as f:
        f.write((shown + " " if shown else "") + " ".join(shlex.quote(c) for c in cmd) + "\n")
    t0 = time.monotonic()
    with open(os.path.join(d, name + ".out"), "w") as out, \
            open(os.path.join(d, name + ".err"), "w") as err:
        try:
            rc = subprocess.run(cmd, stdout=out, stderr=err, env=env, cwd=d,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    wall = time.monotonic() - t0
    with open(os.path.join(d, name + ".rc"), "w") as f:
        f.write("%d\n" % rc)
    errtext = open(os.path.join(d, name + ".err"), errors="replace").read()
    summary = parse_summary(open(os.path.join(d, name + ".out"), errors="replace").read())
    if rc != 0 or summary is None:
        kind, msg = _why(rc, errtext)
        raise RunError(kind, "%s: %s (%s)" % (name, msg, os.path.join(d, name + ".err")))
    if summary.get("hazards"):
        raise RunError("hazard", "%s: the vgpu reports %s hazards" % (name, summary["hazards"]))
    return summary, wall


def steady(summary, key):
    """Mean of KEY over the steady iterations: all but the first two, which in an SI run are
    the one the shim spends finding its place in the plan and the one it runs in program order
    while it checks the plan's pairs against the program (scheduler/modes/tracker.c, the probe);
    with fewer than three, all but the first."""
    its = summary.get("iterations") or []
    skip = 2 if len(its) > 2 else (1 if len(its) > 1 else 0)
    vals = [it[key] for it in its[skip:]]
    return sum(vals) / len(vals) if vals else float("nan")


def losses(summary):
    return [it.get("loss_hex") for it in summary.get("iterations") or []]


def make_plan(paths, d, nproc):
    """dhelix plan on d/prof.R.json -> d/plan.json; returns (plan dict, table dict, wall s)."""
    profs = [os.path.join(d, "prof.%d.json" % r) for r in range(nproc)]
    missing = [p for p in profs if not os.path.exists(p)]
    if missing:
        raise RunError("failed", "profile mode wrote no profile for %s" % ", ".join(missing))
    cmd = [paths.dhelix, "plan"] + profs + ["-o", os.path.join(d, "plan.json"), "--json"]
    with open(os.path.join(d, "plan.cmd"), "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n")
    t0 = time.monotonic()
    with open(os.path.join(d, "plan.out"), "w") as out, open(os.path.join(d, "plan.err"), "w") as err:
        proc = subprocess.run(cmd, stdout=out, stderr=err, env=clean_env())
    wall = time.monotonic() - t0
    stdout = open(os.path.join(d, "plan.out")).read()
    stderr = open(os.path.join(d, "plan.err")).read()
    if proc.returncode != 0 or not os.path.exists(os.path.join(d, "plan.json")):
        last = [l for l in stderr.splitlines() if l.strip()]
        raise RunError("failed", "dhelix plan: exit status %d%s" %
                       (proc.returncode, ": " + last[-1] if last else ""))
    plan = json.load(open(os.path.join(d, "plan.json")))
    table = parse_summary(stdout) or {}
    # dhelix plan reports its own peak (VmHWM); ru_maxrss would count the Python process
    # it was forked from.
    table["_peak_rss_mib"] = (table.get("meta") or {}).get("peak_rss_mib")
    return plan, table, wall


def plan_stats(d, prefix="stats"):
    """Per rank, the "plan" object of the SI run's DHELIX_STATS files (launchers skipped)."""
    out = {}
    for f in sorted(os.listdir(d)):
        if not (f.startswith(prefix + ".") and f.endswith(".json")):
            continue
        text = open(os.path.join(d, f), errors="replace").read()
        dec, i = json.JSONDecoder(), 0
        while True:
            j = text.find("{", i)
            if j < 0:
                break
            try:
                obj, i = dec.raw_decode(text, j)
            except ValueError:
                break
            meta = obj.get("meta", {})
            rank = meta.get("rank", "-")
            if rank in ("-", None):
                continue
            plan = obj.get("plan") or meta.get("plan")
            plan = dict(plan) if isinstance(plan, dict) else \
                {k[5:]: v for k, v in meta.items() if k.startswith("plan_")}
            for k in ("paired_groups", "dependency_moves", "cross_strand_barriers",
                      "order_fallbacks", "replay_errors"):
                if k in meta:
                    plan.setdefault(k, meta[k])
            out[str(rank)] = plan
    return out


def bench_shim(paths, d):
    """scripts/bench-shim --json, parsed: per mode, the rows and the meta."""
    p = subprocess.run([paths.bench_shim, "--json"], capture_output=True, text=True,
                       env=clean_env(), timeout=600)
    open(os.path.join(d, "bench-shim.out"), "w").write(p.stdout)
    open(os.path.join(d, "bench-shim.err"), "w").write(p.stderr)
    if p.returncode != 0:
        raise RunError("failed", "scripts/bench-shim: exit status %d" % p.returncode)
    tables = json.loads(p.stdout)
    return {t["meta"]["mode"]: t for t in tables}
