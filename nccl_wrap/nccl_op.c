/* nccl_op.c: NCCL calls checked, captured into ops, issued and replayed (see nccl_op.h). */
#include "nccl_op.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "nccl_real.h"
#include "plan.h"
#include "registry.h"
#include "scheduler.h"

static const char *const dh__kind_api[DH_NCCL_KIND_COUNT] = {
#define DH__NCCL_KIND_API(id, api) api,
    DH_NCCL_KINDS(DH__NCCL_KIND_API)
#undef DH__NCCL_KIND_API
};

const char *dh_nccl_kind_api(dh_nccl_kind_t k)
{
    return (unsigned)k < DH_NCCL_KIND_COUNT ? dh__kind_api[k] : "?";
}

size_t dh_nccl_dtype_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
        return 1;
    case ncclFloat16: case ncclBfloat16:
        return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32:
        return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

static int dh__is_marker(const dh_nccl_call_t *c)
{
    return c->kind == DH_NCCL_GROUP_START || c->kind == DH_NCCL_GROUP_END;
}

/* ---- checking ---- */

static int dh__reduces(dh_nccl_kind_t k)
{
    return k == DH_NCCL_ALLREDUCE || k == DH_NCCL_REDUCESCATTER || k == DH_NCCL_REDUCE;
}

static int dh__rooted(dh_nccl_kind_t k)
{
    return k == DH_NCCL_BROADCAST || k == DH_NCCL_BCAST || k == DH_NCCL_REDUCE ||
           k == DH_NCCL_GATHER || k == DH_NCCL_SCATTER || k == DH_NCCL_SEND || k == DH_NCCL_RECV;
}

/* The bytes c reads and writes on a rank `rank` of n (what the vgpu's hazard detector and
 * NCCL's own documentation say each call touches). */
static void dh__ranges(dh_nccl_call_t *c, int n, int rank)
{
    size_t b = c->count * dh_nccl_dtype_size(c->dtype), nb = b * (size_t)n, in = 0, out = 0;
    int root = rank == c->root;
    switch (c->kind) {
    case DH_NCCL_ALLREDUCE: in = b; out = b; break;
    case DH_NCCL_ALLGATHER: in = b; out = nb; break;
    case DH_NCCL_REDUCESCATTER: in = nb; out = b; break;
    case DH_NCCL_BROADCAST: case DH_NCCL_BCAST: in = root ? b : 0; out = b; break;
    case DH_NCCL_REDUCE: in = b; out = root ? b : 0; break;
    case DH_NCCL_ALLTOALL: in = nb; out = nb; break;
    case DH_NCCL_GATHER: in = b; out = root ? nb : 0; break;
    case DH_NCCL_SCATTER: in = root ? nb : 0; out = b; break;
    case DH_NCCL_SEND: in = b; break;
    case DH_NCCL_RECV: out = b; break;
    default: break;
    }
    c->read = (dh_nccl_range_t){in ? (uintptr_t)c->sendbuff : 0, in};
    c->write = (dh_nccl_range_t){out ? (uintptr_t)c->recvbuff : 0, out};
}

dh_nccl_verdict_t dh_nccl_call_check(dh_nccl_call_t *c, ncclResult_t *err)
{
    dh_nccl_comm_t *e = dh_nccl_reg_get(c->comm);
    c->reg = e;
    if (e == NULL || atomic_load_explicit(&e->aborting, memory_order_relaxed))
        return DH_NCCL_FORWARD;
    int failed = atomic_load_explicit(&e->async_err, memory_order_acquire);
    if (failed != ncclSuccess) {
        *err = (ncclResult_t)failed;
        return DH_NCCL_FAILED;
    }
    /* A communicator the library itself reports failed: the library answers the call. */
    __typeof__(&ncclCommGetAsyncError) async = DH_NCCL_REAL(ncclCommGetAsyncError);
    ncclResult_t lib = ncclSuccess;
    if (async == NULL || async(c->comm, &lib) != ncclSuccess ||
        (lib != ncclSuccess && lib != ncclInProgress))
        return DH_NCCL_FORWARD;
    if (dh_nccl_dtype_size(c->dtype) == 0)
        return DH_NCCL_FORWARD;
    if (dh__reduces(c->kind) && !((int)c->redop >= 0 && c->redop < ncclNumOps) &&
        !dh_nccl_reg_premul_known(e, c->redop))
        return DH_NCCL_FORWARD;
    if (dh__rooted(c->kind) && (c->root < 0 || c->root >= e->nranks))
        return DH_NCCL_FORWARD;
    dh__ranges(c, e->nranks, e->rank);
    if ((c->read.len && c->sendbuff == NULL) || (c->write.len && c->recvbuff == NULL))
        return DH_NCCL_FORWARD;
    atomic_fetch_add_explicit(&e->ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->bytes, c->count * dh_nccl_dtype_size(c->dtype),
                              memory_order_relaxed);
    return DH_NCCL_CAPTURE;
}

