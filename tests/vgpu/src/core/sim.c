/*
 * sim.c: operations, hardware queues and the discrete-event simulation in virtual time.
 *
 * Model. Each device has max_connections hardware queues; a stream feeds one queue, chosen
 * at creation (round robin), and the queue starts its head operation as soon as the
 * operation may start (see vg.h). An operation waiting at a queue's head holds back every
 * operation behind it, which is what CUDA_DEVICE_MAX_CONNECTIONS=1 means on a real GPU.
 * Running operations progress by processor sharing: compute operations share the device in
 * proportion to their sm_fraction; while communication runs, compute slows by
 * compute_slow_by_comm and communication by comm_slow_by_compute; communication operations
 * of one link class share its bandwidth; copies of one direction share the copy engine.
 *
 * All times are double nanoseconds. The simulation only ever stops on event times, and the
 * order in which simultaneous events are handled is fixed (device, queue, issue order), so
 * results do not depend on when or by which thread it is advanced.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

static __thread uint64_t tls_issue_count;

/* ---- progress when the host is elsewhere ----
 * The simulation advances when the host issues or waits. A rank whose host blocks outside
 * the vgpu (an MPI barrier, a TCP store) with a collective still unposted would leave its
 * peers waiting forever, where a real GPU would have run the collective on its own. So
 * while rendezvous operations are pending, a progress thread advances the simulation once
 * the host has neither issued nor waited for VG_IDLE_MS of wall time. Programs that never
 * leave work pending across such a block are unaffected, and stay deterministic. */
#define VG_IDLE_MS 50
static int rdv_pending;                /* guarded by the device lock */
static uint64_t last_activity_ms;      /* atomic: wall clock of the last issue or wait */
static pthread_once_t progress_once = PTHREAD_ONCE_INIT;

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void note_activity(void) { __atomic_store_n(&last_activity_ms, wall_ms(), __ATOMIC_RELAXED); }

static void *progress_main(void *arg)
{
    (void)arg;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (;;) {
        nanosleep(&tick, NULL);
        if (wall_ms() - __atomic_load_n(&last_activity_ms, __ATOMIC_RELAXED) < VG_IDLE_MS) {
            continue;
        }
        vg_lock();
        if (rdv_pending) {
            int blocked;
            vg__sim_run(INFINITY, NULL, NULL, &blocked);
        }
        vg_unlock();
    }
    return NULL;
}

static void progress_start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, progress_main, NULL) == 0) {
        pthread_detach(t);
    } else {
        vg_msg("cannot start the progress thread; ranks that block outside CUDA may stall");
    }
}

/* ---- operations ---- */

vg_op_t *vg_op_new(const char *api, vg_class_t cls)
{
    vg__ensure_init();
    vg_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        vg_msg("out of host memory for an operation");
        abort();
    }
    op->api = api;
    op->cls = cls;
    op->sm_fraction = 1.0;
    op->ranges = op->range_inline;
    op->cap_ranges = VG_OP_INLINE_RANGES;
    op->dev = vg_current_device();
    op->refs = 1;
    return op;
}

void vg_op_add_range(vg_op_t *op, const void *p, size_t len, int write)
{
    if (len == 0) {
        return;
    }
    if (op->nranges == op->cap_ranges) {
        int cap = op->cap_ranges * 2;
        vg_range_t *r = malloc((size_t)cap * sizeof *r);
        if (!r) {
            abort();
        }
        memcpy(r, op->ranges, (size_t)op->nranges * sizeof *r);
        if (op->ranges != op->range_inline) {
            free(op->ranges);
        }
        op->ranges = r;
        op->cap_ranges = cap;
    }
    op->ranges[op->nranges++] = (vg_range_t){(uintptr_t)p, len, write};
}

static void payload_free(vg_op_t *op) { free(op->payload); }

void *vg_op_payload(vg_op_t *op, size_t n)
{
    op->payload = calloc(1, n ? n : 1);
    if (!op->payload) {
        abort();
    }
    if (!op->release) {
        op->release = payload_free;
    }
    return op->payload;
}

