/*
 * profile_rec.c: profile mode's recorder (see profile_rec.h).
 *
 * Device time comes from a pair of events around each replayed stream op, read once at
 * exit relative to the first op's start event: on a GPU that is the op's device time with
 * whatever ran beside it in the program's own order (CUPTI would give kernel-only times;
 * events also work on the vgpu, whose events report virtual time).
 */
#define _GNU_SOURCE
#include "profile_rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "nccl_op.h"
#include "plan.h"
#include "real.h"
#include "registry.h"
#include "sched_int.h"

#define DH__MAX_COMMS 256

typedef struct dh__prec {
    cudaEvent_t ev[2];
    int device;
} dh__prec_t;

/* Event pairs live in fixed chunks that never move: the dispatcher writes record i's while
 * the framework thread may be adding records (no lock is shared with dh_prof_bracket). A
 * chunk is allocated before its first record is handed to the scheduler, which orders it
 * before the dispatcher's use. */
#define DH__EV_CHUNK 4096
#define DH__EV_CHUNKS (10000000 / DH__EV_CHUNK + 1) /* DHELIX_PROFILE_OPS at most 10^7 */

static dh__prec_t *dh__ev_chunks[DH__EV_CHUNKS];

static dh__prec_t *dh__ev_at(size_t i) { return &dh__ev_chunks[i / DH__EV_CHUNK][i % DH__EV_CHUNK]; }

/* Segments (runs of ops between host synchronisations) seen so far, for the stop rule. */
#define DH__MAX_SEGS 65536

static struct {
    dh_prof_builder_t *b;    /* guarded by dh__s.lock (the caller's) */
    size_t max;
    int pending_sync;
    const void *comms[DH__MAX_COMMS];
    dh_prof_comm_t comm_info[DH__MAX_COMMS];
    int ncomms;
    int full_warned, stopped, failed;
    /* the current segment: hash over (sig, thread) so far, ops, first op's sig, its
     * thread (DH__MIXED once a second thread issued in it) */
    uint64_t seg_h, seg_sig, seg_ch; /* seg_ch: the coarse hash (collectives, thread turns) */
    uint64_t seg_sig2;              /* its second op's sig, 0 while it has one op */
    size_t seg_n;
    uint32_t last_thread;           /* the previous op's */
    uint32_t seg_thread;
    uint64_t *seg_hash, *seg_first, *seg_coarse; /* [closed segment] */
    uint32_t *seg_threads;          /* [closed segment]: seg_thread */
    size_t nsegs;
    uint64_t period_iter;           /* once stopped: the program's iteration starting at
                                       period_next (counted from 0) */
    size_t period, period_next;     /* once stopped: segments per iteration, and the next
                                       segment's index (an iteration starts there) */
    int64_t free_min;               /* the least device memory free after an op's allocations
                                       (cudaMemGetInfo); -1 not read */
    int64_t live;                   /* stream-ordered bytes the program holds, in its order
                                       (allocations recorded less frees captured) */
    uint64_t last_sig, before_sig;  /* the last op's signature; the one before it */
    uint64_t period_first, period_last; /* once stopped: the iteration's first and last op's
                                       signatures (edges: known) */
    int edges;
} dh__pr = {.free_min = -1};
static int dh__comm_index(const void *reg)
{
    if (!reg)
        return -1;
    for (int i = 0; i < dh__pr.ncomms; i++)
        if (dh__pr.comms[i] == reg)
            return i;
    if (dh__pr.ncomms == DH__MAX_COMMS)
        return -1;
    int i = dh__pr.ncomms++;
    dh__pr.comms[i] = reg;
    dh_prof_comm_t *c = &dh__pr.comm_info[i];
    dh_nccl_reg_describe(reg, c->name, sizeof c->name, c->role, sizeof c->role, &c->nranks,
                         &c->rank);
    c->ident = dh_nccl_reg_ident(reg);
    if (strcmp(c->role, "-") == 0)
        c->role[0] = '\0';
    return i;
}

