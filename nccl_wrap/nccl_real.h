/*
 * nccl_real.h: the library functions the NCCL wrappers and replays forward to.
 *
 * NCCL exports every API function twice: a weak ncclX and a strong pncclX, its
 * profiling-interface twin (NVIDIA/nccl src/include/core.h, NCCL_API). The shim defines
 * ncclX and calls pncclX, so a second interposer of ncclX (a profiler) is not entered
 * again and the shim's own calls (replays, the member exchange, materialised groups) never
 * reach its wrappers. A library without pncclX (a stand-in that defines only ncclX) is
 * reached through the next ncclX after the shim instead.
 *
 * Resolution: each entry is looked up with the C library's own dlsym (dlvsym), RTLD_NEXT
 * relative to the object that holds this code, on first use; an entry that is missing is
 * looked up again on each request (a library loaded later is still found; a function that
 * truly does not exist costs a dlsym per call, and such a call fails anyway).
 *
 * Thread-safety: everything here is thread-safe; entries are atomics written at most once.
 */
#ifndef DH_NCCL_REAL_H
#define DH_NCCL_REAL_H

#include <stdatomic.h>

#include <nccl.h>

#include "hook_list.h"
#include "nccl_dev.h"

/* nccl.h declares these without a prototype; C11 code needs one. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

typedef enum dh_nccl_fn {
#define DH__NCCL_FN_ENUM(lib, ret, name, params, args) DH_NCCL_FN_##name,
    DH_HOOKS_NCCL(DH__NCCL_FN_ENUM)
#undef DH__NCCL_FN_ENUM
    DH_NCCL_FN_COUNT
} dh_nccl_fn_t;

/* Resolved entries (nccl_real.c); read through dh_nccl_real_fn. */
extern void *_Atomic dh__nccl_fns[DH_NCCL_FN_COUNT];
/* Looks fn up (nccl_real.c). */
void *dh__nccl_real_slow(dh_nccl_fn_t fn);

/* The function to call for entry fn (pncclX, else the next ncclX), or NULL when the
 * process has neither. One acquire load once resolved. */
static inline void *dh_nccl_real_fn(dh_nccl_fn_t fn)
{
    void *p = atomic_load_explicit(&dh__nccl_fns[fn], memory_order_acquire);
    return __builtin_expect(p != NULL, 1) ? p : dh__nccl_real_slow(fn);
}

/* Typed: DH_NCCL_REAL(ncclAllReduce)(...). May be NULL (see above). */
#define DH_NCCL_REAL(name) ((__typeof__(&name))dh_nccl_real_fn(DH_NCCL_FN_##name))

/* Nonzero when fn is the library's pncclX (not a fallback to ncclX); for diagnostics. */
int dh_nccl_real_is_profiling(dh_nccl_fn_t fn);

#endif
