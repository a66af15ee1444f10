/*
 * plan.dp: the alignment DP (align.h) against a brute-force enumeration of every monotone
 * path of solo and pair steps, with the same segment bound L, units, group overhead,
 * legality and memory rules written again here from their definitions (not from
 * align_dp.c), on seeded random instances; plus hand-made cases where legality, memory or
 * the group overhead forbids the pair that would otherwise win, and the folding of ops into
 * units.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "align.h"

#define NINST 600
#define MAXN 6
/* The larger instances checked against the reference recurrence (not enumerated). */
#define BIGN 48

/* ---- the reference, from the definitions in align.h ---- */

typedef struct ref {
    const dh_align_op_t *a, *b;
    size_t na, nb;
    size_t ca[BIGN + 1], cb[BIGN + 1];   /* unit boundaries in ops */
    size_t nua, nub;                     /* units */
    int L;
    double bound, G;
    double eff[3][3];
    double memA[BIGN + 1], memB[BIGN + 1], base;
    size_t needB[BIGN + 1];   /* A's ops that B's op j and every earlier one need done (b_need,
                                 running maximum); needB[nb] unused */
    double heldA[BIGN + 1];   /* memA as the runtime holds it: all of A's allocations made,
                                 its frees before i applied, and those nothing took back
                                 from i on still held (align.h, "Memory") */
    const dh_align_order_t *orders;
    int norders;
    double best;
    long paths;
} ref_t;

/* The last step of a path: solo a (where every path starts), solo b, a pair. */
enum { LAST_A, LAST_B, LAST_P };

static double clampe(double e)
{
    return e < -1 ? -1 : (e > 1 ? 1 : e);
}

static double solo_us(const dh_align_op_t *op)
{
    return op->us > 0 ? op->us : 0;
}

/* P of a[0..na) beside b[0..nb) or INFINITY when illegal. */
static double ref_pair(const ref_t *r, const dh_align_op_t *a, size_t na, const dh_align_op_t *b,
                       size_t nb)
{
    int commcopy = 0;
    for (size_t x = 0; x < na; x++) {
        if (a[x].cls == DH_CLS_HOST || a[x].pinned)
            return INFINITY;
        commcopy |= a[x].cls == DH_CLS_COMM || a[x].cls == DH_CLS_COPY;
    }
    for (size_t y = 0; y < nb; y++) {
        if (b[y].cls == DH_CLS_HOST || b[y].pinned)
            return INFINITY;
        commcopy |= b[y].cls == DH_CLS_COMM || b[y].cls == DH_CLS_COPY;
    }
    for (size_t x = 0; x < na; x++)
        for (size_t y = 0; y < nb; y++)
            if (a[x].cls == DH_CLS_COMM && b[y].cls == DH_CLS_COMM &&
                a[x].comm >= 0 && a[x].comm == b[y].comm)
                return INFINITY;
    if (!commcopy && clampe(r->eff[0][0]) <= 0)
        return INFINITY;
    double ta = 0, tb = 0, ca[3] = {0}, cb[3] = {0};
    for (size_t x = 0; x < na; x++) {
        ta += solo_us(&a[x]);
        if (a[x].cls < 3)
            ca[a[x].cls] += solo_us(&a[x]);
    }
    for (size_t y = 0; y < nb; y++) {
        tb += solo_us(&b[y]);
        if (b[y].cls < 3)
            cb[b[y].cls] += solo_us(&b[y]);
    }
    double e = 0;
    for (int x = 0; x < 3; x++)
        for (int y = 0; y < 3; y++)
            if (ta > 0 && tb > 0)
                e += ca[x] / ta * cb[y] / tb * clampe(r->eff[x][y]);
    double hi = ta > tb ? ta : tb, lo = ta > tb ? tb : ta;
    return hi + (1 - e) * lo;
}

/* Bytes op frees: its own count, or what its negative mem says. */
static double ref_freed(const dh_align_op_t *op)
{
    return op->freed > 0 ? (double)op->freed : op->mem < 0 ? -(double)op->mem : 0;
}

/* B inside a pair segment that started at op j0, at op j: its frees since j0 wait for the
 * segment's end, and an allocation takes nothing new when what it takes back was freed in
 * the segment (align.h, "Memory"), from the definition op by op. */
static double ref_held_b(const ref_t *r, size_t j0, size_t j)
{
    double at = r->memB[j0];
    for (size_t k = j0; k < j; k++) {
        const dh_align_op_t *op = &r->b[k];
        double made = (double)op->mem + ref_freed(op);
        if (op->retaken > 0 && op->retaken_from > 0 && op->retaken_from <= k - j0)
            made -= (double)op->retaken;
        at += made > 0 ? made : 0;
    }
    return at;
}

/* held: the state is inside a pair or after B started (A's later allocations are made);
 * j0: where B's pair segment started (inside a pair), or (size_t)-1 between steps. */
static double ref_extra(const ref_t *r, size_t i, size_t j, int held, size_t j0)
{
    double mb = j0 == (size_t)-1 ? r->memB[j] : ref_held_b(r, j0, j);
    double x = (held ? r->heldA[i] : r->memA[i]) + mb - r->base;
    return x > 0 ? x : 0;
}

static size_t count_coll(const dh_align_op_t *ops, size_t n, int comm)
{
    size_t c = 0;
    for (size_t k = 0; k < n; k++)
        c += ops[k].cls == DH_CLS_COMM && ops[k].comm == comm;
    return c;
}

/* The collectives done by state (i, j) are a prefix of every order. */
static int ref_orders_ok(const ref_t *r, size_t i, size_t j)
{
    for (int k = 0; k < r->norders; k++) {
        const dh_align_order_t *o = &r->orders[k];
        size_t x = count_coll(r->a, i, o->comm), y = count_coll(r->b, j, o->comm);
        size_t px = 0, py = 0;
        int seen = x == 0 && y == 0;
        for (size_t q = 0; q < o->n && !seen; q++) {
            px += !o->from_b[q];
            py += o->from_b[q] != 0;
            seen = px == x && py == y;
        }
        if (!seen)
            return 0;
    }
    return 1;
}