static uint64_t dh__fnv(uint64_t h, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        h = (h ^ ((v >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    return h;
}

#define DH__MIXED UINT32_MAX

/* Whether segments [a, b) hold ops of two threads or more. */
static int dh__two_threads(size_t a, size_t b)
{
    for (size_t k = a; k < b; k++)
        if (dh__pr.seg_threads[k] == DH__MIXED || dh__pr.seg_threads[k] != dh__pr.seg_threads[a])
            return 1;
    return 0;
}

/* The exact content of segments [w, w + p). */
static uint64_t dh__window(size_t w, size_t p)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = w; k < w + p; k++)
        h = dh__fnv(h, dh__pr.seg_hash[k]);
    return h;
}

/* The stop rule for iterations that differ with the data (MoE experts that get no token
 * skip kernels and GEMMs): the last 3 p segments repeat a period of p segments in their
 * collectives and thread turns (the coarse hash), and two of the iterations on that grid
 * (as far back as it repeats) are equal op for op: the planner takes the variant that occurs
 * most often (phases.c, dh__try_variants), and it has seen one twice. Same conditions on
 * the period's start as above, and the collectives must repeat from the program's first
 * iteration on (or its second). */
static void dh__stop_variants(size_t m)
{
    for (size_t p = 1; 3 * p <= m; p++) {
        if (dh__pr.seg_first[m - p] != dh__pr.seg_first[0] || !dh__two_threads(m - p, m))
            continue;
        const uint64_t *c = dh__pr.seg_coarse;
        size_t lo = m - p; /* c[k] == c[k + p] for every k in [lo - ..., m - p) */
        while (lo > 0 && c[lo - 1] == c[lo - 1 + p])
            lo--;
        /* Back to the program's start but for at most its first iteration: a period
         * inside the iteration (the micro-batches of its steady state) repeats only until
         * the optimizer step and would be taken for the iteration. */
        /* On the grid of the program's first iteration (whole iterations recorded): the
         * planner takes that rotation (phases.c). */
        if (lo > p || lo > m - 3 * p || m % p != 0)
            continue;
        size_t nw = (m - lo) / p;
        for (size_t a = 0; a < nw; a++) {
            uint64_t ha = dh__window(m - (a + 1) * p, p);
            for (size_t b = a + 1; b < nw; b++) {
                if (dh__window(m - (b + 1) * p, p) != ha)
                    continue;
                dh__pr.stopped = 1;
                dh__pr.period = p;
                dh__pr.period_next = m;
                dh__pr.period_iter = m / p;
                DH_INFO(SCHED, "profile: the last %zu of %zu segments repeat a period of %zu "
                        "in their collectives, and two of those iterations are alike op for "
                        "op; recording stopped after %zu operations", nw * p, m, p,
                        dh_prof_builder_nops(dh__pr.b));
                return;
            }
        }
    }
}

/* Where the program's set-up ends: the longest prefix of segments of one thread that
 * repeats with a short period q (<= 4 segments) at least 3 times from the first segment
 * on. Under PyTorch every parameter is copied to the device and synchronised on
 * (model.to("cuda") after a host-side init; seen on an H100, 2026-11-26): one segment per
 * parameter, all alike. An MoE program's first forward, cut by its routing synchronisations,
 * is no such prefix: its first segment (the embedding) differs from the others. 0: none. */
static size_t dh__setup_end(size_t m)
{
    const uint64_t *h = dh__pr.seg_hash;
    uint32_t t0 = dh__pr.seg_threads[0];
    size_t one = 0;
    while (one < m && dh__pr.seg_threads[one] == t0 && t0 != DH__MIXED)
        one++;
    if (one == m)
        return 0; /* still in it, or nothing else yet */
    for (size_t q = 1; q <= 4 && 3 * q <= one; q++) {
        size_t e = q;
        while (e < one && h[e] == h[e - q])
            e++;
        if (e >= 3 * q)
            return e;
    }
    return 0;
}

/* The stop rule after set-up: the rule of dh__close_segment with the iterations starting
 * where the set-up ends (segment s) instead of at the program's first op. */
static void dh__stop_setup(size_t m)
{
    size_t s = dh__setup_end(m);
    if (s == 0)
        return;
    const uint64_t *h = dh__pr.seg_hash;
    for (size_t p = 1; s + 2 * p <= m; p++) {
        if (dh__pr.seg_first[m - p] != dh__pr.seg_first[s] || !dh__two_threads(m - p, m))
            continue;
        size_t reps = (m - s) % p == 0 ? 2 : 3;
        if (s + reps * p > m)
            continue;
        size_t k = 0;
        const uint64_t *w = h + (m - reps * p);
        while (k < (reps - 1) * p && w[k] == w[k + p])
            k++;
        if (k < (reps - 1) * p)
            continue;
        dh__pr.stopped = 1;
        dh__pr.period = p;
        dh__pr.period_next = m;
        dh__pr.period_iter = (m - s) % p == 0 ? (m - s) / p : (m - s - (m - s) % p) / p + 1;
        DH_INFO(SCHED, "profile: after %zu segments of set-up, the last %zu of %zu segments "
                "repeat a period of %zu %zu times; recording stopped after %zu operations", s,
                reps * p, m, p, reps, dh_prof_builder_nops(dh__pr.b));
        return;
    }
}

/* The number of whole iterations in segments [0, m) once their last ones repeat a period
 * of p segments: the iterations on the period's grid back to where the segments stop
 * repeating (lo), plus the iterations before it. Iteration 0 may be cut into fewer
 * segments than the others (no synchronisation of its own) or an early iteration into more
 * (a rank that synchronised once more while recording, as a logging rank does): m % p alone cannot tell
 * the two apart, and counting the first kind put the second one iteration ahead of its
 * peers (issue 27, si.auto_sync_rec: its boundaries and switch votes came one iteration
 * later than theirs). */
static uint64_t dh__iters_recorded(size_t m, size_t p)
{
    const uint64_t *h = dh__pr.seg_hash;
    size_t lo = m - p;
    while (lo > 0 && h[lo - 1] == h[lo - 1 + p])
        lo--;
    while ((m - lo) % p != 0)
        lo++; /* on the grid of the period that ends at m */
    /* Before lo: the iterations whose first segment starts as the program's first (its
     * first two ops), at least one (iteration 0) when there is anything before lo; a rank
     * that synchronised once more in iteration 1 has two there. */
    uint64_t n = 0;
    for (size_t k = 0; k < lo; k++)
        n += dh__pr.seg_first[k] == dh__pr.seg_first[0];
    return (lo > 0 && n == 0 ? 1 : n) + (m - lo) / p;
}

/* Closes the current segment and applies the stop rule: recording ends at a host
 * synchronisation after which the segments recorded last repeat a period of p segments
 * that starts like the program's first iteration (its first op has the signature of the
 * first recorded op): twice when the period lies on the grid of the first iteration (the
 * program's first p segments are its iteration 0: the same rotation the planner picks), else
 * three times (a first iteration cut into more or fewer segments than the others). That is
 * what the planner needs to find the iteration (planner.h, step 1). A period starting
 * elsewhere (micro-batches cut by a synchronisation each, such as MoE routing) is no
 * iteration; if none shows, the recorder goes on to DHELIX_PROFILE_OPS. Nor is a period
 * whose ops all come from one thread: it has no backward phase, so nothing in it could be
 * paired. Under PyTorch on an H100 the program's first ops, a parameter's initialisation
 * and copy followed by a synchronisation, repeat from the first op on: the recorder stopped
 * after 4 operations and the plan was serial (2026-11-26). Such a program's iterations do
 * not start like its first op: dh__stop_setup stops there. Iterations that vary with the
 * data: dh__stop_variants. */
static void dh__close_segment(void)
{
    if (!dh__pr.seg_n || dh__pr.nsegs == DH__MAX_SEGS)
        return;
    if (!dh__pr.seg_hash) {
        dh__pr.seg_hash = malloc(DH__MAX_SEGS * sizeof *dh__pr.seg_hash);
        dh__pr.seg_first = malloc(DH__MAX_SEGS * sizeof *dh__pr.seg_first);
        dh__pr.seg_threads = malloc(DH__MAX_SEGS * sizeof *dh__pr.seg_threads);
        dh__pr.seg_coarse = malloc(DH__MAX_SEGS * sizeof *dh__pr.seg_coarse);
        if (!dh__pr.seg_hash || !dh__pr.seg_first || !dh__pr.seg_threads ||
            !dh__pr.seg_coarse) {
            free(dh__pr.seg_hash);
            free(dh__pr.seg_first);
            free(dh__pr.seg_threads);
            free(dh__pr.seg_coarse);
            dh__pr.seg_hash = dh__pr.seg_first = dh__pr.seg_coarse = NULL;
            dh__pr.seg_threads = NULL;
            return;
        }
    }
    size_t m = dh__pr.nsegs++;
    dh__pr.seg_hash[m] = dh__fnv(dh__pr.seg_h, dh__pr.seg_n);
    /* How the segment starts: its first two ops. The first alone let a rank that had
     * synchronised once more in its first iteration stop on a period rotated by one
     * segment, where its iteration's last segment (the workload's end-of-iteration event
     * record, alone between two synchronisations) starts with the signature of its first
     * op (the start event record): its iteration edges then put auto mode's boundaries one
     * synchronisation before its peers' (issue 27, si.auto_sync_rec). */
    dh__pr.seg_first[m] = dh__fnv(dh__fnv(0xcbf29ce484222325ull, dh__pr.seg_sig),
                                  dh__pr.seg_sig2);
    dh__pr.seg_threads[m] = dh__pr.seg_thread;
    dh__pr.seg_coarse[m] = dh__pr.seg_ch;
    dh__pr.seg_n = 0;
    m++;
    for (size_t p = 1; 2 * p <= m && dh_config()->profile_stop; p++) {
        if (dh__pr.seg_first[m - p] != dh__pr.seg_first[0] || !dh__two_threads(m - p, m))
            continue;
        size_t reps = (m - p) % p == 0 ? 2 : 3;
        if (reps * p > m)
            continue;
        size_t k = 0;
        const uint64_t *h = dh__pr.seg_hash + (m - reps * p);
        while (k < (reps - 1) * p && h[k] == h[k + p])
            k++;
        if (k == (reps - 1) * p) {
            dh__pr.stopped = 1;
            dh__pr.period = p;
            dh__pr.period_next = m;
            dh__pr.period_iter = dh__iters_recorded(m, p);
            DH_INFO(SCHED, "profile: the last %zu of %zu segments repeat a period of %zu %zu "
                    "times; recording stopped after %zu operations", reps * p, m, p, reps,
                    dh_prof_builder_nops(dh__pr.b));
            return;
        }
    }
    if (dh_config()->profile_stop && !dh__pr.stopped)
        dh__stop_variants(m);
    if (dh_config()->profile_stop && !dh__pr.stopped)
        dh__stop_setup(m);
}

/* The current device's default pool: its reserved bytes (0 unknown). */
static size_t dh__pool_reserved(void)
{
    const dh_real_t *R = dh_real();
    int dev = 0;
    cudaMemPool_t pool;
    unsigned long long res = 0;
    if (R->cudaGetDevice == NULL || R->cudaDeviceGetMemPool == NULL ||
        R->cudaMemPoolGetAttribute == NULL || R->cudaGetDevice(&dev) != cudaSuccess ||
        R->cudaDeviceGetMemPool(&pool, dev) != cudaSuccess ||
        R->cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res) != cudaSuccess) {
        R->cudaGetLastError();
        return 0;
    }
    return (size_t)res;
}

