/*
 * sched.c: the framework side of the scheduler: submission, drains, flushes and bounded lag,
 * and the lifecycle; the event table is in sched_event.c, what an op must follow in deps.c,
 * the dispatcher thread in dispatch.c and order.c. What differs between modes is asked of
 * the mode's table (sched_mode.h; the tables are in scheduler/modes/).
 *
 * Program order is the order of dh_sched_submit calls (seq). A drain waits until every op
 * submitted before it has been replayed (the low-water mark passed its seq), which is what
 * makes every synchronising call see the work it depends on (invariant 4).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "deps.h"
#include "mempool.h"
#include "memtab.h"
#include "real.h"
#include "sched_int.h"

dh_sched_state_t dh__s = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .reorder_allowed = 1,
    .last_thread = -1,
};

static __thread int dh__tls_thread = -1;
static __thread int64_t dh__tls_alloc; /* stream-ordered bytes allocated since the last op */
/* ... and their sizes, for profiles (the pool reuses by exact size); past DH__TLS_SIZES the
 * last one holds the rest. */
#define DH__TLS_SIZES 64
static __thread int64_t dh__tls_sizes[DH__TLS_SIZES];
static __thread size_t dh__tls_nsizes;
static __thread int dh__tls_is_dispatcher;
static atomic_int dh__thread_count;
static atomic_int dh__capturing;
static pthread_once_t dh__exit_once = PTHREAD_ONCE_INIT;

static void dh__update_deferring(void);

uint64_t dh__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int dh_sched_deferring(void)
{
    return atomic_load_explicit(&dh__s.deferring, memory_order_relaxed) && !dh__tls_is_dispatcher;
}

void dh__sched_mark_dispatcher(void);
void dh__sched_mark_dispatcher(void) { dh__tls_is_dispatcher = 1; }

int dh__sched_thread_id(void)
{
    if (dh__tls_thread < 0)
        dh__tls_thread = atomic_fetch_add(&dh__thread_count, 1);
    return dh__tls_thread;
}

/* ---- strand assignment (lock held) ----
 * The mode's table assigns strands and groups (strands: by thread turns; plan: the strand
 * tracker). Without one, or while reordering is not allowed: one strand, one group, in
 * program order. */
static void dh__assign_strand(const dh_mode_ops_t *m, dh_op_t *op, const dh_op_desc_t *d,
                              int *flush)
{
    *flush = 0;
    op->lgroup = -1;
    if (m->assign && dh__s.reorder_allowed) {
        m->assign(op, d, flush);
        return;
    }
    op->strand = 0;
    op->group = 0;
    dh__s.release = 1;
}

const char *dh__plan_order(int lgroup)
{
    const dh_mode_ops_t *m = dh__mode();
    return m->group_order ? m->group_order(lgroup) : NULL;
}

/* Small ordinals of framework streams, in order of first use (profiles name streams so). */
typedef struct dh__sord {
    cudaStream_t key;
    int ord;
    UT_hash_handle hh;
} dh__sord_t;
static dh__sord_t *dh__sords; /* lock */
static int dh__nsords = 1;    /* lock; 0 is the legacy stream */

int dh__stream_ordinal(cudaStream_t s)
{
    if (s == NULL || s == cudaStreamLegacy)
        return 0;
    dh__sord_t *e;
    HASH_FIND_PTR(dh__sords, &s, e);
    if (!e && (e = malloc(sizeof *e))) {
        e->key = s;
        e->ord = dh__nsords++;
        HASH_ADD_PTR(dh__sords, key, e);
    }
    return e ? e->ord : -1;
}

static int dh__predict_strand_locked(void);
static void dh__unc_taken(uint64_t g, uint64_t freed);

/* ---- stream-ordered allocations (memtab.h) ---- */

