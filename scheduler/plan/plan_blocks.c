/*
 * plan_blocks.c: a section's template in plan version 2 (docs/plan-format.md): a list of
 * blocks, each a run of whole phases with the groups that cover them, written once with how
 * many times it repeats. The steady state of an iteration is one pair, backward(i) beside
 * forward(i+1), aligned the same way for every i (the planner aligns each distinct pair
 * once, dpcache.c), so a plan's size follows the distinct pairs, not the micro-batches.
 * Reading expands the blocks into the flat template the runtime walks.
 */
#include "plan_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */


static size_t dh__gstart(const dh_plan_group_t *g)
{
    size_t a = g->a_n ? g->a_first : SIZE_MAX, b = g->b_n ? g->b_first : SIZE_MAX;
    return a < b ? a : b;
}

static size_t dh__gend(const dh_plan_group_t *g)
{
    size_t a = g->a_n ? g->a_first + g->a_n : 0, b = g->b_n ? g->b_first + g->b_n : 0;
    return a > b ? a : b;
}

/* The places the template can be cut: before group g, at op c, phase k, when the groups
 * before g hold exactly the ops before c, c starts phase k, and no phase before k is paired
 * with one after. cut[] gets the group indices (0 and ngroups included), cop[] and cph[]
 * the ops and phases there; returns how many. Errors: -1 out of memory. */
static int dh__cuts(const dh_plan_section_t *s, int *cut, size_t *cop, int *cph)
{
    size_t *smin = malloc(((size_t)s->ngroups + 1) * sizeof *smin);
    if (smin == NULL)
        return -1;
    smin[s->ngroups] = s->nops;
    for (int g = s->ngroups - 1; g >= 0; g--) {
        size_t c = dh__gstart(&s->groups[g]);
        smin[g] = c < smin[g + 1] ? c : smin[g + 1];
    }
    int n = 0, k = 0, pair_max = -1;
    size_t end_max = 0;
    cut[n] = 0;
    cop[n] = 0;
    cph[n++] = 0;
    for (int g = 1; g < s->ngroups; g++) {
        size_t e = dh__gend(&s->groups[g - 1]);
        end_max = e > end_max ? e : end_max;
        size_t c = smin[g];
        if (c != end_max)
            continue;
        while (k < s->nphases && s->phases[k].first < c) {
            if (s->phases[k].paired_with > pair_max)
                pair_max = s->phases[k].paired_with;
            k++;
        }
        if (k >= s->nphases || s->phases[k].first != c || pair_max >= k)
            continue;
        cut[n] = g;
        cop[n] = c;
        cph[n++] = k;
    }
    cut[n] = s->ngroups;
    cop[n] = s->nops;
    cph[n++] = s->nphases;
    free(smin);
    return n;
}

/* 1 when y is x shifted by dp phases and dg groups: every other field equal. */
static int dh__op_shifted(const dh_plan_op_t *x, const dh_plan_op_t *y, int dp, int dg)
{
    return x->phase >= 0 && y->phase == x->phase + dp && y->group == x->group + dg &&
           x->sig == y->sig && x->shape_dynamic == y->shape_dynamic &&
           (x->shape_dynamic || x->shape == y->shape) && x->cls == y->cls &&
           x->strand == y->strand && x->moved == y->moved && x->us == y->us &&
           strcmp(x->kind, y->kind) == 0 &&
           strcmp(x->name, y->name) == 0;
}

/* How many times ops [i, i+m) repeat right after themselves, each time dp phases and dg
 * groups further, within [i, end). */
static size_t dh__op_repeats(const dh_plan_section_t *s, size_t i, size_t m, size_t end,
                             int dp, int dg)
{
    size_t t = 0;
    while (i + (t + 2) * m <= end) {
        size_t j = 0, at = i + (t + 1) * m;
        while (j < m && dh__op_shifted(&s->ops[i + j], &s->ops[at + j], (int)(t + 1) * dp,
                                       (int)(t + 1) * dg))
            j++;
        if (j < m)
            break;
        t++;
    }
    return t;
}

/* A block's ops: literal ops, and after a run of whole phases that the next ops repeat
 * (a section that pairs nothing is one serial group over every micro-batch), one
 * {"copy": m, "times": n, "phase_step": dp, "group_step": dg} for those repetitions. */
