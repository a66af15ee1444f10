/*
 * op_copy.c: capture and replay of cudaMemcpyAsync.
 *
 * Where the bytes live decides what a deferred copy may do (CUDA's "API synchronization
 * behavior" and the vgpu's ops.c follow the same rules):
 *   - from pageable host memory to the device: CUDA stages the source before the call
 *     returns, so the framework may overwrite its buffer at once; the op owns a copy;
 *   - from the device into pageable host memory, and host to host: the call returns when
 *     the copy is done, so it cannot be deferred (DH_ERR_UNSUPPORTED: the wrapper drains
 *     and forwards);
 *   - everything else touches only device memory or pinned memory, which the framework
 *     orders by streams and events: pointers are kept.
 * The side of each pointer comes from cudaPointerGetAttributes (type Unregistered is
 * pageable), whatever `kind` says, as with unified addressing; cudaMemcpyDefault needs
 * nothing more.
 */
#include <stdio.h>
#include <string.h>

#include "op_internal.h"

typedef struct dh__copy_pl {
    void *dst;
    const void *src;      /* the framework's, or the owned bytes after this struct */
    size_t n;
    enum cudaMemcpyKind kind;
} dh__copy_pl_t;

typedef enum dh__side { DH__PAGEABLE, DH__PINNED, DH__DEVICE } dh__side_t;

static dh__side_t dh__side_of(const struct cudaPointerAttributes *a)
{
    switch (a->type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
        return DH__DEVICE;
    case cudaMemoryTypeHost:
        return DH__PINNED;
    default:
        return DH__PAGEABLE;
    }
}

/* Classifies n pointers. The queries must not leave an error behind on the framework's
 * thread (see dh__rt_quiet_begin). */
static dh_status_t dh__classify_n(const dh_real_t *r, const void *const *p, dh__side_t *side,
                                  int n)
{
    dh_real_cudaPointerGetAttributes_t attr = DH_REAL_FN(r, cudaPointerGetAttributes);
    if (attr == NULL)
        return DH_ERR_UNSUPPORTED;
    DH_CHECK(dh__rt_quiet_begin(r));
    for (int i = 0; i < n; i++) {
        struct cudaPointerAttributes a;
        memset(&a, 0, sizeof a);
        if (attr(&a, p[i]) != cudaSuccess) {
            dh__rt_quiet_end(r);
            return DH_ERR_UNSUPPORTED;
        }
        side[i] = dh__side_of(&a);
    }
    return DH_OK;
}

static dh_status_t dh__classify(const dh_real_t *r, void *dst, const void *src, dh__side_t *ds,
                                dh__side_t *ss)
{
    const void *p[2] = {dst, src};
    dh__side_t side[2];
    DH_CHECK(dh__classify_n(r, p, side, 2));
    *ds = side[0];
    *ss = side[1];
    return DH_OK;
}

int dh__device_memory(const void *p)
{
    dh__side_t side;
    return dh__classify_n(dh_real(), &p, &side, 1) == DH_OK && side == DH__DEVICE;
}

/* Whether kind agrees with where the bytes are. A contradictory kind is not deferred: the
 * real call decides at once whether it is an error, as it would without the shim. */
static int dh__kind_fits(enum cudaMemcpyKind kind, dh__side_t ds, dh__side_t ss)
{
    switch (kind) {
    case cudaMemcpyDefault:
        return 1;
    case cudaMemcpyHostToDevice:
        return ds == DH__DEVICE && ss != DH__DEVICE;
    case cudaMemcpyDeviceToHost:
        return ds != DH__DEVICE && ss == DH__DEVICE;
    case cudaMemcpyDeviceToDevice:
        return ds == DH__DEVICE && ss == DH__DEVICE;
    default:
        return 0;
    }
}

dh_status_t dh_op_capture_memcpy(dh_op_t **out, void *dst, const void *src, size_t n,
                                 enum cudaMemcpyKind kind, cudaStream_t s)
{
    *out = NULL;
    const dh_real_t *r = dh_real();
    dh__side_t ds, ss;
    int dev;
    DH_CHECK(dh__classify(r, dst, src, &ds, &ss));
    if (ds != DH__DEVICE && ss != DH__DEVICE)
        return DH_ERR_UNSUPPORTED; /* host to host: synchronous */
    if (ds == DH__PAGEABLE)
        return DH_ERR_UNSUPPORTED; /* device to pageable: returns when done */
    if (!dh__kind_fits(kind, ds, ss))
        return DH_ERR_UNSUPPORTED; /* the real call decides what a contradiction means */
    DH_CHECK(dh__op_device(r, &dev));
    int own = ss == DH__PAGEABLE && !(dh__op_breaks() & DH_OP_BREAK_H2D_SOURCE);
    size_t head = DH__ALIGN8(sizeof(dh__copy_pl_t));
    dh_op_t *op = dh_op_alloc(DH_OP_MEMCPY, s, dev, head + (own ? n : 0));
    if (op == NULL)
        return DH_ERR_NOMEM;
    dh__copy_pl_t *p = (dh__copy_pl_t *)op->payload;
    *p = (dh__copy_pl_t){dst, src, n, kind};
    if (own) {
        unsigned char *bytes = op->payload + head;
        memcpy(bytes, src, n);
        p->src = bytes;
    }
    *out = op;
    return DH_OK;
}

static int dh__replay_memcpy(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    const dh_real_t *r = dh_real();
    const dh__copy_pl_t *p = (const dh__copy_pl_t *)op->payload;
    dh_real_cudaMemcpyAsync_t fn = DH_REAL_FN(r, cudaMemcpyAsync);
    return fn != NULL ? fn(p->dst, p->src, p->n, p->kind, ctx->stream)
                      : cudaErrorInitializationError;
}

/* ---- what a copy is and what it touches ---- */

/* Whether the source is the op's own copy of a pageable buffer. */
static int dh__src_owned(const dh_op_t *op, const dh__copy_pl_t *p)
{
    const unsigned char *src = p->src;
    return src >= op->payload && src < op->payload + op->payload_size;
}

static const char *dh__copy_dir(enum cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToDevice: return "h2d";
    case cudaMemcpyDeviceToHost: return "d2h";
    case cudaMemcpyDeviceToDevice: return "d2d";
    case cudaMemcpyHostToHost: return "h2h";
    default: return "default";
    }
}

/* Signature: the kind and the direction; shape: the size. */
static void dh__memcpy_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    const dh__copy_pl_t *p = (const dh__copy_pl_t *)op->payload;
    d->sig = dh_op_hash_u64(d->sig, (uint64_t)p->kind);
    d->shape = dh_op_hash_u64(DH_OP_HASH_INIT, p->n);
    d->bytes = p->n;
    snprintf(d->name, sizeof d->name, "memcpy %s %zu", dh__copy_dir(p->kind), p->n);
}

/* The destination, written, and a source the op does not own, read. */
static void dh__memcpy_footprint(const dh_op_t *op, dh_op_fp_t *fp)
{
    const dh__copy_pl_t *p = (const dh__copy_pl_t *)op->payload;
    dh_op_fp_range(fp, (uintptr_t)p->dst, p->n, 1);
    if (!dh__src_owned(op, p))
        dh_op_fp_range(fp, (uintptr_t)p->src, p->n, 0);
}

const dh_op_kind_ops_t dh__kind_memcpy = {
    .name = "MEMCPY",
    .cls = DH_CLS_COPY,
    .flags = DH_OPK_TIMED | DH_OPK_ON_DEVICE,
    .describe = dh__memcpy_describe,
    .footprint = dh__memcpy_footprint,
    .replay = dh__replay_memcpy,
};