uint64_t dh_prof_record(const dh_op_t *op, const dh_op_desc_t *d, int64_t mem,
                        const int64_t *sizes, size_t nsizes, int stream_ordinal, int64_t dep)
{
    if (dh__pr.stopped && !dh__pr.edges && !dh__pr.failed) {
        /* Stopped at the synchronisation before this op (dh_prof_sync): it starts an
         * iteration, the op before it ended one. */
        dh__pr.period_first = d->sig;
        dh__pr.period_last = dh__pr.last_sig;
        dh__pr.edges = 1;
        DH_DEBUG(SCHED, "profile: iteration edges first %016llx last %016llx (after stop)",
                 (unsigned long long)dh__pr.period_first, (unsigned long long)dh__pr.period_last);
    }
    if (dh__pr.stopped || dh__pr.failed)
        return 0;
    if (!dh__pr.max)
        dh__pr.max = (size_t)dh_config()->profile_ops;
    if (!dh__pr.b && !(dh__pr.b = dh_prof_builder_new())) {
        dh__pr.failed = 1;
        return 0;
    }
    size_t i = dh_prof_builder_nops(dh__pr.b);
    /* What the device has free where the program holds the most: the plan keeps what
     * pairing costs within it (DESIGN.md invariant 11). Read after allocations only, where
     * it can have fallen. The stream-ordered pool is counted at what the program holds in
     * its own order (live), not at what it has reserved: its slack here is the profiling's
     * (frees captured and not issued yet, frees issued that the device has not run, the
     * cache they leave), which without the shim the program would have reused in stream
     * order. Counted as taken, it left 0.34-1.41 MiB of gpt-6.7b-a40's 66 MiB headroom at
     * its baseline peak + 0.5%, and the plan's bound let no pair form. */
    dh__pr.live += mem;
    if (op->kind == DH_OP_FREE_ASYNC)
        dh__pr.live -= (int64_t)op->free_bytes;
    size_t freeb, total;
    if (mem > 0 && dh_real()->cudaMemGetInfo != NULL &&
        dh_real()->cudaMemGetInfo(&freeb, &total) == cudaSuccess) {
        int64_t f = (int64_t)freeb + (int64_t)dh__s.held_free_bytes;
        size_t res = dh__pool_reserved();
        if (res > 0 && (int64_t)res > dh__pr.live)
            f = (int64_t)freeb + (int64_t)res - dh__pr.live;
        if (dh__pr.free_min < 0 || f < dh__pr.free_min)
            dh__pr.free_min = f;
    }
    if (i >= dh__pr.max) {
        if (!dh__pr.full_warned++)
            DH_WARN(SCHED, "profile: %zu operations recorded (DHELIX_PROFILE_OPS) and no "
                    "iteration repeated yet; later ones run unrecorded", i);
        return 0;
    }
    if (!dh__ev_chunks[i / DH__EV_CHUNK] &&
        !(dh__ev_chunks[i / DH__EV_CHUNK] = calloc(DH__EV_CHUNK, sizeof(dh__prec_t))))
        return 0;
    dh_prof_op_t r;
    memset(&r, 0, sizeof r);
    r.thread = (uint32_t)op->thread;
    r.stream = (uint32_t)stream_ordinal;
    snprintf(r.kind, sizeof r.kind, "%s", dh_op_kind_name(op->kind));
    r.cls = (dh_opclass_t)d->cls;
    r.sig = d->sig;
    r.shape = d->shape;
    snprintf(r.name, sizeof r.name, "%s", d->name);
    r.comm = dh__comm_index(d->comm);
    r.bytes = d->bytes;
    r.flops = d->flops;
    _Static_assert(sizeof r.p2p == sizeof d->p2p, "dh_prof_op_t.p2p holds dh_op_desc_t.p2p");
    memcpy(r.p2p, d->p2p, sizeof r.p2p);
    r.us = r.start_us = -1;
    r.mem = op->kind == DH_OP_FREE_ASYNC ? -(int64_t)op->free_bytes : mem;
    r.sync_before = dh__pr.pending_sync;
    r.dep1 = dep >= 0 && (uint64_t)dep < i ? dep + 1 : 0;
    if (dh_prof_builder_add(dh__pr.b, &r, sizes, nsizes) != DH_OK) {
        dh__pr.failed = 1;
        DH_WARN(SCHED, "profile: out of memory after %zu operations; later ones run "
                "unrecorded", i);
        return 0;
    }
    dh__pr.before_sig = dh__pr.last_sig;
    dh__pr.last_sig = r.sig;
    if (i == 0 || r.sync_before) {
        dh__close_segment();
        if (dh__pr.stopped && !dh__pr.edges) {
            /* Stopped at the synchronisation before this op, which starts an iteration. */
            dh__pr.period_first = r.sig;
            dh__pr.period_last = dh__pr.before_sig;
            dh__pr.edges = 1;
            DH_DEBUG(SCHED, "profile: iteration edges first %016llx last %016llx (at stop)",
                     (unsigned long long)dh__pr.period_first,
                     (unsigned long long)dh__pr.period_last);
        }
        dh__pr.seg_h = 0xcbf29ce484222325ull;
        dh__pr.seg_sig = r.sig;
        dh__pr.seg_sig2 = 0;
        dh__pr.seg_thread = r.thread;
        dh__pr.seg_ch = 0xcbf29ce484222325ull;
    } else if (r.thread != dh__pr.seg_thread) {
        dh__pr.seg_thread = DH__MIXED;
    }
    /* The coarse hash (scheduler/plan/phases.c dh__coarse does the same) */
    if (r.cls == DH_CLS_COMM)
        dh__pr.seg_ch = dh__fnv(dh__fnv(dh__pr.seg_ch, r.sig), r.thread);
    else if (i == 0 || r.sync_before || r.thread != dh__pr.last_thread)
        dh__pr.seg_ch = dh__fnv(dh__pr.seg_ch, 0x7468726561640000ull ^ r.thread);
    dh__pr.last_thread = r.thread;
    dh__pr.seg_h = dh__fnv(dh__fnv(dh__pr.seg_h, r.sig), r.thread);
    if (dh__pr.seg_n == 1)
        dh__pr.seg_sig2 = r.sig;
    dh__pr.seg_n++;
    dh__pr.pending_sync = 0;
    return i + 1;
}