static void dh__ops_json(dh_strbuf_t *b, const dh_plan_section_t *s, const dh__chunk_t *c)
{
    size_t i = c->op0;
    int n = 0;
    while (i < c->op1) {
        const dh_plan_op_t *o = &s->ops[i];
        size_t best_m = 0, best_t = 0;
        int best_w = 0, best_dg = 0;
        if (o->phase >= c->ph0 && o->phase < c->ph1 && s->phases[o->phase].first == i) {
            size_t m = 0;
            for (int w = 1; w <= 4 && o->phase + w <= c->ph1; w++) {
                m += s->phases[o->phase + w - 1].n;
                if (m == 0 || i + 2 * m > c->op1)
                    break;
                int dg = s->ops[i + m].group - o->group;
                size_t t = dh__op_repeats(s, i, m, c->op1, w, dg);
                if (t * m > best_t * best_m) {
                    best_m = m;
                    best_t = t;
                    best_w = w;
                    best_dg = dg;
                }
            }
        }
        size_t lit = best_t ? best_m : 1;
        for (size_t j = 0; j < lit; j++) {
            dh_strbuf_puts(b, n++ ? ",\n          " : "\n          ");
            dh__plan_op_json(b, &s->ops[i + j], c->ph0, c->g0);
        }
        if (best_t)
            dh_strbuf_printf(b, ",\n          {\"copy\": %zu, \"times\": %zu, \"phase_step\": %d, "
                                "\"group_step\": %d}", best_m, best_t, best_w, best_dg);
        i += lit * (best_t + 1);
    }
}

/* Writes chunk c's phases, ops and groups, indices relative to its start (what a block
 * holds). */
static void dh__chunk_json(dh_strbuf_t *b, const dh_plan_section_t *s, const dh__chunk_t *c)
{
    dh_strbuf_puts(b, "\"phases\": [");
    for (int k = c->ph0; k < c->ph1; k++) {
        dh_strbuf_puts(b, k > c->ph0 ? ",\n          " : "\n          ");
        dh__plan_phase_json(b, &s->phases[k], c->op0, c->ph0, 0);
    }
    dh_strbuf_puts(b, "],\n        \"ops\": [");
    dh__ops_json(b, s, c);
    dh_strbuf_puts(b, "],\n        \"groups\": [");
    for (int g = c->g0; g < c->g1; g++) {
        dh_strbuf_puts(b, g > c->g0 ? ",\n          " : "\n          ");
        dh__plan_group_json(b, &s->groups[g], c->op0, 0);
    }
    dh_strbuf_puts(b, "]");
}

/* 1 when chunk y repeats chunk x: the same phases, ops and groups with their indices
 * relative to each chunk's start, micro-batches relative to each chunk's smallest, start
 * times relative to each chunk's first group (to the nanosecond): what dh__chunk_json
 * writes, compared without writing it. */
static int dh__chunk_same(const dh_plan_section_t *s, const dh__chunk_t *x, const dh__chunk_t *y)
{
    if (x->op1 - x->op0 != y->op1 - y->op0 || x->g1 - x->g0 != y->g1 - y->g0 ||
        x->ph1 - x->ph0 != y->ph1 - y->ph0)
        return 0;
    for (int k = 0; k < x->ph1 - x->ph0; k++) {
        const dh_plan_phase_t *a = &s->phases[x->ph0 + k], *b = &s->phases[y->ph0 + k];
        if (a->n != b->n || a->kind != b->kind || a->thread != b->thread ||
            a->first - x->op0 != b->first - y->op0 ||
            (a->paired_with >= 0 ? a->paired_with - x->ph0 : -1) !=
                (b->paired_with >= 0 ? b->paired_with - y->ph0 : -1) ||
            (a->mb >= 0 ? a->mb - x->mb0 : -1) != (b->mb >= 0 ? b->mb - y->mb0 : -1))
            return 0;
    }
    for (size_t i = 0; i < x->op1 - x->op0; i++) {
        const dh_plan_op_t *a = &s->ops[x->op0 + i], *b = &s->ops[y->op0 + i];
        if ((a->phase >= 0 ? a->phase - x->ph0 : -1) != (b->phase >= 0 ? b->phase - y->ph0 : -1) ||
            a->group - x->g0 != b->group - y->g0 || a->sig != b->sig ||
            a->shape_dynamic != b->shape_dynamic || (!a->shape_dynamic && a->shape != b->shape) ||
            a->cls != b->cls || a->strand != b->strand || a->moved != b->moved ||
            a->us != b->us ||
            strcmp(a->kind, b->kind) != 0 || strcmp(a->name, b->name) != 0)
            return 0;
    }
    for (int g = 0; g < x->g1 - x->g0; g++) {
        const dh_plan_group_t *a = &s->groups[x->g0 + g], *b = &s->groups[y->g0 + g];
        if (a->a_n != b->a_n || a->b_n != b->b_n ||
            (a->a_n && a->a_first - x->op0 != b->a_first - y->op0) ||
            (a->b_n && a->b_first - x->op0 != b->b_first - y->op0) || a->pred_us != b->pred_us ||
            round((a->start_us - x->t0) * 1e3) != round((b->start_us - y->t0) * 1e3) ||
            strcmp(a->order ? a->order : "", b->order ? b->order : "") != 0)
            return 0;
    }
    return 1;
}

