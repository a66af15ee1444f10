/* align_dp.c: the alignment DP (align.h) over units (one op each unless the caller folded
 * them). Per-segment sums are precomputed for every segment of length <= L ending at each
 * unit, so one transition costs a handful of flops: a 1600 x 1000 alignment with L = 4 is
 * 26 million transitions. */
#include "align_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Distinct communicator masks of A's segments for which legality is precomputed; with more
 * (a program with many communicators in one phase) the pair loop tests masks itself. */
#define DH__MAX_MASKS 16

/* The last step into a state: solo a, solo b, a pair (the layers T_a, T_b, T_p). */
enum { DH__LA = 0, DH__LB = 1, DH__LP = 2, DH__LNONE = 3 };

/* The DP runs row by row (one row per unit i of A). A pair step into row i comes from rows
 * i-L..i-1 and a solo-a step from row i-1, so every candidate of a row can be computed for
 * all j at once, in loops over j without dependencies (the compiler vectorises them); only
 * the solo-b steps (from (i, j-1)) then need one sequential sweep. B's segments are kept as
 * arrays over j (per length l2) for those loops; M keeps only its last L+1 rows and the
 * three layers their last two. */
typedef struct dh__dp {
    const dh_align_op_t *a, *b;
    size_t na, nb, w;           /* units of A and B; w = nb + 1, the row width */
    size_t *ca, *cb;            /* unit boundaries in ops, na+1 and nb+1 */
    int L;
    double G;
    double bound, base, eff[3][3];
    int nobound, cc_ok, measured;
    const dh_align_model_t *m;
    double *memA, *memB;        /* prefix sums of mem at unit boundaries, na+1 and nb+1;
                                   memA as the runtime holds it (align.h, "Memory") */
    double *uta, *utb;          /* solo time of each unit */
    double *umA, *umB;          /* largest prefix sum a unit's solo step passes through */
    double *memA0, *umA0;       /* memA and umA with nothing held: A's leading solo steps */
    size_t *jlim;               /* na+1: the last j a step may reach from row i (b_need) */
    uint64_t *usA, *usB;        /* sig of each unit's longest op (measured pairs) */
    dh__seg_t *segA, *segB;     /* [(end - 1) * L + (len - 1)] */
    /* B's segments ending at j with length l2, at [(l2 - 1) * w + j]. */
    double *bt, *bg0, *bg1, *bg2, *bmem;
    uint64_t *bmask;
    uint8_t *bok, *bcc;         /* no bad op; holds comm or copy */
    /* Legality as additive penalties (0 or +inf), so that the pair loop is pure arithmetic:
     * pen[c][(l2 - 1) * w + j] for A's c-th distinct communicator mask (a bad B segment or a
     * shared communicator), ccpen[...] when neither side holds comm or copy. */
    uint64_t masks[DH__MAX_MASKS];
    int nmasks;
    double *pen, *ccpen, *zeros;
    double *ring;               /* rows i mod (L+1) of M */
    double *lay;                /* rows i mod 2 of T_a, T_b, T_p: [(i & 1) * 3 + layer][j] */
    double *pbest;              /* the row's best pair candidate */
    double *phow;               /* its pair code, as a double to share the loop's vectors */
    dh__ord_t *ord;             /* params' orders, as state checks */
    int nord;
    double final_cost;          /* the optimum, the hand-back to strand a included */
    int final_layer;
    uint16_t *how;              /* pair code of T_p: 0 none, 1 + (l1-1)*L + (l2-1) */
    uint8_t *from;              /* layer before a solo-a step (bits 0-1) and a solo-b step
                                   (2-3) into the state, and the layer M takes (4-5) */
} dh__dp_t;

/* Unit boundaries of one sequence: the caller's cuts, or one unit per op. */
static dh_status_t dh__cuts(const size_t *src, size_t nunits, size_t nops, size_t **out,
                            size_t *n)
{
    *n = src ? nunits : nops;
    if (src != NULL) {
        if (src[0] != 0 || src[nunits] != nops || (nops > 0 && nunits == 0))
            return DH_ERR_INVALID;
        for (size_t u = 0; u < nunits; u++)
            if (src[u + 1] <= src[u])
                return DH_ERR_INVALID;
    }
    if ((*out = malloc((*n + 1) * sizeof(**out))) == NULL)
        return DH_ERR_NOMEM;
    for (size_t u = 0; u <= *n; u++)
        (*out)[u] = src ? src[u] : u;
    return DH_OK;
}

