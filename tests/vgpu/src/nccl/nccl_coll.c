/*
 * nccl_coll.c: collective and point-to-point entry points, groups, and the vgpu operation
 * each call (or each group, per stream) becomes.
 *
 * A call is checked (arguments as NCCL reports them: ncclInvalidArgument for a NULL
 * buffer, bad datatype, op, root or peer; the communicator's asynchronous error once it
 * failed), numbered (collectives per communicator, send/recv per ordered pair) at the call,
 * so that every rank numbers the same calls alike, and then submitted at once, or queued
 * when inside ncclGroupStart/End. The outermost ncclGroupEnd submits the queue as one
 * operation per (device, stream), so a ring of sends and receives inside one group meets
 * in one rendezvous and never deadlocks. Ungrouped, a send followed by a receive on the
 * same stream on both sides waits as real NCCL does; the vgpu reports it after
 * VGPU_COMM_TIMEOUT seconds and fails both ops instead of hanging.
 *
 * Thread-safety: group state is per thread, like NCCL's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_int.h"

#define VGN_ALIAS(name) \
    __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")))

typedef struct vgn_group {
    int depth;
    ncclResult_t err;        /* first error of the group: ncclGroupEnd returns it */
    vgn_item_t *items;       /* queued calls, each holding a communicator reference */
    int nitems, cap;
    ncclComm_t *inits;       /* communicators whose join completes at ncclGroupEnd */
    int ninits, capinits;
} vgn_group_t;

static __thread vgn_group_t g_group;

int vgn_in_group(void)
{
    return g_group.depth > 0;
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

ncclResult_t vgn_group_defer_init(ncclComm_t c)
{
    vgn_group_t *g = &g_group;
    if (grow((void **)&g->inits, &g->capinits, g->ninits + 1, sizeof(ncclComm_t)))
        return ncclSystemError;
    vgn_comm_ref(c);
    g->inits[g->ninits++] = c;
    return ncclSuccess;
}

/* ---- building one operation ---- */

static const char *api_name(vgn_kind_t k)
{
    static const char *const names[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                        "ncclBroadcast", "ncclReduce", "ncclAlltoAll",
                                        "ncclGather", "ncclScatter", "ncclSend", "ncclRecv"};
    return names[k];
}

/* The size the cost model takes for one item (see nccl_cost.c): S, S_total or the
 * per-rank all-to-all send size. */
static double cost_bytes(const vgn_item_t *it)
{
    double b = (double)it->count * (double)vgn_dtype_size(it->dtype);
    switch (it->kind) {
    case VGN_ALLGATHER: case VGN_REDUCESCATTER: case VGN_ALLTOALL: case VGN_GATHER:
    case VGN_SCATTER:
        return b * it->comm->nranks;
    default:
        return b;
    }
}

/* The bytes an item reads (write 0) and writes (write 1) on this rank: at most a scalar,
 * a send and a receive range. Returns how many. */
static int item_ranges(const vgn_item_t *it, vg_range_t *r)
{
    size_t b = it->count * vgn_dtype_size(it->dtype), nb = b * (size_t)it->comm->nranks;
    int root = it->comm->rank == it->root, n = 0;
    size_t sendlen = 0, recvlen = 0;
    switch (it->kind) {
    case VGN_ALLREDUCE: sendlen = b; recvlen = b; break;
    case VGN_ALLGATHER: sendlen = b; recvlen = nb; break;
    case VGN_REDUCESCATTER: sendlen = nb; recvlen = b; break;
    case VGN_BROADCAST: sendlen = root ? b : 0; recvlen = b; break;
    case VGN_REDUCE: sendlen = b; recvlen = root ? b : 0; break;
    case VGN_ALLTOALL: sendlen = nb; recvlen = nb; break;
    case VGN_GATHER: sendlen = b; recvlen = root ? nb : 0; break;
    case VGN_SCATTER: sendlen = root ? nb : 0; recvlen = b; break;
    case VGN_SEND: sendlen = b; break;
    case VGN_RECV: recvlen = b; break;
    default: break;
    }
    if (it->scalar_dev) /* a pre-multiply scalar read when the collective starts */
        r[n++] = (vg_range_t){(uintptr_t)it->scalar_dev, vgn_dtype_size(it->dtype), 0};
    if (sendlen)
        r[n++] = (vg_range_t){(uintptr_t)it->sendbuff, sendlen, 0};
    if (recvlen)
        r[n++] = (vg_range_t){(uintptr_t)it->recvbuff, recvlen, 1};
    return n;
}

/* Declares the item's footprint (in timing-only mode too: the hazard detector sees the same
 * ranges either way). */
static void add_ranges(vg_op_t *op, const vgn_item_t *it)
{
    vg_range_t r[3];
    int n = item_ranges(it, r);
    for (int i = 0; i < n; i++)
        vg_op_add_range(op, (const void *)r[i].lo, r[i].len, r[i].write);
}

/* "allreduce", or for a group the kinds in order with their counts: "sendx3+recvx3". */
static void op_name(char *buf, size_t len, const vgn_item_t *items, int m)
{
    int count[VGN_NKINDS] = {0};
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < m; i++)
        count[items[i].kind]++;
    for (int i = 0; i < m && used + 1 < len; i++) {
        vgn_kind_t k = items[i].kind;
        if (!count[k])
            continue;
        int w = count[k] > 1
                    ? snprintf(buf + used, len - used, "%s%sx%d", used ? "+" : "", vgn_kind_name(k),
                               count[k])
                    : snprintf(buf + used, len - used, "%s%s", used ? "+" : "", vgn_kind_name(k));
        used += w > 0 ? (size_t)w : 0;
        count[k] = 0;
    }
}

