/*
 * nccl_rdv.c: the rendezvous of a communication op (vg_rdv_ops_t) and its effect.
 *
 * post (once, at the op's local ready time): every item publishes this rank's part in the
 * communicator segment: a collective its slot (call, count, dtype, op, root, t_ready) and,
 * when data moves, a data segment holding a snapshot of its input; a send its half of the
 * pair slot and its data; a receive its half. A slot still held by an older op that some
 * peer has not consumed is not overwritten: the item stays unposted and poll retries, so
 * post never waits.
 * poll: done when every counterpart of every item has posted the same sequence number;
 * t_start is the latest t_ready of all of them, which every rank computes alike. A
 * counterpart that posted something else is a mismatch; one that has not posted within
 * VGPU_COMM_TIMEOUT seconds (wall clock) is a timeout. Both print one line and fail the op.
 * As soon as an item's counterparts have all posted, poll releases their slots (their
 * owners may reuse them at once, so a group may hold any number of calls); the data
 * segments are released by exec (at the start, in virtual-time order) once it has computed
 * this rank's outputs from them; the last reader of a segment unlinks it.
 *
 * All three run with the core's device lock held; nothing here blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nccl_int.h"

static int timing_only(void)
{
    return vg_config()->timing_only;
}

static size_t in_bytes(const vgn_item_t *it)
{
    size_t b = it->count * vgn_dtype_size(it->dtype);
    switch (it->kind) {
    case VGN_REDUCESCATTER: case VGN_ALLTOALL: case VGN_SCATTER:
        return b * (size_t)it->comm->nranks;
    default:
        return b;
    }
}

static int is_rooted(vgn_kind_t k)
{
    return k == VGN_BROADCAST || k == VGN_REDUCE || k == VGN_GATHER || k == VGN_SCATTER;
}

static int is_reducing(vgn_kind_t k)
{
    return k == VGN_ALLREDUCE || k == VGN_REDUCESCATTER || k == VGN_REDUCE;
}

/* Whether this rank's own input takes part in its own output. */
static int own_needed(const vgn_item_t *it)
{
    switch (it->kind) {
    case VGN_ALLREDUCE: case VGN_ALLGATHER: case VGN_REDUCESCATTER: case VGN_ALLTOALL:
        return 1;
    case VGN_REDUCE: case VGN_GATHER: case VGN_BROADCAST: case VGN_SCATTER:
        return it->comm->rank == it->root;
    default:
        return 0;
    }
}

/* Whether some peer reads this rank's input. */
static int peers_need(const vgn_item_t *it)
{
    const ncclComm_t c = it->comm;
    if (c->represent)
        return 0;
    switch (it->kind) {
    case VGN_ALLREDUCE: case VGN_ALLGATHER: case VGN_REDUCESCATTER: case VGN_ALLTOALL:
        return c->nranks > 1;
    case VGN_REDUCE: case VGN_GATHER:
        return c->rank != it->root;
    case VGN_BROADCAST: case VGN_SCATTER:
        return c->rank == it->root && c->nranks > 1;
    case VGN_SEND:
        return 1;
    default:
        return 0;
    }
}

static vgn_cslot_t *cslot(ncclComm_t c, int rank, uint64_t seq)
{
    return &c->shm.coll[(size_t)rank * VGN_COLL_SLOTS + seq % VGN_COLL_SLOTS];
}

static vgn_pslot_t *pslot(ncclComm_t c, int src, int dst, uint64_t k)
{
    return &c->shm.p2p[((size_t)src * c->nranks + dst) * VGN_P2P_SLOTS + k % VGN_P2P_SLOTS];
}

/* Readers of the data segment a rank posts for this item (its header's count). */
static uint32_t data_readers(const vgn_item_t *it)
{
    switch (it->kind) {
    case VGN_REDUCE: case VGN_GATHER: case VGN_SEND:
        return 1;
    default:
        return (uint32_t)(it->comm->nranks - 1);
    }
}

/* Whether rank me reads the data rank k posted for a collective of this kind and root
 * (what k's segment header counts). */