void dh_prof_sync(void)
{
    if (dh__pr.stopped)
        return;
    dh__pr.pending_sync = 1;
    dh__close_segment();
}

void dh_prof_bracket(uint64_t idx1, cudaStream_t s, int begin)
{
    if (!idx1)
        return;
    const dh_real_t *R = dh_real();
    dh__prec_t *e = dh__ev_at(idx1 - 1);
    cudaEvent_t *ev = &e->ev[begin ? 0 : 1];
    if (!*ev && R->cudaEventCreateWithFlags(ev, cudaEventDefault) != cudaSuccess) {
        *ev = NULL;
        return;
    }
    if (R->cudaGetDevice(&e->device) != cudaSuccess || R->cudaEventRecord(*ev, s) != cudaSuccess) {
        R->cudaEventDestroy(*ev);
        *ev = NULL;
    }
}

/* Device times relative to the first recorded start. */
static void dh__harvest(size_t n)
{
    const dh_real_t *R = dh_real();
    cudaEvent_t ref = NULL;
    for (size_t i = 0; i < n && !ref; i++)
        ref = dh__ev_at(i)->ev[0];
    if (!ref)
        return;
    for (size_t i = 0; i < n; i++) {
        dh__prec_t *e = dh__ev_at(i);
        if (!e->ev[0] || !e->ev[1])
            continue;
        R->cudaSetDevice(e->device);
        float a = 0, b = 0;
        if (R->cudaEventSynchronize(e->ev[1]) == cudaSuccess &&
            R->cudaEventElapsedTime(&a, ref, e->ev[0]) == cudaSuccess &&
            R->cudaEventElapsedTime(&b, e->ev[0], e->ev[1]) == cudaSuccess)
            dh_prof_builder_time(dh__pr.b, i, b * 1000.0, a * 1000.0);
    }
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++)
            if (dh__ev_at(i)->ev[k])
                R->cudaEventDestroy(dh__ev_at(i)->ev[k]);
}