void dh_nccl_count_forwarded(const dh_nccl_call_t *c)
{
    dh_nccl_comm_t *e = dh_nccl_reg_get(c->comm);
    if (e == NULL)
        return;
    atomic_fetch_add_explicit(&e->ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->bytes, c->count * dh_nccl_dtype_size(c->dtype),
                              memory_order_relaxed);
}

/* ---- issuing ---- */

#define DH__CALL(name, ...)                                                    \
    do {                                                                       \
        __typeof__(&name) fn_ = DH_NCCL_REAL(name);                            \
        return fn_ != NULL ? fn_(__VA_ARGS__) : ncclInternalError;             \
    } while (0)

ncclResult_t dh_nccl_call_issue(const dh_nccl_call_t *c, cudaStream_t s, int use_own)
{
    if (use_own)
        s = c->stream;
    switch (c->kind) {
    case DH_NCCL_ALLREDUCE:
        DH__CALL(ncclAllReduce, c->sendbuff, c->recvbuff, c->count, c->dtype, c->redop, c->comm, s);
    case DH_NCCL_ALLGATHER:
        DH__CALL(ncclAllGather, c->sendbuff, c->recvbuff, c->count, c->dtype, c->comm, s);
    case DH_NCCL_REDUCESCATTER:
        DH__CALL(ncclReduceScatter, c->sendbuff, c->recvbuff, c->count, c->dtype, c->redop,
                 c->comm, s);
    case DH_NCCL_BROADCAST:
        DH__CALL(ncclBroadcast, c->sendbuff, c->recvbuff, c->count, c->dtype, c->root, c->comm, s);
    case DH_NCCL_BCAST:
        DH__CALL(ncclBcast, c->recvbuff, c->count, c->dtype, c->root, c->comm, s);
    case DH_NCCL_REDUCE:
        DH__CALL(ncclReduce, c->sendbuff, c->recvbuff, c->count, c->dtype, c->redop, c->root,
                 c->comm, s);
    case DH_NCCL_ALLTOALL:
        DH__CALL(ncclAlltoAll, c->sendbuff, c->recvbuff, c->count, c->dtype, c->comm, s);
    case DH_NCCL_GATHER:
        DH__CALL(ncclGather, c->sendbuff, c->recvbuff, c->count, c->dtype, c->root, c->comm, s);
    case DH_NCCL_SCATTER:
        DH__CALL(ncclScatter, c->sendbuff, c->recvbuff, c->count, c->dtype, c->root, c->comm, s);
    case DH_NCCL_SEND:
        DH__CALL(ncclSend, c->sendbuff, c->count, c->dtype, c->root, c->comm, s);
    case DH_NCCL_RECV:
        DH__CALL(ncclRecv, c->recvbuff, c->count, c->dtype, c->root, c->comm, s);
    case DH_NCCL_GROUP_START:
        DH__CALL(ncclGroupStart);
    case DH_NCCL_GROUP_END:
        DH__CALL(ncclGroupEnd);
    default:
        return ncclInternalError;
    }
}

ncclResult_t dh_nccl_calls_issue(const dh_nccl_call_t *calls, int n)
{
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < n; i++) {
        ncclResult_t r = dh_nccl_call_issue(&calls[i], NULL, 1);
        if (r != ncclSuccess && first == ncclSuccess)
            first = r;
    }
    return first;
}

/* ---- ops ---- */

typedef struct dh__nccl_pl {
    int n;
    int pad;
    dh_nccl_call_t calls[];
} dh__nccl_pl_t;

static pthread_once_t dh__nccl_kinds_once = PTHREAD_ONCE_INIT;
static void dh__nccl_kinds_register(void);

