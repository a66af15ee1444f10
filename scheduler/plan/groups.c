/* groups.c: a section's co-execution groups, from serial runs and aligned pairs
 * (planner_int.h). */
#include "planner_int.h"

#include <stdlib.h>
#include <string.h>

void dh__groups_free(dh__groups_t *gs)
{
    for (int i = 0; i < gs->n; i++)
        free(gs->g[i].order);
    free(gs->g);
    memset(gs, 0, sizeof(*gs));
}

static double dh__op_us(const dh_plan_op_t *op)
{
    return op->us > 0 ? op->us : 0;
}

/* Strand-a ops [first, first+n) appended to the last group when that one is strand a
 * alone and ends right before first: the runtime puts no barrier between two strand-a
 * groups, so splitting them would only add a group. Returns the group, or NULL when the
 * last group cannot take them (or out of memory: *nomem). */
static dh_plan_group_t *dh__extend_a(dh__groups_t *gs, size_t first, size_t n, int *nomem)
{
    *nomem = 0;
    if (gs->n == 0)
        return NULL;
    dh_plan_group_t *g = &gs->g[gs->n - 1];
    if (g->b_n != 0 || g->a_first + g->a_n != first)
        return NULL;
    char *order = realloc(g->order, g->a_n + n + 1);
    if (order == NULL) {
        *nomem = 1;
        return NULL;
    }
    memset(order + g->a_n, 'a', n);
    order[g->a_n + n] = '\0';
    g->order = order;
    g->a_n += n;
    return g;
}

/* A new group with room for nletters order letters. */
static dh_plan_group_t *dh__group_new(dh__groups_t *gs, size_t nletters)
{
    if (gs->n == gs->cap) {
        int cap = gs->cap ? gs->cap * 2 : 64;
        dh_plan_group_t *g = realloc(gs->g, (size_t)cap * sizeof(*g));
        if (g == NULL)
            return NULL;
        gs->g = g;
        gs->cap = cap;
    }
    dh_plan_group_t *g = &gs->g[gs->n];
    memset(g, 0, sizeof(*g));
    if ((g->order = malloc(nletters + 1)) == NULL)
        return NULL;
    g->order[nletters] = '\0';
    gs->n++;
    return g;
}

/* Gives template ops [first, first+n) their strand and group. */
static void dh__assign(dh_plan_section_t *s, size_t first, size_t n, int strand, int group)
{
    for (size_t k = first; k < first + n; k++) {
        s->ops[k].strand = (int8_t)strand;
        s->ops[k].group = group;
    }
}

dh_status_t dh__emit_serial(dh_plan_section_t *s, dh__groups_t *gs, size_t first, size_t n,
                            double pred_us)
{
    if (n == 0)
        return DH_OK;
    int nomem;
    dh_plan_group_t *g = dh__extend_a(gs, first, n, &nomem);
    if (nomem)
        return DH_ERR_NOMEM;
    if (g == NULL) {
        if ((g = dh__group_new(gs, n)) == NULL)
            return DH_ERR_NOMEM;
        g->a_first = first;
        g->a_n = n;
        memset(g->order, 'a', n);
    }
    if (pred_us < 0)
        for (size_t k = first; k < first + n; k++)
            g->pred_us += dh__op_us(&s->ops[k]);
    else
        g->pred_us += pred_us;
    dh__assign(s, first, n, 0, gs->n - 1);
    return DH_OK;
}

/* One strand's next unit in a paired group: template ops [at, end) and what the issue
 * order needs of them. */
typedef struct dh__unit_cur {
    const size_t *cut;      /* unit boundaries relative to base */
    size_t base, u;         /* the phase's first template op; the current unit */
} dh__unit_cur_t;

/* The end (template op) of the unit starting at template op at. */
static size_t dh__unit_end(dh__unit_cur_t *c, size_t at)
{
    while (c->cut[c->u] + c->base < at)
        c->u++;
    return c->cut[c->u + 1] + c->base;
}

static int dh__has_comm(const dh_plan_op_t *ops, size_t first, size_t end)
{
    for (size_t k = first; k < end; k++)
        if (ops[k].cls == DH_CLS_COMM)
            return 1;
    return 0;
}

/* The issue order of a paired group, unit by unit (a unit's ops are issued together, in
 * program order): both strands' units by predicted start (the running sum of solo times
 * from the group's start), a unit holding communication first on a tie (with one hardware
 * queue it must be issued first to run under the other strand's compute), then strand a. */