/* The trace holds the last DH__TRACE_OPS recorded ops at most: the steady state, at a size
 * a trace viewer opens. */
#define DH__TRACE_OPS 200000

static void dh__write_trace(const char *path, int rank, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        DH_WARN(SCHED, "profile: cannot write the trace %s", path);
        return;
    }
    fprintf(f, "{\"traceEvents\":[\n");
    int first = 1;
    for (size_t i = n > DH__TRACE_OPS ? n - DH__TRACE_OPS : 0; i < n; i++) {
        double us, start_us;
        const dh_prof_op_t *o = dh_prof_builder_op(dh__pr.b, i, &us, &start_us);
        if (us < 0)
            continue;
        fprintf(f, "%s{\"name\":\"", first ? "" : ",\n");
        for (const char *c = o->name; *c; c++)
            if (*c == '"' || *c == '\\')
                fprintf(f, "\\%c", *c);
            else if ((unsigned char)*c >= 0x20)
                fputc(*c, f);
        fprintf(f, "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,"
                   "\"tid\":%u,\"args\":{\"op\":%zu,\"thread\":%u,\"kind\":\"%s\"}}",
                dh_opclass_name(o->cls), start_us, us, rank, o->stream, i, o->thread, o->kind);
        first = 0;
    }
    fprintf(f, "\n],\"displayTimeUnit\":\"ms\"}\n");
    fclose(f);
}