dh_status_t dh_nccl_op_make(dh_op_t **out, const dh_nccl_call_t *calls, int n, int group)
{
    *out = NULL;
    const dh_nccl_call_t *first = NULL;
    int pinned = 0;
    for (int i = 0; i < n; i++) {
        const dh_nccl_call_t *c = &calls[i];
        if (dh__is_marker(c))
            continue;
        if (first == NULL)
            first = c;
        else if (c->stream != first->stream || c->reg->device != first->reg->device)
            return DH_ERR_UNSUPPORTED;
        pinned |= !atomic_load_explicit(&c->reg->enabled, memory_order_relaxed);
    }
    if (first == NULL)
        return DH_ERR_INVALID;
    pthread_once(&dh__nccl_kinds_once, dh__nccl_kinds_register);
    size_t size = sizeof(dh__nccl_pl_t) + (size_t)n * sizeof(dh_nccl_call_t);
    dh_op_t *op = dh_op_alloc(group ? DH_OP_NCCL_GROUP : DH_OP_NCCL, first->stream,
                             first->reg->device, size);
    if (op == NULL)
        return DH_ERR_NOMEM;
    dh__nccl_pl_t *pl = (dh__nccl_pl_t *)op->payload;
    pl->n = n;
    pl->pad = 0;
    memcpy(pl->calls, calls, (size_t)n * sizeof(dh_nccl_call_t));
    op->pinned = pinned;
    *out = op;
    return DH_OK;
}

static void dh__replay_failed(const dh_nccl_call_t *c, ncclResult_t r)
{
    dh_nccl_comm_t *e = c->reg;
    atomic_fetch_add_explicit(&e->errors, 1, memory_order_relaxed);
    dh_nccl_reg_fail(e, r);
    __typeof__(&ncclGetErrorString) str = DH_NCCL_REAL(ncclGetErrorString);
    DH_WARN_ONCE(NCCL, "a deferred %s on communicator #%llu failed when replayed (%d: %s); "
                 "ncclCommGetAsyncError and the next call on that communicator report it",
                 dh_nccl_kind_api(c->kind), (unsigned long long)e->order, (int)r,
                 str != NULL ? str(r) : "?");
}

static int dh__nccl_replay(dh_op_t *op, const dh_replay_ctx_t *ctx)
{
    dh__nccl_pl_t *pl = (dh__nccl_pl_t *)op->payload;
    int strands = dh_sched_mode() == DH_MODE_STRANDS || dh_sched_mode() == DH_MODE_PLAN;
    int depth = 0;
    for (int i = 0; i < pl->n; i++) {
        const dh_nccl_call_t *c = &pl->calls[i];
        ncclResult_t r;
        if (c->kind == DH_NCCL_GROUP_START) {
            if ((r = dh_nccl_call_issue(c, NULL, 0)) == ncclSuccess)
                depth++;
            continue;
        }
        if (c->kind == DH_NCCL_GROUP_END) {
            if (depth == 0)
                continue; /* its start failed: keep the thread out of any group */
            depth--;
            if ((r = dh_nccl_call_issue(c, NULL, 0)) != ncclSuccess)
                for (int j = 0; j < pl->n; j++)
                    if (!dh__is_marker(&pl->calls[j]))
                        dh_nccl_reg_fail(pl->calls[j].reg, r);
            continue;
        }
        dh_nccl_comm_t *e = c->reg;
        atomic_fetch_add_explicit(&e->deferred, 1, memory_order_relaxed);
        if (op->pinned)
            atomic_fetch_add_explicit(&e->pinned, 1, memory_order_relaxed);
        else if (strands)
            atomic_fetch_add_explicit(&e->interleaved, 1, memory_order_relaxed);
        if (atomic_load_explicit(&e->aborting, memory_order_acquire)) {
            atomic_fetch_add_explicit(&e->errors, 1, memory_order_relaxed);
            continue; /* cancelled by ncclCommAbort */
        }
        if ((r = dh_nccl_call_issue(c, ctx->stream, 0)) != ncclSuccess)
            dh__replay_failed(c, r);
    }
    while (depth-- > 0) /* never leave the dispatcher inside a group */
        dh_nccl_call_issue(&(dh_nccl_call_t){.kind = DH_NCCL_GROUP_END}, NULL, 0);
    return 0;
}

/* ---- description and footprint ---- */

static const char *dh__nccl_tname(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: return "i8";
    case ncclUint8: return "u8";
    case ncclInt32: return "i32";
    case ncclUint32: return "u32";
    case ncclInt64: return "i64";
    case ncclUint64: return "u64";
    case ncclFloat16: return "f16";
    case ncclFloat32: return "f32";
    case ncclFloat64: return "f64";
    case ncclBfloat16: return "bf16";
    default: return "t?";
    }
}

static uint64_t dh__nmix(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The point-to-point calls of a call or group and their peers (dh_op_desc_t.p2p), what the
 * planner's proof matches across ranks: NCCL pairs a rank's sends to a peer with that
 * peer's receives from it in issue order, per communicator (NVIDIA/nccl
 * src/enqueue.cc, the per-peer p2p task queues), whatever else the group holds. "?" when
 * the list does not fit, or the group also holds collectives or another communicator's
 * calls: the proof then refuses to match it. */