/* The per-unit arrays and the segment table of one sequence (g vectors when is_b). */
static void dh__prep(const dh__dp_t *d, const dh_align_op_t *ops, const size_t *cut, size_t n,
                     double *mem, double *ut, double *um, uint64_t *us, dh__seg_t *seg,
                     int is_b)
{
    double at = 0;
    mem[0] = 0;
    for (size_t u = 0; u < n; u++) {
        dh__seg_t one;
        dh__seg_sum(ops, cut[u], cut[u + 1] - cut[u], &one);
        double longest = -1;
        um[u] = -INFINITY;
        for (size_t k = cut[u]; k < cut[u + 1]; k++) {
            at += (double)ops[k].mem;
            um[u] = at > um[u] ? at : um[u];
            if (dh__align_us(&ops[k]) > longest) {
                longest = dh__align_us(&ops[k]);
                us[u] = ops[k].sig;
            }
        }
        mem[u + 1] = at;
        ut[u] = one.t;
        /* A segment spans the states from its first unit's start to its last's end. */
        one.memmax = mem[u] > um[u] ? mem[u] : um[u];
        for (int l = 1; l <= d->L && (size_t)l <= u + 1; l++) {
            dh__seg_t *s = &seg[u * (size_t)d->L + (size_t)(l - 1)];
            if (l == 1) {
                *s = one;
            } else {
                /* Unit u - l + 1 alone and the segment of length l - 1 ending at u; their
                 * sums are still raw (shares come last). */
                *s = seg[u * (size_t)d->L + (size_t)(l - 2)];
                dh__seg_add(s, &seg[(u + 1 - (size_t)l) * (size_t)d->L]);
            }
        }
    }
    for (size_t k = 0; k < n * (size_t)d->L; k++) {
        if (k % (size_t)d->L > k / (size_t)d->L)
            continue;   /* longer than its end position: does not exist */
        dh__seg_shares(&seg[k]);
        if (is_b)
            dh__seg_g(&seg[k], d->eff);
    }
}

/* The distinct communicator masks of A's segments (seg->mclass), or nmasks = -1 when there
 * are more than DH__MAX_MASKS. */
static void dh__masks(dh__dp_t *d)
{
    d->nmasks = 0;
    for (size_t k = 0; k < d->na * (size_t)d->L; k++) {
        dh__seg_t *sa = &d->segA[k];
        if ((size_t)(k % (size_t)d->L) + 1 > k / (size_t)d->L + 1)
            continue;   /* longer than its end position: does not exist */
        int c = 0;
        while (c < d->nmasks && d->masks[c] != sa->comms)
            c++;
        if (c == d->nmasks) {
            if (d->nmasks == DH__MAX_MASKS) {
                d->nmasks = -1;
                return;
            }
            d->masks[d->nmasks++] = sa->comms;
        }
        sa->mclass = c;
    }
}

/* Bytes op frees: its own count, or (unknown) what its negative mem says. */
static int64_t dh__freed(const dh_align_op_t *op)
{
    return op->freed > 0 ? op->freed : op->mem < 0 ? -op->mem : 0;
}

static int64_t dh__kept(const dh_align_op_t *op)
{
    int64_t f = dh__freed(op);
    return op->kept < 0 ? 0 : op->kept > f ? f : op->kept;
}

/* The largest memory B passes through inside each pair segment (align.h, "Memory"): from
 * memB at its start, with its frees held to the segment's end and its allocations fresh
 * unless they take back a free of the segment. For each start unit v, one walk over the
 * units a segment from v can span. */
