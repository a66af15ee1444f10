/*
 * plan_walk.c: a section's template as the runtime walks it (plan.h, dh_plan_walk_t).
 *
 * The runtime needs, per template op, what to match (sig, shape) and where it goes (strand,
 * group, release mark), and per group its issue order. The template is blocks of whole
 * phases that repeat (plan_blocks.c: the steady pair of every micro-batch is one block
 * repeated), so the walker keeps each block's first repetition only and derives the rest:
 * repetition r of a block puts its groups r x (groups per repetition) further. Its memory
 * follows the distinct blocks, not the micro-batches, and each step costs O(1).
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct dh__wblk {
    size_t op0, n, repeat;          /* first template op, ops per repetition, repetitions */
    int g0, ng;                     /* first template group, groups per repetition */
    dh_plan_op_t *ops;              /* [n]: the first repetition's ops, group relative */
    uint8_t *pstart;                /* [n]: first op of a backward phase that is paired */
    int *pair;                      /* [n]: the pair of the op's phase, -1 none */
    size_t *rel;                    /* [n]: the block's groups complete once op k arrived */
    char **order;                   /* [ng] */
    uint8_t *single;                /* [ng]: ops of one strand only */
} dh__wblk_t;

struct dh_plan_walk {
    size_t nops, bytes;
    int ngroups, nb;
    dh__wblk_t *b;
};

void dh_plan_walk_free(dh_plan_walk_t *w)
{
    if (w == NULL)
        return;
    for (int i = 0; i < w->nb; i++) {
        dh__wblk_t *b = &w->b[i];
        for (int g = 0; b->order && g < b->ng; g++)
            free(b->order[g]);
        free(b->order);
        free(b->single);
        free(b->ops);
        free(b->pstart);
        free(b->pair);
        free(b->rel);
    }
    free(w->b);
    free(w);
}

static dh_status_t dh__wblk_fill(const dh_plan_section_t *s, const dh__blk_t *k, dh__wblk_t *b,
                                 size_t *bytes)
{
    const dh__chunk_t *c = &k->c;
    b->op0 = c->op0;
    b->n = c->op1 - c->op0;
    b->repeat = k->repeat;
    b->g0 = c->g0;
    b->ng = c->g1 - c->g0;
    b->ops = malloc((b->n ? b->n : 1) * sizeof *b->ops);
    b->pstart = calloc(b->n ? b->n : 1, 1);
    b->pair = malloc((b->n ? b->n : 1) * sizeof *b->pair);
    b->rel = malloc((b->n ? b->n : 1) * sizeof *b->rel);
    b->order = calloc((size_t)(b->ng ? b->ng : 1), sizeof *b->order);
    b->single = calloc((size_t)(b->ng ? b->ng : 1), 1);
    size_t *last = calloc((size_t)(b->ng ? b->ng : 1), sizeof *last);
    if (!b->ops || !b->pstart || !b->pair || !b->rel || !b->order || !b->single || !last) {
        free(last);
        return DH_ERR_NOMEM;
    }
    for (size_t i = 0; i < b->n; i++) {
        const dh_plan_op_t *op = &s->ops[c->op0 + i];
        b->ops[i] = *op;
        b->ops[i].group = op->group - c->g0;
        const dh_plan_phase_t *ph = op->phase >= 0 && op->phase < s->nphases
                                        ? &s->phases[op->phase] : NULL;
        b->pstart[i] = ph && ph->first == c->op0 + i && ph->kind == 'B' && ph->paired_with >= 0;
        b->pair[i] = ph ? ph->paired_with : -1;
        last[b->ops[i].group] = i;
    }
    size_t r = 0;
    for (size_t i = 0; i < b->n; i++) {
        while (r < (size_t)b->ng && last[r] <= i)
            r++;
        b->rel[i] = r;
    }
    free(last);
    for (int g = 0; g < b->ng; g++) {
        const dh_plan_group_t *gr = &s->groups[c->g0 + g];
        if ((b->order[g] = strdup(gr->order ? gr->order : "")) == NULL)
            return DH_ERR_NOMEM;
        b->single[g] = gr->a_n == 0 || gr->b_n == 0;
        *bytes += strlen(b->order[g]) + 1 + sizeof(char *) + 1;
    }
    *bytes += b->n * (sizeof *b->ops + 1 + sizeof *b->pair + sizeof *b->rel);
    return DH_OK;
}

dh_plan_walk_t *dh_plan_walk_new(const dh_plan_section_t *s)
{
    dh__blk_t *blk;
    int nb;
    if (s->ngroups <= 0 || s->nops == 0 || dh__plan_blocks_find(s, &blk, &nb) != DH_OK)
        return NULL;
    dh_plan_walk_t *w = calloc(1, sizeof *w);
    if (w == NULL || (w->b = calloc((size_t)(nb ? nb : 1), sizeof *w->b)) == NULL) {
        free(w);
        free(blk);
        return NULL;
    }
    w->nops = s->nops;
    w->ngroups = s->ngroups;
    w->bytes = sizeof *w + (size_t)nb * sizeof *w->b;
    dh_status_t st = DH_OK;
    for (int i = 0; i < nb && st == DH_OK; i++) {
        w->nb++;
        st = dh__wblk_fill(s, &blk[i], &w->b[i], &w->bytes);
    }
    free(blk);
    if (st != DH_OK) {
        dh_plan_walk_free(w);
        return NULL;
    }
    return w;
}

size_t dh_plan_walk_nops(const dh_plan_walk_t *w) { return w->nops; }
int dh_plan_walk_ngroups(const dh_plan_walk_t *w) { return w->ngroups; }
int dh_plan_walk_nblocks(const dh_plan_walk_t *w) { return w->nb; }
size_t dh_plan_walk_bytes(const dh_plan_walk_t *w) { return w->bytes; }

void dh_plan_walk_next(const dh_plan_walk_t *w, dh_plan_cursor_t *p)
{
    if (++p->k == w->b[p->b].n) {
        p->k = 0;
        if (++p->r == w->b[p->b].repeat) {
            p->r = 0;
            if (++p->b == (size_t)w->nb)
                p->b = 0;
        }
    }
    p->c = p->c + 1 == w->nops ? 0 : p->c + 1;
}

void dh_plan_walk_at(const dh_plan_walk_t *w, const dh_plan_cursor_t *p, dh_plan_here_t *out)
{
    const dh__wblk_t *b = &w->b[p->b];
    int base = b->g0 + (int)p->r * b->ng;
    out->op = &b->ops[p->k];
    out->group = base + b->ops[p->k].group;
    out->release = (size_t)base + b->rel[p->k];
    out->single_strand = b->single[b->ops[p->k].group];
    out->starts_paired_b = b->pstart[p->k];
    out->phase = b->ops[p->k].phase;
    out->paired_with = b->pair[p->k];
}

const char *dh_plan_walk_order(const dh_plan_walk_t *w, int group)
{
    if (group < 0 || group >= w->ngroups)
        return NULL;
    int lo = 0, hi = w->nb - 1;
    while (lo < hi) {               /* the last block whose first group is <= group */
        int mid = (lo + hi + 1) / 2;
        if (w->b[mid].g0 <= group)
            lo = mid;
        else
            hi = mid - 1;
    }
    const dh__wblk_t *b = &w->b[lo];
    if (b->ng == 0 || group < b->g0)
        return NULL;
    return b->order[(group - b->g0) % b->ng];
}