static int ref_held_ok(const ref_t *r, size_t i, size_t j, int held, size_t j0)
{
    return (r->bound < 0 || ref_extra(r, i, j, held, j0) <= r->bound) && ref_orders_ok(r, i, j);
}

/* A state between steps: A's later allocations are made once B has started. */
static int ref_state_ok(const ref_t *r, size_t i, size_t j)
{
    return ref_held_ok(r, i, j, j > 0, (size_t)-1);
}

/* Every state of the rectangle a pair step spans must be within the bound. */
static int ref_rect_ok(const ref_t *r, size_t i0, size_t i1, size_t j0, size_t j1)
{
    for (size_t i = i0; i <= i1; i++)
        for (size_t j = j0; j <= j1; j++)
            if (!ref_held_ok(r, i, j, 1, j0))
                return 0;
    return 1;
}

static double unit_us(const dh_align_op_t *ops, const size_t *cut, size_t u)
{
    double t = 0;
    for (size_t k = cut[u]; k < cut[u + 1]; k++)
        t += solo_us(&ops[k]);
    return t;
}

/* Dependencies: a step that holds B's ops up to (not including) j1 starts at A's op i. */
static int ref_deps_ok(const ref_t *r, size_t i, size_t j1)
{
    return j1 == 0 || r->needB[j1 - 1] <= i;
}

/* A solo step of unit u of A at B's unit boundary v: every op state it passes is allowed. */
static int ref_solo_a_ok(const ref_t *r, size_t u, size_t v)
{
    for (size_t i = r->ca[u] + 1; i <= r->ca[u + 1]; i++)
        if (!ref_state_ok(r, i, r->cb[v]))
            return 0;
    return 1;
}

static int ref_solo_b_ok(const ref_t *r, size_t u, size_t v)
{
    if (!ref_deps_ok(r, r->ca[u], r->cb[v + 1]))
        return 0;
    for (size_t j = r->cb[v] + 1; j <= r->cb[v + 1]; j++)
        if (!ref_state_ok(r, r->ca[u], j))
            return 0;
    return 1;
}

/* P of units [u, u+l1) of A beside [v, v+l2) of B, INFINITY when illegal or when a state of
 * the rectangle breaks the memory bound or an order. */
static double ref_unit_pair(const ref_t *r, size_t u, size_t l1, size_t v, size_t l2)
{
    size_t i0 = r->ca[u], i1 = r->ca[u + l1], j0 = r->cb[v], j1 = r->cb[v + l2];
    if (!ref_deps_ok(r, i0, j1) || !ref_rect_ok(r, i0, i1, j0, j1))
        return INFINITY;
    return ref_pair(r, r->a + i0, i1 - i0, r->b + j0, j1 - j0);
}

/* Every path from unit state (u, v), whose last step was `last`, with the overhead rule of
 * align.h: a step pays G when it is a pair or switches strands, and the end pays G when the
 * last step is not solo a. */
static void ref_walk(ref_t *r, size_t u, size_t v, double cost, int last)
{
    if (u == r->nua && v == r->nub) {
        r->paths++;
        cost += last != LAST_A ? r->G : 0;
        if (cost < r->best)
            r->best = cost;
        return;
    }
    if (u < r->nua && ref_solo_a_ok(r, u, v))
        ref_walk(r, u + 1, v, cost + unit_us(r->a, r->ca, u) + (last != LAST_A ? r->G : 0),
                 LAST_A);
    if (v < r->nub && ref_solo_b_ok(r, u, v))
        ref_walk(r, u, v + 1, cost + unit_us(r->b, r->cb, v) + (last != LAST_B ? r->G : 0),
                 LAST_B);
    for (int l1 = 1; l1 <= r->L && u + (size_t)l1 <= r->nua; l1++)
        for (int l2 = 1; l2 <= r->L && v + (size_t)l2 <= r->nub; l2++) {
            double p = ref_unit_pair(r, u, (size_t)l1, v, (size_t)l2);
            if (p < INFINITY)
                ref_walk(r, u + (size_t)l1, v + (size_t)l2, cost + p + r->G, LAST_P);
        }
}

static void ref_cuts(const size_t *src, size_t nunits, size_t n, size_t *cut, size_t *nu)
{
    *nu = src ? nunits : n;
    for (size_t u = 0; u <= *nu; u++)
        cut[u] = src ? src[u] : u;
}

static void ref_init(ref_t *r, const dh_align_op_t *a, size_t na, const dh_align_op_t *b,
                     size_t nb, const dh_align_model_t *m, const dh_align_params_t *p)
{
    memset(r, 0, sizeof(*r));
    r->a = a;
    r->b = b;
    r->na = na;
    r->nb = nb;
    ref_cuts(p->a_cuts, p->a_nunits, na, r->ca, &r->nua);
    ref_cuts(p->b_cuts, p->b_nunits, nb, r->cb, &r->nub);
    r->L = p->max_seg;
    r->bound = p->max_extra_mem;
    r->G = p->group_cost_us;
    r->orders = p->orders;
    r->norders = p->norders;
    memcpy(r->eff, m->eff, sizeof(r->eff));
    double maxA = 0, maxB = 0;
    for (size_t i = 0; i < na; i++)
        r->memA[i + 1] = r->memA[i] + (double)a[i].mem;
    for (size_t j = 0; j < nb; j++) {
        size_t n = p->b_need ? p->b_need[j] : 0;
        r->needB[j] = j > 0 && r->needB[j - 1] > n ? r->needB[j - 1] : n;
    }
    /* A direct scan of the frees at or past i that nothing took back (kept, at most freed). */
    for (size_t i = 0; i <= na; i++) {
        r->heldA[i] = r->memA[na];
        for (size_t k = i; k < na; k++) {
            double f = ref_freed(&a[k]), kept = (double)a[k].kept;
            r->heldA[i] += f - (kept < 0 ? 0 : kept > f ? f : kept);
        }
    }
    for (size_t j = 0; j < nb; j++)
        r->memB[j + 1] = r->memB[j] + (double)b[j].mem;
    for (size_t i = 0; i <= na; i++)
        maxA = r->memA[i] > maxA ? r->memA[i] : maxA;
    for (size_t j = 0; j <= nb; j++)
        maxB = r->memB[j] > maxB ? r->memB[j] : maxB;
    r->base = maxA > r->memA[na] + maxB ? maxA : r->memA[na] + maxB;
    r->best = INFINITY;
}