static int coll_reader(vgn_kind_t kind, int root, int me, int k)
{
    if (k == me)
        return 0;
    switch (kind) {
    case VGN_ALLREDUCE: case VGN_ALLGATHER: case VGN_REDUCESCATTER: case VGN_ALLTOALL:
        return 1;
    case VGN_REDUCE: case VGN_GATHER:
        return me == root;
    case VGN_BROADCAST: case VGN_SCATTER:
        return k == root;
    default:
        return 0;
    }
}

/* Whether this rank reads rank k's posted data. */
static int reads_from(const vgn_item_t *it, int k)
{
    const ncclComm_t c = it->comm;
    if (c->represent || it->kind == VGN_SEND)
        return 0;
    if (it->kind == VGN_RECV)
        return k == it->root; /* a receive from itself reads its own send's segment */
    return coll_reader(it->kind, it->root, c->rank, k);
}

static void data_name(char *buf, size_t len, const vgn_item_t *it, int poster)
{
    ncclComm_t c = it->comm;
    if (it->kind == VGN_SEND || it->kind == VGN_RECV)
        vgn_data_name(buf, len, c->key, 1, poster, poster == c->rank ? it->root : c->rank,
                      it->seq);
    else
        vgn_data_name(buf, len, c->key, 0, poster, 0, it->seq);
}

