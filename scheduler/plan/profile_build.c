/*
 * profile_build.c: compact profiles (docs/plan-format.md, profile version 2), built one op
 * at a time (dh_prof_builder_t, plan.h) and written with each distinct op described once,
 * each distinct phase once, and the program as a sequence of phase references.
 *
 * Why phases: a training iteration is micro-batches of identical forward and backward
 * phases, each a run of identical layers; an op's static description repeats per layer and
 * its phase repeats per micro-batch and per iteration. A phase (a run of one thread between
 * thread switches and host synchronisations, the planner's unit, planner.h step 3) is
 * described once per distinct content: its ops as references into the op table, with the
 * per-position values that decide plans (stream-ordered memory, the dependency as a distance
 * back); device times are the means over its occurrences, and each occurrence keeps its own
 * device start. The planner therefore sees what a flat profile gives it, with each
 * position's time averaged over the micro-batches and iterations that repeat it.
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

/* One recorded op: which distinct op, and what varies per occurrence. */
typedef struct dh__occ {
    uint32_t ref;
    uint32_t allocs : 31;           /* its allocation sizes: 1 + a list's id, 0 none */
    uint32_t sync : 1;
    int64_t mem;
    int64_t dep1;
    double us, start_us;
} dh__occ_t;

struct dh_prof_builder {
    dh_prof_op_t *dops;             /* distinct ops (static fields only) */
    uint32_t ndops, capdops;
    uint32_t *dindex;               /* open addressing over dops: id + 1, 0 empty */
    size_t dmask;
    dh__occ_t *occ;
    size_t nocc, capocc;
    /* The distinct lists of allocation sizes (an op's allocations since its previous op,
     * when mem alone does not say them): list k is lsz[loff[k]..loff[k+1]). */
    int64_t *lsz;
    size_t nlsz, caplsz;
    size_t *loff;                   /* nlists + 1 */
    uint32_t nlists, caplists;
    uint32_t *lindex;               /* open addressing over lists: id + 1, 0 empty */
    size_t lmask;
};

static uint64_t dh__mix(uint64_t h, uint64_t v) { return dh__fnv_u64(h, v); }