void dh_sched_alloc_note(void *p, size_t size)
{
    if (!p)
        return;
    int strand = 0;
    if (dh__mode()->two_strands) {
        pthread_mutex_lock(&dh__s.lock);
        strand = dh__predict_strand_locked();
        pthread_mutex_unlock(&dh__s.lock);
    }
    dh_memtab_add((uintptr_t)p, size, dh_sched_stamp(), strand);
    dh__tls_alloc += (int64_t)size;
    if (dh__tls_nsizes < DH__TLS_SIZES)
        dh__tls_sizes[dh__tls_nsizes++] = (int64_t)size;
    else
        dh__tls_sizes[DH__TLS_SIZES - 1] += (int64_t)size;
}

uint64_t dh_sched_stamp(void) { return atomic_load_explicit(&dh__s.stamp, memory_order_relaxed) + 1; }

size_t dh_sched_alloc_take(void *p) { return dh_memtab_remove((uintptr_t)p); }

/* Whether captured frees park their blocks for reuse (mempool.h): the deferring modes that
 * reorder (profile issues every op at once and records the program's own allocations). */
static int dh__pooling(void)
{
    return dh__mode()->pools && dh__s.reorder_allowed && dh_config()->share_mem;
}

void *dh_sched_alloc_reuse(size_t size, cudaStream_t s)
{
    if (!size || !dh__mode()->pools)
        return NULL;
    dh_mpool_where_t w = {0, s, 0, 0, 0};
    dh_real()->cudaGetDevice(&w.device);
    dh_mpool_policy(w.device);
    if (!dh__pooling())
        return NULL;
    pthread_mutex_lock(&dh__s.lock);
    const dh_mode_ops_t *m = dh__mode();
    if (!m->predict_where || !m->predict_where(&w.strand, &w.group))
        w.strand = dh__predict_strand_locked();
    else
        w.group_known = 1;
    uint64_t freed = 0, freed_group = 0;
    void *p = dh_mpool_take(size, &w, &freed, &freed_group);
    dh__s.held_free_bytes -= freed;
    dh__unc_taken(freed_group, freed);
    if (!p && m->fresh)
        m->fresh(size, dh__tls_alloc); /* plan: the device follows the program-order count */
    pthread_mutex_unlock(&dh__s.lock);
    return p;
}

int dh_sched_mirroring(void) { return dh__mode()->defers; }

/* Lock held: the strand the program's next op is expected on (0 outside two strands). */
static int dh__predict_strand_locked(void)
{
    const dh_mode_ops_t *m = dh__mode();
    return m->predict_strand ? m->predict_strand() : 0;
}

cudaStream_t dh_sched_alloc_stream(cudaStream_t s)
{
    if (!dh__mode()->two_strands)
        return NULL;
    pthread_mutex_lock(&dh__s.lock);
    int strand = dh__predict_strand_locked();
    pthread_mutex_unlock(&dh__s.lock);
    if (strand == 0)
        return NULL;
    int dev = 0;
    dh_real()->cudaGetDevice(&dev);
    return dh__physical(dev, s, 1);
}

static void dh__atexit(void) { dh_sched_fini(); }
static void dh__register_exit(void) { atexit(dh__atexit); }

/* Framework thread, no lock: what the mode needs to know about op before it is queued.
 * The footprint is taken now, while the allocation table still describes the memory the
 * op was given (a later free changes it). */
static void dh__prepare(dh_op_t *op, dh_op_desc_t *d)
{
    const dh_mode_ops_t *m = dh__mode();
    dh__ws_note(op);
    if (m->describes)
        dh_op_describe(op, d);
    if (!m->footprints)
        return;
    dh_op_access_t acc[DH_OP_ACCESS_MAX];
    int n = dh_op_footprint(op, acc, DH_OP_ACCESS_MAX);
    op->nacc = n;
    if (n > 0 && (op->acc = malloc((size_t)n * sizeof *acc)))
        memcpy(op->acc, acc, (size_t)n * sizeof *acc);
    else if (n > 0)
        op->nacc = -1; /* no memory to keep it: conflicts with everything, still safe */
}

/* ---- flushes and the work no flush covers (lock held) ---- */

