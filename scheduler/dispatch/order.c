/*
 * order.c: the order in which the dispatcher issues held ops (dispatch.c runs it). A batch
 * is built with the lock held from the ops the program's flushes and the release mark let
 * out (sched_int.h): group by group, the two strands interleaved in the plan's order, each
 * strand and framework stream in program order, barriers where the strands switch, frees
 * last; or program order, or a random legal order (stress).
 */
#include <string.h>

#include "common/log.h"
#include "dispatch_int.h"

/* ---- choosing the order ---- */

/* Lock held. An op may be issued now if what it waits for is issued or ahead of it in
 * the batch, and the legacy stream's barrier semantics hold within its strand (see the
 * file comment): min_seq and min_legacy are the strand's smallest held seqs. */
static int dh__ready(const dh_op_t *op, uint64_t min_seq, uint64_t min_legacy)
{
    if (op->kind == DH_OP_EVENT_WAIT) {
        const dh_evinst_t *i = op->shim_event;
        if (!i->recorded && !i->batched)
            return 0;
    }
    if (dh__is_legacy(op))
        return op->seq == min_seq;
    return op->seq < min_legacy;
}

static void dh__mark_batched(dh_op_t *op)
{
    if (op->kind == DH_OP_EVENT_RECORD)
        ((dh_evinst_t *)op->shim_event)->batched = 1;
}

static dh_op_t *dh__pop(dh_vstream_t *v, int s)
{
    dh_op_t *op = v->head[s];
    v->head[s] = op->next;
    if (!v->head[s])
        v->tail[s] = NULL;
    op->next = NULL;
    return op;
}

/* Lock held. Smallest seq among held ops of strand s (both strands when s < 0) with
 * group <= gmax and seq < lim, and among those on the legacy stream. Each framework
 * stream's ops of one strand are in program order, so heads suffice. */
static void dh__minima(uint64_t gmax, uint64_t lim, int s, uint64_t *min_seq,
                       uint64_t *min_legacy)
{
    *min_seq = *min_legacy = UINT64_MAX;
    for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next) {
        for (int k = 0; k < 2; k++) {
            const dh_op_t *h = v->head[k];
            if (!h || h->group > gmax || h->seq >= lim || (s >= 0 && k != s))
                continue;
            if (h->seq < *min_seq)
                *min_seq = h->seq;
            if (dh__is_legacy(h) && h->seq < *min_legacy)
                *min_legacy = h->seq;
        }
    }
}

/* Lock held. Appends every held op with group <= gmax and seq < lim in program order on
 * the framework streams themselves: the fallback when a smarter order fails, always legal
 * (a barrier first joins whatever strand 1 ran before). */
int dh__order_seq(dh_batch_t *b, uint64_t gmax, uint64_t lim)
{
    if (dh__dirty[1]) {
        dh__dirty[0] = dh__dirty[1] = 0;
        dh__s.stats.cross_strand_barriers++;
        if (dh__push(b, NULL, 0))
            return -1;
    }
    for (;;) {
        dh_vstream_t *best = NULL;
        int bs = 0;
        for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next)
            for (int k = 0; k < 2; k++)
                if (v->head[k] && v->head[k]->group <= gmax && v->head[k]->seq < lim &&
                    (!best || v->head[k]->seq < best->head[bs]->seq)) {
                    best = v;
                    bs = k;
                }
        if (!best)
            return 0;
        dh_op_t *op = dh__pop(best, bs);
        dh__mark_batched(op);
        if (dh__push(b, op, 0))
            return -1;
        dh__dirty[0] = 1;
    }
}

/* Lock held. Appends every held op with group <= gmax in a random legal order (stress),
 * all on strand 0. */
