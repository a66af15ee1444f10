/*
 * sched.c: the framework side of the scheduler: submission, drains, the event table, the
 * strand tracker and the lifecycle. The dispatcher thread is in dispatch.c.
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
static __thread int dh__tls_is_dispatcher;
static atomic_int dh__thread_count;
static atomic_int dh__capturing;
static pthread_once_t dh__exit_once = PTHREAD_ONCE_INIT;

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

static int dh__thread_id(void)
{
    if (dh__tls_thread < 0)
        dh__tls_thread = atomic_fetch_add(&dh__thread_count, 1);
    return dh__tls_thread;
}

/* ---- event instances (lock held) ---- */

static dh_evinst_t *dh__inst_new(int device)
{
    dh_evinst_t *i = dh__s.free_inst;
    if (i && i->device == device) {
        dh__s.free_inst = i->next_free;
    } else {
        i = calloc(1, sizeof *i);
        if (!i)
            return NULL;
        i->device = device;
    }
    i->refs = 0;
    i->recorded = 0;
    i->next_free = NULL;
    return i;
}

void dh__inst_unref(dh_evinst_t *inst)
{
    if (inst && --inst->refs == 0) {
        /* The dispatcher created its CUDA event; it stays with the instance for reuse. */
        inst->next_free = dh__s.free_inst;
        dh__s.free_inst = inst;
    }
}

static dh_evrec_t *dh__evrec(cudaEvent_t e, int create)
{
    dh_evrec_t *r;
    HASH_FIND_PTR(dh__s.events, &e, r);
    if (!r && create) {
        r = calloc(1, sizeof *r);
        if (!r)
            return NULL;
        r->key = e;
        HASH_ADD_PTR(dh__s.events, key, r);
    }
    return r;
}

/* Binds event ops to instances at submission, in program order (lock held). Returns 0,
 * or -1 when the op can be dropped (a wait on a never-recorded event is a no-op). */
static int dh__bind_event(dh_op_t *op)
{
    if (op->kind == DH_OP_EVENT_RECORD) {
        dh_evrec_t *r = dh__evrec(op->event, 1);
        dh_evinst_t *i = r ? dh__inst_new(op->device) : NULL;
        if (!i)
            return -2;
        i->refs = 2; /* the table's "latest" and the pending record */
        dh__inst_unref(r->latest);
        r->latest = i;
        op->shim_event = i;
    } else if (op->kind == DH_OP_EVENT_WAIT) {
        dh_evrec_t *r = dh__evrec(op->event, 0);
        if (!r || !r->latest)
            return -1;
        r->latest->refs++;
        op->shim_event = r->latest;
    }
    return 0;
}

/* ---- strand tracker: the test rule of issuing-thread phases ----
 * Each maximal run of ops from one thread is a phase. Odd phases (the backward thread of
 * micro-batch i) run on strand 0, even phases (the forward of i+1) on strand 1, and
 * phases 2k-1 and 2k form co-execution group k. The plan issue replaces this rule with
 * template matching. */
static void dh__assign_strand(dh_op_t *op)
{
    if (dh__s.mode != DH_MODE_STRANDS || !dh__s.reorder_allowed) {
        op->strand = 0;
        op->group = 0;
        return;
    }
    if (op->thread != dh__s.last_thread) {
        if (dh__s.last_thread >= 0)
            dh__s.phase++;
        dh__s.last_thread = op->thread;
    }
    op->strand = (dh__s.phase % 2 == 1) ? 0 : 1;
    op->group = (dh__s.phase + 1) / 2;
}

/* ---- sizes of stream-ordered allocations (lock held) ---- */

typedef struct dh_allocsz {
    void *key;
    size_t size;
    UT_hash_handle hh;
} dh_allocsz_t;

void dh_sched_alloc_note(void *p, size_t size)
{
    if (!p)
        return;
    dh_allocsz_t *a = malloc(sizeof *a);
    if (!a)
        return;
    a->key = p;
    a->size = size;
    pthread_mutex_lock(&dh__s.lock);
    dh_allocsz_t *old;
    HASH_REPLACE_PTR(dh__s.allocs, key, a, old);
    pthread_mutex_unlock(&dh__s.lock);
    free(old);
}

size_t dh_sched_alloc_take(void *p)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_allocsz_t *a;
    HASH_FIND_PTR(dh__s.allocs, &p, a);
    size_t n = 0;
    if (a) {
        n = a->size;
        HASH_DEL(dh__s.allocs, a);
    }
    pthread_mutex_unlock(&dh__s.lock);
    free(a);
    return n;
}

int dh_sched_mirroring(void) { return dh__s.mode == DH_MODE_STRESS || dh__s.mode == DH_MODE_STRANDS; }

void dh_sched_event_forget(cudaEvent_t e)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_evrec_t *r = dh__evrec(e, 0);
    if (r) {
        dh__inst_unref(r->latest);
        HASH_DEL(dh__s.events, r);
        free(r);
    }
    pthread_mutex_unlock(&dh__s.lock);
}

cudaStream_t dh_sched_alloc_stream(cudaStream_t s)
{
    if (dh__s.mode != DH_MODE_STRANDS)
        return NULL;
    pthread_mutex_lock(&dh__s.lock);
    uint64_t phase = dh__s.phase + (dh__thread_id() != dh__s.last_thread && dh__s.last_thread >= 0);
    int strand = (phase % 2 == 1) ? 0 : 1;
    pthread_mutex_unlock(&dh__s.lock);
    if (strand == 0)
        return NULL;
    int dev = 0;
    dh_real()->cudaGetDevice(&dev);
    return dh__physical(dev, s, 1);
}