static void dh__nccl_p2p(const dh__nccl_pl_t *p, dh_op_desc_t *d)
{
    size_t at = 0;
    int coll = 0, over = 0;
    const void *reg = NULL;
    d->p2p[0] = '\0';
    for (int i = 0; i < p->n && !over; i++) {
        const dh_nccl_call_t *c = &p->calls[i];
        if (dh__is_marker(c))
            continue;
        if (reg != NULL && c->reg != reg)
            over = 1;
        reg = c->reg;
        if (c->kind != DH_NCCL_SEND && c->kind != DH_NCCL_RECV) {
            coll = 1;
            continue;
        }
        int w = snprintf(d->p2p + at, sizeof d->p2p - at, "%s%c%d", at ? " " : "",
                         c->kind == DH_NCCL_SEND ? 's' : 'r', c->root);
        if (w < 0 || (size_t)w >= sizeof d->p2p - at)
            over = 1;
        else
            at += (size_t)w;
    }
    if (over || (coll && at > 0))
        snprintf(d->p2p, sizeof d->p2p, "?");
}

static void dh__nccl_describe(const dh_op_t *op, dh_op_desc_t *d)
{
    const dh__nccl_pl_t *p = (const dh__nccl_pl_t *)op->payload;
    uint64_t sig = d->sig, shape = d->shape;
    const dh_nccl_call_t *first = NULL;
    int members = 0;
    d->bytes = 0;
    for (int i = 0; i < p->n; i++) {
        const dh_nccl_call_t *c = &p->calls[i];
        sig = dh__nmix(sig, (uint64_t)c->kind);
        if (dh__is_marker(c))
            continue;
        members++;
        if (!first)
            first = c;
        uint64_t order = c->reg ? c->reg->order : 0;
        sig = dh__nmix(sig, (uint64_t)c->dtype | (uint64_t)c->redop << 16 | order << 32);
        shape = dh__nmix(dh__nmix(shape, c->count), (uint64_t)(uint32_t)c->root);
        d->bytes += c->count * dh_nccl_dtype_size(c->dtype);
    }
    d->sig = sig;
    d->shape = shape;
    dh__nccl_p2p(p, d);
    if (!first) {
        snprintf(d->name, sizeof d->name, "nccl Group 0");
        return;
    }
    d->comm = first->reg;
    /* "ncclAllGather" -> "AllGather" */
    const char *api = dh_nccl_kind_api(first->kind) + 4;
    if (op->kind == DH_OP_NCCL_GROUP)
        snprintf(d->name, sizeof d->name, "nccl Group %d %s %s %zu", members, api,
                 dh__nccl_tname(first->dtype), first->count);
    else
        snprintf(d->name, sizeof d->name, "nccl %s %s %zu", api, dh__nccl_tname(first->dtype),
                 first->count);
}

/* This rank's exact read and write ranges of every member, in call order, as they are. */
static void dh__nccl_footprint(const dh_op_t *op, dh_op_fp_t *fp)
{
    const dh__nccl_pl_t *p = (const dh__nccl_pl_t *)op->payload;
    for (int i = 0; i < p->n; i++) {
        const dh_nccl_call_t *c = &p->calls[i];
        const dh_nccl_range_t *r[2] = {&c->read, &c->write};
        for (int w = 0; w < 2; w++)
            if (r[w]->len)
                dh_op_fp_append(fp, r[w]->lo, r[w]->len, w);
    }
}

/* ---- the kinds' tables ---- */

static const dh_op_kind_ops_t dh__kind_nccl = {
    .name = "NCCL",
    .cls = DH_CLS_COMM,
    .flags = DH_OPK_TIMED,
    .api = DH_OP_API_NCCL,
    .describe = dh__nccl_describe,
    .footprint = dh__nccl_footprint,
    .replay = dh__nccl_replay,
};

static const dh_op_kind_ops_t dh__kind_nccl_group = {
    .name = "NCCL_GROUP",
    .cls = DH_CLS_COMM,
    .flags = DH_OPK_TIMED,
    .api = DH_OP_API_NCCL,
    .describe = dh__nccl_describe,
    .footprint = dh__nccl_footprint,
    .replay = dh__nccl_replay,
};

/* Before the first NCCL op exists (dh_nccl_op_make): every op of these kinds was made
 * after it, so whoever holds one sees the tables. */
static void dh__nccl_kinds_register(void)
{
    if (dh_op_kind_register(DH_OP_NCCL, &dh__kind_nccl) != DH_OK ||
        dh_op_kind_register(DH_OP_NCCL_GROUP, &dh__kind_nccl_group) != DH_OK)
        DH_ERROR(NCCL, "the NCCL operation kinds could not be registered");
}