static void desc(char *buf, size_t len, int rank, int kind, uint64_t count, int dtype,
                 int redop, int root)
{
    int n = snprintf(buf, len, "rank %d called %s(count %llu, %s", rank,
                     vgn_kind_name((vgn_kind_t)kind), (unsigned long long)count,
                     vgn_dtype_name(dtype));
    if (n < 0 || (size_t)n >= len)
        return;
    if (is_reducing((vgn_kind_t)kind))
        n += snprintf(buf + n, len - (size_t)n, ", %s", vgn_redop_name(redop));
    if (is_rooted((vgn_kind_t)kind) && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", root %d", root);
    if ((size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ")");
}

/* This rank's input snapshot. */
static const void *own_data(const vgn_item_t *it)
{
    return it->own_is_map ? (const char *)it->own + VGN_DATA_HDR : it->own;
}

static void drop_own(vgn_item_t *it)
{
    if (!it->own)
        return;
    if (it->own_is_map)
        munmap(it->own, it->own_len + VGN_DATA_HDR);
    else
        free(it->own);
    it->own = NULL;
}

/* Takes this rank's input snapshot: into a data segment when peers read it, else onto the
 * heap when only this rank's exec does. */
static int snapshot(vgn_item_t *it, int *has_data)
{
    size_t len = in_bytes(it);
    int own = own_needed(it), peers = peers_need(it);
    *has_data = 0;
    if (timing_only() || len == 0 || (!own && !peers))
        return 0;
    if (peers) {
        char name[96];
        data_name(name, sizeof(name), it, it->comm->rank);
        if (vgn_data_put(name, it->sendbuff, len, data_readers(it), own ? &it->own : NULL))
            return -1;
        it->own_is_map = own;
        *has_data = 1;
    } else {
        it->own = malloc(len);
        if (!it->own) {
            vg_msg("nccl: out of memory for a %zu-byte input snapshot", len);
            return -1;
        }
        memcpy(it->own, it->sendbuff, len);
        it->own_is_map = 0;
    }
    it->own_len = len;
    return 0;
}

/* 1: posted; 0: its slot is still held by an older op; -1: failed (message printed). */
static int try_post(vgn_item_t *it, double t)
{
    ncclComm_t c = it->comm;
    int has_data;
    if (c->represent)
        return snapshot(it, &has_data) ? -1 : 1;
    if (it->kind == VGN_RECV) {
        vgn_pslot_t *s = pslot(c, it->root, c->rank, it->seq);
        uint64_t tag = __atomic_load_n(&s->recv_tag, __ATOMIC_ACQUIRE);
        if (tag && __atomic_load_n(&s->recv_done, __ATOMIC_ACQUIRE) != tag)
            return 0;
        s->recv_count = it->count;
        s->recv_dtype = it->dtype;
        s->t_recv = t;
        __atomic_store_n(&s->recv_tag, it->seq + 1, __ATOMIC_RELEASE);
        return 1;
    }
    if (it->kind == VGN_SEND) {
        vgn_pslot_t *s = pslot(c, c->rank, it->root, it->seq);
        uint64_t tag = __atomic_load_n(&s->send_tag, __ATOMIC_ACQUIRE);
        if (tag && __atomic_load_n(&s->send_done, __ATOMIC_ACQUIRE) != tag)
            return 0;
        if (snapshot(it, &has_data))
            return -1;
        it->posted_data = has_data;
        s->send_count = it->count;
        s->send_dtype = it->dtype;
        s->has_data = has_data;
        s->t_send = t;
        __atomic_store_n(&s->send_tag, it->seq + 1, __ATOMIC_RELEASE);
        return 1;
    }
    vgn_cslot_t *s = cslot(c, c->rank, it->seq);
    uint64_t tag = __atomic_load_n(&s->tag, __ATOMIC_ACQUIRE);
    if (tag && __atomic_load_n(&s->left, __ATOMIC_ACQUIRE))
        return 0;
    if (snapshot(it, &has_data))
        return -1;
    it->posted_data = has_data;
    s->call = it->kind;
    s->count = it->count;
    s->dtype = it->dtype;
    s->redop = it->redop;
    s->root = it->root;
    s->has_data = has_data;
    s->t_ready = t;
    __atomic_store_n(&s->left, (uint32_t)(c->nranks - 1), __ATOMIC_RELAXED);
    __atomic_store_n(&s->tag, it->seq + 1, __ATOMIC_RELEASE);
    return 1;
}

/* Releases the data segments this rank reads for a done item that will not execute. */
static void release_data(vgn_item_t *it)
{
    if (it->data_done)
        return;
    it->data_done = 1;
    if (!it->peer_data)
        return;
    for (int k = 0; k < it->comm->nranks; k++)
        if (reads_from(it, k)) {
            char name[96];
            data_name(name, sizeof(name), it, k);
            vgn_data_release(name, NULL, in_bytes(it));
        }
}

/* Undoes an item that fails: releases whatever its counterparts posted so far (slots and
 * data) so that they can move on, and its own snapshot. */
static void fail_item(vgn_item_t *it)
{
    ncclComm_t c = it->comm;
    char name[96];
    drop_own(it);
    if (c->represent || it->data_done)
        return;
    if (it->done) {
        release_data(it);
        return;
    }
    it->done = it->data_done = 1;
    if (it->kind == VGN_SEND || it->kind == VGN_RECV) {
        int send = it->kind == VGN_SEND;
        vgn_pslot_t *s = send ? pslot(c, c->rank, it->root, it->seq)
                              : pslot(c, it->root, c->rank, it->seq);
        if (__atomic_load_n(send ? &s->recv_tag : &s->send_tag, __ATOMIC_ACQUIRE) != it->seq + 1)
            return;
        if (!send && s->has_data) {
            data_name(name, sizeof(name), it, it->root);
            vgn_data_release(name, NULL, in_bytes(it));
        }
        __atomic_store_n(send ? &s->recv_done : &s->send_done, it->seq + 1, __ATOMIC_RELEASE);
        return;
    }
    for (int k = 0; k < c->nranks; k++) {
        vgn_cslot_t *s = cslot(c, k, it->seq);
        if (k == c->rank || __atomic_load_n(&s->tag, __ATOMIC_ACQUIRE) != it->seq + 1)
            continue;
        /* After a mismatch, the poster's call says whether it counted this rank. */
        if (s->has_data && coll_reader((vgn_kind_t)s->call, s->root, c->rank, k)) {
            data_name(name, sizeof(name), it, k);
            vgn_data_release(name, NULL, in_bytes(it));
        }
        __atomic_sub_fetch(&s->left, 1u, __ATOMIC_ACQ_REL);
    }
}

static void fail_batch(vgn_batch_t *b, ncclResult_t why)
{
    for (int i = 0; i < b->nitems; i++) {
        fail_item(&b->items[i]);
        vgn_set_async(b->items[i].comm, why);
    }
}

static int batch_post(vg_op_t *op, double t_ready)
{
    vgn_batch_t *b = op->payload;
    b->t_ready = t_ready;
    b->wall_posted = vgn_wall();
    for (int i = 0; i < b->nitems; i++)
        if (__atomic_load_n(&b->items[i].comm->aborted, __ATOMIC_ACQUIRE)) {
            fail_batch(b, ncclInvalidUsage); /* nothing posted: nothing left behind */
            return -1;
        }
    for (int i = 0; i < b->nitems; i++) {
        vgn_item_t *it = &b->items[i];
        int r = try_post(it, t_ready);
        if (r < 0) {
            fail_batch(b, ncclSystemError);
            return -1;
        }
        it->posted = r;
    }
    return 0;
}

/* An aborted communicator's peers will never read what this rank posted. */
static void abort_batch(vgn_batch_t *b)
{
    for (int i = 0; i < b->nitems; i++) {
        vgn_item_t *it = &b->items[i];
        if (it->posted_data) {
            char name[96];
            data_name(name, sizeof(name), it, it->comm->rank);
            shm_unlink(name);
        }
    }
    fail_batch(b, ncclInvalidUsage);
}

/* Notes a counterpart that has not posted: its rank for the timeout message, and whether
 * it lives in another process (remote) or is a device of this one. */
static void add_missing(const vgn_item_t *it, char *missing, size_t mlen, int k, int *remote)
{
    size_t l = strlen(missing);
    if (l + 16 < mlen)
        snprintf(missing + l, mlen - l, "%s%d", l ? ", " : "", k);
    if (it->comm->shm.members[k].pid != (int32_t)getpid())
        *remote = 1;
}

/* Checks a collective's peers. 1: all posted (their slots are then released); 0: waiting
 * (missing lists who); -1: a mismatch, reported. */
static int poll_coll(vgn_item_t *it, char *missing, size_t mlen, int *remote)
{
    ncclComm_t c = it->comm;
    int all = 1, data = 0;
    double t = 0;
    for (int k = 0; k < c->nranks; k++) {
        if (k == c->rank)
            continue;
        vgn_cslot_t *s = cslot(c, k, it->seq);
        if (__atomic_load_n(&s->tag, __ATOMIC_ACQUIRE) != it->seq + 1) {
            add_missing(it, missing, mlen, k, remote);
            all = 0;
            continue;
        }
        int bad = s->call != (uint32_t)it->kind || s->count != it->count ||
                  s->dtype != (int32_t)it->dtype ||
                  (is_reducing(it->kind) && s->redop != (int32_t)it->redop) ||
                  (is_rooted(it->kind) && s->root != it->root);
        if (bad) {
            char mine[128], theirs[128];
            desc(mine, sizeof(mine), c->rank, it->kind, it->count, it->dtype, it->redop, it->root);
            desc(theirs, sizeof(theirs), k, (int)s->call, s->count, s->dtype, s->redop, s->root);
            vgn_error("nccl: mismatch on communicator %s at collective #%llu: %s but %s",
                      c->name, (unsigned long long)it->seq, mine, theirs);
            return -1;
        }
        t = s->t_ready > t ? s->t_ready : t;
        data |= reads_from(it, k) && s->has_data;
    }
    if (!all)
        return 0;
    it->t_peers = t;
    it->peer_data = data;
    for (int k = 0; k < c->nranks; k++)
        if (k != c->rank)
            __atomic_sub_fetch(&cslot(c, k, it->seq)->left, 1u, __ATOMIC_ACQ_REL);
    return 1;
}

static int poll_p2p(vgn_item_t *it, char *missing, size_t mlen, int *remote)
{
    ncclComm_t c = it->comm;
    int send = it->kind == VGN_SEND, peer = it->root;
    vgn_pslot_t *s = send ? pslot(c, c->rank, peer, it->seq) : pslot(c, peer, c->rank, it->seq);
    if (__atomic_load_n(send ? &s->recv_tag : &s->send_tag, __ATOMIC_ACQUIRE) != it->seq + 1) {
        add_missing(it, missing, mlen, peer, remote);
        return 0;
    }
    uint64_t count = send ? s->recv_count : s->send_count;
    int dtype = send ? s->recv_dtype : s->send_dtype;
    if (count != it->count || dtype != (int)it->dtype) {
        vgn_error("nccl: mismatch on communicator %s at %s #%llu between ranks %d and %d: "
                  "rank %d called %s(count %zu, %s) but rank %d called %s(count %llu, %s)",
                  c->name, send ? "send" : "recv", (unsigned long long)it->seq, c->rank, peer,
                  c->rank, vgn_kind_name(it->kind), it->count, vgn_dtype_name(it->dtype), peer,
                  send ? "recv" : "send", (unsigned long long)count, vgn_dtype_name(dtype));
        return -1;
    }
    it->t_peers = send ? s->t_recv : s->t_send;
    it->peer_data = !send && s->has_data;
    __atomic_store_n(send ? &s->recv_done : &s->send_done, it->seq + 1, __ATOMIC_RELEASE);
    return 1;
}

int vgn_item_waits(const vgn_item_t *it, int *who, int max)
{
    const ncclComm_t c = it->comm;
    int n = 0;
    if (it->done || !it->posted || c->represent)
        return 0;
    if (it->kind >= VGN_SEND) {
        int send = it->kind == VGN_SEND;
        vgn_pslot_t *s = send ? pslot(c, c->rank, it->root, it->seq)
                              : pslot(c, it->root, c->rank, it->seq);
        if (max > 0 &&
            __atomic_load_n(send ? &s->recv_tag : &s->send_tag, __ATOMIC_ACQUIRE) != it->seq + 1)
            who[n++] = c->granks[it->root];
        return n;
    }
    for (int k = 0; k < c->nranks && n < max; k++)
        if (k != c->rank &&
            __atomic_load_n(&cslot(c, k, it->seq)->tag, __ATOMIC_ACQUIRE) != it->seq + 1)
            who[n++] = c->granks[k];
    return n;
}

/* What poll answers while waiting. When every missing counterpart is an op of this
 * process (devices of one process: ncclCommInitAll), the core may go on simulating this
 * process's other work, which is what will post them; it cannot when one is remote, since
 * the op might then have to start at a virtual time it would already have passed. A core
 * without VG_RDV_LOCAL blocks in both cases (and one thread driving several devices then
 * waits for the timeout). */
static int wait_code(int remote)
{
#ifdef VG_RDV_LOCAL
    return remote ? 0 : VG_RDV_LOCAL;
#else
    (void)remote;
    return 0;
#endif
}

static void report_timeout(const vgn_batch_t *b, const vgn_item_t *it, const char *missing,
                           int remote)
{
    ncclComm_t c = it->comm;
    if (!it->posted)
        vgn_error("nccl: %s #%llu on communicator %s (rank %d of %d) could not be posted for "
                  "%.1f s (VGPU_COMM_TIMEOUT): the peers never took the operation %d before "
                  "it; giving up", vgn_kind_name(it->kind), (unsigned long long)it->seq,
                  c->name, c->rank, c->nranks, vgn_timeout_s(),
                  it->kind >= VGN_SEND ? VGN_P2P_SLOTS : VGN_COLL_SLOTS);
    else
        vgn_error("nccl: %s #%llu on communicator %s (rank %d of %d, count %zu, %s, %s %d) "
                  "waited %.1f s (VGPU_COMM_TIMEOUT) for rank(s) %s that never posted the "
                  "matching call; giving up%s", vgn_kind_name(it->kind),
                  (unsigned long long)it->seq, c->name, c->rank, c->nranks, it->count,
                  vgn_dtype_name(it->dtype), it->kind >= VGN_SEND ? "peer" : "root", it->root,
                  vgn_wall() - b->wall_posted, missing,
                  remote ? "" : wait_code(0) ? " (they are devices of this process)"
                  : " (they are devices of this process, which this core cannot simulate while "
                    "an op waits: it lacks VG_RDV_LOCAL)");
}

/* Advances one item. 1: done; 0: waiting (*remote set when a counterpart in another
 * process, or this rank's own slot, holds it up); -1: failed (reported). */
static int poll_item(vgn_batch_t *b, vgn_item_t *it, char *missing, size_t mlen, int *remote)
{
    if (it->done)
        return 1;
    if (!it->posted) {
        int r = try_post(it, b->t_ready);
        if (r < 0)
            return -1;
        it->posted = r;
        if (!r) {
            *remote = 1; /* the slot's readers may be anywhere: wait conservatively */
            return 0;
        }
    }
    if (it->comm->represent) {
        it->t_peers = 0; /* every member is this rank, arriving when it does */
        it->done = 1;
        return 1;
    }
    int r = it->kind >= VGN_SEND ? poll_p2p(it, missing, mlen, remote)
                                 : poll_coll(it, missing, mlen, remote);
    it->done = r > 0;
    return r;
}

static int batch_poll(vg_op_t *op, double *t_start)
{
    vgn_batch_t *b = op->payload;
    double t = b->t_ready;
    int all = 1, remote = 0;
    for (int i = 0; i < b->nitems; i++) {
        vgn_item_t *it = &b->items[i];
        char missing[256] = "";
        if (__atomic_load_n(&it->comm->aborted, __ATOMIC_ACQUIRE)) {
            abort_batch(b);
            return -1;
        }
        int mine = 0; /* this item's counterparts in other processes */
        int r = poll_item(b, it, missing, sizeof(missing), &mine);
        remote |= mine;
        if (r < 0) {
            fail_batch(b, it->posted ? ncclInvalidUsage : ncclSystemError);
            return -1;
        }
        if (r == 0) {
            all = 0;
            if (vgn_wall() - b->wall_posted > vgn_timeout_s()) {
                report_timeout(b, it, missing, mine);
                fail_batch(b, ncclSystemError);
                return -1;
            }
        } else if (it->t_peers > t) {
            t = it->t_peers;
        }
    }
    /* Also when every peer has posted: a peer that found the cycle first failed its op and
     * moved on, which is what posted ours, but this op is on the cycle all the same. */
    if ((remote || all) && vgn_deadlock(op, !all, &b->dl_checked)) {
        fail_batch(b, ncclSystemError);
        return -1;
    }
    if (!all)
        return wait_code(remote);
    *t_start = t;
    return 1;
}

const vg_rdv_ops_t vgn_rdv_ops = {batch_post, batch_poll};

/* Maps the inputs this rank reads: in[k] for every rank k (its own snapshot for this rank,
 * and for every k in representative mode), NULL where not needed; maps[k] are the
 * segments to release. Returns 0, or -1 with a message. */
static int map_inputs(vgn_item_t *it, const void **in, void **maps)
{
    ncclComm_t c = it->comm;
    int n = c->nranks;
    for (int k = 0; k < n; k++) {
        in[k] = c->represent || k == c->rank ? own_data(it) : NULL;
        maps[k] = NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!reads_from(it, k))
            continue;
        char name[96];
        data_name(name, sizeof(name), it, k);
        if (!it->peer_data) {
            vg_msg("nccl: %s #%llu on communicator %s: rank %d posted no data (is "
                   "VGPU_TIMING_ONLY set on some ranks only?)", vgn_kind_name(it->kind),
                   (unsigned long long)it->seq, c->name, k);
            return -1;
        }
        maps[k] = vgn_data_map(name, in_bytes(it));
        if (!maps[k])
            return -1;
        in[k] = (const char *)maps[k] + VGN_DATA_HDR;
    }
    return 0;
}

