/* memsim.c: the runtime's device memory over one iteration of a plan (memsim.h). */
#include "memsim.h"

#include <stdlib.h>
#include <string.h>

#define DH__NONE SIZE_MAX

/* A parked block: a captured free whose block no allocation took back yet. */
typedef struct dh__blk {
    int64_t size;
    size_t op;                  /* the free's template op */
    size_t next;                /* the next block of its group (DH__NONE: last) */
    int32_t group;
    int8_t strand;
    uint8_t alive;
} dh__blk_t;

/* The blocks of one size on one framework stream, in park order. Taken and released blocks
 * stay until they reach an end (lazy removal): lo is the first that may be alive. */
typedef struct dh__bkt {
    int64_t size;
    uint32_t stream;
    size_t *ids, n, cap, lo;
} dh__bkt_t;

typedef struct dh__pool {
    dh__blk_t *blk;
    size_t nblk, capblk;
    dh__bkt_t *bkt;
    size_t nbkt, capbkt;
    size_t *index, mask;        /* open addressing over bkt: id + 1, 0 empty */
} dh__pool_t;

static void dh__pool_free(dh__pool_t *p)
{
    for (size_t b = 0; b < p->nbkt; b++)
        free(p->bkt[b].ids);
    free(p->bkt);
    free(p->blk);
    free(p->index);
}

static size_t dh__hash(int64_t size, uint32_t stream)
{
    uint64_t h = ((uint64_t)size * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)stream * 0xbf58476d1ce4e5b9ull);
    return (size_t)(h ^ (h >> 29));
}

static dh_status_t dh__index_grow(dh__pool_t *p)
{
    size_t mask = p->mask ? p->mask * 2 + 1 : 63;
    size_t *ix = calloc(mask + 1, sizeof *ix);
    if (ix == NULL)
        return DH_ERR_NOMEM;
    for (size_t b = 0; b < p->nbkt; b++) {
        size_t h = dh__hash(p->bkt[b].size, p->bkt[b].stream) & mask;
        while (ix[h])
            h = (h + 1) & mask;
        ix[h] = b + 1;
    }
    free(p->index);
    p->index = ix;
    p->mask = mask;
    return DH_OK;
}

/* The bucket of (size, stream); with add, made when missing (*out NULL only on no memory),
 * else NULL when missing. */
static dh_status_t dh__bucket(dh__pool_t *p, int64_t size, uint32_t stream, int add,
                              dh__bkt_t **out)
{
    *out = NULL;
    if (p->mask == 0 || (add && (p->nbkt + 1) * 2 > p->mask)) {
        if (!add && p->mask == 0)
            return DH_OK;
        DH_CHECK(dh__index_grow(p));
    }
    size_t h = dh__hash(size, stream) & p->mask;
    for (; p->index[h]; h = (h + 1) & p->mask) {
        dh__bkt_t *b = &p->bkt[p->index[h] - 1];
        if (b->size == size && b->stream == stream) {
            *out = b;
            return DH_OK;
        }
    }
    if (!add)
        return DH_OK;
    if (p->nbkt == p->capbkt) {
        size_t cap = p->capbkt ? p->capbkt * 2 : 16;
        dh__bkt_t *v = realloc(p->bkt, cap * sizeof *v);
        if (v == NULL)
            return DH_ERR_NOMEM;
        p->bkt = v;
        p->capbkt = cap;
    }
    p->bkt[p->nbkt] = (dh__bkt_t){size, stream, NULL, 0, 0, 0};
    p->index[h] = ++p->nbkt;
    *out = &p->bkt[p->nbkt - 1];
    return DH_OK;
}

static dh_status_t dh__park(dh__pool_t *p, int64_t size, uint32_t stream, int strand,
                            int32_t group, size_t op, size_t *id)
{
    dh__bkt_t *b;
    DH_CHECK(dh__bucket(p, size, stream, 1, &b));
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        size_t *v = realloc(b->ids, cap * sizeof *v);
        if (v == NULL)
            return DH_ERR_NOMEM;
        b->ids = v;
        b->cap = cap;
    }
    if (p->nblk == p->capblk) {
        size_t cap = p->capblk ? p->capblk * 2 : 256;
        dh__blk_t *v = realloc(p->blk, cap * sizeof *v);
        if (v == NULL)
            return DH_ERR_NOMEM;
        p->blk = v;
        p->capblk = cap;
    }
    *id = p->nblk++;
    p->blk[*id] = (dh__blk_t){size, op, DH__NONE, group, (int8_t)strand, 1};
    b->ids[b->n++] = *id;
    return DH_OK;
}

