/* phases.c: the repeating iteration of a profile, its statistics, and its phases. */
#include "planner_int.h"
#include "plan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- segments and the period ---- */

/* Segment starts (a segment begins at op 0 and at every op with sync_before) and one hash
 * per segment over (sig, thread) of its ops and its length. */
static dh_status_t dh__segments(const dh_profile_t *p, size_t **start, uint64_t **hash,
                                size_t *nseg)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nops; i++)
        n += i == 0 || p->ops[i].sync_before;
    *start = malloc((n + 1) * sizeof(**start));
    *hash = malloc((n ? n : 1) * sizeof(**hash));
    if (*start == NULL || *hash == NULL)
        return DH_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < p->nops; i++)
        if (i == 0 || p->ops[i].sync_before)
            (*start)[k++] = i;
    (*start)[n] = p->nops;
    for (k = 0; k < n; k++) {
        uint64_t h = DH__FNV_OFFSET;
        for (size_t i = (*start)[k]; i < (*start)[k + 1]; i++) {
            h = dh__fnv_u64(h, p->ops[i].sig);
            h = dh__fnv_u64(h, p->ops[i].thread);
        }
        (*hash)[k] = dh__fnv_u64(h, (*start)[k + 1] - (*start)[k]);
    }
    *nseg = n;
    return DH_OK;
}

/* Z-function of r[0..m): z[k] = length of the longest common prefix of r and r[k..). With r
 * the segment hashes read backwards from the end, z[p] >= p says the last 2p segments repeat
 * with period p, and z[k p] >= p that the (k+1)-th period from the end repeats the last. */
static void dh__zfunc(const uint64_t *r, size_t m, size_t *z)
{
    if (m == 0)
        return;
    z[0] = m;
    size_t l = 0, rr = 0;
    for (size_t k = 1; k < m; k++) {
        size_t v = 0;
        if (k < rr)
            v = z[k - l] < rr - k ? z[k - l] : rr - k;
        while (k + v < m && r[v] == r[k + v])
            v++;
        z[k] = v;
        if (k + v > rr) {
            l = k;
            rr = k + v;
        }
    }
}

/* 1 when profile ops [x, x+n) and [y, y+n) have the same sigs and threads (the hashes said
 * so; this rules out a collision). */
static int dh__same_ops(const dh_profile_t *p, size_t x, size_t y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p->ops[x + i].sig != p->ops[y + i].sig || p->ops[x + i].thread != p->ops[y + i].thread)
            return 0;
    return 1;
}

/* The complete repetitions of the period [b, b+per) (segments) inside the periodic region
 * [lo, m), counted backwards from it and checked op by op; 0 when b is outside. */
static int dh__reps_at(const dh_profile_t *p, const size_t *start, size_t b, size_t per,
                       size_t lo, size_t *first, size_t *n)
{
    if (b < lo)
        return 0;
    *first = start[b];
    *n = start[b + per] - start[b];
    int reps = 1;
    size_t maxreps = (b - lo) / per + 1;
    while ((size_t)reps < maxreps && *first >= (size_t)reps * *n &&
           dh__same_ops(p, *first, *first - (size_t)reps * *n, *n))
        reps++;
    return reps;
}

/* How many trailing segments that are no iteration the search looks past. */
#define DH__MAX_TAIL_SEGMENTS 4096

/* What a candidate start b of a period of per segments, whose repetitions go back to
 * segment lo, is taken for; 1 and *it when it is the iteration. */
typedef struct dh__per_ctx {
    const dh_profile_t *p;
    const size_t *start;
    const uint64_t *hash;           /* the exact hashes of the segments */
} dh__per_ctx_t;
typedef int (*dh__take_fn)(const dh__per_ctx_t *c, size_t b, size_t per, size_t lo,
                           dh_iteration_t *it);

/* The periods of key[0..m), shortest first: for each per that the last 2 per segments
 * repeat, take() on two candidates for the iteration's start, the end of the segments
 * (first when end_first) and the grid from the profile's first op. 1 when one was taken. */