static void dh__held_b(dh__dp_t *d)
{
    for (size_t v = 0; v < d->nb; v++) {
        double at = d->memB[v], top = at;
        size_t j0 = d->cb[v];
        for (int l = 1; l <= d->L && v + (size_t)l <= d->nb; l++) {
            size_t u = v + (size_t)l - 1;
            for (size_t k = d->cb[u]; k < d->cb[u + 1]; k++) {
                const dh_align_op_t *op = &d->b[k];
                double made = (double)op->mem + (double)dh__freed(op);
                if (op->retaken > 0 && op->retaken_from > 0 && op->retaken_from <= k - j0)
                    made -= (double)op->retaken;
                at += made > 0 ? made : 0;
                top = at > top ? at : top;
            }
            dh__seg_t *sg = &d->segB[u * (size_t)d->L + (size_t)(l - 1)];
            sg->memmax = top;
        }
    }
}

/* B's segment table as arrays over j, and the legality penalties; a segment that does not
 * exist (l2 > j) is bad. */
static void dh__prep_soa(dh__dp_t *d)
{
    for (int l2 = 1; l2 <= d->L; l2++) {
        for (size_t j = 0; j <= d->nb; j++) {
            size_t k = (size_t)(l2 - 1) * d->w + j;
            const dh__seg_t *sb = NULL;
            if (j >= (size_t)l2)
                sb = &d->segB[(j - 1) * (size_t)d->L + (size_t)(l2 - 1)];
            d->bt[k] = sb ? sb->t : 0;
            d->bg0[k] = sb ? sb->v[0] : 0;
            d->bg1[k] = sb ? sb->v[1] : 0;
            d->bg2[k] = sb ? sb->v[2] : 0;
            d->bmem[k] = sb ? sb->memmax : 0;
            d->bmask[k] = sb ? sb->comms : ~0ull;
            d->bok[k] = sb && !sb->bad;
            d->bcc[k] = sb ? (uint8_t)sb->commcopy : 0;
            d->ccpen[k] = d->bcc[k] ? 0 : INFINITY;
            for (int c = 0; c < d->nmasks; c++)
                d->pen[(size_t)c * (size_t)d->L * d->w + k] =
                    d->bok[k] && (d->masks[c] & d->bmask[k]) == 0 ? 0 : INFINITY;
        }
    }
}

static double dh__extra(const dh__dp_t *d, double at)
{
    double x = at - d->base;
    return x > 0 ? x : 0;
}

static int dh__fits(const dh__dp_t *d, double at)
{
    return d->nobound || at - d->base <= d->bound;
}

static double *dh__row(const dh__dp_t *d, size_t i)
{
    return d->ring + (i % (size_t)(d->L + 1)) * d->w;
}

static double *dh__lay(const dh__dp_t *d, size_t i, int layer)
{
    return d->lay + ((i & 1) * 3 + (size_t)layer) * d->w;
}

/* What the pair loop reads of one A segment and of B's segment tables (one length l2),
 * as restrict-qualified parameters: then GCC knows the rows do not overlap and vectorises
 * the loop without run-time alias checks. */
typedef struct dh__pass {
    double ta, fa0, fa1, fa2, amem;     /* the A segment */
    double G, base, bound;              /* group cost, serial peak, memory bound (+inf: none) */
    double code;                        /* its pair code */
} dh__pass_t;

static void dh__pair_loop(size_t l2, size_t nb, const dh__pass_t *ps,
                          const double *restrict prev, const double *restrict bt,
                          const double *restrict g0, const double *restrict g1,
                          const double *restrict g2, const double *restrict bmem,
                          const double *restrict pen, const double *restrict accpen,
                          double *restrict pbest, double *restrict phow)
{
    const double ta = ps->ta, fa0 = ps->fa0, fa1 = ps->fa1, fa2 = ps->fa2, amem = ps->amem;
    const double G = ps->G, mbase = ps->base, bound = ps->bound, code = ps->code;
    for (size_t j = l2; j <= nb; j++) {
        double tb = bt[j], e = fa0 * g0[j] + fa1 * g1[j] + fa2 * g2[j];
        double hi = ta > tb ? ta : tb, lo = ta > tb ? tb : ta;
        double c = prev[j - l2] + (hi + (1 - e) * lo) + G + pen[j] + accpen[j];
        c += (amem + bmem[j]) - mbase <= bound ? 0.0 : INFINITY;
        /* GCC if-converts one select on c < old but not two; the how code (a small
         * integer, exact in a double) is blended arithmetically instead. */
        double old = pbest[j], h = phow[j], m = (double)(c < old);
        pbest[j] = c < old ? c : old;
        phow[j] = h + m * (code - h);
    }
}