#define DH__LET_OUT_WAKE 16

struct dh_unc {
    uint64_t ops, bytes;
};

static void dh__cut(uint64_t lim, uint64_t gend, int seq)
{
    static struct dh_cut first[64]; /* the ring starts here, so a flush is never lost */
    if (dh__s.cuts == NULL) {
        dh__s.cuts = first;
        dh__s.cut_cap = 64;
    }
    if (dh__s.cut_n == dh__s.cut_cap) {
        /* Grow the ring (a merge instead would depend on how far behind the dispatcher is). */
        unsigned cap = 2 * dh__s.cut_cap;
        struct dh_cut *c = malloc(cap * sizeof *c);
        if (c) {
            for (unsigned k = 0; k < dh__s.cut_n; k++)
                c[k] = dh__s.cuts[(dh__s.cut_head + k) % dh__s.cut_cap];
            if (dh__s.cuts != first)
                free(dh__s.cuts);
            dh__s.cuts = c;
            dh__s.cut_cap = cap;
            dh__s.cut_head = 0;
        }
    }
    struct dh_cut *last =
        dh__s.cut_n ? &dh__s.cuts[(dh__s.cut_head + dh__s.cut_n - 1) % dh__s.cut_cap] : NULL;
    /* Two let-outs in a row of one group are one (the group's ops come in its order either
     * way; two flushes are not: each issues its ops group by group). With no memory to
     * queue it, the newest absorbs it: a flush a little earlier than asked for here. */
    if (last && ((last->gend == gend && gend != UINT64_MAX && !seq && !last->seq) ||
                 dh__s.cut_n == dh__s.cut_cap)) {
        last->lim = lim > last->lim ? lim : last->lim;
        last->gend = seq ? gend : gend > last->gend ? gend : last->gend;
        last->seq |= seq;
        return;
    }
    dh__s.cuts[(dh__s.cut_head + dh__s.cut_n++) % dh__s.cut_cap] = (struct dh_cut){lim, gend, seq};
}

void dh__let_out(uint64_t lim, uint64_t gend) { dh__cut(lim, gend, 0); }

static void dh__flush_cut(uint64_t lim, uint64_t gend, int seq)
{
    if (lim <= dh__s.flush_upto)
        return;
    dh__s.flush_upto = lim;
    dh__cut(lim, gend, seq);
    /* Everything submitted is covered now. */
    if (dh__s.unc)
        memset(dh__s.unc, 0, dh__s.unc_cap * sizeof *dh__s.unc);
    dh__s.unc_ops = dh__s.unc_bytes = 0;
}

void dh__flush_to(uint64_t lim) { dh__flush_cut(lim, UINT64_MAX, 0); }

void dh__flush_seq(uint64_t lim, uint64_t gend)
{
    if (lim <= dh__s.flush_upto) {
        /* Already covered by a flush in the plan's order, which the dispatcher may not have
         * served yet: this one, after it, changes nothing. */
        return;
    }
    dh__flush_cut(lim, gend, 1);
}

/* The groups the dispatcher may issue without a flush: below the release mark in the
 * two-strand modes, none in stress. */
static uint64_t dh__released(void) { return dh__mode()->two_strands ? dh__s.release : 0; }

/* A ring indexed by group: entry g % unc_cap holds group g, for g in [unc_base, +cap). */

/* Group g's ops so far are covered (released, or let out early). */
static void dh__unc_cover_group(uint64_t g)
{
    if (g < dh__s.unc_base || g - dh__s.unc_base >= dh__s.unc_cap)
        return;
    struct dh_unc *u = &dh__s.unc[g % dh__s.unc_cap];
    dh__s.unc_ops -= u->ops;
    dh__s.unc_bytes -= u->bytes;
    u->ops = u->bytes = 0;
}