static void dh__merge_order(const dh_plan_op_t *ops, const dh_plan_group_t *g,
                            dh__unit_cur_t *ua, dh__unit_cur_t *ub, char *order)
{
    size_t pa = g->a_first, pb = g->b_first, enda = pa + g->a_n, endb = pb + g->b_n, k = 0;
    double ta = 0, tb = 0;
    while (pa < enda || pb < endb) {
        size_t ea = pa < enda ? dh__unit_end(ua, pa) : pa;
        size_t eb = pb < endb ? dh__unit_end(ub, pb) : pb;
        int take_a;
        if (pa == enda)
            take_a = 0;
        else if (pb == endb)
            take_a = 1;
        else if (ta != tb)
            take_a = ta < tb;
        else
            take_a = dh__has_comm(ops, pa, ea) || !dh__has_comm(ops, pb, eb);
        size_t *p = take_a ? &pa : &pb, end = take_a ? ea : eb;
        double *t = take_a ? &ta : &tb;
        for (; *p < end; (*p)++) {
            *t += dh__op_us(&ops[*p]);
            order[k++] = take_a ? 'a' : 'b';
        }
    }
}

/* Group g (the last one, paired) as two: its strand-a ops, then its strand-b ops. */
static dh_status_t dh__split_pair(dh_plan_section_t *s, dh__groups_t *gs, double a_us,
                                  double b_us)
{
    dh_plan_group_t *g = &gs->g[gs->n - 1];
    size_t b_first = g->b_first, b_n = g->b_n;
    g->b_first = 0;
    g->b_n = 0;
    memset(g->order, 'a', g->a_n);
    g->order[g->a_n] = '\0';
    g->pred_us = a_us;
    dh_plan_group_t *h = dh__group_new(gs, b_n);
    if (h == NULL)
        return DH_ERR_NOMEM;
    h->b_first = b_first;
    h->b_n = b_n;
    memset(h->order, 'b', b_n);
    h->pred_us = b_us;
    dh__assign(s, b_first, b_n, 1, gs->n - 1);
    return DH_OK;
}

dh_status_t dh__emit_pair(dh_plan_section_t *s, dh__groups_t *gs, size_t a_base, size_t b_base,
                          const dh_align_result_t *r, const size_t *cuta, const size_t *cutb,
                          dh_tsim_t *ts, double *sum_us)
{
    dh__unit_cur_t ua = {cuta, a_base, 0}, ub = {cutb, b_base, 0};
    *sum_us = 0;
    for (size_t k = 0; k < r->nsteps; k++) {
        const dh_align_step_t *st = &r->steps[k];
        if (!st->paired && st->b_n == 0) {
            double t = dh_tsim_serial(ts, a_base + st->a_first, st->a_n);
            if (t < 0)
                return DH_ERR_NOMEM;
            DH_CHECK(dh__emit_serial(s, gs, a_base + st->a_first, st->a_n, t));
            *sum_us += t;
            continue;
        }
        dh_plan_group_t *g = dh__group_new(gs, st->a_n + st->b_n);
        if (g == NULL)
            return DH_ERR_NOMEM;
        g->a_first = st->a_n ? a_base + st->a_first : 0;
        g->a_n = st->a_n;
        g->b_first = st->b_n ? b_base + st->b_first : 0;
        g->b_n = st->b_n;
        dh__assign(s, g->a_first, g->a_n, 0, gs->n - 1);
        dh__assign(s, g->b_first, g->b_n, 1, gs->n - 1);
        dh__merge_order(s->ops, g, &ua, &ub, g->order);
        double t = dh_tsim_group(ts, g);
        if (t < 0)
            return DH_ERR_NOMEM;
        g->pred_us = t;
        if (g->a_n > 0 && g->b_n > 0) {
            double ta = dh_tsim_serial(ts, g->a_first, g->a_n);
            double tb = dh_tsim_serial(ts, g->b_first, g->b_n);
            if (ta < 0 || tb < 0)
                return DH_ERR_NOMEM;
            if (t > ta + tb) {
                DH_CHECK(dh__split_pair(s, gs, ta, tb));
                t = ta + tb;
            }
        }
        *sum_us += t;
    }
    return DH_OK;
}