/* ---- random instances ---- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

static void random_op(dh_align_op_t *op)
{
    static const dh_opclass_t cls[] = {DH_CLS_COMPUTE, DH_CLS_COMPUTE, DH_CLS_COMPUTE,
                                       DH_CLS_COMM, DH_CLS_COMM, DH_CLS_COPY, DH_CLS_EVENT,
                                       DH_CLS_FREE, DH_CLS_HOST};
    memset(op, 0, sizeof(*op));
    op->cls = cls[rnd(sizeof(cls) / sizeof(cls[0]))];
    op->us = op->cls == DH_CLS_EVENT || op->cls == DH_CLS_FREE ? 0 : (double)rnd(2000) / 10.0;
    op->comm = op->cls == DH_CLS_COMM ? (int)rnd(4) - 1 : -1;
    op->pinned = rnd(25) == 0;
    op->mem = ((int64_t)rnd(7) - 3) * (1 << 20);
    op->sig = rnd(4);
    /* Reuse as dh_memsim_reuse reports it (a free taken back later, an allocation that
     * takes back an earlier free), at random: the DP and the reference must agree on it. */
    if (op->mem < 0 && rnd(2)) {
        op->freed = -op->mem;
        op->kept = rnd(2) ? op->freed : 0;
    } else if (op->mem > 0 && rnd(2)) {
        op->retaken = (int64_t)(rnd(3) + 1) << 20;
        op->retaken = op->retaken > op->mem ? op->mem : op->retaken;
        op->retaken_from = rnd(4);
    }
}

static void random_model(dh_align_model_t *m)
{
    dh_align_model_default(m);
    if (rnd(3) == 0)
        for (int x = 0; x < 3; x++)
            for (int y = 0; y < 3; y++)
                m->eff[x][y] = (double)((int)rnd(13) - 2) / 10.0;
}

static const double bounds[] = {-1, 0, 1 << 20, 3 << 20};

/* Random orders for every communicator the collectives of a and b use; returns how many. */
static int random_orders(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                         dh_align_order_t *orders, uint8_t seq[][2 * MAXN])
{
    int n = 0;
    for (int comm = 0; comm < 3; comm++) {
        size_t xa = count_coll(a, na, comm), yb = count_coll(b, nb, comm);
        if (xa + yb == 0)
            continue;
        size_t x = 0, y = 0;
        for (size_t q = 0; q < xa + yb; q++) {
            int from_b = x == xa || (y < yb && rnd(2));
            seq[n][q] = (uint8_t)from_b;
            x += !from_b;
            y += from_b;
        }
        orders[n] = (dh_align_order_t){comm, xa + yb, seq[n]};
        n++;
    }
    return n;
}

static const double gcosts[] = {0, 0, 3, 15, 60};

/* Random units for ops[0..n) into cut: none (returns NULL), dh_align_fold's at a random
 * threshold, or random cuts (which may put two collectives in one unit). */
static const size_t *random_units(const dh_align_op_t *ops, size_t n, size_t *cut, size_t *nu)
{
    switch (rnd(3)) {
    case 0:
        return NULL;
    case 1:
        *nu = dh_align_fold(ops, n, (double)rnd(3) * 60, cut);
        return cut;
    default:
        *nu = 0;
        cut[0] = 0;
        for (size_t i = 1; i <= n; i++)
            if (i == n || rnd(2))
                cut[++*nu] = i;
        return cut;
    }
}

/* The unit of A (or B) that starts at op position pos, or -1 when pos is inside a unit. */
static long unit_at(const size_t *cut, size_t nu, size_t pos)
{
    for (size_t u = 0; u <= nu; u++)
        if (cut[u] == pos)
            return (long)u;
    return -1;
}

/* Checks the DP's path: it covers A and B in order in whole units, its steps obey the
 * rules, and its costs, overheads and memory add up to what the DP reports. */