/* Groups below r are covered (released). */
static void dh__unc_cover_below(uint64_t r)
{
    uint64_t end = r < dh__s.unc_base + dh__s.unc_cap ? r : dh__s.unc_base + dh__s.unc_cap;
    for (uint64_t g = dh__s.unc_base; g < end; g++)
        dh__unc_cover_group(g);
    if (r > dh__s.unc_base)
        dh__s.unc_base = r;
}

/* Lock held: a block of group g's free was taken back by an allocation: pairing no longer
 * holds its bytes (freed of them). */
static void dh__unc_taken(uint64_t g, uint64_t freed)
{
    if (!freed || g < dh__s.unc_base || g - dh__s.unc_base >= dh__s.unc_cap)
        return;
    struct dh_unc *u = &dh__s.unc[g % dh__s.unc_cap];
    uint64_t b = freed < u->bytes ? freed : u->bytes;
    u->bytes -= b;
    dh__s.unc_bytes -= b;
}

static void dh__unc_add(const dh_op_t *op)
{
    uint64_t bytes = op->kind == DH_OP_FREE_ASYNC ? op->free_bytes : 0;
    if (op->group < dh__s.unc_base)
        return;
    dh__s.unc_ops++;
    dh__s.unc_bytes += bytes;
    uint64_t i = op->group - dh__s.unc_base;
    if (i >= dh__s.unc_cap && i < (1u << 16)) {
        size_t cap = dh__s.unc_cap ? dh__s.unc_cap : 64;
        while (cap <= i)
            cap *= 2;
        struct dh_unc *u = calloc(cap, sizeof *u);
        if (u) {
            for (uint64_t g = dh__s.unc_base; g < dh__s.unc_base + dh__s.unc_cap; g++)
                u[g % cap] = dh__s.unc[g % dh__s.unc_cap];
            free(dh__s.unc);
            dh__s.unc = u;
            dh__s.unc_cap = cap;
        }
    }
    if (i < dh__s.unc_cap) {
        dh__s.unc[op->group % dh__s.unc_cap].ops++;
        dh__s.unc[op->group % dh__s.unc_cap].bytes += bytes;
    }
    /* else: counted until the next flush, which comes sooner for it */
}