/* The block an allocation of size bytes on stream takes back, made by strand (of group):
 * the newest block its own strand parked, else (cross) the oldest the other strand parked
 * in an earlier group; DH__NONE when none. The block is no longer alive. */
static size_t dh__take(dh__pool_t *p, int64_t size, uint32_t stream, int strand,
                       int32_t group, int cross)
{
    dh__bkt_t *b;
    if (dh__bucket(p, size, stream, 0, &b) != DH_OK || b == NULL)
        return DH__NONE;
    while (b->n > b->lo && !p->blk[b->ids[b->n - 1]].alive)
        b->n--;
    while (b->lo < b->n && !p->blk[b->ids[b->lo]].alive)
        b->lo++;
    size_t pick = DH__NONE;
    for (size_t k = b->n; k-- > b->lo && pick == DH__NONE;) {
        const dh__blk_t *x = &p->blk[b->ids[k]];
        if (x->alive && x->strand == strand)
            pick = b->ids[k];
    }
    for (size_t k = b->lo; cross && k < b->n && pick == DH__NONE; k++) {
        const dh__blk_t *x = &p->blk[b->ids[k]];
        if (x->alive && x->strand != strand && x->group < group)
            pick = b->ids[k];
    }
    if (pick != DH__NONE)
        p->blk[pick].alive = 0;
    return pick;
}

dh_status_t dh_memsim_reuse(const dh_memsim_op_t *ops, size_t n, int64_t *kept,
                            int64_t *retaken, uint32_t *from)
{
    dh__pool_t p = {0};
    dh_status_t st = DH_OK;
    for (size_t i = 0; i < n; i++)
        kept[i] = retaken[i] = 0, from[i] = 0;
    for (size_t i = 0; i < n && st == DH_OK; i++) {
        for (size_t k = 0; k < ops[i].nsizes; k++) {
            size_t b = dh__take(&p, ops[i].sizes[k], ops[i].stream, 0, 0, 0);
            if (b == DH__NONE)
                continue;
            size_t f = p.blk[b].op;
            kept[f] = ops[f].freed;
            retaken[i] += ops[i].sizes[k];
            if ((uint32_t)(i - f) > from[i])
                from[i] = (uint32_t)(i - f);
        }
        size_t id;
        if (ops[i].freed > 0)
            st = dh__park(&p, ops[i].freed, ops[i].stream, 0, 0, i, &id);
    }
    dh__pool_free(&p);
    return st;
}

/* The walk's state: the pool, what is held, and each group's parked blocks. */
typedef struct dh__walk {
    dh__pool_t pool;
    size_t *head;               /* [group]: its first parked block (DH__NONE: none) */
    double live, held, live_peak, peak;
    size_t peak_op;
} dh__walk_t;

/* Group g goes out: its blocks that no allocation took are freed. */
static void dh__release(dh__walk_t *w, int g)
{
    for (size_t b = w->head[g]; b != DH__NONE; b = w->pool.blk[b].next)
        if (w->pool.blk[b].alive) {
            w->pool.blk[b].alive = 0;
            w->held -= (double)w->pool.blk[b].size;
        }
    w->head[g] = DH__NONE;
}

static void dh__note(dh__walk_t *w, size_t op)
{
    if (w->live > w->live_peak)
        w->live_peak = w->live;
    if (w->live + w->held > w->peak) {
        w->peak = w->live + w->held;
        w->peak_op = op;
    }
}