static void check_path(const ref_t *r, const dh_align_result_t *res)
{
    size_t i = 0, j = 0;
    double sum = 0, extra = 0, over = 0;
    int last = LAST_A;
    for (size_t k = 0; k < res->nsteps; k++) {
        const dh_align_step_t *s = &res->steps[k];
        assert_true(s->a_n + s->b_n > 0);
        assert_int_equal(s->a_n ? s->a_first : i, i);
        assert_int_equal(s->b_n ? s->b_first : j, j);
        long u0 = unit_at(r->ca, r->nua, i), u1 = unit_at(r->ca, r->nua, i + s->a_n);
        long v0 = unit_at(r->cb, r->nub, j), v1 = unit_at(r->cb, r->nub, j + s->b_n);
        if (u0 < 0 || u1 < 0 || v0 < 0 || v1 < 0)
            fail_msg("step %zu (a [%zu, +%zu), b [%zu, +%zu)) splits a unit", k, i, s->a_n, j,
                     s->b_n);
        int kind = s->paired ? LAST_P : s->a_n ? LAST_A : LAST_B;
        if (kind == LAST_P || kind != last)
            over += r->G;
        last = kind;
        if (s->b_n && !ref_deps_ok(r, i, j + s->b_n))
            fail_msg("step %zu holds B's ops to %zu before A's first %zu are done", k,
                     j + s->b_n, r->needB[j + s->b_n - 1]);
        if (s->paired) {
            assert_true(u1 - u0 >= 1 && u1 - u0 <= r->L && v1 - v0 >= 1 && v1 - v0 <= r->L);
            assert_true(ref_rect_ok(r, i, i + s->a_n, j, j + s->b_n));
            double p = ref_pair(r, r->a + i, s->a_n, r->b + j, s->b_n);
            assert_true(p < INFINITY);
            assert_true(fabs(p - s->cost_us) <= 1e-9 * (1 + p));
            for (size_t x = i; x <= i + s->a_n; x++)
                for (size_t y = j; y <= j + s->b_n; y++)
                    extra = fmax(extra, ref_extra(r, x, y, 1, j));
        } else {
            assert_true(s->a_n == 0 || s->b_n == 0);
            for (size_t x = 1; x <= s->a_n; x++) {
                assert_true(ref_state_ok(r, i + x, j));
                extra = fmax(extra, ref_extra(r, i + x, j, j > 0, (size_t)-1));
            }
            for (size_t y = 1; y <= s->b_n; y++) {
                assert_true(ref_state_ok(r, i, j + y));
                extra = fmax(extra, ref_extra(r, i, j + y, 1, (size_t)-1));
            }
        }
        sum += s->cost_us;
        i += s->a_n;
        j += s->b_n;
    }
    over += last != LAST_A ? r->G : 0;
    assert_int_equal(i, r->na);
    assert_int_equal(j, r->nb);
    if (fabs(over - res->overhead_us) > 1e-9 * (1 + over))
        fail_msg("the path pays %.17g us of group overhead, the DP says %.17g", over,
                 res->overhead_us);
    if (fabs(sum + over - res->cost_us) > 1e-9 * (1 + sum))
        fail_msg("the steps add up to %.17g + %.17g overhead, the DP says %.17g", sum, over,
                 res->cost_us);
    if (fabs(extra - res->extra_mem) > 1e-6)
        fail_msg("the path's extra memory is %.17g, the DP says %.17g", extra, res->extra_mem);
}

/* Dependencies of B's ops on A's: most none, some on a random prefix of A. */
static void random_need(size_t na, size_t nb, size_t *need)
{
    for (size_t j = 0; j < nb; j++)
        need[j] = rnd(3) == 0 ? rnd(na + 1) : 0;
}

static void test_random_against_brute_force(void **state)
{
    (void)state;
    long paths = 0, paired = 0, improved = 0, ordered = 0, infeasible = 0, units = 0, costly = 0;
    long deps = 0;
    for (int inst = 0; inst < NINST; inst++) {
        rng_state = 0x9e3779b97f4a7c15ull * (uint64_t)(inst + 1);
        dh_align_op_t a[MAXN], b[MAXN];
        size_t na = rnd(MAXN + 1), nb = rnd(MAXN + 1);
        for (size_t i = 0; i < na; i++)
            random_op(&a[i]);
        for (size_t j = 0; j < nb; j++)
            random_op(&b[j]);
        dh_align_model_t m;
        random_model(&m);
        dh_align_params_t p = {.max_seg = (int)rnd(4) + 1, .max_extra_mem = bounds[rnd(4)],
                               .group_cost_us = gcosts[rnd(5)]};
        size_t cuta[MAXN + 1], cutb[MAXN + 1];
        p.a_cuts = random_units(a, na, cuta, &p.a_nunits);
        p.b_cuts = random_units(b, nb, cutb, &p.b_nunits);
        units += p.a_cuts != NULL || p.b_cuts != NULL;
        costly += p.group_cost_us > 0;
        size_t need[MAXN];
        if (inst % 4 == 1 && nb > 0) {
            random_need(na, nb, need);
            p.b_need = need;
            deps++;
        }
        dh_align_order_t orders[4];
        uint8_t seq[4][2 * MAXN];
        if (inst % 3 == 2) {
            p.norders = random_orders(a, na, b, nb, orders, seq);
            p.orders = orders;
            ordered += p.norders > 0;
        }
        ref_t r;
        ref_init(&r, a, na, b, nb, &m, &p);
        ref_walk(&r, 0, 0, 0, LAST_A);
        dh_align_result_t res;
        dh_status_t st = dh_align(a, na, b, nb, &m, &p, &res);
        if (isinf(r.best)) {
            /* Orders that contradict each other (or that units cannot follow): no path
             * keeps them all. */
            if (st != DH_ERR_STATE)
                fail_msg("instance %d: no path keeps the orders, yet dh_align gave %s", inst,
                         dh_status_name(st));
            infeasible++;
            continue;
        }
        assert_int_equal(st, DH_OK);
        if (!(fabs(res.cost_us - r.best) <= 1e-9 * (1 + fabs(r.best))))
            fail_msg("instance %d (nA %zu, nB %zu, L %d, bound %g, G %g, units %d/%d): DP "
                     "%.17g, brute force %.17g over %ld paths", inst, na, nb, p.max_seg,
                     p.max_extra_mem, p.group_cost_us, p.a_cuts != NULL, p.b_cuts != NULL,
                     res.cost_us, r.best, r.paths);
        if (res.cost_us > (res.serial_us + 2 * p.group_cost_us) * (1 + 1e-12))
            fail_msg("instance %d: DP %.17g is worse than serial %.17g plus 2G", inst,
                     res.cost_us, res.serial_us);
        check_path(&r, &res);
        for (int k = 0; k < p.norders; k++) {
            uint8_t got[2 * MAXN];
            size_t n = dh_align_comm_order(&res, a, b, orders[k].comm, got);
            assert_int_equal(n, orders[k].n);
            assert_memory_equal(got, orders[k].from_b, n);
        }
        paths += r.paths;
        paired += res.npairs > 0;
        improved += res.cost_us < res.serial_us - 1e-9;
        dh_align_result_free(&res);
    }
    printf("plan.dp: %d instances (%ld with units, %ld with a group cost, %ld with "
           "dependencies), %ld paths enumerated; %ld with pairs, %ld faster than serial, %ld "
           "with orders of collectives (%ld of them infeasible)\n", NINST, units, costly, deps,
           paths, paired, improved, ordered,
           infeasible);
    /* A generator that never exercised pairs would make the comparison hollow. */
    assert_true(paired > NINST / 4);
    assert_true(improved > NINST / 5);
    assert_true(units > NINST / 2 && costly > NINST / 4);
}

