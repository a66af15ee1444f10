/*
 * wrap_gen.c: the generated drain-and-forward wrappers of the runtime, the driver, cuBLAS
 * (cublasXt and the C++-only half-precision routines included) and cuBLASLt (wrap_gen.h).
 * Each is defined under the header's own prototype (entry_protos.h declares the per-thread
 * forms and the C++-only ones), so a list that drifts from the headers does not compile.
 */
#include <cublasLt.h>
#include <cublasXt.h>
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "breaks.h"
#include "entry_protos.h"
#include "wrap.h"
#include "wrap_gen.h"

/* Deprecated entry points are still exported and still called. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* The test break drain_generated (breaks.h) skips the drain: shim.breaks proves the
 * coverage program then fails. */
#define DH_GEN_DRAIN(lib, ret, name, params, args)                                         \
    DH_WRAP_DRAIN(lib, ret, name, params, args, DH_DRAIN_UNCAPTURABLE,                    \
                  dh_break(DH_BREAK_DRAIN_GENERATED), 1)

DH_HOOKS_GEN(DH_GEN_DRAIN)

int dh__gen_drain(void)
{
    if (!dh__may_defer())
        return 0;
    if (!dh_break(DH_BREAK_DRAIN_GENERATED))
        dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    return 1;
}

void dh__gen_done(int drained)
{
    if (drained)
        dh_sched_forwarded();
    dh__hook_leave();
}
