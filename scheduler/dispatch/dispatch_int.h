/*
 * dispatch_int.h: what the dispatcher thread's two files share: dispatch.c (the loop,
 * replay, barriers) and order.c (choosing the order of a batch). Dispatcher thread only.
 */
#ifndef DH_DISPATCH_INT_H
#define DH_DISPATCH_INT_H

#include <stdint.h>

#include "sched_int.h"

typedef struct dh_item {
    dh_op_t *op;       /* NULL: a cross-strand barrier, or a fence (strand DH_FENCE) */
    int strand;        /* the physical stream to use */
    int rc;            /* the op's replay status, until it is retired */
} dh_item_t;

#define DH_FENCE 2     /* item strand of a fence: every stream of every strand meets */

typedef struct dh_batch {
    dh_item_t *items;
    size_t n, cap;
} dh_batch_t;

/* Strand s issued work since the last barrier (dispatch.c). */
extern int dh__dirty[2];

/* Appends an item (op NULL: a barrier, or a fence with strand DH_FENCE); -1 out of memory. */
int dh__push(dh_batch_t *b, dh_op_t *op, int strand);
/* Stress mode's seeded choice (xorshift64*). */
uint64_t dh__rand(void);

static inline int dh__is_legacy_stream(cudaStream_t s) { return s == NULL || s == cudaStreamLegacy; }
static inline int dh__is_legacy(const dh_op_t *op) { return dh__is_legacy_stream(op->stream); }

/* ---- order.c, lock held ---- */
/* Every held op with group <= gmax and seq < lim, in program order on the framework streams. */
int dh__order_seq(dh_batch_t *b, uint64_t gmax, uint64_t lim);
/* Every held op with group <= gmax, in a random legal order (stress), on strand 0. */
int dh__order_stress(dh_batch_t *b, uint64_t gmax);
/* Group by group, every held op with seq < lim and group < gend; in program order when the
 * plan's order cannot be followed. */
void dh__order_cut(dh_batch_t *b, uint64_t lim, uint64_t gend);
/* Smallest group among held ops with seq < lim (UINT64_MAX when none). */
uint64_t dh__min_group(uint64_t lim);

#endif
