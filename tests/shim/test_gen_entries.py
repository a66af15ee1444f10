#!/usr/bin/env python3
"""shim.gen_entries: scripts/gen-entries on small headers made here.

Checks what the classification rests on: a function on the hand-written list is left to
its wrapper, one on the host-only list (or whose plain name is, for a per-thread form) gets
no wrapper, everything else gets a drain-and-forward wrapper under its own prototype
(unnamed parameters named, arrays and function pointers kept), the per-thread forms are
declared for the wrapper file, static inline functions are no entry points; and that the
generator refuses what it cannot wrap: a variadic function, an unclassified NCCL function,
a function of a library returning something else than the library's status; that a graphics-
interop header is read with the GL types declared by hand and its functions drained; that
an "internal" name (declared in no header) is refused when a header declares it, and a
family of another class (the old "unhandled") is refused.

Environment: DH_TEST_GEN (scripts/gen-entries), DH_TEST_CC.
"""
import os
import subprocess
import sys
import tempfile

RT = r"""
typedef enum cudaError_enum { cudaSuccess = 0 } cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef void (*cudaHostFn_t)(void *);
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define cudaCopyThing cudaCopyThing_ptsz
#endif
extern cudaError_t cudaCopyThing(void *dst, const void *src, unsigned long long flags, cudaStream_t stream);
extern cudaError_t cudaQueryThing(int *, unsigned int);
extern cudaError_t cudaArrays(const float *const list[], void (*cb)(void *), cudaHostFn_t);
extern cudaError_t cudaHandWrapped(int x);
extern cudaError_t cudaHostSide(int *out);
static inline cudaError_t cudaInlineHelper(int x) { return (cudaError_t)x; }
%s
"""
EMPTY = "\n"


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def run(gen, cc, inc, hooks, host, extra_rt="", nccl=EMPTY):
    for h in ["cuda_profiler_api.h", "cuda.h", "cudaProfiler.h", "cublasLt.h", "cublas_api.h",
              "cublasXt.h", "cublas.h"]:
        write(inc, h, EMPTY)
    write(inc, "cuda_runtime_api.h", RT % extra_rt)
    write(inc, "nccl.h", nccl)
    out = os.path.join(inc, "out")
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, gen, "--cc", cc, "--include", inc, "--hooks", hooks, "--host-only",
           host, "--out-list", os.path.join(out, "list.h"), "--out-protos",
           os.path.join(out, "protos.h"), "--out-table", os.path.join(out, "table.tsv")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    files = {}
    if r.returncode == 0:
        for n in ("list.h", "protos.h", "table.tsv"):
            files[n] = open(os.path.join(out, n)).read()
    return r, files


def main():
    gen, cc = os.environ.get("DH_TEST_GEN"), os.environ.get("DH_TEST_CC", "cc")
    if not gen:
        sys.exit("DH_TEST_GEN is not set")
    fails, checks = [], []

    def expect(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        checks.append(what)
        if not cond:
            fails.append(what)

    with tempfile.TemporaryDirectory() as d:
        hooks = os.path.join(d, "hook_list.h")
        write(d, "hook_list.h", "X(CUDART, cudaError_t, cudaHandWrapped, (int x), (x))\n")
        host = os.path.join(d, "host.txt")
        write(d, "host.txt", "# comment\n[rt-query] queries\ncudaQueryThing\n")
        r, f = run(gen, cc, d, hooks, host)
        expect(r.returncode == 0, "a clean header set is classified (stderr: %s)" % r.stderr.strip())
        lst, protos, table = f.get("list.h", ""), f.get("protos.h", ""), f.get("table.tsv", "")
        expect("X(CUDART, cudaError_t, cudaCopyThing, (void *dst, const void *src, unsigned "
               "long long flags, cudaStream_t stream), (dst, src, flags, stream))" in lst,
               "a drain wrapper keeps the header's prototype and names")
        expect("cudaCopyThing_ptsz" in lst and "cudaCopyThing_ptsz(" in protos,
               "the per-thread form is wrapped and declared for the wrapper file")
        expect("cudaArrays, (const float *const list[], void (*cb)(void *), cudaHostFn_t p2), "
               "(list, cb, p2)" in lst,
               "arrays and function pointers keep their names, an unnamed parameter gets one")
        expect("cudaQueryThing" not in lst and "cudaQueryThing\thost-only\trt-query" in table,
               "a host-only function gets no wrapper")
        expect("cudaHandWrapped" not in lst and "cudaHandWrapped\twrapped" in table,
               "a hand-wrapped function is left to its wrapper")
        expect("cudaHostSide\tdrain" in table, "an unlisted function is drained by default")
        expect("cudaInlineHelper" not in table, "a static inline function is no entry point")

        r, _ = run(gen, cc, d, hooks, host, "extern cudaError_t cudaPrintf(const char *f, ...);")
        expect(r.returncode == 1 and "cudaPrintf: variadic" in r.stderr,
               "a variadic function is refused")
        r, _ = run(gen, cc, d, hooks, host, "extern int cudaOddReturn(void);")
        expect(r.returncode == 1 and "cudaOddReturn: returns int" in r.stderr,
               "a function returning another type than the status is refused")
        r, _ = run(gen, cc, d, hooks, host,
                   nccl="typedef int ncclResult_t;\nncclResult_t ncclNewThing(int a);\n")
        expect(r.returncode == 1 and "ncclNewThing: not classified" in r.stderr,
               "an unclassified NCCL function is refused")
        write(d, "host.txt", "[rt-int:internal] not public\ncudaHostSide\n")
        r, _ = run(gen, cc, d, hooks, host)
        expect(r.returncode == 1 and "cudaHostSide: on host_only.txt as internal" in r.stderr,
               "an internal name that a header declares is refused")
        write(d, "host.txt", "[rt-gap:unhandled] cannot wrap\ncudaHostSide\n")
        r, _ = run(gen, cc, d, hooks, host)
        expect(r.returncode == 1 and "expected '[family] reason'" in r.stderr,
               "a family of another class than host-only or internal is refused")
        write(d, "host.txt", "[rt-query] queries\ncudaQueryThing\n")
        write(d, "cuda_gl_interop.h", "#include <cuda_runtime_api.h>\n#include <GL/gl.h>\n"
              "extern cudaError_t cudaGLThingAsync(GLuint buf, GLenum how, cudaStream_t s);\n")
        r, f = run(gen, cc, d, hooks, host)
        os.unlink(os.path.join(d, "cuda_gl_interop.h"))
        expect(r.returncode == 0 and "X(CUDART, cudaError_t, cudaGLThingAsync, (GLuint buf, "
               "GLenum how, cudaStream_t s), (buf, how, s))" in f.get("list.h", "") and
               "#include <cuda_gl_interop.h>" in f.get("protos.h", ""),
               "an interop header is read with the GL types declared by hand and drained "
               "(stderr: %s)" % r.stderr.strip())
        write(d, "host.txt", "[rt-query] queries\ncudaQueryThing\ncudaQueryThing\n")
        r, _ = run(gen, cc, d, hooks, host)
        expect(r.returncode == 1 and "listed twice" in r.stderr, "a name listed twice is refused")
    print("%d passed, %d failed" % (len(checks) - len(fails), len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
