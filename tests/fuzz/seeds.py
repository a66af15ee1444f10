#!/usr/bin/env python3
"""Writes the hand-made seeds of tests/fuzz/corpus (docs/plan-format.md, version 1).

    python3 tests/fuzz/seeds.py [CORPUS_DIR]     (default: tests/fuzz/corpus)

ok-*: valid files that must parse; bad-*: files the format rules out, which must be
rejected (the replay driver holds both to it); edge-*: cases the format leaves open, held
only to the harness's checks. Inputs found by scripts/fuzz (fuzz-*) are left alone. Rerun
after a format change; the fingerprints are computed here as dh_plan_fingerprint does.
"""
import json, os, sys
root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
P = os.path.join(root, "plan"); R = os.path.join(root, "profile")
os.makedirs(P, exist_ok=True); os.makedirs(R, exist_ok=True)

def fnv(sigs):
    """FNV-1a 64 over the 8 little-endian bytes of each sig, in order."""
    h = 0xcbf29ce484222325
    for s in sigs:
        for b in int(s, 16).to_bytes(8, "little"):
            h ^= b; h = (h * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h

def w(d, name, obj=None, text=None, raw=None):
    path = os.path.join(d, name)
    if raw is not None:
        open(path, "wb").write(raw); return
    if text is None:
        text = json.dumps(obj, indent=1, ensure_ascii=False) + "\n"
    open(path, "w", encoding="utf-8").write(text)

def op(sig, shape, k, c, name, phase, strand, group, us):
    o = {"sig": sig, "k": k, "c": c, "name": name, "phase": phase, "strand": strand,
         "group": group, "us": us}
    if shape is not False:
        o["shape"] = shape
    return o

def section(ranks, ops, phases, groups, **kw):
    s = {"ranks": ranks, "fingerprint": fnv([o["sig"] for o in ops]),
         "baseline_us": 100.0, "si_us": 80.0, "extra_mem_bytes": 1.2e7,
         "hidden_comm_fraction": 0.5, "phases": phases, "ops": ops, "groups": groups}
    s.update(kw)
    return s

def plan(sections, **kw):
    p = {"format": "dhelix-plan", "version": 1, "created_by": "dhelix 0.3.0",
         "planning_s": 0.04, "world": 2, "layout": "tp=2", "policy": "all",
         "max_extra_mem_bytes": 2147483648, "sections": sections}
    p.update(kw)
    return p

SIG = ["9f0c1a2b3c4d5e6f", "01ab23cd45ef6789", "fedcba9876543210", "0000000000000001",
       "a5a5a5a5a5a5a5a5", "1234567890abcdef"]

# --- valid plans ---
minimal = plan([section([], [op(SIG[0], SIG[1], "GEMM", "compute", "gemm n,t 64x64x64", 0, 0, 0, 12.5)],
                        [{"first": 0, "n": 1, "kind": "O", "mb": -1, "thread": 0, "paired_with": -1}],
                        [{"a": [0, 1], "b": [0, 0], "order": "a", "pred_us": 12.5, "start_us": 0.0}])],
               world=-1, layout="")
w(P, "ok-minimal.json", minimal)

two_ops = [op(SIG[0], SIG[1], "GEMM", "compute", "gemm n,t 4096x1024x512", 0, 0, 0, 12.5),
           op(SIG[2], SIG[3], "NCCL", "comm", "allreduce tp", 0, 0, 0, 30.0),
           op(SIG[4], SIG[5], "KERNEL", "compute", "layernorm_fwd", 1, 1, 0, 4.0),
           op(SIG[0], SIG[1], "GEMM", "compute", "gemm n,t 4096x1024x512", 1, 1, 0, 12.5),
           op(SIG[3], False, "FREE_ASYNC", "free", "free", 2, 0, 1, 0.0)]
phases = [{"first": 0, "n": 2, "kind": "B", "mb": 0, "thread": 0, "paired_with": 1},
          {"first": 2, "n": 2, "kind": "F", "mb": 1, "thread": 0, "paired_with": 0},
          {"first": 4, "n": 1, "kind": "O", "mb": -1, "thread": 0, "paired_with": -1}]
groups = [{"a": [0, 2], "b": [2, 2], "order": "abab", "pred_us": 45.0, "start_us": 0.0},
          {"a": [4, 1], "b": [0, 0], "order": "a", "pred_us": 0.5, "start_us": 45.0}]
w(P, "ok-two-strands.json", plan([section([0, 1], two_ops, phases, groups)]))

sec0 = section([0], two_ops, phases, groups)
ops1 = [op(SIG[5], SIG[4], "MEMCPY", "copy", "memcpy d2d", 0, 0, 0, 3.0),
        op(SIG[2], None, "EVENT_RECORD", "event", "event", 0, 0, 1, -1.0)]
sec1 = section([1], ops1,
               [{"first": 0, "n": 2, "kind": "O", "mb": -1, "thread": 1, "paired_with": -1}],
               [{"a": [0, 1], "b": [0, 0], "order": "a", "pred_us": 3.0, "start_us": 0.0},
                {"a": [1, 1], "b": [0, 0], "order": "a", "pred_us": 0.0, "start_us": 3.0}])
w(P, "ok-two-sections.json", plan([sec0, sec1], world=2, layout="cp=2",
                                  policy="tp,cp", max_extra_mem_bytes=0))

# Shapes null and omitted; unknown keys at every level.
u = plan([section([0, 1], [dict(o, future_key={"x": [1, 2]}) for o in two_ops], phases,
                  [dict(g, comment="ignored") for g in groups], new_section_key=True)],
         later_version_key="ignored", nested={"a": [None, True, 1.5]})
w(P, "ok-unknown-keys.json", u)
uni = plan([section([0], [op(SIG[0], None, "KERNEL", "compute", "ядро \u00e9t\u00e9 \u2603 \U0001F600", 0, 0, 0, 1.0)],
                    [{"first": 0, "n": 1, "kind": "O", "mb": -1, "thread": 0, "paired_with": -1}],
                    [{"a": [0, 1], "b": [0, 0], "order": "a", "pred_us": 1.0, "start_us": 0.0}])],
           created_by="d\u00e9lix \\ \"quoted\"\ttab", layout="tp=1")
w(P, "ok-unicode.json", uni)
w(P, "ok-compact.json", text=json.dumps(plan([section([0, 1], two_ops, phases, groups)]), separators=(",", ":")))

# --- invalid plans ---
good = json.dumps(plan([section([0, 1], two_ops, phases, groups)]), indent=1)
w(P, "bad-empty.json", text="")
w(P, "bad-not-json.json", text="hello plan\n")
w(P, "bad-truncated.json", text=good[: len(good) // 2])
w(P, "bad-trailing-garbage.json", text=good + "\n}xyz")
w(P, "bad-top-array.json", text="[" + good + "]")
w(P, "bad-null.json", text="null")
w(P, "bad-version-7.json", plan([section([0, 1], two_ops, phases, groups)], version=7))
w(P, "bad-version-string.json", plan([section([0, 1], two_ops, phases, groups)], version="1"))
w(P, "bad-version-real.json", plan([section([0, 1], two_ops, phases, groups)], version=1.5))
w(P, "bad-format-profile.json", plan([section([0, 1], two_ops, phases, groups)], format="dhelix-profile"))
m = plan([section([0, 1], two_ops, phases, groups)]); del m["format"]
w(P, "bad-no-format.json", m)
w(P, "bad-sections-object.json", plan({"0": 1}))
w(P, "bad-world-huge.json", plan([section([0, 1], two_ops, phases, groups)], world=1e300))
w(P, "bad-world-2e9.json", plan([section([0, 1], two_ops, phases, groups)], world=4294967296))

def mutate(fn, name):
    s = json.loads(good); fn(s); w(P, name, s)
def setop(i, k, v):
    return lambda s: s["sections"][0]["ops"][i].__setitem__(k, v)
def setgrp(i, k, v):
    return lambda s: s["sections"][0]["groups"][i].__setitem__(k, v)
def setph(i, k, v):
    return lambda s: s["sections"][0]["phases"][i].__setitem__(k, v)
mutate(setop(0, "sig", "9f0c1a2b3c4d5e6g"), "bad-sig-badhex.json")
mutate(setop(0, "sig", "9f0c1a2b3c4d5e6"), "bad-sig-short.json")
mutate(setop(0, "sig", 12345), "bad-sig-number.json")
mutate(setop(0, "shape", "-f0c1a2b3c4d5e6f"), "bad-shape-sign.json")
mutate(setop(0, "c", "gpu"), "bad-class.json")
mutate(setop(0, "strand", 2), "bad-strand-2.json")
mutate(setop(0, "group", 7), "bad-op-group-range.json")
mutate(setop(0, "group", 1), "bad-op-group-disagrees.json")
mutate(setop(2, "strand", 0), "bad-op-strand-disagrees.json")
mutate(setop(0, "phase", 99), "bad-op-phase-range.json")
mutate(setop(0, "phase", -1), "bad-op-phase-neg.json")
mutate(setop(0, "us", "fast"), "bad-op-us-string.json")
mutate(setgrp(0, "order", "abac"), "bad-order-letter.json")
mutate(setgrp(0, "order", "aba"), "bad-order-short.json")
mutate(setgrp(0, "order", "aaab"), "bad-order-count.json")
mutate(setgrp(0, "a", [0, -1]), "bad-group-negative.json")
mutate(setgrp(0, "a", [0, 99]), "bad-group-range.json")
mutate(setgrp(0, "a", [18446744073709551615, 2]), "bad-group-u64.json")
mutate(setgrp(0, "b", [1, 2]), "bad-group-overlap.json")
mutate(lambda s: s["sections"][0]["groups"][0].update({"a": [0, 1], "order": "abb"}), "bad-op-uncovered.json")
mutate(lambda s: s["sections"][0]["groups"][0].update({"a": [0, 0], "b": [0, 0], "order": ""}), "bad-group-empty.json")
mutate(setph(0, "paired_with", 2), "bad-phase-pair-asymmetric.json")
mutate(setph(0, "paired_with", 0), "bad-phase-pair-self.json")
mutate(setph(1, "first", 3), "bad-op-outside-phase.json")
mutate(setgrp(0, "pred_us", -5), "bad-group-pred-negative.json")
mutate(lambda s: s["sections"][0].__setitem__("hidden_comm_fraction", 1.5), "bad-hidden-fraction.json")
mutate(lambda s: s["sections"][0].__setitem__("ranks", [0, 1, 0]), "bad-ranks-duplicate.json")
mutate(lambda s: s["sections"].append(dict(s["sections"][0], ranks=[1, 2])), "bad-rank-two-sections.json")
mutate(lambda s: s["sections"].append(dict(s["sections"][0], ranks=[])), "bad-section-no-ranks.json")
mutate(lambda s: [o.__setitem__("phase", -1) for o in s["sections"][0]["ops"]] and s["sections"][0].__setitem__("phases", []), "edge-ops-no-phase.json")
mutate(setgrp(0, "a", [0]), "bad-group-pair-short.json")
mutate(setgrp(0, "a", "0,2"), "bad-group-pair-string.json")
mutate(setph(0, "first", 4), "bad-phase-range.json")
mutate(setph(0, "kind", "X"), "bad-phase-kind.json")
mutate(setph(0, "paired_with", 9), "bad-phase-paired-range.json")
mutate(lambda s: s["sections"][0].__setitem__("ranks", [0, -5]), "bad-ranks-negative.json")
mutate(lambda s: s["sections"][0].__setitem__("ops", {"0": 1}), "bad-ops-object.json")
# Deep nesting: inside a known key, at the top, and in an ignored key.
w(P, "bad-deep-array.json", text="[" * 4000 + "]" * 4000)
w(P, "bad-deep-in-sections.json", text=good.replace('"sections": [', '"sections": [' + "[" * 3000 + "]" * 3000 + ",", 1))
w(P, "edge-deep-unknown-key.json", text=good.replace('"format"', '"x": ' + "[" * 1000 + "]" * 1000 + ', "format"', 1))
w(P, "bad-invalid-utf8.json", raw=good.replace("allreduce tp", "allreduce \udcff").encode("utf-8", "surrogateescape"))
w(P, "bad-nul-in-file.json", raw=good.encode()[:40] + b"\0" + good.encode()[40:])
# Edge cases the format leaves open: no expectation, only the harness's checks.
mutate(setop(0, "name", "n" * 200), "edge-long-name.json")
mutate(setop(0, "name", "é" * 40), "edge-long-utf8-name.json")
mutate(setop(0, "name", "a\u0000b"), "edge-nul-escape.json")
mutate(setop(0, "sig", "9F0C1A2B3C4D5E6F"), "edge-sig-upper.json")
mutate(lambda s: s["sections"][0].__setitem__("fingerprint", "0000000000000000"), "edge-fingerprint-wrong.json")
mutate(lambda s: s.__setitem__("sections", []), "edge-no-sections.json")
mutate(lambda s: s.__setitem__("policy", "p" * 400), "edge-long-policy.json")
mutate(lambda s: s["sections"][0].__setitem__("baseline_us", 1e308), "edge-huge-double.json")
w(P, "edge-duplicate-key.json", text=good.replace('"version": 1,', '"version": 1, "version": 7,', 1))

# --- profiles ---
def prof(ops, comms, **kw):
    p = {"format": "dhelix-profile", "version": 1, "rank": 0, "world": 2, "layout": "tp=2",
         "host": "node1", "device": "vgpu h100", "max_connections": 1, "comms": comms,
         "ops": ops, "sync_at_end": 1}
    p.update(kw)
    return p
def pop(t, s, k, c, sig, shape, name, comm, b, flops, us, start, mem, sync):
    return {"t": t, "s": s, "k": k, "c": c, "sig": sig, "shape": shape, "name": name,
            "comm": comm, "bytes": b, "flops": flops, "us": us, "start_us": start,
            "mem": mem, "sync": sync}
comms = [{"name": "TENSOR_MODEL_PARALLEL_GROUP", "role": "tp", "nranks": 2, "rank": 0},
         {"name": "", "role": "", "nranks": 4, "rank": 3}]
pops = [pop(0, 0, "GEMM", "compute", SIG[0], SIG[1], "gemm n,t 4096x1024x512", -1, 0, 4.3e9, 12.5, 1034.2, 8388608, 0),
        pop(0, 1, "NCCL", "comm", SIG[2], SIG[3], "allreduce", 0, 1048576, 0, 30.0, 1050.0, 0, 0),
        pop(1, 0, "MEMCPY", "copy", SIG[4], SIG[5], "memcpy h2d", -1, 4096, 0, -1, -1, 0, 1),
        pop(0, 0, "FREE_ASYNC", "free", SIG[3], SIG[0], "free", -1, 0, 0, 0.0, 1100.0, -8388608, 0),
        pop(0, 2, "EVENT_RECORD", "event", SIG[5], SIG[4], "event", -1, 0, 0, 0.0, 1101.0, 0, 0),
        pop(1, 0, "HOST_FUNC", "host", SIG[1], SIG[2], "host fn", -1, 0, 0, 0.0, 1102.0, 0, 0)]
w(R, "ok-minimal.json", prof([], [], rank=-1, world=-1, layout="", host="", device="", sync_at_end=0))
w(R, "ok-ops.json", prof(pops, comms))
w(R, "ok-compact.json", text=json.dumps(prof(pops[:3], comms[:1]), separators=(",", ":")))
w(R, "ok-unknown-keys.json", prof([dict(o, extra=[1, {"y": None}]) for o in pops], [dict(c, z=1) for c in comms], future={"k": "v"}))
w(R, "ok-unicode.json", prof([pop(0, 0, "KERNEL", "compute", SIG[0], SIG[1], "ядро ☃ \U0001F600 \"q\" \\", -1, 0, 0, 1.0, 0.0, 0, 0)], [], host="hôte", device="δevice"))
gp = json.dumps(prof(pops, comms), indent=1)
def pm(fn, name):
    s = json.loads(gp); fn(s); w(R, name, s)
def so(i, k, v):
    return lambda s: s["ops"][i].__setitem__(k, v)
w(R, "bad-empty.json", text="")
w(R, "bad-not-json.json", text="{profile}")
w(R, "bad-truncated.json", text=gp[: len(gp) // 3])
w(R, "bad-top-string.json", text='"dhelix-profile"')
pm(lambda s: s.__setitem__("version", 2), "bad-version-2.json")
pm(lambda s: s.__setitem__("version", None), "bad-version-null.json")
pm(lambda s: s.__setitem__("format", "dhelix-plan"), "bad-format-plan.json")
pm(lambda s: s.__setitem__("rank", 1e300), "bad-rank-huge.json")
pm(lambda s: s.__setitem__("rank", "0"), "bad-rank-string.json")
pm(lambda s: s.__setitem__("max_connections", 3000000000), "bad-maxconn-big.json")
pm(lambda s: s.__setitem__("comms", {"a": 1}), "bad-comms-object.json")
pm(lambda s: s.__setitem__("ops", [1, 2, 3]), "bad-ops-numbers.json")
pm(so(1, "comm", 5), "bad-comm-range.json")
pm(so(1, "comm", -2), "bad-comm-negative.json")
pm(so(0, "c", "tensor"), "bad-class.json")
pm(so(0, "sig", "xyz"), "bad-sig-badhex.json")
pm(so(0, "shape", "0x0c1a2b3c4d5e6f"), "bad-shape-0x.json")
pm(so(0, "t", -1), "bad-thread-negative.json")
pm(so(0, "t", 4294967296), "bad-thread-big.json")
pm(so(0, "bytes", -1), "bad-bytes-negative.json")
pm(so(0, "bytes", 1e40), "bad-bytes-huge.json")
pm(so(0, "mem", 1e30), "bad-mem-huge.json")
pm(so(0, "us", "slow"), "bad-us-string.json")
pm(so(0, "sync", "yes"), "bad-sync-string.json")
w(R, "bad-deep-array.json", text="[" * 4000 + "]" * 4000)
w(R, "bad-deep-in-ops.json", text=gp.replace('"ops": [', '"ops": [' + "[" * 3000 + "]" * 3000 + ",", 1))
w(R, "bad-invalid-utf8.json", raw=gp.replace("node1", "node\udcfe").encode("utf-8", "surrogateescape"))
pm(so(0, "name", "n" * 300), "edge-long-name.json")
pm(so(0, "k", "K" * 40), "edge-long-kind.json")
pm(lambda s: s["comms"][0].__setitem__("role", "r" * 40), "edge-long-role.json")
pm(so(0, "name", "€" * 30), "edge-long-utf8-name.json")
pm(so(0, "k", "NOT_A_KIND"), "edge-unknown-kind.json")
pm(so(0, "shape", None), "edge-shape-null.json")
pm(so(0, "flops", -0.0), "edge-negative-zero.json")
pm(so(0, "mem", -9223372036854775808), "edge-mem-min.json")
pm(so(0, "bytes", 18446744073709551615), "edge-bytes-u64max.json")
pm(lambda s: s.__setitem__("ops", pops * 8), "edge-many-ops.json")
w(R, "edge-duplicate-key.json", text=gp.replace('"rank": 0,', '"rank": 0, "rank": 5,', 1))