int dh_sched_submit(dh_op_t *op)
{
    /* Registered after the device library initialised (it has, since work is being
     * issued), so our exit drain runs before the device's own exit handlers. */
    pthread_once(&dh__exit_once, dh__register_exit);
    op->thread = dh__sched_thread_id();
    dh_op_desc_t d;
    dh__prepare(op, &d);
    const dh_mode_ops_t *c = dh__s.ctl, *m;
    if (c && c->submit)
        c->submit(op, &d); /* auto: may attach the plan (plan mode from this op on), or go
                              passthrough (this op goes out at once) */
    m = dh__mode();
    if (m->submit)
        m->submit(op, &d); /* plan: the ranks' vote on a pair this op completes */
    int64_t mem = dh__tls_alloc;
    size_t nsizes = dh__tls_nsizes;
    dh__tls_alloc = 0;
    dh__tls_nsizes = 0;
    pthread_mutex_lock(&dh__s.lock);
    int bound = dh__sched_bind_event(op);
    if (bound != 0) {
        pthread_mutex_unlock(&dh__s.lock);
        if (bound == -1) {
            dh_op_free(op);
            return 0;
        }
        dh__fallback("out of memory for an event record");
        dh_op_free(op); /* unreachable in practice; the fallback drained */
        return 0;
    }
    int flush = 0;
    uint64_t release0 = dh__s.release;
    m = dh__mode(); /* the mode changes under the lock only */
    dh__assign_strand(m, op, &d, &flush);
    if (m->iteration && m->iteration())
        dh_deps_s0_reset();
    if (op->strand == 1) {
        int64_t need = dh_deps_group(op);
        /* A group below the release mark may already be issued on this rank and not yet on
         * another: joining it would order this op differently on the two. The first group
         * not released yet is held on every rank alike (the mark follows program order). */
        if (need >= (int64_t)op->group && need < (int64_t)dh__s.release)
            need = (int64_t)dh__s.release;
        if (need >= (int64_t)op->group) {
            DH_DEBUG(SCHED, "a strand-1 %s (%s) depends on held strand-0 work: group %llu -> %lld",
                     dh_op_kind_name(op->kind), d.name, (unsigned long long)op->group,
                     (long long)need);
            dh__s.stats.dependency_moves++;
            op->group = (uint64_t)need;
            op->after0 = 1;
            if (m->moved)
                m->moved((uint64_t)need);
        }
    }
    /* A group of one strand under way with every group before it complete goes out op by
     * op (tracker.h): nothing of the other strand can join it, and holding it would keep
     * the device waiting for the program to finish the group. */
    int let_out = flush == 2 && !op->after0;
    if (flush == 2)
        flush = 0;
    if (op->kind == DH_OP_EVENT_RECORD) {
        dh_evinst_t *i = op->shim_event;
        i->rec_strand = op->strand;
        i->rec_group = op->group;
    }
    if (op->strand == 0 && m->two_strands)
        dh_deps_s0_add(op);
    if (op->kind == DH_OP_FREE_ASYNC && op->free_bytes && dh__pooling())
        dh_mpool_park(op, dh_op_free_ptr(op), op->free_bytes);
    if (m->queue) {
        dh_mode_alloc_t alloc = {mem, dh__tls_sizes, nsizes};
        m->queue(op, &d, &alloc); /* profile: the op's record */
    }
    op->seq = dh__s.next_seq++;
    atomic_store_explicit(&dh__s.stamp, dh__s.next_seq, memory_order_relaxed);
    op->next = NULL;
    if (dh__s.in_tail)
        dh__s.in_tail->next = op;
    else
        dh__s.in_head = op;
    dh__s.in_tail = op;
    dh__s.held++;
    dh__s.last_submit_ms = dh__wall_ms();
    dh__s.stats.ops[op->kind]++;
    if (dh__s.held > dh__s.stats.max_queue_depth)
        dh__s.stats.max_queue_depth = dh__s.held;
    if (op->kind == DH_OP_FREE_ASYNC) {
        dh__s.held_free_bytes += op->free_bytes;
        if (dh__s.held_free_bytes > dh__s.stats.max_deferred_bytes)
            dh__s.stats.max_deferred_bytes = dh__s.held_free_bytes;
    }
    dh__unc_cover_below(dh__released());
    dh__unc_add(op);
    if (let_out)
        dh__unc_cover_group(op->group);
    if (dh__s.unc_ops > dh__s.stats.max_held_back)
        dh__s.stats.max_held_back = dh__s.unc_ops;
    /* Bounded lag: past the limits, what is held by design is issued without pairing. The
     * count is of work no flush or release covers, which program order alone decides:
     * counting what the dispatcher has not replayed yet would flush at a point that
     * depends on its speed, and on another op on each rank. */
    const dh_config_t *cfg = dh_config();
    uint64_t lim_ops = (uint64_t)cfg->max_queued_ops;
    uint64_t lim_bytes = (uint64_t)cfg->max_deferred_free_bytes;
    if (m->limits)
        m->limits(&lim_ops, &lim_bytes); /* what the mode holds by design is not lag */
    if (m->over_memory && m->over_memory(op, mem)) {
        dh__s.stats.mem_bound_vetoes++;
        flush = 1;
    }
    if (dh__s.unc_ops > lim_ops || dh__s.unc_bytes > lim_bytes) {
        dh__s.stats.drains[DH_DRAIN_LAG]++;
        if (m->lag)
            m->lag();
        flush = 1;
    }
    if (m->seq_due && m->seq_due())
        dh__flush_seq(dh__s.next_seq, release0);
    else if (flush || m->issues_each)
        dh__flush_to(dh__s.next_seq);
    else if (let_out)
        dh__let_out(dh__s.next_seq, op->group + 1);
    /* The dispatcher holds ops until a drain (stress) or until a group is complete (strands,
     * plan): waking it for every op would cost a futex call per capture for nothing. Ops let
     * out early wake it every DH__LET_OUT_WAKE of them (a query of one still queued kicks it,
     * a synchronisation drains). */
    if (let_out)
        dh__s.let_out_unwoken++;
    if (m->queued)
        m->queued(); /* plan: a "no" the tracker asked for, before anything waits */
    int wake = dh__s.flush_upto > dh__s.low_water || dh__s.release > release0 ||
               dh__s.let_out_unwoken >= DH__LET_OUT_WAKE;
    if (wake) {
        dh__s.let_out_unwoken = 0;
        pthread_cond_signal(&dh__s.work);
    }
    /* Past the limits the framework thread also waits until the dispatcher is back under
     * them: issuing without pairing alone does not bound what a faster producer queues.
     * And frees the dispatcher may issue but has not yet keep memory from reuse for nothing
     * but its lag: past DHELIX_MAX_UNISSUED_FREE_BYTES the program waits for it too. A wait
     * changes when the program gets on, never the order of the work. */
    while (dh__s.started && !dh__s.stop &&
           (dh__s.held > lim_ops || dh__s.held_free_bytes > lim_bytes ||
            dh__s.held_free_bytes > dh__s.unc_bytes + (uint64_t)cfg->max_unissued_free_bytes) &&
           dh__s.low_water < dh__s.next_seq) {
        dh__s.stats.lag_waits++;
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    }
    /* Auto mode went passthrough while another framework thread captured this op (the
     * calls that thread forwards from now on must not overtake it): it goes out now. */
    while (!dh__mode()->defers && dh__s.started && !dh__s.stop &&
           dh__s.low_water < dh__s.next_seq)
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    m = dh__mode();
    pthread_mutex_unlock(&dh__s.lock);
    if (m->submitted)
        m->submitted(); /* plan: a pending desync warning, with its call site */
    return 0;
}

