/*
 * op.c: the operation record itself (allocation, names, size, release), the small kinds
 * (memset, host function, event record/wait, stream-ordered free) and the replay switch.
 * Kernels, copies, cuBLAS and cuBLASLt have their own files (op_kernel.c, op_copy.c,
 * op_blas.c, op_lt.c).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "breaks.h"
#include "common/log.h"
#include "nccl_op.h"
#include "op_internal.h"

_Atomic unsigned dh__op_break;

static const char *const dh__op_kind_names[DH_OP_KIND_COUNT] = {
#define DH__OP_KIND_NAME(id, cls) #id,
    DH_OP_KINDS(DH__OP_KIND_NAME)
#undef DH__OP_KIND_NAME
};

const char *dh_op_kind_name(dh_op_kind_t k)
{
    return (unsigned)k < DH_OP_KIND_COUNT ? dh__op_kind_names[k] : "?";
}

/* ---- test-only switches (op_break.h) ---- */

_Atomic int dh__op_break_ready; /* the mask holds DHELIX_TEST_BREAK's bits */

unsigned dh__op_breaks_slow(void)
{
    static const struct {
        dh_break_id_t id;
        unsigned bit;
    } map[] = {
        {DH_BREAK_KERNEL_ARGS, DH_OP_BREAK_KERNEL_ARGS},
        {DH_BREAK_GEMM_SCALARS, DH_OP_BREAK_ALPHA_BETA},
        {DH_BREAK_LT_DESC, DH_OP_BREAK_LT_DESC},
        {DH_BREAK_PAGEABLE_H2D, DH_OP_BREAK_H2D_SOURCE},
        {DH_BREAK_LAUNCH_ATTRS, DH_OP_BREAK_LAUNCH_ATTRS},
    };
    unsigned mask = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (dh_break(map[i].id))
            mask |= map[i].bit;
    /* A concurrent dh_op_set_test_break wins: it marks the mask ready first. */
    int expect = 0;
    if (atomic_compare_exchange_strong(&dh__op_break_ready, &expect, 1))
        atomic_store_explicit(&dh__op_break, mask, memory_order_relaxed);
    return atomic_load_explicit(&dh__op_break, memory_order_relaxed);
}

void dh_op_set_test_break(unsigned mask)
{
    atomic_store_explicit(&dh__op_break_ready, 1, memory_order_relaxed);
    atomic_store_explicit(&dh__op_break, mask, memory_order_relaxed);
}

unsigned dh_op_test_break(void)
{
    return dh__op_breaks();
}

/* ---- shared helpers ---- */

/* Copying a zero object compiles to a few vector stores; memset of the same size to a
 * "rep stos" whose start-up cost was a tenth of a kernel capture. */
static const dh_op_t dh__op_zero;

dh_op_t *dh__op_new(dh_op_kind_t kind, cudaStream_t s, int device, size_t payload)
{
    dh_op_t *op = malloc(sizeof *op + payload);
    if (op == NULL)
        return NULL;
    *op = dh__op_zero;
    op->kind = kind;
    op->stream = s;
    op->device = device;
    op->payload_size = payload;
    return op;
}

dh_status_t dh__op_device(const dh_real_t *r, int *dev)
{
    dh_real_cudaGetDevice_t get = DH_REAL_FN(r, cudaGetDevice);
    if (get == NULL || get(dev) != cudaSuccess)
        return DH_ERR_STATE;
    return DH_OK;
}

dh_status_t dh__rt_quiet_begin(const dh_real_t *r)
{
    dh_real_cudaPeekAtLastError_t peek = DH_REAL_FN(r, cudaPeekAtLastError);
    if (peek == NULL || DH_REAL_FN(r, cudaGetLastError) == NULL)
        return DH_ERR_UNSUPPORTED;
    return peek() == cudaSuccess ? DH_OK : DH_ERR_STATE;
}

void dh__rt_quiet_end(const dh_real_t *r)
{
    r->cudaGetLastError();
}

size_t dh__dtype_size(cudaDataType t)
{
    switch (t) {
    case CUDA_R_8I:
    case CUDA_R_8U:
        return 1;
    case CUDA_R_16F:
    case CUDA_R_16BF:
    case CUDA_C_8I:
    case CUDA_C_8U:
        return 2;
    case CUDA_R_32F:
    case CUDA_R_32I:
    case CUDA_R_32U:
    case CUDA_C_16F:
    case CUDA_C_16BF:
        return 4;
    case CUDA_R_64F:
    case CUDA_C_32F:
    case CUDA_C_32I:
    case CUDA_C_32U:
        return 8;
    case CUDA_C_64F:
        return 16;
    default:
        return 0;
    }
}