/* Pair candidates into row i from A's segment [i-l1, i) and every B segment of length l2:
 * the DP's inner loop. Legality comes in as precomputed penalties and every choice is a
 * select, so the loop has no branch and vectorises. */
static void dh__pair_pass(dh__dp_t *d, size_t i, int l1, int l2, const dh__seg_t *sa)
{
    size_t base = (size_t)(l2 - 1) * d->w;
    const int acc = sa->commcopy | d->cc_ok;
    dh__pass_t ps = {sa->t, sa->v[0], sa->v[1], sa->v[2], sa->memmax, d->G, d->base,
                     d->nobound ? INFINITY : d->bound, 1 + (l1 - 1) * d->L + (l2 - 1)};
    dh__pair_loop((size_t)l2, d->jlim[i - (size_t)l1], &ps, dh__row(d, i - (size_t)l1), d->bt + base,
                  d->bg0 + base, d->bg1 + base, d->bg2 + base, d->bmem + base,
                  d->pen + (size_t)sa->mclass * (size_t)d->L * d->w + base,
                  (acc ? d->zeros : d->ccpen) + base, d->pbest, d->phow);
}

/* The same with the masks tested here (more distinct masks than the penalty tables hold). */
static void dh__pair_pass_masks(dh__dp_t *d, size_t i, int l1, int l2, const dh__seg_t *sa)
{
    const double *prev = dh__row(d, i - (size_t)l1);
    size_t base = (size_t)(l2 - 1) * d->w;
    const int acc = sa->commcopy | d->cc_ok;
    for (size_t j = (size_t)l2; j <= d->jlim[i - (size_t)l1]; j++) {
        size_t k = base + j;
        if (!d->bok[k] || (sa->comms & d->bmask[k]) || !(acc | d->bcc[k]) ||
            !dh__fits(d, sa->memmax + d->bmem[k]))
            continue;
        double tb = d->bt[k];
        double e = sa->v[0] * d->bg0[k] + sa->v[1] * d->bg1[k] + sa->v[2] * d->bg2[k];
        double hi = sa->t > tb ? sa->t : tb, lo = sa->t > tb ? tb : sa->t;
        double c = prev[j - (size_t)l2] + (hi + (1 - e) * lo) + d->G;
        if (c < d->pbest[j]) {
            d->pbest[j] = c;
            d->phow[j] = 1 + (l1 - 1) * d->L + (l2 - 1);
        }
    }
}

/* The single-unit pair (l1 = l2 = 1) when measured pairs may override the class table. */
static void dh__pair_pass_measured(dh__dp_t *d, size_t i, const dh__seg_t *sa)
{
    const double *prev = dh__row(d, i - 1);
    for (size_t j = 1; j <= d->jlim[i - 1]; j++) {
        const dh__seg_t *sb = &d->segB[(j - 1) * (size_t)d->L];
        if (sb->bad || (sa->comms & sb->comms) || !dh__fits(d, sa->memmax + sb->memmax))
            continue;
        double c = prev[j - 1] + d->G +
                   dh__pair(sa, sb, d->eff[0][0], dh__measured(d->m, d->usA[i - 1], d->usB[j - 1]));
        if (c < d->pbest[j]) {
            d->pbest[j] = c;
            d->phow[j] = 1;
        }
    }
}

/* The best of arriving in layer a (cost x), b (y) or p (z), preferring on a tie b, then a,
 * then p (with G = 0 that is the single-layer DP's preference: program order, all of A
 * before all of B, when tracing back from the end). */
static double dh__pick(double x, double y, double z, int *layer)
{
    double best = z;
    *layer = DH__LP;
    if (x <= best) {
        best = x;
        *layer = DH__LA;
    }
    if (y <= best) {
        best = y;
        *layer = DH__LB;
    }
    return best;
}