/* Fills the op's time, link class and bytes: collectives one after the other; the group's
 * point-to-point items progress together, each direction of this rank's link carrying its
 * own bytes: alpha + max(sent, received) / B, on the inter-node link as soon as one peer
 * sits on another node (one item's link cannot be told apart inside the op). */
static void op_cost(vg_op_t *op, const vgn_item_t *items, int m)
{
    const vgpu_profile_t *p = vg_profile(items[0].comm->dev);
    double solo = 0, sent = 0, p2p_out = 0, p2p_in = 0;
    int link = 0, p2p_link = 0, p2p = 0;
    for (int i = 0; i < m; i++) {
        const vgn_item_t *it = &items[i];
        const ncclComm_t c = it->comm;
        double s = cost_bytes(it);
        if (it->kind == VGN_SEND || it->kind == VGN_RECV) {
            int pl = vgn_pair_link(c, it->root, p->gpus_per_node);
            p2p = 1;
            p2p_link |= pl;
            link |= pl;
            *(it->kind == VGN_SEND ? &p2p_out : &p2p_in) += s;
            continue;
        }
        link |= c->link;
        solo += vg_nccl_cost_coll(p, it->kind, c->nranks, c->link, c->per_node, s);
        sent += vg_nccl_cost_bytes_sent(it->kind, c->nranks, c->rank, it->root, s);
    }
    if (p2p)
        solo += vg_nccl_cost_p2p(p, p2p_link, p2p_out > p2p_in ? p2p_out : p2p_in);
    op->solo_ns = solo;
    op->link = link;
    op->bytes = (uint64_t)(sent + p2p_out);
}