/* The layered recurrence of align.h evaluated directly (O(n^2 L^2) calls of ref_pair), for
 * instances too large to enumerate. */
static double ref_dp(const ref_t *r)
{
    static double T[3][BIGN + 1][BIGN + 1];
    const double G = r->G;
    for (size_t u = 0; u <= r->nua; u++) {
        for (size_t v = 0; v <= r->nub; v++) {
            double ta = INFINITY, tb = INFINITY, tp = INFINITY;
            if (u == 0 && v == 0) {
                ta = 0;
            } else if (ref_state_ok(r, r->ca[u], r->cb[v])) {
                if (u > 0 && ref_solo_a_ok(r, u - 1, v))
                    ta = fmin(T[LAST_A][u - 1][v],
                              fmin(T[LAST_B][u - 1][v], T[LAST_P][u - 1][v]) + G) +
                         unit_us(r->a, r->ca, u - 1);
                if (v > 0 && ref_solo_b_ok(r, u, v - 1))
                    tb = fmin(T[LAST_B][u][v - 1],
                              fmin(T[LAST_A][u][v - 1], T[LAST_P][u][v - 1]) + G) +
                         unit_us(r->b, r->cb, v - 1);
                for (size_t l1 = 1; l1 <= (size_t)r->L && l1 <= u; l1++)
                    for (size_t l2 = 1; l2 <= (size_t)r->L && l2 <= v; l2++) {
                        size_t u0 = u - l1, v0 = v - l2;
                        double p = ref_unit_pair(r, u0, l1, v0, l2);
                        double m = fmin(T[LAST_A][u0][v0],
                                        fmin(T[LAST_B][u0][v0], T[LAST_P][u0][v0]));
                        tp = fmin(tp, m + p + G);
                    }
            }
            T[LAST_A][u][v] = ta;
            T[LAST_B][u][v] = tb;
            T[LAST_P][u][v] = tp;
        }
    }
    size_t u = r->nua, v = r->nub;
    return fmin(T[LAST_A][u][v], fmin(T[LAST_B][u][v], T[LAST_P][u][v]) + G);
}

/* Longer sequences, some with a communicator per op (more distinct communicator masks than
 * the DP precomputes penalties for, which takes its other inner loop). */
static void test_larger_against_recurrence(void **state)
{
    (void)state;
    for (int inst = 0; inst < 120; inst++) {
        rng_state = 0x2545f4914f6cdd1dull * (uint64_t)(inst + 7);
        dh_align_op_t a[BIGN], b[BIGN];
        size_t na = 20 + rnd(BIGN - 19), nb = 20 + rnd(BIGN - 19);
        int many = inst % 3 == 0;
        for (size_t i = 0; i < na; i++) {
            random_op(&a[i]);
            if (many && a[i].cls == DH_CLS_COMM)
                a[i].comm = (int)i;
        }
        for (size_t j = 0; j < nb; j++) {
            random_op(&b[j]);
            if (many && b[j].cls == DH_CLS_COMM)
                b[j].comm = (int)(j + 7) % 60;
        }
        dh_align_model_t m;
        random_model(&m);
        dh_align_params_t p = {.max_seg = (int)rnd(8) + 1, .max_extra_mem = bounds[rnd(4)],
                               .group_cost_us = gcosts[rnd(5)]};
        size_t cuta[BIGN + 1], cutb[BIGN + 1];
        p.a_cuts = random_units(a, na, cuta, &p.a_nunits);
        p.b_cuts = random_units(b, nb, cutb, &p.b_nunits);
        size_t need[BIGN];
        if (inst % 2 == 1) {
            random_need(na, nb, need);
            p.b_need = need;
        }
        ref_t r;
        ref_init(&r, a, na, b, nb, &m, &p);
        double want = ref_dp(&r);
        dh_align_result_t res;
        assert_int_equal(dh_align(a, na, b, nb, &m, &p, &res), DH_OK);
        if (!(fabs(res.cost_us - want) <= 1e-9 * (1 + fabs(want))))
            fail_msg("instance %d (nA %zu, nB %zu, L %d, bound %g, G %g, many comms %d): DP "
                     "%.17g, recurrence %.17g", inst, na, nb, p.max_seg, p.max_extra_mem,
                     p.group_cost_us, many, res.cost_us, want);
        check_path(&r, &res);
        dh_align_result_free(&res);
    }
}

static dh_align_op_t op(dh_opclass_t cls, double us, int comm, int64_t mem)
{
    dh_align_op_t o = {.us = us, .cls = cls, .comm = comm, .mem = mem};
    return o;
}

static double run(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                  const dh_align_model_t *m, double bound, int *npairs)
{
    dh_align_params_t p = {.max_seg = 4, .max_extra_mem = bound};
    dh_align_result_t res;
    assert_int_equal(dh_align(a, na, b, nb, m, &p, &res), DH_OK);
    double c = res.cost_us;
    if (npairs)
        *npairs = res.npairs;
    dh_align_result_free(&res);
    return c;
}

