/* planner.c: profiles -> sections -> phases -> aligned pairs -> groups (planner.h). */
#include "planner_int.h"
#include "moves.h"
#include "plan_int.h"
#include "memsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dh_plan_opts_init(dh_plan_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->max_extra_mem_bytes = 2147483648.0;
    o->max_segment = 0;
    o->group_cost_us = DH_PLAN_GROUP_COST_US;
    o->fold_below_us = DH_PLAN_FOLD_BELOW_US;
    o->policy = "all";
}

/* What one planning run carries around. */
typedef struct dh__pl {
    const dh_profile_t *const *prof;
    int n;
    const dh_plan_opts_t *o;
    dh__tmpl_t *tmpl;
    char (*names)[256];
    dh_align_model_t model;
    int agree;                      /* the job's ranks vote on each pair (several processes) */
    char *err;
    size_t errlen;
} dh__pl_t;

static void dh__warnf(const dh__pl_t *pl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void dh__warnf(const dh__pl_t *pl, const char *fmt, ...)
{
    if (pl->o->warn == NULL)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pl->o->warn(pl->o->ctx, msg);
}

static void dh__progress(const dh__pl_t *pl, const char *what, size_t done, size_t total)
{
    if (pl->o->progress)
        pl->o->progress(pl->o->ctx, what, done, total);
}

/* ---- profiles that must agree ---- */

static dh_status_t dh__agree(const dh__pl_t *pl)
{
    int world_from = -1, layout_from = -1;
    for (int k = 0; k < pl->n; k++) {
        const dh_profile_t *p = pl->prof[k];
        if (p->world > 0 && world_from < 0)
            world_from = k;
        else if (p->world > 0 && p->world != pl->prof[world_from]->world) {
            dh__errf(pl->err, pl->errlen, pl->names[k], "world %d differs from %s's %d", p->world,
                     pl->names[world_from], pl->prof[world_from]->world);
            return DH_ERR_PARSE;
        }
        if (p->layout[0] && layout_from < 0)
            layout_from = k;
        else if (p->layout[0] && strcmp(p->layout, pl->prof[layout_from]->layout) != 0) {
            dh__errf(pl->err, pl->errlen, pl->names[k], "layout \"%s\" differs from %s's \"%s\"",
                     p->layout, pl->names[layout_from], pl->prof[layout_from]->layout);
            return DH_ERR_PARSE;
        }
        for (int q = 0; q < k && p->rank >= 0; q++) {
            if (pl->prof[q]->rank == p->rank) {
                dh__errf(pl->err, pl->errlen, pl->names[k], "rank %d is also the rank of %s",
                         p->rank, pl->names[q]);
                return DH_ERR_PARSE;
            }
        }
    }
    return DH_OK;
}

/* 1 when two profiles' templates are the same program: sigs, threads and syncs. */
static int dh__same_template(const dh__tmpl_t *x, const dh__tmpl_t *y)
{
    if (x->it.n != y->it.n)
        return 0;
    for (size_t i = 0; i < x->it.n; i++) {
        const dh_prof_op_t *a = &x->ops[i], *b = &y->ops[i];
        if (a->sig != b->sig || a->thread != b->thread || a->sync_before != b->sync_before)
            return 0;
    }
    return 1;
}

/* ---- one section ---- */

typedef struct dh__sect {
    const int *members;             /* profile indices; members[0] gives the template */
    int nmembers;
    dh_align_op_t *aops;            /* the template as the DP sees it */
    dh_memsim_op_t *mops;           /* the template as memsim.h sees it */
    double fixed_mem;               /* the runtime's own memory pairing makes it allocate:
                                       both strands' cuBLAS workspaces when it runs GEMMs */
    double saved_us;
    dh__orders_t *ord;              /* orders of collectives (orders.c); NULL: one section */
    const dh_align_op_t *root_aops; /* mirroring: its root's DP input; NULL for a root */
    const long *match;              /* mirroring: its ops matched to its root's */
    const uint8_t *alone;           /* its root's ops a section of the cluster lacks, or NULL */
    dh__dpcache_t cache;            /* its pairs' alignments by input */
    int no_moves;                   /* the cycle check refused this section's moves */
    const size_t *moved;            /* per B phase: ops moved into it (moves.h), or NULL */
    dh_tsim_op_t *tops;             /* the template as timesim.h replays it */
    dh_tsim_t ts;                   /* the replay's model and scratch */
} dh__sect_t;

/* Ops, ranks and times of a section, averaged over its members. */
static dh_status_t dh__section_ops(const dh__pl_t *pl, const dh__sect_t *x, dh_plan_section_t *s)
{
    const dh__tmpl_t *t = &pl->tmpl[x->members[0]];
    size_t n = t->it.n;
    s->ops = calloc(n, sizeof(*s->ops));
    s->ranks = calloc((size_t)x->nmembers, sizeof(*s->ranks));
    if (s->ops == NULL || s->ranks == NULL)
        return DH_ERR_NOMEM;
    s->nops = n;
    for (size_t i = 0; i < n; i++) {
        dh_plan_op_t *op = &s->ops[i];
        const dh_prof_op_t *src = &t->ops[i];
        op->sig = src->sig;
        op->shape = src->shape;
        memcpy(op->kind, src->kind, sizeof(op->kind));
        op->cls = src->cls;
        memcpy(op->name, src->name, sizeof(op->name));
        double sum = 0;
        int known = 0;
        for (int m = 0; m < x->nmembers; m++) {
            const dh__tmpl_t *tm = &pl->tmpl[x->members[m]];
            op->shape_dynamic |= tm->shape_dyn[i] || tm->ops[i].shape != src->shape;
            if (tm->us[i] >= 0) {
                sum += tm->us[i];
                known++;
            }
        }
        op->us = known ? sum / known : -1;
    }
    for (int m = 0; m < x->nmembers; m++) {
        const dh__tmpl_t *tm = &pl->tmpl[x->members[m]];
        s->baseline_us += tm->baseline_us / x->nmembers;
        int rank = pl->prof[x->members[m]]->rank;
        if (rank >= 0)
            s->ranks[s->nranks++] = rank;
    }
    s->fingerprint = dh_plan_fingerprint(s->ops, s->nops);
    return DH_OK;
}

/* The template as timesim.h replays it: the ops' mean times, streams and events, one
 * hardware queue when the profile ran with CUDA_DEVICE_MAX_CONNECTIONS=1, and the
 * interference of the DP's model (a class that co-runs at efficiency e loses 1 - e of its
 * rate). */
static dh_status_t dh__time_ops(const dh__pl_t *pl, dh__sect_t *x, const dh_plan_section_t *s)
{
    const dh_profile_t *p = pl->prof[x->members[0]];
    const dh__tmpl_t *t = &pl->tmpl[x->members[0]];
    if ((x->tops = calloc(s->nops ? s->nops : 1, sizeof(*x->tops))) == NULL)
        return DH_ERR_NOMEM;
    for (size_t i = 0; i < s->nops; i++) {
        const dh_prof_op_t *src = &t->ops[i];
        dh_tsim_op_t *o = &x->tops[i];
        o->us = s->ops[i].us;
        o->cls = src->cls;
        o->stream = src->stream;
        o->event = strcmp(src->kind, "EVENT_RECORD") == 0 ? DH_TSIM_RECORD
                   : strcmp(src->kind, "EVENT_WAIT") == 0 ? DH_TSIM_WAIT : 0;
    }
    double e = pl->model.eff[DH_CLS_COMPUTE][DH_CLS_COMM];
    double f = pl->model.eff[DH_CLS_COMM][DH_CLS_COMPUTE];
    x->ts = (dh_tsim_t){.ops = x->tops, .nops = s->nops, .one_queue = p->max_connections == 1,
                        .slow_compute = e > 0 && e < 1 ? 1 - e : 0,
                        .slow_comm = f > 0 && f < 1 ? 1 - f : 0};
    return DH_OK;
}

/* The template as the DP sees it, with the pinned communicators of the first member. */
static dh_status_t dh__align_ops(const dh__pl_t *pl, dh__sect_t *x, const dh_plan_section_t *s)
{
    const dh_profile_t *p = pl->prof[x->members[0]];
    const dh__tmpl_t *t = &pl->tmpl[x->members[0]];
    x->aops = calloc(s->nops, sizeof(*x->aops));
    int *pinned = calloc((size_t)(p->ncomms ? p->ncomms : 1), sizeof(*pinned));
    if (x->aops == NULL || pinned == NULL) {
        free(pinned);
        return DH_ERR_NOMEM;
    }
    for (int c = 0; c < p->ncomms && pl->o->pinned; c++)
        pinned[c] = pl->o->pinned(pl->o->ctx, &p->comms[c]) != 0;
    for (size_t i = 0; i < s->nops; i++) {
        const dh_prof_op_t *src = &t->ops[i];
        dh_align_op_t *a = &x->aops[i];
        a->us = s->ops[i].us > 0 ? s->ops[i].us : 0;
        a->cls = src->cls;
        a->comm = src->comm;
        a->pinned = src->comm >= 0 && src->comm < p->ncomms && pinned[src->comm];
        a->sig = src->sig;
    }
    free(pinned);
    DH_CHECK(dh__time_ops(pl, x, s));
    DH_CHECK(dh__mem_ops(p, t->ops, s, x->aops, &x->mops, &x->fixed_mem));
    return dh__transfer_times(p, t, x->aops, s->nops);
}

/* A mirroring section's DP input (planner_int.h, dh__mirror_t): its root's for the ops
 * every section of the cluster has, bookkeeping for the others. The root plans first, with
 * its own input less those others. */
static void dh__mirror_times(const dh__sect_t *x, const dh_plan_section_t *s)
{
    if (x->alone == NULL)
        return;
    for (size_t i = 0; i < s->nops; i++) {
        dh_align_op_t *op = &x->aops[i];
        long m = x->root_aops != NULL ? x->match[i] : (long)i;
        if (m >= 0 && !x->alone[m]) {
            if (x->root_aops != NULL)
                op->us = x->root_aops[m].us;
            continue;
        }
        /* An op not every section of the cluster has must not change what is legal either
         * (a copy makes its segment pairable with compute). */
        op->us = 0;
        if (op->cls == DH_CLS_COMPUTE || op->cls == DH_CLS_COPY)
            op->cls = DH_CLS_EVENT;
    }
}

/* 1 when every order keeps all of A's collectives before B's: the serial schedule keeps it. */
static int dh__orders_serial(const dh_align_order_t *o, int n)
{
    for (int k = 0; k < n; k++)
        for (size_t q = 1; q < o[k].n; q++)
            if (o[k].from_b[q - 1] && !o[k].from_b[q])
                return 0;
    return 1;
}

/* One phase's units as the DP sees them (dh_align_fold), or one per op when folding is off.
 * *cut is malloc'ed (n + 1 entries). */
static dh_status_t dh__units(const dh__pl_t *pl, const dh_align_op_t *ops, size_t n,
                             size_t **cut, size_t *nunits)
{
    if ((*cut = malloc((n + 1) * sizeof(**cut))) == NULL)
        return DH_ERR_NOMEM;
    if (pl->o->fold_below_us >= 0) {
        *nunits = dh_align_fold(ops, n, pl->o->fold_below_us, *cut);
    } else {
        for (size_t i = 0; i <= n; i++)
            (*cut)[i] = i;
        *nunits = n;
    }
    return DH_OK;
}

/* The DP's input for one pair: its units, L, and the orders of collectives it follows. */
typedef struct dh__pairdp {
    const dh_align_op_t *a, *b;
    size_t na, nb;
    size_t *cuta, *cutb, nua, nub;
    int serial_ok;                  /* the serial schedule keeps the orders it follows */
    size_t *need;                   /* [nb]: A's ops each B op must follow (align.h), or NULL */
    const dh_memsim_op_t *mops;     /* A's ops then B's, as memsim.h sees them */
    int L;                          /* the DP's longest segment; 0: the default rule */
} dh__pairdp_t;

/* For F phase k+1 after B phase k: how many of B's ops each F op must follow, from the
 * profile's dependencies (docs/plan-format.md, "dep"); *out NULL when none. */
static dh_status_t dh__pair_need(const dh__pl_t *pl, const dh__sect_t *x,
                                 const dh_plan_section_t *s, int k, size_t **out)
{
    const dh__tmpl_t *t = &pl->tmpl[x->members[0]];
    const dh_plan_phase_t *pb = &s->phases[k], *pf = &s->phases[k + 1];
    size_t *need = NULL;
    for (size_t j = 0; j < pf->n; j++) {
        int64_t d1 = t->ops[pf->first + j].dep1;
        if (d1 <= 0)
            continue;
        /* the template's op index of the dependency */
        int64_t dt = d1 - 1 - (int64_t)t->it.first;
        if (dt < (int64_t)pb->first)
            continue;   /* done before the pair starts */
        size_t n = dt >= (int64_t)(pb->first + pb->n) ? pb->n : (size_t)dt - pb->first + 1;
        if (need == NULL && (need = calloc(pf->n, sizeof *need)) == NULL)
            return DH_ERR_NOMEM;
        need[j] = n;
    }
    /* With posts moved into the backward, the forward's own point-to-point operations keep
     * their place after them (moves.h: every rank's point-to-point operations stay in
     * program order among themselves), so they follow all of it. */
    for (size_t j = 0; x->moved != NULL && x->moved[k] > 0 && j < pf->n; j++) {
        if (!dh__move_is_post(pl->prof[x->members[0]], &t->ops[pf->first + j]))
            continue;
        if (need == NULL && (need = calloc(pf->n, sizeof *need)) == NULL)
            return DH_ERR_NOMEM;
        need[j] = pb->n;
    }
    *out = need;
    return DH_OK;
}

/* The DP's longest segment: the caller's, or 8 units (4 for phases of more than
 * DH_PLAN_LONG_SEG_UNITS units, where the DP's time grows with L squared). */
static int dh__default_seg(const dh__pl_t *pl, const dh__pairdp_t *q)
{
    if (pl->o->max_segment > 0)
        return pl->o->max_segment;
    return (q->nua > q->nub ? q->nua : q->nub) <= DH_PLAN_LONG_SEG_UNITS ? 8 : 4;
}

/* Runs the DP of one pair, following the orders of collectives earlier sections chose, or
 * takes its result from an earlier pair with the same input (dpcache.c). */
static dh_status_t dh__run_dp(const dh__pl_t *pl, dh__sect_t *x, int sec, int pair,
                              dh__pairdp_t *q, dh_align_result_t *r)
{
    int L = q->L > 0 ? q->L : dh__default_seg(pl, q);
    /* The bound is of all that pairing costs: the runtime's own memory comes first (the
     * caller pairs nothing when the bound leaves no room for it). */
    double bound = pl->o->max_extra_mem_bytes;
    if (bound >= 0)
        bound = bound > x->fixed_mem ? bound - x->fixed_mem : 0;
    dh_align_params_t prm = {.max_seg = L,
                             .max_extra_mem = bound,
                             .group_cost_us = pl->o->group_cost_us,
                             .a_cuts = q->cuta, .a_nunits = q->nua,
                             .b_cuts = q->cutb, .b_nunits = q->nub, .b_need = q->need};
    dh_align_order_t *orders = NULL;
    uint8_t *seq = NULL;
    if (x->ord != NULL)
        DH_CHECK(dh__orders_for(x->ord, pair, pl->prof[x->members[0]], q->a, q->na, q->b, q->nb,
                                &orders, &prm.norders, &seq));
    prm.orders = orders;
    q->serial_ok = dh__orders_serial(orders, prm.norders);
    uint64_t *key = NULL;
    size_t nkey = 0;
    dh_status_t st = dh__dpcache_key(q->a, q->na, q->b, q->nb, q->mops, q->need, orders,
                                     prm.norders, L, &key, &nkey);
    if (st == DH_OK && dh__dpcache_get(&x->cache, key, nkey, &st, r)) {
        free(key);
    } else if (st == DH_OK) {
        int fits;
        st = dh__align_fit(q->a, q->na, q->b, q->nb, q->mops, pl->agree, &pl->model, &prm, r,
                           &fits);
        if (st == DH_OK && !fits) {
            /* No gain claimed: the pair stays serial unless orders of collectives force
             * this alignment (dh__align_pair). */
            dh__warnf(pl, "section %d: pair %d finds no alignment within the memory bound as "
                          "the runtime holds a pair (memsim.h); it stays serial", sec, pair);
            r->cost_us = r->serial_us;
        }
        if (st == DH_OK || st == DH_ERR_RANGE || st == DH_ERR_STATE) {
            dh_status_t cst = dh__dpcache_put(&x->cache, key, nkey, st, r);
            if (cst != DH_OK)
                st = cst;
        } else {
            free(key);
        }
    }
    free(orders);
    free(seq);
    return st;
}

/* Leaves B phase k and F phase k+1 serial: unpaired, and program order for the collectives
 * of theirs that no earlier section chose an order for. */
static dh_status_t dh__unpair(const dh__pl_t *pl, dh__sect_t *x, dh_plan_section_t *s, int k,
                              int pair, const dh__pairdp_t *q)
{
    s->phases[k].paired_with = s->phases[k + 1].paired_with = -1;
    if (x->ord != NULL)
        DH_CHECK(dh__orders_record(x->ord, pair, pl->prof[x->members[0]], q->a, q->na, q->b,
                                   q->nb, NULL));
    return DH_ERR_RANGE;
}

/* The aligned pair's groups and what it saves. */
static dh_status_t dh__take_pair(const dh__pl_t *pl, dh__sect_t *x, dh_plan_section_t *s,
                                 dh__groups_t *gs, int k, int pair, const dh__pairdp_t *q,
                                 const dh_align_result_t *r)
{
    const dh_plan_phase_t *pb = &s->phases[k], *pf = &s->phases[k + 1];
    if (x->ord != NULL)
        DH_CHECK(dh__orders_record(x->ord, pair, pl->prof[x->members[0]], q->a, q->na, q->b,
                                   q->nb, r));
    for (size_t i = pb->first; i < pb->first + pb->n; i++)
        s->ops[i].phase = k;
    for (size_t i = pf->first; i < pf->first + pf->n; i++)
        s->ops[i].phase = k + 1;
    double paired_us = 0;
    DH_CHECK(dh__emit_pair(s, gs, pb->first, pf->first, r, q->cuta, q->cutb, &x->ts,
                           &paired_us));
    double serial_us = dh_tsim_serial(&x->ts, pb->first, pb->n + pf->n);
    if (serial_us < 0 || paired_us < 0)
        return DH_ERR_NOMEM;
    x->saved_us += serial_us - paired_us;
    return DH_OK;
}

/* What the groups of alignment r of B phase k and F phase k+1 take in the replay
 * (timesim.h), their splits included; *us < 0 when out of memory. The ops' strand and group
 * fields it writes are written again by whichever alignment is taken. */
static dh_status_t dh__replay_pair(dh__sect_t *x, dh_plan_section_t *s, int k,
                                   const dh__pairdp_t *q, const dh_align_result_t *r, double *us)
{
    dh__groups_t tmp = {0};
    dh_status_t st = dh__emit_pair(s, &tmp, s->phases[k].first, s->phases[k + 1].first, r, q->cuta,
                                   q->cutb, &x->ts, us);
    dh__groups_free(&tmp);
    return st;
}

/* The DP chooses by its fluid cost (align.h), which prices segments by their classes'
 * shares; the replay prices what the device does with them. So with the default segment
 * length L, the DP runs once more with segments of up to 1.5 L units (the DP's time grows
 * with L squared), whose groups can put a whole collective beside a longer run of the other
 * strand's kernels, and the alignment whose groups replay faster is taken (*r). */
static dh_status_t dh__longer_segments(const dh__pl_t *pl, dh__sect_t *x, dh_plan_section_t *s,
                                       int k, int sec, int pair, dh__pairdp_t *q,
                                       dh_align_result_t *r)
{
    int L0 = dh__default_seg(pl, q);
    int L1 = L0 + L0 / 2 > DH_ALIGN_MAX_SEG ? DH_ALIGN_MAX_SEG : L0 + L0 / 2;
    if (L1 <= L0)
        return DH_OK;
    dh_align_result_t r2 = {0};
    q->L = L1;
    dh_status_t st = dh__run_dp(pl, x, sec, pair, q, &r2);
    q->L = 0;
    if (st == DH_ERR_RANGE || st == DH_ERR_STATE) {
        dh_align_result_free(&r2);
        return DH_OK;   /* the first alignment stands */
    }
    double t1 = 0, t2 = 0;
    if (st == DH_OK)
        st = dh__replay_pair(x, s, k, q, r, &t1);
    if (st == DH_OK)
        st = dh__replay_pair(x, s, k, q, &r2, &t2);
    if (st == DH_OK && t2 < t1) {
        dh_align_result_t t = *r;
        *r = r2;
        r2 = t;
    }
    dh_align_result_free(&r2);
    return st;
}

/* Aligns B phase k with F phase k+1, the pair-th pair of the template, on units. Returns
 * DH_ERR_RANGE when they stay serial: too large to align, no alignment keeps the orders of
 * collectives the other sections follow, or no alignment beats running them serially once
 * its groups' overheads are paid (then without a warning: nothing to hide is no fault). A
 * section that must follow another's interleaved order keeps its alignment even then. */
static dh_status_t dh__align_pair(const dh__pl_t *pl, dh__sect_t *x, dh_plan_section_t *s,
                                  dh__groups_t *gs, int k, int sec, int pair)
{
    const dh_plan_phase_t *pb = &s->phases[k], *pf = &s->phases[k + 1];
    dh__pairdp_t q = {x->aops + pb->first, x->aops + pf->first, pb->n, pf->n, NULL, NULL, 0, 0, 1,
                      NULL, x->mops + pb->first, 0};
    dh_align_result_t r = {0};
    dh_status_t st = dh__pair_need(pl, x, s, k, &q.need);
    if (st == DH_OK)
        st = dh__units(pl, q.a, q.na, &q.cuta, &q.nua);
    if (st == DH_OK)
        st = dh__units(pl, q.b, q.nb, &q.cutb, &q.nub);
    if (st == DH_OK)
        st = dh__run_dp(pl, x, sec, pair, &q, &r);
    if (st == DH_OK && pl->o->max_segment == 0)
        st = dh__longer_segments(pl, x, s, k, sec, pair, &q, &r);
    if (st == DH_ERR_RANGE)
        dh__warnf(pl, "section %d: phases %d and %d (%zu x %zu units of %zu x %zu ops) are too "
                      "large to align; they run serially", sec, k, k + 1, q.nua, q.nub, q.na,
                  q.nb);
    else if (st == DH_ERR_STATE)
        dh__warnf(pl, "section %d: phases %d and %d cannot keep the order of collectives an "
                      "earlier section chose; they run serially", sec, k, k + 1);
    if (st == DH_ERR_RANGE || st == DH_ERR_STATE || (st == DH_OK && q.serial_ok &&
                                                     !(r.cost_us < r.serial_us)))
        st = dh__unpair(pl, x, s, k, pair, &q);
    else if (st == DH_OK)
        st = dh__take_pair(pl, x, s, gs, k, pair, &q, &r);
    dh_align_result_free(&r);
    free(q.cuta);
    free(q.cutb);
    free(q.need);
    return st;
}

/* A serial run of template ops as a group (dh__emit_serial) predicted by its replay. */
static dh_status_t dh__emit_run(dh__sect_t *x, dh_plan_section_t *s, dh__groups_t *gs,
                                size_t first, size_t n)
{
    double t = n ? dh_tsim_serial(&x->ts, first, n) : 0;
    if (t < 0)
        return DH_ERR_NOMEM;
    return dh__emit_serial(s, gs, first, n, t);
}

/* Walks the phases in template order: pairs become aligned groups, every maximal run of
 * other phases one serial group. */
static dh_status_t dh__section_groups(const dh__pl_t *pl, dh__sect_t *x, dh_plan_section_t *s,
                                      int sec)
{
    dh__groups_t gs = {0};
    dh_status_t st = DH_OK;
    size_t run_first = 0, run_n = 0, npairs = 0, done = 0;
    char what[96];
    /* A bound below the runtime's own memory leaves no room for any pair: the runtime
     * would veto each (scheduler/modes/memacct.c). */
    double bound = pl->o->max_extra_mem_bytes;
    int room = !(bound >= 0 && bound < x->fixed_mem);
    if (!room)
        dh__warnf(pl, "section %d: the memory bound (%.0f MiB) is below the shim's cuBLAS "
                      "workspaces (%.0f MiB): nothing is paired", sec, bound / 1048576.0,
                  x->fixed_mem / 1048576.0);
    for (int k = 0; k < s->nphases; k++)
        npairs += s->phases[k].kind == 'B' && s->phases[k].paired_with == k + 1;
    for (int k = 0; k < s->nphases && st == DH_OK; k++) {
        const dh_plan_phase_t *ph = &s->phases[k];
        if (room && ph->kind == 'B' && ph->paired_with == k + 1) {
            st = dh__emit_run(x, s, &gs, run_first, run_n);
            if (st == DH_OK) {
                snprintf(what, sizeof(what), "section %d: aligning pair %zu of %zu", sec,
                         done + 1, npairs);
                dh__progress(pl, what, done++, npairs);
                run_n = 0;
                st = dh__align_pair(pl, x, s, &gs, k, sec, (int)done - 1);
            }
            if (st == DH_OK) {
                k++;
                continue;
            }
            if (st != DH_ERR_RANGE)
                break;
            st = DH_OK;
        }
        for (size_t i = ph->first; i < ph->first + ph->n; i++)
            s->ops[i].phase = k;
        if (run_n == 0)
            run_first = ph->first;
        run_n += ph->n;
    }
    if (st == DH_OK)
        st = dh__emit_run(x, s, &gs, run_first, run_n);
    if (st != DH_OK) {
        dh__groups_free(&gs);
        return st;
    }
    s->groups = gs.g;
    s->ngroups = gs.n;
    double at = 0;
    for (int g = 0; g < s->ngroups; g++) {
        s->groups[g].start_us = at;
        at += s->groups[g].pred_us;
    }
    return DH_OK;
}

static void dh__check_microbatches(const dh__pl_t *pl, const dh_plan_section_t *s, int sec)
{
    int nb = 0;
    for (int k = 0; k < s->nphases; k++)
        if (s->phases[k].kind == 'B' && s->phases[k].mb + 1 > nb)
            nb = s->phases[k].mb + 1;
    if (pl->o->microbatches > 0 && nb != pl->o->microbatches)
        dh__warnf(pl, "section %d: the iteration has %d backward micro-batches, expected %d", sec,
                  nb, pl->o->microbatches);
    if (nb == 0)
        dh__warnf(pl, "section %d: no backward phase (no op on a second thread); the plan is "
                      "serial", sec);
}

static dh_status_t dh__section(const dh__pl_t *pl, dh__sect_t *x, dh_plan_section_t *s, int sec)
{
    DH_CHECK(dh__section_ops(pl, x, s));
    DH_CHECK(dh__phases(pl->tmpl[x->members[0]].ops, s->nops, &s->phases, &s->nphases));
    dh__check_microbatches(pl, s, sec);
    size_t *moved = calloc((size_t)s->nphases + 1, sizeof(*moved));
    if (moved == NULL)
        return DH_ERR_NOMEM;
    if (x->no_moves)
        s->moves_refused = dh__moves_count(pl->prof[x->members[0]], pl->tmpl[x->members[0]].ops, s);
    else
        dh__moves_apply(pl->prof[x->members[0]], pl->tmpl[x->members[0]].ops, s, moved);
    x->moved = moved;
    dh_status_t st = dh__align_ops(pl, x, s);
    if (st == DH_OK) {
        dh__mirror_times(x, s);
        st = dh__section_groups(pl, x, s, sec);
    }
    if (st == DH_OK)
        dh__moves_mark(s, moved);
    x->moved = NULL;
    free(moved);
    DH_CHECK(st);
    DH_CHECK(dh__held(pl->tmpl[x->members[0]].ops, s));
    dh_memsim_result_t ms;
    DH_CHECK(dh_memsim_section(s, x->mops, pl->agree, &ms));
    double exposed = 0;
    for (int m = 0; m < x->nmembers; m++)
        exposed += pl->tmpl[x->members[m]].exposed_comm_us / x->nmembers;
    s->si_us = s->baseline_us - x->saved_us;
    if (s->si_us < 0)
        s->si_us = 0;
    s->extra_mem_bytes = ms.extra;
    s->hidden_comm_fraction = exposed > 0 ? x->saved_us / exposed : 0;
    if (s->hidden_comm_fraction > 1)
        s->hidden_comm_fraction = 1;
    if (s->hidden_comm_fraction < 0)
        s->hidden_comm_fraction = 0;
    return DH_OK;
}

/* ---- the run ---- */

static void dh__model(const dh__pl_t *pl, dh_align_model_t *m)
{
    dh_align_model_default(m);
    const dh_pairs_t *p = pl->o->pairs;
    if (p == NULL)
        return;
    for (int x = 0; x < 3; x++)
        for (int y = 0; y < 3; y++)
            if (p->class_set[x][y])
                m->eff[x][y] = p->class_eff[x][y];
    m->measured = p->pairs;
    m->nmeasured = p->n;
}

/* Assigns each profile a section (sec[k]); returns the number of sections or -1 (err). */
static int dh__sections(const dh__pl_t *pl, int *sec, int *first_of)
{
    int ns = 0;
    for (int k = 0; k < pl->n; k++) {
        sec[k] = -1;
        for (int s = 0; s < ns && sec[k] < 0; s++)
            if (dh__same_template(&pl->tmpl[first_of[s]], &pl->tmpl[k]))
                sec[k] = s;
        if (sec[k] < 0) {
            first_of[ns] = k;
            sec[k] = ns++;
        }
    }
    for (int k = 0; k < pl->n && ns > 1; k++) {
        if (pl->prof[k]->rank < 0) {
            dh__errf(pl->err, pl->errlen, pl->names[k],
                     "rank unknown, and the profiles hold %d different iterations: a plan with "
                     "several sections needs the rank of every profile", ns);
            return -1;
        }
    }
    return ns;
}

/* A plan that pairs nothing on any rank runs passthrough (scheduler/modes/tracker.c): it costs no
 * memory, not even the workspaces, and takes the baseline's time. */
static void dh__no_pairs_no_cost(dh_plan_t *plan)
{
    for (int k = 0; k < plan->nsections; k++)
        for (int g = 0; g < plan->sections[k].ngroups; g++)
            if (plan->sections[k].groups[g].a_n > 0 && plan->sections[k].groups[g].b_n > 0)
                return;
    for (int k = 0; k < plan->nsections; k++) {
        plan->sections[k].extra_mem_bytes = 0;
        plan->sections[k].si_us = plan->sections[k].baseline_us;
        plan->sections[k].hidden_comm_fraction = 0;
    }
}

static dh_status_t dh__build_sections(dh__pl_t *pl, dh_plan_t *plan, uint8_t *refuse, int *again)
{
    *again = 0;
    int *sec = calloc((size_t)pl->n, sizeof(*sec)), *first_of = calloc((size_t)pl->n, sizeof(int));
    int *members = calloc((size_t)pl->n, sizeof(int));
    const dh__tmpl_t **tmpl = calloc((size_t)pl->n, sizeof(*tmpl));
    dh__mirror_t mir = {0};
    dh_status_t st = sec && first_of && members && tmpl ? DH_OK : DH_ERR_NOMEM;
    int ns = st == DH_OK ? dh__sections(pl, sec, first_of) : 0;
    if (ns < 0)
        st = DH_ERR_PARSE;
    else if (st == DH_OK && (plan->sections = calloc((size_t)ns, sizeof(*plan->sections))) == NULL)
        st = DH_ERR_NOMEM;
    for (int s = 0; s < ns && st == DH_OK; s++)
        tmpl[s] = &pl->tmpl[first_of[s]];
    if (st == DH_OK)
        st = dh__mirror_build(tmpl, ns, &mir);
    /* With several sections, the first to use a communicator chooses its orders of
     * collectives, the others follow (orders.c). */
    dh__orders_t ord = {0};
    dh_align_op_t **root_aops = calloc((size_t)(ns > 0 ? ns : 1), sizeof(*root_aops));
    if (st == DH_OK && root_aops == NULL)
        st = DH_ERR_NOMEM;
    for (int s = 0; s < ns && st == DH_OK; s++) {
        int r = mir.root[s];
        dh__sect_t x = {members, 0, NULL, NULL, 0, 0, ns > 1 ? &ord : NULL,
                        r != s ? root_aops[r] : NULL, mir.match[s], mir.alone[r], {0},
                        refuse[s], NULL, NULL, {0}};
        for (int k = 0; k < pl->n; k++)
            if (sec[k] == s)
                members[x.nmembers++] = k;
        plan->nsections++;
        st = dh__section(pl, &x, &plan->sections[s], s);
        if (x.cache.hits > 0)
            dh__progress(pl, "alignments reused for identical pairs", x.cache.hits,
                         x.cache.hits + (size_t)x.cache.n);
        dh__dpcache_free(&x.cache);
        free(x.mops);
        free(x.tops);
        dh_tsim_free(&x.ts);
        if (r == s && mir.alone[s] != NULL)
            root_aops[s] = x.aops;  /* what its cluster plans with */
        else
            free(x.aops);
    }
    if (st == DH_OK)
        st = dh__moves_round(plan, pl->prof, pl->tmpl, sec, pl->n, pl->o->warn, pl->o->ctx, refuse,
                             again);
    if (st == DH_OK)
        dh__no_pairs_no_cost(plan);
    for (int s = 0; root_aops != NULL && s < ns; s++)
        free(root_aops[s]);
    free(root_aops);
    dh__orders_free(&ord);
    dh__mirror_free(&mir);
    free(sec);
    free(first_of);
    free(members);
    free(tmpl);
    return st;
}

static dh_status_t dh__run(dh__pl_t *pl, dh_plan_t *plan)
{
    for (int k = 0; k < pl->n; k++) {
        char what[300];
        snprintf(what, sizeof(what), "finding the iteration of %s", pl->names[k]);
        dh__progress(pl, what, (size_t)k, (size_t)pl->n);
        DH_CHECK(dh__tmpl_build(pl->prof[k], pl->names[k], &pl->tmpl[k], pl->err, pl->errlen));
        if (pl->tmpl[k].unknown_us > 0)
            dh__warnf(pl, "%s: %zu of the iteration's %zu ops have no device time; they count "
                          "as 0 us", pl->names[k], pl->tmpl[k].unknown_us, pl->tmpl[k].it.n);
    }
    DH_CHECK(dh__agree(pl));
    dh__model(pl, &pl->model);
    /* The ranks of a job of several processes vote on each pair (scheduler/modes/agree.h): a
     * profile's world is its job's NCCL world, one process per rank. */
    for (int k = 0; k < pl->n; k++)
        pl->agree |= pl->prof[k]->world > 1;
    /* A cycle of waits refuses the moves of the sections on it; planning again without them
     * ends after at most one round per profile. */
    uint8_t *refuse = calloc((size_t)pl->n + 1, 1);
    dh_status_t st = refuse ? DH_OK : DH_ERR_NOMEM;
    for (int round = 0, again = 1; st == DH_OK && again && round <= pl->n; round++) {
        for (int k = 0; k < plan->nsections; k++)
            dh__plan_section_clear(&plan->sections[k]);
        free(plan->sections);
        plan->sections = NULL;
        plan->nsections = 0;
        st = dh__build_sections(pl, plan, refuse, &again);
    }
    free(refuse);
    if (st == DH_ERR_NOMEM)
        dh__errf(pl->err, pl->errlen, "dhelix plan", "out of memory");
    return st;
}

static void dh__plan_header(const dh__pl_t *pl, dh_plan_t *plan)
{
    plan->version = DH_PLAN_VERSION;
    snprintf(plan->created_by, sizeof(plan->created_by), "dhelix %s", dh_version());
    plan->world = -1;
    for (int k = 0; k < pl->n; k++) {
        if (plan->world < 0 && pl->prof[k]->world > 0)
            plan->world = pl->prof[k]->world;
        if (!plan->layout[0] && pl->prof[k]->layout[0])
            dh__strlcpy(plan->layout, sizeof(plan->layout), pl->prof[k]->layout);
    }
    dh__strlcpy(plan->policy, sizeof(plan->policy), pl->o->policy ? pl->o->policy : "all");
    plan->max_extra_mem_bytes = pl->o->max_extra_mem_bytes;
}

static dh_status_t dh__check_opts(const dh_plan_opts_t *o, int n, char *err, size_t errlen)
{
    if (n < 1) {
        dh__errf(err, errlen, "dhelix plan", "no profiles");
        return DH_ERR_INVALID;
    }
    if (o->max_segment < 0 || o->max_segment > DH_ALIGN_MAX_SEG) {
        dh__errf(err, errlen, "dhelix plan", "segment length %d is outside 1..%d (0: automatic)",
                 o->max_segment, DH_ALIGN_MAX_SEG);
        return DH_ERR_INVALID;
    }
    if (!(o->group_cost_us >= 0) || !isfinite(o->group_cost_us) || !isfinite(o->fold_below_us)) {
        dh__errf(err, errlen, "dhelix plan", "bad group cost or folding threshold");
        return DH_ERR_INVALID;
    }
    if (!isfinite(o->max_extra_mem_bytes) || o->microbatches < 0) {
        dh__errf(err, errlen, "dhelix plan", "bad memory bound or micro-batch count");
        return DH_ERR_INVALID;
    }
    return DH_OK;
}

/* What pairing holds must fit in what the devices had free at the program's peak when
 * profiled (DESIGN.md invariant 11). The DP keeps its bound: with the free memory as its
 * bound it pruned pairs section by section, and one run in about fifteen of such a plan on
 * TP=2 x DP=2 (gpt-tiny, a device of the baseline's peak + 1 MiB) issued one
 * communicator's collectives in different orders on two ranks (not understood; issue 27
 * reports the same mismatch from a divergence in the probe iteration). Instead the plan's
 * max_extra_mem_bytes, which the runtime enforces with the ranks' votes (every rank gives
 * up a pair alike, modes/memacct.c), becomes the lower of the bound and the free memory
 * plus the workspace the runtime's count includes (strand 1's workspace is allocated only
 * where it fits, dispatch/workspace.c). */
static void dh__device_bound(const dh__pl_t *pl, dh_plan_t *plan)
{
    double dev = -1, ws = 0;
    for (int k = 0; k < pl->n; k++) {
        const dh_profile_t *p = pl->prof[k];
        if (p->device_free_bytes > 0 && (dev < 0 || (double)p->device_free_bytes < dev))
            dev = (double)p->device_free_bytes;
        double w = p->blas_ws_bytes >= 0 ? (double)p->blas_ws_bytes : (double)DH_PLAN_BLAS_WS_BYTES;
        ws = w > ws ? w : ws;
    }
    if (dev < 0 || (plan->max_extra_mem_bytes >= 0 && dev + ws >= plan->max_extra_mem_bytes))
        return;
    plan->max_extra_mem_bytes = dev + ws;
    dh__warnf(pl, "the device had %.2f MiB free at the program's peak when profiled: at run "
                  "time a pair that would hold more is given up on every rank "
                  "(max_extra_mem_bytes %.0f, the workspace's %.2f MiB included)",
              dev / 1048576.0, plan->max_extra_mem_bytes, ws / 1048576.0);
}

dh_status_t dh_plan_build(const dh_profile_t *const *profiles, int n, const dh_plan_opts_t *opts,
                          dh_plan_t **out, char *err, size_t errlen)
{
    double t0 = dh__now_s();
    dh_plan_opts_t defaults;
    dh_plan_opts_init(&defaults);
    const dh_plan_opts_t *o = opts ? opts : &defaults;
    *out = NULL;
    DH_CHECK(dh__check_opts(o, n, err, errlen));
    dh__pl_t pl = {profiles, n, o, NULL, NULL, {{{0}}, NULL, 0}, 0, err, errlen};
    pl.tmpl = calloc((size_t)n, sizeof(*pl.tmpl));
    pl.names = calloc((size_t)n, sizeof(*pl.names));
    dh_plan_t *plan = calloc(1, sizeof(*plan));
    dh_status_t st = pl.tmpl && pl.names && plan ? DH_OK : DH_ERR_NOMEM;
    for (int k = 0; k < n && st == DH_OK; k++) {
        if (o->names && o->names[k])
            dh__strlcpy(pl.names[k], sizeof(pl.names[k]), o->names[k]);
        else
            snprintf(pl.names[k], sizeof(pl.names[k]), "<profile %d>", k);
    }
    if (st == DH_OK) {
        dh__plan_header(&pl, plan);
        st = dh__run(&pl, plan);
        dh__device_bound(&pl, plan);
    } else {
        dh__errf(err, errlen, "dhelix plan", "out of memory");
    }
    for (int k = 0; pl.tmpl && k < n; k++)
        dh__tmpl_free(&pl.tmpl[k]);
    free(pl.tmpl);
    free(pl.names);
    if (st == DH_OK) {
        plan->planning_s = dh__now_s() - t0;
        char why[512];
        if (dh_plan_check(plan, "plan", why, sizeof(why)) != DH_OK) {
            dh__errf(err, errlen, "dhelix plan", "internal error, the plan is invalid: %s", why);
            st = DH_ERR_INTERNAL;
        }
    }
    if (st != DH_OK) {
        dh_plan_free(plan);
        return st;
    }
    *out = plan;
    return DH_OK;
}