static void dh__pairs_into_row(dh__dp_t *d, size_t i)
{
    for (size_t j = 0; j <= d->nb; j++) {
        d->pbest[j] = INFINITY;
        d->phow[j] = 0;
    }
    /* Candidates in the order of preference on a tie: by (l1, l2). */
    for (int l1 = 1; l1 <= d->L && (size_t)l1 <= i; l1++) {
        const dh__seg_t *sa = &d->segA[(i - 1) * (size_t)d->L + (size_t)(l1 - 1)];
        if (sa->bad)
            break;   /* a longer segment still holds the bad op */
        for (int l2 = 1; l2 <= d->L && (size_t)l2 <= d->nb; l2++) {
            if (d->measured && l1 == 1 && l2 == 1)
                dh__pair_pass_measured(d, i, sa);
            else if (d->nmasks < 0)
                dh__pair_pass_masks(d, i, l1, l2, sa);
            else
                dh__pair_pass(d, i, l1, l2, sa);
        }
    }
}

static void dh__fill_row(dh__dp_t *d, size_t i)
{
    double *Mi = dh__row(d, i), G = d->G;
    double *Ta = dh__lay(d, i, DH__LA), *Tb = dh__lay(d, i, DH__LB), *Tp = dh__lay(d, i, DH__LP);
    uint16_t *how = d->how + i * d->w;
    uint8_t *from = d->from + i * d->w;
    dh__pairs_into_row(d, i);
    for (size_t j = 0; j <= d->nb; j++) {
        int la = DH__LNONE;
        Ta[j] = INFINITY;
        if (i > 0 && dh__fits(d, (j ? d->umA : d->umA0)[i - 1] + d->memB[j])) {
            const double *pa = dh__lay(d, i - 1, DH__LA), *pb = dh__lay(d, i - 1, DH__LB),
                         *pp = dh__lay(d, i - 1, DH__LP);
            Ta[j] = dh__pick(pa[j], pb[j] + G, pp[j] + G, &la) + d->uta[i - 1];
        }
        from[j] = (uint8_t)la;
    }
    for (size_t j = 0; j <= d->nb; j++) {
        double ta = Ta[j], tb = INFINITY, tp = d->pbest[j];
        int lb = DH__LNONE, lm;
        if (i == 0 && j == 0) {
            ta = 0;
            tp = INFINITY;
        } else if (!dh__fits(d, (j ? d->memA : d->memA0)[i] + d->memB[j]) ||
                   !dh__ord_ok(d->ord, d->nord, d->ca[i], d->cb[j])) {
            ta = tp = INFINITY;
        } else if (j > 0 && j <= d->jlim[i] && dh__fits(d, d->memA[i] + d->umB[j - 1])) {
            tb = dh__pick(Ta[j - 1] + G, Tb[j - 1], Tp[j - 1] + G, &lb) + d->utb[j - 1];
        }
        Ta[j] = ta;
        Tb[j] = tb;
        Tp[j] = tp;
        Mi[j] = dh__pick(ta, tb, tp, &lm);
        if (isinf(Mi[j]))
            lm = DH__LNONE;
        how[j] = isinf(tp) ? 0 : (uint16_t)d->phow[j];
        from[j] = (uint8_t)(from[j] | lb << 2 | lm << 4);
    }
}

static void dh__fill(dh__dp_t *d)
{
    for (size_t i = 0; i <= d->na; i++)
        dh__fill_row(d, i);
    double G = d->G;
    d->final_cost = dh__pick(dh__lay(d, d->na, DH__LA)[d->nb], dh__lay(d, d->na, DH__LB)[d->nb] + G,
                             dh__lay(d, d->na, DH__LP)[d->nb] + G, &d->final_layer);
}

/* Appends a step, merging it into the previous one when both are solo steps of the same
 * strand. Steps arrive in execution order. */
static void dh__push(dh_align_result_t *r, const dh_align_step_t *s)
{
    if (r->nsteps > 0 && !s->paired) {
        dh_align_step_t *p = &r->steps[r->nsteps - 1];
        int same = !p->paired && ((p->a_n && s->a_n && p->a_first + p->a_n == s->a_first) ||
                                  (p->b_n && s->b_n && p->b_first + p->b_n == s->b_first));
        if (same) {
            p->a_n += s->a_n;
            p->b_n += s->b_n;
            p->cost_us += s->cost_us;
            if (s->extra_mem > p->extra_mem)
                p->extra_mem = s->extra_mem;
            return;
        }
    }
    r->steps[r->nsteps++] = *s;
}

