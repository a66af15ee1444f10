/*
 * op_kernel.c: capture and replay of kernel launches (runtime and driver).
 *
 * A launch passes its arguments as an array of pointers into the framework's memory
 * (often a reused stack or heap buffer): the capture copies each argument, whose offset
 * and size come from cudaFuncGetParamInfo / cuFuncGetParamInfo, into one packed buffer in
 * the payload, and builds the pointer array the replay passes. A driver launch may instead
 * pass one packed buffer through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE), which is
 * copied whole. Launch attribute arrays of the Ex entry points are copied too.
 *
 * Parameter layouts are cached per function for the life of the process: a bucket array
 * of immutable, singly linked entries. A lookup is lock-free (acquire loads); a miss asks
 * the runtime or driver index by index WITHOUT any lock held (the query may call back into
 * code that captures), then publishes under dh__pcache_lock, keeping the first entry if
 * another thread won the race. Entries are never freed, so a captured op may point at its
 * entry. Entries are keyed by address: a CUfunction whose module is unloaded and whose
 * address is later given to a different function would find the old layout. PyTorch and
 * Triton keep their modules loaded for the life of the process.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "op_internal.h"

/* Bounds that reject a nonsensical answer rather than trusting it: CUDA 12.1+ allows
 * 32764 bytes of parameters; a backend that never says "no such index" is not believed. */
#define DH__ARGS_MAX ((size_t)1 << 20)
#define DH__PARAMS_MAX 8192u
#define DH__EXTRA_MAX 64

typedef struct dh__param {
    uint32_t off, size;
} dh__param_t;

typedef struct dh__pinfo {
    struct dh__pinfo *next; /* bucket chain; immutable once published */
    const void *key;        /* host stub (runtime) or CUfunction (driver) */
    int driver;
    uint32_t nparams;
    uint32_t args_size;     /* bytes of the packed buffer: max(off + size) */
    dh__param_t p[];
} dh__pinfo_t;

#define DH__PCACHE_BITS 12
static _Atomic(dh__pinfo_t *) dh__pcache[1u << DH__PCACHE_BITS];
static pthread_mutex_t dh__pcache_lock = PTHREAD_MUTEX_INITIALIZER; /* serialises inserts */

static inline size_t dh__phash(const void *key, int driver)
{
    uint64_t x = ((uint64_t)(uintptr_t)key ^ (uint64_t)driver) * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> (64 - DH__PCACHE_BITS));
}

static inline const dh__pinfo_t *dh__pcache_find(size_t b, const void *key, int driver)
{
    for (const dh__pinfo_t *e = atomic_load_explicit(&dh__pcache[b], memory_order_acquire);
         e != NULL; e = e->next)
        if (e->key == key && e->driver == driver)
            return e;
    return NULL;
}

/* One parameter's offset and size: 0 ok, 1 past the last parameter, -1 no answer. */
typedef int (*dh__pquery_t)(const dh_real_t *r, const void *key, size_t i, size_t *off,
                            size_t *size);

static int dh__pquery_rt(const dh_real_t *r, const void *key, size_t i, size_t *off,
                         size_t *size)
{
    cudaError_t e = r->cudaFuncGetParamInfo(key, i, off, size);
    return e == cudaSuccess ? 0 : e == cudaErrorInvalidValue ? 1 : -1;
}

static int dh__pquery_cu(const dh_real_t *r, const void *key, size_t i, size_t *off,
                         size_t *size)
{
    CUresult e = r->cuFuncGetParamInfo((CUfunction)key, i, off, size);
    return e == CUDA_SUCCESS ? 0 : e == CUDA_ERROR_INVALID_VALUE ? 1 : -1;
}

/* A CUkernel (cuLibraryGetKernel) passed to cuLaunchKernel as a CUfunction is not a
 * function to cuFuncGetParamInfo; cuKernelGetParamInfo knows it. */
