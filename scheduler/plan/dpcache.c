/*
 * dpcache.c: alignments already computed, by their input (planner_int.h).
 *
 * The steady state of an iteration is the same pair, backward(i) beside forward(i+1), for
 * every i: with times averaged per phase position (profile version 2) their DP inputs are
 * equal, and the DP, a pure function of its input, needs to run once per distinct pair.
 * The key is the whole input, so a hit is exact, not a guess.
 */
#include "planner_int.h"
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

struct dh__dpcache_entry {
    uint64_t hash;
    uint64_t *key;
    size_t nkey;
    dh_status_t st;
    dh_align_result_t r;
};

typedef struct dh__kb {
    uint64_t *v;
    size_t n, cap;
    int oom;
} dh__kb_t;

static void dh__kput(dh__kb_t *k, uint64_t x)
{
    if (k->oom)
        return;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 256;
        uint64_t *v = realloc(k->v, cap * sizeof *v);
        if (v == NULL) {
            k->oom = 1;
            return;
        }
        k->v = v;
        k->cap = cap;
    }
    k->v[k->n++] = x;
}

static void dh__kops(dh__kb_t *k, const dh_align_op_t *ops, size_t n)
{
    dh__kput(k, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t us;
        memcpy(&us, &ops[i].us, sizeof us);
        dh__kput(k, us);
        dh__kput(k, (uint64_t)ops[i].cls | (uint64_t)(uint32_t)ops[i].comm << 8 |
                        (uint64_t)(ops[i].pinned != 0) << 40);
        dh__kput(k, (uint64_t)ops[i].mem);
        dh__kput(k, ops[i].sig);
        dh__kput(k, (uint64_t)ops[i].freed);
        dh__kput(k, (uint64_t)ops[i].kept);
        dh__kput(k, (uint64_t)ops[i].retaken);
        dh__kput(k, ops[i].retaken_from);
    }
}

/* What the pair's memory simulation reads beyond the DP's input (planmem.c): each op's
 * allocation sizes, its free and its stream. */
static void dh__kmem(dh__kb_t *k, const dh_memsim_op_t *m, size_t n)
{
    for (size_t i = 0; m != NULL && i < n; i++) {
        dh__kput(k, (uint64_t)m[i].freed ^ (uint64_t)m[i].stream << 48 ^ (uint64_t)m[i].blas << 63);
        dh__kput(k, (uint64_t)m[i].ws_bytes);
        dh__kput(k, m[i].nsizes);
        for (size_t q = 0; q < m[i].nsizes; q++)
            dh__kput(k, (uint64_t)m[i].sizes[q]);
    }
}

dh_status_t dh__dpcache_key(const dh_align_op_t *a, size_t na, const dh_align_op_t *b,
                            size_t nb, const dh_memsim_op_t *mops, const size_t *need,
                            const dh_align_order_t *orders, int norders, int max_seg,
                            uint64_t **key, size_t *nkey)
{
    dh__kb_t k = {0};
    dh__kput(&k, (uint64_t)max_seg);
    dh__kops(&k, a, na);
    dh__kops(&k, b, nb);
    dh__kmem(&k, mops, na + nb);
    dh__kput(&k, need != NULL);
    for (size_t j = 0; need && j < nb; j++)
        dh__kput(&k, need[j]);
    dh__kput(&k, (uint64_t)norders);
    for (int o = 0; o < norders; o++) {
        dh__kput(&k, (uint64_t)orders[o].comm);
        dh__kput(&k, orders[o].n);
        for (size_t q = 0; q < orders[o].n; q++)
            dh__kput(&k, orders[o].from_b[q]);
    }
    if (k.oom) {
        free(k.v);
        return DH_ERR_NOMEM;
    }
    *key = k.v;
    *nkey = k.n;
    return DH_OK;
}

static uint64_t dh__khash(const uint64_t *key, size_t n)
{
    uint64_t h = DH__FNV_OFFSET;
    for (size_t i = 0; i < n; i++)
        h = dh__fnv_u64(h, key[i]);
    return h;
}

static dh_status_t dh__copy_result(const dh_align_result_t *src, dh_align_result_t *dst)
{
    *dst = *src;
    dst->steps = NULL;
    if (src->nsteps == 0)
        return DH_OK;
    if ((dst->steps = malloc(src->nsteps * sizeof *dst->steps)) == NULL)
        return DH_ERR_NOMEM;
    memcpy(dst->steps, src->steps, src->nsteps * sizeof *dst->steps);
    return DH_OK;
}

int dh__dpcache_get(dh__dpcache_t *c, const uint64_t *key, size_t nkey, dh_status_t *st,
                    dh_align_result_t *r)
{
    uint64_t h = dh__khash(key, nkey);
    for (int i = 0; i < c->n; i++) {
        const struct dh__dpcache_entry *e = &c->e[i];
        if (e->hash != h || e->nkey != nkey || memcmp(e->key, key, nkey * sizeof *key) != 0)
            continue;
        *st = e->st;
        if (e->st == DH_OK && dh__copy_result(&e->r, r) != DH_OK) {
            *st = DH_ERR_NOMEM;
            return 1;
        }
        c->hits++;
        return 1;
    }
    return 0;
}

dh_status_t dh__dpcache_put(dh__dpcache_t *c, uint64_t *key, size_t nkey, dh_status_t st,
                            const dh_align_result_t *r)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        struct dh__dpcache_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
        if (e == NULL) {
            free(key);
            return DH_ERR_NOMEM;
        }
        c->e = e;
        c->cap = cap;
    }
    struct dh__dpcache_entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    if (st == DH_OK && dh__copy_result(r, &e->r) != DH_OK) {
        free(key);
        return DH_ERR_NOMEM;
    }
    e->hash = dh__khash(key, nkey);
    e->key = key;
    e->nkey = nkey;
    e->st = st;
    c->n++;
    return DH_OK;
}

void dh__dpcache_free(dh__dpcache_t *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        dh_align_result_free(&c->e[i].r);
    }
    free(c->e);
    memset(c, 0, sizeof *c);
}
