/*
 * dispatch.c: the dispatcher thread. It takes submitted ops, holds them per framework
 * stream, and replays them onto physical streams in an order the mode chooses:
 *
 * stress   holds everything until a drain (or bounded lag, or a polled queued event),
 *          then replays all of it in a random legal order (DHELIX_SEED): program order
 *          within each framework stream, a wait after the record it refers to, and the
 *          legacy default stream as a barrier to every other stream (it synchronises with
 *          all blocking streams). Everything runs on the framework's own streams, so any
 *          difference from the program's results is a bug of the shim.
 * strands  holds each co-execution group until the next one starts (or a drain), then
 *          interleaves its two strands' ops, each on its strand's physical stream
 *          (strand 0: the framework stream itself; strand 1: a stream the shim made),
 *          then joins the two physical streams of every framework stream (the
 *          cross-strand barrier) and only then issues the group's deferred frees, so a
 *          free never overtakes a use by the other strand (invariant 5).
 *
 * Choosing the order of a batch is in order.c; this file has the loop, replay, barriers
 * and fences. The lock is never held while a real CUDA function runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "profile_rec.h"
#include "real.h"
#include "dispatch_int.h"
#include "nvtx.h"
#include "plan.h"
#include "sched_int.h"

void dh__sched_mark_dispatcher(void);

#define DH_KICK_MS 5       /* a queued record polled this long ago is issued unpaired */
#define DH_KICK_STALL_MS 2000 /* plan mode: ... once nothing was submitted for this long */
#define DH_LET_OUT_POLL_MS 1   /* plan mode: the longest an op let out early waits unseen */

typedef struct dh_devres {
    int ready;
    cudaEvent_t order;       /* scratch event for legacy-stream ordering on strand 1 */
    cudaStream_t hub;        /* where a fence's streams meet */
    cublasHandle_t blas[2];
    cublasLtHandle_t lt;
    cudaEvent_t bar[2];
} dh_devres_t;

static dh_devres_t dh__res[DH_MAX_DEVICES];
int dh__dirty[2]; /* dispatcher only: strand s issued work since the last barrier */
static int dh__cur_dev = -1;
static uint64_t dh__rng;

/* xorshift64*: a fixed sequence per seed, so one seed is one order. */
static uint64_t dh__xorshift(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

uint64_t dh__rand(void) { return dh__xorshift(&dh__rng); }

int dh__push(dh_batch_t *b, dh_op_t *op, int strand)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        dh_item_t *it = realloc(b->items, cap * sizeof *it);
        if (!it)
            return -1;
        b->items = it;
        b->cap = cap;
    }
    b->items[b->n++] = (dh_item_t){.op = op, .strand = strand};
    return 0;
}

/* ---- framework streams (lock held) ---- */

dh_vstream_t *dh__vstream_get(int device, cudaStream_t s)
{
    dh_vstream_t key_probe, *v;
    memset(&key_probe.key, 0, sizeof key_probe.key);
    key_probe.key.device = device;
    key_probe.key.stream = s;
    HASH_FIND(hh, dh__s.vstreams, &key_probe.key, sizeof key_probe.key, v);
    if (!v) {
        v = calloc(1, sizeof *v);
        if (!v)
            return NULL;
        v->key = key_probe.key;
        v->phys[0] = s;
        v->blocking = -1;
        HASH_ADD(hh, dh__s.vstreams, key, sizeof v->key, v);
    }
    return v;
}

cudaStream_t dh__physical(int device, cudaStream_t s, int strand)
{
    if (strand == 0)
        return s; /* strand 0 runs on the framework stream itself (phys[0]) */
    pthread_mutex_lock(&dh__s.lock);
    dh_vstream_t *v = dh__vstream_get(device, s);
    cudaStream_t p = v ? v->phys[strand] : NULL;
    int have = v && (strand == 0 || p);
    pthread_mutex_unlock(&dh__s.lock);
    if (!v)
        return NULL;
    if (have)
        return p;
    /* Non-blocking: strand 1 of the legacy stream must not synchronise with the others. */
    if (dh_real()->cudaStreamCreateWithFlags(&p, cudaStreamNonBlocking) != cudaSuccess)
        return NULL;
    pthread_mutex_lock(&dh__s.lock);
    int made = !v->phys[1];
    if (made)
        v->phys[1] = p;
    else {
        dh_real()->cudaStreamDestroy(p); /* another thread made it first */
        p = v->phys[1];
    }
    pthread_mutex_unlock(&dh__s.lock);
    if (made)
        dh__nvtx_name_strands(s, p);
    return p;
}


