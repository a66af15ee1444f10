/*
 * op_internal.h: what the op_*.c files share; not an interface for other code.
 *
 * Every op is ONE allocation: the dh_op_t header followed by its payload, which starts
 * with a kind-specific struct and continues with the variable parts (kernel argument
 * bytes, launch attributes, copied host sources, cuBLASLt attribute records). Pointers
 * inside a payload may point into the same payload (it never moves), so dh_op_free() is a
 * single free() and a replay needs no rebuilding.
 */
#ifndef DH_OP_INTERNAL_H
#define DH_OP_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include "op.h"
#include "op_break.h"
#include "plan.h"
#include "real.h"

_Static_assert(offsetof(dh_op_t, payload) % 8 == 0, "payload must be 8-byte aligned");

#define DH__ALIGN8(x) (((x) + (size_t)7) & ~(size_t)7)

/* Mask of disabled deep copies (op_break.h); dh__op_breaks_slow() fills it from
 * DHELIX_TEST_BREAK on first use. */
extern _Atomic unsigned dh__op_break;
unsigned dh__op_breaks_slow(void);
extern _Atomic int dh__op_break_ready;

static inline unsigned dh__op_breaks(void)
{
    if (__builtin_expect(!atomic_load_explicit(&dh__op_break_ready, memory_order_relaxed), 0))
        return dh__op_breaks_slow();
    return atomic_load_explicit(&dh__op_break, memory_order_relaxed);
}

/* The capturing thread's current device into *dev. DH_ERR_STATE when the runtime cannot
 * say (no device, entry point missing): the call is then forwarded, and reports the
 * runtime's own error. */
dh_status_t dh__op_device(const dh_real_t *r, int *dev);

/* Guards queries the capture makes on the framework's thread (parameter info, pointer
 * attributes): a failing runtime query sets the thread's "last error", which PyTorch
 * checks after every launch (cudaGetLastError). dh__rt_quiet_begin() returns DH_OK when
 * no error is pending (otherwise DH_ERR_STATE: do not query, the framework has an error
 * to read); dh__rt_quiet_end() clears whatever the queries left behind. */
dh_status_t dh__rt_quiet_begin(const dh_real_t *r);
void dh__rt_quiet_end(const dh_real_t *r);

/* Whether the runtime calls p device or managed memory (op_copy.c); 0 when it cannot say.
 * Leaves no error on the calling thread. */
int dh__device_memory(const void *p);

/* Size in bytes of one scalar of a cudaDataType, 0 for types no GEMM scales by. */
size_t dh__dtype_size(cudaDataType t);

/* ---- what the kinds' describe and footprint functions share (op_desc.c) ---- */

/* The name of kernel f (a runtime function, or a CUfunction when driver is set), looked up
 * once per function; *hash its signature hash, *comm whether it matches
 * DHELIX_COMM_KERNELS. NULL (hash 0, comm 0) when out of memory. Any thread. */
const char *dh__kname(const void *f, int driver, uint64_t *hash, int *comm);
/* "f32", "bf16", ... for a cudaDataType; "t?" for others. */
const char *dh__dtype_name(int t);
/* The allocation the pointer-sized value v points into, as a "maybe written" access;
 * nothing when v points into no known allocation. */
void dh__fp_alloc_of(dh_op_fp_t *fp, uintptr_t v);

/* ---- the kinds' tables (each defined next to its kind's capture and replay) ---- */
extern const dh_op_kind_ops_t dh__kind_kernel, dh__kind_cu_kernel;   /* op_kernel.c */
extern const dh_op_kind_ops_t dh__kind_memcpy;                       /* op_copy.c */
extern const dh_op_kind_ops_t dh__kind_gemm;                         /* op_blas.c */
extern const dh_op_kind_ops_t dh__kind_lt;                           /* op_lt.c */
extern const dh_op_kind_ops_t dh__kind_graph;                        /* op_graph.c */

#endif