uint64_t dh__sched_passthrough(void)
{
    pthread_mutex_lock(&dh__s.lock);
    /* Until nothing is queued: ops another thread submits during a wait go out too. */
    while (dh__s.started && dh__s.low_water < dh__s.next_seq) {
        uint64_t target = dh__s.next_seq;
        const dh_mode_ops_t *m = dh__mode();
        if (m->seq_due && m->seq_due())
            dh__flush_seq(target, dh__s.release);
        else
            dh__flush_to(target);
        pthread_cond_signal(&dh__s.work);
        while (dh__s.started && dh__s.low_water < target)
            pthread_cond_wait(&dh__s.done, &dh__s.lock);
    }
    dh__s.mode = DH_MODE_PASSTHROUGH;
    dh__update_deferring();
    uint64_t n = 0;
    for (int k = 0; k < DH_OP_KIND_COUNT; k++)
        n += dh__s.stats.ops[k];
    pthread_mutex_unlock(&dh__s.lock);
    return n;
}

void dh_sched_forwarded(void)
{
    pthread_mutex_lock(&dh__s.lock);
    dh__s.fwd_epoch++;
    pthread_mutex_unlock(&dh__s.lock);
}

void dh_sched_stream_forget(cudaStream_t s)
{
    dh_op_streams_changed();
    int dev = 0;
    dh_real()->cudaGetDevice(&dev);
    pthread_mutex_lock(&dh__s.lock);
    dh_vstream_t probe, *v;
    memset(&probe.key, 0, sizeof probe.key);
    probe.key.device = dev;
    probe.key.stream = s;
    HASH_FIND(hh, dh__s.vstreams, &probe.key, sizeof probe.key, v);
    cudaStream_t extra = NULL;
    if (v && !v->head[0] && !v->head[1]) {
        HASH_DEL(dh__s.vstreams, v);
        extra = v->phys[1];
        free(v);
    }
    pthread_mutex_unlock(&dh__s.lock);
    if (extra)
        dh_real()->cudaStreamDestroy(extra);
}