/* One step back from state (*i, *j) in layer *layer: the step in op ranges, and the state
 * and layer it came from. 0 when the tables hold no such step (a bug). */
static int dh__back(const dh__dp_t *d, size_t *i, size_t *j, int *layer, dh_align_step_t *s)
{
    size_t at = *i * d->w + *j;
    memset(s, 0, sizeof(*s));
    if (*layer == DH__LA && *i > 0) {
        size_t u = *i - 1;
        *s = (dh_align_step_t){d->ca[u], d->ca[u + 1] - d->ca[u], d->cb[*j], 0, 0, d->uta[u],
                               dh__extra(d, (*j ? d->umA : d->umA0)[u] + d->memB[*j])};
        *layer = d->from[at] & 3;
        *i = u;
    } else if (*layer == DH__LB && *j > 0) {
        size_t v = *j - 1;
        *s = (dh_align_step_t){d->ca[*i], 0, d->cb[v], d->cb[v + 1] - d->cb[v], 0, d->utb[v],
                               dh__extra(d, d->memA[*i] + d->umB[v])};
        *layer = (d->from[at] >> 2) & 3;
        *j = v;
    } else if (*layer == DH__LP && d->how[at] > 0) {
        size_t l1 = (size_t)(d->how[at] - 1) / (size_t)d->L + 1;
        size_t l2 = (size_t)(d->how[at] - 1) % (size_t)d->L + 1;
        if (l1 > *i || l2 > *j)
            return 0;
        const dh__seg_t *sa = &d->segA[(*i - 1) * (size_t)d->L + (l1 - 1)];
        const dh__seg_t *sb = &d->segB[(*j - 1) * (size_t)d->L + (l2 - 1)];
        double meas = NAN;
        if (l1 == 1 && l2 == 1)
            meas = dh__measured(d->m, d->usA[*i - 1], d->usB[*j - 1]);
        size_t i0 = *i - l1, j0 = *j - l2;
        *s = (dh_align_step_t){d->ca[i0], d->ca[*i] - d->ca[i0], d->cb[j0], d->cb[*j] - d->cb[j0],
                               1, dh__pair(sa, sb, d->eff[0][0], meas),
                               dh__extra(d, sa->memmax + sb->memmax)};
        *i = i0;
        *j = j0;
        *layer = (d->from[*i * d->w + *j] >> 4) & 3;
    } else {
        return 0;
    }
    return 1;
}

static dh_status_t dh__trace(const dh__dp_t *d, dh_align_result_t *r)
{
    size_t cap = d->na + d->nb + 1, n = 0;
    dh_align_step_t *rev = malloc(cap * sizeof(*rev));
    r->steps = malloc(cap * sizeof(*r->steps));
    if (rev == NULL || r->steps == NULL) {
        free(rev);
        return DH_ERR_NOMEM;
    }
    size_t i = d->na, j = d->nb;
    int layer = d->final_layer;
    while (i > 0 || j > 0) {
        if (n == cap || !dh__back(d, &i, &j, &layer, &rev[n])) {
            free(rev);
            return DH_ERR_INTERNAL;
        }
        r->npairs += rev[n].paired;
        n++;
    }
    for (size_t k = n; k-- > 0;) {
        dh__push(r, &rev[k]);
        if (rev[k].extra_mem > r->extra_mem)
            r->extra_mem = rev[k].extra_mem;
    }
    free(rev);
    if (r->nsteps > 0) {
        const dh_align_step_t *first = &r->steps[0], *last = &r->steps[r->nsteps - 1];
        size_t paid = r->nsteps - (size_t)(!first->paired && first->a_n > 0) +
                      (size_t)(last->paired || last->b_n > 0);
        r->overhead_us = d->G * (double)paid;
    }
    return DH_OK;
}