static int dh__pquery_cuk(const dh_real_t *r, const void *key, size_t i, size_t *off,
                          size_t *size)
{
    CUresult e = r->cuKernelGetParamInfo((CUkernel)key, i, off, size);
    return e == CUDA_SUCCESS ? 0 : e == CUDA_ERROR_INVALID_VALUE ? 1 : -1;
}

/* Asks for every parameter of key and returns a new, unpublished entry. */
static dh_status_t dh__pinfo_query(const dh_real_t *r, dh__pquery_t q, const void *key,
                                   int driver, dh__pinfo_t **out)
{
    size_t cap = 16, n = 0, end = 0;
    dh__pinfo_t *e = malloc(sizeof *e + cap * sizeof(dh__param_t));
    if (e == NULL)
        return DH_ERR_NOMEM;
    for (;;) {
        size_t off = 0, size = 0;
        int rc = q(r, key, n, &off, &size);
        if (rc == 1)
            break;
        if (rc < 0 || n >= DH__PARAMS_MAX || off > DH__ARGS_MAX || size > DH__ARGS_MAX ||
            off + size > DH__ARGS_MAX) {
            free(e);
            return DH_ERR_UNSUPPORTED;
        }
        if (n == cap) {
            cap *= 2;
            dh__pinfo_t *g = realloc(e, sizeof *e + cap * sizeof(dh__param_t));
            if (g == NULL) {
                free(e);
                return DH_ERR_NOMEM;
            }
            e = g;
        }
        e->p[n++] = (dh__param_t){(uint32_t)off, (uint32_t)size};
        if (off + size > end)
            end = off + size;
    }
    e->next = NULL;
    e->key = key;
    e->driver = driver;
    e->nparams = (uint32_t)n;
    e->args_size = (uint32_t)end;
    *out = e;
    return DH_OK;
}

static dh_status_t dh__pinfo_miss(const dh_real_t *r, const void *key, int driver,
                                  dh__pinfo_t **out)
{
    if (!driver) {
        if (DH_REAL_FN(r, cudaFuncGetParamInfo) == NULL)
            return DH_ERR_UNSUPPORTED;
        /* The query past the last index fails and sets the thread's last error. */
        DH_CHECK(dh__rt_quiet_begin(r));
        dh_status_t st = dh__pinfo_query(r, dh__pquery_rt, key, 0, out);
        dh__rt_quiet_end(r);
        return st;
    }
    dh_status_t st = DH_ERR_UNSUPPORTED;
    if (DH_REAL_FN(r, cuFuncGetParamInfo) != NULL)
        st = dh__pinfo_query(r, dh__pquery_cu, key, 1, out);
    if (st == DH_ERR_UNSUPPORTED && DH_REAL_FN(r, cuKernelGetParamInfo) != NULL)
        st = dh__pinfo_query(r, dh__pquery_cuk, key, 1, out);
    return st;
}

/* The parameter layout of key. Lock-free when cached. */
static dh_status_t dh__pinfo_get(const dh_real_t *r, const void *key, int driver,
                                 const dh__pinfo_t **out)
{
    size_t b = dh__phash(key, driver);
    const dh__pinfo_t *hit = dh__pcache_find(b, key, driver);
    if (__builtin_expect(hit != NULL, 1)) {
        *out = hit;
        return DH_OK;
    }
    dh__pinfo_t *e = NULL;
    dh_status_t st = dh__pinfo_miss(r, key, driver, &e);
    if (st != DH_OK) {
        DH_DEBUG(SCHED, "no parameter layout for %s %p (%s): the launch is forwarded",
                 driver ? "CUfunction" : "kernel", key, dh_strerror(st));
        return st;
    }
    pthread_mutex_lock(&dh__pcache_lock);
    hit = dh__pcache_find(b, key, driver);
    if (hit == NULL) {
        e->next = atomic_load_explicit(&dh__pcache[b], memory_order_relaxed);
        atomic_store_explicit(&dh__pcache[b], e, memory_order_release);
        hit = e;
        e = NULL;
    }
    pthread_mutex_unlock(&dh__pcache_lock);
    free(e);
    *out = hit;
    return DH_OK;
}