static void dh__block_close(dh_strbuf_t *b, size_t repeat, int mb_step, double dt)
{
    dh_strbuf_printf(b, ",\n        \"repeat\": %zu, \"mb_step\": %d, \"dt_us\": ", repeat, mb_step);
    dh__json_num(b, dt);
    dh_strbuf_puts(b, "}");
}

dh_status_t dh__plan_blocks_find(const dh_plan_section_t *s, dh__blk_t **out, int *nout)
{
    *out = NULL;
    *nout = 0;
    size_t ncut = (size_t)s->ngroups + 2;
    int *cut = malloc(ncut * sizeof *cut), *cph = malloc(ncut * sizeof *cph);
    size_t *cop = malloc(ncut * sizeof *cop);
    dh__blk_t *blk = malloc(ncut * sizeof *blk);
    int n = cut && cph && cop && blk ? (s->ngroups > 0 ? dh__cuts(s, cut, cop, cph) : 0) : -1;
    int nb = 0;
    dh__chunk_t last = {0};
    for (int k = 0; k + 1 < n; k++) {
        dh__chunk_t c = {cop[k], cop[k + 1], cut[k], cut[k + 1], cph[k], cph[k + 1], 0,
                         s->groups[cut[k]].start_us};
        int have = 0;
        for (int p = c.ph0; p < c.ph1; p++)
            if (s->phases[p].mb >= 0 && (!have || s->phases[p].mb < c.mb0)) {
                c.mb0 = s->phases[p].mb;
                have = 1;
            }
        dh__blk_t *cur = nb > 0 ? &blk[nb - 1] : NULL;
        int same = cur != NULL && dh__chunk_same(s, &last, &c);
        if (same) {
            int step = c.mb0 - last.mb0;
            double d = c.t0 - last.t0;
            if (cur->repeat == 1) {
                cur->mb_step = step;
                cur->dt = d;
            } else if (step != cur->mb_step || fabs(d - cur->dt) > 1e-6 * (1 + fabs(cur->dt))) {
                same = 0;
            }
        }
        if (same)
            cur->repeat++;
        else
            blk[nb++] = (dh__blk_t){c, 1, 0, 0};
        last = c;
    }
    free(cut);
    free(cph);
    free(cop);
    if (n < 0) {
        free(blk);
        return DH_ERR_NOMEM;
    }
    *out = blk;
    *nout = nb;
    return DH_OK;
}

dh_status_t dh__plan_blocks_json(dh_strbuf_t *b, const dh_plan_section_t *s)
{
    dh__blk_t *blk;
    int nb;
    DH_CHECK(dh__plan_blocks_find(s, &blk, &nb));
    dh_strbuf_puts(b, "      \"blocks\": [");
    for (int k = 0; k < nb; k++) {
        dh_strbuf_puts(b, k ? ",\n        {" : "\n        {");
        dh__chunk_json(b, s, &blk[k].c);
        dh__block_close(b, blk[k].repeat, blk[k].mb_step, blk[k].dt);
    }
    dh_strbuf_puts(b, nb ? "\n      ]\n    }" : "]\n    }");
    free(blk);
    return dh_strbuf_status(b);
}

/* ---- reading ---- */

/* One {"copy", "times", "phase_step", "group_step"} element of a block's ops, as element k
 * of arr, after have ops. */