/* ---- memset, host function, events, free ---- */

typedef struct dh__memset_pl {
    void *dst;
    int value;
    size_t n;
} dh__memset_pl_t;

typedef struct dh__host_pl {
    cudaHostFn_t fn;
    void *data; /* the framework's: the API says it must stay valid until fn runs */
} dh__host_pl_t;

typedef struct dh__event_pl {
    unsigned flags;
} dh__event_pl_t;

typedef struct dh__free_pl {
    void *ptr;
} dh__free_pl_t;

/* Allocates an op whose payload is a fixed struct of size bytes. */
static dh_status_t dh__op_small(dh_op_t **out, dh_op_kind_t kind, cudaStream_t s, size_t size)
{
    *out = NULL;
    const dh_real_t *r = dh_real();
    int dev;
    DH_CHECK(dh__op_device(r, &dev));
    dh_op_t *op = dh__op_new(kind, s, dev, size);
    if (op == NULL)
        return DH_ERR_NOMEM;
    *out = op;
    return DH_OK;
}

dh_status_t dh_op_capture_memset(dh_op_t **out, void *dst, int value, size_t n, cudaStream_t s)
{
    DH_CHECK(dh__op_small(out, DH_OP_MEMSET, s, sizeof(dh__memset_pl_t)));
    *(dh__memset_pl_t *)(*out)->payload = (dh__memset_pl_t){dst, value, n};
    return DH_OK;
}

dh_status_t dh_op_capture_host_func(dh_op_t **out, cudaStream_t s, cudaHostFn_t fn, void *data)
{
    DH_CHECK(dh__op_small(out, DH_OP_HOST_FUNC, s, sizeof(dh__host_pl_t)));
    *(dh__host_pl_t *)(*out)->payload = (dh__host_pl_t){fn, data};
    return DH_OK;
}

dh_status_t dh_op_capture_event_record(dh_op_t **out, cudaEvent_t e, cudaStream_t s,
                                       unsigned flags)
{
    DH_CHECK(dh__op_small(out, DH_OP_EVENT_RECORD, s, sizeof(dh__event_pl_t)));
    (*out)->event = e;
    ((dh__event_pl_t *)(*out)->payload)->flags = flags;
    return DH_OK;
}

dh_status_t dh_op_capture_event_wait(dh_op_t **out, cudaStream_t s, cudaEvent_t e,
                                     unsigned flags)
{
    DH_CHECK(dh__op_small(out, DH_OP_EVENT_WAIT, s, sizeof(dh__event_pl_t)));
    (*out)->event = e;
    ((dh__event_pl_t *)(*out)->payload)->flags = flags;
    return DH_OK;
}

dh_status_t dh_op_capture_free_async(dh_op_t **out, void *p, cudaStream_t s)
{
    DH_CHECK(dh__op_small(out, DH_OP_FREE_ASYNC, s, sizeof(dh__free_pl_t)));
    ((dh__free_pl_t *)(*out)->payload)->ptr = p;
    return DH_OK;
}

/* The record of a framework event: the shim's pooled instance first (what deferred waits
 * use), then the framework's own event, so that its queries, synchronisation and elapsed
 * times keep their meaning. flags 0 goes through cudaEventRecord, which every backend has. */
static int dh__replay_record(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    unsigned flags = ((const dh__event_pl_t *)op->payload)->flags;
    dh_real_cudaEventRecord_t rec = DH_REAL_FN(r, cudaEventRecord);
    if (rec == NULL)
        return cudaErrorInitializationError;
    if (ctx->record_event != NULL) {
        cudaError_t e = rec(ctx->record_event, ctx->stream);
        if (e != cudaSuccess)
            return e;
    }
    if (flags == 0)
        return rec(op->event, ctx->stream);
    dh_real_cudaEventRecordWithFlags_t recf = DH_REAL_FN(r, cudaEventRecordWithFlags);
    return recf != NULL ? recf(op->event, ctx->stream, flags) : cudaErrorInitializationError;
}