static void dh__atexit(void) { dh_sched_fini(); }
static void dh__register_exit(void) { atexit(dh__atexit); }

int dh_sched_submit(dh_op_t *op)
{
    /* Registered after the device library initialised (it has, since work is being
     * issued), so our exit drain runs before the device's own exit handlers. */
    pthread_once(&dh__exit_once, dh__register_exit);
    op->thread = dh__thread_id();
    pthread_mutex_lock(&dh__s.lock);
    int bound = dh__bind_event(op);
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
    dh__assign_strand(op);
    op->seq = dh__s.next_seq++;
    op->next = NULL;
    if (dh__s.in_tail)
        dh__s.in_tail->next = op;
    else
        dh__s.in_head = op;
    dh__s.in_tail = op;
    dh__s.held++;
    dh__s.stats.ops[op->kind]++;
    if (dh__s.held > dh__s.stats.max_queue_depth)
        dh__s.stats.max_queue_depth = dh__s.held;
    if (op->kind == DH_OP_FREE_ASYNC) {
        dh__s.held_free_bytes += op->free_bytes;
        if (dh__s.held_free_bytes > dh__s.stats.max_deferred_bytes)
            dh__s.stats.max_deferred_bytes = dh__s.held_free_bytes;
    }
    const dh_config_t *cfg = dh_config();
    if (dh__s.held > (uint64_t)cfg->max_queued_ops ||
        dh__s.held_free_bytes > (uint64_t)cfg->max_deferred_free_bytes) {
        if (dh__s.flush_upto < dh__s.next_seq)
            dh__s.stats.drains[DH_DRAIN_LAG]++;
        dh__s.flush_upto = dh__s.next_seq; /* bounded lag: issue without pairing */
    }
    /* The dispatcher holds ops until a drain (stress) or until a group is complete
     * (strands): waking it for every op would cost a futex call per capture for nothing. */
    int wake = dh__s.flush_upto > dh__s.low_water ||
               (dh__s.mode == DH_MODE_STRANDS && op->group > dh__s.signaled_group);
    if (wake) {
        dh__s.signaled_group = op->group;
        pthread_cond_signal(&dh__s.work);
    }
    pthread_mutex_unlock(&dh__s.lock);
    return 0;
}

void dh_sched_forwarded(void)
{
    pthread_mutex_lock(&dh__s.lock);
    dh__s.fwd_epoch++;
    pthread_mutex_unlock(&dh__s.lock);
}

void dh_sched_stream_forget(cudaStream_t s)
{
    int dev = 0;
    dh_real()->cudaGetDevice(&dev);
    pthread_mutex_lock(&dh__s.lock);
    dh_vstream_t probe, *v;
    memset(&probe.key, 0, sizeof probe.key);
    probe.key.device = dev;
    probe.key.stream = s;
    HASH_FIND(hh, dh__s.vstreams, &probe.key, sizeof probe.key, v);
    cudaStream_t extra = NULL;
    if (v && !v->head) {
        HASH_DEL(dh__s.vstreams, v);
        extra = v->phys[1];
        free(v);
    }
    pthread_mutex_unlock(&dh__s.lock);
    if (extra)
        dh_real()->cudaStreamDestroy(extra);
}

int dh_sched_drain(dh_drain_reason_t why)
{
    pthread_mutex_lock(&dh__s.lock);
    dh__s.stats.drains[why]++;
    uint64_t target = dh__s.next_seq;
    if (dh__s.flush_upto < target)
        dh__s.flush_upto = target;
    pthread_cond_signal(&dh__s.work);
    while (dh__s.low_water < target && dh__s.started)
        pthread_cond_wait(&dh__s.done, &dh__s.lock);
    int err = 0;
    for (int d = 0; d < DH_MAX_DEVICES; d++) {
        if (dh__s.pending_error[d] && !err)
            err = dh__s.pending_error[d];
        dh__s.pending_error[d] = 0;
    }
    pthread_mutex_unlock(&dh__s.lock);
    return err;
}

int dh_sched_event_pending(cudaEvent_t e)
{
    pthread_mutex_lock(&dh__s.lock);
    dh_evrec_t *r = dh__evrec(e, 0);
    int pending = r && r->latest && !r->latest->recorded;
    pthread_mutex_unlock(&dh__s.lock);
    return pending;
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
    int on = dh__s.started && (dh__s.mode == DH_MODE_STRESS || dh__s.mode == DH_MODE_STRANDS) &&
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
    if (!allowed && dh__s.mode != DH_MODE_PASSTHROUGH)
        DH_WARN(SCHED, "not reordering (DHELIX_MODE=%s runs as passthrough): %s",
                dh_mode_name(dh__s.mode), why);
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

void dh_sched_stats(dh_sched_stats_t *out)
{
    pthread_mutex_lock(&dh__s.lock);
    *out = dh__s.stats;
    pthread_mutex_unlock(&dh__s.lock);
}

void dh_sched_init(void)
{
    const dh_config_t *cfg = dh_config();
    dh__s.mode = cfg->mode;
    if (cfg->mode != DH_MODE_STRESS && cfg->mode != DH_MODE_STRANDS)
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
    dh_sched_drain(DH_DRAIN_EXIT);
    pthread_mutex_lock(&dh__s.lock);
    dh__s.stop = 1;
    atomic_store(&dh__s.deferring, 0);
    pthread_cond_signal(&dh__s.work);
    pthread_mutex_unlock(&dh__s.lock);
    pthread_join(dh__s.thread, NULL);
    pthread_mutex_lock(&dh__s.lock);
    dh__s.started = 0;
    pthread_mutex_unlock(&dh__s.lock);
}