static uint64_t dh__str_hash(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t dh__dop_hash(const dh_prof_op_t *o)
{
    uint64_t h = dh__mix(DH__FNV_OFFSET, o->sig);
    h = dh__mix(h, o->shape);
    h = dh__mix(h, ((uint64_t)o->thread << 32) | o->stream);
    h = dh__mix(h, ((uint64_t)(uint32_t)o->comm << 8) | (uint64_t)o->cls);
    h = dh__mix(h, o->bytes);
    uint64_t f;
    memcpy(&f, &o->flops, sizeof f);
    h = dh__mix(h, f);
    h = dh__str_hash(h, o->kind);
    return dh__str_hash(h, o->name);
}

static int dh__dop_same(const dh_prof_op_t *a, const dh_prof_op_t *b)
{
    return a->sig == b->sig && a->shape == b->shape && a->thread == b->thread &&
           a->stream == b->stream && a->comm == b->comm && a->cls == b->cls &&
           a->bytes == b->bytes && memcmp(&a->flops, &b->flops, sizeof a->flops) == 0 &&
           strcmp(a->kind, b->kind) == 0 && strcmp(a->name, b->name) == 0 &&
           strcmp(a->p2p, b->p2p) == 0;
}

dh_prof_builder_t *dh_prof_builder_new(void)
{
    dh_prof_builder_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->dmask = 255;
    if ((b->dindex = calloc(b->dmask + 1, sizeof *b->dindex)) == NULL) {
        free(b);
        return NULL;
    }
    return b;
}

void dh_prof_builder_free(dh_prof_builder_t *b)
{
    if (b == NULL)
        return;
    free(b->dops);
    free(b->dindex);
    free(b->occ);
    free(b->lsz);
    free(b->loff);
    free(b->lindex);
    free(b);
}

static uint64_t dh__list_hash(const int64_t *v, size_t n)
{
    uint64_t h = dh__mix(DH__FNV_OFFSET, n);
    for (size_t k = 0; k < n; k++)
        h = dh__mix(h, (uint64_t)v[k]);
    return h;
}

static int dh__list_same(const dh_prof_builder_t *b, uint32_t id, const int64_t *v, size_t n)
{
    size_t f = b->loff[id];
    return b->loff[id + 1] - f == n && memcmp(b->lsz + f, v, n * sizeof *v) == 0;
}

static dh_status_t dh__lindex_grow(dh_prof_builder_t *b)
{
    size_t mask = b->lmask ? b->lmask * 2 + 1 : 63;
    uint32_t *ix = calloc(mask + 1, sizeof *ix);
    if (ix == NULL)
        return DH_ERR_NOMEM;
    for (uint32_t i = 0; i < b->nlists; i++) {
        size_t h = (size_t)dh__list_hash(b->lsz + b->loff[i], b->loff[i + 1] - b->loff[i]) & mask;
        while (ix[h])
            h = (h + 1) & mask;
        ix[h] = i + 1;
    }
    free(b->lindex);
    b->lindex = ix;
    b->lmask = mask;
    return DH_OK;
}

/* The list of sizes v[0..n) as 1 + its id (added when new); 0 for no list. */
static dh_status_t dh__intern_list(dh_prof_builder_t *b, const int64_t *v, size_t n, uint32_t *id)
{
    *id = 0;
    if (n == 0)
        return DH_OK;
    if ((size_t)(b->nlists + 1) * 2 > b->lmask)
        DH_CHECK(dh__lindex_grow(b));
    size_t h = (size_t)dh__list_hash(v, n) & b->lmask;
    for (; b->lindex[h]; h = (h + 1) & b->lmask)
        if (dh__list_same(b, b->lindex[h] - 1, v, n)) {
            *id = b->lindex[h];
            return DH_OK;
        }
    if (b->nlsz + n > b->caplsz) {
        size_t cap = b->caplsz ? b->caplsz : 64;
        while (cap < b->nlsz + n)
            cap *= 2;
        int64_t *p = realloc(b->lsz, cap * sizeof *p);
        if (p == NULL)
            return DH_ERR_NOMEM;
        b->lsz = p;
        b->caplsz = cap;
    }
    if (b->nlists >= (1u << 30))
        return DH_ERR_NOMEM;
    if (b->nlists + 2 > b->caplists) {
        uint32_t cap = b->caplists ? b->caplists * 2 : 64;
        size_t *p = realloc(b->loff, cap * sizeof *p);
        if (p == NULL)
            return DH_ERR_NOMEM;
        b->loff = p;
        b->caplists = cap;
    }
    if (b->nlists == 0)
        b->loff[0] = 0;
    memcpy(b->lsz + b->nlsz, v, n * sizeof *v);
    b->nlsz += n;
    b->loff[++b->nlists] = b->nlsz;
    b->lindex[h] = b->nlists;
    *id = b->nlists;
    return DH_OK;
}

static dh_status_t dh__dindex_grow(dh_prof_builder_t *b)
{
    size_t mask = b->dmask * 2 + 1;
    uint32_t *ix = calloc(mask + 1, sizeof *ix);
    if (ix == NULL)
        return DH_ERR_NOMEM;
    for (uint32_t i = 0; i < b->ndops; i++) {
        size_t h = (size_t)dh__dop_hash(&b->dops[i]) & mask;
        while (ix[h])
            h = (h + 1) & mask;
        ix[h] = i + 1;
    }
    free(b->dindex);
    b->dindex = ix;
    b->dmask = mask;
    return DH_OK;
}

/* The distinct op of o (its static fields), added when new. */
static dh_status_t dh__intern(dh_prof_builder_t *b, const dh_prof_op_t *o, uint32_t *ref)
{
    size_t h = (size_t)dh__dop_hash(o) & b->dmask;
    for (; b->dindex[h]; h = (h + 1) & b->dmask)
        if (dh__dop_same(&b->dops[b->dindex[h] - 1], o)) {
            *ref = b->dindex[h] - 1;
            return DH_OK;
        }
    if (b->ndops == b->capdops) {
        uint32_t cap = b->capdops ? b->capdops * 2 : 64;
        dh_prof_op_t *d = realloc(b->dops, cap * sizeof *d);
        if (d == NULL)
            return DH_ERR_NOMEM;
        b->dops = d;
        b->capdops = cap;
    }
    dh_prof_op_t *d = &b->dops[b->ndops];
    *d = *o;
    d->us = d->start_us = -1;
    d->mem = 0;
    d->nallocs = 0;
    d->alloc_first = 0;
    d->sync_before = 0;
    d->dep1 = 0;
    b->dindex[h] = b->ndops + 1;
    *ref = b->ndops++;
    if ((size_t)b->ndops * 2 > b->dmask)
        return dh__dindex_grow(b);
    return DH_OK;
}

dh_status_t dh_prof_builder_add(dh_prof_builder_t *b, const dh_prof_op_t *op,
                                const int64_t *sizes, size_t nsizes)
{
    /* One allocation before an op other than a free is its mem: no list to keep. */
    if (nsizes == 1 && op->cls != DH_CLS_FREE && sizes[0] == op->mem)
        nsizes = 0;
    uint32_t list;
    DH_CHECK(dh__intern_list(b, sizes, nsizes, &list));
    if (b->nocc == b->capocc) {
        size_t cap = b->capocc ? b->capocc * 2 : 4096;
        dh__occ_t *o = realloc(b->occ, cap * sizeof *o);
        if (o == NULL)
            return DH_ERR_NOMEM;
        b->occ = o;
        b->capocc = cap;
    }
    uint32_t ref;
    DH_CHECK(dh__intern(b, op, &ref));
    dh__occ_t *o = &b->occ[b->nocc];
    o->ref = ref;
    o->sync = op->sync_before != 0;
    o->allocs = list;
    o->mem = op->mem;
    o->dep1 = op->dep1 > 0 && (size_t)op->dep1 <= b->nocc ? op->dep1 : 0;
    o->us = op->us;
    o->start_us = op->start_us;
    b->nocc++;
    return DH_OK;
}

void dh_prof_builder_time(dh_prof_builder_t *b, size_t i, double us, double start_us)
{
    if (i < b->nocc) {
        b->occ[i].us = us;
        b->occ[i].start_us = start_us;
    }
}

size_t dh_prof_builder_nops(const dh_prof_builder_t *b) { return b->nocc; }

size_t dh_prof_builder_ndistinct(const dh_prof_builder_t *b) { return b->ndops; }

const dh_prof_op_t *dh_prof_builder_op(const dh_prof_builder_t *b, size_t i, double *us,
                                       double *start_us)
{
    if (i >= b->nocc)
        return NULL;
    if (us)
        *us = b->occ[i].us;
    if (start_us)
        *start_us = b->occ[i].start_us;
    return &b->dops[b->occ[i].ref];
}

/* ---- phases: distinct contents, and the sequence ---- */

typedef struct dh__phtab {
    size_t nb, capb;
    size_t *first, *len;            /* [body]: where its positions are in the pools */
    uint64_t *hash;
    size_t *count;                  /* occurrences */
    size_t *anchor;                 /* position whose start the others are relative to, the
                                       first timed one of the first occurrence (or len) */
    size_t npos, cappos;            /* pools, one entry per position of every body */
    uint32_t *ref;
    int64_t *mem;
    uint32_t *alist;                /* allocation sizes: 1 + the builder's list id, 0 none */
    uint64_t *dist;                 /* dependency as a distance back, 0 none */
    double *us_sum, *at_sum;
    uint32_t *us_n, *at_n;
    size_t *index, mask;            /* open addressing over bodies: id + 1 */
    size_t nseq, capseq;
    size_t *seq_body, *seq_first;   /* [occurrence]: body, first op */
    double *seq_start;              /* [occurrence]: start of the body's anchor, -1 unknown */
} dh__phtab_t;

static void dh__phtab_free(dh__phtab_t *t)
{
    free(t->first);
    free(t->len);
    free(t->hash);
    free(t->count);
    free(t->anchor);
    free(t->ref);
    free(t->mem);
    free(t->alist);
    free(t->dist);
    free(t->us_sum);
    free(t->at_sum);
    free(t->us_n);
    free(t->at_n);
    free(t->index);
    free(t->seq_body);
    free(t->seq_first);
    free(t->seq_start);
}

#define DH__GROW(ptr, cap, need, ok)                                                      \
    do {                                                                                  \
        if ((need) > (cap)) {                                                             \
            size_t c_ = (cap) ? (cap) : 64;                                               \
            while (c_ < (need))                                                           \
                c_ *= 2;                                                                  \
            void *p_ = realloc((ptr), c_ * sizeof(*(ptr)));                               \
            if (p_ == NULL)                                                               \
                (ok) = 0;                                                                 \
            else                                                                          \
                (ptr) = p_;                                                               \
        }                                                                                 \
    } while (0)

static uint64_t dh__dist(const dh__occ_t *o, size_t i)
{
    return o->dep1 > 0 ? (uint64_t)(i - (size_t)(o->dep1 - 1)) : 0;
}

static int dh__body_same(const dh__phtab_t *t, size_t b, const dh__occ_t *occ, size_t first,
                         size_t n)
{
    if (t->len[b] != n)
        return 0;
    for (size_t k = 0; k < n; k++) {
        size_t q = t->first[b] + k;
        const dh__occ_t *o = &occ[first + k];
        if (t->ref[q] != o->ref || t->mem[q] != o->mem || t->alist[q] != o->allocs ||
            t->dist[q] != dh__dist(o, first + k))
            return 0;
    }
    return 1;
}

static dh_status_t dh__index_grow(dh__phtab_t *t)
{
    size_t mask = t->mask ? t->mask * 2 + 1 : 63;
    size_t *ix = calloc(mask + 1, sizeof *ix);
    if (ix == NULL)
        return DH_ERR_NOMEM;
    for (size_t b = 0; b < t->nb; b++) {
        size_t h = (size_t)t->hash[b] & mask;
        while (ix[h])
            h = (h + 1) & mask;
        ix[h] = b + 1;
    }
    free(t->index);
    t->index = ix;
    t->mask = mask;
    return DH_OK;
}

/* Occurrence [first, first+n) of a phase: its body (found or added), and its times. */
static dh_status_t dh__phase(dh__phtab_t *t, const dh__occ_t *occ, size_t first, size_t n)
{
    uint64_t h = DH__FNV_OFFSET;
    for (size_t k = 0; k < n; k++) {
        h = dh__mix(h, occ[first + k].ref);
        h = dh__mix(h, (uint64_t)occ[first + k].mem);
        h = dh__mix(h, occ[first + k].allocs);
        h = dh__mix(h, dh__dist(&occ[first + k], first + k));
    }
    if ((t->nb + 1) * 2 > t->mask)
        DH_CHECK(dh__index_grow(t));
    size_t s = (size_t)h & t->mask, b = SIZE_MAX;
    for (; t->index[s]; s = (s + 1) & t->mask)
        if (t->hash[t->index[s] - 1] == h && dh__body_same(t, t->index[s] - 1, occ, first, n)) {
            b = t->index[s] - 1;
            break;
        }
    int ok = 1;
    if (b == SIZE_MAX) {
        DH__GROW(t->first, t->capb, t->nb + 1, ok);
        DH__GROW(t->len, t->capb, t->nb + 1, ok);
        DH__GROW(t->hash, t->capb, t->nb + 1, ok);
        DH__GROW(t->count, t->capb, t->nb + 1, ok);
        DH__GROW(t->anchor, t->capb, t->nb + 1, ok);
        if (ok && t->nb + 1 > t->capb)
            t->capb = t->capb ? t->capb * 2 : 64;
        size_t need = t->npos + n, cap = t->cappos;
        DH__GROW(t->ref, cap, need, ok);
        DH__GROW(t->mem, cap, need, ok);
        DH__GROW(t->alist, cap, need, ok);
        DH__GROW(t->dist, cap, need, ok);
        DH__GROW(t->us_sum, cap, need, ok);
        DH__GROW(t->at_sum, cap, need, ok);
        DH__GROW(t->us_n, cap, need, ok);
        DH__GROW(t->at_n, cap, need, ok);
        if (!ok)
            return DH_ERR_NOMEM;
        while (t->cappos < need)
            t->cappos = t->cappos ? t->cappos * 2 : 64;
        b = t->nb++;
        t->first[b] = t->npos;
        t->len[b] = n;
        t->hash[b] = h;
        t->count[b] = 0;
        t->anchor[b] = n;
        for (size_t k = 0; k < n && t->anchor[b] == n; k++)
            if (occ[first + k].start_us >= 0)
                t->anchor[b] = k;
        for (size_t k = 0; k < n; k++) {
            size_t q = t->npos + k;
            t->ref[q] = occ[first + k].ref;
            t->mem[q] = occ[first + k].mem;
            t->alist[q] = occ[first + k].allocs;
            t->dist[q] = dh__dist(&occ[first + k], first + k);
            t->us_sum[q] = t->at_sum[q] = 0;
            t->us_n[q] = t->at_n[q] = 0;
        }
        t->npos += n;
        t->index[s] = b + 1;
    }
    DH__GROW(t->seq_body, t->capseq, t->nseq + 1, ok);
    DH__GROW(t->seq_first, t->capseq, t->nseq + 1, ok);
    DH__GROW(t->seq_start, t->capseq, t->nseq + 1, ok);
    if (!ok)
        return DH_ERR_NOMEM;
    if (t->nseq + 1 > t->capseq)
        t->capseq = t->capseq ? t->capseq * 2 : 64;
    double at0 = t->anchor[b] < n ? occ[first + t->anchor[b]].start_us : -1;
    t->seq_body[t->nseq] = b;
    t->seq_start[t->nseq] = at0 >= 0 ? at0 : -1;
    t->seq_first[t->nseq++] = first;
    t->count[b]++;
    for (size_t k = 0; k < n; k++) {
        const dh__occ_t *o = &occ[first + k];
        size_t q = t->first[b] + k;
        if (o->us >= 0) {
            t->us_sum[q] += o->us;
            t->us_n[q]++;
        }
        if (at0 >= 0 && o->start_us >= 0) {
            t->at_sum[q] += o->start_us - at0;
            t->at_n[q]++;
        }
    }
    return DH_OK;
}

/* Splits the ops into phases as the planner does: at thread switches and syncs. */
static dh_status_t dh__phases_of(const dh_prof_builder_t *b, dh__phtab_t *t)
{
    size_t start = 0;
    for (size_t i = 1; i <= b->nocc; i++) {
        if (i < b->nocc && !b->occ[i].sync &&
            b->dops[b->occ[i].ref].thread == b->dops[b->occ[i - 1].ref].thread)
            continue;
        DH_CHECK(dh__phase(t, b->occ, start, i - start));
        start = i;
    }
    return DH_OK;
}

/* ---- writing ---- */

/* A distinct op: what every occurrence shares (version 1's record without its times,
 * memory, sync and dep). */
static void dh__dop_json(dh_strbuf_t *s, const dh_prof_op_t *op)
{
    dh__profile_op_head_json(s, op);
    dh_strbuf_puts(s, "}");
}

/* A mean, or null when nothing was measured. */
static void dh__mean_json(dh_strbuf_t *s, double sum, uint32_t n)
{
    if (n)
        dh__json_num(s, sum / n);
    else
        dh_strbuf_puts(s, "null");
}

static void dh__body_json(dh_strbuf_t *s, const dh_prof_builder_t *pb, const dh__phtab_t *t,
                          size_t b)
{
    size_t f = t->first[b], n = t->len[b];
    int any_mem = 0, any_dep = 0, any_list = 0;
    for (size_t k = 0; k < n; k++) {
        any_mem |= t->mem[f + k] != 0;
        any_dep |= t->dist[f + k] != 0;
        any_list |= t->alist[f + k] != 0;
    }
    dh_strbuf_printf(s, "    {\"n\": %zu, \"ops\": [", t->count[b]);
    for (size_t k = 0; k < n; k++)
        dh_strbuf_printf(s, k ? ",%u" : "%u", t->ref[f + k]);
    if (any_mem) {
        dh_strbuf_puts(s, "],\n     \"mem\": [");
        for (size_t k = 0; k < n; k++)
            dh_strbuf_printf(s, k ? ",%lld" : "%lld", (long long)t->mem[f + k]);
    }
    if (any_list) {
        dh_strbuf_puts(s, "],\n     \"allocs\": [");
        for (size_t k = 0; k < n; k++) {
            uint32_t id = t->alist[f + k];
            dh_strbuf_puts(s, k ? "," : "");
            if (id == 0)
                dh_strbuf_puts(s, "0");
            else
                dh__allocs_json(s, pb->lsz + pb->loff[id - 1], pb->loff[id] - pb->loff[id - 1]);
        }
    }
    if (any_dep) {
        dh_strbuf_puts(s, "],\n     \"dep\": [");
        for (size_t k = 0; k < n; k++)
            dh_strbuf_printf(s, k ? ",%llu" : "%llu", (unsigned long long)t->dist[f + k]);
    }
    dh_strbuf_puts(s, "],\n     \"us\": [");
    for (size_t k = 0; k < n; k++) {
        dh_strbuf_puts(s, k ? "," : "");
        dh__mean_json(s, t->us_sum[f + k], t->us_n[f + k]);
    }
    dh_strbuf_puts(s, "],\n     \"at\": [");
    for (size_t k = 0; k < n; k++) {
        dh_strbuf_puts(s, k ? "," : "");
        dh__mean_json(s, t->at_sum[f + k], t->at_n[f + k]);
    }
    dh_strbuf_puts(s, "]}");
}

void dh__profile_header_json(dh_strbuf_t *s, const dh_profile_t *p, int version)
{
    dh_strbuf_printf(s, "{\n  \"format\": \"dhelix-profile\", \"version\": %d,\n", version);
    dh_strbuf_printf(s, "  \"rank\": %d, \"world\": %d, \"layout\": ", p->rank, p->world);
    dh_strbuf_json_str(s, p->layout);
    dh_strbuf_puts(s, ", \"host\": ");
    dh_strbuf_json_str(s, p->host);
    dh_strbuf_puts(s, ", \"device\": ");
    dh_strbuf_json_str(s, p->device);
    dh_strbuf_printf(s, ",\n  \"max_connections\": %d,", p->max_connections);
    if (p->blas_ws_bytes >= 0)
        dh_strbuf_printf(s, " \"blas_workspace_bytes\": %lld,", (long long)p->blas_ws_bytes);
    if (p->device_free_bytes >= 0)
        dh_strbuf_printf(s, " \"device_free_bytes\": %lld,", (long long)p->device_free_bytes);
    dh_strbuf_puts(s, "\n  \"comms\": [");
    for (int i = 0; i < p->ncomms; i++) {
        const dh_prof_comm_t *c = &p->comms[i];
        dh_strbuf_puts(s, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        dh_strbuf_json_str(s, c->name);
        dh_strbuf_puts(s, ", \"role\": ");
        dh_strbuf_json_str(s, c->role);
        dh_strbuf_printf(s, ", \"nranks\": %d, \"rank\": %d", c->nranks, c->rank);
        if (c->ident != 0)
            dh_strbuf_printf(s, ", \"ident\": \"%016llx\"", (unsigned long long)c->ident);
        dh_strbuf_puts(s, "}");
    }
    dh_strbuf_puts(s, p->ncomms ? "\n  ],\n" : "],\n");
}

/* Renders what dh_prof_builder_save writes into s; errors as it (path names the output). */
static dh_status_t dh__builder_render(const dh_prof_builder_t *b, const dh_profile_t *hdr,
                                      dh_strbuf_t *sp, const char *path, char *err, size_t errlen)
{
    dh__phtab_t t = {0};
    dh_strbuf_t s = *sp;
    dh_status_t st = dh__phases_of(b, &t);
    if (st == DH_OK) {
        dh__profile_header_json(&s, hdr, DH_PROFILE_VERSION);
        dh_strbuf_printf(&s, "  \"nops\": %zu,\n  \"ops\": [", b->nocc);
        for (uint32_t i = 0; i < b->ndops; i++) {
            dh_strbuf_puts(&s, i ? ",\n" : "\n");
            dh__dop_json(&s, &b->dops[i]);
        }
        dh_strbuf_puts(&s, b->ndops ? "\n  ],\n  \"phases\": [" : "],\n  \"phases\": [");
        for (size_t k = 0; k < t.nb; k++) {
            dh_strbuf_puts(&s, k ? ",\n" : "\n");
            dh__body_json(&s, b, &t, k);
        }
        dh_strbuf_puts(&s, t.nb ? "\n  ],\n  \"seq\": [" : "],\n  \"seq\": [");
        for (size_t k = 0; k < t.nseq; k++) {
            const dh__occ_t *o = &b->occ[t.seq_first[k]];
            dh_strbuf_printf(&s, "%s[%zu, %d, ", k ? (k % 8 ? ", " : ",\n    ") : "\n    ",
                             t.seq_body[k], o->sync);
            dh__json_num(&s, t.seq_start[k]);
            dh_strbuf_puts(&s, "]");
        }
        dh_strbuf_printf(&s, "%s],\n  \"sync_at_end\": %d\n}\n", t.nseq ? "\n  " : "",
                         hdr->sync_at_end);
        st = dh_strbuf_status(&s);
        if (st != DH_OK)
            dh__errf(err, errlen, path, "out of memory");
    } else {
        dh__errf(err, errlen, path, "out of memory");
    }
    *sp = s;
    dh__phtab_free(&t);
    return st;
}

dh_status_t dh_prof_builder_save(const dh_prof_builder_t *b, const dh_profile_t *hdr,
                                 const char *path, char *err, size_t errlen)
{
    dh_strbuf_t s = DH_STRBUF_INIT;
    dh_status_t st = dh__builder_render(b, hdr, &s, path, err, errlen);
    if (st == DH_OK)
        st = dh__write_file(path, dh_strbuf_str(&s), s.len, err, errlen);
    dh_strbuf_free(&s);
    return st;
}

dh_status_t dh_prof_builder_render(const dh_prof_builder_t *b, const dh_profile_t *hdr,
                                   char **buf, size_t *len, char *err, size_t errlen)
{
    dh_strbuf_t s = DH_STRBUF_INIT;
    dh_status_t st = dh__builder_render(b, hdr, &s, "profile", err, errlen);
    *buf = NULL;
    *len = 0;
    if (st == DH_OK && !(*buf = malloc(s.len + 1)))
        st = DH_ERR_NOMEM;
    if (st == DH_OK) {
        memcpy(*buf, dh_strbuf_str(&s), s.len + 1);
        *len = s.len;
    }
    dh_strbuf_free(&s);
    return st;
}

dh_status_t dh_profile_save_compact(const dh_profile_t *p, const char *path, char *err,
                                    size_t errlen)
{
    dh_prof_builder_t *b = dh_prof_builder_new();
    dh_status_t st = b ? DH_OK : DH_ERR_NOMEM;
    for (size_t i = 0; st == DH_OK && i < p->nops; i++) {
        const int64_t *sizes;
        size_t n = dh_prof_allocs(p, &p->ops[i], &sizes, NULL, NULL);
        st = dh_prof_builder_add(b, &p->ops[i], sizes, n);
    }
    if (st == DH_OK)
        st = dh_prof_builder_save(b, p, path, err, errlen);
    else
        dh__errf(err, errlen, path, "out of memory");
    dh_prof_builder_free(b);
    return st;
}