/* Submits m items (one device, one stream) as one operation; takes their references. */
static ncclResult_t submit(vgn_item_t *items, int m)
{
    ncclComm_t c0 = items[0].comm;
    vgn_batch_t *b = calloc(1, sizeof(*b) + (size_t)m * sizeof(vgn_item_t));
    if (!b) {
        for (int i = 0; i < m; i++)
            vgn_comm_unref(items[i].comm);
        return ncclSystemError;
    }
    memcpy(b->items, items, (size_t)m * sizeof(vgn_item_t));
    b->nitems = m;
    int saved = vg_current_device();
    if (saved != c0->dev)
        vg_set_device(c0->dev); /* one thread may drive the communicators of several devices */
    vg_op_t *op = vg_op_new(m == 1 ? api_name(items[0].kind) : "ncclGroupEnd", VG_COMM);
    op->payload = b;
    op->release = vgn_batch_release;
    op->rdv = &vgn_rdv_ops;
    op->exec = vgn_exec;
    op->exec_always = 1; /* consuming peers' slots is needed in timing-only mode too */
    op_name(op->name, sizeof(op->name), items, m);
    op_cost(op, items, m);
    uint64_t bytes = 0;
    for (int i = 0; i < m; i++) {
        add_ranges(op, &items[i]);
        bytes += (uint64_t)(items[i].count * vgn_dtype_size(items[i].dtype));
    }
    snprintf(op->trace_args, sizeof(op->trace_args),
             "\"comm\":\"%.24s\",\"seq\":%llu,\"bytes\":%llu", c0->name,
             (unsigned long long)items[0].seq, (unsigned long long)bytes);
    cudaError_t e = vg_submit_unchecked(items[0].stream, op); /* check_call did the ranges */
    if (saved != c0->dev)
        vg_set_device(saved);
    if (e == cudaSuccess)
        return ncclSuccess;
    /* The calls hold sequence numbers their peers will wait for: the communicators are
     * out of step from here on. */
    vgn_error("nccl: %s on communicator %s: the device refused the operation (cudaError %d)",
              m == 1 ? api_name(items[0].kind) : "ncclGroupEnd", c0->name, (int)e);
    for (int i = 0; i < m; i++)
        vgn_set_async(items[i].comm, ncclUnhandledCudaError);
    return ncclUnhandledCudaError;
}

/* Queues the item inside a group, else submits it alone. Takes a reference on its comm. */
static ncclResult_t enqueue(const vgn_item_t *it)
{
    vgn_group_t *g = &g_group;
    vgn_comm_ref(it->comm);
    if (g->depth == 0) {
        vgn_item_t one = *it;
        return submit(&one, 1);
    }
    if (grow((void **)&g->items, &g->cap, g->nitems + 1, sizeof(vgn_item_t))) {
        vgn_comm_unref(it->comm);
        return ncclSystemError;
    }
    g->items[g->nitems++] = *it;
    return ncclSuccess;
}

/* Inside a group, an argument error poisons the group: ncclGroupEnd returns it and submits
 * nothing, as NCCL does. */
static ncclResult_t fail(ncclResult_t r)
{
    if (g_group.depth > 0 && g_group.err == ncclSuccess)
        g_group.err = r;
    return r;
}