/* Writes this rank's outputs of one item from the inputs of all ranks. */
static void compute(vgn_item_t *it, const void **in)
{
    /* A device-resident pre-multiply scalar is read now, as the device would. */
    const void *scalar = it->scalar_dev ? it->scalar_dev : it->scalar;
    ncclComm_t c = it->comm;
    int n = c->nranks, me = c->rank;
    size_t blk = it->count * vgn_dtype_size(it->dtype);
    char *out = it->recvbuff;
    switch (it->kind) {
    case VGN_ALLREDUCE:
        vgn_reduce(out, in, n, it->count, it->dtype, it->redop, scalar);
        break;
    case VGN_REDUCE:
        if (me == it->root)
            vgn_reduce(out, in, n, it->count, it->dtype, it->redop, scalar);
        break;
    case VGN_REDUCESCATTER:
        for (int k = 0; k < n; k++)
            in[k] = (const char *)in[k] + (size_t)me * blk;
        vgn_reduce(out, in, n, it->count, it->dtype, it->redop, scalar);
        break;
    case VGN_ALLGATHER:
        for (int k = 0; k < n; k++)
            memcpy(out + (size_t)k * blk, in[k], blk);
        break;
    case VGN_GATHER:
        if (me == it->root)
            for (int k = 0; k < n; k++)
                memcpy(out + (size_t)k * blk, in[k], blk);
        break;
    case VGN_ALLTOALL:
        for (int k = 0; k < n; k++)
            memcpy(out + (size_t)k * blk, (const char *)in[k] + (size_t)me * blk, blk);
        break;
    case VGN_BROADCAST:
        if (in[it->root]) /* representative non-root: the root's data is not here */
            memcpy(out, in[it->root], blk);
        break;
    case VGN_SCATTER:
        if (in[it->root])
            memcpy(out, (const char *)in[it->root] + (size_t)me * blk, blk);
        break;
    case VGN_RECV:
        if (in[it->root])
            memcpy(out, in[it->root], blk);
        break;
    default:
        break;
    }
}