/* The profile's header fields (the ops and comms are the recorder's). */
static void dh__header(dh_profile_t *p)
{
    memset(p, 0, sizeof *p);
    p->version = DH_PROFILE_VERSION;
    p->rank = dh_nccl_global_rank();
    p->world = dh_nccl_world_size() > 0 ? dh_nccl_world_size() : -1;
    snprintf(p->layout, sizeof p->layout, "%.*s", (int)sizeof p->layout - 1, dh_config()->layout);
    gethostname(p->host, sizeof p->host - 1);
    const char *dev = getenv("VGPU_DEVICE");
    snprintf(p->device, sizeof p->device, "%s%s", dev ? "vgpu " : "", dev ? dev : "");
    const char *mc = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    p->max_connections = mc && atoi(mc) > 0 ? atoi(mc) : 8;
    p->blas_ws_bytes = (int64_t)dh__ws_seen();
    p->device_free_bytes = dh__pr.free_min;
    p->ncomms = dh__pr.ncomms;
    p->comms = dh__pr.comm_info;
    p->sync_at_end = dh__pr.stopped || dh__pr.pending_sync;
}

/* Frees what the recorder holds (after the profile was written or taken). */
static void dh__release(void)
{
    dh_prof_builder_free(dh__pr.b);
    dh__pr.b = NULL;
    for (size_t c = 0; c < DH__EV_CHUNKS; c++) {
        free(dh__ev_chunks[c]);
        dh__ev_chunks[c] = NULL;
    }
    free(dh__pr.seg_hash);
    free(dh__pr.seg_first);
    free(dh__pr.seg_threads);
    free(dh__pr.seg_coarse);
    dh__pr.seg_hash = dh__pr.seg_first = dh__pr.seg_coarse = NULL;
    dh__pr.seg_threads = NULL;
    dh__pr.nsegs = 0;
}

