/* profile_read2.c: reading a compact profile (version 2, docs/plan-format.md) into the flat
 * list of ops the planner walks (profile_build.c writes them). */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct dh__body {
    size_t n;
    json_t *ops, *mem, *dep, *us, *at, *allocs;
} dh__body_t;

/* An optional array member of exactly n elements. */
static dh_status_t dh__arr_n(const dh__jr_t *r, json_t *o, const dh__jpath_t *at,
                             const char *key, int required, size_t n, json_t **out)
{
    DH_CHECK(dh__jarr(r, o, at, key, required, DH__MAX_OPS, out));
    if (*out != NULL && json_array_size(*out) != n) {
        dh__jpath_t here = DH__JKEY(at, key);
        return dh__jerr(r, &here, "has %zu elements, expected %zu (one per op of the phase)",
                        json_array_size(*out), n);
    }
    return DH_OK;
}

static dh_status_t dh__body_parse(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at,
                                  size_t i, const dh_prof_op_t *dops, size_t ndops,
                                  dh__body_t *b)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jarr(r, o, &here, "ops", 1, DH__MAX_OPS, &b->ops));
    b->n = json_array_size(b->ops);
    dh__jpath_t ops_at = DH__JKEY(&here, "ops");
    for (size_t k = 0; k < b->n; k++) {
        json_t *v = json_array_get(b->ops, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (size_t)json_integer_value(v) >= ndops) {
            dh__jpath_t e = DH__JIDX(&ops_at, k);
            return dh__jerr(r, &e, "is not the index of an op (0 to %zu)", ndops - 1);
        }
    }
    DH_CHECK(dh__arr_n(r, o, &here, "mem", 0, b->n, &b->mem));
    DH_CHECK(dh__arr_n(r, o, &here, "dep", 0, b->n, &b->dep));
    DH_CHECK(dh__arr_n(r, o, &here, "us", 0, b->n, &b->us));
    DH_CHECK(dh__arr_n(r, o, &here, "at", 0, b->n, &b->at));
    DH_CHECK(dh__arr_n(r, o, &here, "allocs", 0, b->n, &b->allocs));
    struct {
        json_t *a;
        const char *key;
        int integer;
        double lo, hi;
    } chk[] = {{b->mem, "mem", 1, -1152921504606846976.0, 1152921504606846976.0},
               {b->dep, "dep", 1, 0, (double)DH__MAX_OPS},
               {b->us, "us", 0, -1e300, 1e15},
               {b->at, "at", 0, -1e15, 1e15}};
    for (size_t c = 0; c < sizeof chk / sizeof chk[0]; c++) {
        if (chk[c].a == NULL)
            continue;
        dh__jpath_t key_at = DH__JKEY(&here, chk[c].key);
        for (size_t k = 0; k < b->n; k++) {
            json_t *v = json_array_get(chk[c].a, k);
            if (!chk[c].integer && json_is_null(v))
                continue; /* a time never measured */
            int ok = chk[c].integer ? json_is_integer(v) : json_is_number(v);
            double x = ok ? json_number_value(v) : 0;
            if (!ok || !(x >= chk[c].lo && x <= chk[c].hi)) {
                dh__jpath_t e = DH__JIDX(&key_at, k);
                return dh__jerr(r, &e, "is not %s in range", chk[c].integer ? "an integer" : "a number");
            }
        }
    }
    /* Each position's allocation sizes: checked here, once per phase. */
    dh__jpath_t al_at = DH__JKEY(&here, "allocs");
    int64_t sizes[DH__MAX_ALLOCS];
    for (size_t k = 0; b->allocs != NULL && k < b->n; k++) {
        dh_prof_op_t op = {.mem = b->mem ? (int64_t)json_integer_value(json_array_get(b->mem, k)) : 0};
        json_int_t d = json_integer_value(json_array_get(b->ops, k));
        op.cls = dops[d].cls;
        dh__jpath_t e = DH__JIDX(&al_at, k);
        size_t na;
        DH_CHECK(dh__allocs_parse(r, json_array_get(b->allocs, k), &e, &op, sizes, &na));
    }
    return DH_OK;
}

/* One element of "seq": [phase, sync, start_us]. */
static dh_status_t dh__seq_parse(const dh__jr_t *r, json_t *seq, const dh__jpath_t *at, size_t k,
                                 size_t nbodies, size_t *body, int *sync, double *start)
{
    dh__jpath_t here = DH__JIDX(at, k);
    json_t *e = json_array_get(seq, k);
    if (!json_is_array(e) || json_array_size(e) != 3 || !json_is_integer(json_array_get(e, 0)) ||
        !json_is_integer(json_array_get(e, 1)) || !json_is_number(json_array_get(e, 2)))
        return dh__jerr(r, &here, "is not [phase, sync, start_us]");
    json_int_t b = json_integer_value(json_array_get(e, 0));
    json_int_t s = json_integer_value(json_array_get(e, 1));
    if (b < 0 || (size_t)b >= nbodies)
        return dh__jerr(r, &here, "names phase %lld of %zu", (long long)b, nbodies);
    if (s != 0 && s != 1)
        return dh__jerr(r, &here, "has sync %lld (0 or 1)", (long long)s);
    *body = (size_t)b;
    *sync = (int)s;
    *start = json_number_value(json_array_get(e, 2));
    if (!(*start <= 1e15))
        return dh__jerr(r, &here, "has a start out of range");
    return DH_OK;
}