static int dh__periods(const dh__per_ctx_t *c, const uint64_t *key, size_t m, int end_first,
                       uint64_t *r, size_t *z, dh__take_fn take, dh_iteration_t *it)
{
    for (size_t k = 0; k < m; k++)
        r[k] = key[m - 1 - k];
    dh__zfunc(r, m, z);
    for (size_t per = 1; 2 * per <= m; per++) {
        if (z[per] < per)
            continue;
        /* key[y] == key[y - per] for every y in [lo + per, m). */
        size_t lo = per + z[per] >= m ? 0 : m - per - z[per];
        size_t cand[2] = {m - per, (m - per) / per * per};
        for (int k = 0; k < 2; k++) {
            size_t b = cand[end_first ? k : 1 - k];
            if (b >= lo && take(c, b, per, lo, it))
                return 1;
        }
    }
    return 0;
}

/* The repetitions op for op of the period starting at b. */
static int dh__take_exact(const dh__per_ctx_t *c, size_t b, size_t per, size_t lo,
                          dh_iteration_t *it)
{
    size_t first, n;
    int reps = dh__reps_at(c->p, c->start, b, per, lo, &first, &n);
    if (reps < 2 || n == 0)
        return 0;
    *it = (dh_iteration_t){first, n, reps, per, reps};
    return 1;
}

/* A period of the exact hashes (m segments remain). Every rotation of a period is a
 * period; of the two candidates the end of the kept segments is right when the profile
 * stopped at an iteration boundary (nothing dropped and sync_at_end), the grid from the
 * first op when iteration 0 has as many segments as the others. */
static int dh__try_period(const dh__per_ctx_t *c, size_t m, int end_first, uint64_t *r,
                          size_t *z, dh_iteration_t *it)
{
    return dh__periods(c, c->hash, m, end_first, r, z, dh__take_exact, it);
}

/* ---- iterations whose operations vary with the data ---- */

/* Per segment, a hash of what a program issues whatever its data: its collectives (sig and
 * thread) and the turns between threads. The kernels, copies, GEMMs and frees that a
 * program issues per token count (an MoE expert that gets no token skips its GEMMs, a
 * regrouping copy of an empty bucket is not launched: tests/workloads/src/moe.c) are left
 * out, so that iterations which differ only there look alike. The recorder's stop rule
 * computes the same hash (profile_rec.c). */
static void dh__coarse(const dh_profile_t *p, const size_t *start, size_t nseg, uint64_t *out)
{
    for (size_t k = 0; k < nseg; k++) {
        uint64_t h = DH__FNV_OFFSET;
        for (size_t i = start[k]; i < start[k + 1]; i++) {
            const dh_prof_op_t *o = &p->ops[i];
            if (o->cls == DH_CLS_COMM) {
                h = dh__fnv_u64(h, o->sig);
                h = dh__fnv_u64(h, o->thread);
            } else if (i == start[k] || o->thread != p->ops[i - 1].thread) {
                h = dh__fnv_u64(h, 0x7468726561640000ull ^ o->thread);
            }
        }
        out[k] = h;
    }
}

/* Whether ops [x, y) come from two threads or more: an iteration without a backward thread
 * has nothing to pair (a set-up or checksum loop repeats too). */
static int dh__two_threads(const dh_profile_t *p, size_t x, size_t y)
{
    for (size_t i = x + 1; i < y; i++)
        if (p->ops[i].thread != p->ops[x].thread)
            return 1;
    return 0;
}

/* The exact content of the iteration window of per segments starting at segment w. */
static uint64_t dh__window_hash(const uint64_t *hash, size_t w, size_t per)
{
    uint64_t h = DH__FNV_OFFSET;
    for (size_t s = w; s < w + per; s++)
        h = dh__fnv_u64(h, hash[s]);
    return h;
}

/* Among the iteration windows b, b - per, ... inside [lo, ...) (coarse repetitions of one
 * another), the exact content that occurs most often, at least twice (among equals the
 * latest); 1 and *it when there is one. */