/* Drains the program asked for at a fixed point of its own order (a host synchronisation
 * or a call the shim forwards), as opposed to timing-dependent ones (queries polled by a
 * watchdog, bounded lag, exit). Profiles and plans cut iterations at these. */
static int dh__program_sync(dh_drain_reason_t why)
{
    switch (why) {
    case DH_DRAIN_STREAM_SYNC: case DH_DRAIN_DEVICE_SYNC: case DH_DRAIN_EVENT_SYNC:
    case DH_DRAIN_EVENT_ELAPSED: case DH_DRAIN_BLOCKING_COPY: case DH_DRAIN_FREE:
    case DH_DRAIN_UNCAPTURABLE:
        return 1;
    default:
        return 0;
    }
}

void dh_sched_drain(dh_drain_reason_t why)
{
    pthread_mutex_lock(&dh__s.lock);
    dh__s.stats.drains[why]++;
    const dh_mode_ops_t *c = dh__s.ctl, *m = dh__mode();
    if (m->drain)
        m->drain(why); /* plan: mid-pair, the ranks agree on draining here first */
    if (dh__program_sync(why)) {
        if (c && c->sync)
            c->sync();
        m = dh__mode();
        if (m->sync)
            m->sync();
    }
    uint64_t target = dh__s.next_seq;
    m = dh__mode();
    if (m->seq_due && m->seq_due())
        dh__flush_seq(target, dh__s.release);
    else
        dh__flush_to(target);
    pthread_cond_signal(&dh__s.work);
    /* Replayed is not enough: the ops may have gone out as released groups before this
     * flush, and the barrier that joins strand 1's streams into the framework streams comes
     * with the flush's own batch (dispatch.c). A call forwarded on a framework stream before
     * that batch ran would overtake strand 1's work (measured: the coverage program's gemv
     * after a paired forward read its input before the kernels that wrote it, in 3 of 22
     * plan runs, tests/shim/plan_cov.sh). The dispatcher itself never waits for its own
     * batch. */
    while ((dh__s.low_water < target || (dh__s.flush_served < target && !dh__tls_is_dispatcher)) &&
           dh__s.started)
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    pthread_mutex_unlock(&dh__s.lock);
    if (c && c->drained && why != DH_DRAIN_EXIT)
        c->drained();
}

void dh_sched_kick(void)
{
    pthread_mutex_lock(&dh__s.lock);
    if (!dh__s.kick_ms)
        dh__s.kick_ms = dh__wall_ms();
    pthread_cond_signal(&dh__s.work);
    pthread_mutex_unlock(&dh__s.lock);
}

static void dh__update_deferring(void)
{
    int on = dh__s.started && dh__mode()->defers &&
             dh__s.reorder_allowed && !atomic_load(&dh__capturing);
    atomic_store(&dh__s.deferring, on);
}

void dh_sched_capture_begin(void)
{
    if (atomic_fetch_add(&dh__capturing, 1) == 0) {
        dh_sched_drain(DH_DRAIN_CAPTURE);
        pthread_mutex_lock(&dh__s.lock);
        dh__update_deferring();
        pthread_mutex_unlock(&dh__s.lock);
        DH_INFO(SCHED, "graph capture: passing everything through until it ends");
    }
}

void dh_sched_capture_end(void)
{
    if (atomic_load(&dh__capturing) > 0 && atomic_fetch_sub(&dh__capturing, 1) == 1) {
        pthread_mutex_lock(&dh__s.lock);
        dh__update_deferring();
        pthread_mutex_unlock(&dh__s.lock);
    }
}

void dh_sched_set_reorder_allowed(int allowed, const char *why)
{
    pthread_mutex_lock(&dh__s.lock);
    dh__s.reorder_allowed = allowed;
    dh__update_deferring();
    pthread_mutex_unlock(&dh__s.lock);
    if (!allowed && dh__mode()->defers)
        DH_WARN(SCHED, "not reordering (DHELIX_MODE=%s runs as passthrough): %s",
                dh_mode_name(dh__s.mode), why);
}

