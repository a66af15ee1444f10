/*
 * op.c: the operation record itself (allocation, names, size, release), the kinds' tables
 * and the dispatch through them (description, footprint, validation, replay, release), and
 * the small kinds (memset, host function, event record/wait, stream-ordered free) with their
 * tables. Kernels, copies, cuBLAS and cuBLASLt have their own files (op_kernel.c,
 * op_copy.c, op_blas.c, op_lt.c); nccl_wrap/nccl_op.c registers the NCCL kinds.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breaks.h"
#include "common/log.h"
#include "mempool.h"
#include "op_internal.h"

_Atomic unsigned dh__op_break;

static const char *const dh__op_kind_names[DH_OP_KIND_COUNT] = {
#define DH__OP_KIND_NAME(id) #id,
    DH_OP_KINDS(DH__OP_KIND_NAME)
#undef DH__OP_KIND_NAME
};

const char *dh_op_kind_name(dh_op_kind_t k)
{
    return (unsigned)k < DH_OP_KIND_COUNT ? dh__op_kind_names[k] : "?";
}

/* ---- the kinds' tables ---- */

static const dh_op_kind_ops_t dh__kind_memset, dh__kind_host_func, dh__kind_event_record,
    dh__kind_event_wait, dh__kind_free_async;

/* Kinds defined in scheduler/ are here from the start; the others are installed by
 * dh_op_kind_register (release store; readers acquire, so a table is whole when seen). */
static const dh_op_kind_ops_t *_Atomic dh__kinds[DH_OP_KIND_COUNT] = {
    [DH_OP_KERNEL] = &dh__kind_kernel,
    [DH_OP_CU_KERNEL] = &dh__kind_cu_kernel,
    [DH_OP_MEMCPY] = &dh__kind_memcpy,
    [DH_OP_MEMSET] = &dh__kind_memset,
    [DH_OP_HOST_FUNC] = &dh__kind_host_func,
    [DH_OP_GEMM] = &dh__kind_gemm,
    [DH_OP_LT_MATMUL] = &dh__kind_lt,
    [DH_OP_EVENT_RECORD] = &dh__kind_event_record,
    [DH_OP_EVENT_WAIT] = &dh__kind_event_wait,
    [DH_OP_FREE_ASYNC] = &dh__kind_free_async,
    [DH_OP_GRAPH_LAUNCH] = &dh__kind_graph,
};

dh_status_t dh_op_kind_register(dh_op_kind_t k, const dh_op_kind_ops_t *ops)
{
    if ((unsigned)k >= DH_OP_KIND_COUNT || ops == NULL || ops->replay == NULL)
        return DH_ERR_INVALID;
    const dh_op_kind_ops_t *expect = NULL;
    if (atomic_compare_exchange_strong_explicit(&dh__kinds[k], &expect, ops, memory_order_release,
                                                memory_order_acquire))
        return DH_OK;
    return expect == ops ? DH_OK : DH_ERR_INVALID;
}