int dh__order_stress(dh_batch_t *b, uint64_t gmax)
{
    dh_vstream_t *cand[256];
    for (;;) {
        uint64_t min_seq, min_legacy;
        dh__minima(gmax, UINT64_MAX, 0, &min_seq, &min_legacy);
        if (min_seq == UINT64_MAX)
            return 0;
        int n = 0;
        for (dh_vstream_t *v = dh__s.vstreams; v && n < 256; v = v->hh.next)
            if (v->head[0] && v->head[0]->group <= gmax &&
                dh__ready(v->head[0], min_seq, min_legacy))
                cand[n++] = v;
        if (n == 0)
            return -1; /* cannot happen: the oldest op is always ready */
        dh_vstream_t *v = cand[dh__rand() % (uint64_t)n];
        dh_op_t *op = dh__pop(v, 0);
        dh__mark_batched(op);
        if (dh__push(b, op, 0))
            return -1;
    }
}

/* Lock held. Says once why no held op of group g can be issued (a wait whose record comes
 * later in the plan's order, or the legacy stream's rule), then the caller falls back. */
static void dh__stuck(uint64_t g, const uint64_t min_seq[2], const uint64_t min_legacy[2])
{
    static int said;
    if (said++)
        return;
    for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next)
        for (int s = 0; s < 2; s++) {
            const dh_op_t *h = v->head[s];
            if (!h || h->group > g)
                continue;
            const dh_evinst_t *i = h->kind == DH_OP_EVENT_WAIT ? h->shim_event : NULL;
            DH_WARN(SCHED, "group %llu cannot proceed: strand %d head %s seq %llu group %llu%s%s "
                    "(strand minima %llu/%llu legacy %llu/%llu)", (unsigned long long)g, s,
                    dh_op_kind_name(h->kind), (unsigned long long)h->seq,
                    (unsigned long long)h->group, i && !i->recorded && !i->batched ?
                    ", waits for a record not issued yet" : "", h->after0 ? ", after strand 0" : "",
                    (unsigned long long)min_seq[0], (unsigned long long)min_seq[1],
                    (unsigned long long)min_legacy[0], (unsigned long long)min_legacy[1]);
        }
}

/* Lock held. The strand whose op the plan wants next in this group ('a' is strand 0). */
static int dh__want(const dh_op_t *op, size_t k, int turn)
{
    const char *pat = op ? dh__plan_order(op->lgroup) : NULL;
    if (pat && k < strlen(pat))
        return pat[k] == 'b';
    return turn;
}

/* Lock held. Appends group g's ops with seq < lim: the two strands interleaved in the
 * plan's order (one op each without a plan), program order within a strand and framework
 * stream, then a barrier, then the group's frees. */