/* Lock NOT held: the framework stream's record. */
static dh_vstream_t *dh__vstream_locked_get(int device, cudaStream_t s)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_vstream_t *v = dh__vstream_get(device, s);
    pthread_mutex_unlock(&dh__s.lock);
    return v;
}

/* ---- replay ---- */

static int dh__devres(int dev)
{
    dh_devres_t *r = &dh__res[dev];
    if (r->ready)
        return 0;
    const dh_real_t *R = dh_real();
    for (int k = 0; k < 2; k++) {
        if (R->cudaEventCreateWithFlags(&r->bar[k], cudaEventDisableTiming) != cudaSuccess)
            return -1;
    }
    if (R->cudaEventCreateWithFlags(&r->order, cudaEventDisableTiming) != cudaSuccess)
        return -1;
    r->ready = 1;
    return 0;
}

/* cuBLAS handles on first use: the program may not load cuBLAS at all. Their workspaces
 * are workspace.c's. */
static int dh__blasres(int dev, int strand)
{
    dh_devres_t *r = &dh__res[dev];
    const dh_real_t *R = dh_real();
    /* DH_REAL_FN looks again for a library the program loaded after the first lookup. */
    if (!r->blas[strand]) {
        dh_real_cublasCreate_v2_t create = DH_REAL_FN(R, cublasCreate_v2);
        if (!create || create(&r->blas[strand]) != CUBLAS_STATUS_SUCCESS)
            return -1;
    }
    dh_real_cublasLtCreate_t lt_create = DH_REAL_FN(R, cublasLtCreate);
    if (!r->lt && lt_create && lt_create(&r->lt) != CUBLAS_STATUS_SUCCESS)
        return -1;
    return 0;
}

static void dh__set_device(int dev)
{
    if (dev != dh__cur_dev) {
        dh_real()->cudaSetDevice(dev);
        dh__cur_dev = dev;
    }
}

/* Makes a and b wait for each other's work so far (dev's barrier events). */
static int dh__join(int dev, cudaStream_t a, cudaStream_t b)
{
    const dh_real_t *R = dh_real();
    dh__set_device(dev);
    if (dh__devres(dev))
        return -1;
    cudaEvent_t *bar = dh__res[dev].bar;
    int rc = R->cudaEventRecord(bar[0], a) | R->cudaStreamWaitEvent(b, bar[0], 0);
    return rc | R->cudaEventRecord(bar[1], b) | R->cudaStreamWaitEvent(a, bar[1], 0);
}

/* The cross-strand barrier: joins the two physical streams of every framework stream that
 * has a strand-1 stream, whatever the last group used: a later group may use either strand
 * on any stream. */
static int dh__barrier(void)
{
    int rc = 0;
    const dh_real_t *R = dh_real();
    pthread_mutex_lock(&dh__s.lock);
    uint64_t gen = ++dh__s.join_gen;
    for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next) {
        if (!v->phys[1])
            continue;
        /* Only the directions that carry new work: a strand that issued nothing on this
         * framework stream since the last join has nothing the other must wait for. */
        int w1 = v->since[1], w0 = v->since[0] || v->fwd_seen != dh__s.fwd_epoch;
        v->since[0] = v->since[1] = 0;
        v->joined = gen;
        v->fwd_seen = dh__s.fwd_epoch; /* forwarded work so far precedes the join below */
        cudaStream_t a = v->phys[0], b = v->phys[1];
        int dev = v->key.device;
        if (!w0 && !w1)
            continue;
        pthread_mutex_unlock(&dh__s.lock);
        dh__set_device(dev);
        if (dh__devres(dev)) {
            rc = -1;
        } else {
            cudaEvent_t *bar = dh__res[dev].bar;
            if (w0)
                rc |= R->cudaEventRecord(bar[0], a) | R->cudaStreamWaitEvent(b, bar[0], 0);
            if (w1)
                rc |= R->cudaEventRecord(bar[1], b) | R->cudaStreamWaitEvent(a, bar[1], 0);
        }
        pthread_mutex_lock(&dh__s.lock);
    }
    pthread_mutex_unlock(&dh__s.lock);
    return rc;
}