static void exec_item(vgn_item_t *it)
{
    ncclComm_t c = it->comm;
    int n = c->nranks;
    if (it->kind == VGN_SEND || (c->represent && it->kind == VGN_RECV))
        return; /* representative recv: the sender is not here, the buffer keeps its data */
    const void **in = calloc((size_t)n, sizeof(*in));
    void **maps = calloc((size_t)n, sizeof(*maps));
    if (!in || !maps) {
        vg_msg("nccl: out of memory in %s", vgn_kind_name(it->kind));
        vgn_set_async(c, ncclSystemError);
    } else if (map_inputs(it, in, maps) != 0) {
        vgn_set_async(c, ncclSystemError);
    } else {
        compute(it, in);
    }
    for (int k = 0; k < n; k++) /* release every segment this rank reads, mapped or not */
        if (reads_from(it, k) && ((maps && maps[k]) || it->peer_data)) {
            char name[96];
            data_name(name, sizeof(name), it, k);
            vgn_data_release(name, maps ? maps[k] : NULL, in_bytes(it));
        }
    free(in);
    free(maps);
}

void vgn_exec(vg_op_t *op)
{
    vgn_batch_t *b = op->payload;
    for (int i = 0; i < b->nitems; i++) {
        vgn_item_t *it = &b->items[i];
        if (!timing_only() && !it->data_done) {
            exec_item(it);
            it->data_done = 1; /* exec_item released every segment it reads */
        }
        release_data(it);     /* timing-only: nothing was posted, only the mark is set */
        drop_own(it);
    }
}

void vgn_batch_release(vg_op_t *op)
{
    vgn_batch_t *b = op->payload;
    if (!b)
        return;
    for (int i = 0; i < b->nitems; i++) {
        vgn_item_t *it = &b->items[i];
        if (it->posted)
            fail_item(it); /* an op dropped before it ran: let the peers move on */
        drop_own(it);
        vgn_comm_unref(it->comm);
    }
    free(b);
    op->payload = NULL;
}