/* ---- capture ---- */

typedef struct dh__kernel_pl {
    const void *func;     /* host stub (KERNEL) or CUfunction (CU_KERNEL) */
    unsigned grid[3], block[3];
    size_t shmem;
    int ex;               /* launched through cudaLaunchKernelExC / cuLaunchKernelEx */
    int handle;           /* KERNEL: func is a cudaKernel_t from __cudaLaunchKernel */
    unsigned num_attrs;
    const void *attrs;    /* cudaLaunchAttribute / CUlaunchAttribute array */
    void **argv;          /* argv[i] -> parameter i in the packed copy; NULL when none */
    void **extra;         /* driver packed-buffer launch: an owned extra list, else NULL */
    size_t extra_size;    /* what extra's CU_LAUNCH_PARAM_BUFFER_SIZE entry points at */
    uint32_t args_off;    /* the packed argument copy: payload offset and size */
    uint32_t args_size;
    const dh__pinfo_t *pinfo; /* parameter layout (cached for good), NULL for `extra` */
} dh__kernel_pl_t;
_Static_assert(_Alignof(dh__kernel_pl_t) <= 8, "a payload starts 8-byte aligned");

/* A launch as the capture functions describe it to dh__capture_launch. */
typedef struct dh__launch {
    dh_op_kind_t kind;
    const void *func;
    unsigned grid[3], block[3];
    size_t shmem;
    cudaStream_t stream;
    int ex;
    int handle;
    const void *attrs;
    unsigned num_attrs;
    size_t attr_size;     /* sizeof one attribute of this API */
    void **params;
    void **extra;
} dh__launch_t;

/* The capture entry points start from this (see dh__op_zero in op.c for why). */
static const dh__launch_t dh__launch_zero;

/* Attributes that make the launch record an event: the scheduler cannot tell the
 * framework's queries of that event that the launch is still queued, so such launches
 * are forwarded in program order. Both APIs share the attribute layout and ids. */
static dh_status_t dh__check_attrs(const dh__launch_t *l)
{
    if (l->num_attrs == 0)
        return DH_OK;
    if (l->attrs == NULL)
        return DH_ERR_INVALID;
    for (unsigned i = 0; i < l->num_attrs; i++) {
        const cudaLaunchAttribute *a =
            (const cudaLaunchAttribute *)((const char *)l->attrs + i * l->attr_size);
        if (a->id == cudaLaunchAttributeProgrammaticEvent ||
            a->id == cudaLaunchAttributeLaunchCompletionEvent)
            return DH_ERR_UNSUPPORTED;
    }
    return DH_OK;
}

_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute) &&
                   _Alignof(cudaLaunchAttribute) <= 8,
               "runtime and driver launch attributes share one layout, 8-byte aligned");
_Static_assert((int)cudaLaunchAttributeProgrammaticEvent ==
                       (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT &&
                   (int)cudaLaunchAttributeLaunchCompletionEvent ==
                   (int)CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT,
               "runtime and driver attribute ids agree");

/* The packed buffer of a driver `extra` list: DH_OK with *buf and *size, DH_ERR_INVALID for a
 * malformed list, DH_ERR_UNSUPPORTED for keys this code does not know. */
static dh_status_t dh__parse_extra(void **extra, const void **buf, size_t *size)
{
    int have_size = 0;
    *buf = NULL;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (i >= DH__EXTRA_MAX)
            return DH_ERR_INVALID;
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (extra[i + 1] == NULL)
                return DH_ERR_INVALID;
            *size = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            return DH_ERR_UNSUPPORTED;
        }
    }
    if (*buf == NULL || !have_size || *size > DH__ARGS_MAX)
        return DH_ERR_INVALID;
    return DH_OK;
}

/* Most arguments are pointers and scalars: constant-size copies become single moves,
 * where a memcpy call per argument was a fifth of the capture. */