static int dh__pick_variant(const dh_profile_t *p, const size_t *start, const uint64_t *hash,
                            size_t b, size_t per, size_t lo, dh_iteration_t *it)
{
    size_t nw = (b - lo) / per + 1, best = 0, best_cnt = 0;
    uint64_t *wh = malloc(nw * sizeof(*wh));
    if (wh == NULL)
        return 0;
    for (size_t j = 0; j < nw; j++)
        wh[j] = dh__window_hash(hash, b - j * per, per);
    for (size_t j = 0; j < nw; j++) {
        size_t x = start[b - j * per], n = start[b - j * per + per] - x, cnt = 0;
        for (size_t q = 0; q < nw; q++) {
            size_t y = start[b - q * per];
            cnt += wh[q] == wh[j] && start[b - q * per + per] - y == n && dh__same_ops(p, x, y, n);
        }
        if (cnt > best_cnt) {
            best_cnt = cnt;
            best = j;
        }
    }
    free(wh);
    if (best_cnt < 2)
        return 0;
    size_t w = b - best * per, first = start[w], n = start[w + per] - first;
    int reps = 1;
    while (first >= (size_t)reps * n && w >= lo + (size_t)reps * per &&
           start[w - (size_t)reps * per] == first - (size_t)reps * n &&
           dh__same_ops(p, first, first - (size_t)reps * n, n))
        reps++;
    *it = (dh_iteration_t){first, n, reps, per, (int)best_cnt};
    return 1;
}

/* A candidate of a period of the coarse hashes: its iterations cover at least half of the
 * profile, start like the program's first op (the recorder's stop rule too, profile_rec.c:
 * that fixes the rotation, which the collectives alone leave open: a trailing segment cut
 * short by the recorder's stop looks like a whole one to them), hold two threads, and one
 * of them repeats op for op (dh__pick_variant). */
static int dh__take_variant(const dh__per_ctx_t *c, size_t b, size_t per, size_t lo,
                            dh_iteration_t *it)
{
    const dh_profile_t *p = c->p;
    const size_t *start = c->start;
    size_t covered = start[b + per] - start[b - (b - lo) / per * per];
    if (2 * covered < p->nops || p->ops[start[b]].sig != p->ops[0].sig ||
        !dh__two_threads(p, start[b], start[b + per]))
        return 0;
    return dh__pick_variant(p, start, c->hash, b, per, lo, it);
}

/* A period of the program's collectives and threads (the coarse hashes, m segments
 * remain), and of its iterations the one that repeats most often, op for op, as the
 * template. The runtime follows it in the iterations that match it and runs the others in
 * program order on every rank (tracker.c: a rank that does not match says no, and no rank
 * pairs the rest of that iteration). The grid of the program's first iteration first: when
 * the recorder stopped, the end of the profile is an iteration boundary only as far as the
 * collectives can tell, and an iteration may end with a segment that starts like the next
 * one. */
static int dh__try_variants(const dh__per_ctx_t *c, const uint64_t *coarse, size_t m,
                            uint64_t *r, size_t *z, dh_iteration_t *it)
{
    return dh__periods(c, coarse, m, 0, r, z, dh__take_variant, it);
}