/* A fence: every physical stream of every framework stream (both strands) and the hub meet:
 * the hub waits for all, then all wait for the hub. What follows on any stream starts after
 * everything issued before on all of them. */
static int dh__fence(void)
{
    const dh_real_t *R = dh_real();
    int rc = 0;
    for (int dev = 0; dev < DH_MAX_DEVICES; dev++) {
        cudaStream_t st[128];
        int n = 0;
        pthread_mutex_lock(&dh__s.lock);
        for (dh_vstream_t *v = dh__s.vstreams; v && n < 126; v = v->hh.next) {
            if (v->key.device != dev)
                continue;
            st[n++] = v->phys[0];
            if (v->phys[1])
                st[n++] = v->phys[1];
        }
        pthread_mutex_unlock(&dh__s.lock);
        if (!n)
            continue;
        dh__set_device(dev);
        dh_devres_t *r = &dh__res[dev];
        if (dh__devres(dev) ||
            (!r->hub && R->cudaStreamCreateWithFlags(&r->hub, cudaStreamNonBlocking) != cudaSuccess))
            return -1;
        for (int i = 0; i < n; i++)
            rc |= R->cudaEventRecord(r->order, st[i]) | R->cudaStreamWaitEvent(r->hub, r->order, 0);
        rc |= R->cudaEventRecord(r->bar[0], r->hub);
        for (int i = 0; i < n; i++)
            rc |= R->cudaStreamWaitEvent(st[i], r->bar[0], 0);
    }
    return rc;
}

/* A strand-1 stream that has not joined since the last barrier or drain first waits for
 * the work on its framework stream: a new strand-1 stream, or one whose framework stream
 * received calls the framework thread forwarded itself after a drain (those run on the
 * framework stream in program order, and later strand-1 work must follow them). */
static int dh__join_new(int dev, cudaStream_t s)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_vstream_t *v = dh__vstream_get(dev, s);
    int fresh = v && v->phys[1] && (v->joined != dh__s.join_gen || v->fwd_seen != dh__s.fwd_epoch);
    if (fresh) {
        v->joined = dh__s.join_gen;
        v->fwd_seen = dh__s.fwd_epoch;
    }
    cudaStream_t a = v ? v->phys[0] : NULL, b = v ? v->phys[1] : NULL;
    pthread_mutex_unlock(&dh__s.lock);
    return fresh ? dh__join(dev, a, b) : 0;
}

/* Lock NOT held. Whether framework stream s synchronises with the legacy stream: the
 * legacy stream itself and blocking streams do (the per-thread default stream is one). */
static int dh__blocking(dh_vstream_t *v)
{
    if (dh__is_legacy_stream(v->key.stream))
        return 1;
    pthread_mutex_lock(&dh__s.lock);
    int b = v->blocking;
    pthread_mutex_unlock(&dh__s.lock);
    if (b < 0) {
        unsigned flags = 0;
        b = dh_real()->cudaStreamGetFlags(v->key.stream, &flags) == cudaSuccess &&
            !(flags & cudaStreamNonBlocking);
        pthread_mutex_lock(&dh__s.lock);
        v->blocking = b;
        pthread_mutex_unlock(&dh__s.lock);
    }
    return b;
}

/* Strand 1 runs on non-blocking streams the shim made, so the implicit synchronisation of
 * the legacy default stream with blocking streams, which strand 0 gets from CUDA itself,
 * is made explicit: a strand-1 op of the legacy stream waits for strand 1's latest work on
 * every blocking stream, and a strand-1 op of a blocking stream for strand 1's latest
 * legacy work. */
