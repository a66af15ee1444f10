/* deps.c: what an op must follow (see deps.h). */
#include "deps.h"

#include <stdlib.h>
#include <string.h>

#include "sched_int.h"


/* Lock held: the allocation stamp at the start of the current pair's strand-0 phase (the
 * mode's table: plan mode's tracker), 0 when no pair is under way. */
static uint64_t dh__pair_stamp(void)
{
    const dh_mode_ops_t *m = dh__mode();
    return m->pair_stamp ? m->pair_stamp() : 0;
}

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

/* ---- old allocations a strand certainly wrote (dh_deps_taint_t; lock held) ---- */

struct dh__taint_e {
    uintptr_t base;           /* 0: a free slot */
    uint64_t born;
};

static size_t dh__taint_slot(uintptr_t base, size_t cap)
{
    return (size_t)(((uint64_t)base * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

/* Whether the allocation (base, born) is in t, or where it would go. */
static struct dh__taint_e *dh__taint_find(const dh_deps_taint_t *t, uintptr_t base, uint64_t born)
{
    for (size_t k = dh__taint_slot(base, t->cap);; k = (k + 1) & (t->cap - 1)) {
        struct dh__taint_e *e = &t->e[k];
        if (e->base == 0 || (e->base == base && e->born == born))
            return e;
    }
}

static int dh__taint_grow(dh_deps_taint_t *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct dh__taint_e *old = t->e, *e = calloc(cap, sizeof *e);
    if (!e)
        return -1;
    size_t ocap = t->cap;
    t->e = e;
    t->cap = cap;
    for (size_t k = 0; k < ocap; k++)
        if (old[k].base)
            *dh__taint_find(t, old[k].base, old[k].born) = old[k];
    free(old);
    return 0;
}

void dh_deps_taint_reset(dh_deps_taint_t *t, uint64_t since)
{
    if (t->n)
        memset(t->e, 0, t->cap * sizeof *t->e);
    t->n = 0;
    t->over = 0;
    t->since = since;
}

void dh_deps_taint_add(dh_deps_taint_t *t, const dh_op_t *op)
{
    for (int j = 0; j < op->nacc && !t->over; j++) {
        const dh_op_access_t *a = &op->acc[j];
        if (a->write != 1 || !a->born || !a->abase || a->born >= t->since)
            continue;
        if ((t->n + 1) * 4 > t->cap * 3 && dh__taint_grow(t)) {
            t->over = 1; /* from now on every old allocation counts: still safe */
            break;
        }
        struct dh__taint_e *e = dh__taint_find(t, a->abase, a->born);
        if (e->base == 0) {
            *e = (struct dh__taint_e){a->abase, a->born};
            t->n++;
        }
    }
}

int dh_deps_taint_hit(const dh_deps_taint_t *t, const dh_op_t *op)
{
    if (t->n == 0 && !t->over)
        return -1;
    if (op->nacc < 0)
        return 0;
    for (int j = 0; j < op->nacc; j++) {
        const dh_op_access_t *a = &op->acc[j];
        if (!a->born || !a->abase || a->born >= t->since)
            continue;
        if (t->over || dh__taint_find(t, a->abase, a->born)->base)
            return j;
    }
    return -1;
}

void dh_deps_taint_free(dh_deps_taint_t *t)
{
    free(t->e);
    memset(t, 0, sizeof *t);
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

/* Two strands: strand 0's ops of the current region, keyed by group; the old allocations
 * they certainly wrote during the current pair (plan mode), or the region (strands mode, or
 * a plan without phases); the stamp at the region's start. */
static dh__alog_t dh__s0;
static dh_deps_taint_t dh__s0_taint;
static uint64_t dh__s0_since;

/* What "old" means for dh__s0_taint now: made before the pair, else before the region. */
static uint64_t dh__s0_old(void)
{
    uint64_t p = dh__pair_stamp();
    return p ? p : dh__s0_since;
}

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
    uint64_t pair0 = dh__pair_stamp();
    if (dh__s0.last > 0 && (int64_t)dh__s0.last - 1 > need) {
        int all = 0;
        for (int j = 0; pair0 && j < op->nacc && !all; j++)
            all = op->acc[j].astrand == 0 && op->acc[j].born >= pair0;
        /* An older allocation strand 0 certainly wrote during the pair: other strand-0 ops
         * may have written the rest of it unseen (dh_deps_taint_t). */
        if (!all && dh__s0_taint.since == dh__s0_old())
            all = dh_deps_taint_hit(&dh__s0_taint, op) >= 0;
        if (all)
            need = (int64_t)dh__s0.last - 1;
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
static dh_deps_taint_t dh__prun_taint[2]; /* the old allocations each certainly wrote */

int64_t dh_deps_prof(const dh_op_t *op)
{
    if (op->thread != dh__prun_thread) {
        dh__alog_t t = dh__prun[0];
        dh__prun[0] = dh__prun[1];
        dh__prun[1] = t;
        dh__alog_reset(&dh__prun[1]);
        dh__prun_stamp[0] = dh__prun_stamp[1];
        dh__prun_stamp[1] = dh_sched_stamp();
        dh_deps_taint_t tt = dh__prun_taint[0];
        dh__prun_taint[0] = dh__prun_taint[1];
        dh__prun_taint[1] = tt;
        dh_deps_taint_reset(&dh__prun_taint[1], dh__prun_stamp[1]);
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
    if ((int64_t)prev->last - 1 > need && dh_deps_taint_hit(&dh__prun_taint[0], op) >= 0)
        need = (int64_t)prev->last - 1;
    return dh__alog_conflict(prev, op, need, dh__prun_stamp[0]);
}

void dh_deps_s0_add(const dh_op_t *op)
{
    dh__alog_add(&dh__s0, op, op->group);
    uint64_t old = dh__s0_old();
    if (dh__s0_taint.since != old)
        dh_deps_taint_reset(&dh__s0_taint, old); /* a new pair */
    dh_deps_taint_add(&dh__s0_taint, op);
}

void dh_deps_s0_reset(void)
{
    dh__alog_reset(&dh__s0);
    dh__s0_since = dh_sched_stamp();
    dh_deps_taint_reset(&dh__s0_taint, dh__s0_old());
}

int64_t dh_deps_s0_last(void) { return (int64_t)dh__s0.last - 1; }

void dh_deps_prof_add(const dh_op_t *op, uint64_t rec)
{
    dh__alog_add(&dh__prun[1], op, rec);
    dh_deps_taint_add(&dh__prun_taint[1], op);
}

uint64_t dh_deps_prof_run(void) { return dh__prun_no; }

void dh_deps_free(void)
{
    dh__alog_free(&dh__s0);
    dh__alog_free(&dh__prun[0]);
    dh__alog_free(&dh__prun[1]);
    dh_deps_taint_free(&dh__s0_taint);
    dh_deps_taint_free(&dh__prun_taint[0]);
    dh_deps_taint_free(&dh__prun_taint[1]);
}
