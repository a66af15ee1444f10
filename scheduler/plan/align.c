/* align.c: the cost model of the alignment (align.h), its orders of collectives and its
 * units; the DP itself is in align_dp.c. */
#include "align_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void dh_align_model_default(dh_align_model_t *m)
{
    memset(m, 0, sizeof(*m));
    m->eff[DH_CLS_COMPUTE][DH_CLS_COMM] = 0.90;
    m->eff[DH_CLS_COMM][DH_CLS_COMPUTE] = 0.90;
    m->eff[DH_CLS_COPY][DH_CLS_COMPUTE] = 0.5;
    m->eff[DH_CLS_COMPUTE][DH_CLS_COPY] = 0.5;
    m->eff[DH_CLS_COPY][DH_CLS_COMM] = 0.5;
    m->eff[DH_CLS_COMM][DH_CLS_COPY] = 0.5;
}

static double dh__clamp(double e)
{
    return e < -1 ? -1 : (e > 1 ? 1 : e);
}

double dh__align_us(const dh_align_op_t *op)
{
    return op->us > 0 ? op->us : 0;
}

/* The communicators an op uses, as a mask for legality. An op of class comm without a
 * communicator (comm -1: a kernel classified as comm, an emulated collective) is a channel of
 * its own: no NCCL ordering joins it to any other op, so it shares no bit. */
static uint64_t dh__comm_bits(const dh_align_op_t *op)
{
    if (op->cls != DH_CLS_COMM || op->comm < 0)
        return 0;
    return 1ull << (op->comm & 63);
}

void dh__seg_sum(const dh_align_op_t *ops, size_t first, size_t n, dh__seg_t *s)
{
    memset(s, 0, sizeof(*s));
    for (size_t k = first; k < first + n; k++) {
        const dh_align_op_t *op = &ops[k];
        double us = dh__align_us(op);
        s->t += us;
        if ((unsigned)op->cls < DH__NCLS)
            s->v[op->cls] += us;
        s->comms |= dh__comm_bits(op);
        s->bad |= op->cls == DH_CLS_HOST || op->pinned;
        s->commcopy |= op->cls == DH_CLS_COMM || op->cls == DH_CLS_COPY;
    }
}

void dh__seg_add(dh__seg_t *acc, const dh__seg_t *s)
{
    acc->t += s->t;
    for (int x = 0; x < DH__NCLS; x++)
        acc->v[x] += s->v[x];
    if (s->memmax > acc->memmax)
        acc->memmax = s->memmax;
    acc->comms |= s->comms;
    acc->bad |= s->bad;
    acc->commcopy |= s->commcopy;
}

void dh__seg_shares(dh__seg_t *s)
{
    for (int x = 0; x < DH__NCLS; x++)
        s->v[x] = s->t > 0 ? s->v[x] / s->t : 0;
}

void dh__seg_g(dh__seg_t *s, const double eff[3][3])
{
    double f[DH__NCLS];
    memcpy(f, s->v, sizeof(f));
    for (int x = 0; x < DH__NCLS; x++) {
        s->v[x] = 0;
        for (int y = 0; y < DH__NCLS; y++)
            s->v[x] += f[y] * eff[x][y];
    }
}

static int dh__cmp_measured(const void *k, const void *e)
{
    const dh_align_measured_t *a = k, *b = e;
    if (a->a_sig != b->a_sig)
        return a->a_sig < b->a_sig ? -1 : 1;
    return a->b_sig < b->b_sig ? -1 : (a->b_sig > b->b_sig);
}

double dh__measured(const dh_align_model_t *m, uint64_t a, uint64_t b)
{
    if (m->nmeasured == 0 || m->measured == NULL)
        return NAN;
    dh_align_measured_t key = {a, b, 0};
    const dh_align_measured_t *hit =
        bsearch(&key, m->measured, m->nmeasured, sizeof(key), dh__cmp_measured);
    return hit ? dh__clamp(hit->efficiency) : NAN;
}

double dh__pair(const dh__seg_t *sa, const dh__seg_t *sb, double eff_cc, double measured)
{
    if (sa->bad || sb->bad || (sa->comms & sb->comms))
        return INFINITY;
    double e;
    if (!isnan(measured))
        e = measured;
    else
        e = sa->v[0] * sb->v[0] + sa->v[1] * sb->v[1] + sa->v[2] * sb->v[2];
    if (!sa->commcopy && !sb->commcopy && (isnan(measured) ? eff_cc : measured) <= 0)
        return INFINITY;
    double hi = sa->t > sb->t ? sa->t : sb->t, lo = sa->t > sb->t ? sb->t : sa->t;
    return hi + (1 - e) * lo;
}

void dh__model_clamped(const dh_align_model_t *m, double eff[3][3])
{
    for (int x = 0; x < 3; x++)
        for (int y = 0; y < 3; y++)
            eff[x][y] = dh__clamp(m->eff[x][y]);
}