static int dh__legacy_order(const dh_op_t *op, cudaStream_t target)
{
    const dh_real_t *R = dh_real();
    cudaStream_t from[64];
    int n = 0, legacy = dh__is_legacy_stream(op->stream);
    pthread_mutex_lock(&dh__s.lock);
    dh_vstream_t *vs[64];
    int nv = 0;
    for (dh_vstream_t *v = dh__s.vstreams; v && nv < 64; v = v->hh.next)
        if (v->key.device == op->device && v->phys[1] && v->phys[1] != target &&
            (legacy || dh__is_legacy_stream(v->key.stream)))
            vs[nv++] = v;
    pthread_mutex_unlock(&dh__s.lock);
    if (!legacy && !dh__blocking(dh__vstream_locked_get(op->device, op->stream)))
        return 0;
    for (int i = 0; i < nv; i++)
        if (dh__blocking(vs[i]))
            from[n++] = vs[i]->phys[1];
    int rc = 0;
    for (int i = 0; i < n; i++) {
        rc |= R->cudaEventRecord(dh__res[op->device].order, from[i]);
        rc |= R->cudaStreamWaitEvent(target, dh__res[op->device].order, 0);
    }
    return rc;
}

/* A strand-1 BLAS op without a workspace of its own (workspace.c): on the framework's
 * stream with the framework's workspace, after everything issued on both strands of its
 * framework stream, and before anything issued after it on either. */
static int dh__replay_after_s0(dh_op_t *op, dh_replay_ctx_t *ctx)
{
    cudaStream_t own = ctx->stream;
    if (dh__join(op->device, op->stream, own))
        return cudaErrorUnknown;
    ctx->stream = op->stream;
    int rc = dh_op_replay(op, ctx);
    if (dh__join(op->device, op->stream, own) && rc == 0)
        rc = cudaErrorUnknown;
    return rc;
}

static int dh__replay_raw(dh_op_t *op, int strand)
{
    const dh_real_t *R = dh_real();
    dh__set_device(op->device);
    dh_replay_ctx_t ctx = {.strand = strand, .device = op->device};
    ctx.stream = dh__physical(op->device, op->stream, strand);
    if (strand == 1 && !ctx.stream)
        return cudaErrorMemoryAllocation;
    if (strand == 1 && (dh__devres(op->device) || dh__join_new(op->device, op->stream) ||
                        dh__legacy_order(op, ctx.stream)))
        return cudaErrorUnknown;
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (k != NULL && (k->flags & DH_OPK_BLAS)) {
        if (dh__blasres(op->device, strand))
            return CUBLAS_STATUS_NOT_INITIALIZED;
        ctx.blas = dh__res[op->device].blas[strand];
        ctx.blaslt = dh__res[op->device].lt;
        int rc = dh__ws_bind(op, strand, &ctx) ? dh__replay_after_s0(op, &ctx)
                                                : dh_op_replay(op, &ctx);
        dh__ws_done();
        return rc;
    } else if (op->kind == DH_OP_EVENT_RECORD || op->kind == DH_OP_EVENT_WAIT) {
        dh_evinst_t *i = op->shim_event;
        if (!i->ev && R->cudaEventCreateWithFlags(&i->ev, cudaEventDisableTiming) != cudaSuccess)
            return cudaErrorMemoryAllocation;
        ctx.record_event = ctx.wait_event = i->ev;
    }
    return dh_op_replay(op, &ctx);
}

/* Replays op; a failure comes back as the cudaError_t the program is told (read on this
 * thread right after the replay: a cuBLAS failure as the CUDA error the library left). */
static int dh__replay_one(dh_op_t *op, int strand)
{
    int rc = dh__replay_raw(op, strand);
    return rc ? dh_op_status_to_cuda(op, rc) : 0;
}

/* Profile mode brackets every stream op with two events (profile_rec.h). */
static int dh__replay_timed(dh_op_t *op, int strand)
{
    const dh_op_kind_ops_t *k = dh_op_kind_ops(op->kind);
    if (!op->prof || k == NULL || !(k->flags & DH_OPK_TIMED))
        return dh__replay_one(op, strand);
    cudaStream_t s = dh__physical(op->device, op->stream, strand);
    dh__set_device(op->device);
    dh_prof_bracket(op->prof, s, 1);
    int rc = dh__replay_one(op, strand);
    dh_prof_bracket(op->prof, s, 0);
    return rc;
}

