/*
 * orders.c: one cross-strand order of collectives per communicator for every section.
 *
 * NCCL matches collectives by their order on a communicator. Every rank of one section runs
 * the same plan, so its ranks agree; but ranks of different sections (rank 0 loads the data
 * and has an extra copy per forward, say) get their own DPs, which may interleave the two
 * strands' collectives differently: a hang, or a collective matched with the wrong one. So
 * the first section whose pair (of an ordinal) uses a communicator chooses that
 * communicator's order in the pair, and every later section's pair of the same ordinal
 * follows it. A communicator is named by name, role, size and occurrence (comm indices are
 * per process) and by its collectives' counts in the pair: members of one communicator run
 * the same collectives, so where the counts differ it is another instance (a
 * tensor-parallel group of another pipeline stage), which the first section that has it
 * chooses for, and its other members follow.
 */
#include "planner_int.h"
#include "plan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The key that names communicator c of p across processes: "name|role|nranks|k", k counting
 * earlier communicators of p with the same name, role and size. */
static void dh__comm_key(const dh_profile_t *p, int c, char *key, size_t n)
{
    if (c < 0 || c >= p->ncomms) {
        snprintf(key, n, "?");
        return;
    }
    const dh_prof_comm_t *x = &p->comms[c];
    int k = 0;
    for (int q = 0; q < c; q++)
        k += strcmp(p->comms[q].name, x->name) == 0 && strcmp(p->comms[q].role, x->role) == 0 &&
             p->comms[q].nranks == x->nranks;
    snprintf(key, n, "%s|%s|%d|%d", x->name, x->role, x->nranks, k);
}

/* The distinct communicators of the collectives in a[0..na) and b[0..nb) into comms (room
 * for na + nb); returns their number. Ops of class comm without a communicator (comm -1:
 * kernels classified as comm, emulated collectives) are matched by no NCCL order, so they
 * need none. */
static int dh__pair_comms(const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                          int *comms)
{
    int n = 0;
    for (size_t k = 0; k < na + nb; k++) {
        const dh_align_op_t *op = k < na ? &a[k] : &b[k - na];
        if (op->cls != DH_CLS_COMM || op->comm < 0)
            continue;
        int q = 0;
        while (q < n && comms[q] != op->comm)
            q++;
        if (q == n)
            comms[n++] = op->comm;
    }
    return n;
}

static size_t dh__count(const dh_align_op_t *ops, size_t n, int comm)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ops[i].cls == DH_CLS_COMM && ops[i].comm == comm;
    return c;
}

void dh__orders_free(dh__orders_t *o)
{
    for (int p = 0; p < o->npairs; p++) {
        for (int k = 0; k < o->pairs[p].n; k++)
            free(o->pairs[p].recs[k].seq);
        free(o->pairs[p].recs);
    }
    free(o->pairs);
    memset(o, 0, sizeof(*o));
}

/* The record of communicator c's order in pr with key and counts, or NULL. */
static const dh__ordrec_t *dh__find(const dh__pairrec_t *pr, const char *key, size_t xa, size_t yb)
{
    for (int q = 0; pr != NULL && q < pr->n; q++)
        if (strcmp(pr->recs[q].key, key) == 0 && pr->recs[q].na == xa && pr->recs[q].nb == yb)
            return &pr->recs[q];
    return NULL;
}

dh_status_t dh__orders_record(dh__orders_t *o, int pair, const dh_profile_t *prof,
                              const dh_align_op_t *a, size_t na, const dh_align_op_t *b,
                              size_t nb, const dh_align_result_t *r)
{
    if (pair >= o->npairs) {
        dh__pairrec_t *grown = realloc(o->pairs, (size_t)(pair + 1) * sizeof(*grown));
        if (grown == NULL)
            return DH_ERR_NOMEM;
        memset(grown + o->npairs, 0, (size_t)(pair + 1 - o->npairs) * sizeof(*grown));
        o->pairs = grown;
        o->npairs = pair + 1;
    }
    dh__pairrec_t *pr = &o->pairs[pair];
    int *comms = malloc((na + nb + 1) * sizeof(*comms));
    if (comms == NULL)
        return DH_ERR_NOMEM;
    int nc = dh__pair_comms(a, na, b, nb, comms);
    dh__ordrec_t *grown = realloc(pr->recs, (size_t)(pr->n + nc + 1) * sizeof(*grown));
    dh_status_t st = grown ? DH_OK : DH_ERR_NOMEM;
    if (grown != NULL)
        pr->recs = grown;
    for (int k = 0; k < nc && st == DH_OK; k++) {
        dh__ordrec_t rec = {{0}, dh__count(a, na, comms[k]), dh__count(b, nb, comms[k]), NULL};
        dh__comm_key(prof, comms[k], rec.key, sizeof(rec.key));
        if (dh__find(pr, rec.key, rec.na, rec.nb) != NULL)
            continue;   /* chosen by an earlier section, which this one followed */
        if ((rec.seq = malloc(rec.na + rec.nb + 1)) == NULL) {
            st = DH_ERR_NOMEM;
            break;
        }
        if (r != NULL) {
            dh_align_comm_order(r, a, b, comms[k], rec.seq);
        } else {
            /* A pair that ran serially ran all of A first. */
            memset(rec.seq, 0, rec.na);
            memset(rec.seq + rec.na, 1, rec.nb);
        }
        pr->recs[pr->n++] = rec;
    }
    free(comms);
    return st;
}

dh_status_t dh__orders_for(const dh__orders_t *o, int pair, const dh_profile_t *prof,
                           const dh_align_op_t *a, size_t na, const dh_align_op_t *b, size_t nb,
                           dh_align_order_t **out, int *nout, uint8_t **buf)
{
    *out = NULL;
    *nout = 0;
    *buf = NULL;
    int *comms = malloc((na + nb + 1) * sizeof(*comms));
    if (comms == NULL)
        return DH_ERR_NOMEM;
    int nc = dh__pair_comms(a, na, b, nb, comms);
    size_t total = 0;
    for (int k = 0; k < nc; k++)
        total += dh__count(a, na, comms[k]) + dh__count(b, nb, comms[k]);
    dh_align_order_t *ord = calloc((size_t)(nc ? nc : 1), sizeof(*ord));
    uint8_t *seq = malloc(total + 1);
    if (ord == NULL || seq == NULL) {
        free(comms);
        free(ord);
        free(seq);
        return DH_ERR_NOMEM;
    }
    const dh__pairrec_t *pr = pair < o->npairs ? &o->pairs[pair] : NULL;
    size_t at = 0;
    int n = 0;
    for (int k = 0; k < nc; k++) {
        char key[sizeof(((dh__ordrec_t *)0)->key)];
        dh__comm_key(prof, comms[k], key, sizeof(key));
        size_t xa = dh__count(a, na, comms[k]), yb = dh__count(b, nb, comms[k]);
        const dh__ordrec_t *rec = dh__find(pr, key, xa, yb);
        if (rec == NULL)
            continue;   /* this section is the first with it: its DP chooses */
        memcpy(seq + at, rec->seq, xa + yb);
        ord[n++] = (dh_align_order_t){comms[k], xa + yb, seq + at};
        at += xa + yb;
    }
    free(comms);
    *out = ord;
    *nout = n;
    *buf = seq;
    return DH_OK;
}