dh_status_t dh_profile_find_iteration(const dh_profile_t *p, const char *name,
                                      dh_iteration_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (p->trimmed_n > 0 && p->nops % p->trimmed_n == 0 && p->nops / p->trimmed_n >= 2) {
        /* Trimmed to whole repetitions of the iteration found in the whole profile: looking
         * again in what is left could take a shorter period for it (two micro-batches alike
         * at the end of an iteration that starts inside a forward). */
        size_t per_seg = 0;
        for (size_t i = 0; i < p->trimmed_n; i++)
            per_seg += i == 0 || p->ops[i].sync_before;
        *out = (dh_iteration_t){p->nops - p->trimmed_n, p->trimmed_n,
                                (int)(p->nops / p->trimmed_n), per_seg, 0};
        return DH_OK;
    }
    size_t *start = NULL, *z = NULL, nseg = 0;
    uint64_t *hash = NULL, *r = NULL;
    dh_status_t st = dh__segments(p, &start, &hash, &nseg);
    if (st == DH_OK) {
        r = malloc((nseg ? nseg : 1) * sizeof(*r));
        z = malloc((nseg ? nseg : 1) * sizeof(*z));
        st = r && z ? DH_OK : DH_ERR_NOMEM;
    }
    dh__per_ctx_t pc = {p, start, hash};
    int found = 0;
    /* Fewest dropped segments first: dropping segments of a complete profile could reveal
     * a spurious short period inside an iteration (micro-batches that look alike). */
    for (size_t drop = 0; st == DH_OK && drop <= 2 && drop < nseg && !found; drop++)
        found = dh__try_period(&pc, nseg - drop, drop == 0 && p->sync_at_end, r, z,
                               out);
    /* A program does more than train: after its steps it may run a loop of its own (a
     * checksum or an evaluation per parameter, a save) whose short period, at the end of the
     * profile, the search above takes for the iteration. Seen on an H100 under PyTorch
     * (2026-11-26): a 2-op "iteration" from a per-parameter checksum after 8 training steps.
     * So when the repetition found covers under half of the profile's ops, the search goes
     * on with more trailing segments dropped and keeps the repetition that covers the most
     * ops (the first found among equals: the fewest dropped). A repetition found this way
     * must cover at least half of the profile: a program whose iterations differ (MoE whose
     * experts get no token in some micro-batch) repeats only here and there, and a plan made
     * from such a stretch (a period inside an iteration) made the ranks' collectives diverge
     * (si e2e moe_ep_dyn hung). Such a profile is planned from its variants below. */
    size_t covered = found ? (size_t)out->reps * out->n : 0;
    dh_iteration_t best = {0};
    size_t best_cov = covered;
    for (size_t drop = 3; st == DH_OK && 2 * best_cov < p->nops && drop + 2 <= nseg &&
                          drop <= DH__MAX_TAIL_SEGMENTS;
         drop++) {
        dh_iteration_t cand;
        if (dh__try_period(&pc, nseg - drop, 0, r, z, &cand) &&
            (size_t)cand.reps * cand.n > best_cov) {
            best = cand;
            best_cov = (size_t)cand.reps * cand.n;
        }
    }
    if (best_cov > covered && 2 * best_cov >= p->nops) {
        *out = best;
        found = 1;
    }
    /* No iteration repeats op for op over half of the profile (a short stretch that does,
     * such as two micro-batches alike at its end, is no iteration): one whose collectives
     * and threads repeat, taking the variant that occurs most often as the template
     * (iterations whose op counts vary with the data, MoE). */
    uint64_t *coarse = NULL;
    int vfound = 0;
    dh_iteration_t var;
    if (st == DH_OK && (!found || 2 * (size_t)out->reps * out->n < p->nops) && nseg >= 2) {
        coarse = malloc(nseg * sizeof(*coarse));
        if (coarse == NULL)
            st = DH_ERR_NOMEM;
        else
            dh__coarse(p, start, nseg, coarse);
    }
    for (size_t drop = 0; st == DH_OK && coarse && drop <= 2 && drop < nseg && !vfound; drop++)
        vfound = dh__try_variants(&pc, coarse, nseg - drop, r, z, &var);
    if (vfound) {
        *out = var;
        found = 1;
    }
    free(coarse);
    free(start);
    free(hash);
    free(r);
    free(z);
    if (st != DH_OK) {
        dh__errf(err, errlen, name, "out of memory");
        return st;
    }
    if (found && out->occurs == 0)
        out->occurs = out->reps;
    if (!found) {
        dh__errf(err, errlen, name,
                 "no repeating iteration found in %zu ops; profile at least 3 iterations",
                 p->nops);
        return DH_ERR_NOT_FOUND;
    }
    return DH_OK;
}

dh_status_t dh_profile_trim(dh_profile_t *p, int keep, const char *name, char *err,
                            size_t errlen)
{
    dh_iteration_t it;
    DH_CHECK(dh_profile_find_iteration(p, name, &it, err, errlen));
    /* Iterations that vary: the variant taken is not repeated back to back, and the planner
     * must find it again among the others; keep everything. */
    if (it.reps < 2)
        return DH_OK;
    size_t reps = (size_t)(it.reps < keep ? it.reps : keep);
    size_t lo = it.first - (reps - 1) * it.n, hi = it.first + it.n;
    if (lo == 0 && hi == p->nops)
        return DH_OK;
    /* Iterations start right after a synchronisation: what follows hi starts with one. */
    p->sync_at_end = hi < p->nops ? p->ops[hi].sync_before : p->sync_at_end;
    memmove(p->ops, p->ops + lo, (hi - lo) * sizeof(*p->ops));
    p->nops = hi - lo;
    p->trimmed_n = it.n;
    for (size_t i = 0; i < p->nops; i++)
        p->ops[i].dep1 = p->ops[i].dep1 > (int64_t)lo ? p->ops[i].dep1 - (int64_t)lo : 0;
    dh_prof_op_t *o = realloc(p->ops, p->nops * sizeof(*p->ops));
    if (o != NULL)
        p->ops = o;
    return DH_OK;
}