/* Lock held. Bookkeeping once op has been replayed with status rc. */
static void dh__retire(dh_op_t *op, int rc)
{
    if (op->kind == DH_OP_EVENT_RECORD) {
        dh_evinst_t *i = op->shim_event;
        i->recorded = 1;
        i->batched = 0;
        dh__event_recorded(op->event, i);
        dh__inst_unref(i);
    } else if (op->kind == DH_OP_EVENT_WAIT) {
        dh__inst_unref(op->shim_event);
    } else if (op->kind == DH_OP_FREE_ASYNC) {
        dh__s.held_free_bytes -= op->free_bytes;
    }
    if (rc) {
        dh__s.stats.replay_errors++;
        dh__sched_error_note(rc, dh_op_kind_name(op->kind));
        DH_WARN_ONCE(SCHED, "a deferred %s failed when replayed (CUDA error %d); the next "
                     "call that reports asynchronous errors returns it",
                     dh_op_kind_name(op->kind), rc);
    }
    dh__s.held--;
    dh_op_free(op);
}

/* Lock held. Smallest seq still held anywhere (next_seq if none). */
static uint64_t dh__low_water(void)
{
    uint64_t low = dh__s.in_head ? dh__s.in_head->seq : dh__s.next_seq;
    for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next)
        for (int k = 0; k < 2; k++)
            if (v->head[k] && v->head[k]->seq < low)
                low = v->head[k]->seq;
    return low;
}

/* Replays a batch with the lock released; retires each op as it goes. */
static void dh__run(dh_batch_t *b)
{
    /* Ops are retired (and their streams marked as used) under one lock per stretch between
     * barriers, not one per op: the framework thread takes the same lock for every capture.
     * A barrier reads the marks, so a stretch ends before each. */
    size_t done = 0;
    int mode = dh__s.mode;
    pthread_mutex_unlock(&dh__s.lock);
    dh__nvtx_mode(mode, dh_config()->mode == DH_MODE_AUTO);
    for (size_t i = 0; i <= b->n; i++) {
        dh_item_t *it = i < b->n ? &b->items[i] : NULL;
        if ((!it || !it->op) && done < i) {
            pthread_mutex_lock(&dh__s.lock);
            for (; done < i; done++) {
                const dh_item_t *d = &b->items[done];
                dh_vstream_t *v = dh__vstream_get(d->op->device, d->op->stream);
                if (v)
                    v->since[d->strand ? 1 : 0] = 1;
                dh__retire(d->op, d->rc);
            }
            int doomed = dh__s.ndoomed > 0;
            pthread_mutex_unlock(&dh__s.lock);
            if (doomed)
                dh__destroy_doomed();
        }
        if (!it)
            break;
        dh__nvtx_item(b, i);
        if (it->op) {
            it->rc = dh__replay_timed(it->op, it->strand);
            continue;
        }
        done = i + 1;
        int rc = it->strand == DH_FENCE ? dh__fence() : dh__barrier();
        if (rc)
            DH_WARN_ONCE(SCHED, "a cross-strand barrier failed (status %d)", rc);
    }
    dh__nvtx_batch_end();
    pthread_mutex_lock(&dh__s.lock);
    b->n = 0;
}

/* Lock held. Moves submitted ops to their framework streams. */
static void dh__intake(void)
{
    while (dh__s.in_head) {
        dh_op_t *op = dh__s.in_head;
        dh__s.in_head = op->next;
        if (!dh__s.in_head)
            dh__s.in_tail = NULL;
        op->next = NULL;
        dh_vstream_t *v = dh__vstream_get(op->device, op->stream);
        if (!v) {
            /* Out of memory: replay at once, in order (passthrough for this op). */
            pthread_mutex_unlock(&dh__s.lock);
            int rc = dh__replay_one(op, 0);
            pthread_mutex_lock(&dh__s.lock);
            dh__retire(op, rc);
            continue;
        }
        int k = op->strand == 1;
        if (v->tail[k])
            v->tail[k]->next = op;
        else
            v->head[k] = op;
        v->tail[k] = op;
    }
}

static void dh__wait_work(void)
{
    /* Plan mode lets ops out early without waking this thread for each (sched.c): it looks
     * again after DH_LET_OUT_POLL_MS at the latest, so none waits longer than that. */
    long ms = dh__s.kick_ms ? DH_KICK_MS : dh__mode()->polls_let_out ? DH_LET_OUT_POLL_MS : 0;
    if (!ms) {
        pthread_cond_wait(&dh__s.work, &dh__s.lock);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&dh__s.work, &dh__s.lock, &ts);
}

