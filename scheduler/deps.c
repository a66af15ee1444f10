/* deps.c: what an op must follow (see deps.h). */
#include "deps.h"

#include <stdlib.h>
#include <string.h>

#include "sched_int.h"
#include "tracker.h"

/* Whether an access writes: certainly, or maybe (a kernel argument) into an allocation
 * made since young_from (op.h). */
static inline int dh__writes(const dh_op_access_t *a, uint64_t young_from)
{
    return a->write == 1 || (a->write == DH_ACCESS_MAYBE && a->born >= young_from);
}

/* Whether two access lists (n < 0: anything) overlap with at least one write (op.h); a
 * kernel's maybe-write counts for allocations made since young. */
static int dh__acc_conflict(const dh_op_access_t *x, int nx, const dh_op_access_t *y, int ny,
                            uint64_t young)
{
    if (nx < 0 || ny < 0)
        return nx != 0 && ny != 0;
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) {
            const dh_op_access_t *a = &x[i], *c = &y[j];
            /* Ranges of two different allocations that reused the same address are
             * ordered by the allocator (a free precedes the reuse), not by the shim; and
             * a decision taken on addresses could differ from rank to rank. */
            if ((dh__writes(a, young) || dh__writes(c, young)) && a->lo < c->lo + c->len &&
                c->lo < a->lo + a->len && (a->born == c->born || !a->born || !c->born))
                return 1;
        }
    return 0;
}

/* ---- footprint logs (lock held) ----
 * What every op of a stretch of the program touched, in program order, whether it is still
 * held or already issued: a dependency decision must not depend on how far the dispatcher
 * got, or two ranks could order one communicator's calls differently. Each record has a
 * key that never decreases in program order: its group (the strand-0 log of two-strand
 * modes) or its profile record (profile mode's runs). */
typedef struct dh__arec {
    uint64_t key;
    int nacc;                 /* -1: anything */
    size_t off;               /* into acc */
} dh__arec_t;

typedef struct dh__alog {
    dh__arec_t *rec;
    size_t n, cap;
    dh_op_access_t *acc;
    size_t accn, acccap;
    uint64_t last;            /* key of the latest op, +1; 0 when none */
} dh__alog_t;

static void dh__alog_reset(dh__alog_t *l) { l->n = l->accn = l->last = 0; }

static void dh__alog_add(dh__alog_t *l, const dh_op_t *op, uint64_t key)
{
    if (key + 1 > l->last)
        l->last = key + 1;
    if (op->nacc == 0)
        return;
    size_t need = op->nacc > 0 ? (size_t)op->nacc : 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        dh__arec_t *g = realloc(l->rec, cap * sizeof *g);
        if (!g)
            goto full;
        l->rec = g;
        l->cap = cap;
    }
    if (l->accn + need > l->acccap) {
        size_t cap = l->acccap ? l->acccap * 2 : 4096;
        while (cap < l->accn + need)
            cap *= 2;
        dh_op_access_t *g = realloc(l->acc, cap * sizeof *g);
        if (!g)
            goto full;
        l->acc = g;
        l->acccap = cap;
    }
    l->rec[l->n++] = (dh__arec_t){key, op->nacc, l->accn};
    if (need)
        memcpy(l->acc + l->accn, op->acc, need * sizeof *op->acc);
    l->accn += need;
    return;
full:
    /* No memory to remember it: later ops conflict with the last record. */
    if (l->n > 0) {
        l->rec[l->n - 1].nacc = -1;
        l->rec[l->n - 1].key = key;
    }
}

/* The latest key above floor of a record op conflicts with, or floor when none. Keys
 * never decrease, so the search runs from the end. */
static int64_t dh__alog_conflict(const dh__alog_t *l, const dh_op_t *op, int64_t floor,
                                 uint64_t young)
{
    for (size_t k = l->n; k-- > 0;) {
        const dh__arec_t *r = &l->rec[k];
        if ((int64_t)r->key <= floor)
            break;
        if (dh__acc_conflict(l->acc + r->off, r->nacc, op->acc, op->nacc, young))
            return (int64_t)r->key;
    }
    return floor;
}

static void dh__alog_free(dh__alog_t *l)
{
    free(l->rec);
    free(l->acc);
    memset(l, 0, sizeof *l);
}

/* Two strands: strand 0's ops of the current region, keyed by group. */
static dh__alog_t dh__s0;