/* ---- statistics over the repetitions ---- */

typedef struct dh__ival {
    double lo, hi;
} dh__ival_t;

static int dh__cmp_ival(const void *x, const void *y)
{
    const dh__ival_t *a = x, *b = y;
    return a->lo < b->lo ? -1 : (a->lo > b->lo);
}

/* Sorts v[0..n) and merges overlaps in place; returns the new count. */
static size_t dh__union(dh__ival_t *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), dh__cmp_ival);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].lo <= v[k].hi) {
            if (v[i].hi > v[k].hi)
                v[k].hi = v[i].hi;
        } else {
            v[++k] = v[i];
        }
    }
    return k + 1;
}

/* Time covered by comm[] and not by comp[] (both unions, sorted). */
static double dh__uncovered(const dh__ival_t *comm, size_t nc, const dh__ival_t *comp, size_t np)
{
    double total = 0;
    size_t j = 0;
    for (size_t i = 0; i < nc; i++) {
        double lo = comm[i].lo, hi = comm[i].hi, covered = 0;
        while (j < np && comp[j].hi <= lo)
            j++;
        for (size_t k = j; k < np && comp[k].lo < hi; k++) {
            double a = comp[k].lo > lo ? comp[k].lo : lo, b = comp[k].hi < hi ? comp[k].hi : hi;
            if (b > a)
                covered += b - a;
        }
        total += (hi - lo) - covered;
    }
    return total;
}

/* Iteration time and exposed communication of one repetition ops[0..n). Without start
 * times, the sum of known times and all communication time. */
static void dh__rep_times(const dh_prof_op_t *ops, size_t n, dh__ival_t *comm, dh__ival_t *comp,
                          double *iter_us, double *exposed_us)
{
    double lo = 0, hi = 0, sum = 0, comm_sum = 0;
    size_t nc = 0, np = 0, timed = 0;
    for (size_t i = 0; i < n; i++) {
        const dh_prof_op_t *op = &ops[i];
        if (op->us < 0)
            continue;
        sum += op->us;
        if (op->cls == DH_CLS_COMM)
            comm_sum += op->us;
        if (op->start_us < 0)
            continue;
        double s = op->start_us, e = op->start_us + op->us;
        lo = timed == 0 || s < lo ? s : lo;
        hi = timed == 0 || e > hi ? e : hi;
        timed++;
        if (op->cls == DH_CLS_COMM)
            comm[nc++] = (dh__ival_t){s, e};
        else if (op->cls == DH_CLS_COMPUTE)
            comp[np++] = (dh__ival_t){s, e};
    }
    if (timed == 0) {
        *iter_us = sum;
        *exposed_us = comm_sum;
        return;
    }
    *iter_us = hi - lo;
    nc = dh__union(comm, nc);
    np = dh__union(comp, np);
    *exposed_us = dh__uncovered(comm, nc, comp, np);
}

static dh_status_t dh__tmpl_stats(const dh_profile_t *p, dh__tmpl_t *t)
{
    size_t n = t->it.n;
    int reps = t->it.reps;
    double *cnt = calloc(n, sizeof(*cnt));
    dh__ival_t *comm = malloc(n * sizeof(*comm)), *comp = malloc(n * sizeof(*comp));
    if (cnt == NULL || comm == NULL || comp == NULL) {
        free(cnt);
        free(comm);
        free(comp);
        return DH_ERR_NOMEM;
    }
    for (int k = 0; k < reps; k++) {
        const dh_prof_op_t *rep = &p->ops[t->it.first - (size_t)k * n];
        for (size_t i = 0; i < n; i++) {
            if (rep[i].us >= 0) {
                t->us[i] += rep[i].us;
                cnt[i] += 1;
            }
            if (rep[i].shape != t->ops[i].shape)
                t->shape_dyn[i] = 1;
        }
        double iter_us, exposed_us;
        dh__rep_times(rep, n, comm, comp, &iter_us, &exposed_us);
        t->baseline_us += iter_us / reps;
        t->exposed_comm_us += exposed_us / reps;
    }
    for (size_t i = 0; i < n; i++) {
        t->us[i] = cnt[i] > 0 ? t->us[i] / cnt[i] : -1;
        t->unknown_us += cnt[i] == 0;
    }
    free(cnt);
    free(comm);
    free(comp);
    return DH_OK;
}