const dh_op_kind_ops_t *dh_op_kind_ops(dh_op_kind_t k)
{
    if ((unsigned)k >= DH_OP_KIND_COUNT)
        return NULL;
    return atomic_load_explicit(&dh__kinds[k], memory_order_acquire);
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

dh_op_t *dh_op_alloc(dh_op_kind_t kind, cudaStream_t s, int device, size_t payload)
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
    dh_op_t *op = dh_op_alloc(kind, s, dev, size);
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

void *dh_op_free_ptr(const dh_op_t *op)
{
    return op->kind == DH_OP_FREE_ASYNC ? ((const dh__free_pl_t *)op->payload)->ptr : NULL;
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

static int dh__replay_memset(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh__memset_pl_t *p = (const dh__memset_pl_t *)op->payload;
    dh_real_cudaMemsetAsync_t fn = DH_REAL_FN(dh_real(), cudaMemsetAsync);
    return fn != NULL ? fn(p->dst, p->value, p->n, ctx->stream) : cudaErrorInitializationError;
}

static int dh__replay_host_func(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh__host_pl_t *p = (const dh__host_pl_t *)op->payload;
    dh_real_cudaLaunchHostFunc_t fn = DH_REAL_FN(dh_real(), cudaLaunchHostFunc);
    return fn != NULL ? fn(ctx->stream, p->fn, p->data) : cudaErrorInitializationError;
}

/* A parked block taken by a later allocation lives on as that allocation: no real free
 * (mempool.h). */
static int dh__replay_free(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh__free_pl_t *p = (const dh__free_pl_t *)op->payload;
    if (dh_mpool_release(op))
        return 0;
    dh_real_cudaFreeAsync_t fn = DH_REAL_FN(dh_real(), cudaFreeAsync);
    return fn != NULL ? fn(p->ptr, ctx->stream) : cudaErrorInitializationError;
}

/* ---- the small kinds' descriptions and footprints ---- */

static void dh__memset_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    const dh__memset_pl_t *p = (const dh__memset_pl_t *)op->payload;
    d->shape = dh_op_hash_u64(DH_OP_HASH_INIT, p->n);
    d->bytes = p->n;
    snprintf(d->name, sizeof d->name, "memset %zu", p->n);
}

static void dh__memset_footprint(const dh_op_t *op, dh_op_fp_t *fp)
{
    const dh__memset_pl_t *p = (const dh__memset_pl_t *)op->payload;
    dh_op_fp_range(fp, (uintptr_t)p->dst, p->n, 1);
}

/* cudaMemsetAsync refuses at the call a destination that is not device memory
 * (cudaErrorInvalidValue): only memory the runtime calls device or managed is deferred,
 * the rest forwarded for the runtime to judge. */
static int dh__memset_validate(const dh_op_t *op)
{
    const dh__memset_pl_t *p = (const dh__memset_pl_t *)op->payload;
    return dh__device_memory(p->dst) ? 0 : cudaErrorInvalidValue;
}

static void dh__host_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    (void)op;
    snprintf(d->name, sizeof d->name, "host function");
}

static void dh__event_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    snprintf(d->name, sizeof d->name, "%s", op->kind == DH_OP_EVENT_RECORD ? "record" : "wait");
}

static void dh__free_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    d->bytes = op->free_bytes;
    snprintf(d->name, sizeof d->name, "free %zu", op->free_bytes);
}

/* Events and frees touch no memory the dependency checks order: the scheduler orders them
 * itself (event instances, the barrier a free waits for). */
static void dh__footprint_none(const dh_op_t *op, dh_op_fp_t *fp)
{
    (void)op;
    (void)fp;
}

static const dh_op_kind_ops_t dh__kind_memset = {
    .name = "MEMSET",
    .cls = DH_CLS_COPY,
    .flags = DH_OPK_TIMED | DH_OPK_ON_DEVICE,
    .describe = dh__memset_describe,
    .footprint = dh__memset_footprint,
    .validate = dh__memset_validate,
    .replay = dh__replay_memset,
};

/* A host function may touch anything: no footprint. */
static const dh_op_kind_ops_t dh__kind_host_func = {
    .name = "HOST_FUNC",
    .cls = DH_CLS_HOST,
    .flags = DH_OPK_TIMED,
    .describe = dh__host_describe,
    .replay = dh__replay_host_func,
};

static const dh_op_kind_ops_t dh__kind_event_record = {
    .name = "EVENT_RECORD",
    .cls = DH_CLS_EVENT,
    .describe = dh__event_describe,
    .footprint = dh__footprint_none,
    .replay = dh__replay_record,
};

static const dh_op_kind_ops_t dh__kind_event_wait = {
    .name = "EVENT_WAIT",
    .cls = DH_CLS_EVENT,
    .describe = dh__event_describe,
    .footprint = dh__footprint_none,
    .replay = dh__replay_wait,
};

static const dh_op_kind_ops_t dh__kind_free_async = {
    .name = "FREE_ASYNC",
    .cls = DH_CLS_FREE,
    .describe = dh__free_describe,
    .footprint = dh__footprint_none,
    .replay = dh__replay_free,
};