static void op_destroy(vg_op_t *op)
{
    if (op->release) {
        op->release(op);
    }
    for (int i = 0; i < op->ndeps; i++) {
        vg__op_unref(op->deps[i]);
    }
    free(op->deps);
    if (op->ranges != op->range_inline) {
        free(op->ranges);
    }
    free(op);
}

void vg_op_discard(vg_op_t *op) { op_destroy(op); }

/* References may be dropped without the device lock (the pool), hence atomics. */
void vg__op_ref(vg_op_t *op) { __atomic_add_fetch(&op->refs, 1, __ATOMIC_RELAXED); }

void vg__op_unref(vg_op_t *op)
{
    if (op && __atomic_sub_fetch(&op->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        op_destroy(op);
    }
}

void vg__op_add_dep(vg_op_t *op, vg_op_t *dep)
{
    if (!dep || __atomic_load_n(&dep->state, __ATOMIC_ACQUIRE) == VG_ST_DONE) {
        return;
    }
    if (op->ndeps == op->cap_deps) {
        op->cap_deps = op->cap_deps ? op->cap_deps * 2 : 4;
        op->deps = realloc(op->deps, (size_t)op->cap_deps * sizeof *op->deps);
        if (!op->deps) {
            abort();
        }
    }
    vg__op_ref(dep);
    op->deps[op->ndeps++] = dep;
}

int vg__op_done(void *op)
{
    return __atomic_load_n(&((vg_op_t *)op)->state, __ATOMIC_ACQUIRE) == VG_ST_DONE;
}

/* ---- issue ---- */

static int queue_has_room(void *arg)
{
    vg_device_t *d = arg;
    return d->pending < (uint64_t)vg_g.cfg.queue_depth;
}

void vg__sim_enqueue(vg_stream_t *s, vg_op_t *op)
{
    vg_device_t *d = vg__dev(s->dev);
    __atomic_store_n(&d->active, 1, __ATOMIC_RELAXED);
    vg_g.host_ns += (op->cls == VG_MARKER ? d->prof.event_us : d->prof.launch_us) * 1000.0;
    op->t_issue = vg_g.host_ns;
    op->seq = ++vg_g.seq;
    op->dev = s->dev;
    op->stream = s;
    tls_issue_count++;
    note_activity();
    if (op->rdv) {
        rdv_pending++;
        pthread_once(&progress_once, progress_start);
    }
    /* Legacy default stream semantics: it waits for every blocking stream and they for it. */
    if (s->legacy) {
        for (vg_stream_t *o = d->streams; o; o = o->next_all) {
            if (!(o->flags & cudaStreamNonBlocking)) {
                vg__op_add_dep(op, o->last);
            }
        }
    } else if (!(s->flags & cudaStreamNonBlocking)) {
        vg__op_add_dep(op, d->legacy.last);
    }
    vg__op_ref(op);
    vg__op_unref(s->last);
    s->last = op;
    if (d->qtail[s->hwq]) {
        d->qtail[s->hwq]->qnext = op;
    } else {
        d->qhead[s->hwq] = op;
    }
    d->qtail[s->hwq] = op;
    d->pending++;
    if (!queue_has_room(d)) {
        /* A real launch queue is bounded too: the host blocks until a slot frees. */
        vg__sim_wait(queue_has_room, d);
        if (vg_g.now > vg_g.host_ns) {
            vg_g.host_ns = vg_g.now;
        }
    }
}

uint64_t vg__thread_issue_count(void) { return tls_issue_count; }

static cudaError_t submit(cudaStream_t s, vg_op_t *op)
{
    vg_lock();
    cudaError_t err;
    vg_stream_t *st = vg__stream_get(s, &err);
    if (!st) {
        vg_unlock();
        op_destroy(op);
        return err;
    }
    if (vg_g.dev[st->dev].sticky) {
        err = vg_g.dev[st->dev].sticky;
        vg_unlock();
        op_destroy(op);
        return err;
    }
    if (st->capture) { /* stream capture: the op becomes a node of the graph */
        vg__graph_add(st->capture, op);
        vg_unlock();
        return cudaSuccess;
    }
    vg__sim_enqueue(st, op);
    vg_unlock();
    return cudaSuccess;
}

cudaError_t vg_submit_unchecked(cudaStream_t s, vg_op_t *op) { return submit(s, op); }

cudaError_t vg_submit(cudaStream_t s, vg_op_t *op)
{
    for (int i = 0; i < op->nranges; i++) {
        const vg_range_t *r = &op->ranges[i];
        vg_alloc_info_t info;
        int f = vg_mem_find((void *)r->lo, r->len, &info);
        if (f != 1) {
            vg_msg("%s: %zu bytes at %p %s", op->api, r->len, (void *)r->lo,
                   f < 0 ? "lie in a freed allocation (use after free)"
                         : "are not inside one live device allocation");
            op_destroy(op);
            return cudaErrorInvalidValue;
        }
    }
    return submit(s, op);
}

/* ---- hazards ---- */

static void describe_range(char *buf, size_t n, const vg_range_t *r)
{
    vg_alloc_info_t info;
    if (vg_mem_find((void *)r->lo, 1, &info)) {
        snprintf(buf, n, "allocation #%llu bytes [%zu, %zu)", (unsigned long long)info.serial,
                 (size_t)(r->lo - info.base), (size_t)(r->lo - info.base) + r->len);
    } else {
        snprintf(buf, n, "[%p, +%zu)", (void *)r->lo, r->len);
    }
}

static void report_hazard(vg_device_t *d, const vg_op_t *a, const vg_range_t *ra,
                          const vg_op_t *b, const vg_range_t *rb)
{
    char da[96], db[96];
    describe_range(da, sizeof da, ra);
    describe_range(db, sizeof db, rb);
    d->ctr.hazards++;
    if (vg_g.cfg.hazard == VG_HAZARD_OFF) {
        return;
    }
    vg_msg("hazard: %s %s (dev %d stream %d, starts %.3f us) %s %s while %s %s (dev %d stream "
           "%d, running since %.3f us) %s %s",
           a->api, a->name, a->dev, a->stream->index, a->t_start / 1e3,
           ra->write ? "writes" : "reads", da, b->api, b->name, b->dev, b->stream->index,
           b->t_start / 1e3, rb->write ? "writes" : "reads", db);
    if (vg_g.cfg.hazard == VG_HAZARD_ABORT) {
        fflush(NULL);
        _exit(86);
    }
}

static void check_hazards(vg_device_t *d, const vg_op_t *op)
{
    if (!op->nranges) {
        return;
    }
    for (int di = 0; di < vg_g.ndev; di++) {
        vg_device_t *od = &vg_g.dev[di];
        for (int k = 0; k < od->nrunning; k++) {
            const vg_op_t *o = od->running[k];
            for (int i = 0; i < op->nranges; i++) {
                const vg_range_t *a = &op->ranges[i];
                for (int j = 0; j < o->nranges; j++) {
                    const vg_range_t *b = &o->ranges[j];
                    if ((a->write || b->write) && a->lo < b->lo + b->len && b->lo < a->lo + a->len) {
                        report_hazard(d, op, a, o, b);
                        goto next_op; /* one report per pair of operations */
                    }
                }
            }
        next_op:;
        }
    }
}

/* ---- running set ---- */

static void complete_op(vg_device_t *d, vg_op_t *op);

/* An event record is a signal that fires when the work before it on its stream is done; it
 * does not hold its hardware queue while it waits (only waits and work do), which is what
 * lets a collective's end-event record sit between a collective and the compute issued
 * after it without serialising them when CUDA_DEVICE_MAX_CONNECTIONS=1. */
static int is_record(const vg_op_t *op)
{
    return op->cls == VG_MARKER && op->ndeps == 0 && op->api && !strcmp(op->api, "cudaEventRecord");
}

static void fire_records(vg_device_t *d, vg_stream_t *s)
{
    while (s->records && !s->inflight) {
        vg_op_t *r = s->records;
        s->records = r->qnext;
        r->qnext = NULL;
        r->t_start = vg_g.now;
        r->state = VG_ST_RUNNING;
        s->inflight++;
        complete_op(d, r);
    }
}

static void complete_op(vg_device_t *d, vg_op_t *op)
{
    op->t_end = vg_g.now;
    op->remaining = 0;
    d->last_end = vg_g.now;
    op->stream->inflight--;
    d->pending--;
    d->ctr.ops_completed++;
    if (op->rdv) {
        rdv_pending--;
    }
    if (op->cls == VG_COPY) {
        d->ctr.bytes_copied += op->bytes;
    } else if (op->cls == VG_COMM) {
        d->ctr.bytes_communicated += op->bytes;
    }
    __atomic_store_n(&op->state, VG_ST_DONE, __ATOMIC_RELEASE);
    vg__trace_op(op);
    vg_stream_t *s = op->stream;
    if (s->destroyed && s->last == op) {
        /* A stream destroyed with work pending lives until that work is done. Completed ops
         * that outlive it (an event's last record) never look at their stream again. Nothing
         * follows op on it, so no record is waiting. */
        s->last = NULL;
        vg__op_unref(op);
        free(s);
    } else if (!s->inflight && s->records) {
        fire_records(d, s); /* may free s (a destroyed stream's last record): not used after */
    }
    vg__op_unref(op); /* the queue's reference */
}

VG_API void vg_op_fail(vg_op_t *op, cudaError_t err)
{
    op->failed = 1;
    if (!vg_g.dev[op->dev].sticky)
        vg_g.dev[op->dev].sticky = err;
}

static void start_op(vg_device_t *d, vg_op_t *op)
{
    op->t_start = vg_g.now;
    op->state = VG_ST_RUNNING;
    op->stream->inflight++;
    for (int i = 0; i < op->ndeps; i++) {
        vg__op_unref(op->deps[i]);
    }
    op->ndeps = 0;
    if (!op->failed) {
        if (op->resolve && !vg_g.cfg.timing_only)
            op->resolve(op);
        check_hazards(d, op);
        if (!op->skip_mem_check && vg__mem_check_exec(op)) {
            d->sticky = cudaErrorIllegalAddress;
            op->failed = 1;
        } else if (op->exec && (!vg_g.cfg.timing_only || op->exec_always)) {
            op->exec(op);
        }
    }
    if (op->failed || op->solo_ns <= 0) {
        complete_op(d, op);
        return;
    }
    op->remaining = op->solo_ns;
    if (d->nrunning == d->cap_running) {
        d->cap_running = d->cap_running ? d->cap_running * 2 : 16;
        d->running = realloc(d->running, (size_t)d->cap_running * sizeof *d->running);
        if (!d->running) {
            abort();
        }
    }
    d->running[d->nrunning++] = op;
    d->rates_dirty = 1;
}

static void set_rates(vg_device_t *d)
{
    const vgpu_profile_t *p = &d->prof;
    double frac = 0;
    int ncomp = 0, ncomm[4] = {0}, ncopy[8] = {0}, anycomm = 0;
    for (int i = 0; i < d->nrunning; i++) {
        const vg_op_t *o = d->running[i];
        if (o->cls == VG_COMPUTE) {
            frac += o->sm_fraction > 0 ? o->sm_fraction : 1.0;
            ncomp++;
        } else if (o->cls == VG_COMM) {
            ncomm[o->link & 3]++;
            anycomm = 1;
        } else if (o->cls == VG_COPY) {
            ncopy[o->link & 7]++;
        }
    }
    for (int i = 0; i < d->nrunning; i++) {
        vg_op_t *o = d->running[i];
        double r = 1.0;
        if (o->cls == VG_COMPUTE) {
            r = frac > 1.0 ? 1.0 / frac : 1.0;
            if (anycomm) {
                r *= 1.0 - p->compute_slow_by_comm;
            }
        } else if (o->cls == VG_COMM) {
            r = 1.0 / ncomm[o->link & 3];
            if (ncomp) {
                r *= 1.0 - p->comm_slow_by_compute;
            }
        } else if (o->cls == VG_COPY) {
            r = 1.0 / ncopy[o->link & 7];
        }
        o->rate = r;
    }
    d->rates_dirty = 0;
}

static void account_busy(vg_device_t *d, double dt)
{
    int comp = 0, comm = 0, copy = 0;
    for (int i = 0; i < d->nrunning; i++) {
        comp |= d->running[i]->cls == VG_COMPUTE;
        comm |= d->running[i]->cls == VG_COMM;
        copy |= d->running[i]->cls == VG_COPY;
    }
    d->ctr.busy_ns_compute += comp ? dt : 0;
    d->ctr.busy_ns_comm += comm ? dt : 0;
    d->ctr.busy_ns_copy += copy ? dt : 0;
    d->ctr.overlap_ns += (comp && comm) ? dt : 0;
}

/* Moves the clock to t (the earliest pending event) and completes what finishes there. */
static void advance_to(double t)
{
    const double t0 = vg_g.now, dt = t - t0;
    vg_g.now = t; /* completions below are stamped with t */
    for (int di = 0; di < vg_g.ndev; di++) {
        vg_device_t *d = &vg_g.dev[di];
        if (!d->nrunning) {
            continue;
        }
        account_busy(d, dt);
        int keep = 0;
        vg_op_t *done[d->nrunning];
        int ndone = 0;
        for (int i = 0; i < d->nrunning; i++) {
            vg_op_t *o = d->running[i];
            double finish = t0 + o->remaining / o->rate;
            if (finish <= t + 1e-9 * (1.0 + fabs(t))) {
                done[ndone++] = o;
            } else {
                o->remaining -= o->rate * dt;
                d->running[keep++] = o;
            }
        }
        d->nrunning = keep;
        if (ndone) {
            d->rates_dirty = 1;
        }
        for (int i = 0; i < ndone; i++) {
            complete_op(d, done[i]);
        }
    }
}

/* ---- dispatch ---- */

static int can_start(const vg_op_t *op)
{
    if (op->t_issue > vg_g.now || op->stream->inflight) {
        return 0;
    }
    for (int i = 0; i < op->ndeps; i++) {
        if (op->deps[i]->state != VG_ST_DONE) {
            return 0;
        }
    }
    return 1;
}

/* Settles a rendezvous op at a queue head: 1 when it may start now. *local is set when it
 * waits only for operations of this process. */
static int rendezvous(vg_op_t *op, int *blocked, int *local)
{
    if (op->state == VG_ST_QUEUED) {
        op->t_ready = vg_g.now;
        op->state = VG_ST_POSTED;
        if (op->rdv->post(op, vg_g.now) < 0) {
            op->failed = 1;
            return 1;
        }
    }
    if (op->state == VG_ST_POSTED) {
        double ts = vg_g.now;
        int r = op->rdv->poll(op, &ts);
        if (r == 0) {
            *blocked = 1;
            return 0;
        }
        if (r == VG_RDV_LOCAL) {
            *local = 1; /* its peers are ops of this process: simulating on posts them */
            return 0;
        }
        if (r < 0) {
            op->failed = 1;
            return 1;
        }
        op->t_start = ts < vg_g.now ? vg_g.now : ts;
        op->state = VG_ST_TIMED;
    }
    return op->t_start <= vg_g.now;
}

static void dispatch(int *blocked, int *local)
{
    int progress;
    do {
        progress = 0;
        for (int di = 0; di < vg_g.ndev; di++) {
            vg_device_t *d = &vg_g.dev[di];
            for (int q = 0; q < vg_g.cfg.max_connections; q++) {
                vg_op_t *op;
                while ((op = d->qhead[q]) && !can_start(op) && is_record(op) &&
                       op->t_issue <= vg_g.now && op->stream->inflight) {
                    d->qhead[q] = op->qnext;
                    if (!d->qhead[q]) {
                        d->qtail[q] = NULL;
                    }
                    op->qnext = NULL;
                    vg_op_t **tail = &op->stream->records;
                    while (*tail) {
                        tail = &(*tail)->qnext;
                    }
                    *tail = op;
                    progress = 1;
                }
                while ((op = d->qhead[q]) && can_start(op)) {
                    if (op->rdv && !op->failed && !rendezvous(op, blocked, local)) {
                        break;
                    }
                    d->qhead[q] = op->qnext;
                    if (!d->qhead[q]) {
                        d->qtail[q] = NULL;
                    }
                    op->qnext = NULL;
                    start_op(d, op);
                    progress = 1;
                }
            }
        }
    } while (progress);
}

static double next_event(void)
{
    double t = INFINITY;
    for (int di = 0; di < vg_g.ndev; di++) {
        vg_device_t *d = &vg_g.dev[di];
        if (d->rates_dirty) {
            set_rates(d);
        }
        for (int i = 0; i < d->nrunning; i++) {
            double f = vg_g.now + d->running[i]->remaining / d->running[i]->rate;
            t = f < t ? f : t;
        }
        for (int q = 0; q < vg_g.cfg.max_connections; q++) {
            const vg_op_t *h = d->qhead[q];
            if (!h) {
                continue;
            }
            if (h->state == VG_ST_TIMED && h->t_start > vg_g.now) {
                t = h->t_start < t ? h->t_start : t;
            } else if (h->t_issue > vg_g.now) {
                t = h->t_issue < t ? h->t_issue : t;
            }
        }
    }
    return t;
}

/* ---- what waits (deadlock detection) ---- */

int vg_rdv_heads(vg_rdv_head_t *heads, int max, int *every_queue)
{
    int n = 0;
    *every_queue = 1;
    for (int di = 0; di < vg_g.ndev; di++) {
        vg_device_t *d = &vg_g.dev[di];
        int here = 0;
        for (int q = 0; q < vg_g.cfg.max_connections; q++) {
            vg_op_t *op = d->qhead[q];
            if (!op || !op->rdv || op->state != VG_ST_POSTED || op->failed) {
                continue;
            }
            here++;
            if (n >= max) {
                continue;
            }
            vg_rdv_head_t *h = &heads[n++];
            h->op = op;
            h->dev = di;
            h->queue = q;
            h->nbehind = 0;
            for (vg_op_t *b = op->qnext; b && h->nbehind < VG_HEAD_BEHIND; b = b->qnext) {
                if (b->rdv) {
                    h->behind[h->nbehind++] = b;
                }
            }
        }
        if (here && here < vg_g.cfg.max_connections) {
            *every_queue = 0;
        }
    }
    return n;
}

uint64_t vg_progress_count(void)
{
    uint64_t n = vg_g.seq;
    for (int di = 0; di < vg_g.ndev; di++) {
        n += vg_g.dev[di].ctr.ops_completed;
    }
    return n;
}

int vg__sim_run(double bound, vg_done_fn done, void *arg, int *blocked)
{
    *blocked = 0;
    for (;;) {
        int local = 0;
        dispatch(blocked, &local);
        if (done && done(arg)) {
            return 1;
        }
        if (*blocked) {
            return 0;
        }
        double t = next_event();
        if (t == INFINITY && local) {
            *blocked = 1; /* nothing else can happen: let the NCCL timeout speak */
            return 0;
        }
        if (t == INFINITY || t > bound) {
            return 0;
        }
        advance_to(t);
    }
}

int vg__sim_wait(vg_done_fn done, void *arg)
{
    useconds_t backoff = 10;
    for (;;) {
        note_activity();
        int blocked;
        if (vg__sim_run(INFINITY, done, arg, &blocked)) {
            return 0;
        }
        if (!blocked) {
            return -1; /* nothing left that could make done() true */
        }
        /* Peers have not posted yet: let them (and our other threads) progress. */
        vg_unlock();
        usleep(backoff);
        backoff = backoff < 1000 ? backoff * 2 : 1000;
        vg_lock();
    }
}