/* Whether the device runs all streams through one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS
 * = 1, as Megatron sets): then work runs in the order it was issued. Read at the first
 * replay, after the program's own set-up. */
static int dh__one_queue(void)
{
    static _Atomic int known = -1;
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
        v = e != NULL && atoi(e) == 1;
        atomic_store_explicit(&known, v, memory_order_relaxed);
    }
    return v;
}

/* A wait on the shim's instance of the record it depends on; with none (the record ran
 * before the scheduler saw it, e.g. in passthrough) the framework's event is current. A
 * wait that only orders issue costs nothing on a device with one hardware queue; there, on
 * the device, it would hold every later op of every stream behind the record (a long
 * data-parallel reduction would stall the next tensor-parallel collective and the compute
 * queued after it). */
static int dh__replay_wait(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    if (op->issue_only && dh__one_queue())
        return cudaSuccess;
    dh_real_cudaStreamWaitEvent_t wait = DH_REAL_FN(r, cudaStreamWaitEvent);
    if (wait == NULL)
        return cudaErrorInitializationError;
    cudaEvent_t e = ctx->wait_event != NULL ? ctx->wait_event : op->event;
    return wait(ctx->stream, e, ((const dh__event_pl_t *)op->payload)->flags);
}

static int dh__replay_small(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    switch (op->kind) {
    case DH_OP_MEMSET: {
        const dh__memset_pl_t *p = (const dh__memset_pl_t *)op->payload;
        dh_real_cudaMemsetAsync_t fn = DH_REAL_FN(r, cudaMemsetAsync);
        return fn != NULL ? fn(p->dst, p->value, p->n, ctx->stream)
                          : cudaErrorInitializationError;
    }
    case DH_OP_HOST_FUNC: {
        const dh__host_pl_t *p = (const dh__host_pl_t *)op->payload;
        dh_real_cudaLaunchHostFunc_t fn = DH_REAL_FN(r, cudaLaunchHostFunc);
        return fn != NULL ? fn(ctx->stream, p->fn, p->data) : cudaErrorInitializationError;
    }
    case DH_OP_FREE_ASYNC: {
        const dh__free_pl_t *p = (const dh__free_pl_t *)op->payload;
        dh_real_cudaFreeAsync_t fn = DH_REAL_FN(r, cudaFreeAsync);
        return fn != NULL ? fn(p->ptr, ctx->stream) : cudaErrorInitializationError;
    }
    default:
        return cudaErrorInvalidValue;
    }
}

/* ---- the record's life ---- */

int dh_op_replay(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    if (op == NULL || ctx == NULL)
        return cudaErrorInvalidValue;
    switch (op->kind) {
    case DH_OP_KERNEL:
        return dh__replay_kernel(op, ctx);
    case DH_OP_CU_KERNEL:
        return dh__replay_cu_kernel(op, ctx);
    case DH_OP_MEMCPY:
        return dh__replay_memcpy(op, ctx);
    case DH_OP_GEMM:
        return dh__replay_gemm(op, ctx);
    case DH_OP_LT_MATMUL:
        return dh__replay_lt(op, ctx);
    case DH_OP_EVENT_RECORD:
        return dh__replay_record(op, ctx);
    case DH_OP_EVENT_WAIT:
        return dh__replay_wait(op, ctx);
    case DH_OP_MEMSET:
    case DH_OP_HOST_FUNC:
    case DH_OP_FREE_ASYNC:
        return dh__replay_small(op, ctx);
    case DH_OP_NCCL:
    case DH_OP_NCCL_GROUP:
        return dh_nccl_op_replay(op, ctx);
    default:
        DH_ERROR(SCHED, "replay of an op of unknown kind %d", (int)op->kind);
        return cudaErrorInvalidValue;
    }
}

size_t dh_op_bytes(const dh_op_t *op)
{
    return op != NULL ? op->payload_size : 0;
}

void dh_op_free(dh_op_t *op)
{
    if (op)
        free(op->acc);
    free(op);
}

void dh__memset_view(const dh_op_t *op, void **dst, size_t *n)
{
    const dh__memset_pl_t *p = (const dh__memset_pl_t *)op->payload;
    *dst = p->dst;
    *n = p->n;
}

void *dh__free_ptr(const dh_op_t *op) { return ((const dh__free_pl_t *)op->payload)->ptr; }