void dh_sched_poisoned(int cuda_err)
{
    static _Atomic int once;
    if (atomic_exchange(&once, 1))
        return;
    DH_WARN(SCHED, "the device reported CUDA error %d, which CUDA returns from every later "
            "call: the shim forwards every call from now on", cuda_err);
    dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    pthread_mutex_lock(&dh__s.lock);
    dh__s.reorder_allowed = 0;
    dh__update_deferring();
    pthread_mutex_unlock(&dh__s.lock);
}

/* Invariant 6: an internal error drains what is queued and continues in passthrough. */
void dh__fallback(const char *why)
{
    DH_WARN_ONCE(SCHED, "internal error (%s): draining and continuing in passthrough", why);
    dh_sched_drain(DH_DRAIN_UNCAPTURABLE);
    pthread_mutex_lock(&dh__s.lock);
    dh__s.reorder_allowed = 0;
    dh__update_deferring();
    pthread_mutex_unlock(&dh__s.lock);
}

dh_mode_t dh_sched_mode(void) { return dh__s.mode; }

static pthread_once_t dh__first_once = PTHREAD_ONCE_INIT;

static void dh__first_call(void)
{
    const dh_mode_ops_t *c = dh__s.ctl, *m;
    if (c && c->first_call)
        c->first_call();
    m = dh__mode();
    if (!m->first_call || m->first_call() == 0)
        return;
    /* The mode cannot run (one line said why; plan: the plan cannot be used): nothing was
     * deferred yet. */
    pthread_mutex_lock(&dh__s.lock);
    dh__s.mode = DH_MODE_PASSTHROUGH;
    dh__update_deferring();
    pthread_mutex_unlock(&dh__s.lock);
}

void dh_sched_first_call(void) { pthread_once(&dh__first_once, dh__first_call); }

void dh_sched_init(void)
{
    const dh_mode_ops_t *t = dh_mode_table(dh_config()->mode);
    dh__s.ctl = t->controls ? t : NULL;
    dh__s.mode = t->start ? t->start() : t->mode;
    if (!dh__mode()->defers)
        return;
    pthread_mutex_lock(&dh__s.lock);
    if (pthread_create(&dh__s.thread, NULL, dh__dispatch_main, NULL) == 0) {
        dh__s.started = 1;
    } else {
        DH_WARN(SCHED, "cannot start the dispatcher thread; running passthrough");
    }
    dh__update_deferring();
    pthread_mutex_unlock(&dh__s.lock);
}

void dh_sched_fini(void)
{
    pthread_mutex_lock(&dh__s.lock);
    int started = dh__s.started;
    pthread_mutex_unlock(&dh__s.lock);
    if (!started)
        return;
    if (dh__s.ctl && dh__s.ctl->finish)
        dh__s.ctl->finish();
    dh_sched_drain(DH_DRAIN_EXIT);
    pthread_mutex_lock(&dh__s.lock);
    if (dh__s.pending_error)
        DH_WARN(SCHED, "a deferred %s failed when replayed (CUDA error %d) and the program "
                "made no call that reports it before exit; without the shim the call itself "
                "would have failed", dh__s.pending_what ? dh__s.pending_what : "operation",
                dh__s.pending_error);
    dh__s.stop = 1;
    atomic_store(&dh__s.deferring, 0);
    pthread_cond_signal(&dh__s.work);
    pthread_mutex_unlock(&dh__s.lock);
    pthread_join(dh__s.thread, NULL);
    pthread_mutex_lock(&dh__s.lock);
    dh__s.started = 0;
    pthread_mutex_unlock(&dh__s.lock);
    pthread_mutex_lock(&dh__s.lock);
    dh_deps_free();
    free(dh__s.unc);
    dh__s.unc = NULL;
    dh__s.unc_cap = 0;
    dh__s.unc_ops = dh__s.unc_bytes = 0;
    pthread_mutex_unlock(&dh__s.lock);
    const dh_mode_ops_t *m = dh__mode();
    if (m->finish)
        m->finish();
}