static dh_status_t dh__copy_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                  size_t k, size_t have, long long v[4])
{
    dh__jpath_t here = DH__JIDX(at, k);
    json_t *o = json_array_get(arr, k);
    DH_CHECK(dh__jint(r, o, &here, "copy", 1, 0, 1, (long long)have, &v[0]));
    DH_CHECK(dh__jint(r, o, &here, "times", 1, 0, 1, DH__MAX_OPS, &v[1]));
    DH_CHECK(dh__jint(r, o, &here, "phase_step", 0, 0, -(1 << 20), 1 << 20, &v[2]));
    DH_CHECK(dh__jint(r, o, &here, "group_step", 0, 0, -(1 << 20), 1 << 20, &v[3]));
    if ((unsigned long long)v[0] * (unsigned long long)v[1] > DH__MAX_OPS)
        return dh__jerr(r, &here, "makes more than %u ops", DH__MAX_OPS);
    return DH_OK;
}

/* A block's ops (literal ops and copies, dh__ops_json), phases and groups into one. */
static dh_status_t dh__block_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                   dh_plan_section_t *one)
{
    json_t *arr;
    DH_CHECK(dh__jarr(r, o, at, "ops", 1, DH__MAX_OPS, &arr));
    dh__jpath_t ops_at = DH__JKEY(at, "ops");
    size_t ne = json_array_size(arr), n = 0;
    long long v[4];
    for (size_t k = 0; k < ne; k++) {
        json_t *e = json_array_get(arr, k);
        if (json_is_object(e) && json_object_get(e, "copy") != NULL) {
            DH_CHECK(dh__copy_parse(r, arr, &ops_at, k, n, v));
            n += (size_t)(v[0] * v[1]);
        } else {
            n++;
        }
        if (n > DH__MAX_OPS)
            return dh__jerr(r, &ops_at, "holds more than %u ops", DH__MAX_OPS);
    }
    if (n == 0)
        return dh__jerr(r, &ops_at, "is empty");
    if ((one->ops = calloc(n, sizeof *one->ops)) == NULL)
        return DH_ERR_NOMEM;
    for (size_t k = 0; k < ne; k++) {
        json_t *e = json_array_get(arr, k);
        if (!(json_is_object(e) && json_object_get(e, "copy") != NULL)) {
            DH_CHECK(dh__plan_op_parse(r, arr, &ops_at, k, &one->ops[one->nops++]));
            continue;
        }
        DH_CHECK(dh__copy_parse(r, arr, &ops_at, k, one->nops, v));
        size_t base = one->nops - (size_t)v[0];
        for (long long t = 1; t <= v[1]; t++)
            for (long long j = 0; j < v[0]; j++) {
                dh_plan_op_t op = one->ops[base + (size_t)j];
                if (op.phase >= 0)
                    op.phase += (int32_t)(t * v[2]);
                op.group += (int32_t)(t * v[3]);
                one->ops[one->nops++] = op;
            }
    }
    json_t *ph, *gr;
    DH_CHECK(dh__jarr(r, o, at, "phases", 1, one->nops, &ph));
    DH_CHECK(dh__jarr(r, o, at, "groups", 1, one->nops, &gr));
    dh__jpath_t ph_at = DH__JKEY(at, "phases"), gr_at = DH__JKEY(at, "groups");
    size_t np = json_array_size(ph), ng = json_array_size(gr);
    if (ng == 0)
        return dh__jerr(r, &gr_at, "is empty");
    one->phases = np ? calloc(np, sizeof *one->phases) : NULL;
    one->groups = calloc(ng, sizeof *one->groups);
    if ((np && !one->phases) || !one->groups)
        return DH_ERR_NOMEM;
    for (size_t k = 0; k < np; k++) {
        one->nphases++;
        DH_CHECK(dh__plan_phase_parse(r, ph, &ph_at, k, one->nops, &one->phases[k]));
    }
    for (size_t k = 0; k < ng; k++) {
        one->ngroups++;
        DH_CHECK(dh__plan_group_parse(r, gr, &gr_at, k, one->nops, &one->groups[k]));
    }
    return DH_OK;
}

typedef struct dh__rblock {
    dh_plan_section_t one;          /* the block's elements, indices relative */
    long long repeat, mb_step;
    double dt;
} dh__rblock_t;