double dh_align_pair_cost(const dh_align_model_t *m, const dh_align_op_t *a, size_t na,
                          const dh_align_op_t *b, size_t nb)
{
    if (na == 0 || nb == 0)
        return INFINITY;
    double eff[3][3];
    dh__model_clamped(m, eff);
    dh__seg_t sa, sb;
    dh__seg_sum(a, 0, na, &sa);
    dh__seg_sum(b, 0, nb, &sb);
    dh__seg_shares(&sa);
    dh__seg_shares(&sb);
    dh__seg_g(&sb, eff);
    double meas = na == 1 && nb == 1 ? dh__measured(m, a[0].sig, b[0].sig) : NAN;
    return dh__pair(&sa, &sb, eff[0][0], meas);
}

/* ---- orders of collectives ---- */

static int dh__is_coll(const dh_align_op_t *op, int comm)
{
    return op->cls == DH_CLS_COMM && op->comm == comm;
}

void dh__ord_free(dh__ord_t *o, int n)
{
    for (int k = 0; o != NULL && k < n; k++) {
        free(o[k].cntA);
        free(o[k].cntB);
        free(o[k].ylo);
        free(o[k].yhi);
    }
    free(o);
}

static dh_status_t dh__ord_one(const dh_align_order_t *src, const dh_align_op_t *a, size_t na,
                               const dh_align_op_t *b, size_t nb, dh__ord_t *o)
{
    if (src->comm < 0)
        return DH_ERR_INVALID;  /* ops without a communicator have no order to keep */
    o->cntA = malloc((na + 1) * sizeof(uint32_t));
    o->cntB = malloc((nb + 1) * sizeof(uint32_t));
    if (o->cntA == NULL || o->cntB == NULL)
        return DH_ERR_NOMEM;
    o->cntA[0] = o->cntB[0] = 0;
    for (size_t i = 0; i < na; i++)
        o->cntA[i + 1] = o->cntA[i] + (uint32_t)dh__is_coll(&a[i], src->comm);
    for (size_t j = 0; j < nb; j++)
        o->cntB[j + 1] = o->cntB[j] + (uint32_t)dh__is_coll(&b[j], src->comm);
    size_t xa = o->cntA[na], yb = o->cntB[nb], ones = 0;
    for (size_t k = 0; k < src->n; k++)
        ones += src->from_b[k] != 0;
    if (src->n != xa + yb || ones != yb)
        return DH_ERR_INVALID;
    o->ylo = malloc((xa + 1) * sizeof(uint32_t));
    o->yhi = malloc((xa + 1) * sizeof(uint32_t));
    if (o->ylo == NULL || o->yhi == NULL)
        return DH_ERR_NOMEM;
    uint32_t x = 0, y = 0;
    o->ylo[0] = o->yhi[0] = 0;
    for (size_t k = 0; k < src->n; k++) {
        if (src->from_b[k])
            o->yhi[x] = ++y;
        else {
            x++;
            o->ylo[x] = o->yhi[x] = y;
        }
    }
    return DH_OK;
}

dh_status_t dh__ord_prep(const dh_align_params_t *p, const dh_align_op_t *a, size_t na,
                         const dh_align_op_t *b, size_t nb, dh__ord_t **out)
{
    *out = NULL;
    if (p->norders <= 0)
        return DH_OK;
    dh__ord_t *o = calloc((size_t)p->norders, sizeof(*o));
    if (o == NULL)
        return DH_ERR_NOMEM;
    dh_status_t st = DH_OK;
    for (int k = 0; k < p->norders && st == DH_OK; k++)
        st = dh__ord_one(&p->orders[k], a, na, b, nb, &o[k]);
    if (st != DH_OK) {
        dh__ord_free(o, p->norders);
        return st;
    }
    *out = o;
    return DH_OK;
}

int dh__ord_ok(const dh__ord_t *o, int n, size_t i, size_t j)
{
    for (int k = 0; k < n; k++) {
        uint32_t x = o[k].cntA[i], y = o[k].cntB[j];
        if (y < o[k].ylo[x] || y > o[k].yhi[x])
            return 0;
    }
    return 1;
}

size_t dh_align_comm_order(const dh_align_result_t *r, const dh_align_op_t *a,
                           const dh_align_op_t *b, int comm, uint8_t *out)
{
    size_t n = 0;
    for (size_t k = 0; k < r->nsteps; k++) {
        const dh_align_step_t *s = &r->steps[k];
        for (size_t i = s->a_first; i < s->a_first + s->a_n; i++)
            if (dh__is_coll(&a[i], comm))
                out[n++] = 0;
        for (size_t j = s->b_first; j < s->b_first + s->b_n; j++)
            if (dh__is_coll(&b[j], comm))
                out[n++] = 1;
    }
    return n;
}

/* ---- units ---- */

size_t dh_align_fold(const dh_align_op_t *ops, size_t n, double min_us, size_t *cuts)
{
    size_t k = 0;
    cuts[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const dh_align_op_t *op = &ops[i];
        int timed = op->cls != DH_CLS_EVENT && op->cls != DH_CLS_FREE;
        if (timed && (op->cls == DH_CLS_COMM || op->cls == DH_CLS_HOST || op->pinned ||
                      dh__align_us(op) >= min_us))
            cuts[++k] = i + 1;
    }
    if (n == 0)
        return 0;
    if (k == 0)
        k = 1;
    /* Ops after the last anchor join its unit. */
    cuts[k] = n;
    return k;
}