/* ---- statuses across API families ---- */

/* Codes that mean the same in the runtime and the driver and carry the same number (CUDA
 * numbers them alike since 10.1; the asserts check these against the headers in use). */
#define DH__SHARED_CODES(X)                                               \
    X(cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE)                    \
    X(cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY)                \
    X(cudaErrorInitializationError, CUDA_ERROR_NOT_INITIALIZED)           \
    X(cudaErrorCudartUnloading, CUDA_ERROR_DEINITIALIZED)                 \
    X(cudaErrorInvalidDevice, CUDA_ERROR_INVALID_DEVICE)                  \
    X(cudaErrorInvalidKernelImage, CUDA_ERROR_INVALID_IMAGE)              \
    X(cudaErrorDeviceUninitialized, CUDA_ERROR_INVALID_CONTEXT)           \
    X(cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE)          \
    X(cudaErrorSymbolNotFound, CUDA_ERROR_NOT_FOUND)                      \
    X(cudaErrorNotReady, CUDA_ERROR_NOT_READY)                            \
    X(cudaErrorIllegalAddress, CUDA_ERROR_ILLEGAL_ADDRESS)                \
    X(cudaErrorLaunchOutOfResources, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)  \
    X(cudaErrorLaunchTimeout, CUDA_ERROR_LAUNCH_TIMEOUT)                  \
    X(cudaErrorLaunchFailure, CUDA_ERROR_LAUNCH_FAILED)                   \
    X(cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED)                    \
    X(cudaErrorUnknown, CUDA_ERROR_UNKNOWN)

#define DH__SAME(rt, drv) _Static_assert((int)rt == (int)drv, #rt " != " #drv);
DH__SHARED_CODES(DH__SAME)
#undef DH__SAME

static int dh__shared_code(int code)
{
    switch (code) {
#define DH__CASE(rt, drv) case (int)rt:
        DH__SHARED_CODES(DH__CASE)
#undef DH__CASE
        return 1;
    default:
        return 0;
    }
}

CUresult dh_cuda_to_cu(int cuda_err)
{
    return cuda_err == 0 ? CUDA_SUCCESS
                         : dh__shared_code(cuda_err) ? (CUresult)cuda_err : CUDA_ERROR_UNKNOWN;
}

int dh_op_status_to_cuda(const dh_op_t *op, int rc)
{
    if (rc == 0)
        return 0;
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    switch (k != NULL ? k->api : DH_OP_API_RUNTIME) {
    case DH_OP_API_DRIVER:
        return dh__shared_code(rc) ? rc : cudaErrorUnknown;
    case DH_OP_API_CUBLAS: {
        dh_real_cudaGetLastError_t last = DH_REAL_FN(dh_real(), cudaGetLastError);
        cudaError_t e = last != NULL ? last() : cudaSuccess;
        return e != cudaSuccess ? (int)e : cudaErrorUnknown;
    }
    default:
        return rc;
    }
}

/* ---- the record's life: dispatch through the kind's table ---- */

void dh_op_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    memset(d, 0, sizeof *d);
    d->sig = dh_op_hash_u64(DH_OP_HASH_INIT, op->kind);
    d->shape = DH_OP_HASH_INIT;
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    d->cls = k != NULL ? k->cls : DH_CLS_HOST;
    if (k != NULL && k->describe != NULL)
        k->describe(op, d);
    else
        snprintf(d->name, sizeof d->name, "%s", dh_op_kind_name(op->kind));
}

int dh_op_footprint(const dh_op_t *op, dh_op_access_t *acc, int max)
{
    dh_op_fp_t fp = {acc, 0, max, 0};
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (k == NULL || k->footprint == NULL)
        return -1;
    k->footprint(op, &fp);
    return fp.over ? -1 : fp.n;
}

/* Streams' devices, as each capturing thread last learnt them: a few entries per thread (a
 * framework uses a handful of streams per thread), dropped when any stream is destroyed
 * (a handle may then be reused on another device). */