int dh_prof_stopped(void) { return dh__pr.stopped; }

int dh_prof_period_edges(uint64_t *first, uint64_t *last)
{
    if (!dh__pr.stopped || !dh__pr.edges)
        return 0;
    *first = dh__pr.period_first;
    *last = dh__pr.period_last;
    return 1;
}

int dh_prof_period(size_t *p, size_t *next, uint64_t *iter)
{
    if (!dh__pr.stopped || !dh__pr.period)
        return 0;
    *p = dh__pr.period;
    *next = dh__pr.period_next;
    *iter = dh__pr.period_iter;
    return 1;
}

int dh_prof_take(char **buf, size_t *len, size_t *nops, char *err, size_t errlen)
{
    size_t n = dh__pr.b ? dh_prof_builder_nops(dh__pr.b) : 0;
    *nops = n;
    *buf = NULL;
    *len = 0;
    if (!n) {
        snprintf(err, errlen, "nothing was recorded");
        return -1;
    }
    dh__harvest(n);
    dh_profile_t p;
    dh__header(&p);
    int rc = dh_prof_builder_render(dh__pr.b, &p, buf, len, err, errlen) == DH_OK ? 0 : -1;
    dh__release();
    return rc;
}

void dh_prof_finish(void)
{
    size_t n = dh__pr.b ? dh_prof_builder_nops(dh__pr.b) : 0;
    if (!n)
        return;
    dh__harvest(n);
    dh_profile_t p;
    dh__header(&p);
    dh_strbuf_t path = DH_STRBUF_INIT;
    char err[256];
    if (dh_path_expand_self(dh_config()->profile, &path) != DH_OK) {
        DH_ERROR(SCHED, "profile: DHELIX_PROFILE=%s is not a usable path", dh_config()->profile);
    } else if (dh_prof_builder_save(dh__pr.b, &p, dh_strbuf_str(&path), err, sizeof err) !=
               DH_OK) {
        DH_ERROR(SCHED, "profile: %s", err);
    } else {
        dh_strbuf_t tp = DH_STRBUF_INIT;
        const char *s = dh_strbuf_str(&path);
        size_t len = strlen(s);
        if (len > 5 && strcmp(s + len - 5, ".json") == 0)
            len -= 5;
        dh_strbuf_append(&tp, s, len);
        dh_strbuf_puts(&tp, ".trace.json");
        dh__write_trace(dh_strbuf_str(&tp), p.rank < 0 ? 0 : p.rank, n);
        DH_INFO(SCHED, "profile: %zu operations (%zu distinct) written to %s (trace %s)", n,
                dh_prof_builder_ndistinct(dh__pr.b), s, dh_strbuf_str(&tp));
        dh_strbuf_free(&tp);
    }
    dh_strbuf_free(&path);
    dh__release();
}