void *dh__dispatch_main(void *arg)
{
    (void)arg;
    dh__sched_mark_dispatcher();
    dh__nvtx_thread_start();
    dh__rng = (uint64_t)dh_config()->seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    dh_batch_t b = {0};
    const int jitter_us = (int)dh_config()->test_dispatch_jitter;
    uint64_t jrng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
    pthread_mutex_lock(&dh__s.lock);
    for (;;) {
        if (jitter_us > 0) {
            uint64_t us = dh__xorshift(&jrng) % (uint64_t)jitter_us;
            pthread_mutex_unlock(&dh__s.lock);
            usleep((useconds_t)us);
            pthread_mutex_lock(&dh__s.lock);
        }
        dh__intake();
        int kicked = dh__s.kick_ms && dh__wall_ms() - dh__s.kick_ms >= DH_KICK_MS;
        /* In plan mode a polled record is issued early only once the program has stopped
         * submitting for a long while (it must be waiting for that record): an early flush
         * at a point another rank does not flush at would change the order of one
         * communicator's calls on this rank only. */
        if (kicked && dh__mode()->ranks_agree &&
            dh__wall_ms() - dh__s.last_submit_ms < DH_KICK_STALL_MS)
            kicked = 0, dh__s.kick_ms = dh__wall_ms() - DH_KICK_MS;
        if (kicked || dh__s.stop)
            dh__flush_to(dh__s.next_seq);
        int flush = 0;
        uint64_t served = 0;
        for (unsigned k = 0; k < dh__s.cut_n; k++) {
            const struct dh_cut *c = &dh__s.cuts[(dh__s.cut_head + k) % dh__s.cut_cap];
            if (c->gend == UINT64_MAX || c->seq) {
                flush = 1;
                served = c->lim > served ? c->lim : served;
            }
        }
        dh_mode_order_t order = dh__mode()->order;
        if (order == DH_ORDER_GROUPS) {
            /* Each flush in the order the program asked for them (sched_int.h), then the
             * complete groups: what goes out, and in what order, depends on the program's
             * order alone, never on how far behind this thread is. */
            for (; dh__s.cut_n > 0; dh__s.cut_n--, dh__s.cut_head = (dh__s.cut_head + 1) % dh__s.cut_cap) {
                const struct dh_cut *c = &dh__s.cuts[dh__s.cut_head];
                dh__order_cut(&b, c->lim, c->gend);
                /* A round the ranks decided no: what was not agreed, in program order. */
                if (c->seq && dh__order_seq(&b, UINT64_MAX, c->lim))
                    dh__s.stats.order_fallbacks++;
            }
            dh__order_cut(&b, UINT64_MAX, dh__s.release);
        } else {
            dh__s.cut_n = 0;
            /* Passthrough here: auto mode's last ops (sched.c dh__sched_passthrough). */
            if (order == DH_ORDER_PROGRAM) {
                dh__order_seq(&b, UINT64_MAX, UINT64_MAX);
            } else if (flush && dh__order_stress(&b, UINT64_MAX)) {
                DH_WARN_ONCE(SCHED, "held operations could not be ordered; issuing them in "
                             "program order");
                dh__s.stats.order_fallbacks++;
                dh__order_seq(&b, UINT64_MAX, UINT64_MAX);
            }
        }
        /* A drain is followed by a synchronising call on a framework stream (or event):
         * strand 1's work must be behind what that call waits for. */
        if (flush && dh__dirty[1] && dh__push(&b, NULL, 0) == 0) {
            dh__s.stats.cross_strand_barriers++;
            dh__dirty[0] = dh__dirty[1] = 0;
        }
        if (kicked) {
            dh__s.kick_ms = 0;
            dh__s.stats.kick_flushes++;
        }
        if (b.n)
            dh__run(&b);
        dh__s.low_water = dh__low_water();
        if (served > dh__s.flush_served)
            dh__s.flush_served = served;
        pthread_cond_broadcast(&dh__s.done);
        if (dh__s.stop && !dh__s.in_head && dh__s.low_water >= dh__s.next_seq)
            break;
        if (!dh__s.in_head && dh__s.cut_n == 0 &&
            (dh__min_group(UINT64_MAX) >= dh__s.release || dh__mode()->order != DH_ORDER_GROUPS))
            dh__wait_work();
    }
    pthread_mutex_unlock(&dh__s.lock);
    dh__nvtx_thread_stop();
    free(b.items);
    return NULL;
}