static int dh__order_group(dh_batch_t *b, uint64_t g, uint64_t lim)
{
    dh_op_t *frees = NULL, **ftail = &frees;
    int turn = 0, used[2] = {0, 0}, fenced = 0;
    /* Work a strand issued before this call (earlier groups, or an earlier part of this
     * one) must finish before the other strand's work of this group starts. */
    int prev[2] = {dh__dirty[0], dh__dirty[1]};
    size_t k = 0;
    int rc = 0;
    if (prev[0] || prev[1]) {
        /* When both strands have work here, that barrier goes before any of it: put just
         * before the other strand's first op it would also hold that op behind this
         * group's own first ops (a collective), and the pair would run one after the
         * other. */
        uint64_t m0, l0, m1, l1;
        dh__minima(g, lim, 0, &m0, &l0);
        dh__minima(g, lim, 1, &m1, &l1);
        if (m0 != UINT64_MAX && m1 != UINT64_MAX) {
            if (dh__push(b, NULL, 0))
                return -1;
            dh__s.stats.cross_strand_barriers++;
            prev[0] = prev[1] = dh__dirty[0] = dh__dirty[1] = 0;
        }
    }
    for (;;) {
        uint64_t min_seq[2], min_legacy[2];
        dh__minima(g, lim, 0, &min_seq[0], &min_legacy[0]);
        dh__minima(g, lim, 1, &min_seq[1], &min_legacy[1]);
        if (min_seq[0] == UINT64_MAX && min_seq[1] == UINT64_MAX)
            break;
        dh_vstream_t *best[2] = {NULL, NULL};
        for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next) {
            for (int s = 0; s < 2; s++) {
                dh_op_t *h = v->head[s];
                if (!h || h->group > g || h->seq >= lim || !dh__ready(h, min_seq[s], min_legacy[s]))
                    continue;
                if (h->after0 && min_seq[0] != UINT64_MAX)
                    continue; /* waits for the group's strand-0 ops (sched.c) */
                if (!best[s] || h->seq < best[s]->head[s]->seq)
                    best[s] = v;
            }
        }
        const dh_op_t *any = best[0] ? best[0]->head[0] : best[1] ? best[1]->head[1] : NULL;
        int want = dh__want(any, k, turn);
        int s = best[want] ? want : !want;
        if (!best[s]) {
            dh__stuck(g, min_seq, min_legacy);
            rc = -1;
            break;
        }
        dh_op_t *op = dh__pop(best[s], s);
        turn = !s;
        k++; /* the plan's order has a letter for every op, frees included */
        if (op->kind == DH_OP_FREE_ASYNC) {
            *ftail = op;
            ftail = &op->next;
            continue;
        }
        dh__mark_batched(op);
        if (op->pinned) {
            /* Kept in program order on its framework stream and fenced on both sides against
             * every physical stream, so it never runs beside the other strand's work. */
            if (dh__push(b, NULL, DH_FENCE) || dh__push(b, op, 0) || dh__push(b, NULL, DH_FENCE)) {
                rc = -1;
                break;
            }
            dh__s.stats.cross_strand_barriers += 2;
            prev[0] = prev[1] = dh__dirty[0] = dh__dirty[1] = 0;
            continue;
        }
        if (op->after0 && !fenced && (used[0] || prev[0])) {
            /* It depends on strand-0 work of its group on any stream (sched.c): everything
             * issued so far finishes first. All of the group's strand-0 ops are out by now. */
            if (dh__push(b, NULL, DH_FENCE)) {
                rc = -1;
                break;
            }
            dh__s.stats.cross_strand_barriers++;
            fenced = 1;
            prev[0] = prev[1] = dh__dirty[0] = dh__dirty[1] = 0;
        } else if (prev[!op->strand]) {
            if (dh__push(b, NULL, 0)) {
                rc = -1;
                break;
            }
            dh__s.stats.cross_strand_barriers++;
            prev[0] = prev[1] = dh__dirty[0] = dh__dirty[1] = 0;
        }
        if (dh__push(b, op, op->strand)) {
            rc = -1;
            break;
        }
        used[op->strand] = dh__dirty[op->strand] = 1;
    }
    if (used[0] && used[1])
        dh__s.stats.paired_groups++;
    /* Frees run on the framework streams (strand 0) once every use of their memory by
     * either strand is done. */
    if (frees && dh__dirty[1]) {
        if (dh__push(b, NULL, 0))
            rc = -1;
        dh__s.stats.cross_strand_barriers++;
        dh__dirty[0] = dh__dirty[1] = 0;
    }
    while (frees) {
        dh_op_t *op = frees;
        frees = op->next;
        op->next = NULL;
        if (dh__push(b, op, 0))
            rc = -1;
        dh__dirty[0] = 1;
    }
    return rc;
}

/* Lock held. Smallest group among held ops with seq < lim (UINT64_MAX when none). */
uint64_t dh__min_group(uint64_t lim)
{
    uint64_t g = UINT64_MAX;
    for (dh_vstream_t *v = dh__s.vstreams; v; v = v->hh.next)
        for (int k = 0; k < 2; k++)
            if (v->head[k] && v->head[k]->group < g && v->head[k]->seq < lim)
                g = v->head[k]->group;
    return g;
}

/* Lock held. Appends, group by group, every held op with seq < lim and group < gend; on
 * failure, the same ops in program order. */
void dh__order_cut(dh_batch_t *b, uint64_t lim, uint64_t gend)
{
    int rc = 0;
    for (;;) {
        uint64_t g = dh__min_group(lim);
        if (g == UINT64_MAX || g >= gend || rc)
            break;
        rc = dh__order_group(b, g, lim);
    }
    if (rc) {
        DH_WARN_ONCE(SCHED, "held operations could not be ordered as planned; issuing them "
                     "in program order");
        dh__s.stats.order_fallbacks++;
        dh__order_seq(b, gend ? gend - 1 : 0, lim);
    }
}