static void dh__dp_free(dh__dp_t *d)
{
    void *all[] = {d->ca, d->cb, d->memA, d->memB, d->uta, d->utb, d->umA, d->umB, d->usA,
                   d->memA0, d->umA0, d->jlim, d->usB, d->segA, d->segB, d->bt, d->bg0, d->bg1, d->bg2, d->bmem, d->bmask,
                   d->bok, d->bcc, d->pen, d->ccpen, d->zeros, d->ring, d->lay, d->pbest,
                   d->phow, d->how, d->from};
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
        free(all[k]);
}

static dh_status_t dh__dp_alloc(dh__dp_t *d)
{
    size_t L = (size_t)d->L, w = d->w, soa = L * w, na1 = d->na + 1;
    d->memA = malloc(na1 * sizeof(double));
    d->memB = malloc(w * sizeof(double));
    d->uta = malloc(na1 * sizeof(double));
    d->utb = malloc(w * sizeof(double));
    d->umA = malloc(na1 * sizeof(double));
    d->umB = malloc(w * sizeof(double));
    d->memA0 = malloc(na1 * sizeof(double));
    d->umA0 = malloc(na1 * sizeof(double));
    d->jlim = malloc(na1 * sizeof(size_t));
    d->usA = calloc(na1, sizeof(uint64_t));
    d->usB = calloc(w, sizeof(uint64_t));
    d->segA = malloc((d->na ? d->na : 1) * L * sizeof(dh__seg_t));
    d->segB = malloc((d->nb ? d->nb : 1) * L * sizeof(dh__seg_t));
    d->bt = malloc(soa * sizeof(double));
    d->bg0 = malloc(soa * sizeof(double));
    d->bg1 = malloc(soa * sizeof(double));
    d->bg2 = malloc(soa * sizeof(double));
    d->bmem = malloc(soa * sizeof(double));
    d->bmask = malloc(soa * sizeof(uint64_t));
    d->bok = malloc(soa);
    d->bcc = malloc(soa);
    d->ring = malloc((L + 1) * w * sizeof(double));
    d->lay = malloc(6 * w * sizeof(double));
    d->pbest = malloc(w * sizeof(double));
    d->phow = malloc(w * sizeof(double));
    d->how = malloc(na1 * w * sizeof(uint16_t));
    d->from = malloc(na1 * w);
    d->ccpen = malloc(soa * sizeof(double));
    d->zeros = calloc(soa, sizeof(double));
    void *all[] = {d->memA, d->memB, d->uta, d->utb, d->umA, d->umB, d->memA0, d->umA0, d->jlim,
                   d->usA, d->usB, d->segA,
                   d->segB, d->bt, d->bg0, d->bg1, d->bg2, d->bmem, d->bmask, d->bok, d->bcc,
                   d->ccpen, d->zeros, d->ring, d->lay, d->pbest, d->phow, d->how, d->from};
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
        if (all[k] == NULL)
            return DH_ERR_NOMEM;
    return DH_OK;
}

