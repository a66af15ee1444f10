#!/usr/bin/env python3
"""shim.entry_points: every function the toolkit's libraries export and every function
cuda.h (and the driver's graphics-interop headers) declares is handled by the shim.

Lists the exports of the real libcudart, libcublas, libcublasLt and libnccl (nm -D on the
files in the toolkit) and the functions cuda.h declares (the preprocessed header, both for
the legacy and the per-thread default stream, scanned here independently of
scripts/gen-entries), and fails on any that libdhelix_shim.so neither defines nor finds on
preload/entries/host_only.txt (a pncclX profiling twin counts as its ncclX). The classes:
wrapped (a hand-written wrapper: a deferred kind, or a drain with its own reason),
generated (a drain-and-forward wrapper), host-only (a family that touches no stream) and
internal (exported, declared in no header: not a public API). An internal name is checked
here: if any file under the toolkit's or NCCL's include directory names it, the test
fails, so the class cannot hide a public function. A family of any other class fails.
Also fails on a host-only entry that no library exports and no header declares (stale),
and on a name the shim defines that the list also calls host-only (contradiction). Prints
the counts per source and class.

Environment: DH_TEST_SHIM, DH_TEST_HOST_ONLY, DH_TEST_ENTRY_TABLE (the generator's
classification), DH_TEST_CUDA_LIBDIR, DH_TEST_NCCL_LIBDIR, DH_TEST_CUDA_INCLUDE,
DH_TEST_NCCL_INCLUDE, DH_TEST_INTEROP_TYPES (the GL/EGL/VDPAU type headers gen-entries
wrote), DH_TEST_CC.
"""
import os
import re
import subprocess
import sys

LIBS = [("cudart", "libcudart.so.13", "CUDA_LIBDIR"), ("cublas", "libcublas.so.13", "CUDA_LIBDIR"),
        ("cublasLt", "libcublasLt.so.13", "CUDA_LIBDIR"), ("nccl", "libnccl.so.2", "NCCL_LIBDIR")]


def env(name):
    v = os.environ.get("DH_TEST_" + name)
    if not v:
        sys.exit("test_entry_points: DH_TEST_%s is not set" % name)
    return v