static dh_status_t dh__rblock_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                    size_t i, dh__rblock_t *rb)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jint(r, o, &here, "repeat", 0, 1, 1, DH__MAX_OPS, &rb->repeat));
    DH_CHECK(dh__jint(r, o, &here, "mb_step", 0, 0, -(1 << 20), 1 << 20, &rb->mb_step));
    DH_CHECK(dh__jnum(r, o, &here, "dt_us", 0, 0, -1e15, 1e15, &rb->dt));
    return dh__block_parse(r, o, &here, &rb->one);
}

/* Block rb's repetition k, at op, phase and group offsets op0, ph0, g0, into s. */
static dh_status_t dh__rblock_put(const dh__rblock_t *rb, long long k, size_t op0, int ph0,
                                  int g0, dh_plan_section_t *s)
{
    const dh_plan_section_t *o = &rb->one;
    for (int p = 0; p < o->nphases; p++) {
        dh_plan_phase_t ph = o->phases[p];
        ph.first += op0;
        if (ph.mb >= 0)
            ph.mb += (int)(k * rb->mb_step);
        if (ph.paired_with >= 0)
            ph.paired_with += ph0;
        s->phases[s->nphases++] = ph;
    }
    for (size_t i = 0; i < o->nops; i++) {
        dh_plan_op_t op = o->ops[i];
        if (op.phase >= 0)
            op.phase += ph0;
        op.group += g0;
        s->ops[s->nops++] = op;
    }
    for (int g = 0; g < o->ngroups; g++) {
        dh_plan_group_t gr = o->groups[g];
        if (gr.a_n)
            gr.a_first += op0;
        if (gr.b_n)
            gr.b_first += op0;
        gr.start_us += (double)k * rb->dt;
        if ((gr.order = strdup(o->groups[g].order ? o->groups[g].order : "")) == NULL)
            return DH_ERR_NOMEM;
        s->groups[s->ngroups++] = gr;
    }
    return DH_OK;
}

dh_status_t dh__plan_blocks_parse(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                                  dh_plan_section_t *s)
{
    json_t *arr;
    DH_CHECK(dh__jarr(r, o, at, "blocks", 1, DH__MAX_OPS, &arr));
    dh__jpath_t k_at = DH__JKEY(at, "blocks");
    size_t nb = json_array_size(arr);
    if (nb == 0)
        return dh__jerr(r, &k_at, "is empty");
    dh__rblock_t *rb = calloc(nb, sizeof *rb);
    if (rb == NULL)
        return DH_ERR_NOMEM;
    dh_status_t st = DH_OK;
    unsigned long long nops = 0, nph = 0, ngr = 0;
    for (size_t i = 0; i < nb && st == DH_OK; i++) {
        st = dh__rblock_parse(r, arr, &k_at, i, &rb[i]);
        if (st != DH_OK)
            break;
        nops += (unsigned long long)rb[i].repeat * rb[i].one.nops;
        nph += (unsigned long long)rb[i].repeat * (unsigned long long)rb[i].one.nphases;
        ngr += (unsigned long long)rb[i].repeat * (unsigned long long)rb[i].one.ngroups;
        if (nops > DH__MAX_OPS || ngr > DH__MAX_OPS) {
            dh__jpath_t e = DH__JIDX(&k_at, i);
            st = dh__jerr(r, &e, "makes more than %u ops", DH__MAX_OPS);
        }
    }
    if (st == DH_OK) {
        s->ops = calloc(nops ? nops : 1, sizeof *s->ops);
        s->phases = calloc(nph ? nph : 1, sizeof *s->phases);
        s->groups = calloc(ngr ? ngr : 1, sizeof *s->groups);
        if (!s->ops || !s->phases || !s->groups)
            st = DH_ERR_NOMEM;
    }
    for (size_t i = 0; i < nb && st == DH_OK; i++)
        for (long long k = 0; k < rb[i].repeat && st == DH_OK; k++)
            st = dh__rblock_put(&rb[i], k, s->nops, s->nphases, s->ngroups, s);
    long long want;
    if (st == DH_OK)
        st = dh__jint(r, o, at, "nops", 0, (long long)s->nops, 0, DH__MAX_OPS, &want);
    if (st == DH_OK && (size_t)want != s->nops) {
        dh__jpath_t e = DH__JKEY(at, "nops");
        st = dh__jerr(r, &e, "is %lld, but the blocks hold %zu ops", want, s->nops);
    }
    for (size_t i = 0; i < nb; i++)
        dh__plan_section_clear(&rb[i].one);
    free(rb);
    return st;
}