/* Units, segment tables, the peak of the serial path, and the penalty tables. */
static dh_status_t dh__setup(dh__dp_t *d, const dh_align_params_t *p)
{
    size_t na_ops = d->na, nb_ops = d->nb;
    DH_CHECK(dh__cuts(p->a_cuts, p->a_nunits, na_ops, &d->ca, &d->na));
    DH_CHECK(dh__cuts(p->b_cuts, p->b_nunits, nb_ops, &d->cb, &d->nb));
    d->w = d->nb + 1;
    if ((double)(d->na + 1) * (double)(d->nb + 1) > (double)DH_ALIGN_MAX_STATES)
        return DH_ERR_RANGE;
    DH_CHECK(dh__dp_alloc(d));
    /* Nothing held yet: A's leading solo steps. */
    dh__prep(d, d->a, d->ca, d->na, d->memA0, d->uta, d->umA0, d->usA, d->segA, 0);
    /* Held (align.h, "Memory"): every allocation of A is made (the program issued all of A
     * before B); of A's frees, those past i that nothing took back still wait for their
     * groups. heldA(i) = memA(nA) + that sum: fed to dh__prep as its differences (minus
     * each free nothing took back), plus its value at 0. */
    dh_align_op_t *held = malloc((na_ops ? na_ops : 1) * sizeof *held);
    if (held == NULL)
        return DH_ERR_NOMEM;
    double held0 = 0;
    for (size_t i = 0; i < na_ops; i++) {
        held[i] = d->a[i];
        int64_t gone = dh__freed(&d->a[i]) - dh__kept(&d->a[i]);
        held[i].mem = -gone;
        held0 += (double)d->a[i].mem + (double)gone;
    }
    dh__prep(d, held, d->ca, d->na, d->memA, d->uta, d->umA, d->usA, d->segA, 0);
    free(held);
    for (size_t u = 0; u <= d->na; u++)
        d->memA[u] += held0;
    for (size_t u = 0; u < d->na; u++)
        d->umA[u] += held0;
    for (size_t k = 0; k < d->na * (size_t)d->L; k++)
        d->segA[k].memmax += held0;
    dh__prep(d, d->b, d->cb, d->nb, d->memB, d->utb, d->umB, d->usB, d->segB, 1);
    dh__held_b(d);
    /* The serial path's peak, over every op state (units only coarsen the grid). */
    double at = 0, maxA = 0, maxB = 0;
    for (size_t i = 0; i < na_ops; i++) {
        at += (double)d->a[i].mem;
        maxA = at > maxA ? at : maxA;
    }
    double endA = at;
    at = 0;
    for (size_t j = 0; j < nb_ops; j++) {
        at += (double)d->b[j].mem;
        maxB = at > maxB ? at : maxB;
    }
    d->base = maxA > endA + maxB ? maxA : endA + maxB;
    /* jlim[i]: how many of B's units a step may reach from row i. Unit j needs the first
     * A unit boundary u at or past every need of its ops and of earlier ones (u only grows):
     * rows below u reach units before j at most. */
    size_t u = 0, i = 0;
    for (size_t j = 0; j < d->nb; j++) {
        for (size_t k = d->cb[j]; p->b_need && k < d->cb[j + 1]; k++)
            while (u < d->na && d->ca[u] < p->b_need[k])
                u++;
        for (; i < u; i++)
            d->jlim[i] = j;
    }
    for (; i <= d->na; i++)
        d->jlim[i] = d->nb;
    dh__masks(d);
    size_t npen = d->nmasks > 0 ? (size_t)d->nmasks : 1;
    if ((d->pen = malloc(npen * (size_t)d->L * d->w * sizeof(double))) == NULL)
        return DH_ERR_NOMEM;
    dh__prep_soa(d);
    return DH_OK;
}

dh_status_t dh_align(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                     const dh_align_model_t *m, const dh_align_params_t *p,
                     dh_align_result_t *out)
{
    memset(out, 0, sizeof(*out));
    if (p->max_seg < 1 || p->max_seg > DH_ALIGN_MAX_SEG || !(p->group_cost_us >= 0) ||
        isinf(p->group_cost_us))
        return DH_ERR_INVALID;
    dh__dp_t d = {.a = a, .b = b, .na = na, .nb = nb, .L = p->max_seg, .G = p->group_cost_us,
                  .bound = p->max_extra_mem, .nobound = p->max_extra_mem < 0, .m = m,
                  .measured = m->nmeasured > 0 && m->measured != NULL};
    dh__model_clamped(m, d.eff);
    d.cc_ok = d.eff[0][0] > 0;
    dh_status_t st = dh__ord_prep(p, a, na, b, nb, &d.ord);
    d.nord = d.ord ? p->norders : 0;
    if (st == DH_OK)
        st = dh__setup(&d, p);
    if (st == DH_OK) {
        dh__fill(&d);
        for (size_t i = 0; i < na; i++)
            out->serial_us += dh__align_us(&a[i]);
        for (size_t j = 0; j < nb; j++)
            out->serial_us += dh__align_us(&b[j]);
        out->cost_us = d.final_cost;
        st = isinf(d.final_cost) ? DH_ERR_STATE : dh__trace(&d, out);
    }
    dh__ord_free(d.ord, d.nord);
    dh__dp_free(&d);
    if (st != DH_OK)
        dh_align_result_free(out);
    return st;
}

void dh_align_result_free(dh_align_result_t *r)
{
    if (r == NULL)
        return;
    free(r->steps);
    memset(r, 0, sizeof(*r));
}