def nm_functions(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in ("T", "W", "i"):
            names.add(f[2].split("@")[0])
    return names


# The driver's headers scanned: cuda.h, and the graphics-interop ones (read with the
# GL/EGL/VDPAU types gen-entries declares by hand).
DRIVER_HEADERS = ["cuda.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h"]
CLASSES = ["wrapped", "generated", "host-only", "internal", "twin"]


def cuda_h_functions(cc, include, interop_types):
    names = set()
    src = "".join("#include <%s>\n" % h for h in DRIVER_HEADERS)
    # Current names, per-thread names, and the old ABI (__CUDA_API_VERSION_INTERNAL: the
    # names libcuda exports for programs built against an older toolkit).
    for extra in ([], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"],
                  ["-D__CUDA_API_VERSION_INTERNAL"]):
        text = subprocess.run([cc, "-E", "-P", "-x", "c"] + extra +
                              ["-I", include, "-idirafter", interop_types, "-"],
                              input=src, check=True, capture_output=True,
                              text=True).stdout
        names |= set(re.findall(r"\b(cu[A-Z]\w*)\s*\(", text))
        # A static inline function of the header is no entry point of the library.
        names -= set(re.findall(r"\bstatic\s+(?:__inline__|inline)\b[^;{(]*?\b(cu[A-Z]\w*)\s*\(",
                                text))
    return names


def host_only(path, problems):
    fam, out = None, {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^\[([\w:-]+)\]", line)
        if m:
            fam = m.group(1)
            if ":" in fam and not fam.endswith(":internal"):
                problems.append("[%s]: no such class (a family is host-only, or internal: "
                                "declared in no header)" % fam)
        elif line:
            out[line] = fam
    return out


def named_in_headers(names, dirs):
    """{name: first file under dirs whose text names it as a word}."""
    if not names:
        return {}
    pat = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    found = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                path = os.path.join(root, f)
                try:
                    text = open(path, errors="replace").read()
                except OSError:
                    continue
                for m in pat.finditer(text):
                    found.setdefault(m.group(1), path)
    return found


def base(n):
    return re.sub(r"_(ptsz|ptds)$", "", n)


def main():
    problems, counts = [], {}
    shim = nm_functions(env("SHIM"))
    host = host_only(env("HOST_ONLY"), problems)
    table = {}
    for line in open(env("ENTRY_TABLE")):
        lib, name, cls, why = line.rstrip("\n").split("\t")
        table[name] = cls
    required = {}  # name -> where it was found
    for short, soname, dirvar in LIBS:
        for n in nm_functions(os.path.join(env(dirvar), soname)):
            required.setdefault(n, short)
    for n in cuda_h_functions(env("CC"), env("CUDA_INCLUDE"), env("INTEROP_TYPES")):
        required.setdefault(n, "cuda.h")
    # libcuda itself is the GPU driver's, absent here; the toolkit's link stub exports
    # the same names (old ABI included).
    stub = os.path.join(env("CUDA_LIBDIR"), "stubs", "libcuda.so")
    if os.path.exists(stub):
        for n in nm_functions(stub):
            required.setdefault(n, "cuda")

    for n, where in sorted(required.items()):
        if n.startswith("pnccl"):
            twin = n[1:]
            cls = "twin" if twin in shim or twin in host else None
        elif n in shim:
            cls = "generated" if table.get(n) == "drain" else "wrapped"
        elif n in host or base(n) in host:
            fam = host.get(n) or host.get(base(n))
            cls = "internal" if fam.endswith(":internal") else "host-only"
        else:
            cls = None
        if cls is None:
            problems.append("%s (%s): neither defined by libdhelix_shim.so nor on the host-only "
                            "list" % (n, where))
            continue
        c = counts.setdefault(where, {})
        c[cls] = c.get(cls, 0) + 1
    known = set(required) | set(table)
    for n in sorted(host):
        if n not in known and not any(k.startswith(n + "_pt") for k in known):
            problems.append("%s: on the host-only list (%s) but no library exports it and no "
                            "header declares it" % (n, host[n]))
        if n in shim:
            problems.append("%s: defined by the shim and on the host-only list (%s)" % (n, host[n]))

    internal = {n for n, fam in host.items() if fam and fam.endswith(":internal")}
    named = named_in_headers(internal, [env("CUDA_INCLUDE"), env("NCCL_INCLUDE")])
    for n in sorted(named):
        problems.append("%s: on the host-only list as internal ([%s]) but %s names it: a "
                        "public function is wrapped or host-only" % (n, host[n], named[n]))

    total = len(required)
    print("shim.entry_points: %d functions (exports of the four libraries and cuda.h's "
          "declarations)" % total)
    print("%-9s %6s %8s %10s %10s %9s %5s" % (("from", "total") + tuple(CLASSES)))
    rows = [l[0] for l in LIBS] + ["cuda.h", "cuda"]
    for where in rows + ["all"]:
        c = counts.get(where, {}) if where != "all" else {
            k: sum(counts.get(w, {}).get(k, 0) for w in rows) for k in CLASSES}
        print("%-9s %6d %8d %10d %10d %9d %5d" % (
            (where, sum(c.values())) + tuple(c.get(k, 0) for k in CLASSES)))
    fams = {}
    for n in required:
        fam = host.get(n) or host.get(base(n))
        if fam and fam.endswith(":internal"):
            fams.setdefault(fam, []).append(n)
    for fam, names in sorted(fams.items()):
        print("internal [%s]: %d, named in no header (%s%s)" % (
            fam, len(names), " ".join(sorted(names)[:6]), " ..." if len(names) > 6 else ""))
    for p in problems:
        print("FAIL: " + p)
    print("%d passed, %d failed" % (0 if problems else total, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