dh_status_t dh__tmpl_build(const dh_profile_t *p, const char *name, dh__tmpl_t *t, char *err,
                           size_t errlen)
{
    memset(t, 0, sizeof(*t));
    DH_CHECK(dh_profile_find_iteration(p, name, &t->it, err, errlen));
    t->ops = &p->ops[t->it.first];
    t->us = calloc(t->it.n, sizeof(*t->us));
    t->shape_dyn = calloc(t->it.n, sizeof(*t->shape_dyn));
    dh_status_t st = t->us && t->shape_dyn ? dh__tmpl_stats(p, t) : DH_ERR_NOMEM;
    if (st != DH_OK) {
        dh__errf(err, errlen, name, "out of memory");
        dh__tmpl_free(t);
    }
    return st;
}

void dh__tmpl_free(dh__tmpl_t *t)
{
    free(t->us);
    free(t->shape_dyn);
    memset(t, 0, sizeof(*t));
}

/* ---- phases ---- */

static void dh__phase_kinds(const dh_prof_op_t *ops, dh_plan_phase_t *ph, int np)
{
    uint32_t main_thread = ops[0].thread;
    int last_b = -1;
    for (int k = 0; k < np; k++) {
        ph[k].kind = ph[k].thread == main_thread ? 'F' : 'B';
        if (ph[k].kind == 'B')
            last_b = k;
    }
    for (int k = last_b + 1; k < np; k++)
        ph[k].kind = 'O';
    int mb[2] = {-1, -1};
    for (int k = 0; k < np; k++) {
        ph[k].paired_with = -1;
        if (ph[k].kind == 'O') {
            ph[k].mb = -1;
            continue;
        }
        int *c = &mb[ph[k].kind == 'B'];
        /* A phase cut from its predecessor only by a sync (an MoE routing step, a
         * .item()) is more of the same micro-batch, not the next one. */
        int cont = k > 0 && ph[k - 1].kind == ph[k].kind && ph[k - 1].thread == ph[k].thread;
        if (!cont)
            (*c)++;
        ph[k].mb = *c < 0 ? 0 : *c;
    }
    for (int k = 0; k + 1 < np; k++) {
        if (ph[k].kind == 'B' && ph[k + 1].kind == 'F' && !ops[ph[k + 1].first].sync_before) {
            ph[k].paired_with = k + 1;
            ph[k + 1].paired_with = k;
            k++;
        }
    }
}

dh_status_t dh__phases(const dh_prof_op_t *ops, size_t n, dh_plan_phase_t **out, int *nphases)
{
    *out = NULL;
    *nphases = 0;
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        np += i == 0 || ops[i].thread != ops[i - 1].thread || ops[i].sync_before;
    if (np == 0)
        return DH_OK;
    dh_plan_phase_t *ph = calloc(np, sizeof(*ph));
    if (ph == NULL)
        return DH_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || ops[i].thread != ops[i - 1].thread || ops[i].sync_before) {
            ph[k].first = i;
            ph[k].thread = ops[i].thread;
            k++;
        }
        ph[k - 1].n++;
    }
    dh__phase_kinds(ops, ph, (int)np);
    *out = ph;
    *nphases = (int)np;
    return DH_OK;
}

/* ---- comparing an iteration with a template ---- */

int dh_plan_template_diff(const dh_plan_section_t *s, const dh_prof_op_t *ops, size_t n,
                          char *msg, size_t msglen)
{
    size_t m = n < s->nops ? n : s->nops;
    size_t k = 0;
    while (k < m && ops[k].sig == s->ops[k].sig)
        k++;
    if (k == m && n == s->nops) {
        if (msg && msglen)
            msg[0] = '\0';
        return 0;
    }
    char want[160], got[160];
    if (k < s->nops)
        snprintf(want, sizeof(want), "%s '%s'", s->ops[k].kind, s->ops[k].name);
    else
        snprintf(want, sizeof(want), "the end of the iteration");
    if (k < n)
        snprintf(got, sizeof(got), "%s '%s'", ops[k].kind, ops[k].name);
    else
        snprintf(got, sizeof(got), "the end of the iteration");
    if (msg && msglen)
        snprintf(msg, msglen, "first difference at op %zu: expected %s, found %s", k, want, got);
    return 1;
}