/* Lock held. A strand-1 op must not run before a strand-0 op that precedes it in program
 * order and shares memory with it (a true dependency between the two micro-batches, such
 * as a pipeline stage's received activations), nor before the record of an event it waits
 * for. Returns the latest group among those strand-0 ops of the region (the log above),
 * or op->group - 1 when there is none. The op then joins that group, issued after its
 * strand-0 ops: a later group could hold strand-0 work that follows op in program order. */
int64_t dh_deps_group(const dh_op_t *op)
{
    int64_t need = (int64_t)op->group - 1;
    if (op->kind == DH_OP_EVENT_WAIT) {
        /* A wait for a record of strand 0 in this group or a later one. */
        const dh_evinst_t *i = op->shim_event;
        if (i->rec_strand == 0 && (int64_t)i->rec_group > need)
            need = (int64_t)i->rec_group;
    }
    if (op->nacc == 0)
        return need;
    /* Memory made for strand 0 during this pair (the backward of micro-batch i) that a
     * strand-1 op touches is handed over from one micro-batch to the other (a pipeline
     * stage sends a gradient the backward just produced): whichever strand-0 op wrote it,
     * all strand-0 work so far comes first. Decided from program order alone. */
    uint64_t pair0 = dh_tracker_pair_stamp();
    if (dh__s0.last > 0 && pair0 && (int64_t)dh__s0.last - 1 > need)
        for (int j = 0; j < op->nacc; j++)
            if (op->acc[j].astrand == 0 && op->acc[j].born >= pair0) {
                need = (int64_t)dh__s0.last - 1;
                break;
            }
    return dh__alog_conflict(&dh__s0, op, need,
                             atomic_load_explicit(&dh__s.young_from, memory_order_relaxed));
}

/* ---- profile mode: what each op must follow (lock held) ----
 * A run is a maximal stretch of one thread's ops (a phase: a forward on the main thread, a
 * backward on the autograd thread). Each op gets the latest op of the previous run that it
 * must follow by plan mode's rules (dh__dependency_group, with that run as strand 0): an
 * event record it waits for, memory that run allocated, memory one of its ops wrote. The
 * planner keeps the op behind it (docs/plan-format.md, "dep"). */
static dh__alog_t dh__prun[2];      /* the previous [0] and the current [1] run, by record */
static int dh__prun_thread = -1;
static uint64_t dh__prun_no;        /* runs so far */
static uint64_t dh__prun_stamp[2];  /* allocation stamp at the first op of each */

int64_t dh_deps_prof(const dh_op_t *op)
{
    if (op->thread != dh__prun_thread) {
        dh__alog_t t = dh__prun[0];
        dh__prun[0] = dh__prun[1];
        dh__prun[1] = t;
        dh__alog_reset(&dh__prun[1]);
        dh__prun_stamp[0] = dh__prun_stamp[1];
        dh__prun_stamp[1] = dh_sched_stamp();
        dh__prun_thread = op->thread;
        dh__prun_no++;
    }
    const dh__alog_t *prev = &dh__prun[0];
    int64_t need = -1;
    if (op->kind == DH_OP_EVENT_WAIT) {
        const dh_evinst_t *i = op->shim_event;
        if (i->rec_run && i->rec_run + 1 == dh__prun_no)
            need = (int64_t)i->rec_group;
    }
    if (op->nacc == 0 || prev->last == 0)
        return need;
    for (int j = 0; j < op->nacc && (int64_t)prev->last - 1 > need; j++)
        if (op->acc[j].born >= dh__prun_stamp[0] && op->acc[j].born < dh__prun_stamp[1])
            need = (int64_t)prev->last - 1;
    return dh__alog_conflict(prev, op, need, dh__prun_stamp[0]);
}

void dh_deps_s0_add(const dh_op_t *op) { dh__alog_add(&dh__s0, op, op->group); }

void dh_deps_s0_reset(void) { dh__alog_reset(&dh__s0); }

void dh_deps_prof_add(const dh_op_t *op, uint64_t rec) { dh__alog_add(&dh__prun[1], op, rec); }

uint64_t dh_deps_prof_run(void) { return dh__prun_no; }

void dh_deps_free(void)
{
    dh__alog_free(&dh__s0);
    dh__alog_free(&dh__prun[0]);
    dh__alog_free(&dh__prun[1]);
}