static inline void dh__copy_arg(void *dst, const void *src, size_t size)
{
    switch (size) {
    case 8:
        memcpy(dst, src, 8);
        break;
    case 4:
        memcpy(dst, src, 4);
        break;
    case 2:
        memcpy(dst, src, 2);
        break;
    case 1:
        memcpy(dst, src, 1);
        break;
    default:
        memcpy(dst, src, size);
        break;
    }
}

static dh_status_t dh__capture_launch(dh_op_t **out, const dh__launch_t *l)
{
    *out = NULL;
    const dh_real_t *r = dh_real();
    unsigned brk = dh__op_breaks();
    int driver = l->kind == DH_OP_CU_KERNEL, dev;
    DH_CHECK(dh__check_attrs(l));

    const dh__pinfo_t *pi = NULL;
    const void *packed = NULL;
    size_t args_size = 0, nargv = 0;
    if (driver && l->extra != NULL) {
        if (l->params != NULL)
            return DH_ERR_INVALID;
        DH_CHECK(dh__parse_extra(l->extra, &packed, &args_size));
    } else {
        DH_CHECK(dh__pinfo_get(r, l->func, driver, &pi));
        if (pi->nparams > 0 && l->params == NULL)
            return DH_ERR_INVALID;
        args_size = pi->args_size;
        nargv = pi->nparams;
    }
    DH_CHECK(dh__op_device(r, &dev));
    if (brk & DH_OP_BREAK_KERNEL_ARGS)
        args_size = nargv = 0;
    size_t attr_bytes = (brk & DH_OP_BREAK_LAUNCH_ATTRS) ? 0 : l->num_attrs * l->attr_size;
    int own_extra = packed != NULL && !(brk & DH_OP_BREAK_KERNEL_ARGS);
    size_t extra_bytes = own_extra ? 5 * sizeof(void *) : 0;

    size_t o_argv = DH__ALIGN8(sizeof(dh__kernel_pl_t));
    size_t o_attrs = o_argv + nargv * sizeof(void *);
    size_t o_extra = DH__ALIGN8(o_attrs + attr_bytes);
    size_t o_args = DH__ALIGN8(o_extra + extra_bytes);
    dh_op_t *op = dh_op_alloc(l->kind, l->stream, dev, o_args + args_size);
    if (op == NULL)
        return DH_ERR_NOMEM;
    unsigned char *base = op->payload;
    dh__kernel_pl_t *p = (dh__kernel_pl_t *)base;
    unsigned char *args = base + o_args;
    /* Field by field: a compound literal would zero the struct first ("rep stos"). */
    p->func = l->func;
    memcpy(p->grid, l->grid, sizeof p->grid);
    memcpy(p->block, l->block, sizeof p->block);
    p->shmem = l->shmem;
    p->ex = l->ex;
    p->handle = l->handle;
    p->num_attrs = l->num_attrs;
    p->attrs = l->num_attrs > 0 ? l->attrs : NULL;
    p->argv = NULL;
    p->extra = NULL;
    p->extra_size = 0;
    p->args_off = (uint32_t)o_args;
    p->args_size = (uint32_t)args_size;
    p->pinfo = pi;
    if (attr_bytes > 0) {
        memcpy(base + o_attrs, l->attrs, attr_bytes);
        p->attrs = base + o_attrs;
    }
    if (brk & DH_OP_BREAK_KERNEL_ARGS) {
        p->argv = l->params;
        p->extra = l->extra;
    } else if (own_extra) {
        memcpy(args, packed, args_size);
        void **x = (void **)(base + o_extra);
        p->extra_size = args_size;
        x[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        x[1] = args;
        x[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        x[3] = &p->extra_size;
        x[4] = CU_LAUNCH_PARAM_END;
        p->extra = x;
    } else if (nargv > 0) {
        void **argv = (void **)(base + o_argv);
        for (size_t i = 0; i < nargv; i++) {
            argv[i] = args + pi->p[i].off;
            dh__copy_arg(argv[i], l->params[i], pi->p[i].size);
        }
        p->argv = argv;
    }
    *out = op;
    return DH_OK;
}

static inline void dh__dims(unsigned d[3], unsigned x, unsigned y, unsigned z)
{
    d[0] = x;
    d[1] = y;
    d[2] = z;
}

/* A runtime launch without a config struct: by host stub (handle 0) or cudaKernel_t. */
static dh_status_t dh__capture_rt(dh_op_t **out, const void *func, int handle, dim3 grid,
                                  dim3 block, void **args, size_t shmem, cudaStream_t s)
{
    dh__launch_t l = dh__launch_zero;
    l.kind = DH_OP_KERNEL;
    l.func = func;
    l.handle = handle;
    dh__dims(l.grid, grid.x, grid.y, grid.z);
    dh__dims(l.block, block.x, block.y, block.z);
    l.shmem = shmem;
    l.stream = s;
    l.attr_size = sizeof(cudaLaunchAttribute);
    l.params = args;
    return dh__capture_launch(out, &l);
}

dh_status_t dh_op_capture_kernel(dh_op_t **out, const void *func, dim3 grid, dim3 block,
                                 void **args, size_t shmem, cudaStream_t s)
{
    return dh__capture_rt(out, func, 0, grid, block, args, shmem, s);
}

dh_status_t dh_op_capture_kernel_handle(dh_op_t **out, cudaKernel_t kernel, dim3 grid,
                                        dim3 block, void **args, size_t shmem, cudaStream_t s)
{
    return dh__capture_rt(out, (const void *)kernel, 1, grid, block, args, shmem, s);
}

dh_status_t dh_op_capture_kernel_ex(dh_op_t **out, const cudaLaunchConfig_t *cfg,
                                    const void *func, void **args)
{
    if (cfg == NULL) {
        *out = NULL;
        return DH_ERR_INVALID;
    }
    dh__launch_t l = dh__launch_zero;
    l.kind = DH_OP_KERNEL;
    l.func = func;
    dh__dims(l.grid, cfg->gridDim.x, cfg->gridDim.y, cfg->gridDim.z);
    dh__dims(l.block, cfg->blockDim.x, cfg->blockDim.y, cfg->blockDim.z);
    l.shmem = cfg->dynamicSmemBytes;
    l.stream = cfg->stream;
    l.ex = 1;
    l.attrs = cfg->attrs;
    l.num_attrs = cfg->numAttrs;
    l.attr_size = sizeof(cudaLaunchAttribute);
    l.params = args;
    return dh__capture_launch(out, &l);
}

dh_status_t dh_op_capture_cu_kernel(dh_op_t **out, CUfunction f, unsigned gx, unsigned gy,
                                    unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                    unsigned shmem, CUstream s, void **params, void **extra)
{
    dh__launch_t l = dh__launch_zero;
    l.kind = DH_OP_CU_KERNEL;
    l.func = f;
    dh__dims(l.grid, gx, gy, gz);
    dh__dims(l.block, bx, by, bz);
    l.shmem = shmem;
    l.stream = (cudaStream_t)s;
    l.attr_size = sizeof(CUlaunchAttribute);
    l.params = params;
    l.extra = extra;
    return dh__capture_launch(out, &l);
}

dh_status_t dh_op_capture_cu_kernel_ex(dh_op_t **out, const CUlaunchConfig *cfg, CUfunction f,
                                       void **params, void **extra)
{
    if (cfg == NULL) {
        *out = NULL;
        return DH_ERR_INVALID;
    }
    dh__launch_t l = dh__launch_zero;
    l.kind = DH_OP_CU_KERNEL;
    l.func = f;
    dh__dims(l.grid, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ);
    dh__dims(l.block, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ);
    l.shmem = cfg->sharedMemBytes;
    l.stream = (cudaStream_t)cfg->hStream;
    l.ex = 1;
    l.attrs = cfg->attrs;
    l.num_attrs = cfg->numAttrs;
    l.attr_size = sizeof(CUlaunchAttribute);
    l.params = params;
    l.extra = extra;
    return dh__capture_launch(out, &l);
}

/* ---- replay ---- */

static int dh__replay_kernel(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    const dh__kernel_pl_t *p = (const dh__kernel_pl_t *)op->payload;
    dim3 g = {p->grid[0], p->grid[1], p->grid[2]};
    dim3 b = {p->block[0], p->block[1], p->block[2]};
    if (p->handle) {
        dh_real___cudaLaunchKernel_t fn = DH_REAL_FN(r, __cudaLaunchKernel);
        return fn != NULL ? fn((cudaKernel_t)p->func, g, b, p->argv, p->shmem, ctx->stream)
                          : cudaErrorInitializationError;
    }
    if (!p->ex) {
        dh_real_cudaLaunchKernel_t fn = DH_REAL_FN(r, cudaLaunchKernel);
        return fn != NULL ? fn(p->func, g, b, p->argv, p->shmem, ctx->stream)
                          : cudaErrorInitializationError;
    }
    dh_real_cudaLaunchKernelExC_t fn = DH_REAL_FN(r, cudaLaunchKernelExC);
    if (fn == NULL)
        return cudaErrorInitializationError;
    cudaLaunchConfig_t c = {.gridDim = g, .blockDim = b, .dynamicSmemBytes = p->shmem,
                            .stream = ctx->stream, .attrs = (cudaLaunchAttribute *)p->attrs,
                            .numAttrs = p->num_attrs};
    return fn(&c, p->func, p->argv);
}

static int dh__replay_cu_kernel(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    const dh__kernel_pl_t *p = (const dh__kernel_pl_t *)op->payload;
    CUfunction f = (CUfunction)p->func;
    if (!p->ex) {
        dh_real_cuLaunchKernel_t fn = DH_REAL_FN(r, cuLaunchKernel);
        return fn != NULL ? fn(f, p->grid[0], p->grid[1], p->grid[2], p->block[0], p->block[1],
                               p->block[2], (unsigned)p->shmem, (CUstream)ctx->stream, p->argv,
                               p->extra)
                          : CUDA_ERROR_NOT_INITIALIZED;
    }
    dh_real_cuLaunchKernelEx_t fn = DH_REAL_FN(r, cuLaunchKernelEx);
    if (fn == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUlaunchConfig c = {.gridDimX = p->grid[0], .gridDimY = p->grid[1], .gridDimZ = p->grid[2],
                        .blockDimX = p->block[0], .blockDimY = p->block[1],
                        .blockDimZ = p->block[2], .sharedMemBytes = (unsigned)p->shmem,
                        .hStream = (CUstream)ctx->stream, .attrs = (CUlaunchAttribute *)p->attrs,
                        .numAttrs = p->num_attrs};
    return fn(&c, f, p->argv, p->extra);
}

/* ---- what a launch is and what it touches ---- */

/* Whether the arguments were copied (under the kernel_args test break they were not: none
 * to read). */
static int dh__args_owned(const dh_op_t *op, const dh__kernel_pl_t *p)
{
    return p->argv == NULL || (const unsigned char *)p->argv > op->payload;
}

/* Signature: the kernel's name, the kind, block and dynamic shared memory; shape: the
 * grid. */
static void dh__kernel_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    const dh__kernel_pl_t *p = (const dh__kernel_pl_t *)op->payload;
    uint64_t hash;
    int comm;
    const char *name = dh__kname(p->func, op->kind == DH_OP_CU_KERNEL, &hash, &comm);
    d->cls = comm ? DH_CLS_COMM : DH_CLS_COMPUTE;
    d->sig = dh_op_hash_u64(hash, op->kind);
    d->sig = dh_op_hash(d->sig, p->block, sizeof(unsigned) * 3);
    d->sig = dh_op_hash_u64(d->sig, p->shmem);
    d->shape = dh_op_hash(DH_OP_HASH_INIT, p->grid, sizeof(unsigned) * 3);
    snprintf(d->name, sizeof d->name, "%s", name ? name : "kernel");
}

/* Each pointer-sized parameter that points into a known allocation: the kernel may read or
 * write all of it. Only whole parameters, never bytes inside a struct parameter: the
 * padding between a struct's fields holds stale stack bytes, which would make
 * dependencies differ from run to run and from rank to rank. */
static void dh__kernel_footprint(const dh_op_t *op, dh_op_fp_t *fp)
{
    const dh__kernel_pl_t *p = (const dh__kernel_pl_t *)op->payload;
    if (!dh__args_owned(op, p) || !p->pinfo)
        return;
    size_t n = 0;
    for (uint32_t i = 0; i < p->pinfo->nparams && n < 64; i++) {
        if (p->pinfo->p[i].size != sizeof(uintptr_t))
            continue;
        uintptr_t v;
        memcpy(&v, op->payload + p->args_off + p->pinfo->p[i].off, sizeof v);
        if (v) {
            n++;
            dh__fp_alloc_of(fp, v);
        }
    }
}

/* ---- what a launch is checked for at the call ---- */

/* Launch configurations CUDA refuses at the call (cudaErrorInvalidConfiguration from the
 * runtime, CUDA_ERROR_INVALID_VALUE from the driver; CUDA C Programming Guide, "Compute
 * Capabilities", table of technical specifications, the same for every architecture
 * since 2.0): a zero dimension, a block over 1024 threads or over 1024 x 1024 x 64, a
 * grid over 2^31-1 x 65535 x 65535. validate answers "forward" for these (a nonzero
 * status, never used itself: the program gets the real call's). Dynamic shared memory
 * over the 48 KiB every device allows depends on the kernel's own attribute: the first
 * launch of each (kernel, block, size) is forwarded and a success remembered. */
#define DH__SMEM_ALWAYS ((size_t)48 << 10)

static uint64_t dh__smem_key(const dh_op_t *op, const dh__kernel_pl_t *p)
{
    uint64_t h = dh_op_hash_u64(DH_OP_HASH_INIT, (uint64_t)(uintptr_t)p->func);
    h = dh_op_hash_u64(h, op->kind);
    h = dh_op_hash(h, p->block, sizeof p->block);
    return dh_op_hash_u64(h, p->shmem);
}

static int dh__kernel_validate(const dh_op_t *op)
{
    const dh__kernel_pl_t *p = (const dh__kernel_pl_t *)op->payload;
    int bad = cudaErrorInvalidConfiguration;
    for (int i = 0; i < 3; i++)
        if (p->grid[i] == 0 || p->block[i] == 0)
            return bad;
    if (p->block[0] > 1024 || p->block[1] > 1024 || p->block[2] > 64 ||
        (uint64_t)p->block[0] * p->block[1] * p->block[2] > 1024)
        return bad;
    if (p->grid[0] > 0x7fffffffu || p->grid[1] > 65535 || p->grid[2] > 65535)
        return bad;
    if (p->shmem > DH__SMEM_ALWAYS && !dh_op_accepted(dh__smem_key(op, p)))
        return -1;
    return 0;
}

static void dh__kernel_learn(const dh_op_t *op, int rc)
{
    if (rc == 0)
        dh_op_accept(dh__smem_key(op, (const dh__kernel_pl_t *)op->payload));
}

const dh_op_kind_ops_t dh__kind_kernel = {
    .name = "KERNEL",
    .cls = DH_CLS_COMPUTE,
    .flags = DH_OPK_TIMED | DH_OPK_ON_DEVICE,
    .describe = dh__kernel_describe,
    .footprint = dh__kernel_footprint,
    .validate = dh__kernel_validate,
    .learn = dh__kernel_learn,
    .replay = dh__replay_kernel,
};

const dh_op_kind_ops_t dh__kind_cu_kernel = {
    .name = "CU_KERNEL",
    .cls = DH_CLS_COMPUTE,
    .flags = DH_OPK_TIMED | DH_OPK_ON_DEVICE,
    .api = DH_OP_API_DRIVER,
    .describe = dh__kernel_describe,
    .footprint = dh__kernel_footprint,
    .validate = dh__kernel_validate,
    .learn = dh__kernel_learn,
    .replay = dh__replay_cu_kernel,
};