static ncclResult_t check_stream(ncclComm_t c, cudaStream_t s, const char *api)
{
    if (vg_stream_check(s) != cudaSuccess) {
        vgn_error("nccl: %s: invalid stream %p", api, (void *)s);
        return ncclInvalidArgument;
    }
    int dev;
    if (s && s != cudaStreamLegacy && s != cudaStreamPerThread &&
        vg_stream_get_device(s, &dev) == cudaSuccess && dev != c->dev) {
        vgn_error("nccl: %s: stream of device %d used with communicator %s of device %d", api,
                  dev, c->name, c->dev);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* The checks every call shares, in NCCL's order; then the buffers this rank uses. Resolves
 * a custom reduction op into the item. */
static ncclResult_t check_call(vgn_item_t *it)
{
    const char *api = api_name(it->kind);
    ncclComm_t c = it->comm;
    ncclResult_t r = vgn_comm_check(c);
    if (r != ncclSuccess)
        return r;
    int rooted = it->kind == VGN_BROADCAST || it->kind == VGN_REDUCE ||
                 it->kind == VGN_GATHER || it->kind == VGN_SCATTER;
    int p2p = it->kind == VGN_SEND || it->kind == VGN_RECV;
    if ((rooted || p2p) && (it->root < 0 || it->root >= c->nranks)) {
        vgn_error("nccl: %s: %s %d out of range for %d ranks", api, p2p ? "peer" : "root",
                  it->root, c->nranks);
        return ncclInvalidArgument;
    }
    if (vgn_dtype_size(it->dtype) == 0) {
        vgn_error("nccl: %s: invalid datatype %d", api, (int)it->dtype);
        return ncclInvalidArgument;
    }
    if ((it->kind == VGN_ALLREDUCE || it->kind == VGN_REDUCESCATTER || it->kind == VGN_REDUCE) &&
        (r = vgn_resolve_op(it, it->redop, api)) != ncclSuccess)
        return r;
    if ((r = check_stream(c, it->stream, api)) != ncclSuccess)
        return r;
    int root = c->rank == it->root;
    int need_send = it->kind != VGN_RECV && !((it->kind == VGN_BROADCAST ||
                                               it->kind == VGN_SCATTER) && !root);
    int need_recv = it->kind != VGN_SEND && !((it->kind == VGN_REDUCE ||
                                               it->kind == VGN_GATHER) && !root);
    if (it->count && ((need_send && !it->sendbuff) || (need_recv && !it->recvbuff))) {
        vgn_error("nccl: %s on communicator %s: %s is NULL", api, c->name,
                  need_send && !it->sendbuff ? "sendbuff" : "recvbuff");
        return ncclInvalidArgument;
    }
    vg_range_t rg[3];
    int nr = item_ranges(it, rg);
    for (int i = 0; i < nr; i++) {
        vg_alloc_info_t info;
        int f = vg_mem_find((const void *)rg[i].lo, rg[i].len, &info);
        if (f != 1) {
            vgn_error("nccl: %s on communicator %s: %zu bytes at %p %s", api, c->name,
                      rg[i].len, (void *)rg[i].lo,
                      f < 0 ? "lie in a freed allocation (use after free)"
                            : "are not inside one live device allocation");
            return ncclInvalidArgument;
        }
    }
    return ncclSuccess;
}

static ncclResult_t issue(vgn_kind_t kind, const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t comm,
                          cudaStream_t stream)
{
    vgn_item_t it = {.kind = kind, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                     .count = count, .dtype = dt, .redop = op, .root = root, .stream = stream};
    ncclResult_t r = check_call(&it);
    if (r != ncclSuccess)
        return fail(r);
    if (count == 0)
        return ncclSuccess; /* nothing to move: no op and no sequence number, as in NCCL */
    int skip;
    if ((r = vgn_fault(kind, comm, &skip)) != ncclSuccess || skip)
        return fail(r); /* VGPU_NCCL_FAIL (nccl_fault.c) */
    if (kind == VGN_SEND)
        it.seq = comm->send_seq[root]++;
    else if (kind == VGN_RECV)
        it.seq = comm->recv_seq[root]++;
    else
        it.seq = comm->coll_seq++;
    return fail(enqueue(&it));
}

/* ---- groups ---- */

VG_API ncclResult_t pncclGroupStart(void)
{
    g_group.depth++;
    return ncclSuccess;
}
VGN_ALIAS(ncclGroupStart);

/* Gives back the sequence number of a queued call that will not be submitted. Every call
 * on its communicator since was queued in this group too (NCCL calls on one communicator
 * come from one thread), so undoing them last to first restores the numbering its peers
 * expect when they dropped the same group. */
static void unnumber(const vgn_item_t *it)
{
    ncclComm_t c = it->comm;
    uint64_t *ctr = it->kind == VGN_SEND   ? &c->send_seq[it->root]
                    : it->kind == VGN_RECV ? &c->recv_seq[it->root]
                                           : &c->coll_seq;
    if (*ctr == it->seq + 1)
        (*ctr)--;
    else
        vgn_set_async(c, ncclInternalError); /* out of step: fail rather than mismatch */
}

static void group_reset(vgn_group_t *g, int drop_items)
{
    for (int i = drop_items ? g->nitems - 1 : -1; i >= 0; i--) {
        unnumber(&g->items[i]);
        vgn_comm_unref(g->items[i].comm);
    }
    g->nitems = 0;
    g->ninits = 0;
    g->err = ncclSuccess;
}

/* Completes the joins queued in the group: every member of every communicator has had the
 * chance to join before anyone waits. */
static ncclResult_t finish_inits(vgn_group_t *g)
{
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < g->ninits; i++) {
        ncclComm_t c = g->inits[i];
        ncclResult_t r = vgn_shm_wait(c);
        if (r == ncclSuccess)
            c->ready = 1;
        else
            vgn_set_async(c, r);
        if (first == ncclSuccess)
            first = r;
        vgn_comm_unref(c);
    }
    return first;
}

VG_API ncclResult_t pncclGroupEnd(void)
{
    vgn_group_t *g = &g_group;
    if (g->depth == 0) {
        vgn_error("nccl: ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--g->depth > 0)
        return ncclSuccess; /* only the outermost end submits */
    ncclResult_t r = finish_inits(g);
    if (g->err != ncclSuccess || r != ncclSuccess) {
        r = g->err != ncclSuccess ? g->err : r;
        group_reset(g, 1);
        return r;
    }
    /* One op per (device, stream), in the order of each one's first call. The queue moves
     * to a local array first: submitting may run callbacks that must not see it. */
    int m = g->nitems;
    vgn_item_t *items = g->items;
    g->items = NULL;
    g->nitems = g->cap = 0;
    group_reset(g, 0);
    char *taken = calloc((size_t)m + 1, 1);
    vgn_item_t *batch = malloc(((size_t)m + 1) * sizeof(vgn_item_t));
    if (!taken || !batch) {
        for (int i = 0; i < m; i++)
            vgn_comm_unref(items[i].comm);
        m = 0;
        r = ncclSystemError;
    }
    for (int i = 0; i < m; i++) {
        if (taken[i])
            continue;
        int nb = 0;
        for (int j = i; j < m; j++)
            if (!taken[j] && items[j].stream == items[i].stream &&
                items[j].comm->dev == items[i].comm->dev) {
                taken[j] = 1;
                batch[nb++] = items[j];
            }
        ncclResult_t rs = submit(batch, nb);
        if (r == ncclSuccess)
            r = rs;
    }
    free(taken);
    free(batch);
    free(items);
    return r;
}
VGN_ALIAS(ncclGroupEnd);

/* Ends the group like ncclGroupEnd but runs nothing: estimatedTime is the time, in
 * microseconds, the group's operations would take one after the other alone on the device
 * (the same cost model). */
VG_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    vgn_group_t *g = &g_group;
    if (!simInfo || simInfo->magic != 0x74685283u) {
        vgn_error("nccl: ncclGroupSimulateEnd: simInfo not initialised with "
                  "NCCL_SIM_INFO_INITIALIZER");
        return ncclInvalidArgument;
    }
    if (g->depth == 0) {
        vgn_error("nccl: ncclGroupSimulateEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--g->depth > 0)
        return ncclSuccess;
    ncclResult_t r = finish_inits(g);
    double ns = 0;
    for (int i = 0; i < g->nitems; i++) {
        vg_op_t probe; /* only the cost fields are used */
        memset(&probe, 0, sizeof(probe));
        op_cost(&probe, &g->items[i], 1);
        ns += probe.solo_ns;
    }
    simInfo->estimatedTime = (float)(ns / 1e3);
    if (g->err != ncclSuccess)
        r = g->err;
    group_reset(g, 1);
    return r;
}
VGN_ALIAS(ncclGroupSimulateEnd);

/* ---- collectives ---- */

VG_API ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream)
{
    return issue(VGN_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}
VGN_ALIAS(ncclAllReduce);

VG_API ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return issue(VGN_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}
VGN_ALIAS(ncclAllGather);

VG_API ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream)
{
    return issue(VGN_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}
VGN_ALIAS(ncclReduceScatter);

VG_API ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream)
{
    return issue(VGN_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
VGN_ALIAS(ncclBroadcast);

VG_API ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream)
{
    return issue(VGN_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}
VGN_ALIAS(ncclBcast);

VG_API ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, ncclRedOp_t op, int root,
                                ncclComm_t comm, cudaStream_t stream)
{
    return issue(VGN_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
VGN_ALIAS(ncclReduce);

VG_API ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return issue(VGN_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
}
VGN_ALIAS(ncclAlltoAll);

VG_API ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream)
{
    return issue(VGN_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
VGN_ALIAS(ncclGather);

VG_API ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream)
{
    return issue(VGN_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
VGN_ALIAS(ncclScatter);

/* ---- point-to-point ---- */

VG_API ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                              int peer, ncclComm_t comm, cudaStream_t stream)
{
    return issue(VGN_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}
VGN_ALIAS(ncclSend);

VG_API ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclComm_t comm, cudaStream_t stream)
{
    return issue(VGN_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}
VGN_ALIAS(ncclRecv);