static dh_status_t dh__expand(const dh__jr_t *r, json_t *seq, const dh__jpath_t *seq_at,
                              const dh_prof_op_t *dops, const dh__body_t *bodies, size_t nb,
                              dh_profile_t *p)
{
    size_t ns = json_array_size(seq), total = 0;
    for (size_t k = 0; k < ns; k++) {
        size_t b;
        int sync;
        double start;
        DH_CHECK(dh__seq_parse(r, seq, seq_at, k, nb, &b, &sync, &start));
        total += bodies[b].n;
        if (total > DH__MAX_OPS) {
            dh__jpath_t here = DH__JIDX(seq_at, k);
            return dh__jerr(r, &here, "makes more than %u ops", DH__MAX_OPS);
        }
    }
    if (total > 0 && (p->ops = calloc(total, sizeof *p->ops)) == NULL)
        return DH_ERR_NOMEM;
    int64_t sizes[DH__MAX_ALLOCS];
    for (size_t k = 0; k < ns; k++) {
        size_t b;
        int sync;
        double start;
        DH_CHECK(dh__seq_parse(r, seq, seq_at, k, nb, &b, &sync, &start));
        const dh__body_t *B = &bodies[b];
        for (size_t q = 0; q < B->n; q++) {
            size_t i = p->nops;
            dh_prof_op_t *op = &p->ops[i];
            *op = dops[json_integer_value(json_array_get(B->ops, q))];
            op->sync_before = q == 0 && sync;
            op->mem = B->mem ? (int64_t)json_integer_value(json_array_get(B->mem, q)) : 0;
            if (B->allocs != NULL) {
                size_t na;
                dh__jpath_t al = DH__JKEY(seq_at, "allocs"); /* checked: no error here */
                DH_CHECK(dh__allocs_parse(r, json_array_get(B->allocs, q), &al, op, sizes, &na));
                DH_CHECK(dh__prof_allocs_add(p, op, sizes, na));
            }
            json_int_t dist = B->dep ? json_integer_value(json_array_get(B->dep, q)) : 0;
            if (dist > 0 && (size_t)dist > i) {
                dh__jpath_t here = DH__JIDX(seq_at, k);
                return dh__jerr(r, &here, "puts op %zu's dependency %lld ops back, before the "
                                          "first op", q, (long long)dist);
            }
            op->dep1 = dist > 0 ? (int64_t)(i - (size_t)dist) + 1 : 0;
            json_t *us = B->us ? json_array_get(B->us, q) : NULL;
            json_t *at = B->at ? json_array_get(B->at, q) : NULL;
            op->us = json_is_number(us) && json_number_value(us) >= 0 ? json_number_value(us) : -1;
            op->start_us = start < 0 || !json_is_number(at) ? -1 : start + json_number_value(at);
            if (op->start_us < 0)
                op->start_us = -1;
            p->nops++;
        }
    }
    return DH_OK;
}

dh_status_t dh__profile_read2(const dh__jr_t *r, json_t *root, dh_profile_t *p)
{
    json_t *ops, *phases, *seq;
    dh__jpath_t ops_at = DH__JKEY(NULL, "ops"), ph_at = DH__JKEY(NULL, "phases"),
                seq_at = DH__JKEY(NULL, "seq");
    DH_CHECK(dh__jarr(r, root, NULL, "ops", 1, DH__MAX_OPS, &ops));
    DH_CHECK(dh__jarr(r, root, NULL, "phases", 1, DH__MAX_OPS, &phases));
    DH_CHECK(dh__jarr(r, root, NULL, "seq", 1, DH__MAX_OPS, &seq));
    size_t nd = json_array_size(ops), nb = json_array_size(phases);
    dh_prof_op_t *dops = nd ? calloc(nd, sizeof *dops) : NULL;
    dh__body_t *bodies = nb ? calloc(nb, sizeof *bodies) : NULL;
    dh_status_t st = (nd && !dops) || (nb && !bodies) ? DH_ERR_NOMEM : DH_OK;
    for (size_t i = 0; st == DH_OK && i < nd; i++)
        st = dh__prof_op_parse(r, ops, &ops_at, i, p->ncomms, &dops[i]);
    for (size_t i = 0; st == DH_OK && i < nb; i++)
        st = dh__body_parse(r, phases, &ph_at, i, dops, nd, &bodies[i]);
    if (st == DH_OK)
        st = dh__expand(r, seq, &seq_at, dops, bodies, nb, p);
    long long n;
    if (st == DH_OK)
        st = dh__jint(r, root, NULL, "nops", 0, (long long)p->nops, 0, DH__MAX_OPS, &n);
    if (st == DH_OK && (size_t)n != p->nops) {
        dh__jpath_t here = DH__JKEY(NULL, "nops");
        st = dh__jerr(r, &here, "is %lld, but the phases in \"seq\" hold %zu ops", n, p->nops);
    }
    free(dops);
    free(bodies);
    return st;
}