#define EXPECT_US(got, want)                                                               \
    do {                                                                                   \
        double g_ = (got), w_ = (want);                                                    \
        if (fabs(g_ - w_) > 1e-9 * (1 + fabs(w_)))                                         \
            fail_msg("%s = %.17g, expected %.17g", #got, g_, w_);                          \
    } while (0)

/* compute || comm overlaps at 0.9: 100 + 0.1 * 100. */
static void test_compute_beside_comm(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    dh_align_op_t a[] = {op(DH_CLS_COMPUTE, 100, -1, 0)}, b[] = {op(DH_CLS_COMM, 100, 0, 0)};
    int np;
    EXPECT_US(run(a, 1, b, 1, &m, -1, &np), 110);
    assert_int_equal(np, 1);
    EXPECT_US(run(NULL, 0, NULL, 0, &m, -1, &np), 0);
    EXPECT_US(run(a, 1, NULL, 0, &m, -1, &np), 100);
}

/* The best pair (two collectives that co-run well, per a measured class table) is illegal
 * on one communicator: NCCL needs one order per communicator. */
static void test_legality_forbids_the_best_pair(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    m.eff[DH_CLS_COMM][DH_CLS_COMM] = 0.5;
    dh_align_op_t a[] = {op(DH_CLS_COMM, 100, 0, 0)};
    dh_align_op_t b_other[] = {op(DH_CLS_COMM, 100, 1, 0)}, b_same[] = {op(DH_CLS_COMM, 100, 0, 0)};
    int np;
    EXPECT_US(run(a, 1, b_other, 1, &m, -1, &np), 150);
    assert_int_equal(np, 1);
    EXPECT_US(run(a, 1, b_same, 1, &m, -1, &np), 200);
    assert_int_equal(np, 0);
    /* A comm op without a communicator (comm -1) is a channel of its own: legal beside any
     * collective, and beside another comm -1 op. */
    dh_align_op_t b_none[] = {op(DH_CLS_COMM, 100, -1, 0)};
    EXPECT_US(run(a, 1, b_none, 1, &m, -1, &np), 150);
    assert_int_equal(np, 1);
    /* A pinned op or a host op is never paired. */
    dh_align_op_t gemm[] = {op(DH_CLS_COMPUTE, 100, -1, 0)};
    EXPECT_US(run(gemm, 1, b_other, 1, &m, -1, &np), 110);
    gemm[0].pinned = 1;
    EXPECT_US(run(gemm, 1, b_other, 1, &m, -1, &np), 200);
    gemm[0] = op(DH_CLS_HOST, 100, -1, 0);
    EXPECT_US(run(gemm, 1, b_other, 1, &m, -1, &np), 200);
    /* compute || compute is legal only where the table says it gains. */
    dh_align_op_t g1[] = {op(DH_CLS_COMPUTE, 100, -1, 0)}, g2[] = {op(DH_CLS_COMPUTE, 100, -1, 0)};
    EXPECT_US(run(g1, 1, g2, 1, &m, -1, &np), 200);
    assert_true(isinf(dh_align_pair_cost(&m, g1, 1, g2, 1)));
    m.eff[DH_CLS_COMPUTE][DH_CLS_COMPUTE] = 0.3;
    EXPECT_US(run(g1, 1, g2, 1, &m, -1, &np), 170);
    assert_true(isinf(dh_align_pair_cost(&m, a, 1, b_same, 1)));
}

/* A measured single-op pair overrides the class table. */
static void test_measured_pair(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    dh_align_op_t a[] = {op(DH_CLS_COMPUTE, 100, -1, 0)}, b[] = {op(DH_CLS_COMM, 50, 0, 0)};
    a[0].sig = 7;
    b[0].sig = 9;
    dh_align_measured_t meas[] = {{7, 9, 0.4}};
    m.measured = meas;
    m.nmeasured = 1;
    EXPECT_US(dh_align_pair_cost(&m, a, 1, b, 1), 100 + 0.6 * 50);
    EXPECT_US(run(a, 1, b, 1, &m, -1, NULL), 130);
}

/* Pairing a1 with b1 holds both allocations at once: 1 GiB above the serial peak. */
static void test_memory_bound_forbids_the_pair(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    const int64_t gib = 1ll << 30;
    dh_align_op_t a[] = {op(DH_CLS_COMPUTE, 100, -1, gib), op(DH_CLS_FREE, 0, -1, -gib)};
    dh_align_op_t b[] = {op(DH_CLS_COMM, 100, 0, gib)};
    dh_align_params_t p = {.max_seg = 4, .max_extra_mem = 2.0 * gib};
    dh_align_result_t res;
    assert_int_equal(dh_align(a, 2, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 110);
    EXPECT_US(res.extra_mem, (double)gib);
    dh_align_result_free(&res);
    p.max_extra_mem = 512.0 * 1024 * 1024;
    assert_int_equal(dh_align(a, 2, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 200);
    EXPECT_US(res.extra_mem, 0);
    assert_int_equal(res.npairs, 0);
    dh_align_result_free(&res);
}

/* The runtime holds A's ops from the first pair on, so A's frees there wait for the pair
 * while all of A's allocations are made (the program issues all of A before B): pairing
 * b1 with a1, ahead of a free of 1 GiB and an allocation of 1 GiB, holds 1 GiB more than
 * the serial peak; pairing it with a3, after both, holds nothing. */
static void test_memory_held_frees(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    const int64_t gib = 1ll << 30;
    dh_align_op_t a[] = {op(DH_CLS_COMPUTE, 100, -1, 0), op(DH_CLS_FREE, 0, -1, -gib),
                         op(DH_CLS_COMPUTE, 50, -1, gib)};
    dh_align_op_t b[] = {op(DH_CLS_COMM, 100, 0, 0)};
    dh_align_params_t p = {.max_seg = 1, .max_extra_mem = -1};
    dh_align_result_t res;
    /* Unbounded: the best pair is a1 || b1 (saves 90 us), holding 1 GiB. */
    assert_int_equal(dh_align(a, 3, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 110 + 50);
    EXPECT_US(res.extra_mem, (double)gib);
    dh_align_result_free(&res);
    /* Within 512 MiB: only a3 || b1 (saves 45 us). */
    p.max_extra_mem = 512.0 * 1024 * 1024;
    assert_int_equal(dh_align(a, 3, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 100 + 100 + 0.1 * 50);
    EXPECT_US(res.extra_mem, 0);
    assert_int_equal(res.npairs, 1);
    assert_int_equal(res.steps[res.nsteps - 1].a_first, 2);
    dh_align_result_free(&res);
}

/* A free that a later allocation of A takes back (the shim's pool, kept) is not held: its
 * bytes live on in that allocation. With a2's free kept by a3, pairing b1 with a1 holds no
 * more than the serial peak, so the best pair is allowed within 512 MiB. */
static void test_memory_kept_free(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    const int64_t gib = 1ll << 30;
    dh_align_op_t a[] = {op(DH_CLS_COMPUTE, 100, -1, 0), op(DH_CLS_FREE, 0, -1, -gib),
                         op(DH_CLS_COMPUTE, 50, -1, gib)};
    a[1].freed = a[1].kept = gib;
    dh_align_op_t b[] = {op(DH_CLS_COMM, 100, 0, 0)};
    dh_align_params_t p = {.max_seg = 1, .max_extra_mem = 512.0 * 1024 * 1024};
    dh_align_result_t res;
    assert_int_equal(dh_align(a, 3, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 110 + 50);
    EXPECT_US(res.extra_mem, 0);
    dh_align_result_free(&res);
}

/* B's frees inside a paired group wait for the group: B = alloc 1 GiB, free it, alloc
 * 1 GiB (50 + 0 + 50 us) beside a 150 us compute. All of B in one pair (160 us) holds 2 GiB
 * at its end against the serial peak of 1 GiB, unless B's second allocation takes back the
 * block its free parked in the same group (retaken): then nothing. Within 512 MiB, without
 * that, the best is a1 || (b1, b2), then b3 alone (205 us). */
static void test_memory_b_in_group(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    const int64_t gib = 1ll << 30;
    dh_align_op_t a[] = {op(DH_CLS_COMPUTE, 150, -1, 0)};
    dh_align_op_t b[] = {op(DH_CLS_COMM, 50, 0, gib), op(DH_CLS_FREE, 0, -1, -gib),
                         op(DH_CLS_COMM, 50, 0, gib)};
    b[1].freed = gib;
    dh_align_params_t p = {.max_seg = 3, .max_extra_mem = -1};
    dh_align_result_t res;
    assert_int_equal(dh_align(a, 1, b, 3, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 150 + 0.1 * 100);
    EXPECT_US(res.extra_mem, (double)gib);
    dh_align_result_free(&res);
    p.max_extra_mem = 512.0 * 1024 * 1024;
    assert_int_equal(dh_align(a, 1, b, 3, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 150 + 0.1 * 50 + 50);
    EXPECT_US(res.extra_mem, 0);
    dh_align_result_free(&res);
    b[1].kept = gib;
    b[2].retaken = gib;
    b[2].retaken_from = 1;
    assert_int_equal(dh_align(a, 1, b, 3, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 150 + 0.1 * 100);
    EXPECT_US(res.extra_mem, 0);
    dh_align_result_free(&res);
}

/* The group overhead: a pair pays G for its group and G to hand back to strand a, a leading
 * solo-a step pays nothing, and a pair that gains less than its overhead loses to serial. */
static void test_group_overhead(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    dh_align_op_t a[] = {op(DH_CLS_HOST, 50, -1, 0), op(DH_CLS_COMPUTE, 100, -1, 0)};
    dh_align_op_t b[] = {op(DH_CLS_COMM, 100, 0, 0)};
    dh_align_params_t p = {.max_seg = 4, .max_extra_mem = -1, .group_cost_us = 10};
    dh_align_result_t res;
    /* host (solo a, joins the work before) | compute || comm (110 + G) | hand back (G). */
    assert_int_equal(dh_align(a, 2, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 50 + 110 + 20);
    EXPECT_US(res.overhead_us, 20);
    EXPECT_US(res.serial_us, 250);
    assert_int_equal(res.nsteps, 2);
    assert_int_equal(res.npairs, 1);
    dh_align_result_free(&res);
    /* With G = 50 the pair (110 + 100) no longer beats serial (200): the DP still returns
     * its best path, and says so by a cost not below serial_us. */
    p.group_cost_us = 50;
    assert_int_equal(dh_align(a + 1, 1, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 210);
    assert_true(res.cost_us >= res.serial_us);
    dh_align_result_free(&res);
    /* Nothing to pair: A then B pays the switch to b and the hand-back. */
    dh_align_op_t g1[] = {op(DH_CLS_COMPUTE, 100, -1, 0)}, g2[] = {op(DH_CLS_COMPUTE, 40, -1, 0)};
    p.group_cost_us = 10;
    assert_int_equal(dh_align(g1, 1, g2, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 160);
    EXPECT_US(res.overhead_us, 20);
    assert_int_equal(res.npairs, 0);
    dh_align_result_free(&res);
    p.group_cost_us = -1;
    assert_int_equal(dh_align(g1, 1, g2, 1, &m, &p, &res), DH_ERR_INVALID);
}

/* Folding: events, frees and short ops join the next op that takes time (the last one at
 * the end); collectives and host ops always anchor; a unit is never split by a step. */
static void test_fold_units(void **state)
{
    (void)state;
    dh_align_op_t ops[] = {op(DH_CLS_EVENT, 0, -1, 0),    op(DH_CLS_FREE, 0, -1, -8),
                           op(DH_CLS_COMPUTE, 10, -1, 0), op(DH_CLS_EVENT, 0, -1, 0),
                           op(DH_CLS_COMM, 1, 0, 0),      op(DH_CLS_COMPUTE, 1, -1, 0),
                           op(DH_CLS_HOST, 1, -1, 0),     op(DH_CLS_COPY, 1, -1, 0),
                           op(DH_CLS_COMPUTE, 5, -1, 0),  op(DH_CLS_FREE, 0, -1, 0)};
    size_t cuts[11];
    static const size_t want[] = {0, 3, 5, 7, 10};
    size_t n = dh_align_fold(ops, 10, 2.0, cuts);
    assert_int_equal(n, 4);
    assert_memory_equal(cuts, want, sizeof(want));
    /* Nothing anchors: one unit. No ops: no unit. */
    assert_int_equal(dh_align_fold(ops, 2, 2.0, cuts), 1);
    assert_int_equal(cuts[1], 2);
    assert_int_equal(dh_align_fold(ops, 0, 2.0, cuts), 0);
    assert_int_equal(cuts[0], 0);
    /* Threshold 0: every op that is not an event or a free anchors. */
    assert_int_equal(dh_align_fold(ops, 10, 0, cuts), 6);

    /* The DP on units: B's comm unit [ev, comm 1] beside A's compute unit; the short compute
     * in A's third unit rides with its host op, so that unit stays solo. */
    dh_align_model_t m;
    dh_align_model_default(&m);
    dh_align_op_t a[] = {op(DH_CLS_EVENT, 0, -1, 0), op(DH_CLS_COMPUTE, 100, -1, 0),
                         op(DH_CLS_COMPUTE, 1, -1, 0), op(DH_CLS_HOST, 3, -1, 0)};
    dh_align_op_t b[] = {op(DH_CLS_EVENT, 0, -1, 0), op(DH_CLS_COMM, 100, 0, 0),
                         op(DH_CLS_FREE, 0, -1, 0)};
    size_t ca[5], cb[4];
    dh_align_params_t p = {.max_seg = 4, .max_extra_mem = -1, .group_cost_us = 10};
    p.a_nunits = dh_align_fold(a, 4, 2.0, ca);
    p.b_nunits = dh_align_fold(b, 3, 2.0, cb);
    p.a_cuts = ca;
    p.b_cuts = cb;
    assert_int_equal(p.a_nunits, 2);
    assert_int_equal(p.b_nunits, 1);
    dh_align_result_t res;
    assert_int_equal(dh_align(a, 4, b, 3, &m, &p, &res), DH_OK);
    assert_int_equal(res.nsteps, 2);
    const dh_align_step_t *s0 = &res.steps[0], *s1 = &res.steps[1];
    assert_true(s0->paired && s0->a_first == 0 && s0->a_n == 2 && s0->b_first == 0 &&
                s0->b_n == 3);
    assert_true(!s1->paired && s1->a_first == 2 && s1->a_n == 2 && s1->b_n == 0);
    /* pair 110 + G, then solo a (a switch from the pair) 4 + G. */
    EXPECT_US(res.cost_us, 110 + 10 + 4 + 10);
    dh_align_result_free(&res);
    /* Cuts that do not cover the sequence are refused. */
    size_t bad[] = {0, 2, 2, 4};
    p.a_cuts = bad;
    p.a_nunits = 3;
    assert_int_equal(dh_align(a, 4, b, 3, &m, &p, &res), DH_ERR_INVALID);
    bad[2] = 3;
    bad[3] = 5;
    assert_int_equal(dh_align(a, 4, b, 3, &m, &p, &res), DH_ERR_INVALID);
}

static void test_bad_params(void **state)
{
    (void)state;
    dh_align_model_t m;
    dh_align_model_default(&m);
    dh_align_params_t p = {.max_seg = 0, .max_extra_mem = -1};
    dh_align_result_t res;
    assert_int_equal(dh_align(NULL, 0, NULL, 0, &m, &p, &res), DH_ERR_INVALID);
    p.max_seg = DH_ALIGN_MAX_SEG + 1;
    assert_int_equal(dh_align(NULL, 0, NULL, 0, &m, &p, &res), DH_ERR_INVALID);
    /* An order must list exactly its communicator's collectives. */
    dh_align_op_t a[] = {op(DH_CLS_COMM, 10, 0, 0)}, b[] = {op(DH_CLS_COMPUTE, 10, -1, 0)};
    const uint8_t two_b[] = {1, 1}, one_a[] = {0};
    dh_align_order_t o = {0, 2, two_b};
    p = (dh_align_params_t){.max_seg = 2, .max_extra_mem = -1, .orders = &o, .norders = 1};
    assert_int_equal(dh_align(a, 1, b, 1, &m, &p, &res), DH_ERR_INVALID);
    /* Ops without a communicator (comm -1) have no order. */
    dh_align_op_t a_none[] = {op(DH_CLS_COMM, 10, -1, 0)};
    o = (dh_align_order_t){-1, 1, one_a};
    assert_int_equal(dh_align(a_none, 1, b, 1, &m, &p, &res), DH_ERR_INVALID);
    o = (dh_align_order_t){0, 1, one_a};
    assert_int_equal(dh_align(a, 1, b, 1, &m, &p, &res), DH_OK);
    EXPECT_US(res.cost_us, 11);
    dh_align_result_free(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_brute_force),
        cmocka_unit_test(test_larger_against_recurrence),
        cmocka_unit_test(test_compute_beside_comm),
        cmocka_unit_test(test_legality_forbids_the_best_pair),
        cmocka_unit_test(test_measured_pair),
        cmocka_unit_test(test_memory_bound_forbids_the_pair),
        cmocka_unit_test(test_memory_held_frees),
        cmocka_unit_test(test_memory_kept_free),
        cmocka_unit_test(test_memory_b_in_group),
        cmocka_unit_test(test_group_overhead),
        cmocka_unit_test(test_fold_units),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
