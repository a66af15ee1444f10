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

/* Allocates an op of kind with payload bytes of payload (uninitialised), the header zeroed
 * but for kind, stream, device and payload_size. Returns NULL when out of memory. */
dh_op_t *dh__op_new(dh_op_kind_t kind, cudaStream_t s, int device, size_t payload);

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

/* Size in bytes of one scalar of a cudaDataType, 0 for types no GEMM scales by. */
size_t dh__dtype_size(cudaDataType t);

/* ---- per-kind views for op_desc.c (what each payload holds, read-only) ---- */
void dh__memset_view(const dh_op_t *op, void **dst, size_t *n);
void *dh__free_ptr(const dh_op_t *op);
void dh__kernel_view(const dh_op_t *op, const void **func, unsigned grid[3], unsigned block[3],
                     size_t *shmem, const unsigned char **args, size_t *args_size);
/* The values of a kernel's pointer-sized parameters (at most max into out): only whole
 * parameters, never bytes inside a struct parameter, whose padding may hold whatever the
 * caller's stack held. */
size_t dh__kernel_pointer_params(const dh_op_t *op, uintptr_t *out, size_t max);
typedef struct dh__gemm_view {
    int sgemm, batch;
    long long sa, sb, sc;
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    const void *A, *B;
    void *C;
    cudaDataType at, bt, ct;
    cublasComputeType_t compute;
} dh__gemm_view_t;
void dh__gemm_view(const dh_op_t *op, dh__gemm_view_t *v);
typedef struct dh__lt_view {
    const void *A, *B, *C;
    void *D;
    int32_t ta, tb;             /* cublasOperation_t from the descriptor (0 when absent) */
    uint64_t m, n, k;           /* from the D (or C) and A layouts; 0 when absent */
    int32_t type;               /* cudaDataType of A (-1 when absent) */
    int32_t batch;              /* batch count of D (1 when absent) */
    uint32_t epilogue;
    const void *ptrs[4];        /* bias, aux and scale pointers set in the descriptor */
    int nptrs;
} dh__lt_view_t;
void dh__lt_view(const dh_op_t *op, dh__lt_view_t *v);
typedef struct dh__copy_view {
    void *dst;
    const void *src;
    size_t n;
    enum cudaMemcpyKind kind;
    int src_owned;              /* src is the op's own copy of a pageable source */
} dh__copy_view_t;
dh__copy_view_t dh__copy_view(const dh_op_t *op);

/* ---- per-kind replays (ctx: the dispatcher's; returns the API's status as an int) ---- */
int dh__replay_kernel(dh_op_t *op, const dh_replay_ctx_t *ctx);
int dh__replay_cu_kernel(dh_op_t *op, const dh_replay_ctx_t *ctx);
int dh__replay_memcpy(dh_op_t *op, const dh_replay_ctx_t *ctx);
int dh__replay_gemm(dh_op_t *op, const dh_replay_ctx_t *ctx);
int dh__replay_lt(dh_op_t *op, const dh_replay_ctx_t *ctx);

#endif