dh_status_t dh_memsim_section(const dh_plan_section_t *s, const dh_memsim_op_t *ops, int agree,
                              dh_memsim_result_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t c = 0; c < s->nops; c++)
        if (s->ops[c].group < 0 || s->ops[c].group >= s->ngroups)
            return DH_ERR_INVALID;
    dh__walk_t w = {0};
    size_t *ra = dh_plan_release_marks(s);
    dh_plan_vp_t *vp = NULL;
    uint64_t capped;
    int nvp = agree ? dh_plan_vote_points(s, &vp, &capped) : 0;
    w.head = malloc((s->ngroups > 0 ? (size_t)s->ngroups : 1) * sizeof *w.head);
    dh_status_t st = ra && w.head && nvp >= 0 ? DH_OK : DH_ERR_NOMEM;
    for (int g = 0; st == DH_OK && g < s->ngroups; g++)
        w.head[g] = DH__NONE;
    int64_t ws = 0; /* strand 1's workspace (strand 0 runs on the framework's) */
    size_t r = 0, k = 0;
    for (size_t c = 0; st == DH_OK && c < s->nops; c++) {
        const dh_memsim_op_t *o = &ops[c];
        int g = s->ops[c].group, strand = s->ops[c].strand != 0;
        for (size_t q = 0; q < o->nsizes; q++) {
            if (dh__take(&w.pool, o->sizes[q], o->stream, strand, g, 1) != DH__NONE)
                w.held -= (double)o->sizes[q];
            w.live += (double)o->sizes[q];
        }
        dh__note(&w, c);
        if (strand == 1 && o->blas && o->ws_bytes > ws)
            ws = o->ws_bytes;
        if (o->freed > 0) {
            size_t id;
            st = dh__park(&w.pool, o->freed, o->stream, strand, g, c, &id);
            if (st != DH_OK)
                break;
            w.pool.blk[id].next = w.head[g];
            w.head[g] = id;
            w.live -= (double)o->freed;
            w.held += (double)o->freed;
        }
        /* The pair's two-strand groups wait for its vote, at op vp[k].c. */
        size_t to = ra[c];
        while (k < (size_t)nvp && vp[k].c < c)
            k++;
        if (k < (size_t)nvp && vp[k].c > c && to > vp[k].cap)
            to = vp[k].cap;
        for (; r < to; r++)
            dh__release(&w, (int)r);
        /* A group of one strand with every group before it released goes out op by op. */
        const dh_plan_group_t *gr = &s->groups[g];
        if ((gr->a_n == 0 || gr->b_n == 0) && r == (size_t)g)
            dh__release(&w, g);
        dh__note(&w, c);
    }
    if (st == DH_OK) {
        out->workspace = (double)ws;
        out->held = w.peak > w.live_peak ? w.peak - w.live_peak : 0;
        out->extra = out->workspace + out->held;
        out->live_peak = w.live_peak;
        out->peak_op = w.peak_op;
    }
    free(ra);
    free(vp);
    free(w.head);
    dh__pool_free(&w.pool);
    return st;
}

dh_status_t dh_memsim_pair(const dh_memsim_op_t *ops, size_t na, size_t nb,
                           const dh_align_result_t *r, int agree, dh_memsim_result_t *out)
{
    /* The pair as a section: A (the backward, strand a) then B (strand b) in program order,
     * one group per step, two phases of consecutive micro-batches (one vote). */
    dh_plan_phase_t ph[2] = {{0, na, 'B', 0, 0, 1}, {na, nb, 'F', 1, 1, 0}};
    dh_plan_section_t s = {.nops = na + nb, .nphases = 2, .phases = ph,
                           .ngroups = (int)r->nsteps};
    s.ops = calloc(na + nb ? na + nb : 1, sizeof *s.ops);
    s.groups = calloc(r->nsteps ? r->nsteps : 1, sizeof *s.groups);
    dh_status_t st = s.ops && s.groups ? DH_OK : DH_ERR_NOMEM;
    for (size_t k = 0; st == DH_OK && k < r->nsteps; k++) {
        const dh_align_step_t *t = &r->steps[k];
        s.groups[k] = (dh_plan_group_t){t->a_first, t->a_n, na + t->b_first, t->b_n, NULL,
                                        0, 0};
        for (size_t i = 0; i < t->a_n; i++)
            s.ops[t->a_first + i] = (dh_plan_op_t){.phase = 0, .strand = 0, .group = (int32_t)k};
        for (size_t j = 0; j < t->b_n; j++)
            s.ops[na + t->b_first + j] = (dh_plan_op_t){.phase = 1, .strand = 1,
                                                        .group = (int32_t)k};
    }
    if (st == DH_OK)
        st = dh_memsim_section(&s, ops, agree, out);
    free(s.ops);
    free(s.groups);
    return st;
}