#define DH__SDEV_SLOTS 8
static _Atomic uint64_t dh__streams_gen = 1;
static _Thread_local struct {
    uint64_t gen;
    unsigned next;
    cudaStream_t s[DH__SDEV_SLOTS];
    int dev[DH__SDEV_SLOTS];
} dh__sdev;

void dh_op_streams_changed(void) { atomic_fetch_add(&dh__streams_gen, 1); }

/* Whether stream s belongs to device (the special streams belong to the current device);
 * 0 for a handle the runtime does not know; 1 when the runtime cannot be asked. */
static int dh__stream_on(cudaStream_t s, int device)
{
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return 1;
    uint64_t gen = atomic_load_explicit(&dh__streams_gen, memory_order_relaxed);
    if (dh__sdev.gen != gen) {
        memset(&dh__sdev, 0, sizeof dh__sdev);
        dh__sdev.gen = gen;
    }
    for (unsigned i = 0; i < DH__SDEV_SLOTS; i++)
        if (dh__sdev.s[i] == s)
            return dh__sdev.dev[i] == device;
    const dh_real_t *r = dh_real();
    dh_real_cudaStreamGetDevice_t get = DH_REAL_FN(r, cudaStreamGetDevice);
    int dev = device;
    if (get == NULL || dh__rt_quiet_begin(r) != DH_OK)
        return 1;
    if (get(s, &dev) != cudaSuccess) {
        /* Not a live stream: the real call reports it (cudaErrorInvalidResourceHandle). */
        dh__rt_quiet_end(r);
        return 0;
    }
    unsigned i = dh__sdev.next++ % DH__SDEV_SLOTS;
    dh__sdev.s[i] = s;
    dh__sdev.dev[i] = dev;
    return dev == device;
}

int dh_op_validate(const dh_op_t *op)
{
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (k == NULL)
        return 0;
    if ((k->flags & DH_OPK_ON_DEVICE) && !dh__stream_on(op->stream, op->device))
        return cudaErrorInvalidValue;
    return k->validate != NULL ? k->validate(op) : 0;
}

void dh_op_learn(const dh_op_t *op, int rc)
{
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (k != NULL && k->learn != NULL)
        k->learn(op, rc);
}

/* Open addressing over 4096 slots; 0 marks a free slot (a key of 0 is stored as 1). */
#define DH__ACCEPT_SLOTS 4096u
static _Atomic uint64_t dh__accepted[DH__ACCEPT_SLOTS];

int dh_op_accepted(uint64_t key)
{
    key = key ? key : 1;
    for (unsigned i = 0; i < DH__ACCEPT_SLOTS; i++) {
        uint64_t v = atomic_load_explicit(&dh__accepted[(key + i) & (DH__ACCEPT_SLOTS - 1)],
                                          memory_order_relaxed);
        if (v == key)
            return 1;
        if (v == 0)
            return 0;
    }
    return 0;
}

void dh_op_accept(uint64_t key)
{
    key = key ? key : 1;
    for (unsigned i = 0; i < DH__ACCEPT_SLOTS; i++) {
        _Atomic uint64_t *slot = &dh__accepted[(key + i) & (DH__ACCEPT_SLOTS - 1)];
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong_explicit(slot, &expect, key, memory_order_relaxed,
                                                    memory_order_relaxed) ||
            expect == key)
            return;
    }
}

int dh_op_replay(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    if (op == NULL || ctx == NULL)
        return cudaErrorInvalidValue;
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (k == NULL) {
        DH_ERROR(SCHED, "replay of an op of kind %s, which has no table", dh_op_kind_name(op->kind));
        return cudaErrorInvalidValue;
    }
    return k->replay(op, ctx);
}

size_t dh_op_bytes(const dh_op_t *op)
{
    return op != NULL ? op->payload_size : 0;
}

void dh_op_free(dh_op_t *op)
{
    if (op == NULL)
        return;
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (k != NULL && k->release != NULL)
        k->release(op);
    dh_mpool_release(op); /* a free dropped unreplayed: its block leaves the pool */
    free(op->acc);
    free(op);
}
