/* pairs.c: measured co-run efficiencies (`dhelix profile-pairs` writes them). */
#include "planner.h"
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

#define DH__MAX_PAIRS 1000000u

/* Index of a class that has an efficiency (compute, comm, copy), else -1. */
static int dh__eff_class(const char *name)
{
    int c = dh_opclass_parse(name);
    return c >= 0 && c < 3 ? c : -1;
}

static dh_status_t dh__class_row(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at, size_t i,
                                 dh_pairs_t *p)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    char a[16], b[16];
    double e;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jstr(r, o, &here, "a", 1, "", a, sizeof(a)));
    DH_CHECK(dh__jstr(r, o, &here, "b", 1, "", b, sizeof(b)));
    DH_CHECK(dh__jnum(r, o, &here, "efficiency", 1, 0, -1, 1, &e));
    int x = dh__eff_class(a), y = dh__eff_class(b);
    if (x < 0 || y < 0)
        return dh__jerr(r, &here, "pairs \"%s\" with \"%s\"; classes are compute, comm, copy", a,
                        b);
    p->class_eff[x][y] = e;
    p->class_set[x][y] = 1;
    return DH_OK;
}

static dh_status_t dh__pair_row(const dh__jr_t *r, json_t *arr, const dh__jpath_t *at, size_t i,
                                dh_align_measured_t *m)
{
    dh__jpath_t here = DH__JIDX(at, i);
    json_t *o;
    double a_us, b_us, co_us;
    DH_CHECK(dh__jobj_at(r, arr, &here, i, &o));
    DH_CHECK(dh__jhex(r, o, &here, "a_sig", 0, &m->a_sig, NULL));
    DH_CHECK(dh__jhex(r, o, &here, "b_sig", 0, &m->b_sig, NULL));
    DH_CHECK(dh__jnum(r, o, &here, "a_us", 0, 0, 0, 1e15, &a_us));
    DH_CHECK(dh__jnum(r, o, &here, "b_us", 0, 0, 0, 1e15, &b_us));
    DH_CHECK(dh__jnum(r, o, &here, "corun_us", 0, 0, 0, 1e15, &co_us));
    if (json_object_get(o, "efficiency") != NULL && !json_is_null(json_object_get(o, "efficiency")))
        return dh__jnum(r, o, &here, "efficiency", 1, 0, -10, 1, &m->efficiency);
    double lo = a_us < b_us ? a_us : b_us;
    if (lo <= 0 || co_us <= 0)
        return dh__jerr(r, &here, "has no efficiency and no positive a_us, b_us, corun_us");
    m->efficiency = (a_us + b_us - co_us) / lo;
    return DH_OK;
}

static int dh__cmp_pair(const void *x, const void *y)
{
    const dh_align_measured_t *a = x, *b = y;
    if (a->a_sig != b->a_sig)
        return a->a_sig < b->a_sig ? -1 : 1;
    return a->b_sig < b->b_sig ? -1 : (a->b_sig > b->b_sig);
}

static dh_status_t dh__pairs_fill(const dh__jr_t *r, json_t *root, dh_pairs_t *p)
{
    json_t *classes, *pairs;
    dh__jpath_t c_at = DH__JKEY(NULL, "classes"), p_at = DH__JKEY(NULL, "pairs");
    DH_CHECK(dh__jarr(r, root, NULL, "classes", 0, 64, &classes));
    for (size_t i = 0; classes && i < json_array_size(classes); i++)
        DH_CHECK(dh__class_row(r, classes, &c_at, i, p));
    DH_CHECK(dh__jarr(r, root, NULL, "pairs", 0, DH__MAX_PAIRS, &pairs));
    size_t n = pairs ? json_array_size(pairs) : 0;
    if (n > 0 && (p->pairs = calloc(n, sizeof(*p->pairs))) == NULL)
        return DH_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        DH_CHECK(dh__pair_row(r, pairs, &p_at, i, &p->pairs[i]));
        p->n++;
    }
    if (p->n > 1)
        qsort(p->pairs, p->n, sizeof(*p->pairs), dh__cmp_pair);
    return DH_OK;
}

dh_status_t dh_pairs_parse(const char *buf, size_t len, const char *name, dh_pairs_t **out,
                           char *err, size_t errlen)
{
    dh__jr_t r = {name ? name : "<buffer>", err, errlen};
    *out = NULL;
    json_t *root;
    DH_CHECK(dh__jparse(&r, buf, len, &root));
    dh_status_t st = dh__jcheck_header(&r, root, "dhelix-pairs", 1, "this planner");
    dh_pairs_t *p = NULL;
    if (st == DH_OK && (p = calloc(1, sizeof(*p))) == NULL)
        st = DH_ERR_NOMEM;
    if (st == DH_OK)
        st = dh__pairs_fill(&r, root, p);
    json_decref(root);
    if (st == DH_ERR_NOMEM)
        dh__errf(err, errlen, r.file, "out of memory");
    if (st != DH_OK) {
        dh_pairs_free(p);
        return st;
    }
    *out = p;
    return DH_OK;
}

dh_status_t dh_pairs_load(const char *path, dh_pairs_t **out, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    *out = NULL;
    DH_CHECK(dh__read_file(path, &buf, &len, err, errlen));
    dh_status_t st = dh_pairs_parse(buf, len, path, out, err, errlen);
    free(buf);
    return st;
}

void dh_pairs_free(dh_pairs_t *p)
{
    if (p == NULL)
        return;
    free(p->pairs);
    free(p);
}
